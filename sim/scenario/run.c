/* The scenario runner: machines side by side, in stages.
 *
 * Contract: the run is data. Everything that happens (each platform's
 * answer, each KV group's selection with every rejected candidate and its
 * reasons, the per-step metadata of the first steps, each event and its
 * outcome, the closing table) is written into one JSON document; the text and
 * HTML views only render that document. A machine failing is an outcome of
 * the run, not an error of it. Machines step in lockstep on one clock: at
 * each step, the events of that step happen first, then every serving
 * machine runs one engine step. A machine whose (re)start failed has no
 * engine: it admits nothing and its step counter stands still. Each start
 * opens a fresh simulated platform (a launch's "installed" can change what
 * a machine has), and every platform and model stays alive until the run
 * ends, since selections are cached per platform. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/engine.h"
#include "attn/model.h"
#include "scenario/scenario.h"
#include "util/check.h"
#include "scenario/serve.h"
#include "util/json.h"
#include "util/strbuf.h"

#define MAX_STARTS (ATTN__SCN_MAX_MACHINES + ATTN__SCN_MAX_EVENTS)

typedef struct mstate {
    const attn__scn_machine *mc;
    int index;
    attn__scn_launch launch;
    const attn_platform *plat; /* current */
    attn__srv *srv;            /* NULL when not serving */
    char state[160];
    int steps_served, admitted, finished;
    int shown; /* detailed steps written */
    char head_sizes[64], backends[256];
    attn__sb detail_sb; /* stage 4 step details */
    attn__jw detail;
    attn__sb counters_sb; /* one entry per step served */
    attn__jw counters;
} mstate;

typedef struct run {
    const attn__scenario *s;
    mstate m[ATTN__SCN_MAX_MACHINES];
    attn_platform *platforms[MAX_STARTS];
    int num_platforms;
    attn_model *models[MAX_STARTS];
    int num_models;
    int snap_steps[ATTN__SCN_MAX_EVENTS][ATTN__SCN_MAX_MACHINES];
    int snap_admitted[ATTN__SCN_MAX_EVENTS][ATTN__SCN_MAX_MACHINES];
} run;

static void capability_text(const attn_platform *p, char *buf, size_t size)
{
    int ma = 0, mi = 0;
    bool has = attn_platform_capability(p, &ma, &mi);
    const char *gfx = attn_platform_gfx_arch(p);
    if (gfx && has)
        snprintf(buf, size, "%s (%d.%d)", gfx, ma, mi);
    else if (gfx)
        snprintf(buf, size, "%s", gfx);
    else if (has)
        snprintf(buf, size, "%d.%d", ma, mi);
    else
        snprintf(buf, size, "none");
}

static attn_status open_platform(run *r, const attn__scn_machine *mc, const attn__scn_launch *l,
                                 const attn_platform **out)
{
    attn_platform *p = NULL;
    attn_status st = mc->spec_json ? attn_platform_from_json(mc->spec_json, &p)
                                   : attn_platform_open(mc->spec_name, &p);
    if (st != ATTN_OK) return attn_wrap_error(st, "machine '%s' (%s)", mc->label, mc->spec_name);
    if (mc->installed_given && (st = attn_platform_set_installed(p, mc->installed)) != ATTN_OK)
        goto fail;
    for (int i = 0; i < mc->num_settings; i++)
        if ((st = attn_platform_set_setting(p, mc->settings[i])) != ATTN_OK) goto fail;
    if (l->installed_given && (st = attn_platform_set_installed(p, l->installed)) != ATTN_OK)
        goto fail;
    if (r->num_platforms >= MAX_STARTS) {
        st = attn_set_error(ATTN_OUT_OF_RANGE, "too many machine starts");
        goto fail;
    }
    r->platforms[r->num_platforms++] = p;
    *out = p;
    return ATTN_OK;
fail:
    attn_platform_free(p);
    return attn_wrap_error(st, "machine '%s'", mc->label);
}

