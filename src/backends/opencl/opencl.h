/* OPENCL_ATTN's runtime (internal API): OpenCL devices through the ICD
 * loader, device memory as opaque handles, the cache writes and paged
 * attention of the kernel dialect (src/backends/devkern/).
 *
 * Objects:
 * - an instance (attn__ocl): one device, one in-order queue, its kernels
 *   and scratch. Used by one thread at a time (as a CUDA stream is); open
 *   as many as needed. Every call is enqueued in order on its queue; work
 *   on the same buffers through two instances is ordered only by
 *   attn__ocl_sync (contract v2: one instance per engine). A kernel state
 *   and the steps it reads belong to one instance.
 * - device memory (attn__ocl_mem): a buffer of the device's process-wide
 *   context, usable by every instance on that device. The host never
 *   dereferences it; tensors are a buffer plus element offsets.
 * - a kernel (attn__ocl_kernel): one layer's state on an instance (its
 *   sinks and ALiBi slopes uploaded once).
 * - a step (attn__ocl_step): one batch's metadata on the device, built on
 *   the host from attn_common_metadata (checked, planned) and uploaded once
 *   for all layers of the step.
 * Per device and process there is one context and one program per (source,
 * build options): built at the first open, cached (thread-safe), a build
 * failure cached too and returned as ATTN_IMPORT_ERROR whose detail holds
 * the compiler's log.
 *
 * Every call checks its arguments (sizes against the buffers they address,
 * slots and block ids against the cache) before anything is enqueued: bad
 * input gets a status with detail and changes nothing. */
#ifndef ATTN_OPENCL_OPENCL_H
#define ATTN_OPENCL_OPENCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/layer.h"
#include "attn/metadata.h"
#include "attn/status.h"

typedef struct attn__ocl attn__ocl;
typedef struct attn__ocl_mem attn__ocl_mem;
typedef struct attn__ocl_step attn__ocl_step;

/* ---- devices and instances ------------------------------------------------ */

/* OpenCL devices usable here (available, with a compiler), in platform
 * order; 0 with ATTN_PLATFORM_UNAVAILABLE's detail set when there is none. */
int attn__ocl_device_count(void);

typedef struct attn__ocl_options {
    int device;                /* index below attn__ocl_device_count(); -1: the first GPU, else
                                  the first device */
    const char *build_options; /* appended to the kernel program's options (a distinct
                                  program); NULL: none */
} attn__ocl_options;

/* NULL options = defaults. ATTN_PLATFORM_UNAVAILABLE without OpenCL or
 * device; ATTN_UNSUPPORTED when the device lacks what the kernels need
 * (OpenCL C 1.2, local memory, work-group size); ATTN_IMPORT_ERROR when the
 * program does not build (detail: the log). */
attn_status attn__ocl_open(const attn__ocl_options *opt, attn__ocl **out);
void attn__ocl_close(attn__ocl *o);
/* "pthread-skylake-avx512-AMD EPYC ... (Portable Computing Language)". */
const char *attn__ocl_device_name(const attn__ocl *o);

/* Builds (or finds in the cache) a program from the given sources and
 * options on the instance's device; ATTN_IMPORT_ERROR with the compiler's
 * log when it does not build. Sources are concatenated as OpenCL does. */
attn_status attn__ocl_program_check(attn__ocl *o, const char *const *sources, int count,
                                    const char *options);
/* Programs built (clBuildProgram calls) in this process so far. */
unsigned attn__ocl_build_count(void);

/* ---- memory ------------------------------------------------------------------ */

/* A zeroed buffer of bytes (> 0) on the instance's device. */
attn_status attn__ocl_alloc(attn__ocl *o, size_t bytes, attn__ocl_mem **out);
void attn__ocl_free(attn__ocl_mem *m);
size_t attn__ocl_mem_size(const attn__ocl_mem *m);
/* Blocking copies (the host buffer may be reused on return), ordered after
 * everything enqueued before them. */
attn_status attn__ocl_copy_in(attn__ocl *o, attn__ocl_mem *dst, size_t dst_offset, const void *src,
                              size_t bytes);
attn_status attn__ocl_copy_out(attn__ocl *o, void *dst, const attn__ocl_mem *src, size_t src_offset,
                               size_t bytes);
