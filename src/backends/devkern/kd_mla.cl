/* MLA (DeepSeek V2/V3 multi-head latent attention) in the kernel dialect,
 * with REFERENCE_MLA's semantics (src/backends/reference/ref_mla.c): the
 * cache holds one latent row per token, kv_lora_rank (R) values then the
 * rope part, D = R + rope in all, shared by every query head.
 *
 * attn_kd_mla_decode (forward_mqa): absorbed queries [tokens][H][D] against
 * the latent rows; the latent part of a row is also its value, so the
 * output is [tokens][H][R]. The step plan is the standard kernel's (tiles
 * of KD_ROWS rows, row = token * H + head, one KV head): a work-group
 * serves KD_ROWS rows - every head of a token when H is 16 (DeepSeek-V3 at
 * TP 8), several tokens when H is smaller, 8 groups per token at 128 heads
 * - and reads each latent row once for all of them. Scores walk D in
 * chunks of KD_MLA_DC columns staged in local memory with the rows' query
 * chunks; P.V re-reads the tile's latent rows (from cache) KD_MLA_KC / R
 * at a time. Split-KV as the standard kernel: with several splits each
 * writes (acc, max, sum) per row to `part` and attn_kd_mla_merge combines
 * them by their log-sum-exp.
 *
 * attn_kd_mla_decompress (forward_mha, first half): keys (W_UK . latent,
 * then the rope part) and values (latent . W_UV) of every head for the
 * prefill requests' keys, written as a paged cache of the activation
 * element in blocks of KD_MLA_BN tokens; the standard paged attention
 * kernel then runs causal attention over it.
 *
 * Scores are q . stored_row times score_scale = softmax scale * the fp8
 * scale (1 otherwise); outputs are multiplied by the same fp8 scale (vLLM's
 * TRITON_MLA passes k_scale as v_scale). */
#if !defined(__OPENCL_C_VERSION__) && !defined(__OPENCL_VERSION__)
#include "attn_kdialect.h"
#endif

#define KD_MLA_P (KD_MLA_DC + 1) /* padded pitch of the score-phase chunks */
#define KD_MLA_S (KD_MLA_BN + 1) /* padded pitch of a row's scores */

/* The rows' query columns [d0, d0 + w) and the tile's key columns. */
KD_FUNC void kd_mla_load_chunk(KD_LOCAL float *qc, KD_LOCAL float *kc, KD_GLOBAL const kd_u8 *q,
                               int q_elem, kd_i64 q_base, int D, int nrows,
                               KD_GLOBAL const kd_u8 *kv, int kv_elem,
                               KD_LOCAL const kd_i64 *key_at, int nk, int d0, int w, int lid)
{
    for (int i = lid; i < KD_ROWS * KD_MLA_DC; i += KD_WG) {
        int rr = i / KD_MLA_DC, d = i - rr * KD_MLA_DC;
        if (rr < nrows && d < w)
            qc[rr * KD_MLA_P + d] = kd_load(q, q_elem, q_base + (kd_i64)rr * D + d0 + d);
    }
    for (int i = lid; i < nk * KD_MLA_DC; i += KD_WG) {
        int j = i / KD_MLA_DC, d = i - j * KD_MLA_DC;
        if (d < w) kc[j * KD_MLA_P + d] = kd_load(kv, kv_elem, key_at[j] + d0 + d);
    }
}

