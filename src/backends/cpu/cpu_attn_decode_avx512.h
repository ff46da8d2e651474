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
 * - fp32 FMA (avx512, and the jobs the tile and dot-product paths do not
 *   take): each row widened to fp32 in registers and used for every query
 *   row at once (products of bf16/fp8 inputs are exact in fp32);
 *     QK: per key, R dot products -> [row][key] partials; 16 keys reduced
 *         at once by a transpose-add tree;
 *     PV: the O rows of a group of dims stay in registers over the 16 keys.
 *   bf16 rows are split into even and odd dims (shift / mask of each 32-bit
 *   pair), so queries and O live in that order ([32-dim group][even 16,
 *   odd 16], then the last 16 dims as they are when the head size is an
 *   odd multiple of 16) and O is put back in the finish. e4m3 rows are
 *   read as the fp16 of value * 2^-8 (exact, subnormals included); the 2^8
 *   goes into the query scale and the probabilities.
 * - tile products (amx-bf16, bf16 queries, Dv <= 128): cpu_attn_decode_amx.c;
 *   faster than FMA there, more so on fp8.
 * - VDPBF16PS dot products (avx512-bf16, bf16 queries, heads a multiple of
 *   64): cpu_attn_decode_dp_avx512bf16.c; on Zen 4 a VDPBF16PS issues at the
 *   FMA's rate with twice its multiply-adds (docs/perf/issue29.md).
 * Softmax is online in both; the anchor moves only when a score passes it
 * by more than SD_TAU, so O is rarely rescaled (probabilities stay below
 * e^SD_TAU), and the row sums stay vectors until the job ends.
 *
 * Specialisations chosen once: the math of a job is compiled for its row
 * kind (how rows become fp32, with the element width) and its number of
 * rows, as separate named functions (sd_fma_pair_r4, sd_amx_vbmi_r2, ...)
 * that the job's prep picks from a table generated from one list per file
 * (SD_FMA_KERNELS, SD_AMX_KERNELS) and parks in the job's scratch; every
 * chunk then makes one indirect call (attn__sd_chunk).
 *
 * This header is the template both files include: the FMA path and what
 * the tile path shares with it. cpu_attn_decode_avx512.c (AVX512F/BW/VL/DQ)
 * defines the FMA kernels, prep, chunk and finish, used by all three
 * AVX-512 variants; cpu_attn_decode_amx.c (+ AVX512_BF16) the tile path. */
#ifndef ATTN_CPU_ATTN_DECODE_AVX512_H
#define ATTN_CPU_ATTN_DECODE_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/cpu/cpu_simd_avx512.h"

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
#define SD_MODE (SD_L + 8 * 16 * 4)            /* ints: row mode, SD_FMA / SD_TILES, O parked; */
#define SD_FN   (SD_MODE + 16)                 /* then the job's kernel (sd_kernel *) */
#define SD_AL   (SD_MODE + 64)                 /* AMX: [8] pending O rescale factors, then a flag */
#define SD_PT   (SD_AL + 64)                   /* AMX: [2 blocks][16 rows][16] P pairs */
#define SD_OT   (SD_PT + 2 * 1024)             /* AMX: [4 dim groups][16 rows][16] f32 O */
#define SD_VS   (SD_OT + 4 * 1024)             /* AMX: [2 slots][16 keys][256 B] staged V rows */
#define SD_ST   (SD_VS + 2 * SD_BLK * 256)     /* AMX: the S^T tile, [16 keys][16] f32 */
#define SD_XS   (SD_ST + 1024)                 /* AMX: [8 rows][16 keys] scaled scores */
#define SD_KS   (SD_XS + 8 * SD_BLK * 4)       /* AMX: [2 slots][16 keys][512 B] staged K rows */
#define SD_END  (SD_KS + 2 * SD_BLK * 512)
#define SD_QT   (8 * SD_QS * 4) /* AMX: Q^T tiles in qbuf, [D / 32] x 1 KiB */
_Static_assert(SD_QT + 8 * 1024 <= ATTN_CPU_SD_QBUF && ATTN_CPU_SD_QBUF <= ATTN_CPU_QBUF,
               "stream decode Q tiles too large");
_Static_assert(SD_END <= ATTN_CPU_SD_SCRATCH && ATTN_CPU_SD_SCRATCH <= ATTN_CPU_VSCRATCH,
               "stream decode scratch too small");
_Static_assert(8 * SD_QS * 4 <= ATTN_CPU_QBUF, "stream decode queries too large");
_Static_assert(SD_FN % 8 == 0 && SD_FN + 8 <= SD_AL, "stream decode kernel slot");

