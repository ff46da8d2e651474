/* The engine end to end on small models: startup picks the platform's
 * backend per KV group and fixes it; steps schedule, build metadata, write
 * K/V and run attention (emulated on simulated GPUs, checked against
 * REFERENCE); a failed startup carries the selector's exact message and
 * admits nothing; several engines live side by side; block accounting
 * balances after draining. */
#include "attn/engine.h"
#include "engine_harness.h"
#include "test.h"

static attn_model *small_model(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_shape(2, 8, 2, 64, ATTN_DTYPE_BF16, &m));
    return m;
}

static attn_engine *start(const char *machine, const attn_model *m, const char *backend,
                          int num_blocks, attn_platform **pout)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open(machine, &p));
    *pout = p;
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.backend = backend;
    cfg.num_blocks = num_blocks;
    cfg.max_num_seqs = 16;
    cfg.max_num_batched_tokens = 256;
    cfg.check_metadata = true;
    attn_engine *e = NULL;
    test_engine_create(&cfg, 7, true, &e);
    return e;
}

static void drain_and_check(attn_engine *e)
{
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_block_accounting b;
        CHECK_OK(attn_engine_block_stats(e, g, &b));
        CHECK(b.leaked == 0 && b.rejected_releases == 0 && b.consistent);
    }
    CHECK_OK(attn_engine_abort_all(e));
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_block_accounting b;
        CHECK_OK(attn_engine_block_stats(e, g, &b));
        CHECK(b.num_free == b.num_blocks && b.total_refs == 0 && b.leaked == 0 && b.consistent);
    }
}

static void test_h100(void)
{
    attn_model *m = small_model();
    attn_platform *p;
    attn_engine *e = start("h100", m, NULL, 64, &p);
    CHECK(e && attn_engine_get_state(e) == ATTN_ENGINE_READY);
    CHECK(attn_engine_error(e) == NULL);
    CHECK(attn_engine_num_groups(e) == 1);
    CHECK_STR(attn_engine_group_backend(e, 0), "FLASH_ATTN");
    CHECK(attn_engine_block_size(e) == 16);
    CHECK_STR(attn_engine_block_size_source(e), "preferred by FLASH_ATTN");
    CHECK(attn_engine_num_blocks(e) == 64);
    attn_engine_group_info gi;
    CHECK_OK(attn_engine_group_info_get(e, 0, &gi));
    CHECK(gi.kernel_mode == ATTN_KERNEL_EMULATED);
    CHECK_STR(gi.kernel, "CPU_ATTN");
    CHECK_STR(gi.builder_type, "flash_attn");
    CHECK(gi.layout == ATTN_LAYOUT_NHD && gi.kv_shape.ndim == 5 && gi.kv_shape.dims[0] == 2);
    CHECK(gi.num_layers == 2 && gi.layers_run == 1);
    /* 2 layers x (2 x 16 tokens x 2 heads x 64 x 2 bytes) per block */
    CHECK(gi.bytes_per_block == 2u * 2 * 16 * 2 * 64 * 2);
    CHECK(attn_engine_kv_bytes(e) == 64u * gi.bytes_per_block);
    CHECK(attn_engine_common_metadata(e, 0) == NULL);

    attn_request_desc r = {.prompt_len = 40, .output_len = 3};
    uint64_t id;
    CHECK_OK(attn_engine_add_request(e, &r, &id));
    CHECK(id == 0);
    r.prompt_len = 300; /* chunked: 256-token budget */
    CHECK_OK(attn_engine_add_request(e, &r, &id));
    CHECK(id == 1);
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.step == 0 && st.num_reqs == 2 && st.num_tokens == 256 && st.admitted == 2);
    CHECK(st.num_prefill_tokens == 256 && st.num_decode_reqs == 0);
    CHECK(st.builds == 1 && st.block_table_updates == 0 && st.layers_run == 1 && st.emulated);
    CHECK(hst.output_finite);
    CHECK_MSG(hst.max_abs_diff < 2e-2, "CPU_ATTN vs REFERENCE: %g", hst.max_abs_diff);
    const attn_common_metadata *cm = attn_engine_common_metadata(e, 0);
    CHECK(cm && cm->num_reqs == 2 && cm->num_actual_tokens == 256);
    CHECK(cm->query_start_loc[1] == 40 && cm->seq_lens[1] == 216);
    CHECK_OK(attn_common_metadata_check(cm, 64));
    char buf[4096];
    bool reused = true;
    CHECK(attn_engine_describe_metadata(e, 0, buf, sizeof buf, &reused) > 0 && !reused);
    CHECK_CONTAINS(buf, "\"num_actual_tokens\":256");
    int steps = 0;
    attn_engine_counts c;
    do {
        CHECK_OK(test_engine_step(e, &st, &hst));
        CHECK(hst.output_finite && hst.max_abs_diff < 2e-2);
        CHECK_OK(attn_engine_get_counts(e, &c));
    } while (c.finished < 2 && ++steps < 20);
    CHECK(c.finished == 2 && c.running == 0 && c.waiting == 0);
    /* 40+2 + 300+2 tokens computed (the last sampled token is never computed) */
    CHECK(c.tokens == 42 + 302);
    drain_and_check(e);
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

