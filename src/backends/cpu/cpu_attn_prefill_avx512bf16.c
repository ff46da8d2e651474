/* CPU_ATTN "avx512-bf16" prefill: the jobs of more than ATTN_CPU_PF_MIN_ROWS
 * rows (up to ATTN_CPU_WIDE_ROWS: 64 query tokens of a GQA group of 4 at
 * head size 128) as blocked VDPBF16PS products.
 *
 * A job's chunks (at most a block of keys each) are gathered into a panel
 * of up to ATTN_CPU_CHUNK consecutive keys; when it is full (or at a gap in
 * the keys, or in finish) the panel is packed once for all the job's rows:
 * K transposed into bf16-pair columns kt[pair][key], V interleaved into key
 * pairs vi[key pair][dim]. Then, per block of PF_RB rows:
 *   S = Q K^T: PF_RB rows x 64 keys in 24 accumulators, one broadcast query
 *     pair and four K vectors per head pair;
 *   the fp32 online softmax of cpu_attn_tmpl.h (soft-cap, ALiBi, masks),
 *     P rounded to bf16 pairs in place;
 *   O += P V: PF_RB rows x 64 output lanes in 24 accumulators, O loaded,
 *     rescaled and stored once per panel.
 * The row block's S, P and O stay in L1 while the packed panel (2 x 16 KiB
 * at head 128) serves every row block from L1/L2. On the diagonal of a
 * causal prefill a row block computes only the key vectors and pairs its
 * rows can see. fp16/fp32 queries and probabilities are hi + lo bf16 pairs
 * (two products each), as in the dot-product path. fp8 rows are widened to
 * bf16 (exact) as they arrive; fp16/fp32 caches run the fp32 FMA path on
 * the chunk, widened once for all rows, in pieces of ATTN_CPU_MAX_ROWS. */
#include "backends/cpu/cpu_attn_avx512_f32.h"

#define PF_RB 6 /* rows per register block */
#define PF_KN ATTN_CPU_CHUNK

struct pf_state;
typedef void (*pf_chunk_fn)(attn__cpu_job *j, struct pf_state *ps, const void *k, const void *v,
                            int64_t stride, int n, int key0, bool masked);

typedef struct pf_state {
    pf_chunk_fn chunk; /* chosen by prep: the panel (bf16/fp8) or the fp32 pieces */
    int key0, n;       /* the panel holds keys [key0, key0 + n) */
    bool masked;       /* some chunk of the panel was masked */
    bool stage;        /* rows are copied into the staging area as they arrive */
    int e4m3;          /* fp8 caches: 1 e4m3, 0 e5m2 */
    const uint16_t *k[PF_KN], *v[PF_KN];
} pf_state;

/* Variant scratch of a panel job (bytes, all 64-aligned). The last 64 bytes
 * of ATTN_CPU_VSCRATCH belong to the variant's dispatch (cpu_attn_avx512bf16.c).
 *   kb [PF_KN][pad32(D)] bf16   staging K rows (fp8, or a head not a multiple of 32)
 *   vb [PF_KN][pad32(Dv)] bf16  staging V rows
 *   kt [MAX_HEAD/2][PF_KN] u32  K transposed into bf16-pair columns
 *   vi [PF_KN/2][MAX_HEAD] u32  V rows interleaved in key pairs
 *   the panel state */
#define PF_KB  0
#define PF_VB  (PF_KB + PF_KN * ATTN_CPU_MAX_HEAD * 2)
#define PF_KT  (PF_VB + PF_KN * ATTN_CPU_MAX_HEAD * 2)
#define PF_VI  (PF_KT + ATTN_CPU_MAX_HEAD / 2 * PF_KN * 4)
#define PF_ST  (PF_VI + PF_KN / 2 * ATTN_CPU_MAX_HEAD * 4)
#define PF_END (PF_ST + (int)sizeof(pf_state))
_Static_assert(PF_END <= ATTN_CPU_VSCRATCH - 64, "panel scratch too small");
/* the fp32 pieces widen a chunk into [PF_KN][MAX_HEAD] fp32 K, then V */
_Static_assert(2 * PF_KN * ATTN_CPU_MAX_HEAD * 4 <= PF_ST, "fp32 chunk overlaps the state");
/* hi and lo query planes of the widest job */
_Static_assert(2 * ATTN_CPU_WIDE_ROWS * ATTN_CPU_MAX_HEAD * 2 <= ATTN_CPU_WIDE_QBUF, "qbuf");

