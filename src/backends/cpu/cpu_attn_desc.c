/* CPU_ATTN descriptor: what the backend supports and its KV cache shape. */
#include <string.h>

#include "backends/cpu/cpu_attn.h"
#include "backends/reference/reference.h"
#include "util/error.h"

/* (2, num_blocks, num_kv_heads, block_size, head_size), memory in that
 * order (HND): one block of one head is a contiguous [block_size][head]
 * tile, which is what the chunk kernels stream. */
static attn_status cpu_kv_shape(int nb, int bs, int kvh, int hs, attn_kv_dtype kv,
                                attn_kv_shape *out)
{
    (void)kv;
    ATTN__CHECK_NULL(out);
    if (nb <= 0 || bs <= 0 || kvh <= 0 || hs <= 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV cache shape needs positive sizes (num_blocks=%d, block_size=%d, "
                          "num_kv_heads=%d, head_size=%d)",
                          nb, bs, kvh, hs);
    static const char *const names[] = {"2", "num_blocks", "num_kv_heads", "block_size",
                                        "head_size"};
    memset(out, 0, sizeof *out);
    out->ndim = 5;
    int64_t dims[5] = {2, nb, kvh, bs, hs};
    for (int i = 0; i < 5; i++) {
        out->dims[i] = dims[i];
        out->dim_names[i] = names[i];
    }
    return ATTN_OK;
}

/* On vLLM's platforms CPU_ATTN answers with vLLM's CPUAttentionBackend:
 * kernel blocks in multiples of 32, no sinks, no per-head quant scales.
 * libattn's own CPU kernels keep their wider abilities elsewhere (the CPU
 * platform, where libattn differs from vLLM by design: docs/vllm-parity.md). */
static bool cpu_on_vllm_platform(const attn_check_ctx *c)
{
    attn_platform_kind k = attn_platform_get_kind(c->platform);
    return k == ATTN_PLATFORM_CUDA || k == ATTN_PLATFORM_ROCM || k == ATTN_PLATFORM_XPU;
}

static bool cpu_block_size(const attn_check_ctx *c, int bs)
{
    return bs % (cpu_on_vllm_platform(c) ? 32 : 16) == 0;
}

static bool cpu_own_abilities(const attn_check_ctx *c)
{
    return !cpu_on_vllm_platform(c);
}

static const int cpu_block_sizes[] = {16};
static const int cpu_head_sizes[] = {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512};

const attn_backend_desc attn__desc_cpu_attn = {
    ATTN__CPU_DESC_COMMON,
    .name = "CPU_ATTN",
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO) | ATTN_KV_BIT(ATTN_KV_FP8) |
                 ATTN_KV_BIT(ATTN_KV_FP8_E4M3) | ATTN_KV_BIT(ATTN_KV_FP8_E5M2),
    .block_sizes = cpu_block_sizes,
    .n_block_sizes = 1,
    .heads = {.sizes = cpu_head_sizes,
              .n_sizes = (int)(sizeof cpu_head_sizes / sizeof cpu_head_sizes[0])},
    .supports_batch_invariance = false,
    .supports_sliding_window = true,
    .supports_block_size = cpu_block_size,
    .supports_sink_fn = cpu_own_abilities,
    .supports_per_head_quant_scales_fn = cpu_own_abilities,
    .supports_dcp_fn = cpu_own_abilities, /* vLLM's CPU_ATTN impl has no DCP */
    /* vLLM's module reaches vllm_flash_attn through its imports */
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .required_layout = ATTN_LAYOUT_HND,
    .kv_cache_layouts = ATTN_KVL_BIT(ATTN_KVL_LBHNC), /* vLLM's CPU_ATTN: head-major blocks */
    .kv_cache_shape = cpu_kv_shape,
    .kv_stride_order = NULL,
    .builder = &attn__builder_cpu,
};
