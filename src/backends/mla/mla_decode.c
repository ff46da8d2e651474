/* CPU_MLA forward_mqa (decode, and CPU_MLA_SPARSE): pieces (request, row
 * group, key range) on the thread pool, split pieces merged through their
 * LSE (see cpu_mla.c for the whole design). */
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
    const attn__mla_work *work;
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
        const attn__mla_work *w = &j->work[it];
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
        const attn__mla_work *w = &j->work[j->split_groups[g]];
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

/* CPU_MLA_SPARSE: one piece per (token, row group of heads), no key split */
static int attn__dec_sparse_pieces(const attn__mla_call *c, attn__mla_work *lw)
{
    const attn_common_metadata *cm = c->cm;
    int nwork = 0;
    for (int r = c->req_begin; r < c->req_end; r++) {
        int n = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        for (int t = 0; t < n; t++)
            for (int hb = 0; hb < c->H; hb += ATTN__MLA_MAX_ROWS) {
                attn__mla_work *w = &lw[nwork++];
                w->req = r;
                w->row_begin = t * c->H + hb;
                w->row_end =
                    t * c->H + (c->H - hb < ATTN__MLA_MAX_ROWS ? c->H : hb + ATTN__MLA_MAX_ROWS);
                w->kv_begin = w->kv_end = 0;
                w->split = 0;
                w->nsplits = 1;
                w->partial = -1;
            }
    }
    return nwork;
}

attn_status attn__cpu_mla_mqa(const attn_mla_args *a, bool sparse)
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

    /* pieces: CPU_MLA's builder's, or made here in the workspace */
    const attn__mla_work *work = NULL;
    int nwork = 0, nparts = 0, local_max = 0;
    const attn__cpu_mla_metadata *cmd = sparse ? NULL : attn__cpu_mla_md(c.md);
    if (cmd && cmd->work && cmd->work_heads == c.H && c.req_begin == 0 &&
        c.req_end == c.md->num_decodes) {
        work = cmd->work;
        nwork = cmd->num_work;
        nparts = cmd->num_partials;
    } else if (sparse) {
        int per_tok = (c.H + ATTN__MLA_MAX_ROWS - 1) / ATTN__MLA_MAX_ROWS;
        local_max = ntok * per_tok;
    } else {
        local_max = attn__mla_partition_bound(c.req_end - c.req_begin, ntok, c.H, nthreads);
    }
    size_t kern_ws = attn__mla_al64(k->decode_ws(c.R, c.D, ATTN__MLA_MAX_ROWS));
    size_t tws = kern_ws +
                 attn__mla_al64(sizeof(float) * ((size_t)ATTN__MLA_MAX_ROWS * (c.R + 2))) +
                 attn__mla_al64(sizeof(int32_t) * (size_t)(sparse ? a->topk : 1));
    size_t work_bytes = attn__mla_al64(sizeof(attn__mla_work) * (size_t)local_max);
    size_t groups_bytes =
        attn__mla_al64(sizeof(int) * (size_t)(local_max > nwork ? local_max : nwork));

    void *mem = NULL;
    /* partial slots are only known after partitioning: reserve for the bound */
    size_t part_max = (size_t)(local_max > 0 ? local_max : nparts);
    size_t need = work_bytes + groups_bytes +
                  attn__mla_al64(sizeof(float) * part_max * attn__slot_floats(c.R)) +
                  tws * (size_t)nthreads;
    st = attn__mla_ws_acquire(need, &mem);
    if (st != ATTN_OK) return st;
    char *p = mem;
    attn__mla_work *lw = (attn__mla_work *)p;
    p += work_bytes;
    int *groups = (int *)p;
    p += groups_bytes;
    float *partials = (float *)p;
    p += attn__mla_al64(sizeof(float) * part_max * attn__slot_floats(c.R));
    char *thread_ws = p;

    if (sparse) {
        nwork = attn__dec_sparse_pieces(&c, lw);
        work = lw;
    } else if (!work) {
        nwork =
            attn__mla_partition(cm, c.req_begin, c.req_end, c.H, nthreads, lw, local_max, &nparts);
        if (nwork < 0) {
            attn__mla_ws_release();
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
    attn__mla_ws_release();
    return ATTN_OK;
}