static inline pf_state *pf_st(const attn__cpu_job *j)
{
    return (pf_state *)((char *)j->scratch + PF_ST);
}

static inline char *pf_at(const attn__cpu_job *j, int off)
{
    return (char *)j->scratch + off;
}

static bool pf_accepts(const attn__cpu_job *j)
{
    return j->R > ATTN_CPU_PF_MIN_ROWS;
}

/* ---- queries ------------------------------------------------------------------ */

/* hi [R][Dp] bf16, then lo [R][Dp] (split precision only) */
static void pf_prep_bf16(attn__cpu_job *j, const void *const *qrows)
{
    int D = j->D, Dp = pad32(D);
    uint16_t *hi = j->qbuf, *lo = hi + (size_t)j->R * Dp;
    float row[ATTN_CPU_MAX_HEAD + 32];
    for (int r = 0; r < j->R; r++) {
        uint16_t *h = hi + (size_t)r * Dp, *l = lo + (size_t)r * Dp;
        if (j->q_elem == ATTN_ELEM_BF16) {
            const uint16_t *q = qrows[r];
            for (int i = 0; i < Dp; i += 32) {
                int left = D - i;
                __mmask32 m = left >= 32 ? 0xffffffffu : (1u << left) - 1u;
                _mm512_storeu_si512(h + i, _mm512_maskz_loadu_epi16(m, q + i));
            }
            continue;
        }
        row_to_f32(row, qrows[r], D, j->q_elem);
        for (int i = D; i < Dp; i++)
            row[i] = 0.0f;
        for (int i = 0; i < Dp; i += 32) {
            __m512 a = _mm512_loadu_ps(row + i), b = _mm512_loadu_ps(row + i + 16);
            __m512i hw = (__m512i)_mm512_cvtne2ps_pbh(b, a);
            __m512 ah = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hw)), 16));
            __m512 bh = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hw, 1)), 16));
            _mm512_storeu_si512(h + i, hw);
            _mm512_storeu_si512(
                l + i, (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bh), _mm512_sub_ps(a, ah)));
        }
    }
}

/* ---- packing ---------------------------------------------------------------------- */

/* kt[p][t] = the bf16 pair (k[t][2p], k[t][2p + 1]) for the panel's keys,
 * zero past n up to the next multiple of 16 */
static void pf_pack_k(const attn__cpu_job *j, const pf_state *ps, int n)
{
    int np = pad32(j->D) / 2, nv = pad16(n) / 16;
    uint32_t *kt = (uint32_t *)pf_at(j, PF_KT);
    for (int t0 = 0; t0 < nv * 16; t0 += 16)
        for (int p0 = 0; p0 < np; p0 += 16) {
            __m512i r[16];
            for (int t = 0; t < 16; t++)
                r[t] = t0 + t < n ? _mm512_loadu_si512(ps->k[t0 + t] + 2 * p0)
                                  : _mm512_setzero_si512();
            transpose16(r);
            for (int p = 0; p < 16; p++)
                _mm512_store_si512(kt + (size_t)(p0 + p) * PF_KN + t0, r[p]);
        }
}

