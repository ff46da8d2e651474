/* Merging partial attention states (vLLM's merge_attn_states).
 *
 * Attention over a key set split into parts (context-parallel shards, split
 * KV) gives, per (token, head) row, each part's normalised output o_i and
 * its log-sum-exp lse_i. The exact result over all keys is
 *     o = sum_i exp(lse_i - L) o_i,   L = log sum_i exp(lse_i).
 * Each part states the base its LSE is in (the backend's lse_base): the
 * merge converts base-2 to natural log first, because reading a base-2 LSE
 * as natural log silently gives the wrong weights. A part with lse -inf (no
 * keys) contributes nothing; +inf is treated as -inf, as vLLM does. */
#ifndef ATTN_MERGE_H
#define ATTN_MERGE_H

#include "attn/config.h"
#include "attn/layer.h"
#include "attn/platform.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_partial_state {
    const float *out;   /* [rows][head_dim], normalised over the part's keys */
    const float *lse;   /* [rows], in base `base` */
    attn_lse_base base; /* as the producing backend declares (desc->lse_base) */
    int64_t row_stride; /* floats between rows of out; 0 = head_dim */
} attn_partial_state;

/* out [rows][head_dim] (fp32) and out_lse [rows] (optional, natural log)
 * from num_parts parts. ATTN_INVALID_ARGUMENT for num_parts < 1, rows < 0,
 * head_dim < 1 or a base outside attn_lse_base; nothing is written then. */
ATTN_API attn_status attn_merge_states(const attn_partial_state *parts, int num_parts, int64_t rows,
                                       int head_dim, float *out, float *out_lse);

/* ATTN_OK when partial states from this backend can be merged (it returns
 * the LSE for decode); ATTN_UNSUPPORTED naming the backend otherwise. */
ATTN_API attn_status attn_merge_check_backend(const attn_backend_desc *d);

/* A backend's result as a part: refuses (as above) a backend that cannot
 * return an LSE, else fills *p with the backend's declared base. */
ATTN_API attn_status attn_partial_from_backend(const attn_backend_desc *d, const float *out,
                                               const float *lse, attn_partial_state *p);

ATTN_EXTERN_C_END

#endif
