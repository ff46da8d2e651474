/* CPU_ATTN streaming decode kernel (used by every AVX-512 variant for jobs
 * of at most 8 query rows over a bf16 or fp8 cache).
 *
 * Decode is a memory stream: each K and V row is read once per KV head and
 * used by a handful of query rows. The tile paths work a 64-key chunk in
 * phases (all K tile loads, softmax, all V tile loads), so no row is in
 * flight while a phase computes and memory and compute take turns. This
 * kernel walks the keys in blocks of 16 straight from the cache rows, with
 * the rows SD_PFB bytes of K ahead prefetched as each key is read: reads
 * are spread evenly through the work, so memory keeps streaming while the
 * math runs. Blocks are software-pipelined (block b + 1's scores before
 * block b's PV). The measurements behind these choices:
 * docs/perf/kernel-notes.md.
 *
 * Two ways to do the math:
 * - fp32 FMA (avx512, avx512-bf16, and jobs the tile path does not take):
 *   each row widened to fp32 in registers and used for every query row at
 *   once (VDPBF16PS retires at a quarter of the FMA rate on these cores;
 *   products of bf16/fp8 inputs are exact in fp32);
 *     QK: per key, R dot products -> [row][key] partials; 16 keys reduced
 *         at once by a transpose-add tree;
 *     PV: the O rows of a group of dims stay in registers over the 16 keys.
 *   bf16 rows are split into even and odd dims (shift / mask of each 32-bit
 *   pair), so queries and O live in that order ([32-dim group][even 16,
 *   odd 16]) and O is put back in sd_finish. e4m3 rows are read as the fp16
 *   of value * 2^-8 (exact, subnormals included); the 2^8 goes into the
 *   query scale and the probabilities.
 * - tile products (amx-bf16, bf16 queries, Dv <= 128): see "tile-unit
 *   path" below; faster than FMA there, more so on fp8.
 * Softmax is online in both; the anchor moves only when a score passes it
 * by more than SD_TAU, so O is rarely rescaled (probabilities stay below
 * e^SD_TAU), and the row sums stay vectors until the job ends. */
/* Template of the two stream decode variants, included with SD_AMX set:
 * cpu_attn_decode_avx512.c (SD_AMX 0: the FMA path, no BF16 or tile code;
 * it also runs the amx-bf16 variant's FMA chunks) and cpu_attn_decode_amx.c
 * (SD_AMX 1: the tile path, AVX512_BF16). */
#ifndef ATTN_CPU_ATTN_DECODE_AVX512_H
#define ATTN_CPU_ATTN_DECODE_AVX512_H

#ifndef SD_AMX
#error "define SD_AMX (0 or 1) before including this file"
#endif

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/cpu/cpu_simd_avx512.h"
#include "util/amx.h"

#define SD_BLK 16
#define SD_TAU 8.0f
#define SD_QS  256 /* query row stride in qbuf (floats): fixed, so addresses fold */
/* Prefetch distance in bytes of K and V rows, every line into L1: the work
 * between two keys' loads outlasts the scheduler window (figures: kernel-notes.md). */
#ifndef SD_PFB
#define SD_PFB 2560
#endif
#define SD_ACC  0                              /* [8 rows][16 keys][16] f32 partials */
#define SD_P    (SD_ACC + 8 * SD_BLK * 16 * 4) /* [2 blocks][8 rows][16 keys] probabilities */
#define SD_L    (SD_P + 2 * 8 * SD_BLK * 4)    /* [8 rows][16] row sums */
#define SD_MODE (SD_L + 8 * 16 * 4)        /* the job's sd mode, SD_FMA / SD_TILES, parked (int) */
#define SD_AL   (SD_MODE + 64)             /* AMX: [8] pending O rescale factors, then a flag */
#define SD_PT   (SD_AL + 64)               /* AMX: [2 blocks][16 rows][16] P pairs */
#define SD_OT   (SD_PT + 2 * 1024)         /* AMX: [4 dim groups][16 rows][16] f32 O */
#define SD_VS   (SD_OT + 4 * 1024)         /* AMX: [2 slots][16 keys][256 B] staged V rows */
#define SD_ST   (SD_VS + 2 * SD_BLK * 256) /* AMX: the S^T tile, [16 keys][16] f32 */
#define SD_XS   (SD_ST + 1024)             /* AMX: [8 rows][16 keys] scaled scores */
#define SD_KS   (SD_XS + 8 * SD_BLK * 4)   /* AMX: [2 slots][16 keys][512 B] staged K rows */
#define SD_END  (SD_KS + 2 * SD_BLK * 512)
#define SD_QT   (8 * SD_QS * 4) /* AMX: Q^T tiles in qbuf, [D / 32] x 1 KiB */
_Static_assert(SD_QT + 8 * 1024 <= ATTN_CPU_SD_QBUF && ATTN_CPU_SD_QBUF <= ATTN_CPU_QBUF,
               "stream decode Q tiles too large");
_Static_assert(SD_END <= ATTN_CPU_SD_SCRATCH && ATTN_CPU_SD_SCRATCH <= ATTN_CPU_VSCRATCH,
               "stream decode scratch too small");
