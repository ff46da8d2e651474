/* Internal view of a selection (src/select/) for the per-platform rules.
 *
 * A selection is built once and then never changes: the rules files fill it
 * through the helpers below (candidates with their reasons, the choice,
 * warnings, notes, or the error), and the selector publishes it. Strings
 * live in the selection's own arena and die with it. */
#ifndef ATTN_SELECT_SELECTION_H
#define ATTN_SELECT_SELECTION_H

#include <stdarg.h>

#include "attn/backend.h"
#include "attn/registry.h"
#include "attn/select.h"
#include "platform/platform_impl.h"
#include "util/strbuf.h"

#define ATTN__SEL_MAX_CANDIDATES 32
#define ATTN__SEL_MAX_REASONS    20
#define ATTN__SEL_MAX_MESSAGES   8

typedef struct attn__arena_block attn__arena_block;

typedef struct attn__candidate {
    const char *name; /* registry name (stable) */
    int priority;     /* index in the platform's list; -1 when requested */
    bool valid;
    bool import_failed; /* the only reason is the failed import */
    int num_reasons;
    const char *reasons[ATTN__SEL_MAX_REASONS];
    const attn_backend *backend; /* resolved object, NULL if it did not resolve */
    const char *locator;         /* where it resolved from (stable), or NULL */
    const char *detail;          /* libattn's account of a failed import, or NULL */
} attn__candidate;

struct attn_selection {
    attn__arena_block *arena;
    const attn_platform *platform;
    /* What --explain and the JSON show, copied so they never need the
     * platform object to outlive the selection. */
    char platform_name[64];
    char device_name[128];
    char gfx_arch[32];
    bool simulated, has_cc;
    int cc_major, cc_minor;
    uint32_t installed;
    const char *device_family; /* "cuda", "rocm", "cpu", "xpu" */
    const char *requested;     /* canonical name, NULL = automatic */
    attn_selector_config cfg;  /* effective config (batch invariance OR-ed in) */
    attn_status status;
    attn_select_error error;
    const char *message;
    int chosen; /* candidate index, or -1 */
    int num_candidates;
    attn__candidate candidates[ATTN__SEL_MAX_CANDIDATES];
    int num_warnings;
    const char *warnings[ATTN__SEL_MAX_MESSAGES];
    int num_notes;
    const char *notes[ATTN__SEL_MAX_MESSAGES];
    bool oom; /* an allocation failed while building: reported as ATTN_OUT_OF_MEMORY */
    /* Set by a platform's rules: a candidate that passes validation must
     * share a KV-cache layout with this backend (ROCm's turboquant and
     * ultraquant runs); NULL = no such rule. */
    const char *layout_peer;
};

/* ---- building a selection (selector.c) ------------------------------------ */

