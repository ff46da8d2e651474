/* The run's KV-cache dtype as a selector input (issue 27 item 6): its
 * default (the layer's own, one cache key with the spelled-out value), the
 * rules that read it (ROCm's turboquant/ultraquant runs share one KV-cache
 * layout with the packed backend; an explicit request refused for that
 * alone gives way; FA4's head-256 kernel only in an unquantized run), its
 * text form, and the struct_size rule of attn_selector_config. The expected
 * answers are vLLM 0.32.0's (tools/vllm-parity). */
#include <stdio.h>
#include <string.h>

#include "attn/abi.h"
#include "test.h"

static attn_selector_config layer(int head, attn_kv_dtype kv, attn_kv_dtype run)
{
    attn_selector_config c;
    attn_selector_config_init(&c);
    c.head_size = head;
    c.kv_cache_dtype = kv;
    c.run_kv_cache_dtype = run;
    return c;
}

static attn_platform *open_machine(const char *spec, const char *installed)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open(spec, &p));
    if (p && installed) CHECK_OK(attn_platform_set_installed(p, installed));
    return p;
}

/* The reasons of candidate name, joined with "; " ("" when valid, "-"
 * when it is no candidate). */
static const char *reasons_of(const attn_selection *s, const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "-");
    for (int i = 0; i < attn_selection_num_candidates(s); i++) {
        attn_candidate_info info;
        if (attn_selection_candidate(s, i, &info) != ATTN_OK || strcmp(info.name, name)) continue;
        size_t o = 0;
        buf[0] = '\0';
        for (int j = 0; j < info.num_reasons; j++)
            o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%s%s", j ? "; " : "",
                                  attn_selection_reason(s, i, j));
    }
    return buf;
}

static void test_default_is_the_layers(void)
{
    attn_platform *p = open_machine("rocm:gfx942", "aiter");
    attn_selector_config unset = layer(128, ATTN_KV_FP8, ATTN_KV_NONE);
    attn_selector_config same = layer(128, ATTN_KV_FP8, ATTN_KV_FP8);
    CHECK(attn_selector_config_run_kv(&unset) == ATTN_KV_FP8);
    CHECK(attn_selector_config_run_kv(NULL) == ATTN_KV_NONE);
    /* Unset and spelled out are one cache key and one recorded config. */
    attn_select_cache_clear();
    const attn_selection *a = NULL, *b = NULL;
    CHECK_OK(attn_select(p, NULL, &unset, &a));
    CHECK_OK(attn_select(p, NULL, &same, &b));
    CHECK(a && a == b);
    if (a) CHECK(attn_selection_config(a)->run_kv_cache_dtype == ATTN_KV_FP8);
    if (a) CHECK_STR(attn_selection_backend(a), "ROCM_ATTN");
    /* Another run is another key. */
    attn_selector_config tq = layer(128, ATTN_KV_FP8, ATTN_KV_TURBOQUANT_4BIT_NC);
    CHECK(!attn_selector_config_equal(&unset, &tq));
    CHECK(attn_selector_config_hash(&same) != attn_selector_config_hash(&tq));
    CHECK_OK(attn_select(p, NULL, &tq, &b));
    CHECK(b && b != a);
    attn_platform_free(p);
}

