/* Internal view of a platform. The platform layer (src/platform/) fills it
 * by detection or from a machine spec. The selection rules of each family
 * sit above it, in the selector (src/select/rules_*.c, looked up by kind):
 * the platform knows nothing of them. */
#ifndef ATTN_PLATFORM_IMPL_H
#define ATTN_PLATFORM_IMPL_H

#include "attn/backend.h"
#include "attn/cpu.h"
#include "attn/platform.h"

struct attn_platform {
    attn_platform_kind kind;
    char name[64]; /* catalog name or "local" */
    char device_name[128];
    char description[256];
    bool simulated;
    bool has_cc;
    int cc_major, cc_minor; /* CUDA cc, or ROCm capability parsed from gfx arch */
    char gfx_arch[32];
    uint64_t memory_bytes;
    int device_count;
    uint32_t installed; /* bit per attn_component */
    bool settings[ATTN_SETTING_COUNT];
    attn_cpu_info cpu; /* CPU platforms (real or simulated) */
    uint64_t id;       /* unique per platform object (cache key) */
};

/* AMD's MI300 class: the gfx arches AITER ships kernels for (gfx90a is
 * not one). The one list; prose quotes ATTN__MI300_CLASS_TEXT. */
#define ATTN__MI300_ARCH_A     "gfx942"
#define ATTN__MI300_ARCH_B     "gfx950" /* also the only arch with AITER non-causal MLA */
#define ATTN__MI300_CLASS_TEXT ATTN__MI300_ARCH_A "/" ATTN__MI300_ARCH_B
/* A ROCm platform whose gfx arch is MI300 class (false for NULL). */
bool attn__platform_mi300_class(const attn_platform *p);
/* AITER counts as found on an MI300-class machine with the aiter component
 * (read by the ROCm rules and the AITER descriptors). */
bool attn__rocm_aiter_found(const attn_platform *p);

#endif
