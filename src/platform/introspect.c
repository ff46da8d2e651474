/* The public view of what the platform layer detected: GPU runtime probes
 * (attn/probe.h), the CPU as text and JSON (attn/cpu.h), and platform
 * fields that `attn platforms` shows (attn/platform.h). The probes' own
 * structs keep their dlopen handles; callers get copies without them. */
#include <stdio.h>
#include <string.h>

#include "attn/probe.h"
#include "platform/platform_internal.h"
#include "util/check.h"
#include "util/error.h"

#define COPY_STR(dst, src) snprintf((dst), sizeof(dst), "%s", (src))

static void copy_gpu(attn_gpu_probe *o, const attn__gpu_probe *p)
{
    memset(o, 0, sizeof *o);
    o->present = p->present;
    COPY_STR(o->library, p->library);
    COPY_STR(o->reason, p->reason);
    o->device_count = p->device_count;
    o->listed = p->listed < ATTN_PROBE_MAX_DEVICES ? p->listed : ATTN_PROBE_MAX_DEVICES;
    for (int i = 0; i < o->listed; i++) {
        attn_gpu_device *d = &o->devices[i];
        const attn__gpu_device *s = &p->devices[i];
        COPY_STR(d->name, s->name);
        d->cc_major = s->cc_major;
        d->cc_minor = s->cc_minor;
        COPY_STR(d->gfx_arch, s->gfx_arch);
        d->memory_bytes = s->memory_bytes;
    }
}

attn_status attn_probe_gpu(attn_gpu_runtime runtime, attn_gpu_probe *out)
{
    ATTN__CHECK_NULL(out);
    if (runtime != ATTN_GPU_RUNTIME_CUDA && runtime != ATTN_GPU_RUNTIME_ROCM)
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_probe_gpu: unknown runtime %d",
                          (int)runtime);
    copy_gpu(out, runtime == ATTN_GPU_RUNTIME_CUDA ? attn__probe_cuda() : attn__probe_rocm());
    return ATTN_OK;
}

attn_status attn_probe_opencl(attn_opencl_probe *out)
{
    ATTN__CHECK_NULL(out);
    const attn__opencl_probe *p = attn__probe_opencl();
    memset(out, 0, sizeof *out);
    out->present = p->present;
    COPY_STR(out->library, p->library);
    COPY_STR(out->reason, p->reason);
    out->platform_count = p->platform_count < ATTN_PROBE_MAX_CL_PLATFORMS
                              ? p->platform_count
                              : ATTN_PROBE_MAX_CL_PLATFORMS;
    for (int i = 0; i < out->platform_count; i++) {
        attn_opencl_platform *d = &out->platforms[i];
        COPY_STR(d->name, p->platforms[i].name);
        COPY_STR(d->vendor, p->platforms[i].vendor);
        COPY_STR(d->version, p->platforms[i].version);
        d->device_count = p->platforms[i].device_count;
    }
    out->device_count =
        p->device_count < ATTN_PROBE_MAX_DEVICES ? p->device_count : ATTN_PROBE_MAX_DEVICES;
    for (int i = 0; i < out->device_count; i++) {
        attn_opencl_device *d = &out->devices[i];
        const attn__opencl_device *s = &p->devices[i];
        d->platform = s->platform;
        COPY_STR(d->name, s->name);
        COPY_STR(d->vendor, s->vendor);
        COPY_STR(d->version, s->version);
        COPY_STR(d->driver_version, s->driver_version);
        d->type = s->type;
        d->compute_units = s->compute_units;
        d->global_mem_bytes = s->global_mem_bytes;
        d->max_alloc_bytes = s->max_alloc_bytes;
        d->fp16 = s->fp16;
        d->fp64 = s->fp64;
        d->extensions = s->extensions ? s->extensions : "";
    }
    return ATTN_OK;
}

void attn_cpu_feature_list(uint64_t bits, char *buf, size_t size)
{
    if (buf) attn__cpu_feature_list(bits, buf, size);
}

attn_status attn_cpu_info_to_json(const attn_cpu_info *ci, char **out)
{
    ATTN__CHECK_NULL(ci);
    ATTN__CHECK_NULL(out);
    attn__sb sb;
    attn__sb_init(&sb);
    attn__jw w;
    attn__jw_init(&w, &sb, false);
    attn__cpu_write_json(&w, ci);
    char *s = attn__sb_take(&sb);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "describing CPU '%s'", ci->model);
    *out = s;
    return ATTN_OK;
}

const char *attn_platform_description(const attn_platform *p)
{
    return p ? p->description : "";
}

const attn_cpu_info *attn_platform_cpu(const attn_platform *p)
{
    return p && p->kind == ATTN_PLATFORM_CPU ? &p->cpu : NULL;
}
