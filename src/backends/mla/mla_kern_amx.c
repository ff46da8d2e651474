/* CPU_MLA AMX-BF16 decode: bf16 queries over a bf16 (or fp8, converted
 * exactly to bf16) latent cache on the tile unit, softmax on AVX-512.
 *
 * Per block of AMX_KB keys and a group of up to 128 (token, head) rows:
 *   S^T [keys][rows] = K . Q^T   A = 16 latent rows x 32 dims, loaded
 *                                straight from the cache (or a staging copy
 *                                when rows cross a block, are fp8, or the
 *                                block is short); B = the queries, packed once
 *                                per piece as VNNI pairs;
 *   online softmax in base 2 over the block, vectorised across rows; the
 *   running max only moves when it grows by more than AMX_TAU (so the
 *   accumulators are rarely rescaled and P stays below 2^AMX_TAU);
 *   O [rows][R] += P . V         A = P (bf16, 16 rows x 32 keys), B = the
 *                                latent part of the same rows interleaved in
 *                                key pairs; O tiles go through the fp32
 *                                accumulator once per block.
 * V pairs are built with unpack lo/hi, which permutes the columns of each
 * 32-wide group; the accumulator is put back in order at the end.
 * Tile instructions are emitted through inline asm with memory clobbers (the
 * compiler must not move buffer writes across tile loads and stores); the
 * tile configuration is loaded per piece and released after it. Compiled
 * with AVX-512 flags; used only when attn_cpu_has() reports AMX-BF16 (which
 * includes the Linux XTILEDATA permission). */
#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/mla/mla_internal.h"
#include "backends/mla/mla_vec_avx512.h"
#include "util/amx.h"
#include "util/numeric.h"

#define AMX_KB 256 /* keys per block */
/* Row padding (floats) of the score buffer: at Mp * 4 = 512 bytes a 16-row
 * tile lands in 8 L1 sets (padded: 16), and QK stores and reloads its tiles
 * once per slice. */
#define SPAD       16
#define QK_PARTS   3 /* slices of D in S^T = K . Q^T (see there) */
#define AMX_NSUB   (AMX_KB / 32)
#define AMX_TAU    8.0f
#define TILE_BYTES 1024

static bool amx_usable(void)
{
    return attn_cpu_has(ATTN_CPU_AMX_TILE) && attn_cpu_has(ATTN_CPU_AMX_BF16) &&
           attn_cpu_has(ATTN_CPU_AVX512F) && attn_cpu_has(ATTN_CPU_AVX512BW) &&
           attn_cpu_has(ATTN_CPU_AVX512VL) && attn_cpu_has(ATTN_CPU_AVX512DQ) &&
           attn_cpu_has(ATTN_CPU_AVX512_BF16) && attn_cpu_has(ATTN_CPU_FMA) &&
           attn_cpu_has(ATTN_CPU_F16C) && attn_cpu_has(ATTN_CPU_AVX2);
}

static bool amx_decode_ok(attn_elem q, attn_elem kv, int R, int D)
{
    return q == ATTN_ELEM_BF16 &&
           (kv == ATTN_ELEM_BF16 || kv == ATTN_ELEM_FP8_E4M3 || kv == ATTN_ELEM_FP8_E5M2) &&
           R > 0 && R % 32 == 0 && D % 32 == 0 && D >= R;
}

static size_t al64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

typedef struct {
    uint8_t *qb;  /* [Mt][D/32] tiles: queries as VNNI pairs */
    uint16_t *ks; /* [AMX_KB][D] staged latent rows (bf16) */
    uint8_t *vb;  /* [2][AMX_NSUB] tiles: V of one 32-column group as key pairs */
    float *st;    /* [AMX_KB][Mp + SPAD] scores, then probabilities */
    uint8_t *pa;  /* [Mt][AMX_NSUB] tiles: P rows x 32 keys */
    float *m, *l, *alpha;
    int32_t *lim;
    int32_t *pos;           /* [AMX_KB] */
    const uint16_t **row;   /* [AMX_KB] row pointers (cache or staging) */
    const char **next;      /* [AMX_KB] the next block's rows, to prefetch */
    const uint16_t **tbase; /* [AMX_KB / 16] tile sources */
    long *tstride;
} amx_ws;

