/* CPU_ATTN internals: the backend object, its builder and metadata, the
 * kernel-variant table (AVX-512 + BF16, AVX-512, AVX2 + FMA, portable C)
 * and the per-chunk micro-kernel interface every variant implements.
 *
 * Work model. A forward call is a list of tiles from the builder; a tile is
 * (request, query tokens, key range). Each tile runs once per KV head (and
 * per group of at most ATTN_CPU_MAX_ROWS query heads): its rows are the
 * query heads of that KV head times the tile's tokens, so every KV block is
 * read once per KV head for all the query heads of its group (decode tiles
 * over a 16-bit cache: up to ATTN_CPU_DEC_HEADS KV heads per unit, their
 * chunks interleaved block by block so the cache is read in address
 * order). A prefill tile holds one job's query tokens: ATTN_CPU_MAX_ROWS
 * rows, or up to ATTN_CPU_WIDE_ROWS for a variant that sets wide_rows (the
 * builder sizes them for the active variant; a tile larger than the
 * running variant's job runs in pieces). Keys are walked in chunks (at
 * most ATTN_CPU_CHUNK keys, never crossing a block);
 * the variant's chunk() does QK, scaling, soft-cap, ALiBi, masking, the
 * online-softmax update and PV for all rows. Long decodes are split along
 * the keys (flash-decoding) and cascade prefixes are attended once for all
 * requests; both leave partial results (unnormalised O, running max m, sum
 * l) that are merged through their log-sum-exp. */
#ifndef ATTN_BACKENDS_CPU_ATTN_H
#define ATTN_BACKENDS_CPU_ATTN_H

#include "attn/backend.h"

extern const attn_backend attn__backend_cpu_attn;
extern const attn_backend_desc attn__desc_cpu_attn;
extern const attn_builder_ops attn__builder_cpu;

#define ATTN_CPU_MAX_ROWS 64  /* query rows (tokens x heads) per unit */
#define ATTN_CPU_CHUNK    64  /* keys per micro-kernel call */
#define ATTN_CPU_MAX_HEAD 512 /* largest head size the kernels take */
/* Prefill jobs of a variant that sets attn__cpu_isa.wide_rows may hold up
 * to this many rows, so each widened K/V chunk serves 4x the query rows
 * (docs/perf/prefill-tiling-issue18.md); their fp32 queries and outputs
 * together stay within ATTN_CPU_WIDE_BYTES (an L2's share). */
#define ATTN_CPU_WIDE_ROWS  256
#define ATTN_CPU_WIDE_BYTES (256 * 1024)

/* ---- micro-kernel interface ------------------------------------------------ */

/* Precision of the bf16 dot-product path (AVX-512 BF16 only): bf16 inputs
 * are exact in one bf16 term; fp16/fp32 queries and probabilities are split
 * into hi + lo bf16 terms (16 significant bits). */
typedef enum {
    ATTN_CPU_PREC_BF16 = 0,
    ATTN_CPU_PREC_SPLIT = 1,
} attn__cpu_prec;

typedef struct attn__cpu_job {
    int R; /* rows */
    int D, Dv;
    attn_elem q_elem;  /* query element (f32, f16, bf16) */
    attn_elem kv_elem; /* cache element */
    attn__cpu_prec prec;
    float qk_scale;     /* softmax scale x K dequantisation scale */
    float softcap;      /* 0 = off */
    const float *slope; /* [R] ALiBi slopes or NULL */
    const int32_t *pos; /* [R] query positions */
    const int32_t *lo;  /* [R] first visible key */
    const int32_t *hi;  /* [R] last visible key */
    void *qbuf;         /* variant-specific prepared queries */
    float *o;           /* [R][o_stride] unnormalised output (V dequant not applied) */
    int o_stride;
    float *m, *l;  /* [R] running max and sum */
    float *s;      /* scratch, [R][ATTN_CPU_CHUNK] */
    void *scratch; /* variant-specific scratch, ATTN_CPU_VSCRATCH bytes */
    /* the next chunk's K and V rows (pf_n of them, pf_stride elements apart):
     * variants prefetch them while computing this chunk; pf_n 0 = none */
    const void *pf_k, *pf_v;
    int pf_n;
    int64_t pf_stride;
} attn__cpu_job;

