/* The selection rules of the platforms that have none of their own (the
 * OpenCL platform): the priority list is what backends registered for the
 * platform's kind (attn_register_platform_rule, src/registry/rules.c), one
 * list for standard layers and one for MLA layers. Otherwise they select as
 * CUDA does: an explicit request is validated and never falls back; the
 * automatic walk takes the lowest valid priority or fails with "No valid
 * attention backend found for <kind> with <config>. Reasons: {...}", which
 * says so when nothing is registered for the platform. */
#include "registry/registry_impl.h"
#include "select/selection.h"
#include "util/strbuf.h"

#define ATTN__RULES_MAX ATTN__SEL_MAX_CANDIDATES

static int attn__registered_priorities(const attn_platform *p, const attn_selector_config *cfg,
                                       const char **names, int max)
{
    return attn__rules_list(p->kind, cfg->use_mla, names, max);
}

static attn_status attn__registered_select(const attn_platform *p, const char *requested,
                                           const attn_selector_config *cfg, attn_selection *sel)
{
    if (requested) return attn__sel_explicit(sel, requested);
    const char *l[ATTN__RULES_MAX];
    int n = attn__rules_list(p->kind, cfg->use_mla, l, ATTN__RULES_MAX);
    if (n > ATTN__RULES_MAX) n = ATTN__RULES_MAX;
    if (n > 0) return attn__sel_auto(sel, l, n, false);
    char repr[1024];
    attn_selector_config_repr(&sel->cfg, repr, sizeof repr);
    return attn__sel_fail(sel, ATTN_SELECT_NO_VALID, ATTN_NO_VALID_BACKEND,
                          "No valid attention backend found for %s with %s. Reasons: {}. No "
                          "backend registered a rule for %s %s layers "
                          "(attn_register_platform_rule).",
                          sel->device_family, repr, sel->device_family,
                          cfg->use_mla ? "MLA" : "standard");
}

const attn__platform_ops attn__rules_registered = {
    .kind = ATTN_PLATFORM_UNSPECIFIED, /* serves every kind that uses registered rules */
    .device_family = NULL,             /* the kind's own name */
    .priorities = attn__registered_priorities,
    .select = attn__registered_select,
};
