/* The selector's public contract beyond the case file: exact message texts,
 * name parsing ("auto" in any case, case-insensitive names, unknown names),
 * invalid configurations, the effective config (machine batch_invariant
 * OR-ed in), candidates kept on success, the precluded warning, CPU and XPU
 * specifics, the cache (hits return the same object; keys include the
 * machine state and the registry), JSON and --explain output, per-kind
 * overrides, concurrent first use, and NULL arguments. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/json.h"

static attn_selector_config cfg(int head)
{
    attn_selector_config c;
    attn_selector_config_init(&c);
    c.head_size = head;
    return c;
}

static attn_platform *open_machine(const char *spec, const char *installed)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open(spec, &p));
    if (p && installed) CHECK_OK(attn_platform_set_installed(p, installed));
    return p;
}

static void test_messages(void)
{
    attn_platform *p = open_machine("cuda:9.0", "fa2,fa3,fa4");
    attn_selector_config c = cfg(128);
    c.block_size = 1;
    attn_selection *s = NULL;
    CHECK_STATUS(attn_select_uncached(p, NULL, &c, &s), ATTN_NO_VALID_BACKEND);
    CHECK_STR(attn_selection_message(s),
              "No valid attention backend found for cuda with AttentionSelectorConfig(head_size="
              "128, dtype=torch.bfloat16, kv_cache_dtype=auto, block_size=1, use_mla=False, "
              "has_sink=False, use_sparse=False, use_mm_prefix=False, "
              "use_per_head_quant_scales=False, attn_type=AttentionType.DECODER, "
              "has_sliding_window=False, use_non_causal=False, use_batch_invariant=False, "
              "use_kv_connector=False, use_adaptive_verification=False, use_pcp=False, "
              "use_dcp=False, use_rswa=False). "
              "Reasons: {FLASH_ATTN: [block_size not supported], FLASHINFER: "
              "[ModuleNotFoundError: No module named 'flashinfer'], TRITON_ATTN: [block_size not "
              "supported], FLEX_ATTENTION: [block_size "
              "not supported], TURBOQUANT: [kv_cache_dtype not supported, block_size not "
              "supported]}.");
    CHECK_STR(attn_last_error(), attn_selection_message(s));
    CHECK(attn_selection_error(s) == ATTN_SELECT_NO_VALID);
    CHECK_STR(attn_select_error_name(ATTN_SELECT_NO_VALID), "no-valid");
    CHECK(attn_selection_backend(s) == NULL && attn_selection_locator(s) == NULL);
    CHECK(attn_selection_num_candidates(s) == 5);
    attn_selection_free(s);

    /* Explicit: a Python list repr of the reasons; no fallback. */
    c = cfg(128);
    c.block_size = 24;
    CHECK_STATUS(attn_select_uncached(p, "FLASH_ATTN", &c, &s), ATTN_BACKEND_INVALID);
    CHECK_STR(attn_selection_message(s),
              "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this "
              "configuration. Reason: ['block_size not supported']");
    CHECK_STR(attn_select_error_name(attn_selection_error(s)), "explicit-invalid");
    CHECK(attn_selection_num_candidates(s) == 1);
    attn_candidate_info info;
    CHECK_OK(attn_selection_candidate(s, 0, &info));
    CHECK(info.priority == -1 && !info.valid && info.num_reasons == 1);
    CHECK_STR(attn_selection_requested(s), "FLASH_ATTN");
    attn_selection_free(s);

    /* vLLM prints an import failure bare inside the brackets. */
    CHECK_STATUS(attn_select_uncached(p, "flashinfer", &c, &s), ATTN_BACKEND_INVALID);
    CHECK_STR(attn_selection_message(s),
              "Selected backend AttentionBackendEnum.FLASHINFER is not valid for this "
              "configuration. Reason: [ModuleNotFoundError: No module named 'flashinfer']");
    attn_selection_free(s);

    /* vLLM's wheel does not ship NO_ATTENTION's module: its reason is the
     * Python import's; libattn's own account is the detail. */
    CHECK_STATUS(attn_select_uncached(p, "NO_ATTENTION", &c, &s), ATTN_BACKEND_INVALID);
    CHECK_STR(attn_selection_message(s),
              "Selected backend AttentionBackendEnum.NO_ATTENTION is not valid for this "
              "configuration. Reason: [ModuleNotFoundError: No module named "
              "'vllm.v1.attention.backends.no_attention']");
    attn_selection_free(s);

    CHECK_STATUS(attn_select_uncached(p, "torch_sdpa", &c, &s), ATTN_NOT_REGISTERED);
    CHECK_STR(attn_selection_message(s), "Backend TORCH_SDPA must be registered before use. "
                                         "Use register_backend(Backend.TORCH_SDPA, "
                                         "'your.module.YourClass')");
    attn_selection_free(s);
    attn_platform_free(p);
}

