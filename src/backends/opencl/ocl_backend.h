/* OPENCL_ATTN as a backend of contract v2 (docs/design/contract-v2.md): the
 * runtime of opencl.h wrapped in the contract's device, kernel and builder
 * ops. ocl_device_ops.c is the device (an instance is an attn__ocl, memory
 * handles are attn__ocl_mem *), ocl_backend.c the descriptor, the kernel
 * and the builder (its metadata is a step on the device). */
#ifndef ATTN_OPENCL_OCL_BACKEND_H
#define ATTN_OPENCL_OCL_BACKEND_H

#include "attn/backend.h"
#include "backends/opencl/opencl.h"

extern const attn_backend attn__backend_opencl_attn;
extern const attn_backend_desc attn__desc_opencl_attn;
extern const attn_device_ops attn__device_opencl;
extern const attn_builder_ops attn__builder_opencl;

/* What the builder returns as the step's metadata: a host struct holding
 * the step uploaded to the device. The magic tells the kernel that what it
 * got is this builder's. */
#define ATTN__OCL_MD_MAGIC 0x4f434c4du /* "OCLM" */
typedef struct attn__ocl_md {
    uint32_t magic;
    attn__ocl *o;
    attn__ocl_step *step;
} attn__ocl_md;

/* The runtime device index an instance for cfg opens: a real "opencl:N"
 * platform names the platform probe's device N (matched to the runtime's
 * list by name), any other platform the config's device_index (0: the
 * runtime's default, the first GPU else the first device). */
attn_status attn__ocl_config_device(const attn_device_config *cfg, int *index);

#endif