KD_KERNEL KD_WG_SIZE(KD_WG) void attn_kd_mla_decode(
    KD_GLOBAL const kd_u8 *KD_RESTRICT q, kd_i64 q_off, KD_GLOBAL const kd_u8 *KD_RESTRICT kv,
    KD_GLOBAL kd_u8 *KD_RESTRICT out, kd_i64 out_off, KD_GLOBAL float *KD_RESTRICT lse,
    kd_i64 lse_off, KD_GLOBAL float *KD_RESTRICT part, KD_GLOBAL const kd_i32 *KD_RESTRICT meta,
    int m_qsl, int m_kvlen, int m_tiles, int m_bt, int bt_stride, int H, int R, int D, int q_elem,
    int kv_elem, kd_i64 k_off, kd_i64 s_blk, kd_i64 s_tok, int bs, float score_scale,
    float out_scale, int want_lse, int split_len)
{
    KD_LOCAL_ARRAY(float, qc, KD_ROWS *KD_MLA_P);
    KD_LOCAL_ARRAY(float, kc, KD_MLA_KC);
    KD_LOCAL_ARRAY(float, sc, KD_ROWS *KD_MLA_S);
    KD_LOCAL_ARRAY(float, row_m, KD_ROWS);
    KD_LOCAL_ARRAY(float, row_l, KD_ROWS);
    KD_LOCAL_ARRAY(float, row_a, KD_ROWS);
    KD_LOCAL_ARRAY(kd_i64, key_at, KD_MLA_BN);

    int lid = KD_LOCAL_ID(), t = KD_GROUP_ID(0), split = KD_GROUP_ID(2);
    int nsplit = KD_NUM_GROUPS(2);
    int req = meta[m_tiles + 2 * t], row0 = meta[m_tiles + 2 * t + 1];
    int q0 = meta[m_qsl + req], qlen = meta[m_qsl + req + 1] - q0, kvlen = meta[m_kvlen + req];
    int nrows = kd_min(KD_ROWS, qlen * H - row0), first = kvlen - qlen;
    KD_GLOBAL const kd_i32 *bt = meta + m_bt + (kd_i64)req * bt_stride;
    kd_i64 q_row0 = (kd_i64)q0 * H + row0; /* (token, head) rows are consecutive in q */

    /* keys the tile's last row can see (causal), cut to this split's share */
    int kbeg = 0, kend = kd_min(kvlen, first + (row0 + nrows - 1) / H + 1 + KD_CAUSAL_SLACK);
    if (nsplit > 1) {
        kbeg = split * split_len;
        kend = kd_min(kend, (split + 1) * split_len);
    }
    if (lid < KD_ROWS) {
        row_m[lid] = -KD_INF;
        row_l[lid] = 0.0f;
    }
    int r = lid / KD_LANES, lane = lid % KD_LANES, pos = first + (row0 + r) / H;
    int kb = kd_min(KD_MLA_BN, KD_MLA_KC / R); /* whole latent rows per P.V chunk */
    float acc[KD_MLA_ACC];
    KD_UNROLL
    for (int c = 0; c < KD_MLA_ACC; c++)
        acc[c] = 0.0f;

    for (int k0 = kbeg; k0 < kend; k0 += KD_MLA_BN) {
        int nk = kd_min(KD_MLA_BN, kend - k0);
        if (lid < nk) {
            int key = k0 + lid;
            key_at[lid] = k_off + bt[key / bs] * s_blk + (kd_i64)(key % bs) * s_tok;
        }
        float s[KD_MLA_BN / KD_LANES]; /* keys lane, lane + KD_LANES, ... */
        for (int i = 0; i < KD_MLA_BN / KD_LANES; i++)
            s[i] = 0.0f;
        for (int d0 = 0; d0 < D; d0 += KD_MLA_DC) {
            int w = kd_min(KD_MLA_DC, D - d0);
            KD_BARRIER(); /* key_at written; the previous chunk consumed */
            kd_mla_load_chunk(qc, kc, q, q_elem, q_off + q_row0 * D, D, nrows, kv, kv_elem, key_at,
                              nk, d0, w, lid);
            KD_BARRIER();
            if (r < nrows) {
                KD_LOCAL const float *qrow = qc + r * KD_MLA_P;
                for (int i = 0; i < KD_MLA_BN / KD_LANES; i++) {
                    int j = lane + i * KD_LANES;
                    if (j >= nk) break;
                    KD_LOCAL const float *krow = kc + j * KD_MLA_P;
                    float x = 0.0f;
                    for (int d = 0; d < w; d++)
                        x += qrow[d] * krow[d];
                    s[i] += x;
                }
            }
        }
        if (r < nrows) {
            for (int i = 0; i < KD_MLA_BN / KD_LANES; i++) {
                int j = lane + i * KD_LANES;
                if (j < nk)
                    sc[r * KD_MLA_S + j] =
                        k0 + j <= pos + KD_CAUSAL_SLACK ? s[i] * score_scale : -KD_INF;
            }
        }
        KD_BARRIER();
        if (lid < nrows) kd_row_update(sc + lid * KD_MLA_S, nk, row_m, row_l, row_a, lid);
        KD_BARRIER();
        if (r < nrows) {
            float a = row_a[r];
            KD_UNROLL
            for (int c = 0; c < KD_MLA_ACC; c++)
                acc[c] *= a;
        }
        for (int j0 = 0; j0 < nk; j0 += kb) {
            int nj = kd_min(kb, nk - j0);
            for (int i = lid; i < nj * R; i += KD_WG) {
                int j = i / R, c = i - j * R;
                kc[i] = kd_load(kv, kv_elem, key_at[j0 + j] + c);
            }
            KD_BARRIER();
            if (r < nrows) {
                for (int j = 0; j < nj; j++) {
                    float p = sc[r * KD_MLA_S + j0 + j];
                    KD_LOCAL const float *vrow = kc + j * R;
                    KD_UNROLL
                    for (int c = 0; c < KD_MLA_ACC; c++) {
                        int d = lane + c * KD_LANES;
                        if (d < R) acc[c] += p * vrow[d];
                    }
                }
            }
            KD_BARRIER(); /* kc and key_at are rewritten next */
        }
    }
    KD_BARRIER(); /* the row state of the last tile (or of none) for every lane */
    if (r >= nrows) return;
    float m = row_m[r], l = row_l[r];
    if (nsplit == 1) {
        float inv = l > 0.0f ? out_scale / l : 0.0f;
        kd_i64 ob = out_off + (q_row0 + r) * R;
        KD_UNROLL
        for (int c = 0; c < KD_MLA_ACC; c++) {
            int d = lane + c * KD_LANES;
            if (d < R) kd_store(out, q_elem, ob + d, acc[c] * inv);
        }
        if (want_lse && lane == 0) lse[lse_off + q_row0 + r] = l > 0.0f ? m + kd_logf(l) : -KD_INF;
        return;
    }
    KD_GLOBAL float *pp = part + (((kd_i64)t * nsplit + split) * KD_ROWS + r) * (kd_i64)(R + 2);
    KD_UNROLL
    for (int c = 0; c < KD_MLA_ACC; c++) {
        int d = lane + c * KD_LANES;
        if (d < R) pp[d] = acc[c];
    }
    if (lane == 0) {
        pp[R] = m;
        pp[R + 1] = l;
    }
}