/* vi[tp][d] = the bf16 pair (v[2tp][d], v[2tp + 1][d]), zero past n */
static void pf_pack_v(const attn__cpu_job *j, const pf_state *ps, int n)
{
    static const uint16_t ilo_tab[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                         37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                         11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i ilo = _mm512_loadu_si512(ilo_tab);
    const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    int Dvp = pad32(j->Dv);
    uint32_t *vi = (uint32_t *)pf_at(j, PF_VI);
    for (int tp = 0; tp < (n + 1) / 2; tp++) {
        const uint16_t *v0 = ps->v[2 * tp], *v1 = 2 * tp + 1 < n ? ps->v[2 * tp + 1] : NULL;
        uint32_t *dst = vi + (size_t)tp * ATTN_CPU_MAX_HEAD;
        for (int d = 0; d < Dvp; d += 32) {
            __m512i a = _mm512_loadu_si512(v0 + d);
            __m512i b = v1 ? _mm512_loadu_si512(v1 + d) : _mm512_setzero_si512();
            _mm512_store_si512(dst + d, _mm512_permutex2var_epi16(a, ilo, b));
            _mm512_store_si512(dst + d + 16, _mm512_permutex2var_epi16(a, ihi, b));
        }
    }
}

/* ---- the register blocks ---------------------------------------------------------- */

/* s rows = PF_RB query rows x NV key vectors over np head pairs; q[i] and
 * ql[i] are the rows' hi / lo pairs (rows past nr repeat row 0) */
static inline __attribute__((always_inline)) void
pf_qk_blk(const uint32_t *kt, const uint32_t *const *q, const uint32_t *const *ql, int np, int nr,
          float *s, const int NV, const bool SPLIT)
{
    __m512 acc[PF_RB][4];
#pragma GCC unroll 6
    for (int i = 0; i < PF_RB; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[i][v] = _mm512_setzero_ps();
    for (int p = 0; p < np; p++) {
        const uint32_t *kp = kt + (size_t)p * PF_KN;
        __m512bh k[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            k[v] = (__m512bh)_mm512_load_si512(kp + 16 * v);
#pragma GCC unroll 6
        for (int i = 0; i < PF_RB; i++) {
            __m512bh b = (__m512bh)_mm512_set1_epi32((int)q[i][p]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                acc[i][v] = _mm512_dpbf16_ps(acc[i][v], k[v], b);
            if (SPLIT) {
                b = (__m512bh)_mm512_set1_epi32((int)ql[i][p]);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
                    acc[i][v] = _mm512_dpbf16_ps(acc[i][v], k[v], b);
            }
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < PF_RB; i++)
        if (i < nr)
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                _mm512_storeu_ps(s + (size_t)i * ATTN_CPU_CHUNK + 16 * v, acc[i][v]);
}

/* O rows [d0, d0 + 16 NV) = alpha O + P V over npairs key pairs; p[i] and
 * pl[i] are the rows' hi / lo probability pairs (rows past nr repeat row 0:
 * they compute and store row 0's values again) */
static inline __attribute__((always_inline)) void
pf_pv_blk(const uint32_t *vi, const uint32_t *const *p, const uint32_t *const *pl, float *const *o,
          const float *al, int npairs, int d0, const int NV, const bool SPLIT)
{
    __m512 c[PF_RB][4];
#pragma GCC unroll 6
    for (int i = 0; i < PF_RB; i++) {
        __m512 a = _mm512_set1_ps(al[i]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            c[i][v] = _mm512_mul_ps(_mm512_loadu_ps(o[i] + d0 + 16 * v), a);
    }
    for (int tp = 0; tp < npairs; tp++) {
        const uint32_t *vp = vi + (size_t)tp * ATTN_CPU_MAX_HEAD + d0;
        __m512bh w[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            w[v] = (__m512bh)_mm512_load_si512(vp + 16 * v);
#pragma GCC unroll 6
        for (int i = 0; i < PF_RB; i++) {
            __m512bh b = (__m512bh)_mm512_set1_epi32((int)p[i][tp]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                c[i][v] = _mm512_dpbf16_ps(c[i][v], w[v], b);
            if (SPLIT) {
                b = (__m512bh)_mm512_set1_epi32((int)pl[i][tp]);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
                    c[i][v] = _mm512_dpbf16_ps(c[i][v], w[v], b);
            }
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < PF_RB; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            _mm512_storeu_ps(o[i] + d0 + 16 * v, c[i][v]);
}

/* The two products of one row block, one function per precision (the
 * number of key vectors and output lanes chosen inside, per call). */
typedef struct {
    const uint32_t *q[PF_RB], *ql[PF_RB]; /* query pairs */
    const uint32_t *p[PF_RB], *pl[PF_RB]; /* probability pairs (in the score rows) */
    float *o[PF_RB];
    float al[PF_RB];
    int nr;
} pf_blk;

static void pf_qk_bf16(const uint32_t *kt, const pf_blk *b, int np, int nv, float *s)
{
    switch (nv) {
    case 1: pf_qk_blk(kt, b->q, b->ql, np, b->nr, s, 1, false); break;
    case 2: pf_qk_blk(kt, b->q, b->ql, np, b->nr, s, 2, false); break;
    case 3: pf_qk_blk(kt, b->q, b->ql, np, b->nr, s, 3, false); break;
    default: pf_qk_blk(kt, b->q, b->ql, np, b->nr, s, 4, false); break;
    }
}

static void pf_qk_split(const uint32_t *kt, const pf_blk *b, int np, int nv, float *s)
{
    switch (nv) {
    case 1: pf_qk_blk(kt, b->q, b->ql, np, b->nr, s, 1, true); break;
    case 2: pf_qk_blk(kt, b->q, b->ql, np, b->nr, s, 2, true); break;
    case 3: pf_qk_blk(kt, b->q, b->ql, np, b->nr, s, 3, true); break;
    default: pf_qk_blk(kt, b->q, b->ql, np, b->nr, s, 4, true); break;
    }
}

static void pf_pv_bf16(const uint32_t *vi, const pf_blk *b, int npairs, int Dvp)
{
    int d0 = 0;
    for (; d0 + 64 <= Dvp; d0 += 64)
        pf_pv_blk(vi, b->p, b->pl, b->o, b->al, npairs, d0, 4, false);
    if (d0 < Dvp) pf_pv_blk(vi, b->p, b->pl, b->o, b->al, npairs, d0, 2, false);
}

static void pf_pv_split(const uint32_t *vi, const pf_blk *b, int npairs, int Dvp)
{
    int d0 = 0;
    for (; d0 + 64 <= Dvp; d0 += 64)
        pf_pv_blk(vi, b->p, b->pl, b->o, b->al, npairs, d0, 4, true);
    if (d0 < Dvp) pf_pv_blk(vi, b->p, b->pl, b->o, b->al, npairs, d0, 2, true);
}

/* The online-softmax step of row r over the panel's scores (softmax_row of
 * cpu_attn_tmpl.h, the same arithmetic, on the nv key vectors the row block
 * computed, in registers) and its probabilities as bf16 pairs in place: hi
 * pairs over the row's first 128 bytes, lo pairs (split) the next 128.
 * Returns the factor of the row's earlier output, or -1 when the row sees
 * none of the keys (nothing written). */
static float pf_softmax_pack(attn__cpu_job *j, int r, int n, int key0, bool masked, int nv,
                             bool split)
{
    float *s = j->s + (size_t)r * ATTN_CPU_CHUNK;
    int lo = 0, hi = n - 1;
    if (masked) {
        if (j->lo[r] - key0 > lo) lo = j->lo[r] - key0;
        if (j->hi[r] - key0 < hi) hi = j->hi[r] - key0;
        if (lo > hi) return -1.0f;
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(j->qk_scale);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 x[4], mx = ninf;
    for (int v = 0; v < 4; v++) {
        if (v >= nv) {
            x[v] = ninf;
            continue;
        }
        __m512 y = _mm512_mul_ps(_mm512_loadu_ps(s + 16 * v), sc);
        if (j->softcap > 0.0f) y = softcap16(y, j->softcap);
        if (j->slope) {
            __m512 rel = _mm512_add_ps(_mm512_cvtepi32_ps(iota),
                                       _mm512_set1_ps((float)(key0 - j->pos[r] + 16 * v)));
            y = _mm512_fmadd_ps(_mm512_set1_ps(j->slope[r]), rel, y);
        }
        __m512i idx = _mm512_add_epi32(iota, _mm512_set1_epi32(16 * v));
        __mmask16 in = _mm512_cmpge_epi32_mask(idx, _mm512_set1_epi32(lo)) &
                       _mm512_cmple_epi32_mask(idx, _mm512_set1_epi32(hi));
        x[v] = _mm512_mask_blend_ps(in, ninf, y);
        mx = _mm512_max_ps(mx, x[v]);
    }
    float cmax = _mm512_reduce_max_ps(mx);
    float mold = j->m[r];
    float mnew = mold > cmax ? mold : cmax;
    float alpha = j->l[r] > 0.0f ? expf(mold - mnew) : 0.0f;
    __m512 vm = _mm512_set1_ps(mnew), sum = _mm512_setzero_ps();
    for (int v = 0; v < 4; v++) {
        if (v >= nv) {
            x[v] = _mm512_setzero_ps();
            continue;
        }
        __mmask16 live = _mm512_cmp_ps_mask(x[v], ninf, _CMP_NEQ_OQ);
        x[v] = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(x[v], vm)));
        sum = _mm512_add_ps(sum, x[v]);
    }
    j->l[r] = j->l[r] * alpha + _mm512_reduce_add_ps(sum);
    j->m[r] = mnew;
    __m512i h0 = (__m512i)_mm512_cvtne2ps_pbh(x[1], x[0]);
    __m512i h1 = (__m512i)_mm512_cvtne2ps_pbh(x[3], x[2]);
    if (split) {
        __m512i h[2] = {h0, h1}, l[2];
        for (int i = 0; i < 2; i++) {
            __m512 a = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h[i])), 16));
            __m512 b = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h[i], 1)), 16));
            l[i] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(x[2 * i + 1], b),
                                                _mm512_sub_ps(x[2 * i], a));
        }
        _mm512_storeu_si512(s + 32, l[0]);
        _mm512_storeu_si512(s + 48, l[1]);
    }
    _mm512_storeu_si512(s, h0);
    _mm512_storeu_si512(s + 16, h1);
    return alpha;
}

