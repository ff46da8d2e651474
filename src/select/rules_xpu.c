/* XPU's selection rules (reference §6d). XPU never validates: a fixed
 * decision order picks the backend (turboquant KV, sparse, MLA, a request
 * for TRITON_ATTN, float32, a request for FLASH_ATTN, any other request is
 * an error, else FLASH_ATTN). The chosen backend must still resolve. XPU
 * kernels use the NHD KV layout only. */
#include <string.h>

#include "select/selection.h"

/* The decision, or NULL with *bad_request set when the request is refused. */
static const char *attn__xpu_decide(const attn_selector_config *cfg, const char *requested,
                                    bool *fp32_fallback, bool *bad_request)
{
    *fp32_fallback = false;
    *bad_request = false;
    if (cfg->kv_cache_dtype != ATTN_KV_NONE &&
        !strncmp(attn_kv_dtype_name(cfg->kv_cache_dtype), "turboquant_", 11))
        return "TURBOQUANT";
    if (cfg->use_sparse) return "XPU_MLA_SPARSE";
    if (cfg->use_mla) return "TRITON_MLA";
    if (requested && !strcmp(requested, "TRITON_ATTN")) return "TRITON_ATTN";
    if (cfg->dtype == ATTN_DTYPE_FP32) {
        *fp32_fallback = true;
        return "TRITON_ATTN";
    }
    if (requested && !strcmp(requested, "FLASH_ATTN")) return "FLASH_ATTN";
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
    bool fp32, bad;
    const char *name = attn__xpu_decide(cfg, NULL, &fp32, &bad);
    if (max > 0) names[0] = name;
    return 1;
}

static attn_status attn__xpu_select(const attn_platform *p, const char *requested,
                                    const attn_selector_config *cfg, attn_selection *sel)
{
    (void)p;
    bool fp32, bad;
    attn__sel_note(sel, "KV cache layout NHD (XPU attention kernels support only NHD)");
    const char *name = attn__xpu_decide(cfg, requested, &fp32, &bad);
    if (bad)
        return attn__sel_fail(sel, ATTN_SELECT_EXPLICIT_INVALID, ATTN_BACKEND_INVALID,
                              "Invalid attention backend for xpu, with use_mla: %s",
                              cfg->use_mla ? "True" : "False");
    if (fp32)
        attn__sel_warn(sel, "Flash Attention on XPU does not support float32 dtype. Falling back "
                            "to Triton Attention backend.");
    /* A request that the decision honoured keeps the explicit error form. */
    bool honoured = requested && !strcmp(requested, name);
    return attn__sel_resolve_only(sel, name, honoured ? -1 : 0);
}

const attn__platform_ops attn__rules_xpu = {
    .kind = ATTN_PLATFORM_XPU,
    .device_family = "xpu",
    .priorities = attn__xpu_priorities,
    .select = attn__xpu_select,
};
