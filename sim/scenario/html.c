/* The HTML view of a run document: one self-contained page (inline CSS and
 * SVG, no script, nothing fetched) with the machines side by side in every
 * stage, every rejected backend's reasons written out (never folded away),
 * and an SVG timeline of the steps each machine served. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario/scenario.h"
#include "util/check.h"
#include "scenario/view.h"

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* pre, then member key of o, escaped. */
static void field(FILE *f, const char *pre, const attn__json *o, const char *key)
{
    fputs(pre, f);
    esc(f, attn__v_str(o, key));
}

static void compact(FILE *f, const attn__json *v)
{
    attn__sb sb;
    attn__sb_init(&sb);
    attn__v_compact(&sb, v);
    esc(f, sb.len ? sb.data : "-");
    attn__sb_free(&sb);
}

static const char k_css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;"
    "background:#f5f6f8;color:#1d2330}"
    "header{background:#1d2a44;color:#fff;padding:18px 28px}"
    "header h1{margin:0 0 6px;font-size:24px}header p{margin:4px 0;max-width:1100px;"
    "line-height:1.4}"
    "section{margin:18px 28px;background:#fff;border:1px solid #d9dde5;border-radius:8px;"
    "padding:12px 18px}"
    "section h2{margin:4px 0 4px;font-size:19px}section>p{margin:2px 0 10px;color:#4a5468}"
    ".grid{display:grid;gap:12px}"
    ".card{border:1px solid #d9dde5;border-radius:6px;padding:10px;background:#fbfcfd;"
    "min-width:0}"
    ".card h3{margin:0 0 6px;font-size:16px}"
    ".muted{color:#5d6679}.ok{color:#136c2e;font-weight:600}.bad{color:#b3261e;"
    "font-weight:600}"
    ".badge{display:inline-block;padding:2px 8px;border-radius:10px;font-weight:600;"
    "font-size:13px}"
    ".b-ok{background:#d7f2de;color:#0f5a26}.b-bad{background:#fbdcd9;color:#8c1d16}"
    ".b-idle{background:#e6e8ee;color:#3d4556}"
    "table{border-collapse:collapse;width:100%;font-size:12.5px;margin:6px 0}"
    "td,th{border-bottom:1px solid #e4e7ed;padding:3px 5px;text-align:left;"
    "vertical-align:top}"
    "th{background:#eef0f4}"
    "tr.rej td{color:#8c1d16}tr.chosen td{background:#e9f7ed;font-weight:600}"
    "code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11.5px}"
    "pre{white-space:pre-wrap;word-break:break-all;background:#f1f3f7;padding:6px;"
    "border-radius:4px;margin:4px 0}"
    ".err{background:#fdecea;border:1px solid #f3b5ae;color:#8c1d16;padding:8px;"
    "border-radius:6px;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px;"
    "word-break:break-word}"
    "ol{margin:4px 0 4px 20px;padding:0}li{margin:1px 0}"
    ".group{border-top:1px dashed #d0d5de;margin-top:8px;padding-top:6px}";

static void grid_open(FILE *f, size_t n)
{
    fprintf(f, "<div class=\"grid\" style=\"grid-template-columns:repeat(%zu,minmax(0,1fr))\">\n",
            n ? n : 1);
}

static void section_open(FILE *f, const attn__json *st)
{
    fprintf(f, "<section id=\"stage%lld\"><h2>Stage %lld. ", attn__v_int(st, "stage", 0),
            attn__v_int(st, "stage", 0));
    esc(f, attn__v_str(st, "title"));
    field(f, "</h2><p>", st, "says");
    fprintf(f, "</p>\n");
}