/* bytes of variant scratch a job carries (K/V chunk conversions etc.) */
#define ATTN_CPU_VSCRATCH (2 * ATTN_CPU_CHUNK * ATTN_CPU_MAX_HEAD * 4 + 16384)
/* bytes of qbuf a job carries: two bf16 planes or one f32 plane per row
 * (jobs of a wide-rows variant: ATTN_CPU_WIDE_QBUF, f32 rows padded to a
 * multiple of 8) */
#define ATTN_CPU_QBUF      (ATTN_CPU_MAX_ROWS * ATTN_CPU_MAX_HEAD * 4)
#define ATTN_CPU_WIDE_QBUF ((ATTN_CPU_WIDE_ROWS + 8) * ATTN_CPU_MAX_HEAD * 4)

typedef struct attn__cpu_isa {
    const char *name;
    /* all CPU features the variant's code needs are usable here */
    bool (*usable)(void);
    /* convert the job's R query rows (row r at qrows[r], D elements of
     * q_elem) into job->qbuf */
    void (*prep_q)(attn__cpu_job *j, const void *const *qrows);
    /* keys key0 .. key0+n-1 (n <= ATTN_CPU_CHUNK) whose K and V rows start
     * at k and v, tok_stride elements apart. masked: some row does not see
     * some key (use lo/hi); otherwise every row sees every key. */
    void (*chunk)(attn__cpu_job *j, const void *k, const void *v, int64_t tok_stride, int n,
                  int key0, bool masked);
    /* (optional) after the job's last chunk, on the same thread as prep_q
     * (releases per-job CPU state such as the AMX tile configuration) */
    void (*finish)(attn__cpu_job *j);
    /* (optional) a job's state held in CPU registers (the AMX O tiles) to
     * its scratch and back, so one thread can interleave the chunks of
     * several jobs; every job is parked before any job's finish */
    void (*park)(attn__cpu_job *j);
    void (*resume)(attn__cpu_job *j);
    /* (optional) a kernel set that runs the jobs its accepts() takes in
     * place of this one (the streaming decode kernel of the AVX-512
     * variants); chosen per job, before prep_q */
    const struct attn__cpu_isa *first;
    bool (*accepts)(const attn__cpu_job *j);
    /* rows a prefill job may hold, up to ATTN_CPU_WIDE_ROWS (0: at most
     * ATTN_CPU_MAX_ROWS, as every job of the AVX-512 variants) */
    int wide_rows;
} attn__cpu_isa;

extern const attn__cpu_isa attn__cpu_isa_portable;
#if defined(__x86_64__)
extern const attn__cpu_isa attn__cpu_isa_avx2;
extern const attn__cpu_isa attn__cpu_isa_avx512;
extern const attn__cpu_isa attn__cpu_isa_avx512_bf16;
extern const attn__cpu_isa attn__cpu_isa_amx_bf16;
#endif

/* Streaming decode kernel (cpu_attn_decode_avx512.c): jobs of at most
 * ATTN_CPU_SD_ROWS rows over a bf16 or fp8 cache; every AVX-512 variant
 * names it as its `first` kernel set. A job's prepared queries and scratch
 * fit ATTN_CPU_SD_QBUF and ATTN_CPU_SD_SCRATCH bytes, so decode can
 * keep ATTN_CPU_DEC_HEADS jobs per thread, one per KV head: the chunks of
 * one KV block are then read head after head, in memory order (the cache
 * is [block][kv head][token][dim]), instead of one head's whole context at
 * a time. */
#define ATTN_CPU_SD_ROWS    8
#define ATTN_CPU_SD_QBUF    (16 * 1024)
#define ATTN_CPU_SD_SCRATCH (44 * 1024)
#define ATTN_CPU_DEC_HEADS  8
#if defined(__x86_64__)
extern const attn__cpu_isa attn__cpu_isa_stream_decode;
extern const attn__cpu_isa attn__cpu_isa_stream_decode_amx;
/* the avx512-bf16 variant's: VDPBF16PS dot products for bf16 queries
 * (cpu_attn_decode_dp_avx512bf16.c), the FMA kernels for the other jobs */