/* ---- the panel ---------------------------------------------------------------------- */

/* The keys rows r0 .. r0 + nr - 1 see in the panel (keys [key0, key0 + n)):
 * the last one (relative; -1 when none) */
static int pf_blk_last(const attn__cpu_job *j, int r0, int nr, int key0, int n, bool masked)
{
    if (!masked) return n - 1;
    int last = -1;
    for (int i = 0; i < nr; i++) {
        int r = r0 + i, lo = j->lo[r] - key0, hi = j->hi[r] - key0;
        if (hi > n - 1) hi = n - 1;
        if (lo < 0) lo = 0;
        if (lo <= hi && hi > last) last = hi;
    }
    return last;
}

static void pf_flush(attn__cpu_job *j, pf_state *ps)
{
    int n = ps->n, key0 = ps->key0;
    bool masked = ps->masked, split = j->prec == ATTN_CPU_PREC_SPLIT;
    ps->n = 0;
    pf_pack_k(j, ps, n);
    pf_pack_v(j, ps, n);
    const uint32_t *kt = (const uint32_t *)pf_at(j, PF_KT), *vi = (const uint32_t *)pf_at(j, PF_VI);
    int Dp = pad32(j->D), np = Dp / 2, Dvp = pad32(j->Dv);
    const uint32_t *qh = j->qbuf, *ql = qh + (size_t)j->R * np;
    for (int r0 = 0, blk = 0; r0 < j->R; r0 += PF_RB, blk++) {
        prefetch_next(j, blk); /* the next panel's first chunk, a row per block */
        pf_blk b;
        b.nr = j->R - r0 < PF_RB ? j->R - r0 : PF_RB;
        int last = pf_blk_last(j, r0, b.nr, key0, n, masked);
        if (last < 0) continue; /* no row of the block sees these keys: nothing changes */
        for (int i = 0; i < PF_RB; i++) {
            int r = r0 + (i < b.nr ? i : 0);
            b.q[i] = qh + (size_t)r * np;
            b.ql[i] = ql + (size_t)r * np;
            b.p[i] = (const uint32_t *)(j->s + (size_t)r * ATTN_CPU_CHUNK);
            b.pl[i] = b.p[i] + 32;
            b.o[i] = j->o + (size_t)r * j->o_stride;
        }
        float *s = j->s + (size_t)r0 * ATTN_CPU_CHUNK;
        int nv = last / 16 + 1;
        if (split)
            pf_qk_split(kt, &b, np, nv, s);
        else
            pf_qk_bf16(kt, &b, np, nv, s);
        for (int i = 0; i < b.nr; i++) {
            float a = pf_softmax_pack(j, r0 + i, n, key0, masked, nv, split);
            if (a < 0.0f) { /* sees none of these keys: P = 0, O unchanged */
                memset(s + (size_t)i * ATTN_CPU_CHUNK, 0, sizeof(float) * ATTN_CPU_CHUNK);
                a = 1.0f;
            }
            b.al[i] = a;
        }
        for (int i = b.nr; i < PF_RB; i++)
            b.al[i] = b.al[0];
        if (split)
            pf_pv_split(vi, &b, last / 2 + 1, Dvp);
        else
            pf_pv_bf16(vi, &b, last / 2 + 1, Dvp);
    }
}

