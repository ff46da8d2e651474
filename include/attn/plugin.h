/* Plugins: shared objects on ATTN_PLUGIN_PATH (colon-separated folders),
 * filtered by ATTN_PLUGINS (comma-separated plugin names; unset = all).
 * Each exports a data symbol `attn_plugin_abi` (uint32_t, checked before any
 * of its code runs) and a function `attn_plugin_init` that receives the
 * registration API. Loaded once per process, before the first selection;
 * never unloaded while the process runs. A plugin that fails is reported
 * and skipped, and whatever it registered is rolled back. */
#ifndef ATTN_PLUGIN_H
#define ATTN_PLUGIN_H

#include "attn/backend.h"

ATTN_EXTERN_C_BEGIN

#define ATTN_PLUGIN_ABI_VERSION 1u
#define ATTN_PLUGIN_ABI_SYMBOL "attn_plugin_abi"
#define ATTN_PLUGIN_INIT_SYMBOL "attn_plugin_init"

typedef struct attn_plugin_api {
    uint32_t abi_version; /* ATTN_PLUGIN_ABI_VERSION */
    uint32_t struct_size;
    const char *plugin_name;
    attn_status (*register_backend)(const char *name, const char *locator);
    attn_status (*register_backend_object)(const char *name, const attn_backend *b);
    void (*log)(int level, const char *msg);
} attn_plugin_api;

/* What a plugin exports:
 *   ATTN_API const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;
 *   ATTN_API attn_status attn_plugin_init(const attn_plugin_api *api);   */
typedef attn_status (*attn_plugin_init_fn)(const attn_plugin_api *api);

/* Load plugins now if not yet done (idempotent, thread-safe). */
ATTN_API attn_status attn_plugins_load(void);

typedef struct attn_plugin_report {
    const char *name;   /* file stem, e.g. "attn_example" */
    const char *path;
    bool loaded;
    bool skipped_by_allowlist;
    const char *error;  /* NULL when loaded */
} attn_plugin_report;
ATTN_API int attn_plugins_count(void);
ATTN_API attn_status attn_plugins_report(int i, attn_plugin_report *out);
/* How many times the loader actually ran in this process (tests). */
ATTN_API int attn_plugins_load_count(void);

ATTN_EXTERN_C_END

#endif
