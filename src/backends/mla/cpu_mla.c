/* CPU_MLA and CPU_MLA_SPARSE: MLA on the CPU with real kernels.
 *
 * forward_mqa (decode): the work is cut into pieces (request, row group,
 * key range) - by the MLA builder when it knew the head count, else here -
 * and run on the persistent thread pool; a row group is up to
 * ATTN__MLA_MAX_ROWS (token, head) rows, so each cached latent row is loaded
 * once per group for all of its heads. Long contexts are split over key
 * ranges whose partial results (unnormalised accumulator, running max and
 * sum, base 2) are merged through their LSE afterwards.
 * forward_mha (prefill): one item per (request, head): the latent rows are
 * decompressed into that head's keys and values chunk by chunk and the
 * request's queries attend causally.
 * CPU_MLA_SPARSE runs forward_mqa for every token over its top-k positions.
 *
 * Kernels come from a variant chosen once by CPU features (AMX-BF16,
 * AVX-512, AVX2, portable; ATTN_CPU_MASK hides features to force
 * fallbacks). Scratch is one process-wide workspace that grows when a call
 * needs more than any before it, so calls in steady state allocate nothing;
 * a mutex serialises calls (the pool serialises them anyway). A kernel must
 * pass its self-test against REFERENCE_MLA before the selector may choose
 * it. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "attn/cpu.h"
#include "backends/mla/mla_internal.h"
#include "backends/reference/ref_mla.h"
#include "util/error.h"
#include "util/numeric.h"
#include "util/threadpool.h"

/* ---- variant choice ------------------------------------------------------------ */

static const attn__mla_kern *const attn__mla_all[] = {
#if defined(__x86_64__)
    &attn__mla_kern_amx,
    &attn__mla_kern_avx512,
    &attn__mla_kern_avx2,
#endif
    &attn__mla_kern_portable,
};
#define ATTN__MLA_NKERN ((int)(sizeof attn__mla_all / sizeof attn__mla_all[0]))

static const attn__mla_kern *_Atomic attn__mla_forced;

void attn__mla_force_variant(const attn__mla_kern *k)
{
    attn__mla_forced = k;
}

int attn__mla_variants(const attn__mla_kern **out, int max)
{
    int n = 0;
    for (int i = 0; i < ATTN__MLA_NKERN; i++)
        if (attn__mla_all[i]->usable() && n < max) out[n++] = attn__mla_all[i];
    return n;
}

const attn__mla_kern *attn__mla_decode_kern(attn_elem q, attn_elem kv, int R, int D)
{
    const attn__mla_kern *f = attn__mla_forced;
    if (f) return f->decode_ok(q, kv, R, D) ? f : &attn__mla_kern_portable;
    for (int i = 0; i < ATTN__MLA_NKERN; i++)
        if (attn__mla_all[i]->usable() && attn__mla_all[i]->decode_ok(q, kv, R, D))
            return attn__mla_all[i];
    return &attn__mla_kern_portable;
}

const attn__mla_kern *attn__mla_prefill_kern(void)
{
    const attn__mla_kern *f = attn__mla_forced;
    if (f && f->prefill) return f;
    for (int i = 0; i < ATTN__MLA_NKERN; i++)
        if (attn__mla_all[i]->usable() && attn__mla_all[i]->prefill) return attn__mla_all[i];
    return &attn__mla_kern_portable;
}

/* ---- workspace ------------------------------------------------------------------ */

static pthread_mutex_t attn__mla_ws_mu = PTHREAD_MUTEX_INITIALIZER;
static void *attn__mla_ws_mem;
static size_t attn__mla_ws_cap;

static size_t al64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Called with the mutex held. */
static attn_status attn__mla_ws_reserve(size_t need, void **mem)
{
    if (need > attn__mla_ws_cap) {
        size_t cap = need + need / 4;
        cap = (cap + 4095) & ~(size_t)4095;
        void *p = aligned_alloc(4096, cap);
        if (!p)
            return attn__fail(ATTN_OUT_OF_MEMORY, "CPU_MLA: no memory for %zu bytes of scratch",
                              cap);
        free(attn__mla_ws_mem);
        attn__mla_ws_mem = p;
        attn__mla_ws_cap = cap;
    }
    *mem = attn__mla_ws_mem;
    return ATTN_OK;
}