/* A small chip drawing with the machine's name. */
static void chip_svg(FILE *f, const char *label, const char *kind)
{
    const char *fill = !strcmp(kind, "rocm")   ? "#c0392b"
                       : !strcmp(kind, "cuda") ? "#3b8e3a"
                                               : "#4a6fa5";
    fprintf(f,
            "<svg width=\"150\" height=\"64\" viewBox=\"0 0 150 64\" role=\"img\">"
            "<rect x=\"20\" y=\"6\" width=\"110\" height=\"52\" rx=\"6\" fill=\"%s\"/>",
            fill);
    for (int i = 0; i < 6; i++)
        fprintf(f,
                "<rect x=\"%d\" y=\"0\" width=\"6\" height=\"6\" fill=\"#888\"/>"
                "<rect x=\"%d\" y=\"58\" width=\"6\" height=\"6\" fill=\"#888\"/>",
                30 + i * 17, 30 + i * 17);
    fprintf(f, "<text x=\"75\" y=\"38\" font-size=\"14\" text-anchor=\"middle\" fill=\"#fff\" "
               "font-family=\"sans-serif\">");
    esc(f, label);
    fprintf(f, "</text></svg>");
}

static void stage1(FILE *f, const attn__json *st, const attn__json *st2)
{
    section_open(f, st);
    grid_open(f, attn__v_len(st, "machines"));
    for (size_t i = 0; i < attn__v_len(st, "machines"); i++) {
        const attn__json *m = attn__v_at(st, "machines", i);
        const attn__json *m2 = attn__v_at(st2, "machines", i);
        field(f, "<div class=\"card\"><h3>", m, "label");
        fprintf(f, "</h3>");
        chip_svg(f, attn__v_str(m, "machine"),
                 attn__v_str(attn__v_get(m2, "platform"), "platform"));
        field(f, "<div>machine <b>", m, "machine");
        field(f, "</b></div><div>model <b>", m, "model");
        fprintf(f, "</b></div><div>attention backend: <span class=\"badge b-idle\">undecided"
                   "</span></div></div>\n");
    }
    fprintf(f, "</div></section>\n");
}

static void stage2(FILE *f, const attn__json *st)
{
    section_open(f, st);
    grid_open(f, attn__v_len(st, "machines"));
    for (size_t i = 0; i < attn__v_len(st, "machines"); i++) {
        const attn__json *m = attn__v_at(st, "machines", i);
        const attn__json *p = attn__v_get(m, "platform");
        field(f, "<div class=\"card\"><h3>", m, "label");
        fprintf(f, "</h3>");
        if (!p) {
            field(f, "<div class=\"err\">", m, "error");
            fprintf(f, "</div></div>\n");
            continue;
        }
        field(f, "<div>platform <b>", p, "platform");
        fprintf(f, "</b>%s</div><div>device <b>",
                attn__v_bool(p, "simulated") ? " (simulated)" : "");
        esc(f, attn__v_str(p, "device"));
        field(f, "</b></div><div>capability <b>", p, "capability");
        fprintf(f, "</b></div><div>installed: ");
        size_t ni = attn__v_len(p, "installed");
        for (size_t k = 0; k < ni; k++) {
            fprintf(f, "%s<code>", k ? " " : "");
            esc(f, attn__json_string(attn__v_at(p, "installed", k)));
            fprintf(f, "</code>");
        }
        if (!ni) fprintf(f, "<i>none</i>");
        fprintf(f, "</div>");
        for (size_t g = 0; g < attn__v_len(m, "priorities"); g++) {
            const attn__json *gr = attn__v_at(m, "priorities", g);
            fprintf(f, "<div class=\"group\">priority list for group %lld (",
                    attn__v_int(gr, "group", 0));
            esc(f, attn__v_str(gr, "kind"));
            fprintf(f, ", head %lld):<ol>", attn__v_int(gr, "head_size", 0));
            for (size_t k = 0; k < attn__v_len(gr, "priorities"); k++) {
                fprintf(f, "<li><code>");
                esc(f, attn__json_string(attn__v_at(gr, "priorities", k)));
                fprintf(f, "</code></li>");
            }
            fprintf(f, "</ol></div>");
        }
        fprintf(f, "</div>\n");
    }
    fprintf(f, "</div></section>\n");
}