_Static_assert(8 * SD_QS * 4 <= ATTN_CPU_QBUF, "stream decode queries too large");

static bool sd_accepts(const attn__cpu_job *j)
{
    if (j->R > ATTN_CPU_SD_ROWS || j->D % 16 || j->Dv % 16 || j->D > SD_QS ||
        j->Dv > ATTN_CPU_MAX_HEAD)
        return false;
    return j->kv_elem == ATTN_ELEM_BF16 || j->kv_elem == ATTN_ELEM_FP8_E4M3 ||
           j->kv_elem == ATTN_ELEM_FP8_E5M2;
}

/* How rows become fp32 vectors, and the dim order that leaves */
enum {
    SD_NAT = 0,  /* 16 elements per vector in dim order */
    SD_PAIR = 1, /* bf16: a 32-dim group -> even dims, odd dims */
    SD_VBMI = 2, /* fp8: a 64-dim group looked up as bf16 bytes and unpacked:
                  * vector v, lane 4L + i <- dim 16L + 4v + i */
};

static inline int sd_mode(const attn__cpu_job *j)
{
    if (j->kv_elem == ATTN_ELEM_BF16) return j->D % 32 == 0 && j->Dv % 32 == 0 ? SD_PAIR : SD_NAT;
    const uint8_t *hi, *lo;
    if (j->R <= 4 && j->D % 64 == 0 && j->Dv % 64 == 0 &&
        attn__cpu_fp8_bf16_tables(j->kv_elem == ATTN_ELEM_FP8_E4M3, &hi, &lo))
        return SD_VBMI;
    return SD_NAT;
}

/* how the math runs: fp32 FMA with O rows in j->o, or tile products (QK and
 * PV) with O in tiles 0..3 */
enum { SD_FMA = 0, SD_TILES = 1 };

/* position of dim d in a row laid out for mode */
static inline int sd_pos(int mode, int d)
{
    if (mode == SD_PAIR) return (d & ~31) + (d & 1) * 16 + (d & 31) / 2;
    if (mode == SD_VBMI) {
        int L = (d & 63) / 16, v = (d & 15) / 4, i = d & 3;
        return (d & ~63) + 16 * v + 4 * L + i;
    }
    return d;
}

static inline float sd_vscale(const attn__cpu_job *j, int mode)
{
    return j->kv_elem == ATTN_ELEM_FP8_E4M3 && mode == SD_NAT ? 256.0f : 1.0f;
}

/* fp8 -> bf16 byte tables in registers (SD_VBMI) */
typedef struct {
    __m512i h0, h1, l0, l1;
} sd_tab;

static inline sd_tab sd_tables(const attn__cpu_job *j)
{
    sd_tab t;
    const uint8_t *hi, *lo;
    attn__cpu_fp8_bf16_tables(j->kv_elem == ATTN_ELEM_FP8_E4M3, &hi, &lo);
    t.h0 = _mm512_loadu_si512(hi);
    t.h1 = _mm512_loadu_si512(hi + 64);
    t.l0 = _mm512_loadu_si512(lo);
    t.l1 = _mm512_loadu_si512(lo + 64);
    return t;
}

/* vpermi2b by hand: the kernel file is built without -mavx512vbmi, and
 * SD_VBMI is chosen only where the CPU has it */
static inline __attribute__((always_inline)) __m512i sd_lookup(__m512i x, __m512i t0, __m512i t1)
{
    __asm__("vpermi2b %2, %1, %0" : "+v"(x) : "v"(t0), "v"(t1));
    return x;
}

/* 16 cache elements as fp32 in dim order (e4m3 scaled by 2^-8) */
static inline __attribute__((always_inline)) __m512 sd_load16(const char *src, attn_elem e)
{
    if (e == ATTN_ELEM_BF16)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)src)), 16));
    __m128i b = _mm_loadu_si128((const __m128i *)src);
    if (e == ATTN_ELEM_FP8_E5M2) /* e5m2 is the top byte of an fp16 */
        return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
    /* sign-extended byte << 7 = s s eeee mmm 0000000; clearing bit 14 leaves
     * the fp16 s 0eeee mmm0000000 */
    return _mm512_cvtph_ps(_mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7),
                                            _mm256_set1_epi16((short)0xbfff)));
}

/* NV vectors of a row in the mode's order */
static inline __attribute__((always_inline)) void
sd_row(__m512 *x, const char *src, const int NV, const int MODE, attn_elem e, const sd_tab *tb)
{
    if (MODE == SD_VBMI) {
        const __m512i sign = _mm512_set1_epi32((int)0x80808080u), z = _mm512_setzero_si512();
        for (int i = 0; i < NV; i += 4) {
            __m512i b = _mm512_loadu_si512(src + (size_t)i * 16);
            /* high byte | sign, low byte; magnitudes index the tables (bit 7 ignored) */
            __m512i h = _mm512_ternarylogic_epi32(sd_lookup(b, tb->h0, tb->h1), b, sign, 0xf8);
            __m512i l = sd_lookup(b, tb->l0, tb->l1);
            __m512i w0 = _mm512_unpacklo_epi8(l, h), w1 = _mm512_unpackhi_epi8(l, h);
            x[i] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, w0));
            x[i + 1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, w0));
            x[i + 2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, w1));
            x[i + 3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, w1));
        }
    } else if (MODE == SD_PAIR) {
        const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
        for (int i = 0; i < NV; i += 2) {
            __m512i w = _mm512_loadu_si512(src + (size_t)i * 32);
            x[i] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
            x[i + 1] = _mm512_castsi512_ps(_mm512_and_si512(w, hi));
        }
    } else {
        size_t esz = e == ATTN_ELEM_BF16 ? 2 : 1;
        for (int i = 0; i < NV; i++)
            x[i] = sd_load16(src + (size_t)i * 16 * esz, e);
    }
}

