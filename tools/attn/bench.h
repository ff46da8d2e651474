/* `attn bench` across its files: bench.c (options, the driver), bench_run.c
 * (the KV pools and one timed (backend, shape) measurement) and
 * bench_report.c (the JSON and text reports). */
#ifndef ATTN_TOOLS_BENCH_H
#define ATTN_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/cpu_perf.h"
#include "attn/kvcache.h"

#define BENCH_HEADS    32
#define BENCH_KV_HEADS 8
#define BENCH_HEAD     128
#define MAX_SHAPES     256
#define MAX_LIST       16
#define MAX_KV         4

typedef struct {
    bool prefill;
    int batch, context, qlen;
    attn_kv_dtype kv;
} shape_t;

typedef struct {
    double ms, best_ms, tokens_per_s, gbps, bw_fraction, gflops, flops_fraction;
    attn_cpu_limit limit;  /* what binds the phase (attn/cpu_perf.h) */
    double limit_fraction; /* < 0: the limit has no value here */
    int repeats;
    size_t pool_bytes; /* the KV pool the calls read from */
    bool ok;
    char error[256];
} result_t;

typedef struct {
    const char *name;
    const attn_backend *b;
    attn_device *dev; /* an instance of b's own device; NULL: the host device */
} backend_t;

typedef struct {
    int block_size;
    int repeats;
    double max_seconds; /* per shape and backend */
    bool json;
    bool progress;
    bool hot;            /* reuse the same blocks: cache-resident KV, compute-bound figures */
    size_t buffer_bytes; /* 0: sized from the LLC (attn/cpu_perf.h); also the KV pools' least */
} opts_t;

/* A KV pool per dtype (and per backend layout and device), filled once on
 * the host; on a device whose memory is not host-visible the view reads
 * the device's copy (dmem) and the host memory is released. */
typedef struct {
    attn_kv_dtype kv;
    const attn_backend *b;
    int num_blocks;
    attn_kv_layout_info li;
    void *data;
    size_t bytes;
    attn_device *dev;
    void *dmem;
} pool_t;

/* What a run measured and against what, for the reports. */
typedef struct {
    const opts_t *o;
    const attn_cpu_machine *m;
    const backend_t *bes;
    int nbe;
    const shape_t *shapes;
    int ns;
    const result_t *res; /* res[2 * shape + backend] */
} bench_run;

const char *bench_kv_label(attn_kv_dtype k);
/* Bytes the call must read, flops it must compute, tokens it produces. */
void bench_shape_figures(const shape_t *sh, double *bytes, double *flops, double *tokens);
attn_status bench_pool_make(pool_t *p, const attn_backend *b, attn_device *dev, attn_kv_dtype kv,
                            int num_blocks, int bs);
void bench_pool_free(pool_t *p);
void bench_measure(const backend_t *be, const shape_t *sh, pool_t *pool, const opts_t *o,
                   const attn_cpu_machine *m, result_t *res);
/* Prints the report; ATTN_EXIT_ERROR when it could not be made. */
int bench_report_json(const bench_run *r);
void bench_report_text(const bench_run *r);

#endif
