/* Recursive-descent JSON parser. Nesting depth is bounded so hostile input
 * cannot exhaust the stack; strings are decoded to UTF-8 (\u escapes and
 * surrogate pairs included). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/check.h"
#include "util/utf8.h"

#define ATTN__JSON_MAX_DEPTH 200

struct attn__json {
    attn__json_type type;
    bool b;
    double num;
    char *str;
    size_t n, cap;
    attn__json **items;
    char **keys;
};

typedef struct {
    const char *s;
    size_t len, pos;
    char *err;
    size_t errsz;
    bool failed;
} attn__jp;

static void attn__jp_error(attn__jp *p, const char *what)
{
    if (p->failed) return;
    p->failed = true;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    if (p->err && p->errsz) snprintf(p->err, p->errsz, "line %zu, column %zu: %s", line, col, what);
}

static void attn__jp_ws(attn__jp *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            p->pos++;
        else
            break;
    }
}

static attn__json *attn__jv_new(attn__json_type t)
{
    attn__json *v = calloc(1, sizeof *v);
    if (v) v->type = t;
    return v;
}

void attn__json_free(attn__json *v)
{
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        attn__json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

static bool attn__jv_push(attn__json *v, char *key, attn__json *item)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        attn__json **items = realloc(v->items, cap * sizeof *items);
        if (!items) return false;
        v->items = items;
        if (v->type == ATTN_JSON_OBJECT) {
            char **keys = realloc(v->keys, cap * sizeof *keys);
            if (!keys) return false;
            v->keys = keys;
        }
        v->cap = cap;
    }
    v->items[v->n] = item;
    if (v->type == ATTN_JSON_OBJECT) v->keys[v->n] = key;
    v->n++;
    return true;
}

static void attn__utf8(char *out, size_t *o, unsigned cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xC0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xE0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*o)++] = (char)(0xF0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int attn__hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static char *attn__jp_string(attn__jp *p)
{
    /* p->s[p->pos] == '"' */
    p->pos++;
    size_t start = p->pos;
    size_t end = start;
    while (end < p->len && p->s[end] != '"') {
        if (p->s[end] == '\\') end++;
        end++;
    }
    if (end >= p->len) {
        attn__jp_error(p, "unterminated string");
        return NULL;
    }
    char *out = malloc(end - start + 1);
    if (!out) {
        attn__jp_error(p, "out of memory");
        return NULL;
    }
    size_t o = 0;
    while (p->pos < end) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c < 0x20) {
            attn__jp_error(p, "control character in string");
            free(out);
            return NULL;
        }
        if (c >= 0x80) { /* raw UTF-8: copied only when well-formed */
            int n = attn__utf8_len((const unsigned char *)p->s + p->pos, end - p->pos);
            if (n <= 0) {
                attn__jp_error(p, "invalid UTF-8 in string");
                free(out);
                return NULL;
            }
            memcpy(out + o, p->s + p->pos, (size_t)n);
            o += (size_t)n;
            p->pos += (size_t)n;
            continue;
        }
        if (c != '\\') {
            out[o++] = (char)c;
            p->pos++;
            continue;
        }
        p->pos++;
        char e = p->s[p->pos++];
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (p->pos + 4 > end || attn__hex4(p->s + p->pos, &cp)) {
                attn__jp_error(p, "bad \\u escape");
                free(out);
                return NULL;
            }
            p->pos += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && p->pos + 6 <= end && p->s[p->pos] == '\\' &&
                p->s[p->pos + 1] == 'u') {
                unsigned lo;
                if (!attn__hex4(p->s + p->pos + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p->pos += 6;
                }
            }
            /* Strings are NUL-terminated C strings ("a\u0000b" would silently
             * become "a"), and a lone surrogate is no character: both refused. */
            if (cp == 0 || (cp >= 0xD800 && cp < 0xE000)) {
                attn__jp_error(p, cp == 0 ? "\\u0000 is not supported in strings"
                                          : "lone UTF-16 surrogate in \\u escape");
                free(out);
                return NULL;
            }
            attn__utf8(out, &o, cp);
            break;
        }
        default:
            attn__jp_error(p, "bad escape in string");
            free(out);
            return NULL;
        }
    }
    out[o] = '\0';
    p->pos = end + 1;
    return out;
}

static attn__json *attn__jp_value(attn__jp *p, int depth);

