/* The fp32 vector primitives of the CPU_MLA kernels (the contracts of
 * mla_kern_tmpl.h: k_transpose, k_gemm, k_softmax, plus the fp8 tables of
 * k_load_row), written once over a vector ISA that mla_vec_avx512.h and
 * mla_kern_avx2.c describe before including this file (k_load_row itself
 * and k_store_row stay per ISA):
 *
 *   VT(x)          prefix of the generated names (v512_x, v256_x);
 *   VT_V, VT_M     vector and lane-mask types, VT_W lanes per vector;
 *   VT_P(op)       the ISA's _ps operation op (add, mul, fmadd, set1, ...);
 *   VT_FULL, VT_NONE, VT_TAIL(n)   all lanes, none, the first min(n, VT_W);
 *   VT_LOADM(mk, p), VT_STOREM(p, mk, v)   masked loads (zeros) and stores;
 *   VT_MASKMUL(src, mk, a, b), VT_MASKZ(mk, v)   a * b or v where mk, else
 *                  src or 0;
 *   VT_HMAX, VT_HSUM               horizontal max and sum;
 *   VT_ROUND(x), VT_SCALE2(p, e), VT_EXP2_MIN   of 2^x: round to nearest,
 *                  p * 2^e for integral e, the input clamp;
 *   VT_TR, VT_TR_LANES(r, d, ldd)  name of the VT_W x VT_W transpose and its
 *                  last stage (4 x 4 blocks across 128-bit lanes, stored);
 *   VT_NARROW_MR, VT_WIDE_MR, VT_WIDE_NV   GEMM register blocking: rows
 *                  of the narrow (N <= 2 VT_W, 1 or 2 vectors) and the wide
 *                  kernels, vectors of the wide ones (3 or 4). */

/* ---- fp8 -> fp32 tables ------------------------------------------------------ */

static float VT(lut_e4m3)[256], VT(lut_e5m2)[256];
static pthread_once_t VT(lut_once) = PTHREAD_ONCE_INIT;

static void VT(lut_init)(void)
{
    for (int i = 0; i < 256; i++) {
        VT(lut_e4m3)[i] = attn__e4m3_to_f32((uint8_t)i);
        VT(lut_e5m2)[i] = attn__e5m2_to_f32((uint8_t)i);
    }
}

/* ---- VT_W x VT_W transpose ----------------------------------------------------- */

/* In registers, within each 128-bit lane, with t as scratch: afterwards
 * r[4g + j], lane L holds column 4L + j of rows 4g .. 4g + 3. (A macro:
 * mla_kern_amx.c transposes registers of its own with it.) */
#define VT_TR4(r, t)                                                                               \
    for (int i = 0; i < VT_W / 2; i++) {                                                           \
        t[2 * i] = VT_P(unpacklo)(r[2 * i], r[2 * i + 1]);                                         \
        t[2 * i + 1] = VT_P(unpackhi)(r[2 * i], r[2 * i + 1]);                                     \
    }                                                                                              \
    for (int g = 0; g < VT_W / 4; g++) {                                                           \
        r[4 * g + 0] = VT_P(shuffle)(t[4 * g], t[4 * g + 2], 0x44);                                \
        r[4 * g + 1] = VT_P(shuffle)(t[4 * g], t[4 * g + 2], 0xEE);                                \
        r[4 * g + 2] = VT_P(shuffle)(t[4 * g + 1], t[4 * g + 3], 0x44);                            \
        r[4 * g + 3] = VT_P(shuffle)(t[4 * g + 1], t[4 * g + 3], 0xEE);                            \
    }

static inline void VT_TR(const float *s, size_t lds, float *d, size_t ldd)
{
    VT_V r[VT_W], t[VT_W];
    for (int i = 0; i < VT_W; i++)
        r[i] = VT_P(loadu)(s + (size_t)i * lds);
    VT_TR4(r, t);
    VT_TR_LANES(r, d, ldd);
}

static inline void k_transpose(const float *src, size_t lds, int rows, int cols, float *dst,
                               size_t ldd)
{
    int r0 = 0;
    for (; r0 + VT_W <= rows; r0 += VT_W) {
        int c0 = 0;
        for (; c0 + VT_W <= cols; c0 += VT_W)
            VT_TR(src + (size_t)r0 * lds + c0, lds, dst + (size_t)c0 * ldd + r0, ldd);
        for (; c0 < cols; c0++)
            for (int r = 0; r < VT_W; r++)
                dst[(size_t)c0 * ldd + r0 + r] = src[(size_t)(r0 + r) * lds + c0];
    }
    for (; r0 < rows; r0++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * ldd + r0] = src[(size_t)r0 * lds + c];
}

/* ---- GEMM: C = (acc ? rowscale * C : 0) + A . B ----------------------------------- */

