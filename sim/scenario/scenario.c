/* Scenario parser (schema: data/scenarios/README.md).
 *
 * Contract: strict. Every member of every object must be known; every value
 * is type-checked; machine labels are unique and every deployment and event
 * names an existing machine; each machine has exactly one deployment; events
 * fall inside the run. Errors are ATTN_PARSE_ERROR (shape) or
 * ATTN_INVALID_ARGUMENT (value) with the JSON path of the field. Backend
 * names are not checked here: an unknown or unloadable backend is a startup
 * failure of that machine, which is what the run is there to show. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "attn/model.h"
#include "attn/platform.h"
#include "scenario/scenario.h"
#include "scenario/scenario_read.h"
#include "util/check.h"
#include "util/json.h"
#include "util/strbuf.h"

static int find_machine(const attn__scenario *s, const char *label, int limit)
{
    for (int i = 0; i < limit; i++)
        if (!strcmp(s->machines[i].label, label)) return i;
    return -1;
}

static attn_status read_machine(pctx *c, const attn__json *m, int idx)
{
    static const char *const keys[] = {"label", "machine", "installed", "settings", NULL};
    attn__scn_machine *mc = &c->s->machines[idx];
    char path[64], full[200];
    snprintf(path, sizeof path, "machines[%d]", idx);
    attn_status st;
    if (attn__json_type_of(m) != ATTN_JSON_OBJECT)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, path, "expected an object, got %s",
                             attn__scn_tname(m));
    if ((st = attn__scn_check_keys(c, m, path, keys)) != ATTN_OK) return st;
    if ((st = attn__scn_get_str(c, m, path, "label", mc->label, sizeof mc->label, true, false)) !=
        ATTN_OK)
        return st;
    attn__scn_join(full, sizeof full, path, "label");
    if (!mc->label[0]) return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "must not be empty");
    for (const char *p = mc->label; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full,
                                 "'%s' may only use letters, digits, '-', '_' and '.'", mc->label);
    if (find_machine(c->s, mc->label, idx) >= 0)
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "'%s' is used twice", mc->label);
    const attn__json *spec = attn__json_get(m, "machine");
    attn__scn_join(full, sizeof full, path, "machine");
    if (!spec)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, full,
                             "is missing (a catalog name or a spec object)");
    if (attn__json_type_of(spec) == ATTN_JSON_STRING) {
        if ((st = attn__scn_get_str(c, m, path, "machine", mc->spec_name, sizeof mc->spec_name,
                                    true, false)) != ATTN_OK)
            return st;
    } else if (attn__json_type_of(spec) == ATTN_JSON_OBJECT) {
        attn__sb sb;
        attn__jw w;
        attn__sb_init(&sb);
        attn__jw_init(&w, &sb, false);
        attn__json_write(&w, spec);
        mc->spec_json = attn__sb_take(&sb);
        if (!mc->spec_json) return attn_set_error(ATTN_OUT_OF_MEMORY, "scenario: out of memory");
        const attn__json *nm = attn__json_get(spec, "name");
        snprintf(mc->spec_name, sizeof mc->spec_name, "%s",
                 nm && attn__json_type_of(nm) == ATTN_JSON_STRING ? attn__json_string(nm)
                                                                  : "inline");
    } else {
        return attn__scn_bad(c, ATTN_PARSE_ERROR, full,
                             "expected a catalog name or a spec object, got %s",
                             attn__scn_tname(spec));
    }
    if ((st = attn__scn_get_installed(c, m, path, &mc->installed_given, mc->installed,
                                      sizeof mc->installed)) != ATTN_OK)
        return st;
    const attn__json *set = attn__json_get(m, "settings");
    if (set) {
        attn__scn_join(full, sizeof full, path, "settings");
        if (attn__json_type_of(set) != ATTN_JSON_OBJECT)
            return attn__scn_bad(c, ATTN_PARSE_ERROR, full, "expected an object, got %s",
                                 attn__scn_tname(set));
        for (size_t i = 0; i < attn__json_len(set); i++) {
            const char *k = attn__json_key_at(set, i);
            const attn__json *v = attn__json_at(set, i);
            char item[280];
            snprintf(item, sizeof item, "%s.%s", full, k);
            attn_setting sv;
            if (attn_setting_parse(k, &sv) != ATTN_OK)
                return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, item, "unknown machine setting");
            if (attn__json_type_of(v) != ATTN_JSON_BOOL)
                return attn__scn_bad(c, ATTN_PARSE_ERROR, item, "expected true or false, got %s",
                                     attn__scn_tname(v));
            if (mc->num_settings >= ATTN__SCN_MAX_SETTINGS)
                return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "too many settings");
            snprintf(mc->settings[mc->num_settings++], sizeof mc->settings[0], "%s=%s", k,
                     attn__json_bool(v) ? "true" : "false");
        }
    }
    return ATTN_OK;
}

static attn_status read_deployment(pctx *c, const attn__json *d, int idx, bool *seen)
{
    static const char *const keys[] = {"machine",          "model",      "backend",
                                       "backend_per_kind", "block_size", "kv_cache_dtype",
                                       "installed",        "traffic",    NULL};
    char path[64], label[64], full[200];
    snprintf(path, sizeof path, "deployments[%d]", idx);
    attn_status st;
    if (attn__json_type_of(d) != ATTN_JSON_OBJECT)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, path, "expected an object, got %s",
                             attn__scn_tname(d));
    if ((st = attn__scn_check_keys(c, d, path, keys)) != ATTN_OK) return st;
    if ((st = attn__scn_get_str(c, d, path, "machine", label, sizeof label, true, false)) !=
        ATTN_OK)
        return st;
    attn__scn_join(full, sizeof full, path, "machine");
    int mi = find_machine(c->s, label, c->s->num_machines);
    if (mi < 0)
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "no machine is labelled '%s'", label);
    if (seen[mi])
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full,
                             "machine '%s' already has a deployment", label);
    seen[mi] = true;
    if (!attn__json_get(d, "model")) {
        attn__scn_join(full, sizeof full, path, "model");
        return attn__scn_bad(c, ATTN_PARSE_ERROR, full,
                             "is missing (a preset name or a config.json path)");
    }
    attn__scn_machine *mc = &c->s->machines[mi];
    if ((st = attn__scn_read_launch(c, d, path, &mc->launch, NULL, 0)) != ATTN_OK) return st;
    const attn__json *t = attn__json_get(d, "traffic");
    if (t) {
        char tp[96];
        attn__scn_join(tp, sizeof tp, path, "traffic");
        mc->traffic = c->s->traffic;
        if ((st = attn__scn_read_traffic(c, t, tp, &mc->traffic)) != ATTN_OK) return st;
        if (attn__json_get(t, "steps")) {
            char sp[128];
            attn__scn_join(sp, sizeof sp, tp, "steps");
            return attn__scn_bad(
                c, ATTN_INVALID_ARGUMENT, sp,
                "the number of steps belongs to the scenario's traffic (machines step "
                "together)");
        }
        mc->has_traffic = true;
    }
    return ATTN_OK;
}

static attn_status read_event(pctx *c, const attn__json *e, int idx)
{
    static const char *const keys[] = {
        "at_step",    "machine",        "action",    "backend", "backend_per_kind",
        "block_size", "kv_cache_dtype", "installed", "model",   NULL};
    attn__scn_event *ev = &c->s->events[idx];
    char path[64], label[64], full[200];
    snprintf(path, sizeof path, "events[%d]", idx);
    attn_status st;
    if (attn__json_type_of(e) != ATTN_JSON_OBJECT)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, path, "expected an object, got %s",
                             attn__scn_tname(e));
    if ((st = attn__scn_check_keys(c, e, path, keys)) != ATTN_OK) return st;
    long long at;
    bool present;
    if ((st = attn__scn_get_int(c, e, path, "at_step", 0, 100000, &at, &present)) != ATTN_OK)
        return st;
    attn__scn_join(full, sizeof full, path, "at_step");
    if (!present) return attn__scn_bad(c, ATTN_PARSE_ERROR, full, "is missing");
    ev->at_step = (int)at;
    if ((st = attn__scn_get_str(c, e, path, "machine", label, sizeof label, true, false)) !=
        ATTN_OK)
        return st;
    ev->machine = find_machine(c->s, label, c->s->num_machines);
    attn__scn_join(full, sizeof full, path, "machine");
    if (ev->machine < 0)
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "no machine is labelled '%s'", label);
    if ((st = attn__scn_get_str(c, e, path, "action", ev->action, sizeof ev->action, true,
                                false)) != ATTN_OK)
        return st;
    attn__scn_join(full, sizeof full, path, "action");
    if (strcmp(ev->action, "restart") != 0 && strcmp(ev->action, "stop") != 0)
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "unknown action '%s' (restart, stop)",
                             ev->action);
    if (!strcmp(ev->action, "stop")) {
        for (size_t i = 0; i < ATTN__SCN_NUM_LAUNCH_KEYS; i++)
            if (attn__json_get(e, attn__scn_launch_keys[i])) {
                attn__scn_join(full, sizeof full, path, attn__scn_launch_keys[i]);
                return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full,
                                     "only a restart takes launch options");
            }
    }
    return ATTN_OK;
}

static attn_status check_events(const pctx *c)
{
    const attn__scenario *s = c->s;
    for (int i = 0; i < s->num_events; i++) {
        char full[64];
        snprintf(full, sizeof full, "events[%d].at_step", i);
        if (s->events[i].at_step >= s->traffic.steps)
            return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full,
                                 "step %d is outside the run (steps 0..%d)", s->events[i].at_step,
                                 s->traffic.steps - 1);
        if (i && s->events[i].at_step < s->events[i - 1].at_step)
            return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "events must be in step order");
    }
    return ATTN_OK;
}

static attn_status parse_root(pctx *c, const attn__json *root)
{
    static const char *const keys[] = {"name",    "description", "machines", "deployments",
                                       "traffic", "events",      "verify",   NULL};
    attn__scenario *s = c->s;
    attn_status st;
    if (attn__json_type_of(root) != ATTN_JSON_OBJECT)
        return attn_set_error(ATTN_PARSE_ERROR, "%s: a scenario must be a JSON object", c->what);
    if ((st = attn__scn_check_keys(c, root, "", keys)) != ATTN_OK) return st;
    if ((st = attn__scn_get_str(c, root, "", "name", s->name, sizeof s->name, false, false)) !=
            ATTN_OK ||
        (st = attn__scn_get_str(c, root, "", "description", s->description, sizeof s->description,
                                false, false)) != ATTN_OK)
        return st;
    const attn__json *vf = attn__json_get(root, "verify");
    if (vf) {
        if (attn__json_type_of(vf) != ATTN_JSON_BOOL)
            return attn__scn_bad(c, ATTN_PARSE_ERROR, "verify", "expected true or false, got %s",
                                 attn__scn_tname(vf));
        s->verify = attn__json_bool(vf);
    }
    const attn__json *ms = attn__json_get(root, "machines");
    if (!ms) return attn__scn_bad(c, ATTN_PARSE_ERROR, "machines", "is missing");
    if (attn__json_type_of(ms) != ATTN_JSON_ARRAY)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, "machines", "expected an array, got %s",
                             attn__scn_tname(ms));
    if (attn__json_len(ms) == 0 || attn__json_len(ms) > ATTN__SCN_MAX_MACHINES)
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, "machines", "needs 1 to %d machines",
                             ATTN__SCN_MAX_MACHINES);
    s->num_machines = (int)attn__json_len(ms);
    for (int i = 0; i < s->num_machines; i++)
        if ((st = read_machine(c, attn__json_at(ms, (size_t)i), i)) != ATTN_OK) return st;
    const attn__json *t = attn__json_get(root, "traffic");
    if (t && (st = attn__scn_read_traffic(c, t, "traffic", &s->traffic)) != ATTN_OK) return st;
    const attn__json *ds = attn__json_get(root, "deployments");
    if (!ds) return attn__scn_bad(c, ATTN_PARSE_ERROR, "deployments", "is missing");
    if (attn__json_type_of(ds) != ATTN_JSON_ARRAY)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, "deployments", "expected an array, got %s",
                             attn__scn_tname(ds));
    bool seen[ATTN__SCN_MAX_MACHINES] = {0};
    for (size_t i = 0; i < attn__json_len(ds); i++)
        if ((st = read_deployment(c, attn__json_at(ds, i), (int)i, seen)) != ATTN_OK) return st;
    for (int i = 0; i < s->num_machines; i++)
        if (!seen[i]) {
            char full[64];
            snprintf(full, sizeof full, "machines[%d]", i);
            return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "machine '%s' has no deployment",
                                 s->machines[i].label);
        }
    for (int i = 0; i < s->num_machines; i++) {
        if (!s->machines[i].has_traffic) s->machines[i].traffic = s->traffic;
        s->machines[i].traffic.steps = s->traffic.steps;
    }
    const attn__json *es = attn__json_get(root, "events");
    if (es) {
        if (attn__json_type_of(es) != ATTN_JSON_ARRAY)
            return attn__scn_bad(c, ATTN_PARSE_ERROR, "events", "expected an array, got %s",
                                 attn__scn_tname(es));
        if (attn__json_len(es) > ATTN__SCN_MAX_EVENTS)
            return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, "events", "at most %d events",
                                 ATTN__SCN_MAX_EVENTS);
        s->num_events = (int)attn__json_len(es);
        for (int i = 0; i < s->num_events; i++)
            if ((st = read_event(c, attn__json_at(es, (size_t)i), i)) != ATTN_OK) return st;
        /* a restart's launch = the machine's current one with the event's
         * changes; changes accumulate over successive restarts */
        attn__scn_launch cur[ATTN__SCN_MAX_MACHINES];
        for (int i = 0; i < s->num_machines; i++)
            cur[i] = s->machines[i].launch;
        for (int i = 0; i < s->num_events; i++) {
            attn__scn_event *ev = &s->events[i];
            char path[64];
            snprintf(path, sizeof path, "events[%d]", i);
            ev->launch = cur[ev->machine];
            if (!strcmp(ev->action, "restart") &&
                (st = attn__scn_read_launch(c, attn__json_at(es, (size_t)i), path, &ev->launch,
                                            ev->changes, sizeof ev->changes)) != ATTN_OK)
                return st;
            cur[ev->machine] = ev->launch;
        }
    }
    return check_events(c);
}

