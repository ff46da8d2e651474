/* The common attention metadata: its checker and the helpers every builder
 * shares (common-prefix detection, decode-first reordering and the
 * decode/prefill split, the capture gate).
 *
 * Contract of attn_common_metadata_check: read-only; the first violation
 * found is reported as ATTN_BAD_METADATA with a message naming the field,
 * the request/token and both numbers. The order of checks is fixed (shape
 * of query_start_loc, token count, lengths, maxima, block table, slots,
 * optional fields) so a test can provoke each one alone. */
#include <stdio.h>
#include <string.h>

#include "attn/metadata.h"
#include "metadata/builders.h"
#include "util/error.h"

#define BAD(...) attn__fail(ATTN_BAD_METADATA, __VA_ARGS__)

static int64_t attn__cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static bool attn__row_has_block(const int32_t *row, int64_t n, int64_t block)
{
    for (int64_t k = 0; k < n; k++)
        if (row[k] == block) return true;
    return false;
}

static attn_status attn__check_slots(const attn_common_metadata *cm, int num_blocks)
{
    const int64_t bs = cm->block_size;
    const int64_t nslots = (int64_t)num_blocks * bs;
    for (int r = 0; r < cm->num_reqs; r++) {
        int32_t q0 = cm->query_start_loc[r], q1 = cm->query_start_loc[r + 1];
        int64_t ctx = (int64_t)cm->seq_lens[r] - (q1 - q0);
        const int32_t *row = cm->block_table + (size_t)r * (size_t)cm->block_table_stride;
        int64_t nblk = attn__cdiv(cm->seq_lens[r], bs);
        for (int32_t i = q0; i < q1; i++) {
            int64_t pos = ctx + (i - q0);
            int64_t s = cm->slot_mapping[i];
            if (s == -1) continue;
            if (s < 0 || s >= nslots)
                return BAD("slot_mapping[%d] (request %d) is %lld, outside the pool's %lld slots "
                           "(%d blocks x %lld)",
                           i, r, (long long)s, (long long)nslots, num_blocks, (long long)bs);
            int64_t want = (int64_t)row[pos / bs] * bs + pos % bs;
            if (s == want) continue;
            if (!attn__row_has_block(row, nblk, s / bs))
                return BAD("slot_mapping[%d] (request %d) is %lld in block %lld, which is not one "
                           "of the request's blocks",
                           i, r, (long long)s, (long long)(s / bs));
            return BAD("slot_mapping[%d] (request %d, position %lld) is %lld, expected %lld "
                       "(block_table[%d][%lld] * %lld + %lld)",
                       i, r, (long long)pos, (long long)s, (long long)want, r,
                       (long long)(pos / bs), (long long)bs, (long long)(pos % bs));
        }
    }
    return ATTN_OK;
}

