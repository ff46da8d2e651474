/* The OpenCL entry points from the ICD loader, resolved once per process
 * with dlopen/dlsym (the platform probe's loader and library names), and
 * the error names every failure detail carries. The library stays loaded:
 * ICDs start threads and keep state. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "backends/opencl/ocl_api.h"
#include "platform/detect.h"
#include "util/error.h"

static attn__cl_api g_api;
static bool g_ok;
static char g_reason[512];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* dlsym into a function-pointer slot (POSIX guarantees the conversion). */
#define ATTN__CL_SYM(h, name)                                                                      \
    do {                                                                                           \
        g_api.name = (__typeof__(g_api.name))dlsym(h, "cl" #name);                                 \
        if (!g_api.name) missing = "cl" #name;                                                     \
    } while (0)

static void load_once(void)
{
    static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so", NULL};
    char library[256];
    void *h = attn__probe_dlopen("ATTN_OPENCL_LIBRARY", names, library, sizeof library, g_reason,
                                 sizeof g_reason);
    if (!h) return;
    const char *missing = NULL;
    ATTN__CL_SYM(h, GetPlatformIDs);
    ATTN__CL_SYM(h, GetPlatformInfo);
    ATTN__CL_SYM(h, GetDeviceIDs);
    ATTN__CL_SYM(h, GetDeviceInfo);
    ATTN__CL_SYM(h, CreateContext);
    ATTN__CL_SYM(h, ReleaseContext);
    ATTN__CL_SYM(h, CreateCommandQueue);
    ATTN__CL_SYM(h, ReleaseCommandQueue);
    ATTN__CL_SYM(h, CreateBuffer);
    ATTN__CL_SYM(h, ReleaseMemObject);
    ATTN__CL_SYM(h, EnqueueWriteBuffer);
    ATTN__CL_SYM(h, EnqueueReadBuffer);
    ATTN__CL_SYM(h, EnqueueFillBuffer);
    ATTN__CL_SYM(h, CreateProgramWithSource);
    ATTN__CL_SYM(h, BuildProgram);
    ATTN__CL_SYM(h, GetProgramBuildInfo);
    ATTN__CL_SYM(h, ReleaseProgram);
    ATTN__CL_SYM(h, CreateKernel);
    ATTN__CL_SYM(h, ReleaseKernel);
    ATTN__CL_SYM(h, SetKernelArg);
    ATTN__CL_SYM(h, GetKernelWorkGroupInfo);
    ATTN__CL_SYM(h, EnqueueNDRangeKernel);
    ATTN__CL_SYM(h, Finish);
    if (missing) {
        snprintf(g_reason, sizeof g_reason, "%.200s has no %s (OpenCL 1.2 is needed)", library,
                 missing);
        return;
    }
    g_ok = true;
}

const attn__cl_api *attn__cl_load(void)
{
    pthread_once(&g_once, load_once);
    if (g_ok) return &g_api;
    attn__fail(ATTN_PLATFORM_UNAVAILABLE, "OpenCL: %s", g_reason);
    return NULL;
}

const char *attn__cl_error_name(attn__cl_int code)
{
    switch (code) {
    case 0: return "CL_SUCCESS";
    case -1: return "CL_DEVICE_NOT_FOUND";
    case -2: return "CL_DEVICE_NOT_AVAILABLE";
    case -3: return "CL_COMPILER_NOT_AVAILABLE";
    case -4: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case -5: return "CL_OUT_OF_RESOURCES";
    case -6: return "CL_OUT_OF_HOST_MEMORY";
    case -11: return "CL_BUILD_PROGRAM_FAILURE";
    case -14: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    case -30: return "CL_INVALID_VALUE";
    case -33: return "CL_INVALID_DEVICE";
    case -34: return "CL_INVALID_CONTEXT";
    case -36: return "CL_INVALID_COMMAND_QUEUE";
    case -38: return "CL_INVALID_MEM_OBJECT";
    case -43: return "CL_INVALID_BUILD_OPTIONS";
    case -44: return "CL_INVALID_PROGRAM";
    case -45: return "CL_INVALID_PROGRAM_EXECUTABLE";
    case -46: return "CL_INVALID_KERNEL_NAME";
    case -48: return "CL_INVALID_KERNEL";
    case -49: return "CL_INVALID_ARG_INDEX";
    case -50: return "CL_INVALID_ARG_VALUE";
    case -51: return "CL_INVALID_ARG_SIZE";
    case -52: return "CL_INVALID_KERNEL_ARGS";
    case -54: return "CL_INVALID_WORK_GROUP_SIZE";
    case -55: return "CL_INVALID_WORK_ITEM_SIZE";
    case -59: return "CL_INVALID_OPERATION";
    case -61: return "CL_INVALID_BUFFER_SIZE";
    case -63: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: {
        static _Thread_local char buf[32];
        snprintf(buf, sizeof buf, "error %d", (int)code);
        return buf;
    }
    }
}

attn_status attn__cl_fail(attn_status s, const char *what, attn__cl_int code)
{
    return attn__fail(s, "OpenCL %s failed: %s (%d)", what, attn__cl_error_name(code), (int)code);
}
