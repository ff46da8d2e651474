/* DCP decode figures: run under mpirun -np W (W = 1 is one process). One
 * llama-3.1-8b attention layer (32 heads, 8 KV heads, head size 128, bf16)
 * decoding a batch of requests at a given context. Each rank allocates and
 * fills only its share of the KV cache. Prints, per rank, the KV bytes it
 * holds and the decode step split into local attention, exchange of
 * (output, LSE) and merge; with one rank also the plain CPU_ATTN forward
 * (no DCP machinery) as the baseline. Figures only, no assertions. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/comm_mpi.h"
#include "attn/dcp.h"
#include "util/numeric.h"

enum { H = 32, KVH = 8, HD = 128, BS = 16 };

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct fig {
    double kv_bytes, local_ms, exchange_ms, merge_ms, step_ms, plain_ms;
} fig;

typedef struct opts {
    long ctx, batch, iters, inter;
} opts;

static bool parse_opts(int argc, char **argv, opts *o)
{
    *o = (opts){.ctx = 16384, .batch = 4, .iters = 5, .inter = 1};
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--context"))
            o->ctx = v;
        else if (!strcmp(argv[i], "--batch"))
            o->batch = v;
        else if (!strcmp(argv[i], "--iters"))
            o->iters = v;
        else if (!strcmp(argv[i], "--interleave"))
            o->inter = v;
    }
    if (o->ctx < 1 || o->ctx > (1 << 22) || o->batch < 1 || o->batch > 256 || o->iters < 1 ||
        o->inter < 1 || BS % o->inter) {
        fprintf(stderr,
                "usage: bench_dcp_mpi [--context N] [--batch B] [--iters K] "
                "[--interleave I (divides %d)]\n",
                BS);
        return false;
    }
    return true;
}

/* One rank's share of the batch: its KV blocks (seeded per rank), the block
 * table over them, the decode batch's metadata and queries. */
typedef struct batch {
    uint16_t *cache, *q, *out;
    int32_t *qsl, *sl, *bt;
    int nb, stride;
    attn_kv_view kv;
    attn_common_metadata cm;
} batch;

static void batch_make(const opts *o, int32_t local, int rank, batch *x)
{
    int nbl = (local + BS - 1) / BS;
    x->stride = (int)((o->ctx + BS - 1) / BS);
    x->nb = nbl * (int)o->batch;
    size_t blk = (size_t)KVH * BS * HD, n = (size_t)2 * (size_t)x->nb * blk;
    x->cache = malloc(n * 2);
    uint64_t s = 42 + (uint64_t)rank;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x->cache[i] = attn__f32_to_bf16((float)((double)(s >> 40) / 16777216.0 - 0.5));
    }
    x->kv = (attn_kv_view){.data = x->cache,
                           .elem = ATTN_ELEM_BF16,
                           .num_blocks = x->nb,
                           .block_size = BS,
                           .num_kv_heads = KVH,
                           .head_size = HD,
                           .head_size_v = HD,
                           .v_offset = (int64_t)x->nb * (int64_t)blk,
                           .stride_block = (int64_t)blk,
                           .stride_token = HD,
                           .stride_head = (int64_t)BS * HD,
                           .k_scale = 1,
                           .v_scale = 1};
    x->qsl = calloc((size_t)o->batch + 1, 4);
    x->sl = calloc((size_t)o->batch, 4);
    x->bt = calloc((size_t)o->batch * (size_t)x->stride, 4);
    for (int r = 0; r < o->batch; r++) {
        x->qsl[r + 1] = r + 1;
        x->sl[r] = (int32_t)o->ctx;
        for (int j = 0; j < nbl; j++)
            x->bt[(size_t)r * (size_t)x->stride + (size_t)j] = r * nbl + j;
    }
    x->cm = (attn_common_metadata){.query_start_loc = x->qsl,
                                   .seq_lens = x->sl,
                                   .num_reqs = (int)o->batch,
                                   .num_actual_tokens = (int)o->batch,
                                   .max_query_len = 1,
                                   .max_seq_len = (int)o->ctx,
                                   .block_table = x->bt,
                                   .block_table_stride = x->stride,
                                   .causal = true,
                                   .block_size = BS};
    size_t nq = (size_t)o->batch * H * HD;
    x->q = malloc(nq * 2);
    x->out = malloc(nq * 2);
    for (size_t i = 0; i < nq; i++)
        x->q[i] = attn__f32_to_bf16((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
}

static void batch_free(batch *x)
{
    free(x->cache), free(x->qsl), free(x->sl), free(x->bt), free(x->q), free(x->out);
}

static void time_dcp(const opts *o, attn_dcp *d, attn_comm *comm, int rank, batch *x, fig *f)
{
    attn_dcp_args a = {.cm = &x->cm, .kv = &x->kv, .q = x->q, .out = x->out};
    for (long it = -1; it < o->iters; it++) { /* one warm-up */
        double t0 = now_ns();
        if (attn_dcp_forward(d, &a) != ATTN_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, attn_last_error());
            attn_comm_abort(comm, 1);
        }
        double t1 = now_ns();
        attn_dcp_timing t;
        attn_dcp_last_timing(d, &t);
        if (it < 0) continue;
        f->step_ms += (t1 - t0) / 1e6 / (double)o->iters;
        f->local_ms += t.local_ns / 1e6 / (double)o->iters;
        f->exchange_ms += t.exchange_ns / 1e6 / (double)o->iters;
        f->merge_ms += t.merge_ns / 1e6 / (double)o->iters;
    }
}

