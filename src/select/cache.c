/* The selection cache behind attn_select: an immutable, atomically
 * published open-addressing table read without a lock; inserts take a
 * mutex and publish with release stores. Entries live until the process
 * ends (a clear retires a table without freeing it). */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "registry/registry_impl.h"
#include "select/selection.h"
#include "util/config_fields.h"
#include "util/error.h"
#include "util/strbuf.h"

typedef struct attn__cache_key {
    uint64_t hash;
    const attn_platform *platform;
    uint64_t platform_id;
    uint32_t installed;
    uint32_t settings;
    uint64_t reg_gen;
    const char *requested; /* upper case, or NULL for automatic */
    attn_selector_config cfg;
} attn__cache_key;

typedef struct attn__cache_entry {
    attn__cache_key key; /* key.requested points into sel (same text) */
    attn_selection *sel;
} attn__cache_entry;

typedef struct attn__cache_table {
    size_t mask;
    size_t count;
    struct attn__cache_table *retired_next; /* chain of retired tables */
    _Atomic(attn__cache_entry *) slots[];
} attn__cache_table;

static _Atomic(attn__cache_table *) attn__cache;
static pthread_mutex_t attn__cache_mu = PTHREAD_MUTEX_INITIALIZER;
/* Retired tables and the entries of cleared ones stay reachable here:
 * readers may still be walking them, and callers may hold results. */
static attn__cache_table *attn__cache_retired;
static attn__cache_table *attn__cache_cleared;

static inline uint64_t attn__mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* The config part is the field table's hash; attn__key_equal settles
 * collisions with its equality (keys hold whole current structs). */
