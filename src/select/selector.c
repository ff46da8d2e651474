/* The selector: decide once which backend runs a layer.
 *
 * Contract. An explicit request is a hard requirement: that backend is
 * resolved, validated and self-tested, and either chosen or the selection
 * fails with "Selected backend X is not valid for this configuration.
 * Reason: [...]" — never a fallback. Without a request, the platform's own
 * rules (rules_<family>.c) walk its priority list and the lowest valid index
 * wins, or the selection fails with "No valid attention backend found for
 * <family> with <config>. Reasons: {...}." Every candidate keeps its
 * priority and reasons even when selection succeeds. The config's
 * use_batch_invariant is OR-ed with the machine's batch_invariant setting
 * and an unset run_kv_cache_dtype becomes the layer's kv_cache_dtype before
 * anything is validated; the selection records that effective config.
 *
 * Plugins are loaded before the first selection. Results of attn_select
 * are cached per (platform object and its installed/settings state,
 * registry generation, requested name, effective config); a cached result
 * is immutable and lives until the process ends (a cache clear retires
 * entries without freeing them, so a pointer a caller still holds never
 * dangles). Lookups read an immutable, atomically published open-addressing
 * table without taking a lock; inserts take a mutex and publish with
 * release stores. Logging ("Using X backend." at info, the precluded
 * warning, the debug list of rejected backends) happens once per new cache
 * entry, and each distinct info line is printed once per process. */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/plugin.h"
#include "registry/registry_impl.h"
#include "select/selection.h"
#include "util/config_fields.h"
#include "util/error.h"
#include "util/strbuf.h"

/* Checks that an enum-valued config holds values a Python caller could
 * have produced; anything else is a usage error, not a reason. */
static attn_status attn__sel_check_config(attn_selection *s)
{
    const attn_selector_config *c = &s->cfg;
    if (c->head_size <= 0)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "head_size must be a positive integer, got %d", c->head_size);
    if (c->head_size > ATTN_MAX_HEAD_SIZE || c->num_heads > ATTN_MAX_HEADS ||
        c->block_size > ATTN_MAX_BLOCK_SIZE) /* attn/types.h limits */
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "head_size %d, num_heads %d or block_size %d exceeds its limit "
                              "(%d, %d, %d)",
                              c->head_size, c->num_heads, c->block_size, ATTN_MAX_HEAD_SIZE,
                              ATTN_MAX_HEADS, ATTN_MAX_BLOCK_SIZE);
    if ((unsigned)c->dtype >= ATTN_DTYPE_COUNT)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "invalid dtype %d (expected fp16, bf16 or fp32)", (int)c->dtype);
    if (c->kv_cache_dtype != ATTN_KV_NONE &&
        ((int)c->kv_cache_dtype < 0 || c->kv_cache_dtype >= ATTN_KV_COUNT)) {
        attn__sb sb;
        attn__sb_init(&sb);
        attn__sb_printf(&sb, "Invalid kv_cache_dtype: %d. Valid values are: (",
                        (int)c->kv_cache_dtype);
        for (int i = 0; i < ATTN_KV_COUNT; i++)
            attn__sb_printf(&sb, "%s'%s'", i ? ", " : "", attn_kv_dtype_name((attn_kv_dtype)i));
        attn__sb_putc(&sb, ')');
        return attn__sel_fail_sb(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT, &sb);
    }
    if (c->run_kv_cache_dtype != ATTN_KV_NONE &&
        ((int)c->run_kv_cache_dtype < 0 || c->run_kv_cache_dtype >= ATTN_KV_COUNT))
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "invalid run_kv_cache_dtype %d (a CacheDType or ATTN_KV_NONE)",
                              (int)c->run_kv_cache_dtype);
    if ((unsigned)c->attn_type >= ATTN_TYPE_COUNT)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "invalid attn_type %d", (int)c->attn_type);
    if (c->block_size < 0)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "block_size must be positive (0 = not specified), got %d",
                              c->block_size);
    if (c->num_heads < 0)
        return attn__sel_fail(s, ATTN_SELECT_INVALID_CONFIG, ATTN_INVALID_ARGUMENT,
                              "num_heads must be positive (0 = not given), got %d", c->num_heads);
    return ATTN_OK;
}

