/* Descriptors of the standard (non-MLA) CUDA family: FLASH_ATTN,
 * FLASH_ATTN_DIFFKV, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION, TURBOQUANT and
 * ULTRAQUANT (the composites over them: composite.c). Capabilities are reference §5a, field by
 * field; the rules that depend on the machine (FlashAttention version, FlashInfer's TRT-LLM sinks)
 * are dynamic hooks. */
#include <string.h>

#include "backends/catalog/catalog.h"
#include "metadata/builders.h"
#include "platform/platform_impl.h"

#define KV(x)     ATTN_KV_BIT(ATTN_KV_##x)
#define DT(x)     ATTN_DTYPE_BIT(ATTN_DTYPE_##x)
#define TY(x)     ATTN_TYPE_BIT(ATTN_TYPE_##x)
#define ALL_TYPES (TY(DECODER) | TY(ENCODER) | TY(ENCODER_ONLY) | TY(ENCODER_DECODER))
#define KV_PLAIN  (KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16))
#define KVL(x)    ATTN_KVL_BIT(ATTN_KVL_##x)

static const int attn__blocks_16[] = {16};
static const int attn__blocks_fi[] = {16, 32, 64};
static const int attn__blocks_tq[] = {16, 32, 64, 128};

static bool attn__has(const attn_platform *p, attn_component c)
{
    return p && ((p->installed >> c) & 1u);
}

static bool attn__on_xpu(const attn_check_ctx *c)
{
    return c->platform && c->platform->kind == ATTN_PLATFORM_XPU;
}

/* ---- FLASH_ATTN ---------------------------------------------------------- */

static bool fa_head_size(const attn_check_ctx *c, int hs)
{
    int max = attn__fa4_supported(c->platform) ? 512 : 256;
    return hs % 8 == 0 && hs <= max;
}

/* vLLM 0.32.0's flash_attn_supports_kv_cache_dtype for fp8 at FA version v
 * (head size 0 = not given): FA3 on 9.x, FA4 with head size 512 on 9.x, or
 * FA4 on 10.x. */
static bool fa_fp8_ok(const attn_check_ctx *c, int v, int head_size)
{
    if (!c->has_cc) return false;
    bool sm90 = c->cc_major == 9 && (v == 3 || (v == 4 && (head_size == 0 || head_size == 512)));
    return sm90 || (v == 4 && c->cc_major == 10);
}

static bool fa_kv_quantized(attn_kv_dtype kv)
{
    const char *n = attn_kv_dtype_name(kv);
    size_t len = strlen(n);
    return kv != ATTN_KV_NONE && (!strncmp(n, "fp8", 3) || !strncmp(n, "nvfp4", 5) ||
                                  (len > 14 && !strcmp(n + len - 14, "per_token_head")));
}

/* fp8 needs FA3 on Hopper (the XPU kernels always take it). */
static bool fa_kv_dtype(const attn_check_ctx *c, attn_kv_dtype kv)
{
    if (kv == ATTN_KV_AUTO || kv == ATTN_KV_FLOAT16 || kv == ATTN_KV_BFLOAT16) return true;
    if (kv != ATTN_KV_FP8 && kv != ATTN_KV_FP8_E4M3) return false;
    if (attn__on_xpu(c)) return true;
    return fa_fp8_ok(c, attn__fa_version_ctx(c), 0);
}

static bool fa_sink(const attn_check_ctx *c)
{
    if (attn__on_xpu(c)) return true;
    int v = attn__fa_version_ctx(c);
    return v == 3 || v == 4;
}

static bool fa_per_head(const attn_check_ctx *c)
{
    return attn__fa_version_ctx(c) >= 3;
}

/* FlashAttention's multimodal prefix is an FA4 feature. */
static bool fa_mm_prefix(const attn_check_ctx *c)
{
    return attn__fa4_supported(c->platform);
}

static const char *fa_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    const attn_selector_config *cfg = c->cfg;
    if (cfg->has_sink && c->has_cc && c->cc_major < 9)
        return "sink not supported on compute capability < 9.0";
    bool quant = fa_kv_quantized(cfg->kv_cache_dtype);
    if (cfg->use_mm_prefix && quant && c->has_cc && c->cc_major == 9 && c->cc_minor == 0)
        return "SM90 FP8 KV with mm_prefix requires Triton";
    if (attn__on_xpu(c)) return NULL;
    attn__fa_query q = attn__fa_query_hd256(c);
    int v = attn__fa_version_for(c->platform, &q);
    if (quant && (cfg->kv_cache_dtype == ATTN_KV_FP8_E5M2 || !fa_fp8_ok(c, v, cfg->head_size)))
        return "FP8 KV cache requires FA3 on SM90, FA4 with head_size=512 on SM90, or FA4 on "
               "SM100";
    if (cfg->use_mm_prefix && v != 4)
        return "mm_prefix (PrefixLM bidirectional attention) requires FlashAttention v4, which "
               "does not resolve for this head_size";
    return NULL;
}