static void test_failed_startup(void)
{
    attn_model *m = small_model();
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    CHECK_OK(attn_platform_set_installed(p, "fa2,fa3,fa4"));
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.backend = "FLASHINFER";
    cfg.num_blocks = 32;
    attn_engine *e = NULL;
    CHECK_STATUS(attn_engine_create(&cfg, &e), ATTN_BACKEND_INVALID);
    CHECK(e != NULL && attn_engine_get_state(e) == ATTN_ENGINE_FAILED);
    CHECK_CONTAINS(attn_engine_error(e),
                   "Selected backend AttentionBackendEnum.FLASHINFER is not valid for this "
                   "configuration. Reason: [ModuleNotFoundError: No module named 'flashinfer']");
    CHECK_CONTAINS(attn_last_error(), "Selected backend AttentionBackendEnum.FLASHINFER");
    CHECK(attn_engine_num_groups(e) == 0);
    attn_request_desc r = {.prompt_len = 4, .output_len = 1};
    CHECK_STATUS(attn_engine_add_request(e, &r, NULL), ATTN_BAD_STATE);
    CHECK_STATUS(attn_engine_step(e, NULL), ATTN_BAD_STATE);
    CHECK(attn_engine_selection(e, 0) != NULL);
    test_engine_free(e);

    /* argument errors leave no engine */
    e = (attn_engine *)1;
    cfg.model = NULL;
    CHECK_STATUS(attn_engine_create(&cfg, &e), ATTN_INVALID_ARGUMENT);
    CHECK(e == NULL);
    CHECK_STATUS(attn_engine_create(NULL, &e), ATTN_NULL_ARGUMENT);
    attn_engine_config raw = cfg;
    raw.struct_size = 3;
    raw.model = m;
    CHECK_STATUS(attn_engine_create(&raw, &e), ATTN_ABI_MISMATCH);
    attn_platform_free(p);
    attn_model_free(m);
}

/* Two engines at once on different machines, stepping alternately. */
static void test_side_by_side(void)
{
    attn_model *m = small_model();
    attn_platform *pa, *pb;
    attn_engine *a = start("a100", m, NULL, 32, &pa);
    attn_engine *b = start("mi300x", m, NULL, 32, &pb);
    CHECK(attn_engine_get_state(a) == ATTN_ENGINE_READY);
    CHECK(attn_engine_get_state(b) == ATTN_ENGINE_READY);
    CHECK_STR(attn_engine_group_backend(a, 0), "FLASH_ATTN");
    CHECK_STR(attn_engine_group_backend(b, 0), "ROCM_ATTN");
    attn_request_desc r = {.prompt_len = 20, .output_len = 4};
    CHECK_OK(attn_engine_add_request(a, &r, NULL));
    CHECK_OK(attn_engine_add_request(b, &r, NULL));
    for (int i = 0; i < 6; i++) {
        attn_engine_step_stats sa, sb;
        attn__harness_stats hsa, hsb;
        CHECK_OK(test_engine_step(a, &sa, &hsa));
        CHECK_OK(test_engine_step(b, &sb, &hsb));
        CHECK(sa.num_tokens == sb.num_tokens);
        CHECK(hsa.output_finite && hsb.output_finite);
    }
    attn_engine_counts ca, cb;
    attn_engine_get_counts(a, &ca);
    attn_engine_get_counts(b, &cb);
    CHECK(ca.finished == 1 && cb.finished == 1 && ca.steps == 6 && cb.steps == 6);
    drain_and_check(a);
    drain_and_check(b);
    test_engine_free(a);
    test_engine_free(b);
    attn_platform_free(pa);
    attn_platform_free(pb);
    attn_model_free(m);
}

int main(void)
{
    test_h100();
    test_failed_startup();
    test_side_by_side();
    return attn_test_finish("test_engine_basic");
}
