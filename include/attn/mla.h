/* MLA (multi-head latent attention, DeepSeek V2/V3/R1): the latent KV cache,
 * the checked entry points and the metadata every MLA builder produces.
 *
 * The cache holds one row per token, shared by all query heads: the
 * compressed latent (kv_lora_rank values) followed by the rope key part
 * (qk_rope_head_dim values); head_size = kv_lora_rank + qk_rope_head_dim
 * (576 for DeepSeek-V3), num_kv_heads = 1. A layer runs in two ways:
 *   - decode (forward_mqa): queries absorbed into latent space
 *     (q_nope . W_UK, followed by q_rope) attend over the latent rows
 *     directly and yield the latent output; the caller up-projects it with
 *     W_UV per head (attn_mla_up_project);
 *   - prefill (forward_mha): each head's keys (qk_nope via W_UK, plus the
 *     shared rope part) and values (v_head_dim via W_UV) are decompressed
 *     from the latent rows, then standard causal attention.
 * Both paths give the same result; attn_kernel_mla_forward (attn/kernel.h)
 * runs a whole mixed batch the way an engine does (decodes absorbed,
 * prefills decompressed).
 *
 * Token indexing: q, out and lse are indexed by the token's place in the
 * batch (query_start_loc). An entry point touches only the rows of the
 * requests it handles: with MLA metadata (attn_mla_metadata from an MLA
 * builder) forward_mqa handles the decodes [0, num_decodes) and forward_mha
 * the prefills [num_decodes, num_reqs); with metadata NULL each handles
 * every request. Queries see the keys at positions <= their own
 * (position = seq_len - query_len + i). */
#ifndef ATTN_MLA_H
#define ATTN_MLA_H

#include "attn/config.h"
#include "attn/layer.h"
#include "attn/platform.h"

ATTN_EXTERN_C_BEGIN

/* The kernels themselves are called through attn/kernel.h
 * (attn_kernel_forward_mqa, attn_kernel_forward_mha and, for a whole mixed
 * batch, attn_kernel_mla_forward), which gates them on their self-test. */

/* ---- the latent cache ------------------------------------------------------
 * vLLM's concat_and_cache_mla: row t of `latent` ([num_tokens][kv_lora_rank])
 * followed by row t of `k_rope` ([num_tokens][head_size - kv_lora_rank]) goes
 * to cache slot slot_mapping[t] (block * block_size + offset; -1 = padding,
 * skipped). An MLA view states kv_lora_rank in head_size_v (the latent part
 * is what the absorbed path reads as values); a view with head_size_v 0 or
 * equal to head_size means a rope part of ATTN_MLA_DEFAULT_ROPE_DIM.
 * Inputs are `dtype` elements in memory of the view's device (host memory
 * for a host view); the cache's element type decides the storage: fp8
 * (e4m3/e5m2) stores value / kv->k_scale, saturating. The write is the
 * view's device's (ATTN_UNSUPPORTED on a device without one). Every slot is
 * checked before anything is written. */
#define ATTN_MLA_DEFAULT_ROPE_DIM 64
ATTN_API attn_status attn_mla_write_latent(const attn_kv_view *kv, const int64_t *slot_mapping,
                                           int num_tokens, const void *latent, const void *k_rope,
                                           attn_dtype dtype);
/* The same with latent and k_rope starting at element offsets. */
ATTN_API attn_status attn_mla_write_latent_at(const attn_kv_view *kv, const int64_t *slot_mapping,
                                              int num_tokens, const void *latent,
                                              int64_t latent_offset, const void *k_rope,
                                              int64_t k_rope_offset, attn_dtype dtype);
/* kv_lora_rank of an MLA view under the rule above. */
ATTN_API int attn_mla_view_latent_dim(const attn_kv_view *kv);

/* Bytes of one cached latent row for an element type (head_size elements). */
ATTN_API size_t attn_mla_row_bytes(int head_size, attn_elem elem);