/* K and V row t of this chunk (n rows) or, past its end, of the next */
static inline __attribute__((always_inline)) void sd_prefetch(const attn__cpu_job *j,
                                                              const char *kc, const char *vc,
                                                              int64_t sb, int t, int n, int kbytes,
                                                              int vbytes)
{
    const char *k, *v;
    if (t < n) {
        k = kc + t * sb;
        v = vc + t * sb;
    } else if (t - n < j->pf_n) {
        k = (const char *)j->pf_k + (t - n) * sb;
        v = (const char *)j->pf_v + (t - n) * sb;
    } else {
        return;
    }
    for (int o = 0; o < kbytes; o += 64)
        _mm_prefetch(k + o, _MM_HINT_T0);
    for (int o = 0; o < vbytes; o += 64)
        _mm_prefetch(v + o, _MM_HINT_T0);
}

/* the job's row mode and kind of math, and zero row sums */
static void sd_begin(attn__cpu_job *j, int mode, int math)
{
    int *ms = (int *)((char *)j->scratch + SD_MODE);
    ms[0] = mode;
    ms[1] = math;
    ms[2] = 0;
    float *l = (float *)((char *)j->scratch + SD_L);
    memset(l, 0, (size_t)j->R * 16 * sizeof(float));
}

static void sd_prep(attn__cpu_job *j, const void *const *qrows)
{
    float *q = j->qbuf;
    int mode = sd_mode(j);
    sd_begin(j, mode, SD_FMA);
    float sc = j->qk_scale * sd_vscale(j, mode);
    float row[SD_QS];
    for (int r = 0; r < j->R; r++) {
        float *qr = q + (size_t)r * SD_QS;
        row_to_f32(row, qrows[r], j->D, j->q_elem);
        for (int d = 0; d < j->D; d++)
            qr[sd_pos(mode, d)] = row[d] * sc;
    }
}

/* acc[r][t] (+)= K row t (NV vectors from dim d0) . Q row r */
static inline __attribute__((always_inline)) void sd_qk_part(const attn__cpu_job *j, const char *kc,
                                                             const char *vc, int64_t sb, int t0,
                                                             int nb, int n, int d0, const int R,
                                                             const int NV, const int MODE, bool add,
                                                             attn_elem e, const sd_tab *tb)
{
    float *acc = (float *)((char *)j->scratch + SD_ACC);
    const float *q = (const float *)j->qbuf + d0;
    size_t esz = e == ATTN_ELEM_BF16 ? 2 : 1;
    int kbytes = j->D * (int)esz, vbytes = j->Dv * (int)esz;
    int ahead = SD_PFB / kbytes > 2 ? SD_PFB / kbytes : 2;
    for (int t = 0; t < nb; t++) {
        if (d0 == 0) sd_prefetch(j, kc, vc, sb, t0 + t + ahead, n, kbytes, vbytes);
        __m512 kv[8];
        sd_row(kv, kc + (t0 + t) * sb + (size_t)d0 * esz, NV, MODE, e, tb);
        /* one accumulator chain per row, two when there are few rows */
        __m512 a[8], b[8];
        for (int r = 0; r < R; r++) {
            a[r] = _mm512_mul_ps(kv[0], _mm512_loadu_ps(q + r * SD_QS));
            b[r] = _mm512_setzero_ps();
        }
        for (int i = 1; i < NV; i++)
            for (int r = 0; r < R; r++) {
                __m512 qv = _mm512_loadu_ps(q + r * SD_QS + 16 * i);
                if (R <= 2 && (i & 1))
                    b[r] = _mm512_fmadd_ps(kv[i], qv, b[r]);
                else
                    a[r] = _mm512_fmadd_ps(kv[i], qv, a[r]);
            }
        for (int r = 0; r < R; r++) {
            float *dst = acc + (r * SD_BLK + t) * 16;
            __m512 x = R <= 2 ? _mm512_add_ps(a[r], b[r]) : a[r];
            if (add) x = _mm512_add_ps(x, _mm512_load_ps(dst));
            _mm512_store_ps(dst, x);
        }
    }
}

