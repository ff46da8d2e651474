/* CPU_ATTN forward: argument checks, then up to three parallel phases on
 * the process-wide pool: A) cascade prefix tiles (partials per token), B)
 * all other tiles (decode, split parts, prefill), C) merge of split parts.
 * Output rows are normalised, the sink joins the denominator, and the LSE
 * (natural log) is written when asked for. */
#include <math.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/cpu/cpu_fwd.h"
#include "backends/reference/reference.h"
#include "util/error.h"
#include "util/threadpool.h"

/* This thread's scratch; NULL (and the forward fails) when out of memory. */
static attn__cpu_scratch *phase_scratch(attn__cpu_fwd_ctx *c)
{
    attn__cpu_scratch *sc = attn__cpu_scratch_get();
    if (!sc) atomic_store(&c->oom, 1);
    return sc;
}

/* unit u of a phase with builder tiles: tile-major so cost order holds */
static void tiles_fn(void *ctx, int64_t b, int64_t e, int tid)
{
    (void)tid;
    attn__cpu_fwd_ctx *c = ctx;
    attn__cpu_scratch *sc = phase_scratch(c);
    if (!sc) return;
    if (c->MH > 1) {
        int per = (c->KVH + c->MH - 1) / c->MH;
        for (int64_t u = b; u < e; u++) {
            int kvh0 = (int)(u % per) * c->MH;
            int nh = c->KVH - kvh0 < c->MH ? c->KVH - kvh0 : c->MH;
            attn__cpu_run_rows_heads(c, &c->tiles[u / per], kvh0, nh, sc);
        }
        return;
    }
    int per = c->KVH * c->HG;
    for (int64_t u = b; u < e; u++) {
        const attn__cpu_tile *t = &c->tiles[u / per];
        int rem = (int)(u % per);
        attn__cpu_run_tile(c, t, rem / c->HG, rem % c->HG, sc);
    }
}

/* no builder metadata: one unit per (request, KV head, head group) */
static void plain_fn(void *ctx, int64_t b, int64_t e, int tid)
{
    (void)tid;
    attn__cpu_fwd_ctx *c = ctx;
    attn__cpu_scratch *sc = phase_scratch(c);
    if (!sc) return;
    const int32_t *qsl = c->a->common->query_start_loc;
    int per = c->KVH * c->HG;
    int tt = c->job_tokens;
    for (int64_t u = b; u < e; u++) {
        int r = (int)(u / per), rem = (int)(u % per);
        int qlen = qsl[r + 1] - qsl[r];
        for (int i0 = 0; i0 < qlen; i0 += tt) {
            attn__cpu_tile t;
            attn__cpu_plan_tile(c, r, i0, qlen - i0 < tt ? qlen - i0 : tt, &t);
            attn__cpu_run_tile(c, &t, rem / c->HG, rem % c->HG, sc);
        }
    }
}

