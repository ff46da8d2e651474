/* Plugin loader (contract in attn/plugin.h).
 *
 * Invariants:
 *  - The loader runs at most once per process (pthread_once): concurrent
 *    callers of attn_plugins_load() block until it has finished, so nobody
 *    selects a backend while plugins are still registering. A call made
 *    from inside a plugin's init (same thread) returns at once instead of
 *    deadlocking on the once-guard.
 *  - Per candidate, in this order: allowlist (a filtered plugin is never
 *    opened), the ABI *data* symbol read from the file's dynamic symbol
 *    table without loading it (src/util/elf_abi.c: nothing of a plugin
 *    with the wrong ABI runs, ELF constructors included), dlopen(RTLD_NOW |
 *    RTLD_LOCAL), the same symbol read and compared in the loaded image, and
 *    only then is the init symbol looked up and called. Both symbols must be
 *    defined by the plugin file itself, not by a library it depends on. A
 *    plugin that passes the file check has its constructors run by dlopen,
 *    before attn_plugin_init; the plugin rules still forbid them.
 *  - The registry is snapshotted before a plugin's init and restored when
 *    init fails, so nothing it half-registered stays (names it added go,
 *    overrides it replaced come back). Registrations are also journalled
 *    for the report. A plugin that registered anything is never dlclose'd
 *    (its objects may be referenced); other failures are. Loading is meant
 *    to run before anything else registers: a registration made by another
 *    thread while a failing init runs is rolled back with it.
 *  - Failures are logged as "Failed to load plugin NAME: reason", kept in
 *    the report, and loading goes on with the next candidate.
 * The report and journal are written only by the loader and never freed;
 * after the once-guard they are read-only, so readers need no lock. */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/backend.h"
#include "attn/log.h"
#include "attn/platform.h"
#include "attn/plugin.h"
#include "attn/registry.h"
#include "plugin/plugin_impl.h"
#include "registry/registry_impl.h"
#include "util/error.h"
#include "util/strbuf.h"

typedef struct plugin_rec {
    char *name;
    char *path;
    bool loaded;
    bool skipped;
    char *error;
} plugin_rec;

/* One successful registration made by a plugin (for the report). */
typedef struct reg_entry {
    int plugin;
    char *name;
    bool undone; /* rolled back with its plugin's failed init */
} reg_entry;

static plugin_rec *g_recs;
static int g_nrecs, g_caprecs;
static reg_entry *g_regs;
static int g_nregs, g_capregs;
static attn_status g_status = ATTN_OK;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_int g_load_count;
static _Thread_local bool g_in_loader;
static _Thread_local int g_current = -1; /* plugin whose init runs on this thread */

/* ---- small helpers ------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* "libattn_example.so" -> "attn_example"; "foo.so" -> "foo". */
static char *plugin_name_of(const char *file)
{
    size_t n = strlen(file) - 3; /* without ".so" */
    const char *s = file;
    if (n > 3 && strncmp(s, "lib", 3) == 0) {
        s += 3;
        n -= 3;
    }
    return strndup(s, n);
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return true;
    int ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return false;
    *arr = p;
    *cap = ncap;
    return true;
}

static const char *dl_text(void)
{
    const char *e = dlerror();
    return e ? e : "unknown loader error";
}

/* ---- the registration api handed to plugins ------------------------------ */

static attn_status api_not_in_init(void)
{
    return attn__fail(ATTN_BAD_STATE,
                      "plugins may register backends only from inside attn_plugin_init");
}

/* Makes room for and records one registration about to be made. */
static attn_status journal_prepare(reg_entry *e, const char *name)
{
    if (!grow((void **)&g_regs, &g_capregs, g_nregs + 1, sizeof *g_regs))
        return attn__fail(ATTN_OUT_OF_MEMORY, "plugin registration journal");
    e->plugin = g_current;
    e->undone = false;
    e->name = strdup(name);
    return e->name ? ATTN_OK : attn__fail(ATTN_OUT_OF_MEMORY, "plugin registration journal");
}

/* What the running init last heard from the api: a failure of one of its
 * calls or its own api->fail. A failed init is reported with this text only
 * when it returns the same status, so the report never carries the text of
 * something else (an earlier refused call, a failure before init ran). */