/* Waits for everything enqueued on the instance. */
attn_status attn__ocl_sync(attn__ocl *o);
/* n elements of type elem at element offset `offset` of src, as float. */
attn_status attn__ocl_to_f32(attn__ocl *o, const attn__ocl_mem *src, int64_t offset, attn_elem elem,
                             size_t n, float *dst);

/* ---- cache writes ------------------------------------------------------------ */

/* attn_kv_write on the device: kv->data is an attn__ocl_mem *; k and v are
 * [num_tokens][num_kv_heads][head_size(_v)] elements of src starting
 * k_offset / v_offset elements into their buffers. The same result, bit
 * for bit, as the host write. (contract v2: attn_device_ops.kv_write with
 * attn_kv_write_args.) */
attn_status attn__ocl_kv_write(attn__ocl *o, const attn_kv_view *kv, const int64_t *slot_mapping,
                               int num_tokens, const attn__ocl_mem *k, int64_t k_offset,
                               const attn__ocl_mem *v, int64_t v_offset, attn_elem src);
/* attn_mla_write_latent on the device: latent [tokens][latent_dim] and rope
 * [tokens][rope_dim] (latent_dim + rope_dim == kv->head_size) elements of
 * src from their offsets. (contract v2: attn_device_ops.mla_write.) */
attn_status attn__ocl_mla_write(attn__ocl *o, const attn_kv_view *kv, const int64_t *slot_mapping,
                                int num_tokens, const attn__ocl_mem *latent, int64_t latent_offset,
                                const attn__ocl_mem *rope, int64_t rope_offset, int latent_dim,
                                int rope_dim, attn_elem src);

/* ---- attention ------------------------------------------------------------------ */

/* A layer's kernel state (contract v2: attn_kernel_ops.create): its
 * geometry and its sinks / ALiBi slopes, uploaded once here (the arrays
 * must not change while the state lives). */
typedef struct attn__ocl_kernel attn__ocl_kernel;
attn_status attn__ocl_kernel_create(attn__ocl *o, const attn_layer_params *layer,
                                    attn__ocl_kernel **out);
void attn__ocl_kernel_destroy(attn__ocl_kernel *k);

/* How a step's work is split: split_len keys per split-KV share (0 =
 * chosen from the device's size), max_splits (0 = no limit, 1 = never
 * split). */
typedef struct attn__ocl_plan {
    int split_len;
    int max_splits;
} attn__ocl_plan;

/* A step for layers of this geometry (heads, head sizes; the layer's
 * attention type decides which lengths are the keys). (contract v2: the
 * builder; create = builder create, build = builder build, the step is
 * the metadata the forward gets.) */
attn_status attn__ocl_step_create(attn__ocl *o, const attn_layer_params *layer,
                                  attn__ocl_step **out);
void attn__ocl_step_destroy(attn__ocl_step *s);
/* Checks what the kernels will read of cm (lengths, query_start_loc, every
 * block id against num_blocks), plans the tiles and splits and uploads
 * them; plan NULL = automatic. */
attn_status attn__ocl_step_build(attn__ocl_step *s, const attn_common_metadata *cm, int num_blocks,
                                 const attn__ocl_plan *plan);
/* Split-KV shares of the last build (1 = none). */
int attn__ocl_step_splits(const attn__ocl_step *s);

/* One forward call (contract v2: attn_forward_args with device handles). */
typedef struct attn__ocl_fwd {
    const attn_layer_params *layer; /* the kernel's geometry; scale, soft cap and window count */
    const attn_common_metadata *common; /* the host metadata the step was built from */
    const attn__ocl_step *step;
    const attn_kv_view *kv; /* data: an attn__ocl_mem *; scales: host memory */
    const attn__ocl_mem *q; /* [tokens][num_heads][head_size] from element q_offset */
    int64_t q_offset;
    attn__ocl_mem *out; /* [tokens][num_heads][head_size_v] */
    int64_t out_offset;
    attn__ocl_mem *lse; /* optional: float [tokens][num_heads], natural log */
    int64_t lse_offset;
} attn__ocl_fwd;

/* Paged attention with REFERENCE's semantics; enqueued, not waited for. */
attn_status attn__ocl_forward(attn__ocl_kernel *k, const attn__ocl_fwd *f);

