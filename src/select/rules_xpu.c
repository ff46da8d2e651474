/* XPU's selection rules (vLLM 0.32.0's XPUPlatform). XPU validates only
 * FLASH_ATTN_MLA (its XPU variant); everything else is a fixed decision
 * order: turboquant KV, sparse, MLA (a TRITON_MLA request, any other request
 * but FLASH_ATTN_MLA refused, FLASH_ATTN_MLA when valid, else TRITON_MLA),
 * a TRITON_ATTN request, batch invariance and multimodal prefix (TRITON_ATTN
 * unless FLASH_ATTN was requested: FlashAttention on XPU has neither),
 * float32, a FLASH_ATTN request, any other request refused, else
 * FLASH_ATTN. The chosen backend must still resolve. XPU kernels use the
 * NHD KV layout only. */
#include <string.h>

#include "select/selection.h"
#include "select/validate.h"

static bool attn__is(const char *requested, const char *name)
{
    return requested && !strcmp(requested, name);
}

/* The non-MLA decision, or NULL with *bad_request set when the request is
 * refused. *warning receives vLLM's warning for a fallback, or NULL. */
static const char *attn__xpu_decide(const attn_selector_config *cfg, const char *requested,
                                    const char **warning, bool *bad_request)
{
    *warning = NULL;
    *bad_request = false;
    if (attn__is(requested, "TRITON_ATTN")) return "TRITON_ATTN";
    if (cfg->use_batch_invariant) {
        if (attn__is(requested, "FLASH_ATTN")) {
            *warning = "Using Flash Attention on XPU with batch invariance enabled because it "
                       "was explicitly requested. This backend has not been validated for batch "
                       "invariance on XPU and may produce non-deterministic results across "
                       "batch sizes.";
            return "FLASH_ATTN";
        }
        return "TRITON_ATTN";
    }
    if (cfg->use_mm_prefix) {
        if (attn__is(requested, "FLASH_ATTN")) {
            *warning = "Using Flash Attention on XPU for a multimodal prefix-LM model because it "
                       "was explicitly requested. The prefix-LM bidirectional mask cannot be "
                       "applied, so image/video inputs will produce incorrect results; only use "
                       "this for text-only workloads.";
            return "FLASH_ATTN";
        }
        *warning = "Flash Attention on XPU does not support multimodal prefix-LM attention. "
                   "Falling back to Triton Attention backend.";
        return "TRITON_ATTN";
    }
    if (cfg->dtype == ATTN_DTYPE_FP32) {
        *warning = "Flash Attention on XPU does not support float32 dtype. Falling back to Triton "
                   "Attention backend.";
        return "TRITON_ATTN";
    }
    if (attn__is(requested, "FLASH_ATTN")) return "FLASH_ATTN";
    if (requested) {
        *bad_request = true;
        return NULL;
    }
    return "FLASH_ATTN";
}

static int attn__xpu_priorities(const attn_platform *p, const attn_selector_config *cfg,
                                const char **names, int max)
{
    (void)p;
    const char *l[2];
    int n = 0;
    if (cfg->kv_cache_dtype != ATTN_KV_NONE &&
        !strncmp(attn_kv_dtype_name(cfg->kv_cache_dtype), "turboquant_", 11)) {
        l[n++] = "TURBOQUANT";
    } else if (cfg->use_sparse) {
        l[n++] = "XPU_MLA_SPARSE";
    } else if (cfg->use_mla) {
        l[n++] = "FLASH_ATTN_MLA";
        l[n++] = "TRITON_MLA";
    } else {
        const char *warning;
        bool bad;
        l[n++] = attn__xpu_decide(cfg, NULL, &warning, &bad);
    }
    for (int i = 0; i < n && i < max; i++)
        names[i] = l[i];
    return n;
}

