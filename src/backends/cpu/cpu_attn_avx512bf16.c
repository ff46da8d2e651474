/* CPU_ATTN "avx512-bf16" and "amx-bf16" variants, compiled with AVX512_BF16
 * (the AMX tile instructions are inline asm, util/amx.h, and amx-bf16 falls
 * back to the avx512-bf16 paths, so the two share this file and its flags).
 *
 * "avx512-bf16" (AVX512F/BW/VL/DQ + AVX512_BF16): bf16 and fp8 caches go
 * through VDPBF16PS. fp8 rows are widened to bf16 exactly in registers
 * (magnitude shifted into place and re-biased; the few subnormal codes come
 * from a 32-entry vpermw table), the scales are applied once per score and
 * once per output row. Queries and probabilities are single bf16 terms for
 * bf16 models and hi + lo bf16 pairs otherwise (16 significant bits), so
 * fp16/fp32 models keep their accuracy.
 *  - QK, few rows (decode): per key, each row's dot product accumulates in
 *    one vector across the head; 16 keys' vectors are then reduced at once
 *    by a transpose-add tree.
 *  - QK, many rows (prefill): the chunk's K is transposed once into
 *    bf16-pair columns, so every row computes 64 scores per step with
 *    broadcast query pairs and no horizontal work.
 *  - PV: two V rows are interleaved (vpermt2w) into bf16 pairs and
 *    multiplied by the row's (p_t, p_t+1) pair; 4 rows x 64 output lanes
 *    stay in registers.
 * fp16/fp32 caches (and every cache in the plain "avx512" variant, which
 * needs no BF16) use the fp32 FMA path: rows widened to fp32 in scratch,
 * 4 rows x 2 keys for QK and 4 rows x 32 lanes for PV.
 * Decode jobs (at most 8 rows) over bf16/fp8 caches go, in every AVX-512
 * variant, to the streaming kernels (cpu_attn_decode_avx512.c, and for
 * avx512-bf16 cpu_attn_decode_dp_avx512bf16.c); avx512-bf16 jobs of more
 * than ATTN_CPU_PF_MIN_ROWS rows to the panel prefill
 * (cpu_attn_prefill_avx512bf16.c); the paths here take the rest (9..16
 * rows, and every job of amx-bf16 the tile unit does not take). */
#include "backends/cpu/cpu_attn_avx512_f32.h"

static bool avx512_bf16_usable(void)
{
    return avx512_usable() && attn_cpu_has(ATTN_CPU_AVX512_BF16);
}

/* ---- bf16 dot-product path ------------------------------------------------------ */

/* Variant scratch layout of the dp path (bytes, all 64-aligned):
 *   kb   [CHUNK][MAX_HEAD] bf16     K as bf16 rows (fp8 or padded heads)
 *   vb   [CHUNK][MAX_HEAD] bf16     V as bf16 rows
 *   kt   [MAX_HEAD/2][CHUNK] u32    K transposed into bf16 pairs (prefill)
 *   vi   [CHUNK/2][MAX_HEAD] u32    V rows interleaved in pairs (prefill)
 *   red  [4][18][16] f32            per-key partial sums for the tree */
#define DP_KB  0
#define DP_VB  (DP_KB + ATTN_CPU_CHUNK * ATTN_CPU_MAX_HEAD * 2)
#define DP_KT  (DP_VB + ATTN_CPU_CHUNK * ATTN_CPU_MAX_HEAD * 2)
#define DP_VI  (DP_KT + ATTN_CPU_MAX_HEAD / 2 * ATTN_CPU_CHUNK * 4)
#define DP_RED (DP_VI + ATTN_CPU_CHUNK / 2 * ATTN_CPU_MAX_HEAD * 4)
#define DP_END (DP_RED + 4 * 18 * 16 * 4)
_Static_assert(DP_END <= ATTN_CPU_VSCRATCH, "dp scratch too small");

/* query planes in qbuf: hi [R][MAX_HEAD] bf16, then lo [R][MAX_HEAD] bf16 */
#define QLO_OFF (ATTN_CPU_MAX_ROWS * ATTN_CPU_MAX_HEAD)
/* probability planes (bf16 pairs) live after the scores: p2 [R][CHUNK/2] u32 x 2 */

/* fp8 (in 16-bit lanes, low byte) -> bf16 bits, exact. mbits/bias of the
 * format; sub is the bf16 table of the subnormal codes (index = magnitude). */
static inline __m512i fp8w_to_bf16(__m512i x, int e4m3, __m512i sub)
{
    __m512i mag = _mm512_and_si512(x, _mm512_set1_epi16(0x7f));
    __m512i r;
    __mmask32 small;
    if (e4m3) {
        r = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(120 << 7));
        small = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8));
    } else {
        r = _mm512_add_epi16(_mm512_slli_epi16(mag, 5), _mm512_set1_epi16(112 << 7));
        small = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(4));
    }
    r = _mm512_mask_permutexvar_epi16(r, small, mag, sub);
    /* sign: bit 7 of the byte -> bit 15 */
    return _mm512_ternarylogic_epi32(r, _mm512_slli_epi16(x, 8), _mm512_set1_epi16((short)0x8000),
                                     0xF8);
}

static __m512i fp8_sub_table(int e4m3)
{
    uint16_t t[32] = {0};
    int n = e4m3 ? 8 : 4;
    for (int m = 1; m < n; m++) {
        /* value m * 2^(1 - bias - mbits) */
        float v = e4m3 ? (float)m * (1.0f / 512.0f) : (float)m * (1.0f / 65536.0f);
        uint32_t u;
        memcpy(&u, &v, 4);
        t[m] = (uint16_t)(u >> 16); /* exact: at most 3 significant bits */
    }
    return _mm512_loadu_si512(t);
}

/* With AVX512_VBMI (present on every AVX512_BF16 CPU so far, checked
 * anyway) a whole 64-code row piece converts through two 128-entry byte
 * tables: high and low bytes of the bf16 of each magnitude (exact, NaN and
 * inf included), the sign OR-ed into the high byte, then the bytes woven
 * into words. VBMI needs no OS state beyond AVX-512's. */
static bool g_vbmi;
static uint8_t g_fp8_hi[2][128], g_fp8_lo[2][128]; /* [e4m3][magnitude] */
static pthread_once_t g_vbmi_once = PTHREAD_ONCE_INIT;

static void vbmi_init(void)
{
    g_vbmi = attn_cpu_has(ATTN_CPU_AVX512_VBMI); /* ATTN_CPU_MASK can hide it */
    for (int e = 0; e < 2; e++)
        for (int c = 0; c < 128; c++) {
            float f = e ? attn__e4m3_to_f32((uint8_t)c) : attn__e5m2_to_f32((uint8_t)c);
            uint32_t u;
            memcpy(&u, &f, 4);
            uint16_t h = isnan(f) ? 0x7fc0 : (uint16_t)(u >> 16); /* exact: <= 3 mantissa bits */
            g_fp8_hi[e][c] = (uint8_t)(h >> 8);
            g_fp8_lo[e][c] = (uint8_t)h;
        }
}

bool attn__cpu_fp8_bf16_tables(int e4m3, const uint8_t **hi, const uint8_t **lo)
{
    pthread_once(&g_vbmi_once, vbmi_init);
    *hi = g_fp8_hi[e4m3 ? 1 : 0];
    *lo = g_fp8_lo[e4m3 ? 1 : 0];
    return g_vbmi;
}

