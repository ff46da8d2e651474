/* The devtest plugin: DEVTEST_ATTN, a backend whose device keeps its memory
 * in a private arena behind poisoned handles (devtest_device.h), so that an
 * engine, `attn serve` or any tool running it proves no host code touches
 * device memory directly: a direct access faults. Its kernel is libattn's
 * REFERENCE run on the arena (resolved at init through the host services);
 * its descriptor, builder and cache shape are REFERENCE's for decoder
 * attention with the model dtype's cache. It declares the standard kernel
 * kind, so libattn's known-answer test runs on a devtest instance before it
 * can be chosen or opened. Built as a plugin, without libattn. */
#include <stdio.h>

#include <attn/backend.h>
#include <attn/plugin.h>

#include "devtest_device.h"

ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;

/* What ran, for the tests (read with dlsym). */
ATTN_EXPORT devtest_stats attn_devtest_stats;

static const attn_backend *g_ref;

static attn_status dt_open(const attn_device_config *cfg, void **state)
{
    (void)cfg;
    return devtest_open_state(&attn_devtest_stats, state);
}

DEVTEST_DEVICE_OPS(g_device, dt_open);

static attn_status dt_create(const attn_kernel_init *init, void **impl)
{
    if (!init->device_state) return ATTN_INVALID_ARGUMENT; /* not on a devtest instance */
    *impl = init->device_state;
    return ATTN_OK;
}

static attn_status dt_forward(void *impl, const attn_forward_args *a)
{
    return devtest_forward(impl, g_ref->kernel, a);
}

static const char *dt_variant(void)
{
    return "REFERENCE on the devtest arena";
}

static const attn_kernel_ops g_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .create = dt_create,
    .forward = dt_forward,
    .variant = dt_variant,
    .kind = ATTN_KERNEL_STANDARD,
};

static const int g_any_block[] = {1};

static attn_backend_desc g_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "DEVTEST_ATTN",
    .platforms = "any (a test device: REFERENCE on a private arena)",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO),
    .block_sizes = g_any_block,
    .n_block_sizes = 1,
    .supports_sink = true,
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
    .cg_support = ATTN_CG_NEVER,
    .can_return_lse_for_decode = true,
};

static const attn_backend g_backend = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &g_desc,
    .kernel = &g_kernel,
    .device = &g_device,
};

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    if (!api || api->abi_version != ATTN_PLUGIN_ABI_VERSION || !ATTN_PLUGIN_API_HAS(api, fail))
        return ATTN_ABI_MISMATCH;
    const attn_platform *p = NULL;
    attn_status st = api->platform_current(&p);
    if (st == ATTN_OK) st = api->backend_resolve(p, "REFERENCE", &g_ref);
    if (st != ATTN_OK || !g_ref || !g_ref->kernel || !g_ref->desc->builder)
        return api->fail(ATTN_PLUGIN_ERROR, "devtest: REFERENCE is not available");
    g_desc.builder = g_ref->desc->builder;
    g_desc.kv_cache_shape = g_ref->desc->kv_cache_shape;
    g_desc.kv_stride_order = g_ref->desc->kv_stride_order;
    return api->register_backend_object("DEVTEST_ATTN", &g_backend);
}