static void engine_block(FILE *f, const attn__json *eng)
{
    if (attn__v_len(eng, "groups") == 0) {
        fprintf(f, "<div class=\"group\"><span class=\"badge b-ok\">engine ready</span> no paged "
                   "KV cache (encoder-only attention runs on each pass's own keys and values)"
                   "</div>");
        return;
    }
    fprintf(f,
            "<div class=\"group\"><span class=\"badge b-ok\">engine ready</span> block size "
            "%lld <span class=\"muted\">(",
            attn__v_int(eng, "block_size", 0));
    esc(f, attn__v_str(eng, "block_size_source"));
    fprintf(f,
            ")</span>, %lld blocks per KV group<table><tr><th>KV group</th><th>backend</th>"
            "<th>cache</th><th>builder</th></tr>",
            attn__v_int(eng, "num_blocks", 0));
    for (size_t k = 0; k < attn__v_len(eng, "groups"); k++) {
        const attn__json *g = attn__v_at(eng, "groups", k);
        fprintf(f, "<tr><td>%lld (layers ", attn__v_int(g, "index", 0));
        esc(f, attn__v_str(g, "layers_text"));
        field(f, ")</td><td>", g, "backend");
        field(f, "</td><td><code>", g, "layout");
        field(f, " ", g, "kv_shape_text");
        field(f, " ", g, "kv_elem");
        field(f, "</code></td><td>", g, "builder");
        fprintf(f, "</td></tr>");
    }
    field(f, "</table><div class=\"muted\">attention math: ", eng, "math");
    fprintf(f, "</div></div>");
}

static void selection_card(FILE *f, const attn__json *m)
{
    const attn__json *model = attn__v_get(m, "model");
    field(f, "<div class=\"card\"><h3>", m, "label");
    fprintf(f, "</h3>");
    if (model) {
        field(f, "<div>model <b>", model, "name");
        field(f, "</b> <span class=\"muted\">(", model, "model_type");
        field(f, ", ", model, "dtype");
        fprintf(f, ", %lld layers)</span></div>", attn__v_int(model, "num_layers", 0));
    }
    for (size_t g = 0; g < attn__v_len(m, "groups"); g++) {
        const attn__json *gr = attn__v_at(m, "groups", g);
        fprintf(f, "<div class=\"group\"><div><b>group %lld</b> ", attn__v_int(gr, "group", 0));
        esc(f, attn__v_str(gr, "kind"));
        fprintf(f, " &middot; %lld layers (", attn__v_int(gr, "num_layers", 0));
        esc(f, attn__v_str(gr, "layers"));
        fprintf(f, ") &middot; head %lld", attn__v_int(gr, "head_size", 0));
        if (attn__v_int(gr, "sliding_window", 0) > 0)
            fprintf(f, " &middot; window %lld", attn__v_int(gr, "sliding_window", 0));
        const char *req = attn__v_str(gr, "requested");
        if (req[0]) {
            fprintf(f, " &middot; requested <code>");
            esc(f, req);
            fprintf(f, "</code>");
        }
        fprintf(f, "</div>");
        if (attn__v_bool(gr, "ok")) {
            field(f, "<div><span class=\"badge b-ok\">", gr, "selected");
            field(f, "</span></div><div class=\"muted\">code: <code>", gr, "locator");
            fprintf(f, "</code></div>");
        } else {
            field(f, "<div class=\"err\">", gr, "message");
            fprintf(f, "</div>");
        }
        field(f, "<div class=\"muted\" style=\"margin:4px 0\"><code>", gr, "selector_config");
        fprintf(f, "</code></div>");
        fprintf(f, "<table><tr><th>#</th><th>backend</th><th>verdict</th></tr>");
        for (size_t c = 0; c < attn__v_len(gr, "candidates"); c++) {
            const attn__json *ca = attn__v_at(gr, "candidates", c);
            bool chosen = attn__v_bool(ca, "chosen"), valid = attn__v_bool(ca, "valid");
            long long pri = attn__v_int(ca, "priority", -1);
            fprintf(f, "<tr class=\"%s\"><td>", chosen ? "chosen" : valid ? "" : "rej");
            if (pri >= 0)
                fprintf(f, "%lld", pri);
            else
                fprintf(f, "req");
            field(f, "</td><td>", ca, "name");
            fprintf(f, "</td><td>");
            if (chosen) {
                fprintf(f, "chosen");
            } else if (valid) {
                fprintf(f, "valid, lower priority");
            } else {
                fprintf(f, "rejected: ");
                for (size_t r = 0; r < attn__v_len(ca, "reasons"); r++) {
                    fprintf(f, "%s", r ? "; " : "");
                    esc(f, attn__json_string(attn__v_at(ca, "reasons", r)));
                }
            }
            fprintf(f, "</td></tr>");
        }
        fprintf(f, "</table></div>");
    }
    const attn__json *eng = attn__v_get(m, "engine");
    if (eng) engine_block(f, eng);
    if (!attn__v_bool(m, "ok")) {
        fprintf(f, "<div class=\"group\"><span class=\"badge b-bad\">startup failed</span>"
                   "<div class=\"err\">");
        esc(f, attn__v_str(m, "error"));
        fprintf(f, "</div></div>");
    }
    fprintf(f, "</div>\n");
}

