/* Plugins: shared objects on ATTN_PLUGIN_PATH (colon-separated folders),
 * filtered by ATTN_PLUGINS (comma-separated plugin names; unset = all).
 * Each exports a data symbol `attn_plugin_abi` (uint32_t, checked before any
 * of its code runs) and a function `attn_plugin_init` that receives the
 * registration API. Loaded once per process, before the first selection;
 * never unloaded while the process runs. A plugin that fails is reported
 * and skipped, and whatever it registered is rolled back.
 *
 * Discovery and naming. Every file ending in ".so" directly inside a folder
 * of ATTN_PLUGIN_PATH is a candidate (folders in the order given, files
 * sorted by byte order within a folder; empty entries and missing folders
 * are ignored). The plugin's name is the file name without a leading "lib"
 * and without the ".so" suffix: "libattn_example.so" -> "attn_example". The
 * first file with a given name wins; later ones are reported and skipped.
 * ATTN_PLUGINS lists names (spaces around them ignored); unset loads all,
 * an empty value loads none. A name not on the list is reported as
 * skipped_by_allowlist and is never opened.
 *
 * Rules for plugin authors (see examples/plugin/README.md):
 *   - Opened with dlopen(RTLD_NOW | RTLD_LOCAL): every dependency must
 *     resolve at open time, and the plugin's symbols stay private to it.
 *   - No ELF constructors (__attribute__((constructor)), C++ static objects
 *     with constructors, ...). The loader reads attn_plugin_abi from the
 *     file's dynamic symbol table before dlopen, so a plugin whose ABI is
 *     wrong (or that has no such symbol, or is no 64-bit ELF shared object
 *     of this machine) is never opened and none of its code runs. A plugin
 *     that passes is opened, and dlopen runs its constructors before
 *     attn_plugin_init; all work belongs in attn_plugin_init.
 *   - Register only from inside attn_plugin_init, through `api`. If init
 *     returns anything but ATTN_OK, every registration it made is undone.
 *   - Do not link libattn into the plugin: use the host services in `api`
 *     (they are the host's own libattn functions, whether the host linked
 *     libattn statically or as libattn.so). A plugin that registered
 *     something is never dlclose'd, so objects it registers may be static. */
#ifndef ATTN_PLUGIN_H
#define ATTN_PLUGIN_H

#include <stddef.h>

#include "attn/layer.h"
#include "attn/platform.h"
#include "attn/registry.h"

ATTN_EXTERN_C_BEGIN

#define ATTN_PLUGIN_ABI_VERSION 2u /* 2: backend contract v2 (attn/backend.h) */
#define ATTN_PLUGIN_ABI_SYMBOL  "attn_plugin_abi"
#define ATTN_PLUGIN_INIT_SYMBOL "attn_plugin_init"

typedef struct attn_plugin_api {
    uint32_t abi_version; /* ATTN_PLUGIN_ABI_VERSION */
    uint32_t struct_size; /* sizeof(attn_plugin_api) of the host: attn/abi.h */
    const char *plugin_name;
    /* Valid only while attn_plugin_init runs (ATTN_BAD_STATE afterwards). */
    attn_status (*register_backend)(const char *name, const char *locator);
    attn_status (*register_backend_object)(const char *name, const attn_backend *b);
    void (*log)(int level, const char *msg);
    /* ---- host services (check ATTN_PLUGIN_API_HAS before use) ----------
     * The host's own libattn public functions. Unlike `api` itself (valid
     * during init only), these pointers stay valid for the whole process. */
    const char *plugin_path;
    attn_status (*platform_current)(const attn_platform **out);
    attn_status (*backend_resolve)(const attn_platform *p, const char *name,
                                   const attn_backend **out);
    const char *(*last_error)(void);
    /* Sets this thread's failure detail to msg and returns s: a plugin's init
     * returns api->fail(ATTN_..., "why") so the report carries the reason. */
    attn_status (*fail)(attn_status s, const char *msg);
    /* attn_register_platform_rule (attn/registry.h): a place in the priority
     * list of a platform without rules of its own, for a backend the plugin
     * registered. Valid only while attn_plugin_init runs; rolled back with
     * the plugin's other registrations when init fails. */
    attn_status (*register_platform_rule)(const attn_platform_rule *rule);
} attn_plugin_api;

/* True when the host's api struct is recent enough to hold `field`. */
#define ATTN_PLUGIN_API_HAS(api, field)                                                            \
    ((api)->struct_size >= offsetof(attn_plugin_api, field) + sizeof((api)->field))

/* What a plugin exports (declared here so the compiler checks a plugin's
 * definitions; libattn itself never defines them):
 *   ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;
 *   ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api);   */
typedef attn_status (*attn_plugin_init_fn)(const attn_plugin_api *api);
ATTN_EXPORT extern const uint32_t attn_plugin_abi;
ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api);

/* Load plugins now if not yet done (idempotent, thread-safe: concurrent
 * callers wait until the one load has finished). Returns ATTN_OK even when
 * individual plugins failed (they are in the report); a call made from
 * inside a plugin's init returns ATTN_OK at once instead of deadlocking. */
ATTN_API attn_status attn_plugins_load(void);

typedef struct attn_plugin_report {
    const char *name; /* file stem, e.g. "attn_example" */
    const char *path;
    bool loaded;
    bool skipped_by_allowlist;
    const char *error; /* NULL when loaded or skipped by the allowlist */
} attn_plugin_report;
/* The report of the load (loading first if not done yet): one entry per
 * candidate file, in discovery order. Strings live as long as the process. */
ATTN_API int attn_plugins_count(void);
ATTN_API attn_status attn_plugins_report(int i, attn_plugin_report *out);
/* How many times the loader actually ran in this process (tests). */
ATTN_API int attn_plugins_load_count(void);
/* Name of the loaded plugin whose registration of backend `name` is in
 * effect, or NULL (not registered by a plugin). For `attn backends`. */
ATTN_API const char *attn_plugins_owner(const char *name);
/* The report as a JSON array of {"name", "path", "loaded",
 * "skipped_by_allowlist", "error", "registered": [names]}. Caller frees. */
ATTN_API attn_status attn_plugins_to_json(char **out);

ATTN_EXTERN_C_END

#endif
