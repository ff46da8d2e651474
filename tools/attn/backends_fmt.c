/* `attn backends`: a descriptor's capabilities as text, for the JSON, the
 * text listing and docs/backends.md. The static fields are the
 * machine-independent statement; "*" marks one a hook narrows on some
 * machines (docs/backends.md lists where). */
#include <stdlib.h>
#include <string.h>

#include "attn/abi.h"
#include "backends.h"

void attn__bk_dtypes(attn__sb *sb, const attn_backend_desc *d)
{
    uint32_t m =
        d->dtypes ? d->dtypes : (ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16));
    bool first = true;
    for (int i = 0; i < ATTN_DTYPE_COUNT; i++) {
        if ((m >> i) & 1u) {
            attn__sb_printf(sb, "%s%s", first ? "" : ", ", attn_dtype_name((attn_dtype)i));
            first = false;
        }
    }
    if (d->supports_dtype) attn__sb_puts(sb, " *");
}

void attn__bk_kv(attn__sb *sb, const attn_backend_desc *d)
{
    uint64_t m = d->kv_dtypes ? d->kv_dtypes
                              : (ATTN_KV_BIT(ATTN_KV_AUTO) | ATTN_KV_BIT(ATTN_KV_FLOAT16) |
                                 ATTN_KV_BIT(ATTN_KV_BFLOAT16));
    bool first = true;
    for (int i = 0; i < ATTN_KV_COUNT; i++) {
        if ((m >> i) & 1u) {
            attn__sb_printf(sb, "%s%s", first ? "" : ", ", attn_kv_dtype_name((attn_kv_dtype)i));
            first = false;
        }
    }
    if (d->kv_none_rejected) attn__sb_puts(sb, " (not None)");
    if (d->supports_kv_cache_dtype) attn__sb_puts(sb, " *");
}

void attn__bk_blocks(attn__sb *sb, const attn_backend_desc *d)
{
    if (d->supports_block_size) attn__sb_puts(sb, "* ");
    if (d->n_block_sizes <= 0 || !d->block_sizes) {
        attn__sb_puts(sb, "any");
    } else if (d->n_block_sizes == 1) {
        if (d->block_sizes[0] == 1)
            attn__sb_puts(sb, "any");
        else
            attn__sb_printf(sb, "multiple of %d", d->block_sizes[0]);
    } else {
        attn__sb_puts(sb, "multiple of any of [");
        for (int i = 0; i < d->n_block_sizes; i++)
            attn__sb_printf(sb, "%s%d", i ? ", " : "", d->block_sizes[i]);
        attn__sb_putc(sb, ']');
    }
    if (d->preferred_block_size) attn__sb_printf(sb, "; preferred %d", d->preferred_block_size);
}

void attn__bk_heads(attn__sb *sb, const attn_backend_desc *d)
{
    const attn_head_rule *h = &d->heads;
    if (h->n_sizes > 0 && h->sizes) {
        for (int i = 0; i < h->n_sizes; i++)
            attn__sb_printf(sb, "%s%d", i ? ", " : "", h->sizes[i]);
    } else if (!h->min && !h->max && !h->multiple_of) {
        attn__sb_puts(sb, "any");
    } else {
        bool first = true;
        if (h->multiple_of) {
            attn__sb_printf(sb, "multiple of %d", h->multiple_of);
            first = false;
        }
        if (h->min) {
            attn__sb_printf(sb, "%s>= %d", first ? "" : ", ", h->min);
            first = false;
        }
        if (h->max) attn__sb_printf(sb, "%s<= %d", first ? "" : ", ", h->max);
    }
    if (d->supports_head_size) attn__sb_puts(sb, " *");
}

void attn__bk_cc(attn__sb *sb, const attn_backend_desc *d)
{
    if (d->supports_compute_capability) {
        attn__sb_puts(sb, "*");
        return;
    }
    bool has_min = d->cc_min.major || d->cc_min.minor;
    bool has_max = d->cc_max.major || d->cc_max.minor;
    if (!has_min && !has_max)
        attn__sb_puts(sb, "any");
    else if (has_min && has_max && d->cc_max.minor == 99 && d->cc_min.minor == 0) {
        if (d->cc_min.major == d->cc_max.major)
            attn__sb_printf(sb, "%d.x", d->cc_min.major);
        else
            attn__sb_printf(sb, "%d.x-%d.x", d->cc_min.major, d->cc_max.major);
    } else if (has_min && has_max)
        attn__sb_printf(sb, "%d.%d-%d.%d", d->cc_min.major, d->cc_min.minor, d->cc_max.major,
                        d->cc_max.minor);
    else if (has_min)
        attn__sb_printf(sb, ">= %d.%d", d->cc_min.major, d->cc_min.minor);
    else
        attn__sb_printf(sb, "<= %d.%d", d->cc_max.major, d->cc_max.minor);
}

void attn__bk_types(attn__sb *sb, const attn_backend_desc *d)
{
    static const char *const abbr[] = {"D", "E", "EO", "ED"};
    uint32_t m = d->attn_types ? d->attn_types : ATTN_TYPE_BIT(ATTN_TYPE_DECODER);
    bool first = true;
    for (int i = 0; i < ATTN_TYPE_COUNT; i++) {
        if ((m >> i) & 1u) {
            attn__sb_printf(sb, "%s%s", first ? "" : ",", abbr[i]);
            first = false;
        }
    }
}

void attn__bk_needs(attn__sb *sb, const attn_backend_desc *d)
{
    bool first = true;
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++) {
        if ((d->import_requires >> c) & 1u) {
            attn__sb_printf(sb, "%s%s", first ? "" : ", ", attn_component_name((attn_component)c));
            first = false;
        }
    }
    attn_fa_import fa = ATTN_STRUCT_HAS(attn_backend_desc, d, imports_vllm_flash_attn)
                            ? d->imports_vllm_flash_attn
                            : ATTN_FA_IMPORT_NONE;
    if (fa != ATTN_FA_IMPORT_NONE) {
        attn__sb_printf(sb, "%sfa2 or fa3 on CUDA%s", first ? "" : ", ",
                        fa == ATTN_FA_IMPORT_ALWAYS ? " (absent elsewhere)" : "");
        first = false;
    }
    if (first) attn__sb_puts(sb, "-");
}

void attn__bk_kv_layouts(attn__sb *sb, const attn_backend_desc *d)
{
    bool has = ATTN_STRUCT_HAS(attn_backend_desc, d, kv_cache_layouts_fn);
    uint32_t m = has ? d->kv_cache_layouts : 0;
    bool first = true;
    for (int l = 0; l < ATTN_KVL_COUNT; l++) {
        if ((m >> l) & 1u) {
            attn__sb_printf(sb, "%s%s", first ? "" : ", ",
                            attn_kv_cache_layout_name((attn_kv_cache_layout)l));
            first = false;
        }
    }
    if (first) attn__sb_puts(sb, "any");
    if (has && d->kv_cache_layouts_fn) attn__sb_puts(sb, " *");
}

char *attn__bk_text(attn__bk_fmt f, const attn_backend_desc *d)
{
    attn__sb sb;
    attn__sb_init(&sb);
    f(&sb, d);
    char *t = attn__sb_take(&sb);
    return t ? t : strdup("");
}

const char *attn__bk_fact_text(attn_fact f)
{
    switch (f) {
    case ATTN_FACT_NO: return "no";
    case ATTN_FACT_YES: return "yes";
    case ATTN_FACT_REFINED: return "yes *";
    default: return NULL;
    }
}
