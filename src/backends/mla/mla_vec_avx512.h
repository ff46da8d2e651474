/* AVX-512 fp32 primitives of the CPU_MLA kernels (see mla_kern_tmpl.h for
 * their contracts). Static functions: include only from files compiled
 * with AVX-512 flags (*_avx512.c). */
#ifndef ATTN_BACKENDS_MLA_VEC_AVX512_H
#define ATTN_BACKENDS_MLA_VEC_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "backends/mla/mla_internal.h"
#include "util/numeric.h"

/* ---- conversions ------------------------------------------------------------ */

static float v512_lut_e4m3[256], v512_lut_e5m2[256];
static pthread_once_t v512_lut_once = PTHREAD_ONCE_INIT;

static void v512_lut_init(void)
{
    for (int i = 0; i < 256; i++) {
        v512_lut_e4m3[i] = attn__e4m3_to_f32((uint8_t)i);
        v512_lut_e5m2[i] = attn__e5m2_to_f32((uint8_t)i);
    }
}

static inline __mmask16 v512_tail(int n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

static inline void k_load_row(const void *src, attn_elem e, int n, float *dst)
{
    int i = 0;
    switch (e) {
    case ATTN_ELEM_F32: memcpy(dst, src, sizeof(float) * (size_t)n); return;
    case ATTN_ELEM_BF16: {
        const uint16_t *s = src;
        for (; i < n; i += 16) {
            __mmask16 mk = v512_tail(n - i);
            __m256i h = _mm256_maskz_loadu_epi16(mk, s + i);
            __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
            _mm512_mask_storeu_ps(dst + i, mk, _mm512_castsi512_ps(w));
        }
        return;
    }
    case ATTN_ELEM_F16: {
        const uint16_t *s = src;
        for (; i < n; i += 16) {
            __mmask16 mk = v512_tail(n - i);
            __m256i h = _mm256_maskz_loadu_epi16(mk, s + i);
            _mm512_mask_storeu_ps(dst + i, mk, _mm512_cvtph_ps(h));
        }
        return;
    }
    case ATTN_ELEM_FP8_E4M3:
    case ATTN_ELEM_FP8_E5M2: {
        pthread_once(&v512_lut_once, v512_lut_init);
        const float *lut = e == ATTN_ELEM_FP8_E4M3 ? v512_lut_e4m3 : v512_lut_e5m2;
        const uint8_t *s = src;
        for (; i < n; i += 16) {
            __mmask16 mk = v512_tail(n - i);
            __m128i b = _mm_maskz_loadu_epi8(mk, s + i);
            __m512i idx = _mm512_cvtepu8_epi32(b);
            _mm512_mask_storeu_ps(dst + i, mk, _mm512_i32gather_ps(idx, lut, 4));
        }
        return;
    }
    default: attn__mla_load_row_f32(src, e, n, dst); return;
    }
}

static inline void k_store_row(const float *src, float mul, int n, attn_elem e, void *dst)
{
    __m512 vm = _mm512_set1_ps(mul);
    for (int i = 0; i < n; i += 16) {
        __mmask16 mk = v512_tail(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, src + i), vm);
        switch (e) {
        case ATTN_ELEM_F32: _mm512_mask_storeu_ps((float *)dst + i, mk, v); break;
        case ATTN_ELEM_BF16: {
            /* round to nearest even on the bits (NaN stays NaN, quieted) */
            __m512i u = _mm512_castps_si512(v);
            __m512i r = _mm512_add_epi32(
                u,
                _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                 _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
            __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x400000)));
            _mm256_mask_storeu_epi16((uint16_t *)dst + i, mk,
                                     _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
            break;
        }
        default:
            _mm256_mask_storeu_epi16(
                (uint16_t *)dst + i, mk,
                _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            break;
        }
    }
}

/* ---- 16 x 16 transpose ------------------------------------------------------------ */

