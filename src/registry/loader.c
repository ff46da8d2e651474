/* The loader: locator -> backend object, failing the way a Python import
 * fails.
 *
 * Contract. "builtin:NAME" is a backend compiled into libattn. "file:symbol"
 * is a data symbol (an attn_backend) in a shared object, opened with
 * dlopen(RTLD_NOW | RTLD_LOCAL) so every dependency resolves at open time
 * and nothing leaks into the global namespace. A relative file name is
 * looked up in the folders of ATTN_PLUGIN_PATH first, then in libattn's own
 * folder (the modules it installs beside itself, libattn_cuda.so), then by
 * the dynamic loader's own search. A module exporting attn_module_init
 * (attn/backend.h) gets the host table before any object of it is read;
 * its failure is the module's import failure. The object's abi_version is read from the file
 * before dlopen (a module of another backend ABI never runs); after dlopen
 * its ABI header (abi_version, struct_size, then the descriptor's, kernel
 * ops' and device ops' headers) is checked before anything else in it is
 * used. Failures are ATTN_IMPORT_ERROR with text that names
 * the case: module not found, missing dependency, symbol missing, ABI
 * mismatch (detail texts avoid single quotes so they print cleanly inside
 * Python-style reason lists).
 *
 * Invariants. A module that resolved is never closed. Results, good or
 * bad, are cached per (resolved file, symbol) for the process. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/catalog/catalog.h"
#include "registry/catalog_table.h"
#include "registry/registry_impl.h"
#include "util/abi.h"
#include "util/elf_abi.h"
#include "util/error.h"

attn_status attn__locator_check(const char *locator)
{
    if (!strncmp(locator, "builtin:", 8)) {
        if (!locator[8])
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "invalid locator %s: builtin: needs a backend name", locator);
        return ATTN_OK;
    }
    const char *colon = strrchr(locator, ':');
    if (!colon || colon == locator || !colon[1])
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "invalid locator %s: expected builtin:NAME or file.so:symbol", locator);
    return ATTN_OK;
}

/* The text of a wrong backend abi_version (1 is contract v1, before devices). */
static attn_status attn__abi_version_fail(const char *where, const char *what, uint32_t v)
{
    if (v == 1)
        return attn__fail(ATTN_ABI_MISMATCH,
                          "ABI version mismatch: %s has %s abi_version 1, libattn expects %u "
                          "(backend contract v2: rebuild it against this libattn's "
                          "attn/backend.h, docs/design/contract-v2.md)",
                          where, what, ATTN_BACKEND_ABI_VERSION);
    return attn__fail(ATTN_ABI_MISMATCH,
                      "ABI version mismatch: %s has %s abi_version %u, libattn expects %u", where,
                      what, v, ATTN_BACKEND_ABI_VERSION);
}

attn_status attn__backend_check_abi(const attn_backend *b, const char *where)
{
    if (b->abi_version != ATTN_BACKEND_ABI_VERSION)
        return attn__abi_version_fail(where, "backend", b->abi_version);
    if (!attn__struct_size_ok(b->struct_size, ATTN__V2_BACKEND, sizeof(attn_backend)))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "ABI mismatch: %s has backend struct_size %u, libattn accepts %zu to %zu",
                          where, b->struct_size, ATTN__V2_BACKEND, sizeof(attn_backend));
    const attn_backend_desc *d = b->desc;
    if (!d) return attn__fail(ATTN_ABI_MISMATCH, "ABI mismatch: %s has no descriptor", where);
    if (d->abi_version != ATTN_BACKEND_ABI_VERSION)
        return attn__abi_version_fail(where, "descriptor", d->abi_version);
    if (!attn__struct_size_ok(d->struct_size, ATTN__V1_BACKEND_DESC, sizeof(attn_backend_desc)))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "ABI mismatch: %s has descriptor struct_size %u, libattn accepts %zu "
                          "to %zu",
                          where, d->struct_size, ATTN__V1_BACKEND_DESC, sizeof(attn_backend_desc));
    if (!d->name || !*d->name)
        return attn__fail(ATTN_ABI_MISMATCH, "ABI mismatch: %s has a descriptor without a name",
                          where);
    if (d->builder && !attn__struct_size_ok(d->builder->struct_size, ATTN__V1_BUILDER_OPS,
                                            sizeof(attn_builder_ops)))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "ABI mismatch: %s has builder ops struct_size %u, libattn accepts %zu "
                          "to %zu",
                          where, d->builder->struct_size, ATTN__V1_BUILDER_OPS,
                          sizeof(attn_builder_ops));
    if (b->kernel &&
        !attn__struct_size_ok(b->kernel->struct_size, ATTN__V2_KERNEL_OPS, sizeof(attn_kernel_ops)))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "ABI mismatch: %s has kernel ops struct_size %u, libattn accepts %zu "
                          "to %zu",
                          where, b->kernel->struct_size, ATTN__V2_KERNEL_OPS,
                          sizeof(attn_kernel_ops));
    if (b->device &&
        !attn__struct_size_ok(b->device->struct_size, ATTN__V2_DEVICE_OPS, sizeof(attn_device_ops)))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "ABI mismatch: %s has device ops struct_size %u, libattn accepts %zu "
                          "to %zu",
                          where, b->device->struct_size, ATTN__V2_DEVICE_OPS,
                          sizeof(attn_device_ops));
    return ATTN_OK;
}

