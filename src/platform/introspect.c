/* The public view of what the platform layer detected: GPU runtime probes
 * (attn/probe.h), the CPU as text and JSON (attn/cpu.h), and platform
 * fields that `attn platforms` shows (attn/platform.h). Probes hand out
 * copies: the results stay the library's. */
#include "attn/probe.h"
#include "platform/platform_internal.h"
#include "util/check.h"
#include "util/error.h"

attn_status attn_probe_gpu(attn_gpu_runtime runtime, attn_gpu_probe *out)
{
    ATTN__CHECK_NULL(out);
    if (runtime != ATTN_GPU_RUNTIME_CUDA && runtime != ATTN_GPU_RUNTIME_ROCM)
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_probe_gpu: unknown runtime %d",
                          (int)runtime);
    *out = runtime == ATTN_GPU_RUNTIME_CUDA ? *attn__probe_cuda() : *attn__probe_rocm();
    return ATTN_OK;
}

attn_status attn_probe_opencl(attn_opencl_probe *out)
{
    ATTN__CHECK_NULL(out);
    *out = *attn__probe_opencl();
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
