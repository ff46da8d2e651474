/* libattn_cuda.so as backends of contract v2 (docs/design/contract-v2.md):
 * FLASH_ATTN, TRITON_ATTN and TRITON_MLA over the module's runtime
 * (cuda_rt.h). cuda_device_ops.c is the device (an instance is an
 * attn__cuda_inst: one runtime instance, one stream, and the steps its
 * kernels share), cuda_backend.c the exported objects, their kernel ops
 * and attn_module_init, which binds each object's descriptor to the
 * catalog's (libattn's, handed over in attn_module_host: the module states
 * no fact of its own) and imports the driver. */
#ifndef ATTN_CUDA_CUDA_BACKEND_H
#define ATTN_CUDA_CUDA_BACKEND_H

#include "attn/backend.h"
#include "backends/cuda/cuda_rt.h"

/* One device instance (what the device's open returns). The steps are the
 * host plans of the step's batch and their uploaded words, one per layer
 * geometry: every layer of a step plans the same words, so only the first
 * one uploads (attn__cuda_upload_words compares). */
typedef struct attn__cuda_shared attn__cuda_shared;
typedef struct attn__cuda_inst {
    attn__cuda *c;
    attn__cuda_shared *shared;
} attn__cuda_inst;

extern const attn_device_ops attn__cuda_device_ops;

/* Copies the module's failure detail into libattn's attn_last_error()
 * (through the host table attn_module_init received) and returns st. */
attn_status attn__cuda_report(attn_status st);

/* The step of inst for a standard layer (created on first use, shared by
 * the layers of that geometry) and the MLA step for an MLA layer. */
attn_status attn__cuda_inst_step(attn__cuda_inst *inst, const attn_layer_params *layer,
                                 attn__cuda_step **out);
attn_status attn__cuda_inst_mla_step(attn__cuda_inst *inst, const attn_layer_params *layer,
                                     attn__cuda_mla_step **out);

#endif
