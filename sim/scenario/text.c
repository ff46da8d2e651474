/* The staged text report of a run document. Reads only the document. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario/scenario.h"
#include "util/check.h"
#include "scenario/view.h"

const attn__json *attn__v_get(const attn__json *o, const char *key)
{
    const attn__json *v = o ? attn__json_get(o, key) : NULL;
    return (v && attn__json_type_of(v) != ATTN_JSON_NULL) ? v : NULL;
}

const char *attn__v_str(const attn__json *o, const char *key)
{
    const attn__json *v = attn__v_get(o, key);
    return (v && attn__json_type_of(v) == ATTN_JSON_STRING) ? attn__json_string(v) : "";
}

long long attn__v_int(const attn__json *o, const char *key, long long def)
{
    const attn__json *v = attn__v_get(o, key);
    long long x;
    return (v && attn__json_type_of(v) == ATTN_JSON_NUMBER && attn__json_is_int(v, &x)) ? x : def;
}

bool attn__v_bool(const attn__json *o, const char *key)
{
    const attn__json *v = attn__v_get(o, key);
    return v && attn__json_type_of(v) == ATTN_JSON_BOOL && attn__json_bool(v);
}

size_t attn__v_len(const attn__json *o, const char *key)
{
    const attn__json *v = attn__v_get(o, key);
    return (v &&
            (attn__json_type_of(v) == ATTN_JSON_ARRAY || attn__json_type_of(v) == ATTN_JSON_OBJECT))
               ? attn__json_len(v)
               : 0;
}

const attn__json *attn__v_at(const attn__json *o, const char *key, size_t i)
{
    return i < attn__v_len(o, key) ? attn__json_at(attn__v_get(o, key), i) : NULL;
}

void attn__v_compact(attn__sb *sb, const attn__json *v)
{
    attn__jw w;
    attn__jw_init(&w, sb, false);
    attn__json_write(&w, v);
}

const attn__json *attn__v_stage(const attn__json *doc, int n)
{
    for (size_t i = 0; i < attn__v_len(doc, "stages"); i++) {
        const attn__json *s = attn__v_at(doc, "stages", i);
        if (attn__v_int(s, "stage", 0) == n) return s;
    }
    return NULL;
}

/* ---- helpers -------------------------------------------------------------------------- */

static void wrap(FILE *f, const char *indent, const char *text, int width)
{
    const char *p = text;
    while (*p) {
        int room = width - (int)strlen(indent);
        int len = (int)strlen(p);
        int cut = len;
        if (len > room) {
            cut = room;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0) cut = room;
        }
        fprintf(f, "%s%.*s\n", indent, cut, p);
        p += cut;
        while (*p == ' ')
            p++;
    }
}

static void heading(FILE *f, const attn__json *st)
{
    fprintf(f, "\n== Stage %lld. %s ==\n", attn__v_int(st, "stage", 0), attn__v_str(st, "title"));
    wrap(f, "   ", attn__v_str(st, "says"), 96);
}

static void str_list(attn__sb *sb, const attn__json *arr, const char *sep)
{
    for (size_t i = 0; arr && i < attn__json_len(arr); i++) {
        const attn__json *e = attn__json_at(arr, i);
        attn__sb_printf(sb, "%s%s", i ? sep : "",
                        attn__json_type_of(e) == ATTN_JSON_STRING ? attn__json_string(e) : "?");
    }
}

static long long arr_int(const attn__json *o, const char *key, size_t i)
{
    const attn__json *v = attn__v_at(o, key, i);
    long long x;
    return (v && attn__json_is_int(v, &x)) ? x : 0;
}

static void print_truncated(FILE *f, const char *prefix, const char *text, size_t max)
{
    if (strlen(text) <= max)
        fprintf(f, "%s%s\n", prefix, text);
    else
        fprintf(f, "%s%.*s ...\n", prefix, (int)max, text);
}

