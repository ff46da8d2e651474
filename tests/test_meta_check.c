/* attn_common_metadata_check: a valid hand-worked batch passes, and each
 * inconsistency the checker knows is reported alone, with ATTN_BAD_METADATA
 * and a message naming it, without touching the metadata. */
#include "metadata/builders.h"
#include "test.h"

/* Block size 4. r0 decode (seq 5), r1 decode (seq 9), r2 chunked prefill
 * (6 new tokens after 4), r3 fresh prefill (3 tokens). */
typedef struct batch {
    int32_t qsl[5];
    int32_t seq[4];
    int32_t bt[4][4];
    int64_t slots[11];
    int32_t pos[11];
    uint8_t pre[4];
    int32_t enc[4];
    attn_common_metadata cm;
} batch;

static void batch_init(batch *b)
{
    const int32_t qsl[5] = {0, 1, 2, 8, 11};
    const int32_t seq[4] = {5, 9, 10, 3};
    const int32_t bt[4][4] = {{7, 3, -1, -1}, {1, 2, 9, -1}, {4, 5, 6, -1}, {8, -1, -1, -1}};
    const int64_t slots[11] = {12, 36, 20, 21, 22, 23, 24, 25, 32, 33, 34};
    const int32_t pos[11] = {4, 8, 4, 5, 6, 7, 8, 9, 0, 1, 2};
    const uint8_t pre[4] = {0, 0, 1, 0};
    memcpy(b->qsl, qsl, sizeof qsl);
    memcpy(b->seq, seq, sizeof seq);
    memcpy(b->bt, bt, sizeof bt);
    memcpy(b->slots, slots, sizeof slots);
    memcpy(b->pos, pos, sizeof pos);
    memcpy(b->pre, pre, sizeof pre);
    memset(b->enc, 0, sizeof b->enc);
    attn_common_metadata cm = {.query_start_loc = b->qsl,
                               .seq_lens = b->seq,
                               .num_reqs = 4,
                               .num_actual_tokens = 11,
                               .max_query_len = 6,
                               .max_seq_len = 10,
                               .block_table = &b->bt[0][0],
                               .block_table_stride = 4,
                               .slot_mapping = b->slots,
                               .causal = true,
                               .block_size = 4,
                               .positions = b->pos,
                               .is_prefilling = b->pre,
                               .encoder_seq_lens = b->enc};
    b->cm = cm;
}

/* Runs the checker on a broken copy; checks the status, the message and
 * that the batch's bytes are unchanged. */
static void expect_bad(batch *b, int num_blocks, const char *needle, int line)
{
    batch before = *b;
    attn_status st = attn_common_metadata_check(&b->cm, num_blocks);
    attn_test_checks++;
    if (st != ATTN_BAD_METADATA || !strstr(attn_last_error(), needle)) {
        attn_test_failures++;
        fprintf(stderr, "line %d: got %s \"%s\", want BAD_METADATA containing \"%s\"\n", line,
                attn_status_name(st), attn_last_error(), needle);
    }
    CHECK(memcmp(&before, b, sizeof before) == 0);
}

#define EXPECT_BAD(b, nb, needle) expect_bad(b, nb, needle, __LINE__)

