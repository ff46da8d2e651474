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

#include "scenario/run_impl.h"
#include "harness/json_put.h"

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
    attn__put_str(w, "machine", mc->spec_name);
    attn__put_str(w, "platform", attn_platform_kind_name(attn_platform_get_kind(p)));
    attn__put_str(w, "device", attn_platform_device_name(p));
    attn__put_str(w, "capability", cap);
    attn__put_bool(w, "simulated", attn_platform_is_simulated(p));
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
    attn__put_str(w, "model", l->model);
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
    attn__put_str(w, "kv_cache_dtype", l->kv_cache_dtype[0] ? l->kv_cache_dtype : "auto");
    attn__jw_key(w, "installed");
    if (l->installed_given)
        attn__jw_str(w, l->installed);
    else
        attn__jw_null(w);
    attn__jw_obj_end(w);
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
    attn__put_str(w, "label", mc->label);
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
        attn__put_str(w, "name", attn_model_name(m));
        attn__put_str(w, "model_type", attn_model_type(m));
        attn__put_str(w, "dtype", attn_dtype_name(attn_model_dtype(m)));
        attn__put_int(w, "num_layers", attn_model_num_layers(m));
        attn__jw_obj_end(w);
        attn__jw_key(w, "groups");
        attn__jw_arr_begin(w);
        for (int g = 0; g < attn_model_num_groups(m); g++) {
            char chosen[96], hs[16];
            all &= attn__scn_write_group_selection(w, p, m, g, l, chosen, sizeof chosen);
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
    attn__put_bool(w, "ok", ms->srv != NULL && all);
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
            attn__put_int(&ms->detail, "step", step);
            attn__put_int(&ms->detail, "engine_step", ms->steps_served);
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
    attn__put_int(c, "step", step);
    attn__put_int(c, "num_reqs", info.num_reqs);
    attn__put_int(c, "num_tokens", info.num_tokens);
    attn__put_int(c, "admitted", info.admitted);
    attn__put_int(c, "finished", info.finished);
    attn__put_int(c, "running", info.running);
    attn__put_int(c, "waiting", info.waiting);
    attn__put_int(c, "blocks_in_use", info.blocks_in_use);
    attn__put_int(c, "preempted", info.preempted);
    attn__jw_obj_end(c);
}

/* Each machine's record and its step logs. */
static void init_machines(run *r)
{
    for (int i = 0; i < r->s->num_machines; i++) {
        mstate *ms = &r->m[i];
        ms->mc = &r->s->machines[i];
        ms->index = i;
        ms->launch = ms->mc->launch;
        attn__sb_init(&ms->detail_sb);
        attn__jw_init(&ms->detail, &ms->detail_sb, false);
        attn__jw_arr_begin(&ms->detail);
        attn__sb_init(&ms->counters_sb);
        attn__jw_init(&ms->counters, &ms->counters_sb, false);
        attn__jw_arr_begin(&ms->counters);
    }
}

/* Stages 2 and 3 come from the first start of each machine. */
static char *start_all(run *r)
{
    attn__sb st_sb;
    attn__jw st;
    attn__sb_init(&st_sb);
    attn__jw_init(&st, &st_sb, false);
    attn__jw_arr_begin(&st);
    for (int i = 0; i < r->s->num_machines; i++) {
        mstate *ms = &r->m[i];
        bool ok = start_machine(r, ms, &ms->mc->launch, &st);
        snprintf(ms->state, sizeof ms->state, ok ? "serving" : "failed at startup");
    }
    attn__jw_arr_end(&st);
    return attn__sb_take(&st_sb);
}

/* Event k at `step`: the counters of every machine are kept for stage 5,
 * then the machine stops or restarts with the event's launch. */
static void apply_event(run *r, int k, int step)
{
    const attn__scn_event *e = &r->s->events[k];
    mstate *ms = &r->m[e->machine];
    for (int i = 0; i < r->s->num_machines; i++) {
        r->snap_steps[k][i] = r->m[i].steps_served;
        r->snap_admitted[k][i] = r->m[i].admitted;
    }
    attn__srv_free(ms->srv); /* in-flight requests go with the process */
    ms->srv = NULL;
    if (!strcmp(e->action, "stop")) {
        snprintf(ms->state, sizeof ms->state, "stopped at step %d", step);
        r->event_ok[k] = true;
        return;
    }
    attn__sb one;
    attn__jw w1;
    attn__sb_init(&one);
    attn__jw_init(&w1, &one, false);
    r->event_ok[k] = start_machine(r, ms, &e->launch, &w1);
    r->event_start[k] = attn__sb_take(&one);
    snprintf(ms->state, sizeof ms->state,
             r->event_ok[k] ? "serving (restarted at step %d)"
                            : "failed at startup (restart at step %d)",
             step);
}