static _Thread_local struct {
    attn_status st;
    char text[512];
} g_heard;

static attn_status heard(attn_status st)
{
    if (st != ATTN_OK) {
        g_heard.st = st;
        snprintf(g_heard.text, sizeof g_heard.text, "%s", attn_last_error());
    }
    return st;
}

/* One journalled registration: by locator, or (object) by backend object. */
static attn_status api_register(const char *name, bool object, const char *locator,
                                const attn_backend *b)
{
    if (g_current < 0) return api_not_in_init();
    if (!name) return heard(attn__fail(ATTN_NULL_ARGUMENT, "register: argument 'name' is NULL"));
    reg_entry e;
    attn_status s = journal_prepare(&e, name);
    if (s == ATTN_OK && (object ? b != NULL : locator != NULL))
        s = attn__plugin_check_target(g_recs[g_current].name, name, object ? NULL : locator, b);
    if (s == ATTN_OK)
        s = object ? attn_register_backend_object(name, b) : attn_register_backend(name, locator);
    if (s != ATTN_OK) {
        free(e.name);
        return heard(s);
    }
    g_regs[g_nregs++] = e; /* capacity reserved by journal_prepare */
    return ATTN_OK;
}

static attn_status api_register_backend(const char *name, const char *locator)
{
    return api_register(name, false, locator, NULL);
}

static attn_status api_register_backend_object(const char *name, const attn_backend *b)
{
    return api_register(name, true, NULL, b);
}

static attn_status api_register_platform_rule(const attn_platform_rule *rule)
{
    if (g_current < 0) return api_not_in_init();
    return attn_register_platform_rule(rule);
}

static void api_log(int level, const char *msg)
{
    if (level < ATTN_LOG_ERROR) level = ATTN_LOG_ERROR;
    if (level > ATTN_LOG_DEBUG) level = ATTN_LOG_DEBUG;
    if (g_current >= 0)
        attn_log((attn_log_level)level, "[plugin %s] %s", g_recs[g_current].name,
                 msg ? msg : "(null)");
    else
        attn_log((attn_log_level)level, "%s", msg ? msg : "(null)");
}

static attn_status api_fail(attn_status s, const char *msg)
{
    return heard(attn__fail(s, "%s", msg ? msg : ""));
}

static attn_status api_platform_current(const attn_platform **out)
{
    return heard(attn_platform_current(out));
}

static attn_status api_backend_resolve(const attn_platform *p, const char *name,
                                       const attn_backend **out)
{
    return heard(attn_backend_resolve(p, name, out));
}

/* ---- loading one plugin ----------------------------------------------------- */

/* Records the failure of plugin idx, logs it, and closes the handle unless
 * the plugin registered something (then objects from it may be alive). */
