/* What an application hands a kernel: a layer's parameters, its paged KV
 * cache as the kernel sees it (view and logical shape), the base of the
 * log-sum-exp it returns, and the arguments of one forward call. Shared by
 * applications (engine.h, kvcache.h, mla.h) and backend authors (backend.h);
 * it holds no descriptor or ops struct, so an application that includes it
 * is not bound to the backend contract's layout. */
#ifndef ATTN_LAYER_H
#define ATTN_LAYER_H

#include "attn/metadata.h"
#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

/* Opaque to applications, which hold only pointers to them; backend.h (the
 * header for backend and plugin authors) defines them. */
typedef struct attn_backend attn_backend;
typedef struct attn_backend_desc attn_backend_desc;
typedef struct attn_builder_ops attn_builder_ops;
/* An open instance of a device (attn/device.h). */
typedef struct attn_device attn_device;

typedef struct attn_kv_shape {
    int ndim;
    int64_t dims[6];
    const char *dim_names[6]; /* "2", "num_blocks", "block_size", "num_kv_heads", "head_size" */
} attn_kv_shape;

/* Base of the log-sum-exp a kernel returns. A merge of partial attention
 * states must convert each input from its own base: mixing them silently
 * corrupts the softmax denominator. Zero (the default) is natural log, as in
 * vLLM's AttentionImpl.lse_base_on_e = True. */
typedef enum attn_lse_base {
    ATTN_LSE_BASE_E = 0,
    ATTN_LSE_BASE_2 = 1,
} attn_lse_base;

/* Per-layer parameters a kernel needs. */
typedef struct attn_layer_params {
    int num_heads;
    int num_kv_heads;
    int head_size;
    int head_size_v;           /* 0 = head_size */
    float scale;               /* softmax scale; 0 = 1/sqrt(head_size) */
    float logits_soft_cap;     /* 0 = off: s = cap * tanh(s / cap) */
    int sliding_window;        /* 0 = off; query at position p sees keys in (p - window, p] */
    const float *sinks;        /* [num_heads] learned sink logits, or NULL */
    const float *alibi_slopes; /* [num_heads] or NULL */
    attn_attn_type attn_type;
    attn_dtype dtype; /* q, k, v and out element type */
    attn_kv_dtype kv_cache_dtype;
    /* MLA only */
    int kv_lora_rank;
    int qk_rope_head_dim;
    int qk_nope_head_dim;
    int v_head_dim;
} attn_layer_params;

/* One layer's paged cache as a kernel sees it: element offsets and strides,
 * with the head_size axis contiguous. Covers every layout (FlashAttention,
 * FlashInfer, CPU, NHD/HND) and the MLA latent cache (v unused). data is
 * one whole allocation of `device` (a host pointer when device is NULL or
 * host-visible); the scale arrays are host memory. */
typedef struct attn_kv_view {
    void *data;
    attn_elem elem;
    int num_blocks;
    int block_size;
    int num_kv_heads;
    int head_size;
    int head_size_v;
    int64_t k_offset, v_offset;
    int64_t stride_block, stride_token, stride_head;
    float k_scale, v_scale;        /* fp8: real = stored * scale */
    const float *k_scale_per_head; /* [num_kv_heads] or NULL */
    const float *v_scale_per_head;
    /* (v2) the device whose memory data is; NULL = host memory. Cache
     * writes go to this device's write (attn_kv_write, attn_mla_write_latent). */
    attn_device *device;
} attn_kv_view;

typedef struct attn_forward_args {
    const attn_layer_params *layer;
    const attn_common_metadata *common;
    const void *metadata; /* the backend's own, from its builder */
    const void *q;        /* [num_actual_tokens][num_heads][head_size] */
    const attn_kv_view *kv;
    void *out;  /* [num_actual_tokens][num_heads][head_size_v] */
    float *lse; /* (optional) [num_actual_tokens][num_heads], natural log */
    /* encoder-only / encoder attention without a cache: K/V given directly,
     * [num_actual_tokens][num_kv_heads][head_size]. NULL = read the cache. */
    const void *k;
    const void *v;
    /* (v2) Where q, out, lse, k and v start, in elements. On a device whose
     * memory is not host-visible each tensor above is a whole allocation of
     * the kernel's device (attn/device.h) and the kernel adds these; on a
     * host-visible device libattn folds them into the pointers before the
     * call, so such a kernel always sees 0. */
    int64_t q_offset, out_offset, lse_offset, k_offset, v_offset;
} attn_forward_args;

/* MLA: the cache holds one latent row per token (kv_lora_rank + rope). */
typedef struct attn_mla_args {
    const attn_layer_params *layer;
    const attn_common_metadata *common;
    const void *metadata;
    const attn_kv_view *kv;
    /* forward_mqa: q [tokens][heads][kv_lora_rank + rope] (absorbed),
     * out [tokens][heads][kv_lora_rank].
     * forward_mha: q [tokens][heads][qk_nope + rope], out [tokens][heads][v_head_dim],
     * w_uk [heads][qk_nope][kv_lora_rank], w_uv [heads][kv_lora_rank][v_head_dim]
     * decompress the latent cache into per-head keys and values. */
    const void *q;
    void *out;
    float *lse; /* (optional) */
    const void *w_uk;
    const void *w_uv;
    const int32_t *topk_indices; /* (optional, sparse) [tokens][topk], -1 = unused */
    int topk;
    /* (v2) element offsets of q, out and lse, as in attn_forward_args;
     * w_uk, w_uv and topk_indices are whole allocations. */
    int64_t q_offset, out_offset, lse_offset;
} attn_mla_args;

ATTN_EXTERN_C_END

#endif
