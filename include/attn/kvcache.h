/* The paged KV cache: a block pool per KV-cache group (free list + reference
 * counts), per-layer cache memory laid out by the selected backend's own
 * shape and stride order, and the write of new keys/values into their slots
 * (slot = block_id * block_size + offset), with FP8 quantisation.
 *
 * Every call that can fail checks its whole input first and changes nothing
 * when it fails (status + attn_last_error()). Objects are independent: no
 * process-wide state; one object is used by one thread at a time. */
#ifndef ATTN_KVCACHE_H
#define ATTN_KVCACHE_H

#include "attn/config.h"
#include "attn/device.h"
#include "attn/layer.h"
#include "attn/platform.h"

ATTN_EXTERN_C_BEGIN

/* ---- block pool ---------------------------------------------------------- */

typedef struct attn_block_pool attn_block_pool;

/* 1 <= num_blocks <= ATTN_MAX_NUM_BLOCKS, 1 <= block_size <=
 * ATTN_MAX_BLOCK_SIZE. All blocks start free. A fresh pool hands out the
 * lowest ids first; released blocks are reused most recently freed first
 * (deterministic for a given history). */
ATTN_API attn_status attn_block_pool_create(int num_blocks, int block_size, attn_block_pool **out);
ATTN_API void attn_block_pool_free(attn_block_pool *p);
ATTN_API int attn_block_pool_num_blocks(const attn_block_pool *p);
ATTN_API int attn_block_pool_block_size(const attn_block_pool *p);
ATTN_API int attn_block_pool_num_free(const attn_block_pool *p);
/* References held on a block (0 = free); -1 for an id outside the pool. */
ATTN_API int attn_block_pool_refcount(const attn_block_pool *p, int32_t block);

/* n fresh blocks with one reference each, written to ids. All or nothing:
 * ATTN_OUT_OF_BLOCKS when fewer than n are free (nothing allocated). */
ATTN_API attn_status attn_block_pool_alloc(attn_block_pool *p, int n, int32_t *ids);
/* One more reference on each of n allocated blocks (a shared prefix). An id
 * outside the pool or free: ATTN_INVALID_ARGUMENT, nothing changed. */
ATTN_API attn_status attn_block_pool_share(attn_block_pool *p, int n, const int32_t *ids);
/* Drops one reference from each of n blocks; blocks reaching 0 go back to
 * the free list. An id outside the pool, or more releases of a block than it
 * has references (a double free, also within one call): ATTN_INVALID_ARGUMENT,
 * nothing changed, and the rejected call is counted. */
ATTN_API attn_status attn_block_pool_release(attn_block_pool *p, int n, const int32_t *ids);

typedef struct attn_block_pool_stats {
    int num_blocks;
    int block_size;
    int num_free;
    int num_used;              /* blocks with refcount > 0 */
    int64_t total_refs;        /* sum of refcounts */
    int64_t num_allocs;        /* blocks handed out since creation */
    int64_t num_frees;         /* blocks returned to the free list */
    int64_t rejected_releases; /* release calls refused (double free / bad id) */
} attn_block_pool_stats;
ATTN_API void attn_block_pool_get_stats(const attn_block_pool *p, attn_block_pool_stats *out);
/* Full consistency walk: every block is either on the free list exactly once
 * with refcount 0 or off it with refcount > 0. ATTN_INTERNAL with the first
 * violation otherwise. */
ATTN_API attn_status attn_block_pool_check(const attn_block_pool *p);

/* A request's blocks, in logical order. The caller owns `ids` (capacity
 * entries); the pool only fills it. */
typedef struct attn_block_list {
    int32_t *ids;
    int count;
    int capacity;
} attn_block_list;
/* Grows l so it covers num_tokens tokens (ceil(num_tokens / block_size)
 * blocks), allocating only the missing ones. All or nothing:
 * ATTN_OUT_OF_BLOCKS (pool dry) or ATTN_OUT_OF_RANGE (capacity) leave l and
 * the pool as they were. */
ATTN_API attn_status attn_block_pool_reserve(attn_block_pool *p, attn_block_list *l,
                                             int num_tokens);
/* Releases every block of l and empties it (finish or preemption). */
ATTN_API attn_status attn_block_pool_release_list(attn_block_pool *p, attn_block_list *l);

/* ---- layout --------------------------------------------------------------- */

/* Which layout a backend's cache uses: the backend's own requirement wins
 * (CPU_ATTN and FlashInfer-MLA family: HND; FLASHINFER on compute
 * capability 10.x: HND), then an XPU platform (NHD), then `requested`, then
 * NHD (reference §12). */
ATTN_API attn_kv_layout attn_kv_layout_resolve(const attn_backend_desc *d, const attn_platform *p,
                                               attn_kv_layout requested);