static inline void v512_tr16(const float *s, size_t lds, float *d, size_t ldd)
{
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(s + (size_t)i * lds);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4g + j], lane L: column 4L + j of rows 4g .. 4g + 3 */
    for (int g = 0; g < 4; g++) {
        r[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        __m512 v0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);
        __m512 v1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
        __m512 v2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
        __m512 v3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
        _mm512_storeu_ps(d + (size_t)(0 + j) * ldd, _mm512_shuffle_f32x4(v0, v2, 0x88));
        _mm512_storeu_ps(d + (size_t)(4 + j) * ldd, _mm512_shuffle_f32x4(v0, v2, 0xDD));
        _mm512_storeu_ps(d + (size_t)(8 + j) * ldd, _mm512_shuffle_f32x4(v1, v3, 0x88));
        _mm512_storeu_ps(d + (size_t)(12 + j) * ldd, _mm512_shuffle_f32x4(v1, v3, 0xDD));
    }
}

static inline void k_transpose(const float *src, size_t lds, int rows, int cols, float *dst,
                               size_t ldd)
{
    int r0 = 0;
    for (; r0 + 16 <= rows; r0 += 16) {
        int c0 = 0;
        for (; c0 + 16 <= cols; c0 += 16)
            v512_tr16(src + (size_t)r0 * lds + c0, lds, dst + (size_t)c0 * ldd + r0, ldd);
        for (; c0 < cols; c0++)
            for (int r = 0; r < 16; r++)
                dst[(size_t)c0 * ldd + r0 + r] = src[(size_t)(r0 + r) * lds + c0];
    }
    for (; r0 < rows; r0++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * ldd + r0] = src[(size_t)r0 * lds + c];
}

/* ---- GEMM: C = (acc ? rowscale * C : 0) + A . B ----------------------------------- */

typedef void (*v512_mk_fn)(int K, const float *A, size_t lda, const float *B, size_t ldb, float *C,
                           size_t ldc, bool acc, const float *rs, __mmask16 tm);

#define V512_MK(MR, NV)                                                                            \
    static void v512_mk_##MR##_##NV(int K, const float *A, size_t lda, const float *B, size_t ldb, \
                                    float *C, size_t ldc, bool acc, const float *rs, __mmask16 tm) \
    {                                                                                              \
        __m512 c[MR][NV];                                                                          \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                      \
        {                                                                                          \
            __m512 sc = _mm512_set1_ps(rs ? rs[i] : 1.0f);                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++)                                   \
            {                                                                                      \
                __mmask16 mk = j == NV - 1 ? tm : (__mmask16)0xffff;                               \
                c[i][j] = acc ? _mm512_mul_ps(                                                     \
                                    sc, _mm512_maskz_loadu_ps(mk, C + (size_t)i * ldc + 16 * j))   \
                              : _mm512_setzero_ps();                                               \
            }                                                                                      \
        }                                                                                          \
        for (int k = 0; k < K; k++) {                                                              \
            __m512 b[NV];                                                                          \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) b[j] = _mm512_maskz_loadu_ps(     \
                j == NV - 1 ? tm : (__mmask16)0xffff, B + (size_t)k * ldb + 16 * j);               \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                  \
            {                                                                                      \
                __m512 a = _mm512_set1_ps(A[(size_t)i * lda + k]);                                 \
                _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) c[i][j] =                     \
                    _mm512_fmadd_ps(a, b[j], c[i][j]);                                             \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                      \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) _mm512_mask_storeu_ps(            \
                C + (size_t)i * ldc + 16 * j, j == NV - 1 ? tm : (__mmask16)0xffff, c[i][j]);      \
    }

/* narrow panels (N <= 32): 12 rows x 2 vectors; wide: 6 rows x 4 vectors */
#define V512_NARROW(MR) V512_MK(MR, 1) V512_MK(MR, 2)
/* clang-format off */
V512_NARROW(1)
V512_NARROW(2)
V512_NARROW(3)
V512_NARROW(4)
V512_NARROW(5)
V512_NARROW(6)
V512_NARROW(7)
V512_NARROW(8)
V512_NARROW(9)
V512_NARROW(10)
V512_NARROW(11)
V512_NARROW(12)
/* clang-format on */
#define V512_WIDE(MR) V512_MK(MR, 3) V512_MK(MR, 4)
/* clang-format off */
V512_WIDE(1)
V512_WIDE(2)
V512_WIDE(3)
V512_WIDE(4)
V512_WIDE(5)
V512_WIDE(6)
/* clang-format on */

#define V512_N2(MR)                                                                                \
    {                                                                                              \
        NULL, v512_mk_##MR##_1, v512_mk_##MR##_2                                                   \
    }