attn_status attn_common_metadata_check(const attn_common_metadata *cm, int num_blocks)
{
    ATTN__CHECK_NULL(cm);
    const int n = cm->num_reqs;
    if (n < 0 || n > ATTN_MAX_NUM_REQS)
        return BAD("num_reqs is %d, must be in [0, %d]", n, ATTN_MAX_NUM_REQS);
    if (cm->block_size < 1 || cm->block_size > ATTN_MAX_BLOCK_SIZE)
        return BAD("block_size is %d, must be in [1, %d]", cm->block_size, ATTN_MAX_BLOCK_SIZE);
    if (n > 0 && (!cm->query_start_loc || !cm->seq_lens))
        return BAD("%s is NULL with %d requests",
                   cm->query_start_loc ? "seq_lens" : "query_start_loc", n);
    const int32_t *qsl = cm->query_start_loc;
    if (qsl && qsl[0] != 0) return BAD("query_start_loc[0] is %d, must be 0", qsl[0]);
    for (int r = 0; qsl && r < n; r++)
        if (qsl[r + 1] < qsl[r])
            return BAD("query_start_loc is not non-decreasing: [%d] = %d < [%d] = %d", r + 1,
                       qsl[r + 1], r, qsl[r]);
    int32_t total = qsl ? qsl[n] : 0;
    if (cm->num_actual_tokens != total)
        return BAD("num_actual_tokens is %d but query_start_loc[%d] is %d", cm->num_actual_tokens,
                   n, total);
    int32_t max_q = 0, max_s = 0;
    for (int r = 0; r < n; r++) {
        int32_t q = qsl[r + 1] - qsl[r], s = cm->seq_lens[r];
        if (s < 0 || s > ATTN_MAX_SEQ_LEN)
            return BAD("seq_lens[%d] is %d, must be in [0, %d]", r, s, ATTN_MAX_SEQ_LEN);
        if (q > s)
            return BAD(
                "request %d: query length %d is longer than its sequence (seq_lens[%d] = %d)", r, q,
                r, s);
        max_q = q > max_q ? q : max_q;
        max_s = s > max_s ? s : max_s;
    }
    if (cm->max_query_len != max_q)
        return BAD("max_query_len is %d, the longest query is %d", cm->max_query_len, max_q);
    if (cm->max_seq_len < max_s)
        return BAD("max_seq_len is %d, below the longest sequence (%d)", cm->max_seq_len, max_s);

    /* Paged cache. Neither table nor slots: attention on the pass's own K/V. */
    if (!cm->block_table && !cm->slot_mapping) goto optional;
    if (n > 0 && !cm->block_table) return BAD("block_table is NULL while slot_mapping is given");
    if (total > 0 && !cm->slot_mapping)
        return BAD("slot_mapping is NULL while block_table is given");
    if (num_blocks < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "num_blocks is %d, the pool must have >= 1 block",
                          num_blocks);
    if (n > 0 && cm->block_table_stride < 1)
        return BAD("block_table_stride is %d, must be >= 1", cm->block_table_stride);
    for (int r = 0; r < n; r++) {
        int64_t need = attn__cdiv(cm->seq_lens[r], cm->block_size);
        if (need > cm->block_table_stride)
            return BAD("request %d: block table too short: %d tokens need %lld blocks, the table "
                       "holds %d",
                       r, cm->seq_lens[r], (long long)need, cm->block_table_stride);
        const int32_t *row = cm->block_table + (size_t)r * (size_t)cm->block_table_stride;
        for (int64_t k = 0; k < need; k++)
            if (row[k] < 0 || row[k] >= num_blocks)
                return BAD("block_table[%d][%lld] is %d, outside the pool of %d blocks", r,
                           (long long)k, row[k], num_blocks);
    }
    if (n > 0 && (int64_t)cm->max_seq_len > (int64_t)cm->block_table_stride * cm->block_size)
        return BAD("max_seq_len is %d, more than the block table can address (%d blocks x %d)",
                   cm->max_seq_len, cm->block_table_stride, cm->block_size);
    if (total > 0) {
        attn_status st = attn__check_slots(cm, num_blocks);
        if (st != ATTN_OK) return st;
    }

optional:
    for (int r = 0; r < n && cm->positions; r++) {
        int64_t ctx = (int64_t)cm->seq_lens[r] - (qsl[r + 1] - qsl[r]);
        for (int32_t i = qsl[r]; i < qsl[r + 1]; i++)
            if (cm->positions[i] != ctx + (i - qsl[r]))
                return BAD("positions[%d] (request %d) is %d, expected %lld", i, r,
                           cm->positions[i], (long long)(ctx + (i - qsl[r])));
    }
    for (int r = 0; r < n && cm->is_prefilling; r++)
        if (cm->is_prefilling[r] > 1)
            return BAD("is_prefilling[%d] is %d, must be 0 or 1", r, cm->is_prefilling[r]);
    for (int r = 0; r < n && cm->encoder_seq_lens; r++)
        if (cm->encoder_seq_lens[r] < 0)
            return BAD("encoder_seq_lens[%d] is %d, must be >= 0", r, cm->encoder_seq_lens[r]);
    return ATTN_OK;
}

int attn__common_prefix_len(const attn_common_metadata *cm)
{
    if (!cm || cm->num_reqs < 2 || !cm->block_table || cm->block_size < 1) return 0;
    const int n = cm->num_reqs, stride = cm->block_table_stride;
    int64_t min_computed = INT64_MAX;
    for (int r = 0; r < n; r++) {
        int64_t c =
            (int64_t)cm->seq_lens[r] - (cm->query_start_loc[r + 1] - cm->query_start_loc[r]);
        min_computed = c < min_computed ? c : min_computed;
    }
    /* Only blocks already computed by every request can be shared; full blocks only. */
    int64_t limit = min_computed / cm->block_size;
    if (limit > stride) limit = stride;
    const int32_t *row0 = cm->block_table;
    int64_t k = 0;
    for (; k < limit; k++) {
        int32_t b = row0[k];
        int r = 1;
        while (r < n && cm->block_table[(size_t)r * (size_t)stride + (size_t)k] == b)
            r++;
        if (r < n) break;
    }
    return (int)(k * cm->block_size);
}

