/* Generic validation of a backend descriptor (reference §3).
 *
 * Contract. One table of uniform checks (as PyTorch's sdp_utils), each a
 * predicate over the descriptor and the config with vLLM's reason text,
 * walked in vLLM's order (validate_configuration): head size, dtype,
 * kv-cache dtype, block size, multimodal prefix, MLA, sinks, sparse,
 * per-head quant scales, compute capability, attention type, sliding
 * window, R-SWA, non-causal, non-causal MLA with DCP, batch invariance, KV
 * connector, PCP, DCP, adaptive verification, then the backend's own
 * combination check. Every failed check is a reason. A backend never words
 * the standard reasons itself and no check knows a backend by name: every
 * fact is a descriptor field (or its optional hook that refines the field on
 * a machine). Zero-valued fields mean vLLM's base-class defaults: dtypes
 * {fp16, bf16}, kv dtypes {auto, float16, bfloat16}, any block size, any
 * head size, any capability, decoder only. The same table answers `attn
 * backends` (attn_backend_check_*), so what it prints is what is checked. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "platform/platform_impl.h"
#include "select/selection.h"
#include "select/validate.h"
#include "util/abi.h"
#include "util/config_fields.h"
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

/* ---- the checks: one row each, in vLLM's order --------------------------- */

typedef const char *(*attn__check_fn)(const attn_backend_desc *d, const attn_check_ctx *c,
                                      char *buf, size_t size);

/* A row runs when every selector-config bool it asks is set (none: every
 * config). A flag row answers from the descriptor's yes/no capability and
 * gives vLLM's fixed reason; the other rows word their own. */
typedef struct attn__check_row {
    const char *key;  /* JSON key and docs column */
    size_t asks[3];   /* offsetof(attn_selector_config, bool) + 1 each; 0 ends */
    attn__flag flag;  /* ATTN__FLAG_COUNT: not a flag */
    const char *text; /* a flag row's reason; the others' forms, for the docs */
    attn__check_fn check;
} attn__check_row;

static const char *chk_head(const attn_backend_desc *d, const attn_check_ctx *c, char *b, size_t n)
{
    (void)b, (void)n;
    return attn__desc_head_ok(d, c, c->cfg->head_size) ? NULL : "head_size not supported";
}

static const char *chk_dtype(const attn_backend_desc *d, const attn_check_ctx *c, char *b, size_t n)
{
    (void)b, (void)n;
    return attn__desc_dtype_ok(d, c, c->cfg->dtype) ? NULL : "dtype not supported";
}

static const char *chk_kv(const attn_backend_desc *d, const attn_check_ctx *c, char *b, size_t n)
{
    (void)b, (void)n;
    return attn__desc_kv_ok(d, c, c->cfg->kv_cache_dtype) ? NULL : "kv_cache_dtype not supported";
}

static const char *chk_block(const attn_backend_desc *d, const attn_check_ctx *c, char *b, size_t n)
{
    (void)b, (void)n;
    return attn__desc_block_ok(d, c, c->cfg->block_size) ? NULL : "block_size not supported";
}

static const char *chk_mla(const attn_backend_desc *d, const attn_check_ctx *c, char *b, size_t n)
{
    (void)b, (void)n;
    if (c->cfg->use_mla == d->is_mla) return NULL;
    return c->cfg->use_mla ? "MLA not supported" : "non-MLA not supported";
}

static const char *chk_sparse(const attn_backend_desc *d, const attn_check_ctx *c, char *b,
                              size_t n)
{
    (void)b, (void)n;
    if (c->cfg->use_sparse == d->is_sparse) return NULL;
    return c->cfg->use_sparse ? "sparse not supported" : "non-sparse not supported";
}

static const char *chk_cc(const attn_backend_desc *d, const attn_check_ctx *c, char *b, size_t n)
{
    (void)b, (void)n;
    return attn__desc_cc_ok(d, c) ? NULL : "compute capability not supported";
}

