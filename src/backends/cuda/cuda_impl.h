/* Inside the CUDA module: the process-wide device table (primary context
 * and module cache per device), the instance and buffer structs, and the
 * helpers the attention, write and MLA files share. */
#ifndef ATTN_CUDA_CUDA_IMPL_H
#define ATTN_CUDA_CUDA_IMPL_H

#include <pthread.h>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_rt.h"
#include "backends/devkern/kd_launch.h"
#include "backends/devkern/kd_params.h"
#include "backends/devkern/kd_plan.h"
#include "backends/devkern/kd_step.h"

#define ATTN__CUDA_MAX_DEVICES 64

typedef struct attn__cuda_modl attn__cuda_modl;

/* One device for the life of the process. */
typedef struct attn__cuda_dev {
    int ordinal;
    attn__cu_device dev;
    attn__cu_ctx ctx; /* the primary context, retained at the first open, never released */
    char name[320];
    int cc, sm_count;
    pthread_mutex_t lock;  /* context retain and the module list */
    attn__cuda_modl *mods; /* loaded module images (and failed loads), never unloaded */
} attn__cuda_dev;

struct attn__cuda {
    const attn__cu_api *cu;
    attn__cuda_dev *dev;
    attn__cu_stream stream;
    attn__cu_func f[ATTN__KD_KERNEL_COUNT];
    /* scratch, grown on demand: split-KV partials, the writes' slots and
     * inverse scales */
    attn__cuda_mem *part, *slots, *scales;
};

struct attn__cuda_mem {
    attn__cuda_dev *dev;
    attn__cu_ptr ptr;
    size_t size;
    /* a step buffer's words as last uploaded (attn__cuda_upload_words) */
    int32_t *shadow;
    size_t shadow_n;
};

/* Makes the instance's context current on this thread for one call. */
attn_status attn__cuda_enter(const attn__cuda_dev *d);
void attn__cuda_leave(void);

/* Buffer of at least bytes in *slot (reallocated when smaller). */
attn_status attn__cuda_scratch(attn__cuda *c, attn__cuda_mem **slot, size_t bytes);
/* A plan's words into *meta (grown when too small); no copy when *meta
 * holds them already (the layers of a step plan the same words). */
attn_status attn__cuda_upload_words(attn__cuda *c, attn__cuda_mem **meta, const attn__kd_plan *p);
/* m's range [off, off + elems) of esz-byte elements lies in it and on c's
 * device. */
attn_status attn__cuda_check_mem(const attn__cuda *c, const attn__cuda_mem *m, int64_t off,
                                 int64_t elems, size_t esz, const char *what);
/* Enqueues one launch (kd_launch.h) on the instance's stream. */
attn_status attn__cuda_run(attn__cuda *c, const attn__kd_args *l);

/* The instance's operations for the shared steps; who prefixes their
 * messages. */
attn__kd_rt attn__cuda_kd_rt(attn__cuda *c, const char *who);

/* attn_elem of an activation dtype. */
static inline attn_elem attn__cuda_dtype_elem(attn_dtype d)
{
    return d == ATTN_DTYPE_FP16   ? ATTN_ELEM_F16
           : d == ATTN_DTYPE_BF16 ? ATTN_ELEM_BF16
                                  : ATTN_ELEM_F32;
}

#endif
