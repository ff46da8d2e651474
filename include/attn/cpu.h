/* CPU identity and usable ISA features. A feature counts only when the CPU
 * has it AND the OS saves its register state (XGETBV on x86). ATTN_CPU_MASK
 * ("-avx512,-avx2", "-amx-bf16" or "none") hides features so fallbacks can
 * be tested on capable hardware; the mask is read once per process, and a
 * name it does not know is reported (with the names it knows) and skipped
 * while the other names still hide. */
#ifndef ATTN_CPU_H
#define ATTN_CPU_H

#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

/* X(NAME, "token") — tokens are what ATTN_CPU_MASK and --json use. */
#define ATTN_CPU_FEATURE_TABLE(X)                                                                  \
    X(SSE42, "sse4_2")                                                                             \
    X(AVX, "avx")                                                                                  \
    X(AVX2, "avx2")                                                                                \
    X(FMA, "fma")                                                                                  \
    X(F16C, "f16c")                                                                                \
    X(AVX512F, "avx512f")                                                                          \
    X(AVX512BW, "avx512bw")                                                                        \
    X(AVX512VL, "avx512vl")                                                                        \
    X(AVX512DQ, "avx512dq")                                                                        \
    X(AVX512_BF16, "avx512_bf16")                                                                  \
    X(AVX512_FP16, "avx512_fp16")                                                                  \
    X(AVX512_VNNI, "avx512_vnni")                                                                  \
    X(AMX_TILE, "amx_tile")                                                                        \
    X(AMX_BF16, "amx_bf16")                                                                        \
    X(AMX_INT8, "amx_int8")                                                                        \
    X(NEON, "neon")                                                                                \
    X(ASIMDHP, "asimdhp")                                                                          \
    X(SVE, "sve")                                                                                  \
    X(BF16_ARM, "bf16")                                                                            \
    X(AVX512_VBMI, "avx512vbmi") /* appended: earlier values keep their numbers */

typedef enum attn_cpu_feature {
#define ATTN__CPUF_ENUM(name, tok) ATTN_CPU_##name,
    ATTN_CPU_FEATURE_TABLE(ATTN__CPUF_ENUM)
#undef ATTN__CPUF_ENUM
        ATTN_CPU_FEATURE_COUNT
} attn_cpu_feature;

typedef struct attn_cpu_info {
    char vendor[16];   /* "GenuineIntel", "AuthenticAMD", "arm" ... */
    char model[64];    /* brand string */
    char arch[16];     /* "x86_64", "aarch64" */
    int logical_cores; /* online CPUs usable by this process */
    uint64_t present;  /* bit per attn_cpu_feature: the hardware has it */
    uint64_t usable;   /* present, OS-enabled and not masked */
    uint64_t masked;   /* hidden by ATTN_CPU_MASK */
    uint64_t memory_bytes;
} attn_cpu_info;

/* Detected once per process (thread-safe); never NULL. */
ATTN_API const attn_cpu_info *attn_cpu_info_get(void);
ATTN_API bool attn_cpu_has(attn_cpu_feature f);
ATTN_API const char *attn_cpu_feature_name(attn_cpu_feature f);
/* Parse a mask string: comma-separated names, each hiding what it names
 * and everything that depends on it. Names are the CPU kernel variants
 * (amx-bf16, avx512-bf16, avx512, avx2: each hides the feature that sets
 * it apart from the variant below; portable cannot be hidden), the groups
 * amx and none (everything), and the feature tokens above, matched
 * ignoring case, '-' and '_' ("-avx512bf16"). A leading '-' is optional.
 * ATTN_INVALID_ARGUMENT naming the accepted names on any unknown name;
 * *masked_bits is then unchanged. */
ATTN_API attn_status attn_cpu_parse_mask(const char *s, uint64_t *masked_bits);
/* Space-separated feature tokens of bits (bit per attn_cpu_feature) into
 * buf, truncated to size; "-" when bits is 0. */
ATTN_API void attn_cpu_feature_list(uint64_t bits, char *buf, size_t size);
/* {"vendor", "model", "arch", "cores", "memory_bytes", "features":
 * {"present": [...], "usable": [...], "masked": [...]}}. Caller frees *out. */
ATTN_API attn_status attn_cpu_info_to_json(const attn_cpu_info *ci, char **out);

ATTN_EXTERN_C_END

#endif
