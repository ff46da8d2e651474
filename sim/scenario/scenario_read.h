/* Scenario parser internals: the parse context and the field readers
 * (scenario_read.c) that scenario.c builds the document's reader from.
 * Every reader returns ATTN_OK or fails through attn__scn_bad() with the JSON path. */
#ifndef ATTN_SCENARIO_READ_H
#define ATTN_SCENARIO_READ_H

#include "scenario/scenario.h"
#include "util/json.h"

typedef struct pctx {
    const char *what;
    attn__scenario *s;
} pctx;

/* The launch options a deployment or event may set. */
#define ATTN__SCN_NUM_LAUNCH_KEYS 6
extern const char *const attn__scn_launch_keys[ATTN__SCN_NUM_LAUNCH_KEYS];

attn_status attn__scn_bad(const pctx *c, attn_status st, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *attn__scn_tname(const attn__json *v);
void attn__scn_join(char *out, size_t size, const char *path, const char *key);
attn_status attn__scn_check_keys(const pctx *c, const attn__json *obj, const char *path,
                                 const char *const *known);
attn_status attn__scn_get_str(const pctx *c, const attn__json *obj, const char *path,
                              const char *key, char *dst, size_t size, bool required, bool null_ok);
attn_status attn__scn_get_int(const pctx *c, const attn__json *obj, const char *path,
                              const char *key, long long lo, long long hi, long long *out,
                              bool *present);
attn_status attn__scn_get_installed(const pctx *c, const attn__json *obj, const char *path,
                                    bool *given, char *csv, size_t size);
attn_status attn__scn_read_launch(const pctx *c, const attn__json *obj, const char *path,
                                  attn__scn_launch *l, char *changes, size_t csize);
attn_status attn__scn_read_range(const pctx *c, const attn__json *obj, const char *path,
                                 const char *key, int *lo, int *hi);
attn_status attn__scn_read_traffic(const pctx *c, const attn__json *t, const char *path,
                                   attn__scn_traffic *tr);

#endif
