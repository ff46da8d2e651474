/* `attn backends`: every backend the registry knows, its capabilities (from
 * its descriptor), its locator, and whether it resolves on the machine (and
 * why not). --json for programs; --markdown prints the support matrix kept
 * in docs/backends.md, which depends on nothing but the catalog (no machine,
 * no plugins) so the committed file can be checked for staleness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "cli.h"
#include "util/strbuf.h"

static void attn__bk_usage(FILE *f)
{
    fprintf(f, "usage: attn backends [--machine M] [--installed a,b] [--setting k=v]...\n"
               "                     [--json | --markdown]\n\n"
               "List every backend: capabilities, locator, and whether it resolves on the\n"
               "machine (default: ATTN_PLATFORM, else this machine). --markdown prints the\n"
               "support matrix of docs/backends.md (machine-independent).\n");
}

/* ---- capability text ---------------------------------------------------- */

static void attn__bk_dtypes(attn__sb *sb, const attn_backend_desc *d)
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

static void attn__bk_kv(attn__sb *sb, const attn_backend_desc *d)
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

static void attn__bk_blocks(attn__sb *sb, const attn_backend_desc *d)
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

static void attn__bk_heads(attn__sb *sb, const attn_backend_desc *d)
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

static void attn__bk_cc(attn__sb *sb, const attn_backend_desc *d)
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

static void attn__bk_types(attn__sb *sb, const attn_backend_desc *d)
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

static const char *attn__bk_flag(bool v, bool dynamic)
{
    if (dynamic) return v ? "yes *" : "no *";
    return v ? "yes" : "no";
}

static void attn__bk_needs(attn__sb *sb, const attn_backend_desc *d)
{
    bool first = true;
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++) {
        if ((d->import_requires >> c) & 1u) {
            attn__sb_printf(sb, "%s%s", first ? "" : ", ", attn_component_name((attn_component)c));
            first = false;
        }
    }
    if (first) attn__sb_puts(sb, "-");
}

/* One capability field as text (caller frees). */
typedef void (*attn__bk_fmt)(attn__sb *, const attn_backend_desc *);
static char *attn__bk_text(attn__bk_fmt f, const attn_backend_desc *d)
{
    attn__sb sb;
    attn__sb_init(&sb);
    f(&sb, d);
    char *t = attn__sb_take(&sb);
    return t ? t : strdup("");
}

/* ---- per-backend facts on a machine ------------------------------------- */

typedef struct attn__bk_row {
    const char *name;
    const char *locator; /* NULL when not registered */
    char locator_error[512];
    attn_status resolve_status;
    char resolve_error[1024];
    const attn_backend *backend;
    const attn_backend_desc *desc; /* resolved, else the catalog's own */
    bool in_catalog;
    const char *notes; /* the catalog's, or NULL */
    bool overridden;
    const char *owner;
} attn__bk_row;

static void attn__bk_row_fill(const attn_platform *p, const char *name, attn__bk_row *r)
{
    memset(r, 0, sizeof *r);
    r->name = name;
    r->in_catalog = attn_backend_catalog_contains(name);
    r->notes = attn_backend_catalog_notes(name);
    if (attn_registry_get_locator(name, &r->locator) != ATTN_OK) {
        r->locator = NULL;
        snprintf(r->locator_error, sizeof r->locator_error, "%s", attn_last_error());
    }
    r->resolve_status = attn_backend_resolve(p, name, &r->backend);
    if (r->resolve_status != ATTN_OK)
        snprintf(r->resolve_error, sizeof r->resolve_error, "%s", attn_last_error());
    r->desc = r->backend ? r->backend->desc : NULL;
    if (!r->desc && r->in_catalog) {
        const attn_backend *b = attn_backend_catalog_builtin(name);
        r->desc = b ? b->desc : NULL;
    }
    r->overridden = attn_registry_is_overridden(name);
    r->owner = attn_plugins_owner(name);
}