/* One layer's cache as the backend lays it out. */
typedef struct attn_kv_layout_info {
    attn_kv_shape shape;   /* logical shape from desc->kv_cache_shape */
    int stride_order[6];   /* memory position i holds logical dim stride_order[i] */
    int64_t strides[6];    /* element stride of each logical dim */
    attn_kv_layout layout; /* resolved NHD/HND */
    attn_elem elem;        /* storage element */
    int64_t elems_per_layer;
    uint64_t bytes_per_layer;
    uint64_t bytes_per_block; /* one block of one layer, K and V */
    /* The attn_kv_view of a layer (data NULL, scales 1). */
    attn_kv_view view;
    bool has_v;    /* false: one row per token (MLA latent, packed formats) */
    bool writable; /* attn_kv_write supports this storage (not packed nvfp4 / turboquant) */
} attn_kv_layout_info;

/* Computes the layout of one layer's cache: calls the backend's shape and
 * stride-order functions, checks that the head_size axis is innermost, and
 * derives the view (element offsets and strides). head_size_v 0 = head_size.
 * The dims are matched by the shape's dim_names ("2", "num_blocks",
 * "block_size", "num_kv_heads", "head_size"...). */
ATTN_API attn_status attn_kv_layout_compute(const attn_backend_desc *d, attn_kv_layout layout,
                                            int num_blocks, int block_size, int num_kv_heads,
                                            int head_size, int head_size_v, attn_kv_dtype kv,
                                            attn_dtype model_dtype, attn_kv_layout_info *out);
/* "(2, 1024, 16, 8, 128)" */
ATTN_API int attn_kv_shape_format(const attn_kv_shape *s, char *buf, size_t size);

/* ---- cache memory --------------------------------------------------------- */

typedef struct attn_kv_cache attn_kv_cache;

/* Zeroed memory for num_layers layers of one layout on the host device
 * (reserved lazily from the OS, so a large pool costs only the pages
 * written): attn_kv_cache_create_on(li, num_layers, NULL, out). */
ATTN_API attn_status attn_kv_cache_create(const attn_kv_layout_info *li, int num_layers,
                                          attn_kv_cache **out);
/* The same on device dev (NULL = the host device): one zeroed allocation
 * of dev per layer (ATTN_MEM_CACHE), so each layer's view is one whole
 * allocation. dev must outlive the cache. */
ATTN_API attn_status attn_kv_cache_create_on(const attn_kv_layout_info *li, int num_layers,
                                             attn_device *dev, attn_kv_cache **out);
ATTN_API void attn_kv_cache_free(attn_kv_cache *c);
ATTN_API int attn_kv_cache_num_layers(const attn_kv_cache *c);
/* The device the cache lives on (NULL: the host device). */
ATTN_API attn_device *attn_kv_cache_device(const attn_kv_cache *c);
/* The view of one layer (its device set); it stays valid until the cache
 * is freed. */
ATTN_API attn_status attn_kv_cache_view(const attn_kv_cache *c, int layer, attn_kv_view *out);
/* FP8 scales of one layer (real = stored * scale). Per-head arrays
 * (num_kv_heads each, may be NULL) are copied. Scales must be finite and > 0. */
ATTN_API attn_status attn_kv_cache_set_scales(attn_kv_cache *c, int layer, float k_scale,
                                              float v_scale, const float *k_scale_per_head,
                                              const float *v_scale_per_head);

/* ---- writing new tokens ---------------------------------------------------- */

/* Writes num_tokens new key/value rows into their slots (vLLM's
 * reshape_and_cache), by the write of the view's device. k is
 * [num_tokens][num_kv_heads][head_size], v is [num_tokens][num_kv_heads]
 * [head_size_v] (v must be NULL exactly when the view has no V: a view
 * with values and v NULL is ATTN_NULL_ARGUMENT), both of element
 * type src (f32, f16 or bf16) and memory of the view's device (host
 * memory for a host view). FP8 caches store value / scale (per head when
 * the view has per-head scales), saturating. slot -1 = padding, skipped.
 * slot_mapping is host memory; every slot (and, on a device that is not
 * host-visible, every source range) is checked before anything is written. */
ATTN_API attn_status attn_kv_write(const attn_kv_view *kv, const int64_t *slot_mapping,
                                   int num_tokens, const void *k, const void *v, attn_elem src);
/* The same with k and v starting k_offset / v_offset elements into their
 * allocations (a device's memory is written only through offsets). */
ATTN_API attn_status attn_kv_write_at(const attn_kv_view *kv, const int64_t *slot_mapping,
                                      int num_tokens, const void *k, int64_t k_offset,
                                      const void *v, int64_t v_offset, attn_elem src);
/* Elements a view spans from its data: the end of its last row (last
 * block, token and head, K or V), with checked arithmetic. What a copy of
 * the view's memory must hold. ATTN_INVALID_ARGUMENT for a malformed view. */
ATTN_API attn_status attn_kv_view_extent(const attn_kv_view *kv, int64_t *elements);
/* Reads back one head's key (value=false) or value row of a slot,
 * dequantised to float: out has head_size (or head_size_v) entries. On a
 * device that is not host-visible the row is copied out first. */
ATTN_API attn_status attn_kv_read(const attn_kv_view *kv, int64_t slot, int head, bool value,
                                  float *out);

ATTN_EXTERN_C_END

#endif