int attn__reorder_decodes_first(const int32_t *query_lens, int n, int threshold, int32_t *order)
{
    int nd = 0;
    if (threshold <= 0) {
        for (int i = 0; i < n; i++)
            order[i] = i;
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (query_lens[i] <= threshold) order[nd++] = i;
    int k = nd;
    for (int i = 0; i < n; i++)
        if (query_lens[i] > threshold) order[k++] = i;
    return nd;
}

attn_status attn__split_decodes_prefills(const attn_common_metadata *cm, int threshold,
                                         bool require_uniform, int *num_decodes,
                                         int *num_decode_tokens)
{
    const int32_t *qsl = cm->query_start_loc;
    int n = cm->num_reqs, nd = 0;
    *num_decodes = 0;
    *num_decode_tokens = 0;
    if (n == 0 || threshold <= 0) return ATTN_OK;
    int32_t first = qsl[1] - qsl[0];
    for (; nd < n; nd++) {
        int32_t q = qsl[nd + 1] - qsl[nd];
        if (q > threshold || (require_uniform && q != first)) break;
    }
    *num_decodes = nd;
    *num_decode_tokens = qsl[nd];
    return ATTN_OK;
}

attn_status attn__capture_check(attn_cg_support cg, const char *type_name,
                                const attn_common_metadata *cm, int max_reqs, int max_tokens,
                                int max_blocks_per_req)
{
    attn_status st = attn__build_args(type_name, cm, max_reqs, max_tokens, max_blocks_per_req);
    if (st != ATTN_OK) return st;
    if (cg == ATTN_CG_NEVER)
        return attn__fail(ATTN_UNSUPPORTED, "%s metadata cannot be captured in a graph (NEVER)",
                          type_name);
    if (cg == ATTN_CG_ALWAYS || cm->num_reqs == 0) return ATTN_OK;
    const int32_t *qsl = cm->query_start_loc;
    int32_t first = qsl[1] - qsl[0];
    for (int r = 0; r < cm->num_reqs; r++) {
        int32_t q = qsl[r + 1] - qsl[r];
        if (cg == ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE && q != 1)
            return attn__fail(ATTN_UNSUPPORTED,
                              "%s graphs capture only single-token decodes "
                              "(UNIFORM_SINGLE_TOKEN_DECODE); request %d has %d query tokens",
                              type_name, r, q);
        if (cg == ATTN_CG_UNIFORM_BATCH && q != first)
            return attn__fail(ATTN_UNSUPPORTED,
                              "%s graphs capture only uniform batches (UNIFORM_BATCH); request %d "
                              "has %d query tokens, request 0 has %d",
                              type_name, r, q, first);
    }
    return ATTN_OK;
}

static attn_status attn__check_lens(const char *who, const int32_t *qsl, const int32_t *lens,
                                    const char *name, int r, bool at_least_query)
{
    int32_t q = qsl[r + 1] - qsl[r], s = lens[r];
    if (s < 0 || s > ATTN_MAX_SEQ_LEN)
        return BAD("%s: request %d has %s %d (must be in [0, %d])", who, r, name, s,
                   ATTN_MAX_SEQ_LEN);
    if (at_least_query && q > s)
        return BAD("%s: request %d has query length %d but %s %d", who, r, q, name, s);
    return ATTN_OK;
}

attn_status attn__check_batch(const char *who, const attn_common_metadata *cm, bool cross)
{
    if (!cm) return attn__fail(ATTN_NULL_ARGUMENT, "%s: common metadata is NULL", who);
    const int n = cm->num_reqs;
    if (n < 0 || n > ATTN_MAX_NUM_REQS || cm->num_actual_tokens < 0)
        return BAD("%s: %d requests / %d tokens (requests must be in [0, %d], tokens >= 0)", who, n,
                   cm->num_actual_tokens, ATTN_MAX_NUM_REQS);
    if (n == 0) {
        if (cm->num_actual_tokens != 0)
            return BAD("%s: %d tokens but no request", who, cm->num_actual_tokens);
        return ATTN_OK;
    }
    const int32_t *qsl = cm->query_start_loc;
    if (!qsl) return BAD("%s: query_start_loc is NULL with %d requests", who, n);
    /* the ends, then each step: from 0 and non-decreasing keeps every difference in range */
    if (qsl[0] != 0 || qsl[n] != cm->num_actual_tokens)
        return BAD("%s: query_start_loc runs from %d to %d but the batch has %d tokens", who,
                   qsl[0], qsl[n], cm->num_actual_tokens);
    for (int r = 0; r < n; r++)
        if (qsl[r + 1] < qsl[r])
            return BAD("%s: request %d has query_start_loc %d..%d (decreasing)", who, r, qsl[r],
                       qsl[r + 1]);
    for (int r = 0; r < n; r++) {
        attn_status st = ATTN_OK;
        if (cm->seq_lens) st = attn__check_lens(who, qsl, cm->seq_lens, "seq_len", r, !cross);
        if (st == ATTN_OK && cross && cm->encoder_seq_lens)
            st = attn__check_lens(who, qsl, cm->encoder_seq_lens, "encoder_seq_len", r, false);
        if (st != ATTN_OK) return st;
    }
    return ATTN_OK;
}

attn_status attn__build_args(const char *type_name, const attn_common_metadata *cm, int max_reqs,
                             int max_tokens, int max_blocks_per_req)
{
    if (!cm) return attn__fail(ATTN_NULL_ARGUMENT, "%s build: common metadata is NULL", type_name);
    if (cm->num_reqs < 0 || cm->num_reqs > max_reqs)
        return BAD("%s build: %d requests, the builder was created for at most %d", type_name,
                   cm->num_reqs, max_reqs);
    if (cm->num_actual_tokens < 0 || cm->num_actual_tokens > max_tokens)
        return BAD("%s build: %d tokens, the builder was created for at most %d", type_name,
                   cm->num_actual_tokens, max_tokens);
    if (cm->num_reqs > 0 && (!cm->query_start_loc || !cm->seq_lens))
        return BAD("%s build: query_start_loc or seq_lens is NULL", type_name);
    if (cm->block_size < 1) return BAD("%s build: block_size is %d", type_name, cm->block_size);
    char who[96];
    snprintf(who, sizeof who, "%s build", type_name);
    attn_status st = attn__check_batch(who, cm, false);
    if (st != ATTN_OK) return st;
    if (cm->num_reqs > 0 && cm->block_table) {
        int cap = cm->block_table_stride < max_blocks_per_req ? cm->block_table_stride
                                                              : max_blocks_per_req;
        for (int r = 0; r < cm->num_reqs; r++)
            if (cm->seq_lens[r] < 0 || attn__cdiv(cm->seq_lens[r], cm->block_size) > cap)
                return BAD("%s build: request %d has %d tokens, more than %d blocks of %d",
                           type_name, r, cm->seq_lens[r], cap, cm->block_size);
    }
    return ATTN_OK;
}

attn_status attn__update_args(const char *type_name, int num_reqs, int max_reqs,
                              int num_actual_tokens, const int32_t *block_table,
                              int block_table_stride, const int64_t *slot_mapping)
{
    if (num_reqs > max_reqs)
        return attn__fail(ATTN_BAD_METADATA, "%s update_block_table: %d requests, created for %d",
                          type_name, num_reqs, max_reqs);
    if (num_reqs > 0 && (!block_table || block_table_stride < 1))
        return attn__fail(ATTN_BAD_METADATA,
                          "%s update_block_table: block table missing (stride %d)", type_name,
                          block_table_stride);
    if (num_actual_tokens > 0 && !slot_mapping)
        return attn__fail(ATTN_BAD_METADATA, "%s update_block_table: slot_mapping is NULL",
                          type_name);
    return ATTN_OK;
}

void attn__limits_init(attn__builder_limits *l, const char *type_name,
                       const attn_builder_init *init, attn_cg_support family_cg)
{
    l->type_name = type_name;
    l->cg = attn__init_cg(init, family_cg);
    l->max_reqs = init->max_num_reqs;
    l->max_tokens = init->max_num_tokens;
    l->max_blocks = init->max_blocks_per_req;
}

attn_status attn__limits_build_args(const attn__builder_limits *l, const attn_common_metadata *cm)
{
    return attn__build_args(l->type_name, cm, l->max_reqs, l->max_tokens, l->max_blocks);
}

attn_status attn__limits_capture(const attn__builder_limits *l, const attn_common_metadata *cm)
{
    return attn__capture_check(l->cg, l->type_name, cm, l->max_reqs, l->max_tokens, l->max_blocks);
}

attn_status attn__limits_update(const attn__builder_limits *l, int num_reqs, int num_actual_tokens,
                                const int32_t *block_table, int block_table_stride,
                                const int64_t *slot_mapping)
{
    return attn__update_args(l->type_name, num_reqs, l->max_reqs, num_actual_tokens, block_table,
                             block_table_stride, slot_mapping);
}

attn_status attn__capture_build(const char *type_name, void *state, const attn_common_metadata *cm,
                                const void **md, attn__build_fn build)
{
    if (!state || !cm || !md)
        return attn__fail(ATTN_NULL_ARGUMENT, "%s capture: NULL argument", type_name);
    attn_status st = attn__limits_capture(state, cm);
    return st == ATTN_OK ? build(state, 0, cm, false, md) : st;
}