/* ---- stages ----------------------------------------------------------------------------- */

static void stage1(FILE *f, const attn__json *st)
{
    heading(f, st);
    for (size_t i = 0; i < attn__v_len(st, "machines"); i++) {
        const attn__json *m = attn__v_at(st, "machines", i);
        const char *req = attn__v_str(m, "requested_backend");
        fprintf(f, "   %-10s %-8s runs %-15s attention backend: %s%s\n", attn__v_str(m, "label"),
                attn__v_str(m, "machine"), attn__v_str(m, "model"),
                req[0] ? "to be checked: requested " : "undecided", req);
    }
}

static void stage2(FILE *f, const attn__json *st)
{
    heading(f, st);
    for (size_t i = 0; i < attn__v_len(st, "machines"); i++) {
        const attn__json *m = attn__v_at(st, "machines", i);
        const attn__json *p = attn__v_get(m, "platform");
        if (!p) {
            fprintf(f, "   %-10s no platform: %s\n", attn__v_str(m, "label"),
                    attn__v_str(m, "error"));
            continue;
        }
        attn__sb inst;
        attn__sb_init(&inst);
        str_list(&inst, attn__v_get(p, "installed"), " ");
        fprintf(f, "   %-10s %s: %s, capability %s%s; installed: %s\n", attn__v_str(m, "label"),
                attn__v_str(p, "platform"), attn__v_str(p, "device"), attn__v_str(p, "capability"),
                attn__v_bool(p, "simulated") ? " (simulated)" : "", inst.len ? inst.data : "none");
        attn__sb_free(&inst);
        char prev[1024] = "";
        for (size_t g = 0; g < attn__v_len(m, "priorities"); g++) {
            const attn__json *gr = attn__v_at(m, "priorities", g);
            attn__sb l;
            attn__sb_init(&l);
            str_list(&l, attn__v_get(gr, "priorities"), " > ");
            const char *text = l.len ? l.data : "(empty)";
            if (strcmp(prev, text) != 0)
                fprintf(f, "   %-10s   priority list (group %lld, %s): %s\n", "",
                        attn__v_int(gr, "group", 0), attn__v_str(gr, "kind"), text);
            else
                fprintf(f, "   %-10s   priority list (group %lld, %s): the same\n", "",
                        attn__v_int(gr, "group", 0), attn__v_str(gr, "kind"));
            snprintf(prev, sizeof prev, "%s", text);
            attn__sb_free(&l);
        }
    }
}

static void print_engine(FILE *f, const attn__json *eng, const char *indent)
{
    if (attn__v_len(eng, "groups") == 0) {
        fprintf(f,
                "%s  engine ready: no paged KV cache (encoder-only attention runs on each "
                "pass's own keys and values)\n",
                indent);
        return;
    }
    fprintf(f, "%s  engine ready: block size %lld (%s), %lld blocks per KV group\n", indent,
            attn__v_int(eng, "block_size", 0), attn__v_str(eng, "block_size_source"),
            attn__v_int(eng, "num_blocks", 0));
    for (size_t k = 0; k < attn__v_len(eng, "groups"); k++) {
        const attn__json *g = attn__v_at(eng, "groups", k);
        fprintf(f, "%s    KV group %lld (layers %s): %s, %s %s %s, metadata by %s\n", indent,
                attn__v_int(g, "index", 0), attn__v_str(g, "layers_text"),
                attn__v_str(g, "backend"), attn__v_str(g, "layout"),
                attn__v_str(g, "kv_shape_text"), attn__v_str(g, "kv_elem"),
                attn__v_str(g, "builder"));
    }
    fprintf(f, "%s    attention math: %s\n", indent, attn__v_str(eng, "math"));
}

