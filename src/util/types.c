/* Name tables for the shared enums (types.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "attn/types.h"
#include "util/error.h"

static const char *const attn__dtype_names[] = {"fp16", "bf16", "fp32"};
static const char *const attn__dtype_torch[] = {"torch.float16", "torch.bfloat16", "torch.float32"};

const char *attn_dtype_name(attn_dtype d)
{
    return (unsigned)d < ATTN_DTYPE_COUNT ? attn__dtype_names[d] : "?";
}

const char *attn_dtype_torch_name(attn_dtype d)
{
    return (unsigned)d < ATTN_DTYPE_COUNT ? attn__dtype_torch[d] : "?";
}

attn_status attn_dtype_parse(const char *s, attn_dtype *out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    if (!strncmp(s, "torch.", 6)) s += 6;
    static const struct {
        const char *n;
        attn_dtype d;
    } m[] = {{"fp16", ATTN_DTYPE_FP16},    {"float16", ATTN_DTYPE_FP16},  {"half", ATTN_DTYPE_FP16},
             {"bf16", ATTN_DTYPE_BF16},    {"bfloat16", ATTN_DTYPE_BF16}, {"fp32", ATTN_DTYPE_FP32},
             {"float32", ATTN_DTYPE_FP32}, {"float", ATTN_DTYPE_FP32}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        if (!strcasecmp(s, m[i].n)) {
            *out = m[i].d;
            return ATTN_OK;
        }
    }
    return attn__fail(ATTN_INVALID_ARGUMENT, "unknown dtype '%s' (expected fp16, bf16 or fp32)", s);
}

static const char *const attn__kv_names[] = {
#define ATTN__KV_STR(name, str) str,
    ATTN_KV_DTYPE_TABLE(ATTN__KV_STR)
#undef ATTN__KV_STR
};

const char *attn_kv_dtype_name(attn_kv_dtype k)
{
    if (k == ATTN_KV_NONE) return "None";
    return (unsigned)k < ATTN_KV_COUNT ? attn__kv_names[k] : "?";
}

attn_status attn_kv_dtype_parse(const char *s, attn_kv_dtype *out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    if (!strcmp(s, "None") || !strcmp(s, "none")) {
        *out = ATTN_KV_NONE;
        return ATTN_OK;
    }
    for (int i = 0; i < ATTN_KV_COUNT; i++) {
        if (!strcmp(s, attn__kv_names[i])) {
            *out = (attn_kv_dtype)i;
            return ATTN_OK;
        }
    }
    /* vLLM's assertion text, valid values in CacheDType order. */
    char list[512] = "";
    size_t o = 0;
    for (int i = 0; i < ATTN_KV_COUNT && o < sizeof list; i++)
        o +=
            (size_t)snprintf(list + o, sizeof list - o, "%s'%s'", i ? ", " : "", attn__kv_names[i]);
    return attn__fail(ATTN_INVALID_ARGUMENT, "Invalid kv_cache_dtype: %s. Valid values are: (%s)",
                      s, list);
}

bool attn_kv_dtype_is_quantized(attn_kv_dtype k)
{
    if (k == ATTN_KV_NONE || (unsigned)k >= ATTN_KV_COUNT) return false;
    const char *n = attn__kv_names[k];
    size_t l = strlen(n);
    return !strncmp(n, "fp8", 3) || (l > 14 && !strcmp(n + l - 14, "per_token_head")) ||
           !strncmp(n, "nvfp4", 5);
}

static const char *const attn__type_names[] = {"decoder", "encoder", "encoder_only",
                                               "encoder_decoder"};
static const char *const attn__type_enum[] = {"AttentionType.DECODER", "AttentionType.ENCODER",
                                              "AttentionType.ENCODER_ONLY",
                                              "AttentionType.ENCODER_DECODER"};

const char *attn_attn_type_name(attn_attn_type t)
{
    return (unsigned)t < ATTN_TYPE_COUNT ? attn__type_names[t] : "?";
}

const char *attn_attn_type_enum_name(attn_attn_type t)
{
    return (unsigned)t < ATTN_TYPE_COUNT ? attn__type_enum[t] : "?";
}

attn_status attn_attn_type_parse(const char *s, attn_attn_type *out)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(out);
    for (int i = 0; i < ATTN_TYPE_COUNT; i++) {
        if (!strcasecmp(s, attn__type_names[i]) || !strcmp(s, attn__type_enum[i])) {
            *out = (attn_attn_type)i;
            return ATTN_OK;
        }
    }
    return attn__fail(ATTN_INVALID_ARGUMENT,
                      "unknown attention type '%s' (expected decoder, encoder, encoder_only or "
                      "encoder_decoder)",
                      s);
}

const char *attn_layout_name(attn_kv_layout l)
{
    switch (l) {
    case ATTN_LAYOUT_NHD: return "NHD";
    case ATTN_LAYOUT_HND: return "HND";
    default: return "default";
    }
}

const char *attn_cg_support_name(attn_cg_support c)
{
    switch (c) {
    case ATTN_CG_ALWAYS: return "ALWAYS";
    case ATTN_CG_UNIFORM_BATCH: return "UNIFORM_BATCH";
    case ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE: return "UNIFORM_SINGLE_TOKEN_DECODE";
    default: return "NEVER";
    }
}

const char *attn_elem_name(attn_elem e)
{
    static const char *const n[] = {"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "u8"};
    return (unsigned)e < ATTN_ELEM_COUNT ? n[e] : "?";
}

size_t attn_elem_size(attn_elem e)
{
    static const size_t s[] = {4, 2, 2, 1, 1, 1};
    return (unsigned)e < ATTN_ELEM_COUNT ? s[e] : 0;
}

attn_elem attn_dtype_elem(attn_dtype d)
{
    switch (d) {
    case ATTN_DTYPE_FP16: return ATTN_ELEM_F16;
    case ATTN_DTYPE_BF16: return ATTN_ELEM_BF16;
    default: return ATTN_ELEM_F32;
    }
}

attn_status attn_kv_dtype_elem(attn_kv_dtype k, attn_dtype model, attn_elem *out)
{
    ATTN__CHECK_NULL(out);
    switch (k) {
    case ATTN_KV_NONE:
    case ATTN_KV_AUTO: *out = attn_dtype_elem(model); return ATTN_OK;
    case ATTN_KV_FLOAT16: *out = ATTN_ELEM_F16; return ATTN_OK;
    case ATTN_KV_BFLOAT16: *out = ATTN_ELEM_BF16; return ATTN_OK;
    case ATTN_KV_FP8:
    case ATTN_KV_FP8_E4M3: *out = ATTN_ELEM_FP8_E4M3; return ATTN_OK;
    case ATTN_KV_FP8_E5M2: *out = ATTN_ELEM_FP8_E5M2; return ATTN_OK;
    default:
        return attn__fail(ATTN_UNSUPPORTED, "kv_cache_dtype %s has no element storage in libattn",
                          attn_kv_dtype_name(k));
    }
}