static size_t amx_layout(int R, int D, int rows, void *mem, amx_ws *w)
{
    int Mt = (rows + 15) / 16, Mp = Mt * 16;
    size_t off = 0;
    char *base = mem;
#define TAKE(field, bytes)                                                                         \
    do {                                                                                           \
        if (w) w->field = (void *)(base + off);                                                    \
        off += al64(bytes);                                                                        \
    } while (0)
    TAKE(qb, (size_t)Mt * (D / 32) * TILE_BYTES);
    TAKE(ks, (size_t)AMX_KB * D * 2);
    TAKE(vb, (size_t)2 * AMX_NSUB * TILE_BYTES);
    TAKE(st, (size_t)AMX_KB * (Mp + SPAD) * 4);
    TAKE(pa, (size_t)Mt * AMX_NSUB * TILE_BYTES);
    TAKE(m, (size_t)Mp * 4);
    TAKE(l, (size_t)Mp * 4);
    TAKE(alpha, (size_t)Mp * 4);
    TAKE(lim, (size_t)Mp * 4);
    TAKE(pos, (size_t)AMX_KB * 4);
    TAKE(row, (size_t)AMX_KB * sizeof(void *));
    TAKE(next, (size_t)AMX_KB * sizeof(void *));
    TAKE(tbase, (size_t)(AMX_KB / 16) * sizeof(void *));
    TAKE(tstride, (size_t)(AMX_KB / 16) * sizeof(long));
#undef TAKE
    return off;
}

static size_t amx_decode_ws(int R, int D, int rows)
{
    size_t own = amx_layout(R, D, rows, NULL, NULL);
    size_t port = attn__mla_kern_portable.decode_ws(R, D, rows); /* fallback for odd scales */
    return own > port ? own : port;
}

/* Queries -> B tiles: tile (mt, kc) row p = for 16 rows, the dword of dims
 * (32 kc + 2p, +1): a 16 x 16 dword transpose of the rows' 64-byte pieces. */
static void amx_pack_q(const attn__mla_dec *d, int Mt, uint8_t *qb)
{
    const int D = d->D, DC = D / 32;
    const uint16_t *q = (const uint16_t *)d->q + (size_t)d->row0 * D;
    _Alignas(64) uint32_t tmp[16 * 16];
    for (int mt = 0; mt < Mt; mt++) {
        int nr = d->nrows - 16 * mt < 16 ? d->nrows - 16 * mt : 16;
        for (int kc = 0; kc < DC; kc++) {
            const float *src;
            size_t lds;
            if (nr == 16) {
                src = (const float *)(q + (size_t)(16 * mt) * D + 32 * kc);
                lds = (size_t)D / 2;
            } else {
                memset(tmp, 0, sizeof tmp);
                for (int i = 0; i < nr; i++)
                    memcpy(tmp + 16 * i, q + (size_t)(16 * mt + i) * D + 32 * kc, 64);
                src = (const float *)tmp;
                lds = 16;
            }
            v512_tr16(src, lds, (float *)(qb + ((size_t)mt * DC + kc) * TILE_BYTES), 16);
        }
    }
}

/* A latent row -> bf16 staging; exact for fp8 (every e4m3 / e5m2 value is a
 * bf16 value). e4m3 with integer ops, 32 at a time: normals rebias the
 * exponent (+120) and widen the mantissa, subnormals (m * 2^-9) come from a
 * small table, NaN stays NaN; e5m2 is the top byte of an fp16. */
