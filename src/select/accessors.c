/* Read-only accessors of a published selection, and the per-kind
 * overrides (reference §14). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "select/selection.h"
#include "util/config_fields.h"
#include "util/error.h"
#include "util/strbuf.h"

const char *attn_selection_backend(const attn_selection *s)
{
    return s && s->chosen >= 0 ? s->candidates[s->chosen].name : NULL;
}

const attn_backend *attn_selection_backend_object(const attn_selection *s)
{
    return s && s->chosen >= 0 ? s->candidates[s->chosen].backend : NULL;
}

const char *attn_selection_locator(const attn_selection *s)
{
    return s && s->chosen >= 0 ? s->candidates[s->chosen].locator : NULL;
}

const char *attn_selection_requested(const attn_selection *s)
{
    return s ? s->requested : NULL;
}

attn_status attn_selection_status(const attn_selection *s)
{
    return s ? s->status : ATTN_NULL_ARGUMENT;
}

attn_select_error attn_selection_error(const attn_selection *s)
{
    return s ? s->error : ATTN_SELECT_OK;
}

const char *attn_select_error_name(attn_select_error e)
{
    switch (e) {
    case ATTN_SELECT_OK: return "ok";
    case ATTN_SELECT_EXPLICIT_INVALID: return "explicit-invalid";
    case ATTN_SELECT_NO_VALID: return "no-valid";
    case ATTN_SELECT_UNKNOWN_NAME: return "unknown-name";
    case ATTN_SELECT_NOT_IMPLEMENTED: return "not-implemented";
    case ATTN_SELECT_NOT_REGISTERED: return "not-registered";
    case ATTN_SELECT_INVALID_CONFIG: return "invalid-config";
    }
    return "unknown";
}

const char *attn_selection_message(const attn_selection *s)
{
    return s ? s->message : NULL;
}

const attn_selector_config *attn_selection_config(const attn_selection *s)
{
    return s ? &s->cfg : NULL;
}

const attn_platform *attn_selection_platform(const attn_selection *s)
{
    return s ? s->platform : NULL;
}

int attn_selection_num_candidates(const attn_selection *s)
{
    return s ? s->num_candidates : 0;
}

attn_status attn_selection_candidate(const attn_selection *s, int i, attn_candidate_info *info)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(info);
    if (i < 0 || i >= s->num_candidates)
        return attn__fail(ATTN_OUT_OF_RANGE, "candidate %d out of range (0..%d)", i,
                          s->num_candidates - 1);
    const attn__candidate *c = &s->candidates[i];
    info->name = c->name;
    info->priority = c->priority;
    info->valid = c->valid;
    info->num_reasons = c->num_reasons;
    return ATTN_OK;
}

const char *attn_selection_reason(const attn_selection *s, int candidate, int j)
{
    if (!s || candidate < 0 || candidate >= s->num_candidates) return NULL;
    const attn__candidate *c = &s->candidates[candidate];
    return j >= 0 && j < c->num_reasons ? c->reasons[j] : NULL;
}

int attn_selection_num_warnings(const attn_selection *s)
{
    return s ? s->num_warnings : 0;
}

const char *attn_selection_warning(const attn_selection *s, int i)
{
    return s && i >= 0 && i < s->num_warnings ? s->warnings[i] : NULL;
}

int attn_selection_num_notes(const attn_selection *s)
{
    return s ? s->num_notes : 0;
}

const char *attn_selection_note(const attn_selection *s, int i)
{
    return s && i >= 0 && i < s->num_notes ? s->notes[i] : NULL;
}

/* ---- per-kind overrides (reference §14) ------------------------------------ */

static const char *const attn__kind_names[ATTN_KIND_COUNT] = {
    "full_attention",     "sliding_window",         "mla_attention",
    "sliding_window_mla", "encoder_only_attention", "cross_attention",
};

attn_kv_kind attn_kv_kind_of(const attn_selector_config *in)
{
    attn_selector_config full, *cfg = &full;
    if (attn__config_read(in, &full) != ATTN_OK) return ATTN_KIND_FULL;
    if (cfg->attn_type == ATTN_TYPE_ENCODER_ONLY) return ATTN_KIND_ENCODER_ONLY;
    if (cfg->attn_type == ATTN_TYPE_ENCODER_DECODER) return ATTN_KIND_CROSS;
    if (cfg->use_mla) return cfg->has_sliding_window ? ATTN_KIND_SLIDING_WINDOW_MLA : ATTN_KIND_MLA;
    return cfg->has_sliding_window ? ATTN_KIND_SLIDING_WINDOW : ATTN_KIND_FULL;
}

const char *attn_kv_kind_name(attn_kv_kind k)
{
    return (unsigned)k < ATTN_KIND_COUNT ? attn__kind_names[k] : "?";
}

/* The table's index of name s (any case), or ATTN_KIND_COUNT. */
static int attn__kind_index(const char *s)
{
    int k = 0;
    while (k < ATTN_KIND_COUNT && strcasecmp(s, attn__kind_names[k]) != 0)
        k++;
    return k;
}

attn_status attn_kv_kind_parse(const char *s, attn_kv_kind *out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    int k = attn__kind_index(s);
    if (k < ATTN_KIND_COUNT) {
        *out = (attn_kv_kind)k;
        return ATTN_OK;
    }
    /* "a, b, ... or z", from the table. */
    attn__sb list;
    attn__sb_init(&list);
    for (k = 0; k < ATTN_KIND_COUNT; k++)
        attn__sb_printf(&list, "%s%s",
                        !k                        ? ""
                        : k + 1 < ATTN_KIND_COUNT ? ", "
                                                  : " or ",
                        attn__kind_names[k]);
    attn_status st =
        attn__fail(ATTN_INVALID_ARGUMENT, "unknown KV-cache spec kind '%s' (expected %s)", s,
                   list.data ? list.data : "");
    attn__sb_free(&list);
    return st;
}

const char *attn_requested_for(const attn_selector_config *cfg, const char *global,
                               const char *const per_kind[ATTN_KIND_COUNT])
{
    if (cfg && per_kind) {
        const char *k = per_kind[attn_kv_kind_of(cfg)];
        if (k && *k) return k;
    }
    return global;
}