/* O rows [R] dims [d0, d0 + 16 NV) += sum_t p[r][t] V row t */
static inline __attribute__((always_inline)) void
sd_pv_part(attn__cpu_job *j, const float *p, const char *vc, int64_t sb, int t0, int nb, int d0,
           const int R, const int NV, const int MODE, attn_elem e, const sd_tab *tb)
{
    size_t esz = e == ATTN_ELEM_BF16 ? 2 : 1;
    float *ob = j->o + d0;
    __m512 o[8][8];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < NV; i++)
            o[r][i] = _mm512_loadu_ps(ob + (size_t)r * j->o_stride + 16 * i);
    for (int t = 0; t < nb; t++) {
        __m512 vv[8];
        sd_row(vv, vc + (t0 + t) * sb + (size_t)d0 * esz, NV, MODE, e, tb);
        for (int r = 0; r < R; r++) {
            __m512 pr = _mm512_set1_ps(p[r * SD_BLK + t]);
            for (int i = 0; i < NV; i++)
                o[r][i] = _mm512_fmadd_ps(vv[i], pr, o[r][i]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int i = 0; i < NV; i++)
            _mm512_storeu_ps(ob + (size_t)r * j->o_stride + 16 * i, o[r][i]);
}

/* vector counts a part is specialised for (SD_PAIR parts take multiples
 * of 2, SD_VBMI parts multiples of 4) */
#define SD_NV_OK(MODE, N) ((MODE) == SD_NAT || (N) % ((MODE) == SD_PAIR ? 2 : 4) == 0)
#define SD_NV_CASES(X)    X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)

/* scores of the block -> probabilities in SD_P (times the V scale); false
 * when no row sees any key of the block */
static bool sd_softmax(attn__cpu_job *j, float *p, int nb, int key0, bool masked, float vscale,
                       bool amx)
{
    const float *acc = (const float *)((char *)j->scratch + SD_ACC);
    float *lv = (float *)((char *)j->scratch + SD_L);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512i key =
        _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(key0));
    const __m512 vs = _mm512_set1_ps(vscale);
    __mmask16 inb = (__mmask16)((1u << nb) - 1u);
    bool any = false;
    for (int r = 0; r < j->R; r++) {
        __mmask16 vis = inb;
        if (masked)
            vis &= _mm512_cmpge_epi32_mask(key, _mm512_set1_epi32(j->lo[r])) &
                   _mm512_cmple_epi32_mask(key, _mm512_set1_epi32(j->hi[r]));
        if (!vis) {
            _mm512_store_ps(p + r * SD_BLK, _mm512_setzero_ps());
            continue;
        }
        any = true;
        __m512 x =
            amx ? _mm512_load_ps((const float *)((const char *)j->scratch + SD_XS) + r * SD_BLK)
                : reduce16(acc + r * SD_BLK * 16);
        if (j->softcap > 0.0f) x = softcap16(x, j->softcap);
        if (j->slope)
            x = _mm512_fmadd_ps(
                _mm512_set1_ps(j->slope[r]),
                _mm512_cvtepi32_ps(_mm512_sub_epi32(key, _mm512_set1_epi32(j->pos[r]))), x);
        x = _mm512_mask_blend_ps(vis, ninf, x);
        float m = j->m[r];
        /* m = -inf (first keys of the row): every visible score passes */
        if (_mm512_cmp_ps_mask(x, _mm512_set1_ps(m + SD_TAU), _CMP_GT_OQ)) {
            float bm = _mm512_reduce_max_ps(x);
            if (m > -INFINITY) {
                float f = expf(m - bm);
                __m512 a = _mm512_set1_ps(f);
                if (amx) { /* O is in tiles: scaled before the next tile product */
                    float *al = (float *)((char *)j->scratch + SD_AL);
                    al[r] *= f;
                    al[8] = 1.0f;
                } else {
                    float *o = j->o + (size_t)r * j->o_stride;
                    for (int d = 0; d < j->Dv; d += 16)
                        _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), a));
                }
                _mm512_store_ps(lv + r * 16, _mm512_mul_ps(_mm512_load_ps(lv + r * 16), a));
            }
            m = bm;
            j->m[r] = m;
        }
        __m512 pr = _mm512_maskz_mov_ps(vis, exp512(_mm512_sub_ps(x, _mm512_set1_ps(m))));
        _mm512_store_ps(lv + r * 16, _mm512_add_ps(_mm512_load_ps(lv + r * 16), pr));
        _mm512_store_ps(p + r * SD_BLK, _mm512_mul_ps(pr, vs));
    }
    return any;
}

/* scores of keys [t0, t0 + nb) into SD_ACC */
static inline __attribute__((always_inline)) void
sd_qk_block(attn__cpu_job *j, const char *kc, const char *vc, int64_t sb, int t0, int nb, int n,
            const int R, const int MODE, attn_elem e, const sd_tab *tb)
{
    /* passes of at most 8 vectors (128 dims) */
    int nv = j->D / 16;
    for (int i0 = 0; i0 < nv; i0 += 8) {
        int left = nv - i0 < 8 ? nv - i0 : 8;
        switch (left) {
#define SD_QK_CASE(N)                                                                              \
    case N:                                                                                        \
        if (SD_NV_OK(MODE, N))                                                                     \
            sd_qk_part(j, kc, vc, sb, t0, nb, n, i0 * 16, R, N, MODE, i0 > 0, e, tb);              \
        break;
            SD_NV_CASES(SD_QK_CASE)
#undef SD_QK_CASE
        }
    }
    if (nb < SD_BLK) /* the reduction reads all 16 partials of a row */
        for (int r = 0; r < R; r++)
            memset((char *)j->scratch + SD_ACC + ((size_t)r * SD_BLK + nb) * 64, 0,
                   (size_t)(SD_BLK - nb) * 64);
}

