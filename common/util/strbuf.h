/* Growable string buffer and a small JSON writer on top of it. An allocation
 * failure sets `oom` and turns later appends into no-ops, so callers check
 * once at the end. */
#ifndef ATTN_UTIL_STRBUF_H
#define ATTN_UTIL_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct attn__sb {
    char *data;
    size_t len, cap;
    bool oom;
} attn__sb;

void attn__sb_init(attn__sb *sb);
void attn__sb_free(attn__sb *sb);
/* Returns the heap string (caller frees) and resets sb; NULL on oom. */
char *attn__sb_take(attn__sb *sb);
void attn__sb_putc(attn__sb *sb, char c);
void attn__sb_puts(attn__sb *sb, const char *s);
void attn__sb_putn(attn__sb *sb, const char *s, size_t n);
void attn__sb_printf(attn__sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quoted, escaped). NULL -> null. */
void attn__sb_json_str(attn__sb *sb, const char *s);
/* Appends s as a Python str repr element: 'text' (single quotes, escaped). */
void attn__sb_py_str(attn__sb *sb, const char *s);

/* JSON writer: tracks commas; pretty=true indents by two spaces. */
#define ATTN__JW_MAX_DEPTH 64
typedef struct attn__jw {
    attn__sb *sb;
    int depth;
    bool pretty;
    bool first[ATTN__JW_MAX_DEPTH];
    bool after_key;
} attn__jw;

void attn__jw_init(attn__jw *w, attn__sb *sb, bool pretty);
void attn__jw_obj_begin(attn__jw *w);
void attn__jw_obj_end(attn__jw *w);
void attn__jw_arr_begin(attn__jw *w);
void attn__jw_arr_end(attn__jw *w);
void attn__jw_key(attn__jw *w, const char *key);
void attn__jw_str(attn__jw *w, const char *v);
void attn__jw_int(attn__jw *w, long long v);
void attn__jw_num(attn__jw *w, double v); /* non-finite -> null */
void attn__jw_bool(attn__jw *w, bool v);
void attn__jw_null(attn__jw *w);
/* Inserts pre-rendered JSON text as one value. */
void attn__jw_raw(attn__jw *w, const char *json);

#endif