static void test_rocm_turboquant_run(void)
{
    attn_platform *p = open_machine("rocm:gfx942", "aiter");
    char r[256];
    /* The native-dtype layer of a turboquant run: the backends that share
     * no layout with TURBOQUANT (LBNHC) are refused; TRITON_ATTN takes any. */
    attn_selector_config c = layer(128, ATTN_KV_AUTO, ATTN_KV_TURBOQUANT_4BIT_NC);
    attn_selection *s = NULL;
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK_STR(attn_selection_backend(s), "TRITON_ATTN");
    CHECK_STR(reasons_of(s, "ROCM_ATTN", r, sizeof r),
              "no KV cache layout in common with TURBOQUANT");
    CHECK_STR(reasons_of(s, "ROCM_AITER_UNIFIED_ATTN", r, sizeof r),
              "no KV cache layout in common with TURBOQUANT");
    CHECK_STR(reasons_of(s, "TURBOQUANT", r, sizeof r), "kv_cache_dtype not supported");
    attn_selection_free(s);
    /* The same layer in its own run: ROCM_ATTN, as before. */
    c.run_kv_cache_dtype = ATTN_KV_AUTO;
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK_STR(attn_selection_backend(s), "ROCM_ATTN");
    attn_selection_free(s);
    /* An explicit request refused for the layout alone gives way. */
    c.run_kv_cache_dtype = ATTN_KV_TURBOQUANT_4BIT_NC;
    CHECK_OK(attn_select_uncached(p, "ROCM_ATTN", &c, &s));
    CHECK_STR(attn_selection_backend(s), "TRITON_ATTN");
    CHECK(attn_selection_num_notes(s) == 1);
    CHECK_STR(attn_selection_note(s, 0),
              "Selected backend ROCM_ATTN is incompatible with this layer "
              "(AttentionType.DECODER) of the turboquant run; using the auto-selected per-layer "
              "backend. Reason: ['no KV cache layout in common with TURBOQUANT']");
    attn_selection_free(s);
    /* Any other refusal stays an error. */
    c.block_size = 24;
    CHECK_STATUS(attn_select_uncached(p, "ROCM_ATTN", &c, &s), ATTN_BACKEND_INVALID);
    CHECK_STR(attn_select_error_name(attn_selection_error(s)), "explicit-invalid");
    attn_selection_free(s);
    /* A quantized run that is no packed one has no layout rule. */
    c = layer(128, ATTN_KV_AUTO, ATTN_KV_FP8);
    CHECK_OK(attn_select_uncached(p, "ROCM_ATTN", &c, &s));
    CHECK_STR(attn_selection_backend(s), "ROCM_ATTN");
    CHECK(attn_selection_num_notes(s) == 0);
    attn_selection_free(s);
    attn_platform_free(p);
}

static void test_rocm_ultraquant_run(void)
{
    attn_platform *p = open_machine("rocm:gfx942", "aiter");
    char r[256];
    attn_selector_config c = layer(128, ATTN_KV_AUTO, ATTN_KV_ULTRAQUANT_4BIT);
    attn_selection *s = NULL;
    /* vLLM's automatic walk does not pass the ultraquant flag: no layout
     * rule there. */
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK_STR(attn_selection_backend(s), "ROCM_ATTN");
    CHECK_STR(reasons_of(s, "ROCM_ATTN", r, sizeof r), "");
    attn_selection_free(s);
    /* An explicit request checks it and gives way to that walk. */
    CHECK_OK(attn_select_uncached(p, "ROCM_ATTN", &c, &s));
    CHECK_STR(attn_selection_backend(s), "ROCM_ATTN");
    CHECK(attn_selection_num_notes(s) == 1);
    CHECK_STR(attn_selection_note(s, 0),
              "Selected backend ROCM_ATTN is incompatible with this layer "
              "(AttentionType.DECODER) of the ultraquant run; using the auto-selected per-layer "
              "backend. Reason: ['no KV cache layout in common with ULTRAQUANT']");
    attn_selection_free(s);
    /* FLEX_ATTENTION reads LBNHC, as ULTRAQUANT does. */
    CHECK_OK(attn_select_uncached(p, "FLEX_ATTENTION", &c, &s));
    CHECK_STR(attn_selection_backend(s), "FLEX_ATTENTION");
    CHECK(attn_selection_num_notes(s) == 0);
    attn_selection_free(s);
    attn_platform_free(p);
}

/* FA4's head-256 kernel on 10.x does not take a quantized run: FLASH_ATTN
 * falls back to FA2, which has no FP8 KV cache. */
static void test_fa4_hd256(void)
{
    attn_platform *p = open_machine("cuda:10.0", "fa2,fa3,fa4");
    attn_selector_config c = layer(256, ATTN_KV_FP8, ATTN_KV_AUTO);
    attn_selection *s = NULL;
    CHECK_OK(attn_select_uncached(p, "FLASH_ATTN", &c, &s));
    CHECK_STR(attn_selection_backend(s), "FLASH_ATTN");
    attn_selection_free(s);
    c.run_kv_cache_dtype = ATTN_KV_FP8;
    CHECK_STATUS(attn_select_uncached(p, "FLASH_ATTN", &c, &s), ATTN_BACKEND_INVALID);
    CHECK_STR(attn_selection_message(s),
              "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this "
              "configuration. Reason: ['FP8 KV cache requires FA3 on SM90, FA4 with "
              "head_size=512 on SM90, or FA4 on SM100']");
    attn_selection_free(s);
    attn_platform_free(p);
}