/* phase C: merge the parts of split requests */
static void merge_fn(void *ctx, int64_t b, int64_t e, int tid)
{
    (void)tid;
    attn__cpu_fwd_ctx *c = ctx;
    const int32_t *qsl = c->a->common->query_start_loc;
    attn__cpu_scratch *sc = phase_scratch(c);
    if (!sc) return;
    float *o = sc->o;
    for (int64_t i = b; i < e; i++) {
        const attn__cpu_split *sp = &c->md->splits[i];
        int qlen = qsl[sp->req + 1] - qsl[sp->req];
        for (int q = 0; q < qlen; q++)
            for (int h = 0; h < c->H; h++) {
                float M = -INFINITY;
                for (int p = 0; p < sp->nparts; p++) {
                    const float *pr =
                        attn__cpu_partial_row(c, sp->slot0 + (int64_t)p * qlen + q, h);
                    if (pr[c->Dv + 1] > 0.0f && pr[c->Dv] > M) M = pr[c->Dv];
                }
                float l = 0.0f;
                memset(o, 0, sizeof(float) * (size_t)c->Dv);
                if (M > -INFINITY) {
                    for (int p = 0; p < sp->nparts; p++) {
                        const float *pr =
                            attn__cpu_partial_row(c, sp->slot0 + (int64_t)p * qlen + q, h);
                        if (!(pr[c->Dv + 1] > 0.0f)) continue;
                        float f = expf(pr[c->Dv] - M);
                        for (int d = 0; d < c->Dv; d++)
                            o[d] += pr[d] * f;
                        l += pr[c->Dv + 1] * f;
                    }
                }
                attn__cpu_finish_row(c, (int64_t)qsl[sp->req] + q, h, o, M, l, NULL);
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
static int heads_per_unit(const attn__cpu_fwd_ctx *c, const attn__cpu_tile *tiles, int n)
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
static int64_t forward_macs(const attn__cpu_fwd_ctx *c, const attn__cpu_md *md)
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

/* Calls without builder metadata (the Python API; attn_backend_forward
 * without a build) run the builder's plan all the same, so a small decode
 * batch is split along the keys over the threads and its KV heads
 * interleaved, as with metadata. The builder state is the calling
 * thread's, made on its first such call of a layer shape (and when a batch
 * outgrows it) and reused after: no allocation per call. NULL (the
 * per-request plan) for direct K/V, or when no plan can be made. */
static const attn__cpu_md *own_plan(const attn_forward_args *a)
{
    const attn_common_metadata *cm = a->common;
    attn__cpu_scratch *sc = attn__cpu_scratch_get();
    if (a->k || !sc) return NULL;
    attn__cpu_plan *pl = &sc->plan;
    const attn_layer_params *l = a->layer;
    attn_layer_params key; /* what the builder's plan depends on (zeroed: compared whole) */
    memset(&key, 0, sizeof key);
    key.num_heads = l->num_heads;
    key.num_kv_heads = l->num_kv_heads;
    key.head_size = l->head_size;
    key.head_size_v = l->head_size_v;
    key.sliding_window = l->sliding_window;
    key.attn_type = l->attn_type;
    key.dtype = l->dtype;
    key.kv_cache_dtype = l->kv_cache_dtype;
    int bs = a->kv->block_size;
    bool same = pl->state && !memcmp(&pl->key, &key, sizeof key) && pl->block_size == bs;
    if (!same || cm->num_reqs > pl->max_reqs || cm->num_actual_tokens > pl->max_tokens) {
        int reqs = cm->num_reqs, tokens = cm->num_actual_tokens;
        if (same) { /* grow: at least twice the old maxima */
            reqs = reqs > 2 * pl->max_reqs ? reqs : 2 * pl->max_reqs;
            tokens = tokens > 2 * pl->max_tokens ? tokens : 2 * pl->max_tokens;
        }
        if (pl->state) attn__builder_cpu.destroy(pl->state);
        pl->state = NULL;
        attn_builder_init bi = {.desc = &attn__desc_cpu_attn,
                                .layer = a->layer,
                                .block_size = bs,
                                .num_blocks = a->kv->num_blocks,
                                .max_num_reqs = reqs > 0 ? reqs : 1,
                                .max_num_tokens = tokens > 0 ? tokens : 1,
                                .max_blocks_per_req = cm->block_table_stride};
        if (attn__builder_cpu.create(&bi, &pl->state) != ATTN_OK) {
            attn_clear_error();
            pl->state = NULL;
            return NULL;
        }
        memcpy(&pl->key, &key, sizeof key);
        pl->block_size = bs;
        pl->max_reqs = bi.max_num_reqs;
        pl->max_tokens = bi.max_num_tokens;
    }
    const void *md = NULL;
    if (attn__builder_cpu.build(pl->state, 0, cm, false, &md) != ATTN_OK) {
        attn_clear_error();
        return NULL;
    }
    return md;
}

static void run_phase(attn__cpu_fwd_ctx *c, attn__pool *pool, int64_t n, attn__pool_fn fn)
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
    if (!md) md = own_plan(a);
    attn__cpu_fwd_ctx c = {
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
    c.job_tokens = attn__cpu_job_tokens(isa, c.G, D);
    c.q_esz = attn_elem_size(c.q_elem);
    c.kv_esz = a->k ? c.q_esz : attn_elem_size(a->kv->elem);
    c.prec = c.q_elem == ATTN_ELEM_BF16 ? ATTN_CPU_PREC_BF16 : ATTN_CPU_PREC_SPLIT;
    c.store_isa = attn_cpu_has(ATTN_CPU_AVX512F) && attn_cpu_has(ATTN_CPU_AVX512BW) &&
                          attn_cpu_has(ATTN_CPU_AVX512VL)
                      ? 2
                      : attn_cpu_has(ATTN_CPU_AVX2);
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
