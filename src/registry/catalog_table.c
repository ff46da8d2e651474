/* The catalog table: every registry name in declaration order with its
 * default locator and built-in object (catalog_table.h). On a real machine
 * a GPU backend's code lives in a module that this build does not ship, so
 * resolving it fails like a Python import does; on a simulated machine the
 * registry resolves the built-in descriptor instead, gated by the machine's
 * installed components. The kernels' objects are named here, in the
 * registry, which sits above them (cmake/layers.cmake). */
#include <stdio.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/mla/mla_internal.h"
#include "backends/reference/ref_mla.h"
#include "backends/reference/reference.h"
#include "platform/platform_impl.h"
#include "registry/catalog_table.h"

static const attn_backend *attn__builtin_cpu_attn(void)
{
    return &attn__backend_cpu_attn;
}

static const attn_backend *attn__builtin_cpu_mla(void)
{
    return &attn__backend_cpu_mla;
}

static const attn_backend *attn__builtin_reference(void)
{
    return &attn__backend_reference;
}

static const attn_backend *attn__builtin_cpu_mla_sparse(void)
{
    return &attn__backend_cpu_mla_sparse;
}

static const attn_backend *attn__builtin_reference_mla(void)
{
    return &attn__backend_reference_mla;
}

static const attn_backend *attn__builtin_reference_mla_sparse(void)
{
    return &attn__backend_reference_mla_sparse;
}

#define CUDA_MOD   "libattn_cuda.so:attn_backend_"
#define FI_MOD     "libattn_flashinfer.so:attn_backend_"
#define TRITON_MOD "libattn_triton.so:attn_backend_"
#define ROCM_MOD   "libattn_rocm.so:attn_backend_"

/* One catalog entry: name, default locator, built-in object, notes, then
 * optional designated fields (.rule_kind, .rule_priority: catalog.h). */
#define ATTN__E(n, loc, fn, note, ...)                                                             \
    {                                                                                              \
        .name = (n), .default_locator = (loc), .builtin = (fn), .notes = (note), __VA_ARGS__       \
    }

