/* CPU_MLA AVX2 + FMA variant: the fp32 drivers of mla_kern_tmpl.h over
 * 8-wide primitives (broadcast-FMA GEMM blocked for 16 ymm registers, 8x8
 * transposes, base-2 online softmax). Compiled with -mavx2 -mfma -mf16c;
 * only called after attn_cpu_has() said yes. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/mla/mla_internal.h"
#include "util/numeric.h"

/* ---- conversions ------------------------------------------------------------ */

static float v256_lut_e4m3[256], v256_lut_e5m2[256];
static pthread_once_t v256_lut_once = PTHREAD_ONCE_INIT;

static void v256_lut_init(void)
{
    for (int i = 0; i < 256; i++) {
        v256_lut_e4m3[i] = attn__e4m3_to_f32((uint8_t)i);
        v256_lut_e5m2[i] = attn__e5m2_to_f32((uint8_t)i);
    }
}

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

/* ---- 8 x 8 transpose -------------------------------------------------------------- */

static inline void v256_tr8(const float *s, size_t lds, float *d, size_t ldd)
{
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(s + (size_t)i * lds);
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; g++) {
        r[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        r[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        r[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        r[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    /* r[4g + j], lane L: column 4L + j of rows 4g .. 4g + 3 */
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(d + (size_t)j * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20));
        _mm256_storeu_ps(d + (size_t)(4 + j) * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31));
    }
}

static void k_transpose(const float *src, size_t lds, int rows, int cols, float *dst, size_t ldd)
{
    int r0 = 0;
    for (; r0 + 8 <= rows; r0 += 8) {
        int c0 = 0;
        for (; c0 + 8 <= cols; c0 += 8)
            v256_tr8(src + (size_t)r0 * lds + c0, lds, dst + (size_t)c0 * ldd + r0, ldd);
        for (; c0 < cols; c0++)
            for (int r = 0; r < 8; r++)
                dst[(size_t)c0 * ldd + r0 + r] = src[(size_t)(r0 + r) * lds + c0];
    }
    for (; r0 < rows; r0++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * ldd + r0] = src[(size_t)r0 * lds + c];
}

/* ---- GEMM ------------------------------------------------------------------------- */

static inline __m256i v256_tailmask(int n)
{
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    n = n > 8 ? 8 : n < 0 ? 0 : n;
    return _mm256_loadu_si256((const __m256i *)(m + 8 - n));
}

typedef void (*v256_mk_fn)(int K, const float *A, size_t lda, const float *B, size_t ldb, float *C,
                           size_t ldc, bool acc, const float *rs, __m256i tm);

#define V256_MK(MR, NV)                                                                            \
    static void v256_mk_##MR##_##NV(int K, const float *A, size_t lda, const float *B, size_t ldb, \
                                    float *C, size_t ldc, bool acc, const float *rs, __m256i tm)   \
    {                                                                                              \
        __m256i full = _mm256_set1_epi32(-1);                                                      \
        __m256 c[MR][NV];                                                                          \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                       \
        {                                                                                          \
            __m256 sc = _mm256_set1_ps(rs ? rs[i] : 1.0f);                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) c[i][j] =                         \
                acc ? _mm256_mul_ps(sc, _mm256_maskload_ps(C + (size_t)i * ldc + 8 * j,            \
                                                           j == NV - 1 ? tm : full))               \
                    : _mm256_setzero_ps();                                                         \
        }                                                                                          \
        for (int k = 0; k < K; k++) {                                                              \
            __m256 b[NV];                                                                          \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) b[j] =                            \
                _mm256_maskload_ps(B + (size_t)k * ldb + 8 * j, j == NV - 1 ? tm : full);          \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                   \
            {                                                                                      \
                __m256 a = _mm256_broadcast_ss(A + (size_t)i * lda + k);                           \
                _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) c[i][j] =                     \
                    _mm256_fmadd_ps(a, b[j], c[i][j]);                                             \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR;                                            \
                                     i++) _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++)     \
            _mm256_maskstore_ps(C + (size_t)i * ldc + 8 * j, j == NV - 1 ? tm : full, c[i][j]);    \
    }

/* narrow panels (N <= 16): 6 rows x 2 vectors; wide: 4 rows x 3 vectors */
#define V256_NARROW(MR) V256_MK(MR, 1) V256_MK(MR, 2)
/* clang-format off */
V256_NARROW(1)
V256_NARROW(2)
V256_NARROW(3)
V256_NARROW(4)
V256_NARROW(5)
V256_NARROW(6)
V256_MK(1, 3)
V256_MK(2, 3)
V256_MK(3, 3)
V256_MK(4, 3)
/* clang-format on */

