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

/* e^x, x <= 0 in practice; inputs below -87.3 give the smallest normal */
static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* logits soft-capping, cap * tanh(x / cap), lane by lane (libm tanhf:
 * the same values as REFERENCE's) */
static inline __m512 softcap16(__m512 x, float cap)
{
    float tmp[16];
    _mm512_storeu_ps(tmp, x);
    for (int i = 0; i < 16; i++)
        tmp[i] = cap * tanhf(tmp[i] / cap);
    return _mm512_loadu_ps(tmp);
}

/* 16 elements of e as fp32 */
static inline __m512 load16_f32(const void *src, attn_elem e)
{
    switch (e) {
    case ATTN_ELEM_F32: return _mm512_loadu_ps(src);
    case ATTN_ELEM_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)src)), 16));
    case ATTN_ELEM_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)src));
    case ATTN_ELEM_FP8_E5M2: {
        __m128i b = _mm_loadu_si128((const __m128i *)src);
        return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
    }
    default: { /* e4m3: magnitude << 7 is an fp16 of value * 2^-8, subnormals included */
        __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)src));
        __m256i h =
            _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), 7),
                            _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8));
        return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
    }
    }
}

static inline void row_to_f32(float *dst, const void *src, int d, attn_elem e)
{
    size_t es = attn_elem_size(e);
    int i = 0;
    for (; i + 16 <= d; i += 16)
        _mm512_storeu_ps(dst + i, load16_f32((const char *)src + (size_t)i * es, e));
    if (i < d) {
        unsigned char tmp[64] = {0};
        memcpy(tmp, (const char *)src + (size_t)i * es, (size_t)(d - i) * es);
        _mm512_storeu_ps(dst + i, load16_f32(tmp, e));
    }
}

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
