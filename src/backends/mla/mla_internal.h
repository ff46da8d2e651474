/* Internal contract of the MLA pieces: call validation shared by
 * REFERENCE_MLA and CPU_MLA, latent-row addressing, CPU_MLA's metadata (the
 * split-KV decode partition its builder makes) and its per-ISA kernel
 * table.
 *
 * Every entry point validates its whole input with attn__mla_prepare before
 * it writes anything; kernels below that point trust the call. Scores are
 * computed in "stored" units (q . stored_row) and scaled afterwards by
 * score_mul = softmax_scale * kv_scale * log2(e), so softmax runs in base 2;
 * latent outputs are multiplied by kv_scale when finalised. */
#ifndef ATTN_BACKENDS_MLA_INTERNAL_H
#define ATTN_BACKENDS_MLA_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/backend.h"
#include "attn/mla.h"
/* The generic MLA builders and their shared steps. */
#include "metadata/mla_builder.h"

#define ATTN__LOG2E 1.4426950408889634
#define ATTN__LN2   0.6931471805599453

/* One validated MLA call. */
typedef struct attn__mla_call {
    const attn_mla_args *a;
    const attn_common_metadata *cm;
    const attn_mla_metadata *md; /* NULL when the caller passed none */
    int req_begin, req_end;      /* requests handled by this entry point */
    int H;                       /* query heads */
    int R, P, D;                 /* kv_lora_rank, rope, R + P */
    int nope, V;                 /* qk_nope_head_dim, v_head_dim (forward_mha) */
    float scale;                 /* softmax scale */
    float kv_scale;              /* fp8 dequantisation scale (1 otherwise) */
    attn_elem q_elem;            /* q / out / weights element type */
    attn_elem kv_elem;
    size_t kv_esz;
    bool sparse;
} attn__mla_call;

/* Entry kinds for attn__mla_prepare. */
typedef enum attn__mla_entry {
    ATTN__MLA_MQA = 0,       /* dense absorbed decode */
    ATTN__MLA_MHA = 1,       /* decompressed prefill */
    ATTN__MLA_MQA_SPARSE = 2 /* absorbed, top-k indices, every request */
} attn__mla_entry;

/* Checks a whole call (pointers, dimensions, dtypes, metadata, block table,
 * top-k indices) and fills c. Fails with a clear status and touches
 * nothing. `who` names the backend in messages. */
attn_status attn__mla_prepare(const char *who, const attn_mla_args *a, attn__mla_entry entry,
                              attn__mla_call *c);

/* One MLA layer over a whole mixed batch (attn/kernel.h's
 * attn_kernel_mla_forward, its only caller: the handle has checked the
 * self-test, the entry points and host-visible memory): absorb, forward_mqa
 * and up-project the decodes, forward_mha the prefills, through b's kernel
 * with state impl. */
attn_status attn__mla_forward(const attn_backend *b, void *impl, const attn_mla_args *a,
                              void *scratch, size_t scratch_size);

/* Softmax scale of an MLA layer: layer->scale, or 1/sqrt(qk_nope + rope)
 * when 0 (1/sqrt(head_size) when qk_nope is unknown). Inline: the CUDA
 * module's MLA kernels state it from here too. */
static inline float attn__mla_softmax_scale(const attn_layer_params *layer)
{
    if (layer->scale != 0.0f) return layer->scale;
    int d = layer->qk_nope_head_dim > 0 ? layer->qk_nope_head_dim + layer->qk_rope_head_dim
                                        : layer->head_size;
    return d > 0 ? (float)(1.0 / sqrt((double)d)) : 1.0f;
}

/* Address of the latent row at sequence position pos of a request. */
static inline const void *attn__mla_row(const attn_kv_view *kv, size_t esz, const int32_t *bt,
                                        int pos)
{
    int bs = kv->block_size;
    int64_t blk = bt[pos / bs];
    int64_t e = kv->k_offset + blk * kv->stride_block + (int64_t)(pos % bs) * kv->stride_token;
    return (const char *)kv->data + (size_t)e * esz;
}

static inline const int32_t *attn__mla_block_table(const attn_common_metadata *cm, int req)
{
    return cm->block_table + (size_t)req * (size_t)cm->block_table_stride;
}

/* ---- CPU_MLA's metadata (its builder: cpu_mla_builder.c) ------------------ */

extern const attn_builder_ops attn__builder_mla_cpu;

/* Rows per decode group: one group's latent accumulators stay in a thread's
 * scratch ([rows][kv_lora_rank] fp32). */
#define ATTN__MLA_MAX_ROWS 128
/* Keys per decode step of the kernels. */
#define ATTN__MLA_KCHUNK 32