static void print_selection_record(FILE *f, const attn__json *m, const char *indent)
{
    const attn__json *model = attn__v_get(m, "model");
    if (model)
        fprintf(f, "%s%s: %s (%s, %s, %lld attention layers)\n", indent, attn__v_str(m, "label"),
                attn__v_str(model, "name"), attn__v_str(model, "model_type"),
                attn__v_str(model, "dtype"), attn__v_int(model, "num_layers", 0));
    else
        fprintf(f, "%s%s:\n", indent, attn__v_str(m, "label"));
    for (size_t g = 0; g < attn__v_len(m, "groups"); g++) {
        const attn__json *gr = attn__v_at(m, "groups", g);
        long long win = attn__v_int(gr, "sliding_window", 0);
        char extra[96] = "";
        if (win > 0) snprintf(extra, sizeof extra, ", window %lld", win);
        const char *req = attn__v_str(gr, "requested");
        fprintf(f, "%s  group %lld  %s, %lld layers (%s), heads %lld/%lld, head %lld%s%s%s%s\n",
                indent, attn__v_int(gr, "group", 0), attn__v_str(gr, "kind"),
                attn__v_int(gr, "num_layers", 0), attn__v_str(gr, "layers"),
                attn__v_int(gr, "num_heads", 0), attn__v_int(gr, "num_kv_heads", 0),
                attn__v_int(gr, "head_size", 0), extra,
                attn__v_bool(gr, "has_sink") ? ", sinks" : "", req[0] ? ", requested " : "", req);
        fprintf(f, "%s    %s\n", indent, attn__v_str(gr, "selector_config"));
        if (attn__v_bool(gr, "ok"))
            fprintf(f, "%s    -> %s   code: %s\n", indent, attn__v_str(gr, "selected"),
                    attn__v_str(gr, "locator"));
        else
            fprintf(f, "%s    -> no backend (%s): %s\n", indent, attn__v_str(gr, "error_kind"),
                    attn__v_str(gr, "message"));
        for (size_t c = 0; c < attn__v_len(gr, "candidates"); c++) {
            const attn__json *ca = attn__v_at(gr, "candidates", c);
            long long pri = attn__v_int(ca, "priority", -1);
            char pr[24];
            if (pri >= 0)
                snprintf(pr, sizeof pr, "#%lld", pri);
            else
                snprintf(pr, sizeof pr, "req");
            attn__sb rs;
            attn__sb_init(&rs);
            str_list(&rs, attn__v_get(ca, "reasons"), "; ");
            const char *verdict = attn__v_bool(ca, "chosen")  ? "chosen"
                                  : attn__v_bool(ca, "valid") ? "valid, lower priority"
                                                              : "rejected: ";
            fprintf(f, "%s      %-4s %-24s %s%s\n", indent, pr, attn__v_str(ca, "name"), verdict,
                    attn__v_bool(ca, "valid") ? "" : (rs.len ? rs.data : ""));
            attn__sb_free(&rs);
        }
        for (size_t k = 0; k < attn__v_len(gr, "warnings"); k++) {
            const attn__json *wn = attn__v_at(gr, "warnings", k);
            fprintf(f, "%s    warning: %s\n", indent,
                    attn__json_type_of(wn) == ATTN_JSON_STRING ? attn__json_string(wn) : "");
        }
    }
    const attn__json *eng = attn__v_get(m, "engine");
    if (eng) print_engine(f, eng, indent);
    if (!attn__v_bool(m, "ok"))
        fprintf(f, "%s  STARTUP FAILED: %s\n", indent, attn__v_str(m, "error"));
}

static void stage3(FILE *f, const attn__json *st)
{
    heading(f, st);
    for (size_t i = 0; i < attn__v_len(st, "machines"); i++) {
        fprintf(f, "\n");
        print_selection_record(f, attn__v_at(st, "machines", i), "   ");
    }
}