static void traffic_defaults(attn__scn_traffic *t)
{
    t->rate = 1.0;
    t->prompt_min = 16;
    t->prompt_max = 64;
    t->output_min = 8;
    t->output_max = 32;
    t->seed = 0;
    t->steps = 16;
    t->show_steps = 3;
}

attn_status attn__scenario_parse(const char *json, size_t len, const char *what,
                                 attn__scenario **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(json);
    attn__json *root = NULL;
    char err[256];
    if (attn__json_parse(json, len, &root, err, sizeof err) != ATTN_OK)
        return attn_set_error(ATTN_PARSE_ERROR, "%s: invalid JSON: %s", what, err);
    attn__scenario *s = calloc(1, sizeof *s);
    if (!s) {
        attn__json_free(root);
        return attn_set_error(ATTN_OUT_OF_MEMORY, "scenario: out of memory");
    }
    traffic_defaults(&s->traffic);
    snprintf(s->source, sizeof s->source, "%s", what);
    pctx c = {what, s};
    attn_status st = parse_root(&c, root);
    attn__json_free(root);
    if (st != ATTN_OK) {
        attn__scenario_free(s);
        return st;
    }
    if (!s->name[0]) snprintf(s->name, sizeof s->name, "%s", what);
    *out = s;
    return ATTN_OK;
}

