/* attn_example: an out-of-tree attention backend, built as a libattn plugin.
 *
 * It registers the CUSTOM backend: a descriptor that states honestly what it
 * runs (decoder attention, fp32/fp16/bf16, KV cache "auto", any block size,
 * head sizes 32..256 in steps of 8, no sinks, no MLA, no sparse, no
 * multimodal prefix, no per-head quant scales, causal only) and a kernel
 * that computes attention by calling libattn's REFERENCE kernel through the
 * host services the loader hands over. REFERENCE is resolved once, at init;
 * when it is not available the backend is registered anyway and its
 * forward returns ATTN_UNSUPPORTED (it has no self-test then, so libattn
 * refuses to open it: attn/kernel.h).
 *
 * Backend contract v2 (docs/design/contract-v2.md): the object names no
 * device, so CUSTOM runs on the host device (its tensors are host memory
 * and libattn folds every offset into the pointers before the call);
 * create, when REFERENCE has one, receives attn_kernel_init (layer,
 * device instance, threads).
 *
 * Plugin rules this file follows (examples/plugin/README.md):
 *   - exports exactly the ABI data symbol and attn_plugin_init;
 *   - no constructors or destructors: all work happens in attn_plugin_init;
 *   - does not link libattn: everything goes through `api`;
 *   - the objects it registers are static (the plugin is never unloaded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn/log.h>
#include <attn/backend.h>
#include <attn/plugin.h>

ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;

/* Host services kept after init (plain function pointers into the host). */
static void (*g_log)(int level, const char *msg);
static const attn_backend *g_ref; /* REFERENCE, or NULL when unavailable */
static char g_variant[96] = "unavailable (REFERENCE not built)";

/* ---- KV-cache shape: [2, num_blocks, block_size, num_kv_heads, head_size] */

static attn_status example_kv_shape(int num_blocks, int block_size, int num_kv_heads, int head_size,
                                    attn_kv_dtype kv, attn_kv_shape *out)
{
    (void)kv;
    if (num_blocks <= 0 || block_size <= 0 || num_kv_heads <= 0 || head_size <= 0)
        return ATTN_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    out->ndim = 5;
    const int64_t dims[5] = {2, num_blocks, block_size, num_kv_heads, head_size};
    static const char *const names[5] = {"2", "num_blocks", "block_size", "num_kv_heads",
                                         "head_size"};
    for (int i = 0; i < 5; i++) {
        out->dims[i] = dims[i];
        out->dim_names[i] = names[i];
    }
    return ATTN_OK;
}

/* ---- pass-through metadata builder (used when REFERENCE has none) ------- */

typedef struct passthrough_state {
    attn_common_metadata cm;
} passthrough_state;

static attn_status passthrough_create(const attn_builder_init *init, void **state)
{
    (void)init;
    *state = calloc(1, sizeof(passthrough_state));
    return *state ? ATTN_OK : ATTN_OUT_OF_MEMORY;
}

static void passthrough_destroy(void *state)
{
    free(state);
}

static attn_status passthrough_build(void *state, int common_prefix_len,
                                     const attn_common_metadata *cm, bool fast_build,
                                     const void **md)
{
    (void)common_prefix_len;
    (void)fast_build;
    passthrough_state *s = state;
    s->cm = *cm; /* borrowed pointers: valid for this step, like cm itself */
    *md = &s->cm;
    return ATTN_OK;
}

static const attn_builder_ops g_passthrough_builder = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = "AttnExamplePassthroughBuilder",
    .cg_support = ATTN_CG_NEVER,
    .create = passthrough_create,
    .destroy = passthrough_destroy,
    .build = passthrough_build,
};

/* ---- descriptor ----------------------------------------------------------- */

static const int g_block_multiple[] = {1}; /* any block size (multiple of 1) */

/* Filled at init: builder and shape functions come from REFERENCE when it
 * has them, so metadata and cache layout are the ones its kernel expects. */
