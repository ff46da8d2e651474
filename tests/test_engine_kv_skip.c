/* A model whose layers differ in KV dtype (vLLM's
 * --kv-cache-dtype-skip-layers): the skipped groups keep the model's dtype
 * in their cache and selection, every group's selection carries the run's
 * dtype (run_kv_cache_dtype), the engine serves both caches, and a list it
 * cannot apply (part of a group, a bad entry) is refused with its reason. */
#include <string.h>

#include "attn/engine.h"
#include "engine_harness.h"
#include "test.h"

static void test_engine_serves_both(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_load("gpt-oss-20b", &m));
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.num_blocks = 16;
    cfg.max_num_seqs = 8;
    cfg.max_num_batched_tokens = 96;
    cfg.check_metadata = true;
    cfg.kv_cache_dtype = ATTN_KV_FP8;
    cfg.kv_cache_dtype_skip_layers = "sliding_window";
    attn_engine *e = NULL;
    attn_status st = test_engine_create(&cfg, 7, true, &e);
    CHECK_MSG(st == ATTN_OK, "%s", e ? attn_engine_error(e) : attn_last_error());
    if (st != ATTN_OK) goto out;
    CHECK(attn_engine_num_groups(e) == 2);
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_group_info gi;
        CHECK_OK(attn_engine_group_info_get(e, g, &gi));
        const attn_selector_config *sc = attn_selection_config(gi.selection);
        bool window = gi.kind == ATTN_KIND_SLIDING_WINDOW;
        CHECK(sc->run_kv_cache_dtype == ATTN_KV_FP8);
        CHECK(sc->kv_cache_dtype == (window ? ATTN_KV_AUTO : ATTN_KV_FP8));
        CHECK_MSG(gi.kv_elem == (window ? ATTN_ELEM_BF16 : ATTN_ELEM_FP8_E4M3), "group %d: %d", g,
                  (int)gi.kv_elem);
        CHECK_MSG(gi.kernel_mode != ATTN_KERNEL_NONE, "group %d: %s", g,
                  gi.kernel_note ? gi.kernel_note : "");
    }
    for (int i = 0; i < 2; i++) {
        attn_request_desc r = {.prompt_len = 40 + 9 * i, .output_len = 3};
        CHECK_OK(attn_engine_add_request(e, &r, NULL));
    }
    attn_engine_counts c;
    int steps = 0;
    do {
        attn_engine_step_stats ss;
        attn__harness_stats hst;
        CHECK_OK(test_engine_step(e, &ss, &hst));
        CHECK(hst.output_finite);
        CHECK_MSG(hst.max_abs_diff <= 5e-2, "step %d: max diff %g", steps, hst.max_abs_diff);
        attn_engine_get_counts(e, &c);
    } while (c.finished < 2 && ++steps < 50);
    CHECK(c.finished == 2);
out:
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

static attn_status select_group(const attn_platform *p, const attn_model *m, int g,
                                const char *skip, attn_kv_dtype kv, attn_group_choice *ch)
{
    attn_group_launch l = {.kv_cache_dtype = kv, .kv_cache_dtype_skip_layers = skip};
    return attn_engine_select_group(p, m, g, &l, ch);
}

static void test_lists(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_load("gpt-oss-20b", &m));
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    int window = -1;
    for (int g = 0; g < attn_model_num_groups(m); g++)
        if (attn_model_group_spec(m, g)->sliding_window > 0) window = g;
    CHECK(window >= 0);
    if (window < 0) goto out;
    /* The window group's layers by index are the same as "sliding_window". */
    const int *layers = NULL;
    int n = attn_model_group_layers(m, window, &layers);
    char list[256] = "";
    size_t o = 0;
    for (int i = 0; i < n && o < sizeof list; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", i ? "," : "", layers[i]);
    attn_group_choice a, b;
    CHECK_OK(select_group(p, m, window, "sliding_window", ATTN_KV_FP8, &a));
    CHECK_OK(select_group(p, m, window, list, ATTN_KV_FP8, &b));
    CHECK(attn_selector_config_equal(&a.config, &b.config));
    CHECK(a.config.kv_cache_dtype == ATTN_KV_AUTO && a.config.run_kv_cache_dtype == ATTN_KV_FP8);
    /* Part of a group: libattn keeps one KV dtype per group. */
    char one[16];
    snprintf(one, sizeof one, "%d", layers[0]);
    CHECK_STATUS(select_group(p, m, window, one, ATTN_KV_FP8, &a), ATTN_UNSUPPORTED);
    CHECK(strstr(attn_last_error(), "libattn keeps one KV dtype per group") != NULL);
    /* Not a layer of this model, or no entry at all. */
    CHECK_STATUS(select_group(p, m, window, "24", ATTN_KV_FP8, &a), ATTN_INVALID_ARGUMENT);
    CHECK(strstr(attn_last_error(), "'24' is neither sliding_window nor a layer index") != NULL);
    CHECK_STATUS(select_group(p, m, window, "sliding_window,,1", ATTN_KV_FP8, &a),
                 ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(select_group(p, m, window, "-1", ATTN_KV_FP8, &a), ATTN_INVALID_ARGUMENT);
    /* No list: the run's dtype is the layer's. */
    CHECK_OK(select_group(p, m, window, NULL, ATTN_KV_FP8, &a));
    CHECK(a.config.kv_cache_dtype == ATTN_KV_FP8 && a.config.run_kv_cache_dtype == ATTN_KV_FP8);
out:
    attn_platform_free(p);
    attn_model_free(m);
}

/* The native-dtype layers of a turboquant run on MI300X with AITER take a
 * backend that shares TURBOQUANT's layout. */
static void test_rocm_turboquant(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_shape(2, 8, 2, 128, ATTN_DTYPE_BF16, &m));
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("rocm:gfx942", &p));
    CHECK_OK(attn_platform_set_installed(p, "aiter"));
    attn_group_choice ch;
    CHECK_OK(select_group(p, m, 0, "0,1", ATTN_KV_TURBOQUANT_4BIT_NC, &ch));
    CHECK(ch.config.kv_cache_dtype == ATTN_KV_AUTO);
    CHECK_STR(attn_selection_backend(ch.selection), "TRITON_ATTN");
    CHECK_OK(select_group(p, m, 0, NULL, ATTN_KV_AUTO, &ch));
    CHECK_STR(attn_selection_backend(ch.selection), "ROCM_ATTN");
    attn_platform_free(p);
    attn_model_free(m);
}

int main(void)
{
    test_engine_serves_both();
    test_lists();
    test_rocm_turboquant();
    return attn_test_finish("test_engine_kv_skip");
}
