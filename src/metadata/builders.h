/* Per-step metadata builders of the standard backend families (internal).
 *
 * Each family turns the step's attn_common_metadata into what its kernel
 * consumes, into memory its state allocated at create() from the maximum
 * sizes, so build() never allocates. A built metadata object lives in the
 * builder state until that state's next build/update: nothing survives a
 * step. Pointer fields either borrow the common metadata's arrays (valid for
 * the step) or point into the state.
 *
 * The catalog's descriptors reference the ops objects below by name (the
 * catalog layer sits on metadata). The generic MLA builders are declared in
 * mla_builder.h; the CPU backends' builders live with their kernels. */
#ifndef ATTN_METADATA_BUILDERS_H
#define ATTN_METADATA_BUILDERS_H

#include "attn/backend.h"
#include "util/strbuf.h"

extern const attn_builder_ops attn__builder_flash_attn;
extern const attn_builder_ops attn__builder_flashinfer;
extern const attn_builder_ops attn__builder_triton;
extern const attn_builder_ops attn__builder_rocm;
extern const attn_builder_ops attn__builder_flex;

/* ---- FlashAttention family (also the ROCm family: same fields) ---------- */

typedef struct attn_fa_metadata {
    int num_reqs;
    int num_actual_tokens;
    int max_query_len;
    int max_seq_len;
    int block_size;
    const int32_t *query_start_loc; /* cu_seqlens_q, [num_reqs + 1] */
    const int32_t *seq_lens;        /* seqused_k, [num_reqs] */
    const int32_t *block_table;
    int block_table_stride;
    const int64_t *slot_mapping;
    bool causal;
    int num_decodes; /* requests with query length 1 (informational) */
    attn_cg_support cg_support;
    /* Cascade (common_prefix_len > 0): the shared prefix is attended once by
     * every query token, non-causally, through row 0 of the block table
     * (prefix_num_blocks blocks); each request then attends its suffix,
     * causally, through block_table + prefix_num_blocks. */
    bool use_cascade;
    int common_prefix_len;
    int prefix_num_blocks;
    const int32_t *cu_prefix_query_lens; /* [2] = {0, num_actual_tokens} */
    const int32_t *prefix_kv_lens;       /* [1] = {common_prefix_len} */
    const int32_t *suffix_kv_lens;       /* [num_reqs] = seq_lens - common_prefix_len */
    int max_suffix_kv_len;
    const int32_t *suffix_block_table; /* block_table + prefix_num_blocks, same stride */
} attn_fa_metadata;

/* ---- FlashInfer family ---------------------------------------------------- */

typedef struct attn_flashinfer_metadata {
    int num_reqs;
    int num_actual_tokens;
    int max_query_len;
    int max_seq_len;
    int page_size;
    bool causal;
    const int64_t *slot_mapping;
    attn_cg_support cg_support;
    int reorder_batch_threshold;
    /* Decodes (query length <= threshold) come first: requests
     * [0, num_decodes) go to the decode wrapper, the rest to prefill. */
    int num_decodes, num_decode_tokens;
    int num_prefills, num_prefill_tokens;
    const int32_t *qo_indptr;              /* [num_reqs + 1] */
    const int32_t *paged_kv_indptr;        /* [num_reqs + 1] pages per request, cumulative */
    const int32_t *paged_kv_indices;       /* [paged_kv_indptr[num_reqs]] block ids */
    const int32_t *paged_kv_last_page_len; /* [num_reqs], in 1..page_size (0: no pages) */
    /* The prefill wrapper's view, rebased to start at 0. */
    const int32_t *prefill_qo_indptr; /* [num_prefills + 1] */
    const int32_t *prefill_kv_indptr; /* [num_prefills + 1] */
    /* Cascade: the shared pages once for all (paged_kv_* then hold only
     * each request's suffix pages). */
    bool use_cascade;
    int common_prefix_len;
    const int32_t *shared_qo_indptr;       /* [2] = {0, num_actual_tokens} */
    const int32_t *shared_kv_page_indptr;  /* [2] = {0, shared pages} */
    const int32_t *shared_kv_page_indices; /* [shared pages] */
    int shared_kv_last_page_len;
} attn_flashinfer_metadata;

/* ---- Triton family (unified attention kernel) --------------------------- */