/* O += P V for keys [t0, t0 + nb), output dims in groups of G vectors */
static inline __attribute__((always_inline)) void
sd_pv_block(attn__cpu_job *j, const float *p, const char *vc, int64_t sb, int t0, int nb,
            const int R, const int G, const int MODE, attn_elem e, const sd_tab *tb)
{
    int nvv = j->Dv / 16;
    for (int i0 = 0; i0 < nvv; i0 += G) {
        int left = nvv - i0 < G ? nvv - i0 : G;
        switch (left) {
#define SD_PV_CASE(N)                                                                              \
    case N:                                                                                        \
        if (N <= G && SD_NV_OK(MODE, N))                                                           \
            sd_pv_part(j, p, vc, sb, t0, nb, i0 * 16, R, N <= G ? N : 1, MODE, e, tb);             \
        break;
            SD_NV_CASES(SD_PV_CASE)
#undef SD_PV_CASE
        }
    }
}

/* Rows R with G output vectors per PV group (R * G <= 16 accumulators).
 * Blocks are software-pipelined: block b + 1's scores are computed before
 * block b's PV, so the reduction and softmax between a block's QK and its
 * PV (a latency chain) overlap with independent work. */
static inline __attribute__((always_inline)) void sd_rows(attn__cpu_job *j, const char *k,
                                                          const char *v, int64_t sb, int n,
                                                          int key0, bool masked, const int R,
                                                          const int G, const int MODE, attn_elem e)
{
    sd_tab tb;
    if (MODE == SD_VBMI) tb = sd_tables(j);
    float vscale = e == ATTN_ELEM_FP8_E4M3 && MODE == SD_NAT ? 256.0f : 1.0f;
    float *pb = (float *)((char *)j->scratch + SD_P);
    int nblk = (n + SD_BLK - 1) / SD_BLK;
#define SD_NB(b) (n - (b)*SD_BLK < SD_BLK ? n - (b)*SD_BLK : SD_BLK)
    sd_qk_block(j, k, v, sb, 0, SD_NB(0), n, R, MODE, e, &tb);
    bool live = sd_softmax(j, pb, SD_NB(0), key0, masked, vscale, false);
    for (int b = 0; b < nblk; b++) {
        float *p = pb + (b & 1) * 8 * SD_BLK;
        bool next = false;
        if (b + 1 < nblk)
            sd_qk_block(j, k, v, sb, (b + 1) * SD_BLK, SD_NB(b + 1), n, R, MODE, e, &tb);
        if (live) sd_pv_block(j, p, v, sb, b * SD_BLK, SD_NB(b), R, G, MODE, e, &tb);
        if (b + 1 < nblk)
            next = sd_softmax(j, pb + ((b + 1) & 1) * 8 * SD_BLK, SD_NB(b + 1),
                              key0 + (b + 1) * SD_BLK, masked, vscale, false);
        live = next;
    }
}

#if SD_AMX
/* ---- tile-unit path (the amx-bf16 variant) ------------------------------------
 * QK and PV as tile products, softmax and staging on AVX-512:
 *   S^T [16 keys][R] = K . Q^T: A = 16 K rows x 32 dims, B = the queries as
 *     dim pairs (packed by sd_prep_amx); the tile is transposed into rows of
 *     scores for sd_softmax (no reduction tree, no FMAs);
 *   O += P . V: B = 16 V rows as they are (32 dims = 16 dim pairs); A row r
 *     holds (p_rt, 0) pairs and row R + r (0, p_rt), so C row r collects the
 *     even dims and row R + r the odd dims of output row r. O stays in
 *     tiles 0..3 for the whole job (parked in SD_OT while the chunks of
 *     other jobs run in between: sd_park / sd_resume); a moved softmax
 *     anchor rescales it before the next product.
 * fp8 rows are widened to exact bf16 through the byte tables into staging
 * slots ([w0 | w1] per 64 dims, see sd_staged_dim), bf16 rows are read in
 * place when a block is whole. */

/* O tiles <-> SD_OT (tile g at SD_OT + g KiB, row stride 64) */
static inline __attribute__((always_inline)) void sd_ot_store(attn__cpu_job *j, int ng)
{
    attn__amx_store_acc((char *)j->scratch + SD_OT, 1024, 64, ng);
}

static inline __attribute__((always_inline)) void sd_ot_load(attn__cpu_job *j, int ng)
{
    attn__amx_load_acc((const char *)j->scratch + SD_OT, 1024, 64, ng);
}

/* a tile source: 16 rows, st bytes apart */
typedef struct {
    const char *p;
    long st;
} sd_src;

