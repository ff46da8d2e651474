/* DCP decode across MPI ranks equals one process. Run under mpirun with
 * 1, 2 or 4 ranks (tests/cp.cmake). Every rank builds the same seeded batch
 * (several lengths, GQA ratios, fp8 KV, a sliding window, a chunked
 * prefill), computes the single-process answer with the backend over the
 * whole cache, writes only its own tokens into its local cache and runs
 * attn_dcp_forward; output and LSE must match within the conformance
 * tolerances (fp32 1e-4, fp8 KV 1e-3, fp16/bf16 2e-2). The failure count is
 * gathered so that every rank exits with the same status. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/comm_mpi.h"
#include "attn/dcp.h"
#include "attn/mla.h"
#include "util/numeric.h"

static int g_fail, g_rank;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_unif(uint64_t *s)
{
    return (float)((rng_next(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void *rand_buf(uint64_t *s, size_t n, attn_elem e, float amp)
{
    void *p = calloc(n + 16, 4);
    for (size_t i = 0; i < n; i++)
        attn__store_elem(p, e, i, rng_unif(s) * amp);
    return p;
}

typedef struct tcase {
    const char *name;
    bool mla;
    int H, KVH, D, Dv; /* MLA: D = kv_lora_rank + rope, Dv = v_head_dim */
    attn_dtype dt;
    attn_kv_dtype kvdt;
    int window, interleave, nreq, maxlen, prefill_len;
    double tol;
} tcase;

typedef struct batch {
    int T, nb, stride;
    int32_t *qsl, *sl, *bt;
    int64_t *slots_all; /* [sum seq_len] full-cache slot of every position */
    attn_common_metadata cm;
} batch;