static void stage3(FILE *f, const attn__json *st)
{
    section_open(f, st);
    grid_open(f, attn__v_len(st, "machines"));
    for (size_t i = 0; i < attn__v_len(st, "machines"); i++)
        selection_card(f, attn__v_at(st, "machines", i));
    fprintf(f, "</div></section>\n");
}

/* Bar chart of tokens per step for one machine. */
static void tokens_svg(FILE *f, const attn__json *m, long long steps)
{
    long long maxt = 1;
    for (size_t k = 0; k < attn__v_len(m, "counters"); k++) {
        long long t = attn__v_int(attn__v_at(m, "counters", k), "num_tokens", 0);
        if (t > maxt) maxt = t;
    }
    const int W = 300, H = 60;
    double bw = steps > 0 ? (double)W / (double)steps : W;
    fprintf(f,
            "<svg width=\"100%%\" viewBox=\"0 0 %d %d\" role=\"img\">"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f1f3f7\"/>",
            W, H + 14, W, H);
    for (size_t k = 0; k < attn__v_len(m, "counters"); k++) {
        const attn__json *c = attn__v_at(m, "counters", k);
        long long s = attn__v_int(c, "step", 0), t = attn__v_int(c, "num_tokens", 0);
        double h = (double)H * (double)t / (double)maxt;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#3b6fb6\"/>",
                (double)s * bw + 0.5, H - h, bw > 2 ? bw - 1 : bw, h);
    }
    fprintf(f,
            "<text x=\"2\" y=\"%d\" font-size=\"10\" fill=\"#555\">tokens per step (max %lld)"
            "</text></svg>",
            H + 12, maxt);
}

static void stage4(FILE *f, const attn__json *st, long long steps)
{
    section_open(f, st);
    grid_open(f, attn__v_len(st, "machines"));
    for (size_t i = 0; i < attn__v_len(st, "machines"); i++) {
        const attn__json *m = attn__v_at(st, "machines", i);
        field(f, "<div class=\"card\"><h3>", m, "label");
        fprintf(f, "</h3>");
        tokens_svg(f, m, steps);
        if (attn__v_len(m, "steps") == 0) fprintf(f, "<div class=\"muted\">no step served</div>");
        for (size_t k = 0; k < attn__v_len(m, "steps"); k++) {
            const attn__json *sd = attn__v_at(m, "steps", k);
            const attn__json *b = attn__v_get(sd, "built");
            const attn__json *c = attn__v_get(b, "common");
            fprintf(f, "<div class=\"group\"><b>step %lld</b>: %lld requests, %lld tokens",
                    attn__v_int(sd, "step", 0), attn__v_int(c, "num_reqs", 0),
                    attn__v_int(c, "num_actual_tokens", 0));
            fprintf(f, "<table>");
            static const char *const rows[] = {"query_start_loc", "seq_lens", "block_table"};
            for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                fprintf(f, "<tr><th>%s</th><td><code>", rows[r]);
                compact(f, attn__v_get(c, rows[r]));
                fprintf(f, "</code></td></tr>");
            }
            const attn__json *sm = attn__v_get(c, "slot_mapping");
            fprintf(f, "<tr><th>slot_mapping</th><td>%lld slots: <code>",
                    attn__v_int(sm, "count", 0));
            esc(f, attn__v_str(sm, "ranges"));
            fprintf(f, "</code></td></tr>");
            if (attn__v_str(b, "fresh")[0]) {
                field(f, "<tr><th>fresh</th><td>", b, "fresh");
                fprintf(f, "</td></tr>");
            }
            fprintf(f, "</table>");
            for (size_t g = 0; g < attn__v_len(b, "groups"); g++) {
                const attn__json *gr = attn__v_at(b, "groups", g);
                fprintf(f, "<div>KV group %lld <b>", attn__v_int(gr, "group", 0));
                esc(f, attn__v_str(gr, "backend"));
                field(f, "</b> <span class=\"muted\">", gr, "builder");
                field(f, ", ", gr, "how");
                fprintf(f, "</span><pre>");
                compact(f, attn__v_get(gr, "metadata"));
                fprintf(f, "</pre></div>");
            }
            const attn__json *at = attn__v_get(b, "attention");
            if (at) {
                field(f, "<div class=\"muted\">attention: ", at, "text");
                fprintf(f, "</div>");
            }
            fprintf(f, "</div>");
        }
        fprintf(f, "</div>\n");
    }
    fprintf(f, "</div></section>\n");
}