__attribute__((target("avx512vbmi"))) static void fp8_rows_to_bf16_vbmi(uint16_t *dst, int dp,
                                                                        const uint8_t *src,
                                                                        int64_t stride, int n,
                                                                        int d, int e4m3)
{
    __m512i th0 = _mm512_loadu_si512(g_fp8_hi[e4m3]), th1 = _mm512_loadu_si512(g_fp8_hi[e4m3] + 64);
    __m512i tl0 = _mm512_loadu_si512(g_fp8_lo[e4m3]), tl1 = _mm512_loadu_si512(g_fp8_lo[e4m3] + 64);
    uint8_t ix[2][64];
    for (int b = 0; b < 64; b++) {
        ix[0][b] = (uint8_t)((b & 1 ? 64 : 0) + b / 2);
        ix[1][b] = (uint8_t)((b & 1 ? 64 : 0) + 32 + b / 2);
    }
    __m512i i0 = _mm512_loadu_si512(ix[0]), i1 = _mm512_loadu_si512(ix[1]);
    __m512i sign = _mm512_set1_epi8((char)0x80);
    for (int t = 0; t < n; t++) {
        const uint8_t *s = src + t * stride;
        uint16_t *o = dst + (size_t)t * dp;
        for (int i = 0; i < dp; i += 64) {
            int left = d - i;
            __mmask64 m = left >= 64 ? ~0ull : (left > 0 ? (1ull << left) - 1ull : 0ull);
            __m512i x = _mm512_maskz_loadu_epi8(m, s + i);
            __m512i hi = _mm512_permutex2var_epi8(th0, x, th1);
            __m512i lo = _mm512_permutex2var_epi8(tl0, x, tl1);
            hi = _mm512_ternarylogic_epi32(hi, x, sign, 0xF8);
            __m512i w0 = _mm512_maskz_mov_epi16((__mmask32)m, _mm512_permutex2var_epi8(lo, i0, hi));
            __m512i w1 =
                _mm512_maskz_mov_epi16((__mmask32)(m >> 32), _mm512_permutex2var_epi8(lo, i1, hi));
            _mm512_storeu_si512(o + i, w0);
            if (i + 32 < dp) _mm512_storeu_si512(o + i + 32, w1);
        }
    }
}

/* n rows of d fp8 codes (stride bytes apart) -> bf16 rows of dp (padded) */
static void fp8_rows_to_bf16(uint16_t *dst, int dp, const uint8_t *src, int64_t stride, int n,
                             int d, int e4m3)
{
    pthread_once(&g_vbmi_once, vbmi_init);
    if (g_vbmi) {
        fp8_rows_to_bf16_vbmi(dst, dp, src, stride, n, d, e4m3);
        return;
    }
    __m512i sub = fp8_sub_table(e4m3);
    for (int t = 0; t < n; t++) {
        const uint8_t *s = src + t * stride;
        uint16_t *o = dst + (size_t)t * dp;
        int i = 0;
        for (; i + 32 <= d; i += 32) {
            __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(s + i)));
            _mm512_storeu_si512(o + i, fp8w_to_bf16(x, e4m3, sub));
        }
        if (i < dp) {
            __mmask32 m = d - i >= 32 ? 0xffffffffu : ((1u << (d - i)) - 1u);
            __m512i x = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, s + i));
            _mm512_storeu_si512(o + i, _mm512_maskz_mov_epi16(m, fp8w_to_bf16(x, e4m3, sub)));
        }
    }
}

void attn__cpu_fp8_rows_bf16(uint16_t *dst, int dp, const uint8_t *src, int64_t stride, int n,
                             int d, int e4m3)
{
    fp8_rows_to_bf16(dst, dp, src, stride, n, d, e4m3);
}

/* Decode on AMX with an fp8 cache and head sizes that are multiples of 64:
 * the table bytes are woven into words by unpacklo/hi_epi8 instead of a
 * cross-lane byte permute (cheaper on the shuffle port), which leaves the
 * dims of every 64-dim piece in the order of dec_perm_dim. The dot products
 * do not care as long as the queries are permuted alike; the output dims
 * are put back in amx_dec_finish. */
static inline int dec_perm_dim(int p)
{
    int b = p & ~63, q = p & 63;
    return b + (q < 32 ? 16 * (q / 8) + q % 8 : 16 * ((q - 32) / 8) + 8 + (q - 32) % 8);
}

static bool dec_perm(const attn__cpu_job *j)
{
    if (j->kv_elem == ATTN_ELEM_BF16 || j->D % 64 != 0 || j->Dv % 64 != 0) return false;
    pthread_once(&g_vbmi_once, vbmi_init);
    return g_vbmi;
}

__attribute__((target("avx512vbmi"))) static void
fp8_rows_to_bf16_perm(uint16_t *dst, const uint8_t *src, int64_t stride, int n, int d, int e4m3)
{
    __m512i th0 = _mm512_loadu_si512(g_fp8_hi[e4m3]), th1 = _mm512_loadu_si512(g_fp8_hi[e4m3] + 64);
    __m512i tl0 = _mm512_loadu_si512(g_fp8_lo[e4m3]), tl1 = _mm512_loadu_si512(g_fp8_lo[e4m3] + 64);
    __m512i sign = _mm512_set1_epi8((char)0x80);
    for (int t = 0; t < n; t++) {
        const uint8_t *s = src + t * stride;
        uint16_t *o = dst + (size_t)t * d;
        for (int i = 0; i < d; i += 64) {
            __m512i x = _mm512_loadu_si512(s + i);
            __m512i hi = _mm512_permutex2var_epi8(th0, x, th1);
            __m512i lo = _mm512_permutex2var_epi8(tl0, x, tl1);
            hi = _mm512_ternarylogic_epi32(hi, x, sign, 0xF8);
            _mm512_storeu_si512(o + i, _mm512_unpacklo_epi8(lo, hi));
            _mm512_storeu_si512(o + i + 32, _mm512_unpackhi_epi8(lo, hi));
        }
    }
}

/* n rows of d bf16 (stride elements apart) -> padded rows of dp */
static void bf16_rows_pad(uint16_t *dst, int dp, const uint16_t *src, int64_t stride, int n, int d)
{
    for (int t = 0; t < n; t++) {
        const uint16_t *s = src + t * stride;
        uint16_t *o = dst + (size_t)t * dp;
        for (int i = 0; i < dp; i += 32) {
            int left = d - i;
            __mmask32 m = left >= 32 ? 0xffffffffu : (left > 0 ? ((1u << left) - 1u) : 0u);
            _mm512_storeu_si512(o + i, _mm512_maskz_loadu_epi16(m, s + i));
        }
    }
}

static void dp_prep_q(attn__cpu_job *j, const void *const *qrows)
{
    uint16_t *hi = j->qbuf, *lo = hi + QLO_OFF;
    int D = j->D, Dp = pad32(D);
    float row[ATTN_CPU_MAX_HEAD + 32];
    for (int r = 0; r < j->R; r++) {
        uint16_t *h = hi + (size_t)r * ATTN_CPU_MAX_HEAD, *l = lo + (size_t)r * ATTN_CPU_MAX_HEAD;
        if (j->q_elem == ATTN_ELEM_BF16) {
            bf16_rows_pad(h, Dp, qrows[r], 0, 1, D);
            continue;
        }
        row_to_f32(row, qrows[r], D, j->q_elem);
        for (int i = D; i < Dp; i++)
            row[i] = 0.0f;
        for (int i = 0; i < Dp; i += 32) {
            __m512 a = _mm512_loadu_ps(row + i), b = _mm512_loadu_ps(row + i + 16);
            __m512bh hb = _mm512_cvtne2ps_pbh(b, a);
            /* hi as fp32: bf16 bits in the upper half */
            __m512i hw = (__m512i)hb;
            __m512 ah = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hw)), 16));
            __m512 bh = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hw, 1)), 16));
            __m512bh lb = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bh), _mm512_sub_ps(a, ah));
            _mm512_storeu_si512(h + i, hw);
            _mm512_storeu_si512(l + i, (__m512i)lb);
        }
    }
}

/* QK for up to 4 rows (the common decode case). VDPBF16PS has a long
 * latency relative to its throughput, so three keys x four rows = twelve
 * independent accumulators are in flight; query chunks are memory operands
 * (L1), key chunks are loaded once for the four rows. */
