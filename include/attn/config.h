/* The selector configuration: everything about a layer and launch that
 * decides which attention backend can run it (vLLM 0.32.0's
 * AttentionSelectorConfig, plus num_heads and the run's KV-cache dtype,
 * which vLLM passes beside it). Plain data: fill it with
 * attn_selector_config_init first (it sets struct_size, attn/abi.h), compare
 * with attn_selector_config_equal, print with attn_selector_config_repr. */
#ifndef ATTN_CONFIG_H
#define ATTN_CONFIG_H

#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_selector_config {
    /* sizeof(attn_selector_config) of the caller's build, set by
     * attn_selector_config_init (attn/abi.h). Every function taking a config
     * refuses one whose struct_size libattn does not accept
     * (ATTN_ABI_MISMATCH, the sizes named; equal is false, hash 0, repr -1),
     * and reads a field past an older struct's end as its default. */
    uint32_t struct_size;
    int head_size;
    attn_dtype dtype;
    attn_kv_dtype kv_cache_dtype; /* ATTN_KV_NONE = not given */
    int block_size;               /* 0 = not user-specified (None) */
    bool use_mla;
    bool has_sink;
    bool use_sparse;
    bool use_mm_prefix;
    bool use_per_head_quant_scales;
    attn_attn_type attn_type;
    bool has_sliding_window;
    bool use_non_causal;
    bool use_batch_invariant;
    int num_heads; /* 0 = None (plain attention layers do not pass it) */
    /* Launch facts vLLM 0.32 derives from the engine config. */
    bool use_kv_connector;          /* a KV-transfer instance (disaggregated serving) */
    bool use_pcp;                   /* prefill context parallel size > 1 */
    bool use_adaptive_verification; /* speculative decoding with adaptive verification */
    bool use_dcp;                   /* decode context parallel size > 1 */
    bool use_rswa;                  /* the model has an R-SWA window */
    /* The run's KV-cache dtype (vLLM's cache_config.cache_dtype, the
     * _run_kv_cache_dtype of its selection cache key) when this layer's
     * differs from it: vLLM's kv_cache_dtype_skip_layers and a turboquant
     * run's boundary layers keep the native dtype ("auto"). ATTN_KV_NONE
     * (the default) = the layer's own kv_cache_dtype; the selection records
     * the value in effect. ROCm's turboquant/ultraquant run rules and FA4's
     * head-256 kernel read it. */
    attn_kv_dtype run_kv_cache_dtype;
} attn_selector_config;

/* The run's KV-cache dtype in effect for cfg: run_kv_cache_dtype, or the
 * layer's kv_cache_dtype when it is ATTN_KV_NONE (ATTN_KV_NONE for NULL). */
ATTN_API attn_kv_dtype attn_selector_config_run_kv(const attn_selector_config *cfg);

/* struct_size = sizeof, head_size 0 (must be set), bf16, kv "auto", block
 * None, decoder, flags off, run KV dtype = the layer's. */
ATTN_API void attn_selector_config_init(attn_selector_config *cfg);
/* NULL is accepted: it equals only NULL, hashes to 0 and prints "None".
 * A struct_size libattn does not accept equals nothing, hashes to 0 and
 * prints nothing (repr returns -1), with the sizes in attn_last_error().
 * attn_select refuses head_size outside [1, ATTN_MAX_HEAD_SIZE], num_heads
 * above ATTN_MAX_HEADS and block_size above ATTN_MAX_BLOCK_SIZE
 * (ATTN_INVALID_ARGUMENT, error invalid-config). */
ATTN_API bool attn_selector_config_equal(const attn_selector_config *a,
                                         const attn_selector_config *b);
ATTN_API uint64_t attn_selector_config_hash(const attn_selector_config *cfg);
/* "AttentionSelectorConfig(head_size=128, dtype=torch.bfloat16, ...)" as
 * vLLM 0.32.0's __repr__ prints it (its field order, use_rswa last).
 * Returns the length that the full text needs, like snprintf. */
ATTN_API int attn_selector_config_repr(const attn_selector_config *cfg, char *buf, size_t size);

/* ---- the field table --------------------------------------------------------
 * Every field of attn_selector_config is one row of one table (the library's
 * src/util/config_fields.h): equality, hash, repr, the selection JSON, the
 * selection cache key, `attn select`'s options and the Python keywords are
 * all generated from it. Rows come in the struct's order. */

typedef enum attn_config_field_type {
    ATTN_FIELD_INT,       /* int */
    ATTN_FIELD_OPT_INT,   /* int, 0 = None (not given) */
    ATTN_FIELD_BOOL,      /* bool */
    ATTN_FIELD_DTYPE,     /* attn_dtype */
    ATTN_FIELD_KV_DTYPE,  /* attn_kv_dtype, ATTN_KV_NONE = None */
    ATTN_FIELD_ATTN_TYPE, /* attn_attn_type */
    /* attn_kv_dtype, ATTN_KV_NONE = the layer's kv_cache_dtype; its text is
     * what vLLM's CacheConfig.cache_dtype accepts (a CacheDType name) */
    ATTN_FIELD_RUN_KV_DTYPE,
} attn_config_field_type;

typedef struct attn_config_field {
    const char *name; /* vLLM's field name: the JSON key and the Python keyword */
    attn_config_field_type type;
    size_t offset;         /* offsetof(attn_selector_config, <name>) */
    const char *cli_flag;  /* `attn select` option, "--head-size" */
    const char *cli_arg;   /* its value's placeholder ("N"); NULL for a bool flag */
    long cli_min, cli_max; /* the CLI's accepted range of an integer field */
    const char *doc;       /* one line for --help */
} attn_config_field;

ATTN_API int attn_selector_config_num_fields(void);
/* Row i (0 <= i < attn_selector_config_num_fields()), or NULL. */
ATTN_API const attn_config_field *attn_selector_config_field(int i);
/* The row named name (exact), or NULL. */
ATTN_API const attn_config_field *attn_selector_config_field_find(const char *name);
/* Sets one field from text (cfg initialised; a field past the end of an
 * older caller's struct is ATTN_ABI_MISMATCH): a bool from true/false/1/0 (any case), an
 * integer in decimal in [0, 2^20], a dtype / kv-cache dtype / attention type
 * as attn_dtype_parse, attn_kv_dtype_parse and attn_attn_type_parse read it.
 * value NULL is Python's None: allowed for kv_cache_dtype (ATTN_KV_NONE),
 * run_kv_cache_dtype (the layer's) and the optional integers (0). A text
 * that is no CacheDType for run_kv_cache_dtype is refused in the words of
 * vLLM's CacheConfig ("Input should be 'auto', ... or 'nvfp4_4over6'"). ATTN_INVALID_ARGUMENT for
 * an unknown field or a bad value (cfg unchanged, text in attn_last_error()). */
ATTN_API attn_status attn_selector_config_set(attn_selector_config *cfg, const char *field,
                                              const char *value);

ATTN_EXTERN_C_END

#endif