typedef struct attn_triton_metadata {
    int num_reqs;
    int num_actual_tokens;
    int max_query_len;
    int max_seq_len;
    int block_size;
    const int32_t *query_start_loc;
    const int32_t *seq_lens;
    const int32_t *block_table;
    int block_table_stride;
    const int64_t *slot_mapping;
    bool causal;
    attn_cg_support cg_support;
    /* Launch grid of the 2D kernel: each program handles block_q query
     * tokens of one request (block_m rows = block_q tokens x the query heads
     * sharing a KV head); request r owns programs [q_block_start[r],
     * q_block_start[r + 1]). */
    int num_queries_per_kv;
    int block_m, block_q;
    const int32_t *q_block_start; /* [num_reqs + 1] */
    int total_q_blocks;
    /* Decode-only batches of at most seq_threshold_3d requests use the 3D
     * kernel: each sequence's KV is split into num_segments parallel
     * softmax segments, merged afterwards. */
    bool use_3d;
    int seq_threshold_3d;
    int num_segments;
} attn_triton_metadata;

/* ---- FlexAttention -------------------------------------------------------- */

typedef struct attn_flex_metadata {
    int num_reqs;
    int num_actual_tokens;
    int max_query_len;
    int max_seq_len;
    int block_size; /* kv block of the mask = the cache block */
    const int32_t *query_start_loc;
    const int32_t *seq_lens;
    const int32_t *block_table;
    int block_table_stride;
    const int64_t *slot_mapping;
    bool causal;
    int sliding_window;
    attn_cg_support cg_support;
    const int32_t *doc_ids;   /* [num_actual_tokens] request of each query token */
    const int32_t *query_pos; /* [num_actual_tokens] position of each query token */
    /* The block mask: q tiles of at most q_block_size tokens never straddle
     * requests; tile t reads blocks [kv_start_block[t], kv_start_block[t] +
     * kv_num_blocks[t]) of row q_tile_req[t] of the block table; blocks
     * [full_kv_start_block[t], + full_kv_num_blocks[t]) among them are
     * visible to every query of the tile (no mask needed), the others are
     * partial (causal diagonal, window edge, a last block not yet full). */
    int q_block_size;
    int num_q_tiles;
    const int32_t *q_tile_req;
    const int32_t *q_tile_start; /* first query token (index into q) */
    const int32_t *q_tile_len;
    const int32_t *kv_start_block;
    const int32_t *kv_num_blocks;
    const int32_t *full_kv_start_block;
    const int32_t *full_kv_num_blocks;
} attn_flex_metadata;

/* ---- shared helpers (common.c) ------------------------------------------ */

/* Number of leading tokens whose KV blocks every request shares (same block
 * ids), capped at the smallest number of already-computed tokens and rounded
 * down to whole blocks, as cascade kernels need. 0 for fewer than 2
 * requests or without a block table. */
int attn__common_prefix_len(const attn_common_metadata *cm);

/* Stable partition of a batch: order[] receives the request indices with
 * query length <= threshold first, then the others, each in their original
 * order. Returns the number of decodes. threshold 0 = no reordering. */
int attn__reorder_decodes_first(const int32_t *query_lens, int n, int threshold, int32_t *order);

/* Splits a reordered batch: decodes are the leading requests whose query
 * is at most threshold long (require_uniform: and as long as the first
 * one's). The runner reorders once per step with the smallest threshold of
 * its builders, so a builder with a larger threshold may find short queries
 * after the first prefill: like vLLM, they go with the prefills (any query
 * length is valid there). */
attn_status attn__split_decodes_prefills(const attn_common_metadata *cm, int threshold,
                                         bool require_uniform, int *num_decodes,
                                         int *num_decode_tokens);

/* The limits every standard builder keeps from its init, first in its state:
 * the checks of build, build_for_capture and update_block_table read them. */
typedef struct attn__builder_limits {
    const char *type_name;
    attn_cg_support cg;
    int max_reqs, max_tokens, max_blocks;
} attn__builder_limits;
/* From init; cg through attn__init_cg(init, family_cg). */
void attn__limits_init(attn__builder_limits *l, const char *type_name,
                       const attn_builder_init *init, attn_cg_support family_cg);
/* attn__build_args, attn__capture_check and attn__update_args on l. */
attn_status attn__limits_build_args(const attn__builder_limits *l, const attn_common_metadata *cm);
attn_status attn__limits_capture(const attn__builder_limits *l, const attn_common_metadata *cm);
/* build_for_capture of a builder whose state starts with its limits: NULL
 * checks (type_name " capture: NULL argument"), the capture checks, then
 * build without a shared prefix. */
