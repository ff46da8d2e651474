/* `attn simulate [SCENARIO] [--steps N] [--json] [--html FILE]`: machines
 * side by side through startup and serving, in stages (sim/scenario). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "cli.h"
#include "serve_dcp.h"
#include "scenario/scenario.h"
#include "scenario/view.h"
#include "util/outfile.h"

static int usage(FILE *f)
{
    fprintf(f,
            "usage: attn simulate [SCENARIO] [--steps N] [--json] [--html FILE] [--verify]\n\n"
            "Runs machines side by side: each platform answers what it is, each machine selects\n"
            "its attention backends once at startup, then serves synthetic traffic, building\n"
            "fresh metadata every step; events (e.g. a restart with an explicit backend) happen\n"
            "on the shared step clock. Printed in stages:\n"
            "  1 machines, nothing decided   2 each platform's answer   3 each selection\n"
            "  4 serving (metadata per step; attention math emulated on the CPU kernels)\n"
            "  5 events, then a closing table.\n\n"
            "SCENARIO   a name from data/scenarios/ or a path to a scenario JSON file\n"
            "           (default: 'default', the H100 / A100 / MI300X story;\n"
            "           schema: data/scenarios/README.md)\n"
            "--steps N  run N steps instead of the scenario's\n"
            "--json     print the whole run as one JSON document instead of the report\n"
            "--html F   also write the run as one self-contained HTML page to F (written\n"
            "           whole on success, an existing F is left as it was on failure;\n"
            "           '-': the page on stdout instead of the report)\n"
            "--verify   also run the REFERENCE oracle on every attention step and show the\n"
            "           largest difference (slower)\n"
            "--dcp N    instead: a decode-context-parallel deployment over N ranks (backend\n"
            "           LSE flags, which rank holds which KV positions, KV bytes per rank);\n"
            "           with --machine M, --model M, --context L (default 65536),\n"
            "           --dcp-interleave I (default 1)\n\n"
            "exit status: 0 the run completed (machines failing to start are part of the\n"
            "run), 2 usage error or invalid scenario, 1 anything else\n");
    return f == stdout ? ATTN_EXIT_OK : ATTN_EXIT_USAGE;
}

typedef struct simulate_opts {
    const char *name, *html, *machine, *model;
    long steps, dcp, dcp_interleave, context;
    bool json, verify;
} simulate_opts;

/* -1 to go on, or the exit code to stop with. */
static int parse_opts(int argc, char **argv, simulate_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dcp_interleave = 1;
    o->context = 65536;
    bool bad = false;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (attn_cli_is_help(argv[i])) return usage(stdout);
        if (attn_cli_flag(argv, i, "--json")) {
            o->json = true;
        } else if (attn_cli_flag(argv, i, "--verify")) {
            o->verify = true;
        } else if (attn_cli_opt(argc, argv, &i, "--steps", &v, &bad)) {
            if (bad || !attn_cli_int("simulate", "--steps", v, 1, 100000, &o->steps))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--dcp", &v, &bad)) {
            if (bad || !attn_cli_int("simulate", "--dcp", v, 1, 1024, &o->dcp))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--dcp-interleave", &v, &bad)) {
            if (bad ||
                !attn_cli_int("simulate", "--dcp-interleave", v, 1, 1 << 16, &o->dcp_interleave))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--context", &v, &bad)) {
            if (bad || !attn_cli_int("simulate", "--context", v, 1, 1 << 24, &o->context))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--machine", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            o->machine = v;
        } else if (attn_cli_opt(argc, argv, &i, "--model", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            o->model = v;
        } else if (attn_cli_opt(argc, argv, &i, "--html", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            o->html = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return attn_cli_usage_error("simulate", "unknown option '%s'", argv[i]);
        } else if (o->name) {
            return attn_cli_usage_error("simulate", "one scenario at a time ('%s', '%s')", o->name,
                                        argv[i]);
        } else {
            o->name = argv[i];
        }
    }
    return -1;
}

/* The document as text or JSON on stdout (unless the page goes there), and
 * as HTML into hf, which is published only when everything succeeded. */
static int write_outputs(const simulate_opts *o, const char *doc, attn__outfile *hf)
{
    bool page_on_stdout = hf->is_stdout;
    if (o->json) {
        printf("%s\n", doc);
    } else if (!page_on_stdout && attn__scenario_print_text(doc, stdout) != ATTN_OK) {
        fprintf(stderr, "attn simulate: %s\n", attn_last_error());
        attn__outfile_abort(hf);
        return ATTN_EXIT_ERROR;
    }
    if (!o->html) return ATTN_EXIT_OK;
    if (attn__scenario_write_html(doc, hf->f) != ATTN_OK) {
        fprintf(stderr, "attn simulate: %s\n", attn_last_error());
        attn__outfile_abort(hf);
        return ATTN_EXIT_ERROR;
    }
    /* a report that did not reach stdout fails the run: the page is not published */
    if (!page_on_stdout && (fflush(stdout) != 0 || ferror(stdout))) {
        attn__outfile_abort(hf);
        return ATTN_EXIT_ERROR; /* main names the write error */
    }
    if (attn__outfile_commit(hf) != ATTN_OK) {
        fprintf(stderr, "attn simulate: %s\n", attn_last_error());
        return ATTN_EXIT_ERROR;
    }
    if (!o->json && !page_on_stdout) printf("\nHTML report written to %s\n", o->html);
    return ATTN_EXIT_OK;
}

/* Loads and runs the scenario: the document, or NULL with *rc set. */
static char *run_scenario(const simulate_opts *o, int *rc)
{
    attn__scenario *s = NULL;
    if (attn__scenario_load(o->name ? o->name : "default", &s) != ATTN_OK ||
        (o->steps && attn__scenario_set_steps(s, (int)o->steps) != ATTN_OK)) {
        fprintf(stderr, "attn simulate: %s\n", attn_last_error());
        attn__scenario_free(s);
        *rc = ATTN_EXIT_USAGE;
        return NULL;
    }
    if (o->verify) s->verify = true;
    char *doc = NULL;
    attn_status st = attn__scenario_run(s, &doc);
    attn__scenario_free(s);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn simulate: %s\n", attn_last_error());
        *rc = ATTN_EXIT_ERROR;
        return NULL;
    }
    return doc;
}

int attn_cmd_simulate(int argc, char **argv)
{
    simulate_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0) return rc;
    if (o.dcp > 0) {
        if (o.name || o.html || o.verify || o.steps)
            return attn_cli_usage_error("simulate", "--dcp takes no scenario, --steps, --html or "
                                                    "--verify");
        return attn__simulate_dcp(o.machine, o.model, o.dcp, o.dcp_interleave, o.context, o.json);
    }
    if (o.machine || o.model)
        return attn_cli_usage_error("simulate", "--machine and --model go with --dcp");
    if (o.html && o.json && strcmp(o.html, "-") == 0)
        return attn_cli_usage_error("simulate", "--html - and --json both want stdout");
    /* opened before the run, so a bad path fails at once; a temporary until the run succeeds */
    attn__outfile hf = {0};
    if (o.html && attn__outfile_open(&hf, o.html, ATTN__OUT_ALLOW_STDOUT) != ATTN_OK) {
        fprintf(stderr, "attn simulate: %s\n", attn_last_error());
        return ATTN_EXIT_ERROR;
    }
    char *doc = run_scenario(&o, &rc);
    if (!doc) {
        attn__outfile_abort(&hf);
        return rc;
    }
    rc = write_outputs(&o, doc, &hf);
    free(doc);
    return rc;
}