static void test_names(void)
{
    attn_platform *p = open_machine("h100", NULL);
    attn_selector_config c = cfg(128);
    const char *autos[] = {"auto", "AUTO", "Auto"};
    for (int i = 0; i < 3; i++) {
        attn_selection *s = NULL;
        CHECK_OK(attn_select_uncached(p, autos[i], &c, &s));
        CHECK(attn_selection_requested(s) == NULL);
        CHECK_STR(attn_selection_backend(s), "FLASH_ATTN");
        attn_selection_free(s);
    }
    attn_selection *s = NULL;
    CHECK_OK(attn_select_uncached(p, "triton_attn", &c, &s));
    CHECK_STR(attn_selection_backend(s), "TRITON_ATTN");
    CHECK_STR(attn_selection_requested(s), "TRITON_ATTN");
    attn_selection_free(s);

    CHECK_STATUS(attn_select_uncached(p, "foo", &c, &s), ATTN_UNKNOWN_BACKEND);
    char want[4096];
    snprintf(want, sizeof want, "Unknown attention backend: 'FOO'. Valid options are: %s",
             attn_registry_valid_names());
    CHECK_STR(attn_selection_message(s), want);
    CHECK_STR(attn_select_error_name(attn_selection_error(s)), "unknown-name");
    CHECK(attn_selection_num_candidates(s) == 0);
    attn_selection_free(s);
    CHECK_STATUS(attn_select_uncached(p, "flash-attn", &c, &s), ATTN_UNKNOWN_BACKEND);
    CHECK_CONTAINS(attn_selection_message(s), "Unknown attention backend: 'FLASH-ATTN'.");
    attn_selection_free(s);
    attn_platform_free(p);
}

static void test_invalid_config(void)
{
    attn_platform *p = open_machine("h100", NULL);
    attn_selector_config c = cfg(0);
    attn_selection *s = NULL;
    CHECK_STATUS(attn_select_uncached(p, NULL, &c, &s), ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_select_error_name(attn_selection_error(s)), "invalid-config");
    attn_selection_free(s);
    c = cfg(128);
    c.kv_cache_dtype = (attn_kv_dtype)99;
    CHECK_STATUS(attn_select_uncached(p, NULL, &c, &s), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_selection_message(s), "Invalid kv_cache_dtype: 99. Valid values are: "
                                              "('auto', 'float16', 'bfloat16', 'fp8',");
    attn_selection_free(s);
    c = cfg(128);
    c.dtype = (attn_dtype)7;
    CHECK_STATUS(attn_select_uncached(p, NULL, &c, &s), ATTN_INVALID_ARGUMENT);
    attn_selection_free(s);
    c = cfg(128);
    c.block_size = -16;
    CHECK_STATUS(attn_select_uncached(p, NULL, &c, &s), ATTN_INVALID_ARGUMENT);
    attn_selection_free(s);
    /* kv None is valid input (every backend but TURBOQUANT accepts it). */
    c = cfg(128);
    c.kv_cache_dtype = ATTN_KV_NONE;
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK_STR(attn_selection_reason(s, 4, 0), "kv_cache_dtype not supported");
    attn_selection_free(s);
    attn_platform_free(p);
}