static void dp_qk_small(attn__cpu_job *j, const uint16_t *kb, int64_t ks, int n)
{
    int nc = pad32(j->D) / 32, nr = j->R;
    const uint16_t *qh = j->qbuf;
    const uint16_t *q0 = qh, *q1 = qh + (nr > 1 ? 1 : 0) * ATTN_CPU_MAX_HEAD;
    const uint16_t *q2 = qh + (nr > 2 ? 2 : 0) * ATTN_CPU_MAX_HEAD;
    const uint16_t *q3 = qh + (nr > 3 ? 3 : 0) * ATTN_CPU_MAX_HEAD;
    float *red = (float *)((char *)j->scratch + DP_RED);
    for (int t0 = 0; t0 < n; t0 += 16) {
        int tn = n - t0 < 16 ? n - t0 : 16;
        for (int t = 0; t < 16; t += 3) {
            prefetch_next(j, t0 + t);
            prefetch_next(j, t0 + t + 1);
            prefetch_next(j, t0 + t + 2);
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            __m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            __m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
            int tt = t < tn ? t : tn - 1;
            const uint16_t *k0 = kb + (t0 + tt) * ks;
            const uint16_t *k1 = t + 1 < tn ? k0 + ks : k0;
            const uint16_t *k2 = t + 2 < tn ? k0 + 2 * ks : k0;
            for (int c = 0; c < nc; c++) {
                __m512bh x = (__m512bh)_mm512_loadu_si512(k0 + c * 32);
                __m512bh y = (__m512bh)_mm512_loadu_si512(k1 + c * 32);
                __m512bh z = (__m512bh)_mm512_loadu_si512(k2 + c * 32);
                __m512bh w = (__m512bh)_mm512_loadu_si512(q0 + c * 32);
                a0 = _mm512_dpbf16_ps(a0, x, w);
                b0 = _mm512_dpbf16_ps(b0, y, w);
                c0 = _mm512_dpbf16_ps(c0, z, w);
                w = (__m512bh)_mm512_loadu_si512(q1 + c * 32);
                a1 = _mm512_dpbf16_ps(a1, x, w);
                b1 = _mm512_dpbf16_ps(b1, y, w);
                c1 = _mm512_dpbf16_ps(c1, z, w);
                w = (__m512bh)_mm512_loadu_si512(q2 + c * 32);
                a2 = _mm512_dpbf16_ps(a2, x, w);
                b2 = _mm512_dpbf16_ps(b2, y, w);
                c2 = _mm512_dpbf16_ps(c2, z, w);
                w = (__m512bh)_mm512_loadu_si512(q3 + c * 32);
                a3 = _mm512_dpbf16_ps(a3, x, w);
                b3 = _mm512_dpbf16_ps(b3, y, w);
                c3 = _mm512_dpbf16_ps(c3, z, w);
            }
            /* red rows 16..17 are spare slots for the overhang of t = 15 */
            _mm512_store_ps(red + (0 * 18 + t) * 16, a0);
            _mm512_store_ps(red + (1 * 18 + t) * 16, a1);
            _mm512_store_ps(red + (2 * 18 + t) * 16, a2);
            _mm512_store_ps(red + (3 * 18 + t) * 16, a3);
            _mm512_store_ps(red + (0 * 18 + t + 1) * 16, b0);
            _mm512_store_ps(red + (1 * 18 + t + 1) * 16, b1);
            _mm512_store_ps(red + (2 * 18 + t + 1) * 16, b2);
            _mm512_store_ps(red + (3 * 18 + t + 1) * 16, b3);
            _mm512_store_ps(red + (0 * 18 + t + 2) * 16, c0);
            _mm512_store_ps(red + (1 * 18 + t + 2) * 16, c1);
            _mm512_store_ps(red + (2 * 18 + t + 2) * 16, c2);
            _mm512_store_ps(red + (3 * 18 + t + 2) * 16, c3);
        }
        for (int i = 0; i < nr; i++)
            _mm512_storeu_ps(j->s + (size_t)i * ATTN_CPU_CHUNK + t0, reduce16(red + i * 18 * 16));
    }
}

/* QK for few rows: kb rows (stride ks elements, Dp = pad32(D) valid lanes) */
static void dp_qk_rows(attn__cpu_job *j, const uint16_t *kb, int64_t ks, int n)
{
    if (j->R <= 4 && j->prec == ATTN_CPU_PREC_BF16) {
        dp_qk_small(j, kb, ks, n);
        return;
    }
    int Dp = pad32(j->D);
    bool split = j->prec == ATTN_CPU_PREC_SPLIT;
    const uint16_t *qh = j->qbuf, *ql = qh + QLO_OFF;
    float *red = (float *)((char *)j->scratch + DP_RED);
    for (int r0 = 0; r0 < j->R; r0 += 4) {
        int nr = j->R - r0 < 4 ? j->R - r0 : 4;
        const uint16_t *h[4], *l[4];
        for (int i = 0; i < 4; i++) {
            int rr = r0 + (i < nr ? i : 0);
            h[i] = qh + (size_t)rr * ATTN_CPU_MAX_HEAD;
            l[i] = ql + (size_t)rr * ATTN_CPU_MAX_HEAD;
        }
        for (int t0 = 0; t0 < n; t0 += 16) {
            int tn = n - t0 < 16 ? n - t0 : 16;
            for (int t = 0; t < 16; t++) {
                __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                if (r0 == 0) prefetch_next(j, t0 + t);
                if (t < tn) {
                    const uint16_t *kr = kb + (t0 + t) * ks;
                    for (int d = 0; d < Dp; d += 32) {
                        __m512bh kv = (__m512bh)_mm512_loadu_si512(kr + d);
                        a0 = _mm512_dpbf16_ps(a0, kv, (__m512bh)_mm512_loadu_si512(h[0] + d));
                        a1 = _mm512_dpbf16_ps(a1, kv, (__m512bh)_mm512_loadu_si512(h[1] + d));
                        a2 = _mm512_dpbf16_ps(a2, kv, (__m512bh)_mm512_loadu_si512(h[2] + d));
                        a3 = _mm512_dpbf16_ps(a3, kv, (__m512bh)_mm512_loadu_si512(h[3] + d));
                        if (split) {
                            a0 = _mm512_dpbf16_ps(a0, kv, (__m512bh)_mm512_loadu_si512(l[0] + d));
                            a1 = _mm512_dpbf16_ps(a1, kv, (__m512bh)_mm512_loadu_si512(l[1] + d));
                            a2 = _mm512_dpbf16_ps(a2, kv, (__m512bh)_mm512_loadu_si512(l[2] + d));
                            a3 = _mm512_dpbf16_ps(a3, kv, (__m512bh)_mm512_loadu_si512(l[3] + d));
                        }
                    }
                }
                _mm512_store_ps(red + (0 * 16 + t) * 16, a0);
                _mm512_store_ps(red + (1 * 16 + t) * 16, a1);
                _mm512_store_ps(red + (2 * 16 + t) * 16, a2);
                _mm512_store_ps(red + (3 * 16 + t) * 16, a3);
            }
            for (int i = 0; i < nr; i++)
                _mm512_storeu_ps(j->s + (size_t)(r0 + i) * ATTN_CPU_CHUNK + t0,
                                 reduce16(red + i * 256));
        }
    }
}

/* QK for many rows: K transposed into pair columns kt[dpair][CHUNK] */
static void dp_qk_packed(attn__cpu_job *j, const uint16_t *kb, int64_t ks, int n)
{
    int Dp = pad32(j->D), np = Dp / 2, nv = pad16(n) / 16;
    bool split = j->prec == ATTN_CPU_PREC_SPLIT;
    uint32_t *kt = (uint32_t *)((char *)j->scratch + DP_KT);
    for (int t0 = 0; t0 < nv * 16; t0 += 16)
        for (int p0 = 0; p0 < np; p0 += 16) {
            __m512i r[16];
            for (int t = 0; t < 16; t++)
                r[t] = t0 + t < n ? _mm512_loadu_si512(kb + (t0 + t) * ks + 2 * p0)
                                  : _mm512_setzero_si512();
            transpose16(r);
            for (int p = 0; p < 16; p++)
                _mm512_store_si512(kt + (size_t)(p0 + p) * ATTN_CPU_CHUNK + t0, r[p]);
        }
    const uint32_t *qh = j->qbuf, *ql = qh + QLO_OFF / 2;
    for (int r0 = 0; r0 < j->R; r0 += 4) {
        int nr = j->R - r0 < 4 ? j->R - r0 : 4;
        const uint32_t *h[4], *l[4];
        for (int i = 0; i < 4; i++) {
            int rr = r0 + (i < nr ? i : 0);
            h[i] = qh + (size_t)rr * (ATTN_CPU_MAX_HEAD / 2);
            l[i] = ql + (size_t)rr * (ATTN_CPU_MAX_HEAD / 2);
        }
        __m512 acc[4][4];
        for (int i = 0; i < 4; i++)
            for (int v = 0; v < 4; v++)
                acc[i][v] = _mm512_setzero_ps();
        for (int p = 0; p < np; p++) {
            const uint32_t *kp = kt + (size_t)p * ATTN_CPU_CHUNK;
            __m512bh k0 = (__m512bh)_mm512_load_si512(kp);
            __m512bh k1 = (__m512bh)_mm512_load_si512(kp + 16);
            __m512bh k2 = (__m512bh)_mm512_load_si512(kp + 32);
            __m512bh k3 = (__m512bh)_mm512_load_si512(kp + 48);
            for (int i = 0; i < 4; i++) {
                __m512bh q = (__m512bh)_mm512_set1_epi32((int)h[i][p]);
                acc[i][0] = _mm512_dpbf16_ps(acc[i][0], k0, q);
                if (nv > 1) acc[i][1] = _mm512_dpbf16_ps(acc[i][1], k1, q);
                if (nv > 2) acc[i][2] = _mm512_dpbf16_ps(acc[i][2], k2, q);
                if (nv > 3) acc[i][3] = _mm512_dpbf16_ps(acc[i][3], k3, q);
                if (split) {
                    __m512bh ql2 = (__m512bh)_mm512_set1_epi32((int)l[i][p]);
                    acc[i][0] = _mm512_dpbf16_ps(acc[i][0], k0, ql2);
                    if (nv > 1) acc[i][1] = _mm512_dpbf16_ps(acc[i][1], k1, ql2);
                    if (nv > 2) acc[i][2] = _mm512_dpbf16_ps(acc[i][2], k2, ql2);
                    if (nv > 3) acc[i][3] = _mm512_dpbf16_ps(acc[i][3], k3, ql2);
                }
            }
        }
        for (int i = 0; i < nr; i++)
            for (int v = 0; v < nv; v++)
                _mm512_storeu_ps(j->s + (size_t)(r0 + i) * ATTN_CPU_CHUNK + 16 * v, acc[i][v]);
    }
}

