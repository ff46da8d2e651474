/* Small AVX-512 helpers shared by the CPU_ATTN AVX-512 kernel files
 * (compiled only into *_avx512.c units). */
#ifndef ATTN_BACKENDS_CPU_SIMD_AVX512_H
#define ATTN_BACKENDS_CPU_SIMD_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn/types.h"

static inline int pad16(int d)
{
    return (d + 15) & ~15;
}

static inline int pad32(int d)
{
    return (d + 31) & ~31;
}

/* e4m3: magnitude << 7 is an fp16 of value * 2^-8, subnormals included */
static inline __m512 e4m3x16(const void *src)
{
    __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)src));
    __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), 7),
                                _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
}

/* exp512, softcap16, load16_f32 (16 elements of e as fp32), row_to_f32 */
#define VF              __m512
#define VN              16
#define V_SET1          _mm512_set1_ps
#define V_LOADU         _mm512_loadu_ps
#define V_STOREU        _mm512_storeu_ps
#define V_MUL           _mm512_mul_ps
#define V_MAX           _mm512_max_ps
#define V_FMADD         _mm512_fmadd_ps
#define V_FNMADD        _mm512_fnmadd_ps
#define V_ROUND(x)      _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_SCALE2N(p, n) _mm512_scalef_ps(p, n)
#define V_FROM_BF16(p)                                                                             \
    _mm512_castsi512_ps(                                                                           \
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define V_FROM_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define V_FROM_E5M2(p)                                                                             \
    _mm512_cvtph_ps(                                                                               \
        _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p))), 8))
#define V_FROM_E4M3(p) e4m3x16(p)
#define CV_EXP         exp512
#define CV_SOFTCAP     softcap16
#define CV_LOAD        load16_f32
#define CV_ROW         row_to_f32
#define CV_LOAD_ATTR
#include "backends/cpu/cpu_vec_tmpl.h"

/* sum of each of 16 vectors, lane t = sum(v[t]) */
static inline __attribute__((always_inline)) __m512 reduce16(const float *v)
{
    __m512 x[8], y[4];
    for (int i = 0; i < 8; i++) {
        __m512 a = _mm512_load_ps(v + (2 * i) * 16), b = _mm512_load_ps(v + (2 * i + 1) * 16);
        x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    }
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(x[2 * i]), b = _mm512_castps_pd(x[2 * i + 1]);
        y[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    __m512 u01 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
    __m512 u23 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* transpose of a 16x16 matrix of 32-bit elements */
static inline void transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* r[4i+k] holds, per 128-bit lane L, column k of rows 4i..4i+3 of lane L */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            t[8 * i + k] =
                _mm512_shuffle_i32x4(r[8 * i + k], r[8 * i + 4 + k], _MM_SHUFFLE(2, 0, 2, 0));
            t[8 * i + 4 + k] =
                _mm512_shuffle_i32x4(r[8 * i + k], r[8 * i + 4 + k], _MM_SHUFFLE(3, 1, 3, 1));
        }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_i32x4(t[k], t[8 + k], _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + k] = _mm512_shuffle_i32x4(t[k], t[8 + k], _MM_SHUFFLE(3, 1, 3, 1));
        r[4 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

#endif
