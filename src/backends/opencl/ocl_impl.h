/* Inside the OpenCL runtime: the process-wide device table (context and
 * program cache per device), the instance and buffer structs, and the
 * launch helpers the attention and write files share. */
#ifndef ATTN_OPENCL_OCL_IMPL_H
#define ATTN_OPENCL_OCL_IMPL_H

#include <pthread.h>

#include "backends/devkern/kd_params.h"
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

/* The kernels of the dialect program (one set per instance: argument
 * setting is not thread-safe on a shared cl_kernel). */
enum { ATTN__K_ATTN, ATTN__K_MERGE, ATTN__K_WRITE, ATTN__K_TO_F32, ATTN__K_COUNT };

struct attn__ocl {
    const attn__cl_api *cl;
    attn__ocl_dev *dev;
    attn__cl_command_queue queue;
    attn__cl_kernel k[ATTN__K_COUNT];
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

/* Kernel arguments in order: each helper sets the next index. */
typedef struct attn__ocl_args {
    attn__ocl *o;
    attn__cl_kernel k;
    attn__cl_uint next;
    attn__cl_int err;
} attn__ocl_args;

void attn__ocl_arg_mem(attn__ocl_args *a, const attn__ocl_mem *m); /* NULL: a null buffer */
void attn__ocl_arg_i32(attn__ocl_args *a, int32_t v);
void attn__ocl_arg_i64(attn__ocl_args *a, int64_t v);
void attn__ocl_arg_f32(attn__ocl_args *a, float v);
/* Enqueues groups[0..2] work-groups of KD_WG work-items. */
attn_status attn__ocl_launch(attn__ocl_args *a, const char *what, const size_t groups[3]);

/* Largest element index + 1 a paged view addresses: its K rows of
 * head_size and, when dv > 0, its V rows of dv elements. False on overflow
 * or a malformed view. */
bool attn__ocl_view_extent(const attn_kv_view *kv, int dv, int64_t *elems);

#endif