/* fp8 row of d dims -> bf16 at dst ([w0 | w1] per 64 dims), with byte
 * unpacks (word shifts and selects measured slower: kernel-notes.md). */
static inline __attribute__((always_inline)) void sd_widen_row(char *dst, const char *src, int d,
                                                               const sd_tab *tb)
{
    const __m512i sign = _mm512_set1_epi32((int)0x80808080u);
    for (int i = 0; i < d; i += 64) {
        __m512i x = _mm512_loadu_si512(src + i);
        __m512i h = _mm512_ternarylogic_epi32(sd_lookup(x, tb->h0, tb->h1), x, sign, 0xf8);
        __m512i l = sd_lookup(x, tb->l0, tb->l1);
        _mm512_store_si512(dst + 2 * i, _mm512_unpacklo_epi8(l, h));
        _mm512_store_si512(dst + 2 * i + 64, _mm512_unpackhi_epi8(l, h));
    }
}

/* rows [t0, t0 + nb) (d dims each, sb bytes apart) as a tile source: in
 * place (bf16, whole block) or staged into slot (row stride rs) with the
 * rows past nb zeroed; with pf, the K and V rows SD_PFB bytes of K ahead
 * are prefetched as each is staged */
static inline __attribute__((always_inline)) sd_src
sd_stage(attn__cpu_job *j, const char *kc, const char *vc, const char *src, int64_t sb, int t0,
         int nb, int n, int d, char *slot, int rs, bool pf, const int MODE, const sd_tab *tb)
{
    size_t esz = MODE == SD_VBMI ? 1 : 2;
    int kbytes = j->D * (int)esz, vbytes = j->Dv * (int)esz;
    int ahead = SD_PFB / kbytes > 2 ? SD_PFB / kbytes : 2;
    bool direct = MODE != SD_VBMI && nb == SD_BLK;
    for (int t = 0; t < nb; t++) {
        if (pf) sd_prefetch(j, kc, vc, sb, t0 + t + ahead, n, kbytes, vbytes);
        const char *r = src + (t0 + t) * sb;
        if (MODE == SD_VBMI)
            sd_widen_row(slot + t * rs, r, d, tb);
        else if (!direct)
            for (int i = 0; i < 2 * d; i += 64)
                _mm512_store_si512(slot + t * rs + i, _mm512_loadu_si512(r + i));
    }
    if (direct) return (sd_src){src + t0 * sb, (long)sb};
    for (int t = nb; t < SD_BLK; t++)
        for (int i = 0; i < 2 * d; i += 64)
            _mm512_store_si512(slot + t * rs + i, _mm512_setzero_si512());
    return (sd_src){slot, rs};
}

/* scores of a block into SD_XS rows (scaled), from K rows ks */
static inline __attribute__((always_inline)) void sd_qk_tiles(attn__cpu_job *j, sd_src ks,
                                                              const int R)
{
    const char *qt = (const char *)j->qbuf + SD_QT;
    TZERO(7);
    for (int k = 0; k < j->D / 32; k++) {
        TLOAD(5, ks.p + k * 64, ks.st);
        TLOAD(6, qt + k * 1024, 64);
        TDP(7, 5, 6);
    }
    float *st = (float *)((char *)j->scratch + SD_ST);
    TSTORE(7, st, 64);
    __m512i x[16];
    for (int i = 0; i < 16; i++)
        x[i] = _mm512_load_si512(st + i * 16);
    transpose16(x);
    float *xs = (float *)((char *)j->scratch + SD_XS);
    const __m512 sc = _mm512_set1_ps(j->qk_scale);
    for (int r = 0; r < R; r++)
        _mm512_store_ps(xs + r * SD_BLK, _mm512_mul_ps(_mm512_castsi512_ps(x[r]), sc));
}

/* O += P V for block b (probabilities p, V rows vs) */
static inline __attribute__((always_inline)) void sd_pv_tiles(attn__cpu_job *j, const float *p,
                                                              sd_src vs, int b, const int R)
{
    int ng = j->Dv / 32;
    float *al = (float *)((char *)j->scratch + SD_AL);
    if (al[8] != 0.0f) {
        sd_ot_store(j, ng);
        float *ot = (float *)((char *)j->scratch + SD_OT);
        for (int r = 0; r < R; r++) {
            __m512 a = _mm512_set1_ps(al[r]);
            for (int g = 0; g < ng; g++) {
                float *o0 = ot + g * 256 + r * 16, *o1 = ot + g * 256 + (R + r) * 16;
                _mm512_store_ps(o0, _mm512_mul_ps(_mm512_load_ps(o0), a));
                _mm512_store_ps(o1, _mm512_mul_ps(_mm512_load_ps(o1), a));
            }
            al[r] = 1.0f;
        }
        al[8] = 0.0f;
        sd_ot_load(j, ng);
    }
    uint32_t *pt = (uint32_t *)((char *)j->scratch + SD_PT) + (b & 1) * 256;
    for (int r = 0; r < R; r++) {
        __m512i w =
            _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(p + r * SD_BLK)));
        _mm512_store_si512(pt + r * 16, w);
        _mm512_store_si512(pt + (R + r) * 16, _mm512_slli_epi32(w, 16));
    }
    TLOAD(4, pt, 64);
    /* one B tile register: 6 and 7 are the QK tiles */
    TLOAD(5, vs.p, vs.st);
    TDP(0, 4, 5);
    if (ng > 1) {
        TLOAD(5, vs.p + 64, vs.st);
        TDP(1, 4, 5);
    }
    if (ng > 2) {
        TLOAD(5, vs.p + 128, vs.st);
        TDP(2, 4, 5);
    }
    if (ng > 3) {
        TLOAD(5, vs.p + 192, vs.st);
        TDP(3, 4, 5);
    }
}