/* probabilities of row r as bf16 pairs (hi, and lo when split) */
static void dp_pack_p(attn__cpu_job *j, int r, int n, uint32_t *ph, uint32_t *pl)
{
    const float *s = j->s + (size_t)r * ATTN_CPU_CHUNK;
    int nv = pad32(n);
    for (int t = 0; t < nv; t += 32) {
        __m512 a = _mm512_loadu_ps(s + t), b = _mm512_loadu_ps(s + t + 16);
        if (t + 16 >= n) b = _mm512_setzero_ps(); /* scores past n are already 0 up to pad16 */
        __m512bh hb = _mm512_cvtne2ps_pbh(b, a);
        _mm512_storeu_si512(ph + t / 2, (__m512i)hb);
        if (pl) {
            __m512i hw = (__m512i)hb;
            __m512 ah = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hw)), 16));
            __m512 bh = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hw, 1)), 16));
            _mm512_storeu_si512(pl + t / 2, (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bh),
                                                                         _mm512_sub_ps(a, ah)));
        }
    }
}

/* PV: o[r][d] += sum_t p[r][t] v[t][d] with V rows paired by vpermt2w */
static void dp_pv(attn__cpu_job *j, const uint16_t *vb, int64_t vs, int n, const float *alpha)
{
    int Dvp = pad32(j->Dv);
    int npairs = (n + 1) / 2;
    bool split = j->prec == ATTN_CPU_PREC_SPLIT;
    uint32_t p2h[ATTN_CPU_MAX_ROWS][ATTN_CPU_CHUNK / 2];
    uint32_t p2l[ATTN_CPU_MAX_ROWS][ATTN_CPU_CHUNK / 2];
    int rows[ATTN_CPU_MAX_ROWS], live = 0;
    for (int r = 0; r < j->R; r++)
        if (alpha[r] >= 0.0f) {
            dp_pack_p(j, r, n, p2h[live], split ? p2l[live] : NULL);
            rows[live++] = r;
        }
    if (!live) return;
    static const uint16_t ilo_tab[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                         37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                         11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i ilo = _mm512_loadu_si512(ilo_tab);
    const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    /* many rows: interleave the V chunk once into scratch */
    bool pre = live > 8;
    uint32_t *vi = (uint32_t *)((char *)j->scratch + DP_VI);
    if (pre) {
        for (int tp = 0; tp < npairs; tp++) {
            const uint16_t *v0 = vb + (2 * tp) * vs;
            const uint16_t *v1 = 2 * tp + 1 < n ? v0 + vs : NULL;
            for (int d = 0; d < Dvp; d += 32) {
                __m512i a = _mm512_loadu_si512(v0 + d);
                __m512i b = v1 ? _mm512_loadu_si512(v1 + d) : _mm512_setzero_si512();
                _mm512_store_si512(vi + (size_t)tp * ATTN_CPU_MAX_HEAD + d,
                                   _mm512_permutex2var_epi16(a, ilo, b));
                _mm512_store_si512(vi + (size_t)tp * ATTN_CPU_MAX_HEAD + d + 16,
                                   _mm512_permutex2var_epi16(a, ihi, b));
            }
        }
    }
    for (int i0 = 0; i0 < live; i0 += 4) {
        int nr = live - i0 < 4 ? live - i0 : 4;
        int ri[4];
        for (int i = 0; i < 4; i++)
            ri[i] = i0 + (i < nr ? i : 0);
        for (int d = 0; d < Dvp; d += 64) {
            bool two = d + 64 <= Dvp;
            __m512 c[4][4];
            for (int i = 0; i < 4; i++) {
                float *o = j->o + (size_t)rows[ri[i]] * j->o_stride + d;
                __m512 al = _mm512_set1_ps(alpha[rows[ri[i]]]);
                c[i][0] = _mm512_mul_ps(_mm512_loadu_ps(o), al);
                c[i][1] = _mm512_mul_ps(_mm512_loadu_ps(o + 16), al);
                c[i][2] = two ? _mm512_mul_ps(_mm512_loadu_ps(o + 32), al) : _mm512_setzero_ps();
                c[i][3] = two ? _mm512_mul_ps(_mm512_loadu_ps(o + 48), al) : _mm512_setzero_ps();
            }
            for (int tp = 0; tp < npairs; tp++) {
                __m512bh w0, w1, w2, w3;
                if (pre) {
                    const uint32_t *vp = vi + (size_t)tp * ATTN_CPU_MAX_HEAD + d;
                    w0 = (__m512bh)_mm512_load_si512(vp);
                    w1 = (__m512bh)_mm512_load_si512(vp + 16);
                    w2 = two ? (__m512bh)_mm512_load_si512(vp + 32) : w0;
                    w3 = two ? (__m512bh)_mm512_load_si512(vp + 48) : w0;
                } else {
                    const uint16_t *v0 = vb + (2 * tp) * vs + d;
                    __m512i a = _mm512_loadu_si512(v0);
                    __m512i b =
                        2 * tp + 1 < n ? _mm512_loadu_si512(v0 + vs) : _mm512_setzero_si512();
                    w0 = (__m512bh)_mm512_permutex2var_epi16(a, ilo, b);
                    w1 = (__m512bh)_mm512_permutex2var_epi16(a, ihi, b);
                    if (two) {
                        a = _mm512_loadu_si512(v0 + 32);
                        b = 2 * tp + 1 < n ? _mm512_loadu_si512(v0 + vs + 32)
                                           : _mm512_setzero_si512();
                        w2 = (__m512bh)_mm512_permutex2var_epi16(a, ilo, b);
                        w3 = (__m512bh)_mm512_permutex2var_epi16(a, ihi, b);
                    } else {
                        w2 = w3 = w0;
                    }
                }
                for (int i = 0; i < 4; i++) {
                    __m512bh pp = (__m512bh)_mm512_set1_epi32((int)p2h[ri[i]][tp]);
                    c[i][0] = _mm512_dpbf16_ps(c[i][0], w0, pp);
                    c[i][1] = _mm512_dpbf16_ps(c[i][1], w1, pp);
                    if (two) {
                        c[i][2] = _mm512_dpbf16_ps(c[i][2], w2, pp);
                        c[i][3] = _mm512_dpbf16_ps(c[i][3], w3, pp);
                    }
                    if (split) {
                        __m512bh pl = (__m512bh)_mm512_set1_epi32((int)p2l[ri[i]][tp]);
                        c[i][0] = _mm512_dpbf16_ps(c[i][0], w0, pl);
                        c[i][1] = _mm512_dpbf16_ps(c[i][1], w1, pl);
                        if (two) {
                            c[i][2] = _mm512_dpbf16_ps(c[i][2], w2, pl);
                            c[i][3] = _mm512_dpbf16_ps(c[i][3], w3, pl);
                        }
                    }
                }
            }
            for (int i = nr - 1; i >= 0; i--) {
                float *o = j->o + (size_t)rows[ri[i]] * j->o_stride + d;
                _mm512_storeu_ps(o, c[i][0]);
                _mm512_storeu_ps(o + 16, c[i][1]);
                if (two) {
                    _mm512_storeu_ps(o + 32, c[i][2]);
                    _mm512_storeu_ps(o + 48, c[i][3]);
                }
            }
        }
    }
}

static void dp_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                     int key0, bool masked)
{
    if (j->kv_elem == ATTN_ELEM_F32 || j->kv_elem == ATTN_ELEM_F16) {
        f32_chunk(j, k, v, stride, n, key0, masked);
        return;
    }
    int D = j->D, Dv = j->Dv, Dp = pad32(D), Dvp = pad32(Dv);
    uint16_t *kb = (uint16_t *)((char *)j->scratch + DP_KB);
    uint16_t *vb = (uint16_t *)((char *)j->scratch + DP_VB);
    const uint16_t *kr, *vr;
    int64_t ks, vs;
    if (j->kv_elem == ATTN_ELEM_BF16) {
        if (D % 32 == 0 && Dv % 32 == 0) {
            kr = k;
            vr = v;
            ks = vs = stride;
        } else {
            bf16_rows_pad(kb, Dp, k, stride, n, D);
            bf16_rows_pad(vb, Dvp, v, stride, n, Dv);
            kr = kb;
            vr = vb;
            ks = Dp;
            vs = Dvp;
        }
    } else {
        int e4m3 = j->kv_elem == ATTN_ELEM_FP8_E4M3;
        fp8_rows_to_bf16(kb, Dp, k, stride, n, D, e4m3);
        fp8_rows_to_bf16(vb, Dvp, v, stride, n, Dv, e4m3);
        kr = kb;
        vr = vb;
        ks = Dp;
        vs = Dvp;
    }
    if (j->R > 16)
        dp_qk_packed(j, kr, ks, n);
    else
        dp_qk_rows(j, kr, ks, n);
    float alpha[ATTN_CPU_MAX_ROWS];
    for (int r = 0; r < j->R; r++)
        alpha[r] = softmax_row(j, r, n, key0, masked);
    dp_pv(j, vr, vs, n, alpha);
}