static void test_effective_config_and_candidates(void)
{
    attn_platform *p = open_machine("b200", "fa2,fa3,fa4,flashinfer,flashinfer_cubin");
    CHECK_OK(attn_platform_set_setting(p, "batch_invariant=true"));
    attn_selector_config c = cfg(128);
    attn_selection *s = NULL;
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK(attn_selection_config(s)->use_batch_invariant);
    CHECK(!c.use_batch_invariant); /* the caller's config is untouched */
    CHECK_STR(attn_selection_backend(s), "FLASH_ATTN");
    /* Candidates keep their reasons on success. */
    attn_candidate_info info;
    CHECK_OK(attn_selection_candidate(s, 0, &info));
    CHECK_STR(info.name, "FLASHINFER");
    CHECK(info.priority == 0 && !info.valid && info.num_reasons == 1);
    CHECK_STR(attn_selection_reason(s, 0, 0), "batch invariance not supported");
    CHECK_OK(attn_selection_candidate(s, 1, &info));
    CHECK(info.priority == 1 && info.valid && info.num_reasons == 0);
    CHECK_STATUS(attn_selection_candidate(s, 9, &info), ATTN_OUT_OF_RANGE);
    CHECK(attn_selection_reason(s, 0, 1) == NULL);
    CHECK(attn_selection_reason(s, -1, 0) == NULL);
    CHECK_STR(attn_selection_locator(s), "libattn_cuda.so:attn_backend_flash_attn");
    CHECK(attn_selection_backend_object(s) && attn_selection_backend_object(s)->kernel == NULL);
    CHECK(attn_selection_platform(s) == p);
    attn_selection_free(s);
    attn_platform_free(p);
}

static void test_precluded(void)
{
    attn_platform *p = open_machine("h100", "fa2,fa3,fa4,flashmla");
    attn_selector_config c = cfg(576);
    c.use_mla = true;
    c.num_heads = 128;
    c.kv_cache_dtype = ATTN_KV_FP8;
    c.block_size = 16;
    attn_selection *s = NULL;
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK_STR(attn_selection_backend(s), "TRITON_MLA");
    CHECK(attn_selection_num_warnings(s) == 1);
    CHECK_STR(attn_selection_warning(s, 0),
              "--block-size 16 precluded higher-priority backend(s) FLASHMLA. Using TRITON_MLA "
              "instead, which may result in reduced performance. Consider removing --block-size "
              "to auto-select the optimal block size.");
    CHECK(attn_selection_warning(s, 1) == NULL);
    attn_selection_free(s);
    /* No --block-size, no warning; ROCm never warns. */
    c.block_size = 0;
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK_STR(attn_selection_backend(s), "FLASHMLA");
    CHECK(attn_selection_num_warnings(s) == 0);
    attn_selection_free(s);
    attn_platform_free(p);
    p = open_machine("rocm:gfx942", "aiter");
    c = cfg(72);
    c.block_size = 32;
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK_STR(attn_selection_backend(s), "ROCM_AITER_UNIFIED_ATTN");
    CHECK(attn_selection_num_warnings(s) == 0);
    attn_selection_free(s);
    attn_platform_free(p);
}

static void test_cpu_xpu(void)
{
    attn_platform *p = open_machine("cpu", NULL);
    attn_selector_config c = cfg(128);
    attn_selection *s = NULL;
    attn_status st = attn_select_uncached(p, NULL, &c, &s);
    /* Whatever resolves here: CPU_ATTN when built, else REFERENCE, else
     * nothing — and a backend that does not resolve is never chosen. */
    const attn_backend *b = NULL;
    bool cpu_attn = attn_backend_resolve(p, "CPU_ATTN", &b) == ATTN_OK;
    bool reference = attn_backend_resolve(p, "REFERENCE", &b) == ATTN_OK;
    if (st == ATTN_OK) {
        const char *name = attn_selection_backend(s);
        CHECK(!strcmp(name, "CPU_ATTN") ? cpu_attn : reference);
        CHECK_STR(attn_selection_note(s, attn_selection_num_notes(s) - 1),
                  "block size 128 (the CPU platform default when --block-size is not given)");
    } else {
        CHECK_CONTAINS(attn_selection_message(s), "No valid attention backend found for cpu with");
        if (!cpu_attn)
            CHECK_CONTAINS(attn_selection_message(s), "CPU_ATTN: [ImportError: libattn was built "
                                                      "without the CPU_ATTN kernels]");
    }
    attn_selection_free(s);
    /* Explicit GPU backends on the simulated CPU: descriptor, no capability. */
    CHECK_STATUS(attn_select_uncached(p, "FLASH_ATTN", &c, &s), ATTN_BACKEND_INVALID);
    CHECK_STR(attn_selection_message(s),
              "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this "
              "configuration. Reason: ['compute capability not "
              "supported']");
    attn_selection_free(s);
    attn_platform_free(p);

    p = open_machine("xpu", NULL);
    c = cfg(128);
    c.dtype = ATTN_DTYPE_FP32;
    CHECK_OK(attn_select_uncached(p, "FLASH_ATTN", &c, &s));
    CHECK_STR(attn_selection_backend(s), "TRITON_ATTN");
    CHECK_STR(attn_selection_warning(s, 0), "Flash Attention on XPU does not support float32 "
                                            "dtype. Falling back to Triton Attention backend.");
    attn_selection_free(s);
    c = cfg(128);
    CHECK_STATUS(attn_select_uncached(p, "FLEX_ATTENTION", &c, &s), ATTN_BACKEND_INVALID);
    CHECK_STR(attn_selection_message(s), "Invalid attention backend for xpu, with use_mla: False");
    attn_selection_free(s);
    /* XPU does not validate: head 7 is accepted. */
    c = cfg(7);
    CHECK_OK(attn_select_uncached(p, NULL, &c, &s));
    CHECK_STR(attn_selection_backend(s), "FLASH_ATTN");
    attn_selection_free(s);
    attn_platform_free(p);
}