/* Everything FLASH_ATTN and its subclass/composite share. */
#define ATTN__FLASH_ATTN_RULES                                                                     \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .platforms = "CUDA, XPU", .dtypes = DT(FP16) | DT(BF16),                                       \
    .kv_dtypes = KV_PLAIN | KV(FP8) | KV(FP8_E4M3), ATTN__BLOCKS(attn__blocks_16),                 \
    .heads = {.multiple_of = 8, .max = 512}, .cc_min = {8, 0}, .supports_sink = true,              \
    .supports_per_head_quant_scales = true, .supports_non_causal = true,                           \
    .supports_batch_invariance = true, .attn_types = ALL_TYPES,                                    \
    .cg_support = ATTN_CG_UNIFORM_BATCH, .can_return_lse_for_decode = true,                        \
    .supports_head_size = fa_head_size, .supports_kv_cache_dtype = fa_kv_dtype,                    \
    .supports_sink_fn = fa_sink, .supports_per_head_quant_scales_fn = fa_per_head,                 \
    .supports_combination = fa_combination, .supports_mm_prefix = true,                            \
    .supports_mm_prefix_fn = fa_mm_prefix, .supports_sliding_window = true, .supports_rswa = true, \
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA

const attn_backend_desc attn__desc_flash_attn = {
    ATTN__FLASH_ATTN_RULES,
    .name = "FLASH_ATTN",
    .supports_dcp = true,
    .kv_cache_shape = attn__kv_shape_flash,
    .kv_stride_order = attn__stride_order_flash,
    .builder = &attn__builder_flash_attn,
};

static const attn_backend_desc attn__desc_flash_attn_diffkv = {
    ATTN__FLASH_ATTN_RULES,
    .name = "FLASH_ATTN_DIFFKV",
    .supports_dcp = true,
    .kv_cache_shape = attn__kv_shape_flash_diffkv,
    .builder = &attn__builder_flash_attn,
};

/* ---- FLASHINFER ---------------------------------------------------------- */

static const int attn__heads_fi[] = {64, 128, 256, 512};

/* TRT-LLM kernels (vLLM's supports_trtllm_attention): not batch-invariant,
 * the cubin package present (the network is assumed unreachable); decode on
 * SM 9.0 and 12.x, decode and prefill on 10.x. */
static bool fi_trtllm(const attn_check_ctx *c, bool prefill)
{
    if (attn__batch_invariant(c) || !attn__has(c->platform, ATTN_COMPONENT_FLASHINFER_CUBIN) ||
        !c->has_cc)
        return false;
    if ((c->cc_major == 9 && c->cc_minor == 0) || c->cc_major == 12) return !prefill;
    return c->cc_major == 10;
}

/* Sinks: the TRT-LLM decode kernel on 9.0 / 12.x, both kernels on 10.x. */
/* Only the TRT-LLM decode of the SM 10.x family reads the query offsets
 * from the device tensor: adaptive verification runs there only. */
static bool fi_query_lens_mismatch(const attn_check_ctx *c)
{
    return c->has_cc && c->cc_major == 10;
}

static bool fi_sink(const attn_check_ctx *c)
{
    if (!c->has_cc) return false;
    if ((c->cc_major == 9 && c->cc_minor == 0) || c->cc_major == 12) return fi_trtllm(c, false);
    return c->cc_major == 10 && fi_trtllm(c, false) && fi_trtllm(c, true);
}

/* nvfp4 through FA2 prefill on 8.x/9.x/12.x, else only with TRT-LLM on 10.x. */
static bool fi_nvfp4(attn_kv_dtype kv)
{
    return kv == ATTN_KV_NVFP4 || kv == ATTN_KV_NVFP4_DS_MLA || kv == ATTN_KV_NVFP4_4OVER6;
}

/* The nvfp4* caches: SM8x/9x/12x write them through FA2's slot mapping,
 * which has no scale search (plain nvfp4 only); SM10x needs TRT-LLM. */
