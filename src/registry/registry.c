/* The registry: backend name -> locator -> code.
 *
 * Contract. Names are known in declaration order: the catalog (vLLM's enum
 * order, then libattn's own), then names registered at run time. A name
 * resolves through, in order: an object registered at run time, a locator
 * override, or its default (the catalog's locator; on a simulated machine
 * the built-in descriptor gated by the machine's installed components).
 * CUSTOM and TORCH_SDPA have no default and must be registered before use.
 *
 * Invariants. Every public function is thread-safe (one rwlock; plugins
 * register from their init while other threads may be reading). Entries are
 * never freed and strings handed out are interned, so pointers returned by
 * attn_registry_name/get_locator/valid_names stay valid for the process.
 * Each change bumps a generation counter read by the selection cache. */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "platform/platform_impl.h"
#include "registry/catalog_table.h"
#include "registry/registry_impl.h"
#include "util/error.h"
#include "util/strbuf.h"

#define ATTN__NAME_MAX 64

typedef struct attn__reg_entry {
    const char *name;                    /* interned, upper case */
    const attn__catalog_entry *cat;      /* NULL for names registered at run time */
    const char *override_locator;        /* interned, or NULL */
    const attn_backend *override_object; /* or NULL */
    const char *object_locator;          /* "object:NAME" text for an object override */
} attn__reg_entry;

static pthread_rwlock_t attn__reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t attn__reg_once = PTHREAD_ONCE_INIT;
static attn__reg_entry **attn__reg_tab;
static int attn__reg_n, attn__reg_cap;
static _Atomic uint64_t attn__reg_gen = 1;

/* Interned strings: a list that is only ever appended to. */
typedef struct attn__interned {
    struct attn__interned *next;
    char text[];
} attn__interned;
static attn__interned *attn__intern_list;
static pthread_mutex_t attn__intern_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *attn__intern(const char *s)
{
    size_t n = strlen(s);
    pthread_mutex_lock(&attn__intern_mu);
    for (attn__interned *it = attn__intern_list; it; it = it->next) {
        if (!strcmp(it->text, s)) {
            pthread_mutex_unlock(&attn__intern_mu);
            return it->text;
        }
    }
    attn__interned *it = malloc(sizeof *it + n + 1);
    if (!it) {
        pthread_mutex_unlock(&attn__intern_mu);
        return NULL;
    }
    memcpy(it->text, s, n + 1);
    it->next = attn__intern_list;
    attn__intern_list = it;
    pthread_mutex_unlock(&attn__intern_mu);
    return it->text;
}

/* Entries removed by a snapshot restore stay allocated (names handed out
 * must remain valid); they are kept reachable here. */
typedef struct attn__graveyard {
    struct attn__graveyard *next;
    attn__reg_entry *e;
} attn__graveyard;
static attn__graveyard *attn__reg_graveyard;

static bool attn__reg_push(attn__reg_entry *e)
{
    if (attn__reg_n == attn__reg_cap) {
        int cap = attn__reg_cap ? attn__reg_cap * 2 : 64;
        attn__reg_entry **t = realloc(attn__reg_tab, sizeof *t * (size_t)cap);
        if (!t) return false;
        attn__reg_tab = t;
        attn__reg_cap = cap;
    }
    attn__reg_tab[attn__reg_n++] = e;
    return true;
}

static void attn__reg_init(void)
{
    for (int i = 0; i < attn__catalog_count(); i++) {
        const attn__catalog_entry *c = attn__catalog_at(i);
        attn__reg_entry *e = calloc(1, sizeof *e);
        if (!e || !attn__reg_push(e)) {
            free(e);
            return; /* out of memory at start-up: the registry stays partial */
        }
        e->name = c->name;
        e->cat = c;
    }
}

static void attn__reg_ensure(void)
{
    pthread_once(&attn__reg_once, attn__reg_init);
}

static void attn__reg_bump(void)
{
    atomic_fetch_add_explicit(&attn__reg_gen, 1, memory_order_release);
}

void attn__registry_changed(void)
{
    attn__reg_bump();
}

uint64_t attn__registry_generation(void)
{
    return atomic_load_explicit(&attn__reg_gen, memory_order_acquire);
}

bool attn__registry_canon(const char *name, char *buf, size_t size)
{
    if (!name || !*name) return false;
    size_t n = strlen(name);
    if (n + 1 > size || n + 1 > ATTN__NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!isalnum(ch) && ch != '_') return false;
        buf[i] = (char)toupper(ch);
    }
    buf[n] = '\0';
    return true;
}

