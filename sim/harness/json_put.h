/* One call per JSON member (key and value) for the programs beside
 * libattn: the harness, the scenario runner and the CLI. */
#ifndef ATTN_HARNESS_JSON_PUT_H
#define ATTN_HARNESS_JSON_PUT_H

#include "util/json.h"
#include "util/strbuf.h"

static inline void attn__put_str(attn__jw *w, const char *key, const char *v)
{
    attn__jw_key(w, key);
    attn__jw_str(w, v);
}

static inline void attn__put_int(attn__jw *w, const char *key, long long v)
{
    attn__jw_key(w, key);
    attn__jw_int(w, v);
}

static inline void attn__put_num(attn__jw *w, const char *key, double v)
{
    attn__jw_key(w, key);
    attn__jw_num(w, v);
}

static inline void attn__put_bool(attn__jw *w, const char *key, bool v)
{
    attn__jw_key(w, key);
    attn__jw_bool(w, v);
}

#endif