static void print_step(FILE *f, const attn__json *sd)
{
    const attn__json *b = attn__v_get(sd, "built");
    const attn__json *c = attn__v_get(b, "common");
    fprintf(f, "     step %lld: %lld requests, %lld tokens, max query %lld, max seq %lld\n",
            attn__v_int(sd, "step", 0), attn__v_int(c, "num_reqs", 0),
            attn__v_int(c, "num_actual_tokens", 0), attn__v_int(c, "max_query_len", 0),
            attn__v_int(c, "max_seq_len", 0));
    static const char *const arrays[] = {"query_start_loc", "seq_lens", "block_table"};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
        attn__sb t;
        attn__sb_init(&t);
        attn__v_compact(&t, attn__v_get(c, arrays[k]));
        char prefix[48];
        snprintf(prefix, sizeof prefix, "       %-16s ", arrays[k]);
        print_truncated(f, prefix, t.len ? t.data : "-", 100);
        attn__sb_free(&t);
    }
    const attn__json *sm = attn__v_get(c, "slot_mapping");
    fprintf(f, "       %-16s %lld slots: %s\n", "slot_mapping", attn__v_int(sm, "count", 0),
            attn__v_str(sm, "ranges"));
    if (attn__v_str(b, "fresh")[0]) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "       %-16s ", "fresh");
        fprintf(f, "%s", prefix);
        wrap(f, "", attn__v_str(b, "fresh"), 200);
    }
    for (size_t g = 0; g < attn__v_len(b, "groups"); g++) {
        const attn__json *gr = attn__v_at(b, "groups", g);
        attn__sb t;
        attn__sb_init(&t);
        attn__v_compact(&t, attn__v_get(gr, "metadata"));
        fprintf(f, "       KV group %lld   %s metadata (%s, %s):\n", attn__v_int(gr, "group", 0),
                attn__v_str(gr, "backend"), attn__v_str(gr, "builder"), attn__v_str(gr, "how"));
        print_truncated(f, "         ", t.len ? t.data : "{}", 200);
        attn__sb_free(&t);
    }
    const attn__json *at = attn__v_get(b, "attention");
    if (at) fprintf(f, "       attention        %s\n", attn__v_str(at, "text"));
}

static void stage4(FILE *f, const attn__json *st)
{
    heading(f, st);
    for (size_t i = 0; i < attn__v_len(st, "machines"); i++) {
        const attn__json *m = attn__v_at(st, "machines", i);
        fprintf(f, "\n   %s\n", attn__v_str(m, "label"));
        if (attn__v_len(m, "steps") == 0) fprintf(f, "     (no step served)\n");
        for (size_t k = 0; k < attn__v_len(m, "steps"); k++)
            print_step(f, attn__v_at(m, "steps", k));
        size_t n = attn__v_len(m, "counters");
        if (n) {
            fprintf(f, "     every step (step: requests/tokens):");
            for (size_t k = 0; k < n; k++) {
                const attn__json *c = attn__v_at(m, "counters", k);
                if (k && k % 8 == 0) fprintf(f, "\n                                         ");
                fprintf(f, " %lld:%lld/%lld", attn__v_int(c, "step", 0),
                        attn__v_int(c, "num_reqs", 0), attn__v_int(c, "num_tokens", 0));
            }
            fprintf(f, "\n");
        }
    }
}