static void test_cache(void)
{
    attn_platform *p = open_machine("h100", NULL);
    attn_platform *q = open_machine("h100", NULL);
    attn_selector_config c = cfg(128);
    const attn_selection *a = NULL, *b = NULL;
    CHECK_OK(attn_select(p, NULL, &c, &a));
    CHECK_OK(attn_select(p, "auto", &c, &b));
    CHECK(a == b);
    CHECK_OK(attn_select(p, NULL, &c, &b));
    CHECK(a == b);
    CHECK_OK(attn_select(q, NULL, &c, &b)); /* another machine object */
    CHECK(a != b);
    c.num_heads = 32; /* num_heads is part of the key */
    CHECK_OK(attn_select(p, NULL, &c, &b));
    CHECK(a != b);
    c.num_heads = 0;
    const attn_selection *e1 = NULL, *e2 = NULL;
    CHECK_STATUS(attn_select(p, "bogus", &c, &e1), ATTN_UNKNOWN_BACKEND);
    CHECK_STATUS(attn_select(p, "BOGUS", &c, &e2), ATTN_UNKNOWN_BACKEND);
    CHECK(e1 && e1 == e2); /* failures are cached too */
    CHECK_CONTAINS(attn_last_error(), "Unknown attention backend: 'BOGUS'.");
    /* Changing the machine's state is a new key. */
    CHECK_OK(attn_platform_set_setting(p, "batch_invariant=true"));
    CHECK_OK(attn_select(p, NULL, &c, &b));
    CHECK(a != b && attn_selection_config(b)->use_batch_invariant);
    CHECK_OK(attn_platform_set_setting(p, "batch_invariant=false"));
    CHECK_OK(attn_select(p, NULL, &c, &b));
    CHECK(a == b);
    /* Many keys: the table grows and old entries stay. */
    for (int h = 8; h <= 8 * 400; h += 8) {
        c.head_size = h;
        const attn_selection *x = NULL;
        attn_select(p, NULL, &c, &x);
        CHECK(x != NULL);
    }
    c.head_size = 128;
    CHECK_OK(attn_select(p, NULL, &c, &b));
    CHECK(a == b);
    /* After a clear: a new object; the old one stays readable. */
    attn_select_cache_clear();
    CHECK_OK(attn_select(p, NULL, &c, &b));
    CHECK(a != b);
    CHECK_STR(attn_selection_backend(a), "FLASH_ATTN");
    attn_platform_free(p);
    attn_platform_free(q);
}