static const char *chk_type(const attn_backend_desc *d, const attn_check_ctx *c, char *b, size_t n)
{
    attn_attn_type t = c->cfg->attn_type;
    uint32_t mask = d->attn_types ? d->attn_types : ATTN_TYPE_BIT(ATTN_TYPE_DECODER);
    if ((unsigned)t < ATTN_TYPE_COUNT && ((mask >> t) & 1u)) return NULL;
    snprintf(b, n, "attention type %s not supported", attn_attn_type_enum_name(t));
    return b;
}

static const char *chk_combination(const attn_backend_desc *d, const attn_check_ctx *c, char *b,
                                   size_t n)
{
    if (!d->supports_combination) return NULL;
    b[0] = '\0';
    return d->supports_combination(c, b, n);
}

#define ASK(f) ((offsetof(attn_selector_config, f)) + 1)
#define ROW(key, text, fn)                                                                         \
    {                                                                                              \
        key, {0}, ATTN__FLAG_COUNT, text, fn                                                       \
    }
#define FLAG(key, f, text, ...)                                                                    \
    {                                                                                              \
        key, {__VA_ARGS__}, ATTN__FLAG_##f, text, NULL                                             \
    }

static const attn__check_row attn__checks[] = {
    ROW("head_size", "head_size not supported", chk_head),
    ROW("dtype", "dtype not supported", chk_dtype),
    ROW("kv_cache_dtype", "kv_cache_dtype not supported", chk_kv),
    ROW("block_size", "block_size not supported", chk_block),
    FLAG("mm_prefix", MM_PREFIX, "partial multimodal token full attention not supported",
         ASK(use_mm_prefix)),
    ROW("mla", "MLA not supported | non-MLA not supported", chk_mla),
    FLAG("sink", SINK, "attention sinks not supported", ASK(has_sink)),
    ROW("sparse", "sparse not supported | non-sparse not supported", chk_sparse),
    FLAG("per_head_quant_scales", PER_HEAD_QUANT_SCALES, "per-head quant scales not supported",
         ASK(use_per_head_quant_scales)),
    ROW("compute_capability", "compute capability not supported", chk_cc),
    ROW("attn_type", "attention type <type> not supported", chk_type),
    FLAG("sliding_window", SLIDING_WINDOW, "sliding window not supported", ASK(has_sliding_window)),
    FLAG("rswa", RSWA, "R-SWA not supported", ASK(use_rswa)),
    FLAG("non_causal", NON_CAUSAL, "non-causal attention not supported", ASK(use_non_causal)),
    FLAG("non_causal_dcp", NON_CAUSAL_DCP, "non-causal MLA attention with DCP not supported",
         ASK(use_mla), ASK(use_non_causal), ASK(use_dcp)),
    FLAG("batch_invariance", BATCH_INVARIANCE, "batch invariance not supported",
         ASK(use_batch_invariant)),
    FLAG("kv_connector", KV_CONNECTOR, "KV connector not supported", ASK(use_kv_connector)),
    FLAG("pcp", PCP, "PCP not supported", ASK(use_pcp)),
    FLAG("dcp", DCP, "DCP not supported", ASK(use_dcp)),
    FLAG("adaptive_verification", QUERY_LENS_MISMATCH,
         "device-cpu query lens mismatch not supported, this is needed for adaptive "
         "verification",
         ASK(use_adaptive_verification)),
    ROW("combination", "<the backend's own reason>", chk_combination),
};
#undef ASK
#undef ROW
#undef FLAG

#define ATTN__NUM_CHECKS ((int)(sizeof attn__checks / sizeof attn__checks[0]))

static bool attn__row_asked(const attn__check_row *r, const attn_selector_config *cfg)
{
    for (int k = 0; k < 3 && r->asks[k]; k++) {
        bool v;
        memcpy(&v, (const char *)cfg + r->asks[k] - 1, sizeof v);
        if (!v) return false;
    }
    return true;
}

/* The row's reason on c, or NULL (asked and accepted, or not asked). */
static const char *attn__row_reason(const attn__check_row *r, const attn_backend_desc *d,
                                    const attn_check_ctx *c, char *buf, size_t size)
{
    if (!attn__row_asked(r, c->cfg)) return NULL;
    if (r->flag != ATTN__FLAG_COUNT) return attn__desc_flag_ok(d, c, r->flag) ? NULL : r->text;
    return r->check(d, c, buf, size);
}

