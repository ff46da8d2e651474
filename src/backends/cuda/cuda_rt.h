/* The CUDA module's runtime (internal API of libattn_cuda.so): NVIDIA GPUs
 * through the CUDA driver API loaded with dlopen, the dialect's kernels
 * (src/backends/devkern/, the same files OPENCL_ATTN runs) from the fatbin
 * embedded at build time (cmake/cuda.cmake), device memory as opaque
 * handles. It mirrors the OpenCL runtime's API (src/backends/opencl/
 * opencl.h) object for object and call for call, and launches through the
 * same plans (kd_plan.h) and argument lists (kd_launch.h), so contract v2's
 * device and kernel ops wrap either the same way (docs/design/
 * device-kernels.md, "The CUDA module").
 *
 * Objects: an instance (attn__cuda) is one device's primary context, one
 * non-blocking stream and the module's functions; one thread at a time
 * uses it (contract v2: one instance per engine). Buffers are the
 * device's, usable from every instance on it. A kernel state and the steps
 * it reads belong to one instance (its stream orders uploads before
 * launches).
 *
 * The module does not link libattn: failures return a status and leave
 * their detail in attn__cuda_last_error() (per thread). Without a driver
 * every entry point returns ATTN_IMPORT_ERROR with the dynamic loader's
 * reason ("libcuda.so.1: cannot open shared object file: ..."), as a
 * Python import of a CUDA extension fails; a driver without a device is
 * ATTN_PLATFORM_UNAVAILABLE.
 *
 * Checks. The calls check what the kernels will read (the step's metadata:
 * lengths, every block id against the pool; every buffer range against its
 * allocation; slots against the cache) before anything is enqueued. The
 * argument checks of REFERENCE (attn__fwd_check) and REFERENCE_MLA
 * (attn__mla_prepare) live in libattn: contract v2's checked kernel handle
 * runs them before a kernel op is called. */
#ifndef ATTN_CUDA_CUDA_RT_H
#define ATTN_CUDA_CUDA_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/layer.h"
#include "attn/metadata.h"
#include "attn/status.h"

/* Symbols the module exports for its tests and benches (and phase 2's
 * wrapper); everything else in it is hidden. */
#define ATTN__CUDA_API __attribute__((visibility("default")))

typedef struct attn__cuda attn__cuda;
typedef struct attn__cuda_mem attn__cuda_mem;
typedef struct attn__cuda_step attn__cuda_step;
typedef struct attn__cuda_kernel attn__cuda_kernel;

/* The detail of this thread's last failure in the module. */
ATTN__CUDA_API const char *attn__cuda_last_error(void);

/* ---- devices and instances ---------------------------------------------------- */

/* Devices the driver lists; 0 with the reason in attn__cuda_last_error()
 * when there is no driver or device. */
ATTN__CUDA_API int attn__cuda_device_count(void);

typedef struct attn__cuda_options {
    int device;        /* ordinal below attn__cuda_device_count() */
    const void *image; /* a module image (fatbin, cubin or PTX) instead of the embedded
                          fatbin: tests load a program built with other macros; NULL = embedded */
} attn__cuda_options;

/* NULL options = device 0 with the embedded module. ATTN_IMPORT_ERROR
 * without a driver, or when the module has no code for the device (e.g. a
 * capability below sm_80 without PTX: the driver's CUDA_ERROR_NO_BINARY_FOR_GPU
 * in the detail); ATTN_PLATFORM_UNAVAILABLE without a device. */
ATTN__CUDA_API attn_status attn__cuda_open(const attn__cuda_options *opt, attn__cuda **out);
ATTN__CUDA_API void attn__cuda_close(attn__cuda *c);
/* "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)". */
ATTN__CUDA_API const char *attn__cuda_device_name(const attn__cuda *c);
/* Compute capability as major * 10 + minor, and multiprocessors. */
ATTN__CUDA_API int attn__cuda_capability(const attn__cuda *c);
ATTN__CUDA_API int attn__cuda_sm_count(const attn__cuda *c);
/* What the bench reports: capability, multiprocessors, clocks (kHz), the
 * memory bus width (bits) and size. */
typedef struct attn__cuda_info {
    int cc, sm_count, clock_khz, mem_clock_khz, bus_bits;
    size_t total_mem;
} attn__cuda_info;
ATTN__CUDA_API attn_status attn__cuda_get_info(const attn__cuda *c, attn__cuda_info *out);
/* The embedded fatbin, its bytes, and the architectures it was built for
 * ("sm_80 sm_86 sm_89 sm_90 compute_90"): known without a driver. */
ATTN__CUDA_API const void *attn__cuda_fatbin(void);
ATTN__CUDA_API size_t attn__cuda_fatbin_size(void);
ATTN__CUDA_API const char *attn__cuda_fatbin_archs(void);

/* ---- memory ---------------------------------------------------------------------- */

ATTN__CUDA_API attn_status attn__cuda_alloc(attn__cuda *c, size_t bytes, attn__cuda_mem **out);
ATTN__CUDA_API void attn__cuda_free(attn__cuda_mem *m);
ATTN__CUDA_API size_t attn__cuda_mem_size(const attn__cuda_mem *m);
/* copy_in returns once src may be reused; copy_out once dst holds the data
 * (it waits for the stream and reports an earlier launch's failure). */
ATTN__CUDA_API attn_status attn__cuda_copy_in(attn__cuda *c, attn__cuda_mem *dst, size_t dst_offset,
                                              const void *src, size_t bytes);