/* bf16 / fp8 chunks join the panel (rows staged when they are not usable in
 * place); a full panel, or one the chunk does not continue, is computed */
static void pf_panel_chunk(attn__cpu_job *j, pf_state *ps, const void *k, const void *v,
                           int64_t stride, int n, int key0, bool masked)
{
    if (ps->n && (key0 != ps->key0 + ps->n || ps->n + n > PF_KN)) pf_flush(j, ps);
    if (!ps->n) {
        ps->key0 = key0;
        ps->masked = false;
    }
    ps->masked |= masked;
    int D = j->D, Dv = j->Dv, Dp = pad32(D), Dvp = pad32(Dv), at = ps->n;
    if (!ps->stage) {
        for (int t = 0; t < n; t++) {
            ps->k[at + t] = (const uint16_t *)k + t * stride;
            ps->v[at + t] = (const uint16_t *)v + t * stride;
        }
    } else {
        /* staged rows: Dp (Dvp) elements, zero past D (Dv) */
        uint16_t *kb = (uint16_t *)pf_at(j, PF_KB) + (size_t)at * Dp;
        uint16_t *vb = (uint16_t *)pf_at(j, PF_VB) + (size_t)at * Dvp;
        if (j->kv_elem == ATTN_ELEM_BF16) {
            for (int t = 0; t < n; t++) {
                const uint16_t *kr = (const uint16_t *)k + t * stride;
                const uint16_t *vr = (const uint16_t *)v + t * stride;
                for (int i = 0; i < Dp; i += 32) {
                    __mmask32 m = D - i >= 32 ? 0xffffffffu : (1u << (D - i)) - 1u;
                    _mm512_storeu_si512(kb + (size_t)t * Dp + i,
                                        _mm512_maskz_loadu_epi16(m, kr + i));
                }
                for (int i = 0; i < Dvp; i += 32) {
                    __mmask32 m = Dv - i >= 32 ? 0xffffffffu : (1u << (Dv - i)) - 1u;
                    _mm512_storeu_si512(vb + (size_t)t * Dvp + i,
                                        _mm512_maskz_loadu_epi16(m, vr + i));
                }
            }
        } else {
            attn__cpu_fp8_rows_bf16(kb, Dp, k, stride, n, D, ps->e4m3);
            attn__cpu_fp8_rows_bf16(vb, Dvp, v, stride, n, Dv, ps->e4m3);
        }
        for (int t = 0; t < n; t++) {
            ps->k[at + t] = kb + (size_t)t * Dp;
            ps->v[at + t] = vb + (size_t)t * Dvp;
        }
    }
    ps->n += n;
    if (ps->n == PF_KN) pf_flush(j, ps);
}