/* Lanes of served steps per machine, with event markers. */
static void timeline_svg(FILE *f, const attn__json *st4, const attn__json *st5, long long steps)
{
    size_t n = attn__v_len(st4, "machines");
    const int left = 90, W = 900, lane = 26;
    double cw = steps > 0 ? (double)(W - left - 10) / (double)steps : 10;
    int H = (int)n * lane + 30;
    fprintf(f,
            "<svg width=\"100%%\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "style=\"max-width:1000px\">",
            W, H);
    for (size_t i = 0; i < n; i++) {
        const attn__json *m = attn__v_at(st4, "machines", i);
        int y = (int)i * lane + 6;
        fprintf(f, "<text x=\"4\" y=\"%d\" font-size=\"12\" font-family=\"sans-serif\">", y + 14);
        esc(f, attn__v_str(m, "label"));
        fprintf(f,
                "</text><rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"18\" "
                "fill=\"#fbdcd9\"/>",
                left, y, cw * (double)steps);
        for (size_t k = 0; k < attn__v_len(m, "counters"); k++) {
            long long s = attn__v_int(attn__v_at(m, "counters", k), "step", 0);
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"#3b8e3a\"/>",
                    left + (double)s * cw + 0.5, y, cw > 2 ? cw - 1 : cw);
        }
    }
    for (size_t e = 0; e < attn__v_len(st5, "events"); e++) {
        const attn__json *ev = attn__v_at(st5, "events", e);
        double x = left + (double)attn__v_int(ev, "at_step", 0) * cw;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"2\" x2=\"%.1f\" y2=\"%d\" stroke=\"#b3261e\" "
                "stroke-width=\"2\" stroke-dasharray=\"4 3\"/>"
                "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#b3261e\" "
                "font-family=\"sans-serif\">step %lld: %s ",
                x, x, H - 14, x + 3, H - 3, attn__v_int(ev, "at_step", 0),
                attn__v_str(ev, "action"));
        esc(f, attn__v_str(ev, "machine"));
        fputs(attn__v_bool(ev, "ok") ? "" : " (failed at startup)", f);
        fprintf(f, "</text>");
    }
    fprintf(f, "</svg><div class=\"muted\">green: a step served; red: no engine (stopped, or "
               "failed at startup)</div>");
}

