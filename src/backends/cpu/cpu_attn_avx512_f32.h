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

/* ---- shared math: softmax_row and f32_qk of cpu_attn_tmpl.h ---------------------- */

#define VI                      __m512i
#define V_ZERO                  _mm512_setzero_ps
#define V_ADD                   _mm512_add_ps
#define V_SUB                   _mm512_sub_ps
#define V_SET1I                 _mm512_set1_epi32
#define V_ADDI                  _mm512_add_epi32
#define V_IOTAF()               _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define V_IOTAI()               _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define VM                      __mmask16
#define V_INSIDE(idx, lo, hi)   (_mm512_cmpge_epi32_mask(idx, lo) & _mm512_cmple_epi32_mask(idx, hi))
#define V_BLEND_IN(in, ninf, x) _mm512_mask_blend_ps(in, ninf, x)
#define V_LIVE(x, ninf)         _mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_OQ)
#define V_KEEP(live, p)         _mm512_maskz_mov_ps(live, p)
#define V_RMAX                  _mm512_reduce_max_ps
#define V_RADD                  _mm512_reduce_add_ps
#define V_PAD                   pad16
#define V_QK_SCALE(j)           ((j)->qk_scale)
#define CV_QK                   f32_qk
#define KT                      float
#define V_QK_ATTR
#define V_QK_PARAMS
#define V_QK_SETUP
#define V_QK_KSTEP       Dp
#define V_QK_LOADK(k, d) _mm512_loadu_ps((k) + (d))
#define V_QK_PREFETCH(j, t)
/* s[1] may be a pad slot */
#define V_QK_STORE(s, nr, two, a00, a10, a20, a30, a01, a11, a21, a31)                             \
    s[0] = _mm512_reduce_add_ps(a00);                                                              \
    s[1] = _mm512_reduce_add_ps(a01);                                                              \
    if (nr > 1) {                                                                                  \
        s[ATTN_CPU_CHUNK] = _mm512_reduce_add_ps(a10);                                             \
        s[ATTN_CPU_CHUNK + 1] = _mm512_reduce_add_ps(a11);                                         \
    }                                                                                              \
    if (nr > 2) {                                                                                  \
        s[2 * ATTN_CPU_CHUNK] = _mm512_reduce_add_ps(a20);                                         \
        s[2 * ATTN_CPU_CHUNK + 1] = _mm512_reduce_add_ps(a21);                                     \
    }                                                                                              \
    if (nr > 3) {                                                                                  \
        s[3 * ATTN_CPU_CHUNK] = _mm512_reduce_add_ps(a30);                                         \
        s[3 * ATTN_CPU_CHUNK + 1] = _mm512_reduce_add_ps(a31);                                     \
    }
#include "backends/cpu/cpu_attn_tmpl.h"

/* ---- fp32 FMA path ------------------------------------------------------------- */

__attribute__((used)) static void f32_prep_q(attn__cpu_job *j, const void *const *qrows)
{
    float *q = j->qbuf;
    int Dp = pad16(j->D);
    for (int r = 0; r < j->R; r++)
        row_to_f32(q + (size_t)r * Dp, qrows[r], j->D, j->q_elem);
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