static void dp_prep(attn__cpu_job *j, const void *const *qrows)
{
    if (j->kv_elem == ATTN_ELEM_F32 || j->kv_elem == ATTN_ELEM_F16)
        f32_prep_q(j, qrows);
    else
        dp_prep_q(j, qrows);
}

/* The path a job of the avx512-bf16 variant runs, chosen by its prep: the
 * panel prefill (attn__cpu_isa_prefill_bf16) for jobs of more than
 * ATTN_CPU_PF_MIN_ROWS rows, the paths above for the others. Kept in the
 * last 64 bytes of the job's scratch, which neither path uses. */
typedef void (*bf16_chunk_fn)(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                              int key0, bool masked);
#define BF16_PATH(j) (*(bf16_chunk_fn *)((char *)(j)->scratch + ATTN_CPU_VSCRATCH - 64))
_Static_assert(DP_END <= ATTN_CPU_VSCRATCH - 64, "dp scratch overlaps the path");

/* dp_prep through a pointer, as when the descriptor named it: its one direct
 * call stays amx_prep_q's, whose code (inlining included) is then the code
 * tested on AMX (tools/objdiff: same instructions) */
static void (*volatile const dp_prep_ref)(attn__cpu_job *j, const void *const *qrows) = dp_prep;

static void bf16_prep(attn__cpu_job *j, const void *const *qrows)
{
    const attn__cpu_isa *pf = &attn__cpu_isa_prefill_bf16;
    if (pf->accepts(j)) {
        pf->prep_q(j, qrows);
        BF16_PATH(j) = pf->chunk;
    } else {
        dp_prep_ref(j, qrows);
        BF16_PATH(j) = dp_chunk;
    }
}

static void bf16_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                       int key0, bool masked)
{
    BF16_PATH(j)(j, k, v, stride, n, key0, masked);
}

static void bf16_finish(attn__cpu_job *j)
{
    if (BF16_PATH(j) != dp_chunk) attn__cpu_isa_prefill_bf16.finish(j);
}

const attn__cpu_isa attn__cpu_isa_avx512_bf16 = {
    .name = "avx512-bf16",
    .usable = avx512_bf16_usable,
    .prep_q = bf16_prep,
    .chunk = bf16_chunk,
    .finish = bf16_finish,
    .first = &attn__cpu_isa_stream_decode_bf16,
    .wide_rows = ATTN_CPU_WIDE_ROWS,
};

/* ---- AMX-BF16 variant ------------------------------------------------------------- */

/* Jobs with more than 16 rows (prefill tiles) and decode jobs of at most 8
 * bf16-query rows (see amx_dec_chunk) over bf16/fp8 caches run on the tile
 * unit; everything else takes the BF16 dot-product path above.
 *   S^T [keys][rows] = K . Q^T : A = 16 keys x 32 dims straight from the
 *     cache (or the bf16 staging copy), B = the queries as VNNI pairs,
 *     packed once per job; C tiles land in j->s as [key][row];
 *   softmax runs across rows (one vector per key: no horizontal work); the
 *     running max is an anchor that only moves when a row's max exceeds it
 *     by more than AMX_TAU, so O is rarely rescaled and P stays below
 *     e^AMX_TAU;
 *   O [rows][dims] += P . V : A = P as bf16 (16 rows x 32 keys, built by a
 *     16x16 transpose of key-pair columns), B = V rows interleaved in key
 *     pairs; C tiles are loaded from and stored to the fp32 O rows.
 * fp16/fp32 queries use hi + lo bf16 planes (two tile products).
 * Tile instructions are inline asm with memory clobbers; the palette is
 * loaded per chunk and released after it. */

#define AMX_TAU 8.0f
#ifndef AMX_MIN_ROWS
#define AMX_MIN_ROWS 16 /* 9..16 rows: the dp path; <= 8 rows: amx_dec_chunk */
#endif

static void amx_begin(void)
{
    static const uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    attn__amx_config(rows, NULL);
}

static void amx_end(void)
{
    attn__amx_release();
}

static bool amx_usable(void)
{
    return avx512_bf16_usable() && attn_cpu_has(ATTN_CPU_AMX_TILE) &&
           attn_cpu_has(ATTN_CPU_AMX_BF16);
}

static bool amx_job(const attn__cpu_job *j)
{
    return j->R > AMX_MIN_ROWS && j->Dv % 16 == 0 &&
           (j->kv_elem == ATTN_ELEM_BF16 || j->kv_elem == ATTN_ELEM_FP8_E4M3 ||
            j->kv_elem == ATTN_ELEM_FP8_E5M2);
}

/* AMX scratch, after the dp path's K/V staging rows */
#define AMX_VT  DP_KT                    /* [2 ksteps][32 dim tiles] x 1 KiB */
#define AMX_PT  (AMX_VT + 2 * 32 * 1024) /* [4 row tiles][2 ksteps][hi, lo] x 1 KiB */
#define AMX_END (AMX_PT + 4 * 2 * 2 * 1024)
_Static_assert(AMX_END <= ATTN_CPU_VSCRATCH, "amx scratch too small");

/* qbuf: [plane][row tile][d step] x 1 KiB, plane 1 (lo) at +64 KiB */
#define AMX_QT(j, plane, rt, ds)                                                                   \
    ((uint32_t *)(j)->qbuf + ((size_t)(plane)*64 + (size_t)(rt)*16 + (size_t)(ds)) * 256)

static const uint16_t pair_idx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

static bool amx_dec_job(const attn__cpu_job *j);