/* The same block pipeline as sd_rows; staging further ahead or issuing PV
 * earlier measured slower (kernel-notes.md). */
static inline __attribute__((always_inline)) void sd_rows_amx(attn__cpu_job *j, const char *k,
                                                              const char *v, int64_t sb, int n,
                                                              int key0, bool masked, const int R,
                                                              const int MODE)
{
    sd_tab tb;
    if (MODE == SD_VBMI) tb = sd_tables(j);
    float *pb = (float *)((char *)j->scratch + SD_P);
    char *kslot = (char *)j->scratch + SD_KS, *vslot = (char *)j->scratch + SD_VS;
    int nblk = (n + SD_BLK - 1) / SD_BLK;
#define SD_STAGE_K(b)                                                                              \
    sd_stage(j, k, v, k, sb, (b)*SD_BLK, SD_NB(b), n, j->D, kslot + ((b)&1) * SD_BLK * 512, 512,   \
             true, MODE, &tb)
#define SD_STAGE_V(b)                                                                              \
    sd_stage(j, k, v, v, sb, (b)*SD_BLK, SD_NB(b), n, j->Dv, vslot + ((b)&1) * SD_BLK * 256, 256,  \
             false, MODE, &tb)
    sd_qk_tiles(j, SD_STAGE_K(0), R);
    bool live = sd_softmax(j, pb, SD_NB(0), key0, masked, 1.0f, true);
    for (int b = 0; b < nblk; b++) {
        bool next = false;
        if (b + 1 < nblk) sd_qk_tiles(j, SD_STAGE_K(b + 1), R);
        if (live) sd_pv_tiles(j, pb + (b & 1) * 8 * SD_BLK, SD_STAGE_V(b), b, R);
        if (b + 1 < nblk)
            next = sd_softmax(j, pb + ((b + 1) & 1) * 8 * SD_BLK, SD_NB(b + 1),
                              key0 + (b + 1) * SD_BLK, masked, 1.0f, true);
        live = next;
    }
#undef SD_STAGE_K
#undef SD_STAGE_V
#undef SD_NB
}
#endif /* SD_AMX */

static inline __attribute__((always_inline)) void sd_elem(attn__cpu_job *j, const char *k,
                                                          const char *v, int64_t sb, int n,
                                                          int key0, bool masked, const int MODE,
                                                          attn_elem e, const bool AMX)
{
#if SD_AMX
    if (AMX) {
        switch (j->R) {
        case 1: sd_rows_amx(j, k, v, sb, n, key0, masked, 1, MODE); break;
        case 2: sd_rows_amx(j, k, v, sb, n, key0, masked, 2, MODE); break;
        case 3: sd_rows_amx(j, k, v, sb, n, key0, masked, 3, MODE); break;
        case 4: sd_rows_amx(j, k, v, sb, n, key0, masked, 4, MODE); break;
        case 5: sd_rows_amx(j, k, v, sb, n, key0, masked, 5, MODE); break;
        case 6: sd_rows_amx(j, k, v, sb, n, key0, masked, 6, MODE); break;
        case 7: sd_rows_amx(j, k, v, sb, n, key0, masked, 7, MODE); break;
        default: sd_rows_amx(j, k, v, sb, n, key0, masked, 8, MODE); break;
        }
        return;
    }
#else
    (void)AMX;
#endif
    switch (j->R) {
    case 1: sd_rows(j, k, v, sb, n, key0, masked, 1, 8, MODE, e); break;
    case 2: sd_rows(j, k, v, sb, n, key0, masked, 2, 8, MODE, e); break;
    case 3: sd_rows(j, k, v, sb, n, key0, masked, 3, 4, MODE, e); break;
    case 4: sd_rows(j, k, v, sb, n, key0, masked, 4, 4, MODE, e); break;
    case 5: sd_rows(j, k, v, sb, n, key0, masked, 5, 2, MODE, e); break;
    case 6: sd_rows(j, k, v, sb, n, key0, masked, 6, 2, MODE, e); break;
    case 7: sd_rows(j, k, v, sb, n, key0, masked, 7, 2, MODE, e); break;
    default: sd_rows(j, k, v, sb, n, key0, masked, 8, 2, MODE, e); break;
    }
}

/* The FMA chunks of both variants: defined by cpu_attn_decode_avx512.c
 * alone, so the amx-bf16 object carries only the tile copies. */
void attn__sd_chunk_fma(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                        int key0, bool masked);