/* Caller holds the lock (read or write). */
static attn__reg_entry *attn__reg_find_locked(const char *canon)
{
    for (int i = 0; i < attn__reg_n; i++)
        if (!strcmp(attn__reg_tab[i]->name, canon)) return attn__reg_tab[i];
    return NULL;
}

const char *attn__registry_lookup(const char *canon)
{
    attn__reg_ensure();
    pthread_rwlock_rdlock(&attn__reg_lock);
    attn__reg_entry *e = attn__reg_find_locked(canon);
    const char *name = e ? e->name : NULL;
    pthread_rwlock_unlock(&attn__reg_lock);
    return name;
}

int attn_registry_count(void)
{
    attn__reg_ensure();
    pthread_rwlock_rdlock(&attn__reg_lock);
    int n = attn__reg_n;
    pthread_rwlock_unlock(&attn__reg_lock);
    return n;
}

const char *attn_registry_name(int i)
{
    attn__reg_ensure();
    pthread_rwlock_rdlock(&attn__reg_lock);
    const char *name = i >= 0 && i < attn__reg_n ? attn__reg_tab[i]->name : NULL;
    pthread_rwlock_unlock(&attn__reg_lock);
    return name;
}

bool attn_registry_contains(const char *name)
{
    char canon[ATTN__NAME_MAX];
    if (!attn__registry_canon(name, canon, sizeof canon)) return false;
    return attn__registry_lookup(canon) != NULL;
}

const char *attn_registry_valid_names(void)
{
    /* Rebuilt when the registry changed; every version is interned. */
    static _Atomic(const char *) cached;
    static _Atomic uint64_t cached_gen;
    uint64_t gen = attn__registry_generation();
    const char *c = atomic_load_explicit(&cached, memory_order_acquire);
    if (c && atomic_load_explicit(&cached_gen, memory_order_acquire) == gen) return c;
    attn__reg_ensure();
    attn__sb sb;
    attn__sb_init(&sb);
    pthread_rwlock_rdlock(&attn__reg_lock);
    /* vLLM's text: its enum's members in order, then names registered at
     * run time (its register() appends members); libattn's own are not in it. */
    bool first = true;
    for (int i = 0; i < attn__reg_n; i++) {
        const attn__catalog_entry *cat = attn__reg_tab[i]->cat;
        if (cat && cat->libattn_only) continue;
        attn__sb_printf(&sb, "%s%s", first ? "" : ", ", attn__reg_tab[i]->name);
        first = false;
    }
    pthread_rwlock_unlock(&attn__reg_lock);
    const char *text = sb.oom || !sb.data ? NULL : attn__intern(sb.data);
    attn__sb_free(&sb);
    if (!text) return "";
    atomic_store_explicit(&cached, text, memory_order_release);
    atomic_store_explicit(&cached_gen, gen, memory_order_release);
    return text;
}

bool attn__registry_auto_alias(const char *stable)
{
    const attn__catalog_entry *c = attn__catalog_find(stable);
    return c && c->auto_alias;
}

attn_status attn__registry_unknown(const char *name)
{
    return attn__fail(ATTN_UNKNOWN_BACKEND,
                      "Unknown attention backend: '%s'. Valid options are: %s", name,
                      attn_registry_valid_names());
}

static attn_status attn__reg_bad_name(const char *name)
{
    return attn__fail(ATTN_INVALID_ARGUMENT,
                      "invalid backend name '%s' (1-63 characters from A-Z, 0-9 and _)", name);
}

static attn_status attn__not_registered(const char *name)
{
    return attn__fail(ATTN_NOT_REGISTERED,
                      "Backend %s must be registered before use. Use register_backend(Backend.%s, "
                      "'your.module.YourClass')",
                      name, name);
}

/* Finds or creates the entry of canon (interned name nm, or interned here
 * when NULL) and sets its override: a locator, or an object and its
 * "object:NAME" locator. */
static attn_status attn__reg_set(const char *canon, const char *nm, const char *loc,
                                 const attn_backend *obj, const char *objloc)
{
    attn__reg_ensure();
    pthread_rwlock_wrlock(&attn__reg_lock);
    attn__reg_entry *e = attn__reg_find_locked(canon);
    if (!e) {
        if (!nm) nm = attn__intern(canon);
        e = nm ? calloc(1, sizeof *e) : NULL;
        if (!e || !attn__reg_push(e)) {
            pthread_rwlock_unlock(&attn__reg_lock);
            free(e);
            return attn__fail(ATTN_OUT_OF_MEMORY, "registering %s: out of memory", canon);
        }
        e->name = nm;
    }
    e->override_locator = loc;
    e->override_object = obj;
    e->object_locator = objloc;
    attn__reg_bump();
    pthread_rwlock_unlock(&attn__reg_lock);
    return ATTN_OK;
}