static attn__json *attn__jp_container(attn__jp *p, int depth, bool object)
{
    attn__json *v = attn__jv_new(object ? ATTN_JSON_OBJECT : ATTN_JSON_ARRAY);
    if (!v) {
        attn__jp_error(p, "out of memory");
        return NULL;
    }
    char close = object ? '}' : ']';
    p->pos++;
    attn__jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        attn__jp_ws(p);
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                attn__jp_error(p, "expected a string key");
                goto fail;
            }
            key = attn__jp_string(p);
            if (!key) goto fail;
            attn__jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                attn__jp_error(p, "expected ':'");
                goto fail;
            }
            p->pos++;
        }
        attn__json *item = attn__jp_value(p, depth + 1);
        if (!item) {
            free(key);
            goto fail;
        }
        if (!attn__jv_push(v, key, item)) {
            free(key);
            attn__json_free(item);
            attn__jp_error(p, "out of memory");
            goto fail;
        }
        attn__jp_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return v;
        }
        attn__jp_error(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        goto fail;
    }
fail:
    attn__json_free(v);
    return NULL;
}

static attn__json *attn__jp_number(attn__jp *p)
{
    size_t start = p->pos;
    const char *s = p->s;
    size_t i = p->pos;
    if (i < p->len && s[i] == '-') i++;
    if (i >= p->len || !(s[i] >= '0' && s[i] <= '9')) {
        attn__jp_error(p, "invalid number");
        return NULL;
    }
    if (s[i] == '0') {
        i++;
    } else {
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->len && s[i] == '.') {
        i++;
        if (i >= p->len || !(s[i] >= '0' && s[i] <= '9')) {
            attn__jp_error(p, "invalid number");
            return NULL;
        }
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len || !(s[i] >= '0' && s[i] <= '9')) {
            attn__jp_error(p, "invalid number");
            return NULL;
        }
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    char buf[64];
    size_t n = i - start;
    if (n >= sizeof buf) {
        attn__jp_error(p, "number too long");
        return NULL;
    }
    memcpy(buf, s + start, n);
    buf[n] = '\0';
    attn__json *v = attn__jv_new(ATTN_JSON_NUMBER);
    if (!v) {
        attn__jp_error(p, "out of memory");
        return NULL;
    }
    v->num = strtod(buf, NULL);
    p->pos = i;
    return v;
}

static bool attn__jp_lit(attn__jp *p, const char *lit)
{
    size_t n = strlen(lit);
    if (p->pos + n <= p->len && !memcmp(p->s + p->pos, lit, n)) {
        p->pos += n;
        return true;
    }
    return false;
}