void attn__ensure_plugins(void)
{
    static atomic_bool done;
    if (atomic_load_explicit(&done, memory_order_acquire)) return;
    attn_plugins_load(); /* idempotent; concurrent callers wait for the one load */
    atomic_store_explicit(&done, true, memory_order_release);
}

attn_status attn__effective_config(const attn_platform *p, const attn_selector_config *in,
                                   attn_selector_config *out)
{
    attn_status st = attn__config_read(in, out);
    if (st != ATTN_OK) return st;
    if (p->settings[ATTN_SETTING_BATCH_INVARIANT]) out->use_batch_invariant = true;
    /* Not given: the run's dtype is the layer's (no skipped layer), so
     * both spellings are one cache key and one recorded config. */
    if (out->run_kv_cache_dtype == ATTN_KV_NONE) out->run_kv_cache_dtype = out->kv_cache_dtype;
    return ATTN_OK;
}

static void attn__sel_run(attn_selection *s, const char *requested)
{
    const attn_platform *p = s->platform;
    const attn__platform_ops *ops = attn__platform_ops_for(p->kind);
    s->device_family =
        ops && ops->device_family ? ops->device_family : attn_platform_kind_name(p->kind);

    if (requested && strcasecmp(requested, "auto") != 0) {
        char canon[64];
        const char *stable = NULL;
        if (attn__registry_canon(requested, canon, sizeof canon))
            stable = attn__registry_lookup(canon);
        if (!stable) {
            /* vLLM upper-cases the name before the enum lookup. */
            char *up = (char *)attn__sel_alloc(s, strlen(requested) + 1);
            if (up) {
                size_t i = 0;
                for (; requested[i]; i++)
                    up[i] = (char)toupper((unsigned char)requested[i]);
                up[i] = '\0';
                s->requested = up;
            }
            attn__sel_fail(s, ATTN_SELECT_UNKNOWN_NAME, ATTN_UNKNOWN_BACKEND,
                           "Unknown attention backend: '%s'. Valid options are: %s",
                           up ? up : requested, attn_registry_valid_names());
            return;
        }
        /* AttentionConfig turns the MSA aliases into automatic selection. */
        s->requested = attn__registry_auto_alias(stable) ? NULL : stable;
    }
    if (attn__sel_check_config(s) != ATTN_OK) return;
    if (!ops || !ops->select) {
        attn__sel_fail(s, ATTN_SELECT_NO_VALID, ATTN_NO_VALID_BACKEND,
                       "Invalid attention backend for %s", s->device_family);
        return;
    }
    ops->select(p, s->requested, &s->cfg, s);
    if (s->oom)
        attn__sel_fail(s, s->error ? s->error : ATTN_SELECT_NO_VALID, ATTN_OUT_OF_MEMORY,
                       "out of memory while selecting a backend");
}

attn_status attn__sel_status(const attn_selection *s)
{
    if (s->status != ATTN_OK)
        return attn__fail(s->status, "%s", s->message ? s->message : attn_strerror(s->status));
    return ATTN_OK;
}

attn_status attn_select_uncached(const attn_platform *p, const char *requested,
                                 const attn_selector_config *cfg, attn_selection **out)
{
    if (out) *out = NULL;
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(cfg);
    ATTN__CHECK_NULL(out);
    attn__ensure_plugins();
    attn_selector_config eff;
    attn_status st = attn__effective_config(p, cfg, &eff);
    if (st != ATTN_OK) return st;
    attn_selection *s = attn__sel_new(p, &eff);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory while selecting a backend");
    attn__sel_run(s, requested);
    *out = s;
    return attn__sel_status(s);
}
