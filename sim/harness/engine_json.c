/* The engine's state as JSON, one schema for every program that shows
 * it (`attn serve --json`, the scenario runner's stage 4): the startup
 * summary with one object per KV group, a step with the harness's view of
 * its outputs, and the block accounting. */
#include "harness/engine_json.h"

#include <stdlib.h>

#include "attn/kvcache.h"
#include "attn/model.h"
#include "harness/json_put.h"

void attn__engine_json_group(attn__jw *w, const attn_engine *e, int g)
{
    attn_engine_group_info gi;
    attn_engine_group_info_get(e, g, &gi);
    attn__jw_obj_begin(w);
    attn__put_int(w, "index", g);
    attn__put_int(w, "model_group", gi.model_group);
    attn__jw_key(w, "layers");
    attn__jw_arr_begin(w);
    for (int i = 0; i < gi.num_layers; i++)
        attn__jw_int(w, gi.layers[i]);
    attn__jw_arr_end(w);
    char text[128];
    attn_model_layers_text(gi.layers, gi.num_layers, text, sizeof text);
    attn__put_str(w, "layers_text", text);
    attn__put_str(w, "kind", attn_kv_kind_name(gi.kind));
    attn__put_str(w, "backend", gi.backend);
    attn__put_str(w, "requested", gi.requested);
    attn__put_str(w, "builder", gi.builder_type);
    attn__put_str(w, "cg_support", attn_cg_support_name(gi.cg_support));
    attn__put_int(w, "reorder_batch_threshold", gi.reorder_batch_threshold);
    attn__put_str(w, "layout", attn_layout_name(gi.layout));
    attn__jw_key(w, "kv_shape");
    attn__jw_arr_begin(w);
    for (int i = 0; i < gi.kv_shape.ndim; i++)
        attn__jw_int(w, (long long)gi.kv_shape.dims[i]);
    attn__jw_arr_end(w);
    attn_kv_shape_format(&gi.kv_shape, text, sizeof text);
    attn__put_str(w, "kv_shape_text", text);
    attn__put_str(w, "kv_elem", attn_elem_name(gi.kv_elem));
    attn__put_int(w, "bytes_per_block", (long long)gi.bytes_per_block);
    attn__jw_key(w, "kernel");
    attn__jw_obj_begin(w);
    attn__jw_key(w, "mode");
    attn__jw_str(w, gi.kernel_mode == ATTN_KERNEL_NATIVE     ? "native"
                    : gi.kernel_mode == ATTN_KERNEL_EMULATED ? "emulated"
                                                             : "none");
    attn__put_str(w, "name", gi.kernel);
    attn__put_str(w, "variant", gi.kernel_variant);
    attn__put_str(w, "note", gi.kernel_note);
    attn__put_str(w, "device", gi.device);
    attn__put_int(w, "layers_run", gi.layers_run);
    attn__jw_obj_end(w);
    attn__jw_key(w, "selection");
    char *sj = NULL;
    if (attn_selection_to_json(gi.selection, &sj) == ATTN_OK && sj)
        attn__jw_raw(w, sj);
    else
        attn__jw_null(w);
    free(sj);
    attn__jw_obj_end(w);
}

void attn__engine_json_step(attn__jw *w, const attn_engine_step_stats *s,
                            const attn__harness_stats *hs)
{
    attn__jw_obj_begin(w);
#define I(k, v)                                                                                    \
    attn__jw_key(w, k);                                                                            \
    attn__jw_int(w, (long long)(v))
    I("step", s->step);
    I("num_reqs", s->num_reqs);
    I("num_tokens", s->num_tokens);
    I("num_prefill_reqs", s->num_prefill_reqs);
    I("num_prefill_tokens", s->num_prefill_tokens);
    I("num_decode_reqs", s->num_decode_reqs);
    I("num_decode_tokens", s->num_decode_tokens);
    I("admitted", s->admitted);
    I("finished", s->finished);
    I("preempted", s->preempted);
    I("running", s->running);
    I("waiting", s->waiting);
    I("blocks_in_use", s->blocks_in_use);
    I("common_prefix_len", s->common_prefix_len);
    I("builds", s->builds);
    I("block_table_updates", s->block_table_updates);
    I("layers_run", s->layers_run);
    I("encoder_tokens", s->encoder_tokens);
    I("encoder_layers_run", s->encoder_layers_run);
#undef I
    attn__put_bool(w, "emulated", s->emulated);
    attn__put_num(w, "metadata_us", s->metadata_ns / 1e3);
    attn__put_num(w, "attention_ms", s->attention_ns / 1e6);
    attn__put_num(w, "encoder_attention_ms", s->encoder_attention_ns / 1e6);
    attn__put_num(w, "output_checksum", hs->output_checksum);
    attn__put_bool(w, "output_finite", hs->output_finite);
    attn__put_num(w, "max_abs_diff", hs->max_abs_diff);
    attn__jw_obj_end(w);
}

void attn__engine_json_blocks(attn__jw *w, const attn_engine *e)
{
    attn__jw_arr_begin(w);
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_block_accounting b;
        attn_engine_block_stats(e, g, &b);
        attn__jw_obj_begin(w);
#define I(k, v)                                                                                    \
    attn__jw_key(w, k);                                                                            \
    attn__jw_int(w, (long long)(v))
        I("group", g);
        I("num_blocks", b.num_blocks);
        I("num_free", b.num_free);
        I("num_used", b.num_used);
        I("held_by_requests", b.held_by_requests);
        I("held_by_prefix_cache", b.held_by_prefix_cache);
        I("total_refs", b.total_refs);
        I("leaked", b.leaked);
        I("rejected_releases", b.rejected_releases);
#undef I
        attn__put_bool(w, "consistent", b.consistent);
        attn__jw_obj_end(w);
    }
    attn__jw_arr_end(w);
}

void attn__engine_json_summary(attn__jw *w, const attn_engine *e, int world)
{
    attn__jw_key(w, "groups");
    attn__jw_arr_begin(w);
    for (int g = 0; g < attn_engine_num_groups(e); g++)
        attn__engine_json_group(w, e, g);
    attn__jw_arr_end(w);
    attn__put_int(w, "block_size", attn_engine_block_size(e));
    attn__put_str(w, "block_size_source", attn_engine_block_size_source(e));
    attn__put_int(w, "num_blocks", attn_engine_num_blocks(e));
    attn__put_int(w, "kv_bytes", (long long)attn_engine_kv_bytes(e));
    attn__jw_key(w, "kv_token_capacity"); /* per group, across the DCP ranks */
    attn__jw_int(w, (long long)attn_engine_num_blocks(e) * attn_engine_block_size(e) * world);
    attn__put_int(w, "max_model_len", attn_engine_max_model_len(e));
}