static const v256_mk_fn v256_narrow[7][3] = {
    {NULL, NULL, NULL},
    {NULL, v256_mk_1_1, v256_mk_1_2},
    {NULL, v256_mk_2_1, v256_mk_2_2},
    {NULL, v256_mk_3_1, v256_mk_3_2},
    {NULL, v256_mk_4_1, v256_mk_4_2},
    {NULL, v256_mk_5_1, v256_mk_5_2},
    {NULL, v256_mk_6_1, v256_mk_6_2},
};
static const v256_mk_fn v256_wide[5][4] = {
    {NULL, NULL, NULL, NULL},
    {NULL, v256_mk_1_1, v256_mk_1_2, v256_mk_1_3},
    {NULL, v256_mk_2_1, v256_mk_2_2, v256_mk_2_3},
    {NULL, v256_mk_3_1, v256_mk_3_2, v256_mk_3_3},
    {NULL, v256_mk_4_1, v256_mk_4_2, v256_mk_4_3},
};

static void k_gemm(int M, int N, int K, const float *A, size_t lda, const float *B, size_t ldb,
                   float *C, size_t ldc, bool acc, const float *rs)
{
    if (M <= 0 || N <= 0) return;
    if (N <= 16) {
        int nv = (N + 7) / 8;
        __m256i tm = v256_tailmask(N - 8 * (nv - 1));
        for (int i0 = 0; i0 < M; i0 += 6) {
            int mr = M - i0 < 6 ? M - i0 : 6;
            v256_narrow[mr][nv](K, A + (size_t)i0 * lda, lda, B, ldb, C + (size_t)i0 * ldc, ldc,
                                acc, rs ? rs + i0 : NULL, tm);
        }
        return;
    }
    for (int j0 = 0; j0 < N; j0 += 24) {
        int nn = N - j0 < 24 ? N - j0 : 24;
        int nv = (nn + 7) / 8;
        __m256i tm = v256_tailmask(nn - 8 * (nv - 1));
        for (int i0 = 0; i0 < M; i0 += 4) {
            int mr = M - i0 < 4 ? M - i0 : 4;
            v256_wide[mr][nv](K, A + (size_t)i0 * lda, lda, B + j0, ldb, C + (size_t)i0 * ldc + j0,
                              ldc, acc, rs ? rs + i0 : NULL, tm);
        }
    }
}

/* ---- softmax ------------------------------------------------------------------------ */

static inline __m256 v256_exp2(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-126.0f));
    __m256 fl = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_sub_ps(x, fl);
    __m256 p = _mm256_set1_ps(1.535336188319500e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.339887440266574e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618437357674640e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550332471162809e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402264791363012e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931472028550421e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fl), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float v256_hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static inline float v256_hsum(__m256 v)
{
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static void k_softmax(float *S, size_t lds, int M, int nk, const int *vis, float mul, float *m,
                      float *l, float *alpha)
{
    int nv = (nk + 7) / 8; /* nk <= 64 */
    __m256 vmul = _mm256_set1_ps(mul), ninf = _mm256_set1_ps(-INFINITY);
    for (int i = 0; i < M; i++) {
        float *row = S + (size_t)i * lds;
        int vi = vis ? vis[i] : nk;
        if (vi <= 0) {
            memset(row, 0, sizeof(float) * (size_t)nk);
            alpha[i] = 1.0f;
            continue;
        }
        __m256 x[8], mk[8];
        __m256 mx = ninf;
        for (int j = 0; j < nv; j++) {
            mk[j] = _mm256_castsi256_ps(v256_tailmask(vi - 8 * j));
            __m256 v = _mm256_maskload_ps(row + 8 * j, v256_tailmask(nk - 8 * j));
            x[j] = _mm256_blendv_ps(ninf, _mm256_mul_ps(v, vmul), mk[j]);
            mx = _mm256_max_ps(mx, x[j]);
        }
        float rmax = v256_hmax(mx);
        float mn = m[i] > rmax ? m[i] : rmax;
        float a = m[i] == -INFINITY ? 0.0f : exp2f(m[i] - mn);
        __m256 vm = _mm256_set1_ps(mn), sum = _mm256_setzero_ps();
        for (int j = 0; j < nv; j++) {
            __m256 p = _mm256_and_ps(mk[j], v256_exp2(_mm256_sub_ps(x[j], vm)));
            _mm256_maskstore_ps(row + 8 * j, v256_tailmask(nk - 8 * j), p);
            sum = _mm256_add_ps(sum, p);
        }
        l[i] = l[i] * a + v256_hsum(sum);
        m[i] = mn;
        alpha[i] = a;
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