static void plugin_fail(int idx, void *handle, bool keep_open, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void plugin_fail(int idx, void *handle, bool keep_open, const char *fmt, ...)
{
    char reason[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    plugin_rec *r = &g_recs[idx];
    r->loaded = false;
    r->error = strdup(reason);
    if (!r->error) g_status = ATTN_OUT_OF_MEMORY;
    attn_log(ATTN_LOG_WARN, "Failed to load plugin %s: %s", r->name, reason);
    if (handle && !keep_open) dlclose(handle);
}

static void abi_mismatch(int idx, void *h, uint32_t abi)
{
    plugin_fail(idx, h, false,
                "ABI version mismatch: the plugin was built for plugin ABI %u, this "
                "libattn has ABI %u%s",
                (unsigned)abi, (unsigned)ATTN_PLUGIN_ABI_VERSION,
                abi == 1 ? " (backend contract v1: rebuild it against this libattn's headers, "
                           "docs/design/contract-v2.md)"
                         : "");
}

/* dlopen after the ABI checks, or NULL (the failure recorded). The ABI is
 * read from the file first, so a plugin built for another ABI is refused
 * before dlopen could run any of its code (ELF constructors included); the
 * same check is repeated on the loaded image, reading data only. */
static void *open_checked(int idx)
{
    plugin_rec *r = &g_recs[idx];
    char why[512];
    uint32_t abi;
    if (!attn__elf_read_u32(r->path, ATTN_PLUGIN_ABI_SYMBOL, &abi, why, sizeof why)) {
        plugin_fail(idx, NULL, false, "%s", why);
        return NULL;
    }
    if (abi != ATTN_PLUGIN_ABI_VERSION) {
        abi_mismatch(idx, NULL, abi);
        return NULL;
    }
    dlerror();
    void *h = dlopen(r->path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        plugin_fail(idx, NULL, false, "dlopen failed: %s", dl_text());
        return NULL;
    }
    dlerror();
    const void *abi_sym = dlsym(h, ATTN_PLUGIN_ABI_SYMBOL);
    if (!abi_sym) {
        plugin_fail(idx, h, false, "no '%s' symbol (not an attn plugin): %s",
                    ATTN_PLUGIN_ABI_SYMBOL, dl_text());
        return NULL;
    }
    if (!attn__elf_own_symbol(h, abi_sym, STT_OBJECT, ATTN_PLUGIN_ABI_SYMBOL, why, sizeof why)) {
        plugin_fail(idx, h, false, "%s", why);
        return NULL;
    }
    memcpy(&abi, abi_sym, sizeof abi);
    if (abi != ATTN_PLUGIN_ABI_VERSION) {
        abi_mismatch(idx, h, abi);
        return NULL;
    }
    return h;
}

/* The plugin's own entry point, or NULL (the failure recorded). */
static attn_plugin_init_fn find_init(int idx, void *h)
{
    char why[512];
    dlerror();
    void *init_sym = dlsym(h, ATTN_PLUGIN_INIT_SYMBOL);
    if (!init_sym) {
        plugin_fail(idx, h, false, "no entry point '%s': %s", ATTN_PLUGIN_INIT_SYMBOL, dl_text());
        return NULL;
    }
    if (!attn__elf_own_symbol(h, init_sym, STT_FUNC, ATTN_PLUGIN_INIT_SYMBOL, why, sizeof why)) {
        plugin_fail(idx, h, false, "%s", why);
        return NULL;
    }
    attn_plugin_init_fn init;
    memcpy(&init, &init_sym, sizeof init); /* POSIX: object -> function pointer */
    return init;
}

/* Runs init; on failure the registry comes back as it was before. */
static void run_init(int idx, void *h, attn_plugin_init_fn init)
{
    plugin_rec *r = &g_recs[idx];
    attn_plugin_api api = {
        .abi_version = ATTN_PLUGIN_ABI_VERSION,
        .struct_size = (uint32_t)sizeof(attn_plugin_api),
        .plugin_name = r->name,
        .register_backend = api_register_backend,
        .register_backend_object = api_register_backend_object,
        .log = api_log,
        .plugin_path = r->path,
        .platform_current = api_platform_current,
        .backend_resolve = api_backend_resolve,
        .last_error = attn_last_error,
        .fail = api_fail,
        .register_platform_rule = api_register_platform_rule,
    };
    /* The registry as it was before init: restored wholesale if init fails,
     * so names it added disappear and overrides it replaced come back. */
    attn__registry_snapshot *snap = attn__registry_snapshot_take();
    if (!snap) {
        plugin_fail(idx, h, false, "out of memory before attn_plugin_init");
        g_status = ATTN_OUT_OF_MEMORY;
        return;
    }
    int first = g_nregs;
    g_current = idx;
    g_heard.st = ATTN_OK;
    g_heard.text[0] = '\0';
    attn_clear_error();
    attn_status st = init(&api);
    g_current = -1;
    int made = g_nregs - first;

    if (st != ATTN_OK) {
        const char *detail = st == g_heard.st ? g_heard.text : "";
        char status[64];
        if (strcmp(attn_status_name(st), "UNKNOWN_STATUS") == 0)
            snprintf(status, sizeof status, "an unknown status %d", (int)st);
        else
            snprintf(status, sizeof status, "%s", attn_status_name(st));
        attn__registry_snapshot_restore(snap);
        for (int i = first; i < g_nregs; i++)
            g_regs[i].undone = true;
        plugin_fail(idx, h, made > 0,
                    "attn_plugin_init failed with %s%s%s; rolled back %d registration%s", status,
                    detail[0] ? ": " : "", detail, made, made == 1 ? "" : "s");
        return;
    }
    attn__registry_snapshot_free(snap);
    r->loaded = true;
    attn_clear_error();
    attn_log(ATTN_LOG_INFO, "Loaded plugin %s from %s (%d registration%s)", r->name, r->path, made,
             made == 1 ? "" : "s");
}

static void load_one(int idx)
{
    attn_log(ATTN_LOG_DEBUG, "Loading plugin %s", g_recs[idx].name);
    void *h = open_checked(idx);
    if (!h) return;
    attn_plugin_init_fn init = find_init(idx, h);
    if (init) run_init(idx, h, init);
}

/* ---- discovery ---------------------------------------------------------------- */

static int find_rec(const char *name)
{
    for (int i = 0; i < g_nrecs; i++)
        if (strcmp(g_recs[i].name, name) == 0) return i;
    return -1;
}

static plugin_rec *add_rec(const char *dir, const char *file)
{
    if (!grow((void **)&g_recs, &g_caprecs, g_nrecs + 1, sizeof *g_recs)) return NULL;
    plugin_rec *r = &g_recs[g_nrecs];
    memset(r, 0, sizeof *r);
    r->name = plugin_name_of(file);
    attn__sb sb;
    attn__sb_init(&sb);
    attn__sb_puts(&sb, dir);
    if (!ends_with(dir, "/")) attn__sb_putc(&sb, '/');
    attn__sb_puts(&sb, file);
    r->path = attn__sb_take(&sb);
    if (!r->name || !r->path) {
        free(r->name);
        free(r->path);
        return NULL;
    }
    g_nrecs++;
    return r;
}

/* Sorted names of the *.so regular files (or links to them) in dir. */
static int list_folder(const char *dir, char ***out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        attn_log(ATTN_LOG_WARN, "ATTN_PLUGIN_PATH: cannot read folder '%s': %s", dir,
                 strerror(errno));
        return 0;
    }
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strlen(de->d_name) <= 3 || !ends_with(de->d_name, ".so")) continue;
        char full[4096];
        struct stat st;
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (!grow((void **)&names, &cap, n + 1, sizeof *names)) break;
        names[n] = strdup(de->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_strp);
    *out = names;
    return n;
}

