/* The catalog table (internal): one entry per registry name, in
 * declaration order: vLLM 0.32.0's AttentionBackendEnum, every member in its
 * order, then libattn's own names (REFERENCE, CPU_MLA_SPARSE, REFERENCE_MLA,
 * REFERENCE_MLA_SPARSE: libattn_only). Each entry carries its default
 * locator and, when libattn holds a descriptor for it, the built-in backend
 * object: the catalog's descriptor-only objects and the kernels' backends
 * (CPU_ATTN, CPU_MLA, REFERENCE...), which is why the table is the
 * registry's and not the catalog's (docs/design/layers.md).
 *
 * Invariant: the table is immutable; names are upper case and unique. */
#ifndef ATTN_REGISTRY_CATALOG_TABLE_H
#define ATTN_REGISTRY_CATALOG_TABLE_H

#include "attn/backend.h"

typedef struct attn__catalog_entry {
    const char *name;
    /* Where the code lives on a real machine; NULL = none (CUSTOM,
     * TORCH_SDPA: must be registered before use). */
    const char *default_locator;
    /* The built-in object (descriptor only for GPU backends); NULL when
     * libattn has none (NO_ATTENTION, CUSTOM, TORCH_SDPA). A function that
     * returns NULL reads as "libattn was built without the NAME kernels".
     * Read through attn__catalog_builtin. */
    const attn_backend *(*builtin)(void);
    /* Human notes for `attn backends` and docs/backends.md (dynamic rules). */
    const char *notes;
    /* (optional) the platform rule of a built-in backend for a platform
     * without rules of its own: the kind (ATTN_PLATFORM_UNSPECIFIED: none)
     * and its priority there; standard or MLA layers as its descriptor is.
     * Registered with the catalog (src/registry/rules.c), e.g.
     * {"OPENCL_ATTN", "builtin:OPENCL_ATTN", fn, "notes", ATTN_PLATFORM_OPENCL, 0}. */
    attn_platform_kind rule_kind;
    int rule_priority;
    /* (optional) the Python module vLLM's enum names for it but its wheel
     * does not ship: a failed import is vLLM's "ModuleNotFoundError: No
     * module named '<module>'" (libattn's own account stays the detail). */
    const char *absent_module;
    /* (optional) a name vLLM's AttentionConfig turns into automatic
     * selection (the MiniMax M3 MSA decode-kernel aliases). */
    bool auto_alias;
    /* libattn's own name, not a member of vLLM's enum: accepted, but not in
     * vLLM's "Valid options are" text. */
    bool libattn_only;
} attn__catalog_entry;

int attn__catalog_count(void);
const attn__catalog_entry *attn__catalog_at(int i);
/* Entry by exact (upper-case) name, or NULL. */
const attn__catalog_entry *attn__catalog_find(const char *name);
/* The built-in object behind "builtin:NAME". NULL with *why set (static or
 * thread-local text without single quotes) when there is none. */
const attn_backend *attn__catalog_builtin(const char *name, const char **why);

#endif