#if SD_AMX
static void sd_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                     int key0, bool masked)
{
    const int *mode = (const int *)((const char *)j->scratch + SD_MODE);
    if (mode[1] != SD_TILES) {
        attn__sd_chunk_fma(j, k, v, stride, n, key0, masked);
        return;
    }
    int64_t sb = stride * (int64_t)attn_elem_size(j->kv_elem);
    if (mode[0] == SD_PAIR) /* SD_PAIR or SD_VBMI (see sd_tile_mode) */
        sd_elem(j, k, v, sb, n, key0, masked, SD_PAIR, ATTN_ELEM_BF16, true);
    else
        sd_elem(j, k, v, sb, n, key0, masked, SD_VBMI, j->kv_elem, true);
}
#else
void attn__sd_chunk_fma(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                        int key0, bool masked)
{
    int64_t sb = stride * (int64_t)attn_elem_size(j->kv_elem);
    const int *mode = (const int *)((const char *)j->scratch + SD_MODE);
    switch (j->kv_elem) {
    case ATTN_ELEM_BF16:
        if (mode[0] == SD_PAIR)
            sd_elem(j, k, v, sb, n, key0, masked, SD_PAIR, ATTN_ELEM_BF16, false);
        else
            sd_elem(j, k, v, sb, n, key0, masked, SD_NAT, ATTN_ELEM_BF16, false);
        break;
    default:
        if (mode[0] == SD_VBMI)
            sd_elem(j, k, v, sb, n, key0, masked, SD_VBMI, j->kv_elem, false);
        else if (j->kv_elem == ATTN_ELEM_FP8_E5M2)
            sd_elem(j, k, v, sb, n, key0, masked, SD_NAT, ATTN_ELEM_FP8_E5M2, false);
        else
            sd_elem(j, k, v, sb, n, key0, masked, SD_NAT, ATTN_ELEM_FP8_E4M3, false);
        break;
    }
}
#endif

/* dim of staged position s of an fp8 V row (64 dims per [w0 | w1], w0 lane
 * L holding dims 16L..16L+7 and w1 lane L dims 16L+8..16L+15) */
static inline int sd_staged_dim(int s)
{
    int r = s & 63, half = r / 32, L = (r & 31) / 8;
    return (s & ~63) + 16 * L + 8 * half + (r & 7);
}

static void sd_finish(attn__cpu_job *j)
{
    const float *lv = (const float *)((const char *)j->scratch + SD_L);
    for (int r = 0; r < j->R; r++)
        j->l[r] = _mm512_reduce_add_ps(_mm512_load_ps(lv + r * 16));
    const int *ms = (const int *)((const char *)j->scratch + SD_MODE);
    int mode = ms[0];
#if SD_AMX
    if (ms[1] == SD_TILES) { /* O tiles (even / odd dims) -> rows in dim order */
        int ng = j->Dv / 32;
        float *al = (float *)((char *)j->scratch + SD_AL);
        if (!ms[2]) sd_ot_store(j, ng);
        attn__amx_release();
        static const int32_t lo_tab[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
        const __m512i ilo = _mm512_loadu_si512(lo_tab);
        const __m512i ihi = _mm512_add_epi32(ilo, _mm512_set1_epi32(8));
        const float *ot = (const float *)((const char *)j->scratch + SD_OT);
        for (int r = 0; r < j->R; r++) {
            float *o = j->o + (size_t)r * j->o_stride;
            /* a rescale still pending (the last blocks saw no key) */
            __m512 a = _mm512_set1_ps(al[8] != 0.0f ? al[r] : 1.0f);
            for (int g = 0; g < ng; g++) {
                __m512 ev = _mm512_mul_ps(_mm512_load_ps(ot + g * 256 + r * 16), a);
                __m512 od = _mm512_mul_ps(_mm512_load_ps(ot + g * 256 + (j->R + r) * 16), a);
                _mm512_storeu_ps(o + g * 32, _mm512_permutex2var_ps(ev, ilo, od));
                _mm512_storeu_ps(o + g * 32 + 16, _mm512_permutex2var_ps(ev, ihi, od));
            }
            if (mode == SD_VBMI) {
                float tmp[128];
                for (int s = 0; s < j->Dv; s++)
                    tmp[sd_staged_dim(s)] = o[s];
                memcpy(o, tmp, sizeof(float) * (size_t)j->Dv);
            }
        }
        return;
    }
#endif
    if (mode == SD_NAT) return;
    float tmp[ATTN_CPU_MAX_HEAD];
    for (int r = 0; r < j->R; r++) {
        float *o = j->o + (size_t)r * j->o_stride;
        for (int d = 0; d < j->Dv; d++)
            tmp[d] = o[sd_pos(mode, d)];
        memcpy(o, tmp, sizeof(float) * (size_t)j->Dv);
    }
}

static bool sd_usable(void)
{
    return attn_cpu_has(ATTN_CPU_AVX512F) && attn_cpu_has(ATTN_CPU_AVX512BW) &&
           attn_cpu_has(ATTN_CPU_AVX512VL) && attn_cpu_has(ATTN_CPU_F16C);
}

#endif
