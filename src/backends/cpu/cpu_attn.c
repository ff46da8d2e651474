/* CPU_ATTN: driver, variant dispatch, self-test and descriptor.
 *
 * Dispatch is decided once: the first forward (or self-test) picks the best
 * variant whose CPU features are usable (attn_cpu_has, which honours
 * ATTN_CPU_MASK) and keeps the pointer; the hot path is one indirect call
 * per key chunk. Tests may force a variant by name.
 *
 * A forward runs up to three parallel phases on the process-wide pool:
 * A) cascade prefix tiles (partials per token), B) all other tiles
 * (decode, split parts, prefill), C) merge of split parts. Each thread works
 * in its own scratch, allocated once per thread (pthread key), never per
 * call. Output rows are normalised, the sink joins the denominator, and the
 * LSE (natural log) is written when asked for. */
#include "backends/cpu/cpu_attn.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/reference/reference.h"
#include "selftest/selftest.h"
#include "util/error.h"
#include "util/numeric.h"
#include "util/threadpool.h"

/* ---- variants --------------------------------------------------------------- */

static const attn__cpu_isa *const g_variants[] = {
#if defined(__x86_64__)
    &attn__cpu_isa_amx_bf16, &attn__cpu_isa_avx512_bf16, &attn__cpu_isa_avx512, &attn__cpu_isa_avx2,
#endif
    &attn__cpu_isa_portable,
};
#define N_VARIANTS ((int)(sizeof g_variants / sizeof g_variants[0]))

static pthread_once_t g_sel_once = PTHREAD_ONCE_INIT;
static const attn__cpu_isa *g_auto;
static _Atomic(const attn__cpu_isa *) g_forced;

static void select_once(void)
{
    for (int i = 0; i < N_VARIANTS; i++)
        if (g_variants[i]->usable()) {
            g_auto = g_variants[i];
            return;
        }
    g_auto = &attn__cpu_isa_portable;
}

int attn__cpu_attn_variant_count(void)
{
    return N_VARIANTS;
}

const attn__cpu_isa *attn__cpu_attn_variant(int i)
{
    return i >= 0 && i < N_VARIANTS ? g_variants[i] : NULL;
}

const attn__cpu_isa *attn__cpu_attn_active(void)
{
    const attn__cpu_isa *f = atomic_load(&g_forced);
    if (f) return f;
    pthread_once(&g_sel_once, select_once);
    return g_auto;
}

attn_status attn__cpu_attn_force_variant(const char *name)
{
    if (!name) {
        atomic_store(&g_forced, NULL);
        return ATTN_OK;
    }
    for (int i = 0; i < N_VARIANTS; i++) {
        if (strcmp(g_variants[i]->name, name) == 0) {
            if (!g_variants[i]->usable())
                return attn__fail(ATTN_UNSUPPORTED,
                                  "CPU_ATTN variant '%s' is not usable on this CPU", name);
            atomic_store(&g_forced, g_variants[i]);
            return ATTN_OK;
        }
    }
    return attn__fail(ATTN_NOT_FOUND, "no CPU_ATTN variant named '%s'", name);
}

/* ---- per-thread scratch ---------------------------------------------------- */

/* one job per KV head of an interleaved decode unit (run_rows_heads) */
typedef struct {
    float slope[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_ROWS];
    float m[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_ROWS], l[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_ROWS];
    _Alignas(64) float o[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_ROWS * ATTN_CPU_MAX_HEAD];
    _Alignas(64) unsigned char qbuf[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_QBUF];
    _Alignas(64) unsigned char vs[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_SCRATCH];
} dec_heads;