/* the plain forward: one process without DCP */
static void time_plain(const opts *o, const attn_backend *b, const attn_layer_params *lp, batch *x,
                       fig *f)
{
    void *bst = NULL;
    const void *md = NULL;
    attn_builder_init bi = {.desc = b->desc,
                            .layer = lp,
                            .block_size = BS,
                            .num_blocks = x->nb,
                            .max_num_reqs = (int)o->batch,
                            .max_num_tokens = (int)o->batch,
                            .max_blocks_per_req = x->stride};
    attn_kernel *k = NULL;
    if (attn_kernel_open(b, lp, NULL, &k) != ATTN_OK) {
        fprintf(stderr, "kernel: %s\n", attn_last_error());
        return;
    }
    b->desc->builder->create(&bi, &bst);
    for (long it = -1; it < o->iters; it++) {
        double t0 = now_ns();
        b->desc->builder->build(bst, 0, &x->cm, false, &md);
        attn_forward_args fa = {
            .common = &x->cm, .metadata = md, .q = x->q, .kv = &x->kv, .out = x->out};
        attn_kernel_forward(k, &fa);
        if (it >= 0) f->plain_ms += (now_ns() - t0) / 1e6 / (double)o->iters;
    }
    b->desc->builder->destroy(bst);
    attn_kernel_close(k);
}

static void report(const opts *o, const fig *all, int W)
{
    printf("DCP decode, one llama-3.1-8b layer (32 heads, 8 KV heads, head 128, bf16 KV), "
           "batch %ld x context %ld, interleave %ld, %d rank(s), %s threads per rank, %ld "
           "iterations\n",
           o->batch, o->ctx, o->inter, W,
           getenv("ATTN_NUM_THREADS") ? getenv("ATTN_NUM_THREADS") : "default", o->iters);
    for (int r = 0; r < W; r++)
        printf("rank %d: KV %.1f MiB per layer (%.2f GiB for 32 layers); step %.2f ms = local "
               "%.2f + exchange %.2f + merge %.2f ms%s\n",
               r, all[r].kv_bytes / 1048576.0, all[r].kv_bytes * 32 / 1073741824.0, all[r].step_ms,
               all[r].local_ms, all[r].exchange_ms, all[r].merge_ms, "");
    if (W == 1) printf("plain CPU_ATTN forward (no DCP): %.2f ms\n", all[0].plain_ms);
}

int main(int argc, char **argv)
{
    opts o;
    if (!parse_opts(argc, argv, &o)) return 2;
    attn_comm *comm = NULL;
    attn_status st = attn_comm_mpi_launched() ? attn_comm_mpi_create(&argc, &argv, &comm)
                                              : attn_comm_self(&comm);
    if (st != ATTN_OK) {
        fprintf(stderr, "comm: %s\n", attn_last_error());
        return 1;
    }
    int W = attn_comm_size(comm), rank = attn_comm_rank(comm);
    int32_t local = attn_dcp_local_len((int32_t)o.ctx, W, rank, (int)o.inter);
    batch x;
    batch_make(&o, local, rank, &x);
    const attn_platform *p = NULL;
    const attn_backend *b = NULL;
    if (attn_platform_current(&p) != ATTN_OK || attn_backend_resolve(p, "CPU_ATTN", &b) != ATTN_OK)
        return 1;
    attn_layer_params lp = {.num_heads = H,
                            .num_kv_heads = KVH,
                            .head_size = HD,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = ATTN_DTYPE_BF16};
    attn_dcp_init di = {.struct_size = sizeof di,
                        .backend = b,
                        .layer = &lp,
                        .comm = comm,
                        .interleave = (int)o.inter,
                        .block_size = BS,
                        .num_blocks = x.nb,
                        .max_num_tokens = (int)o.batch,
                        .max_blocks_per_req = x.stride};
    attn_dcp *d = NULL;
    if (attn_dcp_create(&di, &d) != ATTN_OK) {
        fprintf(stderr, "dcp: %s\n", attn_last_error());
        return 1;
    }
    fig f = {.kv_bytes = (double)local * (double)o.batch * KVH * HD * 2 * 2};
    time_dcp(&o, d, comm, rank, &x, &f);
    if (W == 1) time_plain(&o, b, &lp, &x, &f);
    fig *all = calloc((size_t)W, sizeof *all);
    attn_comm_allgather(comm, &f, sizeof f, all);
    if (rank == 0) report(&o, all, W);
    free(all);
    attn_dcp_free(d);
    batch_free(&x);
    attn_comm_free(comm);
    return 0;
}
