/* Descriptors of the ROCm family (reference §5a, §5b): ROCM_ATTN, its
 * subclass ROCM_AITER_UNIFIED_ATTN, ROCM_AITER_FA (MI300-class only: its
 * capability check looks at the gfx arch, not the capability value), and
 * the AITER MLA backends. Explicitly selecting an AITER backend works
 * without aiter installed: their modules import fine (reference §6b). */
#include <string.h>

#include "backends/catalog/catalog.h"
#include "metadata/builders.h"
#include "metadata/mla_builder.h"
#include "platform/platform_impl.h"

#define KV(x)    ATTN_KV_BIT(ATTN_KV_##x)
#define DT(x)    ATTN_DTYPE_BIT(ATTN_DTYPE_##x)
#define TY(x)    ATTN_TYPE_BIT(ATTN_TYPE_##x)
#define KV_PLAIN (KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16))
#define KV_ROCM  (KV_PLAIN | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2))
#define KVL(x)   ATTN_KVL_BIT(ATTN_KVL_##x)
/* K and V are views of the content axis; the layer axis stays outermost. */
#define KVL_ROCM (KVL(LBHNC) | KVL(LHBNC))

static const int attn__blocks_16[] = {16};
static const int attn__blocks_1[] = {1};
static const int attn__blocks_16_32[] = {16, 32};
static const int attn__blocks_1_64[] = {1, 64};
static const int attn__heads_rocm[] = {32, 64, 80, 96, 128, 160, 192, 224, 256};
static const int attn__heads_aiter_fa[] = {64, 128, 256};

static const attn_backend_desc attn__desc_rocm_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "ROCM_ATTN",
    .platforms = "ROCm",
    .dtypes = DT(FP16) | DT(BF16) | DT(FP32),
    .kv_dtypes = KV_ROCM,
    ATTN__BLOCKS(attn__blocks_16),
    ATTN__HEADS(attn__heads_rocm),
    .supports_non_causal = true,
    .supports_sliding_window = true,
    .rejects_kv_connector = true, /* its (2, num_blocks, ...) layout */
    .attn_types = TY(DECODER) | TY(ENCODER) | TY(ENCODER_ONLY),
    .cg_support = ATTN_CG_ALWAYS,
    .kv_cache_shape = attn__kv_shape_split,
    .builder = &attn__builder_rocm,
    .kv_cache_layouts = KVL_ROCM, /* the native HIP kernels: H outermost */
};

/* A KV connector (MoRI and the like) assumes contiguous blocks. */
static uint32_t aiter_unified_layouts(const attn_check_ctx *c)
{
    return c->cfg && c->cfg->use_kv_connector ? KVL(LBHNC) : KVL_ROCM;
}

static const attn_backend_desc attn__desc_rocm_aiter_unified_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "ROCM_AITER_UNIFIED_ATTN",
    .platforms = "ROCm",
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV_ROCM,
    ATTN__BLOCKS(attn__blocks_16),
    .preferred_block_size = 64,
    .heads = {.min = 32},
    .supports_sink = true,
    .supports_sliding_window = true,
    .attn_types = TY(DECODER) | TY(ENCODER) | TY(ENCODER_ONLY) | TY(ENCODER_DECODER),
    .cg_support = ATTN_CG_ALWAYS,
    .kv_cache_shape = attn__kv_shape_split,
    .builder = &attn__builder_rocm,
    .kv_cache_layouts = KVL_ROCM,
    .kv_cache_layouts_fn = aiter_unified_layouts,
};

/* ROCM_SEGMENTED_ATTN: ROCM_ATTN's kernels for RDNA; none of the simulated
 * gfx arches (gfx90a/gfx942/gfx950) is RDNA, so its check refuses them. */
static const char *segmented_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    const char *arch = c->platform ? c->platform->gfx_arch : "";
    bool rdna = !strncmp(arch, "gfx11", 5) || !strncmp(arch, "gfx12", 5);
    if (!rdna) return "ROCM_SEGMENTED_ATTN requires AMD RDNA GPUs on ROCm";
    attn_kv_dtype kv = c->cfg->kv_cache_dtype;
    if ((kv == ATTN_KV_FP8 || kv == ATTN_KV_FP8_E4M3) && strncmp(arch, "gfx12", 5))
        return "FP8 segmented attention requires gfx12";
    return NULL;
}

static const int attn__heads_segmented[] = {64, 128, 256};

static const attn_backend_desc attn__desc_rocm_segmented_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "ROCM_SEGMENTED_ATTN",
    .platforms = "ROCm (RDNA)",
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV_PLAIN | KV(FP8) | KV(FP8_E4M3),
    ATTN__BLOCKS(attn__blocks_16),
    ATTN__HEADS(attn__heads_segmented),
    .supports_non_causal = true,
    .supports_sliding_window = true,
    .supports_sink = true,
    .rejects_kv_connector = true, /* ROCM_ATTN's layout */
    .attn_types = TY(DECODER),
    .cg_support = ATTN_CG_ALWAYS,
    .supports_combination = segmented_combination,
    .kv_cache_shape = attn__kv_shape_split,
    .builder = &attn__builder_rocm,
    .kv_cache_layouts = KVL_ROCM, /* ROCM_ATTN's */
};