/* One piece of split-KV decode work: rows [row_begin, row_end) of request
 * req (row = token_in_request * num_heads + head) over keys
 * [kv_begin, kv_end). Pieces of one (req, rows) with several KV ranges are
 * merged through their LSE. */
typedef struct attn__mla_work {
    int32_t req;
    int32_t row_begin, row_end;
    int32_t kv_begin, kv_end;
    int32_t split;   /* index among the pieces of the same rows; 0 = first */
    int32_t nsplits; /* pieces of the same rows */
    int32_t partial; /* slot in the partial-result area when nsplits > 1, else -1 */
} attn__mla_work;

/* What CPU_MLA's builder builds once per step: the common MLA metadata
 * (mla.struct_size = sizeof this struct) and the split-KV partition of the
 * decodes for num_threads of the builder and num_heads of its layer; no
 * pieces (work NULL) when the builder had no layer or the batch needs more
 * than it was sized for - forward_mqa then partitions itself. */
#define ATTN__CPU_MLA_MD_MAGIC 0x434d4c41u /* "CMLA" */
typedef struct attn__cpu_mla_metadata {
    attn_mla_metadata mla;
    uint32_t magic; /* ATTN__CPU_MLA_MD_MAGIC */
    const attn__mla_work *work;
    int num_work;
    int num_partials; /* partial-result slots the pieces use */
    int work_heads;   /* num_heads the partition was made for */
} attn__cpu_mla_metadata;

/* md as CPU_MLA's metadata, or NULL when another builder made it. */
static inline const attn__cpu_mla_metadata *attn__cpu_mla_md(const attn_mla_metadata *md)
{
    const attn__cpu_mla_metadata *c = (const attn__cpu_mla_metadata *)md;
    return md && md->struct_size == sizeof *c && c->magic == ATTN__CPU_MLA_MD_MAGIC ? c : NULL;
}

/* Split-KV decode partition of requests [r0, r1): rows grouped by
 * ATTN__MLA_MAX_ROWS, long key ranges split so that about three pieces per
 * thread exist, pieces ordered largest first. Returns the number of pieces,
 * or -1 when more than max_work would be needed. *num_partials receives the
 * partial slots used. */
int attn__mla_partition(const attn_common_metadata *cm, int r0, int r1, int H, int nthreads,
                        attn__mla_work *work, int max_work, int *num_partials);
/* Upper bound of attn__mla_partition's pieces for a batch shape. */
int attn__mla_partition_bound(int num_reqs, int num_tokens, int H, int nthreads);

/* The CPU MLA backend objects (cpu_mla.c). */
extern const attn_backend attn__backend_cpu_mla;
extern const attn_backend attn__backend_cpu_mla_sparse;

/* ---- REFERENCE_MLA (src/backends/reference/ref_mla.c) ------------------- */

/* Double-precision oracle; topk NULL = dense. Used by self-tests. */
attn_status attn__ref_mla_mqa(const attn_mla_args *a, bool sparse);
attn_status attn__ref_mla_mha(const attn_mla_args *a);

/* ---- CPU_MLA kernels ---------------------------------------------------- */

/* A piece of decode work as a kernel variant sees it: rows
 * [row0, row0 + nrows) of one request (row = token * H + head) against a
 * list of key positions. Rows of token t may see positions <= first_pos + t
 * (dense) - sparse pieces hold one token and a pre-filtered list. */
typedef struct attn__mla_dec {
    int H, R, D;
    int nrows, row0, first_pos;
    const void *q; /* rows of the request, element q_elem, row stride D */
    attn_elem q_elem;
    const attn_kv_view *kv;
    attn_elem kv_elem;
    size_t kv_esz;
    const int32_t *bt;
    int kv_begin, kv_end;     /* dense key range */
    const int32_t *positions; /* sparse key list (NULL = dense) */
    int npositions;
    float score_mul; /* scale * kv_scale * log2(e) */
    /* results in stored units: acc [nrows][R] (unnormalised, times
     * 1/kv_scale), m (base-2 running max), l (sum) per row */
    float *acc, *m, *l;
    void *ws; /* thread scratch, attn__mla_kern.decode_ws bytes */
} attn__mla_dec;

/* Prefill over one (request, head): q rows [nq][nope + P] of the head,
 * output rows [nq][V]. */
typedef struct attn__mla_pre {
    int R, P, nope, V, H, head;
    int nq, first_pos, seq_len;
    const void *q;   /* token 0 of the request, head `head`: stride H*(nope+P) */
    size_t q_stride; /* elements between tokens */
    attn_elem q_elem;
    const void *w_uk; /* [nope][R] of this head */
    const void *w_uv; /* [R][V] of this head */
    const attn_kv_view *kv;
    attn_elem kv_elem;
    size_t kv_esz;
    float kv_scale;
    const int32_t *bt;
    float score_mul; /* softmax scale * log2(e) */
    void *out;       /* token 0, head `head`: stride out_stride */
    size_t out_stride;
    float *lse; /* token 0, head `head`: stride H, or NULL */
    void *ws;
} attn__mla_pre;