static void stage5(FILE *f, const attn__json *st)
{
    heading(f, st);
    if (attn__v_len(st, "events") == 0) fprintf(f, "   (no events in this scenario)\n");
    for (size_t i = 0; i < attn__v_len(st, "events"); i++) {
        const attn__json *e = attn__v_at(st, "events", i);
        const char *label = attn__v_str(e, "machine");
        fprintf(f, "\n   step %lld: %s %s%s%s\n", attn__v_int(e, "at_step", 0),
                attn__v_str(e, "action"), label, attn__v_str(e, "changes")[0] ? " with " : "",
                attn__v_str(e, "changes"));
        const attn__json *su = attn__v_get(e, "startup");
        if (su) print_selection_record(f, su, "     ");
        if (!strcmp(attn__v_str(e, "action"), "restart") && !attn__v_bool(e, "ok"))
            fprintf(f,
                    "     => %s failed at startup and admitted no request: %lld admitted, "
                    "%lld steps served in the %lld steps that followed\n",
                    label, attn__v_int(e, "admitted_after", 0), attn__v_int(e, "steps_after", 0),
                    attn__v_int(e, "remaining_steps", 0));
        else
            fprintf(f, "     => %s: %lld steps served, %lld requests admitted after the event\n",
                    label, attn__v_int(e, "steps_after", 0), attn__v_int(e, "admitted_after", 0));
        for (size_t k = 0; k < attn__v_len(e, "others"); k++) {
            const attn__json *o = attn__v_at(e, "others", k);
            fprintf(f,
                    "     => %s kept going: step counter %lld -> %lld (+%lld), %lld requests "
                    "admitted; %s\n",
                    attn__v_str(o, "label"), attn__v_int(o, "steps_at_event", 0),
                    attn__v_int(o, "steps_at_end", 0), attn__v_int(o, "advanced", 0),
                    attn__v_int(o, "admitted_after", 0), attn__v_str(o, "state"));
        }
    }
}

static void summary(FILE *f, const attn__json *doc)
{
    fprintf(f, "\n== Summary ==\n");
    fprintf(f, "   %-10s %-24s %-14s %-5s %-36s %5s %5s  %s\n", "machine", "device", "model",
            "head", "backend", "steps", "reqs", "state");
    for (size_t i = 0; i < attn__v_len(doc, "summary"); i++) {
        const attn__json *s = attn__v_at(doc, "summary", i);
        fprintf(f, "   %-10s %-24.24s %-14s %-5s %-36s %5lld %5lld  %s\n",
                attn__v_str(s, "machine"), attn__v_str(s, "device"), attn__v_str(s, "model"),
                attn__v_str(s, "head_size"), attn__v_str(s, "backend"),
                attn__v_int(s, "steps_served", 0), attn__v_int(s, "requests_admitted", 0),
                attn__v_str(s, "state"));
    }
}

attn_status attn__scenario_print_text(const char *doc_text, FILE *f)
{
    ATTN__CHECK_NULL(doc_text);
    attn__json *doc = NULL;
    char err[128];
    if (attn__json_parse(doc_text, strlen(doc_text), &doc, err, sizeof err) != ATTN_OK)
        return attn_set_error(ATTN_INTERNAL, "run document: %s", err);
    const attn__json *sc = attn__v_get(doc, "scenario");
    const attn__json *tr = attn__v_get(sc, "traffic");
    fprintf(f, "attn simulate: %s  (%s)\n", attn__v_str(sc, "name"), attn__v_str(sc, "source"));
    wrap(f, "   ", attn__v_str(sc, "description"), 96);
    fprintf(f,
            "   %lld steps on one clock; traffic per machine: %.2f new requests/step, prompts "
            "%lld-%lld tokens, outputs %lld-%lld tokens, seed %lld\n",
            attn__v_int(sc, "steps", 0),
            attn__v_get(tr, "rate") ? attn__json_number(attn__v_get(tr, "rate")) : 0.0,
            arr_int(tr, "prompt_len", 0), arr_int(tr, "prompt_len", 1),
            arr_int(tr, "output_len", 0), arr_int(tr, "output_len", 1), attn__v_int(tr, "seed", 0));
    const attn__json *s;
    if ((s = attn__v_stage(doc, 1))) stage1(f, s);
    if ((s = attn__v_stage(doc, 2))) stage2(f, s);
    if ((s = attn__v_stage(doc, 3))) stage3(f, s);
    if ((s = attn__v_stage(doc, 4))) stage4(f, s);
    if ((s = attn__v_stage(doc, 5))) stage5(f, s);
    summary(f, doc);
    attn__json_free(doc);
    return ATTN_OK;
}
