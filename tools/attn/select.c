/* `attn select`: choose the attention backend for one configuration.
 *
 * Exit codes: 0 a backend was chosen, 3 the selection failed (the message
 * is vLLM's; also a named platform that is absent, with its reason), 2
 * usage error (bad option, unknown machine, invalid kv-cache dtype — the
 * layer's is vLLM's parse-time assertion text, the run's its CacheConfig's
 * validation text; with --json it is a JSON error of kind invalid-config).
 * Output: the chosen
 * name (default), a readable table (--explain) or one JSON object (--json).
 * ATTN_BACKEND gives the default --backend. `--model NAME|config.json`
 * hands over to the model command's implementation when it is built in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/attn.h"
#include "cli.h"
#include "util/strbuf.h"

int attn_cli_select_model(const char *model, int argc, char **argv);
#pragma weak attn_cli_select_model

static void attn__select_usage(FILE *f)
{
    fprintf(f, "usage: attn select [options]\n\n"
               "Choose the attention backend for one layer configuration.\n\n"
               "machine:\n"
               "  --machine M            catalog name (h100, a100, mi300x...), cuda:X.Y,\n"
               "                         rocm:gfxNNN, xpu, cpu or a JSON spec (default:\n"
               "                         ATTN_PLATFORM, else this machine)\n"
               "  --installed a,b        installed components (fa2 fa3 fa4 flashinfer\n"
               "                         flashinfer_cubin flashmla tokenspeed_mla aiter)\n"
               "  --setting k=v          machine setting (rocm_use_aiter, rocm_use_aiter_mha,\n"
               "                         rocm_use_aiter_mla, batch_invariant); repeatable\n"
               "request:\n"
               "  --backend NAME         explicit backend, or auto (default: ATTN_BACKEND)\n"
               "  --backend-for KIND=NAME  backend for layers of one KV kind (full_attention,\n"
               "                         sliding_window, mla_attention, sliding_window_mla,\n"
               "                         encoder_only_attention, cross_attention); wins\n"
               "                         over --backend for that kind; repeatable\n"
               "  --model NAME|FILE      select for every layer group of a model\n"
               "  --kv-cache-dtype-skip-layers LIST\n"
               "                         with --model: layers (indices, sliding_window)\n"
               "                         that keep the model's dtype; the others take\n"
               "                         --kv-cache-dtype, the run's for every group\n"
               "layer configuration:\n");
    for (int i = 0; i < attn_selector_config_num_fields(); i++) {
        const attn_config_field *fd = attn_selector_config_field(i);
        char opt[64];
        snprintf(opt, sizeof opt, "%s%s%s", fd->cli_flag, fd->cli_arg ? " " : "",
                 fd->cli_arg ? fd->cli_arg : "");
        if (strlen(opt) > 22)
            fprintf(f, "  %s\n  %-22s %s\n", opt, "", fd->doc);
        else
            fprintf(f, "  %-22s %s\n", opt, fd->doc);
    }
    fprintf(f, "output:\n"
               "  --explain              every candidate with its reasons\n"
               "  --json                 one JSON object\n\n"
               "exit status: 0 chosen, 3 selection failed, 2 usage error\n");
}

/* An invalid KV-cache dtype, in vLLM's words, kept for the caller to report
 * once it knows whether --json was asked for: the layer's is the selector's
 * assertion, the run's is CacheConfig's validation error. */
typedef struct attn__kv_errors {
    char layer[1024];
    char run[1024];
} attn__kv_errors;

/* argv[*i] as one of the config table's options: 0 when it is none of
 * them, -1 when it set its field (or *bad), else the exit code. */
static int attn__select_field(int argc, char **argv, int *i, attn_selector_config *cfg, bool *bad,
                              attn__kv_errors *kv)
{
    const char *cmd = "select";
    for (int k = 0; k < attn_selector_config_num_fields(); k++) {
        const attn_config_field *f = attn_selector_config_field(k);
        const char *v = NULL;
        if (!f->cli_arg) {
            if (!attn_cli_flag(argv, *i, f->cli_flag)) continue;
            attn_selector_config_set(cfg, f->name, "true");
            return -1;
        }
        if (!attn_cli_opt(argc, argv, i, f->cli_flag, &v, bad)) continue;
        if (!v) return -1;
        long n = 0;
        bool is_int = f->type == ATTN_FIELD_INT || f->type == ATTN_FIELD_OPT_INT;
        if (is_int && !attn_cli_int(cmd, f->cli_flag, v, f->cli_min, f->cli_max, &n))
            return ATTN_EXIT_USAGE;
        if (attn_selector_config_set(cfg, f->name, v) == ATTN_OK) return -1;
        char *keep = f->type == ATTN_FIELD_KV_DTYPE       ? kv->layer
                     : f->type == ATTN_FIELD_RUN_KV_DTYPE ? kv->run
                                                          : NULL;
        if (keep) {
            if (!keep[0]) snprintf(keep, sizeof kv->layer, "%s", attn_last_error());
            return -1;
        }
        return attn_cli_usage_error(cmd, "%s: %s", f->cli_flag, attn_last_error());
    }
    return 0;
}

