/* The one list of attn_selector_config's fields (see attn/config.h).
 *
 * X(name, TYPE, default, repr_pos, json_pos, cli_flag, cli_arg, cli_min, cli_max, doc)
 *   TYPE      ATTN_FIELD_<TYPE>; decides how each walker reads and prints it
 *   default   attn_selector_config_init's value
 *   repr_pos  place in vLLM 0.32.0's AttentionSelectorConfig.__repr__, -1 = not printed
 *   json_pos  place in the selection JSON's "config" object
 *   cli_*     `attn select`'s option, its value placeholder (NULL = a bool flag)
 *             and the accepted range of an integer
 * Rows are in the struct's order, which is also the hash's order; struct_size
 * is no row (attn/abi.h). */
#ifndef ATTN_UTIL_CONFIG_FIELDS_H
#define ATTN_UTIL_CONFIG_FIELDS_H

#include "attn/config.h"
#include "util/strbuf.h"

/* clang-format off */
#define ATTN__CONFIG_FIELDS(X)                                                                    \
    X(head_size, INT, 0, 0, 0, "--head-size", "N", 1, 65536, "default 128")                       \
    X(dtype, DTYPE, ATTN_DTYPE_BF16, 1, 1, "--dtype", "fp16|bf16|fp32", 0, 0, "default bf16")     \
    X(kv_cache_dtype, KV_DTYPE, ATTN_KV_AUTO, 2, 2, "--kv-cache-dtype", "S", 0, 0,                \
      "default auto")                                                                             \
    X(block_size, OPT_INT, 0, 3, 3, "--block-size", "N", 1, 1 << 20,                              \
      "as if the user passed --block-size (default: none)")                                       \
    X(use_mla, BOOL, 0, 4, 4, "--use-mla", NULL, 0, 0, "a multi-head latent attention layer")     \
    X(has_sink, BOOL, 0, 5, 5, "--has-sink", NULL, 0, 0, "the layer has attention sinks")         \
    X(use_sparse, BOOL, 0, 6, 6, "--use-sparse", NULL, 0, 0, "sparse (indexed) MLA")              \
    X(use_mm_prefix, BOOL, 0, 7, 7, "--use-mm-prefix", NULL, 0, 0,                                \
      "bidirectional multimodal prefix")                                                          \
    X(use_per_head_quant_scales, BOOL, 0, 8, 8, "--per-head-quant-scales", NULL, 0, 0,            \
      "per-head KV quantization scales")                                                          \
    X(attn_type, ATTN_TYPE, ATTN_TYPE_DECODER, 9, 9, "--attn-type", "T", 0, 0,                    \
      "decoder|encoder|encoder_only|encoder_decoder")                                             \
    X(has_sliding_window, BOOL, 0, 10, 10, "--sliding-window", NULL, 0, 0,                        \
      "a sliding-window layer")                                                                   \
    X(use_non_causal, BOOL, 0, 11, 11, "--non-causal", NULL, 0, 0, "non-causal attention")        \
    X(use_batch_invariant, BOOL, 0, 12, 12, "--batch-invariant", NULL, 0, 0,                      \
      "batch-invariant kernels required")                                                         \
    X(num_heads, OPT_INT, 0, -1, 18, "--num-heads", "N", 1, 1 << 20,                              \
      "query heads (MLA layers pass it)")                                                         \
    X(use_kv_connector, BOOL, 0, 13, 13, "--kv-connector", NULL, 0, 0,                            \
      "launch: a KV-transfer instance (disaggregated serving)")                                   \
    X(use_pcp, BOOL, 0, 15, 14, "--pcp", NULL, 0, 0, "launch: prefill context parallel size > 1") \
    X(use_adaptive_verification, BOOL, 0, 14, 15, "--adaptive-verification", NULL, 0, 0,          \
      "launch: speculative decoding with adaptive verification")                                  \
    X(use_dcp, BOOL, 0, 16, 16, "--dcp", NULL, 0, 0, "launch: decode context parallel size > 1")  \
    X(use_rswa, BOOL, 0, 17, 17, "--rswa", NULL, 0, 0, "launch: the model has an R-SWA window")  \
    X(run_kv_cache_dtype, RUN_KV_DTYPE, ATTN_KV_NONE, -1, 19, "--run-kv-cache-dtype", "S", 0, 0,   \
      "launch: the run's KV-cache dtype (default: the layer's)")
/* clang-format on */

typedef struct attn__config_row {
    attn_config_field pub;
    int def;      /* attn_selector_config_init's value */
    int repr_pos; /* -1 = not in the repr */
    int json_pos;
} attn__config_row;

extern const attn__config_row attn__config_rows[];
extern const int attn__config_num_rows;

/* in as a whole current struct: a copy whose fields past an older caller's
 * struct_size hold their defaults. ATTN_NULL_ARGUMENT / ATTN_ABI_MISMATCH
 * (the sizes named) leave out initialised. */
attn_status attn__config_read(const attn_selector_config *in, attn_selector_config *out);
/* The run's KV dtype in effect for a whole current struct (the layer's when
 * unset); attn_selector_config_run_kv with the struct_size check. */
static inline attn_kv_dtype attn__config_run_kv(const attn_selector_config *c)
{
    return c->run_kv_cache_dtype != ATTN_KV_NONE ? c->run_kv_cache_dtype : c->kv_cache_dtype;
}
/* Equality and hash of two whole current structs (the selection cache's
 * keys, which libattn builds itself): the public ones without the copy. */
bool attn__config_equal_full(const attn_selector_config *a, const attn_selector_config *b);
uint64_t attn__config_hash_full(const attn_selector_config *c);
/* The field's value (a bool as 0/1, an enum as its int value). */
int64_t attn__config_get(const attn_selector_config *c, const attn_config_field *f);
/* The "config" object of the selection JSON. */
void attn__selector_config_json(attn__jw *w, const attn_selector_config *c);

#endif