typedef struct attn__mla_kern {
    const char *name;
    /* Whether the variant can run on this CPU now. */
    bool (*usable)(void);
    /* Scratch bytes per thread for a decode piece / a prefill item. */
    size_t (*decode_ws)(int R, int D, int rows);
    size_t (*prefill_ws)(int R, int P, int nope, int V, int nq);
    /* Whether decode handles this call (e.g. AMX: bf16 queries). */
    bool (*decode_ok)(attn_elem q, attn_elem kv, int R, int D);
    void (*decode)(const attn__mla_dec *d);
    void (*prefill)(const attn__mla_pre *p);
    /* dst[0..n) = src * mul converted to e (f32, f16 or bf16, round to
     * nearest even); NULL = the portable one. */
    void (*store_row)(const float *src, float mul, int n, attn_elem e, void *dst);
    /* n elements of any storage type -> fp32; NULL = the portable one. */
    void (*load_row)(const void *src, attn_elem e, int n, float *dst);
    /* fp32 C[M][N] = (acc ? rowscale * C : 0) + A[M][K] . B[K][N] (row-major
     * with leading dimensions; rowscale NULL = 1); NULL = the portable one. */
    void (*gemm)(int M, int N, int K, const float *A, size_t lda, const float *B, size_t ldb,
                 float *C, size_t ldc, bool acc, const float *rowscale);
} attn__mla_kern;

extern const attn__mla_kern attn__mla_kern_portable;
#if defined(__x86_64__)
extern const attn__mla_kern attn__mla_kern_avx2;
extern const attn__mla_kern attn__mla_kern_avx512;
extern const attn__mla_kern attn__mla_kern_amx;
/* The AMX kernel's row staging to bf16 (bf16 copy, exact fp8 widening); D a
 * multiple of 32. Needs AVX-512BW/VL + F16C: call only when the amx variant
 * is usable. Exposed for tests. */
void attn__mla_amx_widen_row(const void *src, attn_elem e, int D, uint16_t *dst);
#endif

/* Portable building blocks shared by the variants (mla_kern_portable.c). */
void attn__mla_load_row_f32(const void *src, attn_elem e, int n, float *dst);
void attn__mla_store_row(const float *src, float mul, int n, attn_elem e, void *dst);
void attn__mla_gemm(int M, int N, int K, const float *A, size_t lda, const float *B, size_t ldb,
                    float *C, size_t ldc, bool acc, const float *rowscale);

static inline size_t attn__mla_al64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* CPU_MLA's process-wide scratch (cpu_mla.c): acquire locks it and grows it
 * to need bytes (on failure it is unlocked again); release unlocks it. */
attn_status attn__mla_ws_acquire(size_t need, void **mem);
void attn__mla_ws_release(void);

/* CPU_MLA's drivers: forward_mqa (mla_decode.c; sparse = CPU_MLA_SPARSE)
 * and forward_mha (mla_prefill.c). */
attn_status attn__cpu_mla_mqa(const attn_mla_args *a, bool sparse);
attn_status attn__cpu_mla_mha(const attn_mla_args *a);

/* Per-head projection of many tokens (cpu_mla.c), on the best vector
 * variant and the thread pool: out[t][h][0..Nout) = in[t][h][0..Kin) .
 * W[h] with W [H][Kin][Nout]; strides in elements of e. What
 * attn_mla_absorb_q and attn_mla_up_project run. */
attn_status attn__mla_project(int T, int H, int Kin, int Nout, const void *in, size_t in_tok,
                              size_t in_head, const void *w, void *out, size_t out_tok,
                              size_t out_head, attn_elem e);
float attn__mla_exp2(float x);

/* The variant chain CPU_MLA uses (forced by ATTN_CPU_MASK through
 * attn_cpu_has): decode and prefill may come from different variants. */
const attn__mla_kern *attn__mla_decode_kern(attn_elem q, attn_elem kv, int R, int D);
const attn__mla_kern *attn__mla_prefill_kern(void);
/* Variants usable here, best first; for tests and benches. */
int attn__mla_variants(const attn__mla_kern **out, int max);
/* Variant i of every one compiled in, best first (NULL past the last);
 * tests list them all, usable here or not. */
const attn__mla_kern *attn__mla_variant_at(int i);
/* Run CPU_MLA with one variant forced (NULL = automatic); tests only. */
void attn__mla_force_variant(const attn__mla_kern *k);

#endif
