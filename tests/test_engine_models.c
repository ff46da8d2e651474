/* The engine across model shapes and launch options: an attention-free
 * decoder loop (encoder-only model: no metadata at all), MLA (latent cache,
 * CPU_MLA natively or standing in), alternating sliding/full layers with
 * soft-capping, sinks, an FP8 KV cache, shared prefixes reaching the cascade
 * path, preemption and recomputation, and bad requests refused. */
#include "attn/engine.h"
#include "metadata/builders.h"
#include "engine_harness.h"
#include "test.h"

static attn_engine *start(const char *machine, attn_model *m, const char *kv, int num_blocks,
                          attn_platform **p)
{
    *p = NULL;
    CHECK_OK(attn_platform_open(machine, p));
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = *p;
    cfg.model = m;
    cfg.num_blocks = num_blocks;
    cfg.max_num_seqs = 8;
    cfg.max_num_batched_tokens = 96;
    cfg.check_metadata = true;
    if (kv) CHECK_OK(attn_kv_dtype_parse(kv, &cfg.kv_cache_dtype));
    attn_engine *e = NULL;
    attn_status st = test_engine_create(&cfg, 5, true, &e);
    CHECK_MSG(st == ATTN_OK, "%s: %s", machine, e ? attn_engine_error(e) : attn_last_error());
    return e;
}

/* Runs steps until every request finished (or a limit); checks each step. */
static void serve(attn_engine *e, int nreq, int prompt, int out, double tol)
{
    for (int i = 0; i < nreq; i++) {
        attn_request_desc r = {.prompt_len = prompt + 7 * i, .output_len = out};
        CHECK_OK(attn_engine_add_request(e, &r, NULL));
    }
    attn_engine_counts c;
    int steps = 0;
    do {
        attn_engine_step_stats st;
        attn__harness_stats hst;
        CHECK_OK(test_engine_step(e, &st, &hst));
        CHECK(hst.output_finite);
        CHECK_MSG(hst.max_abs_diff <= tol, "step %lld: max diff %g > %g", (long long)st.step,
                  hst.max_abs_diff, tol);
        attn_engine_get_counts(e, &c);
    } while (c.finished < nreq && ++steps < 100);
    CHECK(c.finished == nreq);
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_block_accounting b;
        CHECK_OK(attn_engine_block_stats(e, g, &b));
        CHECK(b.num_free == b.num_blocks - (int)b.held_by_prefix_cache && b.leaked == 0 &&
              b.consistent);
    }
}

static void test_encoder_only(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_load("bert-base", &m));
    attn_platform *p;
    attn_engine *e = start("cpu", m, NULL, 0, &p);
    CHECK(attn_engine_num_groups(e) == 0 && attn_engine_block_size(e) == 0);
    CHECK(attn_engine_selection(e, 0) != NULL); /* selected, even without a cache */
    attn_request_desc r = {.prompt_len = 10, .output_len = 2};
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.num_reqs == 1 && st.num_tokens == 10 && st.builds == 0 && st.layers_run == 0);
    CHECK(st.metadata_ns == 0);
    CHECK(attn_engine_common_metadata(e, 0) == NULL);
    CHECK(attn_engine_describe_metadata(e, 0, NULL, 0, NULL) == -1);
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

/* DeepSeek-V3's attention shape (kv_lora_rank 512 + rope 64 = head 576,
 * nope 128, v 128) with 4 heads and 2 layers, so the oracle stays quick. */
static const char *small_mla =
    "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 512, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 4, \"kv_lora_rank\": 512,"
    " \"qk_rope_head_dim\": 64, \"qk_nope_head_dim\": 128, \"v_head_dim\": 128,"
    " \"torch_dtype\": \"bfloat16\"}";