typedef attn_status (*attn__build_fn)(void *state, int common_prefix_len,
                                      const attn_common_metadata *cm, bool fast_build,
                                      const void **md);
attn_status attn__capture_build(const char *type_name, void *state, const attn_common_metadata *cm,
                                const void **md, attn__build_fn build);
attn_status attn__limits_update(const attn__builder_limits *l, int num_reqs, int num_actual_tokens,
                                const int32_t *block_table, int block_table_stride,
                                const int64_t *slot_mapping);

/* build_for_capture's gate: the build's argument checks, then whether a
 * graph of this tier may capture cm. */
attn_status attn__capture_check(attn_cg_support cg, const char *type_name,
                                const attn_common_metadata *cm, int max_reqs, int max_tokens,
                                int max_blocks_per_req);

/* The batch shape attn_backend_forward checks, for every builder's build
 * (builders are public: plugins and engines call them directly): num_reqs
 * in [0, ATTN_MAX_NUM_REQS], query_start_loc from 0, non-decreasing, to
 * num_actual_tokens (so every difference fits an int), seq_lens (when
 * given) in [0, ATTN_MAX_SEQ_LEN] and not shorter than the query unless
 * cross is set (cross attention reads encoder_seq_lens, checked the same
 * way). ATTN_BAD_METADATA naming `who` and the first problem; read-only. */
attn_status attn__check_batch(const char *who, const attn_common_metadata *cm, bool cross);

/* Cheap checks every build does (the full walk is attn_common_metadata_check):
 * capacities from create(), required pointers and attn__check_batch. */
attn_status attn__build_args(const char *type_name, const attn_common_metadata *cm, int max_reqs,
                             int max_tokens, int max_blocks_per_req);

/* update_block_table's argument checks, shared by every builder that swaps
 * block tables: capacity, a table when there are requests, slots when there
 * are tokens. */
attn_status attn__update_args(const char *type_name, int num_reqs, int max_reqs,
                              int num_actual_tokens, const int32_t *block_table,
                              int block_table_stride, const int64_t *slot_mapping);

/* ---- describe() helpers (describe.c) ------------------------------------ */

/* key: [a0, a1, ...]; arrays longer than 64 print their first 64 entries and
 * add "<key>_len": n, so the text stays readable for 256 x 4k batches. */
void attn__describe_i32(attn__jw *w, const char *key, const int32_t *a, int n);
void attn__describe_i64(attn__jw *w, const char *key, const int64_t *a, int n);
/* Starts a describe() object: {"num_reqs": .., "num_actual_tokens": .., */
void attn__describe_begin(attn__sb *sb, attn__jw *w, int num_reqs, int num_actual_tokens);
/* Copies the JSON text into buf like snprintf; returns the full length
 * (-1 on allocation failure). Frees sb. */
int attn__describe_finish(attn__sb *sb, char *buf, size_t size);

/* ---- the FlashAttention-style core shared by flash_attn.c and rocm.c ---- */

attn_status attn__fa_create(const attn_builder_init *init, const char *type_name,
                            attn_cg_support family_cg, void **state);
void attn__fa_destroy(void *state);
attn_status attn__fa_build(void *state, int common_prefix_len, const attn_common_metadata *cm,
                           bool fast_build, const void **md);
attn_status attn__fa_build_for_capture(void *state, const attn_common_metadata *cm,
                                       const void **md);
attn_status attn__fa_update_block_table(void *state, const void *md, const int32_t *block_table,
                                        int block_table_stride, const int64_t *slot_mapping,
                                        const void **new_md);
int attn__fa_describe(const void *md, char *buf, size_t size);

/* Checks that the first prefix_blocks entries of every row are row 0's. */
attn_status attn__check_shared_prefix(const char *type_name, const int32_t *block_table, int stride,
                                      int num_reqs, int prefix_blocks);
/* Validates a common_prefix_len for cm: a multiple of the block size, no
 * more than any request's computed tokens, shared by every row. */
attn_status attn__check_cascade(const char *type_name, const attn_common_metadata *cm,
                                int common_prefix_len);
/* create()'s checks of the maximum sizes; the effective graph tier (the
 * descriptor's when there is one: it knows the platform's FA version). */
attn_status attn__init_check(const char *type_name, const attn_builder_init *init);
attn_cg_support attn__init_cg(const attn_builder_init *init, attn_cg_support family_cg);

#endif