void attn__mla_amx_widen_row(const void *src, attn_elem e, int D, uint16_t *dst)
{
    if (e == ATTN_ELEM_BF16) {
        memcpy(dst, src, (size_t)D * 2);
        return;
    }
    const uint8_t *s = src;
    if (e == ATTN_ELEM_FP8_E5M2) {
        for (int i = 0; i < D; i += 16) {
            __m256i h = _mm256_slli_epi16(
                _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(s + i))), 8);
            __m512i f = _mm512_castps_si512(_mm512_cvtph_ps(h));
            _mm256_storeu_si256((__m256i *)(dst + i),
                                _mm512_cvtepi32_epi16(_mm512_srli_epi32(f, 16)));
        }
        return;
    }
    /* bf16 of m * 2^-9 for m = 0..7 */
    const __m512i sub_tab =
        _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                         0x3C60, 0x3C40, 0x3C20, 0x3C00, 0x3BC0, 0x3B80, 0x3B00, 0);
    const __m512i c7f = _mm512_set1_epi16(0x7f), c7 = _mm512_set1_epi16(7);
    for (int i = 0; i < D; i += 32) {
        __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m512i sgn = _mm512_slli_epi16(_mm512_and_si512(x, _mm512_set1_epi16(0x80)), 8);
        __m512i ex = _mm512_and_si512(_mm512_srli_epi16(x, 3), _mm512_set1_epi16(0xf));
        __m512i m = _mm512_and_si512(x, c7);
        __m512i r =
            _mm512_or_si512(_mm512_slli_epi16(_mm512_add_epi16(ex, _mm512_set1_epi16(120)), 7),
                            _mm512_slli_epi16(m, 4));
        r = _mm512_mask_mov_epi16(r, _mm512_cmpeq_epi16_mask(ex, _mm512_setzero_si512()),
                                  _mm512_permutexvar_epi16(m, sub_tab));
        r = _mm512_mask_mov_epi16(r, _mm512_cmpeq_epi16_mask(_mm512_and_si512(x, c7f), c7f),
                                  _mm512_set1_epi16(0x7fc0));
        _mm512_storeu_si512(dst + i, _mm512_or_si512(r, sgn));
    }
}

/* 2^x for the probabilities: degree-3 fit on [-1/2, 1/2], relative error
 * < 8e-5, far below the bf16 rounding of P (4e-3); the sums use the same
 * values, so the normalisation is consistent. */
static inline __m512 amx_exp2_p(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-150.0f));
    __m512 fl = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, fl);
    __m512 p = _mm512_set1_ps(0.05508872537f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.2426043540f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6932762625f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.9999289226f));
    return _mm512_scalef_ps(p, fl);
}

/* Probabilities of key k for 16 rows: 0 for keys past nk and for masked
 * positions; raw score * mul - max otherwise. */
static inline __m512 amx_prob(const float *src, int k, int nk, bool masked, const int32_t *pos,
                              __m512i lim, __m512 vmul, __m512 mn)
{
    if (k >= nk) return _mm512_setzero_ps();
    __m512 p = amx_exp2_p(_mm512_fmsub_ps(_mm512_loadu_ps(src), vmul, mn));
    if (masked) p = _mm512_maskz_mov_ps(_mm512_cmple_epi32_mask(_mm512_set1_epi32(pos[k]), lim), p);
    return p;
}

/* 16 x 16 dword transpose of r (in registers), rows stored 64 bytes apart. */
#define AMX_STORE(d, ld, i, v) _mm512_store_ps(d + (ld) * (i), v)
static inline void amx_tr16_store(__m512 r[16], float *d)
{
    __m512 t[16];
    VT_TR4(r, t);
    V512_TR_LANES(r, d, 16, AMX_STORE);
}

/* Row pointers of the block starting at b0; returns its key count. */
static int amx_block_rows(const attn__mla_dec *d, int b0, int total, const char **rows)
{
    int nk = total - b0 < AMX_KB ? total - b0 : AMX_KB;
    for (int k = 0; k < nk; k++) {
        int pos = d->positions ? d->positions[b0 + k] : d->kv_begin + b0 + k;
        rows[k] = attn__mla_row(d->kv, d->kv_esz, d->bt, pos);
    }
    return nk;
}

/* Asks for the next block's lines [*cur, *cur + n) into L2, row by row (the
 * rows of a block are usually contiguous, so this walks memory in order).
 * Called a few lines at a time from the QK loop: bursts would fill the
 * miss buffers and stall the tile loads behind them. */
static inline void amx_prefetch(const char *const *rows, int row_lines, int total, int *cur, int n)
{
    int c = *cur, end = c + n < total ? c + n : total;
    for (; c < end; c++)
        _mm_prefetch(rows[c / row_lines] + 64 * (c % row_lines), _MM_HINT_T1);
    *cur = c;
}

/* The V tiles of sub-chunk s for one 32-column group g: key pair p of the
 * block interleaved with unpack lo/hi into tile rows (the column order this
 * leaves is undone at the end); vb holds the group's two column tiles x
 * AMX_NSUB sub-chunks, packed apart from the QK loop, whose tile loads it
 * would compete with for the load ports (kernel-notes.md). */
