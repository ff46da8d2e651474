/* One model group's selection record for stages 2 and 3 of a scenario:
 * the group's spec and selector config, the platform's priority list, and
 * the result with every candidate and its reasons (the selection itself is
 * attn_engine_select_group, the engine's own startup step). */
#include <stdio.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/engine.h"
#include "scenario/run_impl.h"
#include "harness/json_put.h"

static attn_kv_dtype launch_kv(const attn__scn_launch *l)
{
    attn_kv_dtype kv = ATTN_KV_AUTO;
    if (l->kv_cache_dtype[0] && attn_kv_dtype_parse(l->kv_cache_dtype, &kv) != ATTN_OK)
        kv = ATTN_KV_AUTO; /* the parser validated it */
    return kv;
}

/* The group's layers, spec and selector config. */
static void write_group_spec(attn__jw *w, const attn_model *m, int g,
                             const attn_selector_config *cfg)
{
    const attn_layer_spec *s = attn_model_group_spec(m, g);
    const int *layers;
    int n = attn_model_group_layers(m, g, &layers);
    char ltext[128], repr[512];
    attn_model_layers_text(layers, n, ltext, sizeof ltext);
    attn_selector_config_repr(cfg, repr, sizeof repr);
    attn__put_int(w, "group", g);
    attn__put_str(w, "kind", attn_kv_kind_name(attn_kv_kind_of(cfg)));
    attn__put_str(w, "attn_type", attn_attn_type_name(s->attn_type));
    attn__put_str(w, "layers", ltext);
    attn__put_int(w, "num_layers", n);
    attn__put_int(w, "num_heads", s->num_heads);
    attn__put_int(w, "num_kv_heads", s->num_kv_heads);
    attn__put_int(w, "head_size", s->head_size);
    attn__put_int(w, "sliding_window", s->sliding_window);
    attn__put_num(w, "logits_soft_cap", s->logits_soft_cap);
    attn__put_bool(w, "has_sink", s->has_sink);
    attn__put_bool(w, "use_mla", s->use_mla);
    attn__put_bool(w, "has_kv_cache", attn_layer_spec_has_kv_cache(s));
    attn__put_str(w, "selector_config", repr);
}

/* Every candidate the selector considered, valid or with its reasons. */
static void write_candidates(attn__jw *w, const attn_selection *sel, const char *backend)
{
    attn__jw_key(w, "candidates");
    attn__jw_arr_begin(w);
    for (int i = 0; sel && i < attn_selection_num_candidates(sel); i++) {
        attn_candidate_info ci;
        if (attn_selection_candidate(sel, i, &ci) != ATTN_OK) continue;
        attn__jw_obj_begin(w);
        attn__put_str(w, "name", ci.name);
        attn__put_int(w, "priority", ci.priority);
        attn__put_bool(w, "valid", ci.valid);
        attn__put_bool(w, "chosen", backend && !strcmp(backend, ci.name));
        attn__jw_key(w, "reasons");
        attn__jw_arr_begin(w);
        for (int j = 0; j < ci.num_reasons; j++)
            attn__jw_str(w, attn_selection_reason(sel, i, j));
        attn__jw_arr_end(w);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
}

/* One group's selection: spec, selector config, the platform's priority
 * list, the result with every candidate and its reasons. Returns whether a
 * backend was chosen; chosen receives its name or "requested X refused". */
bool attn__scn_write_group_selection(attn__jw *w, const attn_platform *p, const attn_model *m,
                                     int g, const attn__scn_launch *l, char *chosen,
                                     size_t chosen_size)
{
    const char *pk[ATTN_KIND_COUNT];
    for (int k = 0; k < ATTN_KIND_COUNT; k++)
        pk[k] = l->per_kind[k][0] ? l->per_kind[k] : NULL;
    attn_group_launch gl = {
        .backend = l->backend[0] ? l->backend : NULL,
        .per_kind = pk,
        .kv_cache_dtype = launch_kv(l),
        .block_size = l->block_size,
        .batch_invariant = attn_platform_setting(p, ATTN_SETTING_BATCH_INVARIANT),
    };
    attn_group_choice ch;
    attn_status st = attn_engine_select_group(p, m, g, &gl, &ch);
    const attn_selector_config *cfg = &ch.config;
    const attn_selection *sel = ch.selection;
    const char *req = ch.requested;

    attn__jw_obj_begin(w);
    write_group_spec(w, m, g, cfg);
    const char *names[64];
    int np = attn_platform_priorities(p, cfg, names, 64);
    attn__jw_key(w, "priorities");
    attn__jw_arr_begin(w);
    for (int i = 0; i < np && i < 64; i++)
        attn__jw_str(w, names[i]);
    attn__jw_arr_end(w);
    attn__jw_key(w, "requested");
    if (req)
        attn__jw_str(w, req);
    else
        attn__jw_null(w);

    const char *backend = (st == ATTN_OK && sel) ? attn_selection_backend(sel) : NULL;
    attn__put_bool(w, "ok", backend != NULL);
    attn__jw_key(w, "selected");
    if (backend)
        attn__jw_str(w, backend);
    else
        attn__jw_null(w);
    attn__jw_key(w, "locator");
    if (backend && attn_selection_locator(sel))
        attn__jw_str(w, attn_selection_locator(sel));
    else
        attn__jw_null(w);
    attn__jw_key(w, "error_kind");
    if (backend)
        attn__jw_null(w);
    else
        attn__jw_str(w, sel ? attn_select_error_name(attn_selection_error(sel))
                            : attn_status_name(st));
    attn__jw_key(w, "message");
    if (backend)
        attn__jw_null(w);
    else
        attn__jw_str(w, sel && attn_selection_message(sel) ? attn_selection_message(sel)
                                                           : attn_last_error());
    attn__jw_key(w, "warnings");
    attn__jw_arr_begin(w);
    for (int i = 0; sel && i < attn_selection_num_warnings(sel); i++)
        attn__jw_str(w, attn_selection_warning(sel, i));
    attn__jw_arr_end(w);
    write_candidates(w, sel, backend);
    attn__jw_obj_end(w);
    if (backend)
        snprintf(chosen, chosen_size, "%s", backend);
    else if (req)
        snprintf(chosen, chosen_size, "%s refused", req);
    else
        snprintf(chosen, chosen_size, "none");
    return backend != NULL;
}
