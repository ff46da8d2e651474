/* Internal view of a platform. The platform layer (src/platform/) fills it
 * by detection or from a machine spec; the selection rules of each family
 * (src/select/rules_*.c) are attached as ops, so each platform answers the
 * selection question with its own function and priority list. */
#ifndef ATTN_PLATFORM_IMPL_H
#define ATTN_PLATFORM_IMPL_H

#include "attn/backend.h"
#include "attn/cpu.h"
#include "attn/platform.h"

typedef struct attn_selection attn_selection;

typedef struct attn__platform_ops {
    attn_platform_kind kind;
    const char *device_family; /* the "for cuda with ..." word of messages */
    /* Ordered candidate names for this configuration. */
    int (*priorities)(const attn_platform *p, const attn_selector_config *cfg, const char **names,
                      int max);
    /* Fill sel (already initialised with platform, request and config). */
    attn_status (*select)(const attn_platform *p, const char *requested,
                          const attn_selector_config *cfg, attn_selection *sel);
    /* get_preferred_block_size with this family's defaults; NULL: the
     * generic rule (attn__preferred_block_size in select/validate.h). */
    int (*preferred_block_size)(const attn_platform *p, const attn_backend_desc *d,
                                int default_size);
} attn__platform_ops;

/* Defined by the selection rules (src/select/). NULL for unknown kinds. */
const attn__platform_ops *attn__platform_ops_for(attn_platform_kind kind);

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
    const attn__platform_ops *ops;
    uint64_t id; /* unique per platform object (cache key) */
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
