/* The single field checks of a backend descriptor (reference §3): each
 * answers one question from the descriptor's static field or, when the
 * backend has one, its dynamic predicate. The selector's generic validator
 * (src/select/validate.c) words its reasons from them; a composite
 * descriptor asks them of its halves (composite.c). They live with the
 * descriptors, below the registry and the selector, so the catalog never
 * includes src/select. Zero-valued fields mean vLLM's base-class defaults. */
#include "backends/catalog/catalog.h"

#define ATTN__DEFAULT_DTYPES (ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16))
#define ATTN__DEFAULT_KV                                                                           \
    (ATTN_KV_BIT(ATTN_KV_AUTO) | ATTN_KV_BIT(ATTN_KV_FLOAT16) | ATTN_KV_BIT(ATTN_KV_BFLOAT16))

bool attn__desc_head_ok(const attn_backend_desc *d, const attn_check_ctx *c, int hs)
{
    if (d->supports_head_size) return d->supports_head_size(c, hs);
    const attn_head_rule *r = &d->heads;
    if (r->n_sizes > 0) {
        for (int i = 0; i < r->n_sizes; i++)
            if (r->sizes && r->sizes[i] == hs) return true;
        return false;
    }
    if (r->min && hs < r->min) return false;
    if (r->max && hs > r->max) return false;
    if (r->multiple_of && hs % r->multiple_of != 0) return false;
    return true;
}

bool attn__desc_dtype_ok(const attn_backend_desc *d, const attn_check_ctx *c, attn_dtype dt)
{
    if (d->supports_dtype) return d->supports_dtype(c, dt);
    if ((unsigned)dt >= ATTN_DTYPE_COUNT) return false;
    uint32_t mask = d->dtypes ? d->dtypes : ATTN__DEFAULT_DTYPES;
    return (mask >> dt) & 1u;
}

bool attn__desc_kv_ok(const attn_backend_desc *d, const attn_check_ctx *c, attn_kv_dtype kv)
{
    if (kv == ATTN_KV_NONE) return !d->kv_none_rejected;
    if (d->supports_kv_cache_dtype) return d->supports_kv_cache_dtype(c, kv);
    if ((int)kv < 0 || kv >= ATTN_KV_COUNT) return false;
    uint64_t mask = d->kv_dtypes ? d->kv_dtypes : ATTN__DEFAULT_KV;
    return (mask >> kv) & 1u;
}

bool attn__desc_block_ok(const attn_backend_desc *d, const attn_check_ctx *c, int bs)
{
    if (bs <= 0) /* None: not user-specified */
        return true;
    if (d->supports_block_size) return d->supports_block_size(c, bs);
    if (d->n_block_sizes <= 0 || !d->block_sizes) return true;
    /* Hybrid blocks: any multiple of any kernel size will do. */
    for (int i = 0; i < d->n_block_sizes; i++)
        if (d->block_sizes[i] > 0 && bs % d->block_sizes[i] == 0) return true;
    return false;
}

bool attn__desc_cc_ok(const attn_backend_desc *d, const attn_check_ctx *c)
{
    if (d->supports_compute_capability) return d->supports_compute_capability(c);
    bool has_min = d->cc_min.major || d->cc_min.minor;
    bool has_max = d->cc_max.major || d->cc_max.minor;
    if (!has_min && !has_max) return true;
    if (!c->has_cc) return false;
    int v = c->cc_major * 100 + c->cc_minor;
    if (has_min && v < d->cc_min.major * 100 + d->cc_min.minor) return false;
    if (has_max && v > d->cc_max.major * 100 + d->cc_max.minor) return false;
    return true;
}
