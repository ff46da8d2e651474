/* Scenarios for `attn simulate`: machines side by side, one deployment per
 * machine, synthetic traffic and events (data/scenarios/README.md is the
 * schema). The parser validates everything up front (unknown fields, wrong
 * types, dangling machine labels, events outside the run) so a run never
 * starts on a half-understood scenario; the runner produces the whole run as
 * one JSON document, which the text and HTML views render. */
#ifndef ATTN_SCENARIO_H
#define ATTN_SCENARIO_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/select.h"
#include "attn/status.h"
#include "util/json.h"
#include "util/strbuf.h"

#define ATTN__SCN_MAX_MACHINES 16
#define ATTN__SCN_MAX_EVENTS   32
#define ATTN__SCN_MAX_SETTINGS 8

typedef struct attn__scn_launch {
    char model[512];                    /* preset name or config path */
    char backend[64];                   /* "" = automatic */
    char per_kind[ATTN_KIND_COUNT][64]; /* "" = unset */
    int block_size;                     /* 0 = not user-specified */
    char kv_cache_dtype[32];            /* "" = auto */
    bool installed_given;
    char installed[256]; /* csv of component tokens */
} attn__scn_launch;

typedef struct attn__scn_traffic {
    double rate;                /* mean new requests per step (Poisson) */
    int prompt_min, prompt_max; /* prompt length, uniform */
    int output_min, output_max; /* output length, uniform */
    uint64_t seed;
    int steps;      /* steps of the whole run */
    int show_steps; /* steps per machine shown in full in stage 4 */
} attn__scn_traffic;

typedef struct attn__scn_machine {
    char label[64];
    char spec_name[64]; /* catalog name / "cuda:9.0" / file, or the inline spec's name */
    char *spec_json;    /* inline spec text (owned) or NULL */
    bool installed_given;
    char installed[256];
    int num_settings;
    char settings[ATTN__SCN_MAX_SETTINGS][64]; /* "key=value" */
    attn__scn_launch launch;                   /* its deployment */
    bool has_traffic;
    attn__scn_traffic traffic; /* per-deployment traffic (else the scenario's) */
} attn__scn_machine;

typedef struct attn__scn_event {
    int at_step;
    int machine;             /* index into machines */
    char action[16];         /* "restart" | "stop" */
    attn__scn_launch launch; /* the launch after a restart (deployment's, changed) */
    char changes[256];       /* "backend=FLASHINFER" — what the event changed */
} attn__scn_event;

typedef struct attn__scenario {
    char name[128];
    char description[512];
    char source[512];
    int num_machines;
    attn__scn_machine machines[ATTN__SCN_MAX_MACHINES];
    attn__scn_traffic traffic;
    int num_events;
    attn__scn_event events[ATTN__SCN_MAX_EVENTS];
    bool verify; /* check each emulated attention step against REFERENCE (slow) */
} attn__scenario;

/* Parses scenario JSON text; `what` names it in errors. ATTN_PARSE_ERROR or
 * ATTN_INVALID_ARGUMENT naming the field (e.g. "machines[1].label"). */
attn_status attn__scenario_parse(const char *json, size_t len, const char *what,
                                 attn__scenario **out);
/* A name (looked up as data/scenarios/<name>.json) or a path. */
attn_status attn__scenario_load(const char *name_or_path, attn__scenario **out);
void attn__scenario_free(attn__scenario *s);
/* Changes the number of steps; fails (naming the event) when an event would
 * fall outside the run. */
attn_status attn__scenario_set_steps(attn__scenario *s, int steps);

/* Runs the scenario; *out receives the whole run as one JSON document
 * (caller frees). Failures of machines are part of the run, not errors; an
 * error status means the run itself could not be carried out. */
attn_status attn__scenario_run(const attn__scenario *s, char **out);

#endif