attn_status attn__scenario_load(const char *name_or_path, attn__scenario **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(name_or_path);
    char path[1024];
    struct stat sb;
    size_t n = strlen(name_or_path);
    bool is_path = strchr(name_or_path, '/') || (n > 5 && !strcmp(name_or_path + n - 5, ".json")) ||
                   stat(name_or_path, &sb) == 0;
    if (is_path) {
        snprintf(path, sizeof path, "%s", name_or_path);
    } else {
        const char *dirs[8];
        int nd = attn_model_data_dirs(dirs, 8);
        bool found = false;
        for (int i = 0; i < nd && !found; i++) {
            snprintf(path, sizeof path, "%s/scenarios/%s.json", dirs[i], name_or_path);
            found = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
        }
        if (!found)
            return attn_set_error(ATTN_NOT_FOUND,
                                  "unknown scenario '%s': no scenarios/%s.json in the data "
                                  "directories",
                                  name_or_path, name_or_path);
    }
    char *text = NULL;
    size_t len = 0;
    attn_status st = attn__read_file(path, &text, &len);
    if (st != ATTN_OK) return attn_wrap_error(st, "cannot read scenario '%s'", path);
    st = attn__scenario_parse(text, len, path, out);
    free(text);
    return st;
}

void attn__scenario_free(attn__scenario *s)
{
    if (!s) return;
    for (int i = 0; i < s->num_machines; i++)
        free(s->machines[i].spec_json);
    free(s);
}

attn_status attn__scenario_set_steps(attn__scenario *s, int steps)
{
    ATTN__CHECK_NULL(s);
    if (steps < 1 || steps > 100000)
        return attn_set_error(ATTN_INVALID_ARGUMENT, "steps must be in [1, 100000] (got %d)",
                              steps);
    for (int i = 0; i < s->num_events; i++)
        if (s->events[i].at_step >= steps)
            return attn_set_error(
                ATTN_INVALID_ARGUMENT,
                "--steps %d: event %d (%s %s at step %d) would fall outside the run", steps, i,
                s->events[i].action, s->machines[s->events[i].machine].label, s->events[i].at_step);
    s->traffic.steps = steps;
    for (int i = 0; i < s->num_machines; i++)
        s->machines[i].traffic.steps = steps;
    return ATTN_OK;
}
