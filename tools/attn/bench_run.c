/* `attn bench`: the KV pools (filled once, much larger than the LLC so
 * every call reads cold blocks) and one timed (backend, shape) measurement
 * after untimed warm-up calls. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench.h"

#define BENCH_WARM_S     0.25  /* untimed calls before the samples, seconds */
#define BENCH_WARM_CALLS 10000 /* and calls at most */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

const char *bench_kv_label(attn_kv_dtype k)
{
    return k == ATTN_KV_AUTO ? "bf16" : attn_kv_dtype_name(k);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The host pool copied to dev, whose memory the view then names. */
static attn_status pool_upload(pool_t *p)
{
    attn_status st = attn_device_alloc(p->dev, p->bytes, ATTN_MEM_CACHE, &p->dmem);
    if (st == ATTN_OK)
        st = attn_device_copy_in(p->dev, p->dmem, 0, p->data, (size_t)p->li.bytes_per_layer);
    munmap(p->data, p->bytes);
    p->data = NULL;
    p->li.view.data = p->dmem;
    p->li.view.device = p->dev;
    return st;
}

attn_status bench_pool_make(pool_t *p, const attn_backend *b, attn_device *dev, attn_kv_dtype kv,
                            int num_blocks, int bs)
{
    memset(p, 0, sizeof *p);
    p->kv = kv;
    p->b = b;
    p->dev = dev && !attn_device_host_visible(dev) ? dev : NULL;
    p->num_blocks = num_blocks;
    attn_kv_layout layout = b->desc->required_layout != ATTN_LAYOUT_DEFAULT
                                ? b->desc->required_layout
                                : ATTN_LAYOUT_NHD;
    attn_status st = attn_kv_layout_compute(b->desc, layout, num_blocks, bs, BENCH_KV_HEADS,
                                            BENCH_HEAD, 0, kv, ATTN_DTYPE_BF16, &p->li);
    if (st != ATTN_OK) return st;
    size_t bytes = (size_t)p->li.bytes_per_layer;
    p->bytes = (bytes + 4095) / 4096 * 4096;
    /* transparent huge pages where allowed, like the bandwidth buffer */
    p->data = mmap(NULL, p->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p->data == MAP_FAILED) {
        p->data = NULL;
        return ATTN_OUT_OF_MEMORY;
    }
#ifdef MADV_HUGEPAGE
    madvise(p->data, p->bytes, MADV_HUGEPAGE);
#endif
    uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)kv;
    if (p->li.elem == ATTN_ELEM_BF16) {
        uint16_t *u = p->data;
        size_t n = bytes / 2;
        for (size_t i = 0; i < n; i += 4) {
            uint64_t r = rng_next(&s);
            for (int k = 0; k < 4 && i + k < n; k++) {
                /* |x| in [2^-8, 2), random sign and mantissa */
                uint16_t v = (uint16_t)(r >> (16 * k));
                u[i + k] = (uint16_t)((v & 0x807f) | (uint16_t)((0x77 + (v >> 7 & 7)) << 7));
            }
        }
    } else {
        uint8_t *u = p->data;
        for (size_t i = 0; i < bytes; i += 8) {
            uint64_t r = rng_next(&s);
            for (int k = 0; k < 8 && i + (size_t)k < bytes; k++)
                u[i + (size_t)k] = (uint8_t)((r >> (8 * k)) & 0xbf); /* finite codes */
        }
    }
    p->li.view.data = p->data;
    return p->dev ? pool_upload(p) : ATTN_OK;
}

void bench_pool_free(pool_t *p)
{
    if (p->data) munmap(p->data, p->bytes);
    if (p->dmem) attn_device_free(p->dev, p->dmem);
    p->data = p->dmem = NULL;
}

/* ---- one (backend, shape) measurement ---------------------------------------- */

void bench_shape_figures(const shape_t *sh, double *bytes, double *flops, double *tokens)
{
    double esz = sh->kv == ATTN_KV_AUTO || sh->kv == ATTN_KV_BFLOAT16 ? 2.0 : 1.0;
    *bytes = (double)sh->batch * sh->context * BENCH_KV_HEADS * BENCH_HEAD * 2.0 * esz;
    double seen = 0;
    for (int i = 0; i < sh->qlen; i++)
        seen += sh->context - sh->qlen + i + 1;
    *flops = (double)sh->batch * BENCH_HEADS * seen * BENCH_HEAD * 4.0;
    *tokens = (double)sh->batch * sh->qlen;
}

/* The inputs of one measurement: queries, the batch's metadata arrays, the
 * builder and kernel state, and the sample times. */
