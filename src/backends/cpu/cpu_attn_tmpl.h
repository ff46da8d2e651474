/* The CPU_ATTN online-softmax step and the 4 rows x 2 keys QK block,
 * written once for every vector width. The includer has included
 * cpu_vec_tmpl.h (VF, VN, the fp32 operations, CV_EXP, CV_SOFTCAP) and
 * defines, before including this file:
 *
 *   VI                         the int32 vector type;
 *   V_ZERO() V_ADD V_SUB       fp32; V_SET1I V_ADDI: int32;
 *   V_IOTAF() V_IOTAI()        lanes 0 .. VN-1 (fp32, int32);
 *   VM                         a lane mask (a vector or a mask register);
 *   V_INSIDE(idx, lo, hi)      lo <= idx <= hi (int32 lanes);
 *   V_BLEND_IN(in, ninf, x)    x where in, else ninf;
 *   V_LIVE(x, ninf) V_KEEP(live, p)   x != ninf; p where live, else 0;
 *   V_RMAX(v) V_RADD(v)        horizontal max / sum to a float;
 *   V_PAD(n)                   n rounded up to a multiple of VN;
 *   V_QK_SCALE(j)              the factor of the raw scores;
 *   CV_QK, KT, V_QK_ATTR       the QK function's name, its key pointer type,
 *                              its attributes;
 *   V_QK_PARAMS, V_QK_SETUP    its parameters after n (", a, b" or nothing),
 *                              declarations at its start (or nothing);
 *   V_QK_KSTEP                 the distance of key rows, in KT;
 *   V_QK_LOADK(k, d)           VN key elements from row k at element d;
 *   V_QK_PREFETCH(j, t)        prefetches before keys t, t + 1 (or nothing);
 *   V_QK_STORE(s, nr, two, a00, a10, a20, a30, a01, a11, a21, a31)
 *                              the sums of the accumulators of keys t (a.0)
 *                              and t + 1 (a.1, when two) to score rows s,
 *                              s + ATTN_CPU_CHUNK, .. of nr rows.
 */
#ifndef ATTN_CPU_ATTN_TMPL_H
#define ATTN_CPU_ATTN_TMPL_H

#include "backends/cpu/cpu_attn.h"

/* Scores of row r (s[0..n), scratch row of ATTN_CPU_CHUNK) -> probabilities
 * against the updated running max. Returns the factor for the row's earlier
 * output, or -1 when the row sees none of these keys. Keys past n and
 * outside [lo, hi] get probability 0. */
static float softmax_row(attn__cpu_job *j, int r, int n, int key0, bool masked)
{
    float *s = j->s + (size_t)r * ATTN_CPU_CHUNK;
    int lo = 0, hi = n - 1;
    if (masked) {
        if (j->lo[r] - key0 > lo) lo = j->lo[r] - key0;
        if (j->hi[r] - key0 < hi) hi = j->hi[r] - key0;
        if (lo > hi) return -1.0f;
    }
    int nv = V_PAD(n);
    VF sc = V_SET1(V_QK_SCALE(j));
    VF mx = V_SET1(-INFINITY), ninf = mx;
    VF slope = V_SET1(j->slope ? j->slope[r] : 0.0f);
    VF rel0 = V_SET1((float)(key0 - j->pos[r]));
    VF fiota = V_IOTAF();
    VI iiota = V_IOTAI();
    VI vlo = V_SET1I(lo), vhi = V_SET1I(hi);
    for (int t = 0; t < nv; t += VN) {
        VF x = V_MUL(V_LOADU(s + t), sc);
        if (j->softcap > 0.0f) x = CV_SOFTCAP(x, j->softcap);
        if (j->slope) x = V_FMADD(slope, V_ADD(rel0, V_ADD(fiota, V_SET1((float)t))), x);
        VI idx = V_ADDI(iiota, V_SET1I(t));
        VM in = V_INSIDE(idx, vlo, vhi);
        x = V_BLEND_IN(in, ninf, x);
        V_STOREU(s + t, x);
        mx = V_MAX(mx, x);
    }
    float cmax = V_RMAX(mx);
    float mold = j->m[r];
    float mnew = mold > cmax ? mold : cmax;
    float alpha = j->l[r] > 0.0f ? expf(mold - mnew) : 0.0f;
    VF vm = V_SET1(mnew), sum = V_ZERO();
    for (int t = 0; t < nv; t += VN) {
        VF x = V_LOADU(s + t);
        VM live = V_LIVE(x, ninf);
        VF p = V_KEEP(live, CV_EXP(V_SUB(x, vm)));
        V_STOREU(s + t, p);
        sum = V_ADD(sum, p);
    }
    j->l[r] = j->l[r] * alpha + V_RADD(sum);
    j->m[r] = mnew;
    return alpha;
}

/* s[r][t] = q_r . k_t for the job's rows in groups of 4, keys in pairs,
 * key row t at k + t * V_QK_KSTEP (elements of KT) */
static V_QK_ATTR void CV_QK(const attn__cpu_job *j, const KT *k, int n V_QK_PARAMS)
{
    V_QK_SETUP
    int Dp = V_PAD(j->D);
    const float *qb = j->qbuf;
    for (int r0 = 0; r0 < j->R; r0 += 4) {
        int nr = j->R - r0 < 4 ? j->R - r0 : 4;
        const float *q0 = qb + (size_t)r0 * Dp;
        const float *q1 = nr > 1 ? q0 + Dp : q0;
        const float *q2 = nr > 2 ? q0 + 2 * Dp : q0;
        const float *q3 = nr > 3 ? q0 + 3 * Dp : q0;
        for (int t = 0; t < n; t += 2) {
            V_QK_PREFETCH(j, t)
            const KT *k0 = k + (size_t)t * V_QK_KSTEP;
            const KT *k1 = t + 1 < n ? k0 + V_QK_KSTEP : k0;
            VF a00 = V_ZERO(), a10 = a00, a20 = a00, a30 = a00;
            VF a01 = a00, a11 = a00, a21 = a00, a31 = a00;
            for (int d = 0; d < Dp; d += VN) {
                VF kv0 = V_QK_LOADK(k0, d), kv1 = V_QK_LOADK(k1, d);
                VF x = V_LOADU(q0 + d);
                a00 = V_FMADD(x, kv0, a00);
                a01 = V_FMADD(x, kv1, a01);
                x = V_LOADU(q1 + d);
                a10 = V_FMADD(x, kv0, a10);
                a11 = V_FMADD(x, kv1, a11);
                x = V_LOADU(q2 + d);
                a20 = V_FMADD(x, kv0, a20);
                a21 = V_FMADD(x, kv1, a21);
                x = V_LOADU(q3 + d);
                a30 = V_FMADD(x, kv0, a30);
                a31 = V_FMADD(x, kv1, a31);
            }
            float *s = j->s + (size_t)r0 * ATTN_CPU_CHUNK + t;
            V_QK_STORE(s, nr, t + 1 < n, a00, a10, a20, a30, a01, a11, a21, a31)
        }
    }
}

#endif