extern const attn__cpu_isa attn__cpu_isa_stream_decode_bf16;
/* bf16 high and low bytes of the 128 fp8 magnitudes (e4m3 or e5m2); true
 * when the CPU has AVX512_VBMI to look them up with */
bool attn__cpu_fp8_bf16_tables(int e4m3, const uint8_t **hi, const uint8_t **lo);
#endif

/* Prefill of the avx512-bf16 variant (cpu_attn_prefill_avx512bf16.c): its
 * jobs of more than ATTN_CPU_PF_MIN_ROWS rows, up to ATTN_CPU_WIDE_ROWS,
 * run as blocked VDPBF16PS products over panels of ATTN_CPU_CHUNK keys
 * packed once per job (the variant's prep picks it through accepts). It
 * relies on two facts of run_rows: a job's chunks come in key order, and
 * nothing reads its o / m / l between its chunks and its finish. */
#define ATTN_CPU_PF_MIN_ROWS 16
#if defined(__x86_64__)
extern const attn__cpu_isa attn__cpu_isa_prefill_bf16;
/* n rows of d fp8 codes (e4m3 or e5m2; stride bytes apart) -> bf16 rows dp
 * elements apart, zero from d to dp (a multiple of 32), exact */
void attn__cpu_fp8_rows_bf16(uint16_t *dst, int dp, const uint8_t *src, int64_t stride, int n,
                             int d, int e4m3);
#endif

/* ---- variants ------------------------------------------------------------- */

/* Every variant compiled in, best first ("amx-bf16", "avx512-bf16",
 * "avx512", "avx2", "portable"); usable() says whether this machine (after ATTN_CPU_MASK) can
 * run it. */
int attn__cpu_attn_variant_count(void);
const attn__cpu_isa *attn__cpu_attn_variant(int i);

/* The classes of call a variant's error is documented for */
typedef enum {
    ATTN_CPU_ERR_FP32 = 0,   /* fp32 activations over a 16/32-bit cache */
    ATTN_CPU_ERR_FP8_KV = 1, /* fp32 activations over an fp8 cache */
    ATTN_CPU_ERR_HALF = 2,   /* fp16 / bf16 activations */
    ATTN_CPU_ERR_CLASSES
} attn__cpu_err_class;

static inline attn__cpu_err_class attn__cpu_err_class_of(attn_elem q, attn_elem kv)
{
    if (q != ATTN_ELEM_F32) return ATTN_CPU_ERR_HALF;
    return kv == ATTN_ELEM_FP8_E4M3 || kv == ATTN_ELEM_FP8_E5M2 ? ATTN_CPU_ERR_FP8_KV
                                                                : ATTN_CPU_ERR_FP32;
}

/* Variant i's documented error against REFERENCE for a class of call
 * (cpu_variants.c states them): max |out - ref| / max |ref| over a call's
 * output, and the bound on the LSE's absolute error.
 * test_cpu_attn_conformance holds the variant to it; attn/cpu_perf.h
 * publishes it (attn platforms). -1 for an i out of range. */
double attn__cpu_attn_variant_error(int i, attn__cpu_err_class c);
/* Best usable variant, chosen once per process from the CPU features. */
const attn__cpu_isa *attn__cpu_attn_active(void);
/* Tests/benchmarks: force a variant by name (NULL = back to automatic).
 * ATTN_NOT_FOUND for an unknown name, ATTN_UNSUPPORTED when not usable. */
attn_status attn__cpu_attn_force_variant(const char *name);
/* Forward with a given variant (NULL = active). */
attn_status attn__cpu_attn_forward_isa(const attn__cpu_isa *isa, const attn_forward_args *a);

/* ---- builder metadata ----------------------------------------------------- */

enum {
    ATTN_CPU_TILE_PREFIX = 1,       /* cascade prefix: rows from several requests */
    ATTN_CPU_TILE_MERGE_PREFIX = 2, /* merge with the cascade partial at the end */
};

