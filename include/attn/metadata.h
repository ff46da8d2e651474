/* Per-step common attention metadata (vLLM's CommonAttentionMetadata).
 * Rebuilt from the live batch every step into runner-owned memory; backends'
 * builders turn it into what their kernels consume. Pointers are borrowed:
 * the struct owns nothing. */
#ifndef ATTN_METADATA_H
#define ATTN_METADATA_H

#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_common_metadata {
    const int32_t *query_start_loc; /* [num_reqs + 1], starts at 0, non-decreasing */
    const int32_t *seq_lens;        /* [num_reqs] context incl. this step's tokens */
    int num_reqs;
    int num_actual_tokens; /* == query_start_loc[num_reqs] */
    int max_query_len;
    int max_seq_len;
    const int32_t *block_table; /* [num_reqs][block_table_stride] block ids */
    int block_table_stride;
    const int64_t *slot_mapping; /* [num_actual_tokens] block_id*block_size+offset; -1 = pad */
    bool causal;
    int block_size; /* tokens per KV block */
    /* Optional (NULL when absent). */
    const int32_t *positions;        /* [num_actual_tokens] */
    const uint8_t *is_prefilling;    /* [num_reqs] */
    const int32_t *encoder_seq_lens; /* [num_reqs] cross attention */
} attn_common_metadata;

/* Limits: num_reqs <= ATTN_MAX_NUM_REQS, every length <= ATTN_MAX_SEQ_LEN,
 * 1 <= block_size <= ATTN_MAX_BLOCK_SIZE (attn/types.h); lengths are
 * combined in 64-bit arithmetic, so no value overflows. */
/* Checks internal consistency and that every block id is < num_blocks and
 * every slot lies in its request's blocks. Touches nothing; on failure
 * returns ATTN_BAD_METADATA with the reason in attn_last_error(). */
ATTN_API attn_status attn_common_metadata_check(const attn_common_metadata *cm, int num_blocks);

ATTN_EXTERN_C_END

#endif
