/* CPU_ATTN forward internals shared by its driver files: the per-thread
 * scratch (cpu_scratch.c), the forward context, the row runners
 * (cpu_rows.c) and the phases (cpu_forward.c). Not for other backends. */
#ifndef ATTN_BACKENDS_CPU_FWD_H
#define ATTN_BACKENDS_CPU_FWD_H

#include <stdatomic.h>

#include "backends/cpu/cpu_attn.h"

/* one job per KV head of an interleaved decode unit (attn__cpu_run_rows_heads) */
typedef struct {
    float slope[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_ROWS];
    float m[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_ROWS], l[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_ROWS];
    _Alignas(64) float o[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_ROWS * ATTN_CPU_MAX_HEAD];
    _Alignas(64) unsigned char qbuf[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_QBUF];
    _Alignas(64) unsigned char vs[ATTN_CPU_DEC_HEADS][ATTN_CPU_SD_SCRATCH];
} attn__cpu_dec_scratch;

/* The builder state a thread's calls without builder metadata plan with
 * (cpu_forward.c): made for the layer and block size of key and the batch
 * maxima, kept while later calls fit it. */
typedef struct {
    void *state; /* attn__builder_cpu's, or NULL */
    attn_layer_params key;
    int block_size, max_reqs, max_tokens;
} attn__cpu_plan;

/* row arrays sized for the widest job (ATTN_CPU_WIDE_ROWS) */
typedef struct {
    const void *qrows[ATTN_CPU_WIDE_ROWS];
    int32_t pos[ATTN_CPU_WIDE_ROWS], lo[ATTN_CPU_WIDE_ROWS], hi[ATTN_CPU_WIDE_ROWS];
    float slope[ATTN_CPU_WIDE_ROWS];
    float m[ATTN_CPU_WIDE_ROWS], l[ATTN_CPU_WIDE_ROWS];
    _Alignas(64) float s[ATTN_CPU_WIDE_ROWS * ATTN_CPU_CHUNK];
    _Alignas(64) float o[ATTN_CPU_WIDE_ROWS * ATTN_CPU_MAX_HEAD];
    _Alignas(64) unsigned char qbuf[ATTN_CPU_WIDE_QBUF];
    _Alignas(64) unsigned char vs[ATTN_CPU_VSCRATCH];
    attn__cpu_dec_scratch dh;
    attn__cpu_plan plan;
} attn__cpu_scratch;

/* This thread's scratch, allocated once per thread (pthread key), never per
 * call; NULL when out of memory. */
attn__cpu_scratch *attn__cpu_scratch_get(void);

typedef struct {
    const attn_forward_args *a;
    const attn__cpu_isa *isa;
    const attn__cpu_md *md;      /* NULL: per-request plan */
    const attn__cpu_tile *tiles; /* the phase's tiles */
    int H, KVH, G, HG, D, Dv;
    int MH;         /* > 1: a unit is MH KV heads of a decode tile (attn__cpu_run_rows_heads) */
    int job_tokens; /* query tokens per job (attn__cpu_job_tokens) */
    size_t q_esz, kv_esz;
    attn_elem q_elem;
    bool causal;
    int window;
    float scale;
    attn__cpu_prec prec;
    bool serial;   /* too little work to wake the pool for: the caller runs it all */
    int store_isa; /* finished bf16 rows stored 16 wide (2: AVX-512), 8 wide (1: AVX2) or by 1 */
    atomic_int oom;
} attn__cpu_fwd_ctx;

static inline float *attn__cpu_partial_row(const attn__cpu_fwd_ctx *c, int64_t slot, int head)
{
    return c->md->partials + (slot * c->H + head) * (int64_t)(c->Dv + 2);
}

/* The tile the builder would make for tokens [i0, i0+n) of request r. */
void attn__cpu_plan_tile(const attn__cpu_fwd_ctx *c, int r, int i0, int n, attn__cpu_tile *t);
/* Writes one finished row: merges a cascade partial, adds the sink,
 * normalises and stores. o is unnormalised in dequantised units. */
void attn__cpu_finish_row(const attn__cpu_fwd_ctx *c, int64_t tok, int head, float *o, float m,
                          float l, const float *prefix);
/* A tile's rows of KV head kvh, head group hgi (in pieces when it has more
 * tokens than fit the rows limit). */
void attn__cpu_run_tile(attn__cpu_fwd_ctx *c, const attn__cpu_tile *t, int kvh, int hgi,
                        attn__cpu_scratch *sc);
/* Decode rows of KV heads kvh0 .. kvh0 + nh - 1 interleaved block-major
 * (c->MH > 1 only). */
void attn__cpu_run_rows_heads(attn__cpu_fwd_ctx *c, const attn__cpu_tile *t, int kvh0, int nh,
                              attn__cpu_scratch *sc);

#endif
