/* Paged standard attention in the kernel dialect: decode, prefill and mixed
 * chunked-prefill batches in one launch, with REFERENCE's semantics
 * (src/backends/reference/reference.h).
 *
 * Grid: (tiles, KV heads, splits) work-groups of KD_WG work-items. The host
 * plans the tiles: tile t is (request, first row), a row being one (query
 * token, query head of this KV head) pair, row = token * group + head; a
 * tile holds up to KD_ROWS rows, so one work-group serves every query head
 * of its KV head and reads each K/V row once for all of them (GQA). Keys
 * are walked in tiles of `bn` rows staged in local memory as float; scores,
 * online softmax and the P.V accumulation are fp32. Work-item lid owns row
 * lid / KD_LANES and V columns lane, lane + KD_LANES, ... (private acc).
 *
 * Split-KV (flash-decoding): with more than one split, split s sees only
 * keys [s * split_len, (s + 1) * split_len) and writes its partial state
 * (acc, running max, denominator) to `part`; attn_kd_attention_merge
 * combines the splits by their log-sum-exp. With one split the kernel
 * finishes the rows itself.
 *
 * meta (int32, uploaded once per step): query_start_loc at m_qsl, key
 * counts at m_kvlen, the tile plan at m_tiles, the block table at m_bt
 * (bt_stride ids per request). hp (float, constant memory: every
 * work-item of a group reads the same few values): sinks[H], ALiBi
 * slopes[H], K scales[KVH], V scales[KVH] (1 for non-fp8 caches; the host
 * keeps it under the device's constant-buffer size). Offsets are in
 * elements; the cache is addressed as the attn_kv_view describes it. */
#if !defined(__OPENCL_C_VERSION__) && !defined(__OPENCL_VERSION__)
#include "attn_kdialect.h"
#endif

/* Keys of a tile into local memory as float: KD_TPK work-items per key. */
KD_FUNC void kd_load_tile(KD_LOCAL float *tile, KD_GLOBAL const kd_u8 *kv, int elem, kd_i64 off,
                          KD_LOCAL const kd_i64 *key_at, int nk, int dim, int lid)
{
    for (int j = lid / KD_TPK; j < nk; j += KD_WG / KD_TPK) {
        kd_i64 base = off + key_at[j];
        for (int d = lid % KD_TPK; d < dim; d += KD_TPK)
            tile[j * dim + d] = kd_load(kv, elem, base + d);
    }
}

/* A finished row: the sink joins the denominator, V's scale and the
 * normalisation apply, the output and (lane 0) the LSE are stored. A row
 * that saw no key and has no sink gets zeros and lse = -inf. */
KD_FUNC void kd_finish_row(float *acc, float m, float l, int lane, int Dv, float vscale,
                           int has_sink, float sink, KD_GLOBAL kd_u8 *out, int out_elem, kd_i64 ob,
                           KD_GLOBAL float *lse, kd_i64 li, int want_lse)
{
    if (has_sink) {
        float mn = kd_fmaxf(m, sink), a = kd_exp_diff(m, mn);
        KD_UNROLL
        for (int c = 0; c < KD_ACC; c++)
            acc[c] *= a;
        l = l * a + kd_exp_diff(sink, mn);
        m = mn;
    }
    float inv = l > 0.0f ? vscale / l : 0.0f;
    KD_UNROLL
    for (int c = 0; c < KD_ACC; c++) {
        int d = lane + c * KD_LANES;
        if (d < Dv) kd_store(out, out_elem, ob + d, acc[c] * inv);
    }
    if (want_lse && lane == 0) lse[li] = l > 0.0f ? m + kd_logf(l) : -KD_INF;
}