static attn__json *attn__jp_value(attn__jp *p, int depth)
{
    if (depth > ATTN__JSON_MAX_DEPTH) {
        attn__jp_error(p, "nesting too deep");
        return NULL;
    }
    attn__jp_ws(p);
    if (p->pos >= p->len) {
        attn__jp_error(p, "unexpected end of input");
        return NULL;
    }
    char c = p->s[p->pos];
    if (c == '{') return attn__jp_container(p, depth, true);
    if (c == '[') return attn__jp_container(p, depth, false);
    if (c == '"') {
        char *s = attn__jp_string(p);
        if (!s) return NULL;
        attn__json *v = attn__jv_new(ATTN_JSON_STRING);
        if (!v) {
            free(s);
            attn__jp_error(p, "out of memory");
            return NULL;
        }
        v->str = s;
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return attn__jp_number(p);
    attn__json *v = NULL;
    if (attn__jp_lit(p, "true")) {
        v = attn__jv_new(ATTN_JSON_BOOL);
        if (v) v->b = true;
    } else if (attn__jp_lit(p, "false")) {
        v = attn__jv_new(ATTN_JSON_BOOL);
    } else if (attn__jp_lit(p, "null")) {
        v = attn__jv_new(ATTN_JSON_NULL);
    } else {
        attn__jp_error(p, "unexpected character");
        return NULL;
    }
    if (!v) attn__jp_error(p, "out of memory");
    return v;
}

attn_status attn__json_parse(const char *text, size_t len, attn__json **out, char *err,
                             size_t errsz)
{
    ATTN__CHECK_NULL(text);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn__jp p = {.s = text, .len = len, .pos = 0, .err = err, .errsz = errsz};
    if (err && errsz) err[0] = '\0';
    attn__json *v = attn__jp_value(&p, 0);
    if (v) {
        attn__jp_ws(&p);
        if (p.pos != p.len) {
            attn__jp_error(&p, "trailing characters after the JSON value");
            attn__json_free(v);
            v = NULL;
        }
    }
    if (!v) return attn_set_error(ATTN_PARSE_ERROR, "JSON %s", err ? err : "parse error");
    *out = v;
    return ATTN_OK;
}

attn_status attn__read_file(const char *path, char **text, size_t *len)
{
    ATTN__CHECK_NULL(path);
    ATTN__CHECK_NULL(text);
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return attn_set_error(ATTN_IO_ERROR, "cannot open '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 4096) {
            size_t ncap = cap ? cap * 2 : 8192;
            if (ncap > ((size_t)1 << 30)) {
                free(buf);
                fclose(f);
                return attn_set_error(ATTN_IO_ERROR, "'%s' is too large", path);
            }
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                fclose(f);
                return attn_set_error(ATTN_OUT_OF_MEMORY, "reading '%s'", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return attn_set_error(ATTN_IO_ERROR, "error reading '%s'", path);
    }
    buf[n] = '\0';
    *text = buf;
    if (len) *len = n;
    return ATTN_OK;
}

attn__json_type attn__json_type_of(const attn__json *v)
{
    return v ? v->type : ATTN_JSON_NULL;
}

const char *attn__json_type_name(attn__json_type t)
{
    static const char *const n[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < 6 ? n[t] : "?";
}

bool attn__json_bool(const attn__json *v)
{
    return v && v->type == ATTN_JSON_BOOL && v->b;
}

double attn__json_number(const attn__json *v)
{
    return v && v->type == ATTN_JSON_NUMBER ? v->num : NAN;
}

bool attn__json_is_int(const attn__json *v, long long *out)
{
    if (!v || v->type != ATTN_JSON_NUMBER) return false;
    double d = v->num;
    if (!(d >= -9.0e18 && d <= 9.0e18) || floor(d) != d) return false;
    if (out) *out = (long long)d;
    return true;
}

const char *attn__json_string(const attn__json *v)
{
    return v && v->type == ATTN_JSON_STRING ? v->str : NULL;
}

size_t attn__json_len(const attn__json *v)
{
    return v && (v->type == ATTN_JSON_ARRAY || v->type == ATTN_JSON_OBJECT) ? v->n : 0;
}

const attn__json *attn__json_at(const attn__json *v, size_t i)
{
    return v && i < attn__json_len(v) ? v->items[i] : NULL;
}

const char *attn__json_key_at(const attn__json *v, size_t i)
{
    return v && v->type == ATTN_JSON_OBJECT && i < v->n ? v->keys[i] : NULL;
}

const attn__json *attn__json_get(const attn__json *v, const char *key)
{
    if (!v || v->type != ATTN_JSON_OBJECT || !key) return NULL;
    for (size_t i = v->n; i-- > 0;)
        if (!strcmp(v->keys[i], key)) return v->items[i];
    return NULL;
}

void attn__json_write(attn__jw *w, const attn__json *v)
{
    long long x;
    switch (v ? attn__json_type_of(v) : ATTN_JSON_NULL) {
    case ATTN_JSON_NULL: attn__jw_null(w); break;
    case ATTN_JSON_BOOL: attn__jw_bool(w, attn__json_bool(v)); break;
    case ATTN_JSON_NUMBER:
        if (attn__json_is_int(v, &x))
            attn__jw_int(w, x);
        else
            attn__jw_num(w, attn__json_number(v));
        break;
    case ATTN_JSON_STRING: attn__jw_str(w, attn__json_string(v)); break;
    case ATTN_JSON_ARRAY:
        attn__jw_arr_begin(w);
        for (size_t i = 0; i < attn__json_len(v); i++)
            attn__json_write(w, attn__json_at(v, i));
        attn__jw_arr_end(w);
        break;
    case ATTN_JSON_OBJECT:
        attn__jw_obj_begin(w);
        for (size_t i = 0; i < attn__json_len(v); i++) {
            attn__jw_key(w, attn__json_key_at(v, i));
            attn__json_write(w, attn__json_at(v, i));
        }
        attn__jw_obj_end(w);
        break;
    }
}