ATTN__CUDA_API attn_status attn__cuda_copy_out(attn__cuda *c, void *dst, const attn__cuda_mem *src,
                                               size_t src_offset, size_t bytes);
ATTN__CUDA_API attn_status attn__cuda_sync(attn__cuda *c);
/* Device-to-device copy on the stream (the bench's copy bandwidth). */
ATTN__CUDA_API attn_status attn__cuda_copy_dd(attn__cuda *c, attn__cuda_mem *dst,
                                              const attn__cuda_mem *src, size_t bytes);
ATTN__CUDA_API attn_status attn__cuda_to_f32(attn__cuda *c, const attn__cuda_mem *src,
                                             int64_t offset, attn_elem elem, size_t n, float *dst);

/* ---- cache writes (as attn__ocl_kv_write / attn__ocl_mla_write) -------------------- */

ATTN__CUDA_API attn_status attn__cuda_kv_write(attn__cuda *c, const attn_kv_view *kv,
                                               const int64_t *slot_mapping, int num_tokens,
                                               const attn__cuda_mem *k, int64_t k_offset,
                                               const attn__cuda_mem *v, int64_t v_offset,
                                               attn_elem src);
ATTN__CUDA_API attn_status attn__cuda_mla_write(attn__cuda *c, const attn_kv_view *kv,
                                                const int64_t *slot_mapping, int num_tokens,
                                                const attn__cuda_mem *latent, int64_t latent_offset,
                                                const attn__cuda_mem *rope, int64_t rope_offset,
                                                int latent_dim, int rope_dim, attn_elem src);

/* ---- paged attention (as attn__ocl_kernel / attn__ocl_step / attn__ocl_forward) ----- */

ATTN__CUDA_API attn_status attn__cuda_kernel_create(attn__cuda *c, const attn_layer_params *layer,
                                                    attn__cuda_kernel **out);
ATTN__CUDA_API void attn__cuda_kernel_destroy(attn__cuda_kernel *k);

typedef struct attn__cuda_plan {
    int split_len;  /* 0 = chosen from the device's multiprocessors */
    int max_splits; /* 0 = no limit, 1 = never split */
} attn__cuda_plan;

ATTN__CUDA_API attn_status attn__cuda_step_create(attn__cuda *c, const attn_layer_params *layer,
                                                  attn__cuda_step **out);
ATTN__CUDA_API void attn__cuda_step_destroy(attn__cuda_step *s);
ATTN__CUDA_API attn_status attn__cuda_step_build(attn__cuda_step *s, const attn_common_metadata *cm,
                                                 int num_blocks, const attn__cuda_plan *plan);
ATTN__CUDA_API int attn__cuda_step_splits(const attn__cuda_step *s);

typedef struct attn__cuda_fwd {
    const attn_layer_params *layer;
    const attn_common_metadata *common;
    const attn__cuda_step *step;
    const attn_kv_view *kv; /* data: an attn__cuda_mem *; scales: host memory */
    const attn__cuda_mem *q;
    int64_t q_offset;
    attn__cuda_mem *out;
    int64_t out_offset;
    attn__cuda_mem *lse;
    int64_t lse_offset;
} attn__cuda_fwd;

ATTN__CUDA_API attn_status attn__cuda_forward(attn__cuda_kernel *k, const attn__cuda_fwd *f);

/* ---- MLA (as attn__ocl_mla_*) ------------------------------------------------------- */

typedef struct attn__cuda_mla attn__cuda_mla;
typedef struct attn__cuda_mla_step attn__cuda_mla_step;

ATTN__CUDA_API attn_status attn__cuda_mla_create(attn__cuda *c, const attn_layer_params *layer,
                                                 attn__cuda_mla **out);
ATTN__CUDA_API void attn__cuda_mla_destroy(attn__cuda_mla *k);
ATTN__CUDA_API attn_status attn__cuda_mla_step_create(attn__cuda *c, const attn_layer_params *layer,
                                                      attn__cuda_mla_step **out);
ATTN__CUDA_API void attn__cuda_mla_step_destroy(attn__cuda_mla_step *s);
ATTN__CUDA_API attn_status attn__cuda_mla_step_build(attn__cuda_mla_step *s,
                                                     const attn_common_metadata *cm,
                                                     int num_decodes, int num_blocks,
                                                     const attn__cuda_plan *plan);
ATTN__CUDA_API int attn__cuda_mla_step_splits(const attn__cuda_mla_step *s);

typedef struct attn__cuda_mla_fwd {
    const attn_layer_params *layer;
    const attn_common_metadata *common;
    const attn__cuda_mla_step *step;
    const attn_kv_view *kv;
    const attn__cuda_mem *q;
    int64_t q_offset;
    attn__cuda_mem *out;
    int64_t out_offset;
    attn__cuda_mem *lse;
    int64_t lse_offset;
    const attn__cuda_mem *w_uk, *w_uv;
} attn__cuda_mla_fwd;

ATTN__CUDA_API attn_status attn__cuda_mla_mqa(attn__cuda_mla *k, const attn__cuda_mla_fwd *f);
ATTN__CUDA_API attn_status attn__cuda_mla_mha(attn__cuda_mla *k, const attn__cuda_mla_fwd *f);
/* As attn__ocl_mla_project: absorb or up-project T tokens on the stream. */
ATTN__CUDA_API attn_status attn__cuda_mla_project(attn__cuda *c, const attn_layer_params *layer,
                                                  int T, bool absorb, const attn__cuda_mem *in,
                                                  int64_t in_offset, const attn__cuda_mem *w,
                                                  attn__cuda_mem *out, int64_t out_offset);

#endif