typedef struct attn__select_opts {
    const char *machine, *installed, *backend, *model;
    const char *settings[32];
    int num_settings;
    char per_kind_names[ATTN_KIND_COUNT][64];
    const char *per_kind[ATTN_KIND_COUNT];
    attn_selector_config cfg;
    bool explain, json;
    attn__kv_errors kv_error;
    const char *kv_skip; /* --kv-cache-dtype-skip-layers (with --model) */
} attn__select_opts;

static int attn__select_parse(int argc, char **argv, attn__select_opts *o)
{
    const char *cmd = "select";
    memset(o, 0, sizeof *o);
    attn_selector_config_init(&o->cfg);
    o->cfg.head_size = 128;
    o->backend = getenv("ATTN_BACKEND");
    if (o->backend && !*o->backend) o->backend = NULL;
    bool bad = false;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int rc = 0;
        if (attn_cli_is_help(argv[i])) {
            attn__select_usage(stdout);
            return ATTN_EXIT_OK;
        } else if (attn_cli_flag(argv, i, "--explain")) {
            o->explain = true;
        } else if (attn_cli_flag(argv, i, "--json")) {
            o->json = true;
        } else if ((rc = attn__select_field(argc, argv, &i, &o->cfg, &bad, &o->kv_error)) != 0) {
            if (rc > 0) return rc;
        } else if (attn_cli_opt(argc, argv, &i, "--machine", &v, &bad)) {
            o->machine = v;
        } else if (attn_cli_opt(argc, argv, &i, "--installed", &v, &bad)) {
            o->installed = v;
        } else if (attn_cli_opt(argc, argv, &i, "--setting", &v, &bad)) {
            if (v && o->num_settings >= 32)
                return attn_cli_usage_error(cmd, "too many --setting options");
            if (v) o->settings[o->num_settings++] = v;
        } else if (attn_cli_opt(argc, argv, &i, "--backend", &v, &bad)) {
            o->backend = v;
        } else if (attn_cli_opt(argc, argv, &i, "--backend-for", &v, &bad)) {
            if (v) {
                const char *eq = strchr(v, '=');
                char kind[64];
                attn_kv_kind k;
                if (!eq || eq == v || !eq[1] || (size_t)(eq - v) >= sizeof kind ||
                    strlen(eq + 1) >= sizeof o->per_kind_names[0])
                    return attn_cli_usage_error(cmd, "--backend-for: expected KIND=NAME, got '%s'",
                                                v);
                memcpy(kind, v, (size_t)(eq - v));
                kind[eq - v] = '\0';
                if (attn_kv_kind_parse(kind, &k) != ATTN_OK)
                    return attn_cli_usage_error(cmd, "--backend-for: %s", attn_last_error());
                snprintf(o->per_kind_names[k], sizeof o->per_kind_names[k], "%s", eq + 1);
                o->per_kind[k] = o->per_kind_names[k];
            }
        } else if (attn_cli_opt(argc, argv, &i, "--model", &v, &bad)) {
            o->model = v;
        } else if (attn_cli_opt(argc, argv, &i, "--kv-cache-dtype-skip-layers", &v, &bad)) {
            o->kv_skip = v; /* the model command reads it */
        } else {
            return attn_cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        }
        if (bad) return ATTN_EXIT_USAGE;
    }
    return -1;
}

/* A failure before there is a selection, with --json as the selection's
 * JSON writes one: {"machine", "selected": null, "error": {...}}. */