static void test_json_explain(void)
{
    attn_platform *p = open_machine("h100", "fa2,fa3,fa4");
    attn_selector_config c = cfg(128);
    c.block_size = 16;
    const attn_selection *s = NULL;
    CHECK_OK(attn_select(p, NULL, &c, &s));
    char *text = NULL;
    CHECK_OK(attn_selection_to_json(s, &text));
    attn__json *j = NULL;
    char err[128];
    CHECK_OK(attn__json_parse(text, strlen(text), &j, err, sizeof err));
    if (j) {
        CHECK_STR(attn__json_string(attn__json_get(j, "selected")), "FLASH_ATTN");
        CHECK_STR(attn__json_string(attn__json_get(j, "machine")), "h100");
        CHECK(attn__json_type_of(attn__json_get(j, "error")) == ATTN_JSON_NULL);
        CHECK(attn__json_len(attn__json_get(j, "warnings")) == 0);
        const attn__json *cands = attn__json_get(j, "candidates");
        CHECK(attn__json_len(cands) == 5);
        const attn__json *c1 = attn__json_at(cands, 1);
        CHECK_STR(attn__json_string(attn__json_get(c1, "name")), "FLASHINFER");
        long long prio = -5;
        CHECK(attn__json_is_int(attn__json_get(c1, "priority"), &prio) && prio == 1);
        CHECK(!attn__json_bool(attn__json_get(c1, "valid")));
        CHECK_STR(attn__json_string(attn__json_at(attn__json_get(c1, "reasons"), 0)),
                  "ModuleNotFoundError: No module named 'flashinfer'");
        /* libattn's own account of the failed import, beside vLLM's text */
        CHECK_CONTAINS(attn__json_string(attn__json_get(c1, "detail")),
                       "component flashinfer is not installed on machine");
        const attn__json *cj = attn__json_get(j, "config");
        long long bs = 0;
        CHECK(attn__json_is_int(attn__json_get(cj, "block_size"), &bs) && bs == 16);
        CHECK(attn__json_type_of(attn__json_get(cj, "num_heads")) == ATTN_JSON_NULL);
        attn__json_free(j);
    }
    free(text);
    CHECK_OK(attn_selection_explain(s, &text));
    CHECK_CONTAINS(text, "\u2713");
    CHECK_CONTAINS(text, "\u2717");
    CHECK_CONTAINS(text, "FLASHINFER");
    CHECK_CONTAINS(text, "selected:  FLASH_ATTN");
    free(text);

    c.block_size = 1;
    attn_select(p, NULL, &c, &s);
    CHECK_OK(attn_selection_to_json(s, &text));
    CHECK_OK(attn__json_parse(text, strlen(text), &j, err, sizeof err));
    if (j) {
        CHECK(attn__json_type_of(attn__json_get(j, "selected")) == ATTN_JSON_NULL);
        const attn__json *e = attn__json_get(j, "error");
        CHECK_STR(attn__json_string(attn__json_get(e, "kind")), "no-valid");
        CHECK_CONTAINS(attn__json_string(attn__json_get(e, "message")),
                       "No valid attention backend found for cuda");
        attn__json_free(j);
    }
    free(text);
    CHECK_STATUS(attn_selection_to_json(NULL, &text), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_selection_explain(s, NULL), ATTN_NULL_ARGUMENT);
    attn_platform_free(p);
}

static void test_kinds(void)
{
    attn_selector_config c = cfg(128);
    CHECK(attn_kv_kind_of(&c) == ATTN_KIND_FULL);
    c.has_sliding_window = true;
    CHECK(attn_kv_kind_of(&c) == ATTN_KIND_SLIDING_WINDOW);
    c.use_mla = true;
    CHECK(attn_kv_kind_of(&c) == ATTN_KIND_SLIDING_WINDOW_MLA);
    c.has_sliding_window = false;
    CHECK(attn_kv_kind_of(&c) == ATTN_KIND_MLA);
    c.use_mla = false;
    c.has_sink = true; /* sinks do not change the kind */
    CHECK(attn_kv_kind_of(&c) == ATTN_KIND_FULL);
    c.attn_type = ATTN_TYPE_ENCODER_ONLY;
    CHECK(attn_kv_kind_of(&c) == ATTN_KIND_ENCODER_ONLY);
    c.attn_type = ATTN_TYPE_ENCODER_DECODER;
    CHECK(attn_kv_kind_of(&c) == ATTN_KIND_CROSS);
    c.attn_type = ATTN_TYPE_ENCODER;
    CHECK(attn_kv_kind_of(&c) == ATTN_KIND_FULL);
    const char *names[] = {"full_attention",     "sliding_window",         "mla_attention",
                           "sliding_window_mla", "encoder_only_attention", "cross_attention"};
    for (int k = 0; k < ATTN_KIND_COUNT; k++) {
        CHECK_STR(attn_kv_kind_name((attn_kv_kind)k), names[k]);
        attn_kv_kind got = ATTN_KIND_COUNT;
        CHECK_OK(attn_kv_kind_parse(names[k], &got));
        CHECK(got == (attn_kv_kind)k);
    }
    attn_kv_kind got;
    CHECK_STATUS(attn_kv_kind_parse("full", &got), ATTN_INVALID_ARGUMENT);
    CHECK_STR(attn_last_error(),
              "unknown KV-cache spec kind 'full' (expected full_attention, sliding_window, "
              "mla_attention, sliding_window_mla, encoder_only_attention or cross_attention)");
    CHECK_STATUS(attn_kv_kind_parse(NULL, &got), ATTN_NULL_ARGUMENT);
    const char *per_kind[ATTN_KIND_COUNT] = {NULL};
    per_kind[ATTN_KIND_SLIDING_WINDOW] = "TRITON_ATTN";
    c = cfg(128);
    CHECK_STR(attn_requested_for(&c, "FLASH_ATTN", per_kind), "FLASH_ATTN");
    CHECK(attn_requested_for(&c, NULL, per_kind) == NULL);
    c.has_sliding_window = true;
    CHECK_STR(attn_requested_for(&c, "FLASH_ATTN", per_kind), "TRITON_ATTN");
    CHECK_STR(attn_requested_for(&c, "FLASH_ATTN", NULL), "FLASH_ATTN");
}