int main(void)
{
    batch b;
    batch_init(&b);
    CHECK_OK(attn_common_metadata_check(&b.cm, 10));
    CHECK_STATUS(attn_common_metadata_check(NULL, 10), ATTN_NULL_ARGUMENT);

    /* query_start_loc not starting at 0 */
    batch_init(&b);
    b.qsl[0] = 1;
    EXPECT_BAD(&b, 10, "query_start_loc[0] is 1, must be 0");

    /* query_start_loc decreasing */
    batch_init(&b);
    b.qsl[2] = 9; /* [3] = 8 < [2] = 9 */
    EXPECT_BAD(&b, 10, "query_start_loc is not non-decreasing: [3] = 8 < [2] = 9");

    /* num_actual_tokens mismatch */
    batch_init(&b);
    b.cm.num_actual_tokens = 12;
    EXPECT_BAD(&b, 10, "num_actual_tokens is 12 but query_start_loc[4] is 11");

    /* a query longer than its sequence */
    batch_init(&b);
    b.seq[3] = 2;
    EXPECT_BAD(&b, 10, "request 3: query length 3 is longer than its sequence");

    /* negative sequence length */
    batch_init(&b);
    b.seq[0] = -1;
    EXPECT_BAD(&b, 10, "seq_lens[0] is -1");

    /* max_query_len wrong (both ways) */
    batch_init(&b);
    b.cm.max_query_len = 5;
    EXPECT_BAD(&b, 10, "max_query_len is 5, the longest query is 6");
    batch_init(&b);
    b.cm.max_query_len = 7;
    EXPECT_BAD(&b, 10, "max_query_len is 7, the longest query is 6");

    /* max_seq_len below the longest sequence (an upper bound is allowed) */
    batch_init(&b);
    b.cm.max_seq_len = 9;
    EXPECT_BAD(&b, 10, "max_seq_len is 9, below the longest sequence (10)");
    batch_init(&b);
    b.cm.max_seq_len = 16;
    CHECK_OK(attn_common_metadata_check(&b.cm, 10));
    b.cm.max_seq_len = 17; /* more than 4 blocks x 4 can hold */
    EXPECT_BAD(&b, 10, "max_seq_len is 17, more than the block table can address (4 blocks x 4)");

    /* block id outside the pool */
    batch_init(&b);
    b.bt[1][2] = 10;
    EXPECT_BAD(&b, 10, "block_table[1][2] is 10, outside the pool of 10 blocks");
    batch_init(&b);
    b.bt[0][0] = -3;
    EXPECT_BAD(&b, 10, "block_table[0][0] is -3");
    /* the same batch against a smaller pool */
    batch_init(&b);
    EXPECT_BAD(&b, 9, "block_table[1][2] is 9, outside the pool of 9 blocks");

    /* block table too short for its sequence (stride 3: 12 tokens fit) */
    {
        int32_t qsl[3] = {0, 1, 2}, seq[2] = {4, 12}, bt[6] = {0, -1, -1, 1, 2, 3};
        int64_t sl[2] = {3, 3 * 4 + 3};
        attn_common_metadata cm = {.query_start_loc = qsl,
                                   .seq_lens = seq,
                                   .num_reqs = 2,
                                   .num_actual_tokens = 2,
                                   .max_query_len = 1,
                                   .max_seq_len = 12,
                                   .block_table = bt,
                                   .block_table_stride = 3,
                                   .slot_mapping = sl,
                                   .causal = true,
                                   .block_size = 4};
        CHECK_OK(attn_common_metadata_check(&cm, 4));
        seq[1] = 13;
        cm.max_seq_len = 13;
        CHECK_STATUS(attn_common_metadata_check(&cm, 4), ATTN_BAD_METADATA);
        CHECK_CONTAINS(attn_last_error(),
                       "request 1: block table too short: 13 tokens need 4 blocks, the table "
                       "holds 3");
        /* every row fits but the claimed maximum cannot be addressed */
        seq[1] = 12;
        cm.max_seq_len = 13;
        CHECK_STATUS(attn_common_metadata_check(&cm, 4), ATTN_BAD_METADATA);
        CHECK_CONTAINS(attn_last_error(),
                       "max_seq_len is 13, more than the block table can address (3 blocks x 4)");
    }

    /* slot outside the pool */
    batch_init(&b);
    b.slots[9] = 40;
    EXPECT_BAD(&b, 10, "slot_mapping[9] (request 3) is 40, outside the pool's 40 slots");
    /* slot in a block that is not the request's */
    batch_init(&b);
    b.slots[0] = 4 * 9 + 1; /* block 9 belongs to r1 */
    EXPECT_BAD(&b, 10,
               "slot_mapping[0] (request 0) is 37 in block 9, which is not one of the "
               "request's blocks");
    /* slot in the request's blocks but at the wrong position */
    batch_init(&b);
    b.slots[3] = 22;
    EXPECT_BAD(&b, 10, "slot_mapping[3] (request 2, position 5) is 22, expected 21");
    /* -1 is padding and accepted */
    batch_init(&b);
    b.slots[4] = -1;
    CHECK_OK(attn_common_metadata_check(&b.cm, 10));

    /* table and slots must come together */
    batch_init(&b);
    b.cm.slot_mapping = NULL;
    EXPECT_BAD(&b, 10, "slot_mapping is NULL while block_table is given");
    batch_init(&b);
    b.cm.block_table = NULL;
    EXPECT_BAD(&b, 10, "block_table is NULL while slot_mapping is given");
    /* neither: attention on the pass's own K/V (encoder-only) */
    batch_init(&b);
    b.cm.block_table = NULL;
    b.cm.slot_mapping = NULL;
    CHECK_OK(attn_common_metadata_check(&b.cm, 10));

    /* optional fields */
    batch_init(&b);
    b.pos[5] = 3;
    EXPECT_BAD(&b, 10, "positions[5] (request 2) is 3, expected 7");
    batch_init(&b);
    b.pre[1] = 2;
    EXPECT_BAD(&b, 10, "is_prefilling[1] is 2");
    batch_init(&b);
    b.enc[2] = -5;
    EXPECT_BAD(&b, 10, "encoder_seq_lens[2] is -5");

    /* negative request count, bad block size */
    batch_init(&b);
    b.cm.num_reqs = -1;
    EXPECT_BAD(&b, 10, "num_reqs is -1");
    batch_init(&b);
    b.cm.block_size = 0;
    EXPECT_BAD(&b, 10, "block_size is 0");
    batch_init(&b);
    b.cm.seq_lens = NULL;
    EXPECT_BAD(&b, 10, "seq_lens is NULL with 4 requests");

    /* the pool size itself */
    batch_init(&b);
    CHECK_STATUS(attn_common_metadata_check(&b.cm, 0), ATTN_INVALID_ARGUMENT);

    /* the empty batch is valid, with or without arrays */
    {
        int32_t qsl[1] = {0};
        attn_common_metadata cm = {
            .query_start_loc = qsl, .num_reqs = 0, .block_size = 16, .causal = true};
        CHECK_OK(attn_common_metadata_check(&cm, 1));
        cm.query_start_loc = NULL;
        CHECK_OK(attn_common_metadata_check(&cm, 1));
        cm.num_actual_tokens = 1;
        CHECK_STATUS(attn_common_metadata_check(&cm, 1), ATTN_BAD_METADATA);
    }
    return attn_test_finish("test_meta_check");
}
