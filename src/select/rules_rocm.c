/* ROCm's selection rules (reference §6b). The capability comes from the gfx
 * arch (the platform layer parses it). AITER counts as found only when the
 * machine has the aiter component and is MI300 class (the platform layer's
 * attn__rocm_aiter_found). The priority list is not cached per capability like
 * CUDA's, and ROCm has no --block-size precluded warning. */
#include <string.h>

#include "select/selection.h"
#include "util/config_fields.h"

bool attn__rocm_mla_enabled(const attn_platform *p)
{
    return attn__rocm_aiter_found(p) && p->settings[ATTN_SETTING_ROCM_USE_AITER] &&
           p->settings[ATTN_SETTING_ROCM_USE_AITER_MLA];
}

bool attn__rocm_mha_enabled(const attn_platform *p)
{
    return attn__rocm_aiter_found(p) && p->settings[ATTN_SETTING_ROCM_USE_AITER] &&
           p->settings[ATTN_SETTING_ROCM_USE_AITER_MHA];
}

static int attn__rocm_list(const attn_platform *p, const attn_selector_config *cfg, const char **l)
{
    int n = 0;
    if (cfg->use_sparse) {
        l[n++] = "ROCM_AITER_MLA_SPARSE";
    } else if (cfg->use_mla) {
        if (attn__rocm_mla_enabled(p)) {
            l[n++] = "ROCM_AITER_MLA";
            l[n++] = "TRITON_MLA";
            l[n++] = "ROCM_AITER_TRITON_MLA";
        } else {
            l[n++] = "TRITON_MLA";
        }
    } else {
        /* ROCM_ATTN's (2, num_blocks, ...) layout cannot serve a KV connector. */
        if (!cfg->use_kv_connector) l[n++] = "ROCM_ATTN";
        if (attn__rocm_mha_enabled(p)) l[n++] = "ROCM_AITER_FA";
        /* Added whenever aiter is usable, even with rocm_use_aiter off. */
        if (attn__rocm_aiter_found(p)) l[n++] = "ROCM_AITER_UNIFIED_ATTN";
        l[n++] = "TRITON_ATTN";
        l[n++] = "TURBOQUANT";
        l[n++] = "ULTRAQUANT";
    }
    return n;
}

static int attn__rocm_priorities(const attn_platform *p, const attn_selector_config *cfg,
                                 const char **names, int max)
{
    const char *l[8];
    int n = attn__rocm_list(p, cfg, l);
    for (int i = 0; i < n && i < max; i++)
        names[i] = l[i];
    return n;
}

/* The run's KV dtype (vLLM's cache_config.cache_dtype, not the layer's). */
static bool attn__rocm_turboquant_run(const attn_selector_config *cfg)
{
    attn_kv_dtype run = attn__config_run_kv(cfg);
    return run != ATTN_KV_NONE && !strncmp(attn_kv_dtype_name(run), "turboquant_", 11);
}

static bool attn__rocm_ultraquant_run(const attn_selector_config *cfg)
{
    return attn__config_run_kv(cfg) == ATTN_KV_ULTRAQUANT_4BIT;
}

/* A turboquant or ultraquant run keeps its boundary layers at the native
 * dtype while every other layer needs the packed backend, so no one explicit
 * backend serves every layer: a request refused for the KV dtype or for the
 * shared layout alone gives way to the automatic choice (the refusal is a
 * note, as vLLM's info log). Any other refusal stays an error. */
static bool attn__rocm_packed_fallback(attn_selection *sel, const char *requested,
                                       const attn_selector_config *cfg, attn_status *st)
{
    bool tq_run = attn__rocm_turboquant_run(cfg), uq_run = attn__rocm_ultraquant_run(cfg);
    const char *kv = attn_kv_dtype_name(cfg->kv_cache_dtype);
    bool tq_layer = cfg->kv_cache_dtype != ATTN_KV_NONE && !strncmp(kv, "turboquant", 10);
    if (!tq_run && !uq_run && !tq_layer) return false;
    int idx = -1;
    *st = attn__sel_consider(sel, requested, -1, &idx);
    if (*st != ATTN_OK) return false;
    const attn__candidate *c = &sel->candidates[idx];
    static const char *const packed_only[] = {"kv_cache_dtype not supported",
                                              "no KV cache layout in common with TURBOQUANT",
                                              "no KV cache layout in common with ULTRAQUANT"};
    bool packed = false;
    for (int i = 0; i < 3 && !c->valid && c->num_reasons == 1; i++)
        packed = packed || !strcmp(c->reasons[0], packed_only[i]);
    if (!packed) {
        sel->num_candidates--; /* attn__sel_explicit records it again */
        return false;
    }
    attn__sel_note(sel,
                   "Selected backend %s is incompatible with this layer (%s) of the %s run; using "
                   "the auto-selected per-layer backend. Reason: %s",
                   c->name, attn_attn_type_enum_name(cfg->attn_type),
                   uq_run ? "ultraquant" : "turboquant", attn__sel_reasons_repr(sel, idx));
    sel->num_candidates--;
    return true;
}

static attn_status attn__rocm_select(const attn_platform *p, const char *requested,
                                     const attn_selector_config *cfg, attn_selection *sel)
{
    attn_status st = ATTN_OK;
    /* An explicit request shares its layout with the run's packed backend;
     * the automatic walk asks it only of a turboquant run (vLLM 0.32.0's
     * get_valid_backends does not pass the ultraquant flag). */
    bool tq_run = attn__rocm_turboquant_run(cfg);
    sel->layout_peer = tq_run ? "TURBOQUANT" : attn__rocm_ultraquant_run(cfg) ? "ULTRAQUANT" : NULL;
    if (requested && !attn__rocm_packed_fallback(sel, requested, cfg, &st))
        return attn__sel_explicit(sel, requested);
    sel->layout_peer = tq_run ? "TURBOQUANT" : NULL;
    const char *l[8];
    int n = attn__rocm_list(p, cfg, l);
    return attn__sel_auto(sel, l, n, false);
}

const attn__platform_ops attn__rules_rocm = {
    .kind = ATTN_PLATFORM_ROCM,
    .device_family = "rocm",
    .priorities = attn__rocm_priorities,
    .select = attn__rocm_select,
};
