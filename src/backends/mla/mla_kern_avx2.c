/* CPU_MLA AVX2 + FMA variant: the fp32 drivers of mla_kern_tmpl.h over the
 * primitives of mla_vec_tmpl.h on 8-wide vectors (broadcast-FMA GEMM blocked
 * for 16 ymm registers, 8x8 transposes, base-2 online softmax). Compiled
 * with -mavx2 -mfma -mf16c; only called after attn_cpu_has() said yes. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/cpu/cpu_avx2_reduce.h"
#include "backends/mla/mla_internal.h"
#include "util/numeric.h"

/* ---- the vector ISA of mla_vec_tmpl.h ---------------------------------------- */

/* the first n lanes (n clamped to 0 .. 8) */
static inline __m256i v256_tail(int n)
{
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    n = n > 8 ? 8 : n < 0 ? 0 : n;
    return _mm256_loadu_si256((const __m256i *)(m + 8 - n));
}

/* p * 2^e for integral e in [-126, 127]: the exponent field built directly */
static inline __m256 v256_scale2(__m256 p, __m256 e)
{
    __m256i b =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(e), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(b));
}

#define VT(x)               v256_##x
#define VT_P(op)            _mm256_##op##_ps
#define VT_V                __m256
#define VT_M                __m256i
#define VT_W                8
#define VT_FULL             _mm256_set1_epi32(-1)
#define VT_NONE             _mm256_setzero_si256()
#define VT_TAIL(n)          v256_tail(n)
#define VT_LOADM(mk, p)     _mm256_maskload_ps(p, mk)
#define VT_STOREM(p, mk, v) _mm256_maskstore_ps(p, mk, v)
#define VT_MASKMUL(src, mk, a, b)                                                                  \
    _mm256_blendv_ps(src, _mm256_mul_ps(a, b), _mm256_castsi256_ps(mk))
#define VT_MASKZ(mk, v) _mm256_and_ps(_mm256_castsi256_ps(mk), v)
#define VT_HMAX(v)      attn__hmax8(v)
#define VT_HSUM(v)      attn__hsum8(v)
#define VT_ROUND(x)     _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VT_SCALE2(p, e) v256_scale2(p, e)
#define VT_EXP2_MIN     -126.0f
/* narrow panels (N <= 16): 6 rows x 2 vectors; wide: 4 rows x 3 vectors
 * (16 ymm registers) */
#define VT_NARROW_MR 6
#define VT_WIDE_MR   4
#define VT_WIDE_NV   3
/* the 8 x 8 transpose's last stage: 128-bit halves exchanged */
#define VT_TR v256_tr8
#define VT_TR_LANES(r, d, ldd)                                                                     \
    for (int j = 0; j < 4; j++) {                                                                  \
        _mm256_storeu_ps(d + (size_t)j * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20));       \
        _mm256_storeu_ps(d + (size_t)(4 + j) * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31)); \
    }

#include "backends/mla/mla_vec_tmpl.h"

/* ---- conversions ------------------------------------------------------------ */

static void k_load_row(const void *src, attn_elem e, int n, float *dst)
{
    int i = 0;
    switch (e) {
    case ATTN_ELEM_F32: memcpy(dst, src, sizeof(float) * (size_t)n); return;
    case ATTN_ELEM_BF16: {
        const uint16_t *s = src;
        for (; i + 8 <= n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
            _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        break;
    }
    case ATTN_ELEM_F16: {
        const uint16_t *s = src;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
        break;
    }
    case ATTN_ELEM_FP8_E4M3:
    case ATTN_ELEM_FP8_E5M2: {
        pthread_once(&v256_lut_once, v256_lut_init);
        const float *lut = e == ATTN_ELEM_FP8_E4M3 ? v256_lut_e4m3 : v256_lut_e5m2;
        const uint8_t *s = src;
        for (; i + 8 <= n; i += 8) {
            __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s + i)));
            _mm256_storeu_ps(dst + i, _mm256_i32gather_ps(lut, idx, 4));
        }
        break;
    }
    default: break;
    }
    if (i < n) {
        size_t esz = e == ATTN_ELEM_F32 ? 4 : (e == ATTN_ELEM_F16 || e == ATTN_ELEM_BF16) ? 2 : 1;
        attn__mla_load_row_f32((const char *)src + (size_t)i * esz, e, n - i, dst + i);
    }
}

#define KN(x) avx2_##x
#include "backends/mla/mla_kern_tmpl.h"

static bool avx2_usable(void)
{
    return attn_cpu_has(ATTN_CPU_AVX2) && attn_cpu_has(ATTN_CPU_FMA) && attn_cpu_has(ATTN_CPU_F16C);
}

static bool avx2_decode_ok(attn_elem q, attn_elem kv, int R, int D)
{
    (void)q, (void)kv, (void)R, (void)D;
    return true;
}

const attn__mla_kern attn__mla_kern_avx2 = {
    .name = "avx2",
    .usable = avx2_usable,
    .decode_ws = avx2_decode_ws,
    .prefill_ws = avx2_prefill_ws,
    .decode_ok = avx2_decode_ok,
    .decode = avx2_decode,
    .prefill = avx2_prefill,
    .load_row = k_load_row,
    .gemm = k_gemm,
};