static bool fi_kv(const attn_check_ctx *c, attn_kv_dtype kv)
{
    if (fi_nvfp4(kv)) {
        if (c->has_cc && (c->cc_major == 8 || c->cc_major == 9 || c->cc_major == 12))
            return kv == ATTN_KV_NVFP4;
        return c->has_cc && c->cc_major == 10 && fi_trtllm(c, true) && fi_trtllm(c, false);
    }
    return kv == ATTN_KV_AUTO || kv == ATTN_KV_FLOAT16 || kv == ATTN_KV_BFLOAT16 ||
           kv == ATTN_KV_FP8 || kv == ATTN_KV_FP8_E4M3 || kv == ATTN_KV_FP8_E5M2;
}

static const char *fi_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (fi_nvfp4(c->cfg->kv_cache_dtype) && c->has_cc &&
        (c->cc_major == 8 || c->cc_major == 9 || c->cc_major == 12)) {
        if (c->cfg->head_size == 64)
            return "fa2 prefill misreads an NVFP4 KV cache at head_size 64";
        if (c->cfg->has_sink) return "the sink prefill wrapper cannot read an NVFP4 KV cache";
    }
    return NULL;
}

/* The trtllm-gen kernels of 10.x read head-major block interiors; elsewhere
 * any layout (vLLM's None). */
uint32_t attn__fi_kv_layouts(const attn_check_ctx *c)
{
    return c->has_cc && c->cc_major == 10 ? KVL(LBHNC) | KVL(BLHNC) : 0;
}

/* The TRT-LLM decode kernels used on Blackwell read the cache as HND. */
attn_kv_layout attn__fi_layout(const attn_platform *p)
{
    int major = 0, minor = 0;
    return attn_platform_get_kind(p) == ATTN_PLATFORM_CUDA &&
                   attn_platform_capability(p, &major, &minor) && major == 10
               ? ATTN_LAYOUT_HND
               : ATTN_LAYOUT_DEFAULT;
}

#define ATTN__FLASHINFER_RULES                                                                     \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .platforms = "CUDA", .dtypes = DT(FP16) | DT(BF16),                                            \
    .kv_dtypes = KV_PLAIN | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2) | KV(NVFP4) | KV(NVFP4_4OVER6),  \
    .supports_kv_cache_dtype = fi_kv, .supports_combination = fi_combination,                      \
    ATTN__BLOCKS(attn__blocks_fi), ATTN__HEADS(attn__heads_fi), .cc_min = {8, 0},                  \
    .cc_max = {12, 1}, .supports_sink = true, .supports_non_causal = true,                         \
    .attn_types = TY(DECODER), .cg_support = ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE,                  \
    .can_return_lse_for_decode = true, .import_requires = 1u << ATTN_COMPONENT_FLASHINFER,         \
    .supports_sink_fn = fi_sink, .kv_cache_shape = attn__kv_shape_flashinfer,                      \
    .kv_stride_order = attn__stride_order_flashinfer, .builder = &attn__builder_flashinfer,        \
    .required_layout_fn = attn__fi_layout, .supports_sliding_window = true,                        \
    .supports_query_lens_mismatch_fn = fi_query_lens_mismatch,                                     \
    .kv_cache_layouts_fn = attn__fi_kv_layouts

const attn_backend_desc attn__desc_flashinfer = {
    ATTN__FLASHINFER_RULES,
    .name = "FLASHINFER",
    .supports_dcp = true,
};

/* ---- TRITON_ATTN --------------------------------------------------------- */

const attn_backend_desc attn__desc_triton_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "TRITON_ATTN",
    .supports_non_causal = true,
    .platforms = "CUDA, ROCm, XPU",
    .dtypes = DT(FP16) | DT(BF16) | DT(FP32),
    .kv_dtypes = KV_PLAIN | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2) | KV(INT4_PER_TOKEN_HEAD) |
                 KV(INT8_PER_TOKEN_HEAD) | KV(FP8_PER_TOKEN_HEAD),
    ATTN__BLOCKS(attn__blocks_16),
    .heads = {.min = 32},
    .supports_sink = true,
    .supports_mm_prefix = true,
    .supports_batch_invariance = true,
    .supports_sliding_window = true,
    .supports_rswa = true,
    .attn_types = ALL_TYPES,
    .cg_support = ATTN_CG_ALWAYS,
    .kv_cache_shape = attn__kv_shape_triton,
    .kv_stride_order = attn__stride_order_flashinfer,
    .builder = &attn__builder_triton,
};

/* ---- TRITON_ATTN_DIFFKV -------------------------------------------------- */