/* The next comma-separated name of an ATTN_PLUGINS list, blanks trimmed
 * (*len 0 for an empty item); false at the end of the list. */
static bool allowlist_next(const char **p, const char **name, size_t *len)
{
    while (**p == ' ' || **p == '\t' || **p == ',')
        (*p)++;
    if (!**p) return false;
    const char *start = *p;
    while (**p && **p != ',')
        (*p)++;
    const char *end = *p;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *name = start;
    *len = (size_t)(end - start);
    return true;
}

/* ATTN_PLUGINS: NULL = everything allowed; otherwise the trimmed names. */
static bool allowlist_has(const char *allow, const char *name)
{
    size_t len = strlen(name), n;
    const char *p = allow, *item;
    while (allowlist_next(&p, &item, &n))
        if (n == len && memcmp(item, name, len) == 0) return true;
    return false;
}

static void scan_and_load(const char *path, const char *allow)
{
    char *copy = strdup(path);
    if (!copy) {
        g_status = ATTN_OUT_OF_MEMORY;
        return;
    }
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char **files;
        int nf = list_folder(dir, &files);
        for (int k = 0; k < nf; k++) {
            plugin_rec *r = add_rec(dir, files[k]);
            if (!r) {
                g_status = ATTN_OUT_OF_MEMORY;
                continue;
            }
            int idx = (int)(r - g_recs);
            int dup = find_rec(r->name);
            if (dup != idx) {
                plugin_fail(idx, NULL, false, "another plugin of that name comes first (%s)",
                            g_recs[dup].path);
            } else if (allow && !allowlist_has(allow, r->name)) {
                r->skipped = true;
                attn_log(ATTN_LOG_DEBUG, "Plugin %s is not in ATTN_PLUGINS; not loaded", r->name);
            } else {
                load_one(idx);
            }
        }
        for (int k = 0; k < nf; k++)
            free(files[k]);
        free(files);
    }
    free(copy);
}