/* ---- decode ------------------------------------------------------------------------ */

typedef struct {
    const attn__mla_call *c;
    const attn__mla_kern *k;
    const attn_mla_work *work;
    int nwork;
    float *partials; /* slot stride: MAX_ROWS * (R + 2) floats */
    char *thread_ws;
    size_t thread_ws_size;
    size_t kern_ws;
    const int *split_groups; /* pieces with split 0 of multi-split groups */
    int nsplit_groups;
} attn__dec_job;

static size_t attn__slot_floats(int R)
{
    return (size_t)ATTN__MLA_MAX_ROWS * (size_t)(R + 2);
}

/* Normalise rows into the output (and LSE). */
static void attn__dec_store(const attn__mla_call *c, const attn__mla_kern *k, int req,
                            int row_begin, int nrows, const float *acc, const float *m,
                            const float *l)
{
    const attn_common_metadata *cm = c->cm;
    const attn_mla_args *a = c->a;
    int H = c->H, R = c->R;
    size_t esz = c->q_elem == ATTN_ELEM_F32 ? 4 : 2;
    size_t base = (size_t)cm->query_start_loc[req] * (size_t)H;
    void (*store)(const float *, float, int, attn_elem, void *) =
        k->store_row ? k->store_row : attn__mla_store_row;
    for (int i = 0; i < nrows; i++) {
        size_t row = base + (size_t)(row_begin + i);
        float inv = l[i] > 0 ? c->kv_scale / l[i] : 0.0f;
        store(acc + (size_t)i * R, inv, R, c->q_elem, (char *)a->out + row * (size_t)R * esz);
        if (a->lse)
            a->lse[row] =
                l[i] > 0 ? (float)(((double)m[i] + log2((double)l[i])) * ATTN__LN2) : -INFINITY;
    }
}

static void attn__dec_pieces(void *ctx, int64_t begin, int64_t end, int tid)
{
    const attn__dec_job *j = ctx;
    const attn__mla_call *c = j->c;
    const attn_common_metadata *cm = c->cm;
    const attn_mla_args *a = c->a;
    char *tws = j->thread_ws + (size_t)tid * j->thread_ws_size;
    float *acc = (float *)(tws + j->kern_ws);
    float *m = acc + (size_t)ATTN__MLA_MAX_ROWS * c->R;
    float *l = m + ATTN__MLA_MAX_ROWS;
    int32_t *pos = (int32_t *)(l + ATTN__MLA_MAX_ROWS);
    size_t qesz = c->q_elem == ATTN_ELEM_F32 ? 4 : 2;
    for (int64_t it = begin; it < end; it++) {
        const attn_mla_work *w = &j->work[it];
        int r = w->req;
        int q0 = cm->query_start_loc[r], n = cm->query_start_loc[r + 1] - q0;
        attn__mla_dec d;
        memset(&d, 0, sizeof d);
        d.H = c->H;
        d.R = c->R;
        d.D = c->D;
        d.nrows = w->row_end - w->row_begin;
        d.row0 = w->row_begin;
        d.first_pos = cm->seq_lens[r] - n;
        d.q = (const char *)a->q + (size_t)q0 * c->H * c->D * qesz;
        d.q_elem = c->q_elem;
        d.kv = a->kv;
        d.kv_elem = c->kv_elem;
        d.kv_esz = c->kv_esz;
        d.bt = attn__mla_block_table(cm, r);
        d.kv_begin = w->kv_begin;
        d.kv_end = w->kv_end;
        d.score_mul = (float)((double)c->scale * c->kv_scale * ATTN__LOG2E);
        d.ws = tws;
        if (c->sparse) {
            /* one token per piece: its listed positions that causality allows */
            int t = w->row_begin / c->H;
            int tokpos = d.first_pos + t;
            const int32_t *ix = a->topk_indices + (size_t)(q0 + t) * (size_t)a->topk;
            int np = 0;
            for (int k = 0; k < a->topk; k++)
                if (ix[k] >= 0 && ix[k] <= tokpos) pos[np++] = ix[k];
            d.positions = pos;
            d.npositions = np;
        }
        if (w->nsplits > 1) {
            float *slot = j->partials + (size_t)w->partial * attn__slot_floats(c->R);
            d.acc = slot;
            d.m = slot + (size_t)ATTN__MLA_MAX_ROWS * c->R;
            d.l = d.m + ATTN__MLA_MAX_ROWS;
        } else {
            d.acc = acc;
            d.m = m;
            d.l = l;
        }
        if (c->sparse && d.npositions == 0) {
            for (int i = 0; i < d.nrows; i++)
                d.m[i] = -INFINITY, d.l[i] = 0;
            memset(d.acc, 0, sizeof(float) * (size_t)d.nrows * c->R);
        } else {
            j->k->decode(&d);
        }
        if (w->nsplits == 1) attn__dec_store(c, j->k, r, w->row_begin, d.nrows, d.acc, d.m, d.l);
    }
}

