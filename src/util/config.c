/* Selector configuration helpers: defaults, equality/hash for the selection
 * cache key, and vLLM's repr used in error messages. */
#include <stdio.h>
#include <string.h>

#include "attn/config.h"

void attn_selector_config_init(attn_selector_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->dtype = ATTN_DTYPE_BF16;
    cfg->kv_cache_dtype = ATTN_KV_AUTO;
    cfg->attn_type = ATTN_TYPE_DECODER;
}

bool attn_selector_config_equal(const attn_selector_config *a, const attn_selector_config *b)
{
    if (!a || !b) return a == b; /* NULL equals only NULL */
    return a->head_size == b->head_size && a->dtype == b->dtype &&
           a->kv_cache_dtype == b->kv_cache_dtype && a->block_size == b->block_size &&
           a->use_mla == b->use_mla && a->has_sink == b->has_sink &&
           a->use_sparse == b->use_sparse && a->use_mm_prefix == b->use_mm_prefix &&
           a->use_per_head_quant_scales == b->use_per_head_quant_scales &&
           a->attn_type == b->attn_type && a->has_sliding_window == b->has_sliding_window &&
           a->use_non_causal == b->use_non_causal &&
           a->use_batch_invariant == b->use_batch_invariant && a->num_heads == b->num_heads &&
           a->use_kv_connector == b->use_kv_connector && a->use_pcp == b->use_pcp &&
           a->use_adaptive_verification == b->use_adaptive_verification &&
           a->use_dcp == b->use_dcp && a->use_rswa == b->use_rswa;
}

uint64_t attn_selector_config_hash(const attn_selector_config *c)
{
    if (!c) return 0; /* NULL hashes to 0 */
    /* FNV-1a over the fields (not the struct bytes: padding is undefined). */
    int64_t f[] = {c->head_size,
                   c->dtype,
                   c->kv_cache_dtype,
                   c->block_size,
                   c->use_mla,
                   c->has_sink,
                   c->use_sparse,
                   c->use_mm_prefix,
                   c->use_per_head_quant_scales,
                   c->attn_type,
                   c->has_sliding_window,
                   c->use_non_causal,
                   c->use_batch_invariant,
                   c->num_heads,
                   c->use_kv_connector,
                   c->use_pcp,
                   c->use_adaptive_verification,
                   c->use_dcp,
                   c->use_rswa};
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        uint64_t v = (uint64_t)f[i];
        for (int b = 0; b < 8; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    return h;
}

int attn_selector_config_repr(const attn_selector_config *c, char *buf, size_t size)
{
    if (!buf) size = 0; /* snprintf(NULL, 0) only measures */
    if (!c) return snprintf(buf, size, "None");
    char block[16], kv[32];
    if (c->block_size > 0)
        snprintf(block, sizeof block, "%d", c->block_size);
    else
        snprintf(block, sizeof block, "None");
    snprintf(kv, sizeof kv, "%s", attn_kv_dtype_name(c->kv_cache_dtype));
#define ATTN__B(x) ((x) ? "True" : "False")
    return snprintf(buf, size,
                    "AttentionSelectorConfig(head_size=%d, dtype=%s, kv_cache_dtype=%s, "
                    "block_size=%s, use_mla=%s, has_sink=%s, use_sparse=%s, use_mm_prefix=%s, "
                    "use_per_head_quant_scales=%s, attn_type=%s, has_sliding_window=%s, "
                    "use_non_causal=%s, use_batch_invariant=%s, use_kv_connector=%s, "
                    "use_adaptive_verification=%s, use_pcp=%s, use_dcp=%s, use_rswa=%s)",
                    c->head_size, attn_dtype_torch_name(c->dtype), kv, block, ATTN__B(c->use_mla),
                    ATTN__B(c->has_sink), ATTN__B(c->use_sparse), ATTN__B(c->use_mm_prefix),
                    ATTN__B(c->use_per_head_quant_scales), attn_attn_type_enum_name(c->attn_type),
                    ATTN__B(c->has_sliding_window), ATTN__B(c->use_non_causal),
                    ATTN__B(c->use_batch_invariant), ATTN__B(c->use_kv_connector),
                    ATTN__B(c->use_adaptive_verification), ATTN__B(c->use_pcp), ATTN__B(c->use_dcp),
                    ATTN__B(c->use_rswa));
#undef ATTN__B
}