/* MI300 class, whatever capability was parsed. */
static bool on_mi3xx(const attn_check_ctx *c)
{
    return attn__platform_mi300_class(c->platform);
}

static const attn_backend_desc attn__desc_rocm_aiter_fa = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "ROCM_AITER_FA",
    .display_name = "FLASH_ATTN",
    .platforms = "ROCm (MI300 class)",
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV_ROCM,
    ATTN__BLOCKS(attn__blocks_16_32),
    ATTN__HEADS(attn__heads_aiter_fa),
    .supports_sink = true,
    .supports_non_causal = true,
    .supports_sliding_window = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .attn_types = TY(DECODER),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .supports_compute_capability = on_mi3xx,
    .kv_cache_shape = attn__kv_shape_split,
    .builder = &attn__builder_rocm,
    .kv_cache_layouts = KVL_ROCM,
};

/* AITER MLA's non-causal decode: aiter.mla.mla_decode_fwd(causal=) and the
 * ASM kernels, which only gfx950 ships. */
static bool aiter_mla_non_causal(const attn_check_ctx *c)
{
    return attn__rocm_aiter_found(c->platform) &&
           !strcmp(c->platform->gfx_arch, ATTN__MI300_ARCH_B);
}

/* AITER's fp16 MLA decode has no non-causal kernel: a non-causal fp16 query
 * over an fp16 cache is refused (non-causal itself: aiter_mla_non_causal). */
static const char *aiter_mla_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    attn_kv_dtype kv = c->cfg->kv_cache_dtype;
    if (c->cfg->use_non_causal && c->cfg->dtype == ATTN_DTYPE_FP16 &&
        (kv == ATTN_KV_NONE || kv == ATTN_KV_AUTO || kv == ATTN_KV_FLOAT16))
        return "non-causal fp16 MLA decode not supported";
    return NULL;
}

/* Shared by ROCM_AITER_MLA and its subclass ROCM_AITER_TRITON_MLA (MLA
 * implementations: PCP works). */
#define ATTN__AITER_MLA_RULES                                                                      \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .platforms = "ROCm", .dtypes = DT(FP16) | DT(BF16), .kv_dtypes = KV_ROCM,                      \
    ATTN__BLOCKS(attn__blocks_1), .is_mla = true, .attn_types = TY(DECODER),                       \
    .cg_support = ATTN_CG_UNIFORM_BATCH, .kv_cache_shape = attn__kv_shape_mla,                     \
    .kv_stride_order = attn__stride_order_mla, .builder = &attn__builder_mla,                      \
    .supports_combination = aiter_mla_combination, .supports_pcp = true,                           \
    .supports_non_causal = true, .supports_non_causal_fn = aiter_mla_non_causal,                   \
    .supports_non_causal_dcp = true

static const attn_backend_desc attn__desc_rocm_aiter_mla = {
    ATTN__AITER_MLA_RULES,
    .name = "ROCM_AITER_MLA",
    .supports_dcp = true,
};

static const attn_backend_desc attn__desc_rocm_aiter_triton_mla = {
    ATTN__AITER_MLA_RULES,
    .name = "ROCM_AITER_TRITON_MLA",
    .supports_dcp = true,
    .display_name = "AITER_TRITON_MLA",
};

static const attn_backend_desc attn__desc_rocm_aiter_mla_sparse = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "ROCM_AITER_MLA_SPARSE",
    .platforms = "ROCm",
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV_PLAIN | KV(FP8) | KV(FP8_E4M3),
    ATTN__BLOCKS(attn__blocks_1_64),
    .is_mla = true,
    .is_sparse = true,
    .supports_sink = true, /* refined: MI300 class only */
    .supports_sink_fn = on_mi3xx,
    .supports_pcp = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .attn_types = TY(DECODER),
    .cg_support = ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE,
    .kv_cache_shape = attn__kv_shape_mla,
    .kv_stride_order = attn__stride_order_mla,
    .builder = &attn__builder_mla_sparse,
    .kv_cache_layouts = KVL(LBNHC) | KVL(LBHNC) | KVL(BLHNC),
};

ATTN__BUILTIN(attn__builtin_rocm_attn, attn__desc_rocm_attn)
ATTN__BUILTIN(attn__builtin_rocm_segmented_attn, attn__desc_rocm_segmented_attn)
ATTN__BUILTIN(attn__builtin_rocm_aiter_unified_attn, attn__desc_rocm_aiter_unified_attn)
ATTN__BUILTIN(attn__builtin_rocm_aiter_fa, attn__desc_rocm_aiter_fa)
ATTN__BUILTIN(attn__builtin_rocm_aiter_mla, attn__desc_rocm_aiter_mla)
ATTN__BUILTIN(attn__builtin_rocm_aiter_triton_mla, attn__desc_rocm_aiter_triton_mla)
ATTN__BUILTIN(attn__builtin_rocm_aiter_mla_sparse, attn__desc_rocm_aiter_mla_sparse)
