/* The registry: backend name -> locator -> code. Every name of vLLM's
 * catalog plus libattn's own (CPU_ATTN, CPU_MLA, REFERENCE) is known; a
 * locator is "builtin:NAME" or "path/module.so:symbol". Resolving a name can
 * fail the way a Python import fails (module absent, dependency missing,
 * symbol missing, wrong ABI); the failure text is the reason
 * "ImportError: <detail>". Overrides and new names may be registered at run
 * time, normally by plugins before the first selection. */
#ifndef ATTN_REGISTRY_H
#define ATTN_REGISTRY_H

#include "attn/config.h"
#include "attn/layer.h"
#include "attn/platform.h"

ATTN_EXTERN_C_BEGIN

/* Names in declaration order (vLLM's enum order, then libattn's own, then
 * names registered at run time). */
ATTN_API int attn_registry_count(void);
ATTN_API const char *attn_registry_name(int i);
ATTN_API bool attn_registry_contains(const char *name);
/* "FLASH_ATTN, FLASH_ATTN_DIFFKV, ..." — vLLM's valid options text: its
 * enum's members in its order, then names registered at run time (libattn's
 * own catalog names are accepted but, as in vLLM, not listed). */
ATTN_API const char *attn_registry_valid_names(void);

/* The backend catalog: every name libattn knows without registration
 * (vLLM's enum, then libattn's own), in declaration order, with what the
 * library ships for it. attn_backend_catalog_name: NULL outside [0, count).
 * Per name (exact, upper case; NULL for a name not in the catalog): the
 * default locator (NULL when there is none: register it first), the human
 * notes on dynamic rules, and the built-in backend object (descriptor only,
 * kernel NULL, for GPU backends; NULL when libattn has none). */
ATTN_API int attn_backend_catalog_count(void);
ATTN_API const char *attn_backend_catalog_name(int i);
ATTN_API bool attn_backend_catalog_contains(const char *name);
ATTN_API const char *attn_backend_catalog_default_locator(const char *name);
ATTN_API const char *attn_backend_catalog_notes(const char *name);
ATTN_API const attn_backend *attn_backend_catalog_builtin(const char *name);

/* Override the locator of a known name, or add a new name. locator is
 * "builtin:NAME" or "file.so:symbol" (file resolved through ATTN_PLUGIN_PATH
 * when relative). */
ATTN_API attn_status attn_register_backend(const char *name, const char *locator);
/* Register an in-memory backend object (what plugins usually do). */
ATTN_API attn_status attn_register_backend_object(const char *name, const attn_backend *b);
ATTN_API bool attn_registry_is_overridden(const char *name);
ATTN_API attn_status attn_registry_clear_override(const char *name);
/* Current locator (override or default). ATTN_NOT_REGISTERED for CUSTOM
 * (or any name without one): "Backend CUSTOM must be registered before
 * use. ..." in attn_last_error(). */
ATTN_API attn_status attn_registry_get_locator(const char *name, const char **locator);

/* Resolve a name to its code for a platform. ATTN_IMPORT_ERROR with the
 * loader's text in attn_last_error() when it cannot be loaded. */
ATTN_API attn_status attn_backend_resolve(const attn_platform *p, const char *name,
                                          const attn_backend **out);

/* Whether name's code (its override object, or the module its locator
 * names) carries kernel ops, known by reading the module's exported object
 * without running any of it: no module init, no driver, no device. False
 * with ATTN_OK for a module or symbol that is not there (see
 * attn_backend_resolve for why). */
ATTN_API attn_status attn_backend_has_kernel(const char *name, bool *out);

/* Generic validation: every failed check of reference §3, in order. Writes
 * up to max reasons into reasons[] (each into its own buffer of reason_size
 * bytes) and returns the number of reasons (0 = valid). */
#define ATTN_REASON_MAX  256
#define ATTN_REASONS_MAX 16
ATTN_API int attn_backend_validate(const attn_backend_desc *d, const attn_platform *p,
                                   const attn_selector_config *cfg, char reasons[][ATTN_REASON_MAX],
                                   int max);
