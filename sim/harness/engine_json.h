/* The engine's state as JSON, in one schema (engine_json.c). */
#ifndef ATTN_HARNESS_ENGINE_JSON_H
#define ATTN_HARNESS_ENGINE_JSON_H

#include "attn/engine.h"
#include "harness/harness.h"
#include "util/json.h"
#include "util/strbuf.h"

/* KV group g: index, model_group, layers (and layers_text), kind, backend,
 * requested, builder, cg_support, reorder_batch_threshold, layout,
 * kv_shape (and kv_shape_text), kv_elem, bytes_per_block, kernel {mode,
 * name, variant, note, layers_run}, selection. */
void attn__engine_json_group(attn__jw *w, const attn_engine *e, int g);
/* Into the open object: groups [...], block_size, block_size_source,
 * num_blocks, kv_bytes, kv_token_capacity (world = DCP ranks, 1 without),
 * max_model_len. */
void attn__engine_json_summary(attn__jw *w, const attn_engine *e, int world);
/* One step: the engine's counts and times, the harness's checksum. */
void attn__engine_json_step(attn__jw *w, const attn_engine_step_stats *s,
                            const attn__harness_stats *hs);
/* Every KV group's block accounting, as an array. */
void attn__engine_json_blocks(attn__jw *w, const attn_engine *e);

#endif