/* The splits of each row of tile (group 0) combined by their log-sum-exp,
 * column by column (no accumulator array: any kv_lora_rank). */
KD_KERNEL KD_WG_SIZE(KD_WG) void attn_kd_mla_merge(KD_GLOBAL const float *KD_RESTRICT part,
                                                   int nsplit, KD_GLOBAL kd_u8 *KD_RESTRICT out,
                                                   kd_i64 out_off, KD_GLOBAL float *KD_RESTRICT lse,
                                                   kd_i64 lse_off,
                                                   KD_GLOBAL const kd_i32 *KD_RESTRICT meta,
                                                   int m_qsl, int m_tiles, int H, int R,
                                                   int out_elem, float out_scale, int want_lse)
{
    int lid = KD_LOCAL_ID(), t = KD_GROUP_ID(0);
    int req = meta[m_tiles + 2 * t], row0 = meta[m_tiles + 2 * t + 1];
    int q0 = meta[m_qsl + req], qlen = meta[m_qsl + req + 1] - q0;
    int r = lid / KD_LANES, lane = lid % KD_LANES;
    if (r >= kd_min(KD_ROWS, qlen * H - row0)) return; /* no barrier in this kernel */
    kd_i64 stride = (kd_i64)KD_ROWS * (R + 2), row = (kd_i64)q0 * H + row0 + r;
    KD_GLOBAL const float *p0 = part + ((kd_i64)t * nsplit * KD_ROWS + r) * (kd_i64)(R + 2);
    float m = -KD_INF, l = 0.0f;
    for (int s = 0; s < nsplit; s++)
        m = kd_fmaxf(m, p0[s * stride + R]);
    for (int s = 0; s < nsplit; s++)
        l += p0[s * stride + R + 1] * kd_exp_diff(p0[s * stride + R], m);
    float inv = l > 0.0f ? out_scale / l : 0.0f;
    for (int d = lane; d < R; d += KD_LANES) {
        float v = 0.0f;
        for (int s = 0; s < nsplit; s++) {
            float ms = p0[s * stride + R];
            if (ms > -KD_INF) v += p0[s * stride + d] * kd_exp_diff(ms, m);
        }
        kd_store(out, out_elem, out_off + row * R + d, v * inv);
    }
    if (want_lse && lane == 0) lse[lse_off + row] = l > 0.0f ? m + kd_logf(l) : -KD_INF;
}

/* Decompression for forward_mha. Group 0: a work item of meta[m_work +
 * 3 * g] = (request, first key, first destination key: a multiple of
 * KD_MLA_BN); group 1: the head; group 2: a tile of KD_MLA_DC output
 * columns, the first nk_tiles of them over the key's nope part (W_UK
 * [H][N][R]), the rest over the value (W_UV [H][R][V]); the key tile 0 also
 * copies the rope part. The destination is a paged cache of dst_elem:
 * element dst_off(key) + column for keys, dst_v_off + dst_off(key) +
 * column for values, dst_off(key) = (key / KD_MLA_BN) * d_blk + (key %
 * KD_MLA_BN) * d_tok + head * d_head. Each work-item owns 4 keys x 8
 * columns (columns cg, cg + 8, ...: conflict-free local reads). */
