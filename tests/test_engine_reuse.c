/* Within-step metadata reuse (reference §11): KV groups that share a
 * builder type and spec build once per step and the others only swap their
 * block table in (update_block_table); nothing is reused across steps.
 *
 * A model of 2 full-attention and 4 sliding-window layers gets vLLM's hybrid
 * grouping: [full x2] [sliding x2] [sliding x2]. A backend registered as an
 * object (as a plugin would) wraps the FlashAttention builder and counts the
 * calls: per step, build twice (full, first sliding) and update once. */
#include "attn/engine.h"
#include "backends/catalog/catalog.h"
#include "metadata/builders.h"
#include "engine_harness.h"
#include "test.h"

static int n_build, n_update, n_create;

static attn_status cnt_create(const attn_builder_init *init, void **state)
{
    n_create++;
    return attn__builder_flash_attn.create(init, state);
}

static attn_status cnt_build(void *state, int cpl, const attn_common_metadata *cm, bool fast,
                             const void **md)
{
    n_build++;
    return attn__builder_flash_attn.build(state, cpl, cm, fast, md);
}

static attn_status cnt_update(void *state, const void *md, const int32_t *bt, int stride,
                              const int64_t *slots, const void **out)
{
    n_update++;
    return attn__builder_flash_attn.update_block_table(state, md, bt, stride, slots, out);
}

static const attn_builder_ops counting_builder = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = "counting",
    .cg_support = ATTN_CG_ALWAYS,
    .supports_update_block_table = true,
    .create = cnt_create,
    .destroy = attn__fa_destroy,
    .build = cnt_build,
    .update_block_table = cnt_update,
    .describe = attn__fa_describe,
};

static const attn_backend_desc counting_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "CUSTOM",
    .platforms = "test",
    .supports_sliding_window = true, /* the CPU kernel that emulates it applies windows */
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO),
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
    .cg_support = ATTN_CG_ALWAYS,
    .kv_cache_shape = attn__kv_shape_split,
    .builder = &counting_builder,
};

static const attn_backend counting_backend = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &counting_desc,
    .kernel = NULL, /* descriptor only: the CPU kernel emulates it */
};

static const char *hybrid_config =
    "{\"model_type\": \"llama\", \"num_hidden_layers\": 6, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"head_dim\": 64, \"hidden_size\": 256,"
    " \"sliding_window\": 32, \"torch_dtype\": \"bfloat16\", \"layer_types\": [\"full_attention\","
    " \"sliding_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\","
    " \"sliding_attention\"]}";

int main(void)
{
    CHECK_OK(attn_register_backend_object("CUSTOM", &counting_backend));
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_json(hybrid_config, "hybrid-6", &m));
    if (!m) return attn_test_finish("test_engine_reuse");
    CHECK(attn_model_num_groups(m) == 2);
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.backend = "CUSTOM";
    cfg.num_blocks = 64;
    cfg.max_num_seqs = 8;
    cfg.max_num_batched_tokens = 128;
    cfg.check_metadata = true;
    attn_engine *e = NULL;
    CHECK_OK(test_engine_create(&cfg, 0, true, &e));
    if (!e || attn_engine_get_state(e) != ATTN_ENGINE_READY) {
        fprintf(stderr, "startup: %s\n", e ? attn_engine_error(e) : attn_last_error());
        return attn_test_finish("test_engine_reuse");
    }
    CHECK(attn_engine_num_groups(e) == 3);
    CHECK(n_create == 3);
    int want_layers[3][2] = {{0, 3}, {1, 2}, {4, 5}};
    for (int g = 0; g < 3; g++) {
        attn_engine_group_info gi;
        CHECK_OK(attn_engine_group_info_get(e, g, &gi));
        CHECK_STR(gi.backend, "CUSTOM");
        CHECK_STR(gi.builder_type, "counting");
        CHECK(gi.num_layers == 2 && gi.layers[0] == want_layers[g][0] &&
              gi.layers[1] == want_layers[g][1]);
        CHECK(gi.kind == (g == 0 ? ATTN_KIND_FULL : ATTN_KIND_SLIDING_WINDOW));
        CHECK(gi.kernel_mode == ATTN_KERNEL_EMULATED);
    }
    attn_request_desc r = {.prompt_len = 40, .output_len = 4};
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    r.prompt_len = 7;
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    for (int step = 1; step <= 3; step++) {
        attn_engine_step_stats st;
        attn__harness_stats hst;
        CHECK_OK(test_engine_step(e, &st, &hst));
        /* per step: full builds, sliding #1 builds, sliding #2 swaps its table in */
        CHECK(st.builds == 2 && st.block_table_updates == 1);
        CHECK(n_build == 2 * step && n_update == step);
        CHECK(hst.output_finite && hst.max_abs_diff < 2e-2);
        bool reused = false;
        char text[2048];
        CHECK(attn_engine_describe_metadata(e, 1, text, sizeof text, &reused) > 0 && !reused);
        CHECK(attn_engine_describe_metadata(e, 2, text, sizeof text, &reused) > 0 && reused);
        CHECK(attn_engine_describe_metadata(e, 0, text, sizeof text, &reused) > 0 && !reused);
        /* the swapped-in metadata carries group 2's own table and slots */
        const attn_fa_metadata *m1 = attn_engine_group_metadata(e, 1, NULL);
        const attn_fa_metadata *m2 = attn_engine_group_metadata(e, 2, NULL);
        const attn_common_metadata *c1 = attn_engine_common_metadata(e, 1);
        const attn_common_metadata *c2 = attn_engine_common_metadata(e, 2);
        CHECK(m1 != m2 && m1->block_table == c1->block_table && m2->block_table == c2->block_table);
        CHECK(m2->slot_mapping == c2->slot_mapping && c1->block_table != c2->block_table);
        CHECK(m2->num_reqs == m1->num_reqs && m2->seq_lens == c2->seq_lens);
        CHECK(c1->block_table[0] != c2->block_table[0] || c1->block_table != c2->block_table);
        CHECK_OK(attn_common_metadata_check(c2, attn_engine_num_blocks(e)));
    }
    for (int g = 0; g < 3; g++) {
        attn_engine_block_accounting b;
        CHECK_OK(attn_engine_block_stats(e, g, &b));
        CHECK(b.leaked == 0 && b.consistent && b.num_used > 0);
    }
    test_engine_free(e);

    /* without update_block_table support every group builds */
    attn_builder_ops no_update = counting_builder;
    no_update.supports_update_block_table = false;
    no_update.update_block_table = NULL;
    attn_backend_desc d2 = counting_desc;
    d2.builder = &no_update;
    attn_backend b2 = counting_backend;
    b2.desc = &d2;
    CHECK_OK(attn_register_backend_object("CUSTOM", &b2));
    attn_select_cache_clear();
    n_build = n_update = 0;
    CHECK_OK(test_engine_create(&cfg, 0, false, &e));
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.builds == 3 && st.block_table_updates == 0 && n_build == 3 && n_update == 0);
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
    return attn_test_finish("test_engine_reuse");
}