static const attn__catalog_entry attn__catalog[] = {
    ATTN__E("FLASH_ATTN", CUDA_MOD "flash_attn", attn__builtin_flash_attn,
            "KV fp8/fp8_e4m3 only with FA3 on 9.x (always on XPU); heads above 256 only with FA4; "
            "sinks and per-head scales need FA3/FA4; sink needs cc >= 9.0"),
    ATTN__E("FLASH_ATTN_DIFFKV", CUDA_MOD "flash_attn_diffkv", attn__builtin_flash_attn_diffkv,
            "rules of FLASH_ATTN; explicit only; K and V head sizes differ (head_size_v 128)"),
    ATTN__E("TRITON_ATTN", CUDA_MOD "triton_attn", attn__builtin_triton_attn, NULL),
    ATTN__E("TRITON_ATTN_DIFFKV", TRITON_MOD "triton_attn_diffkv", attn__builtin_triton_attn_diffkv,
            "rules of TRITON_ATTN; K and V head sizes differ (packed cache); decoder only"),
    ATTN__E("TRITON_FLASH_ATTN", TRITON_MOD "triton_flash_attn", attn__builtin_triton_flash_attn,
            "composite: TRITON_ATTN (multimodal prefix) + FLASH_ATTN v3/v4 (causal), SM 9.x, heads "
            "256/512"),
    ATTN__E("ROCM_ATTN", ROCM_MOD "rocm_attn", attn__builtin_rocm_attn, NULL),
    ATTN__E("ROCM_SEGMENTED_ATTN", ROCM_MOD "rocm_segmented_attn",
            attn__builtin_rocm_segmented_attn,
            "RDNA only (gfx11/gfx12; fp8 KV on gfx12) (combination check)"),
    ATTN__E("ROCM_AITER_MLA", ROCM_MOD "rocm_aiter_mla", attn__builtin_rocm_aiter_mla, NULL),
    ATTN__E("ROCM_AITER_TRITON_MLA", ROCM_MOD "rocm_aiter_triton_mla",
            attn__builtin_rocm_aiter_triton_mla, "get_name() is AITER_TRITON_MLA"),
    ATTN__E("ROCM_AITER_FA", ROCM_MOD "rocm_aiter_fa", attn__builtin_rocm_aiter_fa,
            "capability check: " ATTN__MI300_CLASS_TEXT " only; get_name() is FLASH_ATTN"),
    ATTN__E("ROCM_AITER_MLA_SPARSE", ROCM_MOD "rocm_aiter_mla_sparse",
            attn__builtin_rocm_aiter_mla_sparse, NULL),
    ATTN__E("XPU_MLA_SPARSE", "libattn_xpu.so:attn_backend_xpu_mla_sparse",
            attn__builtin_xpu_mla_sparse, NULL),
    ATTN__E("TORCH_SDPA", NULL, NULL, "ViT-only tag: no class, must be registered before use"),
    ATTN__E(
        "FLASHINFER", FI_MOD "flashinfer", attn__builtin_flashinfer,
        "needs flashinfer; sinks only on 10.x with flashinfer_cubin and not batch-invariant; KV "
        "nvfp4_ds_mla also on 10.x with TRT-LLM (as vLLM, outside its supported list)"),
    ATTN__E(
        "TRITON_FLASHINFER", FI_MOD "triton_flashinfer", attn__builtin_triton_flashinfer,
        "composite: TRITON_ATTN (multimodal prefix) + FLASHINFER (causal), SM 10.x, heads 256/512"),
    ATTN__E("FLASHINFER_MLA", FI_MOD "flashinfer_mla", attn__builtin_flashinfer_mla,
            "needs flashinfer"),
    ATTN__E("TOKENSPEED_MLA", CUDA_MOD "tokenspeed_mla", attn__builtin_tokenspeed_mla,
            "needs tokenspeed_mla (combination check)"),
    ATTN__E("FLASHINFER_MLA_SPARSE", FI_MOD "flashinfer_mla_sparse",
            attn__builtin_flashinfer_mla_sparse, "needs flashinfer"),
    ATTN__E("FLASHINFER_MLA_SPARSE_SM120", FI_MOD "flashinfer_mla_sparse_sm120",
            attn__builtin_flashinfer_mla_sparse_sm120, "needs flashinfer; SM 12.x"),
    ATTN__E("FLASHINFER_MLA_SPARSE_SM90", FI_MOD "flashinfer_mla_sparse_sm90",
            attn__builtin_flashinfer_mla_sparse_sm90, "SM 9.x; FlashInfer's SM90 NoPE MLA"),
    ATTN__E("TRITON_MLA", CUDA_MOD "triton_mla", attn__builtin_triton_mla, NULL),
    ATTN__E("CUTLASS_MLA", CUDA_MOD "cutlass_mla", attn__builtin_cutlass_mla, NULL),
    ATTN__E("FLASHMLA", CUDA_MOD "flashmla", attn__builtin_flashmla,
            "needs flashmla; dense on 9.x only, sparse on 9.x/10.x (combination check)"),
    ATTN__E("FLASHMLA_SPARSE", CUDA_MOD "flashmla_sparse", attn__builtin_flashmla_sparse, NULL),
    ATTN__E("FLASHMLA_SPARSE_DSV4", CUDA_MOD "flashmla_sparse_dsv4",
            attn__builtin_flashmla_sparse_dsv4, "DeepSeek V4 (model-driven)"),
    ATTN__E("FLASHINFER_MLA_SPARSE_DSV4", FI_MOD "flashinfer_mla_sparse_dsv4",
            attn__builtin_flashinfer_mla_sparse_dsv4,
            "DeepSeek V4 (model-driven); KV rules per SM 10.x / 12.x (combination check)"),
    ATTN__E("ROCM_FLASHMLA_SPARSE_DSV4", ROCM_MOD "rocm_flashmla_sparse_dsv4",
            attn__builtin_rocm_flashmla_sparse_dsv4, "DeepSeek V4 (model-driven)"),
    ATTN__E("FLASHMLA_SPARSE_DSV41", CUDA_MOD "flashmla_sparse_dsv41",
            attn__builtin_flashmla_sparse_dsv41,
            "DeepSeek V4.1 (model-driven); kernel block 64 on SM 9.x, else 128"),
    ATTN__E("FLASHINFER_MLA_SPARSE_DSV41", FI_MOD "flashinfer_mla_sparse_dsv41",
            attn__builtin_flashinfer_mla_sparse_dsv41,
            "DeepSeek V4.1 (model-driven); KV rules per SM 10.x / 12.x (combination check)"),
    ATTN__E("FLASHMLA_MEGA_ATTN_DSV41", CUDA_MOD "flashmla_mega_attn_dsv41",
            attn__builtin_flashmla_mega_attn_dsv41,
            "DeepSeek V4.1 (model-driven); needs flashmla on SM 10.x (combination check)"),
    ATTN__E("B12X", CUDA_MOD "b12x", attn__builtin_b12x,
            "needs the b12x package, which no machine component provides (combination check)"),
    ATTN__E("FLASH_ATTN_MLA", CUDA_MOD "flash_attn_mla", attn__builtin_flash_attn_mla,
            "needs FA3 on 9.x (combination check)"),
    ATTN__E("FLASH_ATTN_MLA_SPARSE", CUDA_MOD "flash_attn_mla_sparse",
            attn__builtin_flash_attn_mla_sparse, "needs FA3 on 9.x (combination check)"),
    ATTN__E("MINIMAX_M3_SPARSE", CUDA_MOD "minimax_m3_sparse", attn__builtin_minimax_m3_sparse,
            "MiniMax M3 (model-driven): sparse standard attention"),
    ATTN__E("CUTLASS_MSA", NULL, NULL,
            "alias: AttentionConfig picks MiniMax M3's CUTLASS MSA decode kernel and selects "
            "automatically",
            .auto_alias = true),
    ATTN__E("TRITON_MSA", NULL, NULL,
            "alias: AttentionConfig picks MiniMax M3's Triton MSA decode kernel and selects "
            "automatically",
            .auto_alias = true),
    ATTN__E("NO_ATTENTION", "libattn_no_attention.so:attn_backend_no_attention", NULL,
            "module absent in vLLM at the reference commit: always an ImportError",
            .absent_module = "vllm.v1.attention.backends.no_attention"),
    ATTN__E("FLEX_ATTENTION", "libattn_flex.so:attn_backend_flex_attention",
            attn__builtin_flex_attention, NULL),
    ATTN__E("HPC_ATTN", CUDA_MOD "hpc_attn", attn__builtin_hpc_attn,
            "Tencent hpc-ops; SM 9.0 only"),
    ATTN__E("ROCM_AITER_UNIFIED_ATTN", ROCM_MOD "rocm_aiter_unified_attn",
            attn__builtin_rocm_aiter_unified_attn, "preferred block size always 64"),
    ATTN__E("CPU_ATTN", "builtin:CPU_ATTN", attn__builtin_cpu_attn, "libattn CPU kernels"),
    ATTN__E("CPU_MLA", "builtin:CPU_MLA", attn__builtin_cpu_mla, "libattn CPU MLA kernels"),
    ATTN__E("AMX_MLA", "libattn_amx.so:attn_backend_amx_mla", attn__builtin_amx_mla,
            "vLLM's CPU AMX MLA; libattn has no kernel for it"),
    ATTN__E("TURBOQUANT", "libattn_turboquant.so:attn_backend_turboquant", attn__builtin_turboquant,
            "KV must be a turboquant_* dtype (None rejected)"),
    ATTN__E("ULTRAQUANT", "libattn_turboquant.so:attn_backend_ultraquant", attn__builtin_ultraquant,
            "KV must be ultraquant_4bit"),
    ATTN__E("CUSTOM", NULL, NULL, "placeholder: must be registered before use"),
    ATTN__E("REFERENCE", "builtin:REFERENCE", attn__builtin_reference,
            "libattn exact scalar oracle (lowest priority)", .libattn_only = true),
    ATTN__E("CPU_MLA_SPARSE", "builtin:CPU_MLA_SPARSE", attn__builtin_cpu_mla_sparse,
            "libattn CPU sparse MLA kernels (top-k token indices)", .libattn_only = true),
    ATTN__E("REFERENCE_MLA", "builtin:REFERENCE_MLA", attn__builtin_reference_mla,
            "libattn exact MLA oracle: decompress, attend in double (lowest priority)",
            .libattn_only = true),
    ATTN__E("REFERENCE_MLA_SPARSE", "builtin:REFERENCE_MLA_SPARSE",
            attn__builtin_reference_mla_sparse, "libattn exact sparse MLA oracle (lowest priority)",
            .libattn_only = true),
};

int attn__catalog_count(void)
{
    return (int)(sizeof attn__catalog / sizeof attn__catalog[0]);
}

const attn__catalog_entry *attn__catalog_at(int i)
{
    return i >= 0 && i < attn__catalog_count() ? &attn__catalog[i] : NULL;
}

const attn__catalog_entry *attn__catalog_find(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < attn__catalog_count(); i++)
        if (!strcmp(attn__catalog[i].name, name)) return &attn__catalog[i];
    return NULL;
}

const attn_backend *attn__catalog_builtin(const char *name, const char **why)
{
    static _Thread_local char msg[160];
    const attn__catalog_entry *e = attn__catalog_find(name);
    const attn_backend *b = e && e->builtin ? e->builtin() : NULL;
    if (b) return b;
    if (why) {
        if (e && e->builtin)
            snprintf(msg, sizeof msg, "libattn was built without the %s kernels", name);
        else
            snprintf(msg, sizeof msg, "libattn has no built-in backend named %s",
                     name ? name : "(null)");
        *why = msg;
    }
    return NULL;
}