attn_status attn_register_backend(const char *name, const char *locator)
{
    ATTN__CHECK_NULL(name);
    ATTN__CHECK_NULL(locator);
    char canon[ATTN__NAME_MAX];
    if (!attn__registry_canon(name, canon, sizeof canon)) return attn__reg_bad_name(name);
    attn_status st = attn__locator_check(locator);
    if (st != ATTN_OK) return st;
    const char *loc = attn__intern(locator);
    if (!loc) return attn__fail(ATTN_OUT_OF_MEMORY, "registering %s: out of memory", canon);
    return attn__reg_set(canon, NULL, loc, NULL, NULL);
}

attn_status attn_register_backend_object(const char *name, const attn_backend *b)
{
    ATTN__CHECK_NULL(name);
    ATTN__CHECK_NULL(b);
    char canon[ATTN__NAME_MAX];
    if (!attn__registry_canon(name, canon, sizeof canon)) return attn__reg_bad_name(name);
    attn_status st = attn__backend_check_abi(b, canon);
    if (st != ATTN_OK) return st;
    char text[ATTN__NAME_MAX + 16];
    snprintf(text, sizeof text, "object:%s", canon);
    const char *objloc = attn__intern(text);
    const char *nm = attn__intern(canon);
    if (!objloc || !nm)
        return attn__fail(ATTN_OUT_OF_MEMORY, "registering %s: out of memory", canon);
    return attn__reg_set(canon, nm, NULL, b, objloc);
}

bool attn_registry_is_overridden(const char *name)
{
    char canon[ATTN__NAME_MAX];
    if (!attn__registry_canon(name, canon, sizeof canon)) return false;
    attn__reg_ensure();
    pthread_rwlock_rdlock(&attn__reg_lock);
    attn__reg_entry *e = attn__reg_find_locked(canon);
    bool r = e && (e->override_locator || e->override_object);
    pthread_rwlock_unlock(&attn__reg_lock);
    return r;
}

attn_status attn_registry_clear_override(const char *name)
{
    ATTN__CHECK_NULL(name);
    char canon[ATTN__NAME_MAX];
    if (!attn__registry_canon(name, canon, sizeof canon)) return attn__reg_bad_name(name);
    attn__reg_ensure();
    pthread_rwlock_wrlock(&attn__reg_lock);
    attn__reg_entry *e = attn__reg_find_locked(canon);
    if (e && (e->override_locator || e->override_object)) {
        e->override_locator = NULL;
        e->override_object = NULL;
        e->object_locator = NULL;
        attn__reg_bump();
    }
    pthread_rwlock_unlock(&attn__reg_lock);
    if (!e) return attn__registry_unknown(canon);
    return ATTN_OK;
}

/* What an entry resolves through, copied under the lock. */
typedef struct attn__reg_view {
    const char *name;
    const attn__catalog_entry *cat;
    const char *override_locator;
    const attn_backend *override_object;
    const char *object_locator;
} attn__reg_view;

static attn_status attn__reg_view_of(const char *name, attn__reg_view *v)
{
    memset(v, 0, sizeof *v);
    char canon[ATTN__NAME_MAX];
    if (!attn__registry_canon(name, canon, sizeof canon)) return attn__registry_unknown(name);
    attn__reg_ensure();
    pthread_rwlock_rdlock(&attn__reg_lock);
    attn__reg_entry *e = attn__reg_find_locked(canon);
    if (e) {
        v->name = e->name;
        v->cat = e->cat;
        v->override_locator = e->override_locator;
        v->override_object = e->override_object;
        v->object_locator = e->object_locator;
    }
    pthread_rwlock_unlock(&attn__reg_lock);
    if (!e) return attn__registry_unknown(canon);
    return ATTN_OK;
}

attn_status attn_registry_get_locator(const char *name, const char **locator)
{
    ATTN__CHECK_NULL(name);
    ATTN__CHECK_NULL(locator);
    *locator = NULL;
    attn__reg_view v;
    attn_status st = attn__reg_view_of(name, &v);
    if (st != ATTN_OK) return st;
    if (v.override_object)
        *locator = v.object_locator;
    else if (v.override_locator)
        *locator = v.override_locator;
    else if (v.cat && v.cat->default_locator)
        *locator = v.cat->default_locator;
    else
        return attn__not_registered(v.name);
    return ATTN_OK;
}