KD_KERNEL KD_WG_SIZE(KD_WG) void attn_kd_paged_attention(
    KD_GLOBAL const kd_u8 *KD_RESTRICT q, kd_i64 q_off, KD_GLOBAL const kd_u8 *KD_RESTRICT kv,
    KD_GLOBAL kd_u8 *KD_RESTRICT out, kd_i64 out_off, KD_GLOBAL float *KD_RESTRICT lse,
    kd_i64 lse_off, KD_GLOBAL float *KD_RESTRICT part, KD_GLOBAL const kd_i32 *KD_RESTRICT meta,
    int m_qsl, int m_kvlen, int m_tiles, int m_bt, int bt_stride, KD_CONSTANT float *KD_RESTRICT hp,
    int H, int KVH, int D, int Dv, int q_elem, int kv_elem, kd_i64 k_off, kd_i64 v_off,
    kd_i64 s_blk, kd_i64 s_tok, kd_i64 s_head, int bs, float scale, float softcap, int window,
    int flags, int split_len, int bn)
{
    KD_LOCAL_ARRAY(float, qs, KD_ROWS *KD_MAX_HEAD);
    KD_LOCAL_ARRAY(float, tile, KD_TILE);
    KD_LOCAL_ARRAY(float, sc, KD_ROWS *KD_MAX_BN);
    KD_LOCAL_ARRAY(float, row_m, KD_ROWS);
    KD_LOCAL_ARRAY(float, row_l, KD_ROWS);
    KD_LOCAL_ARRAY(float, row_a, KD_ROWS);
    KD_LOCAL_ARRAY(kd_i64, key_at, KD_MAX_BN);

    int lid = KD_LOCAL_ID(), t = KD_GROUP_ID(0), h = KD_GROUP_ID(1);
    int split = KD_GROUP_ID(2), nsplit = KD_NUM_GROUPS(2);
    int req = meta[m_tiles + 2 * t], row0 = meta[m_tiles + 2 * t + 1];
    int q0 = meta[m_qsl + req], qlen = meta[m_qsl + req + 1] - q0, kvlen = meta[m_kvlen + req];
    int g = H / KVH, nrows = kd_min(KD_ROWS, qlen * g - row0);
    int first = kvlen - qlen; /* position of the request's first query token */
    int causal = flags & KD_F_CAUSAL;
    KD_GLOBAL const kd_i32 *bt = meta + m_bt + (kd_i64)req * bt_stride;

    /* keys any row of the tile can see, cut to this split's share */
    int kbeg = 0, kend = kvlen;
    if (causal) kend = kd_min(kvlen, first + (row0 + nrows - 1) / g + 1 + KD_CAUSAL_SLACK);
    if (window > 0) kbeg = kd_max(0, first + row0 / g - window + 1);
    if (nsplit > 1) {
        kbeg = kd_max(kbeg, split * split_len);
        kend = kd_min(kend, (split + 1) * split_len);
    }

    for (int i = lid; i < nrows * D; i += KD_WG) {
        int rr = i / D, d = i - rr * D, row = row0 + rr;
        kd_i64 tok = q0 + row / g;
        qs[i] = kd_load(q, q_elem, q_off + (tok * H + h * g + row % g) * D + d);
    }
    if (lid < KD_ROWS) {
        row_m[lid] = -KD_INF;
        row_l[lid] = 0.0f;
    }

    int r = lid / KD_LANES, lane = lid % KD_LANES, row = row0 + r;
    int pos = first + row / g, head = h * g + row % g;
    float kscale = hp[2 * H + h] * scale;
    float slope = (flags & KD_F_ALIBI) && r < nrows ? hp[H + head] : 0.0f;
    float acc[KD_ACC];
    KD_UNROLL
    for (int c = 0; c < KD_ACC; c++)
        acc[c] = 0.0f;
    KD_LOCAL float *qrow = qs + r * D;
    KD_LOCAL float *srow = sc + r * KD_MAX_BN;

    for (int k0 = kbeg; k0 < kend; k0 += bn) {
        int nk = kd_min(bn, kend - k0);
        if (lid < nk) {
            int key = k0 + lid;
            key_at[lid] = bt[key / bs] * s_blk + (kd_i64)(key % bs) * s_tok + (kd_i64)h * s_head;
        }
        KD_BARRIER();
        kd_load_tile(tile, kv, kv_elem, k_off, key_at, nk, D, lid);
        KD_BARRIER();
        if (r < nrows) {
            for (int j = lane; j < nk; j += KD_LANES) {
                int key = k0 + j;
                float s = -KD_INF;
                if ((!causal || key <= pos + KD_CAUSAL_SLACK) &&
                    (window <= 0 || key > pos - window)) {
                    KD_LOCAL const float *krow = tile + j * D;
                    float s0 = 0.0f, s1 = 0.0f;
                    for (int d = 0; d < D; d += 2) { /* D is a multiple of 8 */
                        s0 += qrow[d] * krow[d];
                        s1 += qrow[d + 1] * krow[d + 1];
                    }
                    s = (s0 + s1) * kscale;
                    if (softcap > 0.0f) s = softcap * kd_tanhf(s / softcap);
                    s += slope * (float)(key - pos);
                }
                srow[j] = s;
            }
        }
        KD_BARRIER();
        kd_load_tile(tile, kv, kv_elem, v_off, key_at, nk, Dv, lid);
        if (lid < nrows) kd_row_update(sc + lid * KD_MAX_BN, nk, row_m, row_l, row_a, lid);
        KD_BARRIER();
        if (r < nrows) {
            float a = row_a[r];
            KD_UNROLL
            for (int c = 0; c < KD_ACC; c++)
                acc[c] *= a;
            for (int j = 0; j < nk; j++) {
                float p = srow[j];
                KD_LOCAL const float *vrow = tile + j * Dv;
                KD_UNROLL
                for (int c = 0; c < KD_ACC; c++) {
                    int d = lane + c * KD_LANES;
                    if (d < Dv) acc[c] += p * vrow[d];
                }
            }
        }
    }
    KD_BARRIER(); /* row state of the last tile (or of none) for every lane */
    if (r >= nrows) return;
    kd_i64 tok = q0 + row / g;
    float m = row_m[r], l = row_l[r];
    if (nsplit == 1) {
        kd_finish_row(acc, m, l, lane, Dv, hp[2 * H + KVH + h], flags & KD_F_SINKS,
                      (flags & KD_F_SINKS) ? hp[head] : 0.0f, out, q_elem,
                      out_off + (tok * H + head) * Dv, lse, lse_off + tok * H + head,
                      flags & KD_F_LSE);
        return;
    }
    KD_GLOBAL float *pp =
        part + ((((kd_i64)t * KVH + h) * nsplit + split) * KD_ROWS + r) * (kd_i64)(Dv + 2);
    KD_UNROLL
    for (int c = 0; c < KD_ACC; c++) {
        int d = lane + c * KD_LANES;
        if (d < Dv) pp[d] = acc[c];
    }
    if (lane == 0) {
        pp[Dv] = m;
        pp[Dv + 1] = l;
    }
}

