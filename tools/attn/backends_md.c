/* `attn backends --markdown`: docs/backends.md, generated from the catalog's
 * descriptors and the selector's validation table (attn_backend_check_*),
 * so the matrix says exactly what the selector checks: the checks in their
 * order with vLLM's reasons, every backend's shapes and types, every yes/no
 * flag as its descriptor states it, and for each flag a hook narrows, the
 * answer on every catalog machine. Depends on nothing but the catalog and
 * the catalog machines (not this machine, not plugins). */
#include <stdio.h>
#include <stdlib.h>

#include "backends.h"
#include "cli.h"

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

/* The catalog's descriptor at i, or NULL (no built-in descriptor). */
static const attn_backend_desc *attn__md_desc(int i)
{
    const attn_backend *b = attn_backend_catalog_builtin(attn_backend_catalog_name(i));
    return b ? b->desc : NULL;
}

static void attn__md_name(attn__sb *sb, const char *cname, const attn_backend_desc *d)
{
    char name[96];
    if (d->display_name)
        snprintf(name, sizeof name, "`%s` (name %s)", cname, d->display_name);
    else
        snprintf(name, sizeof name, "`%s`", cname);
    attn__sb_puts(sb, "|");
    attn__md_cell(sb, name);
}

static void attn__md_checks(attn__sb *sb)
{
    attn__sb_puts(sb, "| # | check | asked when | reason |\n|---|---|---|---|\n");
    for (int i = 0; i < attn_backend_check_count(); i++) {
        attn__sb asks;
        attn__sb_init(&asks);
        for (int j = 0; attn_backend_check_asks(i, j); j++)
            attn__sb_printf(&asks, "%s`%s`", j ? " and " : "", attn_backend_check_asks(i, j));
        char num[16];
        snprintf(num, sizeof num, "%d", i + 1);
        attn__sb_puts(sb, "|");
        attn__md_cell(sb, num);
        attn__md_cell(sb, attn_backend_check_key(i));
        attn__md_cell(sb, asks.data ? asks.data : "always");
        attn__md_cell(sb, attn_backend_check_reason(i));
        attn__sb_putc(sb, '\n');
        attn__sb_free(&asks);
    }
}

static void attn__md_shapes(attn__sb *sb, bool mla)
{
    attn__sb_puts(sb,
                  "| backend | platforms | dtypes | KV-cache dtypes | block sizes | head sizes | "
                  "capability | types | CUDA graphs | LSE | layout | KV-cache layouts | needs |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < attn_backend_catalog_count(); i++) {
        const attn_backend_desc *d = attn__md_desc(i);
        if (!d || d->is_mla != mla) continue;
        attn__md_name(sb, attn_backend_catalog_name(i), d);
        attn__md_cell(sb, d->platforms ? d->platforms : "-");
        attn__md_cellf(sb, attn__bk_dtypes, d);
        attn__md_cellf(sb, attn__bk_kv, d);
        attn__md_cellf(sb, attn__bk_blocks, d);
        attn__md_cellf(sb, attn__bk_heads, d);
        attn__md_cellf(sb, attn__bk_cc, d);
        attn__md_cellf(sb, attn__bk_types, d);
        attn__md_cell(sb, attn_cg_support_name(d->cg_support));
        attn__md_cell(sb, d->can_return_lse_for_decode ? "yes" : "no");
        attn__md_cell(sb, d->required_layout ? attn_layout_name(d->required_layout) : "-");
        attn__md_cellf(sb, attn__bk_kv_layouts, d);
        attn__md_cellf(sb, attn__bk_needs, d);
        attn__sb_putc(sb, '\n');
    }
}

static void attn__md_flags(attn__sb *sb)
{
    attn__sb_puts(sb, "| backend | MLA | sparse |");
    int nflags = 0;
    for (int i = 0; i < attn_backend_check_count(); i++)
        if (attn_backend_check_is_flag(i)) {
            attn__sb_printf(sb, " %s |", attn_backend_check_key(i));
            nflags++;
        }
    attn__sb_puts(sb, " extra check |\n|---|---|---|");
    for (int i = 0; i <= nflags; i++)
        attn__sb_puts(sb, "---|");
    attn__sb_putc(sb, '\n');
    for (int i = 0; i < attn_backend_catalog_count(); i++) {
        const attn_backend_desc *d = attn__md_desc(i);
        if (!d) continue;
        attn__md_name(sb, attn_backend_catalog_name(i), d);
        attn__md_cell(sb, d->is_mla ? "yes" : "no");
        attn__md_cell(sb, d->is_sparse ? "yes" : "no");
        for (int k = 0; k < attn_backend_check_count(); k++)
            if (attn_backend_check_is_flag(k))
                attn__md_cell(sb, attn__bk_fact_text(attn_backend_check_static(d, k)));
        attn__md_cell(sb, d->supports_combination ? "yes" : "-");
        attn__sb_putc(sb, '\n');
    }
}