static void attn__bk_caps_json(attn__jw *w, const attn_backend_desc *d, const attn_platform *p)
{
    char *t;
    attn__jw_obj_begin(w);
    attn__jw_key(w, "display_name");
    attn__jw_str(w, d->display_name ? d->display_name : d->name);
    attn__jw_key(w, "platforms");
    attn__jw_str(w, d->platforms);
#define ATTN__BK_FIELD(key, fn)                                                                    \
    do {                                                                                           \
        t = attn__bk_text(fn, d);                                                                  \
        attn__jw_key(w, key);                                                                      \
        attn__jw_str(w, t);                                                                        \
        free(t);                                                                                   \
    } while (0)
    ATTN__BK_FIELD("dtypes", attn__bk_dtypes);
    ATTN__BK_FIELD("kv_cache_dtypes", attn__bk_kv);
    ATTN__BK_FIELD("block_sizes", attn__bk_blocks);
    ATTN__BK_FIELD("head_sizes", attn__bk_heads);
    ATTN__BK_FIELD("compute_capability", attn__bk_cc);
    ATTN__BK_FIELD("attn_types", attn__bk_types);
    ATTN__BK_FIELD("needs", attn__bk_needs);
#undef ATTN__BK_FIELD
    attn__jw_key(w, "preferred_block_size");
    attn__jw_int(w, attn_backend_preferred_block_size(d, p, 16));
    attn__jw_key(w, "is_mla");
    attn__jw_bool(w, d->is_mla);
    attn__jw_key(w, "is_sparse");
    attn__jw_bool(w, d->is_sparse);
    attn__jw_key(w, "sink");
    attn__jw_str(w, attn__bk_flag(d->supports_sink, d->supports_sink_fn != NULL));
    attn__jw_key(w, "mm_prefix");
    attn__jw_bool(w, d->supports_mm_prefix);
    attn__jw_key(w, "per_head_quant_scales");
    attn__jw_str(w, attn__bk_flag(d->supports_per_head_quant_scales,
                                  d->supports_per_head_quant_scales_fn != NULL));
    attn__jw_key(w, "non_causal");
    attn__jw_bool(w, d->supports_non_causal);
    attn__jw_key(w, "batch_invariance");
    attn__jw_bool(w, d->supports_batch_invariance);
    attn__jw_key(w, "cudagraph");
    attn__jw_str(w, attn_cg_support_name(d->cg_support));
    attn__jw_key(w, "lse_for_decode");
    attn__jw_bool(w, d->can_return_lse_for_decode);
    attn__jw_key(w, "lse_base_on_e");
    attn__jw_bool(w, d->lse_base == ATTN_LSE_BASE_E);
    attn__jw_key(w, "pcp");
    attn__jw_bool(w, d->supports_pcp);
    attn__jw_key(w, "dcp");
    attn__jw_bool(w, d->supports_dcp);
    attn__jw_key(w, "required_layout");
    attn__jw_str(w, attn_layout_name(d->required_layout));
    attn__jw_key(w, "extra_check");
    attn__jw_bool(w, d->supports_combination != NULL);
    attn__jw_obj_end(w);
}

