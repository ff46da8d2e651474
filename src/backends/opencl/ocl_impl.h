/* Inside the OpenCL runtime: the process-wide device table (context and
 * program cache per device), the instance and buffer structs, and the
 * launch helpers the attention and write files share. */
#ifndef ATTN_OPENCL_OCL_IMPL_H
#define ATTN_OPENCL_OCL_IMPL_H

#include <pthread.h>

#include "backends/devkern/kd_launch.h"
#include "backends/devkern/kd_params.h"
#include "backends/devkern/kd_plan.h"
#include "backends/devkern/kd_step.h"
#include "backends/opencl/ocl_api.h"
#include "backends/opencl/opencl.h"

#define ATTN__OCL_MAX_DEVICES 16

typedef struct attn__ocl_prog attn__ocl_prog;

/* One OpenCL device, for the life of the process. */
typedef struct attn__ocl_dev {
    attn__cl_platform_id platform;
    attn__cl_device_id id;
    char name[384];
    char c_version[64];
    bool gpu;
    unsigned compute_units;
    uint64_t local_mem, max_alloc, max_constant;
    size_t max_wg;
    pthread_mutex_t lock;  /* context creation and the program list */
    attn__cl_context ctx;  /* created at the first open, never released */
    attn__ocl_prog *progs; /* built programs (and failed builds), never released */
} attn__ocl_dev;

/* The device table (built once); NULL with the reason set when OpenCL or
 * a device is missing. */
attn__ocl_dev *attn__ocl_devices(int *count);
/* The device's context, created once. */
attn_status attn__ocl_dev_context(attn__ocl_dev *d);
/* The program of these sources and options on d, built once per process;
 * a failed build is remembered and returns the same status and log. */
attn_status attn__ocl_dev_program(attn__ocl_dev *d, const char *const *sources, int count,
                                  const char *options, attn__cl_program *out);

struct attn__ocl {
    const attn__cl_api *cl;
    attn__ocl_dev *dev;
    attn__cl_command_queue queue;
    /* the dialect program's kernels, by attn__kd_kernel (one set per
     * instance: argument setting is not thread-safe on a shared cl_kernel) */
    attn__cl_kernel k[ATTN__KD_KERNEL_COUNT];
    /* scratch, grown on demand: split-KV partials, the write's slots and
     * inverse scales */
    attn__ocl_mem *part, *slots, *scales;
};

struct attn__ocl_mem {
    attn__ocl_dev *dev;
    attn__cl_mem mem;
    size_t size;
};

/* Buffer of at least `bytes` in *slot (reallocated when smaller). */
attn_status attn__ocl_scratch(attn__ocl *o, attn__ocl_mem **slot, size_t bytes);

/* A plan's words into *meta (grown when too small; blocking copy). */
attn_status attn__ocl_upload_words(attn__ocl *o, attn__ocl_mem **meta, const attn__kd_plan *p);

/* Enqueues one launch (kd_launch.h): its arguments in order (buffers are
 * attn__ocl_mem *), its groups of KD_WG work-items. */
attn_status attn__ocl_run(attn__ocl *o, const attn__kd_args *l);

/* Largest element index + 1 a paged view addresses: its K rows of
 * head_size and, when dv > 0, its V rows of dv elements. False on overflow
 * or a malformed view. */
bool attn__ocl_view_extent(const attn_kv_view *kv, int dv, int64_t *elems);

/* m's elements [off, off + elems) of esz bytes lie in it, and m is on o's
 * device; who prefixes the message. */
attn_status attn__ocl_check_mem(const attn__ocl *o, const char *who, const attn__ocl_mem *m,
                                int64_t off, int64_t elems, size_t esz, const char *what);

/* The instance's operations for the shared steps; who prefixes their
 * messages. */
attn__kd_rt attn__ocl_kd_rt(attn__ocl *o, const char *who);

#endif