const char *attn__sel_strdup(attn_selection *s, const char *text);
const char *attn__sel_printf(attn_selection *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void attn__sel_warn(attn_selection *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void attn__sel_note(attn_selection *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record the failure: kind, status and vLLM's message. Returns status. */
attn_status attn__sel_fail(attn_selection *s, attn_select_error kind, attn_status status,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Resolve, validate and self-test one backend as a candidate with the given
 * priority (-1 for a requested backend), appending it to the selection.
 * Returns ATTN_OK once the candidate was recorded (valid or not), or
 * ATTN_NOT_REGISTERED / ATTN_UNKNOWN_BACKEND (text in attn_last_error())
 * when the name cannot even be looked up — vLLM raises those instead of
 * turning them into a reason. *index receives the candidate index. */
attn_status attn__sel_consider(attn_selection *s, const char *name, int priority, int *index);

/* attn__sel_consider, with validation optional (XPU's path skips it). */
attn_status attn__sel_consider_ex(attn_selection *s, const char *name, int priority, bool validate,
                                  int *index);

/* Record candidate i as the choice. */
void attn__sel_choose(attn_selection *s, int i);

/* The validating platforms' two paths (CUDA, ROCm, CPU):
 * explicit: the requested backend only, "Selected backend X is not valid
 * for this configuration. Reason: [...]", no fallback;
 * automatic: walk names in order, lowest valid index wins, else "No valid
 * attention backend found for <family> with <config>. Reasons: {...}."
 * precluded_warning adds vLLM's CUDA "--block-size ... precluded" warning. */
attn_status attn__sel_explicit(attn_selection *s, const char *requested);
attn_status attn__sel_auto(attn_selection *s, const char *const *names, int n,
                           bool precluded_warning);

/* Candidate i's reasons as a Python list repr ("['a', 'b']"), arena-owned. */
const char *attn__sel_reasons_repr(attn_selection *s, int i);

/* XPU's path: resolve name without validating it (XPU never validates);
 * priority -1 for a requested backend. */
attn_status attn__sel_resolve_only(attn_selection *s, const char *name, int priority);

/* ---- inside src/select: the selector's own files ---------------------------
 * selection.c the object, its arena and message helpers
 * candidate.c one candidate (resolve, validate, self-test)
 * paths.c     the explicit / automatic / resolve-only paths and their texts
 * selector.c  one uncached selection; cache.c the cache behind attn_select
 * log.c, render.c, accessors.c: logging, JSON / --explain, read-only views */

/* n bytes from the selection's arena (8-aligned); NULL and s->oom on failure. */
void *attn__sel_alloc(attn_selection *s, size_t n);
attn_selection *attn__sel_new(const attn_platform *p, const attn_selector_config *cfg);
/* attn__sel_fail with sb's text; frees sb. */
attn_status attn__sel_fail_sb(attn_selection *s, attn_select_error kind, attn_status status,
                              attn__sb *sb);
/* "{A: [r1, r2], B: [r3]}" over the invalid candidates, priority order. */
void attn__put_reasons_dict(attn__sb *sb, const attn_selection *s);
/* Plugins are loaded before the first selection. */
void attn__ensure_plugins(void);
/* The config a selection records: the caller's struct read (attn/abi.h),
 * batch invariance OR-ed from the machine, the run's KV dtype resolved.
 * ATTN_ABI_MISMATCH / ATTN_NULL_ARGUMENT for a config it cannot read. */
attn_status attn__effective_config(const attn_platform *p, const attn_selector_config *in,
                                   attn_selector_config *out);
/* ATTN_OK, or the selection's status with its message as the last error. */
attn_status attn__sel_status(const attn_selection *s);
/* Logs a new cache entry (log.c). */
void attn__sel_log(const attn_selection *s);

/* ---- validation (validate.c) ---------------------------------------------- */

typedef void (*attn__reason_fn)(void *user, const char *reason);
void attn__check_ctx_init(attn_check_ctx *c, const attn_platform *p,
                          const attn_selector_config *cfg);
/* Emits every failed check in order; returns how many. */
int attn__validate(const attn_backend_desc *d, const attn_check_ctx *c, attn__reason_fn emit,
                   void *user);
/* abi_version / struct_size of a hand-made descriptor. */
attn_status attn__desc_check(const attn_backend_desc *d);

/* ---- per-platform rules (rules_*.c) --------------------------------------- */

/* How a platform family answers the selection question, with its own
 * function and priority list. */
typedef struct attn__platform_ops {
    attn_platform_kind kind;
    const char *device_family; /* the "for cuda with ..." word of messages */
    /* Ordered candidate names for this configuration. */
    int (*priorities)(const attn_platform *p, const attn_selector_config *cfg, const char **names,
                      int max);
    /* Fill sel (already initialised with platform, request and config). */
    attn_status (*select)(const attn_platform *p, const char *requested,
                          const attn_selector_config *cfg, attn_selection *sel);
    /* get_preferred_block_size with this family's defaults; NULL: the
     * generic rule (attn__preferred_block_size in select/validate.h). */
    int (*preferred_block_size)(const attn_platform *p, const attn_backend_desc *d,
                                int default_size);
} attn__platform_ops;

/* The rules of a platform kind (platform_rules.c); NULL for unknown kinds. */
const attn__platform_ops *attn__platform_ops_for(attn_platform_kind kind);

extern const attn__platform_ops attn__rules_cuda;
extern const attn__platform_ops attn__rules_rocm;
extern const attn__platform_ops attn__rules_cpu;
extern const attn__platform_ops attn__rules_xpu;
/* Platforms without rules of their own: the rules registered for their kind. */
extern const attn__platform_ops attn__rules_registered;

/* ROCm's AITER switches (reference §6b), exposed for tests and --explain
 * (attn__rocm_aiter_found: platform/platform_impl.h). */
bool attn__rocm_mha_enabled(const attn_platform *p);
bool attn__rocm_mla_enabled(const attn_platform *p);

#endif