typedef struct attn__cpu_tile {
    int32_t req;    /* request (first request of a prefix tile) */
    int32_t q0, nq; /* tokens [q0, q0 + nq) (global token indices) */
    int32_t kb, ke; /* keys [kb, ke) */
    int32_t part;   /* -1: write the output; else partial slot of token q0 */
    int32_t flags;
    int64_t cost;
} attn__cpu_tile;

typedef struct attn__cpu_split {
    int32_t req;
    int32_t nparts;
    int32_t slot0; /* part p, token i -> slot slot0 + p * qlen + i */
} attn__cpu_split;

#define ATTN_CPU_MD_MAGIC 0x43505541u /* "CPUA" */

typedef struct attn__cpu_md {
    uint32_t magic;
    /* what it was built for */
    int num_heads, num_kv_heads, head_size_v;
    int num_tokens, num_reqs;
    int num_decodes, num_prefills; /* requests with query length <= / > decode_threshold */
    int decode_threshold;
    bool use_cascade;
    int prefix_len; /* cascade: keys [0, prefix_len) shared by every request */
    /* tiles of phase A (cascade prefix) and phase B (everything else) */
    int n_prefix_tiles;
    attn__cpu_tile *prefix_tiles;
    int n_tiles;
    attn__cpu_tile *tiles;
    /* split requests, merged in phase C */
    int n_splits;
    attn__cpu_split *splits;
    /* partial results: slot * num_heads + head -> Dv + 2 floats (o, m, l) */
    float *partials;
    int64_t partial_slots; /* capacity in slots */
} attn__cpu_md;

/* head groups per KV head for a GQA group of size g */
static inline int attn__cpu_head_groups(int g)
{
    return (g + ATTN_CPU_MAX_ROWS - 1) / ATTN_CPU_MAX_ROWS;
}

/* KV heads one decode unit runs (see ATTN_CPU_DEC_HEADS): the builder sizes
 * its splits with it. 1 when a GQA group does not fit one streaming job, or
 * when the cache is not 16-bit: fp8 decode is bound by its compute (the
 * widening of every row), and parking the O tiles between chunks and the
 * extra splits cost it 1-9 % while reading in address order gains bf16
 * 2-6 % (measured again with the 2560 B prefetch: fp8 b1 8-12 % slower,
 * b16 -4 to +3 %). */
static inline int attn__cpu_dec_heads(int kvh, int g, bool wide_kv)
{
    if (g > ATTN_CPU_SD_ROWS || !wide_kv) return 1;
    return kvh < ATTN_CPU_DEC_HEADS ? kvh : ATTN_CPU_DEC_HEADS;
}

/* query tokens that fill `rows` rows for a GQA group of size g (a group
 * larger than ATTN_CPU_MAX_ROWS is split into row groups) */
static inline int attn__cpu_rows_tokens(int rows, int g)
{
    int gs = g < ATTN_CPU_MAX_ROWS ? g : ATTN_CPU_MAX_ROWS;
    return rows / gs;
}

/* query tokens a tile may hold for a GQA group of size g */
static inline int attn__cpu_tile_tokens(int g)
{
    return attn__cpu_rows_tokens(ATTN_CPU_MAX_ROWS, g);
}

/* query tokens one job of variant isa may hold for a GQA group of size g
 * and head size d: attn__cpu_tile_tokens, or more for a wide-rows variant */
static inline int attn__cpu_job_tokens(const attn__cpu_isa *isa, int g, int d)
{
    if (isa->wide_rows <= ATTN_CPU_MAX_ROWS || d <= 0) return attn__cpu_tile_tokens(g);
    int rows = ATTN_CPU_WIDE_BYTES / (8 * d); /* fp32 q + o per row */
    if (rows > isa->wide_rows) rows = isa->wide_rows;
    if (rows < ATTN_CPU_MAX_ROWS) rows = ATTN_CPU_MAX_ROWS;
    return attn__cpu_rows_tokens(rows, g);
}

#endif
