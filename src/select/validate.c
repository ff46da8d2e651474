/* Generic validation of a backend descriptor (reference §3).
 *
 * Contract. One walk over the descriptor yields every failed check as a
 * reason, in vLLM's order and wording:
 *   head size, dtype, kv-cache dtype, block size, multimodal prefix, MLA,
 *   sinks, sparse, per-head quant scales, compute capability, attention
 *   type, non-causal, batch invariance, then the backend's own combination
 *   check. A backend never words the standard reasons itself; it only
 *   supplies data (and optional dynamic predicates that replace a static
 *   field). Zero-valued fields mean vLLM's base-class defaults: dtypes
 *   {fp16, bf16}, kv dtypes {auto, float16, bfloat16}, any block size, any
 *   head size, any capability, decoder only. */
#include <stdio.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "platform/platform_impl.h"
#include "select/selection.h"
#include "select/validate.h"
#include "util/abi.h"
#include "util/error.h"

void attn__check_ctx_init(attn_check_ctx *c, const attn_platform *p,
                          const attn_selector_config *cfg)
{
    memset(c, 0, sizeof *c);
    c->platform = p;
    c->cfg = cfg;
    if (p && p->has_cc) {
        c->has_cc = true;
        c->cc_major = p->cc_major;
        c->cc_minor = p->cc_minor;
    }
}

/* vLLM 0.32.0 class facts the descriptor has no field for (base-class
 * defaults: no sliding window, no R-SWA, KV connectors fine, device/CPU
 * query-length mismatch fine, no non-causal multi-token DCP). A plugin's
 * backend gets the defaults. */
typedef struct attn__v032_flags {
    const char *name;
    bool sliding_window, rswa, no_kv_connector, no_query_lens_mismatch, query_lens_mismatch_on_10x,
        non_causal_dcp;
    /* Replace the descriptor's supports_non_causal / supports_mm_prefix
     * when set. */
    bool (*non_causal)(const attn_check_ctx *c);
    bool (*mm_prefix)(const attn_check_ctx *c);
} attn__v032_flags;

/* FlashAttention's multimodal prefix is an FA4 feature. */
static bool attn__fa_mm_prefix(const attn_check_ctx *c)
{
    return attn__fa4_supported(c->platform);
}

/* AITER MLA's non-causal decode: aiter.mla.mla_decode_fwd(causal=) and the
 * ASM kernels, which only gfx950 ships. */
static bool attn__aiter_mla_non_causal(const attn_check_ctx *c)
{
    return attn__rocm_aiter_found(c->platform) &&
           !strcmp(c->platform->gfx_arch, ATTN__MI300_ARCH_B);
}

static const attn__v032_flags attn__v032_table[] = {
    {"FLASH_ATTN", true, true, false, false, false, false, NULL, attn__fa_mm_prefix},
    {"FLASH_ATTN_DIFFKV", true, true, false, false, false, false, NULL, attn__fa_mm_prefix},
    {"TRITON_ATTN", true, true, false, false, false, false, NULL, NULL},
    {"FLEX_ATTENTION", true, true, false, false, false, false, NULL, NULL},
    {"CPU_ATTN", true, false, false, false, false, false, NULL, NULL},
    {"ROCM_ATTN", true, false, true, false, false, false, NULL, NULL},
    {"ROCM_AITER_UNIFIED_ATTN", true, false, false, false, false, false, NULL, NULL},
    {"ROCM_AITER_FA", true, false, false, false, false, false, NULL, NULL},
    {"FLASHINFER", true, false, false, true, true, false, NULL, NULL},
    /* Composites: both halves must agree; no query-length mismatch. */
    {"TRITON_FLASH_ATTN", true, true, false, true, false, false, NULL, NULL},
    {"TRITON_FLASHINFER", true, false, false, true, false, false, NULL, NULL},
    {"FLASHINFER_MLA", false, false, false, false, false, true, NULL, NULL},
    {"ROCM_AITER_MLA", false, false, false, false, false, true, attn__aiter_mla_non_causal, NULL},
    {"ROCM_AITER_TRITON_MLA", false, false, false, false, false, true, attn__aiter_mla_non_causal,
     NULL},
    {"TOKENSPEED_MLA", false, false, false, false, false, true, NULL, NULL},
};

