/* AVX-512 fp32 primitives of the CPU_MLA kernels (see mla_kern_tmpl.h for
 * their contracts): mla_vec_tmpl.h on 16-wide vectors, and the row
 * conversions. Static functions: include only from files compiled with
 * AVX-512 flags (*_avx512.c, *_amx.c). */
#ifndef ATTN_BACKENDS_MLA_VEC_AVX512_H
#define ATTN_BACKENDS_MLA_VEC_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "backends/mla/mla_internal.h"
#include "util/numeric.h"

static inline __mmask16 v512_tail(int n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* ---- the vector ISA of mla_vec_tmpl.h ---------------------------------------- */

#define V512_RNE                  (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VT(x)                     v512_##x
#define VT_P(op)                  _mm512_##op##_ps
#define VT_V                      __m512
#define VT_M                      __mmask16
#define VT_W                      16
#define VT_FULL                   (__mmask16)0xffff
#define VT_NONE                   0
#define VT_TAIL(n)                v512_tail(n)
#define VT_LOADM(mk, p)           _mm512_maskz_loadu_ps(mk, p)
#define VT_STOREM(p, mk, v)       _mm512_mask_storeu_ps(p, mk, v)
#define VT_MASKMUL(src, mk, a, b) _mm512_mask_mul_ps(src, mk, a, b)
#define VT_MASKZ(mk, v)           _mm512_maskz_mov_ps(mk, v)
#define VT_HMAX(v)                _mm512_reduce_max_ps(v)
#define VT_HSUM(v)                _mm512_reduce_add_ps(v)
#define VT_ROUND(x)               _mm512_roundscale_ps(x, V512_RNE)
#define VT_SCALE2(p, e)           _mm512_scalef_ps(p, e)
#define VT_EXP2_MIN               -150.0f
/* narrow panels (N <= 32): 12 rows x 2 vectors; wide: 6 rows x 4 vectors */
#define VT_NARROW_MR 12
#define VT_WIDE_MR   6
#define VT_WIDE_NV   4

/* The 16 x 16 transpose's last stage (after VT_TR4): 4 x 4 blocks across
 * the lanes; STORE(d, ld, i, v) stores row i of the result. */
#define V512_TR_LANES(r, d, ld, STORE)                                                             \
    for (int j = 0; j < 4; j++) {                                                                  \
        __m512 v0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);                                    \
        __m512 v1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);                                    \
        __m512 v2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);                               \
        __m512 v3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);                               \
        STORE(d, ld, 0 + j, _mm512_shuffle_f32x4(v0, v2, 0x88));                                   \
        STORE(d, ld, 4 + j, _mm512_shuffle_f32x4(v0, v2, 0xDD));                                   \
        STORE(d, ld, 8 + j, _mm512_shuffle_f32x4(v1, v3, 0x88));                                   \
        STORE(d, ld, 12 + j, _mm512_shuffle_f32x4(v1, v3, 0xDD));                                  \
    }
#define VT_TR                    v512_tr16
#define V512_STOREU(d, ld, i, v) _mm512_storeu_ps(d + (size_t)(i) * (ld), v)
#define VT_TR_LANES(r, d, ldd)   V512_TR_LANES(r, d, ldd, V512_STOREU)

#include "backends/mla/mla_vec_tmpl.h"

/* ---- conversions ------------------------------------------------------------ */

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

#endif