/* TRITON_ATTN over a packed cache whose K and V head sizes differ (MiMo-V2.5):
 * TRITON_ATTN's rules with its own KV list (no float16) and decoder only. */
static const attn_backend_desc attn__desc_triton_attn_diffkv = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "TRITON_ATTN_DIFFKV",
    .supports_non_causal = true,
    .platforms = "CUDA, ROCm, XPU",
    .dtypes = DT(FP16) | DT(BF16) | DT(FP32),
    .kv_dtypes = KV(AUTO) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3),
    ATTN__BLOCKS(attn__blocks_16),
    .heads = {.min = 32},
    .supports_sink = true,
    .supports_mm_prefix = true,
    .supports_batch_invariance = true,
    .supports_sliding_window = true,
    .supports_rswa = true,
    .attn_types = TY(DECODER),
    .cg_support = ATTN_CG_ALWAYS,
    .kv_cache_shape = attn__kv_shape_flash_diffkv,
    .builder = &attn__builder_triton,
};

/* ---- FLEX_ATTENTION ------------------------------------------------------ */

static const attn_backend_desc attn__desc_flex_attention = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "FLEX_ATTENTION",
    .platforms = "CUDA, ROCm",
    .dtypes = DT(FP16) | DT(BF16) | DT(FP32),
    .kv_dtypes = KV_PLAIN,
    ATTN__BLOCKS(attn__blocks_16),
    .supports_mm_prefix = true,
    .supports_non_causal = true,
    .supports_batch_invariance = true,
    .supports_sliding_window = true,
    .supports_rswa = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .attn_types = TY(DECODER) | TY(ENCODER_ONLY),
    .cg_support = ATTN_CG_ALWAYS,
    .kv_cache_shape = attn__kv_shape_split,
    .builder = &attn__builder_flex,
    .kv_cache_layouts = KVL(LBNHC), /* flattens (B, N) into one token axis */
};

/* ---- TURBOQUANT ---------------------------------------------------------- */

static const attn_backend_desc attn__desc_turboquant = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "TURBOQUANT",
    .platforms = "CUDA, ROCm, XPU",
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV(TURBOQUANT_K8V4) | KV(TURBOQUANT_4BIT_NC) | KV(TURBOQUANT_K3V4_NC) |
                 KV(TURBOQUANT_3BIT_NC),
    .kv_none_rejected = true,
    ATTN__BLOCKS(attn__blocks_tq),
    .heads = {.min = 1},
    .attn_types = TY(DECODER),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .kv_cache_shape = attn__kv_shape_turboquant,
    .builder = &attn__builder_triton,
    .kv_cache_layouts = KVL(LBNHC),
};

/* ULTRAQUANT (vLLM 0.32.0): TurboQuant's layout for the ultraquant_4bit KV
 * dtype, and that dtype only (None included). */
static bool ultraquant_kv(const attn_check_ctx *c, attn_kv_dtype kv)
{
    (void)c;
    return kv == ATTN_KV_ULTRAQUANT_4BIT;
}

static const attn_backend_desc attn__desc_ultraquant = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "ULTRAQUANT",
    .platforms = "ROCm",
    .dtypes = DT(BF16),
    .kv_dtypes = KV(ULTRAQUANT_4BIT),
    .supports_kv_cache_dtype = ultraquant_kv,
    .kv_none_rejected = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    ATTN__BLOCKS(attn__blocks_tq),
    .preferred_block_size = 64,
    .heads = {.min = 1},
    .attn_types = TY(DECODER),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .kv_cache_shape = attn__kv_shape_turboquant,
    .builder = &attn__builder_triton,
    .kv_cache_layouts = KVL(LBNHC), /* TurboQuant's class */
};

/* ---- built-in objects (descriptor only: no kernel in this process) ------- */

ATTN__BUILTIN(attn__builtin_ultraquant, attn__desc_ultraquant)

ATTN__BUILTIN(attn__builtin_flash_attn, attn__desc_flash_attn)
ATTN__BUILTIN(attn__builtin_flash_attn_diffkv, attn__desc_flash_attn_diffkv)
ATTN__BUILTIN(attn__builtin_flashinfer, attn__desc_flashinfer)
ATTN__BUILTIN(attn__builtin_triton_attn, attn__desc_triton_attn)
ATTN__BUILTIN(attn__builtin_triton_attn_diffkv, attn__desc_triton_attn_diffkv)
ATTN__BUILTIN(attn__builtin_flex_attention, attn__desc_flex_attention)
ATTN__BUILTIN(attn__builtin_turboquant, attn__desc_turboquant)