/* A job's chunk of n keys (rows sb bytes apart) for one specialisation */
typedef void sd_kernel(attn__cpu_job *j, const char *k, const char *v, int64_t sb, int n, int key0,
                       bool masked);

/* Defined by cpu_attn_decode_avx512.c, used by both files: the FMA prep
 * (picks the job's FMA kernel), the chunk (calls the kernel the prep
 * picked, FMA or tiles) and the FMA finish. */
void attn__sd_prep(attn__cpu_job *j, const void *const *qrows);
void attn__sd_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n, int key0,
                    bool masked);
void attn__sd_finish(attn__cpu_job *j);

static inline bool sd_accepts(const attn__cpu_job *j)
{
    if (j->R > ATTN_CPU_SD_ROWS || j->D % 16 || j->Dv % 16 || j->D > SD_QS ||
        j->Dv > ATTN_CPU_MAX_HEAD)
        return false;
    return j->kv_elem == ATTN_ELEM_BF16 || j->kv_elem == ATTN_ELEM_FP8_E4M3 ||
           j->kv_elem == ATTN_ELEM_FP8_E5M2;
}

static inline bool sd_usable(void)
{
    return attn_cpu_has(ATTN_CPU_AVX512F) && attn_cpu_has(ATTN_CPU_AVX512BW) &&
           attn_cpu_has(ATTN_CPU_AVX512VL) && attn_cpu_has(ATTN_CPU_F16C);
}

/* How rows become fp32 vectors, and the dim order that leaves */
enum {
    SD_NAT = 0,  /* 16 elements per vector in dim order */
    SD_PAIR = 1, /* bf16: a 32-dim group -> even dims, odd dims */
    SD_VBMI = 2, /* fp8: a 64-dim group looked up as bf16 bytes and unpacked:
                  * vector v, lane 4L + i <- dim 16L + 4v + i */
};

/* how the math runs: fp32 FMA with O rows in j->o, tile products (QK and
 * PV) with O in tiles 0..3, or VDPBF16PS dot products with O rows in j->o
 * (cpu_attn_decode_dp_avx512bf16.c) */
enum { SD_FMA = 0, SD_TILES = 1, SD_DOTS = 2 };

/* position of dim d of a D-dim row laid out for mode (SD_PAIR rows end in
 * a native 16-dim tail when D is an odd multiple of 16) */
static inline int sd_pos(int mode, int d, int D)
{
    if (mode == SD_PAIR && d < (D & ~31)) return (d & ~31) + (d & 1) * 16 + (d & 31) / 2;
    if (mode == SD_VBMI) {
        int L = (d & 63) / 16, v = (d & 15) / 4, i = d & 3;
        return (d & ~63) + 16 * v + 4 * L + i;
    }
    return d;
}

/* dim of staged position s of an fp8 row widened through the byte tables
 * with byte unpacks (64 dims per [w0 | w1], w0 lane L holding dims
 * 16L..16L+7 and w1 lane L dims 16L+8..16L+15): the tile and dot-product
 * paths */
static inline int sd_staged_dim(int s)
{
    int r = s & 63, half = r / 32, L = (r & 31) / 8;
    return (s & ~63) + 16 * L + 8 * half + (r & 7);
}

static inline float sd_vscale(const attn__cpu_job *j, int mode)
{
    return j->kv_elem == ATTN_ELEM_FP8_E4M3 && mode == SD_NAT ? 256.0f : 1.0f;
}

/* What a kernel keeps in registers to widen rows: the fp8 -> bf16 byte
 * tables (SD_VBMI), or the shift and mask that make an fp16 of a
 * sign-extended fp8 byte (fp8 SD_NAT: e5m2 is the top byte of an fp16;
 * e4m3 << 7 = s s eeee mmm 0000000, and clearing bit 14 leaves the fp16
 * s 0eeee mmm0000000 of value * 2^-8) */
typedef struct {
    __m512i h0, h1, l0, l1;
    __m128i sh;
    __m256i keep;
} sd_tab;

static inline __attribute__((always_inline)) sd_tab sd_tables(const attn__cpu_job *j,
                                                              const int MODE)
{
    sd_tab t;
    memset(&t, 0, sizeof t);
    int e4m3 = j->kv_elem == ATTN_ELEM_FP8_E4M3;
    if (MODE == SD_VBMI) {
        const uint8_t *hi, *lo;
        attn__cpu_fp8_bf16_tables(e4m3, &hi, &lo);
        t.h0 = _mm512_loadu_si512(hi);
        t.h1 = _mm512_loadu_si512(hi + 64);
        t.l0 = _mm512_loadu_si512(lo);
        t.l1 = _mm512_loadu_si512(lo + 64);
    } else {
        t.sh = _mm_cvtsi32_si128(e4m3 ? 7 : 8);
        t.keep = _mm256_set1_epi16((short)(e4m3 ? 0xbfff : 0xffff));
    }
    return t;
}