static int attn__bk_json(const attn_platform *p)
{
    attn__sb sb;
    attn__jw w;
    attn_cli_json_begin(&sb, &w);
    attn__jw_key(&w, "machine");
    attn__jw_str(&w, attn_platform_name(p));
    attn__jw_key(&w, "device");
    attn__jw_str(&w, attn_platform_kind_name(attn_platform_get_kind(p)));
    attn__jw_key(&w, "simulated");
    attn__jw_bool(&w, attn_platform_is_simulated(p));
    attn__jw_key(&w, "backends");
    attn__jw_arr_begin(&w);
    int n = attn_registry_count();
    for (int i = 0; i < n; i++) {
        attn__bk_row r;
        attn__bk_row_fill(p, attn_registry_name(i), &r);
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "name");
        attn__jw_str(&w, r.name);
        attn__jw_key(&w, "builtin_catalog");
        attn__jw_bool(&w, r.in_catalog);
        attn__jw_key(&w, "locator");
        attn__jw_str(&w, r.locator);
        attn__jw_key(&w, "registered");
        attn__jw_bool(&w, r.locator != NULL);
        attn__jw_key(&w, "overridden");
        attn__jw_bool(&w, r.overridden);
        attn__jw_key(&w, "plugin");
        attn__jw_str(&w, r.owner);
        attn__jw_key(&w, "resolves");
        attn__jw_bool(&w, r.resolve_status == ATTN_OK);
        attn__jw_key(&w, "error");
        if (r.resolve_status == ATTN_OK)
            attn__jw_null(&w);
        else if (r.resolve_status == ATTN_IMPORT_ERROR) {
            char buf[1100];
            snprintf(buf, sizeof buf, "ImportError: %s", r.resolve_error);
            attn__jw_str(&w, buf);
        } else
            attn__jw_str(&w, r.resolve_error);
        attn__jw_key(&w, "kernel");
        attn__jw_bool(&w, r.backend && r.backend->kernel);
        attn__jw_key(&w, "notes");
        attn__jw_str(&w, r.notes);
        attn__jw_key(&w, "capabilities");
        if (r.desc)
            attn__bk_caps_json(&w, r.desc, p);
        else
            attn__jw_null(&w);
        attn__jw_obj_end(&w);
    }
    attn__jw_arr_end(&w);
    char *plugins = NULL;
    if (attn_plugins_to_json(&plugins) == ATTN_OK && plugins) {
        attn__jw_key(&w, "plugins");
        attn__jw_raw(&w, plugins);
    }
    free(plugins);
    return attn_cli_json_end(&sb, &w, "backends");
}

static int attn__bk_text_out(const attn_platform *p)
{
    printf("machine: %s (%s%s)\n\n", attn_platform_name(p),
           attn_platform_kind_name(attn_platform_get_kind(p)),
           attn_platform_is_simulated(p) ? ", simulated" : "");
    int n = attn_registry_count();
    for (int i = 0; i < n; i++) {
        attn__bk_row r;
        attn__bk_row_fill(p, attn_registry_name(i), &r);
        const char *state = r.resolve_status == ATTN_OK ? "resolves" : "not resolvable";
        printf("%-24s %-15s %s", r.name, state, r.locator ? r.locator : "(not registered)");
        if (r.owner)
            printf("  [plugin %s]", r.owner);
        else if (r.overridden)
            printf("  [overridden]");
        if (r.resolve_status == ATTN_OK && r.backend && !r.backend->kernel)
            printf("  (descriptor only)");
        printf("\n");
        if (r.resolve_status == ATTN_IMPORT_ERROR)
            printf("    why: ImportError: %s\n", r.resolve_error);
        else if (r.resolve_status != ATTN_OK)
            printf("    why: %s\n", r.resolve_error);
        if (r.desc) {
            const attn_backend_desc *d = r.desc;
            char *dt = attn__bk_text(attn__bk_dtypes, d), *kv = attn__bk_text(attn__bk_kv, d),
                 *bl = attn__bk_text(attn__bk_blocks, d), *hd = attn__bk_text(attn__bk_heads, d),
                 *cc = attn__bk_text(attn__bk_cc, d), *ty = attn__bk_text(attn__bk_types, d);
            printf("    %s%s; dtypes %s; kv %s; blocks %s; heads %s; cc %s; types %s\n",
                   d->is_mla ? "MLA" : "standard", d->is_sparse ? " sparse" : "", dt, kv, bl, hd,
                   cc, ty);
            free(dt), free(kv), free(bl), free(hd), free(cc), free(ty);
        }
    }
    printf("\n* = depends on the machine (see the notes in docs/backends.md)\n");
    /* Plugins that failed or were filtered out are as important to see as the
     * ones that registered something. */
    int np = attn_plugins_count();
    if (np > 0) printf("\nplugins (ATTN_PLUGIN_PATH):\n");
    for (int i = 0; i < np; i++) {
        attn_plugin_report rep;
        if (attn_plugins_report(i, &rep) != ATTN_OK) continue;
        const char *state = rep.loaded                 ? "loaded"
                            : rep.skipped_by_allowlist ? "skipped (not in ATTN_PLUGINS)"
                                                       : "failed";
        printf("  %-20s %s  %s", rep.name, state, rep.path);
        if (rep.error) printf("\n    why: %s", rep.error);
        printf("\n");
    }
    return ATTN_EXIT_OK;
}