/* A descriptor that is not one of the catalog's own (a plugin's, or a
 * registration under a catalog name) has no field to declare these, so it is
 * not rejected for them: libattn's descriptor ABI predates them. */
static const attn__v032_flags *attn__v032_flags_of(const attn_backend_desc *d)
{
    static const attn__v032_flags none = {NULL,  false, false, false, false,
                                          false, false, NULL,  NULL};
    static const attn__v032_flags plugin = {NULL,  true, true, false, false,
                                            false, true, NULL, NULL};
    const attn__catalog_entry *e = attn__catalog_find(d->name);
    const attn_backend *b = e && e->builtin ? e->builtin() : NULL;
    if (!b || b->desc != d) return &plugin;
    for (size_t i = 0; i < sizeof attn__v032_table / sizeof attn__v032_table[0]; i++)
        if (!strcmp(attn__v032_table[i].name, d->name)) return &attn__v032_table[i];
    return &none;
}

static bool attn__type_ok(const attn_backend_desc *d, attn_attn_type t)
{
    if ((unsigned)t >= ATTN_TYPE_COUNT) return false;
    uint32_t mask = d->attn_types ? d->attn_types : ATTN_TYPE_BIT(ATTN_TYPE_DECODER);
    return (mask >> t) & 1u;
}

int attn__validate(const attn_backend_desc *d, const attn_check_ctx *c, attn__reason_fn emit,
                   void *user)
{
    const attn_selector_config *cfg = c->cfg;
    int n = 0;
#define ATTN__REASON(text)                                                                         \
    do {                                                                                           \
        emit(user, (text));                                                                        \
        n++;                                                                                       \
    } while (0)
    if (!attn__desc_head_ok(d, c, cfg->head_size)) ATTN__REASON("head_size not supported");
    if (!attn__desc_dtype_ok(d, c, cfg->dtype)) ATTN__REASON("dtype not supported");
    if (!attn__desc_kv_ok(d, c, cfg->kv_cache_dtype)) ATTN__REASON("kv_cache_dtype not supported");
    if (!attn__desc_block_ok(d, c, cfg->block_size)) ATTN__REASON("block_size not supported");
    const attn__v032_flags *x = attn__v032_flags_of(d);
    if (cfg->use_mm_prefix && !(x->mm_prefix ? x->mm_prefix(c) : d->supports_mm_prefix))
        ATTN__REASON("partial multimodal token full attention not supported");
    if (cfg->use_mla != d->is_mla)
        ATTN__REASON(cfg->use_mla ? "MLA not supported" : "non-MLA not supported");
    if (cfg->has_sink && !(d->supports_sink_fn ? d->supports_sink_fn(c) : d->supports_sink))
        ATTN__REASON("attention sinks not supported");
    if (cfg->use_sparse != d->is_sparse)
        ATTN__REASON(cfg->use_sparse ? "sparse not supported" : "non-sparse not supported");
    if (cfg->use_per_head_quant_scales &&
        !(d->supports_per_head_quant_scales_fn ? d->supports_per_head_quant_scales_fn(c)
                                               : d->supports_per_head_quant_scales))
        ATTN__REASON("per-head quant scales not supported");
    if (!attn__desc_cc_ok(d, c)) ATTN__REASON("compute capability not supported");
    if (!attn__type_ok(d, cfg->attn_type)) {
        char buf[96];
        snprintf(buf, sizeof buf, "attention type %s not supported",
                 attn_attn_type_enum_name(cfg->attn_type));
        ATTN__REASON(buf);
    }
    if (cfg->has_sliding_window && !x->sliding_window) ATTN__REASON("sliding window not supported");
    if (cfg->use_rswa && !x->rswa) ATTN__REASON("R-SWA not supported");
    if (cfg->use_non_causal && !(x->non_causal ? x->non_causal(c) : d->supports_non_causal))
        ATTN__REASON("non-causal attention not supported");
    if (cfg->use_mla && cfg->use_non_causal && cfg->use_dcp && !x->non_causal_dcp)
        ATTN__REASON("non-causal MLA attention with DCP not supported");
    if (cfg->use_batch_invariant && !d->supports_batch_invariance)
        ATTN__REASON("batch invariance not supported");
    if (cfg->use_kv_connector && x->no_kv_connector) ATTN__REASON("KV connector not supported");
    if (cfg->use_pcp && !d->supports_pcp) ATTN__REASON("PCP not supported");
    if (cfg->use_dcp && !d->supports_dcp) ATTN__REASON("DCP not supported");
    if (cfg->use_adaptive_verification && x->no_query_lens_mismatch &&
        !(x->query_lens_mismatch_on_10x && c->has_cc && c->cc_major == 10))
        ATTN__REASON("device-cpu query lens mismatch not supported, this is needed for adaptive "
                     "verification");
    if (d->supports_combination) {
        char buf[ATTN_REASON_MAX * 2];
        buf[0] = '\0';
        const char *r = d->supports_combination(c, buf, sizeof buf);
        if (r) ATTN__REASON(r);
    }
#undef ATTN__REASON
    return n;
}

