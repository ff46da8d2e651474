/* The CUDA driver from libcuda.so.1 by dlopen/dlsym, once per process, and
 * the module's own failure detail. Where no driver exists the first use
 * fails as a Python import of a CUDA extension does ("libcuda.so.1: cannot
 * open shared object file: No such file or directory"), status
 * ATTN_IMPORT_ERROR; a driver that loads but whose cuInit fails (no device,
 * the toolkit's stub library) is ATTN_PLATFORM_UNAVAILABLE with the
 * driver's error. The library stays loaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_rt.h"

static attn__cu_api g_api;
static attn_status g_status = ATTN_INTERNAL;
static char g_reason[600];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Thread_local char t_detail[1024];

attn_status attn__cuda_fail(attn_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_detail, sizeof t_detail, fmt, ap);
    va_end(ap);
    return st;
}

const char *attn__cuda_last_error(void)
{
    return t_detail;
}

/* dlsym into a function-pointer slot (POSIX guarantees the conversion). */
#define ATTN__CU_SYM(h, slot, name)                                                                \
    do {                                                                                           \
        g_api.slot = (__typeof__(g_api.slot))dlsym(h, name);                                       \
        if (!g_api.slot && !missing) missing = name;                                               \
    } while (0)

static void resolve(void *h, const char **missing_out)
{
    const char *missing = NULL;
    ATTN__CU_SYM(h, Init, "cuInit");
    ATTN__CU_SYM(h, DriverGetVersion, "cuDriverGetVersion");
    ATTN__CU_SYM(h, DeviceGetCount, "cuDeviceGetCount");
    ATTN__CU_SYM(h, DeviceGet, "cuDeviceGet");
    ATTN__CU_SYM(h, DeviceGetName, "cuDeviceGetName");
    ATTN__CU_SYM(h, DeviceGetAttribute, "cuDeviceGetAttribute");
    ATTN__CU_SYM(h, DeviceTotalMem, "cuDeviceTotalMem_v2");
    ATTN__CU_SYM(h, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    ATTN__CU_SYM(h, DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    ATTN__CU_SYM(h, CtxPushCurrent, "cuCtxPushCurrent_v2");
    ATTN__CU_SYM(h, CtxPopCurrent, "cuCtxPopCurrent_v2");
    ATTN__CU_SYM(h, StreamCreate, "cuStreamCreate");
    ATTN__CU_SYM(h, StreamDestroy, "cuStreamDestroy_v2");
    ATTN__CU_SYM(h, StreamSynchronize, "cuStreamSynchronize");
    ATTN__CU_SYM(h, ModuleLoadData, "cuModuleLoadData");
    ATTN__CU_SYM(h, ModuleUnload, "cuModuleUnload");
    ATTN__CU_SYM(h, ModuleGetFunction, "cuModuleGetFunction");
    ATTN__CU_SYM(h, FuncGetAttribute, "cuFuncGetAttribute");
    ATTN__CU_SYM(h, LaunchKernel, "cuLaunchKernel");
    ATTN__CU_SYM(h, MemAlloc, "cuMemAlloc_v2");
    ATTN__CU_SYM(h, MemFree, "cuMemFree_v2");
    ATTN__CU_SYM(h, MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    ATTN__CU_SYM(h, MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    ATTN__CU_SYM(h, MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    ATTN__CU_SYM(h, MemsetD8Async, "cuMemsetD8Async");
    ATTN__CU_SYM(h, GetErrorName, "cuGetErrorName");
    ATTN__CU_SYM(h, GetErrorString, "cuGetErrorString");
    *missing_out = missing;
}

static void load_once(void)
{
    const char *env = getenv("ATTN_CUDA_LIBRARY");
    const char *lib = env && *env ? env : "libcuda.so.1";
    dlerror();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *err = dlerror();
        g_status = ATTN_IMPORT_ERROR;
        snprintf(g_reason, sizeof g_reason, "the CUDA driver cannot be loaded: %.500s",
                 err ? err : lib);
        return;
    }
    const char *missing = NULL;
    resolve(h, &missing);
    if (missing) {
        g_status = ATTN_IMPORT_ERROR;
        snprintf(g_reason, sizeof g_reason,
                 "the CUDA driver %.300s has no %s (a driver for CUDA 11 or later is needed)", lib,
                 missing);
        return;
    }
    attn__cu_result r = g_api.Init(0);
    if (r != ATTN__CU_SUCCESS) {
        char what[200];
        attn__cu_describe(r, what, sizeof what);
        g_status = ATTN_PLATFORM_UNAVAILABLE;
        snprintf(g_reason, sizeof g_reason, "cuInit of the CUDA driver %.300s failed: %s%s", lib,
                 what,
                 r == ATTN__CU_ERROR_STUB_LIBRARY ? " (the toolkit's stub, not a driver)" : "");
        return;
    }
    g_status = ATTN_OK;
}

const attn__cu_api *attn__cu_load(void)
{
    pthread_once(&g_once, load_once);
    if (g_status == ATTN_OK) return &g_api;
    attn__cuda_fail(g_status, "libattn_cuda.so: %s", g_reason);
    return NULL;
}

attn_status attn__cu_load_status(void)
{
    pthread_once(&g_once, load_once);
    return g_status;
}

/* Names of the codes a failure to start shows, for drivers that cannot
 * name them (the stub library answers every call with its own error). */
static const char *known_name(attn__cu_result r)
{
    switch (r) {
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    default: return NULL;
    }
}

void attn__cu_describe(attn__cu_result r, char *buf, size_t n)
{
    const char *name = NULL, *text = NULL;
    if (g_api.GetErrorName && g_api.GetErrorName(r, &name) != ATTN__CU_SUCCESS) name = NULL;
    if (g_api.GetErrorString && g_api.GetErrorString(r, &text) != ATTN__CU_SUCCESS) text = NULL;
    if (!name) name = known_name(r);
    snprintf(buf, n, "%s (%d)%s%s", name ? name : "CUresult", r, text ? ": " : "",
             text ? text : "");
}

attn_status attn__cu_fail(attn_status st, const char *what, attn__cu_result r)
{
    char d[200];
    attn__cu_describe(r, d, sizeof d);
    return attn__cuda_fail(st, "%s: %s", what, d);
}