/* On a simulated machine a backend imports only when the machine has every
 * component its code needs (flashinfer for the FlashInfer family). */
static attn_status attn__sim_imports(const attn_platform *p, const attn_backend *b)
{
    if (!p || !p->simulated || !b->desc) return ATTN_OK;
    uint32_t missing = b->desc->import_requires & ~p->installed;
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++) {
        if ((missing >> c) & 1u)
            return attn__fail(ATTN_IMPORT_ERROR,
                              "No module named %s (component %s is not installed on machine %s)",
                              attn_component_name((attn_component)c),
                              attn_component_name((attn_component)c), p->name);
    }
    return ATTN_OK;
}

attn_status attn_backend_resolve(const attn_platform *p, const char *name, const attn_backend **out)
{
    ATTN__CHECK_NULL(name);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn__reg_view v;
    attn_status st = attn__reg_view_of(name, &v);
    if (st != ATTN_OK) return st;
    const attn_backend *b = NULL;
    if (v.override_object) {
        b = v.override_object;
    } else if (v.override_locator) {
        st = attn__loader_resolve(v.override_locator, &b);
    } else if (!v.cat || !v.cat->default_locator) {
        return attn__not_registered(v.name);
    } else if (p && p->simulated && v.cat->builtin && v.cat->builtin()) {
        b = v.cat->builtin();
    } else {
        st = attn__loader_resolve(v.cat->default_locator, &b);
    }
    if (st != ATTN_OK) return st;
    st = attn__sim_imports(p, b);
    if (st != ATTN_OK) return st;
    *out = b;
    return ATTN_OK;
}

attn_status attn_backend_has_kernel(const char *name, bool *out)
{
    ATTN__CHECK_NULL(name);
    ATTN__CHECK_NULL(out);
    *out = false;
    attn__reg_view v;
    attn_status st = attn__reg_view_of(name, &v);
    if (st != ATTN_OK) return st;
    if (v.override_object)
        *out = v.override_object->kernel != NULL;
    else if (v.override_locator)
        *out = attn__loader_has_kernel(v.override_locator);
    else if (v.cat && v.cat->default_locator)
        *out = attn__loader_has_kernel(v.cat->default_locator);
    return ATTN_OK;
}

/* ---- snapshots for the plugin loader's rollback -------------------------- */

typedef struct attn__saved {
    attn__reg_entry *e;
    attn__reg_entry state;
} attn__saved;

struct attn__registry_snapshot {
    int n;
    int rules; /* platform rules registered at the snapshot */
    attn__saved saved[];
};

attn__registry_snapshot *attn__registry_snapshot_take(void)
{
    attn__reg_ensure();
    pthread_rwlock_rdlock(&attn__reg_lock);
    int n = attn__reg_n;
    attn__registry_snapshot *s = malloc(sizeof *s + sizeof(attn__saved) * (size_t)n);
    if (s) {
        s->n = n;
        s->rules = attn_platform_rule_count();
        attn__saved *saved = s->saved;
        for (int i = 0; i < n; i++) {
            saved[i].e = attn__reg_tab[i];
            saved[i].state = *attn__reg_tab[i];
        }
    }
    pthread_rwlock_unlock(&attn__reg_lock);
    return s;
}

void attn__registry_snapshot_restore(attn__registry_snapshot *s)
{
    if (!s) return;
    attn__saved *saved = s->saved;
    pthread_rwlock_wrlock(&attn__reg_lock);
    /* Entries added since the snapshot leave the table (kept allocated). */
    for (int i = 0; i < attn__reg_n; i++) {
        bool known = false;
        for (int j = 0; j < s->n && !known; j++)
            known = saved[j].e == attn__reg_tab[i];
        if (!known) {
            attn__graveyard *g = malloc(sizeof *g);
            if (g) {
                g->e = attn__reg_tab[i];
                g->next = attn__reg_graveyard;
                attn__reg_graveyard = g;
            }
        }
    }
    for (int j = 0; j < s->n; j++) {
        *saved[j].e = saved[j].state;
        attn__reg_tab[j] = saved[j].e;
    }
    attn__reg_n = s->n;
    attn__reg_bump();
    pthread_rwlock_unlock(&attn__reg_lock);
    attn__rules_truncate(s->rules);
    free(s);
}

void attn__registry_snapshot_free(attn__registry_snapshot *s)
{
    free(s);
}
