/* OPENCL_ATTN's device (attn_device_ops): an instance is one runtime
 * instance (attn__ocl: the device's shared context, one in-order queue),
 * a memory handle is an attn__ocl_mem *. Memory is not host-visible.
 * libattn has checked every handle and range against its allocation table
 * before an op runs; the runtime checks them again against the buffers
 * (cheap) and refuses a handle of another device.
 *
 * ATTN_OPENCL_BUILD_OPTIONS is appended to the kernel program's build
 * options (vendor switches such as -DKD_FAST_MATH=1). A program built with
 * other options is another program: the core self-test runs on it before
 * the backend can be chosen or opened, so no option can make an unchecked
 * kernel selectable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/probe.h"
#include "backends/opencl/ocl_backend.h"
#include "backends/opencl/ocl_impl.h"
#include "util/error.h"

/* "opencl" -> 0, "opencl:N" -> N; -1 for any other name. */
static int probe_index_of(const char *name)
{
    if (!strcmp(name, "opencl")) return 0;
    if (strncmp(name, "opencl:", 7) != 0) return -1;
    char *end = NULL;
    long v = strtol(name + 7, &end, 10);
    return end != name + 7 && !*end && v >= 0 && v < 4096 ? (int)v : -1;
}

/* The runtime's index of the probe's device n: the runtime lists the same
 * devices in the same order, minus those that cannot compile kernels, and
 * names them "<device> (<platform>)"; equal names count in order. */
static attn_status runtime_index(int n, int *index)
{
    attn_opencl_probe pr;
    attn_status st = attn_probe_opencl(&pr);
    if (st != ATTN_OK) return st;
    if (!pr.present || n >= pr.device_count)
        return attn__fail(ATTN_PLATFORM_UNAVAILABLE, "no OpenCL device %d here (%d device(s)%s%s)",
                          n, pr.device_count, pr.present ? "" : ": ", pr.present ? "" : pr.reason);
    char want[400];
    const attn_opencl_device *pd = &pr.devices[n];
    snprintf(want, sizeof want, "%s (%s)", pd->name, pr.platforms[pd->platform].name);
    int seen = 0;
    for (int i = 0; i < n; i++) {
        char other[400];
        const attn_opencl_device *q = &pr.devices[i];
        snprintf(other, sizeof other, "%s (%s)", q->name, pr.platforms[q->platform].name);
        seen += !strcmp(other, want);
    }
    int count = 0;
    attn__ocl_dev *devs = attn__ocl_devices(&count);
    for (int i = 0; devs && i < count; i++)
        if (!strcmp(devs[i].name, want) && seen-- == 0) {
            *index = i;
            return ATTN_OK;
        }
    return attn__fail(ATTN_UNSUPPORTED,
                      "OpenCL device %d (%.300s) cannot run OPENCL_ATTN: it is unavailable or has "
                      "no compiler",
                      n, want);
}

attn_status attn__ocl_config_device(const attn_device_config *cfg, int *index)
{
    const attn_platform *p = cfg ? cfg->platform : NULL;
    int extra = cfg ? cfg->device_index : 0;
    if (!p && attn_platform_current(&p) != ATTN_OK) p = NULL;
    int n = p && attn_platform_get_kind(p) == ATTN_PLATFORM_OPENCL && !attn_platform_is_simulated(p)
                ? probe_index_of(attn_platform_name(p))
                : -1;
    if (n < 0) {
        *index = extra > 0 ? extra : -1;
        return ATTN_OK;
    }
    return runtime_index(n + extra, index);
}

static attn_status dev_open(const attn_device_config *cfg, void **state)
{
    int index = -1;
    attn_status st = attn__ocl_config_device(cfg, &index);
    if (st != ATTN_OK) return st;
    const char *extra = getenv("ATTN_OPENCL_BUILD_OPTIONS");
    attn__ocl_options opt = {.device = index, .build_options = extra && *extra ? extra : NULL};
    return attn__ocl_open(&opt, (attn__ocl **)state);
}

static void dev_close(void *state)
{
    attn__ocl_close(state);
}

static attn_status dev_alloc(void *state, size_t bytes, attn_mem_kind kind, void **mem)
{
    (void)kind; /* one kind of buffer: the runtime zero-fills on its queue */
    return attn__ocl_alloc(state, bytes, (attn__ocl_mem **)mem);
}

static void dev_free(void *state, void *mem, size_t bytes, attn_mem_kind kind)
{
    (void)state;
    (void)bytes;
    (void)kind;
    attn__ocl_free(mem);
}

static attn_status dev_copy_in(void *state, void *dst, size_t dst_offset, const void *src,
                               size_t bytes)
{
    return attn__ocl_copy_in(state, dst, dst_offset, src, bytes);
}

static attn_status dev_copy_out(void *state, void *dst, const void *src, size_t src_offset,
                                size_t bytes)
{
    return attn__ocl_copy_out(state, dst, src, src_offset, bytes);
}

static attn_status dev_kv_write(void *state, const attn_kv_view *kv, const attn_kv_write_args *a)
{
    return attn__ocl_kv_write(state, kv, a->slot_mapping, a->num_tokens, a->k, a->k_offset, a->v,
                              a->v_offset, a->src);
}

static attn_status dev_mla_write(void *state, const attn_kv_view *kv, const attn_mla_write_args *a)
{
    return attn__ocl_mla_write(state, kv, a->slot_mapping, a->num_tokens, a->latent,
                               a->latent_offset, a->k_rope, a->k_rope_offset, a->latent_dim,
                               a->rope_dim, a->src);
}

static attn_status dev_sync(void *state)
{
    return attn__ocl_sync(state);
}

const attn_device_ops attn__device_opencl = {
    .struct_size = sizeof(attn_device_ops),
    .name = "opencl",
    .flags = 0,
    .open = dev_open,
    .close = dev_close,
    .alloc = dev_alloc,
    .free = dev_free,
    .copy_in = dev_copy_in,
    .copy_out = dev_copy_out,
    .kv_write = dev_kv_write,
    .mla_write = dev_mla_write,
    .synchronize = dev_sync,
};
