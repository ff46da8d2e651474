/* FlashAttention version resolution (reference §5d): which FA build the
 * FLASH_ATTN family would run on a platform. The backend predicates ask
 * without a head size; the answer depends on installed components (fa2, fa3,
 * fa4), the compute capability and batch invariance. 0 means Python's None
 * (no usable version: every version on cc 7.x, ROCm, CPU). */
#include "backends/catalog/catalog.h"
#include "platform/platform_impl.h"
#include "util/config_fields.h"

static bool attn__fa_has(const attn_platform *p, attn_component c)
{
    return (p->installed >> c) & 1u;
}

bool attn__fa_version_supported(const attn_platform *p, int v)
{
    if (!p || p->kind != ATTN_PLATFORM_CUDA || !p->has_cc) return false;
    int major = p->cc_major;
    switch (v) {
    case 2: return attn__fa_has(p, ATTN_COMPONENT_FA2) && major >= 8;
    case 3: return attn__fa_has(p, ATTN_COMPONENT_FA3) && major == 9;
    case 4: return attn__fa_has(p, ATTN_COMPONENT_FA4) && major >= 9 && major <= 11;
    default: return false;
    }
}

bool attn__fa4_supported(const attn_platform *p)
{
    return attn__fa_version_supported(p, 4);
}

int attn__fa_version_for(const attn_platform *p, const attn__fa_query *q)
{
    if (!p) return 0;
    if (p->kind == ATTN_PLATFORM_XPU) return 2;
    if (p->kind != ATTN_PLATFORM_CUDA || !p->has_cc) return 0;
    int major = p->cc_major, hs = q->head_size;
    int v;
    if (major == 9 && attn__fa_version_supported(p, 3))
        v = 3;
    else if (major == 10 && attn__fa_version_supported(p, 4))
        v = 4;
    else
        v = 2;
    if (q->requested) v = q->requested;
    /* FA3 only exists for Hopper: newer devices move to FA4 or back to FA2. */
    if (v == 3 && major >= 10) v = attn__fa_version_supported(p, 4) ? 4 : 2;
    if (v == 3 && major == 9 && hs > 256 && attn__fa_version_supported(p, 4)) v = 4;
    /* FA4 has no batch-invariant mode. */
    if (q->batch_invariant && v == 4) v = 2;
    /* FA4's dedicated head-256 kernel on 10.x/11.x: only for callers that
     * take it, without sinks, in a run whose cache is not quantized, with
     * blocks in whole 128-token pages. */
    if (v == 4 && hs == 256 && (major == 10 || major == 11)) {
        bool block_ok = q->block_size <= 0 || q->block_size % 128 == 0;
        if (!q->fa4_hd256 || q->has_sinks || q->run_kv_quantized || !block_ok) v = 2;
    }
    /* FA4 on Blackwell: TMEM limits heads above 128 to the 256 kernel (192
     * needs a 128-wide V head, which a selection never states). */
    if (v == 4 && major >= 10 && hs > 128 && hs != 256) v = 2;
    return attn__fa_version_supported(p, v) ? v : 0;
}

int attn__fa_version(const attn_platform *p, int head_size, int requested, bool batch_invariant)
{
    attn__fa_query q = {
        .head_size = head_size, .requested = requested, .batch_invariant = batch_invariant};
    return attn__fa_version_for(p, &q);
}

attn__fa_query attn__fa_query_hd256(const attn_check_ctx *c)
{
    const attn_selector_config *cfg = c->cfg;
    attn__fa_query q = {.head_size = cfg->head_size,
                        .block_size = cfg->block_size,
                        .batch_invariant = attn__batch_invariant(c),
                        .has_sinks = cfg->has_sink,
                        .fa4_hd256 = true,
                        .run_kv_quantized = attn_kv_dtype_is_quantized(attn__config_run_kv(cfg))};
    return q;
}

bool attn__batch_invariant(const attn_check_ctx *c)
{
    return (c->cfg && c->cfg->use_batch_invariant) ||
           (c->platform && c->platform->settings[ATTN_SETTING_BATCH_INVARIANT]);
}

int attn__fa_version_ctx(const attn_check_ctx *c)
{
    return attn__fa_version(c->platform, 0, 0, attn__batch_invariant(c));
}
