/* Sparse MLA backends new in vLLM 0.32.0: FLASH_ATTN_MLA_SPARSE (Hopper,
 * FA3), FLASHINFER_MLA_SPARSE_SM90 and FLASHINFER_MLA_SPARSE_SM120. Field by
 * field from their backend classes; the combination checks carry vLLM's
 * texts. The model-dependent checks (index_topk, kv_lora_rank) need a model
 * config, which a bare selection does not have, so they never fire here, as
 * in vLLM without a model. */
#include <string.h>

#include "backends/catalog/catalog.h"
#include "metadata/mla_builder.h"
#include "platform/platform_impl.h"

#define KV(x) ATTN_KV_BIT(ATTN_KV_##x)
#define DT(x) ATTN_DTYPE_BIT(ATTN_DTYPE_##x)

static const int attn__sp_blocks_64[] = {64};
static const int attn__sp_heads[] = {512, 576};

#define ATTN__SPARSE_COMMON                                                                        \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .is_mla = true, .is_sparse = true, .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),             \
    .kv_stride_order = attn__stride_order_mla, .kv_cache_shape = attn__kv_shape_mla,               \
    .builder = &attn__builder_mla_sparse, .platforms = "CUDA", ATTN__BLOCKS(attn__sp_blocks_64),   \
    .cg_support = ATTN_CG_UNIFORM_BATCH, .supports_pcp = true

static bool attn__sp_major(const attn_check_ctx *c, int major)
{
    return c->has_cc && c->cc_major == major;
}

static bool attn__sp_cc9(const attn_check_ctx *c)
{
    return attn__sp_major(c, 9);
}

static bool attn__sp_cc12(const attn_check_ctx *c)
{
    return attn__sp_major(c, 12);
}

static bool attn__sp_has(const attn_check_ctx *c, attn_component k)
{
    return c->platform && ((c->platform->installed >> k) & 1u);
}

static bool attn__sp_plain_kv(attn_kv_dtype kv)
{
    return kv == ATTN_KV_NONE || kv == ATTN_KV_AUTO || kv == ATTN_KV_FLOAT16 ||
           kv == ATTN_KV_BFLOAT16;
}

static const char *fa_sparse_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (!attn__sp_plain_kv(c->cfg->kv_cache_dtype))
        return "FlashAttention MLA Sparse currently supports only FP16/BF16 KV cache";
    if (!(attn__fa_version_supported(c->platform, 3) && attn__sp_major(c, 9)))
        return "FlashAttention MLA not supported on this device";
    return NULL;
}

static const attn_backend_desc attn__desc_flash_attn_mla_sparse = {
    ATTN__SPARSE_COMMON,
    .name = "FLASH_ATTN_MLA_SPARSE",
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_ALWAYS, /* unguarded: ROCm fails it too */
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16),
    .supports_compute_capability = attn__sp_cc9,
    .supports_combination = fa_sparse_combination,
};

/* The FlashInfer feature vLLM detects (SM90 NoPE MLA, FlashInfer >= 0.6.18)
 * is in the FlashInfer release vLLM 0.32.0 pins, so it holds whenever
 * flashinfer is installed. */
static const char *fi_sm90_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (!attn__sp_has(c, ATTN_COMPONENT_FLASHINFER))
        return "FLASHINFER_MLA_SPARSE_SM90 requires FlashInfer with SM90 MLA support "
               "(ckv_scale_arr in BatchMLAPagedAttentionWrapper.run, FlashInfer >= 0.6.18)";
    if (!c->cfg->use_sparse) return "FLASHINFER_MLA_SPARSE_SM90 requires sparse MLA";
    return NULL;
}

static const attn_backend_desc attn__desc_flashinfer_mla_sparse_sm90 = {
    ATTN__SPARSE_COMMON,
    .name = "FLASHINFER_MLA_SPARSE_SM90",
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .dtypes = DT(BF16),
    .kv_dtypes = KV(AUTO) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3),
    ATTN__HEADS(attn__sp_heads),
    .supports_compute_capability = attn__sp_cc9,
    .supports_combination = fi_sm90_combination,
};

static const char *fi_sm120_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    if (!attn__sp_has(c, ATTN_COMPONENT_FLASHINFER))
        return "FLASHINFER_MLA_SPARSE_SM120 requires FlashInfer's sparse MLA decode API";
    if (c->cfg->dtype != ATTN_DTYPE_BF16) return "dtype not supported";
    attn_kv_dtype kv = c->cfg->kv_cache_dtype;
    if (!(kv == ATTN_KV_NONE || kv == ATTN_KV_AUTO || kv == ATTN_KV_FP8 || kv == ATTN_KV_FP8_E4M3 ||
          kv == ATTN_KV_FP8_DS_MLA))
        return "kv_cache_dtype not supported";
    return NULL;
}

static const attn_backend_desc attn__desc_flashinfer_mla_sparse_sm120 = {
    ATTN__SPARSE_COMMON,
    .name = "FLASHINFER_MLA_SPARSE_SM120",
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .dtypes = DT(BF16),
    .kv_dtypes = KV(AUTO) | KV(FP8) | KV(FP8_E4M3) | KV(FP8_DS_MLA),
    ATTN__HEADS(attn__sp_heads),
    .supports_compute_capability = attn__sp_cc12,
    .supports_combination = fi_sm120_combination,
};

ATTN__BUILTIN(attn__builtin_flash_attn_mla_sparse, attn__desc_flash_attn_mla_sparse)
ATTN__BUILTIN(attn__builtin_flashinfer_mla_sparse_sm90, attn__desc_flashinfer_mla_sparse_sm90)
ATTN__BUILTIN(attn__builtin_flashinfer_mla_sparse_sm120, attn__desc_flashinfer_mla_sparse_sm120)
