/* Selector configuration helpers, all walking the one field table
 * (config_fields.h): defaults, equality and hash (the selection cache key),
 * vLLM's repr used in error messages, the selection JSON's "config" object,
 * and setting a field from text (the CLI's options, Python's keywords). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/config.h"
#include "util/abi.h"
#include "util/config_fields.h"
#include "util/error.h"

_Static_assert(sizeof(attn_dtype) == sizeof(int) && sizeof(attn_kv_dtype) == sizeof(int) &&
                   sizeof(attn_attn_type) == sizeof(int),
               "the enum fields are read as int");

#define ATTN__FSIZE_INT          sizeof(int)
#define ATTN__FSIZE_OPT_INT      sizeof(int)
#define ATTN__FSIZE_BOOL         sizeof(bool)
#define ATTN__FSIZE_DTYPE        sizeof(int)
#define ATTN__FSIZE_KV_DTYPE     sizeof(int)
#define ATTN__FSIZE_ATTN_TYPE    sizeof(int)
#define ATTN__FSIZE_RUN_KV_DTYPE sizeof(int)

/* A row names a real member of the size its type reads. */
#define ATTN__CHECK_ROW(name, type, ...)                                                           \
    _Static_assert(sizeof(((attn_selector_config *)0)->name) == ATTN__FSIZE_##type,                \
                   #name " has the size of its field type");
ATTN__CONFIG_FIELDS(ATTN__CHECK_ROW)
#undef ATTN__CHECK_ROW

#define ATTN__ROW(name, type, def, repr, json, flag, arg, lo, hi, doc)                             \
    {{#name, ATTN_FIELD_##type, offsetof(attn_selector_config, name), flag, arg, lo, hi, doc},     \
     (int)(def),                                                                                   \
     repr,                                                                                         \
     json},
const attn__config_row attn__config_rows[] = {ATTN__CONFIG_FIELDS(ATTN__ROW)};
#undef ATTN__ROW
const int attn__config_num_rows = (int)(sizeof attn__config_rows / sizeof attn__config_rows[0]);

int attn_selector_config_num_fields(void)
{
    return attn__config_num_rows;
}

const attn_config_field *attn_selector_config_field(int i)
{
    return i >= 0 && i < attn__config_num_rows ? &attn__config_rows[i].pub : NULL;
}

const attn_config_field *attn_selector_config_field_find(const char *name)
{
    for (int i = 0; name && i < attn__config_num_rows; i++)
        if (!strcmp(attn__config_rows[i].pub.name, name)) return &attn__config_rows[i].pub;
    return NULL;
}

int64_t attn__config_get(const attn_selector_config *c, const attn_config_field *f)
{
    const char *p = (const char *)c + f->offset;
    if (f->type == ATTN_FIELD_BOOL) {
        bool b;
        memcpy(&b, p, sizeof b);
        return b;
    }
    int v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void attn__config_put(attn_selector_config *c, const attn_config_field *f, int64_t v)
{
    char *p = (char *)c + f->offset;
    if (f->type == ATTN_FIELD_BOOL) {
        bool b = v != 0;
        memcpy(p, &b, sizeof b);
    } else {
        int i = (int)v;
        memcpy(p, &i, sizeof i);
    }
}

void attn_selector_config_init(attn_selector_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = (uint32_t)sizeof *cfg;
    for (int i = 0; i < attn__config_num_rows; i++)
        attn__config_put(cfg, &attn__config_rows[i].pub, attn__config_rows[i].def);
}

attn_status attn__config_read(const attn_selector_config *in, attn_selector_config *out)
{
    if (in && in->struct_size == sizeof *out) {
        *out = *in;
        return ATTN_OK;
    }
    attn_selector_config_init(out);
    if (!in) return attn__fail(ATTN_NULL_ARGUMENT, "selector config is NULL");
    if (!attn__struct_size_ok(in->struct_size, ATTN__V1_SELECTOR_CONFIG, sizeof *out))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "selector config struct_size is %u, libattn accepts %zu to %zu (fill it "
                          "with attn_selector_config_init)",
                          in->struct_size, (size_t)ATTN__V1_SELECTOR_CONFIG, sizeof *out);
    attn__struct_read(out, sizeof *out, in, in->struct_size,
                      offsetof(attn_selector_config, struct_size));
    return ATTN_OK;
}

attn_kv_dtype attn_selector_config_run_kv(const attn_selector_config *cfg)
{
    attn_selector_config c;
    if (attn__config_read(cfg, &c) != ATTN_OK) return ATTN_KV_NONE;
    return c.run_kv_cache_dtype != ATTN_KV_NONE ? c.run_kv_cache_dtype : c.kv_cache_dtype;
}

bool attn__config_equal_full(const attn_selector_config *a, const attn_selector_config *b)
{
    for (int i = 0; i < attn__config_num_rows; i++) {
        const attn_config_field *f = &attn__config_rows[i].pub;
        if (attn__config_get(a, f) != attn__config_get(b, f)) return false;
    }
    return true;
}

bool attn_selector_config_equal(const attn_selector_config *a, const attn_selector_config *b)
{
    if (!a || !b) return a == b; /* NULL equals only NULL */
    attn_selector_config ca, cb;
    if (attn__config_read(a, &ca) != ATTN_OK || attn__config_read(b, &cb) != ATTN_OK) return false;
    return attn__config_equal_full(&ca, &cb);
}

uint64_t attn_selector_config_hash(const attn_selector_config *in)
{
    attn_selector_config cur;
    if (!in || attn__config_read(in, &cur) != ATTN_OK) return 0; /* NULL hashes to 0 */
    return attn__config_hash_full(&cur);
}

uint64_t attn__config_hash_full(const attn_selector_config *c)
{
    /* FNV-1a over the fields (not the struct bytes: padding is undefined). */
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < attn__config_num_rows; i++) {
        uint64_t v = (uint64_t)attn__config_get(c, &attn__config_rows[i].pub);
        for (int b = 0; b < 8; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    return h;
}

/* The row at place pos of an order column (repr_pos or json_pos), or NULL. */
static const attn__config_row *attn__row_at(int pos, bool json)
{
    for (int i = 0; i < attn__config_num_rows; i++)
        if ((json ? attn__config_rows[i].json_pos : attn__config_rows[i].repr_pos) == pos)
            return &attn__config_rows[i];
    return NULL;
}

/* snprintf onto the end of buf; *o counts the full length, like snprintf. */
static void attn__cat(char *buf, size_t size, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void attn__cat(char *buf, size_t size, size_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = *o < size ? vsnprintf(buf + *o, size - *o, fmt, ap) : vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) *o += (size_t)n;
}

int attn_selector_config_repr(const attn_selector_config *in, char *buf, size_t size)
{
    if (!buf) size = 0; /* snprintf(NULL, 0) only measures */
    if (!in) return snprintf(buf, size, "None");
    attn_selector_config cur, *c = &cur;
    if (attn__config_read(in, &cur) != ATTN_OK) {
        if (size) buf[0] = '\0';
        return -1;
    }
    size_t o = 0;
    attn__cat(buf, size, &o, "AttentionSelectorConfig(");
    const attn__config_row *r;
    for (int pos = 0; (r = attn__row_at(pos, false)) != NULL; pos++) {
        const attn_config_field *f = &r->pub;
        int64_t v = attn__config_get(c, f);
        attn__cat(buf, size, &o, "%s%s=", pos ? ", " : "", f->name);
        switch (f->type) {
        case ATTN_FIELD_INT: attn__cat(buf, size, &o, "%d", (int)v); break;
        case ATTN_FIELD_OPT_INT:
            if (v > 0)
                attn__cat(buf, size, &o, "%d", (int)v);
            else
                attn__cat(buf, size, &o, "None");
            break;
        case ATTN_FIELD_BOOL: attn__cat(buf, size, &o, "%s", v ? "True" : "False"); break;
        case ATTN_FIELD_DTYPE:
            attn__cat(buf, size, &o, "%s", attn_dtype_torch_name((attn_dtype)v));
            break;
        case ATTN_FIELD_KV_DTYPE:
        case ATTN_FIELD_RUN_KV_DTYPE:
            attn__cat(buf, size, &o, "%s", attn_kv_dtype_name((attn_kv_dtype)v));
            break;
        case ATTN_FIELD_ATTN_TYPE:
            attn__cat(buf, size, &o, "%s", attn_attn_type_enum_name((attn_attn_type)v));
            break;
        }
    }
    attn__cat(buf, size, &o, ")");
    return (int)o;
}

void attn__selector_config_json(attn__jw *w, const attn_selector_config *c)
{
    attn__jw_obj_begin(w);
    const attn__config_row *r;
    for (int pos = 0; (r = attn__row_at(pos, true)) != NULL; pos++) {
        const attn_config_field *f = &r->pub;
        int64_t v = attn__config_get(c, f);
        attn__jw_key(w, f->name);
        switch (f->type) {
        case ATTN_FIELD_INT: attn__jw_int(w, v); break;
        case ATTN_FIELD_OPT_INT:
            if (v > 0)
                attn__jw_int(w, v);
            else
                attn__jw_null(w);
            break;
        case ATTN_FIELD_BOOL: attn__jw_bool(w, v != 0); break;
        case ATTN_FIELD_DTYPE: attn__jw_str(w, attn_dtype_name((attn_dtype)v)); break;
        case ATTN_FIELD_KV_DTYPE:
        case ATTN_FIELD_RUN_KV_DTYPE:
            if (v == ATTN_KV_NONE)
                attn__jw_null(w);
            else
                attn__jw_str(w, attn_kv_dtype_name((attn_kv_dtype)v));
            break;
        case ATTN_FIELD_ATTN_TYPE: attn__jw_str(w, attn_attn_type_name((attn_attn_type)v)); break;
        }
    }
    attn__jw_obj_end(w);
}

/* The run's cache dtype goes through vLLM's CacheConfig: a text that is no
 * CacheDType is pydantic's literal_error, "Input should be 'a', 'b' or 'c'". */
static attn_status attn__run_kv_parse(const char *value, int64_t *v)
{
    for (int i = 0; i < ATTN_KV_COUNT; i++)
        if (!strcmp(value, attn_kv_dtype_name((attn_kv_dtype)i))) return *v = i, ATTN_OK;
    char list[640];
    size_t o = 0;
    for (int i = 0; i < ATTN_KV_COUNT; i++) {
        const char *sep = i == 0 ? "" : i == ATTN_KV_COUNT - 1 ? " or " : ", ";
        attn__cat(list, sizeof list, &o, "%s'%s'", sep, attn_kv_dtype_name((attn_kv_dtype)i));
    }
    return attn__fail(ATTN_INVALID_ARGUMENT, "Input should be %s", list);
}

/* value read as the field's type into *v; the parsers set the error text. */
static attn_status attn__config_parse(const attn_config_field *f, const char *value, int64_t *v)
{
    if (!value) {
        if (f->type == ATTN_FIELD_OPT_INT) return *v = 0, ATTN_OK;
        if (f->type == ATTN_FIELD_KV_DTYPE || f->type == ATTN_FIELD_RUN_KV_DTYPE)
            return *v = ATTN_KV_NONE, ATTN_OK;
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s cannot be None", f->name);
    }
    switch (f->type) {
    case ATTN_FIELD_BOOL:
        if (!strcasecmp(value, "true") || !strcmp(value, "1")) return *v = 1, ATTN_OK;
        if (!strcasecmp(value, "false") || !strcmp(value, "0")) return *v = 0, ATTN_OK;
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: expected true or false, got '%s'", f->name,
                          value);
    case ATTN_FIELD_INT:
    case ATTN_FIELD_OPT_INT: {
        char *end = NULL;
        errno = 0;
        long n = strtol(value, &end, 10);
        if (!*value || *end || errno || n < 0 || n > (1L << 20))
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "%s: expected an integer in [0, %ld], got '%s'", f->name, 1L << 20,
                              value);
        return *v = n, ATTN_OK;
    }
    case ATTN_FIELD_DTYPE: {
        attn_dtype d = ATTN_DTYPE_BF16;
        attn_status st = attn_dtype_parse(value, &d);
        return *v = d, st;
    }
    case ATTN_FIELD_KV_DTYPE: {
        attn_kv_dtype k = ATTN_KV_AUTO;
        attn_status st = attn_kv_dtype_parse(value, &k);
        return *v = k, st;
    }
    case ATTN_FIELD_ATTN_TYPE: {
        attn_attn_type t = ATTN_TYPE_DECODER;
        attn_status st = attn_attn_type_parse(value, &t);
        return *v = t, st;
    }
    case ATTN_FIELD_RUN_KV_DTYPE: return attn__run_kv_parse(value, v);
    }
    return attn__fail(ATTN_INTERNAL, "field %s has no type", f->name);
}

attn_status attn_selector_config_set(attn_selector_config *cfg, const char *field,
                                     const char *value)
{
    ATTN__CHECK_NULL(cfg);
    ATTN__CHECK_NULL(field);
    const attn_config_field *f = attn_selector_config_field_find(field);
    if (!f) return attn__fail(ATTN_INVALID_ARGUMENT, "unknown selector config field '%s'", field);
    attn_selector_config check;
    attn_status rd = attn__config_read(cfg, &check);
    if (rd != ATTN_OK) return rd;
    size_t end = f->offset + (f->type == ATTN_FIELD_BOOL ? sizeof(bool) : sizeof(int));
    if (cfg->struct_size < end)
        return attn__fail(ATTN_ABI_MISMATCH,
                          "selector config field %s is past the end of the caller's struct "
                          "(struct_size %u)",
                          field, cfg->struct_size);
    int64_t v = 0;
    attn_status st = attn__config_parse(f, value, &v);
    if (st == ATTN_OK) attn__config_put(cfg, f, v);
    return st;
}