typedef struct {
    int nbr; /* blocks per request */
    uint16_t *q, *out;
    int32_t *qsl, *seq, *bt;
    int64_t *slots;
    double *times;
    attn_layer_params lp;
    attn_common_metadata cm;
    void *bstate;
    attn_kernel *k;   /* the checked handle: self-test gate, per-layer state */
    attn_device *dev; /* the backend's device when not host-visible, else NULL */
    void *dq, *dout;  /* q and out in its memory */
} inputs_t;

static void inputs_free(const attn_backend *b, inputs_t *in)
{
    attn_kernel_close(in->k);
    if (in->bstate) b->desc->builder->destroy(in->bstate);
    if (in->dev) {
        attn_device_free(in->dev, in->dq);
        attn_device_free(in->dev, in->dout);
    }
    free(in->q);
    free(in->out);
    free(in->qsl);
    free(in->seq);
    free(in->bt);
    free(in->slots);
    free(in->times);
}

/* q (filled) and out in the memory of a device that is not host-visible */
static bool inputs_upload(inputs_t *in, size_t bytes, result_t *res)
{
    attn_status st = attn_device_alloc(in->dev, bytes, ATTN_MEM_STEP, &in->dq);
    if (st == ATTN_OK) st = attn_device_alloc(in->dev, bytes, ATTN_MEM_STEP, &in->dout);
    if (st == ATTN_OK) st = attn_device_copy_in(in->dev, in->dq, 0, in->q, bytes);
    if (st != ATTN_OK)
        snprintf(res->error, sizeof res->error, "device %s: %s", attn_device_name(in->dev),
                 attn_last_error());
    return st == ATTN_OK;
}

/* false with res->error set when something could not be made */
static bool inputs_make(const backend_t *be, const shape_t *sh, const pool_t *pool, const opts_t *o,
                        inputs_t *in, result_t *res)
{
    const attn_backend *b = be->b;
    in->dev = be->dev && !attn_device_host_visible(be->dev) ? be->dev : NULL;
    int bs = o->block_size;
    int nbr = in->nbr = (sh->context + bs - 1) / bs;
    int tokens = sh->batch * sh->qlen;
    size_t qn = (size_t)tokens * BENCH_HEADS * BENCH_HEAD;
    in->q = malloc(qn * 2), in->out = malloc(qn * 2);
    in->qsl = malloc(sizeof(int32_t) * (size_t)(sh->batch + 1));
    in->seq = malloc(sizeof(int32_t) * (size_t)sh->batch);
    in->bt = malloc(sizeof(int32_t) * (size_t)sh->batch * (size_t)nbr);
    in->slots = malloc(sizeof(int64_t) * (size_t)tokens);
    in->times = calloc((size_t)o->repeats + 1, sizeof(double));
    if (!in->q || !in->out || !in->qsl || !in->seq || !in->bt || !in->slots || !in->times) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return false;
    }
    uint64_t s = 12345;
    for (size_t i = 0; i < qn; i++)
        in->q[i] = (uint16_t)((rng_next(&s) & 0x807f) | 0x3c00); /* |q| in [2^-7, 2^-6) */
    for (int r = 0; r <= sh->batch; r++)
        in->qsl[r] = r * sh->qlen;
    for (int r = 0; r < sh->batch; r++)
        in->seq[r] = sh->context;
    in->lp = (attn_layer_params){.num_heads = BENCH_HEADS,
                                 .num_kv_heads = BENCH_KV_HEADS,
                                 .head_size = BENCH_HEAD,
                                 .attn_type = ATTN_TYPE_DECODER,
                                 .dtype = ATTN_DTYPE_BF16,
                                 .kv_cache_dtype = sh->kv};
    in->cm = (attn_common_metadata){.query_start_loc = in->qsl,
                                    .seq_lens = in->seq,
                                    .num_reqs = sh->batch,
                                    .num_actual_tokens = tokens,
                                    .max_query_len = sh->qlen,
                                    .max_seq_len = sh->context,
                                    .block_table = in->bt,
                                    .block_table_stride = nbr,
                                    .slot_mapping = in->slots,
                                    .causal = true,
                                    .block_size = bs};
    const attn_builder_ops *bo = b->desc->builder;
    if (bo && bo->create) {
        attn_builder_init bi = {.desc = b->desc,
                                .layer = &in->lp,
                                .block_size = bs,
                                .num_blocks = pool->num_blocks,
                                .max_num_reqs = sh->batch,
                                .max_num_tokens = tokens,
                                .max_blocks_per_req = nbr,
                                .device = be->dev ? be->dev : attn_device_host()};
        if (bo->create(&bi, &in->bstate) != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "builder: %s", attn_last_error());
            return false;
        }
    }
    if (attn_kernel_open(b, &in->lp, be->dev, &in->k) != ATTN_OK) {
        snprintf(res->error, sizeof res->error, "kernel: %s", attn_last_error());
        return false;
    }
    if (in->dev && !inputs_upload(in, qn * 2, res)) return false;
    if (sh->batch * nbr > pool->num_blocks) {
        snprintf(res->error, sizeof res->error, "KV pool too small");
        return false;
    }
    return true;
}