static void amx_prep_q(attn__cpu_job *j, const void *const *qrows)
{
    bool dec = amx_dec_job(j);
    if (!amx_job(j) && !dec) {
        dp_prep(j, qrows);
        return;
    }
    amx_begin(); /* released by amx_finish after the job's last chunk */
    int D = j->D, Dp = pad32(D), nds = Dp / 32, nrt = (j->R + 15) / 16;
    bool split = j->prec == ATTN_CPU_PREC_SPLIT;
    float row[ATTN_CPU_MAX_HEAD + 32];
    for (int rt = 0; rt < nrt; rt++) {
        /* rows of this tile as bf16 pairs: hr[r][pair], lr[r][pair], in the
         * K staging area (unused until the first chunk) */
        uint32_t(*hr)[ATTN_CPU_MAX_HEAD / 2] = (void *)((char *)j->scratch + DP_KB);
        uint32_t(*lr)[ATTN_CPU_MAX_HEAD / 2] = hr + 16;
        for (int i = 0; i < 16; i++) {
            int r = rt * 16 + i;
            if (r >= j->R) {
                memset(hr[i], 0, sizeof hr[i]);
                memset(lr[i], 0, sizeof lr[i]);
                continue;
            }
            if (j->q_elem == ATTN_ELEM_BF16) {
                bf16_rows_pad((uint16_t *)hr[i], Dp, qrows[r], 0, 1, D);
                continue;
            }
            row_to_f32(row, qrows[r], D, j->q_elem);
            for (int d = D; d < Dp; d++)
                row[d] = 0.0f;
            for (int d = 0; d < Dp; d += 32) {
                __m512 a = _mm512_loadu_ps(row + d), b = _mm512_loadu_ps(row + d + 16);
                __m512i hw = (__m512i)_mm512_cvtne2ps_pbh(b, a);
                __m512 ah = _mm512_castsi512_ps(
                    _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hw)), 16));
                __m512 bh = _mm512_castsi512_ps(
                    _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hw, 1)), 16));
                _mm512_storeu_si512(hr[i] + d / 2, hw);
                _mm512_storeu_si512(lr[i] + d / 2, (__m512i)_mm512_cvtne2ps_pbh(
                                                       _mm512_sub_ps(b, bh), _mm512_sub_ps(a, ah)));
            }
        }
        if (dec && dec_perm(j)) /* queries in the dim order of the staged K */
            for (int i = 0; i < j->R; i++) {
                uint16_t tmp[ATTN_CPU_MAX_HEAD], *h = (uint16_t *)hr[i];
                for (int p = 0; p < D; p++)
                    tmp[p] = h[dec_perm_dim(p)];
                memcpy(h, tmp, (size_t)D * 2);
            }
        for (int ds = 0; ds < nds; ds++) {
            __m512i t[16];
            for (int i = 0; i < 16; i++)
                t[i] = _mm512_loadu_si512(hr[i] + ds * 16);
            transpose16(t);
            for (int p = 0; p < 16; p++)
                _mm512_store_si512(AMX_QT(j, 0, rt, ds) + p * 16, t[p]);
            if (split) {
                for (int i = 0; i < 16; i++)
                    t[i] = _mm512_loadu_si512(lr[i] + ds * 16);
                transpose16(t);
                for (int p = 0; p < 16; p++)
                    _mm512_store_si512(AMX_QT(j, 1, rt, ds) + p * 16, t[p]);
            }
        }
    }
    if (dec) { /* P tiles (rows past 2R stay zero) and the O accumulator */
        memset((char *)j->scratch + AMX_PT, 0, 4 * 1024);
        memset((char *)j->scratch + AMX_VT, 0, (size_t)j->Dv / 32 * 1024);
    }
}

/* S^T tiles into St[key][row] (row stride 64). One row tile (decode): four
 * key tiles accumulate side by side, so the tile products of a d-step are
 * independent and the query tile is loaded once per d-step. More row tiles
 * (prefill): one key tile at a time, one accumulator per row tile. */
static void amx_qk(attn__cpu_job *j, const uint16_t *kb, int64_t ks, int nkt)
{
    int nds = pad32(j->D) / 32, nrt = (j->R + 15) / 16;
    int planes = j->prec == ATTN_CPU_PREC_SPLIT ? 2 : 1;
    long kstride = (long)ks * 2;
    size_t ktile = (size_t)16 * (size_t)ks;
    if (nrt == 1) {
        TZERO(0);
        TZERO(1);
        TZERO(2);
        TZERO(3);
        for (int ds = 0; ds < nds; ds++)
            for (int plane = 0; plane < planes; plane++) {
                const uint16_t *a = kb + (size_t)ds * 32;
                TLOAD(5, AMX_QT(j, plane, 0, ds), 64);
                TLOAD(4, a, kstride);
                TDP(0, 4, 5);
                if (nkt > 1) {
                    TLOAD(6, a + ktile, kstride);
                    TDP(1, 6, 5);
                }
                if (nkt > 2) {
                    TLOAD(7, a + 2 * ktile, kstride);
                    TDP(2, 7, 5);
                }
                if (nkt > 3) {
                    TLOAD(4, a + 3 * ktile, kstride);
                    TDP(3, 4, 5);
                }
            }
        attn__amx_store_acc(j->s, 16 * 64 * 4, 256, nkt);
        return;
    }
    for (int kt = 0; kt < nkt; kt++) {
        TZERO(0);
        TZERO(1);
        TZERO(2);
        TZERO(3);
        for (int ds = 0; ds < nds; ds++) {
            TLOAD(4, kb + (size_t)kt * ktile + (size_t)ds * 32, kstride);
            for (int plane = 0; plane < planes; plane++) {
                TLOAD(5, AMX_QT(j, plane, 0, ds), 64);
                TDP(0, 4, 5);
                if (nrt > 1) {
                    TLOAD(6, AMX_QT(j, plane, 1, ds), 64);
                    TDP(1, 4, 6);
                }
                if (nrt > 2) {
                    TLOAD(7, AMX_QT(j, plane, 2, ds), 64);
                    TDP(2, 4, 7);
                }
                if (nrt > 3) {
                    TLOAD(5, AMX_QT(j, plane, 3, ds), 64);
                    TDP(3, 4, 5);
                }
            }
        }
        float *st = j->s + (size_t)kt * 16 * 64;
        attn__amx_store_acc(st, 16 * 4, 256, nrt);
    }
}

/* softmax across rows on St [key][row] (row stride 64); alpha[r] set for
 * every row of the job (1 = no rescale) */
static void amx_softmax(attn__cpu_job *j, int n, int key0, float *alpha)
{
    int nkp = pad16(n), nrt = (j->R + 15) / 16;
    __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int rt = 0; rt < nrt; rt++) {
        int r0 = rt * 16;
        __mmask16 lanes = j->R - r0 >= 16 ? 0xffff : (__mmask16)((1u << (j->R - r0)) - 1u);
        __m512i vlo = _mm512_maskz_loadu_epi32(lanes, j->lo + r0);
        __m512i vhi = _mm512_maskz_loadu_epi32(lanes, j->hi + r0);
        __m512 rel = _mm512_cvtepi32_ps(_mm512_sub_epi32(
            _mm512_set1_epi32(key0), _mm512_maskz_loadu_epi32(lanes, j->pos + r0)));
        __m512 slope = j->slope ? _mm512_maskz_loadu_ps(lanes, j->slope + r0) : _mm512_setzero_ps();
        __m512 sc = _mm512_set1_ps(j->qk_scale);
        __m512 mx = ninf;
        for (int t = 0; t < nkp; t++) {
            float *st = j->s + (size_t)t * 64 + r0;
            __m512 x = _mm512_mul_ps(_mm512_loadu_ps(st), sc);
            if (j->softcap > 0.0f) x = softcap16(x, j->softcap);
            if (j->slope)
                x = _mm512_fmadd_ps(slope, _mm512_add_ps(rel, _mm512_set1_ps((float)t)), x);
            __m512i key = _mm512_set1_epi32(key0 + t);
            __mmask16 vis = t < n ? lanes & _mm512_cmpge_epi32_mask(key, vlo) &
                                        _mm512_cmple_epi32_mask(key, vhi)
                                  : 0;
            x = _mm512_mask_blend_ps(vis, ninf, x);
            _mm512_storeu_ps(st, x);
            mx = _mm512_max_ps(mx, x);
        }
        __m512 mold = _mm512_maskz_loadu_ps(lanes, j->m + r0);
        __m512 lold = _mm512_maskz_loadu_ps(lanes, j->l + r0);
        __mmask16 seen = _mm512_cmp_ps_mask(lold, _mm512_setzero_ps(), _CMP_GT_OQ);
        __mmask16 any = _mm512_cmp_ps_mask(mx, ninf, _CMP_NEQ_OQ);
        /* move the anchor for rows seeing keys for the first time, or whose
         * max ran more than AMX_TAU past it */
        __mmask16 move =
            any & (~seen | _mm512_cmp_ps_mask(mx, _mm512_add_ps(mold, _mm512_set1_ps(AMX_TAU)),
                                              _CMP_GT_OQ));
        __m512 mnew = _mm512_mask_blend_ps(move, mold, mx);
        __m512 al = _mm512_mask_blend_ps(seen & move, _mm512_set1_ps(1.0f),
                                         exp512(_mm512_sub_ps(mold, mnew)));
        __m512 sum = _mm512_setzero_ps();
        for (int t = 0; t < nkp; t++) {
            float *st = j->s + (size_t)t * 64 + r0;
            __m512 x = _mm512_loadu_ps(st);
            __mmask16 live = _mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_OQ);
            __m512 p = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(x, mnew)));
            _mm512_storeu_ps(st, p);
            sum = _mm512_add_ps(sum, p);
        }
        __m512 lnew = _mm512_fmadd_ps(lold, al, sum);
        _mm512_mask_storeu_ps(j->m + r0, lanes, mnew);
        _mm512_mask_storeu_ps(j->l + r0, lanes, lnew);
        _mm512_storeu_ps(alpha + r0, al);
    }
}

