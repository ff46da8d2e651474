/* The dialect's kernels as launches: their entry-point names and, for each,
 * its argument list in the kernel's order and its grid, built from a plain
 * struct. Shared by the OpenCL runtime and the CUDA module, so the order
 * of a kernel's arguments is written once on the host side (beside the
 * kernel's own signature in the .cl files of src/backends/devkern/): each runtime turns
 * the list into clSetKernelArg calls or cuLaunchKernel's parameter array.
 * Buffers are the runtime's opaque handles (attn__ocl_mem *, the CUDA
 * module's buffers); NULL passes a null buffer. */
#ifndef ATTN_DEVKERN_KD_LAUNCH_H
#define ATTN_DEVKERN_KD_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "backends/devkern/kd_plan.h"

typedef enum attn__kd_kernel {
    ATTN__KD_ATTENTION,      /* attn_kd_paged_attention */
    ATTN__KD_MERGE,          /* attn_kd_attention_merge */
    ATTN__KD_CACHE_WRITE,    /* attn_kd_cache_write */
    ATTN__KD_TO_F32,         /* attn_kd_to_f32 */
    ATTN__KD_MLA_DECODE,     /* attn_kd_mla_decode */
    ATTN__KD_MLA_MERGE,      /* attn_kd_mla_merge */
    ATTN__KD_MLA_DECOMPRESS, /* attn_kd_mla_decompress */
    ATTN__KD_MLA_PROJECT,    /* attn_kd_mla_project */
    ATTN__KD_KERNEL_COUNT
} attn__kd_kernel;

extern const char *const attn__kd_kernel_names[ATTN__KD_KERNEL_COUNT];

enum { ATTN__KD_ARG_MEM, ATTN__KD_ARG_I32, ATTN__KD_ARG_I64, ATTN__KD_ARG_F32 };

typedef struct attn__kd_arg {
    int kind; /* ATTN__KD_ARG_* */
    union {
        const void *mem;
        int32_t i32;
        int64_t i64;
        float f32;
    } v;
} attn__kd_arg;

#define ATTN__KD_MAX_ARGS 40

/* One launch: groups[0..2] work-groups of KD_WG work-items. */
typedef struct attn__kd_args {
    attn__kd_kernel kernel;
    int n;
    attn__kd_arg a[ATTN__KD_MAX_ARGS];
    size_t groups[3];
} attn__kd_args;

/* Paged attention over a plan (and its split-KV merge when the plan has
 * more than one split). */
typedef struct attn__kd_attention {
    const attn__kd_plan *plan;
    const void *meta; /* the plan's words on the device */
    const void *hp;   /* per-head floats: sinks[H], slopes[H], K scales[KVH], V scales[KVH] */
    const void *q, *kv;
    void *out, *lse, *part;
    int64_t q_off, out_off, lse_off;
    int H, KVH, D, Dv, bn, q_elem, kv_elem, bs, window, flags;
    int64_t k_off, v_off, s_blk, s_tok, s_head;
    float scale, softcap;
} attn__kd_attention;

void attn__kd_args_attention(attn__kd_args *l, const attn__kd_attention *x);
void attn__kd_args_merge(attn__kd_args *l, const attn__kd_attention *x);

/* Rows of dim elements scattered into a paged cache (one part of a KV or
 * MLA latent write). */
typedef struct attn__kd_cache_write {
    const void *src, *slots, *inv_scale;
    void *cache;
    int64_t src_off, tok_stride, dst_off, s_blk, s_tok, s_head;
    int src_elem, cache_elem, bs, ntok, nheads, dim, inv_off, raw_copy;
} attn__kd_cache_write;

void attn__kd_args_cache_write(attn__kd_args *l, const attn__kd_cache_write *x);

/* n elements of src (element elem) from element off, as float into dst. */
void attn__kd_args_to_f32(attn__kd_args *l, const void *src, int64_t off, int elem, int64_t n,
                          void *dst);

/* MLA decode over a plan whose tiles are the decodes' rows (and its merge
 * when split); score_scale = softmax scale * fp8 scale, out_scale = the
 * fp8 scale (1 otherwise). */
typedef struct attn__kd_mla_decode {
    const attn__kd_plan *plan;
    const void *meta;
    const void *q, *kv;
    void *out, *lse, *part;
    int64_t q_off, out_off, lse_off, k_off, s_blk, s_tok;
    int H, R, D, q_elem, kv_elem, bs;
    float score_scale, out_scale;
} attn__kd_mla_decode;

void attn__kd_args_mla_decode(attn__kd_args *l, const attn__kd_mla_decode *x);
void attn__kd_args_mla_merge(attn__kd_args *l, const attn__kd_mla_decode *x);

/* MLA prefill: the plan's decompression work into a paged cache dst of
 * blocks of KD_MLA_BN tokens (keys [N + P] from element 0, values [V] from
 * dst_v_off, strides d_blk / d_tok / d_head shared by both). */
typedef struct attn__kd_mla_decompress {
    const attn__kd_plan *plan;
    const void *meta;
    const void *kv, *w_uk, *w_uv;
    void *dst;
    int64_t k_off, s_blk, s_tok, dst_v_off, d_blk, d_tok, d_head;
    int kv_elem, bs, w_elem, H, R, P, N, V, dst_elem;
    float kv_scale;
} attn__kd_mla_decompress;

void attn__kd_args_mla_decompress(attn__kd_args *l, const attn__kd_mla_decompress *x);

/* MLA projection (kd_proj.cl): out[t][h][:nout] = in[t][h][:kin] . w[h],
 * then in[t][h][kin:kin + ncopy] copied to out[t][h][nout:]. Offsets and
 * strides in elements of elem (in, w and out alike). */
typedef struct attn__kd_mla_project {
    const void *in, *w;
    void *out;
    int64_t in_off, in_tok, in_head, out_off, out_tok, out_head;
    int T, H, kin, nout, ncopy, elem;
} attn__kd_mla_project;

void attn__kd_args_mla_project(attn__kd_args *l, const attn__kd_mla_project *x);

#endif