static void attn__dec_merge(void *ctx, int64_t begin, int64_t end, int tid)
{
    const attn__dec_job *j = ctx;
    const attn__mla_call *c = j->c;
    int R = c->R;
    char *tws = j->thread_ws + (size_t)tid * j->thread_ws_size;
    float *acc = (float *)(tws + j->kern_ws);
    float *m = acc + (size_t)ATTN__MLA_MAX_ROWS * R;
    float *l = m + ATTN__MLA_MAX_ROWS;
    size_t sf = attn__slot_floats(R);
    for (int64_t g = begin; g < end; g++) {
        const attn_mla_work *w = &j->work[j->split_groups[g]];
        int nrows = w->row_end - w->row_begin;
        int p0 = w->partial; /* split 0: the group's slots are p0 .. p0 + nsplits - 1 */
        for (int i = 0; i < nrows; i++) {
            float mx = -INFINITY;
            for (int s = 0; s < w->nsplits; s++) {
                const float *slot = j->partials + (size_t)(p0 + s) * sf;
                const float *sm = slot + (size_t)ATTN__MLA_MAX_ROWS * R;
                if (sm[ATTN__MLA_MAX_ROWS + i] > 0 && sm[i] > mx) mx = sm[i];
            }
            float *o = acc + (size_t)i * R;
            memset(o, 0, sizeof(float) * (size_t)R);
            float sum = 0;
            for (int s = 0; s < w->nsplits; s++) {
                const float *slot = j->partials + (size_t)(p0 + s) * sf;
                const float *sm = slot + (size_t)ATTN__MLA_MAX_ROWS * R;
                float ls = sm[ATTN__MLA_MAX_ROWS + i];
                if (!(ls > 0)) continue;
                float f = attn__mla_exp2(sm[i] - mx);
                sum += ls * f;
                const float *so = slot + (size_t)i * R;
                for (int r = 0; r < R; r++)
                    o[r] += so[r] * f;
            }
            m[i] = mx;
            l[i] = sum;
        }
        attn__dec_store(c, j->k, w->req, w->row_begin, nrows, acc, m, l);
    }
}

