/* CPU_ATTN rows: one tile's rows for one KV head (or several interleaved
 * decode heads) walked chunk by chunk through the variant's micro-kernel,
 * and the finished rows written out (sink, cascade prefix, LSE) or left as
 * split partials. */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_fwd.h"
#include "backends/reference/reference.h"
#include "util/numeric.h"

void attn__cpu_plan_tile(const attn__cpu_fwd_ctx *c, int r, int i0, int n, attn__cpu_tile *t)
{
    const attn_common_metadata *cm = c->a->common;
    int qlen = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
    int kv = attn__fwd_kv_len(c->a, r);
    int pos_first = kv - qlen + i0;
    int lo = 0, hi = kv;
    if (c->causal && pos_first + n < hi) hi = pos_first + n;
    if (c->window > 0 && pos_first - c->window + 1 > lo) lo = pos_first - c->window + 1;
    if (hi < lo) hi = lo;
    t->req = r;
    t->q0 = cm->query_start_loc[r] + i0;
    t->nq = n;
    t->kb = lo;
    t->ke = hi;
    t->part = -1;
    t->flags = 0;
    t->cost = 0;
}

static void store_bf16_sse(uint16_t *out, const float *o, float inv, int n)
{
    for (int d = 0; d < n; d++)
        out[d] = attn__f32_to_bf16(o[d] * inv);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The same loop, vectorised 8 wide (same integer rounding, same bits): at
 * SSE2 width the store is about a fifth of a 16-key decode's time
 * (docs/perf/decode-overhead-issue18.md). */
__attribute__((target("avx2"))) static void store_bf16_avx2(uint16_t *out, const float *o,
                                                            float inv, int n)
{
    for (int d = 0; d < n; d++)
        out[d] = attn__f32_to_bf16(o[d] * inv);
}

/* 16 wide with mask registers (the AVX2 loop's code is 2.6 instructions an
 * element); the same rounding as attn__f32_to_bf16: NaN quietened, else
 * round to nearest even */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
store_bf16_avx512(uint16_t *out, const float *o, float inv, int n)
{
    const __m512 s = _mm512_set1_ps(inv);
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x400000);
    int d = 0;
    for (; d + 16 <= n; d += 16) {
        __m512i u = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(o + d), s));
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
        __m512i r = _mm512_add_epi32(
            u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
        r = _mm512_mask_or_epi32(r, nan, u, quiet);
        _mm256_storeu_si256((__m256i *)(out + d), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
    }
    for (; d < n; d++)
        out[d] = attn__f32_to_bf16(o[d] * inv);
}
#endif

static void store_bf16(const attn__cpu_fwd_ctx *c, uint16_t *out, const float *o, float inv, int n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (c->store_isa == 2) {
        store_bf16_avx512(out, o, inv, n);
        return;
    }
    if (c->store_isa == 1) {
        store_bf16_avx2(out, o, inv, n);
        return;
    }
#else
    (void)c;
#endif
    store_bf16_sse(out, o, inv, n);
}

