/* CPU_ATTN streaming decode of the avx512-bf16 variant: bf16 queries over a
 * bf16 or fp8 cache with head size a multiple of 64, as VDPBF16PS dot
 * products (32 multiply-adds per instruction, twice an fp32 FMA's, and no
 * widening of bf16 rows); its other jobs take the FMA path of
 * cpu_attn_decode_avx512.c (prep, kernels and finish).
 *
 * The walk is the FMA kernel's (blocks of 16 keys straight from the cache,
 * the rows SD_PFB bytes ahead prefetched as each key is read, block b + 1's
 * scores before block b's PV, sd_softmax between them):
 *   QK: per key, each row's dot product over the head in two accumulator
 *     chains of 16 pair sums, scaled, into SD_ACC; 16 keys reduced at once;
 *   PV: V rows of two keys interleaved into dim pairs (vpermt2w) and
 *     multiplied by the row's (p_t, p_t+1) bf16 pair; O rows of a group of
 *     dims stay in registers over the 16 keys.
 * Probabilities are rounded to bf16 for PV (the row sums stay fp32), as on
 * the tile path: the variant's documented error for bf16 activations.
 * fp8 rows are widened to exact bf16 through the byte tables (VBMI) with
 * byte unpacks, in staged order (sd_staged_dim): the queries are laid out
 * alike and O is put back in dim order by the finish. */
#include "backends/cpu/cpu_attn_decode_avx512.h"

#define DQ_QS2 (SD_QS / 2) /* query row stride in qbuf, in bf16 pairs */
#define DQ_PP  SD_PT       /* [2 blocks][8 rows][8] bf16 probability pairs */
_Static_assert(DQ_PP + 2 * 8 * 8 * 4 <= SD_END, "dp decode pairs");

/* 64 dims of a row at src as two vectors of bf16 pairs */
static inline __attribute__((always_inline)) void
dq_row64(__m512bh *x0, __m512bh *x1, const char *src, const bool FP8, const sd_tab *tb)
{
    if (FP8) {
        const __m512i sign = _mm512_set1_epi32((int)0x80808080u);
        __m512i b = _mm512_loadu_si512(src);
        __m512i h = _mm512_ternarylogic_epi32(sd_lookup(b, tb->h0, tb->h1), b, sign, 0xf8);
        __m512i l = sd_lookup(b, tb->l0, tb->l1);
        *x0 = (__m512bh)_mm512_unpacklo_epi8(l, h);
        *x1 = (__m512bh)_mm512_unpackhi_epi8(l, h);
    } else {
        *x0 = (__m512bh)_mm512_loadu_si512(src);
        *x1 = (__m512bh)_mm512_loadu_si512(src + 64);
    }
}

/* scaled scores of keys [t0, t0 + nb) into SD_ACC (16 partial sums each) */
static inline __attribute__((always_inline)) void dq_qk_block(attn__cpu_job *j, const char *kc,
                                                              const char *vc, int64_t sb, int t0,
                                                              int nb, int n, const int R,
                                                              const bool FP8, const sd_tab *tb)
{
    float *acc = (float *)((char *)j->scratch + SD_ACC);
    const uint32_t *q = j->qbuf;
    const int W = FP8 ? 1 : 2;
    int ng = j->D / 64, kbytes = j->D * W, vbytes = j->Dv * W;
    int ahead = SD_PFB / kbytes > 2 ? SD_PFB / kbytes : 2;
    const __m512 sc = _mm512_set1_ps(j->qk_scale);
    for (int t = 0; t < nb; t++) {
        sd_prefetch(j, kc, vc, sb, t0 + t + ahead, n, kbytes, vbytes);
        const char *kr = kc + (t0 + t) * sb;
        __m512 a[8], b[8];
        for (int r = 0; r < R; r++)
            a[r] = b[r] = _mm512_setzero_ps();
        for (int g = 0; g < ng; g++) {
            __m512bh k0, k1;
            dq_row64(&k0, &k1, kr + (size_t)g * 64 * W, FP8, tb);
            for (int r = 0; r < R; r++) {
                const uint32_t *qr = q + r * DQ_QS2 + g * 32;
                a[r] = _mm512_dpbf16_ps(a[r], k0, (__m512bh)_mm512_loadu_si512(qr));
                b[r] = _mm512_dpbf16_ps(b[r], k1, (__m512bh)_mm512_loadu_si512(qr + 16));
            }
        }
        for (int r = 0; r < R; r++)
            _mm512_store_ps(acc + (r * SD_BLK + t) * 16,
                            _mm512_mul_ps(_mm512_add_ps(a[r], b[r]), sc));
    }
    if (nb < SD_BLK) /* the reduction reads all 16 partials of a row */
        for (int r = 0; r < R; r++)
            memset(acc + ((size_t)r * SD_BLK + nb) * 16, 0, (size_t)(SD_BLK - nb) * 64);
}