static attn_status attn__cpu_mla_mqa(const attn_mla_args *a, bool sparse)
{
    attn__mla_call c;
    const char *who = sparse ? "CPU_MLA_SPARSE" : "CPU_MLA";
    attn_status st = attn__mla_prepare(who, a, sparse ? ATTN__MLA_MQA_SPARSE : ATTN__MLA_MQA, &c);
    if (st != ATTN_OK) return st;
    const attn_common_metadata *cm = c.cm;
    int ntok = 0;
    for (int r = c.req_begin; r < c.req_end; r++)
        ntok += cm->query_start_loc[r + 1] - cm->query_start_loc[r];
    if (ntok == 0) return ATTN_OK;

    attn__pool *pool = attn__pool_global();
    int nthreads = attn__pool_threads(pool);
    const attn__mla_kern *k = attn__mla_decode_kern(c.q_elem, c.kv_elem, c.R, c.D);

    /* pieces: the builder's, or made here in the workspace */
    const attn_mla_work *work = NULL;
    int nwork = 0, nparts = 0, local_max = 0;
    if (!sparse && c.md && c.md->decode_work && c.md->work_heads == c.H && c.req_begin == 0 &&
        c.req_end == c.md->num_decodes) {
        work = c.md->decode_work;
        nwork = c.md->num_decode_work;
        nparts = c.md->num_partials;
    } else if (sparse) {
        int per_tok = (c.H + ATTN__MLA_MAX_ROWS - 1) / ATTN__MLA_MAX_ROWS;
        local_max = ntok * per_tok;
    } else {
        local_max = attn__mla_partition_bound(c.req_end - c.req_begin, ntok, c.H, nthreads);
    }
    size_t kern_ws = al64(k->decode_ws(c.R, c.D, ATTN__MLA_MAX_ROWS));
    size_t tws = kern_ws + al64(sizeof(float) * ((size_t)ATTN__MLA_MAX_ROWS * (c.R + 2))) +
                 al64(sizeof(int32_t) * (size_t)(sparse ? a->topk : 1));
    size_t work_bytes = al64(sizeof(attn_mla_work) * (size_t)local_max);
    size_t groups_bytes = al64(sizeof(int) * (size_t)(local_max > nwork ? local_max : nwork));

    pthread_mutex_lock(&attn__mla_ws_mu);
    void *mem = NULL;
    /* partial slots are only known after partitioning: reserve for the bound */
    size_t part_max = (size_t)(local_max > 0 ? local_max : nparts);
    size_t need = work_bytes + groups_bytes +
                  al64(sizeof(float) * part_max * attn__slot_floats(c.R)) + tws * (size_t)nthreads;
    st = attn__mla_ws_reserve(need, &mem);
    if (st != ATTN_OK) {
        pthread_mutex_unlock(&attn__mla_ws_mu);
        return st;
    }
    char *p = mem;
    attn_mla_work *lw = (attn_mla_work *)p;
    p += work_bytes;
    int *groups = (int *)p;
    p += groups_bytes;
    float *partials = (float *)p;
    p += al64(sizeof(float) * part_max * attn__slot_floats(c.R));
    char *thread_ws = p;

    if (sparse) {
        for (int r = c.req_begin; r < c.req_end; r++) {
            int n = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
            for (int t = 0; t < n; t++)
                for (int hb = 0; hb < c.H; hb += ATTN__MLA_MAX_ROWS) {
                    attn_mla_work *w = &lw[nwork++];
                    w->req = r;
                    w->row_begin = t * c.H + hb;
                    w->row_end =
                        t * c.H + (c.H - hb < ATTN__MLA_MAX_ROWS ? c.H : hb + ATTN__MLA_MAX_ROWS);
                    w->kv_begin = w->kv_end = 0;
                    w->split = 0;
                    w->nsplits = 1;
                    w->partial = -1;
                }
        }
        work = lw;
    } else if (!work) {
        nwork =
            attn__mla_partition(cm, c.req_begin, c.req_end, c.H, nthreads, lw, local_max, &nparts);
        if (nwork < 0) {
            pthread_mutex_unlock(&attn__mla_ws_mu);
            return attn__fail(ATTN_INTERNAL, "CPU_MLA: decode partition exceeded its bound");
        }
        work = lw;
    }
    int ngroups = 0;
    for (int i = 0; i < nwork; i++)
        if (work[i].nsplits > 1 && work[i].split == 0) groups[ngroups++] = i;

    attn__dec_job job = {
        .c = &c,
        .k = k,
        .work = work,
        .nwork = nwork,
        .partials = partials,
        .thread_ws = thread_ws,
        .thread_ws_size = tws,
        .kern_ws = kern_ws,
        .split_groups = groups,
        .nsplit_groups = ngroups,
    };
    if (nwork == 1)
        attn__dec_pieces(&job, 0, 1, 0);
    else
        attn__pool_for(pool, nwork, 1, attn__dec_pieces, &job);
    if (ngroups > 0) attn__pool_for(pool, ngroups, 1, attn__dec_merge, &job);
    pthread_mutex_unlock(&attn__mla_ws_mu);
    return ATTN_OK;
}

/* ---- prefill ---------------------------------------------------------------------- */