static void write_platform(attn__jw *w, const attn__scn_machine *mc, const attn_platform *p)
{
    char cap[48];
    capability_text(p, cap, sizeof cap);
    attn__jw_obj_begin(w);
    attn__jw_key(w, "machine");
    attn__jw_str(w, mc->spec_name);
    attn__jw_key(w, "platform");
    attn__jw_str(w, attn_platform_kind_name(attn_platform_get_kind(p)));
    attn__jw_key(w, "device");
    attn__jw_str(w, attn_platform_device_name(p));
    attn__jw_key(w, "capability");
    attn__jw_str(w, cap);
    attn__jw_key(w, "simulated");
    attn__jw_bool(w, attn_platform_is_simulated(p));
    attn__jw_key(w, "installed");
    attn__jw_arr_begin(w);
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++)
        if (attn_platform_has_component(p, (attn_component)c))
            attn__jw_str(w, attn_component_name((attn_component)c));
    attn__jw_arr_end(w);
    attn__jw_key(w, "settings");
    attn__jw_obj_begin(w);
    for (int s = 0; s < ATTN_SETTING_COUNT; s++) {
        attn__jw_key(w, attn_setting_name((attn_setting)s));
        attn__jw_bool(w, attn_platform_setting(p, (attn_setting)s));
    }
    attn__jw_obj_end(w);
    attn__jw_obj_end(w);
}

static void write_launch(attn__jw *w, const attn__scn_launch *l)
{
    attn__jw_obj_begin(w);
    attn__jw_key(w, "model");
    attn__jw_str(w, l->model);
    attn__jw_key(w, "backend");
    if (l->backend[0])
        attn__jw_str(w, l->backend);
    else
        attn__jw_null(w);
    attn__jw_key(w, "backend_per_kind");
    attn__jw_obj_begin(w);
    for (int k = 0; k < ATTN_KIND_COUNT; k++)
        if (l->per_kind[k][0]) {
            attn__jw_key(w, attn_kv_kind_name((attn_kv_kind)k));
            attn__jw_str(w, l->per_kind[k]);
        }
    attn__jw_obj_end(w);
    attn__jw_key(w, "block_size");
    if (l->block_size)
        attn__jw_int(w, l->block_size);
    else
        attn__jw_null(w);
    attn__jw_key(w, "kv_cache_dtype");
    attn__jw_str(w, l->kv_cache_dtype[0] ? l->kv_cache_dtype : "auto");
    attn__jw_key(w, "installed");
    if (l->installed_given)
        attn__jw_str(w, l->installed);
    else
        attn__jw_null(w);
    attn__jw_obj_end(w);
}

static attn_kv_dtype launch_kv(const attn__scn_launch *l)
{
    attn_kv_dtype kv = ATTN_KV_AUTO;
    if (l->kv_cache_dtype[0] && attn_kv_dtype_parse(l->kv_cache_dtype, &kv) != ATTN_OK)
        kv = ATTN_KV_AUTO; /* the parser validated it */
    return kv;
}

/* One group's selection: spec, selector config, the platform's priority
 * list, the result with every candidate and its reasons. Returns whether a
 * backend was chosen; chosen receives its name or "requested X refused". */