static inline void amx_vpack(const uint16_t *const *row, int nk, int s, int g, uint8_t *vb)
{
    for (int p = 0; p < 16; p++) {
        int ka = 32 * s + 2 * p, kb = ka + 1;
        __m512i va = ka < nk ? _mm512_loadu_si512(row[ka] + 32 * g) : _mm512_setzero_si512();
        __m512i vb_ = kb < nk ? _mm512_loadu_si512(row[kb] + 32 * g) : _mm512_setzero_si512();
        _mm512_store_si512(vb + (size_t)s * TILE_BYTES + 64 * p, _mm512_unpacklo_epi16(va, vb_));
        _mm512_store_si512(vb + (size_t)(AMX_NSUB + s) * TILE_BYTES + 64 * p,
                           _mm512_unpackhi_epi16(va, vb_));
    }
}

static void amx_decode(const attn__mla_dec *d)
{
    const int D = d->D, R = d->R, H = d->H, n = d->nrows;
    const int DC = D / 32, RT = R / 16;
    const int Mt = (n + 15) / 16, Mp = Mt * 16;
    const int lds = Mp + SPAD;
    if (!(d->score_mul > 0.0f)) { /* the block max below assumes a positive scale */
        attn__mla_kern_portable.decode(d);
        return;
    }
    amx_ws w;
    amx_layout(R, D, n, d->ws, &w);
    const size_t kv_row_bytes = (size_t)d->kv->stride_token * d->kv_esz;
    const bool direct_ok = d->kv_elem == ATTN_ELEM_BF16;

    int total = d->positions ? d->npositions : d->kv_end - d->kv_begin;
    const int row_lines = (int)(((size_t)D * d->kv_esz + 63) / 64);
    /* the first block is demand-loaded: a prefetch burst here would only
     * stall on the miss buffers */
    int nnext = total > 0 ? amx_block_rows(d, 0, total, w.next) : 0;
    int pf_cur = 0;
    amx_pack_q(d, Mt, w.qb);
    for (int i = 0; i < Mp; i++) {
        w.m[i] = -INFINITY;
        w.l[i] = 0.0f;
        w.lim[i] = (d->positions || i >= n) ? INT_MAX : d->first_pos + (d->row0 + i) / H;
    }
    if (total == 0) memset(d->acc, 0, sizeof(float) * (size_t)Mp * R);
    const int min_lim = w.lim[0];
    const __m512 vmul = _mm512_set1_ps(d->score_mul), ninf = _mm512_set1_ps(-INFINITY);
    /* lo/hi unpack order back to natural order within each 32-wide group */
    const __m512i unperm0 =
        _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i unperm1 =
        _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    const __m512i pair_idx =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);

    attn__amx_config((const uint8_t[8]){16, 16, 16, 16, 16, 16, 16, 16}, NULL);
    for (int b0 = 0; b0 < total; b0 += AMX_KB) {
        const int nk = total - b0 < AMX_KB ? total - b0 : AMX_KB;
        const int nsub = (nk + 31) / 32;
        const bool first = b0 == 0;
        /* ---- rows of the block: pointers, tile sources, staging ---- */
        for (int k = 0; k < nk; k++) {
            w.pos[k] = d->positions ? d->positions[b0 + k] : d->kv_begin + b0 + k;
            w.row[k] = (const uint16_t *)w.next[k];
        }
        nnext = b0 + AMX_KB < total ? amx_block_rows(d, b0 + AMX_KB, total, w.next) : 0;
        /* the next block's lines, spread over this block's steps: half over
         * QK, a sixth over the softmax, a third over PV (roughly their time) */
        const int pf_total = nnext * row_lines, qk_steps = nsub * ((Mt + 1) / 2) * DC;
        const int pf_per = (pf_total / 2 + qk_steps - 1) / qk_steps;
        const int pf_sm = (pf_total / 6 + Mt * nsub - 1) / (Mt * nsub);
        const int pf_pv =
            (pf_total / 3 + (RT / 2) * ((Mt + 1) / 2) - 1) / ((RT / 2) * ((Mt + 1) / 2));
        pf_cur = 0;
        for (int t = 0; t < 2 * nsub; t++) {
            int k0 = 16 * t;
            /* direct when the 16 rows are evenly spaced in memory (a sparse
             * list or a block boundary can break that anywhere) */
            bool direct = direct_ok && k0 + 16 <= nk;
            for (int j = 1; direct && j < 16; j++)
                direct = (const char *)w.row[k0 + j] == (const char *)w.row[k0] + j * kv_row_bytes;
            if (direct) {
                w.tbase[t] = w.row[k0];
                w.tstride[t] = (long)kv_row_bytes;
                continue;
            }
            uint16_t *stg = w.ks + (size_t)k0 * D;
            for (int k = k0; k < k0 + 16; k++) {
                if (k < nk)
                    attn__mla_amx_widen_row(w.row[k], d->kv_elem, D, stg + (size_t)(k - k0) * D);
                else
                    memset(stg + (size_t)(k - k0) * D, 0, (size_t)D * 2);
                if (k < nk) w.row[k] = stg + (size_t)(k - k0) * D;
            }
            w.tbase[t] = stg;
            w.tstride[t] = (long)D * 2;
        }

        /* ---- S^T = K . Q^T, 2 key tiles x 2 row tiles at a time ---- */
        /* D is walked in QK_PARTS slices: per slice the key tiles of one
         * 32-key step (12 KB at D = 576) stay in L1 while the query tiles of
         * every row pair stream past, so about half of the tile loads come
         * from L2 instead of all of them (the whole-D step, 36 KB of keys
         * plus 36 KB of queries per row pair, overflows L1). The partial
         * sums go through st, exactly (fp32 store and reload); QK_PARTS:
         * kernel-notes.md. */
        for (int s = 0; s < nsub; s++) {
            const char *k0b = (const char *)w.tbase[2 * s], *k1b = (const char *)w.tbase[2 * s + 1];
            long k0s = w.tstride[2 * s], k1s = w.tstride[2 * s + 1];
            float *st0 = w.st + (size_t)(32 * s) * lds, *st1 = st0 + (size_t)16 * lds;
            for (int part = 0; part < QK_PARTS; part++) {
                const int kc0 = DC * part / QK_PARTS, kc1 = DC * (part + 1) / QK_PARTS;
                for (int mt = 0; mt < Mt; mt += 2) {
                    const uint8_t *qa = w.qb + (size_t)mt * DC * TILE_BYTES;
                    if (mt + 1 < Mt) {
                        const uint8_t *qc = qa + (size_t)DC * TILE_BYTES;
                        if (part == 0) {
                            TZERO(0);
                            TZERO(1);
                            TZERO(2);
                            TZERO(3);
                        } else {
                            TLOAD(0, st0 + 16 * mt, lds * 4);
                            TLOAD(1, st0 + 16 * (mt + 1), lds * 4);
                            TLOAD(2, st1 + 16 * mt, lds * 4);
                            TLOAD(3, st1 + 16 * (mt + 1), lds * 4);
                        }
                        for (int kc = kc0; kc < kc1; kc++) {
                            TLOAD(4, k0b + 64 * kc, k0s);
                            TLOAD(5, k1b + 64 * kc, k1s);
                            TLOAD(6, qa + (size_t)kc * TILE_BYTES, 64);
                            TLOAD(7, qc + (size_t)kc * TILE_BYTES, 64);
                            TDP(0, 4, 6);
                            TDP(1, 4, 7);
                            TDP(2, 5, 6);
                            TDP(3, 5, 7);
                            amx_prefetch(w.next, row_lines, pf_total, &pf_cur, pf_per);
                        }
                        TSTORE(0, st0 + 16 * mt, lds * 4);
                        TSTORE(1, st0 + 16 * (mt + 1), lds * 4);
                        TSTORE(2, st1 + 16 * mt, lds * 4);
                        TSTORE(3, st1 + 16 * (mt + 1), lds * 4);
                    } else {
                        if (part == 0) {
                            TZERO(0);
                            TZERO(2);
                        } else {
                            TLOAD(0, st0 + 16 * mt, lds * 4);
                            TLOAD(2, st1 + 16 * mt, lds * 4);
                        }
                        for (int kc = kc0; kc < kc1; kc++) {
                            TLOAD(4, k0b + 64 * kc, k0s);
                            TLOAD(5, k1b + 64 * kc, k1s);
                            TLOAD(6, qa + (size_t)kc * TILE_BYTES, 64);
                            TDP(0, 4, 6);
                            TDP(2, 5, 6);
                            amx_prefetch(w.next, row_lines, pf_total, &pf_cur, pf_per);
                        }
                        TSTORE(0, st0 + 16 * mt, lds * 4);
                        TSTORE(2, st1 + 16 * mt, lds * 4);
                    }
                }
            }
        }

        /* ---- online softmax over the block, 16 rows per vector; the
         * probabilities go straight into the P tiles (bf16 key pairs,
         * transposed to rows x keys in registers) ---- */
        const bool masked = !d->positions && w.pos[nk - 1] > min_lim;
        for (int g = 0; g < Mt; g++) {
            const float *col = w.st + 16 * g;
            __m512 mo = _mm512_loadu_ps(w.m + 16 * g);
            __m512i lim = _mm512_loadu_si512(w.lim + 16 * g);
            __m512 mx0 = ninf, mx1 = ninf;
            int k = 0;
            for (; k + 2 <= nk; k += 2) {
                __m512 s0 = _mm512_loadu_ps(col + (size_t)k * lds);
                __m512 s1 = _mm512_loadu_ps(col + (size_t)(k + 1) * lds);
                if (masked) {
                    s0 = _mm512_mask_mov_ps(
                        ninf, _mm512_cmple_epi32_mask(_mm512_set1_epi32(w.pos[k]), lim), s0);
                    s1 = _mm512_mask_mov_ps(
                        ninf, _mm512_cmple_epi32_mask(_mm512_set1_epi32(w.pos[k + 1]), lim), s1);
                }
                mx0 = _mm512_max_ps(mx0, s0);
                mx1 = _mm512_max_ps(mx1, s1);
            }
            if (k < nk) {
                __m512 s0 = _mm512_loadu_ps(col + (size_t)k * lds);
                if (masked)
                    s0 = _mm512_mask_mov_ps(
                        ninf, _mm512_cmple_epi32_mask(_mm512_set1_epi32(w.pos[k]), lim), s0);
                mx0 = _mm512_max_ps(mx0, s0);
            }
            /* raw scores so far; the scale is applied once here (mul > 0) */
            __m512 mx = _mm512_mul_ps(_mm512_max_ps(mx0, mx1), vmul);
            __mmask16 upd =
                _mm512_cmp_ps_mask(mx, _mm512_add_ps(mo, _mm512_set1_ps(AMX_TAU)), _CMP_GT_OQ);
            __m512 mn = _mm512_mask_mov_ps(mo, upd, mx);
            __m512 alpha =
                _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), upd, v512_exp2(_mm512_sub_ps(mo, mn)));
            __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
            for (int s = 0; s < nsub; s++) {
                __m512 wv[16];
                for (int j = 0; j < 16; j++) {
                    int k0 = 32 * s + 2 * j;
                    __m512 p0 =
                        amx_prob(col + (size_t)k0 * lds, k0, nk, masked, w.pos, lim, vmul, mn);
                    __m512 p1 = amx_prob(col + (size_t)(k0 + 1) * lds, k0 + 1, nk, masked, w.pos,
                                         lim, vmul, mn);
                    sum0 = _mm512_add_ps(sum0, p0);
                    sum1 = _mm512_add_ps(sum1, p1);
                    __m512bh b = _mm512_cvtne2ps_pbh(p1, p0);
                    wv[j] = _mm512_castsi512_ps(_mm512_permutexvar_epi16(pair_idx, (__m512i)b));
                }
                amx_tr16_store(wv, (float *)(w.pa + ((size_t)g * AMX_NSUB + s) * TILE_BYTES));
                amx_prefetch(w.next, row_lines, pf_total, &pf_cur, pf_sm);
            }
            __m512 lo = _mm512_loadu_ps(w.l + 16 * g);
            _mm512_storeu_ps(w.l + 16 * g, _mm512_fmadd_ps(lo, alpha, _mm512_add_ps(sum0, sum1)));
            _mm512_storeu_ps(w.m + 16 * g, mn);
            /* rescale the accumulator rows whose max moved (rare; nothing to
             * scale before a row's first visible key) */
            _mm512_storeu_ps(w.alpha + 16 * g, alpha);
            unsigned rows = upd & _mm512_cmp_ps_mask(mo, ninf, _CMP_NEQ_OQ);
            while (rows) {
                int i = __builtin_ctz(rows);
                rows &= rows - 1;
                float *o = d->acc + (size_t)(16 * g + i) * R;
                __m512 vf = _mm512_set1_ps(w.alpha[16 * g + i]);
                for (int r = 0; r < R; r += 16)
                    _mm512_storeu_ps(o + r, _mm512_mul_ps(_mm512_loadu_ps(o + r), vf));
            }
        }

        /* ---- O += P . V: per pair of column tiles, every pair of row tiles ---- */
        for (int dt = 0; dt < RT; dt += 2) {
            /* the V tiles of these 32 columns, built just before use (still in
             * L1 for the tile loads; the out-of-order core overlaps this with
             * the previous pair's products) */
            for (int s = 0; s < nsub; s++)
                amx_vpack(w.row, nk, s, dt / 2, w.vb);
            const uint8_t *vb0 = w.vb;
            const uint8_t *vb1 = vb0 + (size_t)AMX_NSUB * TILE_BYTES;
            for (int mt = 0; mt < Mt; mt += 2) {
                float *c00 = d->acc + (size_t)(16 * mt) * R + 16 * dt;
                const uint8_t *pa0 = w.pa + (size_t)mt * AMX_NSUB * TILE_BYTES;
                if (mt + 1 < Mt) {
                    float *c10 = c00 + (size_t)16 * R;
                    const uint8_t *pa1 = pa0 + (size_t)AMX_NSUB * TILE_BYTES;
                    if (first) {
                        TZERO(0);
                        TZERO(1);
                        TZERO(2);
                        TZERO(3);
                    } else {
                        TLOAD(0, c00, R * 4);
                        TLOAD(1, c00 + 16, R * 4);
                        TLOAD(2, c10, R * 4);
                        TLOAD(3, c10 + 16, R * 4);
                    }
                    for (int s = 0; s < nsub; s++) {
                        TLOAD(4, pa0 + (size_t)s * TILE_BYTES, 64);
                        TLOAD(5, pa1 + (size_t)s * TILE_BYTES, 64);
                        TLOAD(6, vb0 + (size_t)s * TILE_BYTES, 64);
                        TLOAD(7, vb1 + (size_t)s * TILE_BYTES, 64);
                        TDP(0, 4, 6);
                        TDP(1, 4, 7);
                        TDP(2, 5, 6);
                        TDP(3, 5, 7);
                    }
                    TSTORE(0, c00, R * 4);
                    TSTORE(1, c00 + 16, R * 4);
                    TSTORE(2, c10, R * 4);
                    TSTORE(3, c10 + 16, R * 4);
                    amx_prefetch(w.next, row_lines, pf_total, &pf_cur, pf_pv);
                } else {
                    if (first) {
                        TZERO(0);
                        TZERO(1);
                    } else {
                        TLOAD(0, c00, R * 4);
                        TLOAD(1, c00 + 16, R * 4);
                    }
                    for (int s = 0; s < nsub; s++) {
                        TLOAD(4, pa0 + (size_t)s * TILE_BYTES, 64);
                        TLOAD(6, vb0 + (size_t)s * TILE_BYTES, 64);
                        TLOAD(7, vb1 + (size_t)s * TILE_BYTES, 64);
                        TDP(0, 4, 6);
                        TDP(1, 4, 7);
                    }
                    TSTORE(0, c00, R * 4);
                    TSTORE(1, c00 + 16, R * 4);
                    amx_prefetch(w.next, row_lines, pf_total, &pf_cur, pf_pv);
                }
            }
        }
        amx_prefetch(w.next, row_lines, pf_total, &pf_cur, pf_total);
    }
    attn__amx_release();

    /* natural column order; running max and sum out */
    for (int i = 0; i < n; i++) {
        float *o = d->acc + (size_t)i * R;
        for (int g = 0; g < R; g += 32) {
            __m512 lo = _mm512_loadu_ps(o + g), hi = _mm512_loadu_ps(o + g + 16);
            _mm512_storeu_ps(o + g, _mm512_permutex2var_ps(lo, unperm0, hi));
            _mm512_storeu_ps(o + g + 16, _mm512_permutex2var_ps(lo, unperm1, hi));
        }
        d->m[i] = w.m[i];
        d->l[i] = w.l[i];
    }
}

const attn__mla_kern attn__mla_kern_amx = {
    .name = "amx",
    .usable = amx_usable,
    .decode_ws = amx_decode_ws,
    .prefill_ws = NULL,
    .decode_ok = amx_decode_ok,
    .decode = amx_decode,
    .prefill = NULL,
    .store_row = k_store_row,
};
