/* Internal view of a platform. The platform layer (src/platform/) fills it
 * by detection or from a machine spec; the selection rules of each family
 * (src/select/rules_*.c) are attached as ops, so each platform answers the
 * selection question with its own function and priority list. */
#ifndef ATTN_PLATFORM_IMPL_H
#define ATTN_PLATFORM_IMPL_H

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

#endif