KD_KERNEL KD_WG_SIZE(KD_WG) void attn_kd_mla_decompress(
    KD_GLOBAL const kd_u8 *KD_RESTRICT kv, int kv_elem, kd_i64 k_off, kd_i64 s_blk, kd_i64 s_tok,
    int bs, float kv_scale, KD_GLOBAL const kd_u8 *KD_RESTRICT w_uk,
    KD_GLOBAL const kd_u8 *KD_RESTRICT w_uv, int w_elem, int R, int P, int N, int V, int nk_tiles,
    KD_GLOBAL const kd_i32 *KD_RESTRICT meta, int m_kvlen, int m_work, int m_bt, int bt_stride,
    KD_GLOBAL kd_u8 *KD_RESTRICT dst, int dst_elem, kd_i64 dst_v_off, kd_i64 d_blk, kd_i64 d_tok,
    kd_i64 d_head)
{
    KD_LOCAL_ARRAY(float, lt, KD_MLA_BN *(KD_MLA_TK + 1));
    KD_LOCAL_ARRAY(float, wt, KD_MLA_TK *(KD_MLA_DC + 1));
    KD_LOCAL_ARRAY(kd_i64, key_at, KD_MLA_BN);

    int lid = KD_LOCAL_ID(), g = KD_GROUP_ID(0), h = KD_GROUP_ID(1), ct = KD_GROUP_ID(2);
    int req = meta[m_work + 3 * g], key0 = meta[m_work + 3 * g + 1];
    int dkey0 = meta[m_work + 3 * g + 2];
    int nk = kd_min(KD_MLA_BN, meta[m_kvlen + req] - key0);
    int is_key = ct < nk_tiles, c0 = (is_key ? ct : ct - nk_tiles) * KD_MLA_DC;
    int ncol = kd_min(KD_MLA_DC, (is_key ? N : V) - c0);
    KD_GLOBAL const kd_i32 *bt = meta + m_bt + (kd_i64)req * bt_stride;
    if (lid < nk) {
        int key = key0 + lid;
        key_at[lid] = k_off + bt[key / bs] * s_blk + (kd_i64)(key % bs) * s_tok;
    }
    int kr = lid / 8, cg = lid % 8; /* keys 4 kr .. 4 kr + 3, columns cg + 8 b */
    float acc[4][8];
    KD_UNROLL
    for (int a = 0; a < 4; a++)
        KD_UNROLL
    for (int b = 0; b < 8; b++)
        acc[a][b] = 0.0f;
    for (int r0 = 0; r0 < R; r0 += KD_MLA_TK) {
        KD_BARRIER(); /* key_at written; the previous step consumed */
        for (int i = lid; i < KD_MLA_BN * KD_MLA_TK; i += KD_WG) {
            int j = i / KD_MLA_TK, k = i - j * KD_MLA_TK;
            lt[j * (KD_MLA_TK + 1) + k] =
                j < nk && r0 + k < R ? kd_load(kv, kv_elem, key_at[j] + r0 + k) : 0.0f;
        }
        for (int i = lid; i < KD_MLA_TK * KD_MLA_DC; i += KD_WG) {
            int k, c; /* the weight's contiguous index runs fastest */
            float x = 0.0f;
            if (is_key) {
                c = i / KD_MLA_TK;
                k = i - c * KD_MLA_TK;
                if (c < ncol && r0 + k < R)
                    x = kd_load(w_uk, w_elem, ((kd_i64)h * N + c0 + c) * R + r0 + k);
            } else {
                k = i / KD_MLA_DC;
                c = i - k * KD_MLA_DC;
                if (c < ncol && r0 + k < R)
                    x = kd_load(w_uv, w_elem, ((kd_i64)h * R + r0 + k) * V + c0 + c);
            }
            wt[k * (KD_MLA_DC + 1) + c] = x;
        }
        KD_BARRIER();
        KD_UNROLL
        for (int k = 0; k < KD_MLA_TK; k++)
            KD_UNROLL
        for (int a = 0; a < 4; a++) {
            float x = lt[(4 * kr + a) * (KD_MLA_TK + 1) + k];
            KD_UNROLL
            for (int b = 0; b < 8; b++)
                acc[a][b] += x * wt[k * (KD_MLA_DC + 1) + cg + 8 * b];
        }
    }
    kd_i64 base = (kd_i64)(dkey0 / KD_MLA_BN) * d_blk + (kd_i64)h * d_head;
    if (!is_key) base += dst_v_off;
    KD_UNROLL
    for (int a = 0; a < 4; a++) {
        int j = 4 * kr + a;
        KD_UNROLL
        for (int b = 0; b < 8; b++) {
            int c = cg + 8 * b;
            if (j < nk && c < ncol)
                kd_store(dst, dst_elem, base + j * d_tok + c0 + c, acc[a][b] * kv_scale);
        }
    }
    if (ct != 0) return; /* no barrier after this point */
    for (int i = lid; i < nk * P; i += KD_WG) {
        int j = i / P, p = i - j * P;
        kd_store(dst, dst_elem, base + j * d_tok + N + p,
                 kd_load(kv, kv_elem, key_at[j] + R + p) * kv_scale);
    }
}
