/* FlashAttention version resolution (reference §5d): which FA build the
 * FLASH_ATTN family would run on a platform. The backend predicates ask
 * without a head size; the answer depends on installed components (fa2, fa3,
 * fa4), the compute capability and batch invariance. 0 means Python's None
 * (no usable version: every version on cc 7.x, ROCm, CPU). */
#include "backends/catalog/catalog.h"
#include "platform/platform_impl.h"

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

int attn__fa_version(const attn_platform *p, int head_size, int requested, bool batch_invariant)
{
    if (!p) return 0;
    if (p->kind == ATTN_PLATFORM_XPU) return 2;
    if (p->kind != ATTN_PLATFORM_CUDA || !p->has_cc) return 0;
    int major = p->cc_major;
    int v;
    if (major == 9 && attn__fa_version_supported(p, 3))
        v = 3;
    else if (major == 10 && attn__fa_version_supported(p, 4))
        v = 4;
    else
        v = 2;
    if (requested) {
        v = requested;
        /* FA3 only exists for Hopper: newer devices move to FA4 or back to FA2. */
        if (v == 3 && major >= 10) v = attn__fa_version_supported(p, 4) ? 4 : 2;
    }
    if (head_size > 0) {
        if (major == 9 && v == 3 && head_size > 256 && attn__fa_version_supported(p, 4))
            v = 4;
        else if (major >= 10 && v == 4 && head_size > 128 && head_size != 192)
            v = 2;
    }
    /* FA4 has no batch-invariant mode. */
    if (batch_invariant && v == 4) v = 2;
    return attn__fa_version_supported(p, v) ? v : 0;
}

int attn__fa_version_ctx(const attn_check_ctx *c)
{
    const attn_platform *p = c->platform;
    bool bi =
        (c->cfg && c->cfg->use_batch_invariant) || (p && p->settings[ATTN_SETTING_BATCH_INVARIANT]);
    return attn__fa_version(p, 0, 0, bi);
}
