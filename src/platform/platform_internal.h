/* Cross-file internals of the platform layer (src/platform/ only, plus the
 * `attn platforms` command). A simulated machine is described by an
 * attn__machine_spec, whatever its source (catalog entry, bare spec, JSON),
 * and built by one function that validates it, so every source follows the
 * same rules and produces the same errors. */
#ifndef ATTN_PLATFORM_INTERNAL_H
#define ATTN_PLATFORM_INTERNAL_H

#include "platform/detect.h"
#include "platform/platform_impl.h"
#include "util/strbuf.h"

/* Placeholder memory of a GPU machine whose spec does not give one. */
#define ATTN__DEFAULT_GPU_MEMORY_GIB 64.0

typedef struct attn__machine_spec {
    const char *name;        /* required */
    const char *description; /* NULL: generated */
    attn_platform_kind kind; /* CPU, CUDA, ROCM or XPU */
    const char *device_name; /* NULL: generic name for the kind */
    const char *capability;  /* CUDA "X.Y", ROCm "gfxNNN"; NULL for CPU and XPU */
    double memory_gib;       /* 0: ATTN__DEFAULT_GPU_MEMORY_GIB (GPU) or host memory (CPU) */
    int device_count;        /* 0: 1 */
    bool installed_given;    /* false: the kind's default set */
    uint32_t installed;
    bool setting_given[ATTN_SETTING_COUNT];
    bool setting[ATTN_SETTING_COUNT];
    /* CPU machines: copy_host copies this machine's CPU (bare "cpu"),
     * otherwise the cpu_* fields describe it (features present = usable). */
    bool cpu_copy_host;
    const char *cpu_vendor, *cpu_model, *cpu_arch; /* NULL: "unknown", device name, derived */
    int cpu_cores;                                 /* 0: 1 */
    uint64_t cpu_features;
} attn__machine_spec;

/* A zeroed platform with a fresh id, default settings and its kind's ops. */
attn_platform *attn__platform_alloc(attn_platform_kind kind);
/* Validates s and builds a simulated platform; errors name the field. */
attn_status attn__platform_build(const attn__machine_spec *s, attn_platform **out);
/* Default installed set of a simulated machine of this kind (bare specs and
 * JSON specs without "installed"): CUDA fa2,fa3,fa4; others none. */
uint32_t attn__default_installed(attn_platform_kind kind);
/* "fa2, fa3, ..." for messages. */
void attn__component_list(char *buf, size_t size);
/* Comma-separated component tokens -> bits ("" or "none" = none). On an
 * unknown token fails naming it (prefixed by what) and leaves *out alone. */
attn_status attn__parse_installed(const char *csv, const char *what, uint32_t *out);
/* The JSON object of attn_platform_to_json, written into w. */
void attn__platform_write_json(attn__jw *w, const attn_platform *p);

/* Catalog (catalog.c): ATTN_NOT_FOUND without touching the error text when
 * name is not a catalog entry (case-insensitive). */
attn_status attn__catalog_open(const char *name, attn_platform **out);
/* Installed set of CUDA catalog machines (a standard CUDA wheel). */
uint32_t attn__catalog_cuda_installed(void);

/* Simulated machines from text (sim.c). attn__sim_open_bare returns
 * ATTN_NOT_FOUND silently when spec is not of a bare form. */
attn_status attn__sim_open_bare(const char *spec, attn_platform **out);
attn_status attn__sim_open_file(const char *path, attn_platform **out);
/* Real OpenCL device `index` (0: the first) as an OPENCL platform
 * (platform.c); ATTN_PLATFORM_UNAVAILABLE with the probe's reason when there
 * is no such device. */
attn_status attn__platform_open_opencl(int index, attn_platform **out);

#endif