/* ---- the support matrix ----------------------------------------------------- */

static void attn__md_cell(attn__sb *sb, const char *text)
{
    attn__sb_puts(sb, " ");
    for (const char *c = text; *c; c++) {
        if (*c == '|')
            attn__sb_puts(sb, "\\|");
        else
            attn__sb_putc(sb, *c);
    }
    attn__sb_puts(sb, " |");
}

static void attn__md_cellf(attn__sb *sb, attn__bk_fmt f, const attn_backend_desc *d)
{
    char *t = attn__bk_text(f, d);
    attn__md_cell(sb, t);
    free(t);
}

static void attn__md_table(attn__sb *sb, bool mla)
{
    if (!mla)
        attn__sb_puts(sb,
                      "| backend | platforms | dtypes | KV-cache dtypes | block sizes | head "
                      "sizes | capability | sink | mm prefix | per-head scales | non-causal | "
                      "batch-inv. | types | CUDA graphs | LSE | layout | needs |\n"
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    else
        attn__sb_puts(sb, "| backend | platforms | dtypes | KV-cache dtypes | block sizes | head "
                          "sizes | capability | sparse | batch-inv. | CUDA graphs | LSE | layout "
                          "| needs | extra check |\n"
                          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < attn_backend_catalog_count(); i++) {
        const char *cname = attn_backend_catalog_name(i);
        const attn_backend *b = attn_backend_catalog_builtin(cname);
        const attn_backend_desc *d = b ? b->desc : NULL;
        if (!d || d->is_mla != mla) continue;
        char name[96];
        if (d->display_name)
            snprintf(name, sizeof name, "`%s` (name %s)", cname, d->display_name);
        else
            snprintf(name, sizeof name, "`%s`", cname);
        attn__sb_puts(sb, "|");
        attn__md_cell(sb, name);
        attn__md_cell(sb, d->platforms ? d->platforms : "-");
        attn__md_cellf(sb, attn__bk_dtypes, d);
        attn__md_cellf(sb, attn__bk_kv, d);
        attn__md_cellf(sb, attn__bk_blocks, d);
        attn__md_cellf(sb, attn__bk_heads, d);
        attn__md_cellf(sb, attn__bk_cc, d);
        if (!mla) {
            attn__md_cell(sb, attn__bk_flag(d->supports_sink, d->supports_sink_fn != NULL));
            attn__md_cell(sb, d->supports_mm_prefix ? "yes" : "no");
            attn__md_cell(sb, attn__bk_flag(d->supports_per_head_quant_scales,
                                            d->supports_per_head_quant_scales_fn != NULL));
            attn__md_cell(sb, d->supports_non_causal ? "yes" : "no");
            attn__md_cell(sb, d->supports_batch_invariance ? "yes" : "no");
            attn__md_cellf(sb, attn__bk_types, d);
        } else {
            attn__md_cell(sb, d->is_sparse ? "yes" : "no");
            attn__md_cell(sb, d->supports_batch_invariance ? "yes" : "no");
        }
        attn__md_cell(sb, attn_cg_support_name(d->cg_support));
        attn__md_cell(sb, d->can_return_lse_for_decode ? "yes" : "no");
        attn__md_cell(sb, d->required_layout ? attn_layout_name(d->required_layout) : "-");
        attn__md_cellf(sb, attn__bk_needs, d);
        if (mla) attn__md_cell(sb, d->supports_combination ? "yes" : "-");
        attn__sb_putc(sb, '\n');
    }
}

static int attn__bk_markdown(void)
{
    attn__sb sb;
    attn__sb_init(&sb);
    attn__sb_puts(&sb,
                  "# libattn backend support matrix\n\n"
                  "<!-- Generated by `attn backends --markdown`; do not edit by hand.\n"
                  "     tests/cli_backends.sh fails when this file is stale. -->\n\n"
                  "Every backend libattn knows, in registry order, with what its descriptor\n"
                  "says it can run. Validation walks these fields in vLLM's order (head size,\n"
                  "dtype, KV-cache dtype, block size, multimodal prefix, MLA, sinks, sparse,\n"
                  "per-head quant scales, capability, attention type, non-causal, batch\n"
                  "invariance, extra check) and keeps every failed check as a reason.\n\n"
                  "Legend: `*` marks a rule that depends on the machine (notes below). Block\n"
                  "sizes are divisibility rules: any multiple of a listed kernel size is\n"
                  "accepted. Types: D decoder, E encoder, EO encoder-only, ED encoder-decoder\n"
                  "(cross attention). \"needs\" lists the installed components without which\n"
                  "the backend's code does not load (an ImportError reason).\n\n"
                  "## Standard attention\n\n");
    attn__md_table(&sb, false);
    attn__sb_puts(&sb, "\n## MLA (multi-head latent attention)\n\n");
    attn__md_table(&sb, true);
    attn__sb_puts(&sb,
                  "\n## Registry names, locators and notes\n\n"
                  "On a real machine a GPU backend's code is looked up at its locator; on "
                  "a simulated\nmachine its built-in descriptor is used when the machine "
                  "has the components it needs.\n\n"
                  "| # | name | default locator | built in | notes |\n|---|---|---|---|---|\n");
    for (int i = 0; i < attn_backend_catalog_count(); i++) {
        const char *cname = attn_backend_catalog_name(i);
        const attn_backend *b = attn_backend_catalog_builtin(cname);
        char num[16], name[80];
        snprintf(num, sizeof num, "%d", i);
        snprintf(name, sizeof name, "`%s`", cname);
        attn__sb_puts(&sb, "|");
        attn__md_cell(&sb, num);
        attn__md_cell(&sb, name);
        const char *loc = attn_backend_catalog_default_locator(cname);
        attn__md_cell(&sb, loc ? loc : "(none: register first)");
        attn__md_cell(&sb, b ? (b->kernel ? "kernels" : "descriptor") : "no");
        const char *notes = attn_backend_catalog_notes(cname);
        attn__md_cell(&sb, notes ? notes : "");
        attn__sb_putc(&sb, '\n');
    }
    return attn_cli_print(&sb, "backends", false);
}

int attn_cmd_backends(int argc, char **argv)
{
    const char *machine = NULL, *installed = NULL;
    const char *settings[32];
    int num_settings = 0;
    bool json = false, markdown = false, bad = false;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (attn_cli_is_help(argv[i])) {
            attn__bk_usage(stdout);
            return ATTN_EXIT_OK;
        } else if (attn_cli_flag(argv, i, "--json")) {
            json = true;
        } else if (attn_cli_flag(argv, i, "--markdown")) {
            markdown = true;
        } else if (attn_cli_opt(argc, argv, &i, "--machine", &v, &bad)) {
            machine = v;
        } else if (attn_cli_opt(argc, argv, &i, "--installed", &v, &bad)) {
            installed = v;
        } else if (attn_cli_opt(argc, argv, &i, "--setting", &v, &bad)) {
            if (v && num_settings >= 32)
                return attn_cli_usage_error("backends", "too many --setting options");
            if (v) settings[num_settings++] = v;
        } else {
            return attn_cli_usage_error("backends", "unknown option '%s'", argv[i]);
        }
        if (bad) return ATTN_EXIT_USAGE;
    }
    if (json && markdown)
        return attn_cli_usage_error("backends", "--json and --markdown are exclusive");
    if (markdown) return attn__bk_markdown();

    attn_plugins_load(); /* idempotent; concurrent callers wait for the one load */
    const attn_platform *p = NULL;
    attn_platform *owned = NULL;
    attn_status st =
        (attn_status)attn_cli_machine(machine, installed, settings, num_settings, &p, &owned);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn backends: %s\n", attn_last_error());
        attn_platform_free(owned);
        return ATTN_EXIT_USAGE;
    }
    int rc = json ? attn__bk_json(p) : attn__bk_text_out(p);
    attn_platform_free(owned);
    return rc;
}
