/* A selection as JSON and as the --explain text. */
#include <stdio.h>

#include "select/selection.h"
#include "util/config_fields.h"
#include "util/error.h"
#include "util/strbuf.h"

attn_status attn_selection_to_json(const attn_selection *s, char **out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn__sb sb;
    attn__sb_init(&sb);
    attn__jw w;
    attn__jw_init(&w, &sb, true);
    attn__jw_obj_begin(&w);
    attn__jw_key(&w, "machine");
    attn__jw_str(&w, s->platform_name);
    attn__jw_key(&w, "device");
    attn__jw_str(&w, s->device_family);
    attn__jw_key(&w, "requested");
    attn__jw_str(&w, s->requested);
    attn__jw_key(&w, "config");
    attn__selector_config_json(&w, &s->cfg);
    char repr[1024];
    attn_selector_config_repr(&s->cfg, repr, sizeof repr);
    attn__jw_key(&w, "config_repr");
    attn__jw_str(&w, repr);
    attn__jw_key(&w, "selected");
    attn__jw_str(&w, attn_selection_backend(s));
    attn__jw_key(&w, "locator");
    attn__jw_str(&w, attn_selection_locator(s));
    attn__jw_key(&w, "error");
    if (s->status == ATTN_OK) {
        attn__jw_null(&w);
    } else {
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "kind");
        attn__jw_str(&w, attn_select_error_name(s->error));
        attn__jw_key(&w, "status");
        attn__jw_str(&w, attn_status_name(s->status));
        attn__jw_key(&w, "message");
        attn__jw_str(&w, s->message);
        attn__jw_obj_end(&w);
    }
    attn__jw_key(&w, "warnings");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_warnings; i++)
        attn__jw_str(&w, s->warnings[i]);
    attn__jw_arr_end(&w);
    attn__jw_key(&w, "notes");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_notes; i++)
        attn__jw_str(&w, s->notes[i]);
    attn__jw_arr_end(&w);
    attn__jw_key(&w, "candidates");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < s->num_candidates; i++) {
        const attn__candidate *c = &s->candidates[i];
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "name");
        attn__jw_str(&w, c->name);
        attn__jw_key(&w, "priority");
        attn__jw_int(&w, c->priority);
        attn__jw_key(&w, "valid");
        attn__jw_bool(&w, c->valid);
        attn__jw_key(&w, "chosen");
        attn__jw_bool(&w, i == s->chosen);
        attn__jw_key(&w, "locator");
        attn__jw_str(&w, c->locator);
        attn__jw_key(&w, "reasons");
        attn__jw_arr_begin(&w);
        for (int j = 0; j < c->num_reasons; j++)
            attn__jw_str(&w, c->reasons[j]);
        attn__jw_arr_end(&w);
        attn__jw_key(&w, "detail");
        attn__jw_str(&w, c->detail);
        attn__jw_obj_end(&w);
    }
    attn__jw_arr_end(&w);
    attn__jw_obj_end(&w);
    attn__sb_putc(&sb, '\n');
    char *text = attn__sb_take(&sb);
    if (!text) return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory writing selection JSON");
    *out = text;
    return ATTN_OK;
}

attn_status attn_selection_explain(const attn_selection *s, char **out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn__sb sb;
    attn__sb_init(&sb);
    attn__sb_printf(&sb, "machine:   %s (%s", s->platform_name, s->device_family);
    if (s->device_name[0]) attn__sb_printf(&sb, ", %s", s->device_name);
    if (s->has_cc) attn__sb_printf(&sb, ", capability %d.%d", s->cc_major, s->cc_minor);
    if (s->gfx_arch[0]) attn__sb_printf(&sb, ", %s", s->gfx_arch);
    attn__sb_printf(&sb, "%s)\n", s->simulated ? ", simulated" : "");
    bool any_comp = false;
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++) {
        if ((s->installed >> c) & 1u) {
            attn__sb_printf(&sb, "%s%s",
                            any_comp ? "," : "installed: ", attn_component_name((attn_component)c));
            any_comp = true;
        }
    }
    if (any_comp) attn__sb_putc(&sb, '\n');
    char repr[1024];
    attn_selector_config_repr(&s->cfg, repr, sizeof repr);
    attn__sb_printf(&sb, "config:    %s", repr);
    if (s->cfg.num_heads > 0) attn__sb_printf(&sb, " num_heads=%d", s->cfg.num_heads);
    if (s->cfg.run_kv_cache_dtype != s->cfg.kv_cache_dtype)
        attn__sb_printf(&sb, " run_kv_cache_dtype=%s",
                        attn_kv_dtype_name(s->cfg.run_kv_cache_dtype));
    attn__sb_printf(&sb, "\nrequested: %s\n\n", s->requested ? s->requested : "auto");
    if (s->num_candidates > 0) {
        attn__sb_printf(&sb, "    %-4s  %-24s %-3s %s\n", "prio", "backend", "ok", "reasons");
        for (int i = 0; i < s->num_candidates; i++) {
            const attn__candidate *c = &s->candidates[i];
            char prio[16];
            if (c->priority >= 0)
                snprintf(prio, sizeof prio, "%d", c->priority);
            else
                snprintf(prio, sizeof prio, "req");
            attn__sb_printf(&sb, "%s %4s  %-24s %s  ", i == s->chosen ? "=> " : "   ", prio,
                            c->name, c->valid ? "\u2713" : "\u2717");
            if (c->valid) attn__sb_puts(&sb, i == s->chosen ? "valid (chosen)" : "valid");
            for (int j = 0; j < c->num_reasons; j++)
                attn__sb_printf(&sb, "%s%s", j ? "; " : "", c->reasons[j]);
            if (c->detail) attn__sb_printf(&sb, " (%s)", c->detail);
            attn__sb_putc(&sb, '\n');
        }
        attn__sb_putc(&sb, '\n');
    }
    if (s->chosen >= 0)
        attn__sb_printf(&sb, "selected:  %s (%s)\n", s->candidates[s->chosen].name,
                        s->candidates[s->chosen].locator ? s->candidates[s->chosen].locator
                                                         : "no locator");
    else
        attn__sb_printf(&sb, "selected:  none\nerror:     %s: %s\n",
                        attn_select_error_name(s->error), s->message ? s->message : "");
    for (int i = 0; i < s->num_warnings; i++)
        attn__sb_printf(&sb, "warning:   %s\n", s->warnings[i]);
    for (int i = 0; i < s->num_notes; i++)
        attn__sb_printf(&sb, "note:      %s\n", s->notes[i]);
    char *text = attn__sb_take(&sb);
    if (!text) return attn__fail(ATTN_OUT_OF_MEMORY, "out of memory writing the explanation");
    *out = text;
    return ATTN_OK;
}