static int attn__select_early_error(const attn__select_opts *o, const char *kind, attn_status st,
                                    const char *message, int rc)
{
    if (!o->json) {
        fprintf(stderr, "attn select: %s\n", message);
        return rc;
    }
    const char *env = getenv("ATTN_PLATFORM");
    attn__sb sb;
    attn__jw w;
    attn_cli_json_begin(&sb, &w);
    attn__jw_key(&w, "machine");
    attn__jw_str(&w, o->machine ? o->machine : env && *env ? env : "local");
    attn__jw_key(&w, "selected");
    attn__jw_null(&w);
    attn__jw_key(&w, "error");
    attn__jw_obj_begin(&w);
    attn__jw_key(&w, "kind");
    attn__jw_str(&w, kind);
    attn__jw_key(&w, "status");
    attn__jw_str(&w, attn_status_name(st));
    attn__jw_key(&w, "message");
    attn__jw_str(&w, message);
    attn__jw_obj_end(&w);
    int prc = attn_cli_json_end(&sb, &w, "select");
    return prc == ATTN_EXIT_OK ? rc : prc;
}

/* A platform that is named but absent (no OpenCL ICD, no CUDA driver) fails
 * the selection with its reason (exit 3); a bad machine name is a usage
 * error. */
static int attn__select_platform(const attn__select_opts *o, const attn_platform **p,
                                 attn_platform **owned)
{
    attn_status st =
        attn_cli_machine(o->machine, o->installed, o->settings, o->num_settings, p, owned);
    if (st == ATTN_OK) return -1;
    if (st == ATTN_PLATFORM_UNAVAILABLE)
        return attn__select_early_error(o, "platform-unavailable", st, attn_last_error(),
                                        ATTN_EXIT_FAILED);
    fprintf(stderr, "attn select: %s\n", attn_last_error());
    return ATTN_EXIT_USAGE;
}

int attn_cmd_select(int argc, char **argv)
{
    attn__select_opts o;
    int rc = attn__select_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    /* vLLM builds the run's CacheConfig first, then reads the requested
     * name (AttentionConfig), and asserts the layer's cache dtype last: an
     * invalid run dtype, then an unknown name, is reported first. */
    const char *req = o.backend;
    bool unknown_name = req && strcasecmp(req, "auto") && !attn_registry_contains(req);
    const char *kv_error = o.kv_error.run[0]                      ? o.kv_error.run
                           : o.kv_error.layer[0] && !unknown_name ? o.kv_error.layer
                                                                  : NULL;
    if (kv_error) {
        if (!o.json) return attn_cli_usage_error("select", "%s", kv_error);
        return attn__select_early_error(&o, "invalid-config", ATTN_INVALID_ARGUMENT, kv_error,
                                        ATTN_EXIT_USAGE);
    }
    if (o.kv_skip && !o.model)
        return attn_cli_usage_error("select", "--kv-cache-dtype-skip-layers needs --model");
    if (o.model) {
        if (!attn_cli_select_model) {
            fprintf(stderr, "attn select: --model is not built into this binary\n");
            return ATTN_EXIT_ERROR;
        }
        return attn_cli_select_model(o.model, argc, argv);
    }
    const attn_platform *p = NULL;
    attn_platform *owned = NULL;
    rc = attn__select_platform(&o, &p, &owned);
    if (rc >= 0) return rc;

    const attn_selection *sel = NULL;
    const char *requested = attn_requested_for(&o.cfg, o.backend, o.per_kind);
    attn_status st = attn_select(p, requested, &o.cfg, &sel);
    if (!sel) {
        fprintf(stderr, "attn select: %s\n", attn_last_error());
        attn_platform_free(owned);
        return st == ATTN_INVALID_ARGUMENT ? ATTN_EXIT_USAGE : ATTN_EXIT_ERROR;
    }
    char *text = NULL;
    if (o.json) {
        if (attn_selection_to_json(sel, &text) == ATTN_OK) fputs(text, stdout);
    } else if (o.explain) {
        if (attn_selection_explain(sel, &text) == ATTN_OK) fputs(text, stdout);
    } else if (st == ATTN_OK) {
        printf("%s\n", attn_selection_backend(sel));
    }
    free(text);
    if (st != ATTN_OK && !o.json && !o.explain)
        fprintf(stderr, "attn select: %s\n", attn_selection_message(sel));
    if (st != ATTN_OK && attn_selection_error(sel) == ATTN_SELECT_INVALID_CONFIG) {
        attn_platform_free(owned);
        return ATTN_EXIT_USAGE;
    }
    attn_platform_free(owned);
    return st == ATTN_OK ? ATTN_EXIT_OK : ATTN_EXIT_FAILED;
}