/* ---- result cache --------------------------------------------------------- */

typedef struct attn__load_result {
    struct attn__load_result *next;
    char *key; /* "file\nsymbol" */
    attn_status status;
    const attn_backend *backend;
    char *error;
} attn__load_result;

static pthread_mutex_t attn__load_mu = PTHREAD_MUTEX_INITIALIZER;
static attn__load_result *attn__load_cache;

static attn__load_result *attn__load_cached(const char *key)
{
    for (attn__load_result *r = attn__load_cache; r; r = r->next)
        if (!strcmp(r->key, key)) return r;
    return NULL;
}

static void attn__load_remember(const char *key, attn_status st, const attn_backend *b,
                                const char *error)
{
    attn__load_result *r = calloc(1, sizeof *r);
    if (!r) return;
    r->key = strdup(key);
    r->error = strdup(error ? error : "");
    if (!r->key || !r->error) {
        free(r->key);
        free(r->error);
        free(r);
        return;
    }
    r->status = st;
    r->backend = b;
    r->next = attn__load_cache;
    attn__load_cache = r;
}

/* First folder of ATTN_PLUGIN_PATH holding file, written into out. */
static bool attn__find_in_plugin_path(const char *file, char *out, size_t size)
{
    const char *path = getenv("ATTN_PLUGIN_PATH");
    if (!path) return false;
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        if (n > 0) {
            int w = snprintf(out, size, "%.*s/%s", (int)n, path, file);
            if (w > 0 && (size_t)w < size && access(out, F_OK) == 0) return true;
        }
        path += n;
        if (*path == ':') path++;
    }
    return false;
}

/* The folder of the image libattn is linked into (libattn.so, or the
 * program that links libattn.a), holding file: written into out. */
static bool attn__find_beside_libattn(const char *file, char *out, size_t size)
{
    static const char here = 0;
    Dl_info info;
    if (!dladdr(&here, &info) || !info.dli_fname) return false;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash) return false;
    int w = snprintf(out, size, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, file);
    return w > 0 && (size_t)w < size && access(out, F_OK) == 0;
}

static attn_status attn__module_fail(attn_status s, const char *msg)
{
    return attn__fail(s, "%s", msg ? msg : attn_strerror(s));
}

static const attn_module_host attn__module_host = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_module_host),
    .catalog_builtin = attn_backend_catalog_builtin,
    .fail = attn__module_fail,
};

/* The module's attn_module_init, when it has one; its text is the import
 * failure's (a module names itself in it). */
static attn_status attn__module_init(void *h)
{
    void *sym = dlsym(h, "attn_module_init");
    if (!sym) return ATTN_OK;
    attn_module_init_fn init;
    memcpy(&init, &sym, sizeof init); /* POSIX: object -> function pointer */
    attn_clear_error();
    attn_status st = init(&attn__module_host);
    if (st == ATTN_OK) return ATTN_OK;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", attn_last_error()[0] ? attn_last_error() : attn_strerror(st));
    return attn__fail(ATTN_IMPORT_ERROR, "%s", msg);
}

/* The object's abi_version read from the file before dlopen: a module
 * built for another backend ABI is refused with none of its code run (ELF
 * constructors included). When the file cannot be read this way (not a
 * file here, the symbol lives in a library it links) the check after
 * dlopen decides, as before. */
static attn_status attn__dl_precheck(const char *file, const char *symbol)
{
    if (access(file, R_OK) != 0) return ATTN_OK;
    uint32_t abi = 0;
    char why[256];
    if (!attn__elf_read_u32(file, symbol, &abi, why, sizeof why) || abi == ATTN_BACKEND_ABI_VERSION)
        return ATTN_OK;
    char where[1600];
    snprintf(where, sizeof where, "%s:%s", file, symbol);
    attn__abi_version_fail(where, "backend", abi);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", attn_last_error());
    return attn__fail(ATTN_IMPORT_ERROR, "%s; the module was not opened", msg);
}