/* ---- AMX decode (few rows) ------------------------------------------------------
 * Decode jobs (at most 8 rows: one token of a GQA group of <= 8, or a few
 * speculative tokens) also run on the tile unit: one tile product does the
 * work of 16-32 VDPBF16PS whatever the number of rows, so per-key compute
 * drops far below the memory time.
 *   QK as for prefill (S^T = K . Q^T, K tiles straight from the cache), the
 *     16 x 16 score tiles transposed back into rows for softmax_row;
 *   PV without re-laying V out: the B tile is 16 V rows as they are in the
 *     cache (32 dims = 16 dim pairs); A row r holds (p_rt, 0) pairs and row
 *     R + r holds (0, p_rt), so C row r collects the even dims and row R + r
 *     the odd dims of output row r. O stays in that [dim group][16][16]
 *     layout in scratch and is woven back into rows by amx_finish. */
#define AMX_DO AMX_VT /* O accumulator: [Dv / 32][16 rows][16] f32 */

static bool amx_dec_job(const attn__cpu_job *j)
{
    return j->R <= 8 && j->prec == ATTN_CPU_PREC_BF16 && j->D % 32 == 0 && j->Dv % 32 == 0 &&
           (j->kv_elem == ATTN_ELEM_BF16 || j->kv_elem == ATTN_ELEM_FP8_E4M3 ||
            j->kv_elem == ATTN_ELEM_FP8_E5M2);
}

/* The next chunk's lines are prefetched (to L2) in DEC_PF_STEPS slices
 * between the phases of a chunk: one burst stalls on fill buffers. */
#define DEC_PF_STEPS 16
/* prefetch the next cnt lines of the next chunk's K and V (cursor *c of n) */
static inline void dec_pf(const attn__cpu_job *j, int *c, int n, int cnt)
{
    const char *k = j->pf_k, *v = j->pf_v;
    int e = *c + cnt < n ? *c + cnt : n;
    for (int i = *c; i < e; i++) {
        _mm_prefetch(k + (size_t)i * 64, _MM_HINT_T2);
        _mm_prefetch(v + (size_t)i * 64, _MM_HINT_T2);
    }
    *c = e;
}

static void amx_dec_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                          int key0, bool masked)
{
    int D = j->D, Dv = j->Dv, R = j->R;
    int nkp = pad16(n), nkt = nkp / 16, ndg = Dv / 32;
    int pfc = 0; /* prefetch cursor over the next chunk's lines, spread over the work */
    int pfl = 0;
    if (j->pf_n && j->pf_stride == D && j->D == j->Dv)
        pfl = (int)((size_t)j->pf_n * (size_t)D * attn_elem_size(j->kv_elem) / 64);
    int pfs = (pfl + DEC_PF_STEPS - 1) / DEC_PF_STEPS;
    const uint16_t *kr, *vr;
    int64_t ks, vs;
    if (j->kv_elem == ATTN_ELEM_BF16 && n == nkp) {
        kr = k;
        vr = v;
        ks = vs = stride;
    } else {
        uint16_t *kb = (uint16_t *)((char *)j->scratch + DP_KB);
        uint16_t *vb = (uint16_t *)((char *)j->scratch + DP_VB);
        if (j->kv_elem == ATTN_ELEM_BF16) {
            bf16_rows_pad(kb, D, k, stride, n, D);
            bf16_rows_pad(vb, Dv, v, stride, n, Dv);
        } else {
            int e4m3 = j->kv_elem == ATTN_ELEM_FP8_E4M3;
            if (dec_perm(j)) {
                fp8_rows_to_bf16_perm(kb, k, stride, n, D, e4m3);
                fp8_rows_to_bf16_perm(vb, v, stride, n, Dv, e4m3);
            } else {
                fp8_rows_to_bf16(kb, D, k, stride, n, D, e4m3);
                fp8_rows_to_bf16(vb, Dv, v, stride, n, Dv, e4m3);
            }
        }
        for (int t = n; t < nkp; t++) {
            memset(kb + (size_t)t * D, 0, (size_t)D * 2);
            memset(vb + (size_t)t * Dv, 0, (size_t)Dv * 2);
        }
        kr = kb;
        vr = vb;
        ks = D;
        vs = Dv;
    }
    dec_pf(j, &pfc, pfl, pfs);
    amx_qk(j, kr, ks, nkt);
    dec_pf(j, &pfc, pfl, pfs);
    /* St [key][64] -> s [row][64]: group 0 is read whole before any row is
     * written, later groups only land in lanes >= 16 that St leaves unused */
    for (int kt = 0; kt < nkt; kt++) {
        __m512i t[16];
        for (int i = 0; i < 16; i++)
            t[i] = _mm512_load_si512(j->s + (size_t)(kt * 16 + i) * 64);
        transpose16(t);
        for (int r = 0; r < R; r++)
            _mm512_store_si512(j->s + (size_t)r * 64 + kt * 16, t[r]);
    }
    dec_pf(j, &pfc, pfl, pfs);
    float alpha[8];
    for (int r = 0; r < R; r++)
        alpha[r] = softmax_row(j, r, n, key0, masked);
    dec_pf(j, &pfc, pfl, pfs);
    /* P as A tiles: [kt][16 rows][16 pairs]; rows >= 2R stay zero from prep */
    uint32_t *pt = (uint32_t *)((char *)j->scratch + AMX_PT);
    for (int kt = 0; kt < nkt; kt++)
        for (int r = 0; r < R; r++) {
            __m512i w = _mm512_setzero_si512();
            if (alpha[r] >= 0.0f)
                w = _mm512_cvtepu16_epi32(
                    (__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(j->s + (size_t)r * 64 + kt * 16)));
            _mm512_store_si512(pt + kt * 256 + r * 16, w);
            _mm512_store_si512(pt + kt * 256 + (R + r) * 16, _mm512_slli_epi32(w, 16));
        }
    float *ot = (float *)((char *)j->scratch + AMX_DO);
    for (int r = 0; r < R; r++)
        if (alpha[r] >= 0.0f && alpha[r] != 1.0f) {
            __m512 a = _mm512_set1_ps(alpha[r]);
            for (int g = 0; g < ndg; g++) {
                float *o0 = ot + g * 256 + r * 16, *o1 = ot + g * 256 + (R + r) * 16;
                _mm512_store_ps(o0, _mm512_mul_ps(_mm512_load_ps(o0), a));
                _mm512_store_ps(o1, _mm512_mul_ps(_mm512_load_ps(o1), a));
            }
        }
    TLOAD(4, pt, 64);
    if (nkt > 1) TLOAD(5, pt + 256, 64);
    if (nkt > 2) TLOAD(6, pt + 512, 64);
    if (nkt > 3) TLOAD(7, pt + 768, 64);
    long vstride = (long)vs * 2;
    size_t vtile = (size_t)16 * (size_t)vs;
    for (int g = 0; g < ndg; g += 2) {
        bool two = g + 1 < ndg;
        float *o = ot + g * 256;
        const uint16_t *vg = vr + g * 32;
        TLOAD(0, o, 64);
        if (two) TLOAD(3, o + 256, 64);
        for (int kt = 0; kt < nkt; kt++) {
            const uint16_t *vk = vg + kt * vtile;
            TLOAD(1, vk, vstride);
            if (two) TLOAD(2, vk + 32, vstride);
            switch (kt) {
            case 0:
                TDP(0, 4, 1);
                if (two) TDP(3, 4, 2);
                break;
            case 1:
                TDP(0, 5, 1);
                if (two) TDP(3, 5, 2);
                break;
            case 2:
                TDP(0, 6, 1);
                if (two) TDP(3, 6, 2);
                break;
            default:
                TDP(0, 7, 1);
                if (two) TDP(3, 7, 2);
                break;
            }
        }
        TSTORE(0, o, 64);
        if (two) TSTORE(3, o + 256, 64);
        dec_pf(j, &pfc, pfl, pfs);
    }
    dec_pf(j, &pfc, pfl, pfl);
}

