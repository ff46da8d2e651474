/* FLASH_ATTN, TRITON_ATTN and TRITON_MLA exported by libattn_cuda.so.
 *
 * The descriptors are the catalog's: attn_module_init points each exported
 * object's desc at libattn's catalog object of that name, so every fact
 * (KV layout and stride order, block and head sizes, dtypes, fp8, sinks,
 * soft-cap, window, cascade, LSE for DCP) and every builder is stated once,
 * in src/backends/catalog. The kernels serve what those descriptors
 * accept: the dialect's kernels read any view strides (FLASH_ATTN's
 * (2, blocks, bs, heads, D) in NHD or HND order, TRITON_ATTN's
 * (blocks, 2, bs, heads, D)) and any block size. A cascade build
 * (FLASH_ATTN's common prefix) is served by attending each request's whole
 * prefix through its block table: the same result.
 *
 * The builders are therefore the catalog's host builders; the kernels read
 * the common metadata and plan the device step on the host at each call
 * (cheap), sharing one step per instance and layer geometry: the first
 * layer of a step uploads the words, the others find them unchanged
 * (attn__cuda_upload_words). Nothing synchronises the host inside a
 * forward. The core's self-test runs on the device (.kind).
 *
 * Loading as vLLM imports: init fails with the driver's import reason
 * where libcuda.so.1 cannot be loaded (this is what resolving the locator
 * to run the code reports); before init the objects can be read (kernel,
 * device) without a driver, which is how "backed by code" is known. */
#include <stdlib.h>
#include <string.h>

#include "attn/abi.h"
#include "attn/mla.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"

static const attn_module_host *g_host;

attn_status attn__cuda_report(attn_status st)
{
    if (st != ATTN_OK && g_host) g_host->fail(st, attn__cuda_last_error());
    return st;
}

/* ---- standard attention (FLASH_ATTN, TRITON_ATTN) ------------------------------------ */

/* A layer's kernel on an instance: the standard kernel and its step, or
 * (TRITON_MLA) the MLA kernel and its step. */
typedef struct cuda_kern {
    attn__cuda_inst *inst;
    attn__cuda_kernel *k;
    attn__cuda_step *step;
    attn__cuda_mla *mla;
    attn__cuda_mla_step *mla_step;
} cuda_kern;

static attn__cuda_inst *instance_of(const attn_kernel_init *init)
{
    return ATTN_STRUCT_HAS(attn_kernel_init, init, device_state) ? init->device_state : NULL;
}

static void kern_destroy(void *impl)
{
    cuda_kern *s = impl;
    if (!s) return;
    attn__cuda_kernel_destroy(s->k);
    attn__cuda_mla_destroy(s->mla);
    free(s);
}