/* Names on ATTN_PLUGINS that matched no candidate: a typo would otherwise
 * silently load nothing. */
static void warn_unmatched_allowlist(const char *allow)
{
    size_t n;
    const char *p = allow, *item;
    while (allowlist_next(&p, &item, &n)) {
        if (n == 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)n, item);
        if (find_rec(name) < 0)
            attn_log(ATTN_LOG_WARN,
                     "ATTN_PLUGINS names '%s', but no plugin of that name is on "
                     "ATTN_PLUGIN_PATH",
                     name);
    }
}

static void run_loader(void)
{
    g_in_loader = true;
    atomic_fetch_add(&g_load_count, 1);
    const char *path = getenv("ATTN_PLUGIN_PATH");
    const char *allow = getenv("ATTN_PLUGINS");
    if (!path || !*path) {
        attn_log(ATTN_LOG_DEBUG, "No plugins found (ATTN_PLUGIN_PATH is not set).");
    } else {
        if (!allow)
            attn_log(ATTN_LOG_DEBUG, "All plugins on ATTN_PLUGIN_PATH will be loaded. Set "
                                     "ATTN_PLUGINS to control which plugins to load.");
        scan_and_load(path, allow);
    }
    if (allow) warn_unmatched_allowlist(allow);
    g_in_loader = false;
}

/* ---- public API ---------------------------------------------------------------- */

attn_status attn_plugins_load(void)
{
    if (g_in_loader) return ATTN_OK;
    pthread_once(&g_once, run_loader);
    return g_status;
}

int attn_plugins_load_count(void)
{
    return atomic_load(&g_load_count);
}

int attn_plugins_count(void)
{
    attn_plugins_load();
    return g_nrecs;
}

attn_status attn_plugins_report(int i, attn_plugin_report *out)
{
    ATTN__CHECK_NULL(out);
    attn_plugins_load();
    if (i < 0 || i >= g_nrecs)
        return attn__fail(ATTN_OUT_OF_RANGE, "plugin report index %d is out of range (%d plugins)",
                          i, g_nrecs);
    const plugin_rec *r = &g_recs[i];
    out->name = r->name;
    out->path = r->path;
    out->loaded = r->loaded;
    out->skipped_by_allowlist = r->skipped;
    out->error = r->error;
    return ATTN_OK;
}

const char *attn_plugins_owner(const char *name)
{
    if (!name) return NULL;
    attn_plugins_load();
    for (int i = g_nregs - 1; i >= 0; i--) {
        const reg_entry *e = &g_regs[i];
        if (!e->undone && strcmp(e->name, name) == 0)
            return g_recs[e->plugin].loaded || e->plugin == g_current ? g_recs[e->plugin].name
                                                                      : NULL;
    }
    return NULL;
}

attn_status attn_plugins_to_json(char **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_plugins_load();
    attn__sb sb;
    attn__sb_init(&sb);
    attn__jw w;
    attn__jw_init(&w, &sb, false);
    attn__jw_arr_begin(&w);
    for (int i = 0; i < g_nrecs; i++) {
        const plugin_rec *r = &g_recs[i];
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "name");
        attn__jw_str(&w, r->name);
        attn__jw_key(&w, "path");
        attn__jw_str(&w, r->path);
        attn__jw_key(&w, "loaded");
        attn__jw_bool(&w, r->loaded);
        attn__jw_key(&w, "skipped_by_allowlist");
        attn__jw_bool(&w, r->skipped);
        attn__jw_key(&w, "error");
        attn__jw_str(&w, r->error);
        attn__jw_key(&w, "registered");
        attn__jw_arr_begin(&w);
        for (int j = 0; j < g_nregs; j++)
            if (g_regs[j].plugin == i && !g_regs[j].undone) attn__jw_str(&w, g_regs[j].name);
        attn__jw_arr_end(&w);
        attn__jw_obj_end(&w);
    }
    attn__jw_arr_end(&w);
    *out = attn__sb_take(&sb);
    return *out ? ATTN_OK : attn__fail(ATTN_OUT_OF_MEMORY, "plugin report JSON");
}

const char *attn__plugins_current(void)
{
    return g_current >= 0 ? g_recs[g_current].name : NULL;
}