static uint64_t attn__key_hash(const attn__cache_key *k)
{
    uint64_t h = attn__mix(k->platform_id, (uint64_t)(uintptr_t)k->platform);
    h = attn__mix(h, ((uint64_t)k->installed << 32) | k->settings);
    h = attn__mix(h, k->reg_gen);
    h = attn__mix(h, attn__config_hash_full(&k->cfg));
    for (const char *r = k->requested; r && *r; r++)
        h = (h ^ (unsigned char)*r) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static bool attn__key_equal(const attn__cache_key *a, const attn__cache_key *b)
{
    if (a->hash != b->hash || a->platform != b->platform || a->platform_id != b->platform_id ||
        a->installed != b->installed || a->settings != b->settings || a->reg_gen != b->reg_gen)
        return false;
    if ((a->requested == NULL) != (b->requested == NULL)) return false;
    if (a->requested && strcmp(a->requested, b->requested) != 0) return false;
    return attn__config_equal_full(&a->cfg, &b->cfg);
}

static attn__cache_entry *attn__cache_find(attn__cache_table *t, const attn__cache_key *k)
{
    if (!t) return NULL;
    for (size_t i = k->hash & t->mask;; i = (i + 1) & t->mask) {
        attn__cache_entry *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (!e) return NULL;
        if (attn__key_equal(&e->key, k)) return e;
    }
}

static attn__cache_table *attn__cache_table_new(size_t cap)
{
    attn__cache_table *t = calloc(1, sizeof *t + sizeof(t->slots[0]) * cap);
    if (t) t->mask = cap - 1;
    return t;
}

static void attn__cache_place(attn__cache_table *t, attn__cache_entry *e)
{
    size_t i = e->key.hash & t->mask;
    while (atomic_load_explicit(&t->slots[i], memory_order_relaxed))
        i = (i + 1) & t->mask;
    atomic_store_explicit(&t->slots[i], e, memory_order_release);
    t->count++;
}

/* Caller holds attn__cache_mu. Returns the table e ended up in, or NULL. */
static bool attn__cache_insert_locked(attn__cache_entry *e)
{
    attn__cache_table *t = atomic_load_explicit(&attn__cache, memory_order_relaxed);
    if (!t || (t->count + 1) * 2 > t->mask + 1) {
        size_t cap = t ? (t->mask + 1) * 2 : 256;
        attn__cache_table *nt = attn__cache_table_new(cap);
        if (!nt) return false;
        if (t) {
            for (size_t i = 0; i <= t->mask; i++) {
                attn__cache_entry *old = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
                if (old) attn__cache_place(nt, old);
            }
            t->retired_next = attn__cache_retired;
            attn__cache_retired = t;
        }
        atomic_store_explicit(&attn__cache, nt, memory_order_release);
        t = nt;
    }
    attn__cache_place(t, e);
    return true;
}

static attn_status attn__cache_key_make(const attn_platform *p, const char *requested,
                                        const attn_selector_config *cfg, attn__cache_key *k,
                                        char *buf, size_t size)
{
    k->platform = p;
    k->platform_id = p->id;
    k->installed = p->installed;
    k->settings = 0;
    for (int i = 0; i < ATTN_SETTING_COUNT; i++)
        k->settings |= (uint32_t)p->settings[i] << i;
    k->reg_gen = attn__registry_generation();
    k->requested = NULL;
    if (requested && strcasecmp(requested, "auto") != 0) {
        size_t i = 0;
        for (; requested[i]; i++) {
            if (i + 1 >= size)
                return attn__fail(ATTN_INVALID_ARGUMENT, "backend name too long (%zu characters)",
                                  strlen(requested));
            buf[i] = (char)toupper((unsigned char)requested[i]);
        }
        buf[i] = '\0';
        k->requested = buf;
    }
    attn_status st = attn__effective_config(p, cfg, &k->cfg);
    if (st != ATTN_OK) return st;
    k->hash = attn__key_hash(k);
    return ATTN_OK;
}

attn_status attn_select(const attn_platform *p, const char *requested,
                        const attn_selector_config *cfg, const attn_selection **out)
{
    if (out) *out = NULL;
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(cfg);
    ATTN__CHECK_NULL(out);
    attn__ensure_plugins();
    attn__cache_key key;
    char reqbuf[256];
    attn_status kst = attn__cache_key_make(p, requested, cfg, &key, reqbuf, sizeof reqbuf);
    if (kst != ATTN_OK) return kst;
    attn__cache_entry *e =
        attn__cache_find(atomic_load_explicit(&attn__cache, memory_order_acquire), &key);
    if (e) {
        *out = e->sel;
        return attn__sel_status(e->sel);
    }

    attn_selection *s = NULL;
    attn_status st = attn_select_uncached(p, requested, cfg, &s);
    if (!s) return st;
    e = calloc(1, sizeof *e);
    if (!e) {
        attn_selection_free(s);
        return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory while caching a selection");
    }
    e->key = key;
    e->key.requested = s->requested; /* the same upper-case text, owned by s */
    e->sel = s;

    pthread_mutex_lock(&attn__cache_mu);
    attn__cache_entry *won =
        attn__cache_find(atomic_load_explicit(&attn__cache, memory_order_relaxed), &key);
    bool inserted = false;
    if (!won) {
        inserted = attn__cache_insert_locked(e);
        won = inserted ? e : NULL;
    }
    pthread_mutex_unlock(&attn__cache_mu);
    if (!inserted) {
        attn_selection_free(s);
        free(e);
        if (!won) return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory while caching a selection");
    } else {
        attn__sel_log(won->sel);
    }
    *out = won->sel;
    return attn__sel_status(won->sel);
}

void attn_select_cache_clear(void)
{
    pthread_mutex_lock(&attn__cache_mu);
    attn__cache_table *t = atomic_load_explicit(&attn__cache, memory_order_relaxed);
    if (t) {
        atomic_store_explicit(&attn__cache, NULL, memory_order_release);
        t->retired_next = attn__cache_cleared;
        attn__cache_cleared = t;
    }
    pthread_mutex_unlock(&attn__cache_mu);
}