int attn__validate(const attn_backend_desc *d, const attn_check_ctx *c, attn__reason_fn emit,
                   void *user)
{
    int n = 0;
    for (int i = 0; i < ATTN__NUM_CHECKS; i++) {
        char buf[ATTN_REASON_MAX * 2];
        const char *r = attn__row_reason(&attn__checks[i], d, c, buf, sizeof buf);
        if (r) {
            emit(user, r);
            n++;
        }
    }
    return n;
}

/* ---- the table, public ------------------------------------------------------ */

static const attn__check_row *attn__check_at(int i)
{
    return i >= 0 && i < ATTN__NUM_CHECKS ? &attn__checks[i] : NULL;
}

int attn_backend_check_count(void)
{
    return ATTN__NUM_CHECKS;
}

const char *attn_backend_check_key(int i)
{
    const attn__check_row *r = attn__check_at(i);
    return r ? r->key : NULL;
}

const char *attn_backend_check_asks(int i, int j)
{
    const attn__check_row *r = attn__check_at(i);
    if (!r || j < 0 || j >= 3 || !r->asks[j]) return NULL;
    for (int k = 0; k < attn_selector_config_num_fields(); k++) {
        const attn_config_field *f = attn_selector_config_field(k);
        if (f->offset + 1 == r->asks[j]) return f->name;
    }
    return NULL;
}

bool attn_backend_check_is_flag(int i)
{
    const attn__check_row *r = attn__check_at(i);
    return r && r->flag != ATTN__FLAG_COUNT;
}

const char *attn_backend_check_reason(int i)
{
    const attn__check_row *r = attn__check_at(i);
    return r ? r->text : NULL;
}

attn_fact attn_backend_check_static(const attn_backend_desc *d, int i)
{
    const attn__check_row *r = attn__check_at(i);
    if (!d || !r || r->flag == ATTN__FLAG_COUNT || attn__desc_check(d) != ATTN_OK)
        return ATTN_FACT_NONE;
    if (!attn__desc_flag_static(d, r->flag)) return ATTN_FACT_NO;
    return attn__desc_flag_hook(d, r->flag) ? ATTN_FACT_REFINED : ATTN_FACT_YES;
}

/* The config a flag's machine answer is given for: the CLI's defaults
 * (head size 128) with the row's inputs set. */
static void attn__check_config(const attn__check_row *r, attn_selector_config *cfg)
{
    attn_selector_config_init(cfg);
    cfg->head_size = 128;
    for (int k = 0; k < 3 && r->asks[k]; k++) {
        bool v = true;
        memcpy((char *)cfg + r->asks[k] - 1, &v, sizeof v);
    }
}

attn_fact attn_backend_check_on(const attn_backend_desc *d, const attn_platform *p, int i)
{
    const attn__check_row *r = attn__check_at(i);
    if (!d || !r || r->flag == ATTN__FLAG_COUNT || attn__desc_check(d) != ATTN_OK)
        return ATTN_FACT_NONE;
    attn_selector_config cfg;
    attn__check_config(r, &cfg);
    attn_selector_config eff = cfg;
    if (p) (void)attn__effective_config(p, &cfg, &eff); /* cfg is libattn's own */
    attn_check_ctx c;
    attn__check_ctx_init(&c, p, &eff);
    char buf[ATTN_REASON_MAX];
    return attn__row_reason(r, d, &c, buf, sizeof buf) ? ATTN_FACT_NO : ATTN_FACT_YES;
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
    attn_selector_config full;
    if (attn__config_read(cfg, &full) != ATTN_OK) return -1;
    if (full.run_kv_cache_dtype == ATTN_KV_NONE) full.run_kv_cache_dtype = full.kv_cache_dtype;
    attn_check_ctx c;
    attn__check_ctx_init(&c, p, &full);
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
    const attn__platform_ops *ops = p ? attn__platform_ops_for(p->kind) : NULL;
    if (ops && ops->preferred_block_size) return ops->preferred_block_size(p, d, default_size);
    return attn__preferred_block_size(d, p, default_size);
}