void attn__cpu_finish_row(const attn__cpu_fwd_ctx *c, int64_t tok, int head, float *o, float m,
                          float l, const float *prefix)
{
    const attn_forward_args *a = c->a;
    int Dv = c->Dv;
    if (prefix && prefix[Dv + 1] > 0.0f) {
        float pm = prefix[Dv], pl = prefix[Dv + 1];
        if (l > 0.0f) {
            float M = m > pm ? m : pm;
            float fa = expf(m - M), fb = expf(pm - M);
            for (int d = 0; d < Dv; d++)
                o[d] = o[d] * fa + prefix[d] * fb;
            l = l * fa + pl * fb;
            m = M;
        } else {
            for (int d = 0; d < Dv; d++)
                o[d] = prefix[d];
            l = pl;
            m = pm;
        }
    }
    if (a->layer->sinks) {
        float sk = a->layer->sinks[head];
        if (l > 0.0f) {
            float M = m > sk ? m : sk;
            float fa = expf(m - M);
            for (int d = 0; d < Dv; d++)
                o[d] *= fa;
            l = l * fa + expf(sk - M);
            m = M;
        } else {
            for (int d = 0; d < Dv; d++)
                o[d] = 0.0f;
            l = 1.0f;
            m = sk;
        }
    }
    size_t base = (size_t)(tok * c->H + head) * (size_t)Dv;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    switch (c->q_elem) {
    case ATTN_ELEM_F32: {
        float *out = (float *)a->out + base;
        for (int d = 0; d < Dv; d++)
            out[d] = o[d] * inv;
        break;
    }
    case ATTN_ELEM_BF16: store_bf16(c, (uint16_t *)a->out + base, o, inv, Dv); break;
    default: {
        uint16_t *out = (uint16_t *)a->out + base;
        for (int d = 0; d < Dv; d++)
            out[d] = attn__f32_to_f16(o[d] * inv);
        break;
    }
    }
    if (a->lse) a->lse[tok * c->H + head] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/* Where the key chunk starting at key j lies (at most ATTN_CPU_CHUNK keys,
 * never crossing a block, never past kmax). */
typedef struct {
    const char *k, *v;
    int64_t stride;
    int n;
} chunk_ref;

static void chunk_at(const attn__cpu_fwd_ctx *c, int32_t tok0, const int32_t *bt, int kvh, int j,
                     int kmax, chunk_ref *r)
{
    const attn_forward_args *a = c->a;
    int n = kmax - j + 1 < ATTN_CPU_CHUNK ? kmax - j + 1 : ATTN_CPU_CHUNK;
    if (a->k) {
        int64_t tk = (int64_t)tok0 + j;
        r->k = (const char *)a->k + ((tk * c->KVH + kvh) * c->D) * (int64_t)c->q_esz;
        r->v = (const char *)a->v + ((tk * c->KVH + kvh) * c->Dv) * (int64_t)c->q_esz;
        r->stride = (int64_t)c->KVH * c->D;
    } else {
        const attn_kv_view *kv = a->kv;
        int bs = kv->block_size;
        int off = j % bs;
        if (bs - off < n) n = bs - off;
        int64_t base = bt[j / bs] * kv->stride_block + (int64_t)off * kv->stride_token +
                       (int64_t)kvh * kv->stride_head;
        r->k = (const char *)kv->data + (kv->k_offset + base) * (int64_t)c->kv_esz;
        r->v = (const char *)kv->data + (kv->v_offset + base) * (int64_t)c->kv_esz;
        r->stride = kv->stride_token;
    }
    r->n = n;
}

/* The rows of a tile for one head group: per row (token i, head g) its
 * position and visible keys (the same for every head), and the key range
 * all rows together see. */
typedef struct {
    int Gs, R;
    int kmin, kmax, lo_max, hi_min;
} rows_info;

static void rows_setup(const attn__cpu_fwd_ctx *c, const attn__cpu_tile *t, int hgi,
                       attn__cpu_scratch *sc, rows_info *ri)
{
    const attn_forward_args *a = c->a;
    const int32_t *qsl = a->common->query_start_loc;
    int Gs = c->G - hgi * ATTN_CPU_MAX_ROWS;
    if (Gs > ATTN_CPU_MAX_ROWS) Gs = ATTN_CPU_MAX_ROWS;
    bool prefix = t->flags & ATTN_CPU_TILE_PREFIX;
    int req = t->req;
    ri->Gs = Gs;
    ri->R = t->nq * Gs;
    ri->kmin = INT32_MAX;
    ri->kmax = -1;
    ri->lo_max = -1;
    ri->hi_min = INT32_MAX;
    for (int i = 0; i < t->nq; i++) {
        int tok = t->q0 + i;
        if (prefix)
            while (qsl[req + 1] <= tok)
                req++;
        int qlen = qsl[req + 1] - qsl[req];
        int kv = attn__fwd_kv_len(a, req);
        int pos = kv - qlen + (tok - qsl[req]);
        int lo = t->kb, hi = t->ke - 1;
        if (c->window > 0 && pos - c->window + 1 > lo) lo = pos - c->window + 1;
        if (c->causal && pos < hi) hi = pos;
        if (kv - 1 < hi) hi = kv - 1;
        if (lo < ri->kmin) ri->kmin = lo;
        if (hi > ri->kmax) ri->kmax = hi;
        if (lo > ri->lo_max) ri->lo_max = lo;
        if (hi < ri->hi_min) ri->hi_min = hi;
        for (int g = 0; g < Gs; g++) {
            int r = i * Gs + g;
            sc->pos[r] = pos;
            sc->lo[r] = lo;
            sc->hi[r] = hi;
        }
    }
}

/* The job of KV head kvh (query heads h0 .. h0 + Gs - 1) over the rows of
 * ri, with its own row state, output rows, queries and scratch; its query
 * row pointers go to qrows. */
static attn__cpu_job job_make(const attn__cpu_fwd_ctx *c, const attn__cpu_tile *t,
                              const rows_info *ri, int kvh, int h0, const attn__cpu_scratch *sc,
                              float *slope, float *m, float *l, float *o, void *qbuf, void *scratch,
                              float *s, const void **qrows)
{
    const attn_forward_args *a = c->a;
    for (int i = 0; i < t->nq; i++)
        for (int g = 0; g < ri->Gs; g++) {
            int r = i * ri->Gs + g;
            qrows[r] = (const char *)a->q + ((size_t)(t->q0 + i) * c->H + h0 + g) * c->D * c->q_esz;
            slope[r] = a->layer->alibi_slopes ? a->layer->alibi_slopes[h0 + g] : 0.0f;
            m[r] = -INFINITY;
            l[r] = 0.0f;
        }
    attn__cpu_job job = {
        .R = ri->R,
        .D = c->D,
        .Dv = c->Dv,
        .q_elem = c->q_elem,
        .kv_elem = a->k ? c->q_elem : a->kv->elem,
        .prec = c->prec,
        .qk_scale = c->scale * (a->k ? 1.0f : attn__kv_scale(a->kv, kvh, false)),
        .softcap = a->layer->logits_soft_cap,
        .slope = a->layer->alibi_slopes ? slope : NULL,
        .pos = sc->pos,
        .lo = sc->lo,
        .hi = sc->hi,
        .qbuf = qbuf,
        .o = o,
        .o_stride = (c->Dv + 31) & ~31, /* variants write whole 32-lane blocks */
        .m = m,
        .l = l,
        .s = s,
        .scratch = scratch,
    };
    memset(o, 0, sizeof(float) * (size_t)ri->R * (size_t)job.o_stride);
    return job;
}

/* Each finished row of a job (V dequantisation applied here) to the
 * output or to its split partial. */
static void rows_finish(const attn__cpu_fwd_ctx *c, const attn__cpu_tile *t, const rows_info *ri,
                        int kvh, int h0, const attn__cpu_job *job)
{
    float vscale = c->a->k ? 1.0f : attn__kv_scale(c->a->kv, kvh, true);
    for (int i = 0; i < t->nq; i++) {
        int tok = t->q0 + i;
        for (int g = 0; g < ri->Gs; g++) {
            int r = i * ri->Gs + g;
            float *o = job->o + (size_t)r * job->o_stride;
            if (vscale != 1.0f)
                for (int d = 0; d < c->Dv; d++)
                    o[d] *= vscale;
            if (t->part >= 0) {
                float *p = attn__cpu_partial_row(c, t->part + i, h0 + g);
                memcpy(p, o, sizeof(float) * (size_t)c->Dv);
                p[c->Dv] = job->m[r];
                p[c->Dv + 1] = job->l[r];
            } else {
                const float *pre = (t->flags & ATTN_CPU_TILE_MERGE_PREFIX)
                                       ? attn__cpu_partial_row(c, tok, h0 + g)
                                       : NULL;
                attn__cpu_finish_row(c, tok, h0 + g, o, job->m[r], job->l[r], pre);
            }
        }
    }
}

static void set_prefetch(attn__cpu_job *job, const chunk_ref *next)
{
    job->pf_k = next ? next->k : NULL;
    job->pf_v = next ? next->v : NULL;
    job->pf_n = next ? next->n : 0;
    job->pf_stride = next ? next->stride : 0;
}

static void run_rows(attn__cpu_fwd_ctx *c, const attn__cpu_tile *t, int kvh, int hgi,
                     attn__cpu_scratch *sc)
{
    const attn_forward_args *a = c->a;
    const int32_t *qsl = a->common->query_start_loc;
    rows_info ri;
    rows_setup(c, t, hgi, sc, &ri);
    int h0 = kvh * c->G + hgi * ATTN_CPU_MAX_ROWS;
    attn__cpu_job job = job_make(c, t, &ri, kvh, h0, sc, sc->slope, sc->m, sc->l, sc->o, sc->qbuf,
                                 sc->vs, sc->s, sc->qrows);
    if (ri.kmin <= ri.kmax) {
        const attn__cpu_isa *k = c->isa;
        if (k->first && k->first->accepts(&job)) k = k->first;
        k->prep_q(&job, sc->qrows);
        const int32_t *bt =
            a->k ? NULL : a->common->block_table + (int64_t)t->req * a->common->block_table_stride;
        chunk_ref cur, nxt = {0};
        chunk_at(c, qsl[t->req], bt, kvh, ri.kmin, ri.kmax, &cur);
        for (int j = ri.kmin; j <= ri.kmax;) {
            int n = cur.n;
            /* the next chunk's rows are prefetched while this one computes */
            bool more = j + n <= ri.kmax;
            if (more) chunk_at(c, qsl[t->req], bt, kvh, j + n, ri.kmax, &nxt);
            set_prefetch(&job, more ? &nxt : NULL);
            bool masked = !(j >= ri.lo_max && j + n - 1 <= ri.hi_min);
            k->chunk(&job, cur.k, cur.v, cur.stride, n, j, masked);
            j += n;
            cur = nxt;
        }
        if (k->finish) k->finish(&job);
    }
    rows_finish(c, t, &ri, kvh, h0, &job);
}

/* Decode rows of KV heads kvh0 .. kvh0 + nh - 1 on one thread, one job per
 * head, walked block-major: the chunks of a KV block head after head, so
 * the cache is read in address order (per head a block is one contiguous
 * run; the heads of a block follow each other). Only for jobs the
 * streaming decode kernel takes (c->MH > 1), whose head group is the
 * whole GQA group (G <= ATTN_CPU_SD_ROWS), over a paged cache (builder
 * tiles; direct K/V runs without a builder). */
void attn__cpu_run_rows_heads(attn__cpu_fwd_ctx *c, const attn__cpu_tile *t, int kvh0, int nh,
                              attn__cpu_scratch *sc)
{
    const attn_forward_args *a = c->a;
    const int32_t *qsl = a->common->query_start_loc;
    attn__cpu_dec_scratch *dh = &sc->dh;
    rows_info ri;
    rows_setup(c, t, 0, sc, &ri);
    attn__cpu_job job[ATTN_CPU_DEC_HEADS];
    const attn__cpu_isa *k = c->isa->first;
    for (int h = 0; h < nh; h++) {
        job[h] = job_make(c, t, &ri, kvh0 + h, (kvh0 + h) * c->G, sc, dh->slope[h], dh->m[h],
                          dh->l[h], dh->o[h], dh->qbuf[h], dh->vs[h], sc->s, sc->qrows);
        if (ri.kmin > ri.kmax) continue;
        k->prep_q(&job[h], sc->qrows);
        if (k->park) k->park(&job[h]);
    }
    if (ri.kmin <= ri.kmax) {
        const int32_t *bt =
            a->common->block_table + (int64_t)t->req * a->common->block_table_stride;
        int span = a->kv->block_size;
        int tok0 = qsl[t->req];
        for (int j0 = ri.kmin; j0 <= ri.kmax;) {
            int j1 = (j0 / span + 1) * span - 1; /* last key of this block */
            if (j1 > ri.kmax) j1 = ri.kmax;
            for (int h = 0; h < nh; h++) {
                if (k->resume) k->resume(&job[h]);
                chunk_ref cur, nxt;
                chunk_at(c, tok0, bt, kvh0 + h, j0, j1, &cur);
                for (int j = j0; j <= j1;) {
                    int n = cur.n;
                    /* prefetch the chunk that runs next: this head's next
                     * one, else the next head's (or the next block's) first */
                    bool more = true;
                    if (j + n <= j1)
                        chunk_at(c, tok0, bt, kvh0 + h, j + n, j1, &nxt);
                    else if (h + 1 < nh)
                        chunk_at(c, tok0, bt, kvh0 + h + 1, j0, j1, &nxt);
                    else if (j1 < ri.kmax)
                        chunk_at(c, tok0, bt, kvh0, j1 + 1, ri.kmax, &nxt);
                    else
                        more = false;
                    set_prefetch(&job[h], more ? &nxt : NULL);
                    bool masked = !(j >= ri.lo_max && j + n - 1 <= ri.hi_min);
                    k->chunk(&job[h], cur.k, cur.v, cur.stride, n, j, masked);
                    j += n;
                    if (j <= j1) cur = nxt;
                }
                if (k->park) k->park(&job[h]);
            }
            j0 = j1 + 1;
        }
        if (k->finish)
            for (int h = 0; h < nh; h++)
                k->finish(&job[h]);
    }
    for (int h = 0; h < nh; h++)
        rows_finish(c, t, &ri, kvh0 + h, (kvh0 + h) * c->G, &job[h]);
}

/* A tile with more tokens than one job of the variant holds runs in pieces
 * (wide prefill tiles under a variant without wide rows). */
void attn__cpu_run_tile(attn__cpu_fwd_ctx *c, const attn__cpu_tile *t, int kvh, int hgi,
                        attn__cpu_scratch *sc)
{
    int tt = c->job_tokens;
    if (t->nq <= tt) {
        run_rows(c, t, kvh, hgi, sc);
        return;
    }
    for (int i0 = 0; i0 < t->nq; i0 += tt) {
        attn__cpu_tile p = *t;
        p.q0 = t->q0 + i0;
        p.nq = t->nq - i0 < tt ? t->nq - i0 : tt;
        if (t->part >= 0) p.part = t->part + i0;
        run_rows(c, &p, kvh, hgi, sc);
    }
}