/* O accumulator -> j->o rows, then the tile unit is released */
static void amx_dec_finish(attn__cpu_job *j)
{
    static const int32_t lo_tab[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
    const __m512i ilo = _mm512_loadu_si512(lo_tab);
    const __m512i ihi = _mm512_add_epi32(ilo, _mm512_set1_epi32(8));
    const float *ot = (const float *)((const char *)j->scratch + AMX_DO);
    bool perm = dec_perm(j);
    float row[ATTN_CPU_MAX_HEAD];
    for (int r = 0; r < j->R; r++) {
        float *orow = j->o + (size_t)r * j->o_stride;
        float *dst = perm ? row : orow;
        for (int g = 0; g < j->Dv / 32; g++) {
            __m512 ev = _mm512_load_ps(ot + g * 256 + r * 16);
            __m512 od = _mm512_load_ps(ot + g * 256 + (j->R + r) * 16);
            _mm512_storeu_ps(dst + g * 32, _mm512_permutex2var_ps(ev, ilo, od));
            _mm512_storeu_ps(dst + g * 32 + 16, _mm512_permutex2var_ps(ev, ihi, od));
        }
        if (perm)
            for (int p = 0; p < j->Dv; p++)
                orow[dec_perm_dim(p)] = row[p];
    }
    amx_end();
}

static void amx_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                      int key0, bool masked)
{
    if (amx_dec_job(j)) {
        amx_dec_chunk(j, k, v, stride, n, key0, masked);
        return;
    }
    (void)masked; /* the row bounds are applied on every chunk */
    if (!amx_job(j)) {
        dp_chunk(j, k, v, stride, n, key0, masked);
        return;
    }
    int D = j->D, Dv = j->Dv, Dp = pad32(D), Dvp = pad32(Dv);
    int nkp = pad16(n), nkt = nkp / 16, nks = (nkp + 31) / 32, nrt = (j->R + 15) / 16;
    bool split = j->prec == ATTN_CPU_PREC_SPLIT;
    uint16_t *kb = (uint16_t *)((char *)j->scratch + DP_KB);
    uint16_t *vb = (uint16_t *)((char *)j->scratch + DP_VB);
    const uint16_t *kr, *vr;
    int64_t ks, vs;
    if (j->kv_elem == ATTN_ELEM_BF16 && D % 32 == 0 && Dv % 32 == 0 && n == nkp) {
        kr = k;
        vr = v;
        ks = vs = stride;
    } else {
        if (j->kv_elem == ATTN_ELEM_BF16) {
            bf16_rows_pad(kb, Dp, k, stride, n, D);
            bf16_rows_pad(vb, Dvp, v, stride, n, Dv);
        } else {
            int e4m3 = j->kv_elem == ATTN_ELEM_FP8_E4M3;
            fp8_rows_to_bf16(kb, Dp, k, stride, n, D, e4m3);
            fp8_rows_to_bf16(vb, Dvp, v, stride, n, Dv, e4m3);
        }
        for (int t = n; t < nkp; t++) {
            memset(kb + (size_t)t * Dp, 0, (size_t)Dp * 2);
            memset(vb + (size_t)t * Dvp, 0, (size_t)Dvp * 2);
        }
        kr = kb;
        vr = vb;
        ks = Dp;
        vs = Dvp;
    }
    amx_qk(j, kr, ks, nkt);
    float alpha[ATTN_CPU_MAX_ROWS];
    amx_softmax(j, n, key0, alpha);
    /* rescale O rows whose anchor moved */
    for (int r = 0; r < j->R; r++)
        if (alpha[r] != 1.0f) {
            float *o = j->o + (size_t)r * j->o_stride;
            __m512 a = _mm512_set1_ps(alpha[r]);
            for (int d = 0; d < Dvp; d += 16)
                _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), a));
        }
    /* P as A tiles */
    const __m512i pidx = _mm512_loadu_si512(pair_idx);
    uint32_t *pt = (uint32_t *)((char *)j->scratch + AMX_PT);
    for (int rt = 0; rt < nrt; rt++)
        for (int kq = 0; kq < nks; kq++) {
            __m512i h[16], l[16];
            for (int i = 0; i < 16; i++) {
                int t = kq * 32 + 2 * i;
                __m512 a = t < nkp ? _mm512_loadu_ps(j->s + (size_t)t * 64 + rt * 16)
                                   : _mm512_setzero_ps();
                __m512 b = t + 1 < nkp ? _mm512_loadu_ps(j->s + (size_t)(t + 1) * 64 + rt * 16)
                                       : _mm512_setzero_ps();
                __m512i hw = (__m512i)_mm512_cvtne2ps_pbh(b, a);
                h[i] = _mm512_permutexvar_epi16(pidx, hw);
                if (split) {
                    __m512 ah = _mm512_castsi512_ps(
                        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hw)), 16));
                    __m512 bh = _mm512_castsi512_ps(_mm512_slli_epi32(
                        _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hw, 1)), 16));
                    l[i] = _mm512_permutexvar_epi16(
                        pidx,
                        (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bh), _mm512_sub_ps(a, ah)));
                }
            }
            transpose16(h);
            uint32_t *dst = pt + ((size_t)(rt * 2 + kq) * 2) * 256;
            for (int r = 0; r < 16; r++)
                _mm512_store_si512(dst + r * 16, h[r]);
            if (split) {
                transpose16(l);
                for (int r = 0; r < 16; r++)
                    _mm512_store_si512(dst + 256 + r * 16, l[r]);
            }
        }
    /* V as B tiles: [kstep][dim tile][pair][16 dwords] */
    static const uint16_t ilo_tab[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                         37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                         11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i ilo = _mm512_loadu_si512(ilo_tab);
    const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    uint32_t *vt = (uint32_t *)((char *)j->scratch + AMX_VT);
    int ndt = Dv / 16;
    for (int kq = 0; kq < nks; kq++)
        for (int i = 0; i < 16; i++) {
            int t = kq * 32 + 2 * i;
            const uint16_t *v0 = t < n ? vr + t * vs : NULL;
            const uint16_t *v1 = t + 1 < n ? vr + (t + 1) * vs : NULL;
            for (int d = 0; d < Dvp; d += 32) {
                __m512i a = v0 ? _mm512_loadu_si512(v0 + d) : _mm512_setzero_si512();
                __m512i b = v1 ? _mm512_loadu_si512(v1 + d) : _mm512_setzero_si512();
                uint32_t *dst = vt + ((size_t)(kq * 32 + d / 16) * 16 + (size_t)i) * 16;
                _mm512_store_si512(dst, _mm512_permutex2var_epi16(a, ilo, b));
                if (d / 16 + 1 < ndt)
                    _mm512_store_si512(dst + 256, _mm512_permutex2var_epi16(a, ihi, b));
            }
        }
    /* O += P V, four dim tiles at a time */
    long ostride = (long)j->o_stride * 4;
    for (int rt = 0; rt < nrt; rt++)
        for (int dt0 = 0; dt0 < ndt; dt0 += 4) {
            int nd = ndt - dt0 < 4 ? ndt - dt0 : 4;
            float *o = j->o + (size_t)rt * 16 * j->o_stride + dt0 * 16;
            attn__amx_load_acc(o, 16 * 4, ostride, nd);
            for (int kq = 0; kq < nks; kq++) {
                uint32_t *pa = pt + ((size_t)(rt * 2 + kq) * 2) * 256;
                TLOAD(4, pa, 64);
                if (split) TLOAD(6, pa + 256, 64);
                uint32_t *vbase = vt + (size_t)(kq * 32 + dt0) * 256;
                TLOAD(5, vbase, 64);
                TDP(0, 4, 5);
                if (split) TDP(0, 6, 5);
                if (nd > 1) {
                    TLOAD(7, vbase + 256, 64);
                    TDP(1, 4, 7);
                    if (split) TDP(1, 6, 7);
                }
                if (nd > 2) {
                    TLOAD(5, vbase + 512, 64);
                    TDP(2, 4, 5);
                    if (split) TDP(2, 6, 5);
                }
                if (nd > 3) {
                    TLOAD(7, vbase + 768, 64);
                    TDP(3, 4, 7);
                    if (split) TDP(3, 6, 7);
                }
            }
            attn__amx_store_acc(o, 16 * 4, ostride, nd);
        }
}

static void amx_finish(attn__cpu_job *j)
{
    if (amx_dec_job(j))
        amx_dec_finish(j);
    else if (amx_job(j))
        amx_end();
}

const attn__cpu_isa attn__cpu_isa_amx_bf16 = {
    .name = "amx-bf16",
    .usable = amx_usable,
    .prep_q = amx_prep_q,
    .chunk = amx_chunk,
    .finish = amx_finish,
    .first = &attn__cpu_isa_stream_decode_amx,
};