typedef void (*VT(mk_fn))(int K, const float *A, size_t lda, const float *B, size_t ldb, float *C,
                          size_t ldc, bool acc, const float *rs, VT_M tm);

/* MR rows x NV vectors of C in registers, broadcast-FMA over K; tm masks
 * the last vector's columns. */
#define VT_MK(MR, NV)                                                                              \
    static void VT(mk_##MR##_##NV)(int K, const float *A, size_t lda, const float *B, size_t ldb,  \
                                   float *C, size_t ldc, bool acc, const float *rs, VT_M tm)       \
    {                                                                                              \
        VT_V c[MR][NV];                                                                            \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                      \
        {                                                                                          \
            VT_V sc = VT_P(set1)(rs ? rs[i] : 1.0f);                                               \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++)                                   \
            {                                                                                      \
                VT_M mk = j == NV - 1 ? tm : VT_FULL;                                              \
                c[i][j] = acc ? VT_P(mul)(sc, VT_LOADM(mk, C + (size_t)i * ldc + VT_W * j))        \
                              : VT_P(setzero)();                                                   \
            }                                                                                      \
        }                                                                                          \
        for (int k = 0; k < K; k++) {                                                              \
            VT_V b[NV];                                                                            \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) b[j] =                            \
                VT_LOADM(j == NV - 1 ? tm : VT_FULL, B + (size_t)k * ldb + VT_W * j);              \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                  \
            {                                                                                      \
                VT_V a = VT_P(set1)(A[(size_t)i * lda + k]);                                       \
                _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++) c[i][j] =                     \
                    VT_P(fmadd)(a, b[j], c[i][j]);                                                 \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                      \
            _Pragma("GCC unroll 4") for (int j = 0; j < NV; j++)                                   \
                VT_STOREM(C + (size_t)i * ldc + VT_W * j, j == NV - 1 ? tm : VT_FULL, c[i][j]);    \
    }

/* VT_ROWS(n, X): X(1) .. X(n) */
#define VT_ROWS_1(X)   X(1)
#define VT_ROWS_2(X)   VT_ROWS_1(X) X(2)
#define VT_ROWS_3(X)   VT_ROWS_2(X) X(3)
#define VT_ROWS_4(X)   VT_ROWS_3(X) X(4)
#define VT_ROWS_5(X)   VT_ROWS_4(X) X(5)
#define VT_ROWS_6(X)   VT_ROWS_5(X) X(6)
#define VT_ROWS_7(X)   VT_ROWS_6(X) X(7)
#define VT_ROWS_8(X)   VT_ROWS_7(X) X(8)
#define VT_ROWS_9(X)   VT_ROWS_8(X) X(9)
#define VT_ROWS_10(X)  VT_ROWS_9(X) X(10)
#define VT_ROWS_11(X)  VT_ROWS_10(X) X(11)
#define VT_ROWS_12(X)  VT_ROWS_11(X) X(12)
#define VT_ROWS_(n, X) VT_ROWS_##n(X)
#define VT_ROWS(n, X)  VT_ROWS_(n, X)

/* VT_COLS(n, X, MR): X(MR, 3) .. X(MR, n), the wide kernels' extra vectors */
#define VT_COLS_3(X, MR)   X(MR, 3)
#define VT_COLS_4(X, MR)   VT_COLS_3(X, MR) X(MR, 4)
#define VT_COLS_(n, X, MR) VT_COLS_##n(X, MR)
#define VT_COLS(n, X, MR)  VT_COLS_(n, X, MR)

/* narrow panels (N <= 2 VT_W): 1 or 2 vectors; wide: up to VT_WIDE_NV */
#define VT_NARROW(MR) VT_MK(MR, 1) VT_MK(MR, 2)
#define VT_WIDE(MR)   VT_COLS(VT_WIDE_NV, VT_MK, MR)
VT_ROWS(VT_NARROW_MR, VT_NARROW)
VT_ROWS(VT_WIDE_MR, VT_WIDE)

#define VT_PTR(MR, NV)    , VT(mk_##MR##_##NV)
#define VT_NARROW_ROW(MR) {NULL VT_PTR(MR, 1) VT_PTR(MR, 2)},
#define VT_WIDE_ROW(MR)   {NULL VT_PTR(MR, 1) VT_PTR(MR, 2) VT_COLS(VT_WIDE_NV, VT_PTR, MR)},
static const VT(mk_fn)
    VT(narrow)[VT_NARROW_MR + 1][3] = {{NULL}, VT_ROWS(VT_NARROW_MR, VT_NARROW_ROW)};
static const VT(mk_fn)
    VT(wide)[VT_WIDE_MR + 1][VT_WIDE_NV + 1] = {{NULL}, VT_ROWS(VT_WIDE_MR, VT_WIDE_ROW)};

