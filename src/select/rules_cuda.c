/* CUDA's selection rules (reference §6a with the newer priority lists of
 * the preface). Explicit requests are validated and never fall back; the
 * automatic path walks the list for (use_mla, capability major, kv dtype,
 * num_heads, non-causal, multimodal prefix) and warns when a user-given
 * --block-size knocked out higher-priority backends. */
#include "select/selection.h"

static int attn__cuda_list(const attn_platform *p, const attn_selector_config *cfg, const char **l)
{
    int n = 0;
    int major = p->has_cc ? p->cc_major : 0;
    if (!cfg->use_mla) {
        if (major == 10 && !cfg->use_non_causal) {
            if (cfg->use_mm_prefix) l[n++] = "TRITON_FLASHINFER";
            l[n++] = "FLASHINFER";
            l[n++] = "FLASH_ATTN";
        } else {
            if (major == 9 && cfg->use_mm_prefix) l[n++] = "TRITON_FLASH_ATTN";
            l[n++] = "FLASH_ATTN";
            l[n++] = "FLASHINFER";
        }
        l[n++] = "TRITON_ATTN";
        l[n++] = "FLEX_ATTENTION";
        l[n++] = "TURBOQUANT";
        return n;
    }
    if (major == 10) {
        l[n++] = "FLASHINFER_MLA";
        l[n++] = "TOKENSPEED_MLA";
        l[n++] = "CUTLASS_MLA";
        l[n++] = "FLASH_ATTN_MLA";
        l[n++] = "FLASHMLA";
        l[n++] = "TRITON_MLA";
        /* Few heads favour FlashInfer's sparse kernel; so does a quantized
         * cache. */
        bool few_heads = cfg->num_heads > 0 && cfg->num_heads <= 16;
        if (attn_kv_dtype_is_quantized(cfg->kv_cache_dtype) || few_heads) {
            l[n++] = "FLASHINFER_MLA_SPARSE";
            l[n++] = "FLASHMLA_SPARSE";
        } else {
            l[n++] = "FLASHMLA_SPARSE";
            l[n++] = "FLASHINFER_MLA_SPARSE";
        }
        return n;
    }
    if (major == 12) {
        l[n++] = "TRITON_MLA";
        l[n++] = "FLASHINFER_MLA_SPARSE_SM120";
        return n;
    }
    l[n++] = "FLASH_ATTN_MLA";
    l[n++] = "FLASHMLA";
    l[n++] = "FLASHINFER_MLA";
    l[n++] = "TRITON_MLA";
    /* FlashInfer's SM90 kernel leads the sparse tail for head size 512. */
    if (cfg->head_size == 512) l[n++] = "FLASHINFER_MLA_SPARSE_SM90";
    l[n++] = "FLASH_ATTN_MLA_SPARSE";
    l[n++] = "FLASHMLA_SPARSE";
    if (cfg->head_size != 512) l[n++] = "FLASHINFER_MLA_SPARSE_SM90";
    return n;
}

static int attn__cuda_priorities(const attn_platform *p, const attn_selector_config *cfg,
                                 const char **names, int max)
{
    const char *l[16];
    int n = attn__cuda_list(p, cfg, l);
    for (int i = 0; i < n && i < max; i++)
        names[i] = l[i];
    return n;
}

static attn_status attn__cuda_select(const attn_platform *p, const char *requested,
                                     const attn_selector_config *cfg, attn_selection *sel)
{
    if (requested) return attn__sel_explicit(sel, requested);
    const char *l[16];
    int n = attn__cuda_list(p, cfg, l);
    return attn__sel_auto(sel, l, n, true);
}

const attn__platform_ops attn__rules_cuda = {
    .kind = ATTN_PLATFORM_CUDA,
    .device_family = "cuda",
    .priorities = attn__cuda_priorities,
    .select = attn__cuda_select,
};
