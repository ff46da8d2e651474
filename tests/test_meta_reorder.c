/* Reordering decodes to the front (reorder_batch_threshold) and the
 * decode/prefill split builders take from it. */
#include "metadata/builders.h"
#include "test.h"

int main(void)
{
    int32_t order[6];
    /* query lengths 3 1 5 1 1 2 */
    const int32_t q[6] = {3, 1, 5, 1, 1, 2};
    CHECK(attn__reorder_decodes_first(q, 6, 1, order) == 3);
    const int32_t want1[6] = {1, 3, 4, 0, 2, 5};
    CHECK(memcmp(order, want1, sizeof want1) == 0);
    /* speculative decoding: queries of up to 3 tokens count as decodes */
    CHECK(attn__reorder_decodes_first(q, 6, 3, order) == 5);
    const int32_t want3[6] = {0, 1, 3, 4, 5, 2};
    CHECK(memcmp(order, want3, sizeof want3) == 0);
    /* threshold 0: no reordering */
    CHECK(attn__reorder_decodes_first(q, 6, 0, order) == 0);
    const int32_t ident[6] = {0, 1, 2, 3, 4, 5};
    CHECK(memcmp(order, ident, sizeof ident) == 0);
    CHECK(attn__reorder_decodes_first(q, 0, 1, order) == 0);

    /* the split on the reordered batch: qsl of lengths 1 1 1 3 5 2 */
    const int32_t qsl[7] = {0, 1, 2, 3, 6, 11, 13};
    attn_common_metadata cm = {
        .query_start_loc = qsl, .num_reqs = 6, .num_actual_tokens = 13, .block_size = 16};
    int nd, ndt;
    CHECK_OK(attn__split_decodes_prefills(&cm, 1, false, &nd, &ndt));
    CHECK(nd == 3 && ndt == 3);
    /* threshold 3 takes the 3-token query too and stops at the 5: the
     * 2-token query after it goes with the prefills */
    CHECK_OK(attn__split_decodes_prefills(&cm, 3, false, &nd, &ndt));
    CHECK(nd == 4 && ndt == 6);
    /* require_uniform: decodes must all have the first one's length */
    const int32_t qsl2[5] = {0, 2, 4, 5, 9}; /* 2 2 1 4 */
    attn_common_metadata u = {
        .query_start_loc = qsl2, .num_reqs = 4, .num_actual_tokens = 9, .block_size = 16};
    CHECK_OK(attn__split_decodes_prefills(&u, 4, false, &nd, &ndt));
    CHECK(nd == 4 && ndt == 9);
    CHECK_OK(attn__split_decodes_prefills(&u, 4, true, &nd, &ndt));
    CHECK(nd == 2 && ndt == 4);
    const int32_t qsl3[5] = {0, 2, 4, 9, 12}; /* 2 2 5 3 */
    u.query_start_loc = qsl3;
    u.num_actual_tokens = 12;
    CHECK_OK(attn__split_decodes_prefills(&u, 2, true, &nd, &ndt));
    CHECK(nd == 2 && ndt == 4);
    /* all prefills, empty */
    const int32_t qsl4[3] = {0, 4, 9};
    attn_common_metadata p = {
        .query_start_loc = qsl4, .num_reqs = 2, .num_actual_tokens = 9, .block_size = 16};
    CHECK_OK(attn__split_decodes_prefills(&p, 1, false, &nd, &ndt));
    CHECK(nd == 0 && ndt == 0);
    p.num_reqs = 0;
    p.num_actual_tokens = 0;
    CHECK_OK(attn__split_decodes_prefills(&p, 1, false, &nd, &ndt));
    CHECK(nd == 0);

    /* end to end: lay a mixed batch out in reorder order, then FlashInfer
     * splits it. Requests (query, seq, blocks of 4): A prefill 3/3 [0],
     * B decode 1/6 [1 2], C decode 1/2 [3]. */
    const int32_t qlen[3] = {3, 1, 1}, seq[3] = {3, 6, 2};
    const int32_t rows[3][2] = {{0, 0}, {1, 2}, {3, 0}};
    int32_t ord[3];
    CHECK(attn__reorder_decodes_first(qlen, 3, attn__builder_flashinfer.reorder_batch_threshold,
                                      ord) == 2);
    int32_t bqsl[4] = {0}, bseq[3], bbt[3][2];
    int64_t slots[5];
    int tok = 0;
    for (int i = 0; i < 3; i++) {
        int r = ord[i];
        bseq[i] = seq[r];
        memcpy(bbt[i], rows[r], sizeof rows[r]);
        for (int j = 0; j < qlen[r]; j++) {
            int pos = seq[r] - qlen[r] + j;
            slots[tok++] = (int64_t)rows[r][pos / 4] * 4 + pos % 4;
        }
        bqsl[i + 1] = tok;
    }
    attn_common_metadata b = {.query_start_loc = bqsl,
                              .seq_lens = bseq,
                              .num_reqs = 3,
                              .num_actual_tokens = 5,
                              .max_query_len = 3,
                              .max_seq_len = 6,
                              .block_table = &bbt[0][0],
                              .block_table_stride = 2,
                              .slot_mapping = slots,
                              .causal = true,
                              .block_size = 4};
    CHECK_OK(attn_common_metadata_check(&b, 4));
    attn_layer_params layer = {.num_heads = 4, .num_kv_heads = 4, .head_size = 64};
    attn_builder_init init = {.layer = &layer,
                              .block_size = 4,
                              .num_blocks = 4,
                              .max_num_reqs = 4,
                              .max_num_tokens = 8,
                              .max_blocks_per_req = 2};
    void *st;
    CHECK_OK(attn__builder_flashinfer.create(&init, &st));
    const void *out;
    CHECK_OK(attn__builder_flashinfer.build(st, 0, &b, false, &out));
    const attn_flashinfer_metadata *m = out;
    CHECK(m->num_decodes == 2 && m->num_decode_tokens == 2 && m->num_prefills == 1 &&
          m->num_prefill_tokens == 3);
    const int32_t want_idx[4] = {1, 2, 3, 0};
    CHECK(memcmp(m->paged_kv_indices, want_idx, sizeof want_idx) == 0);
    attn__builder_flashinfer.destroy(st);
    return attn_test_finish("test_meta_reorder");
}