/* O rows [R] += P V for keys [t0, t0 + nb), G vectors of 16 dims a pass;
 * pp: the rows' probability pairs ([8] per row) */
static inline __attribute__((always_inline)) void dq_pv_block(attn__cpu_job *j, const uint32_t *pp,
                                                              const char *vc, int64_t sb, int t0,
                                                              int nb, const int R, const bool FP8,
                                                              const sd_tab *tb)
{
    static const uint16_t ilo_tab[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                         37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                         11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const int G = R <= 4 ? 4 : 2, W = FP8 ? 1 : 2;
    const __m512i ilo = _mm512_loadu_si512(ilo_tab);
    const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    int npair = (nb + 1) / 2;
    for (int d0 = 0; d0 < j->Dv; d0 += 16 * G) {
        __m512 o[8][4];
        for (int r = 0; r < R; r++)
            for (int i = 0; i < G; i++)
                o[r][i] = _mm512_loadu_ps(j->o + (size_t)r * j->o_stride + d0 + 16 * i);
        for (int tp = 0; tp < npair; tp++) {
            const char *va = vc + (t0 + 2 * tp) * sb + (size_t)d0 * W;
            bool two = 2 * tp + 1 < nb;
            __m512bh w[4];
            if (G == 4) {
                __m512bh a0, a1, b0, b1;
                dq_row64(&a0, &a1, va, FP8, tb);
                if (two) {
                    dq_row64(&b0, &b1, va + sb, FP8, tb);
                } else {
                    b0 = b1 = (__m512bh)_mm512_setzero_si512();
                }
                w[0] = (__m512bh)_mm512_permutex2var_epi16((__m512i)a0, ilo, (__m512i)b0);
                w[1] = (__m512bh)_mm512_permutex2var_epi16((__m512i)a0, ihi, (__m512i)b0);
                w[2] = (__m512bh)_mm512_permutex2var_epi16((__m512i)a1, ilo, (__m512i)b1);
                w[3] = (__m512bh)_mm512_permutex2var_epi16((__m512i)a1, ihi, (__m512i)b1);
            } else { /* bf16 only: 32 dims */
                __m512i a = _mm512_loadu_si512(va);
                __m512i b = two ? _mm512_loadu_si512(va + sb) : _mm512_setzero_si512();
                w[0] = (__m512bh)_mm512_permutex2var_epi16(a, ilo, b);
                w[1] = (__m512bh)_mm512_permutex2var_epi16(a, ihi, b);
            }
            for (int r = 0; r < R; r++) {
                __m512bh p = (__m512bh)_mm512_set1_epi32((int)pp[r * 8 + tp]);
                for (int i = 0; i < G; i++)
                    o[r][i] = _mm512_dpbf16_ps(o[r][i], w[i], p);
            }
        }
        for (int r = 0; r < R; r++)
            for (int i = 0; i < G; i++)
                _mm512_storeu_ps(j->o + (size_t)r * j->o_stride + d0 + 16 * i, o[r][i]);
    }
}

/* probabilities of a block (fp32 [8 rows][16]) -> bf16 pairs [8 rows][8] */
static inline __attribute__((always_inline)) void dq_pairs(uint32_t *pp, const float *p,
                                                           const int R)
{
    for (int r = 0; r < R; r++)
        _mm256_store_si256((__m256i *)(pp + r * 8),
                           (__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(p + r * SD_BLK)));
}

/* The kernel of R rows over bf16 or fp8 rows (the FMA kernel's walk) */
static inline __attribute__((always_inline)) void dq_rows(attn__cpu_job *j, const char *k,
                                                          const char *v, int64_t sb, int n,
                                                          int key0, bool masked, const int R,
                                                          const bool FP8)
{
    const sd_tab tb = sd_tables(j, FP8 ? SD_VBMI : SD_PAIR);
    float *pb = (float *)((char *)j->scratch + SD_P);
    uint32_t *pp = (uint32_t *)((char *)j->scratch + DQ_PP);
    int nblk = (n + SD_BLK - 1) / SD_BLK;
    bool live = false;
    for (int b = -1; b < nblk; b++) {
        bool next = false;
        if (b + 1 < nblk)
            dq_qk_block(j, k, v, sb, (b + 1) * SD_BLK, sd_nb(n, b + 1), n, R, FP8, &tb);
        if (live) dq_pv_block(j, pp + (b & 1) * 64, v, sb, b * SD_BLK, sd_nb(n, b), R, FP8, &tb);
        if (b + 1 < nblk) {
            float *pn = pb + ((b + 1) & 1) * 8 * SD_BLK;
            next = sd_softmax(j, pn, sd_nb(n, b + 1), key0 + (b + 1) * SD_BLK, masked, 1.0f, false);
            if (next) dq_pairs(pp + ((b + 1) & 1) * 64, pn, R);
        }
        live = next;
    }
}

/* X(kind, rows): every dot-product kernel, one function each (fp8: R <= 4,
 * four tables + the rows' vectors fill the registers beyond) */
enum { DQ_K_B16, DQ_K_FP8, DQ_KINDS };
#define DQ_FP8_b16 false
#define DQ_FP8_fp8 true
#define DQ_K_b16   DQ_K_B16
#define DQ_K_fp8   DQ_K_FP8
/* clang-format off */
#define DQ_KERNELS(X)                                                                              \
    X(b16, 1) X(b16, 2) X(b16, 3) X(b16, 4) X(b16, 5) X(b16, 6) X(b16, 7) X(b16, 8)               \
    X(fp8, 1) X(fp8, 2) X(fp8, 3) X(fp8, 4)
/* clang-format on */

#define DQ_DEFINE(kind, R)                                                                         \
    static __attribute__((noinline)) void sd_dp_##kind##_r##R(                                     \
        attn__cpu_job *j, const char *k, const char *v, int64_t sb, int n, int key0, bool masked)  \
    {                                                                                              \
        dq_rows(j, k, v, sb, n, key0, masked, R, DQ_FP8_##kind);                                   \
    }
DQ_KERNELS(DQ_DEFINE)
#undef DQ_DEFINE

#define DQ_ENTRY(kind, R) [DQ_K_##kind][R - 1] = sd_dp_##kind##_r##R,
static sd_kernel *const dq_kern[DQ_KINDS][ATTN_CPU_SD_ROWS] = {DQ_KERNELS(DQ_ENTRY)};
#undef DQ_ENTRY

/* the job's dot-product kernel, or NULL for the FMA path */
static sd_kernel *dq_kernel(const attn__cpu_job *j)
{
    if (j->prec != ATTN_CPU_PREC_BF16 || j->D % 64 || j->Dv % 64) return NULL;
    if (j->kv_elem == ATTN_ELEM_BF16) return dq_kern[DQ_K_B16][j->R - 1];
    const uint8_t *hi, *lo;
    if (!attn__cpu_fp8_bf16_tables(j->kv_elem == ATTN_ELEM_FP8_E4M3, &hi, &lo)) return NULL;
    return dq_kern[DQ_K_FP8][j->R - 1];
}

/* staged positions 0..31 and 32..63 of 64 dims as indexes into them
 * (sd_staged_dim) */
static const uint16_t dq_stage[2][32] = {
    {0,  1,  2,  3,  4,  5,  6,  7,  16, 17, 18, 19, 20, 21, 22, 23,
     32, 33, 34, 35, 36, 37, 38, 39, 48, 49, 50, 51, 52, 53, 54, 55},
    {8,  9,  10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31,
     40, 41, 42, 43, 44, 45, 46, 47, 56, 57, 58, 59, 60, 61, 62, 63}};

static void dq_prep(attn__cpu_job *j, const void *const *qrows)
{
    sd_kernel *fn = dq_kernel(j);
    if (!fn) {
        attn__sd_prep(j, qrows);
        return;
    }
    bool fp8 = j->kv_elem != ATTN_ELEM_BF16;
    sd_begin(j, fp8 ? SD_VBMI : SD_NAT, SD_DOTS, fn);
    /* the bf16 queries as they are (fp8: in staged order, DQ_STAGE); the
     * scale is applied to the scores */
    uint16_t *q = j->qbuf;
    const __m512i i0 = _mm512_loadu_si512(dq_stage[0]), i1 = _mm512_loadu_si512(dq_stage[1]);
    for (int r = 0; r < j->R; r++) {
        const uint16_t *src = qrows[r];
        uint16_t *dst = q + (size_t)r * SD_QS;
        if (!fp8) {
            memcpy(dst, src, sizeof(uint16_t) * (size_t)j->D);
            continue;
        }
        for (int d = 0; d < j->D; d += 64) {
            __m512i a = _mm512_loadu_si512(src + d), b = _mm512_loadu_si512(src + d + 32);
            _mm512_storeu_si512(dst + d, _mm512_permutex2var_epi16(a, i0, b));
            _mm512_storeu_si512(dst + d + 32, _mm512_permutex2var_epi16(a, i1, b));
        }
    }
}

/* row sums, and fp8 O rows back in dim order; the FMA finish otherwise */
static void dq_finish(attn__cpu_job *j)
{
    const int *ms = (const int *)((const char *)j->scratch + SD_MODE);
    if (ms[1] != SD_DOTS) {
        attn__sd_finish(j);
        return;
    }
    const float *lv = (const float *)((const char *)j->scratch + SD_L);
    for (int r = 0; r < j->R; r++)
        j->l[r] = _mm512_reduce_add_ps(_mm512_load_ps(lv + r * 16));
    if (ms[0] != SD_VBMI) return;
    /* staged position s of 64 dims holds dim sd_staged_dim(s): dims 16L..16L+7
     * are lanes 0..7 of vector L / 2 (L even) or 8..15 (L odd), 16L+8..16L+15
     * the same lanes of vector 2 + L / 2 */
    static const int32_t lo_tab[16] = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
    const __m512i ilo = _mm512_loadu_si512(lo_tab);
    const __m512i ihi = _mm512_add_epi32(ilo, _mm512_set1_epi32(8));
    for (int r = 0; r < j->R; r++) {
        float *o = j->o + (size_t)r * j->o_stride;
        for (int d = 0; d < j->Dv; d += 64) {
            __m512 v0 = _mm512_loadu_ps(o + d), v1 = _mm512_loadu_ps(o + d + 16);
            __m512 v2 = _mm512_loadu_ps(o + d + 32), v3 = _mm512_loadu_ps(o + d + 48);
            _mm512_storeu_ps(o + d, _mm512_permutex2var_ps(v0, ilo, v2));
            _mm512_storeu_ps(o + d + 16, _mm512_permutex2var_ps(v0, ihi, v2));
            _mm512_storeu_ps(o + d + 32, _mm512_permutex2var_ps(v1, ilo, v3));
            _mm512_storeu_ps(o + d + 48, _mm512_permutex2var_ps(v1, ihi, v3));
        }
    }
}

static bool sd_bf16_usable(void)
{
    return sd_usable() && attn_cpu_has(ATTN_CPU_AVX512_BF16);
}

const attn__cpu_isa attn__cpu_isa_stream_decode_bf16 = {
    .name = "stream-decode-bf16",
    .usable = sd_bf16_usable,
    .prep_q = dq_prep,
    .chunk = attn__sd_chunk,
    .finish = dq_finish,
    .accepts = sd_accepts,
};
