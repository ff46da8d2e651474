/* Descriptors of vLLM 0.32.0's model-driven sparse backends (their classes
 * live under vllm/models/): the DeepSeek V4 and V4.1 sparse MLA backends and
 * MiniMax M3's sparse (non-MLA) attention. Every one is bf16, decoder only,
 * with a fixed kernel block; the machine-dependent parts (V4.1's block on
 * SM 9.x, FlashInfer's per-capability KV rules, FlashMLA's availability) are
 * hooks and combination checks with vLLM's texts. libattn models their KV
 * caches as its sparse-MLA / split layouts (the engine emulates them). */
#include "backends/catalog/catalog.h"
#include "metadata/builders.h"
#include "metadata/mla_builder.h"
#include "platform/platform_impl.h"

#define KV(x) ATTN_KV_BIT(ATTN_KV_##x)
#define DT(x) ATTN_DTYPE_BIT(ATTN_DTYPE_##x)

static const int attn__heads_512[] = {512};
static const int attn__heads_128[] = {128};
static const int attn__blocks_256[] = {256};
static const int attn__blocks_128[] = {128};
static const int attn__blocks_64[] = {64};

static bool attn__major(const attn_check_ctx *c, int major)
{
    return c->has_cc && c->cc_major == major;
}

static bool attn__installed(const attn_check_ctx *c, attn_component k)
{
    return c->platform && ((c->platform->installed >> k) & 1u);
}

/* DeepseekV4SparseMLABackend (V4 and V4.1): bf16, head 512, sparse MLA with
 * sinks. */
#define ATTN__DSV4_COMMON                                                                          \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .dtypes = DT(BF16), ATTN__HEADS(attn__heads_512), .is_mla = true, .is_sparse = true,           \
    .supports_sink = true, .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),                         \
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA, .cg_support = ATTN_CG_UNIFORM_BATCH,           \
    .kv_cache_shape = attn__kv_shape_flashmla_sparse, .kv_stride_order = attn__stride_order_mla,   \
    .builder = &attn__builder_mla_sparse

static const attn_backend_desc attn__desc_flashmla_sparse_dsv4 = {
    ATTN__DSV4_COMMON,
    .name = "FLASHMLA_SPARSE_DSV4",
    .platforms = "CUDA (DeepSeek V4)",
    .kv_dtypes = KV(AUTO) | KV(FP8_DS_MLA) | KV(FP8),
    ATTN__BLOCKS(attn__blocks_256),
    ATTN__CC_MAJORS(9, 10),
};

static const attn_backend_desc attn__desc_rocm_flashmla_sparse_dsv4 = {
    ATTN__DSV4_COMMON,
    .name = "ROCM_FLASHMLA_SPARSE_DSV4",
    .platforms = "ROCm (DeepSeek V4)",
    .kv_dtypes = KV(AUTO) | KV(FP8_DS_MLA) | KV(FP8),
    ATTN__BLOCKS(attn__blocks_256),
    ATTN__CC_MAJORS(9, 10),
};

static bool fi_dsv4_cc(const attn_check_ctx *c)
{
    return attn__major(c, 10) || attn__major(c, 12);
}

/* FlashInfer's DSV4 decode: the plain per-tensor FP8 cache on SM 10.x, the
 * fp8 caches and FlashInfer's sparse MLA decode API on SM 12.x. */
static const char *fi_dsv4_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    attn_kv_dtype kv = c->cfg->kv_cache_dtype;
    if (attn__major(c, 10)) {
        if (kv == ATTN_KV_FP8_DS_MLA)
            return "FLASHINFER_MLA_SPARSE_DSV4 SM10x uses the plain per-tensor FP8 KV layout, not "
                   "fp8_ds_mla";
        if (!(kv == ATTN_KV_NONE || kv == ATTN_KV_AUTO || kv == ATTN_KV_BFLOAT16 ||
              kv == ATTN_KV_FP8 || kv == ATTN_KV_FP8_E4M3))
            return "kv_cache_dtype not supported";
        return NULL;
    }
    if (attn__major(c, 12)) {
        if (!(kv == ATTN_KV_FP8 || kv == ATTN_KV_FP8_E4M3 || kv == ATTN_KV_FP8_DS_MLA))
            return "kv_cache_dtype not supported";
        if (!attn__installed(c, ATTN_COMPONENT_FLASHINFER))
            return "FLASHINFER_MLA_SPARSE_DSV4 SM120 requires FlashInfer's sparse MLA decode API";
        return NULL;
    }
    return "FLASHINFER_MLA_SPARSE_DSV4 requires SM10x or SM12x";
}