/* The clock: at each step its events first, then one step per machine. */
static void run_clock(run *r)
{
    int next_event = 0;
    for (int step = 0; step < r->s->traffic.steps; step++) {
        while (next_event < r->s->num_events && r->s->events[next_event].at_step == step)
            apply_event(r, next_event++, step);
        for (int i = 0; i < r->s->num_machines; i++)
            step_machine(&r->m[i], step);
    }
}

/* Stage 5: each event, its outcome, and what every machine did after it. */
static char *write_events(run *r)
{
    attn__sb ev_sb;
    attn__jw evw, *ev = &evw;
    attn__sb_init(&ev_sb);
    attn__jw_init(ev, &ev_sb, false);
    attn__jw_arr_begin(ev);
    for (int k = 0; k < r->s->num_events; k++) {
        const attn__scn_event *e = &r->s->events[k];
        mstate *ms = &r->m[e->machine];
        attn__jw_obj_begin(ev);
        attn__put_int(ev, "at_step", e->at_step);
        attn__put_str(ev, "machine", ms->mc->label);
        attn__put_str(ev, "action", e->action);
        attn__put_str(ev, "changes", e->changes);
        attn__put_bool(ev, "ok", r->event_ok[k]);
        attn__jw_key(ev, "startup");
        if (r->event_start[k])
            attn__jw_raw(ev, r->event_start[k]);
        else
            attn__jw_null(ev);
        /* from the event to the end of the run */
        attn__put_int(ev, "steps_after", ms->steps_served - r->snap_steps[k][e->machine]);
        attn__put_int(ev, "admitted_after", ms->admitted - r->snap_admitted[k][e->machine]);
        attn__put_int(ev, "remaining_steps", r->s->traffic.steps - e->at_step);
        attn__jw_key(ev, "others");
        attn__jw_arr_begin(ev);
        for (int i = 0; i < r->s->num_machines; i++) {
            if (i == e->machine) continue;
            attn__jw_obj_begin(ev);
            attn__put_str(ev, "label", r->m[i].mc->label);
            attn__put_int(ev, "steps_at_event", r->snap_steps[k][i]);
            attn__put_int(ev, "steps_at_end", r->m[i].steps_served);
            attn__put_int(ev, "advanced", r->m[i].steps_served - r->snap_steps[k][i]);
            attn__put_int(ev, "admitted_after", r->m[i].admitted - r->snap_admitted[k][i]);
            attn__put_str(ev, "state", r->m[i].state);
            attn__jw_obj_end(ev);
        }
        attn__jw_arr_end(ev);
        attn__jw_obj_end(ev);
    }
    attn__jw_arr_end(ev);
    return attn__sb_take(&ev_sb);
}

static void run_free(run *r)
{
    for (int k = 0; k < r->s->num_events; k++)
        free(r->event_start[k]);
    for (int i = 0; i < r->s->num_machines; i++) {
        attn__srv_free(r->m[i].srv);
        attn__sb_free(&r->m[i].detail_sb);
        attn__sb_free(&r->m[i].counters_sb);
    }
    for (int i = 0; i < r->num_models; i++)
        attn_model_free(r->models[i]);
    for (int i = 0; i < r->num_platforms; i++)
        attn_platform_free(r->platforms[i]);
    free(r);
}

attn_status attn__scenario_run(const attn__scenario *s, char **out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    run *r = calloc(1, sizeof *r);
    if (!r) return attn_set_error(ATTN_OUT_OF_MEMORY, "scenario: out of memory");
    r->s = s;
    init_machines(r);
    char *startup = start_all(r);
    run_clock(r);
    char *events = write_events(r);
    attn_status st = attn__scn_write_document(r, startup, events, out);
    free(startup);
    free(events);
    run_free(r);
    return st;
}