/* The timed calls: returns the samples taken into in->times, or -1 with
 * res->error set. */
static int time_calls(const attn_backend *b, const shape_t *sh, pool_t *pool, const opts_t *o,
                      inputs_t *in, result_t *res)
{
    static int rot; /* where the next call's blocks start: every call reads cold KV */
    const attn_builder_ops *bo = b->desc->builder;
    int bs = o->block_size, nbr = in->nbr, per_call = sh->batch * nbr;
    double spent = 0, warm_spent = 0;
    int n = 0, warm = 0;
    while (n < o->repeats) {
        if (rot + per_call > pool->num_blocks || o->hot) rot = 0;
        for (int i = 0; i < per_call; i++)
            in->bt[i] = rot + i;
        rot += per_call;
        for (int r = 0; r < sh->batch; r++)
            for (int i = 0; i < sh->qlen; i++) {
                int pos = sh->context - sh->qlen + i;
                in->slots[r * sh->qlen + i] = (int64_t)in->bt[r * nbr + pos / bs] * bs + pos % bs;
            }
        const void *md = NULL;
        if (in->bstate && bo->build(in->bstate, 0, &in->cm, false, &md) != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "build: %s", attn_last_error());
            return -1;
        }
        attn_forward_args a = {.layer = &in->lp,
                               .common = &in->cm,
                               .metadata = md,
                               .q = in->dev ? in->dq : in->q,
                               .kv = &pool->li.view,
                               .out = in->dev ? in->dout : in->out};
        double t0 = now_s();
        attn_status st = attn_kernel_forward(in->k, &a);
        /* a device kernel may return before it ran: its time ends when it did */
        if (st == ATTN_OK && in->dev) st = attn_device_synchronize(in->dev);
        double dt = now_s() - t0;
        if (st != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "forward: %s: %s", attn_status_name(st),
                     attn_last_error());
            return -1;
        }
        /* Warm-up: the first call, then more while they take under
         * BENCH_WARM_S together. For a while after the pools are written,
         * calls run up to twice as slow (b16 4k bf16: 22 ms for the first
         * few after a REFERENCE pool was filled, 11 ms from then on; b1 4k,
         * the second shape of a sweep: 1.6 ms, 0.8 ms with this), and short
         * shapes take many calls to get past it. A call over 1 s is a
         * sample: not worth repeating. */
        if (n == 0 && dt <= 1.0 && warm < BENCH_WARM_CALLS &&
            (warm == 0 || warm_spent + dt <= BENCH_WARM_S)) {
            warm++;
            warm_spent += dt;
            continue;
        }
        spent += dt;
        in->times[n++] = dt;
        if (spent > o->max_seconds) break;
    }
    return n;
}

/* Median and best of n samples, and the figures against machine m. */
static void fill_figures(const shape_t *sh, double *times, int n, const opts_t *o,
                         const attn_cpu_machine *m, result_t *res)
{
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    double med = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    double bytes, flops, toks;
    bench_shape_figures(sh, &bytes, &flops, &toks);
    res->ok = true;
    res->repeats = n;
    res->ms = med * 1e3;
    res->best_ms = times[0] * 1e3;
    res->tokens_per_s = toks / med;
    res->gbps = bytes / med / 1e9;
    res->bw_fraction = m->read_gbps > 0 ? res->gbps / m->read_gbps : 0;
    res->gflops = flops / med / 1e9;
    /* against the peak of the arithmetic the kernels run, never another's */
    attn_cpu_limit peak;
    attn_cpu_phase_limit(m, NULL, true, true, &peak);
    res->flops_fraction = attn_cpu_limit_fraction(&peak, res->gbps, res->gflops);
    attn_cpu_phase_limit(m, NULL, sh->prefill, o->hot, &res->limit);
    res->limit_fraction = attn_cpu_limit_fraction(&res->limit, res->gbps, res->gflops);
}

void bench_measure(const backend_t *be, const shape_t *sh, pool_t *pool, const opts_t *o,
                   const attn_cpu_machine *m, result_t *res)
{
    memset(res, 0, sizeof *res);
    res->pool_bytes = pool->bytes;
    inputs_t in = {0};
    if (inputs_make(be, sh, pool, o, &in, res)) {
        int n = time_calls(be->b, sh, pool, o, &in, res);
        if (n >= 0) fill_figures(sh, in.times, n, o, m, res);
    }
    inputs_free(be->b, &in);
}