static attn_status attn__dl_load(const char *file, const char *symbol, const attn_backend **out)
{
    bool has_slash = strchr(file, '/') != NULL;
    bool exists = has_slash && access(file, F_OK) == 0;
    attn_status pre = attn__dl_precheck(file, symbol);
    if (pre != ATTN_OK) return pre;
    dlerror();
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *err = dlerror();
        if (!err) err = "unknown dlopen failure";
        bool cannot_open = strstr(err, "cannot open shared object file") != NULL;
        /* The loader names the file it could not open first: when that is
         * the module itself it is absent, otherwise one of its needs is. */
        size_t fl = strlen(file);
        bool about_module = !strncmp(err, file, fl) && err[fl] == ':';
        if (has_slash && !exists)
            return attn__fail(ATTN_IMPORT_ERROR, "No module named %s (%s)", file, err);
        if (cannot_open && about_module && !exists)
            return attn__fail(ATTN_IMPORT_ERROR, "No module named %s (%s)", file, err);
        if (cannot_open)
            return attn__fail(ATTN_IMPORT_ERROR, "cannot load %s: missing dependency (%s)", file,
                              err);
        return attn__fail(ATTN_IMPORT_ERROR, "cannot load %s (%s)", file, err);
    }
    attn_status ist = attn__module_init(h);
    if (ist != ATTN_OK) return ist; /* stays open: init may have run */
    dlerror();
    void *sym = dlsym(h, symbol);
    if (!sym) {
        const char *err = dlerror();
        attn_status st = attn__fail(ATTN_IMPORT_ERROR, "cannot import name %s from %s (%s)", symbol,
                                    file, err ? err : "symbol is NULL");
        dlclose(h);
        return st;
    }
    const attn_backend *b = sym;
    char where[1600];
    snprintf(where, sizeof where, "%s:%s", file, symbol);
    attn_status st = attn__backend_check_abi(b, where);
    if (st != ATTN_OK) {
        /* Same message, reported as the import failure it is. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        dlclose(h);
        return attn__fail(ATTN_IMPORT_ERROR, "%s", msg);
    }
    *out = b; /* h stays open for the life of the process */
    return ATTN_OK;
}

attn_status attn__loader_resolve(const char *locator, const attn_backend **out)
{
    *out = NULL;
    if (!strncmp(locator, "builtin:", 8)) {
        const char *why = NULL;
        const attn_backend *b = attn__catalog_builtin(locator + 8, &why);
        if (!b) return attn__fail(ATTN_IMPORT_ERROR, "%s", why);
        attn_status st = attn__backend_check_abi(b, locator);
        if (st != ATTN_OK) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            return attn__fail(ATTN_IMPORT_ERROR, "%s", msg);
        }
        *out = b;
        return ATTN_OK;
    }
    attn_status st = attn__locator_check(locator);
    if (st != ATTN_OK) return ATTN_IMPORT_ERROR; /* the check set the detail */
    const char *colon = strrchr(locator, ':');
    char file[1024], resolved[1200], key[1400];
    snprintf(file, sizeof file, "%.*s", (int)(colon - locator), locator);
    const char *symbol = colon + 1;
    const char *use = file;
    if (!strchr(file, '/') && (attn__find_in_plugin_path(file, resolved, sizeof resolved) ||
                               attn__find_beside_libattn(file, resolved, sizeof resolved)))
        use = resolved;
    snprintf(key, sizeof key, "%s\n%s", use, symbol);

    pthread_mutex_lock(&attn__load_mu);
    attn__load_result *r = attn__load_cached(key);
    if (!r) {
        const attn_backend *b = NULL;
        st = attn__dl_load(use, symbol, &b);
        attn__load_remember(key, st, b, st == ATTN_OK ? NULL : attn_last_error());
        r = attn__load_cached(key);
        if (!r) { /* could not remember (out of memory): answer anyway */
            pthread_mutex_unlock(&attn__load_mu);
            *out = b;
            return st;
        }
    }
    st = r->status;
    const attn_backend *b = r->backend;
    char err[1024];
    snprintf(err, sizeof err, "%s", r->error);
    pthread_mutex_unlock(&attn__load_mu);
    if (st != ATTN_OK) return attn__fail(st, "%s", err);
    *out = b;
    return ATTN_OK;
}

bool attn__loader_has_kernel(const char *locator)
{
    if (!strncmp(locator, "builtin:", 8)) {
        const attn_backend *b = attn__catalog_builtin(locator + 8, NULL);
        return b && b->kernel;
    }
    if (attn__locator_check(locator) != ATTN_OK) return false;
    const char *colon = strrchr(locator, ':');
    char file[1024], resolved[1200];
    snprintf(file, sizeof file, "%.*s", (int)(colon - locator), locator);
    const char *use = file;
    if (!strchr(file, '/') && (attn__find_in_plugin_path(file, resolved, sizeof resolved) ||
                               attn__find_beside_libattn(file, resolved, sizeof resolved)))
        use = resolved;
    if (access(use, R_OK) == 0) {
        uint32_t abi = 0;
        char why[256];
        if (attn__elf_read_u32(use, colon + 1, &abi, why, sizeof why) &&
            abi != ATTN_BACKEND_ABI_VERSION)
            return false; /* another ABI: none of it may run */
    }
    /* dlopen runs no module code beyond ELF constructors (which the module
     * rules forbid); attn_module_init is not called. Never closed, as a
     * resolved module. */
    void *h = dlopen(use, RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    const attn_backend *b = dlsym(h, colon + 1);
    return b && b->abi_version == ATTN_BACKEND_ABI_VERSION &&
           attn__struct_size_ok(b->struct_size, ATTN__V2_BACKEND, sizeof(attn_backend)) &&
           b->kernel != NULL;
}
