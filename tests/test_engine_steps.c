/* Nothing survives from one step to the next: between two steps a request
 * appends a token (decode), one finishes (its block goes back to the pool
 * and is handed to the newcomer) and another is admitted; every field of
 * the new common metadata and of the backend's metadata must describe the
 * new batch, hand-computed here, with nothing left from the old one.
 * Run for FLASHINFER (derived arrays) and FLASH_ATTN (pass-through). */
#include "attn/engine.h"
#include "metadata/builders.h"
#include "engine_harness.h"
#include "test.h"

#define EQ32(got, ...)                                                                             \
    do {                                                                                           \
        const int32_t want_[] = {__VA_ARGS__};                                                     \
        attn_test_checks++;                                                                        \
        if (!(got) || memcmp((got), want_, sizeof want_) != 0) {                                   \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s differs:", __FILE__, __LINE__, #got);                       \
            for (size_t i_ = 0; (got) && i_ < sizeof want_ / sizeof want_[0]; i_++)                \
                fprintf(stderr, " %d/%d", (int)(got)[i_], (int)want_[i_]);                         \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define EQ64(got, ...)                                                                             \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        attn_test_checks++;                                                                        \
        if (!(got) || memcmp((got), want_, sizeof want_) != 0) {                                   \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s differs\n", __FILE__, __LINE__, #got);                      \
        }                                                                                          \
    } while (0)

static attn_engine *start(const char *backend, attn_platform **p, attn_model **m)
{
    CHECK_OK(attn_platform_open("h100", p));
    CHECK_OK(attn_model_from_shape(2, 4, 2, 64, ATTN_DTYPE_BF16, m));
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = *p;
    cfg.model = *m;
    cfg.backend = backend;
    cfg.num_blocks = 16;
    cfg.block_size = 16;
    cfg.max_num_seqs = 8;
    cfg.max_num_batched_tokens = 64;
    cfg.check_metadata = true;
    attn_engine *e = NULL;
    CHECK_OK(test_engine_create(&cfg, 0, false, &e));
    return e;
}

static const int32_t *row(const attn_common_metadata *cm, int r)
{
    return cm->block_table + (size_t)r * (size_t)cm->block_table_stride;
}

/* Common metadata of a batch of (query, seq) pairs, all positions and slots
 * derived from the block table. */
static void check_common(const attn_common_metadata *cm, int n, const int32_t *q,
                         const int32_t *seq)
{
    CHECK(cm->num_reqs == n);
    int tok = 0, mq = 0, ms = 0;
    CHECK(cm->query_start_loc[0] == 0);
    for (int r = 0; r < n; r++) {
        CHECK(cm->query_start_loc[r + 1] - cm->query_start_loc[r] == q[r]);
        CHECK(cm->seq_lens[r] == seq[r]);
        for (int j = 0; j < q[r]; j++, tok++) {
            int pos = seq[r] - q[r] + j;
            CHECK(cm->positions[tok] == pos);
            CHECK(cm->slot_mapping[tok] == (int64_t)row(cm, r)[pos / 16] * 16 + pos % 16);
        }
        mq = q[r] > mq ? q[r] : mq;
        ms = seq[r] > ms ? seq[r] : ms;
    }
    CHECK(cm->num_actual_tokens == tok && cm->max_query_len == mq && cm->max_seq_len == ms);
    CHECK(cm->causal && cm->block_size == 16);
    CHECK_OK(attn_common_metadata_check(cm, 16));
}