/* fp16 / fp32 caches: the chunk widened to fp32 once, then the fp32 FMA
 * path on pieces of at most ATTN_CPU_MAX_ROWS rows */
static void pf_f32_chunk(attn__cpu_job *j, pf_state *ps, const void *k, const void *v,
                         int64_t stride, int n, int key0, bool masked)
{
    (void)ps;
    int Dp = pad16(j->D), Dvp = pad16(j->Dv);
    float *kf = j->scratch, *vf = kf + (size_t)PF_KN * ATTN_CPU_MAX_HEAD;
    size_t es = attn_elem_size(j->kv_elem);
    for (int t = 0; t < n; t++) {
        prefetch_next(j, t);
        row_to_f32(kf + (size_t)t * Dp, (const char *)k + (size_t)(t * stride) * es, j->D,
                   j->kv_elem);
        row_to_f32(vf + (size_t)t * Dvp, (const char *)v + (size_t)(t * stride) * es, j->Dv,
                   j->kv_elem);
    }
    for (int r0 = 0; r0 < j->R; r0 += ATTN_CPU_MAX_ROWS) {
        attn__cpu_job p = *j;
        p.R = j->R - r0 < ATTN_CPU_MAX_ROWS ? j->R - r0 : ATTN_CPU_MAX_ROWS;
        p.qbuf = (float *)j->qbuf + (size_t)r0 * Dp;
        p.o = j->o + (size_t)r0 * j->o_stride;
        p.m = j->m + r0;
        p.l = j->l + r0;
        p.pos = j->pos + r0;
        p.lo = j->lo + r0;
        p.hi = j->hi + r0;
        if (j->slope) p.slope = j->slope + r0;
        f32_qk(&p, kf, n);
        float alpha[ATTN_CPU_MAX_ROWS];
        for (int r = 0; r < p.R; r++)
            alpha[r] = softmax_row(&p, r, n, key0, masked);
        f32_pv(&p, vf, n, alpha);
    }
}

