/* The shared part of the CPU_ATTN AVX-512 variants: the fp32 FMA path and
 * the online softmax. Static, included by cpu_attn_avx512.c (the plain
 * "avx512" variant) and cpu_attn_avx512bf16.c (avx512-bf16, amx-bf16), so
 * each variant is compiled with exactly its own ISA flags. */
#ifndef ATTN_CPU_ATTN_AVX512_F32_H
#define ATTN_CPU_ATTN_AVX512_F32_H

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/cpu/cpu_simd_avx512.h"
#include "util/amx.h"
#include "util/numeric.h"

/* The "avx512" descriptor's functions are marked used: emitted out of line
 * in both files, as before the per-ISA split, so the bf16 file's code stays
 * instruction-identical to the tested single file's. */
__attribute__((used)) static bool avx512_usable(void)
{
    return attn_cpu_has(ATTN_CPU_AVX512F) && attn_cpu_has(ATTN_CPU_AVX512BW) &&
           attn_cpu_has(ATTN_CPU_AVX512VL) && attn_cpu_has(ATTN_CPU_AVX512DQ) &&
           attn_cpu_has(ATTN_CPU_FMA) && attn_cpu_has(ATTN_CPU_F16C) && attn_cpu_has(ATTN_CPU_AVX2);
}

/* Prefetch key/value row t of the next chunk (see attn__cpu_job.pf_*). */
static inline void prefetch_next(const attn__cpu_job *j, int t)
{
    if (t >= j->pf_n) return;
    size_t es = attn_elem_size(j->kv_elem);
    const char *k = (const char *)j->pf_k + (size_t)t * (size_t)j->pf_stride * es;
    const char *v = (const char *)j->pf_v + (size_t)t * (size_t)j->pf_stride * es;
    size_t kb = (size_t)j->D * es, vb = (size_t)j->Dv * es;
    for (size_t o = 0; o < kb; o += 64)
        _mm_prefetch(k + o, _MM_HINT_T2);
    for (size_t o = 0; o < vb; o += 64)
        _mm_prefetch(v + o, _MM_HINT_T2);
}

/* ---- shared math ---------------------------------------------------------------- */

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
    int nv = pad16(n);
    __m512 sc = _mm512_set1_ps(j->qk_scale);
    __m512 mx = _mm512_set1_ps(-INFINITY), ninf = mx;
    __m512 slope = _mm512_set1_ps(j->slope ? j->slope[r] : 0.0f);
    __m512 rel0 = _mm512_set1_ps((float)(key0 - j->pos[r]));
    __m512 fiota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i iiota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
    for (int t = 0; t < nv; t += 16) {
        __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + t), sc);
        if (j->softcap > 0.0f) x = softcap16(x, j->softcap);
        if (j->slope)
            x = _mm512_fmadd_ps(
                slope, _mm512_add_ps(rel0, _mm512_add_ps(fiota, _mm512_set1_ps((float)t))), x);
        __m512i idx = _mm512_add_epi32(iiota, _mm512_set1_epi32(t));
        __mmask16 in = _mm512_cmpge_epi32_mask(idx, vlo) & _mm512_cmple_epi32_mask(idx, vhi);
        x = _mm512_mask_blend_ps(in, ninf, x);
        _mm512_storeu_ps(s + t, x);
        mx = _mm512_max_ps(mx, x);
    }
    float cmax = _mm512_reduce_max_ps(mx);
    float mold = j->m[r];
    float mnew = mold > cmax ? mold : cmax;
    float alpha = j->l[r] > 0.0f ? expf(mold - mnew) : 0.0f;
    __m512 vm = _mm512_set1_ps(mnew), sum = _mm512_setzero_ps();
    for (int t = 0; t < nv; t += 16) {
        __m512 x = _mm512_loadu_ps(s + t);
        __mmask16 live = _mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_OQ);
        __m512 p = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(x, vm)));
        _mm512_storeu_ps(s + t, p);
        sum = _mm512_add_ps(sum, p);
    }
    j->l[r] = j->l[r] * alpha + _mm512_reduce_add_ps(sum);
    j->m[r] = mnew;
    return alpha;
}

/* ---- fp32 FMA path ------------------------------------------------------------- */

__attribute__((used)) static void f32_prep_q(attn__cpu_job *j, const void *const *qrows)
{
    float *q = j->qbuf;
    int Dp = pad16(j->D);
    for (int r = 0; r < j->R; r++)
        row_to_f32(q + (size_t)r * Dp, qrows[r], j->D, j->q_elem);
}

