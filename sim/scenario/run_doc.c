/* The scenario document: the run's records arranged as stages 1-5 and
 * the closing summary (the text and HTML views render only this). */
#include <stdlib.h>
#include <string.h>

#include "scenario/run_impl.h"
#include "harness/json_put.h"

static void write_scenario_info(attn__jw *w, const attn__scenario *s)
{
    attn__jw_obj_begin(w);
    attn__put_str(w, "name", s->name);
    attn__put_str(w, "description", s->description);
    attn__put_str(w, "source", s->source);
    attn__put_int(w, "steps", s->traffic.steps);
    attn__put_bool(w, "verify", s->verify);
    attn__jw_key(w, "traffic");
    attn__jw_obj_begin(w);
    attn__put_num(w, "rate", s->traffic.rate);
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
    attn__put_int(w, "seed", (long long)s->traffic.seed);
    attn__put_int(w, "show_steps", s->traffic.show_steps);
    attn__jw_obj_end(w);
    attn__jw_key(w, "events");
    attn__jw_arr_begin(w);
    for (int i = 0; i < s->num_events; i++) {
        const attn__scn_event *e = &s->events[i];
        attn__jw_obj_begin(w);
        attn__put_int(w, "at_step", e->at_step);
        attn__put_str(w, "machine", s->machines[e->machine].label);
        attn__put_str(w, "action", e->action);
        attn__put_str(w, "changes", e->changes);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
    attn__jw_obj_end(w);
}

static void stage_begin(attn__jw *w, int n, const char *title, const char *says)
{
    attn__jw_obj_begin(w);
    attn__put_int(w, "stage", n);
    attn__put_str(w, "title", title);
    attn__put_str(w, "says", says);
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
        attn__json_write(w, attn__json_get(rec, "label"));
        attn__jw_key(w, "platform");
        attn__json_write(w, pl);
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
                attn__json_write(w, attn__json_get(gr, keys[k]));
            }
            attn__jw_obj_end(w);
        }
        attn__jw_arr_end(w);
        attn__jw_key(w, "error");
        attn__json_write(w, pl ? NULL : attn__json_get(rec, "error"));
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
}

/* Stage 1: each machine and its model, nothing decided. */
static void write_stage1_machines(run *r, attn__jw *w)
{
    attn__jw_key(w, "machines");
    attn__jw_arr_begin(w);
    for (int i = 0; i < r->s->num_machines; i++) {
        const attn__scn_machine *mc = r->m[i].mc;
        attn__jw_obj_begin(w);
        attn__put_str(w, "label", mc->label);
        attn__put_str(w, "machine", mc->spec_name);
        attn__put_str(w, "model", mc->launch.model);
        attn__jw_key(w, "requested_backend");
        if (mc->launch.backend[0])
            attn__jw_str(w, mc->launch.backend);
        else
            attn__jw_null(w);
        attn__put_bool(w, "decided", false);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
}

/* Stage 4: each machine's step details and per-step counters. */
static void write_stage4_machines(run *r, attn__jw *w)
{
    attn__jw_key(w, "machines");
    attn__jw_arr_begin(w);
    for (int i = 0; i < r->s->num_machines; i++) {
        mstate *ms = &r->m[i];
        attn__jw_arr_end(&ms->detail);
        attn__jw_arr_end(&ms->counters);
        char *d = attn__sb_take(&ms->detail_sb);
        char *c = attn__sb_take(&ms->counters_sb);
        attn__jw_obj_begin(w);
        attn__put_str(w, "label", ms->mc->label);
        attn__jw_key(w, "steps");
        attn__jw_raw(w, d ? d : "[]");
        attn__jw_key(w, "counters");
        attn__jw_raw(w, c ? c : "[]");
        attn__jw_obj_end(w);
        free(d);
        free(c);
    }
    attn__jw_arr_end(w);
}

/* The closing table: one row per machine. */
static void write_summary(run *r, attn__jw *w)
{
    attn__jw_arr_begin(w);
    for (int i = 0; i < r->s->num_machines; i++) {
        const mstate *ms = &r->m[i];
        attn__jw_obj_begin(w);
        attn__put_str(w, "machine", ms->mc->label);
        attn__put_str(w, "device",
                      ms->plat ? attn_platform_device_name(ms->plat) : ms->mc->spec_name);
        attn__put_str(w, "model", ms->launch.model);
        attn__put_str(w, "head_size", ms->head_sizes);
        attn__put_str(w, "backend", ms->backends[0] ? ms->backends : "-");
        attn__put_str(w, "state", ms->state);
        attn__put_bool(w, "serving", ms->srv != NULL);
        attn__put_int(w, "steps_served", ms->steps_served);
        attn__put_int(w, "requests_admitted", ms->admitted);
        attn__put_int(w, "requests_finished", ms->finished);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
}

attn_status attn__scn_write_document(run *r, const char *startup, const char *events, char **out)
{
    const attn__scenario *s = r->s;
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
    write_stage1_machines(r, &w);
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
    attn__json_free(stj);

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
    attn__put_bool(&w, "emulated", true);
    write_stage4_machines(r, &w);
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
    write_summary(r, &w);
    attn__jw_obj_end(&w);
    if (sb.oom) {
        attn__sb_free(&sb);
        return attn_set_error(ATTN_OUT_OF_MEMORY, "scenario: out of memory");
    }
    *out = attn__sb_take(&sb);
    return ATTN_OK;
}