/* The table attn_backend_validate walks: one check per row, in vLLM's order
 * (validate_configuration). Row i (0 <= i < count) has a key ("head_size",
 * "sink", ..., "combination": the JSON key and docs column of `attn
 * backends`) and is asked by the selector-config bools
 * attn_backend_check_asks(i, 0..2) (all set; none: every config). Its
 * reason is attn_backend_check_reason(i) (for the rows worded from the
 * config, the forms it takes: "MLA not supported | non-MLA not supported",
 * "<type>" for a value). A flag row is a yes/no capability of the
 * descriptor, with a fixed reason. Its static answer is the descriptor's machine-independent
 * statement (ATTN_FACT_REFINED: yes, narrowed on some machines by a hook);
 * attn_backend_check_on is the answer on platform p, exactly as the selector
 * gives it for the CLI's default config (head size 128, bf16, auto KV) with
 * the row's inputs set: ATTN_FACT_YES or ATTN_FACT_NO. ATTN_FACT_NONE for a
 * row that is no flag, a bad index or a bad descriptor. */
typedef enum attn_fact {
    ATTN_FACT_NONE = -1,
    ATTN_FACT_NO = 0,
    ATTN_FACT_YES = 1,
    ATTN_FACT_REFINED = 2
} attn_fact;
ATTN_API int attn_backend_check_count(void);
ATTN_API const char *attn_backend_check_key(int i);
ATTN_API const char *attn_backend_check_asks(int i, int j);
ATTN_API bool attn_backend_check_is_flag(int i);
ATTN_API const char *attn_backend_check_reason(int i);
ATTN_API attn_fact attn_backend_check_static(const attn_backend_desc *d, int i);
ATTN_API attn_fact attn_backend_check_on(const attn_backend_desc *d, const attn_platform *p, int i);
/* get_preferred_block_size(default) of reference §3. */
ATTN_API int attn_backend_preferred_block_size(const attn_backend_desc *d, const attn_platform *p,
                                               int default_size);
/* block_size 0 is vLLM's None (true); negative or above ATTN_MAX_BLOCK_SIZE: false. */
ATTN_API bool attn_backend_supports_block_size(const attn_backend_desc *d, const attn_platform *p,
                                               int block_size);

/* ---- platform rules a backend registers --------------------------------
 * vLLM's platforms (CUDA, ROCm, XPU) and libattn's CPU platform select by
 * their own rules. Every other platform kind (the OpenCL platform) selects
 * by the rules registered for it: its priority list is the backends
 * registered for its kind and the layer's kind (standard or MLA), lowest
 * priority first, equal priorities in registration order; each is then
 * resolved and validated like any candidate, and the selection fails with
 * "No valid attention backend found for <kind> with <config>. Reasons:
 * {...}" when none is valid (when none is registered, the reasons are empty
 * and the message says so). A built-in backend module, a program, or a
 * plugin (attn_plugin_api.register_platform_rule, from its init) registers
 * after registering the backend's name; a rule of a plugin whose init fails
 * is rolled back with its names. The struct follows the struct_size rule
 * (attn/abi.h). */
typedef struct attn_platform_rule {
    uint32_t struct_size;    /* sizeof(attn_platform_rule): attn/abi.h */
    attn_platform_kind kind; /* a kind without its own rules: ATTN_PLATFORM_OPENCL */
    const char *backend;     /* a registered backend name (any case) */
    int priority;            /* lower is tried first */
    bool mla;                /* a candidate for MLA layers; else for standard layers */
} attn_platform_rule;
/* ATTN_INVALID_ARGUMENT for a kind with its own rules, ATTN_UNKNOWN_BACKEND
 * for a name not registered, ATTN_ALREADY_EXISTS for a second rule of the
 * same (kind, backend, mla); nothing changes on failure. */
ATTN_API attn_status attn_register_platform_rule(const attn_platform_rule *rule);
/* Whether kind selects by registered rules (false for CPU, CUDA, ROCm, XPU). */
ATTN_API bool attn_platform_kind_uses_registered_rules(attn_platform_kind kind);
/* The rules in effect, in registration order (i in [0, count)); the
 * backend name in *out is the registry's (canonical, valid for the process). */
ATTN_API int attn_platform_rule_count(void);
ATTN_API attn_status attn_platform_rule_at(int i, attn_platform_rule *out);

ATTN_EXTERN_C_END

#endif