static void f32_qk(const attn__cpu_job *j, const float *kf, int n)
{
    int Dp = pad16(j->D);
    const float *qb = j->qbuf;
    for (int r0 = 0; r0 < j->R; r0 += 4) {
        int nr = j->R - r0 < 4 ? j->R - r0 : 4;
        const float *q0 = qb + (size_t)r0 * Dp;
        const float *q1 = nr > 1 ? q0 + Dp : q0;
        const float *q2 = nr > 2 ? q0 + 2 * Dp : q0;
        const float *q3 = nr > 3 ? q0 + 3 * Dp : q0;
        for (int t = 0; t < n; t += 2) {
            const float *k0 = kf + (size_t)t * Dp;
            const float *k1 = t + 1 < n ? k0 + Dp : k0;
            __m512 a00 = _mm512_setzero_ps(), a10 = a00, a20 = a00, a30 = a00;
            __m512 a01 = a00, a11 = a00, a21 = a00, a31 = a00;
            for (int d = 0; d < Dp; d += 16) {
                __m512 kv0 = _mm512_loadu_ps(k0 + d), kv1 = _mm512_loadu_ps(k1 + d);
                __m512 x = _mm512_loadu_ps(q0 + d);
                a00 = _mm512_fmadd_ps(x, kv0, a00);
                a01 = _mm512_fmadd_ps(x, kv1, a01);
                x = _mm512_loadu_ps(q1 + d);
                a10 = _mm512_fmadd_ps(x, kv0, a10);
                a11 = _mm512_fmadd_ps(x, kv1, a11);
                x = _mm512_loadu_ps(q2 + d);
                a20 = _mm512_fmadd_ps(x, kv0, a20);
                a21 = _mm512_fmadd_ps(x, kv1, a21);
                x = _mm512_loadu_ps(q3 + d);
                a30 = _mm512_fmadd_ps(x, kv0, a30);
                a31 = _mm512_fmadd_ps(x, kv1, a31);
            }
            float *s = j->s + (size_t)r0 * ATTN_CPU_CHUNK + t;
            s[0] = _mm512_reduce_add_ps(a00);
            s[1] = _mm512_reduce_add_ps(a01);
            if (nr > 1) {
                s[ATTN_CPU_CHUNK] = _mm512_reduce_add_ps(a10);
                s[ATTN_CPU_CHUNK + 1] = _mm512_reduce_add_ps(a11);
            }
            if (nr > 2) {
                s[2 * ATTN_CPU_CHUNK] = _mm512_reduce_add_ps(a20);
                s[2 * ATTN_CPU_CHUNK + 1] = _mm512_reduce_add_ps(a21);
            }
            if (nr > 3) {
                s[3 * ATTN_CPU_CHUNK] = _mm512_reduce_add_ps(a30);
                s[3 * ATTN_CPU_CHUNK + 1] = _mm512_reduce_add_ps(a31);
            }
        }
    }
}

static void f32_pv(attn__cpu_job *j, const float *vf, int n, const float *alpha)
{
    int Dvp = pad16(j->Dv);
    for (int r0 = 0; r0 < j->R; r0 += 4) {
        int rows[4], live = 0;
        for (int i = r0; i < j->R && i < r0 + 4; i++)
            if (alpha[i] >= 0.0f) rows[live++] = i;
        if (!live) continue;
        for (int i = live; i < 4; i++)
            rows[i] = rows[0];
        const float *p[4];
        float *o[4];
        __m512 al[4];
        for (int i = 0; i < 4; i++) {
            p[i] = j->s + (size_t)rows[i] * ATTN_CPU_CHUNK;
            o[i] = j->o + (size_t)rows[i] * j->o_stride;
            al[i] = _mm512_set1_ps(alpha[rows[i]]);
        }
        for (int d = 0; d < Dvp; d += 32) {
            bool two = d + 32 <= Dvp;
            __m512 c0[4], c1[4];
            for (int i = 0; i < 4; i++) {
                c0[i] = _mm512_mul_ps(_mm512_loadu_ps(o[i] + d), al[i]);
                c1[i] = two ? _mm512_mul_ps(_mm512_loadu_ps(o[i] + d + 16), al[i])
                            : _mm512_setzero_ps();
            }
            for (int t = 0; t < n; t++) {
                const float *vr = vf + (size_t)t * Dvp + d;
                __m512 v0 = _mm512_loadu_ps(vr);
                __m512 v1 = two ? _mm512_loadu_ps(vr + 16) : v0;
                for (int i = 0; i < 4; i++) {
                    __m512 b = _mm512_set1_ps(p[i][t]);
                    c0[i] = _mm512_fmadd_ps(b, v0, c0[i]);
                    if (two) c1[i] = _mm512_fmadd_ps(b, v1, c1[i]);
                }
            }
            for (int i = 3; i >= 0; i--) { /* duplicate rows store the same values */
                _mm512_storeu_ps(o[i] + d, c0[i]);
                if (two) _mm512_storeu_ps(o[i] + d + 16, c1[i]);
            }
        }
    }
}

__attribute__((used)) static void f32_chunk(attn__cpu_job *j, const void *k, const void *v,
                                            int64_t stride, int n, int key0, bool masked)
{
    int Dp = pad16(j->D), Dvp = pad16(j->Dv);
    float *kf = j->scratch;
    float *vf = kf + (size_t)ATTN_CPU_CHUNK * ATTN_CPU_MAX_HEAD;
    size_t es = attn_elem_size(j->kv_elem);
    for (int t = 0; t < n; t++) {
        prefetch_next(j, t);
        row_to_f32(kf + (size_t)t * Dp, (const char *)k + (size_t)(t * stride) * es, j->D,
                   j->kv_elem);
        row_to_f32(vf + (size_t)t * Dvp, (const char *)v + (size_t)(t * stride) * es, j->Dv,
                   j->kv_elem);
    }
    f32_qk(j, kf, n);
    float alpha[ATTN_CPU_MAX_ROWS];
    for (int r = 0; r < j->R; r++)
        alpha[r] = softmax_row(j, r, n, key0, masked);
    f32_pv(j, vf, n, alpha);
}

#endif
