/* Which selection rules a platform family uses. Each family answers the
 * selection question with its own rules file (rules_<family>.c); there is
 * no single function that branches on the platform inside. A kind without
 * rules of its own (OpenCL) selects by the rules backends registered for it
 * (rules_registered.c); an unspecified platform has none: selecting on it
 * fails with vLLM's "Invalid attention backend for <device>". */
#include "attn/registry.h"
#include "select/selection.h"
#include "util/config_fields.h"

const attn__platform_ops *attn__platform_ops_for(attn_platform_kind kind)
{
    switch (kind) {
    case ATTN_PLATFORM_CUDA: return &attn__rules_cuda;
    case ATTN_PLATFORM_ROCM: return &attn__rules_rocm;
    case ATTN_PLATFORM_CPU: return &attn__rules_cpu;
    case ATTN_PLATFORM_XPU: return &attn__rules_xpu;
    default: return attn_platform_kind_uses_registered_rules(kind) ? &attn__rules_registered : NULL;
    }
}

/* Public (attn/platform.h) but the rules' answer, so defined beside them. */
int attn_platform_priorities(const attn_platform *p, const attn_selector_config *cfg,
                             const char **names, int max)
{
    const attn__platform_ops *ops = p ? attn__platform_ops_for(p->kind) : NULL;
    attn_selector_config full; /* the caller's struct read whole (attn/abi.h) */
    if (!ops || !ops->priorities || attn__config_read(cfg, &full) != ATTN_OK) return 0;
    if (!names || max < 0) max = 0; /* count only */
    return ops->priorities(p, &full, names, max);
}