static bool write_group_selection(attn__jw *w, const attn_platform *p, const attn_model *m, int g,
                                  const attn__scn_launch *l, char *chosen, size_t chosen_size)
{
    const attn_layer_spec *s = attn_model_group_spec(m, g);
    const int *layers;
    int n = attn_model_group_layers(m, g, &layers);
    char ltext[128], repr[512];
    attn_model_layers_text(layers, n, ltext, sizeof ltext);
    const char *pk[ATTN_KIND_COUNT];
    for (int k = 0; k < ATTN_KIND_COUNT; k++)
        pk[k] = l->per_kind[k][0] ? l->per_kind[k] : NULL;
    attn_group_launch gl = {
        .backend = l->backend[0] ? l->backend : NULL,
        .per_kind = pk,
        .kv_cache_dtype = launch_kv(l),
        .block_size = l->block_size,
        .batch_invariant = attn_platform_setting(p, ATTN_SETTING_BATCH_INVARIANT),
    };
    attn_group_choice ch;
    attn_status st = attn_engine_select_group(p, m, g, &gl, &ch);
    const attn_selector_config *cfg = &ch.config;
    const attn_selection *sel = ch.selection;
    const char *req = ch.requested;
    attn_selector_config_repr(cfg, repr, sizeof repr);

    attn__jw_obj_begin(w);
    attn__jw_key(w, "group");
    attn__jw_int(w, g);
    attn__jw_key(w, "kind");
    attn__jw_str(w, attn_kv_kind_name(attn_kv_kind_of(cfg)));
    attn__jw_key(w, "attn_type");
    attn__jw_str(w, attn_attn_type_name(s->attn_type));
    attn__jw_key(w, "layers");
    attn__jw_str(w, ltext);
    attn__jw_key(w, "num_layers");
    attn__jw_int(w, n);
    attn__jw_key(w, "num_heads");
    attn__jw_int(w, s->num_heads);
    attn__jw_key(w, "num_kv_heads");
    attn__jw_int(w, s->num_kv_heads);
    attn__jw_key(w, "head_size");
    attn__jw_int(w, s->head_size);
    attn__jw_key(w, "sliding_window");
    attn__jw_int(w, s->sliding_window);
    attn__jw_key(w, "logits_soft_cap");
    attn__jw_num(w, s->logits_soft_cap);
    attn__jw_key(w, "has_sink");
    attn__jw_bool(w, s->has_sink);
    attn__jw_key(w, "use_mla");
    attn__jw_bool(w, s->use_mla);
    attn__jw_key(w, "has_kv_cache");
    attn__jw_bool(w, attn_layer_spec_has_kv_cache(s));
    attn__jw_key(w, "selector_config");
    attn__jw_str(w, repr);
    const char *names[64];
    int np = attn_platform_priorities(p, cfg, names, 64);
    attn__jw_key(w, "priorities");
    attn__jw_arr_begin(w);
    for (int i = 0; i < np && i < 64; i++)
        attn__jw_str(w, names[i]);
    attn__jw_arr_end(w);
    attn__jw_key(w, "requested");
    if (req)
        attn__jw_str(w, req);
    else
        attn__jw_null(w);

    const char *backend = (st == ATTN_OK && sel) ? attn_selection_backend(sel) : NULL;
    attn__jw_key(w, "ok");
    attn__jw_bool(w, backend != NULL);
    attn__jw_key(w, "selected");
    if (backend)
        attn__jw_str(w, backend);
    else
        attn__jw_null(w);
    attn__jw_key(w, "locator");
    if (backend && attn_selection_locator(sel))
        attn__jw_str(w, attn_selection_locator(sel));
    else
        attn__jw_null(w);
    attn__jw_key(w, "error_kind");
    if (backend)
        attn__jw_null(w);
    else
        attn__jw_str(w, sel ? attn_select_error_name(attn_selection_error(sel))
                            : attn_status_name(st));
    attn__jw_key(w, "message");
    if (backend)
        attn__jw_null(w);
    else
        attn__jw_str(w, sel && attn_selection_message(sel) ? attn_selection_message(sel)
                                                           : attn_last_error());
    attn__jw_key(w, "warnings");
    attn__jw_arr_begin(w);
    for (int i = 0; sel && i < attn_selection_num_warnings(sel); i++)
        attn__jw_str(w, attn_selection_warning(sel, i));
    attn__jw_arr_end(w);
    attn__jw_key(w, "candidates");
    attn__jw_arr_begin(w);
    for (int i = 0; sel && i < attn_selection_num_candidates(sel); i++) {
        attn_candidate_info ci;
        if (attn_selection_candidate(sel, i, &ci) != ATTN_OK) continue;
        attn__jw_obj_begin(w);
        attn__jw_key(w, "name");
        attn__jw_str(w, ci.name);
        attn__jw_key(w, "priority");
        attn__jw_int(w, ci.priority);
        attn__jw_key(w, "valid");
        attn__jw_bool(w, ci.valid);
        attn__jw_key(w, "chosen");
        attn__jw_bool(w, backend && !strcmp(backend, ci.name));
        attn__jw_key(w, "reasons");
        attn__jw_arr_begin(w);
        for (int j = 0; j < ci.num_reasons; j++)
            attn__jw_str(w, attn_selection_reason(sel, i, j));
        attn__jw_arr_end(w);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
    attn__jw_obj_end(w);
    if (backend)
        snprintf(chosen, chosen_size, "%s", backend);
    else if (req)
        snprintf(chosen, chosen_size, "%s refused", req);
    else
        snprintf(chosen, chosen_size, "none");
    return backend != NULL;
}

/* "A/B" list without repeats, in first-seen order. */
static void join_unique(char *dst, size_t size, const char *item)
{
    const char *p = dst;
    size_t n = strlen(item);
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, item, n)) return;
        p += len + (e ? 1 : 0);
    }
    size_t o = strlen(dst);
    if (o < size) snprintf(dst + o, size - o, "%s%s", o ? "/" : "", item);
}

