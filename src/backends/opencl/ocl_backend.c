/* OPENCL_ATTN: the descriptor, the kernel and the builder over the OpenCL
 * runtime (opencl.h), on the device of ocl_device_ops.c.
 *
 * The descriptor states what the kernels of src/backends/devkern do
 * (docs/design/device-kernels.md) and nothing more: paged standard
 * attention over the cache (decoder and cross attention; no direct K/V,
 * so no encoder self-attention), fp32/fp16/bf16 activations, 16/32-bit
 * and fp8 caches with per-tensor or per-head scales, head sizes that are
 * multiples of 8 up to 256, any block size, sinks, soft-cap, sliding
 * window, ALiBi, the natural-log LSE for DCP. Not batch invariant: the
 * split-KV plan depends on the batch.
 *
 * The builder plans on the host and uploads once per build (the runtime's
 * step); its metadata names the instance it was uploaded through. A call
 * without this builder's metadata (DCP's windowed calls) gets a step of
 * the kernel's own, built for the call. Kernel calls enqueue and return. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/abi.h"
#include "backends/catalog/catalog.h"
#include "backends/devkern/kd_params.h"
#include "backends/opencl/ocl_backend.h"
#include "backends/reference/reference.h"
#include "device/device_impl.h"
#include "metadata/builders.h"
#include "util/error.h"

/* ---- the kernel ------------------------------------------------------------------ */

typedef struct ocl_kern {
    attn__ocl *o;
    attn__ocl_kernel *k;
    attn__ocl_step *own; /* for calls without the builder's metadata */
} ocl_kern;

static attn__ocl *ocl_instance(const void *device_state, const char *who)
{
    if (!device_state)
        attn__fail(ATTN_INVALID_ARGUMENT,
                   "OPENCL_ATTN %s: runs on an instance of its OpenCL device "
                   "(attn_device_open(OPENCL_ATTN)), not on the host device",
                   who);
    return (attn__ocl *)device_state;
}

static void ocl_destroy(void *impl)
{
    ocl_kern *s = impl;
    if (!s) return;
    attn__ocl_kernel_destroy(s->k);
    attn__ocl_step_destroy(s->own);
    free(s);
}

static attn_status ocl_create(const attn_kernel_init *init, void **impl)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(impl);
    *impl = NULL;
    attn__ocl *o = ATTN_STRUCT_HAS(attn_kernel_init, init, device_state)
                       ? ocl_instance(init->device_state, "kernel")
                       : ocl_instance(NULL, "kernel");
    if (!o) return ATTN_INVALID_ARGUMENT;
    ocl_kern *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "OPENCL_ATTN kernel: out of memory");
    s->o = o;
    attn_status st = attn__ocl_kernel_create(o, init->layer, &s->k);
    if (st == ATTN_OK) st = attn__ocl_step_create(o, init->layer, &s->own);
    if (st != ATTN_OK) {
        ocl_destroy(s);
        return st;
    }
    *impl = s;
    return ATTN_OK;
}

/* The step a call reads: the builder's (checked to be this builder's, on
 * this instance), else the kernel's own built for the call. */
static attn_status ocl_step_of(ocl_kern *s, const attn_forward_args *a, const attn__ocl_step **out)
{
    const attn__ocl_md *md = a->metadata;
    if (!md) {
        attn_status st = attn__ocl_step_build(s->own, a->common, a->kv->num_blocks, NULL);
        *out = s->own;
        return st;
    }
    if (md->magic != ATTN__OCL_MD_MAGIC)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "OPENCL_ATTN: the call's metadata is not from OPENCL_ATTN's builder");
    if (md->o != s->o)
        return attn__fail(ATTN_BAD_STATE, "OPENCL_ATTN: the metadata was uploaded through another "
                                          "device instance (queue) than the kernel's");
    *out = md->step;
    return ATTN_OK;
}

static attn_status ocl_forward(void *impl, const attn_forward_args *a)
{
    ATTN__CHECK_NULL(impl);
    ATTN__CHECK_NULL(a);
    ATTN__CHECK_NULL(a->common);
    if (a->k || a->v)
        return attn__fail(ATTN_UNSUPPORTED,
                          "OPENCL_ATTN reads K/V from the paged cache only "
                          "(direct K/V: encoder self-attention is not supported)");
    if (!a->kv) return attn__fail(ATTN_NULL_ARGUMENT, "OPENCL_ATTN: no KV cache view");
    ocl_kern *s = impl;
    const attn__ocl_step *step = NULL;
    attn_status st = ocl_step_of(s, a, &step);
    if (st != ATTN_OK) return st;
    attn__ocl_fwd f = {.layer = a->layer,
                       .common = a->common,
                       .step = step,
                       .kv = a->kv,
                       .q = a->q,
                       .q_offset = a->q_offset,
                       .out = a->out,
                       .out_offset = a->out_offset,
                       .lse = (attn__ocl_mem *)a->lse,
                       .lse_offset = a->lse_offset};
    return attn__ocl_forward(s->k, &f);
}

