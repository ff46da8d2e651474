/* The scenario's field readers: strict typed access to one member of a
 * JSON object, with the member's path in every error (scenario.c reads the
 * document with them). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/model.h"
#include "attn/platform.h"
#include "scenario/scenario_read.h"

attn_status attn__scn_bad(const pctx *c, attn_status st, const char *path, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return attn_set_error(st, "%s: scenario field '%s': %s", c->what, path, msg);
}

const char *attn__scn_tname(const attn__json *v)
{
    return attn__json_type_name(attn__json_type_of(v));
}

void attn__scn_join(char *out, size_t size, const char *path, const char *key)
{
    snprintf(out, size, "%s%s%s", path, *path ? "." : "", key);
}

attn_status attn__scn_check_keys(const pctx *c, const attn__json *obj, const char *path,
                                 const char *const *known)
{
    for (size_t i = 0; i < attn__json_len(obj); i++) {
        const char *k = attn__json_key_at(obj, i);
        bool ok = false;
        for (const char *const *p = known; *p && !ok; p++)
            ok = !strcmp(*p, k);
        if (!ok) {
            char full[200];
            attn__scn_join(full, sizeof full, path, k);
            char list[400] = "";
            size_t o = 0;
            for (const char *const *p = known; *p && o < sizeof list; p++)
                o +=
                    (size_t)snprintf(list + o, sizeof list - o, "%s%s", p == known ? "" : ", ", *p);
            return attn__scn_bad(c, ATTN_PARSE_ERROR, full, "unknown field (known: %s)", list);
        }
    }
    return ATTN_OK;
}

attn_status attn__scn_get_str(const pctx *c, const attn__json *obj, const char *path,
                              const char *key, char *dst, size_t size, bool required, bool null_ok)
{
    char full[200];
    attn__scn_join(full, sizeof full, path, key);
    const attn__json *v = attn__json_get(obj, key);
    if (!v || (null_ok && attn__json_type_of(v) == ATTN_JSON_NULL)) {
        if (required) return attn__scn_bad(c, ATTN_PARSE_ERROR, full, "is missing");
        return ATTN_OK;
    }
    if (attn__json_type_of(v) != ATTN_JSON_STRING)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, full, "expected a string, got %s",
                             attn__scn_tname(v));
    const char *s = attn__json_string(v);
    if (strlen(s) >= size)
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "is longer than %zu characters",
                             size - 1);
    snprintf(dst, size, "%s", s);
    return ATTN_OK;
}

attn_status attn__scn_get_int(const pctx *c, const attn__json *obj, const char *path,
                              const char *key, long long lo, long long hi, long long *out,
                              bool *present)
{
    char full[200];
    attn__scn_join(full, sizeof full, path, key);
    const attn__json *v = attn__json_get(obj, key);
    *present = v != NULL && attn__json_type_of(v) != ATTN_JSON_NULL;
    if (!*present) return ATTN_OK;
    long long x;
    if (attn__json_type_of(v) != ATTN_JSON_NUMBER || !attn__json_is_int(v, &x))
        return attn__scn_bad(c, ATTN_PARSE_ERROR, full, "expected an integer, got %s",
                             attn__scn_tname(v));
    if (x < lo || x > hi)
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "%lld is out of range [%lld, %lld]", x,
                             lo, hi);
    *out = x;
    return ATTN_OK;
}

/* "installed": ["fa2", ...] -> csv, each token checked. */
attn_status attn__scn_get_installed(const pctx *c, const attn__json *obj, const char *path,
                                    bool *given, char *csv, size_t size)
{
    char full[200];
    attn__scn_join(full, sizeof full, path, "installed");
    const attn__json *v = attn__json_get(obj, "installed");
    if (!v) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_ARRAY)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, full,
                             "expected an array of component names, got %s", attn__scn_tname(v));
    size_t o = 0;
    csv[0] = 0;
    for (size_t i = 0; i < attn__json_len(v); i++) {
        const attn__json *e = attn__json_at(v, i);
        char item[240];
        snprintf(item, sizeof item, "%s[%zu]", full, i);
        if (attn__json_type_of(e) != ATTN_JSON_STRING)
            return attn__scn_bad(c, ATTN_PARSE_ERROR, item, "expected a string, got %s",
                                 attn__scn_tname(e));
        attn_component comp;
        if (attn_component_parse(attn__json_string(e), &comp) != ATTN_OK)
            return attn__scn_bad(
                c, ATTN_INVALID_ARGUMENT, item,
                "unknown component '%s' (fa2, fa3, fa4, flashinfer, flashinfer_cubin, "
                "flashmla, tokenspeed_mla, aiter)",
                attn__json_string(e));
        o += (size_t)snprintf(csv + o, o < size ? size - o : 0, "%s%s", i ? "," : "",
                              attn__json_string(e));
    }
    if (o >= size) return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "too long");
    *given = true;
    return ATTN_OK;
}

