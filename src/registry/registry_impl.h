/* Internal view of the registry (src/registry/) for the selector, the
 * plugin loader and the CLI. The public contract is include/attn/registry.h.
 *
 * Strings handed out by the registry (names, locators, the valid-names
 * text) stay valid for the life of the process, even after an override is
 * replaced or cleared: they are interned and never freed. */
#ifndef ATTN_REGISTRY_IMPL_H
#define ATTN_REGISTRY_IMPL_H

#include <stdint.h>

#include "attn/registry.h"

/* Increases on every change (override, new name, clear, restore). The
 * selection cache keys on it so a change is never answered from stale
 * entries. */
uint64_t attn__registry_generation(void);

/* Canonical (upper-case) form of a backend name into buf; false when the
 * name is empty, too long or has characters other than [A-Za-z0-9_]. */
bool attn__registry_canon(const char *name, char *buf, size_t size);

/* Stable pointer to the registered name equal to canon, or NULL. */
const char *attn__registry_lookup(const char *canon);

/* A name vLLM's AttentionConfig turns into automatic selection (CUTLASS_MSA,
 * TRITON_MSA). */
bool attn__registry_auto_alias(const char *stable);

/* "Unknown attention backend: 'NAME'. Valid options are: ..." */
attn_status attn__registry_unknown(const char *name);

/* Rollback for the plugin loader: take a snapshot before a plugin's init
 * and restore it when the init fails (names the plugin added disappear,
 * overrides it replaced come back, platform rules it registered go).
 * restore and free both consume it. */
typedef struct attn__registry_snapshot attn__registry_snapshot;
attn__registry_snapshot *attn__registry_snapshot_take(void);
void attn__registry_snapshot_restore(attn__registry_snapshot *s);
void attn__registry_snapshot_free(attn__registry_snapshot *s);

/* Bumps the generation (a change the selection cache must see). */
void attn__registry_changed(void);

/* ---- platform rules (rules.c) ----------------------------------------------- */

/* The registered priority list of kind for standard or MLA layers: writes
 * up to max stable names (names may be NULL), returns how many there are. */
int attn__rules_list(attn_platform_kind kind, bool mla, const char **names, int max);
/* Drops the rules registered after the first n (the plugin rollback). */
void attn__rules_truncate(int n);

/* ---- loader (loader.c) ---------------------------------------------------- */

/* Resolve a locator ("builtin:NAME" or "file.so:symbol") to a backend
 * object. ATTN_IMPORT_ERROR with import-like text in attn_last_error()
 * (module not found, missing dependency, symbol missing, ABI mismatch).
 * Results are cached per resolved file and symbol for the process. */
attn_status attn__loader_resolve(const char *locator, const attn_backend **out);

/* Whether the object a locator names has kernel ops, read without running
 * the module (no attn_module_init): false when it cannot be read. */
bool attn__loader_has_kernel(const char *locator);

/* Checks the ABI header of an object before anything else in it is used.
 * where names it in the message. ATTN_ABI_MISMATCH on failure. */
attn_status attn__backend_check_abi(const attn_backend *b, const char *where);

/* Syntax check of a locator; ATTN_INVALID_ARGUMENT with the reason. */
attn_status attn__locator_check(const char *locator);

#endif