/* Starts (or restarts) machine ms with launch l, writing the startup record
 * (platform, model, groups, engine summary, outcome) into w. Returns true
 * when it serves. */
static bool start_machine(run *r, mstate *ms, const attn__scn_launch *l, attn__jw *w)
{
    const attn__scn_machine *mc = ms->mc;
    char before[256];
    snprintf(before, sizeof before, "%s", ms->backends);
    ms->launch = *l;
    ms->head_sizes[0] = ms->backends[0] = 0;
    attn__jw_obj_begin(w);
    attn__jw_key(w, "label");
    attn__jw_str(w, mc->label);
    attn__jw_key(w, "launch");
    write_launch(w, l);
    const attn_platform *p = NULL;
    attn_model *m = NULL;
    char err[2048] = "";
    if (open_platform(r, mc, l, &p) != ATTN_OK)
        snprintf(err, sizeof err, "%s", attn_last_error());
    else if (attn_model_load(l->model, &m) != ATTN_OK)
        snprintf(err, sizeof err, "model '%s': %s", l->model, attn_last_error());
    if (p) {
        attn__jw_key(w, "platform");
        write_platform(w, mc, p);
        ms->plat = p;
    }
    bool all = m != NULL;
    if (m) {
        r->models[r->num_models++] = m;
        attn__jw_key(w, "model");
        attn__jw_obj_begin(w);
        attn__jw_key(w, "name");
        attn__jw_str(w, attn_model_name(m));
        attn__jw_key(w, "model_type");
        attn__jw_str(w, attn_model_type(m));
        attn__jw_key(w, "dtype");
        attn__jw_str(w, attn_dtype_name(attn_model_dtype(m)));
        attn__jw_key(w, "num_layers");
        attn__jw_int(w, attn_model_num_layers(m));
        attn__jw_obj_end(w);
        attn__jw_key(w, "groups");
        attn__jw_arr_begin(w);
        for (int g = 0; g < attn_model_num_groups(m); g++) {
            char chosen[96], hs[16];
            all &= write_group_selection(w, p, m, g, l, chosen, sizeof chosen);
            snprintf(hs, sizeof hs, "%d", attn_model_group_spec(m, g)->head_size);
            join_unique(ms->head_sizes, sizeof ms->head_sizes, hs);
            join_unique(ms->backends, sizeof ms->backends, chosen);
        }
        attn__jw_arr_end(w);
    }
    /* The engine performs the same startup (selection is cached, so it
     * reaches the same answers) and is what refuses to start. */
    if (m && p) {
        uint64_t seed = mc->traffic.seed + (uint64_t)ms->index;
        attn__srv *srv = NULL;
        if (attn__srv_start(p, m, l, &mc->traffic, seed, r->s->verify, &srv) == ATTN_OK)
            ms->srv = srv;
        else
            snprintf(err, sizeof err, "%s", attn_last_error());
    }
    if (ms->srv) {
        attn__jw_key(w, "engine");
        attn__srv_write_startup(ms->srv, w);
    }
    if (!ms->srv && before[0] && strcmp(before, ms->backends) != 0) {
        /* the closing table keeps what it served with before the failed restart */
        char now[256];
        snprintf(now, sizeof now, "%s", ms->backends);
        snprintf(ms->backends, sizeof ms->backends, "%.120s, then %.120s", before, now);
    }
    attn__jw_key(w, "ok");
    attn__jw_bool(w, ms->srv != NULL && all);
    attn__jw_key(w, "error");
    if (ms->srv)
        attn__jw_null(w);
    else
        attn__jw_str(w, err[0] ? err : "startup failed");
    attn__jw_obj_end(w);
    return ms->srv != NULL;
}