static const char *ocl_variant(void)
{
    return "opencl-c-1.2";
}

static const attn_kernel_ops ocl_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .create = ocl_create,
    .destroy = ocl_destroy,
    .forward = ocl_forward,
    .variant = ocl_variant,
    .kind = ATTN_KERNEL_STANDARD,
};

/* ---- the builder ------------------------------------------------------------------ */

typedef struct ocl_builder {
    attn__builder_limits lim; /* first: the shared build checks read it */
    int num_blocks;
    attn__ocl_md md;
} ocl_builder;

static const char ocl_builder_name[] = "OpenCLAttentionMetadataBuilder";

static void ocl_builder_destroy(void *state)
{
    ocl_builder *b = state;
    if (!b) return;
    attn__ocl_step_destroy(b->md.step);
    free(b);
}

/* One build of the largest batch the init allows (every request as long as
 * a block table row holds, the tokens spread over them), so the step's
 * host and device buffers are allocated here and a step's build does not
 * allocate; the plan of a real batch needs about as many words as this
 * one (the runtime grows the buffers by half when one needs more). */
static attn_status ocl_builder_reserve(ocl_builder *b, const attn_builder_init *init)
{
    int R = init->max_num_reqs < init->max_num_tokens ? init->max_num_reqs : init->max_num_tokens;
    int64_t keys = (int64_t)init->max_blocks_per_req * init->block_size;
    if (keys > ATTN_MAX_SEQ_LEN) keys = ATTN_MAX_SEQ_LEN;
    int64_t stride = (keys + init->block_size - 1) / init->block_size;
    /* beyond 64 MiB of block table the step grows when a batch needs it */
    if (R < 1 || keys < 1 || (int64_t)R * stride > ((int64_t)1 << 24)) return ATTN_OK;
    int32_t *qsl = calloc((size_t)R + 1, sizeof *qsl), *seq = calloc((size_t)R, sizeof *seq);
    int32_t *bt = calloc((size_t)R * (size_t)stride, sizeof *bt);
    attn_status st = ATTN_OK;
    if (!qsl || !seq || !bt)
        st = attn__fail(ATTN_OUT_OF_MEMORY, "OPENCL_ATTN builder: out of memory");
    for (int r = 0; st == ATTN_OK && r < R; r++) {
        int64_t q = init->max_num_tokens / R + (r < init->max_num_tokens % R);
        qsl[r + 1] = qsl[r] + (int32_t)(q < keys ? q : keys);
        seq[r] = (int32_t)keys;
    }
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = R,
                               .num_actual_tokens = qsl ? qsl[R] : 0,
                               .max_query_len = qsl ? qsl[1] : 0,
                               .max_seq_len = (int)keys,
                               .block_table = bt,
                               .block_table_stride = (int)stride,
                               .causal = true,
                               .block_size = init->block_size,
                               .encoder_seq_lens = seq};
    if (st == ATTN_OK) st = attn__ocl_step_build(b->md.step, &cm, b->num_blocks, NULL);
    free(qsl);
    free(seq);
    free(bt);
    return st;
}

static attn_status ocl_builder_create(const attn_builder_init *init, void **state)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(init->layer);
    ATTN__CHECK_NULL(state);
    *state = NULL;
    /* a tool that has the instance but not its state (device_state is the
     * core's to fill) names the instance alone */
    void *ds = init->device_state;
    if (!ds && init->device && init->device->ops == &attn__device_opencl) ds = init->device->state;
    attn__ocl *o = ocl_instance(ds, "builder");
    if (!o) return ATTN_INVALID_ARGUMENT;
    if (init->max_num_reqs < 1 || init->max_num_tokens < 1 || init->block_size < 1 ||
        init->num_blocks < 1 || init->max_blocks_per_req < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "OPENCL_ATTN builder: max_num_reqs %d, max_num_tokens %d, block_size "
                          "%d, num_blocks %d and max_blocks_per_req %d must be positive",
                          init->max_num_reqs, init->max_num_tokens, init->block_size,
                          init->num_blocks, init->max_blocks_per_req);
    if (init->max_num_reqs > ATTN_MAX_NUM_REQS || init->max_num_tokens > ATTN_MAX_SEQ_LEN)
        return attn__fail(ATTN_OUT_OF_MEMORY,
                          "OPENCL_ATTN builder: %d requests / %d tokens is too large (at most %d / "
                          "%d)",
                          init->max_num_reqs, init->max_num_tokens, ATTN_MAX_NUM_REQS,
                          ATTN_MAX_SEQ_LEN);
    ocl_builder *b = calloc(1, sizeof *b);
    if (!b) return attn__fail(ATTN_OUT_OF_MEMORY, "OPENCL_ATTN builder: out of memory");
    attn__limits_init(&b->lim, ocl_builder_name, init, ATTN_CG_NEVER);
    b->num_blocks = init->num_blocks;
    b->md = (attn__ocl_md){.magic = ATTN__OCL_MD_MAGIC, .o = o};
    attn_status st = attn__ocl_step_create(o, init->layer, &b->md.step);
    if (st == ATTN_OK) st = ocl_builder_reserve(b, init);
    if (st != ATTN_OK) {
        ocl_builder_destroy(b);
        return st;
    }
    *state = b;
    return ATTN_OK;
}

