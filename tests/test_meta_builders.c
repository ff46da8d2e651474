/* Each builder family's output for hand-worked batches: mixed
 * prefill/decode with a chunked prefill, one request, the empty batch and a
 * cascade prefix; update_block_table; build_for_capture per graph tier. The
 * expected arrays are worked out by hand in the comments. */
#include "metadata/builders.h"
#include "test.h"

#define ARR_EQ(got, ...)                                                                           \
    do {                                                                                           \
        const int32_t want_[] = {__VA_ARGS__};                                                     \
        int n_ = (int)(sizeof want_ / sizeof want_[0]);                                            \
        attn_test_checks++;                                                                        \
        if (!(got) || memcmp((got), want_, sizeof want_) != 0) {                                   \
            attn_test_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s differs:", __FILE__, __LINE__, #got);                       \
            for (int i_ = 0; (got) && i_ < n_; i_++)                                               \
                fprintf(stderr, " %d/%d", (int)(got)[i_], (int)want_[i_]);                         \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Block size 4, 8 query heads over 2 KV heads.
 * r0 decode:  seq 5,  q 1, blocks [7 3]      slot pos 4 -> 3*4+0 = 12
 * r1 decode:  seq 9,  q 1, blocks [1 2 9]    pos 8 -> 36
 * r2 chunk:   seq 10, q 6, blocks [4 5 6]    pos 4..9 -> 20..23, 24, 25
 * r3 prefill: seq 3,  q 3, blocks [8]        pos 0..2 -> 32..34 */
static const int32_t mixed_qsl[5] = {0, 1, 2, 8, 11};
static const int32_t mixed_seq[4] = {5, 9, 10, 3};
static const int32_t mixed_bt[4][4] = {{7, 3, 0, 0}, {1, 2, 9, 0}, {4, 5, 6, 0}, {8, 0, 0, 0}};
static const int64_t mixed_slots[11] = {12, 36, 20, 21, 22, 23, 24, 25, 32, 33, 34};

static attn_common_metadata mixed(void)
{
    attn_common_metadata cm = {.query_start_loc = mixed_qsl,
                               .seq_lens = mixed_seq,
                               .num_reqs = 4,
                               .num_actual_tokens = 11,
                               .max_query_len = 6,
                               .max_seq_len = 10,
                               .block_table = &mixed_bt[0][0],
                               .block_table_stride = 4,
                               .slot_mapping = mixed_slots,
                               .causal = true,
                               .block_size = 4};
    return cm;
}

/* Cascade: three requests share blocks [10 11] (8 tokens).
 * r0: seq 11, q 1, [10 11 12]; r1: seq 9, q 1, [10 11 13]; r2: seq 12, q 2, [10 11 14]. */
static const int32_t casc_qsl[4] = {0, 1, 2, 4};
static const int32_t casc_seq[3] = {11, 9, 12};
static const int32_t casc_bt[3][3] = {{10, 11, 12}, {10, 11, 13}, {10, 11, 14}};
static const int64_t casc_slots[4] = {50, 52, 58, 59};

static attn_common_metadata cascade(void)
{
    attn_common_metadata cm = {.query_start_loc = casc_qsl,
                               .seq_lens = casc_seq,
                               .num_reqs = 3,
                               .num_actual_tokens = 4,
                               .max_query_len = 2,
                               .max_seq_len = 12,
                               .block_table = &casc_bt[0][0],
                               .block_table_stride = 3,
                               .slot_mapping = casc_slots,
                               .causal = true,
                               .block_size = 4};
    return cm;
}

/* One request, a chunk of 4 tokens after 8 computed: seq 12, blocks [2 0 5]. */
static const int32_t one_qsl[2] = {0, 4};
static const int32_t one_seq[1] = {12};
static const int32_t one_bt[3] = {2, 0, 5};
static const int64_t one_slots[4] = {20, 21, 22, 23};

static attn_common_metadata one(void)
{
    attn_common_metadata cm = {.query_start_loc = one_qsl,
                               .seq_lens = one_seq,
                               .num_reqs = 1,
                               .num_actual_tokens = 4,
                               .max_query_len = 4,
                               .max_seq_len = 12,
                               .block_table = one_bt,
                               .block_table_stride = 3,
                               .slot_mapping = one_slots,
                               .causal = true,
                               .block_size = 4};
    return cm;
}

static const int32_t empty_qsl[1] = {0};

static attn_common_metadata empty(void)
{
    attn_common_metadata cm = {.query_start_loc = empty_qsl,
                               .num_reqs = 0,
                               .block_size = 4,
                               .causal = true,
                               .block_table_stride = 4};
    return cm;
}

static attn_layer_params layer = {.num_heads = 8, .num_kv_heads = 2, .head_size = 64};

static void *make(const attn_builder_ops *ops, const attn_backend_desc *desc)
{
    attn_builder_init init = {.desc = desc,
                              .layer = &layer,
                              .block_size = 4,
                              .num_blocks = 16,
                              .max_num_reqs = 8,
                              .max_num_tokens = 64,
                              .max_blocks_per_req = 4};
    void *st = NULL;
    CHECK_OK(ops->create(&init, &st));
    return st;
}

static void check_all_inputs_valid(void)
{
    attn_common_metadata a = mixed(), b = cascade(), c = one(), d = empty();
    CHECK_OK(attn_common_metadata_check(&a, 16));
    CHECK_OK(attn_common_metadata_check(&b, 16));
    CHECK_OK(attn_common_metadata_check(&c, 16));
    CHECK_OK(attn_common_metadata_check(&d, 16));
}

static void test_common_prefix(void)
{
    attn_common_metadata cm = cascade();
    CHECK(attn__common_prefix_len(&cm) == 8);
    /* r1 with only 7 computed tokens: one whole shared block counts */
    int32_t seq[3] = {11, 8, 12};
    cm.seq_lens = seq;
    CHECK(attn__common_prefix_len(&cm) == 4);
    cm = mixed();
    CHECK(attn__common_prefix_len(&cm) == 0);
    cm = one();
    CHECK(attn__common_prefix_len(&cm) == 0); /* a single request has nothing to share */
    cm = empty();
    CHECK(attn__common_prefix_len(&cm) == 0);
}

static void test_flash_attn(void)
{
    const attn_builder_ops *ops = &attn__builder_flash_attn;
    CHECK_STR(ops->type_name, "flash_attn");
    CHECK(ops->reorder_batch_threshold == 0 && ops->supports_update_block_table);
    void *st = make(ops, NULL);
    const void *out = NULL;
    attn_common_metadata cm = mixed();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    const attn_fa_metadata *m = out;
    /* pass-through: the common arrays themselves */
    CHECK(m->query_start_loc == mixed_qsl && m->seq_lens == mixed_seq);
    CHECK(m->block_table == &mixed_bt[0][0] && m->slot_mapping == mixed_slots);
    CHECK(m->num_reqs == 4 && m->num_actual_tokens == 11 && m->max_query_len == 6 &&
          m->max_seq_len == 10 && m->causal && m->block_size == 4);
    CHECK(m->num_decodes == 2);
    CHECK(!m->use_cascade && m->common_prefix_len == 0 && m->suffix_kv_lens == NULL);
    CHECK(m->cg_support == ATTN_CG_UNIFORM_BATCH);

    /* cascade: prefix attended once through row 0, suffixes through the shifted table */
    cm = cascade();
    CHECK_OK(ops->build(st, attn__common_prefix_len(&cm), &cm, false, &out));
    m = out;
    CHECK(m->use_cascade && m->common_prefix_len == 8 && m->prefix_num_blocks == 2);
    ARR_EQ(m->cu_prefix_query_lens, 0, 4);
    ARR_EQ(m->prefix_kv_lens, 8);
    ARR_EQ(m->suffix_kv_lens, 3, 1, 4);
    CHECK(m->max_suffix_kv_len == 4);
    CHECK(m->suffix_block_table == &casc_bt[0][2]);
    /* a prefix that is not whole blocks, or not shared, is refused */
    CHECK_STATUS(ops->build(st, 6, &cm, false, &out), ATTN_BAD_METADATA);
    CHECK_STATUS(ops->build(st, 12, &cm, false, &out), ATTN_BAD_METADATA); /* > r1's 8 computed */
    attn_common_metadata mx = mixed();
    CHECK_STATUS(ops->build(st, 4, &mx, false, &out), ATTN_BAD_METADATA);
    CHECK_CONTAINS(attn_last_error(), "exceeds request 3's computed tokens (0)");
    const int32_t split_bt[3][3] = {{10, 11, 12}, {10, 15, 13}, {10, 11, 14}};
    const int64_t split_sl[4] = {50, 52, 58, 59};
    attn_common_metadata sp = cascade();
    sp.block_table = &split_bt[0][0];
    sp.slot_mapping = split_sl;
    CHECK_STATUS(ops->build(st, 8, &sp, false, &out), ATTN_BAD_METADATA);
    CHECK_CONTAINS(attn_last_error(), "cascade prefix of 2 blocks is not shared");
    CHECK(attn__common_prefix_len(&sp) == 4);
    CHECK_OK(ops->build(st, 4, &sp, false, &out));

    /* one request, chunked */
    cm = one();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    m = out;
    CHECK(m->num_reqs == 1 && m->num_actual_tokens == 4 && m->num_decodes == 0 && !m->use_cascade);

    /* empty batch */
    cm = empty();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    m = out;
    CHECK(m->num_reqs == 0 && m->num_actual_tokens == 0 && m->max_query_len == 0 &&
          !m->use_cascade);

    /* update_block_table: same lengths, another group's table and slots */
    cm = cascade();
    const void *first = NULL, *second = NULL;
    CHECK_OK(ops->build(st, 8, &cm, false, &first));
    void *st2 = make(ops, NULL);
    const int32_t bt2[3][3] = {{20, 21, 22}, {20, 21, 23}, {20, 21, 24}};
    const int64_t sl2[4] = {90, 92, 98, 99};
    CHECK_OK(ops->update_block_table(st2, first, &bt2[0][0], 3, sl2, &second));
    const attn_fa_metadata *m2 = second;
    CHECK(m2 != first && m2->block_table == &bt2[0][0] && m2->slot_mapping == sl2);
    CHECK(m2->suffix_block_table == &bt2[0][2] && m2->use_cascade);
    CHECK(m2->seq_lens == casc_seq && m2->num_reqs == 3);
    /* the first group's metadata is untouched */
    CHECK(((const attn_fa_metadata *)first)->block_table == &casc_bt[0][0]);
    /* a table whose prefix is not shared cannot take over a cascade build */
    const int32_t bt3[3][3] = {{20, 21, 22}, {20, 25, 23}, {20, 21, 24}};
    CHECK_STATUS(ops->update_block_table(st2, first, &bt3[0][0], 3, sl2, &second),
                 ATTN_BAD_METADATA);

    /* describe */
    char buf[2048];
    int len = ops->describe(first, buf, sizeof buf);
    CHECK(len > 0 && len < (int)sizeof buf);
    CHECK_CONTAINS(buf, "\"use_cascade\":true");
    CHECK_CONTAINS(buf, "\"suffix_kv_lens\":[3,1,4]");
    CHECK(ops->describe(first, NULL, 0) == len);

    /* capture: FA2's UNIFORM_BATCH takes uniform batches only */
    cm = mixed();
    CHECK_STATUS(ops->build_for_capture(st, &cm, &out), ATTN_UNSUPPORTED);
    const int32_t uq[3] = {0, 1, 2}, us[2] = {5, 9};
    const int32_t ubt[2][3] = {{7, 3, 0}, {1, 2, 9}};
    const int64_t usl[2] = {12, 36};
    attn_common_metadata u = {.query_start_loc = uq,
                              .seq_lens = us,
                              .num_reqs = 2,
                              .num_actual_tokens = 2,
                              .max_query_len = 1,
                              .max_seq_len = 9,
                              .block_table = &ubt[0][0],
                              .block_table_stride = 3,
                              .slot_mapping = usl,
                              .causal = true,
                              .block_size = 4};
    CHECK_OK(attn_common_metadata_check(&u, 16));
    CHECK_OK(ops->build_for_capture(st, &u, &out));
    CHECK(!((const attn_fa_metadata *)out)->use_cascade);
    /* with a descriptor saying ALWAYS (FA3), anything is captured */
    attn_backend_desc fa3 = {.name = "FLASH_ATTN", .cg_support = ATTN_CG_ALWAYS};
    void *st3 = make(ops, &fa3);
    CHECK_OK(ops->build_for_capture(st3, &cm, &out));
    CHECK(((const attn_fa_metadata *)out)->cg_support == ATTN_CG_ALWAYS);

    /* capacity guard: more requests than create() allowed */
    attn_builder_init small = {.layer = &layer,
                               .block_size = 4,
                               .num_blocks = 16,
                               .max_num_reqs = 2,
                               .max_num_tokens = 64,
                               .max_blocks_per_req = 4};
    void *st4 = NULL;
    CHECK_OK(ops->create(&small, &st4));
    CHECK_STATUS(ops->build(st4, 0, &cm, false, &out), ATTN_BAD_METADATA);
    small.max_num_reqs = 0;
    void *st5 = (void *)1;
    CHECK_STATUS(ops->create(&small, &st5), ATTN_INVALID_ARGUMENT);
    CHECK(st5 == NULL);
    ops->destroy(st4);
    ops->destroy(st3);
    ops->destroy(st2);
    ops->destroy(st);
}

static void test_rocm(void)
{
    const attn_builder_ops *ops = &attn__builder_rocm;
    CHECK_STR(ops->type_name, "rocm");
    CHECK(ops->cg_support == ATTN_CG_ALWAYS && ops->reorder_batch_threshold == 0);
    void *st = make(ops, NULL);
    const void *out;
    attn_common_metadata cm = mixed();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    const attn_fa_metadata *m = out;
    CHECK(m->query_start_loc == mixed_qsl && m->num_decodes == 2 && !m->use_cascade);
    CHECK(m->cg_support == ATTN_CG_ALWAYS);
    CHECK_OK(ops->build_for_capture(st, &cm, &out)); /* ALWAYS */
    cm = cascade();
    CHECK_OK(ops->build(st, 8, &cm, false, &out));
    m = out;
    ARR_EQ(m->suffix_kv_lens, 3, 1, 4);
    ARR_EQ(m->prefix_kv_lens, 8);
    /* ROCM_AITER_FA's descriptor lowers the tier */
    attn_backend_desc aiter = {.name = "ROCM_AITER_FA", .cg_support = ATTN_CG_UNIFORM_BATCH};
    void *st2 = make(ops, &aiter);
    cm = mixed();
    CHECK_STATUS(ops->build_for_capture(st2, &cm, &out), ATTN_UNSUPPORTED);
    ops->destroy(st2);
    ops->destroy(st);
}

static void test_flashinfer(void)
{
    const attn_builder_ops *ops = &attn__builder_flashinfer;
    CHECK_STR(ops->type_name, "flashinfer");
    CHECK(ops->reorder_batch_threshold == 1 && ops->supports_update_block_table);
    void *st = make(ops, NULL);
    const void *out;
    attn_common_metadata cm = mixed();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    const attn_flashinfer_metadata *m = out;
    /* pages: ceil(5/4)=2, ceil(9/4)=3, ceil(10/4)=3, ceil(3/4)=1 */
    CHECK(m->qo_indptr == mixed_qsl);
    ARR_EQ(m->paged_kv_indptr, 0, 2, 5, 8, 9);
    ARR_EQ(m->paged_kv_indices, 7, 3, 1, 2, 9, 4, 5, 6, 8);
    ARR_EQ(m->paged_kv_last_page_len, 1, 1, 2, 3);
    CHECK(m->num_decodes == 2 && m->num_decode_tokens == 2);
    CHECK(m->num_prefills == 2 && m->num_prefill_tokens == 9);
    ARR_EQ(m->prefill_qo_indptr, 0, 6, 9);
    ARR_EQ(m->prefill_kv_indptr, 0, 3, 4);
    CHECK(!m->use_cascade && m->page_size == 4 && m->slot_mapping == mixed_slots);
    CHECK(m->cg_support == ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE);

    /* not reordered: decodes after a prefill go with the prefills */
    const int32_t bq[4] = {0, 3, 4, 5}, bseq[3] = {3, 9, 5};
    const int32_t bbt[3][3] = {{8, 0, 0}, {1, 2, 9}, {7, 3, 0}};
    const int64_t bsl[5] = {32, 33, 34, 36, 12};
    attn_common_metadata bad = {.query_start_loc = bq,
                                .seq_lens = bseq,
                                .num_reqs = 3,
                                .num_actual_tokens = 5,
                                .max_query_len = 3,
                                .max_seq_len = 9,
                                .block_table = &bbt[0][0],
                                .block_table_stride = 3,
                                .slot_mapping = bsl,
                                .causal = true,
                                .block_size = 4};
    CHECK_OK(attn_common_metadata_check(&bad, 16));
    CHECK_OK(ops->build(st, 0, &bad, false, &out));
    m = out;
    CHECK(m->num_decodes == 0 && m->num_prefills == 3 && m->num_prefill_tokens == 5);
    ARR_EQ(m->prefill_qo_indptr, 0, 3, 4, 5);

    /* cascade: shared pages once, suffix pages per request */
    cm = cascade();
    CHECK_OK(ops->build(st, 8, &cm, false, &out));
    m = out;
    CHECK(m->use_cascade && m->common_prefix_len == 8);
    ARR_EQ(m->shared_qo_indptr, 0, 4);
    ARR_EQ(m->shared_kv_page_indptr, 0, 2);
    ARR_EQ(m->shared_kv_page_indices, 10, 11);
    CHECK(m->shared_kv_last_page_len == 4);
    ARR_EQ(m->paged_kv_indptr, 0, 1, 2, 3);
    ARR_EQ(m->paged_kv_indices, 12, 13, 14);
    ARR_EQ(m->paged_kv_last_page_len, 3, 1, 4);
    CHECK(m->num_decodes == 2 && m->num_prefills == 1 && m->num_prefill_tokens == 2);

    /* update_block_table regathers the pages only */
    const void *second;
    void *st2 = make(ops, NULL);
    const int32_t bt2[3][3] = {{20, 21, 22}, {20, 21, 23}, {20, 21, 24}};
    const int64_t sl2[4] = {90, 92, 98, 99};
    CHECK_OK(ops->update_block_table(st2, out, &bt2[0][0], 3, sl2, &second));
    const attn_flashinfer_metadata *m2 = second;
    CHECK(m2->paged_kv_indptr == m->paged_kv_indptr);
    ARR_EQ(m2->paged_kv_indices, 22, 23, 24);
    ARR_EQ(m2->shared_kv_page_indices, 20, 21);
    CHECK(m2->slot_mapping == sl2);
    ARR_EQ(m->paged_kv_indices, 12, 13, 14); /* first group's copy unchanged */

    /* one request (a chunked prefill: all prefill) */
    cm = one();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    m = out;
    ARR_EQ(m->paged_kv_indptr, 0, 3);
    ARR_EQ(m->paged_kv_indices, 2, 0, 5);
    ARR_EQ(m->paged_kv_last_page_len, 4);
    CHECK(m->num_decodes == 0 && m->num_prefills == 1 && m->num_prefill_tokens == 4);
    ARR_EQ(m->prefill_qo_indptr, 0, 4);

    /* empty */
    cm = empty();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    m = out;
    CHECK(m->num_reqs == 0 && m->num_decodes == 0 && m->num_prefills == 0);
    ARR_EQ(m->paged_kv_indptr, 0);

    /* capture: single-token decodes only */
    cm = mixed();
    CHECK_STATUS(ops->build_for_capture(st, &cm, &out), ATTN_UNSUPPORTED);
    CHECK_CONTAINS(attn_last_error(), "UNIFORM_SINGLE_TOKEN_DECODE");
    const int32_t uq[3] = {0, 1, 2}, us[2] = {5, 9};
    const int32_t ubt[2][3] = {{7, 3, 0}, {1, 2, 9}};
    const int64_t usl[2] = {12, 36};
    attn_common_metadata u = {.query_start_loc = uq,
                              .seq_lens = us,
                              .num_reqs = 2,
                              .num_actual_tokens = 2,
                              .max_query_len = 1,
                              .max_seq_len = 9,
                              .block_table = &ubt[0][0],
                              .block_table_stride = 3,
                              .slot_mapping = usl,
                              .causal = true,
                              .block_size = 4};
    CHECK_OK(ops->build_for_capture(st, &u, &out));
    /* TRTLLM-capable descriptor, but 8 heads do not split over 3 KV heads */
    attn_backend_desc trt = {.name = "FLASHINFER", .cg_support = ATTN_CG_UNIFORM_BATCH};
    attn_layer_params odd = {.num_heads = 8, .num_kv_heads = 3, .head_size = 64};
    attn_builder_init init = {.desc = &trt,
                              .layer = &odd,
                              .block_size = 4,
                              .num_blocks = 16,
                              .max_num_reqs = 8,
                              .max_num_tokens = 64,
                              .max_blocks_per_req = 4};
    void *st3;
    CHECK_OK(ops->create(&init, &st3));
    CHECK_OK(ops->build(st3, 0, &u, false, &out));
    CHECK(((const attn_flashinfer_metadata *)out)->cg_support ==
          ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE);
    ops->destroy(st3);
    init.layer = &layer;
    CHECK_OK(ops->create(&init, &st3));
    CHECK_OK(ops->build(st3, 0, &u, false, &out));
    CHECK(((const attn_flashinfer_metadata *)out)->cg_support == ATTN_CG_UNIFORM_BATCH);

    char buf[4096];
    cm = mixed();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    CHECK(ops->describe(out, buf, sizeof buf) > 0);
    CHECK_CONTAINS(buf, "\"paged_kv_indices\":[7,3,1,2,9,4,5,6,8]");
    CHECK_CONTAINS(buf, "\"num_decodes\":2");
    ops->destroy(st3);
    ops->destroy(st2);
    ops->destroy(st);
}

static void test_triton(void)
{
    const attn_builder_ops *ops = &attn__builder_triton;
    CHECK_STR(ops->type_name, "triton");
    void *st = make(ops, NULL);
    const void *out;
    attn_common_metadata cm = mixed();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    const attn_triton_metadata *m = out;
    /* 8 heads / 2 KV heads = 4 per KV head: block_m 16, block_q 4.
     * q blocks: 1, 1, ceil(6/4)=2, 1 */
    CHECK(m->num_queries_per_kv == 4 && m->block_m == 16 && m->block_q == 4);
    ARR_EQ(m->q_block_start, 0, 1, 2, 4, 5);
    CHECK(m->total_q_blocks == 5);
    CHECK(!m->use_3d && m->seq_threshold_3d == 64 && m->num_segments == 16);
    CHECK(m->query_start_loc == mixed_qsl && m->block_table == &mixed_bt[0][0]);
    CHECK(m->cg_support == ATTN_CG_ALWAYS);
    /* a decode-only batch takes the 3D kernel */
    const int32_t uq[3] = {0, 1, 2}, us[2] = {5, 9};
    const int32_t ubt[2][3] = {{7, 3, 0}, {1, 2, 9}};
    const int64_t usl[2] = {12, 36};
    attn_common_metadata u = {.query_start_loc = uq,
                              .seq_lens = us,
                              .num_reqs = 2,
                              .num_actual_tokens = 2,
                              .max_query_len = 1,
                              .max_seq_len = 9,
                              .block_table = &ubt[0][0],
                              .block_table_stride = 3,
                              .slot_mapping = usl,
                              .causal = true,
                              .block_size = 4};
    CHECK_OK(ops->build(st, 0, &u, false, &out));
    m = out;
    CHECK(m->use_3d);
    ARR_EQ(m->q_block_start, 0, 1, 2);
    /* cascade is not a Triton path: common_prefix_len is ignored */
    cm = cascade();
    CHECK_OK(ops->build(st, 8, &cm, false, &out));
    m = out;
    ARR_EQ(m->q_block_start, 0, 1, 2, 3);
    /* one request: 4 tokens = one q block */
    cm = one();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    ARR_EQ(((const attn_triton_metadata *)out)->q_block_start, 0, 1);
    cm = empty();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    m = out;
    CHECK(m->total_q_blocks == 0 && !m->use_3d);
    /* 40 query heads per KV head: block_m 64, block_q 1 */
    attn_layer_params wide = {.num_heads = 40, .num_kv_heads = 1, .head_size = 64};
    attn_builder_init init = {.layer = &wide,
                              .block_size = 4,
                              .num_blocks = 16,
                              .max_num_reqs = 8,
                              .max_num_tokens = 64,
                              .max_blocks_per_req = 4};
    void *st2;
    CHECK_OK(ops->create(&init, &st2));
    cm = mixed();
    CHECK_OK(ops->build(st2, 0, &cm, false, &out));
    m = out;
    CHECK(m->block_m == 64 && m->block_q == 1 && m->seq_threshold_3d == 128);
    ARR_EQ(m->q_block_start, 0, 1, 2, 8, 11);
    /* update_block_table */
    const void *second;
    const int32_t bt2[4][4] = {{0}};
    const int64_t sl2[11] = {0};
    CHECK_OK(ops->update_block_table(st, out, &bt2[0][0], 4, sl2, &second));
    CHECK(((const attn_triton_metadata *)second)->block_table == &bt2[0][0]);
    CHECK(((const attn_triton_metadata *)second)->q_block_start == m->q_block_start);
    ops->destroy(st2);
    ops->destroy(st);
}

static void test_flex(void)
{
    const attn_builder_ops *ops = &attn__builder_flex;
    CHECK_STR(ops->type_name, "flex");
    void *st = make(ops, NULL);
    const void *out;
    attn_common_metadata cm = mixed();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    const attn_flex_metadata *m = out;
    ARR_EQ(m->doc_ids, 0, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3);
    ARR_EQ(m->query_pos, 4, 8, 4, 5, 6, 7, 8, 9, 0, 1, 2);
    /* one tile per request (all queries <= 16 tokens).
     * r0 pos 4: blocks 0..1 visible, block 0 full ((0+1)*4-1 = 3 <= 4)
     * r1 pos 8: blocks 0..2, full 0..1
     * r2 pos 4..9: blocks 0..2, full: block 0 only (3 <= 4)
     * r3 pos 0..2: block 0 partial */
    CHECK(m->num_q_tiles == 4 && m->q_block_size == 16);
    ARR_EQ(m->q_tile_req, 0, 1, 2, 3);
    ARR_EQ(m->q_tile_start, 0, 1, 2, 8);
    ARR_EQ(m->q_tile_len, 1, 1, 6, 3);
    ARR_EQ(m->kv_start_block, 0, 0, 0, 0);
    ARR_EQ(m->kv_num_blocks, 2, 3, 3, 1);
    ARR_EQ(m->full_kv_start_block, 0, 0, 0, 0);
    ARR_EQ(m->full_kv_num_blocks, 1, 2, 1, 0);
    /* non-causal: every block of the sequence, the last partial one masked */
    cm.causal = false;
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    m = out;
    ARR_EQ(m->kv_num_blocks, 2, 3, 3, 1);
    ARR_EQ(m->full_kv_num_blocks, 1, 2, 2, 0);
    /* sliding window 3 on the chunk: queries 4..9 see keys from 2 (pos 4)
     * to 9; every query sees keys 7..? -> lo_all = 9-3+1 = 7, hi_all = 4:
     * nothing is full. kv blocks 0..2 (keys 2..9). */
    attn_layer_params win = layer;
    win.sliding_window = 3;
    attn_builder_init init = {.layer = &win,
                              .block_size = 4,
                              .num_blocks = 16,
                              .max_num_reqs = 8,
                              .max_num_tokens = 64,
                              .max_blocks_per_req = 4};
    void *st2;
    CHECK_OK(ops->create(&init, &st2));
    cm = mixed();
    CHECK_OK(ops->build(st2, 0, &cm, false, &out));
    m = out;
    /* r0 pos 4: keys 2..4 -> blocks 0..1, full none (block 0 has key 0 < 2)
     * r1 pos 8: keys 6..8 -> blocks 1..2, full none
     * r3 pos 0..2: block 0 */
    ARR_EQ(m->kv_start_block, 0, 1, 0, 0);
    ARR_EQ(m->kv_num_blocks, 2, 2, 3, 1);
    ARR_EQ(m->full_kv_num_blocks, 0, 0, 0, 0);
    CHECK(m->sliding_window == 3);
    /* a long query spans several tiles of one request */
    const int32_t lq[2] = {0, 40}, ls[1] = {40};
    int32_t lbt[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    int64_t lsl[40];
    for (int i = 0; i < 40; i++)
        lsl[i] = i;
    attn_common_metadata l = {.query_start_loc = lq,
                              .seq_lens = ls,
                              .num_reqs = 1,
                              .num_actual_tokens = 40,
                              .max_query_len = 40,
                              .max_seq_len = 40,
                              .block_table = lbt,
                              .block_table_stride = 10,
                              .slot_mapping = lsl,
                              .causal = true,
                              .block_size = 4};
    attn_builder_init big = {.layer = &layer,
                             .block_size = 4,
                             .num_blocks = 16,
                             .max_num_reqs = 8,
                             .max_num_tokens = 64,
                             .max_blocks_per_req = 10};
    void *st3;
    CHECK_OK(ops->create(&big, &st3));
    CHECK_OK(attn_common_metadata_check(&l, 16));
    CHECK_OK(ops->build(st3, 0, &l, false, &out));
    m = out;
    /* tiles [0,16) [16,32) [32,40): visible up to the tile's last key,
     * full up to its first query */
    CHECK(m->num_q_tiles == 3);
    ARR_EQ(m->q_tile_start, 0, 16, 32);
    ARR_EQ(m->q_tile_len, 16, 16, 8);
    ARR_EQ(m->kv_num_blocks, 4, 8, 10);
    ARR_EQ(m->full_kv_num_blocks, 0, 4, 8);
    /* cascade: tiles index the table, nothing listed twice, prefix ignored */
    cm = cascade();
    CHECK_OK(ops->build(st, 8, &cm, false, &out));
    m = out;
    ARR_EQ(m->q_tile_req, 0, 1, 2);
    ARR_EQ(m->kv_num_blocks, 3, 3, 3);
    cm = one();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    m = out;
    ARR_EQ(m->query_pos, 8, 9, 10, 11);
    ARR_EQ(m->kv_num_blocks, 3);
    ARR_EQ(m->full_kv_num_blocks, 2);
    cm = empty();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    CHECK(((const attn_flex_metadata *)out)->num_q_tiles == 0);
    char buf[4096];
    cm = mixed();
    CHECK_OK(ops->build(st, 0, &cm, false, &out));
    CHECK(ops->describe(out, buf, sizeof buf) > 0);
    CHECK_CONTAINS(buf, "\"doc_ids\":[0,1,2,2,2,2,2,2,3,3,3]");
    ops->destroy(st3);
    ops->destroy(st2);
    ops->destroy(st);
}

int main(void)
{
    check_all_inputs_valid();
    test_common_prefix();
    test_flash_attn();
    test_rocm();
    test_flashinfer();
    test_triton();
    test_flex();
    return attn_test_finish("test_meta_builders");
}
