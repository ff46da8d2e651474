/* CPU_MLA forward_mha (prefill): one item per (request, head) on the thread
 * pool (see cpu_mla.c for the whole design). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/mla/mla_internal.h"
#include "util/error.h"
#include "util/numeric.h"
#include "util/threadpool.h"

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

attn_status attn__cpu_mla_mha(const attn_mla_args *a)
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
    size_t tws = attn__mla_al64(k->prefill_ws(c.R, c.P, c.nope, c.V, maxq));
    size_t reqs_bytes = attn__mla_al64(sizeof(int) * (size_t)nreq);
    void *mem = NULL;
    st = attn__mla_ws_acquire(reqs_bytes + tws * (size_t)nthreads, &mem);
    if (st != ATTN_OK) return st;
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
    attn__mla_ws_release();
    return ATTN_OK;
}
