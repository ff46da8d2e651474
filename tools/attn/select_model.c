/* `attn select --model NAME|config.json [select options]`: one selection per
 * KV-cache group of the model (layers with equal specs share one, as the
 * selection cache makes them in vLLM), each explained. Called by select.c
 * (weak reference) with the select arguments; --model has been taken out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/attn.h"
#include "attn/engine.h"
#include "attn/model.h"
#include "cli.h"
#include "util/strbuf.h"
#include "harness/json_put.h"

int attn_cli_select_model(const char *model, int argc, char **argv);

static int fail_usage(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "attn select: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\nTry 'attn select --help'.\n");
    return ATTN_EXIT_USAGE;
}

typedef struct opts {
    const char *machine;
    const char *installed;
    const char *settings[16];
    int num_settings;
    const char *backend;
    const char *per_kind[ATTN_KIND_COUNT];
    long block_size;
    attn_kv_dtype kv;
    const char *kv_skip; /* --kv-cache-dtype-skip-layers */
    bool has_dtype;
    attn_dtype dtype;
    bool non_causal, batch_invariant;
    bool explain, json;
} opts;

static int parse_opts(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->kv = ATTN_KV_AUTO;
    bool bad = false;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (attn_cli_flag(argv, i, "--explain"))
            o->explain = true;
        else if (attn_cli_flag(argv, i, "--json"))
            o->json = true;
        else if (attn_cli_opt(argc, argv, &i, "--model", &v, &bad))
            continue; /* the caller has it */
        else if (attn_cli_opt(argc, argv, &i, "--machine", &v, &bad))
            o->machine = v;
        else if (attn_cli_opt(argc, argv, &i, "--installed", &v, &bad))
            o->installed = v;
        else if (attn_cli_opt(argc, argv, &i, "--setting", &v, &bad)) {
            if (v && o->num_settings >= 16)
                return fail_usage("too many --setting options (at most 16)%s%s", "", "");
            if (v) o->settings[o->num_settings++] = v;
        } else if (attn_cli_opt(argc, argv, &i, "--backend", &v, &bad))
            o->backend = v;
        else if (attn_cli_opt(argc, argv, &i, "--backend-for", &v, &bad)) {
            if (!v) break;
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                return fail_usage("--backend-for: expected KIND=NAME, got '%s'%s", v, "");
            char kind[64];
            snprintf(kind, sizeof kind, "%.*s", (int)(eq - v), v);
            attn_kv_kind k;
            if (attn_kv_kind_parse(kind, &k) != ATTN_OK)
                return fail_usage("--backend-for: unknown kind '%s' (full_attention, "
                                  "sliding_window, mla_attention, sliding_window_mla, "
                                  "encoder_only_attention, cross_attention)%s",
                                  kind, "");
            o->per_kind[k] = eq + 1;
        } else if (attn_cli_opt(argc, argv, &i, "--block-size", &v, &bad)) {
            if (v && !attn_cli_int("select", "--block-size", v, 1, 1 << 20, &o->block_size))
                return ATTN_EXIT_USAGE;
        } else if (attn_cli_opt(argc, argv, &i, "--kv-cache-dtype", &v, &bad)) {
            if (v && attn_kv_dtype_parse(v, &o->kv) != ATTN_OK)
                return fail_usage("--kv-cache-dtype: %s%s", attn_last_error(), "");
        } else if (attn_cli_opt(argc, argv, &i, "--kv-cache-dtype-skip-layers", &v, &bad)) {
            o->kv_skip = v;
        } else if (attn_cli_opt(argc, argv, &i, "--dtype", &v, &bad)) {
            if (v && attn_dtype_parse(v, &o->dtype) != ATTN_OK)
                return fail_usage("--dtype: %s%s", attn_last_error(), "");
            o->has_dtype = v != NULL;
        } else if (attn_cli_flag(argv, i, "--non-causal"))
            o->non_causal = true;
        else if (attn_cli_flag(argv, i, "--batch-invariant"))
            o->batch_invariant = true;
        else
            return fail_usage("option '%s' does not apply with --model (the model's config "
                              "gives head size, heads, MLA, sinks, window and attention type)%s",
                              argv[i], "");
        if (bad) return ATTN_EXIT_USAGE;
    }
    if (bad) return ATTN_EXIT_USAGE;
    if (!o->backend) {
        const char *env = getenv("ATTN_BACKEND");
        if (env && *env) o->backend = env;
    }
    if (o->backend && !strcasecmp(o->backend, "auto")) o->backend = NULL;
    return -1;
}

static attn_status open_platform(const opts *o, const attn_platform **p, attn_platform **owned)
{
    return (attn_status)attn_cli_machine(o->machine, o->installed, o->settings, o->num_settings, p,
                                         owned);
}

/* Group g's selection: one JSON object into w and, without --json, its
 * text. Returns whether a backend was chosen. */