static void step_machine(mstate *ms, int step)
{
    if (!ms->srv) return;
    attn__srv_step info;
    memset(&info, 0, sizeof info);
    bool show = ms->shown < ms->mc->traffic.show_steps;
    attn__sb one;
    attn__jw w;
    attn__sb_init(&one);
    attn__jw_init(&w, &one, false);
    attn_status st = attn__srv_step_run(ms->srv, show ? &w : NULL, &info);
    if (st != ATTN_OK) {
        snprintf(ms->state, sizeof ms->state, "engine step failed at step %d: %.100s", step,
                 attn_last_error());
        attn__srv_free(ms->srv);
        ms->srv = NULL;
        attn__sb_free(&one);
        return;
    }
    if (show && info.num_reqs > 0) { /* the first steps that had a batch */
        char *text = attn__sb_take(&one);
        if (text) {
            attn__jw_obj_begin(&ms->detail);
            attn__jw_key(&ms->detail, "step");
            attn__jw_int(&ms->detail, step);
            attn__jw_key(&ms->detail, "engine_step");
            attn__jw_int(&ms->detail, ms->steps_served);
            attn__jw_key(&ms->detail, "built");
            attn__jw_raw(&ms->detail, text);
            attn__jw_obj_end(&ms->detail);
        }
        free(text);
        ms->shown++;
    }
    attn__sb_free(&one);
    ms->steps_served++;
    ms->admitted += info.admitted;
    ms->finished += info.finished;
    attn__jw *c = &ms->counters;
    attn__jw_obj_begin(c);
    attn__jw_key(c, "step");
    attn__jw_int(c, step);
    attn__jw_key(c, "num_reqs");
    attn__jw_int(c, info.num_reqs);
    attn__jw_key(c, "num_tokens");
    attn__jw_int(c, info.num_tokens);
    attn__jw_key(c, "admitted");
    attn__jw_int(c, info.admitted);
    attn__jw_key(c, "finished");
    attn__jw_int(c, info.finished);
    attn__jw_key(c, "running");
    attn__jw_int(c, info.running);
    attn__jw_key(c, "waiting");
    attn__jw_int(c, info.waiting);
    attn__jw_key(c, "blocks_in_use");
    attn__jw_int(c, info.blocks_in_use);
    attn__jw_key(c, "preempted");
    attn__jw_int(c, info.preempted);
    attn__jw_obj_end(c);
}

