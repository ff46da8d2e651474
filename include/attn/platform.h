/* Platforms: "what hardware am I on?". A platform is either detected on this
 * machine (CPU via cpuid/auxv; CUDA, ROCm, OpenCL through their runtimes
 * loaded with dlopen) or simulated from a machine spec: a catalog name
 * ("h100", "mi300x", "xeon"...), a bare "cuda:8.9" / "rocm:gfx942" / "xpu" /
 * "cpu", or a JSON spec file. Each platform family answers the selection
 * question with its own rules (see select.h). */
#ifndef ATTN_PLATFORM_H
#define ATTN_PLATFORM_H

#include "attn/config.h"
#include "attn/cpu.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_platform attn_platform;

typedef enum attn_platform_kind {
    ATTN_PLATFORM_UNSPECIFIED = 0,
    ATTN_PLATFORM_CPU = 1,
    ATTN_PLATFORM_CUDA = 2,
    ATTN_PLATFORM_ROCM = 3,
    ATTN_PLATFORM_XPU = 4,
    ATTN_PLATFORM_OPENCL = 5
} attn_platform_kind;

/* Installed optional components of a machine (reference §17 tokens). */
#define ATTN_COMPONENT_TABLE(X)                                                                    \
    X(FA2, "fa2")                                                                                  \
    X(FA3, "fa3")                                                                                  \
    X(FA4, "fa4")                                                                                  \
    X(FLASHINFER, "flashinfer")                                                                    \
    X(FLASHINFER_CUBIN, "flashinfer_cubin")                                                        \
    X(FLASHMLA, "flashmla")                                                                        \
    X(TOKENSPEED_MLA, "tokenspeed_mla")                                                            \
    X(AITER, "aiter")

typedef enum attn_component {
#define ATTN__COMP_ENUM(name, tok) ATTN_COMPONENT_##name,
    ATTN_COMPONENT_TABLE(ATTN__COMP_ENUM)
#undef ATTN__COMP_ENUM
        ATTN_COMPONENT_COUNT
} attn_component;

/* Machine-level switches (vLLM reads these from environment variables). */
#define ATTN_SETTING_TABLE(X)                                                                      \
    X(ROCM_USE_AITER, "rocm_use_aiter", false)                                                     \
    X(ROCM_USE_AITER_MHA, "rocm_use_aiter_mha", true)                                              \
    X(ROCM_USE_AITER_MLA, "rocm_use_aiter_mla", true)                                              \
    X(BATCH_INVARIANT, "batch_invariant", false)

typedef enum attn_setting {
#define ATTN__SET_ENUM(name, tok, def) ATTN_SETTING_##name,
    ATTN_SETTING_TABLE(ATTN__SET_ENUM)
#undef ATTN__SET_ENUM
        ATTN_SETTING_COUNT
} attn_setting;

/* The process-wide platform: ATTN_PLATFORM if set, else the real machine.
 * Created once (thread-safe) and never freed. */
ATTN_API attn_status attn_platform_current(const attn_platform **out);
/* The real machine, detected now. */
ATTN_API attn_status attn_platform_detect(attn_platform **out);
/* A simulated machine from a catalog name, a bare "cuda:X.Y"/"rocm:gfxNNN"/
 * "xpu"/"cpu", or a path to a JSON machine spec. */
ATTN_API attn_status attn_platform_open(const char *spec, attn_platform **out);
/* A simulated machine from JSON text (same schema as spec files). */
ATTN_API attn_status attn_platform_from_json(const char *json, attn_platform **out);
ATTN_API void attn_platform_free(attn_platform *p);

ATTN_API attn_platform_kind attn_platform_get_kind(const attn_platform *p);
ATTN_API const char *attn_platform_kind_name(attn_platform_kind k); /* "cuda" "rocm" "cpu" ... */
ATTN_API const char *attn_platform_name(const attn_platform *p);    /* "h100", "local" */
ATTN_API const char *attn_platform_device_name(const attn_platform *p);
/* One line: what the machine is and where its description came from. */
ATTN_API const char *attn_platform_description(const attn_platform *p);
/* The CPU of a CPU platform (detected or simulated); NULL for others. */
ATTN_API const attn_cpu_info *attn_platform_cpu(const attn_platform *p);
ATTN_API bool attn_platform_is_simulated(const attn_platform *p);
/* false when the platform has no capability (CPU, XPU): Python None. */
ATTN_API bool attn_platform_capability(const attn_platform *p, int *major, int *minor);
ATTN_API const char *attn_platform_gfx_arch(const attn_platform *p); /* NULL if not ROCm */
ATTN_API uint64_t attn_platform_memory_bytes(const attn_platform *p);
ATTN_API int attn_platform_device_count(const attn_platform *p);

ATTN_API const char *attn_component_name(attn_component c);
ATTN_API attn_status attn_component_parse(const char *tok, attn_component *out);
ATTN_API bool attn_platform_has_component(const attn_platform *p, attn_component c);
/* Replace the installed set ("fa2,fa3" ; "" = none). For simulated machines. */
ATTN_API attn_status attn_platform_set_installed(attn_platform *p, const char *csv);
ATTN_API const char *attn_setting_name(attn_setting s);
ATTN_API attn_status attn_setting_parse(const char *tok, attn_setting *out);
ATTN_API bool attn_platform_setting(const attn_platform *p, attn_setting s);
/* "key=value" with value true/false/1/0. */
ATTN_API attn_status attn_platform_set_setting(attn_platform *p, const char *key_eq_value);

/* The platform's ordered candidate list for a configuration (names, lowest
 * index = highest priority). Returns the count; writes at most max names
 * (names NULL or max <= 0: writes nothing, still returns the count; 0 for a
 * config whose struct_size is refused, attn/config.h). */
ATTN_API int attn_platform_priorities(const attn_platform *p, const attn_selector_config *cfg,
                                      const char **names, int max);

/* JSON description of the platform (for `attn platforms --json`). Caller
 * frees *out with free(). */
ATTN_API attn_status attn_platform_to_json(const attn_platform *p, char **out);

/* Built-in machine catalog. */
ATTN_API int attn_catalog_count(void);
ATTN_API const char *attn_catalog_name(int i);
ATTN_API const char *attn_catalog_description(int i);

ATTN_EXTERN_C_END

#endif
