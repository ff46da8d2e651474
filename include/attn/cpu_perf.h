/* What bounds attention on this CPU, measured in the caller's run: the
 * sustained read bandwidth and peak FMA rate of the machine, the limit
 * each phase is held against (decode over a cold cache: read bandwidth;
 * prefill and cache-resident decode: the peak of the arithmetic the active
 * CPU_ATTN kernel variant runs), and that variant (which `attn bench
 * --variant` can force). A peak this build has no loop for (AMX tiles,
 * AVX-512 BF16 dot products) is named with no value rather than a fraction
 * of a peak the kernel does not run on. */
#ifndef ATTN_CPU_PERF_H
#define ATTN_CPU_PERF_H

#include "attn/status.h"
#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_cpu_machine {
    int threads;
    const char *isa;     /* "avx512", "avx2" or "scalar": what the loops used */
    double read_gbps;    /* best of the passes, 1e9 bytes/s */
    double peak_gflops;  /* fp32 FMA, 2 flops per lane */
    size_t buffer_bytes; /* the streamed buffer */
    uint64_t llc_bytes;  /* last-level cache of the CPUs this process may run on,
                          * summed over its instances (sysfs or cpuid; 0 unknown) */
} attn_cpu_machine;

typedef enum attn_cpu_limit_kind {
    ATTN_CPU_LIMIT_BANDWIDTH = 0, /* value in 1e9 bytes/s */
    ATTN_CPU_LIMIT_COMPUTE = 1,   /* value in 1e9 flop/s */
} attn_cpu_limit_kind;

typedef struct attn_cpu_limit {
    attn_cpu_limit_kind kind;
    const char *name; /* e.g. "DRAM read bandwidth", "fp32 FMA peak (avx2)" */
    const char *key;  /* short form for tables: "dram-read", "fma-avx2", "amx-bf16" */
    double value;     /* 0: not measured on this machine */
} attn_cpu_limit;

/* The default streamed buffer is ATTN_CPU_PROBE_LLC_TIMES x llc_bytes, at
 * least 1 GiB, at most a quarter of memory: even a cache that keeps part
 * of a cyclic stream then serves at most 1/8 of it. */
#define ATTN_CPU_PROBE_LLC_TIMES 8
/* Streams a buffer of buffer_bytes on every pool thread (0: the default
 * above) and runs the FMA loop. Takes about a second. */
ATTN_API attn_status attn_cpu_measure_machine(size_t buffer_bytes, attn_cpu_machine *out);
/* The limit of a phase (prefill, or decode; hot: KV reused, cache-resident)
 * for CPU_ATTN variant `variant` (NULL: the active one) on machine m, as
 * filled by attn_cpu_measure_machine (ATTN_INVALID_ARGUMENT otherwise). */
ATTN_API attn_status attn_cpu_phase_limit(const attn_cpu_machine *m, const char *variant,
                                          bool prefill, bool hot, attn_cpu_limit *out);
/* achieved / limit for a run that read gbps and computed gflops; negative
 * when the limit has no value here (or l is NULL). */
ATTN_API double attn_cpu_limit_fraction(const attn_cpu_limit *l, double gbps, double gflops);

/* The CPU_ATTN kernel variant calls run with now: "amx-bf16",
 * "avx512-bf16", "avx512", "avx2" or "portable". */
ATTN_API const char *attn_cpu_attn_variant(void);
/* The i-th CPU_ATTN kernel variant of this build, best first (i from 0:
 * "amx-bf16", "avx512-bf16", "avx512", "avx2", "portable" on x86-64);
 * NULL past the last. Whether this CPU runs it: attn_cpu_attn_force_variant. */
ATTN_API const char *attn_cpu_attn_variant_name(int i);
/* Forces a variant by name for this process (NULL: back to automatic).
 * ATTN_NOT_FOUND for an unknown name, ATTN_UNSUPPORTED when this CPU cannot
 * run it; the variant in use is then unchanged. */
ATTN_API attn_status attn_cpu_attn_force_variant(const char *name);

/* A CPU_ATTN kernel variant: whether this CPU (after ATTN_CPU_MASK) can
 * run it, whether calls run it now, and its documented error against
 * REFERENCE (max |out - ref| / max |ref| over a call's output) for fp32
 * activations over a 16/32-bit cache, fp32 over an fp8 cache, and
 * fp16/bf16 activations. The conformance test holds each variant to it;
 * two runs of one variant that split the same work differently (one
 * process and DCP ranks) are expected to agree within it. */
typedef struct attn_cpu_attn_variant_info {
    const char *name;
    bool usable;
    bool active;
    double err_fp32, err_fp8_kv, err_half;
} attn_cpu_attn_variant_info;
/* The variants compiled in, best first. */
ATTN_API int attn_cpu_attn_variant_count(void);
/* Variant i (0 <= i < attn_cpu_attn_variant_count()) into out;
 * ATTN_INVALID_ARGUMENT for another i (out unchanged). */
ATTN_API attn_status attn_cpu_attn_variant_get(int i, attn_cpu_attn_variant_info *out);

ATTN_EXTERN_C_END

#endif