const char *const attn__scn_launch_keys[ATTN__SCN_NUM_LAUNCH_KEYS] = {
    "backend", "backend_per_kind", "block_size", "kv_cache_dtype", "installed", "model"};

/* Reads the launch options present in obj into l (absent ones unchanged);
 * appends "key=value" for each one present to changes when given. */
attn_status attn__scn_read_launch(const pctx *c, const attn__json *obj, const char *path,
                                  attn__scn_launch *l, char *changes, size_t csize)
{
    attn_status st;
    char full[200];
    size_t co = changes ? strlen(changes) : 0;
#define CHANGED(...)                                                                               \
    do {                                                                                           \
        if (changes && co < csize)                                                                 \
            co += (size_t)snprintf(changes + co, csize - co, "%s", co ? ", " : "");                \
        if (changes && co < csize) co += (size_t)snprintf(changes + co, csize - co, __VA_ARGS__);  \
    } while (0)
    if (attn__json_get(obj, "model")) {
        if ((st = attn__scn_get_str(c, obj, path, "model", l->model, sizeof l->model, true,
                                    false)) != ATTN_OK)
            return st;
        CHANGED("model=%s", l->model);
    }
    if (attn__json_get(obj, "backend")) {
        l->backend[0] = 0;
        if ((st = attn__scn_get_str(c, obj, path, "backend", l->backend, sizeof l->backend, false,
                                    true)) != ATTN_OK)
            return st;
        if (!strcasecmp(l->backend, "auto")) l->backend[0] = 0;
        CHANGED("backend=%s", l->backend[0] ? l->backend : "auto");
    }
    const attn__json *pk = attn__json_get(obj, "backend_per_kind");
    if (pk && attn__json_type_of(pk) != ATTN_JSON_NULL) {
        attn__scn_join(full, sizeof full, path, "backend_per_kind");
        if (attn__json_type_of(pk) != ATTN_JSON_OBJECT)
            return attn__scn_bad(c, ATTN_PARSE_ERROR, full,
                                 "expected an object {kind: backend}, got %s", attn__scn_tname(pk));
        for (size_t i = 0; i < attn__json_len(pk); i++) {
            const char *k = attn__json_key_at(pk, i);
            const attn__json *v = attn__json_at(pk, i);
            char item[280];
            snprintf(item, sizeof item, "%s.%s", full, k);
            attn_kv_kind kind;
            if (attn_kv_kind_parse(k, &kind) != ATTN_OK) {
                char kinds[256] = "";
                for (int q = 0; q < ATTN_KIND_COUNT; q++)
                    snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s",
                             q ? ", " : "", attn_kv_kind_name((attn_kv_kind)q));
                return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, item, "unknown KV-spec kind (%s)",
                                     kinds);
            }
            if (attn__json_type_of(v) != ATTN_JSON_STRING)
                return attn__scn_bad(c, ATTN_PARSE_ERROR, item, "expected a backend name, got %s",
                                     attn__scn_tname(v));
            snprintf(l->per_kind[kind], sizeof l->per_kind[kind], "%s", attn__json_string(v));
            CHANGED("%s=%s", k, l->per_kind[kind]);
        }
    }
    long long bs;
    bool present;
    if ((st = attn__scn_get_int(c, obj, path, "block_size", 1, 1 << 20, &bs, &present)) != ATTN_OK)
        return st;
    if (present) {
        l->block_size = (int)bs;
        CHANGED("block_size=%d", l->block_size);
    }
    if (attn__json_get(obj, "kv_cache_dtype")) {
        char kv[32] = "";
        if ((st = attn__scn_get_str(c, obj, path, "kv_cache_dtype", kv, sizeof kv, false, true)) !=
            ATTN_OK)
            return st;
        attn_kv_dtype k;
        attn__scn_join(full, sizeof full, path, "kv_cache_dtype");
        if (kv[0] && attn_kv_dtype_parse(kv, &k) != ATTN_OK)
            return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "unknown KV-cache dtype '%s'", kv);
        snprintf(l->kv_cache_dtype, sizeof l->kv_cache_dtype, "%s", kv);
        CHANGED("kv_cache_dtype=%s", kv[0] ? kv : "auto");
    }
    bool given = false;
    char inst[256];
    if ((st = attn__scn_get_installed(c, obj, path, &given, inst, sizeof inst)) != ATTN_OK)
        return st;
    if (given) {
        l->installed_given = true;
        memcpy(l->installed, inst, sizeof inst);
        CHANGED("installed=[%s]", inst);
    }
