#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"
#include "util/utf8.h"

void attn__sb_init(attn__sb *sb)
{
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->oom = false;
}

void attn__sb_free(attn__sb *sb)
{
    free(sb->data);
    attn__sb_init(sb);
}

static bool attn__sb_reserve(attn__sb *sb, size_t extra)
{
    if (sb->oom) return false;
    if (sb->len + extra + 1 <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1)
        cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p) {
        sb->oom = true;
        return false;
    }
    sb->data = p;
    sb->cap = cap;
    return true;
}

char *attn__sb_take(attn__sb *sb)
{
    if (sb->oom) {
        attn__sb_free(sb);
        return NULL;
    }
    if (!attn__sb_reserve(sb, 0)) return NULL;
    sb->data[sb->len] = '\0';
    char *p = sb->data;
    attn__sb_init(sb);
    return p;
}

void attn__sb_putn(attn__sb *sb, const char *s, size_t n)
{
    if (!attn__sb_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void attn__sb_putc(attn__sb *sb, char c)
{
    attn__sb_putn(sb, &c, 1);
}

void attn__sb_puts(attn__sb *sb, const char *s)
{
    attn__sb_putn(sb, s, strlen(s));
}

void attn__sb_printf(attn__sb *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        attn__sb_putn(sb, tmp, (size_t)n);
        return;
    }
    if (!attn__sb_reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void attn__sb_json_str(attn__sb *sb, const char *s)
{
    if (!s) {
        attn__sb_puts(sb, "null");
        return;
    }
    attn__sb_putc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': attn__sb_puts(sb, "\\\""); break;
        case '\\': attn__sb_puts(sb, "\\\\"); break;
        case '\n': attn__sb_puts(sb, "\\n"); break;
        case '\r': attn__sb_puts(sb, "\\r"); break;
        case '\t': attn__sb_puts(sb, "\\t"); break;
        case '\b': attn__sb_puts(sb, "\\b"); break;
        case '\f': attn__sb_puts(sb, "\\f"); break;
        default:
            if (*p < 0x20) {
                attn__sb_printf(sb, "\\u%04x", *p);
            } else if (*p < 0x80) {
                attn__sb_putc(sb, (char)*p);
            } else { /* JSON output is always valid UTF-8: bad bytes become U+FFFD */
                int n = attn__utf8_len(p, strnlen((const char *)p, 4));
                if (n == 0) {
                    attn__sb_puts(sb, "\\ufffd");
                } else {
                    for (int k = 0; k < n; k++)
                        attn__sb_putc(sb, (char)p[k]);
                    p += n - 1;
                }
            }
        }
    }
    attn__sb_putc(sb, '"');
}

void attn__sb_py_str(attn__sb *sb, const char *s)
{
    /* Python's repr picks double quotes when the text has a single quote and
     * no double quote. */
    char q = '\'';
    if (strchr(s, '\'') && !strchr(s, '"')) q = '"';
    attn__sb_putc(sb, q);
    for (const char *p = s; *p; p++) {
        if (*p == q || *p == '\\') attn__sb_putc(sb, '\\');
        if (*p == '\n') {
            attn__sb_puts(sb, "\\n");
            continue;
        }
        attn__sb_putc(sb, *p);
    }
    attn__sb_putc(sb, q);
}

void attn__jw_init(attn__jw *w, attn__sb *sb, bool pretty)
{
    w->sb = sb;
    w->depth = 0;
    w->pretty = pretty;
    w->first[0] = true;
    w->after_key = false;
}

static void attn__jw_indent(attn__jw *w)
{
    if (!w->pretty) return;
    attn__sb_putc(w->sb, '\n');
    for (int i = 0; i < w->depth; i++)
        attn__sb_puts(w->sb, "  ");
}

/* Separator before a value (or key) at the current depth. */
static void attn__jw_sep(attn__jw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0) {
        if (!w->first[w->depth]) attn__sb_putc(w->sb, ',');
        w->first[w->depth] = false;
        attn__jw_indent(w);
    }
}

static void attn__jw_open(attn__jw *w, char c)
{
    attn__jw_sep(w);
    attn__sb_putc(w->sb, c);
    if (w->depth + 1 < ATTN__JW_MAX_DEPTH) w->depth++;
    w->first[w->depth] = true;
}

static void attn__jw_close(attn__jw *w, char c)
{
    bool empty = w->first[w->depth];
    if (w->depth > 0) w->depth--;
    if (!empty) attn__jw_indent(w);
    attn__sb_putc(w->sb, c);
}

void attn__jw_obj_begin(attn__jw *w)
{
    attn__jw_open(w, '{');
}
void attn__jw_obj_end(attn__jw *w)
{
    attn__jw_close(w, '}');
}
void attn__jw_arr_begin(attn__jw *w)
{
    attn__jw_open(w, '[');
}
void attn__jw_arr_end(attn__jw *w)
{
    attn__jw_close(w, ']');
}

void attn__jw_key(attn__jw *w, const char *key)
{
    attn__jw_sep(w);
    attn__sb_json_str(w->sb, key);
    attn__sb_puts(w->sb, w->pretty ? ": " : ":");
    w->after_key = true;
}

void attn__jw_str(attn__jw *w, const char *v)
{
    attn__jw_sep(w);
    attn__sb_json_str(w->sb, v);
}

void attn__jw_int(attn__jw *w, long long v)
{
    attn__jw_sep(w);
    attn__sb_printf(w->sb, "%lld", v);
}

void attn__jw_num(attn__jw *w, double v)
{
    attn__jw_sep(w);
    if (!isfinite(v))
        attn__sb_puts(w->sb, "null");
    else
        attn__sb_printf(w->sb, "%.6g", v);
}

void attn__jw_bool(attn__jw *w, bool v)
{
    attn__jw_sep(w);
    attn__sb_puts(w->sb, v ? "true" : "false");
}

void attn__jw_null(attn__jw *w)
{
    attn__jw_sep(w);
    attn__sb_puts(w->sb, "null");
}

void attn__jw_raw(attn__jw *w, const char *json)
{
    attn__jw_sep(w);
    attn__sb_puts(w->sb, json);
}
