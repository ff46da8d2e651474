/* Scenario runner internals shared by run.c (machines and the clock),
 * run_select.c (one group's selection record) and run_doc.c (the
 * document). */
#ifndef ATTN_SCENARIO_RUN_IMPL_H
#define ATTN_SCENARIO_RUN_IMPL_H

#include "attn/model.h"
#include "attn/platform.h"
#include "scenario/scenario.h"
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
    bool event_ok[ATTN__SCN_MAX_EVENTS];
    char *event_start[ATTN__SCN_MAX_EVENTS]; /* the restart's startup record */
} run;

/* run_select.c: one group's selection record (spec, selector config, the
 * platform's priority list, the result with every candidate and its
 * reasons). Returns whether a backend was chosen; chosen receives its name
 * or "requested X refused". */
bool attn__scn_write_group_selection(attn__jw *w, const attn_platform *p, const attn_model *m,
                                     int g, const attn__scn_launch *l, char *chosen,
                                     size_t chosen_size);

/* run_doc.c: the document from the run's records (startup: stage 3's
 * records; events: stage 5's). */
attn_status attn__scn_write_document(run *r, const char *startup, const char *events, char **out);

#endif