typedef struct {
    const attn__mla_call *c;
    const attn__mla_kern *k;
    const int *reqs; /* handled requests with queries */
    char *thread_ws;
    size_t thread_ws_size;
} attn__pre_job;

static void attn__pre_items(void *ctx, int64_t begin, int64_t end, int tid)
{
    const attn__pre_job *j = ctx;
    const attn__mla_call *c = j->c;
    const attn_common_metadata *cm = c->cm;
    const attn_mla_args *a = c->a;
    size_t esz = c->q_elem == ATTN_ELEM_F32 ? 4 : 2;
    int QK = c->nope + c->P;
    for (int64_t it = begin; it < end; it++) {
        int r = j->reqs[it / c->H], h = (int)(it % c->H);
        int q0 = cm->query_start_loc[r], n = cm->query_start_loc[r + 1] - q0;
        attn__mla_pre p;
        memset(&p, 0, sizeof p);
        p.R = c->R;
        p.P = c->P;
        p.nope = c->nope;
        p.V = c->V;
        p.H = c->H;
        p.head = h;
        p.nq = n;
        p.seq_len = cm->seq_lens[r];
        p.first_pos = p.seq_len - n;
        p.q = (const char *)a->q + ((size_t)q0 * c->H + (size_t)h) * QK * esz;
        p.q_stride = (size_t)c->H * QK;
        p.q_elem = c->q_elem;
        p.w_uk = (const char *)a->w_uk + (size_t)h * c->nope * c->R * esz;
        p.w_uv = (const char *)a->w_uv + (size_t)h * c->R * c->V * esz;
        p.kv = a->kv;
        p.kv_elem = c->kv_elem;
        p.kv_esz = c->kv_esz;
        p.kv_scale = c->kv_scale;
        p.bt = attn__mla_block_table(cm, r);
        p.score_mul = (float)((double)c->scale * ATTN__LOG2E);
        p.out = (char *)a->out + ((size_t)q0 * c->H + (size_t)h) * c->V * esz;
        p.out_stride = (size_t)c->H * c->V;
        p.lse = a->lse ? a->lse + (size_t)q0 * c->H + h : NULL;
        p.ws = j->thread_ws + (size_t)tid * j->thread_ws_size;
        j->k->prefill(&p);
    }
}

static attn_status attn__cpu_mla_mha(const attn_mla_args *a)
{
    attn__mla_call c;
    attn_status st = attn__mla_prepare("CPU_MLA", a, ATTN__MLA_MHA, &c);
    if (st != ATTN_OK) return st;
    const attn_common_metadata *cm = c.cm;
    int nreq = 0, maxq = 0;
    for (int r = c.req_begin; r < c.req_end; r++) {
        int n = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        if (n > 0) nreq++;
        maxq = n > maxq ? n : maxq;
    }
    if (nreq == 0) return ATTN_OK;
    attn__pool *pool = attn__pool_global();
    int nthreads = attn__pool_threads(pool);
    const attn__mla_kern *k = attn__mla_prefill_kern();
    size_t tws = al64(k->prefill_ws(c.R, c.P, c.nope, c.V, maxq));
    size_t reqs_bytes = al64(sizeof(int) * (size_t)nreq);
    pthread_mutex_lock(&attn__mla_ws_mu);
    void *mem = NULL;
    st = attn__mla_ws_reserve(reqs_bytes + tws * (size_t)nthreads, &mem);
    if (st != ATTN_OK) {
        pthread_mutex_unlock(&attn__mla_ws_mu);
        return st;
    }
    int *reqs = mem;
    int n = 0;
    for (int r = c.req_begin; r < c.req_end; r++)
        if (cm->query_start_loc[r + 1] > cm->query_start_loc[r]) reqs[n++] = r;
    attn__pre_job job = {&c, k, reqs, (char *)mem + reqs_bytes, tws};
    int64_t items = (int64_t)nreq * c.H;
    if (items == 1)
        attn__pre_items(&job, 0, 1, 0);
    else
        attn__pool_for(pool, items, 1, attn__pre_items, &job);
    pthread_mutex_unlock(&attn__mla_ws_mu);
    return ATTN_OK;
}

