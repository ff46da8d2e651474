/* Descriptors of vLLM 0.32.0's single-device paged kernels: HPC_ATTN
 * (Tencent hpc-ops, Hopper SM 9.0 only, block 64, head 128) and B12X
 * (consumer Blackwell SM 12.0/12.1, bf16 queries, pages of 64 or 128). Both
 * need a package of their own; without it their check says so in vLLM's
 * words. */
#include "backends/catalog/catalog.h"
#include "metadata/builders.h"
#include "platform/platform_impl.h"

#define KV(x) ATTN_KV_BIT(ATTN_KV_##x)
#define DT(x) ATTN_DTYPE_BIT(ATTN_DTYPE_##x)

static const int attn__heads_128[] = {128};
static const int attn__blocks_64[] = {64};
static const int attn__heads_b12x[] = {64, 128, 192, 256};
static const int attn__blocks_b12x[] = {64, 128};

static const attn_backend_desc attn__desc_hpc_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "HPC_ATTN",
    .platforms = "CUDA SM 9.0",
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV(AUTO) | KV(BFLOAT16) | KV(FP8_E4M3),
    ATTN__HEADS(attn__heads_128),
    ATTN__BLOCKS(attn__blocks_64),
    .cc_min = {9, 0},
    .cc_max = {9, 0},
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .kv_cache_shape = attn__kv_shape_flash,
    .kv_stride_order = attn__stride_order_flash,
    .builder = &attn__builder_flash_attn,
    .kv_cache_layouts = ATTN_KVL_BIT(ATTN_KVL_LBNHC),
};

/* Pages of exactly 64 or 128 tokens (not multiples). */
static bool b12x_block(const attn_check_ctx *c, int bs)
{
    (void)c;
    return bs == 64 || bs == 128;
}

static const char *b12x_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    (void)buf, (void)size;
    attn_kv_dtype kv = c->cfg->kv_cache_dtype;
    if (c->cfg->dtype != ATTN_DTYPE_BF16) return "b12x currently requires bfloat16 queries";
    if (kv == ATTN_KV_FLOAT16) return "b12x does not support float16 KV cache";
    if (kv != ATTN_KV_NONE && attn_kv_dtype_is_quantized(kv) && kv != ATTN_KV_FP8 &&
        kv != ATTN_KV_FP8_E4M3)
        return "b12x currently supports only fp8/fp8_e4m3 quantized KV cache dtypes";
    /* the b12x package is not one of the components a machine can have */
    return "Install the b12x backend with `pip install vllm[b12x]`";
}

static const attn_backend_desc attn__desc_b12x = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "B12X",
    .platforms = "CUDA SM 12.0/12.1",
    .dtypes = DT(BF16),
    .kv_dtypes = KV(AUTO) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3),
    ATTN__HEADS(attn__heads_b12x),
    ATTN__BLOCKS(attn__blocks_b12x),
    .supports_block_size = b12x_block,
    .preferred_block_size = 128,
    .cc_min = {12, 0},
    .cc_max = {12, 1},
    .supports_sink = true,
    .supports_sliding_window = true,
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .supports_combination = b12x_combination,
    .kv_cache_shape = attn__kv_shape_flash,
    .kv_stride_order = attn__stride_order_flash,
    .builder = &attn__builder_flash_attn,
    .kv_cache_layouts = ATTN_KVL_BIT(ATTN_KVL_LBHNC) | ATTN_KVL_BIT(ATTN_KVL_BLHNC),
};

ATTN__BUILTIN(attn__builtin_hpc_attn, attn__desc_hpc_attn)
ATTN__BUILTIN(attn__builtin_b12x, attn__desc_b12x)