static const v512_mk_fn v512_narrow[13][3] = {
    {NULL, NULL, NULL}, V512_N2(1), V512_N2(2), V512_N2(3),  V512_N2(4),  V512_N2(5),  V512_N2(6),
    V512_N2(7),         V512_N2(8), V512_N2(9), V512_N2(10), V512_N2(11), V512_N2(12),
};
#define V512_N4(MR)                                                                                \
    {                                                                                              \
        NULL, v512_mk_##MR##_1, v512_mk_##MR##_2, v512_mk_##MR##_3, v512_mk_##MR##_4               \
    }
static const v512_mk_fn v512_wide[7][5] = {
    {NULL, NULL, NULL, NULL, NULL},
    V512_N4(1),
    V512_N4(2),
    V512_N4(3),
    V512_N4(4),
    V512_N4(5),
    V512_N4(6),
};

static inline void k_gemm(int M, int N, int K, const float *A, size_t lda, const float *B,
                          size_t ldb, float *C, size_t ldc, bool acc, const float *rs)
{
    if (M <= 0 || N <= 0) return;
    if (N <= 32) {
        int nv = (N + 15) / 16;
        __mmask16 tm = v512_tail(N - 16 * (nv - 1));
        for (int i0 = 0; i0 < M; i0 += 12) {
            int mr = M - i0 < 12 ? M - i0 : 12;
            v512_narrow[mr][nv](K, A + (size_t)i0 * lda, lda, B, ldb, C + (size_t)i0 * ldc, ldc,
                                acc, rs ? rs + i0 : NULL, tm);
        }
        return;
    }
    for (int j0 = 0; j0 < N; j0 += 64) {
        int nn = N - j0 < 64 ? N - j0 : 64;
        int nv = (nn + 15) / 16;
        __mmask16 tm = v512_tail(nn - 16 * (nv - 1));
        for (int i0 = 0; i0 < M; i0 += 6) {
            int mr = M - i0 < 6 ? M - i0 : 6;
            v512_wide[mr][nv](K, A + (size_t)i0 * lda, lda, B + j0, ldb, C + (size_t)i0 * ldc + j0,
                              ldc, acc, rs ? rs + i0 : NULL, tm);
        }
    }
}

/* ---- softmax ------------------------------------------------------------------------ */

/* 2^x: round-to-nearest split, Cephes' degree-6 polynomial on [-1/2, 1/2],
 * scalef for the exponent; relative error ~1e-7. */
static inline __m512 v512_exp2(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-150.0f));
    __m512 fl = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, fl);
    __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, fl);
}

static inline void k_softmax(float *S, size_t lds, int M, int nk, const int *vis, float mul,
                             float *m, float *l, float *alpha)
{
    int nv = (nk + 15) / 16; /* nk <= 64 */
    __m512 vmul = _mm512_set1_ps(mul), ninf = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < M; i++) {
        float *row = S + (size_t)i * lds;
        int vi = vis ? vis[i] : nk;
        if (vi <= 0) {
            memset(row, 0, sizeof(float) * (size_t)nk);
            alpha[i] = 1.0f;
            continue;
        }
        __m512 x[4];
        __mmask16 mk[4];
        __m512 mx = ninf;
        for (int j = 0; j < nv; j++) {
            int left = vi - 16 * j;
            mk[j] = left <= 0 ? 0 : v512_tail(left);
            __m512 v = _mm512_maskz_loadu_ps(v512_tail(nk - 16 * j), row + 16 * j);
            x[j] = _mm512_mask_mul_ps(ninf, mk[j], v, vmul);
            mx = _mm512_max_ps(mx, x[j]);
        }
        float rmax = _mm512_reduce_max_ps(mx);
        float mn = m[i] > rmax ? m[i] : rmax;
        float a = m[i] == -INFINITY ? 0.0f : exp2f(m[i] - mn);
        __m512 vm = _mm512_set1_ps(mn), sum = _mm512_setzero_ps();
        for (int j = 0; j < nv; j++) {
            __m512 p = _mm512_maskz_mov_ps(mk[j], v512_exp2(_mm512_sub_ps(x[j], vm)));
            _mm512_mask_storeu_ps(row + 16 * j, v512_tail(nk - 16 * j), p);
            sum = _mm512_add_ps(sum, p);
        }
        l[i] = l[i] * a + _mm512_reduce_add_ps(sum);
        m[i] = mn;
        alpha[i] = a;
    }
}

#endif