static attn_status kern_create(const attn_kernel_init *init, void **impl, bool mla)
{
    if (!init || !impl || !init->layer)
        return attn__cuda_report(
            attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA %skernel: NULL", mla ? "MLA " : ""));
    *impl = NULL;
    attn__cuda_inst *inst = instance_of(init);
    if (!inst)
        return attn__cuda_report(attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                                                 "libattn_cuda.so: %s runs on an instance of its "
                                                 "CUDA device, not on the host device",
                                                 mla ? "TRITON_MLA" : "the kernel"));
    cuda_kern *s = calloc(1, sizeof *s);
    if (!s) return attn__cuda_report(attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA: out of memory"));
    s->inst = inst;
    attn_status st = mla ? attn__cuda_mla_create(inst->c, init->layer, &s->mla)
                         : attn__cuda_kernel_create(inst->c, init->layer, &s->k);
    if (st == ATTN_OK)
        st = mla ? attn__cuda_inst_mla_step(inst, init->layer, &s->mla_step)
                 : attn__cuda_inst_step(inst, init->layer, &s->step);
    if (st != ATTN_OK) {
        kern_destroy(s);
        return attn__cuda_report(st);
    }
    *impl = s;
    return ATTN_OK;
}

static attn_status std_create(const attn_kernel_init *init, void **impl)
{
    return kern_create(init, impl, false);
}

static attn_status std_forward(void *impl, const attn_forward_args *a)
{
    cuda_kern *s = impl;
    if (!s || !a || !a->common || !a->kv)
        return attn__cuda_report(attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA forward: NULL"));
    if (a->k || a->v)
        return attn__cuda_report(attn__cuda_fail(
            ATTN_UNSUPPORTED, "libattn_cuda.so reads K/V from the paged cache only (direct K/V: "
                              "encoder self-attention without a cache is not supported)"));
    attn_status st = attn__cuda_step_build(s->step, a->common, a->kv->num_blocks, NULL);
    if (st != ATTN_OK) return attn__cuda_report(st);
    attn__cuda_fwd f = {.layer = a->layer,
                        .common = a->common,
                        .step = s->step,
                        .kv = a->kv,
                        .q = a->q,
                        .q_offset = a->q_offset,
                        .out = a->out,
                        .out_offset = a->out_offset,
                        .lse = (attn__cuda_mem *)a->lse,
                        .lse_offset = a->lse_offset};
    return attn__cuda_report(attn__cuda_forward(s->k, &f));
}

static const char *cuda_variant(void)
{
    return "cuda-portable";
}

static const attn_kernel_ops cuda_std_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .create = std_create,
    .destroy = kern_destroy,
    .forward = std_forward,
    .variant = cuda_variant,
    .kind = ATTN_KERNEL_STANDARD,
};

/* ---- MLA (TRITON_MLA) ------------------------------------------------------------------ */

static attn_status mla_create(const attn_kernel_init *init, void **impl)
{
    return kern_create(init, impl, true);
}

/* The decodes of the call: the MLA builder's split (attn/mla.h), else all
 * requests for forward_mqa and none for forward_mha. */
static int num_decodes_of(const attn_mla_args *a, bool mha)
{
    const attn_mla_metadata *md = a->metadata;
    if (md && md->magic == ATTN_MLA_METADATA_MAGIC) return md->num_decodes;
    return mha ? 0 : a->common->num_reqs;
}

static attn_status mla_call(void *impl, const attn_mla_args *a, bool mha)
{
    cuda_kern *s = impl;
    if (!s || !a || !a->common || !a->kv)
        return attn__cuda_report(attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA: NULL"));
    attn_status st = attn__cuda_mla_step_build(s->mla_step, a->common, num_decodes_of(a, mha),
                                               a->kv->num_blocks, NULL);
    if (st != ATTN_OK) return attn__cuda_report(st);
    attn__cuda_mla_fwd f = {.layer = a->layer,
                            .common = a->common,
                            .step = s->mla_step,
                            .kv = a->kv,
                            .q = a->q,
                            .q_offset = a->q_offset,
                            .out = a->out,
                            .out_offset = a->out_offset,
                            .lse = (attn__cuda_mem *)a->lse,
                            .lse_offset = a->lse_offset,
                            .w_uk = a->w_uk,
                            .w_uv = a->w_uv};
    return attn__cuda_report(mha ? attn__cuda_mla_mha(s->mla, &f) : attn__cuda_mla_mqa(s->mla, &f));
}

static attn_status mla_mqa(void *impl, const attn_mla_args *a)
{
    return mla_call(impl, a, false);
}

static attn_status mla_mha(void *impl, const attn_mla_args *a)
{
    return mla_call(impl, a, true);
}

/* The projections around forward_mqa (attn_kernel_mla_forward on the device). */
static attn_status mla_project(void *impl, const attn_layer_params *layer, int num_tokens,
                               bool absorb, const void *in, int64_t in_offset, const void *w,
                               void *out, int64_t out_offset)
{
    cuda_kern *s = impl;
    if (!s) return attn__cuda_report(attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA: NULL"));
    return attn__cuda_report(attn__cuda_mla_project(s->inst->c, layer, num_tokens, absorb, in,
                                                    in_offset, w, out, out_offset));
}

static const attn_kernel_ops cuda_mla_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .create = mla_create,
    .destroy = kern_destroy,
    .forward_mqa = mla_mqa,
    .forward_mha = mla_mha,
    .variant = cuda_variant,
    .kind = ATTN_KERNEL_MLA,
    .mla_project = mla_project,
};

/* ---- the exported objects and the module's init ------------------------------------------ */

/* desc is the catalog's, set by attn_module_init (NULL until then: the
 * loader reads nothing but the ABI header, kernel and device before). */
#define ATTN__CUDA_BACKEND(sym, ops)                                                               \
    ATTN__CUDA_API attn_backend sym = {.abi_version = ATTN_BACKEND_ABI_VERSION,                    \
                                       .struct_size = sizeof(attn_backend),                        \
                                       .kernel = &(ops),                                           \
                                       .device = &attn__cuda_device_ops}
ATTN__CUDA_BACKEND(attn_backend_flash_attn, cuda_std_kernel);
ATTN__CUDA_BACKEND(attn_backend_triton_attn, cuda_std_kernel);
ATTN__CUDA_BACKEND(attn_backend_triton_mla, cuda_mla_kernel);

static const struct {
    const char *name;
    attn_backend *object;
} cuda_exports[] = {
    {"FLASH_ATTN", &attn_backend_flash_attn},
    {"TRITON_ATTN", &attn_backend_triton_attn},
    {"TRITON_MLA", &attn_backend_triton_mla},
};

ATTN__CUDA_API attn_status attn_module_init(const attn_module_host *host);

attn_status attn_module_init(const attn_module_host *host)
{
    if (!host || host->abi_version != ATTN_BACKEND_ABI_VERSION ||
        host->struct_size < ATTN_STRUCT_END(attn_module_host, fail))
        return ATTN_ABI_MISMATCH;
    g_host = host;
    for (size_t i = 0; i < sizeof cuda_exports / sizeof cuda_exports[0]; i++) {
        const attn_backend *cat = host->catalog_builtin(cuda_exports[i].name);
        attn_backend *b = cuda_exports[i].object;
        bool mla = b->kernel->kind == ATTN_KERNEL_MLA;
        if (!cat || !cat->desc || strcmp(cat->desc->name, cuda_exports[i].name) != 0 ||
            cat->desc->is_mla != mla)
            return attn__cuda_report(attn__cuda_fail(
                ATTN_ABI_MISMATCH,
                "libattn_cuda.so: the host libattn has no %s catalog descriptor for %s",
                mla ? "MLA" : "standard", cuda_exports[i].name));
        b->desc = cat->desc;
    }
    /* the import itself: the driver library (its cuInit failing, no device,
     * shows when a device opens) */
    if (!attn__cu_load() && attn__cu_load_status() == ATTN_IMPORT_ERROR)
        return attn__cuda_report(ATTN_IMPORT_ERROR);
    return ATTN_OK;
}
