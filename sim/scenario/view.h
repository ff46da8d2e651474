/* Views of a run document (the JSON written by attn__scenario_run): the
 * staged text report and the self-contained HTML page. Both read only the
 * document, so what --json emits is exactly what they show. */
#ifndef ATTN_SCENARIO_VIEW_H
#define ATTN_SCENARIO_VIEW_H

#include <stdbool.h>
#include <stdio.h>

#include "attn/status.h"
#include "util/json.h"
#include "util/strbuf.h"

/* Small readers over a parsed document: absent, null or mistyped -> "" /
 * def / false / NULL / 0. */
const char *attn__v_str(const attn__json *o, const char *key);
long long attn__v_int(const attn__json *o, const char *key, long long def);
bool attn__v_bool(const attn__json *o, const char *key);
const attn__json *attn__v_get(const attn__json *o, const char *key);
size_t attn__v_len(const attn__json *o, const char *key);
const attn__json *attn__v_at(const attn__json *o, const char *key, size_t i);
/* Compact one-line JSON text of a value appended to sb. */
void attn__v_compact(attn__sb *sb, const attn__json *v);
/* The stage object numbered n, or NULL. */
const attn__json *attn__v_stage(const attn__json *doc, int n);

/* The staged text report. */
attn_status attn__scenario_print_text(const char *doc, FILE *f);
/* One self-contained HTML page (inline CSS and SVG, no script, no network). */
attn_status attn__scenario_write_html(const char *doc, FILE *f);

#endif
