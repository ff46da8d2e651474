/* Enumerations shared by every part: model dtypes, KV-cache dtypes,
 * attention types, KV layouts, graph-capture tiers. Each has a name table;
 * names are the strings vLLM uses (kv "fp8_e4m3", attn type "decoder"). */
#ifndef ATTN_TYPES_H
#define ATTN_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/export.h"
#include "attn/status.h"

ATTN_EXTERN_C_BEGIN

/* Limits every public entry point checks: a value outside them is refused
 * with a status and detail text, and nothing is changed. Sizes derived from
 * them (elements, bytes) are computed with checked arithmetic. */
#define ATTN_MAX_HEAD_SIZE  4096      /* head_size, head_size_v and MLA dims */
#define ATTN_MAX_HEADS      65536     /* query heads and KV heads of a layer */
#define ATTN_MAX_LAYERS     100000    /* layers of a model */
#define ATTN_MAX_SEQ_LEN    (1 << 28) /* tokens of one request (seq_lens, max_model_len) */
#define ATTN_MAX_NUM_REQS   (1 << 20) /* requests in one batch (num_reqs, max_num_seqs) */
#define ATTN_MAX_BLOCK_SIZE 65536     /* tokens per KV block */
#define ATTN_MAX_NUM_BLOCKS (1 << 30) /* blocks of one KV pool */
#define ATTN_MAX_KV_NDIM    6         /* dims of a KV-cache shape */

/* Model (activation) dtype. */
typedef enum attn_dtype {
    ATTN_DTYPE_FP16 = 0,
    ATTN_DTYPE_BF16 = 1,
    ATTN_DTYPE_FP32 = 2,
    ATTN_DTYPE_COUNT
} attn_dtype;
#define ATTN_DTYPE_BIT(d) (1u << (d))

/* KV-cache dtype strings (vLLM 0.32.0 CacheDType), in declaration order. */
#define ATTN_KV_DTYPE_TABLE(X)                                                                     \
    X(AUTO, "auto")                                                                                \
    X(FLOAT16, "float16")                                                                          \
    X(BFLOAT16, "bfloat16")                                                                        \
    X(FP8, "fp8")                                                                                  \
    X(FP8_E4M3, "fp8_e4m3")                                                                        \
    X(FP8_E5M2, "fp8_e5m2")                                                                        \
    X(FP8_INC, "fp8_inc")                                                                          \
    X(FP8_DS_MLA, "fp8_ds_mla")                                                                    \
    X(NVFP4_DS_MLA, "nvfp4_ds_mla")                                                                \
    X(TURBOQUANT_K8V4, "turboquant_k8v4")                                                          \
    X(TURBOQUANT_4BIT_NC, "turboquant_4bit_nc")                                                    \
    X(TURBOQUANT_K3V4_NC, "turboquant_k3v4_nc")                                                    \
    X(TURBOQUANT_3BIT_NC, "turboquant_3bit_nc")                                                    \
    X(ULTRAQUANT_4BIT, "ultraquant_4bit")                                                          \
    X(INT4_PER_TOKEN_HEAD, "int4_per_token_head")                                                  \
    X(INT8_PER_TOKEN_HEAD, "int8_per_token_head")                                                  \
    X(FP8_PER_TOKEN_HEAD, "fp8_per_token_head")                                                    \
    X(NVFP4, "nvfp4")                                                                              \
    X(NVFP4_4OVER6, "nvfp4_4over6")

typedef enum attn_kv_dtype {
    ATTN_KV_NONE = -1, /* Python None: accepted by every backend but TURBOQUANT */
#define ATTN__KV_ENUM(name, str) ATTN_KV_##name,
    ATTN_KV_DTYPE_TABLE(ATTN__KV_ENUM)
#undef ATTN__KV_ENUM
        ATTN_KV_COUNT
} attn_kv_dtype;
#define ATTN_KV_BIT(k) (1ull << (k))

typedef enum attn_attn_type {
    ATTN_TYPE_DECODER = 0,
    ATTN_TYPE_ENCODER = 1,
    ATTN_TYPE_ENCODER_ONLY = 2,
    ATTN_TYPE_ENCODER_DECODER = 3,
    ATTN_TYPE_COUNT
} attn_attn_type;
#define ATTN_TYPE_BIT(t) (1u << (t))

typedef enum attn_kv_layout {
    ATTN_LAYOUT_DEFAULT = 0, /* no requirement */
    ATTN_LAYOUT_NHD = 1,
    ATTN_LAYOUT_HND = 2
} attn_kv_layout;

/* AttentionCGSupport; values as vLLM's. */
typedef enum attn_cg_support {
    ATTN_CG_NEVER = 0,
    ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE = 1,
    ATTN_CG_UNIFORM_BATCH = 2,
    ATTN_CG_ALWAYS = 3
} attn_cg_support;

/* Element type of a buffer (tensor or cache storage). */
typedef enum attn_elem {
    ATTN_ELEM_F32 = 0,
    ATTN_ELEM_F16 = 1,
    ATTN_ELEM_BF16 = 2,
    ATTN_ELEM_FP8_E4M3 = 3,
    ATTN_ELEM_FP8_E5M2 = 4,
    ATTN_ELEM_U8 = 5,
    ATTN_ELEM_COUNT
} attn_elem;

ATTN_API const char *attn_dtype_name(attn_dtype d);       /* "fp16" "bf16" "fp32" */
ATTN_API const char *attn_dtype_torch_name(attn_dtype d); /* "torch.float16" ... */
/* Accepts fp16|float16|half, bf16|bfloat16, fp32|float32|float (and torch.*). */
ATTN_API attn_status attn_dtype_parse(const char *s, attn_dtype *out);
ATTN_API const char *attn_kv_dtype_name(attn_kv_dtype k); /* "None" for ATTN_KV_NONE */
ATTN_API attn_status attn_kv_dtype_parse(const char *s, attn_kv_dtype *out);
ATTN_API bool attn_kv_dtype_is_quantized(attn_kv_dtype k);  /* fp8*, *_per_token_head, nvfp4* */
ATTN_API const char *attn_attn_type_name(attn_attn_type t); /* "decoder" ... */
ATTN_API const char *attn_attn_type_enum_name(attn_attn_type t); /* "AttentionType.DECODER" */
ATTN_API attn_status attn_attn_type_parse(const char *s, attn_attn_type *out);
ATTN_API const char *attn_layout_name(attn_kv_layout l);
ATTN_API const char *attn_cg_support_name(attn_cg_support c);
ATTN_API const char *attn_elem_name(attn_elem e);
ATTN_API size_t attn_elem_size(attn_elem e);
/* Storage element of a model dtype / of a KV dtype given the model dtype
 * (auto -> model dtype; fp8/fp8_e4m3 -> e4m3; fp8_e5m2 -> e5m2). */
ATTN_API attn_elem attn_dtype_elem(attn_dtype d);
ATTN_API attn_status attn_kv_dtype_elem(attn_kv_dtype k, attn_dtype model, attn_elem *out);

ATTN_EXTERN_C_END

#endif