typedef struct attn__reason_sink {
    char (*reasons)[ATTN_REASON_MAX];
    int max, written;
} attn__reason_sink;

static void attn__reason_to_array(void *user, const char *text)
{
    attn__reason_sink *s = user;
    if (s->reasons && s->written < s->max) {
        snprintf(s->reasons[s->written], ATTN_REASON_MAX, "%s", text);
        s->written++;
    }
}

attn_status attn__desc_check(const attn_backend_desc *d)
{
    if (d->abi_version != ATTN_BACKEND_ABI_VERSION)
        return attn__fail(ATTN_ABI_MISMATCH, "descriptor abi_version %u, libattn expects %u",
                          d->abi_version, ATTN_BACKEND_ABI_VERSION);
    if (!attn__struct_size_ok(d->struct_size, ATTN__V1_BACKEND_DESC, sizeof(attn_backend_desc)))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "descriptor struct_size %u, libattn accepts %zu to %zu", d->struct_size,
                          ATTN__V1_BACKEND_DESC, sizeof(attn_backend_desc));
    return ATTN_OK;
}

int attn_backend_validate(const attn_backend_desc *d, const attn_platform *p,
                          const attn_selector_config *cfg, char reasons[][ATTN_REASON_MAX], int max)
{
    if (!d || !cfg) {
        attn__fail(ATTN_NULL_ARGUMENT, "attn_backend_validate: %s is NULL",
                   !d ? "descriptor" : "config");
        return -1;
    }
    if (attn__desc_check(d) != ATTN_OK) return -1;
    attn_check_ctx c;
    attn__check_ctx_init(&c, p, cfg);
    attn__reason_sink sink = {reasons, max < 0 ? 0 : max, 0};
    return attn__validate(d, &c, attn__reason_to_array, &sink);
}

bool attn_backend_supports_block_size(const attn_backend_desc *d, const attn_platform *p,
                                      int block_size)
{
    /* 0 is vLLM's None (supported); a negative size or one past the limit is not */
    if (!d || block_size < 0 || block_size > ATTN_MAX_BLOCK_SIZE) return false;
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.block_size = block_size;
    attn_check_ctx c;
    attn__check_ctx_init(&c, p, &cfg);
    return attn__desc_block_ok(d, &c, block_size);
}

int attn__preferred_block_size(const attn_backend_desc *d, const attn_platform *p, int default_size)
{
    if (!d) return default_size;
    if (d->preferred_block_size > 0) return d->preferred_block_size;
    if (attn_backend_supports_block_size(d, p, default_size)) return default_size;
    if (d->n_block_sizes > 0 && d->block_sizes) {
        int best = 0;
        for (int i = 0; i < d->n_block_sizes; i++)
            if (d->block_sizes[i] > 0 && (!best || d->block_sizes[i] < best))
                best = d->block_sizes[i];
        if (best) return best;
    }
    for (int bs = 1; bs <= 4096; bs++)
        if (attn_backend_supports_block_size(d, p, bs)) return bs;
    return default_size;
}

int attn_backend_preferred_block_size(const attn_backend_desc *d, const attn_platform *p,
                                      int default_size)
{
    const attn__platform_ops *ops = !p ? NULL : p->ops ? p->ops : attn__platform_ops_for(p->kind);
    if (ops && ops->preferred_block_size) return ops->preferred_block_size(p, d, default_size);
    return attn__preferred_block_size(d, p, default_size);
}
