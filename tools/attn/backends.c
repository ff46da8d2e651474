/* `attn backends`: every backend the registry knows, its capabilities (from
 * its descriptor), its locator, and whether it resolves on the machine (and
 * why not). --json for programs: "capabilities" is the descriptor's
 * machine-independent statement ("yes *": narrowed on some machines),
 * "on_machine" every yes/no check answered for the machine exactly as the
 * selector answers it. --markdown prints docs/backends.md (backends_md.c),
 * which depends on nothing but the catalog and the catalog machines (not on
 * this machine or plugins) so the committed file can be checked for
 * staleness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends.h"
#include "cli.h"

static void attn__bk_usage(FILE *f)
{
    fprintf(f, "usage: attn backends [--machine M] [--installed a,b] [--setting k=v]...\n"
               "                     [--json | --markdown]\n\n"
               "List every backend: capabilities, locator, and whether it resolves on the\n"
               "machine (default: ATTN_PLATFORM, else this machine). --markdown prints the\n"
               "support matrix of docs/backends.md (machine-independent).\n");
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
    /* backed by code: the resolved object has kernels, or the module its
     * locator names exports an object with kernels (read without a driver:
     * a simulated machine resolves the catalog's descriptor instead) */
    bool kernel;
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
    bool code = false;
    r->kernel = (r->backend && r->backend->kernel) ||
                (attn_backend_has_kernel(name, &code) == ATTN_OK && code);
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
    ATTN__BK_FIELD("kv_cache_layouts", attn__bk_kv_layouts);
#undef ATTN__BK_FIELD
    attn__jw_key(w, "preferred_block_size");
    attn__jw_int(w, attn_backend_preferred_block_size(d, p, 16));
    attn__jw_key(w, "is_mla");
    attn__jw_bool(w, d->is_mla);
    attn__jw_key(w, "is_sparse");
    attn__jw_bool(w, d->is_sparse);
    /* Every yes/no check of the selector, as the descriptor states it. */
    for (int i = 0; i < attn_backend_check_count(); i++) {
        if (!attn_backend_check_is_flag(i)) continue;
        attn__jw_key(w, attn_backend_check_key(i));
        attn__jw_str(w, attn__bk_fact_text(attn_backend_check_static(d, i)));
    }
    attn__jw_key(w, "cudagraph");
    attn__jw_str(w, attn_cg_support_name(d->cg_support));
    attn__jw_key(w, "lse_for_decode");
    attn__jw_bool(w, d->can_return_lse_for_decode);
    attn__jw_key(w, "lse_base_on_e");
    attn__jw_bool(w, d->lse_base == ATTN_LSE_BASE_E);
    attn__jw_key(w, "required_layout");
    attn__jw_str(w, attn_layout_name(d->required_layout));
    attn__jw_key(w, "extra_check");
    attn__jw_bool(w, d->supports_combination != NULL);
    attn__jw_obj_end(w);
}

/* The same flags answered for this machine, as the selector answers them. */
static void attn__bk_on_machine_json(attn__jw *w, const attn_backend_desc *d,
                                     const attn_platform *p)
{
    attn__jw_obj_begin(w);
    for (int i = 0; i < attn_backend_check_count(); i++) {
        if (!attn_backend_check_is_flag(i)) continue;
        attn__jw_key(w, attn_backend_check_key(i));
        attn__jw_bool(w, attn_backend_check_on(d, p, i) == ATTN_FACT_YES);
    }
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
        attn__jw_bool(&w, r.kernel);
        attn__jw_key(&w, "notes");
        attn__jw_str(&w, r.notes);
        attn__jw_key(&w, "capabilities");
        if (r.desc)
            attn__bk_caps_json(&w, r.desc, p);
        else
            attn__jw_null(&w);
        attn__jw_key(&w, "on_machine");
        if (r.desc)
            attn__bk_on_machine_json(&w, r.desc, p);
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
        if (r.resolve_status == ATTN_OK && !r.kernel) printf("  (descriptor only)");
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
            printf("    accepts here:");
            for (int k = 0, shown = 0; k < attn_backend_check_count(); k++)
                if (attn_backend_check_on(d, p, k) == ATTN_FACT_YES)
                    printf("%s %s", shown++ ? "," : "", attn_backend_check_key(k));
            printf("\n");
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