static void pf_prep(attn__cpu_job *j, const void *const *qrows)
{
    pf_state *ps = pf_st(j);
    ps->n = 0;
    if (j->kv_elem == ATTN_ELEM_F32 || j->kv_elem == ATTN_ELEM_F16) {
        f32_prep_q(j, qrows);
        ps->chunk = pf_f32_chunk;
        return;
    }
    pf_prep_bf16(j, qrows);
    ps->chunk = pf_panel_chunk;
    ps->stage = j->kv_elem != ATTN_ELEM_BF16 || j->D % 32 != 0 || j->Dv % 32 != 0;
    ps->e4m3 = j->kv_elem == ATTN_ELEM_FP8_E4M3;
}

static void pf_chunk(attn__cpu_job *j, const void *k, const void *v, int64_t stride, int n,
                     int key0, bool masked)
{
    pf_state *ps = pf_st(j);
    ps->chunk(j, ps, k, v, stride, n, key0, masked);
}

static void pf_finish(attn__cpu_job *j)
{
    pf_state *ps = pf_st(j);
    if (ps->chunk == pf_panel_chunk && ps->n) pf_flush(j, ps);
}

const attn__cpu_isa attn__cpu_isa_prefill_bf16 = {
    .name = "avx512-bf16-prefill",
    .usable = NULL,
    .prep_q = pf_prep,
    .chunk = pf_chunk,
    .finish = pf_finish,
    .accepts = pf_accepts,
};