/* ---- MLA (kd_mla.cl: TRITON_MLA's kernels) ------------------------------------- */

/* A layer's MLA state (contract v2: attn_kernel_ops.create of an MLA
 * backend): heads, kv_lora_rank (<= KD_MLA_MAX_R), rope and the activation
 * dtype; with qk_nope_head_dim and v_head_dim also forward_mha, whose
 * decompressed keys (nope + rope) and values take the standard kernel's
 * head sizes. */
typedef struct attn__ocl_mla attn__ocl_mla;
attn_status attn__ocl_mla_create(attn__ocl *o, const attn_layer_params *layer, attn__ocl_mla **out);
void attn__ocl_mla_destroy(attn__ocl_mla *k);

/* An MLA step (contract v2: the MLA builder's device metadata): the
 * decodes' tiles and split-KV shares, the prefills' keys to decompress and
 * their standard attention step, uploaded once for every layer. Requests
 * [0, num_decodes) are forward_mqa's, the rest forward_mha's (decodes
 * first, as the MLA builders order them); num_decodes -1: both entry points
 * serve every request (a call without MLA metadata). */
typedef struct attn__ocl_mla_step attn__ocl_mla_step;
attn_status attn__ocl_mla_step_create(attn__ocl *o, const attn_layer_params *layer,
                                      attn__ocl_mla_step **out);
void attn__ocl_mla_step_destroy(attn__ocl_mla_step *s);
attn_status attn__ocl_mla_step_build(attn__ocl_mla_step *s, const attn_common_metadata *cm,
                                     int num_decodes, int num_blocks, const attn__ocl_plan *plan);
/* Split-KV shares of the decodes in the last build (1 = none). */
int attn__ocl_mla_step_splits(const attn__ocl_mla_step *s);

/* One MLA call (contract v2: attn_mla_args with device handles). Tensors
 * are indexed by the token's place in the batch; each entry point writes
 * only its requests' rows. */
typedef struct attn__ocl_mla_fwd {
    const attn_layer_params *layer;     /* scale counts per call */
    const attn_common_metadata *common; /* what the step was built from */
    const attn__ocl_mla_step *step;
    const attn_kv_view *kv; /* the latent cache: data an attn__ocl_mem *; k_scale for fp8 */
    /* forward_mqa: q [tokens][heads][kv_lora_rank + rope] (absorbed), out
     * [tokens][heads][kv_lora_rank]; forward_mha: q [tokens][heads][nope +
     * rope], out [tokens][heads][v_head_dim] */
    const attn__ocl_mem *q;
    int64_t q_offset;
    attn__ocl_mem *out;
    int64_t out_offset;
    attn__ocl_mem *lse; /* optional: float [tokens][heads], natural log */
    int64_t lse_offset;
    /* forward_mha: [heads][nope][kv_lora_rank] and [heads][kv_lora_rank][v_head_dim] */
    const attn__ocl_mem *w_uk, *w_uv;
} attn__ocl_mla_fwd;

/* Decode over the latent cache; enqueued, not waited for. */
attn_status attn__ocl_mla_mqa(attn__ocl_mla *k, const attn__ocl_mla_fwd *f);
/* Prefill: the latent rows decompressed through W_UK / W_UV, then causal
 * attention by attn_kd_paged_attention; enqueued, not waited for. */
attn_status attn__ocl_mla_mha(attn__ocl_mla *k, const attn__ocl_mla_fwd *f);

/* The projections around forward_mqa for T tokens (the first T rows of
 * in from in_offset): absorb (q [T][H][N + P] through w = W_UK into
 * q_absorbed [T][H][R + P], the rope part copied) or up-projection (the
 * latent output [T][H][R] through w = W_UV into out [T][H][V]); offsets
 * in elements of the layer's dtype; in and out must not overlap.
 * Enqueued, not waited for (attn_kd_mla_project). */
attn_status attn__ocl_mla_project(attn__ocl *o, const attn_layer_params *layer, int T, bool absorb,
                                  const attn__ocl_mem *in, int64_t in_offset,
                                  const attn__ocl_mem *w, attn__ocl_mem *out, int64_t out_offset);

#endif
