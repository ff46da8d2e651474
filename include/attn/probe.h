/* GPU runtime probes: what the CUDA, ROCm (HIP) and OpenCL runtimes of this
 * machine report, or why each is absent. Each runtime is loaded with
 * dlopen (no link-time dependency) and asked once per process; the answer
 * never changes afterwards. A probe never fails for an absent runtime:
 * present == false and reason holds the loader's or runtime's own text.
 * Test hooks: ATTN_CUDA_LIBRARY, ATTN_HIP_LIBRARY, ATTN_OPENCL_LIBRARY
 * replace the default library names (read at the first probe). */
#ifndef ATTN_PROBE_H
#define ATTN_PROBE_H

#include "attn/status.h"
#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

#define ATTN_PROBE_MAX_DEVICES      16
#define ATTN_PROBE_MAX_CL_PLATFORMS 8

typedef enum attn_gpu_runtime {
    ATTN_GPU_RUNTIME_CUDA = 0,
    ATTN_GPU_RUNTIME_ROCM = 1
} attn_gpu_runtime;

typedef struct attn_gpu_device {
    char name[128];
    int cc_major, cc_minor; /* CUDA: compute capability; ROCm: from gfx_arch, -1 when the
                               arch is outside what the ROCm rules accept */
    char gfx_arch[32];      /* ROCm only: "gfx942" (a ":xnack-" style suffix dropped) */
    uint64_t memory_bytes;
} attn_gpu_device;

typedef struct attn_gpu_probe {
    bool present;      /* runtime loaded, initialised and reported >= 1 device */
    char library[256]; /* the library that loaded ("" when none did) */
    char reason[512];  /* why not present; "" when present */
    int device_count;  /* as reported by the runtime */
    int listed;        /* entries filled in devices[] (<= ATTN_PROBE_MAX_DEVICES) */
    attn_gpu_device devices[ATTN_PROBE_MAX_DEVICES];
} attn_gpu_probe;

typedef struct attn_opencl_device {
    int platform; /* index into attn_opencl_probe.platforms */
    char name[128];
    char vendor[128];
    char version[128]; /* CL_DEVICE_VERSION */
    char driver_version[64];
    const char *type; /* "cpu" "gpu" "accelerator" "custom" "default" */
    unsigned compute_units;
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    bool fp16;              /* cl_khr_fp16 in the extensions */
    bool fp64;              /* cl_khr_fp64 */
    const char *extensions; /* space-separated; never NULL ("" if unknown) */
} attn_opencl_device;

typedef struct attn_opencl_platform {
    char name[128];
    char vendor[128];
    char version[128];
    int device_count; /* devices of this platform listed in the probe */
} attn_opencl_platform;

typedef struct attn_opencl_probe {
    bool present; /* ICD loader found and >= 1 device */
    char library[256];
    char reason[512];
    int platform_count;
    attn_opencl_platform platforms[ATTN_PROBE_MAX_CL_PLATFORMS];
    int device_count; /* entries in devices[] */
    attn_opencl_device devices[ATTN_PROBE_MAX_DEVICES];
} attn_opencl_probe;

/* Copies the runtime's answer into *out (its strings stay valid for the
 * process). ATTN_INVALID_ARGUMENT for a NULL out or an unknown runtime,
 * *out unchanged. */
ATTN_API attn_status attn_probe_gpu(attn_gpu_runtime runtime, attn_gpu_probe *out);
ATTN_API attn_status attn_probe_opencl(attn_opencl_probe *out);

ATTN_EXTERN_C_END

#endif