/* ---- projections (W_UK absorption, W_UV up-projection) ----------------------------- */

#define ATTN__PROJ_TOK 128

typedef struct {
    const attn__mla_kern *k;
    int T, Kin, Nout;
    const void *in, *w;
    void *out;
    size_t in_tok, in_head, out_tok, out_head, esz;
    attn_elem e;
    char *thread_ws;
    size_t thread_ws_size;
} attn__proj_job;

/* One head: W[h] converted once, then the tokens in chunks through the GEMM. */
static void attn__proj_heads(void *ctx, int64_t begin, int64_t end, int tid)
{
    const attn__proj_job *j = ctx;
    void (*load)(const void *, attn_elem, int, float *) =
        j->k->load_row ? j->k->load_row : attn__mla_load_row_f32;
    void (*store)(const float *, float, int, attn_elem, void *) =
        j->k->store_row ? j->k->store_row : attn__mla_store_row;
    void (*gemm)(int, int, int, const float *, size_t, const float *, size_t, float *, size_t, bool,
                 const float *) = j->k->gemm ? j->k->gemm : attn__mla_gemm;
    float *wf = (float *)(j->thread_ws + (size_t)tid * j->thread_ws_size);
    float *af = wf + (size_t)j->Kin * j->Nout;
    float *cf = af + (size_t)ATTN__PROJ_TOK * j->Kin;
    for (int64_t h = begin; h < end; h++) {
        load((const char *)j->w + (size_t)h * j->Kin * j->Nout * j->esz, j->e, j->Kin * j->Nout,
             wf);
        for (int t0 = 0; t0 < j->T; t0 += ATTN__PROJ_TOK) {
            int nt = j->T - t0 < ATTN__PROJ_TOK ? j->T - t0 : ATTN__PROJ_TOK;
            for (int t = 0; t < nt; t++)
                load((const char *)j->in +
                         ((size_t)(t0 + t) * j->in_tok + (size_t)h * j->in_head) * j->esz,
                     j->e, j->Kin, af + (size_t)t * j->Kin);
            gemm(nt, j->Nout, j->Kin, af, (size_t)j->Kin, wf, (size_t)j->Nout, cf, (size_t)j->Nout,
                 false, NULL);
            for (int t = 0; t < nt; t++)
                store(cf + (size_t)t * j->Nout, 1.0f, j->Nout, j->e,
                      (char *)j->out +
                          ((size_t)(t0 + t) * j->out_tok + (size_t)h * j->out_head) * j->esz);
        }
    }
}

attn_status attn__mla_project(int T, int H, int Kin, int Nout, const void *in, size_t in_tok,
                              size_t in_head, const void *w, void *out, size_t out_tok,
                              size_t out_head, attn_elem e)
{
    if (T <= 0 || H <= 0) return ATTN_OK;
    attn__pool *pool = attn__pool_global();
    int nthreads = attn__pool_threads(pool);
    attn__proj_job j = {
        .k = attn__mla_prefill_kern(),
        .T = T,
        .Kin = Kin,
        .Nout = Nout,
        .in = in,
        .w = w,
        .out = out,
        .in_tok = in_tok,
        .in_head = in_head,
        .out_tok = out_tok,
        .out_head = out_head,
        .esz = e == ATTN_ELEM_F32 ? 4 : 2,
        .e = e,
    };
    j.thread_ws_size = al64(sizeof(float) * ((size_t)Kin * Nout + (size_t)ATTN__PROJ_TOK * Kin +
                                             (size_t)ATTN__PROJ_TOK * Nout));
    pthread_mutex_lock(&attn__mla_ws_mu);
    void *mem = NULL;
    attn_status st = attn__mla_ws_reserve(j.thread_ws_size * (size_t)nthreads, &mem);
    if (st == ATTN_OK) {
        j.thread_ws = mem;
        if (H == 1)
            attn__proj_heads(&j, 0, 1, 0);
        else
            attn__pool_for(pool, H, 1, attn__proj_heads, &j);
    }
    pthread_mutex_unlock(&attn__mla_ws_mu);
    return st;
}

/* ---- self-test: the core's known-answer service (src/selftest) ------------------------ */

