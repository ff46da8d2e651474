/* MLA's projections around forward_mqa on a device (TRITON_MLA on CUDA; the
 * same text on PoCL in the tests): attn_kd_mla_project computes, for every
 * token t and head h, out[t][h][c] = sum_k in[t][h][k] * w[h][k][c] for
 * c < nout (fp32 sums, stored as the element with the host's rounding),
 * then copies in[t][h][kin + j] to out[t][h][nout + j] for j < ncopy
 * unchanged. The absorb is (in = q [T][H][N + P], w = W_UK [H][N][R],
 * kin = N, nout = R, ncopy = P); the up-projection (in = the latent output
 * [T][H][R], w = W_UV [H][R][V], kin = R, nout = V, ncopy = 0): the host's
 * attn_mla_absorb_q and attn_mla_up_project.
 *
 * A work-group serves KD_PJ_T tokens of one head and KD_WG output columns
 * (one per work-item, KD_PJ_T sums each); the tokens' inputs go through
 * local memory in chunks of KD_PJ_K, every work-item reading its column of
 * w once per chunk (consecutive work-items, consecutive columns). Grid:
 * (column tiles, token tiles, heads); the first column tile also copies. */
#if !defined(__OPENCL_C_VERSION__) && !defined(__OPENCL_VERSION__)
#include "attn_kdialect.h"
#endif

#define KD_PJ_P (KD_PJ_K + 1) /* padded pitch of a token's chunk */

KD_KERNEL KD_WG_SIZE(KD_WG) void attn_kd_mla_project(
    KD_GLOBAL const kd_u8 *KD_RESTRICT in, kd_i64 in_off, kd_i64 in_tok, kd_i64 in_head,
    KD_GLOBAL const kd_u8 *KD_RESTRICT w, KD_GLOBAL kd_u8 *KD_RESTRICT out, kd_i64 out_off,
    kd_i64 out_tok, kd_i64 out_head, int T, int kin, int nout, int ncopy, int elem)
{
    KD_LOCAL_ARRAY(float, xs, KD_PJ_T *KD_PJ_P);

    int lid = KD_LOCAL_ID(), c = KD_GROUP_ID(0) * KD_WG + lid;
    int t0 = KD_GROUP_ID(1) * KD_PJ_T, h = KD_GROUP_ID(2);
    int nt = kd_min(KD_PJ_T, T - t0);
    kd_i64 in0 = in_off + (kd_i64)t0 * in_tok + (kd_i64)h * in_head;
    kd_i64 out0 = out_off + (kd_i64)t0 * out_tok + (kd_i64)h * out_head;
    kd_i64 w0 = (kd_i64)h * kin * nout + c;
    float acc[KD_PJ_T];
    KD_UNROLL
    for (int i = 0; i < KD_PJ_T; i++)
        acc[i] = 0.0f;
    for (int k0 = 0; k0 < kin; k0 += KD_PJ_K) {
        int nk = kd_min(KD_PJ_K, kin - k0);
        KD_BARRIER(); /* the previous chunk is consumed */
        for (int i = lid; i < KD_PJ_T * KD_PJ_K; i += KD_WG) {
            int tt = i / KD_PJ_K, k = i - tt * KD_PJ_K;
            xs[tt * KD_PJ_P + k] =
                tt < nt && k < nk ? kd_load(in, elem, in0 + (kd_i64)tt * in_tok + k0 + k) : 0.0f;
        }
        KD_BARRIER();
        if (c < nout) {
            for (int k = 0; k < nk; k++) {
                float wv = kd_load(w, elem, w0 + (kd_i64)(k0 + k) * nout);
                KD_UNROLL
                for (int tt = 0; tt < KD_PJ_T; tt++)
                    acc[tt] += xs[tt * KD_PJ_P + k] * wv;
            }
        }
    }
    if (c < nout) {
        KD_UNROLL
        for (int tt = 0; tt < KD_PJ_T; tt++)
            if (tt < nt) kd_store(out, elem, out0 + (kd_i64)tt * out_tok + c, acc[tt]);
    }
    if (KD_GROUP_ID(0) == 0) {
        for (int i = lid; i < nt * ncopy; i += KD_WG) {
            int tt = i / ncopy, j = i - tt * ncopy;
            kd_copy(out, out0 + (kd_i64)tt * out_tok + nout + j, in,
                    in0 + (kd_i64)tt * in_tok + kin + j, elem);
        }
    }
}