static void test_mla(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_json(small_mla, "mla-small", &m));
    if (!m) return;
    attn_platform *p;
    attn_engine *e = start("cpu", m, NULL, 32, &p);
    attn_engine_group_info gi;
    CHECK_OK(attn_engine_group_info_get(e, 0, &gi));
    CHECK_STR(gi.backend, "CPU_MLA");
    CHECK(gi.kernel_mode == ATTN_KERNEL_NATIVE);
    CHECK(gi.kv_shape.ndim == 3 && gi.kv_shape.dims[2] == 576);
    CHECK(gi.kind == ATTN_KIND_MLA);
    serve(e, 3, 20, 3, 5e-2); /* checked against REFERENCE_MLA */
    test_engine_free(e);
    attn_platform_free(p);
    e = start("h100", m, NULL, 32, &p);
    CHECK_OK(attn_engine_group_info_get(e, 0, &gi));
    CHECK(gi.kernel_mode == ATTN_KERNEL_EMULATED);
    CHECK_STR(gi.kernel, "CPU_MLA");
    CHECK_STR(gi.backend, "FLASH_ATTN_MLA"); /* reference §6a on 9.x with FA3 */
    CHECK(attn_engine_block_size(e) == 16);
    serve(e, 2, 70, 2, 5e-2);
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

static void test_gemma_and_sinks(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_load("gemma-2-9b", &m));
    attn_platform *p;
    attn_engine *e = start("mi300x", m, NULL, 16, &p);
    CHECK(attn_engine_num_groups(e) == 2);
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_group_info gi;
        CHECK_OK(attn_engine_group_info_get(e, g, &gi));
        CHECK_MSG(gi.kernel_mode != ATTN_KERNEL_NONE, "group %d: %s", g,
                  gi.kernel_note ? gi.kernel_note : "");
    }
    serve(e, 2, 30, 2, 5e-2);
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);

    CHECK_OK(attn_model_load("gpt-oss-20b", &m));
    e = start("h100", m, NULL, 16, &p);
    CHECK(attn_engine_num_groups(e) == 2);
    serve(e, 2, 40, 2, 5e-2);
    test_engine_free(e);

    /* a per-kind override: sliding-window layers on TRITON_ATTN, the others
     * by the platform's list */
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.num_blocks = 16;
    cfg.per_kind[ATTN_KIND_SLIDING_WINDOW] = "TRITON_ATTN";
    cfg.run_kernels = false;
    CHECK_OK(test_engine_create(&cfg, 0, false, &e));
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_group_info gi;
        CHECK_OK(attn_engine_group_info_get(e, g, &gi));
        if (gi.kind == ATTN_KIND_SLIDING_WINDOW) {
            CHECK_STR(gi.backend, "TRITON_ATTN");
            CHECK_STR(gi.requested, "TRITON_ATTN");
            CHECK_STR(gi.builder_type, "triton");
        } else {
            CHECK_STR(gi.backend, "FLASH_ATTN");
            CHECK(gi.requested == NULL);
        }
    }
    attn_request_desc r = {.prompt_len = 9, .output_len = 2};
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.builds == 2 && st.block_table_updates == 0); /* different builder types */
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

static void test_fp8(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_shape(2, 8, 2, 128, ATTN_DTYPE_BF16, &m));
    attn_platform *p;
    attn_engine *e = start("h100", m, "fp8", 32, &p);
    attn_engine_group_info gi;
    CHECK_OK(attn_engine_group_info_get(e, 0, &gi));
    CHECK_STR(gi.backend, "FLASH_ATTN");
    CHECK(gi.kv_elem == ATTN_ELEM_FP8_E4M3);
    serve(e, 3, 33, 3, 5e-2);
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