/* The old hooks, for callers that run them directly. */
static attn_status cpu_mla_self_test(char *detail, size_t size)
{
    return attn_backend_self_test(&attn__backend_cpu_mla, detail, size);
}

static attn_status cpu_mla_sparse_self_test(char *detail, size_t size)
{
    return attn_backend_self_test(&attn__backend_cpu_mla_sparse, detail, size);
}

/* ---- entry points and descriptors --------------------------------------------------- */

static attn_status cpu_mla_mqa(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__cpu_mla_mqa(a, false);
}

static attn_status cpu_mla_mqa_sparse(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__cpu_mla_mqa(a, true);
}

static attn_status cpu_mla_mha(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__cpu_mla_mha(a);
}

static const char *cpu_mla_variant(void)
{
    static _Thread_local char buf[96];
    const attn__mla_kern *bf = attn__mla_decode_kern(ATTN_ELEM_BF16, ATTN_ELEM_BF16, 512, 576);
    const attn__mla_kern *f32 = attn__mla_decode_kern(ATTN_ELEM_F32, ATTN_ELEM_F32, 512, 576);
    const attn__mla_kern *pre = attn__mla_prefill_kern();
    if (bf == f32)
        snprintf(buf, sizeof buf, "%s (prefill %s)", bf->name, pre->name);
    else
        snprintf(buf, sizeof buf, "%s for bf16, %s (prefill %s)", bf->name, f32->name, pre->name);
    return buf;
}

static const attn_kernel_ops cpu_mla_ops = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward_mqa = cpu_mla_mqa,
    .forward_mha = cpu_mla_mha,
    .self_test = cpu_mla_self_test,
    .variant = cpu_mla_variant,
    .kind = ATTN_KERNEL_MLA,
};

static const attn_kernel_ops cpu_mla_sparse_ops = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward_mqa = cpu_mla_mqa_sparse,
    .self_test = cpu_mla_sparse_self_test,
    .variant = cpu_mla_variant,
    .kind = ATTN_KERNEL_MLA_SPARSE,
};

static const int attn__cpu_mla_heads[] = {320, 576};

#define KV(x) ATTN_KV_BIT(ATTN_KV_##x)
/* What the kernels really run: fp32/bf16/fp16 queries, latent cache in the
 * model dtype, fp16, bf16 or fp8 (e4m3/e5m2 with a per-tensor scale), any
 * block size (rows are addressed one by one through the block table),
 * kv_lora_rank + rope of 320 (256 + 64) or 576 (512 + 64); LSE returned. */
#define ATTN__CPU_MLA_DESC                                                                         \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .platforms = "CPU",                                                                            \
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |                  \
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),                                                     \
    .kv_dtypes = KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2),    \
    .heads = {.sizes = attn__cpu_mla_heads, .n_sizes = 2}, .is_mla = true,                         \
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER), .cg_support = ATTN_CG_NEVER,                   \
    .can_return_lse_for_decode = true, .lse_base = ATTN_LSE_BASE_E, .supports_pcp = false,         \
    .kv_cache_shape = attn__kv_shape_mla, .kv_stride_order = attn__stride_order_mla

static const attn_backend_desc cpu_mla_desc = {
    ATTN__CPU_MLA_DESC,
    .name = "CPU_MLA",
    .supports_dcp = true, /* attn_dcp; the sparse top-k indices are global positions */
    .builder = &attn__builder_mla_cpu,
};

static const attn_backend_desc cpu_mla_sparse_desc = {
    ATTN__CPU_MLA_DESC,
    .name = "CPU_MLA_SPARSE",
    .is_sparse = true,
    .builder = &attn__builder_mla_sparse,
};

const attn_backend attn__backend_cpu_mla = {
    ATTN_BACKEND_ABI_VERSION,
    sizeof(attn_backend),
    &cpu_mla_desc,
    &cpu_mla_ops,
};

const attn_backend attn__backend_cpu_mla_sparse = {
    ATTN_BACKEND_ABI_VERSION,
    sizeof(attn_backend),
    &cpu_mla_sparse_desc,
    &cpu_mla_sparse_ops,
};