static attn_backend_desc g_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "CUSTOM",
    .platforms = "any (runs libattn's REFERENCE CPU kernel)",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO),
    .block_sizes = g_block_multiple,
    .n_block_sizes = 1,
    .heads = {.min = 32, .max = 256, .multiple_of = 8},
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
    .cg_support = ATTN_CG_NEVER,
    .kv_cache_shape = example_kv_shape,
    .builder = &g_passthrough_builder,
};

/* ---- kernel ----------------------------------------------------------------- */

static attn_status example_forward(void *impl, const attn_forward_args *a)
{
    if (!g_ref) return ATTN_UNSUPPORTED;
    if (!a || !a->layer || !a->common || !a->q || !a->out) return ATTN_NULL_ARGUMENT;
    if (a->layer->attn_type != ATTN_TYPE_DECODER || a->layer->sinks)
        return ATTN_UNSUPPORTED; /* outside what the descriptor claims */
    attn_forward_args fa = *a;
    if (!g_ref->desc->builder) fa.metadata = NULL; /* ours was a pass-through copy of `common` */
    return g_ref->kernel->forward(impl, &fa);
}

static attn_status example_create(const attn_kernel_init *init, void **impl)
{
    return g_ref->kernel->create(init, impl);
}

static void example_destroy(void *impl)
{
    if (g_ref->kernel->destroy) g_ref->kernel->destroy(impl);
}

static const char *example_variant(void)
{
    return g_variant;
}

static attn_kernel_ops g_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward = example_forward,
    .variant = example_variant,
};

static const attn_backend g_backend = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &g_desc,
    .kernel = &g_kernel,
    .device = NULL, /* the host device: libattn's memory and cache writes */
};

/* ---- entry point ---------------------------------------------------------- */

static void example_log(int level, const char *msg)
{
    if (g_log) g_log(level, msg);
}

/* Adopts REFERENCE's builder, cache shape and state handling when it can
 * be resolved on the current platform. */
static void adopt_reference(const attn_plugin_api *api)
{
    char msg[512];
    if (!ATTN_PLUGIN_API_HAS(api, last_error)) {
        example_log(ATTN_LOG_INFO, "host too old to resolve REFERENCE");
        return;
    }
    const attn_platform *p = NULL;
    const attn_backend *ref = NULL;
    attn_status st = api->platform_current(&p);
    if (st == ATTN_OK) st = api->backend_resolve(p, "REFERENCE", &ref);
    if (st != ATTN_OK || !ref || !ref->desc || !ref->kernel || !ref->kernel->forward) {
        snprintf(msg, sizeof msg,
                 "REFERENCE is not available (%s); CUSTOM is registered but its "
                 "kernel returns UNSUPPORTED",
                 st != ATTN_OK ? api->last_error() : "no standard forward");
        example_log(ATTN_LOG_INFO, msg);
        return;
    }
    g_ref = ref;
    if (ref->desc->builder) g_desc.builder = ref->desc->builder;
    if (ref->desc->kv_cache_shape) {
        g_desc.kv_cache_shape = ref->desc->kv_cache_shape;
        g_desc.kv_stride_order = ref->desc->kv_stride_order;
    }
    if (ref->kernel->create) {
        g_kernel.create = example_create;
        g_kernel.destroy = example_destroy;
    }
    /* libattn runs its standard known-answer test on this kernel before
     * CUSTOM may be chosen: no harness here. */
    g_kernel.kind = ATTN_KERNEL_STANDARD;
    const char *rv = ref->kernel->variant ? ref->kernel->variant() : NULL;
    snprintf(g_variant, sizeof g_variant, "via REFERENCE (%s)", rv ? rv : "default");
}

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    if (!api || api->abi_version != ATTN_PLUGIN_ABI_VERSION) return ATTN_ABI_MISMATCH;
    g_log = api->log;
    adopt_reference(api);
    return api->register_backend_object("CUSTOM", &g_backend);
}
