/* The built-in machine catalog: named simulated machines, each an
 * attn__machine_spec built by the same validating constructor as JSON specs.
 * Installed components: every CUDA machine has what a standard vLLM CUDA
 * wheel brings (fa2, fa3, fa4, flashinfer, flashinfer_cubin, flashmla; the
 * backends themselves decide per compute capability whether these apply);
 * ROCm machines have none (aiter is an optional install); CPU and XPU
 * machines have none. Names are matched case-insensitively. */
#include <strings.h>

#include "platform/platform_internal.h"
#include "util/error.h"

#define C(x) (1u << ATTN_COMPONENT_##x)
#define F(x) (1ull << ATTN_CPU_##x)

#define ATTN__CUDA_WHEEL                                                                           \
    (C(FA2) | C(FA3) | C(FA4) | C(FLASHINFER) | C(FLASHINFER_CUBIN) | C(FLASHMLA))
#define ATTN__CUDA_WHEEL_TEXT                                                                      \
    "installed: a standard CUDA wheel (fa2, fa3, fa4, flashinfer, flashinfer_cubin, flashmla)"
#define ATTN__X86_BASE    (F(SSE42) | F(AVX) | F(AVX2) | F(FMA) | F(F16C))
#define ATTN__AVX512_BASE (F(AVX512F) | F(AVX512BW) | F(AVX512VL) | F(AVX512DQ) | F(AVX512_VNNI))

#define ATTN__CUDA(nm, dev, cap, gib, what)                                                        \
    {                                                                                              \
        .name = nm, .kind = ATTN_PLATFORM_CUDA, .device_name = dev, .capability = cap,             \
        .memory_gib = gib, .installed_given = true, .installed = ATTN__CUDA_WHEEL,                 \
        .description = dev " (" what ", cc " cap ", " #gib " GiB); " ATTN__CUDA_WHEEL_TEXT         \
    }

#define ATTN__ROCM(nm, dev, gfx, gib, what)                                                        \
    {                                                                                              \
        .name = nm, .kind = ATTN_PLATFORM_ROCM, .device_name = dev, .capability = gfx,             \
        .memory_gib = gib, .installed_given = true, .installed = 0,                                \
        .description = dev " (" what ", " gfx ", " #gib " GiB); installed: none (aiter absent: "   \
                           "declare it with --installed aiter)"                                    \
    }

static const attn__machine_spec attn__catalog[] = {
    ATTN__CUDA("h100", "NVIDIA H100 80GB HBM3", "9.0", 80, "Hopper"),
    ATTN__CUDA("h200", "NVIDIA H200", "9.0", 141, "Hopper"),
    ATTN__CUDA("a100", "NVIDIA A100-SXM4-80GB", "8.0", 80, "Ampere"),
    ATTN__CUDA("l4", "NVIDIA L4", "8.9", 24, "Ada Lovelace"),
    ATTN__CUDA("t4", "Tesla T4", "7.5", 16, "Turing"),
    ATTN__CUDA("v100", "Tesla V100-SXM2-32GB", "7.0", 32, "Volta"),
    ATTN__CUDA("b200", "NVIDIA B200", "10.0", 180, "Blackwell"),
    ATTN__ROCM("mi300x", "AMD Instinct MI300X", "gfx942", 192, "CDNA3"),
    ATTN__ROCM("mi250", "AMD Instinct MI250X/MI250", "gfx90a", 128, "CDNA2"),
    {.name = "xpu",
     .kind = ATTN_PLATFORM_XPU,
     .device_name = "Intel(R) Data Center GPU Max 1550",
     .memory_gib = 128,
     .installed_given = true,
     .description = "Intel(R) Data Center GPU Max 1550 (Ponte Vecchio XPU, no compute "
                    "capability, 128 GiB); installed: none"},
    {.name = "xeon",
     .kind = ATTN_PLATFORM_CPU,
     .device_name = "Intel(R) Xeon(R) Platinum 8480+",
     .memory_gib = 512,
     .installed_given = true,
     .cpu_vendor = "GenuineIntel",
     .cpu_model = "Intel(R) Xeon(R) Platinum 8480+",
     .cpu_arch = "x86_64",
     .cpu_cores = 56,
     .cpu_features = ATTN__X86_BASE | ATTN__AVX512_BASE | F(AVX512_BF16) | F(AVX512_FP16) |
                     F(AMX_TILE) | F(AMX_BF16) | F(AMX_INT8),
     .description = "Intel(R) Xeon(R) Platinum 8480+ (Sapphire Rapids, 56 cores, AVX-512 with "
                    "bf16/fp16/vnni and AMX, 512 GiB); installed: none"},
    {.name = "epyc",
     .kind = ATTN_PLATFORM_CPU,
     .device_name = "AMD EPYC 9654 96-Core Processor",
     .memory_gib = 768,
     .installed_given = true,
     .cpu_vendor = "AuthenticAMD",
     .cpu_model = "AMD EPYC 9654 96-Core Processor",
     .cpu_arch = "x86_64",
     .cpu_cores = 96,
     .cpu_features = ATTN__X86_BASE | ATTN__AVX512_BASE | F(AVX512_BF16),
     .description = "AMD EPYC 9654 96-Core Processor (Genoa, 96 cores, AVX-512 with bf16/vnni, "
                    "no AMX, 768 GiB); installed: none"},
};

#define ATTN__CATALOG_N ((int)(sizeof attn__catalog / sizeof attn__catalog[0]))

int attn_catalog_count(void)
{
    return ATTN__CATALOG_N;
}

const char *attn_catalog_name(int i)
{
    return i >= 0 && i < ATTN__CATALOG_N ? attn__catalog[i].name : NULL;
}

const char *attn_catalog_description(int i)
{
    return i >= 0 && i < ATTN__CATALOG_N ? attn__catalog[i].description : NULL;
}

uint32_t attn__catalog_cuda_installed(void)
{
    return ATTN__CUDA_WHEEL;
}

attn_status attn__catalog_open(const char *name, attn_platform **out)
{
    for (int i = 0; i < ATTN__CATALOG_N; i++)
        if (!strcasecmp(name, attn__catalog[i].name))
            return attn__platform_build(&attn__catalog[i], out);
    return ATTN_NOT_FOUND;
}