static void test_text(void)
{
    attn_selector_config c;
    attn_selector_config_init(&c);
    CHECK(c.run_kv_cache_dtype == ATTN_KV_NONE);
    CHECK_OK(attn_selector_config_set(&c, "run_kv_cache_dtype", "turboquant_k8v4"));
    CHECK(c.run_kv_cache_dtype == ATTN_KV_TURBOQUANT_K8V4);
    /* No CacheDType: CacheConfig's words, cfg unchanged. */
    CHECK_STATUS(attn_selector_config_set(&c, "run_kv_cache_dtype", "FP8"), ATTN_INVALID_ARGUMENT);
    CHECK(strstr(attn_last_error(), "Input should be 'auto', 'float16', 'bfloat16', 'fp8', ") &&
          strstr(attn_last_error(), "'nvfp4' or 'nvfp4_4over6'"));
    CHECK(c.run_kv_cache_dtype == ATTN_KV_TURBOQUANT_K8V4);
    CHECK_OK(attn_selector_config_set(&c, "run_kv_cache_dtype", NULL));
    CHECK(c.run_kv_cache_dtype == ATTN_KV_NONE);
    /* An out-of-range value set by hand is an invalid config. */
    attn_platform *p = open_machine("cuda:9.0", NULL);
    c.head_size = 128;
    c.run_kv_cache_dtype = (attn_kv_dtype)999;
    attn_selection *s = NULL;
    CHECK_STATUS(attn_select_uncached(p, NULL, &c, &s), ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_select_error_name(attn_selection_error(s)), "invalid-config");
    attn_selection_free(s);
    attn_platform_free(p);
}

/* A struct_size libattn does not accept changes nothing and says why. */
static void test_struct_size(void)
{
    attn_platform *p = open_machine("cuda:9.0", NULL);
    attn_selector_config c = layer(128, ATTN_KV_AUTO, ATTN_KV_NONE), ok = c;
    char buf[64] = "x";
    for (uint32_t size = 0; size <= 1; size++) {
        c.struct_size = size ? (uint32_t)sizeof c + 8 : 0;
        attn_selection *s = (attn_selection *)&buf; /* must come back NULL */
        CHECK_STATUS(attn_select_uncached(p, NULL, &c, &s), ATTN_ABI_MISMATCH);
        CHECK(s == NULL);
        CHECK(strstr(attn_last_error(), "struct_size") != NULL);
        const attn_selection *cs = s;
        CHECK_STATUS(attn_select(p, NULL, &c, &cs), ATTN_ABI_MISMATCH);
        CHECK(cs == NULL);
        CHECK(!attn_selector_config_equal(&c, &c) && !attn_selector_config_equal(&c, &ok));
        CHECK(attn_selector_config_hash(&c) == 0);
        CHECK(attn_selector_config_repr(&c, buf, sizeof buf) == -1 && buf[0] == '\0');
        CHECK(attn_platform_priorities(p, &c, NULL, 0) == 0);
        CHECK(attn_selector_config_run_kv(&c) == ATTN_KV_NONE);
    }
    CHECK(attn_platform_priorities(p, &ok, NULL, 0) > 0);
    attn_platform_free(p);
}

/* The layout facts the rule compares, by vLLM's names. */
static void test_layout_facts(void)
{
    CHECK_STR(attn_kv_cache_layout_name(ATTN_KVL_LBNHC), "LBNHC");
    CHECK_STR(attn_kv_cache_layout_name(ATTN_KVL_BHLNC), "BHLNC");
    CHECK(attn_kv_cache_layout_name(ATTN_KVL_COUNT) == NULL);
    const attn_backend *tq = attn_backend_catalog_builtin("TURBOQUANT");
    const attn_backend *rocm = attn_backend_catalog_builtin("ROCM_ATTN");
    CHECK(tq && tq->desc && rocm && rocm->desc);
    if (tq && tq->desc) CHECK(tq->desc->kv_cache_layouts == ATTN_KVL_BIT(ATTN_KVL_LBNHC));
    if (rocm && rocm->desc)
        CHECK(rocm->desc->kv_cache_layouts ==
              (ATTN_KVL_BIT(ATTN_KVL_LBHNC) | ATTN_KVL_BIT(ATTN_KVL_LHBNC)));
}

int main(void)
{
    test_layout_facts();
    test_default_is_the_layers();
    test_rocm_turboquant_run();
    test_rocm_ultraquant_run();
    test_fa4_hd256();
    test_text();
    test_struct_size();
    return attn_test_finish("test_select_run_kv");
}
