/* Models as the attention layer sees them: one spec per layer (heads, head
 * size, window, soft-cap, sinks, MLA dims, attention type), grouped into
 * KV-cache groups of equal specs. Loaded from a preset name (data/models/),
 * a Hugging Face config.json, or plain shape numbers. */
#ifndef ATTN_MODEL_H
#define ATTN_MODEL_H

#include "attn/config.h"
#include "attn/layer.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_layer_spec {
    attn_attn_type attn_type;
    int num_heads; /* query heads */
    int num_kv_heads;
    int head_size;      /* for MLA: kv_lora_rank + qk_rope_head_dim (576 for DeepSeek-V3) */
    int head_size_v;    /* 0 = head_size */
    int sliding_window; /* 0 = full attention */
    float logits_soft_cap;
    bool has_sink;
    bool use_mla;
    bool use_sparse;
    int kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim;
    int index_topk; /* sparse MLA */
    bool use_mm_prefix;
} attn_layer_spec;

typedef struct attn_model attn_model;

/* Preset name (e.g. "llama-3.1-8b"), or a path to a config.json. Malformed
 * input: ATTN_PARSE_ERROR / ATTN_INVALID_ARGUMENT naming the field. */
ATTN_API attn_status attn_model_load(const char *name_or_path, attn_model **out);
ATTN_API attn_status attn_model_from_json(const char *json, const char *name, attn_model **out);
/* A decoder-only model of `layers` identical full-attention layers. Limits:
 * layers <= ATTN_MAX_LAYERS, heads <= ATTN_MAX_HEADS, head_size <=
 * ATTN_MAX_HEAD_SIZE, kv_heads dividing heads; else ATTN_INVALID_ARGUMENT. */
ATTN_API attn_status attn_model_from_shape(int layers, int heads, int kv_heads, int head_size,
                                           attn_dtype dtype, attn_model **out);
ATTN_API void attn_model_free(attn_model *m);

ATTN_API const char *attn_model_name(const attn_model *m);
ATTN_API attn_dtype attn_model_dtype(const attn_model *m);
ATTN_API int attn_model_num_layers(const attn_model *m);
ATTN_API const attn_layer_spec *attn_model_layer(const attn_model *m, int layer);
/* KV-cache groups: layers with equal specs, in order of first appearance. */
ATTN_API int attn_model_num_groups(const attn_model *m);
ATTN_API const attn_layer_spec *attn_model_group_spec(const attn_model *m, int group);
ATTN_API int attn_model_group_layers(const attn_model *m, int group, const int **layers);
ATTN_API int attn_model_layer_group(const attn_model *m, int layer);

/* The selector configuration for one layer spec under launch options. */
ATTN_API void attn_model_selector_config(const attn_model *m, const attn_layer_spec *spec,
                                         attn_kv_dtype kv_cache_dtype, int user_block_size,
                                         attn_selector_config *out);
/* Kernel parameters for one layer spec. */
ATTN_API void attn_model_layer_params(const attn_model *m, const attn_layer_spec *spec,
                                      attn_kv_dtype kv_cache_dtype, attn_layer_params *out);

/* Presets shipped with libattn. */
ATTN_API int attn_model_preset_count(void);
ATTN_API const char *attn_model_preset_name(int i);

/* Additions (model engineer). */
/* Hugging Face model_type ("llama", "gemma2", ...; "" for shape models) and the
 * file the model was read from ("" if none). */
ATTN_API const char *attn_model_type(const attn_model *m);
ATTN_API const char *attn_model_source(const attn_model *m);
/* "model.layers.3.self_attn", "decoder.layers.0.encoder_attn", ... */
ATTN_API const char *attn_model_layer_name(const attn_model *m, int layer);
/* Whether layers of this spec keep a paged KV cache. Decoder self-attention
 * and cross-attention (ENCODER_DECODER) do; encoder self-attention (ENCODER)
 * and encoder-only layers run on the pass's own K/V without a cache, as in
 * vLLM. They still form a group and still select a backend. */
ATTN_API bool attn_layer_spec_has_kv_cache(const attn_layer_spec *spec);
ATTN_API bool attn_model_group_has_kv_cache(const attn_model *m, int group);
/* Finds models/<name>.json in the data directories (attn_model_data_dirs).
 * ATTN_NOT_FOUND (listing the presets and the directories) if absent;
 * ATTN_OUT_OF_RANGE when it exists but its path does not fit size bytes. */
ATTN_API attn_status attn_model_preset_path(const char *name, char *buf, size_t size);
/* The data directories searched, in order (at most max; dirs NULL or max <= 0
 * writes nothing and returns 0): $ATTN_DATA_DIR; the install layout's data
 * directory relative to the file holding libattn's code (libattn.so or the
 * program linking it statically), so an installed or moved copy finds its
 * own data; the source tree's data/ only when that file lies in the build
 * tree; the configured install prefix's. Returns the count. */
ATTN_API int attn_model_data_dirs(const char **dirs, int max);
/* Facts taken from documented defaults while reading the config
 * ("num_key_value_heads absent: 32 (= num_attention_heads)"). */
ATTN_API int attn_model_num_notes(const attn_model *m);
ATTN_API const char *attn_model_note(const attn_model *m, int i);
/* The KV-spec kind of a layer (reference §14): "full_attention",
 * "sliding_window", "mla_attention", "sliding_window_mla",
 * "encoder_only_attention", "cross_attention". */
ATTN_API const char *attn_layer_spec_kind(const attn_layer_spec *spec);
/* Layer indices as short text: "0-31", "0,2,...,40", "3,7,9". */
ATTN_API void attn_model_layers_text(const int *layers, int n, char *buf, size_t size);
/* One JSON object: name, model_type, source, dtype, num_layers, notes, and
 * per group its kind, layers and spec. Caller frees *out. */
ATTN_API attn_status attn_model_to_json(const attn_model *m, char **out);

ATTN_EXTERN_C_END

#endif