static attn_status ocl_builder_build(void *state, int common_prefix_len,
                                     const attn_common_metadata *cm, bool fast_build,
                                     const void **md)
{
    (void)common_prefix_len; /* no cascade: every request attends its prefix itself */
    (void)fast_build;
    ATTN__CHECK_NULL(state);
    ATTN__CHECK_NULL(cm);
    ATTN__CHECK_NULL(md);
    ocl_builder *b = state;
    attn_status st = attn__limits_build_args(&b->lim, cm);
    if (st == ATTN_OK) st = attn__ocl_step_build(b->md.step, cm, b->num_blocks, NULL);
    if (st != ATTN_OK) return st;
    *md = &b->md;
    return ATTN_OK;
}

static int ocl_describe(const void *md, char *buf, size_t size)
{
    const attn__ocl_md *m = md;
    int splits = m && m->magic == ATTN__OCL_MD_MAGIC ? attn__ocl_step_splits(m->step) : 0;
    return snprintf(buf, buf ? size : 0,
                    "{\"kind\": \"opencl\", \"reads\": \"step uploaded to the device\", "
                    "\"split_kv\": %d}",
                    splits);
}

const attn_builder_ops attn__builder_opencl = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = ocl_builder_name,
    .cg_support = ATTN_CG_NEVER,
    .reorder_batch_threshold = 0,
    .supports_update_block_table = false,
    .create = ocl_builder_create,
    .destroy = ocl_builder_destroy,
    .build = ocl_builder_build,
    .describe = ocl_describe,
};

/* ---- the descriptor ---------------------------------------------------------------- */

/* An OpenCL device of this machine: the kernels run there whatever the
 * platform (PoCL serves a CPU machine); a simulated machine of another
 * kind has none. */
static const char *ocl_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    const attn_platform *p = c ? c->platform : NULL;
    attn_platform_kind k = attn_platform_get_kind(p);
    if (p && attn_platform_is_simulated(p) && k != ATTN_PLATFORM_OPENCL) {
        snprintf(buf, size, "OPENCL_ATTN runs on an OpenCL device; %s is a simulated %s machine",
                 attn_platform_name(p), attn_platform_kind_name(k));
        return buf;
    }
    const char *why = attn__ocl_unavailable();
    if (!why) return NULL;
    snprintf(buf, size, "OPENCL_ATTN needs an OpenCL device: %s", why);
    return buf;
}

const attn_backend_desc attn__desc_opencl_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "OPENCL_ATTN",
    .platforms = "OpenCL (any OpenCL C 1.2 device; PoCL on a CPU)",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO) | ATTN_KV_BIT(ATTN_KV_FLOAT16) |
                 ATTN_KV_BIT(ATTN_KV_BFLOAT16) | ATTN_KV_BIT(ATTN_KV_FP8) |
                 ATTN_KV_BIT(ATTN_KV_FP8_E4M3) | ATTN_KV_BIT(ATTN_KV_FP8_E5M2),
    .n_block_sizes = 0, /* any: the kernels walk keys through the block table */
    .heads = {.min = 8, .max = KD_MAX_HEAD, .multiple_of = 8},
    .supports_sink = true,
    .supports_per_head_quant_scales = true,
    .supports_non_causal = true,
    .supports_batch_invariance = false,
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER) | ATTN_TYPE_BIT(ATTN_TYPE_ENCODER_DECODER),
    .cg_support = ATTN_CG_NEVER,
    .can_return_lse_for_decode = true,
    .lse_base = ATTN_LSE_BASE_E,
    .required_layout = ATTN_LAYOUT_DEFAULT, /* NHD or HND: the kernels read any strides */
    .supports_combination = ocl_combination,
    .kv_cache_shape = attn__kv_shape_split,
    .kv_stride_order = attn__stride_order_flash,
    .builder = &attn__builder_opencl,
    .supports_dcp = true,
    .supports_sliding_window = true,
};

const attn_backend attn__backend_opencl_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &attn__desc_opencl_attn,
    .kernel = &ocl_kernel,
    .device = &attn__device_opencl,
};