static void write_scenario_info(attn__jw *w, const attn__scenario *s)
{
    attn__jw_obj_begin(w);
    attn__jw_key(w, "name");
    attn__jw_str(w, s->name);
    attn__jw_key(w, "description");
    attn__jw_str(w, s->description);
    attn__jw_key(w, "source");
    attn__jw_str(w, s->source);
    attn__jw_key(w, "steps");
    attn__jw_int(w, s->traffic.steps);
    attn__jw_key(w, "verify");
    attn__jw_bool(w, s->verify);
    attn__jw_key(w, "traffic");
    attn__jw_obj_begin(w);
    attn__jw_key(w, "rate");
    attn__jw_num(w, s->traffic.rate);
    attn__jw_key(w, "prompt_len");
    attn__jw_arr_begin(w);
    attn__jw_int(w, s->traffic.prompt_min);
    attn__jw_int(w, s->traffic.prompt_max);
    attn__jw_arr_end(w);
    attn__jw_key(w, "output_len");
    attn__jw_arr_begin(w);
    attn__jw_int(w, s->traffic.output_min);
    attn__jw_int(w, s->traffic.output_max);
    attn__jw_arr_end(w);
    attn__jw_key(w, "seed");
    attn__jw_int(w, (long long)s->traffic.seed);
    attn__jw_key(w, "show_steps");
    attn__jw_int(w, s->traffic.show_steps);
    attn__jw_obj_end(w);
    attn__jw_key(w, "events");
    attn__jw_arr_begin(w);
    for (int i = 0; i < s->num_events; i++) {
        const attn__scn_event *e = &s->events[i];
        attn__jw_obj_begin(w);
        attn__jw_key(w, "at_step");
        attn__jw_int(w, e->at_step);
        attn__jw_key(w, "machine");
        attn__jw_str(w, s->machines[e->machine].label);
        attn__jw_key(w, "action");
        attn__jw_str(w, e->action);
        attn__jw_key(w, "changes");
        attn__jw_str(w, e->changes);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
    attn__jw_obj_end(w);
}

static void stage_begin(attn__jw *w, int n, const char *title, const char *says)
{
    attn__jw_obj_begin(w);
    attn__jw_key(w, "stage");
    attn__jw_int(w, n);
    attn__jw_key(w, "title");
    attn__jw_str(w, title);
    attn__jw_key(w, "says");
    attn__jw_str(w, says);
}

/* Stage 2 is each startup record's platform and priority lists. */
static void write_stage2_machines(attn__jw *w, const attn__json *startup)
{
    attn__jw_arr_begin(w);
    for (size_t i = 0; startup && i < attn__json_len(startup); i++) {
        const attn__json *rec = attn__json_at(startup, i);
        const attn__json *pl = attn__json_get(rec, "platform");
        attn__jw_obj_begin(w);
        attn__jw_key(w, "label");
        attn__scn_write_value(w, attn__json_get(rec, "label"));
        attn__jw_key(w, "platform");
        attn__scn_write_value(w, pl);
        attn__jw_key(w, "priorities");
        attn__jw_arr_begin(w);
        const attn__json *gs = attn__json_get(rec, "groups");
        for (size_t g = 0; gs && g < attn__json_len(gs); g++) {
            const attn__json *gr = attn__json_at(gs, g);
            static const char *const keys[] = {"group", "kind", "head_size", "selector_config",
                                               "priorities"};
            attn__jw_obj_begin(w);
            for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
                attn__jw_key(w, keys[k]);
                attn__scn_write_value(w, attn__json_get(gr, keys[k]));
            }
            attn__jw_obj_end(w);
        }
        attn__jw_arr_end(w);
        attn__jw_key(w, "error");
        attn__scn_write_value(w, pl ? NULL : attn__json_get(rec, "error"));
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
}

attn_status attn__scenario_run(const attn__scenario *s, char **out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    run *r = calloc(1, sizeof *r);
    if (!r) return attn_set_error(ATTN_OUT_OF_MEMORY, "scenario: out of memory");
    r->s = s;
    for (int i = 0; i < s->num_machines; i++) {
        mstate *ms = &r->m[i];
        ms->mc = &s->machines[i];
        ms->index = i;
        ms->launch = ms->mc->launch;
        attn__sb_init(&ms->detail_sb);
        attn__jw_init(&ms->detail, &ms->detail_sb, false);
        attn__jw_arr_begin(&ms->detail);
        attn__sb_init(&ms->counters_sb);
        attn__jw_init(&ms->counters, &ms->counters_sb, false);
        attn__jw_arr_begin(&ms->counters);
    }

    /* ---- startup: stages 2 and 3 come from the first start of each machine ---- */
    attn__sb st_sb;
    attn__jw st;
    attn__sb_init(&st_sb);
    attn__jw_init(&st, &st_sb, false);
    attn__jw_arr_begin(&st);
    for (int i = 0; i < s->num_machines; i++) {
        mstate *ms = &r->m[i];
        bool ok = start_machine(r, ms, &ms->mc->launch, &st);
        snprintf(ms->state, sizeof ms->state, ok ? "serving" : "failed at startup");
    }
    attn__jw_arr_end(&st);
    char *startup = attn__sb_take(&st_sb);

    /* ---- the clock ---- */
    bool event_ok[ATTN__SCN_MAX_EVENTS] = {0};
    char *event_start[ATTN__SCN_MAX_EVENTS] = {0};
    int next_event = 0;
    for (int step = 0; step < s->traffic.steps; step++) {
        while (next_event < s->num_events && s->events[next_event].at_step == step) {
            const attn__scn_event *e = &s->events[next_event];
            mstate *ms = &r->m[e->machine];
            for (int i = 0; i < s->num_machines; i++) {
                r->snap_steps[next_event][i] = r->m[i].steps_served;
                r->snap_admitted[next_event][i] = r->m[i].admitted;
            }
            attn__srv_free(ms->srv); /* in-flight requests go with the process */
            ms->srv = NULL;
            if (!strcmp(e->action, "stop")) {
                snprintf(ms->state, sizeof ms->state, "stopped at step %d", step);
                event_ok[next_event] = true;
            } else {
                attn__sb one;
                attn__jw w1;
                attn__sb_init(&one);
                attn__jw_init(&w1, &one, false);
                event_ok[next_event] = start_machine(r, ms, &e->launch, &w1);
                event_start[next_event] = attn__sb_take(&one);
                snprintf(ms->state, sizeof ms->state,
                         event_ok[next_event] ? "serving (restarted at step %d)"
                                              : "failed at startup (restart at step %d)",
                         step);
            }
            next_event++;
        }
        for (int i = 0; i < s->num_machines; i++)
            step_machine(&r->m[i], step);
    }

    attn__sb ev_sb;
    attn__jw ev;
    attn__sb_init(&ev_sb);
    attn__jw_init(&ev, &ev_sb, false);
    attn__jw_arr_begin(&ev);
    for (int k = 0; k < s->num_events; k++) {
        const attn__scn_event *e = &s->events[k];
        mstate *ms = &r->m[e->machine];
        attn__jw_obj_begin(&ev);
        attn__jw_key(&ev, "at_step");
        attn__jw_int(&ev, e->at_step);
        attn__jw_key(&ev, "machine");
        attn__jw_str(&ev, ms->mc->label);
        attn__jw_key(&ev, "action");
        attn__jw_str(&ev, e->action);
        attn__jw_key(&ev, "changes");
        attn__jw_str(&ev, e->changes);
        attn__jw_key(&ev, "ok");
        attn__jw_bool(&ev, event_ok[k]);
        attn__jw_key(&ev, "startup");
        if (event_start[k])
            attn__jw_raw(&ev, event_start[k]);
        else
            attn__jw_null(&ev);
        /* from the event to the end of the run */
        attn__jw_key(&ev, "steps_after");
        attn__jw_int(&ev, ms->steps_served - r->snap_steps[k][e->machine]);
        attn__jw_key(&ev, "admitted_after");
        attn__jw_int(&ev, ms->admitted - r->snap_admitted[k][e->machine]);
        attn__jw_key(&ev, "remaining_steps");
        attn__jw_int(&ev, s->traffic.steps - e->at_step);
        attn__jw_key(&ev, "others");
        attn__jw_arr_begin(&ev);
        for (int i = 0; i < s->num_machines; i++) {
            if (i == e->machine) continue;
            attn__jw_obj_begin(&ev);
            attn__jw_key(&ev, "label");
            attn__jw_str(&ev, r->m[i].mc->label);
            attn__jw_key(&ev, "steps_at_event");
            attn__jw_int(&ev, r->snap_steps[k][i]);
            attn__jw_key(&ev, "steps_at_end");
            attn__jw_int(&ev, r->m[i].steps_served);
            attn__jw_key(&ev, "advanced");
            attn__jw_int(&ev, r->m[i].steps_served - r->snap_steps[k][i]);
            attn__jw_key(&ev, "admitted_after");
            attn__jw_int(&ev, r->m[i].admitted - r->snap_admitted[k][i]);
            attn__jw_key(&ev, "state");
            attn__jw_str(&ev, r->m[i].state);
            attn__jw_obj_end(&ev);
        }
        attn__jw_arr_end(&ev);
        attn__jw_obj_end(&ev);
    }
    attn__jw_arr_end(&ev);
    char *events = attn__sb_take(&ev_sb);

    /* ---- the document ---- */
    attn__sb sb;
    attn__jw w;
    attn__sb_init(&sb);
    attn__jw_init(&w, &sb, true);
    attn__jw_obj_begin(&w);
    attn__jw_key(&w, "scenario");
    write_scenario_info(&w, s);
    attn__jw_key(&w, "stages");
    attn__jw_arr_begin(&w);

    stage_begin(&w, 1, "Machines, nothing decided",
                "Each machine runs its own model; none has chosen an attention backend yet.");
    attn__jw_key(&w, "machines");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_machines; i++) {
        const attn__scn_machine *mc = r->m[i].mc;
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "label");
        attn__jw_str(&w, mc->label);
        attn__jw_key(&w, "machine");
        attn__jw_str(&w, mc->spec_name);
        attn__jw_key(&w, "model");
        attn__jw_str(&w, mc->launch.model);
        attn__jw_key(&w, "requested_backend");
        if (mc->launch.backend[0])
            attn__jw_str(&w, mc->launch.backend);
        else
            attn__jw_null(&w);
        attn__jw_key(&w, "decided");
        attn__jw_bool(&w, false);
        attn__jw_obj_end(&w);
    }
    attn__jw_arr_end(&w);
    attn__jw_obj_end(&w);

    attn__json *stj = NULL;
    char perr[128];
    if (!startup || attn__json_parse(startup, strlen(startup), &stj, perr, sizeof perr) != ATTN_OK)
        stj = NULL;
    stage_begin(&w, 2, "Each platform's answer",
                "What hardware am I on? Each platform reports its device and capability and "
                "answers with its own priority list.");
    attn__jw_key(&w, "machines");
    write_stage2_machines(&w, stj);
    attn__jw_obj_end(&w);

    stage_begin(&w, 3, "Selection, once, at startup",
                "One selection per KV-cache group: the chosen backend, every rejected candidate "
                "with its reasons, and where its code lives. Fixed from here on.");
    attn__jw_key(&w, "machines");
    attn__jw_raw(&w, startup ? startup : "[]");
    attn__jw_obj_end(&w);

    stage_begin(&w, 4, "Serving: metadata built fresh every step",
                "Every step builds the common metadata from the live batch, then each KV group's "
                "builder turns it into its backend's own metadata; nothing carries over from the "
                "previous step. Attention math runs on libattn's CPU kernels, labelled emulated "
                "where they stand in for a GPU backend.");
    attn__jw_key(&w, "emulated");
    attn__jw_bool(&w, true);
    attn__jw_key(&w, "machines");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_machines; i++) {
        mstate *ms = &r->m[i];
        attn__jw_arr_end(&ms->detail);
        attn__jw_arr_end(&ms->counters);
        char *d = attn__sb_take(&ms->detail_sb);
        char *c = attn__sb_take(&ms->counters_sb);
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "label");
        attn__jw_str(&w, ms->mc->label);
        attn__jw_key(&w, "steps");
        attn__jw_raw(&w, d ? d : "[]");
        attn__jw_key(&w, "counters");
        attn__jw_raw(&w, c ? c : "[]");
        attn__jw_obj_end(&w);
        free(d);
        free(c);
    }
    attn__jw_arr_end(&w);
    attn__jw_obj_end(&w);

    stage_begin(&w, 5, "Events: a restart with an explicit backend",
                "An explicit backend request is a hard requirement: if it cannot be loaded or "
                "does not fit, the engine fails at startup, before admitting a request. The other "
                "machines keep serving.");
    attn__jw_key(&w, "events");
    attn__jw_raw(&w, events ? events : "[]");
    attn__jw_obj_end(&w);
    attn__jw_arr_end(&w);

    attn__jw_key(&w, "summary");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_machines; i++) {
        const mstate *ms = &r->m[i];
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "machine");
        attn__jw_str(&w, ms->mc->label);
        attn__jw_key(&w, "device");
        attn__jw_str(&w, ms->plat ? attn_platform_device_name(ms->plat) : ms->mc->spec_name);
        attn__jw_key(&w, "model");
        attn__jw_str(&w, ms->launch.model);
        attn__jw_key(&w, "head_size");
        attn__jw_str(&w, ms->head_sizes);
        attn__jw_key(&w, "backend");
        attn__jw_str(&w, ms->backends[0] ? ms->backends : "-");
        attn__jw_key(&w, "state");
        attn__jw_str(&w, ms->state);
        attn__jw_key(&w, "serving");
        attn__jw_bool(&w, ms->srv != NULL);
        attn__jw_key(&w, "steps_served");
        attn__jw_int(&w, ms->steps_served);
        attn__jw_key(&w, "requests_admitted");
        attn__jw_int(&w, ms->admitted);
        attn__jw_key(&w, "requests_finished");
        attn__jw_int(&w, ms->finished);
        attn__jw_obj_end(&w);
    }
    attn__jw_arr_end(&w);
    attn__jw_obj_end(&w);

    attn__json_free(stj);
    free(startup);
    free(events);
    for (int k = 0; k < s->num_events; k++)
        free(event_start[k]);
    for (int i = 0; i < s->num_machines; i++) {
        attn__srv_free(r->m[i].srv);
        attn__sb_free(&r->m[i].detail_sb);
        attn__sb_free(&r->m[i].counters_sb);
    }
    for (int i = 0; i < r->num_models; i++)
        attn_model_free(r->models[i]);
    for (int i = 0; i < r->num_platforms; i++)
        attn_platform_free(r->platforms[i]);
    free(r);
    if (sb.oom) {
        attn__sb_free(&sb);
        return attn_set_error(ATTN_OUT_OF_MEMORY, "scenario: out of memory");
    }
    *out = attn__sb_take(&sb);
    return ATTN_OK;
}