typedef struct {
    const void *qrows[ATTN_CPU_MAX_ROWS];
    int32_t pos[ATTN_CPU_MAX_ROWS], lo[ATTN_CPU_MAX_ROWS], hi[ATTN_CPU_MAX_ROWS];
    float slope[ATTN_CPU_MAX_ROWS];
    float m[ATTN_CPU_MAX_ROWS], l[ATTN_CPU_MAX_ROWS];
    _Alignas(64) float s[ATTN_CPU_MAX_ROWS * ATTN_CPU_CHUNK];
    _Alignas(64) float o[ATTN_CPU_MAX_ROWS * ATTN_CPU_MAX_HEAD];
    _Alignas(64) unsigned char qbuf[ATTN_CPU_QBUF];
    _Alignas(64) unsigned char vs[ATTN_CPU_VSCRATCH];
    dec_heads dh;
} thread_scratch;

static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static bool g_scratch_key_ok;

static void scratch_free(void *p)
{
    free(p);
}

static void scratch_key_init(void)
{
    g_scratch_key_ok = pthread_key_create(&g_scratch_key, scratch_free) == 0;
}

/* Once per thread; NULL when out of memory. */
static thread_scratch *get_scratch(void)
{
    pthread_once(&g_scratch_once, scratch_key_init);
    if (!g_scratch_key_ok) return NULL;
    thread_scratch *s = pthread_getspecific(g_scratch_key);
    if (!s) {
        s = aligned_alloc(64, (sizeof(thread_scratch) + 63) / 64 * 64);
        if (!s) return NULL;
        if (pthread_setspecific(g_scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    return s;
}

/* ---- forward ------------------------------------------------------------------ */

typedef struct {
    const attn_forward_args *a;
    const attn__cpu_isa *isa;
    const attn__cpu_md *md;      /* NULL: per-request plan */
    const attn__cpu_tile *tiles; /* the phase's tiles */
    int H, KVH, G, HG, D, Dv;
    int MH; /* > 1: a unit is MH KV heads of a decode tile (run_rows_heads) */
    size_t q_esz, kv_esz;
    attn_elem q_elem;
    bool causal;
    int window;
    float scale;
    attn__cpu_prec prec;
    bool serial; /* too little work to wake the pool for: the caller runs it all */
    atomic_int oom;
} fwd_ctx;

/* The tile the builder would make for tokens [i0, i0+n) of request r. */
static void plan_tile(const fwd_ctx *c, int r, int i0, int n, attn__cpu_tile *t)
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

static float *partial_row(const fwd_ctx *c, int64_t slot, int head)
{
    return c->md->partials + (slot * c->H + head) * (int64_t)(c->Dv + 2);
}

/* Writes one finished row: merges a cascade partial, adds the sink,
 * normalises and stores. o is unnormalised in dequantised units. */
static void finish_row(const fwd_ctx *c, int64_t tok, int head, float *o, float m, float l,
                       const float *prefix)
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
    case ATTN_ELEM_BF16: {
        uint16_t *out = (uint16_t *)a->out + base;
        for (int d = 0; d < Dv; d++)
            out[d] = attn__f32_to_bf16(o[d] * inv);
        break;
    }
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

static void chunk_at(const fwd_ctx *c, int32_t tok0, const int32_t *bt, int kvh, int j, int kmax,
                     chunk_ref *r)
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

static void rows_setup(const fwd_ctx *c, const attn__cpu_tile *t, int hgi, thread_scratch *sc,
                       rows_info *ri)
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
static attn__cpu_job job_make(const fwd_ctx *c, const attn__cpu_tile *t, const rows_info *ri,
                              int kvh, int h0, const thread_scratch *sc, float *slope, float *m,
                              float *l, float *o, void *qbuf, void *scratch, float *s,
                              const void **qrows)
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
static void rows_finish(const fwd_ctx *c, const attn__cpu_tile *t, const rows_info *ri, int kvh,
                        int h0, const attn__cpu_job *job)
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
                float *p = partial_row(c, t->part + i, h0 + g);
                memcpy(p, o, sizeof(float) * (size_t)c->Dv);
                p[c->Dv] = job->m[r];
                p[c->Dv + 1] = job->l[r];
            } else {
                const float *pre =
                    (t->flags & ATTN_CPU_TILE_MERGE_PREFIX) ? partial_row(c, tok, h0 + g) : NULL;
                finish_row(c, tok, h0 + g, o, job->m[r], job->l[r], pre);
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

static void run_rows(fwd_ctx *c, const attn__cpu_tile *t, int kvh, int hgi, thread_scratch *sc)
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
static void run_rows_heads(fwd_ctx *c, const attn__cpu_tile *t, int kvh0, int nh,
                           thread_scratch *sc)
{
    const attn_forward_args *a = c->a;
    const int32_t *qsl = a->common->query_start_loc;
    dec_heads *dh = &sc->dh;
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

/* A tile with more tokens than fit the rows limit runs in pieces. */
static void run_tile(fwd_ctx *c, const attn__cpu_tile *t, int kvh, int hgi, thread_scratch *sc)
{
    int tt = attn__cpu_tile_tokens(c->G);
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

/* unit u of a phase with builder tiles: tile-major so cost order holds */
static void tiles_fn(void *ctx, int64_t b, int64_t e, int tid)
{
    (void)tid;
    fwd_ctx *c = ctx;
    thread_scratch *sc = get_scratch();
    if (!sc) {
        atomic_store(&c->oom, 1);
        return;
    }
    if (c->MH > 1) {
        int per = (c->KVH + c->MH - 1) / c->MH;
        for (int64_t u = b; u < e; u++) {
            int kvh0 = (int)(u % per) * c->MH;
            int nh = c->KVH - kvh0 < c->MH ? c->KVH - kvh0 : c->MH;
            run_rows_heads(c, &c->tiles[u / per], kvh0, nh, sc);
        }
        return;
    }
    int per = c->KVH * c->HG;
    for (int64_t u = b; u < e; u++) {
        const attn__cpu_tile *t = &c->tiles[u / per];
        int rem = (int)(u % per);
        run_tile(c, t, rem / c->HG, rem % c->HG, sc);
    }
}

/* no builder metadata: one unit per (request, KV head, head group) */
static void plain_fn(void *ctx, int64_t b, int64_t e, int tid)
{
    (void)tid;
    fwd_ctx *c = ctx;
    thread_scratch *sc = get_scratch();
    if (!sc) {
        atomic_store(&c->oom, 1);
        return;
    }
    const int32_t *qsl = c->a->common->query_start_loc;
    int per = c->KVH * c->HG;
    int tt = attn__cpu_tile_tokens(c->G);
    for (int64_t u = b; u < e; u++) {
        int r = (int)(u / per), rem = (int)(u % per);
        int qlen = qsl[r + 1] - qsl[r];
        for (int i0 = 0; i0 < qlen; i0 += tt) {
            attn__cpu_tile t;
            plan_tile(c, r, i0, qlen - i0 < tt ? qlen - i0 : tt, &t);
            run_tile(c, &t, rem / c->HG, rem % c->HG, sc);
        }
    }
}

/* phase C: merge the parts of split requests */
static void merge_fn(void *ctx, int64_t b, int64_t e, int tid)
{
    (void)tid;
    fwd_ctx *c = ctx;
    const int32_t *qsl = c->a->common->query_start_loc;
    thread_scratch *sc = get_scratch();
    if (!sc) {
        atomic_store(&c->oom, 1);
        return;
    }
    float *o = sc->o;
    for (int64_t i = b; i < e; i++) {
        const attn__cpu_split *sp = &c->md->splits[i];
        int qlen = qsl[sp->req + 1] - qsl[sp->req];
        for (int q = 0; q < qlen; q++)
            for (int h = 0; h < c->H; h++) {
                float M = -INFINITY;
                for (int p = 0; p < sp->nparts; p++) {
                    const float *pr = partial_row(c, sp->slot0 + (int64_t)p * qlen + q, h);
                    if (pr[c->Dv + 1] > 0.0f && pr[c->Dv] > M) M = pr[c->Dv];
                }
                float l = 0.0f;
                memset(o, 0, sizeof(float) * (size_t)c->Dv);
                if (M > -INFINITY) {
                    for (int p = 0; p < sp->nparts; p++) {
                        const float *pr = partial_row(c, sp->slot0 + (int64_t)p * qlen + q, h);
                        if (!(pr[c->Dv + 1] > 0.0f)) continue;
                        float f = expf(pr[c->Dv] - M);
                        for (int d = 0; d < c->Dv; d++)
                            o[d] += pr[d] * f;
                        l += pr[c->Dv + 1] * f;
                    }
                }
                finish_row(c, (int64_t)qsl[sp->req] + q, h, o, M, l, NULL);
            }
    }
}

static bool kv_elem_ok(attn_elem e)
{
    return e == ATTN_ELEM_F32 || e == ATTN_ELEM_F16 || e == ATTN_ELEM_BF16 ||
           e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

/* KV heads per unit of a tile phase: ATTN_CPU_DEC_HEADS when the streaming
 * decode kernel takes every tile's jobs (attn__cpu_dec_heads), else 1. */
static int heads_per_unit(const fwd_ctx *c, const attn__cpu_tile *tiles, int n)
{
    const attn__cpu_isa *k = c->isa->first;
    if (!k || c->a->k || n == 0) /* direct K/V has no builder tiles */
        return 1;
    attn_elem kv = c->a->kv->elem;
    int mh = attn__cpu_dec_heads(c->KVH, c->G, kv == ATTN_ELEM_BF16 || kv == ATTN_ELEM_F16);
    if (mh <= 1) return 1;
    int maxq = 0;
    for (int i = 0; i < n; i++)
        if (tiles[i].nq > maxq) maxq = tiles[i].nq;
    attn__cpu_job probe = {
        .R = maxq * c->G,
        .D = c->D,
        .Dv = c->Dv,
        .q_elem = c->q_elem,
        .kv_elem = kv,
        .prec = c->prec,
    };
    return probe.R <= ATTN_CPU_SD_ROWS && k->accepts(&probe) ? mh : 1;
}

/* Multiply-adds (QK + PV, every query head) below which a forward runs on
 * the calling thread alone: waking a worker then costs more than the half
 * of the work it would take (a B=1 decode of 16 keys at 32 heads x 128 is
 * 1.3e5; measurements in docs/perf/peers-issue18.md). */
#define ATTN_CPU_SERIAL_MACS (1 << 18)

/* the forward's multiply-adds, from the tiles (or the requests) */
static int64_t forward_macs(const fwd_ctx *c, const attn__cpu_md *md)
{
    const attn_common_metadata *cm = c->a->common;
    int64_t keys = 0;
    if (md) {
        for (int i = 0; i < md->n_prefix_tiles; i++)
            keys +=
                (int64_t)(md->prefix_tiles[i].ke - md->prefix_tiles[i].kb) * md->prefix_tiles[i].nq;
        for (int i = 0; i < md->n_tiles; i++)
            keys += (int64_t)(md->tiles[i].ke - md->tiles[i].kb) * md->tiles[i].nq;
    } else {
        for (int r = 0; r < cm->num_reqs; r++)
            keys += (int64_t)attn__fwd_kv_len(c->a, r) *
                    (cm->query_start_loc[r + 1] - cm->query_start_loc[r]);
    }
    return keys * c->H * (c->D + c->Dv);
}

static void run_phase(fwd_ctx *c, attn__pool *pool, int64_t n, attn__pool_fn fn)
{
    if (n <= 0) return;
    if (c->serial)
        fn(c, 0, n, 0);
    else
        attn__pool_for(pool, n, 1, fn, c);
}

attn_status attn__cpu_attn_forward_isa(const attn__cpu_isa *isa, const attn_forward_args *a)
{
    attn_status st = attn__fwd_check(a);
    if (st != ATTN_OK) return st;
    const attn_layer_params *l = a->layer;
    const attn_common_metadata *cm = a->common;
    int D = l->head_size, Dv = attn__fwd_head_size_v(l);
    if (D > ATTN_CPU_MAX_HEAD || Dv != D)
        return attn__fail(ATTN_UNSUPPORTED,
                          "CPU_ATTN: head size %d / %d (needs equal K and V head sizes <= %d)", D,
                          Dv, ATTN_CPU_MAX_HEAD);
    if (!a->k && !kv_elem_ok(a->kv->elem))
        return attn__fail(ATTN_UNSUPPORTED, "CPU_ATTN: KV cache element %s",
                          attn_elem_name(a->kv->elem));
    const attn__cpu_md *md = a->metadata;
    if (md && md->magic != ATTN_CPU_MD_MAGIC)
        return attn__fail(ATTN_BAD_METADATA, "CPU_ATTN: metadata is not from the CPU builder");
    if (md && (md->num_heads != l->num_heads || md->num_kv_heads != l->num_kv_heads ||
               md->head_size_v < Dv || md->num_tokens != cm->num_actual_tokens ||
               md->num_reqs != cm->num_reqs))
        return attn__fail(ATTN_BAD_METADATA,
                          "CPU_ATTN: metadata was built for %d heads / %d kv heads / %d tokens / "
                          "%d requests, the call has %d / %d / %d / %d",
                          md->num_heads, md->num_kv_heads, md->num_tokens, md->num_reqs,
                          l->num_heads, l->num_kv_heads, cm->num_actual_tokens, cm->num_reqs);
    if (cm->num_actual_tokens == 0) return ATTN_OK;
    if (!isa) isa = attn__cpu_attn_active();
    /* direct K/V: lengths come from the call, not the build */
    if (a->k) md = NULL;
    fwd_ctx c = {
        .a = a,
        .isa = isa,
        .md = md,
        .H = l->num_heads,
        .KVH = l->num_kv_heads,
        .G = l->num_heads / l->num_kv_heads,
        .D = D,
        .Dv = Dv,
        .q_elem = attn_dtype_elem(l->dtype),
        .causal = attn__fwd_causal(a),
        .window = l->sliding_window,
        .scale = attn__fwd_scale(l),
    };
    c.HG = attn__cpu_head_groups(c.G);
    c.q_esz = attn_elem_size(c.q_elem);
    c.kv_esz = a->k ? c.q_esz : attn_elem_size(a->kv->elem);
    c.prec = c.q_elem == ATTN_ELEM_BF16 ? ATTN_CPU_PREC_BF16 : ATTN_CPU_PREC_SPLIT;
    atomic_init(&c.oom, 0);
    attn__pool *pool = attn__pool_global();
    int64_t per = (int64_t)c.KVH * c.HG;
    c.MH = 1;
    c.serial = forward_macs(&c, md) < ATTN_CPU_SERIAL_MACS;
    if (!md) {
        run_phase(&c, pool, (int64_t)cm->num_reqs * per, plain_fn);
    } else {
        if (md->use_cascade && md->n_prefix_tiles > 0) {
            c.tiles = md->prefix_tiles;
            run_phase(&c, pool, md->n_prefix_tiles * per, tiles_fn);
        }
        c.tiles = md->tiles;
        c.MH = heads_per_unit(&c, md->tiles, md->n_tiles);
        if (c.MH > 1) per = (c.KVH + c.MH - 1) / c.MH;
        run_phase(&c, pool, md->n_tiles * per, tiles_fn);
        if (md->n_splits > 0) run_phase(&c, pool, md->n_splits, merge_fn);
    }
    if (atomic_load(&c.oom))
        return attn__fail(ATTN_OUT_OF_MEMORY, "CPU_ATTN: no memory for per-thread scratch");
    return ATTN_OK;
}

/* ---- self-test: the core's known-answer service (src/selftest) ------------------ */

attn_status attn__cpu_attn_self_test_with(attn__cpu_forward_fn fwd, void *impl, char *detail,
                                          size_t size)
{
    return attn__selftest_standard(&attn__desc_cpu_attn, fwd, impl, detail, size);
}

/* ---- kernel ops -------------------------------------------------------------- */

static attn_status cpu_forward(void *impl, const attn_forward_args *a)
{
    (void)impl;
    return attn__cpu_attn_forward_isa(NULL, a);
}

/* The old hook, for callers that run it directly: the core's service. */
static attn_status cpu_self_test(char *detail, size_t size)
{
    return attn_backend_self_test(&attn__backend_cpu_attn, detail, size);
}

static const char *cpu_variant(void)
{
    return attn__cpu_attn_active()->name;
}

static const attn_kernel_ops cpu_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward = cpu_forward,
    .self_test = cpu_self_test,
    .variant = cpu_variant,
    .kind = ATTN_KERNEL_STANDARD,
};

/* ---- descriptor --------------------------------------------------------------- */

/* (2, num_blocks, num_kv_heads, block_size, head_size), memory in that
 * order (HND): one block of one head is a contiguous [block_size][head]
 * tile, which is what the chunk kernels stream. */
static attn_status cpu_kv_shape(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                attn_kv_shape *out)
{
    (void)kv;
    ATTN__CHECK_NULL(out);
    if (nb <= 0 || bs <= 0 || kvh <= 0 || hs <= 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV cache shape needs positive sizes (num_blocks=%d, block_size=%d, "
                          "num_kv_heads=%d, head_size=%d)",
                          nb, bs, kvh, hs);
    static const char *const names[] = {"2", "num_blocks", "num_kv_heads", "block_size",
                                        "head_size"};
    memset(out, 0, sizeof *out);
    out->ndim = 5;
    int64_t dims[5] = {2, nb, kvh, bs, hs};
    for (int i = 0; i < 5; i++) {
        out->dims[i] = dims[i];
        out->dim_names[i] = names[i];
    }
    return ATTN_OK;
}

static const int cpu_block_sizes[] = {16};
static const int cpu_head_sizes[] = {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512};

const attn_backend_desc attn__desc_cpu_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "CPU_ATTN",
    .platforms = "CPU",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO) | ATTN_KV_BIT(ATTN_KV_FP8) |
                 ATTN_KV_BIT(ATTN_KV_FP8_E4M3) | ATTN_KV_BIT(ATTN_KV_FP8_E5M2),
    .block_sizes = cpu_block_sizes,
    .n_block_sizes = 1,
    .heads = {.sizes = cpu_head_sizes,
              .n_sizes = (int)(sizeof cpu_head_sizes / sizeof cpu_head_sizes[0])},
    .is_mla = false,
    .supports_sink = true,
    .supports_per_head_quant_scales = true,
    .supports_non_causal = true,
    .supports_batch_invariance = false,
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER) | ATTN_TYPE_BIT(ATTN_TYPE_ENCODER) |
                  ATTN_TYPE_BIT(ATTN_TYPE_ENCODER_ONLY) | ATTN_TYPE_BIT(ATTN_TYPE_ENCODER_DECODER),
    .cg_support = ATTN_CG_NEVER,
    .can_return_lse_for_decode = true,
    /* natural-log LSE from every variant; DCP runs over attn_dcp (attn/dcp.h);
     * no prefill context parallelism */
    .lse_base = ATTN_LSE_BASE_E,
    .supports_pcp = false,
    .supports_dcp = true,
    .required_layout = ATTN_LAYOUT_HND,
    .kv_cache_shape = cpu_kv_shape,
    .kv_stride_order = NULL,
    .builder = &attn__builder_cpu,
};

const attn_backend attn__backend_cpu_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &attn__desc_cpu_attn,
    .kernel = &cpu_kernel,
};