static void test_flashinfer(void)
{
    attn_platform *p;
    attn_model *m;
    attn_engine *e = start("FLASHINFER", &p, &m);
    CHECK_STR(attn_engine_group_backend(e, 0), "FLASHINFER");
    attn_request_desc a = {.prompt_len = 20, .output_len = 3}; /* 2 blocks */
    attn_request_desc b = {.prompt_len = 5, .output_len = 1};  /* finishes after step 0 */
    attn_request_desc c = {.prompt_len = 4, .output_len = 5};
    attn_request_desc d = {.prompt_len = 6, .output_len = 2};
    CHECK_OK(attn_engine_add_request(e, &a, NULL));
    CHECK_OK(attn_engine_add_request(e, &b, NULL));
    CHECK_OK(attn_engine_add_request(e, &c, NULL));

    /* step 0: A B C prefill */
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.finished == 1 && st.running == 2);
    const attn_common_metadata *cm = attn_engine_common_metadata(e, 0);
    check_common(cm, 3, (int32_t[]){20, 5, 4}, (int32_t[]){20, 5, 4});
    int32_t a0 = row(cm, 0)[0], a1 = row(cm, 0)[1], b0 = row(cm, 1)[0], c0 = row(cm, 2)[0];
    CHECK(a0 != a1 && a0 != b0 && b0 != c0 && a1 != c0);
    const attn_builder_ops *ops = NULL;
    const attn_flashinfer_metadata *md = attn_engine_group_metadata(e, 0, &ops);
    CHECK(md && ops && !strcmp(ops->type_name, "flashinfer"));
    CHECK(md->num_decodes == 0 && md->num_prefills == 3);
    EQ32(md->paged_kv_indptr, 0, 2, 3, 4);
    EQ32(md->paged_kv_indices, a0, a1, b0, c0);
    EQ32(md->paged_kv_last_page_len, 4, 5, 4);

    /* B is gone; D arrives; A and C append one token each */
    CHECK_OK(attn_engine_add_request(e, &d, NULL));
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.admitted == 1 && st.num_decode_reqs == 2 && st.num_prefill_reqs == 1);
    CHECK(st.builds == 1 && st.block_table_updates == 0);
    cm = attn_engine_common_metadata(e, 0);
    check_common(cm, 3, (int32_t[]){1, 1, 6}, (int32_t[]){21, 5, 6});
    EQ32(row(cm, 0), a0, a1); /* A keeps its blocks */
    EQ32(row(cm, 1), c0);     /* C moved up to B's old row */
    int32_t d0 = row(cm, 2)[0];
    CHECK(d0 == b0); /* B's freed block went to D: same id, new owner */
    EQ64(cm->slot_mapping, a1 * 16 + 4, c0 * 16 + 4, d0 * 16, d0 * 16 + 1, d0 * 16 + 2, d0 * 16 + 3,
         d0 * 16 + 4, d0 * 16 + 5);
    md = attn_engine_group_metadata(e, 0, NULL);
    CHECK(md->num_reqs == 3 && md->num_actual_tokens == 8 && md->max_query_len == 6 &&
          md->max_seq_len == 21 && md->page_size == 16 && md->causal);
    CHECK(md->qo_indptr == cm->query_start_loc && md->slot_mapping == cm->slot_mapping);
    CHECK(md->num_decodes == 2 && md->num_decode_tokens == 2 && md->num_prefills == 1 &&
          md->num_prefill_tokens == 6);
    EQ32(md->paged_kv_indptr, 0, 2, 3, 4);
    EQ32(md->paged_kv_indices, a0, a1, c0, d0);
    EQ32(md->paged_kv_last_page_len, 5, 5, 6);
    EQ32(md->prefill_qo_indptr, 0, 6);
    EQ32(md->prefill_kv_indptr, 0, 1);
    CHECK(!md->use_cascade && md->common_prefix_len == 0 && md->shared_kv_page_indices == NULL);
    char text[2048];
    bool reused = true;
    CHECK(attn_engine_describe_metadata(e, 0, text, sizeof text, &reused) > 0 && !reused);
    CHECK_CONTAINS(text, "\"num_reqs\":3");

    /* step 2: all three decode; A and D finish after it */
    CHECK_OK(test_engine_step(e, &st, &hst));
    cm = attn_engine_common_metadata(e, 0);
    check_common(cm, 3, (int32_t[]){1, 1, 1}, (int32_t[]){22, 6, 7});
    md = attn_engine_group_metadata(e, 0, NULL);
    CHECK(md->num_decodes == 3 && md->num_prefills == 0 && md->num_prefill_tokens == 0);
    EQ32(md->paged_kv_last_page_len, 6, 6, 7);
    EQ32(md->prefill_qo_indptr, 0);
    CHECK(st.finished == 2 && st.running == 1);

    /* step 3: C alone */
    CHECK_OK(test_engine_step(e, &st, &hst));
    cm = attn_engine_common_metadata(e, 0);
    check_common(cm, 1, (int32_t[]){1}, (int32_t[]){7});
    EQ32(row(cm, 0), c0);
    md = attn_engine_group_metadata(e, 0, NULL);
    EQ32(md->paged_kv_indptr, 0, 1);
    EQ32(md->paged_kv_indices, c0);
    EQ32(md->paged_kv_last_page_len, 7);
    CHECK(md->num_decodes == 1);
    test_engine_free(e);
    attn_model_free(m);
    attn_platform_free(p);
}

static void test_flash_attn(void)
{
    attn_platform *p;
    attn_model *m;
    attn_engine *e = start(NULL, &p, &m);
    CHECK_STR(attn_engine_group_backend(e, 0), "FLASH_ATTN");
    attn_request_desc a = {.prompt_len = 20, .output_len = 3};
    attn_request_desc b = {.prompt_len = 5, .output_len = 1};
    attn_request_desc d = {.prompt_len = 6, .output_len = 2};
    CHECK_OK(attn_engine_add_request(e, &a, NULL));
    CHECK_OK(attn_engine_add_request(e, &b, NULL));
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK_OK(attn_engine_add_request(e, &d, NULL));
    CHECK_OK(test_engine_step(e, &st, &hst));
    const attn_common_metadata *cm = attn_engine_common_metadata(e, 0);
    check_common(cm, 2, (int32_t[]){1, 6}, (int32_t[]){21, 6});
    const attn_fa_metadata *md = attn_engine_group_metadata(e, 0, NULL);
    CHECK(md->num_reqs == 2 && md->num_actual_tokens == 7 && md->max_query_len == 6 &&
          md->max_seq_len == 21 && md->num_decodes == 1);
    CHECK(md->query_start_loc == cm->query_start_loc && md->seq_lens == cm->seq_lens &&
          md->block_table == cm->block_table && md->slot_mapping == cm->slot_mapping &&
          md->block_table_stride == cm->block_table_stride);
    CHECK(!md->use_cascade && md->suffix_kv_lens == NULL);
    test_engine_free(e);
    attn_model_free(m);
    attn_platform_free(p);
}

int main(void)
{
    test_flashinfer();
    test_flash_attn();
    return attn_test_finish("test_engine_steps");
}
