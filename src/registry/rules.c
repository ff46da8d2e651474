/* Platform rules registered by backends (attn/registry.h): the priority
 * lists of the platform kinds that have no rules of their own.
 *
 * Contract. A rule names a registered backend, the kind it is for, whether
 * it serves MLA layers, and its priority; a platform's list for a layer is
 * its kind's rules for that layer kind, by priority, then registration order.
 * A refused registration changes nothing. Rules are only appended; the
 * plugin loader's rollback truncates to the count before a failed init.
 * Built-in backends state theirs in their catalog entry (rule_kind,
 * rule_priority), registered before anything else.
 *
 * Invariants. Thread-safe (one rwlock); the names are the registry's own
 * stable strings; each change bumps the registry generation, so cached
 * selections never answer from an older list. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attn/log.h"
#include "backends/catalog/catalog.h"
#include "registry/catalog_table.h"
#include "registry/registry_impl.h"
#include "util/abi.h"
#include "util/error.h"

static pthread_rwlock_t attn__rules_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t attn__rules_once = PTHREAD_ONCE_INIT;
static attn_platform_rule *attn__rules;
static int attn__rules_n, attn__rules_cap;

static attn_status attn__rules_add(const attn_platform_rule *rule);

/* The built-in backends' rules (their catalog entries), before any other:
 * every entry point runs this first, so a plugin rollback never drops them. */
static void attn__rules_builtin(void)
{
    for (int i = 0; i < attn__catalog_count(); i++) {
        const attn__catalog_entry *e = attn__catalog_at(i);
        if (e->rule_kind == ATTN_PLATFORM_UNSPECIFIED) continue;
        const attn_backend *b = e->builtin ? e->builtin() : NULL;
        attn_platform_rule r = {.struct_size = sizeof r,
                                .kind = e->rule_kind,
                                .backend = e->name,
                                .priority = e->rule_priority,
                                .mla = b && b->desc && b->desc->is_mla};
        if (attn__rules_add(&r) != ATTN_OK)
            attn_log(ATTN_LOG_ERROR, "built-in platform rule of %s: %s", e->name,
                     attn_last_error());
    }
}

static void attn__rules_ensure(void)
{
    pthread_once(&attn__rules_once, attn__rules_builtin);
}

bool attn_platform_kind_uses_registered_rules(attn_platform_kind kind)
{
    return kind == ATTN_PLATFORM_OPENCL;
}

static attn_status attn__rule_check(const attn_platform_rule *r, const char **stable)
{
    ATTN__CHECK_NULL(r);
    if (!attn__struct_size_ok(r->struct_size, ATTN__V1_PLATFORM_RULE, sizeof *r))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "platform rule struct_size %u, libattn accepts %zu to %zu",
                          r->struct_size, ATTN__V1_PLATFORM_RULE, sizeof *r);
    if (!attn_platform_kind_uses_registered_rules(r->kind))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "platform %s selects by its own rules; rules are registered only for "
                          "platforms without them (opencl)",
                          attn_platform_kind_name(r->kind));
    ATTN__CHECK_NULL(r->backend);
    char canon[64];
    *stable =
        attn__registry_canon(r->backend, canon, sizeof canon) ? attn__registry_lookup(canon) : NULL;
    if (!*stable)
        return attn__fail(ATTN_UNKNOWN_BACKEND,
                          "platform rule for %s: backend '%.64s' is not registered (register "
                          "its name first)",
                          attn_platform_kind_name(r->kind), r->backend);
    return ATTN_OK;
}

attn_status attn_register_platform_rule(const attn_platform_rule *rule)
{
    attn__rules_ensure();
    return attn__rules_add(rule);
}

static attn_status attn__rules_add(const attn_platform_rule *rule)
{
    const char *stable = NULL;
    attn_status st = attn__rule_check(rule, &stable);
    if (st != ATTN_OK) return st;
    attn_platform_rule r;
    memset(&r, 0, sizeof r);
    attn__struct_read(&r, sizeof r, rule, rule->struct_size,
                      offsetof(attn_platform_rule, struct_size));
    r.backend = stable;
    pthread_rwlock_wrlock(&attn__rules_lock);
    for (int i = 0; i < attn__rules_n; i++) {
        const attn_platform_rule *o = &attn__rules[i];
        if (o->kind == r.kind && o->backend == r.backend && o->mla == r.mla) {
            pthread_rwlock_unlock(&attn__rules_lock);
            return attn__fail(ATTN_ALREADY_EXISTS, "%s already has a %s rule for platform %s",
                              stable, r.mla ? "MLA" : "standard", attn_platform_kind_name(r.kind));
        }
    }
    if (attn__rules_n == attn__rules_cap) {
        int cap = attn__rules_cap ? attn__rules_cap * 2 : 16;
        attn_platform_rule *t = realloc(attn__rules, sizeof *t * (size_t)cap);
        if (!t) {
            pthread_rwlock_unlock(&attn__rules_lock);
            return attn__fail(ATTN_OUT_OF_MEMORY, "registering a platform rule");
        }
        attn__rules = t;
        attn__rules_cap = cap;
    }
    attn__rules[attn__rules_n++] = r;
    pthread_rwlock_unlock(&attn__rules_lock);
    attn__registry_changed();
    return ATTN_OK;
}

int attn_platform_rule_count(void)
{
    attn__rules_ensure();
    pthread_rwlock_rdlock(&attn__rules_lock);
    int n = attn__rules_n;
    pthread_rwlock_unlock(&attn__rules_lock);
    return n;
}

attn_status attn_platform_rule_at(int i, attn_platform_rule *out)
{
    ATTN__CHECK_NULL(out);
    attn__rules_ensure();
    pthread_rwlock_rdlock(&attn__rules_lock);
    attn_status st = ATTN_OK;
    if (i < 0 || i >= attn__rules_n)
        st = attn__fail(ATTN_OUT_OF_RANGE, "platform rule %d of %d", i, attn__rules_n);
    else
        *out = attn__rules[i];
    pthread_rwlock_unlock(&attn__rules_lock);
    return st;
}

int attn__rules_list(attn_platform_kind kind, bool mla, const char **names, int max)
{
    attn__rules_ensure();
    pthread_rwlock_rdlock(&attn__rules_lock);
    int n = 0, last_p = INT_MIN, last_i = -1;
    /* Each round takes the next rule in (priority, registration) order. */
    for (;;) {
        int best = -1;
        for (int i = 0; i < attn__rules_n; i++) {
            const attn_platform_rule *r = &attn__rules[i];
            if (r->kind != kind || r->mla != mla) continue;
            if (r->priority < last_p || (r->priority == last_p && i <= last_i)) continue;
            if (best < 0 || r->priority < attn__rules[best].priority) best = i;
        }
        if (best < 0) break;
        if (names && n < max) names[n] = attn__rules[best].backend;
        n++;
        last_p = attn__rules[best].priority;
        last_i = best;
    }
    pthread_rwlock_unlock(&attn__rules_lock);
    return n;
}

void attn__rules_truncate(int n)
{
    attn__rules_ensure();
    pthread_rwlock_wrlock(&attn__rules_lock);
    if (n >= 0 && n < attn__rules_n) attn__rules_n = n;
    pthread_rwlock_unlock(&attn__rules_lock);
    attn__registry_changed();
}
