/* The single field checks of a backend descriptor (reference §3): each
 * answers one question from the descriptor's static field or, when the
 * backend has one, its dynamic predicate. The selector's generic validator
 * (src/select/validate.c) words its reasons from them; a composite
 * descriptor asks them of its halves (composite.c). They live with the
 * descriptors, below the registry and the selector, so the catalog never
 * includes src/select. Zero-valued fields mean vLLM's base-class defaults. */
#include "attn/abi.h"
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

/* ---- the yes/no capabilities ---------------------------------------------- */

/* A descriptor built against an older libattn ends before the appended
 * fields; it is read as attn/backend.h states. */
#define ATTN__DESC_HAS(d, field) ATTN_STRUCT_HAS(attn_backend_desc, (d), field)

bool attn__desc_flag_static(const attn_backend_desc *d, attn__flag f)
{
    switch (f) {
    case ATTN__FLAG_MM_PREFIX: return d->supports_mm_prefix;
    case ATTN__FLAG_SINK: return d->supports_sink;
    case ATTN__FLAG_PER_HEAD_QUANT_SCALES: return d->supports_per_head_quant_scales;
    case ATTN__FLAG_SLIDING_WINDOW:
        return !ATTN__DESC_HAS(d, supports_sliding_window) || d->supports_sliding_window;
    case ATTN__FLAG_RSWA: return !ATTN__DESC_HAS(d, supports_rswa) || d->supports_rswa;
    case ATTN__FLAG_NON_CAUSAL: return d->supports_non_causal;
    case ATTN__FLAG_NON_CAUSAL_DCP:
        return !ATTN__DESC_HAS(d, supports_non_causal_dcp) || d->supports_non_causal_dcp;
    case ATTN__FLAG_BATCH_INVARIANCE: return d->supports_batch_invariance;
    case ATTN__FLAG_KV_CONNECTOR:
        return !ATTN__DESC_HAS(d, rejects_kv_connector) || !d->rejects_kv_connector;
    case ATTN__FLAG_PCP: return d->supports_pcp;
    case ATTN__FLAG_DCP: return d->supports_dcp;
    case ATTN__FLAG_QUERY_LENS_MISMATCH:
        return !ATTN__DESC_HAS(d, rejects_query_lens_mismatch) || !d->rejects_query_lens_mismatch;
    default: return false;
    }
}

attn__flag_hook attn__desc_flag_hook(const attn_backend_desc *d, attn__flag f)
{
    switch (f) {
    case ATTN__FLAG_SINK: return d->supports_sink_fn;
    case ATTN__FLAG_PER_HEAD_QUANT_SCALES: return d->supports_per_head_quant_scales_fn;
    case ATTN__FLAG_MM_PREFIX:
        return ATTN__DESC_HAS(d, supports_mm_prefix_fn) ? d->supports_mm_prefix_fn : NULL;
    case ATTN__FLAG_NON_CAUSAL:
        return ATTN__DESC_HAS(d, supports_non_causal_fn) ? d->supports_non_causal_fn : NULL;
    case ATTN__FLAG_QUERY_LENS_MISMATCH:
        return ATTN__DESC_HAS(d, supports_query_lens_mismatch_fn)
                   ? d->supports_query_lens_mismatch_fn
                   : NULL;
    case ATTN__FLAG_PCP: return ATTN__DESC_HAS(d, supports_pcp_fn) ? d->supports_pcp_fn : NULL;
    case ATTN__FLAG_DCP: return ATTN__DESC_HAS(d, supports_dcp_fn) ? d->supports_dcp_fn : NULL;
    default: return NULL;
    }
}

bool attn__desc_flag_ok(const attn_backend_desc *d, const attn_check_ctx *c, attn__flag f)
{
    attn__flag_hook hook = attn__desc_flag_hook(d, f);
    return hook ? hook(c) : attn__desc_flag_static(d, f);
}

attn_fa_import attn__desc_imports_fa(const attn_backend_desc *d)
{
    return ATTN__DESC_HAS(d, imports_vllm_flash_attn) ? d->imports_vllm_flash_attn
                                                      : ATTN_FA_IMPORT_NONE;
}

uint32_t attn__desc_kv_layouts(const attn_backend_desc *d, const attn_check_ctx *c)
{
    if (!ATTN__DESC_HAS(d, kv_cache_layouts_fn)) return 0;
    uint32_t all = ATTN_KVL_BIT(ATTN_KVL_COUNT) - 1u;
    uint32_t m = d->kv_cache_layouts_fn ? d->kv_cache_layouts_fn(c) : d->kv_cache_layouts;
    return m & all;
}

const char *attn_kv_cache_layout_name(attn_kv_cache_layout l)
{
    static const char *const names[ATTN_KVL_COUNT] = {"LBHNC", "LBNHC", "LHBNC",
                                                      "BLHNC", "BLNHC", "BHLNC"};
    return (unsigned)l < ATTN_KVL_COUNT ? names[l] : NULL;
}

bool attn__kv_layouts_meet(uint32_t a, uint32_t b)
{
    return !a || !b || (a & b) != 0;
}