/* ---- the projections around forward_mqa --------------------------------------
 * q [tokens][heads][qk_nope + rope] -> q_absorbed [tokens][heads][kv_lora_rank
 * + rope]: the nope part through W_UK ([heads][qk_nope][kv_lora_rank]), the
 * rope part copied. Accumulates in fp32; elements of layer->dtype. */
ATTN_API attn_status attn_mla_absorb_q(const attn_layer_params *layer, int num_tokens,
                                       const void *q, const void *w_uk, void *q_absorbed);
/* o_latent [tokens][heads][kv_lora_rank] -> out [tokens][heads][v_head_dim]
 * through W_UV ([heads][kv_lora_rank][v_head_dim]). */
ATTN_API attn_status attn_mla_up_project(const attn_layer_params *layer, int num_tokens,
                                         const void *o_latent, const void *w_uv, void *out);

/* ---- one layer, whole batch --------------------------------------------------
 * What an engine calls per MLA layer and step, after writing the step's new
 * latent rows (attn_kernel_mla_forward in attn/kernel.h runs it): decodes
 * (the first num_decode_tokens tokens of the MLA metadata in a->metadata)
 * are absorbed through W_UK, run by forward_mqa and up-projected through
 * W_UV; prefills run by forward_mha. A sparse backend (descriptor
 * is_sparse) runs every token through forward_mqa with a->topk_indices.
 * a->q is [tokens][heads][qk_nope + rope], a->out [tokens][heads]
 * [v_head_dim], a->lse (optional) [tokens][heads]. Its scratch (>=
 * attn_mla_forward_scratch_size bytes, 64-byte aligned, host memory) holds
 * the absorbed queries and latent outputs so that no step allocates. */
ATTN_API size_t attn_mla_forward_scratch_size(const attn_layer_params *layer, int max_tokens);

/* ---- metadata of the MLA builders --------------------------------------------
 * Requests whose query length is within the builder's reorder threshold (and,
 * for the UNIFORM class, equal to the first request's) are decodes; the
 * engine puts them first. The split stops at the first request that is not a
 * decode: every later request is a prefill (forward_mha handles any length). */
typedef enum attn_mla_query_class {
    ATTN_MLA_QUERY_SINGLE = 0,  /* decodes have query length 1 */
    ATTN_MLA_QUERY_UNIFORM = 1, /* decodes share one query length <= threshold */
    ATTN_MLA_QUERY_VARLEN = 2   /* decodes any query length <= threshold */
} attn_mla_query_class;

ATTN_API const char *attn_mla_query_class_name(attn_mla_query_class c); /* "single" ... */

#define ATTN_MLA_METADATA_MAGIC 0x4d4c4132u /* "MLA2" */

/* vLLM's common MLA metadata. A backend's own builder may extend it (its
 * metadata starts with this struct and struct_size is the whole object's
 * size, as CPU_MLA's does with its split-KV decode partition). */
typedef struct attn_mla_metadata {
    uint32_t magic;              /* ATTN_MLA_METADATA_MAGIC */
    uint32_t struct_size;        /* >= sizeof(attn_mla_metadata), see above */
    attn_common_metadata common; /* copy; pointers borrowed for this step */
    attn_mla_query_class query_class;
    int reorder_batch_threshold; /* effective (raised for speculative decoding) */
    int num_decodes, num_decode_tokens;
    int num_prefills, num_prefill_tokens;
    int max_decode_query_len, max_decode_seq_len;
    int max_prefill_query_len, max_prefill_seq_len;
} attn_mla_metadata;

/* The decode/prefill split of vLLM's split_decodes_and_prefills for a
 * common metadata: exposed for engines and tests. require_uniform: the
 * UNIFORM class. Fills the four counts; never fails on consistent input. */
ATTN_API void attn_mla_split_decodes(const attn_common_metadata *cm, int threshold,
                                     bool require_uniform, int *num_decodes, int *num_decode_tokens,
                                     int *num_prefills, int *num_prefill_tokens);

ATTN_EXTERN_C_END

#endif
