/* Descriptors of the MLA family on CUDA and XPU (reference §5b). Every MLA
 * backend is decoder only, without sinks, multimodal prefix, per-head scales
 * or non-causal attention, and takes PCP (vLLM's MLAAttentionImpl does); head sizes default to
 * {320, 576}. The extra "combination" checks carry vLLM's own texts (FlashAttention MLA and
 * FlashMLA availability, the TokenSpeed package). */
#include <stdio.h>

#include "backends/catalog/catalog.h"
#include "metadata/mla_builder.h"
#include "platform/platform_impl.h"

#define KV(x)    ATTN_KV_BIT(ATTN_KV_##x)
#define DT(x)    ATTN_DTYPE_BIT(ATTN_DTYPE_##x)
#define KV_PLAIN (KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16))
#define KV_FP8   (KV(FP8) | KV(FP8_E4M3))

static const int attn__blocks_16[] = {16};
static const int attn__blocks_32_64[] = {32, 64};
static const int attn__blocks_64[] = {64};
static const int attn__blocks_128[] = {128};
static const int attn__heads_mla[] = {320, 512, 576};
static const int attn__heads_sparse[] = {512, 576};
static const int attn__heads_576[] = {576};

static bool attn__has(const attn_platform *p, attn_component c)
{
    return p && ((p->installed >> c) & 1u);
}

static bool attn__major_is(const attn_check_ctx *c, int major)
{
    return c->has_cc && c->cc_major == major;
}

/* Common MLA fields; each descriptor adds name, dtypes, kv, blocks, heads,
 * cc, its shape and its builder variant. */
#define ATTN__MLA_COMMON                                                                           \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .is_mla = true, .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),                                \
    .kv_stride_order = attn__stride_order_mla, .supports_pcp = true
/* ... with the dense latent cache and fp16/bf16 (all but FLASHMLA_SPARSE). */
#define ATTN__MLA_DENSE                                                                            \
    ATTN__MLA_COMMON, .dtypes = DT(FP16) | DT(BF16), .kv_cache_shape = attn__kv_shape_mla

static bool attn__on_xpu(const attn_check_ctx *c)
{
    return c->platform && c->platform->kind == ATTN_PLATFORM_XPU;
}

static const char *fa_mla_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (attn__on_xpu(c)) return NULL; /* XPU's FlashAttention always has MLA */
    if (attn__fa_version_supported(c->platform, 3) && attn__major_is(c, 9)) return NULL;
    return "FlashAttention MLA not supported on this device";
}

/* XPU runs its own FlashAttention MLA variant: head size 576 only, blocks
 * in multiples of 64, any device; CUDA: {320, 512, 576}, 16, SM 9.x. */
static bool fa_mla_head_size(const attn_check_ctx *c, int hs)
{
    if (attn__on_xpu(c)) return hs == 576;
    return hs == 320 || hs == 512 || hs == 576;
}

static bool fa_mla_block_size(const attn_check_ctx *c, int bs)
{
    return bs % (attn__on_xpu(c) ? 64 : 16) == 0;
}

static bool fa_mla_cc(const attn_check_ctx *c)
{
    return attn__on_xpu(c) || attn__major_is(c, 9);
}

static const attn_backend_desc attn__desc_flash_attn_mla = {
    ATTN__MLA_DENSE,
    .name = "FLASH_ATTN_MLA",
    .supports_dcp = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .builder = &attn__builder_mla_varlen,
    .platforms = "CUDA, XPU",
    .kv_dtypes = KV_PLAIN,
    ATTN__BLOCKS(attn__blocks_16),
    .supports_block_size = fa_mla_block_size,
    ATTN__HEADS(attn__heads_mla),
    .supports_head_size = fa_mla_head_size,
    ATTN__CC_MAJORS(9, 9),
    .supports_compute_capability = fa_mla_cc,
    .supports_batch_invariance = true,
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .can_return_lse_for_decode = true,
    .supports_combination = fa_mla_combination,
};

const char attn__flashmla_unavailable[] =
    "vllm._flashmla_C is not available, likely was not compiled due to insufficient nvcc version "
    "or a supported arch was not in the list of target arches to compile for.";

static const char *flashmla_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (!attn__has(c->platform, ATTN_COMPONENT_FLASHMLA)) return attn__flashmla_unavailable;
    if (c->cfg->use_sparse) {
        if (!attn__major_is(c, 9) && !attn__major_is(c, 10))
            return "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices.";
        return NULL;
    }
    if (!attn__major_is(c, 9)) return "FlashMLA Dense is only supported on Hopper devices.";
    return NULL;
}