/* vpermi2b by hand: the kernel file is built without -mavx512vbmi, and
 * SD_VBMI is chosen only where the CPU has it */
static inline __attribute__((always_inline)) __m512i sd_lookup(__m512i x, __m512i t0, __m512i t1)
{
    __asm__("vpermi2b %2, %1, %0" : "+v"(x) : "v"(t0), "v"(t1));
    return x;
}

/* 16 cache elements of W bytes as fp32 in dim order (e4m3 scaled by 2^-8) */
static inline __attribute__((always_inline)) __m512 sd_load16(const char *src, const int W,
                                                              const sd_tab *tb)
{
    if (W == 2)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)src)), 16));
    __m256i b = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)src));
    return _mm512_cvtph_ps(_mm256_and_si256(_mm256_sll_epi16(b, tb->sh), tb->keep));
}

/* NV vectors of a row in the mode's order */
static inline __attribute__((always_inline)) void
sd_row(__m512 *x, const char *src, const int NV, const int MODE, const int W, const sd_tab *tb)
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
        for (int i = 0; i < NV; i++)
            x[i] = sd_load16(src + (size_t)i * 16 * W, W, tb);
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

/* keys in block b of a chunk of n */
static inline int sd_nb(int n, int b)
{
    return n - b * SD_BLK < SD_BLK ? n - b * SD_BLK : SD_BLK;
}

/* the job's row mode, kind of math and kernel, and zero row sums */
static inline void sd_begin(attn__cpu_job *j, int mode, int math, sd_kernel *fn)
{
    int *ms = (int *)((char *)j->scratch + SD_MODE);
    ms[0] = mode;
    ms[1] = math;
    ms[2] = 0;
    memcpy((char *)j->scratch + SD_FN, &fn, sizeof fn);
    float *l = (float *)((char *)j->scratch + SD_L);
    memset(l, 0, (size_t)j->R * 16 * sizeof(float));
}

/* scores of the block -> probabilities in SD_P (times the V scale); false
 * when no row sees any key of the block. Scores come from the FMA
 * partials (SD_ACC) or, on the tile path, from SD_XS. */
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

/* ---- fp32 FMA path ----------------------------------------------------------- */