#define ATTN__FI_DSV4_RULES                                                                        \
    ATTN__DSV4_COMMON,                                                                             \
        .platforms = "CUDA (DeepSeek V4)",                                                         \
        .kv_dtypes = KV(AUTO) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3) | KV(FP8_DS_MLA),            \
        ATTN__CC_MAJORS(10, 12), .supports_compute_capability = fi_dsv4_cc,                        \
        .supports_combination = fi_dsv4_combination

static const attn_backend_desc attn__desc_flashinfer_mla_sparse_dsv4 = {
    ATTN__FI_DSV4_RULES,
    .name = "FLASHINFER_MLA_SPARSE_DSV4",
    ATTN__BLOCKS(attn__blocks_256),
};

/* V4.1: a 64-token kernel block on SM 9.x, 128 elsewhere. */
static bool dsv41_block(const attn_check_ctx *c, int bs)
{
    return bs % (attn__major(c, 9) ? 64 : 128) == 0;
}

static const attn_backend_desc attn__desc_flashmla_sparse_dsv41 = {
    ATTN__DSV4_COMMON,
    .name = "FLASHMLA_SPARSE_DSV41",
    .platforms = "CUDA (DeepSeek V4.1)",
    .kv_dtypes = KV(AUTO) | KV(FP8_DS_MLA) | KV(FP8),
    ATTN__BLOCKS(attn__blocks_64),
    .supports_block_size = dsv41_block,
    ATTN__CC_MAJORS(9, 10),
};

static const attn_backend_desc attn__desc_flashinfer_mla_sparse_dsv41 = {
    ATTN__FI_DSV4_RULES,
    .name = "FLASHINFER_MLA_SPARSE_DSV41",
    ATTN__BLOCKS(attn__blocks_128),
};

/* is_flashmla_mega_attn_supported: FlashMLA's sparse kernels, on SM 10.x
 * (the wheel's _flashmla_C carries the mega-attention ops). */
static const char *mega_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (!attn__installed(c, ATTN_COMPONENT_FLASHMLA)) return attn__flashmla_unavailable;
    if (!attn__major(c, 9) && !attn__major(c, 10))
        return "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices.";
    if (!attn__major(c, 10)) return "FlashMLA mega attention requires sm_10x GPUs.";
    return NULL;
}

static const attn_backend_desc attn__desc_flashmla_mega_attn_dsv41 = {
    ATTN__DSV4_COMMON,
    .name = "FLASHMLA_MEGA_ATTN_DSV41",
    .platforms = "CUDA SM 10.x (DeepSeek V4.1)",
    .kv_dtypes = KV(AUTO) | KV(FP8_DS_MLA) | KV(FP8) | KV(NVFP4_DS_MLA),
    ATTN__BLOCKS(attn__blocks_128),
    ATTN__CC_MAJORS(10, 10),
    .supports_combination = mega_combination,
};

/* MiniMax M3's sparse attention: a standard (not MLA) layer with sparse
 * block selection; fp16/bf16, head 128, 128-token blocks, no "auto" cache. */
static const attn_backend_desc attn__desc_minimax_m3_sparse = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "MINIMAX_M3_SPARSE",
    .platforms = "CUDA, ROCm (MiniMax M3)",
    .dtypes = DT(BF16) | DT(FP16),
    .kv_dtypes = KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2),
    ATTN__HEADS(attn__heads_128),
    ATTN__BLOCKS(attn__blocks_128),
    .is_sparse = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .kv_cache_shape = attn__kv_shape_split,
    .builder = &attn__builder_triton,
};

ATTN__BUILTIN(attn__builtin_flashmla_sparse_dsv4, attn__desc_flashmla_sparse_dsv4)
ATTN__BUILTIN(attn__builtin_flashinfer_mla_sparse_dsv4, attn__desc_flashinfer_mla_sparse_dsv4)
ATTN__BUILTIN(attn__builtin_rocm_flashmla_sparse_dsv4, attn__desc_rocm_flashmla_sparse_dsv4)
ATTN__BUILTIN(attn__builtin_flashmla_sparse_dsv41, attn__desc_flashmla_sparse_dsv41)
ATTN__BUILTIN(attn__builtin_flashinfer_mla_sparse_dsv41, attn__desc_flashinfer_mla_sparse_dsv41)
ATTN__BUILTIN(attn__builtin_flashmla_mega_attn_dsv41, attn__desc_flashmla_mega_attn_dsv41)
ATTN__BUILTIN(attn__builtin_minimax_m3_sparse, attn__desc_minimax_m3_sparse)