static const attn_backend_desc attn__desc_flashmla = {
    ATTN__MLA_DENSE,
    .name = "FLASHMLA",
    .supports_dcp = true,
    .builder = &attn__builder_mla_flashmla,
    .platforms = "CUDA",
    .kv_dtypes = KV_PLAIN | KV_FP8,
    ATTN__BLOCKS(attn__blocks_64),
    ATTN__HEADS(attn__heads_mla),
    ATTN__CC_MAJORS(9, 10),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .can_return_lse_for_decode = true,
    .supports_combination = flashmla_combination,
};

static const attn_backend_desc attn__desc_flashinfer_mla = {
    ATTN__MLA_DENSE,
    .name = "FLASHINFER_MLA",
    .supports_non_causal = true,
    .supports_non_causal_dcp = true,
    .supports_dcp = true,
    .builder = &attn__builder_mla_uniform,
    .platforms = "CUDA",
    .kv_dtypes = KV_PLAIN | KV_FP8,
    ATTN__BLOCKS(attn__blocks_32_64),
    ATTN__HEADS(attn__heads_mla),
    ATTN__CC_MAJORS(10, 10),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .required_layout = ATTN_LAYOUT_HND,
    .import_requires = 1u << ATTN_COMPONENT_FLASHINFER,
};

static const char *tokenspeed_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (!attn__has(c->platform, ATTN_COMPONENT_TOKENSPEED_MLA))
        return "tokenspeed_mla package is not installed. Install it with: "
               "`uv pip install tokenspeed-mla`";
    return NULL;
}

static const attn_backend_desc attn__desc_tokenspeed_mla = {
    ATTN__MLA_DENSE,
    .name = "TOKENSPEED_MLA",
    .supports_non_causal = true,
    .supports_non_causal_dcp = true,
    .supports_dcp = true,
    .builder = &attn__builder_mla_uniform,
    .platforms = "CUDA",
    .kv_dtypes = KV_FP8,
    ATTN__BLOCKS(attn__blocks_32_64),
    ATTN__HEADS(attn__heads_mla),
    ATTN__CC_MAJORS(10, 10),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .required_layout = ATTN_LAYOUT_HND,
    .supports_combination = tokenspeed_combination,
};

static const attn_backend_desc attn__desc_cutlass_mla = {
    ATTN__MLA_DENSE,
    .name = "CUTLASS_MLA",
    .supports_dcp = true,
    .builder = &attn__builder_mla_single,
    .platforms = "CUDA",
    .kv_dtypes = KV_PLAIN | KV_FP8,
    ATTN__BLOCKS(attn__blocks_128),
    ATTN__HEADS(attn__heads_mla),
    ATTN__CC_MAJORS(10, 10),
    .cg_support = ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE,
    .can_return_lse_for_decode = true,
};

static const attn_backend_desc attn__desc_triton_mla = {
    ATTN__MLA_DENSE,
    .name = "TRITON_MLA",
    .supports_non_causal = true,
    .supports_dcp = true,
    .builder = &attn__builder_mla,
    .platforms = "CUDA, ROCm, XPU",
    .kv_dtypes = KV_PLAIN | KV_FP8,
    ATTN__BLOCKS(attn__blocks_16),
    .supports_batch_invariance = true,
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .can_return_lse_for_decode = true,
};

/* Head 512 is GLM5Next's NoPE layout, served on SM90 only from a bf16 or
 * fp8_ds_mla cache; nvfp4_ds_mla needs SM100. (vLLM's extra rope-free model
 * check needs a model config, which selection here never has.) */
static const char *flashmla_sparse_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    attn_kv_dtype kv = c->cfg->kv_cache_dtype;
    if (c->cfg->head_size == 512) {
        bool nope_kv = kv == ATTN_KV_NONE || kv == ATTN_KV_AUTO || kv == ATTN_KV_BFLOAT16 ||
                       kv == ATTN_KV_FLOAT16 || kv == ATTN_KV_FP8_DS_MLA;
        if (!nope_kv || !attn__major_is(c, 9)) {
            snprintf(buf, size,
                     "FLASHMLA_SPARSE supports head_size 512 only with bf16 or fp8_ds_mla "
                     "kv-cache on SM90 (NoPE), got kv_cache_dtype=%s, "
                     "capability=DeviceCapability(major=%d, minor=%d)",
                     attn_kv_dtype_name(kv), c->cc_major, c->cc_minor);
            return buf;
        }
    }
    if (kv == ATTN_KV_NVFP4_DS_MLA && !attn__major_is(c, 10))
        return "FLASHMLA_SPARSE only supports the nvfp4_ds_mla kv-cache dtype on SM100 "
               "(Blackwell)";
    return NULL;
}