/* For every flag a hook narrows: its answer on each catalog machine. */
static void attn__md_per_machine(attn__sb *sb)
{
    int nm = attn_catalog_count();
    attn_platform **m = calloc((size_t)(nm > 0 ? nm : 1), sizeof *m);
    if (!m) {
        sb->oom = true;
        return;
    }
    attn__sb_puts(sb, "| backend | flag |");
    for (int j = 0; j < nm; j++) {
        if (attn_platform_open(attn_catalog_name(j), &m[j]) != ATTN_OK) m[j] = NULL;
        attn__sb_printf(sb, " %s |", attn_catalog_name(j));
    }
    attn__sb_puts(sb, "\n|---|---|");
    for (int j = 0; j < nm; j++)
        attn__sb_puts(sb, "---|");
    attn__sb_putc(sb, '\n');
    for (int i = 0; i < attn_backend_catalog_count(); i++) {
        const attn_backend_desc *d = attn__md_desc(i);
        for (int k = 0; d && k < attn_backend_check_count(); k++) {
            if (attn_backend_check_static(d, k) != ATTN_FACT_REFINED) continue;
            attn__sb_printf(sb, "| `%s` | %s |", attn_backend_catalog_name(i),
                            attn_backend_check_key(k));
            for (int j = 0; j < nm; j++)
                attn__md_cell(sb, !m[j]                                                ? "?"
                                  : attn_backend_check_on(d, m[j], k) == ATTN_FACT_YES ? "yes"
                                                                                       : "no");
            attn__sb_putc(sb, '\n');
        }
    }
    for (int j = 0; j < nm; j++)
        attn_platform_free(m[j]);
    free(m);
}

static void attn__md_registry(attn__sb *sb)
{
    attn__sb_puts(sb, "| # | name | default locator | built in | notes |\n|---|---|---|---|---|\n");
    for (int i = 0; i < attn_backend_catalog_count(); i++) {
        const char *cname = attn_backend_catalog_name(i);
        const attn_backend *b = attn_backend_catalog_builtin(cname);
        char num[16], name[80];
        snprintf(num, sizeof num, "%d", i);
        snprintf(name, sizeof name, "`%s`", cname);
        attn__sb_puts(sb, "|");
        attn__md_cell(sb, num);
        attn__md_cell(sb, name);
        const char *loc = attn_backend_catalog_default_locator(cname);
        attn__md_cell(sb, loc ? loc : "(none: register first)");
        attn__md_cell(sb, b ? (b->kernel ? "kernels" : "descriptor") : "no");
        const char *notes = attn_backend_catalog_notes(cname);
        attn__md_cell(sb, notes ? notes : "");
        attn__sb_putc(sb, '\n');
    }
}

int attn__bk_markdown(void)
{
    attn__sb sb;
    attn__sb_init(&sb);
    attn__sb_puts(&sb,
                  "# libattn backend support matrix\n\n"
                  "<!-- Generated by `attn backends --markdown` (`make docs`); do not edit by\n"
                  "     hand. tests/cli_backends.sh fails when this file is stale. -->\n\n"
                  "Every backend libattn knows, in registry order, with what its descriptor\n"
                  "says it can run. Selection validates a backend with the checks below, in\n"
                  "vLLM's order, and keeps every failed check as a reason; each yes/no check\n"
                  "reads one descriptor field (and the hook that narrows it on some machines),\n"
                  "so the flags printed here are the ones checked.\n\n"
                  "Legend: `*` marks a rule that depends on the machine (for the flags: the\n"
                  "per-machine table below; otherwise the notes). Block sizes are\n"
                  "divisibility rules: any multiple of a listed kernel size is accepted.\n"
                  "Types: D decoder, E encoder, EO encoder-only, ED encoder-decoder (cross\n"
                  "attention). \"needs\" lists what the backend's code imports: without it\n"
                  "the backend is an ImportError reason. \"KV-cache layouts\" are the memory\n"
                  "orders of [layers, blocks, heads, tokens, content] its kernels read\n"
                  "(vLLM's KVCacheLayout): one serves a whole worker, which ROCm's\n"
                  "turboquant/ultraquant runs check.\n\n"
                  "## Validation checks\n\n");
    attn__md_checks(&sb);
    attn__sb_puts(&sb, "\n## Standard attention\n\n");
    attn__md_shapes(&sb, false);
    attn__sb_puts(&sb, "\n## MLA (multi-head latent attention)\n\n");
    attn__md_shapes(&sb, true);
    attn__sb_puts(&sb, "\n## Flags\n\nEach yes/no check as the descriptor states it, whatever "
                       "the machine.\n\n");
    attn__md_flags(&sb);
    attn__sb_puts(&sb, "\n## Flags that depend on the machine\n\n"
                       "The `*` flags above answered on each catalog machine as shipped (its "
                       "installed\ncomponents and settings), for the default config with "
                       "the flag's inputs set:\nwhat `attn backends --machine M --json` "
                       "reports as `on_machine` and what the\nselector does.\n\n");
    attn__md_per_machine(&sb);
    attn__sb_puts(&sb, "\n## Registry names, locators and notes\n\n"
                       "On a real machine a GPU backend's code is looked up at its locator; on "
                       "a simulated\nmachine its built-in descriptor is used when the machine "
                       "has the components it needs.\n\n");
    attn__md_registry(&sb);
    return attn_cli_print(&sb, "backends", false);
}