static const attn_platform *shared_p;
static const attn_selection *thread_result[16];

static void *select_thread(void *arg)
{
    int i = (int)(intptr_t)arg;
    attn_selector_config c = cfg(96);
    attn_select(shared_p, NULL, &c, &thread_result[i]);
    return NULL;
}

static void test_threads(void)
{
    attn_platform *p = open_machine("a100", NULL);
    shared_p = p;
    pthread_t th[16];
    for (int i = 0; i < 16; i++)
        pthread_create(&th[i], NULL, select_thread, (void *)(intptr_t)i);
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 16; i++)
        CHECK(thread_result[i] && thread_result[i] == thread_result[0]);
    CHECK_STR(attn_selection_backend(thread_result[0]), "FLASH_ATTN");
    attn_platform_free(p);
}

static void test_null_args(void)
{
    attn_platform *p = open_machine("h100", NULL);
    attn_selector_config c = cfg(128);
    const attn_selection *s = (const attn_selection *)&c;
    attn_selection *u = (attn_selection *)&c;
    CHECK_STATUS(attn_select(NULL, NULL, &c, &s), ATTN_NULL_ARGUMENT);
    CHECK(s == NULL);
    CHECK_STATUS(attn_select(p, NULL, NULL, &s), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_select(p, NULL, &c, NULL), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_select_uncached(NULL, NULL, &c, &u), ATTN_NULL_ARGUMENT);
    CHECK(u == NULL);
    CHECK_STATUS(attn_select_uncached(p, NULL, NULL, &u), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_select_uncached(p, NULL, &c, NULL), ATTN_NULL_ARGUMENT);
    attn_selection_free(NULL);
    CHECK(attn_selection_backend(NULL) == NULL);
    CHECK(attn_selection_num_candidates(NULL) == 0);
    CHECK(attn_selection_status(NULL) == ATTN_NULL_ARGUMENT);
    CHECK(attn_selection_message(NULL) == NULL);
    CHECK(attn_selection_warning(NULL, 0) == NULL);
    CHECK(attn_selection_note(NULL, 0) == NULL);
    attn_candidate_info info;
    CHECK_STATUS(attn_selection_candidate(NULL, 0, &info), ATTN_NULL_ARGUMENT);
    char longname[300];
    memset(longname, 'A', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_STATUS(attn_select(p, longname, &c, &s), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_select_uncached(p, longname, &c, &u), ATTN_UNKNOWN_BACKEND);
    attn_selection_free(u);
    attn_platform_free(p);
}

int main(void)
{
    test_messages();
    test_names();
    test_invalid_config();
    test_effective_config_and_candidates();
    test_precluded();
    test_cpu_xpu();
    test_cache();
    test_json_explain();
    test_kinds();
    test_threads();
    test_null_args();
    return attn_test_finish("test_select_api");
}
