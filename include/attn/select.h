/* The selector: decide once which backend runs a layer. An explicit request
 * is a hard requirement (no fallback); otherwise the platform's priority list
 * is walked and the lowest index among the valid backends wins. The result is
 * an object: the chosen backend and, for every candidate, its priority and
 * its reasons (kept even when selection succeeds). */
#ifndef ATTN_SELECT_H
#define ATTN_SELECT_H

#include "attn/config.h"
#include "attn/layer.h"
#include "attn/platform.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_selection attn_selection;

typedef enum attn_select_error {
    ATTN_SELECT_OK = 0,
    ATTN_SELECT_EXPLICIT_INVALID, /* "explicit-invalid" */
    ATTN_SELECT_NO_VALID,         /* "no-valid" */
    ATTN_SELECT_UNKNOWN_NAME,     /* "unknown-name" */
    ATTN_SELECT_NOT_IMPLEMENTED,  /* "not-implemented" */
    ATTN_SELECT_NOT_REGISTERED,   /* "not-registered" */
    ATTN_SELECT_INVALID_CONFIG    /* "invalid-config" (bad kv dtype, head size 0...) */
} attn_select_error;

typedef struct attn_candidate_info {
    const char *name;
    int priority; /* index in the platform's list; -1 for an explicit request */
    bool valid;
    int num_reasons;
} attn_candidate_info;

/* Selection with the process-wide cache, keyed by (platform, requested,
 * config). Loads plugins first. The returned object belongs to the cache
 * (never free it). requested NULL or "auto" = automatic. Returns ATTN_OK when
 * a backend was chosen; otherwise the failure status, with *out still set
 * (when not NULL) so the caller can read the reasons. */
ATTN_API attn_status attn_select(const attn_platform *p, const char *requested,
                                 const attn_selector_config *cfg, const attn_selection **out);
/* Same, bypassing the cache; free with attn_selection_free. */
ATTN_API attn_status attn_select_uncached(const attn_platform *p, const char *requested,
                                          const attn_selector_config *cfg, attn_selection **out);
ATTN_API void attn_selection_free(attn_selection *s);
/* Drop every cached selection (tests; a real engine never changes config). */
ATTN_API void attn_select_cache_clear(void);

ATTN_API const char *attn_selection_backend(const attn_selection *s); /* NULL if none */
ATTN_API const attn_backend *attn_selection_backend_object(const attn_selection *s);
ATTN_API const char *attn_selection_locator(const attn_selection *s);
ATTN_API const char *attn_selection_requested(const attn_selection *s); /* NULL = auto */
ATTN_API attn_status attn_selection_status(const attn_selection *s);
ATTN_API attn_select_error attn_selection_error(const attn_selection *s);
ATTN_API const char *attn_select_error_name(attn_select_error e);
/* The full error text (vLLM's wording) or NULL on success. */
ATTN_API const char *attn_selection_message(const attn_selection *s);
ATTN_API const attn_selector_config *attn_selection_config(const attn_selection *s);
ATTN_API const attn_platform *attn_selection_platform(const attn_selection *s);
ATTN_API int attn_selection_num_candidates(const attn_selection *s);
ATTN_API attn_status attn_selection_candidate(const attn_selection *s, int i,
                                              attn_candidate_info *info);
ATTN_API const char *attn_selection_reason(const attn_selection *s, int candidate, int j);
ATTN_API int attn_selection_num_warnings(const attn_selection *s);
ATTN_API const char *attn_selection_warning(const attn_selection *s, int i);
/* Notes such as "self-test skipped (ATTN_SELFTEST=0)". */
ATTN_API int attn_selection_num_notes(const attn_selection *s);
ATTN_API const char *attn_selection_note(const attn_selection *s, int i);
/* One JSON object: selected, error {kind, message}, warnings, candidates... */
ATTN_API attn_status attn_selection_to_json(const attn_selection *s, char **out);
/* Human-readable explanation table. */
ATTN_API attn_status attn_selection_explain(const attn_selection *s, char **out);

/* Per-kind override map (reference §14): kinds "full_attention",
 * "sliding_window", "mla_attention", "sliding_window_mla",
 * "encoder_only_attention", "cross_attention". */
typedef enum attn_kv_kind {
    ATTN_KIND_FULL = 0,
    ATTN_KIND_SLIDING_WINDOW,
    ATTN_KIND_MLA,
    ATTN_KIND_SLIDING_WINDOW_MLA,
    ATTN_KIND_ENCODER_ONLY,
    ATTN_KIND_CROSS,
    ATTN_KIND_COUNT
} attn_kv_kind;
/* ATTN_KIND_FULL for NULL or a config whose struct_size is refused. */
ATTN_API attn_kv_kind attn_kv_kind_of(const attn_selector_config *cfg);
ATTN_API const char *attn_kv_kind_name(attn_kv_kind k);
ATTN_API attn_status attn_kv_kind_parse(const char *s, attn_kv_kind *out);
/* per_kind[k] (NULL entries = unset) wins over global for layers of kind k. */
ATTN_API const char *attn_requested_for(const attn_selector_config *cfg, const char *global,
                                        const char *const per_kind[ATTN_KIND_COUNT]);

ATTN_EXTERN_C_END

#endif