static const attn_backend_desc attn__desc_flashmla_sparse = {
    ATTN__MLA_COMMON,
    .name = "FLASHMLA_SPARSE",
    .supports_dcp = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .builder = &attn__builder_mla_sparse,
    .platforms = "CUDA",
    .dtypes = DT(BF16),
    .kv_dtypes = KV(AUTO) | KV(BFLOAT16) | KV(FP8_DS_MLA) | KV(FP8) | KV(NVFP4_DS_MLA),
    .supports_combination = flashmla_sparse_combination,
    ATTN__BLOCKS(attn__blocks_64),
    ATTN__HEADS(attn__heads_sparse),
    ATTN__CC_MAJORS(9, 10),
    .is_sparse = true,
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .kv_cache_shape = attn__kv_shape_flashmla_sparse,
};

/* The SM10 sparse kernel has no fp8_ds_mla path (the model-shape checks
 * need a model config, which selection here never has). */
static const char *fi_mla_sparse_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (c->cfg->kv_cache_dtype == ATTN_KV_FP8_DS_MLA)
        return "FLASHINFER_MLA_SPARSE SM10 does not support fp8_ds_mla kv-cache dtype";
    return NULL;
}

static const attn_backend_desc attn__desc_flashinfer_mla_sparse = {
    ATTN__MLA_DENSE,
    .supports_combination = fi_mla_sparse_combination,
    .name = "FLASHINFER_MLA_SPARSE",
    .supports_dcp = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .builder = &attn__builder_mla_sparse,
    .platforms = "CUDA",
    .kv_dtypes = KV_PLAIN | KV_FP8,
    ATTN__BLOCKS(attn__blocks_32_64),
    ATTN__HEADS(attn__heads_sparse),
    ATTN__CC_MAJORS(10, 10),
    .is_sparse = true,
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .required_layout = ATTN_LAYOUT_HND,
};

static const attn_backend_desc attn__desc_xpu_mla_sparse = {
    ATTN__MLA_DENSE,
    .name = "XPU_MLA_SPARSE",
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .builder = &attn__builder_mla_sparse,
    .platforms = "XPU",
    .kv_dtypes = KV_PLAIN,
    .heads = {.sizes = attn__heads_576, .n_sizes = ATTN__COUNT(attn__heads_576)},
    .is_sparse = true,
    .cg_support = ATTN_CG_NEVER,
};

/* AMX_MLA: vLLM's CPU MLA with AMX tiles, an MLACommonBackend: bf16, head
 * 576, blocks in multiples of 32. Selection checks no capability, so an
 * explicit request validates on any machine. */
static const int attn__blocks_32[] = {32};

static const attn_backend_desc attn__desc_amx_mla = {
    ATTN__MLA_COMMON,
    .name = "AMX_MLA",
    .platforms = "CPU (AMX)",
    .dtypes = DT(BF16),
    .kv_dtypes = KV_PLAIN,
    ATTN__BLOCKS(attn__blocks_32),
    ATTN__HEADS(attn__heads_576),
    .cg_support = ATTN_CG_NEVER,
    .kv_cache_shape = attn__kv_shape_mla,
    .builder = &attn__builder_mla,
};

ATTN__BUILTIN(attn__builtin_amx_mla, attn__desc_amx_mla)
ATTN__BUILTIN(attn__builtin_flash_attn_mla, attn__desc_flash_attn_mla)
ATTN__BUILTIN(attn__builtin_flashmla, attn__desc_flashmla)
ATTN__BUILTIN(attn__builtin_flashinfer_mla, attn__desc_flashinfer_mla)
ATTN__BUILTIN(attn__builtin_tokenspeed_mla, attn__desc_tokenspeed_mla)
ATTN__BUILTIN(attn__builtin_cutlass_mla, attn__desc_cutlass_mla)
ATTN__BUILTIN(attn__builtin_triton_mla, attn__desc_triton_mla)
ATTN__BUILTIN(attn__builtin_flashmla_sparse, attn__desc_flashmla_sparse)
ATTN__BUILTIN(attn__builtin_flashinfer_mla_sparse, attn__desc_flashinfer_mla_sparse)
ATTN__BUILTIN(attn__builtin_xpu_mla_sparse, attn__desc_xpu_mla_sparse)
