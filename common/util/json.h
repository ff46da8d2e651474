/* A strict JSON reader (RFC 8259) producing a read-only tree. Errors carry
 * line and column. Used for machine specs, scenarios, model configs, tests. */
#ifndef ATTN_UTIL_JSON_H
#define ATTN_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "attn/status.h"
#include "util/strbuf.h"

typedef enum attn__json_type {
    ATTN_JSON_NULL,
    ATTN_JSON_BOOL,
    ATTN_JSON_NUMBER,
    ATTN_JSON_STRING,
    ATTN_JSON_ARRAY,
    ATTN_JSON_OBJECT
} attn__json_type;

typedef struct attn__json attn__json;

/* Parses text (len bytes). On failure returns ATTN_PARSE_ERROR and writes
 * "line L, column C: <what>" into err. */
attn_status attn__json_parse(const char *text, size_t len, attn__json **out, char *err,
                             size_t errsz);
void attn__json_free(attn__json *v);
/* Reads a whole file (NUL-terminated); caller frees. */
attn_status attn__read_file(const char *path, char **text, size_t *len);

attn__json_type attn__json_type_of(const attn__json *v);
const char *attn__json_type_name(attn__json_type t);
bool attn__json_bool(const attn__json *v);
double attn__json_number(const attn__json *v);
/* true when the number is integral and fits in long long */
bool attn__json_is_int(const attn__json *v, long long *out);
const char *attn__json_string(const attn__json *v);
size_t attn__json_len(const attn__json *v); /* array items or object members */
const attn__json *attn__json_at(const attn__json *v, size_t i);
const char *attn__json_key_at(const attn__json *v, size_t i);
/* Object member by key (last one wins like Python's json), NULL if absent
 * or v is not an object. */
const attn__json *attn__json_get(const attn__json *v, const char *key);

/* Writes v (NULL: null) through w, so JSON from another writer (a public
 * *_to_json call) takes w's layout. */
void attn__json_write(attn__jw *w, const attn__json *v);

#endif