/* acc[r][t] (+)= K row t (NV vectors from dim d0) . Q row r */
static inline __attribute__((always_inline)) void sd_qk_part(const attn__cpu_job *j, const char *kc,
                                                             const char *vc, int64_t sb, int t0,
                                                             int nb, int n, int d0, const int R,
                                                             const int NV, const int MODE, bool add,
                                                             const int W, const sd_tab *tb)
{
    float *acc = (float *)((char *)j->scratch + SD_ACC);
    const float *q = (const float *)j->qbuf + d0;
    int kbytes = j->D * W, vbytes = j->Dv * W;
    int ahead = SD_PFB / kbytes > 2 ? SD_PFB / kbytes : 2;
    for (int t = 0; t < nb; t++) {
        if (d0 == 0) sd_prefetch(j, kc, vc, sb, t0 + t + ahead, n, kbytes, vbytes);
        __m512 kv[8];
        sd_row(kv, kc + (t0 + t) * sb + (size_t)d0 * W, NV, MODE, W, tb);
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
           const int R, const int NV, const int MODE, const int W, const sd_tab *tb)
{
    float *ob = j->o + d0;
    __m512 o[8][8];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < NV; i++)
            o[r][i] = _mm512_loadu_ps(ob + (size_t)r * j->o_stride + 16 * i);
    for (int t = 0; t < nb; t++) {
        __m512 vv[8];
        sd_row(vv, vc + (t0 + t) * sb + (size_t)d0 * W, NV, MODE, W, tb);
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

/* Vector counts a part is specialised for: SD_PAIR parts take multiples
 * of 2 (a 32-dim group), SD_VBMI parts multiples of 4 (64 dims), SD_NAT
 * parts 1, 2, 4 or 8 (other counts run as several parts: fewer kernels,
 * at the cost of one more pass over the key for those head sizes). */
#define SD_NV_OK(MODE, N)                                                                          \
    ((MODE) == SD_PAIR ? (N) % 2 == 0 : (MODE) == SD_VBMI ? (N) % 4 == 0 : ((N) & ((N)-1)) == 0)
#define SD_NV_CASES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)

/* the vectors of the next part when `left` (<= 8) remain */
static inline int sd_part_nv(const int MODE, int left)
{
    if (MODE != SD_NAT) return left;
    return left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
}

/* scores of keys [t0, t0 + nb) into SD_ACC */
static inline __attribute__((always_inline)) void
sd_qk_block(attn__cpu_job *j, const char *kc, const char *vc, int64_t sb, int t0, int nb, int n,
            const int R, const int MODE, const int W, const sd_tab *tb)
{
    /* passes of at most 8 vectors (128 dims); a bf16 pair row's odd 16
     * dims at the end in a native pass */
    int nv = j->D / 16, tail = MODE == SD_PAIR ? nv & 1 : 0;
    nv -= tail;
    for (int i0 = 0, c; i0 < nv; i0 += c) {
        c = sd_part_nv(MODE, nv - i0 < 8 ? nv - i0 : 8);
        switch (c) {
#define SD_QK_CASE(N)                                                                              \
    case N:                                                                                        \
        if (SD_NV_OK(MODE, N))                                                                     \
            sd_qk_part(j, kc, vc, sb, t0, nb, n, i0 * 16, R, N, MODE, i0 > 0, W, tb);              \
        break;
            SD_NV_CASES(SD_QK_CASE)
#undef SD_QK_CASE
        }
    }
    if (tail) sd_qk_part(j, kc, vc, sb, t0, nb, n, nv * 16, R, 1, SD_NAT, nv > 0, W, tb);
    if (nb < SD_BLK) /* the reduction reads all 16 partials of a row */
        for (int r = 0; r < R; r++)
            memset((char *)j->scratch + SD_ACC + ((size_t)r * SD_BLK + nb) * 64, 0,
                   (size_t)(SD_BLK - nb) * 64);
}

/* O += P V for keys [t0, t0 + nb), output dims in groups of G vectors */
static inline __attribute__((always_inline)) void
sd_pv_block(attn__cpu_job *j, const float *p, const char *vc, int64_t sb, int t0, int nb,
            const int R, const int G, const int MODE, const int W, const sd_tab *tb)
{
    int nvv = j->Dv / 16, tail = MODE == SD_PAIR ? nvv & 1 : 0;
    nvv -= tail;
    for (int i0 = 0, c; i0 < nvv; i0 += c) {
        c = sd_part_nv(MODE, nvv - i0 < G ? nvv - i0 : G);
        switch (c) {
#define SD_PV_CASE(N)                                                                              \
    case N:                                                                                        \
        if (N <= G && SD_NV_OK(MODE, N))                                                           \
            sd_pv_part(j, p, vc, sb, t0, nb, i0 * 16, R, N <= G ? N : 1, MODE, W, tb);             \
        break;
            SD_NV_CASES(SD_PV_CASE)
#undef SD_PV_CASE
        }
    }
    if (tail) sd_pv_part(j, p, vc, sb, t0, nb, nvv * 16, R, 1, SD_NAT, W, tb);
}

/* The FMA kernel of R rows in row mode MODE over W-byte elements, with
 * output dims in PV groups of G vectors (R * G <= 16 accumulators). Blocks
 * are software-pipelined: block b + 1's scores are computed before block
 * b's PV, so the reduction and softmax between a block's QK and its PV (a
 * latency chain) overlap with independent work. */
static inline __attribute__((always_inline)) void sd_rows(attn__cpu_job *j, const char *k,
                                                          const char *v, int64_t sb, int n,
                                                          int key0, bool masked, const int R,
                                                          const int MODE, const int W)
{
    const int G = R <= 2 ? 8 : R <= 4 ? 4 : 2;
    const sd_tab tb = sd_tables(j, MODE);
    float vscale = sd_vscale(j, MODE);
    float *pb = (float *)((char *)j->scratch + SD_P);
    int nblk = (n + SD_BLK - 1) / SD_BLK;
    bool live = false;
    for (int b = -1; b < nblk; b++) {
        bool next = false;
        if (b + 1 < nblk)
            sd_qk_block(j, k, v, sb, (b + 1) * SD_BLK, sd_nb(n, b + 1), n, R, MODE, W, &tb);
        if (live)
            sd_pv_block(j, pb + (b & 1) * 8 * SD_BLK, v, sb, b * SD_BLK, sd_nb(n, b), R, G, MODE, W,
                        &tb);
        if (b + 1 < nblk)
            next = sd_softmax(j, pb + ((b + 1) & 1) * 8 * SD_BLK, sd_nb(n, b + 1),
                              key0 + (b + 1) * SD_BLK, masked, vscale, false);
        live = next;
    }
}

#endif