static void make_batch(const tcase *c, uint64_t *s, int bs, batch *b)
{
    memset(b, 0, sizeof *b);
    b->qsl = calloc((size_t)c->nreq + 1, 4);
    b->sl = calloc((size_t)c->nreq, 4);
    b->stride = (c->maxlen + bs - 1) / bs;
    for (int r = 0; r < c->nreq; r++) {
        int len = 1 + (int)(rng_next(s) % (uint64_t)c->maxlen);
        if (r == 1) len = c->maxlen;                  /* always one long request */
        if (r == 2) len = 1 + (int)(rng_next(s) % 5); /* and one very short */
        int q = (r == c->nreq - 1 && c->prefill_len) ? c->prefill_len : 1;
        if (q > len) q = len;
        b->sl[r] = len;
        b->qsl[r + 1] = b->qsl[r] + q;
        b->nb += (len + bs - 1) / bs;
    }
    b->T = b->qsl[c->nreq];
    b->bt = calloc((size_t)c->nreq * (size_t)b->stride, 4);
    /* blocks in a shuffled order */
    int32_t *perm = calloc((size_t)b->nb, 4);
    for (int i = 0; i < b->nb; i++)
        perm[i] = i;
    for (int i = b->nb - 1; i > 0; i--) {
        int j = (int)(rng_next(s) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int k = 0;
    for (int r = 0; r < c->nreq; r++)
        for (int i = 0; i < (b->sl[r] + bs - 1) / bs; i++)
            b->bt[(size_t)r * (size_t)b->stride + (size_t)i] = perm[k++];
    free(perm);
    int maxq = 0, maxs = 0;
    for (int r = 0; r < c->nreq; r++) {
        maxq = b->qsl[r + 1] - b->qsl[r] > maxq ? b->qsl[r + 1] - b->qsl[r] : maxq;
        maxs = b->sl[r] > maxs ? b->sl[r] : maxs;
    }
    b->cm = (attn_common_metadata){.query_start_loc = b->qsl,
                                   .seq_lens = b->sl,
                                   .num_reqs = c->nreq,
                                   .num_actual_tokens = b->T,
                                   .max_query_len = maxq,
                                   .max_seq_len = maxs,
                                   .block_table = b->bt,
                                   .block_table_stride = b->stride,
                                   .causal = true,
                                   .block_size = bs};
}

static attn_elem kv_elem(const tcase *c)
{
    if (c->kvdt == ATTN_KV_FP8_E4M3) return ATTN_ELEM_FP8_E4M3;
    if (c->kvdt == ATTN_KV_FP8_E5M2) return ATTN_ELEM_FP8_E5M2;
    return attn_dtype_elem(c->dt);
}

/* HND cache (standard) or packed latent rows (MLA) of nb blocks. */
static attn_kv_view make_view(const tcase *c, int nb, int bs)
{
    attn_kv_view v = {0};
    v.elem = kv_elem(c);
    v.num_blocks = nb;
    v.block_size = bs;
    v.k_scale = v.v_scale =
        (v.elem == ATTN_ELEM_FP8_E4M3 || v.elem == ATTN_ELEM_FP8_E5M2) ? 0.05f : 1.0f;
    if (c->mla) {
        v.num_kv_heads = 1;
        v.head_size = c->D;
        v.head_size_v = c->D - 64;
        v.stride_token = c->D;
        v.stride_head = c->D;
        v.stride_block = (int64_t)bs * c->D;
        v.data = calloc((size_t)nb * (size_t)bs * (size_t)c->D + 64, 4);
        return v;
    }
    v.num_kv_heads = c->KVH;
    v.head_size = c->D;
    v.head_size_v = c->Dv;
    v.stride_token = c->D;
    v.stride_head = (int64_t)bs * c->D;
    v.stride_block = (int64_t)c->KVH * bs * c->D;
    v.k_offset = 0;
    v.v_offset = (int64_t)nb * v.stride_block;
    v.data = calloc((size_t)2 * (size_t)nb * (size_t)v.stride_block + 64, 4);
    return v;
}

static const attn_backend *backend(const char *name)
{
    const attn_backend *b = NULL;
    const attn_platform *p = NULL;
    if (attn_platform_current(&p) != ATTN_OK || attn_backend_resolve(p, name, &b) != ATTN_OK) {
        fprintf(stderr, "rank %d: %s: %s\n", g_rank, name, attn_last_error());
        exit(1);
    }
    return b;
}

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            g_fail++;                                                                              \
            fprintf(stderr, "rank %d: %s:%d: ", g_rank, __FILE__, __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

typedef struct run_ctx {
    attn_comm *comm;
    int bs;
} run_ctx;

static attn_layer_params layer_of(const tcase *c)
{
    attn_layer_params lp = {.num_heads = c->H,
                            .num_kv_heads = c->mla ? 1 : c->KVH,
                            .head_size = c->D,
                            .head_size_v = c->mla ? 0 : c->Dv,
                            .sliding_window = c->window,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = c->dt,
                            .kv_cache_dtype = c->kvdt};
    if (c->mla) {
        lp.kv_lora_rank = c->D - 64;
        lp.qk_rope_head_dim = 64;
        lp.qk_nope_head_dim = 128;
        lp.v_head_dim = c->Dv;
    }
    return lp;
}

/* Writes positions [0, seq_len) of every request: all of them (rank -1)
 * or only this rank's. */
static void fill_cache(const tcase *c, const batch *b, attn_kv_view *v, int rank, int W, int bs,
                       uint64_t seed)
{
    int P = 0;
    for (int r = 0; r < c->nreq; r++)
        P += b->sl[r];
    int64_t *slots = calloc((size_t)P, 8);
    int p = 0;
    for (int r = 0; r < c->nreq; r++) {
        const int32_t *row = b->bt + (size_t)r * (size_t)b->stride;
        for (int i = 0; i < b->sl[r]; i++, p++)
            slots[p] = rank < 0 ? (int64_t)row[i / bs] * bs + i % bs
                                : attn_dcp_local_slot(i, row, W, rank, c->interleave, bs);
    }
    uint64_t s = seed ^ 0x6b76;
    attn_elem el = attn_dtype_elem(c->dt);
    attn_status st;
    if (c->mla) {
        void *lat = rand_buf(&s, (size_t)P * (size_t)(c->D - 64), el, 1.0f);
        void *rope = rand_buf(&s, (size_t)P * 64, el, 1.0f);
        st = attn_mla_write_latent(v, slots, P, lat, rope, c->dt);
        free(lat);
        free(rope);
    } else {
        void *k = rand_buf(&s, (size_t)P * (size_t)c->KVH * (size_t)c->D, el, 1.0f);
        void *vv = rand_buf(&s, (size_t)P * (size_t)c->KVH * (size_t)c->Dv, el, 1.0f);
        st = attn_kv_write(v, slots, P, k, vv, el);
        free(k);
        free(vv);
    }
    EXPECT(st == ATTN_OK, "%s: cache write: %s", c->name, attn_last_error());
    free(slots);
}

static void run_case(const run_ctx *x, const tcase *c, uint64_t seed)
{
    int W = attn_comm_size(x->comm), rank = attn_comm_rank(x->comm), bs = x->bs;
    uint64_t s = seed;
    batch b;
    make_batch(c, &s, bs, &b);
    attn_layer_params lp = layer_of(c);
    const attn_backend *be = backend(c->mla ? "CPU_MLA" : "CPU_ATTN");
    attn_elem el = attn_dtype_elem(c->dt);
    int qd = c->mla ? 128 + 64 : c->D;
    size_t rows = (size_t)b.T * (size_t)c->H;
    void *q = rand_buf(&s, rows * (size_t)qd, el, c->mla ? 0.3f : 1.0f);
    void *w_uk = NULL, *w_uv = NULL;
    if (c->mla) {
        w_uk = rand_buf(&s, (size_t)c->H * 128 * (size_t)(c->D - 64), el, 0.08f);
        w_uv = rand_buf(&s, (size_t)c->H * (size_t)(c->D - 64) * (size_t)c->Dv, el, 0.08f);
    }
    attn_kv_view full = make_view(c, b.nb, bs), local = make_view(c, b.nb, bs);
    fill_cache(c, &b, &full, -1, W, bs, seed);
    fill_cache(c, &b, &local, rank, W, bs, seed);
    attn_kernel *k = NULL;
    EXPECT(attn_kernel_open(be, &lp, NULL, &k) == ATTN_OK, "kernel open: %s", attn_last_error());
    /* single process */
    void *out1 = calloc(rows * (size_t)c->Dv + 16, 4), *out2 = calloc(rows * (size_t)c->Dv + 16, 4);
    float *lse1 = calloc(rows, 4), *lse2 = calloc(rows, 4);
    void *bst = NULL;
    const void *md = NULL;
    attn_builder_init bi = {.desc = be->desc,
                            .layer = &lp,
                            .block_size = bs,
                            .num_blocks = b.nb,
                            .max_num_reqs = c->nreq,
                            .max_num_tokens = b.T,
                            .max_blocks_per_req = b.stride};
    attn_status st = be->desc->builder->create(&bi, &bst);
    if (st == ATTN_OK) st = be->desc->builder->build(bst, 0, &b.cm, false, &md);
    size_t ss = c->mla ? attn_mla_forward_scratch_size(&lp, b.T) : 0;
    void *scratch = ss ? aligned_alloc(64, (ss + 63) / 64 * 64) : NULL;
    if (st == ATTN_OK && c->mla) {
        attn_mla_args a = {.layer = &lp,
                           .common = &b.cm,
                           .metadata = md,
                           .kv = &full,
                           .q = q,
                           .out = out1,
                           .lse = lse1,
                           .w_uk = w_uk,
                           .w_uv = w_uv};
        st = attn_kernel_mla_forward(k, &a, scratch, ss);
    } else if (st == ATTN_OK) {
        attn_forward_args a = {.layer = &lp,
                               .common = &b.cm,
                               .metadata = md,
                               .q = q,
                               .kv = &full,
                               .out = out1,
                               .lse = lse1};
        st = attn_kernel_forward(k, &a);
    }
    EXPECT(st == ATTN_OK, "%s: single-process forward: %s", c->name, attn_last_error());
    /* DCP */
    attn_dcp *d = NULL;
    attn_dcp_init di = {.struct_size = sizeof di,
                        .backend = be,
                        .layer = &lp,
                        .comm = x->comm,
                        .interleave = c->interleave,
                        .block_size = bs,
                        .num_blocks = b.nb,
                        .max_num_tokens = b.T,
                        .max_blocks_per_req = b.stride};
    st = attn_dcp_create(&di, &d);
    EXPECT(st == ATTN_OK, "%s: attn_dcp_create: %s", c->name, attn_last_error());
    if (st == ATTN_OK) {
        attn_dcp_args a = {.cm = &b.cm,
                           .kv = &local,
                           .q = q,
                           .out = out2,
                           .lse = lse2,
                           .w_uk = w_uk,
                           .w_uv = w_uv};
        st = attn_dcp_forward(d, &a);
        EXPECT(st == ATTN_OK, "%s: attn_dcp_forward: %s", c->name, attn_last_error());
    }
    double err = 0, lerr = 0;
    for (size_t i = 0; i < rows * (size_t)c->Dv; i++) {
        double e =
            fabs((double)attn__load_elem(out1, el, i) - (double)attn__load_elem(out2, el, i));
        err = e > err || isnan(e) ? e : err;
    }
    for (size_t i = 0; i < rows; i++) {
        double e = fabs((double)lse1[i] - (double)lse2[i]) / fmax(1.0, fabs((double)lse1[i]));
        lerr = e > lerr || isnan(e) ? e : lerr;
    }
    EXPECT(err <= c->tol && lerr <= c->tol, "%s: %d ranks: max error %.3g, lse %.3g (tol %.0e)",
           c->name, W, err, lerr, c->tol);
    if (rank == 0)
        printf("%-34s ranks %d tokens %3d max error %.3g lse %.3g (tol %.0e)\n", c->name, W, b.T,
               err, lerr, c->tol);
    attn_dcp_free(d);
    be->desc->builder->destroy(bst);
    attn_kernel_close(k);
    free(scratch);
    free(out1), free(out2), free(lse1), free(lse2), free(q), free(w_uk), free(w_uv);
    free(full.data), free(local.data);
    free(b.qsl), free(b.sl), free(b.bt);
}

static const tcase g_cases[] = {
    {"CPU_ATTN fp32 MHA I=1", false, 4, 4, 64, 64, ATTN_DTYPE_FP32, ATTN_KV_AUTO, 0, 1, 5, 300, 0,
     1e-4},
    {"CPU_ATTN bf16 GQA4 I=16", false, 8, 2, 128, 128, ATTN_DTYPE_BF16, ATTN_KV_AUTO, 0, 16, 6, 700,
     0, 2e-2},
    {"CPU_ATTN fp16 GQA8 fp8-e4m3 I=4", false, 16, 2, 64, 64, ATTN_DTYPE_FP16, ATTN_KV_FP8_E4M3, 0,
     4, 5, 400, 0, 2e-2},
    {"CPU_ATTN fp32 fp8-e5m2 I=2", false, 4, 2, 64, 64, ATTN_DTYPE_FP32, ATTN_KV_FP8_E5M2, 0, 2, 4,
     250, 0, 1e-3},
    {"CPU_ATTN fp32 GQA2 window 37 I=2", false, 4, 2, 64, 64, ATTN_DTYPE_FP32, ATTN_KV_AUTO, 37, 2,
     5, 300, 0, 1e-4},
    {"CPU_ATTN fp32 chunked prefill 9 I=8", false, 4, 1, 64, 64, ATTN_DTYPE_FP32, ATTN_KV_AUTO, 0,
     8, 4, 200, 9, 1e-4},
    {"CPU_MLA bf16 R512 I=1", true, 16, 1, 576, 128, ATTN_DTYPE_BF16, ATTN_KV_AUTO, 0, 1, 4, 300, 0,
     2e-2},
    {"CPU_MLA fp32 fp8-e4m3 R512 I=16", true, 8, 1, 576, 128, ATTN_DTYPE_FP32, ATTN_KV_FP8_E4M3, 0,
     16, 4, 400, 0, 1e-3},
    {"CPU_MLA fp32 R256 chunked prefill I=4", true, 16, 1, 320, 128, ATTN_DTYPE_FP32, ATTN_KV_AUTO,
     0, 4, 4, 150, 6, 1e-4},
};

/* --frames: rank 0 gathers a 144-byte report while the others send a
 * 30704-byte step part (ranks given different --steps): refused on every
 * rank naming the others, nothing written (ASan sees the exact buffers);
 * the tally then runs on a fresh communicator. */
static attn_comm *frames(attn_comm *comm)
{
    size_t bytes = g_rank == 0 ? 144 : 30704;
    uint32_t kind = g_rank == 0 ? ATTN_COMM_REPORT : ATTN_COMM_DCP_PARTIAL;
    int W = attn_comm_size(comm);
    unsigned char *send = calloc(bytes, 1), *recv = malloc((size_t)W * bytes);
    memset(recv, 0xAB, (size_t)W * bytes);
    attn_status st = attn_comm_exchange(comm, kind, send, bytes, recv);
    printf("rank %d: %s: %s\n", g_rank, attn_status_name(st), attn_last_error());
    EXPECT(W < 2 || st == ATTN_BAD_STATE, "out-of-step exchange accepted");
    char want[512];
    int n = snprintf(
        want, sizeof want,
        "exchange refused on rank %d: the ranks are out of step: this rank sends %s; ", g_rank,
        g_rank ? "dcp partial, 30704 bytes, exchange #1" : "report, 144 bytes, exchange #1");
    for (int r = 0, k = 0; r < W && n > 0 && (size_t)n < sizeof want; r++)
        if (r != g_rank && (r == 0 || g_rank == 0))
            n += snprintf(
                want + n, sizeof want - (size_t)n, "%srank %d sent %s", k++ ? "; " : "", r,
                r ? "dcp partial, 30704 bytes, exchange #1" : "report, 144 bytes, exchange #1");
    EXPECT(W < 2 || strcmp(attn_last_error(), want) == 0, "message '%s', want '%s'",
           attn_last_error(), want);
    bool untouched = true;
    for (size_t i = 0; i < (size_t)W * bytes && W > 1; i++)
        untouched = untouched && recv[i] == 0xAB;
    EXPECT(untouched, "recv written");
    free(send);
    free(recv);
    attn_comm *fresh = NULL;
    if (attn_comm_mpi_create(NULL, NULL, &fresh) != ATTN_OK) return comm;
    return fresh;
}

/* --mismatch: rank 1 reports another choice; --stall: rank 1 stops
 * answering; --die: rank 1 exits in the middle of the exchange. */
int main(int argc, char **argv)
{
    if (!attn_comm_mpi_launched()) {
        printf("SKIP: not started by mpirun\n");
        return 77;
    }
    attn_comm *comm = NULL;
    if (attn_comm_mpi_create(&argc, &argv, &comm) != ATTN_OK) {
        fprintf(stderr, "MPI: %s\n", attn_last_error());
        return 1;
    }
    g_rank = attn_comm_rank(comm);
    const char *mode = argc > 1 ? argv[1] : "";
    attn_comm *tally = comm;
    if (!strcmp(mode, "--frames")) {
        tally = frames(comm);
    } else if (!strcmp(mode, "--mismatch")) {
        char msg[1024] = "";
        const char *choice = g_rank == 1 ? "backend REFERENCE, layout NHD, block size 16"
                                         : "backend CPU_ATTN, layout HND, block size 16";
        attn_status st = attn_dcp_agree(comm, choice, msg, sizeof msg);
        printf("rank %d: %s: %s\n", g_rank, attn_status_name(st), msg);
        EXPECT(attn_comm_size(comm) < 2 || st == ATTN_BACKEND_INVALID, "mismatch not found");
    } else if (!strcmp(mode, "--stall") || !strcmp(mode, "--die")) {
        attn_comm_set_timeout(comm, 2.0);
        float x = 1, all[64];
        if (g_rank == 1 && mode[2] == 'd') _exit(3);
        if (g_rank == 1) {
            struct timespec ts = {20, 0};
            nanosleep(&ts, NULL);
        }
        attn_status st = attn_comm_allgather(comm, &x, sizeof x, all);
        if (st != ATTN_OK) {
            fprintf(stderr, "attn: rank %d: %s\n", g_rank, attn_last_error());
            attn_comm_abort(comm, 2);
        }
    } else {
        run_ctx x = {.comm = comm, .bs = 16};
        for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++)
            run_case(&x, &g_cases[i], 0x5eed0000u + i);
    }
    int all[1024] = {0};
    int total = 0;
    if (attn_comm_allgather(tally, &g_fail, sizeof g_fail, all) == ATTN_OK)
        for (int i = 0; i < attn_comm_size(tally); i++)
            total += all[i];
    else
        total = 1;
    if (g_rank == 0)
        printf("%s: %d failure(s) over %d ranks\n", total ? "FAIL" : "PASS", total,
               attn_comm_size(tally));
    if (tally != comm) attn_comm_free(tally);
    attn_comm_free(comm);
    return total ? 1 : 0;
}