static inline void k_gemm(int M, int N, int K, const float *A, size_t lda, const float *B,
                          size_t ldb, float *C, size_t ldc, bool acc, const float *rs)
{
    if (M <= 0 || N <= 0) return;
    if (N <= 2 * VT_W) {
        int nv = (N + (VT_W - 1)) / VT_W;
        VT_M tm = VT_TAIL(N - VT_W * (nv - 1));
        for (int i0 = 0; i0 < M; i0 += VT_NARROW_MR) {
            int mr = M - i0 < VT_NARROW_MR ? M - i0 : VT_NARROW_MR;
            VT(narrow)
            [mr][nv](K, A + (size_t)i0 * lda, lda, B, ldb, C + (size_t)i0 * ldc, ldc, acc,
                     rs ? rs + i0 : NULL, tm);
        }
        return;
    }
    for (int j0 = 0; j0 < N; j0 += VT_WIDE_NV * VT_W) {
        int nn = N - j0 < VT_WIDE_NV * VT_W ? N - j0 : VT_WIDE_NV * VT_W;
        int nv = (nn + (VT_W - 1)) / VT_W;
        VT_M tm = VT_TAIL(nn - VT_W * (nv - 1));
        for (int i0 = 0; i0 < M; i0 += VT_WIDE_MR) {
            int mr = M - i0 < VT_WIDE_MR ? M - i0 : VT_WIDE_MR;
            VT(wide)
            [mr][nv](K, A + (size_t)i0 * lda, lda, B + j0, ldb, C + (size_t)i0 * ldc + j0, ldc, acc,
                     rs ? rs + i0 : NULL, tm);
        }
    }
}

/* ---- softmax ------------------------------------------------------------------------ */

/* 2^x: round-to-nearest split, Cephes' degree-6 polynomial on [-1/2, 1/2],
 * then p * 2^round(x); relative error ~1e-7. */
static inline VT_V VT(exp2)(VT_V x)
{
    x = VT_P(max)(x, VT_P(set1)(VT_EXP2_MIN));
    VT_V fl = VT_ROUND(x);
    VT_V f = VT_P(sub)(x, fl);
    VT_V p = VT_P(set1)(1.535336188319500e-4f);
    p = VT_P(fmadd)(p, f, VT_P(set1)(1.339887440266574e-3f));
    p = VT_P(fmadd)(p, f, VT_P(set1)(9.618437357674640e-3f));
    p = VT_P(fmadd)(p, f, VT_P(set1)(5.550332471162809e-2f));
    p = VT_P(fmadd)(p, f, VT_P(set1)(2.402264791363012e-1f));
    p = VT_P(fmadd)(p, f, VT_P(set1)(6.931472028550421e-1f));
    p = VT_P(fmadd)(p, f, VT_P(set1)(1.0f));
    return VT_SCALE2(p, fl);
}

static inline void k_softmax(float *S, size_t lds, int M, int nk, const int *vis, float mul,
                             float *m, float *l, float *alpha)
{
    int nv = (nk + (VT_W - 1)) / VT_W; /* nk <= 64 */
    VT_V vmul = VT_P(set1)(mul), ninf = VT_P(set1)(-INFINITY);
    for (int i = 0; i < M; i++) {
        float *row = S + (size_t)i * lds;
        int vi = vis ? vis[i] : nk;
        if (vi <= 0) {
            memset(row, 0, sizeof(float) * (size_t)nk);
            alpha[i] = 1.0f;
            continue;
        }
        VT_V x[64 / VT_W];
        VT_M mk[64 / VT_W];
        VT_V mx = ninf;
        for (int j = 0; j < nv; j++) {
            int left = vi - VT_W * j;
            mk[j] = left <= 0 ? VT_NONE : VT_TAIL(left);
            VT_V v = VT_LOADM(VT_TAIL(nk - VT_W * j), row + VT_W * j);
            x[j] = VT_MASKMUL(ninf, mk[j], v, vmul);
            mx = VT_P(max)(mx, x[j]);
        }
        float rmax = VT_HMAX(mx);
        float mn = m[i] > rmax ? m[i] : rmax;
        float a = m[i] == -INFINITY ? 0.0f : exp2f(m[i] - mn);
        VT_V vm = VT_P(set1)(mn), sum = VT_P(setzero)();
        for (int j = 0; j < nv; j++) {
            VT_V p = VT_MASKZ(mk[j], VT(exp2)(VT_P(sub)(x[j], vm)));
            VT_STOREM(row + VT_W * j, VT_TAIL(nk - VT_W * j), p);
            sum = VT_P(add)(sum, p);
        }
        l[i] = l[i] * a + VT_HSUM(sum);
        m[i] = mn;
        alpha[i] = a;
    }
}