static bool select_group(const opts *o, const attn_platform *p, const attn_model *m, int g,
                         attn__jw *w)
{
    const attn_layer_spec *s = attn_model_group_spec(m, g);
    const int *l;
    int n = attn_model_group_layers(m, g, &l);
    char layers[128];
    attn_model_layers_text(l, n, layers, sizeof layers);
    attn_group_launch gl = {
        .backend = o->backend,
        .per_kind = o->per_kind,
        .kv_cache_dtype = o->kv,
        .block_size = (int)o->block_size,
        .dtype = o->has_dtype ? &o->dtype : NULL, /* serving dtype chosen at launch */
        .non_causal = o->non_causal,
        .batch_invariant =
            o->batch_invariant || attn_platform_setting(p, ATTN_SETTING_BATCH_INVARIANT),
        .kv_cache_dtype_skip_layers = o->kv_skip,
    };
    attn_group_choice ch;
    attn_status st = attn_engine_select_group(p, m, g, &gl, &ch);
    char why[512] = ""; /* a launch the engine cannot apply: no selection */
    if (!ch.selection) snprintf(why, sizeof why, "%s", attn_last_error());
    const attn_selector_config cfg = ch.config;
    const char *req = ch.requested;
    const attn_selection *sel = ch.selection;
    attn__jw_obj_begin(w);
    attn__put_int(w, "group", g);
    attn__put_str(w, "kind", attn_kv_kind_name(attn_kv_kind_of(&cfg)));
    attn__put_str(w, "layers", layers);
    attn__put_int(w, "num_layers", n);
    attn__put_int(w, "head_size", s->head_size);
    attn__jw_key(w, "requested");
    if (req)
        attn__jw_str(w, req);
    else
        attn__jw_null(w);
    attn__jw_key(w, "selection");
    char *sj = NULL;
    if (sel && attn_selection_to_json(sel, &sj) == ATTN_OK && sj)
        attn__jw_raw(w, sj);
    else
        attn__jw_null(w);
    free(sj);
    if (!sel) attn__put_str(w, "error", why);
    attn__jw_obj_end(w);
    if (o->json) return st == ATTN_OK;
    const char *chosen = sel ? attn_selection_backend(sel) : NULL;
    printf("\ngroup %d: %s (%s%s), %d layer%s (%s), head %d%s%s\n", g,
           attn_kv_kind_name(attn_kv_kind_of(&cfg)), attn_attn_type_name(s->attn_type),
           attn_layer_spec_has_kv_cache(s) ? "" : ", no KV cache", n, n == 1 ? "" : "s", layers,
           s->head_size, req ? ", requested " : "", req ? req : "");
    if (o->explain && sel) {
        char *text = NULL;
        if (attn_selection_explain(sel, &text) == ATTN_OK && text) printf("%s", text);
        free(text);
    } else if (chosen) {
        printf("  -> %s  (%s)\n", chosen, attn_selection_locator(sel));
    } else {
        printf("  error: %s\n",
               sel && attn_selection_message(sel) ? attn_selection_message(sel) : why);
    }
    return st == ATTN_OK;
}

int attn_cli_select_model(const char *model, int argc, char **argv)
{
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0) return rc;
    attn_model *m = NULL;
    if (attn_model_load(model, &m) != ATTN_OK) {
        fprintf(stderr, "attn select: %s\n", attn_last_error());
        return ATTN_EXIT_USAGE;
    }
    const attn_platform *p = NULL;
    attn_platform *owned = NULL;
    if (open_platform(&o, &p, &owned) != ATTN_OK) {
        fprintf(stderr, "attn select: %s\n", attn_last_error());
        attn_platform_free(owned);
        attn_model_free(m);
        return ATTN_EXIT_USAGE;
    }
    int failed = 0;
    attn__sb sb;
    attn__jw w;
    attn__sb_init(&sb);
    attn__jw_init(&w, &sb, true);
    attn__jw_obj_begin(&w);
    attn__put_str(&w, "model", attn_model_name(m));
    attn__put_str(&w, "platform", attn_platform_name(p));
    attn__put_str(&w, "device", attn_platform_device_name(p));
    attn__jw_key(&w, "groups");
    attn__jw_arr_begin(&w);
    if (!o.json) {
        int ma = 0, mi = 0;
        char cap[32] = "no compute capability";
        if (attn_platform_capability(p, &ma, &mi))
            snprintf(cap, sizeof cap, "capability %d.%d", ma, mi);
        printf("%s on %s (%s, %s): %d layer group%s, one selection each\n", attn_model_name(m),
               attn_platform_name(p), attn_platform_device_name(p), cap, attn_model_num_groups(m),
               attn_model_num_groups(m) == 1 ? "" : "s");
    }
    for (int g = 0; g < attn_model_num_groups(m); g++)
        failed += !select_group(&o, p, m, g, &w);
    attn__jw_arr_end(&w);
    attn__put_bool(&w, "ok", failed == 0);
    attn__jw_obj_end(&w);
    if (o.json) {
        char *text = attn__sb_take(&sb);
        printf("%s\n", text ? text : "null");
        free(text);
    }
    attn__sb_free(&sb);
    attn_platform_free(owned);
    attn_model_free(m);
    return failed ? ATTN_EXIT_FAILED : ATTN_EXIT_OK;
}