#undef CHANGED
    return ATTN_OK;
}

attn_status attn__scn_read_range(const pctx *c, const attn__json *obj, const char *path,
                                 const char *key, int *lo, int *hi)
{
    char full[200];
    attn__scn_join(full, sizeof full, path, key);
    const attn__json *v = attn__json_get(obj, key);
    if (!v) return ATTN_OK;
    long long a = 0, b = 0;
    bool ok = false;
    if (attn__json_type_of(v) == ATTN_JSON_NUMBER && attn__json_is_int(v, &a)) {
        b = a;
        ok = true;
    } else if (attn__json_type_of(v) == ATTN_JSON_ARRAY && attn__json_len(v) == 2 &&
               attn__json_type_of(attn__json_at(v, 0)) == ATTN_JSON_NUMBER &&
               attn__json_type_of(attn__json_at(v, 1)) == ATTN_JSON_NUMBER) {
        ok = attn__json_is_int(attn__json_at(v, 0), &a) &&
             attn__json_is_int(attn__json_at(v, 1), &b);
    }
    if (!ok) return attn__scn_bad(c, ATTN_PARSE_ERROR, full, "expected an integer or [min, max]");
    if (a < 1 || b < a || b > 1000000)
        return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "needs 1 <= min <= max <= 1000000");
    *lo = (int)a;
    *hi = (int)b;
    return ATTN_OK;
}

attn_status attn__scn_read_traffic(const pctx *c, const attn__json *t, const char *path,
                                   attn__scn_traffic *tr)
{
    static const char *const keys[] = {"rate",  "prompt_len", "output_len", "seed",
                                       "steps", "show_steps", NULL};
    attn_status st;
    if (attn__json_type_of(t) != ATTN_JSON_OBJECT)
        return attn__scn_bad(c, ATTN_PARSE_ERROR, path, "expected an object, got %s",
                             attn__scn_tname(t));
    if ((st = attn__scn_check_keys(c, t, path, keys)) != ATTN_OK) return st;
    const attn__json *r = attn__json_get(t, "rate");
    if (r) {
        char full[200];
        attn__scn_join(full, sizeof full, path, "rate");
        if (attn__json_type_of(r) != ATTN_JSON_NUMBER)
            return attn__scn_bad(c, ATTN_PARSE_ERROR, full, "expected a number, got %s",
                                 attn__scn_tname(r));
        double x = attn__json_number(r);
        if (!(x >= 0 && x <= 10000))
            return attn__scn_bad(c, ATTN_INVALID_ARGUMENT, full, "must be in [0, 10000] (got %g)",
                                 x);
        tr->rate = x;
    }
    if ((st = attn__scn_read_range(c, t, path, "prompt_len", &tr->prompt_min, &tr->prompt_max)) !=
            ATTN_OK ||
        (st = attn__scn_read_range(c, t, path, "output_len", &tr->output_min, &tr->output_max)) !=
            ATTN_OK)
        return st;
    long long v;
    bool present;
    if ((st = attn__scn_get_int(c, t, path, "seed", 0, (1LL << 53), &v, &present)) != ATTN_OK)
        return st;
    if (present) tr->seed = (uint64_t)v;
    if ((st = attn__scn_get_int(c, t, path, "steps", 1, 100000, &v, &present)) != ATTN_OK)
        return st;
    if (present) tr->steps = (int)v;
    if ((st = attn__scn_get_int(c, t, path, "show_steps", 0, 100, &v, &present)) != ATTN_OK)
        return st;
    if (present) tr->show_steps = (int)v;
    return ATTN_OK;
}
