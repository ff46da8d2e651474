/* Hardware probes of the platform layer (internal).
 *
 * Each probe loads its runtime with dlopen (no link-time dependency), runs
 * once per process (thread-safe) and returns a pointer to a result that is
 * never freed and never changes, so callers may call it any number of times
 * and keep the pointer. A probe never fails: "absent" is a result with
 * present == false and a reason holding the loader's or runtime's own text
 * ("libcuda.so.1: cannot open shared object file: No such file or directory").
 *
 * Test hooks: ATTN_CUDA_LIBRARY, ATTN_HIP_LIBRARY and ATTN_OPENCL_LIBRARY
 * replace the default library names (read once, at the first probe), so a
 * fake driver can stand in for the real one. */
#ifndef ATTN_PLATFORM_DETECT_H
#define ATTN_PLATFORM_DETECT_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "attn/cpu.h"
#include "attn/probe.h"
#include "util/strbuf.h"

/* The probe results are public (attn/probe.h): one definition. A probe
 * that loaded a runtime keeps it loaded for the process (never dlclose'd). */
#define ATTN__PROBE_MAX_DEVICES      ATTN_PROBE_MAX_DEVICES
#define ATTN__PROBE_MAX_CL_PLATFORMS ATTN_PROBE_MAX_CL_PLATFORMS
typedef attn_gpu_device attn__gpu_device;
typedef attn_gpu_probe attn__gpu_probe;
typedef attn_opencl_device attn__opencl_device;
typedef attn_opencl_platform attn__opencl_platform;
typedef attn_opencl_probe attn__opencl_probe;

/* Opens the first library of names that loads (RTLD_NOW | RTLD_LOCAL), or
 * only getenv(env_override) when that is set and non-empty. On failure
 * returns NULL and writes the first loader error into reason. */
void *attn__probe_dlopen(const char *env_override, const char *const *names, char *library,
                         size_t library_size, char *reason, size_t reason_size);

const attn__gpu_probe *attn__probe_cuda(void);
const attn__gpu_probe *attn__probe_rocm(void);
const attn__opencl_probe *attn__probe_opencl(void);

/* gfx arch -> capability as the ROCm rules do it (reference §6b): the digits
 * after "gfx": 2-3 digits -> one-digit major (gfx90a 9.0, gfx942 9.4),
 * 4 digits -> two-digit major (gfx1100 11.0); other lengths or a major
 * outside 9..12 -> ATTN_INVALID_ARGUMENT. A ":feature" suffix is ignored. */
attn_status attn__rocm_capability(const char *gfx, int *major, int *minor);

/* CPU helpers shared by the detected and the simulated CPU platforms. */
/* Token -> feature (case-insensitive); ATTN_INVALID_ARGUMENT if unknown. */
attn_status attn__cpu_feature_parse(const char *tok, attn_cpu_feature *out);
/* Features that f needs (bit set); a feature is usable only with all of them. */
uint64_t attn__cpu_feature_requires(attn_cpu_feature f);
/* hidden plus every feature that depends on something hidden. */
uint64_t attn__cpu_hide_closure(uint64_t hidden);
/* Bits of every feature in the table. */
uint64_t attn__cpu_all_features(void);
/* true for x86 feature bits, false for arm ones. */
bool attn__cpu_feature_is_x86(attn_cpu_feature f);
/* This machine's identity and unmasked state (ATTN_CPU_MASK not applied). */
const attn_cpu_info *attn__cpu_info_unmasked(void);
/* {"vendor", "model", "arch", "cores", "memory_bytes",
 *  "features": {"present": [...], "usable": [...], "masked": [...]}} */
void attn__cpu_write_json(attn__jw *w, const attn_cpu_info *ci);
/* Space-separated feature tokens of bits into buf ("-" when empty). */
void attn__cpu_feature_list(uint64_t bits, char *buf, size_t size);

/* The last-level cache of the CPUs this process may run on (cpu_cache.c). */
typedef struct attn__cpu_llc {
    int level;               /* 3 on most x86 parts; 0 unknown */
    int instances;           /* distinct LLCs among the process's CPUs */
    uint64_t instance_bytes; /* the largest of them */
    uint64_t total_bytes;    /* summed over the instances; 0 unknown */
    const char *source;      /* "sysfs", "cpuid" or "none" */
} attn__cpu_llc;
/* Detected once per process (affinity set, sysfs then cpuid); never NULL. */
const attn__cpu_llc *attn__cpu_llc_get(void);
/* The sysfs scan under root (a /sys/devices/system/cpu), over the cpuN
 * folders in cpus (NULL: all). Nothing readable is total_bytes 0, not an
 * error; only running out of memory fails. */
attn_status attn__cpu_llc_scan(const char *root, const cpu_set_t *cpus, attn__cpu_llc *out);

#endif
