/* The step plan of the dialect's attention kernels (kd_plan.h): checks,
 * tiles, split-KV shares and the int32 words, for the OpenCL runtime and
 * the CUDA module alike. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/devkern/kd_launch.h"
#include "backends/devkern/kd_params.h"
#include "backends/devkern/kd_plan.h"
#include "util/numeric.h"

/* Split-KV: shares of at least this many keys, at most this many. */
#define ATTN__KD_MIN_SPLIT_KEYS 256
#define ATTN__KD_MAX_SPLITS     256

static attn_status fail(char *why, size_t n, attn_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static attn_status fail(char *why, size_t n, attn_status st, const char *fmt, ...)
{
    if (why && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return st;
}

size_t attn__kd_elem_size(int elem)
{
    switch (elem) {
    case KD_ELEM_F32: return 4;
    case KD_ELEM_F16:
    case KD_ELEM_BF16: return 2;
    case KD_ELEM_E4M3:
    case KD_ELEM_E5M2: return 1;
    default: return 0;
    }
}

/* One request's lengths and block ids, checked. */
static attn_status check_request(const attn__kd_plan_in *in, int r, char *why, size_t n)
{
    const attn_common_metadata *cm = in->cm;
    const int32_t *qsl = cm->query_start_loc;
    int qlen = qsl[r + 1] - qsl[r], kv = in->kv_lens[r];
    if (qsl[r + 1] < qsl[r])
        return fail(why, n, ATTN_BAD_METADATA, "query_start_loc decreases at request %d", r);
    if (kv < 0 || kv > ATTN_MAX_SEQ_LEN || (!in->cross && qlen > kv))
        return fail(why, n, ATTN_BAD_METADATA, "request %d: %d queries over %d keys", r, qlen, kv);
    int64_t nblk = ((int64_t)kv + cm->block_size - 1) / cm->block_size;
    if (nblk > cm->block_table_stride)
        return fail(why, n, ATTN_BAD_METADATA,
                    "request %d needs %lld blocks but the block table row holds %d", r,
                    (long long)nblk, cm->block_table_stride);
    const int32_t *bt = cm->block_table + (int64_t)r * cm->block_table_stride;
    for (int64_t b = 0; b < nblk; b++)
        if (bt[b] < 0 || bt[b] >= in->num_blocks)
            return fail(why, n, ATTN_BAD_METADATA,
                        "request %d block %lld has id %d outside the pool of %d", r, (long long)b,
                        bt[b], in->num_blocks);
    return ATTN_OK;
}

/* What the kernels will read of the metadata, checked; the tiles, the
 * decompression work, the longest key count and the widest block row. */
static attn_status check_metadata(attn__kd_plan *p, const attn__kd_plan_in *in, int *max_kv,
                                  char *why, size_t n)
{
    const attn_common_metadata *cm = in->cm;
    int nreq = cm->num_reqs;
    if (nreq < 0 || nreq > ATTN_MAX_NUM_REQS || cm->num_actual_tokens < 0)
        return fail(why, n, ATTN_BAD_METADATA, "num_reqs %d / num_actual_tokens %d out of range",
                    nreq, cm->num_actual_tokens);
    if (nreq == 0) {
        if (cm->num_actual_tokens != 0)
            return fail(why, n, ATTN_BAD_METADATA, "%d tokens but no request",
                        cm->num_actual_tokens);
        return ATTN_OK;
    }
    if (!cm->query_start_loc || !in->kv_lens || !cm->block_table)
        return fail(why, n, ATTN_NULL_ARGUMENT,
                    "%s: query_start_loc, the key lengths and block_table are required", in->who);
    if (cm->block_size < 1 || cm->block_size > ATTN_MAX_BLOCK_SIZE || in->num_blocks < 1)
        return fail(why, n, ATTN_BAD_METADATA, "block_size %d / num_blocks %d out of range",
                    cm->block_size, in->num_blocks);
    if (cm->query_start_loc[0] != 0)
        return fail(why, n, ATTN_BAD_METADATA, "query_start_loc[0] = %d, want 0",
                    cm->query_start_loc[0]);
    int64_t tiles = 0, work = 0, dkeys = 0;
    for (int r = 0; r < nreq; r++) {
        attn_status st = check_request(in, r, why, n);
        if (st != ATTN_OK) return st;
        int qlen = cm->query_start_loc[r + 1] - cm->query_start_loc[r], kv = in->kv_lens[r];
        if (r >= in->tile_begin && r < in->tile_end)
            tiles += ((int64_t)qlen * in->rows_per_token + KD_ROWS - 1) / KD_ROWS;
        if (r >= in->decompress_begin && r < in->decompress_end) {
            work += (kv + KD_MLA_BN - 1) / KD_MLA_BN;
            dkeys += (int64_t)(kv + KD_MLA_BN - 1) / KD_MLA_BN * KD_MLA_BN;
        }
        if (kv > *max_kv) *max_kv = kv;
    }
    if (cm->query_start_loc[nreq] != cm->num_actual_tokens)
        return fail(why, n, ATTN_BAD_METADATA, "query_start_loc[%d] = %d != num_actual_tokens %d",
                    nreq, cm->query_start_loc[nreq], cm->num_actual_tokens);
    if (tiles > INT32_MAX / KD_WG || work > INT32_MAX / KD_WG || dkeys > INT32_MAX)
        return fail(why, n, ATTN_UNSUPPORTED, "%s: %lld work-group tiles / %lld keys in one step",
                    in->who, (long long)(tiles > work ? tiles : work), (long long)dkeys);
    p->ntiles = (int)tiles;
    p->nwork = (int)work;
    p->dkeys = (int)dkeys;
    return ATTN_OK;
}

/* Split-KV shares: a given split length, or enough shares to give the
 * device's compute units work when the tiles alone do not. */
static void plan_splits(attn__kd_plan *p, const attn__kd_plan_in *in, int max_kv)
{
    p->nsplit = 1;
    p->split_len = max_kv > 0 ? max_kv : 1;
    int cap = in->max_splits > 0 ? in->max_splits : ATTN__KD_MAX_SPLITS;
    if (cap > ATTN__KD_MAX_SPLITS) cap = ATTN__KD_MAX_SPLITS;
    if (max_kv < 2 || cap < 2 || p->ntiles == 0) return;
    int len = in->split_len > 0 ? in->split_len : 0;
    if (len == 0) {
        int64_t groups = (int64_t)p->ntiles * (in->groups_per_tile > 0 ? in->groups_per_tile : 1);
        int64_t target = 4 * (int64_t)(in->compute_units ? in->compute_units : 1);
        if (target < 8) target = 8;
        if (groups >= target || max_kv < 2 * ATTN__KD_MIN_SPLIT_KEYS) return;
        int64_t want = (target + groups - 1) / groups, most = max_kv / ATTN__KD_MIN_SPLIT_KEYS;
        int ns = (int)(want < most ? want : most);
        if (ns < 2) return;
        len = (max_kv + ns - 1) / ns;
        len = (len + in->bn - 1) / in->bn * in->bn; /* whole key tiles */
    }
    int ns = (max_kv + len - 1) / len;
    if (ns > cap) {
        ns = cap;
        len = (max_kv + ns - 1) / ns;
        ns = (max_kv + len - 1) / len;
    }
    p->nsplit = ns;
    p->split_len = len;
}

static attn_status pack(attn__kd_plan *p, const attn__kd_plan_in *in, char *why, size_t n)
{
    const attn_common_metadata *cm = in->cm;
    int nreq = cm->num_reqs;
    int64_t words = (int64_t)nreq + 1 + nreq + 2 * (int64_t)p->ntiles +
                    (int64_t)nreq * p->bt_stride + 3 * (int64_t)p->nwork;
    if (words > INT32_MAX)
        return fail(why, n, ATTN_UNSUPPORTED, "%s: step metadata of %lld words", in->who,
                    (long long)words);
    if ((size_t)words > p->cap) {
        int32_t *w = realloc(p->words, sizeof(int32_t) * (size_t)words);
        if (!w) return fail(why, n, ATTN_OUT_OF_MEMORY, "%s step: out of memory", in->who);
        p->words = w;
        p->cap = (size_t)words;
    }
    int32_t *w = p->words;
    p->nwords = (size_t)words;
    p->m_qsl = 0;
    p->m_kvlen = nreq + 1;
    p->m_tiles = p->m_kvlen + nreq;
    p->m_bt = p->m_tiles + 2 * p->ntiles;
    p->m_work = p->m_bt + nreq * p->bt_stride;
    memcpy(w, cm->query_start_loc, sizeof(int32_t) * (size_t)(nreq + 1));
    int t = 0, k = 0, dkey = 0;
    for (int r = 0; r < nreq; r++) {
        int kv = in->kv_lens[r];
        w[p->m_kvlen + r] = kv;
        int rows = (cm->query_start_loc[r + 1] - cm->query_start_loc[r]) * in->rows_per_token;
        for (int row0 = 0; r >= in->tile_begin && r < in->tile_end && row0 < rows;
             row0 += KD_ROWS, t++) {
            w[p->m_tiles + 2 * t] = r;
            w[p->m_tiles + 2 * t + 1] = row0;
        }
        memcpy(w + p->m_bt + (int64_t)r * p->bt_stride,
               cm->block_table + (int64_t)r * cm->block_table_stride,
               sizeof(int32_t) * (size_t)p->bt_stride);
        for (int key0 = 0; r >= in->decompress_begin && r < in->decompress_end && key0 < kv;
             key0 += KD_MLA_BN, k++) {
            w[p->m_work + 3 * k] = r;
            w[p->m_work + 3 * k + 1] = key0;
            w[p->m_work + 3 * k + 2] = dkey + key0;
        }
        if (r >= in->decompress_begin && r < in->decompress_end)
            dkey += (kv + KD_MLA_BN - 1) / KD_MLA_BN * KD_MLA_BN;
    }
    return ATTN_OK;
}

attn_status attn__kd_plan_build(attn__kd_plan *p, const attn__kd_plan_in *in, char *why,
                                size_t why_size)
{
    const attn_common_metadata *cm = in->cm;
    int max_kv = 0;
    p->ntiles = p->nwork = p->dkeys = 0;
    attn_status st = check_metadata(p, in, &max_kv, why, why_size);
    if (st != ATTN_OK) return st;
    p->nreq = cm->num_reqs;
    p->ntok = cm->num_actual_tokens;
    p->block_size = cm->block_size;
    p->num_blocks = in->num_blocks;
    /* only the block table entries a request can read travel */
    int bs = cm->block_size > 0 ? cm->block_size : 1;
    p->bt_stride = (int)(((int64_t)max_kv + bs - 1) / bs);
    if (p->bt_stride < 1) p->bt_stride = 1;
    if (p->nreq > 0 && p->bt_stride > cm->block_table_stride) p->bt_stride = cm->block_table_stride;
    plan_splits(p, in, max_kv);
    p->nwords = 0;
    return p->nreq > 0 ? pack(p, in, why, why_size) : ATTN_OK;
}

void attn__kd_plan_free(attn__kd_plan *p)
{
    if (!p) return;
    free(p->words);
    memset(p, 0, sizeof *p);
}

/* ---- the standard attention after MLA decompression ---------------------------- */

static bool grow(int32_t **a, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    int32_t *x = realloc(*a, sizeof(int32_t) * need);
    if (!x) return false;
    *a = x;
    *cap = need;
    return true;
}

attn_status attn__kd_mha_meta_build(attn__kd_mha_meta *m, const attn_common_metadata *cm, int begin,
                                    int end, char *why, size_t why_size)
{
    int n = end - begin, maxb = 1, q0 = n > 0 ? cm->query_start_loc[begin] : 0;
    int64_t blocks = 0;
    for (int r = begin; r < end; r++) {
        int b = (cm->seq_lens[r] + KD_MLA_BN - 1) / KD_MLA_BN;
        if (b > maxb) maxb = b;
        blocks += b;
    }
    if (blocks > INT32_MAX || (int64_t)n * maxb > INT32_MAX ||
        !grow(&m->qsl, &m->cap_qsl, (size_t)n + 1) || !grow(&m->seq, &m->cap_seq, (size_t)n + 1) ||
        !grow(&m->bt, &m->cap_bt, (size_t)n * maxb))
        return fail(why, why_size, ATTN_OUT_OF_MEMORY,
                    "MLA prefill metadata: out of memory (%d requests, %lld blocks)", n,
                    (long long)blocks);
    int next = 0, maxq = 0, maxs = 0;
    for (int i = 0; i < n; i++) {
        int r = begin + i, q = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        m->qsl[i] = cm->query_start_loc[r] - q0;
        m->seq[i] = cm->seq_lens[r];
        int b = (cm->seq_lens[r] + KD_MLA_BN - 1) / KD_MLA_BN;
        for (int j = 0; j < maxb; j++)
            m->bt[(size_t)i * maxb + j] = j < b ? next + j : 0;
        next += b;
        if (q > maxq) maxq = q;
        if (cm->seq_lens[r] > maxs) maxs = cm->seq_lens[r];
    }
    m->qsl[n] = n > 0 ? cm->query_start_loc[end] - q0 : 0;
    m->num_blocks = next > 0 ? next : 1;
    m->cm = (attn_common_metadata){.query_start_loc = m->qsl,
                                   .seq_lens = m->seq,
                                   .num_reqs = n,
                                   .num_actual_tokens = m->qsl[n],
                                   .max_query_len = maxq,
                                   .max_seq_len = maxs,
                                   .block_table = m->bt,
                                   .block_table_stride = maxb,
                                   .causal = true,
                                   .block_size = KD_MLA_BN};
    return ATTN_OK;
}

void attn__kd_mha_meta_free(attn__kd_mha_meta *m)
{
    if (!m) return;
    free(m->qsl);
    free(m->seq);
    free(m->bt);
    memset(m, 0, sizeof *m);
}

/* ---- views --------------------------------------------------------------------------- */

bool attn__kd_view_extent(const attn_kv_view *kv, int dv, int64_t *elems)
{
    if (kv->num_blocks < 1 || kv->block_size < 1 || kv->num_kv_heads < 1 || kv->head_size < 1 ||
        dv < 0 || kv->k_offset < 0 || kv->v_offset < 0 || kv->stride_block < 0 ||
        kv->stride_token < 0 || kv->stride_head < 0)
        return false;
    int64_t last = 0, end_k = 0, end_v = 0;
    if (!attn__mul_i64(kv->num_blocks - 1, kv->stride_block, &last)) return false;
    int64_t t = 0, h = 0;
    if (!attn__mul_i64(kv->block_size - 1, kv->stride_token, &t) ||
        !attn__mul_i64(kv->num_kv_heads - 1, kv->stride_head, &h) ||
        !attn__add_i64(last, t, &last) || !attn__add_i64(last, h, &last))
        return false;
    if (!attn__add_i64(last, kv->k_offset, &end_k) || !attn__add_i64(end_k, kv->head_size, &end_k))
        return false;
    if (dv && (!attn__add_i64(last, kv->v_offset, &end_v) || !attn__add_i64(end_v, dv, &end_v)))
        return false;
    *elems = end_k > end_v ? end_k : end_v;
    return true;
}

attn_status attn__kd_mla_project_plan(const attn_layer_params *l, int T, bool absorb,
                                      attn__kd_mla_project *x, int64_t *in_elems, int64_t *w_elems,
                                      int64_t *out_elems, char *why, size_t why_size)
{
    int H = l->num_heads, R = l->kv_lora_rank, P = l->qk_rope_head_dim;
    int N = l->qk_nope_head_dim, V = l->v_head_dim;
    int kin = absorb ? N : R, nout = absorb ? R : V;
    if (T < 0 || H < 1 || R < 1 || P < 0 || kin < 1 || nout < 1 ||
        (l->dtype != ATTN_DTYPE_FP32 && l->dtype != ATTN_DTYPE_FP16 && l->dtype != ATTN_DTYPE_BF16))
        return fail(why, why_size, ATTN_INVALID_ARGUMENT,
                    "MLA %s: %d tokens, %d heads, kv_lora_rank %d, rope %d, %s %d, dtype %d",
                    absorb ? "absorb" : "up-projection", T, H, R, P,
                    absorb ? "qk_nope_head_dim" : "v_head_dim", absorb ? N : V, (int)l->dtype);
    /* the grid: token tiles and heads within every target's limits */
    if (H > 65535 || (T + KD_PJ_T - 1) / KD_PJ_T > 65535)
        return fail(why, why_size, ATTN_UNSUPPORTED,
                    "MLA %s: %d tokens x %d heads exceed the launch grid (at most %d tokens, "
                    "65535 heads)",
                    absorb ? "absorb" : "up-projection", T, H, 65535 * KD_PJ_T);
    int copy = absorb ? P : 0, in_w = kin + copy, out_w = nout + copy;
    *x = (attn__kd_mla_project){.in_tok = (int64_t)H * in_w,
                                .in_head = in_w,
                                .out_tok = (int64_t)H * out_w,
                                .out_head = out_w,
                                .T = T,
                                .H = H,
                                .kin = kin,
                                .nout = nout,
                                .ncopy = copy,
                                .elem = l->dtype == ATTN_DTYPE_FP32   ? KD_ELEM_F32
                                        : l->dtype == ATTN_DTYPE_FP16 ? KD_ELEM_F16
                                                                      : KD_ELEM_BF16};
    *in_elems = (int64_t)T * H * in_w;
    *w_elems = (int64_t)H * kin * nout;
    *out_elems = (int64_t)T * H * out_w;
    return ATTN_OK;
}