static void stage5(FILE *f, const attn__json *st, const attn__json *st4, long long steps)
{
    section_open(f, st);
    timeline_svg(f, st4, st, steps);
    for (size_t e = 0; e < attn__v_len(st, "events"); e++) {
        const attn__json *ev = attn__v_at(st, "events", e);
        fprintf(f, "<h3>step %lld: %s ", attn__v_int(ev, "at_step", 0), attn__v_str(ev, "action"));
        esc(f, attn__v_str(ev, "machine"));
        if (attn__v_str(ev, "changes")[0]) {
            field(f, " with <code>", ev, "changes");
            fprintf(f, "</code>");
        }
        fprintf(f, "</h3>");
        size_t no = attn__v_len(ev, "others");
        grid_open(f, no + 1);
        const attn__json *su = attn__v_get(ev, "startup");
        if (su) {
            selection_card(f, su);
        } else {
            field(f, "<div class=\"card\"><h3>", ev, "machine");
            fprintf(f, "</h3>stopped</div>");
        }
        for (size_t k = 0; k < no; k++) {
            const attn__json *o = attn__v_at(ev, "others", k);
            field(f, "<div class=\"card\"><h3>", o, "label");
            fprintf(f,
                    "</h3><div><span class=\"badge b-ok\">kept going</span></div>"
                    "<div>step counter %lld &rarr; %lld (+%lld)</div>"
                    "<div>%lld requests admitted after the event</div><div class=\"muted\">",
                    attn__v_int(o, "steps_at_event", 0), attn__v_int(o, "steps_at_end", 0),
                    attn__v_int(o, "advanced", 0), attn__v_int(o, "admitted_after", 0));
            esc(f, attn__v_str(o, "state"));
            fprintf(f, "</div></div>");
        }
        field(f, "</div><p>", ev, "machine");
        fprintf(f, " after the event: %lld steps served, %lld requests admitted.</p>",
                attn__v_int(ev, "steps_after", 0), attn__v_int(ev, "admitted_after", 0));
    }
    if (attn__v_len(st, "events") == 0)
        fprintf(f, "<p class=\"muted\">No events in this scenario.</p>");
    fprintf(f, "</section>\n");
}

static void summary(FILE *f, const attn__json *doc)
{
    fprintf(f, "<section id=\"summary\"><h2>Summary</h2><table><tr><th>machine</th><th>device"
               "</th><th>model</th><th>head size</th><th>backend</th><th>state</th><th>steps"
               "</th><th>requests admitted</th></tr>");
    for (size_t i = 0; i < attn__v_len(doc, "summary"); i++) {
        const attn__json *s = attn__v_at(doc, "summary", i);
        field(f, "<tr><td>", s, "machine");
        field(f, "</td><td>", s, "device");
        field(f, "</td><td>", s, "model");
        field(f, "</td><td>", s, "head_size");
        field(f, "</td><td><b>", s, "backend");
        fprintf(f, "</b></td><td class=\"%s\">", attn__v_bool(s, "serving") ? "ok" : "bad");
        esc(f, attn__v_str(s, "state"));
        fprintf(f, "</td><td>%lld</td><td>%lld</td></tr>", attn__v_int(s, "steps_served", 0),
                attn__v_int(s, "requests_admitted", 0));
    }
    fprintf(f, "</table></section>\n");
}

attn_status attn__scenario_write_html(const char *doc_text, FILE *f)
{
    ATTN__CHECK_NULL(doc_text);
    attn__json *doc = NULL;
    char err[128];
    if (attn__json_parse(doc_text, strlen(doc_text), &doc, err, sizeof err) != ATTN_OK)
        return attn_set_error(ATTN_INTERNAL, "run document: %s", err);
    const attn__json *sc = attn__v_get(doc, "scenario");
    long long steps = attn__v_int(sc, "steps", 0);
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
               "<title>attn simulate: ");
    esc(f, attn__v_str(sc, "name"));
    fprintf(f, "</title><style>%s</style></head><body>\n<header><h1>attn simulate: ", k_css);
    esc(f, attn__v_str(sc, "name"));
    field(f, "</h1><p>", sc, "description");
    fprintf(f,
            "</p><p>%lld steps on one clock. Backend selection happens once per machine, at "
            "startup; nothing about a request decides it.</p></header>\n",
            steps);
    const attn__json *s1 = attn__v_stage(doc, 1), *s2 = attn__v_stage(doc, 2),
                     *s3 = attn__v_stage(doc, 3), *s4 = attn__v_stage(doc, 4),
                     *s5 = attn__v_stage(doc, 5);
    if (s1) stage1(f, s1, s2);
    if (s2) stage2(f, s2);
    if (s3) stage3(f, s3);
    if (s4) stage4(f, s4, steps);
    if (s5) stage5(f, s5, s4, steps);
    summary(f, doc);
    fprintf(f, "</body></html>\n");
    attn__json_free(doc);
    return ferror(f) ? attn_set_error(ATTN_IO_ERROR, "writing the HTML page failed") : ATTN_OK;
}