/* The splits of each row of tile (group 0) and KV head (group 1) combined
 * by their log-sum-exp, then finished as one row. */
KD_KERNEL KD_WG_SIZE(KD_WG) void attn_kd_attention_merge(
    KD_GLOBAL const float *KD_RESTRICT part, int nsplit, KD_GLOBAL kd_u8 *KD_RESTRICT out,
    kd_i64 out_off, KD_GLOBAL float *KD_RESTRICT lse, kd_i64 lse_off,
    KD_GLOBAL const kd_i32 *KD_RESTRICT meta, int m_qsl, int m_tiles,
    KD_CONSTANT float *KD_RESTRICT hp, int H, int KVH, int Dv, int out_elem, int flags)
{
    int lid = KD_LOCAL_ID(), t = KD_GROUP_ID(0), h = KD_GROUP_ID(1);
    int req = meta[m_tiles + 2 * t], row0 = meta[m_tiles + 2 * t + 1];
    int q0 = meta[m_qsl + req], qlen = meta[m_qsl + req + 1] - q0;
    int g = H / KVH, nrows = kd_min(KD_ROWS, qlen * g - row0);
    int r = lid / KD_LANES, lane = lid % KD_LANES, row = row0 + r;
    if (r >= nrows) return; /* no barrier in this kernel */
    kd_i64 stride = (kd_i64)KD_ROWS * (Dv + 2);
    KD_GLOBAL const float *p0 =
        part + (((kd_i64)t * KVH + h) * nsplit * KD_ROWS + r) * (kd_i64)(Dv + 2);
    float m = -KD_INF, l = 0.0f, acc[KD_ACC];
    for (int s = 0; s < nsplit; s++)
        m = kd_fmaxf(m, p0[s * stride + Dv]);
    KD_UNROLL
    for (int c = 0; c < KD_ACC; c++)
        acc[c] = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        KD_GLOBAL const float *ps = p0 + s * stride;
        float w = ps[Dv] > -KD_INF ? kd_expf(ps[Dv] - m) : 0.0f;
        l += ps[Dv + 1] * w;
        KD_UNROLL
        for (int c = 0; c < KD_ACC; c++) {
            int d = lane + c * KD_LANES;
            if (d < Dv) acc[c] += w * ps[d];
        }
    }
    kd_i64 tok = q0 + row / g;
    int head = h * g + row % g;
    kd_finish_row(acc, m, l, lane, Dv, hp[2 * H + KVH + h], flags & KD_F_SINKS,
                  (flags & KD_F_SINKS) ? hp[head] : 0.0f, out, out_elem,
                  out_off + (tok * H + head) * Dv, lse, lse_off + tok * H + head, flags & KD_F_LSE);
}