static void test_prefix_cascade_preemption(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_shape(2, 4, 2, 64, ATTN_DTYPE_BF16, &m));
    attn_platform *p;
    attn_engine *e = start("h100", m, NULL, 12, &p);
    /* A computes the 32-token prefix (2 blocks); B and C reuse it. */
    attn_request_desc a = {.prompt_len = 40, .output_len = 6, .prefix_id = 1, .prefix_len = 32};
    CHECK_OK(attn_engine_add_request(e, &a, NULL));
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    attn_engine_block_accounting b;
    CHECK_OK(attn_engine_block_stats(e, 0, &b));
    CHECK(b.held_by_prefix_cache == 2 && b.num_used == 3 && b.total_refs == 5);
    attn_request_desc bq = {.prompt_len = 35, .output_len = 4, .prefix_id = 1, .prefix_len = 32};
    CHECK_OK(attn_engine_add_request(e, &bq, NULL));
    CHECK_OK(attn_engine_add_request(e, &bq, NULL));
    CHECK_OK(test_engine_step(e, &st, &hst));
    /* B and C skipped the 32 shared tokens: 3 + 3 new tokens, plus A's decode */
    CHECK(st.num_tokens == 1 + 3 + 3 && st.admitted == 2);
    CHECK(st.common_prefix_len == 32);
    const attn_fa_metadata *md = attn_engine_group_metadata(e, 0, NULL);
    CHECK(md->use_cascade && md->common_prefix_len == 32 && md->prefix_num_blocks == 2);
    CHECK_OK(attn_engine_block_stats(e, 0, &b));
    CHECK(b.leaked == 0 && b.consistent);
    /* the shared blocks carry 4 references: A, B, C and the cache */
    const attn_common_metadata *cm = attn_engine_common_metadata(e, 0);
    CHECK(cm->block_table[0] == cm->block_table[cm->block_table_stride] &&
          cm->block_table[1] == cm->block_table[2 * cm->block_table_stride + 1]);

    /* a big request with no prefix: the 12-block pool runs dry and the
     * newest running requests are preempted, then recomputed */
    attn_request_desc big = {.prompt_len = 120, .output_len = 2};
    CHECK_OK(attn_engine_add_request(e, &big, NULL));
    attn_engine_counts c;
    int steps = 0;
    do {
        CHECK_OK(test_engine_step(e, &st, &hst));
        CHECK(hst.output_finite && hst.max_abs_diff < 2e-2);
        CHECK_OK(attn_engine_block_stats(e, 0, &b));
        CHECK(b.leaked == 0 && b.consistent && b.rejected_releases == 0);
        attn_engine_get_counts(e, &c);
    } while (c.finished < 4 && ++steps < 200);
    CHECK(c.finished == 4);
    CHECK(c.preemptions > 0);
    CHECK_OK(attn_engine_abort_all(e));
    CHECK_OK(attn_engine_block_stats(e, 0, &b));
    CHECK(b.num_free == 12 && b.total_refs == 0 && b.leaked == 0);

    /* bad requests change nothing */
    attn_engine_get_counts(e, &c);
    attn_request_desc bad = {.prompt_len = 0, .output_len = 1};
    CHECK_STATUS(attn_engine_add_request(e, &bad, NULL), ATTN_INVALID_ARGUMENT);
    bad.prompt_len = 12 * 16 + 1; /* more than the pool can ever hold */
    CHECK_STATUS(attn_engine_add_request(e, &bad, NULL), ATTN_INVALID_ARGUMENT);
    bad = (attn_request_desc){.prompt_len = 8, .output_len = 1, .prefix_id = 1, .prefix_len = 9};
    CHECK_STATUS(attn_engine_add_request(e, &bad, NULL), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_engine_add_request(e, NULL, NULL), ATTN_NULL_ARGUMENT);
    attn_engine_counts c2;
    attn_engine_get_counts(e, &c2);
    CHECK(c2.added == c.added && c2.waiting == 0);
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

static void test_queue_full(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_shape(1, 4, 2, 64, ATTN_DTYPE_FP16, &m));
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("a100", &p));
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.num_blocks = 8;
    cfg.max_num_seqs = 2;
    cfg.max_waiting = 3;
    cfg.run_kernels = false;
    attn_engine *e = NULL;
    CHECK_OK(test_engine_create(&cfg, 0, false, &e));
    attn_engine_group_info gi;
    CHECK_OK(attn_engine_group_info_get(e, 0, &gi));
    CHECK(gi.kernel_mode == ATTN_KERNEL_NONE && gi.kernel_note);
    attn_request_desc r = {.prompt_len = 4, .output_len = 1};
    for (int i = 0; i < 5; i++)
        CHECK_OK(attn_engine_add_request(e, &r, NULL));
    CHECK_STATUS(attn_engine_add_request(e, &r, NULL), ATTN_OUT_OF_RANGE);
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.num_reqs == 2 && st.layers_run == 0 && st.builds == 1);
    CHECK(st.finished == 2 && st.waiting == 3);
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

int main(void)
{
    test_encoder_only();
    test_mla();
    test_gemma_and_sinks();
    test_fp8();
    test_prefix_cascade_preemption();
    test_queue_full();
    return attn_test_finish("test_engine_models");
}