static attn_status attn__xpu_refuse(attn_selection *sel, const attn_selector_config *cfg)
{
    return attn__sel_fail(sel, ATTN_SELECT_EXPLICIT_INVALID, ATTN_BACKEND_INVALID,
                          "Invalid attention backend for xpu, with use_mla: %s",
                          cfg->use_mla ? "True" : "False");
}

/* MLA on XPU: FLASH_ATTN_MLA's XPU variant is validated; invalid, it is an
 * error when requested and a fallback to TRITON_MLA otherwise. */
static attn_status attn__xpu_mla(attn_selection *sel, const char *requested,
                                 const attn_selector_config *cfg)
{
    if (attn__is(requested, "TRITON_MLA")) return attn__sel_resolve_only(sel, "TRITON_MLA", -1);
    bool explicit_fa = attn__is(requested, "FLASH_ATTN_MLA");
    if (requested && !explicit_fa) return attn__xpu_refuse(sel, cfg);
    int idx = -1;
    attn_status st = attn__sel_consider(sel, "FLASH_ATTN_MLA", explicit_fa ? -1 : 0, &idx);
    if (st != ATTN_OK)
        return attn__sel_fail(sel, ATTN_SELECT_NO_VALID, st, "%s", attn_last_error());
    if (sel->candidates[idx].valid) {
        attn__sel_choose(sel, idx);
        return ATTN_OK;
    }
    const char *why = attn__sel_reasons_repr(sel, idx);
    if (explicit_fa)
        return attn__sel_fail(sel, ATTN_SELECT_EXPLICIT_INVALID, ATTN_BACKEND_INVALID,
                              "FlashAttnMLA on XPU is not valid for this configuration: %s", why);
    attn__sel_note(sel,
                   "FlashAttnMLA on XPU is not valid for this configuration (%s); falling "
                   "back to Triton MLA backend.",
                   why);
    return attn__sel_resolve_only(sel, "TRITON_MLA", 1);
}

static attn_status attn__xpu_select(const attn_platform *p, const char *requested,
                                    const attn_selector_config *cfg, attn_selection *sel)
{
    (void)p;
    attn__sel_note(sel, "KV cache layout NHD (XPU attention kernels support only NHD)");
    if (cfg->kv_cache_dtype != ATTN_KV_NONE &&
        !strncmp(attn_kv_dtype_name(cfg->kv_cache_dtype), "turboquant_", 11))
        return attn__sel_resolve_only(sel, "TURBOQUANT",
                                      attn__is(requested, "TURBOQUANT") ? -1 : 0);
    if (cfg->use_sparse)
        return attn__sel_resolve_only(sel, "XPU_MLA_SPARSE",
                                      attn__is(requested, "XPU_MLA_SPARSE") ? -1 : 0);
    if (cfg->use_mla) return attn__xpu_mla(sel, requested, cfg);
    const char *warning;
    bool bad;
    const char *name = attn__xpu_decide(cfg, requested, &warning, &bad);
    if (bad) return attn__xpu_refuse(sel, cfg);
    if (warning) attn__sel_warn(sel, "%s", warning);
    /* A request that the decision honoured keeps the explicit error form. */
    return attn__sel_resolve_only(sel, name, attn__is(requested, name) ? -1 : 0);
}

/* XPU raises FLASH_ATTN's preference to at least 64. */
static int attn__xpu_preferred_block_size(const attn_platform *p, const attn_backend_desc *d,
                                          int default_size)
{
    if (d && d->preferred_block_size <= 0 && d->name && !strcmp(d->name, "FLASH_ATTN"))
        return default_size > 64 ? default_size : 64;
    return attn__preferred_block_size(d, p, default_size);
}

const attn__platform_ops attn__rules_xpu = {
    .kind = ATTN_PLATFORM_XPU,
    .device_family = "xpu",
    .priorities = attn__xpu_priorities,
    .select = attn__xpu_select,
    .preferred_block_size = attn__xpu_preferred_block_size,
};
