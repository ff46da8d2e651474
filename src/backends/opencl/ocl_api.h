/* The slice of the OpenCL 1.2 C API the runtime calls, loaded from the ICD
 * loader with dlopen (no OpenCL header, no link-time dependency: libattn
 * loads where there is no OpenCL). Types and constants are the values the
 * OpenCL ABI fixes; only what the runtime uses is declared. */
#ifndef ATTN_OPENCL_OCL_API_H
#define ATTN_OPENCL_OCL_API_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

typedef int32_t attn__cl_int;
typedef uint32_t attn__cl_uint;
typedef uint64_t attn__cl_ulong;
typedef uint32_t attn__cl_bool;
typedef struct attn__cl_obj *attn__cl_platform_id;
typedef struct attn__cl_obj *attn__cl_device_id;
typedef struct attn__cl_obj *attn__cl_context;
typedef struct attn__cl_obj *attn__cl_command_queue;
typedef struct attn__cl_obj *attn__cl_mem;
typedef struct attn__cl_obj *attn__cl_program;
typedef struct attn__cl_obj *attn__cl_kernel;
typedef struct attn__cl_obj *attn__cl_event;
typedef intptr_t attn__cl_context_properties;

#define ATTN__CL_SUCCESS                         0
#define ATTN__CL_BUILD_PROGRAM_FAILURE           (-11)
#define ATTN__CL_PLATFORM_NOT_FOUND_KHR          (-1001)
#define ATTN__CL_TRUE                            1u
#define ATTN__CL_FALSE                           0u
#define ATTN__CL_DEVICE_TYPE_ALL                 0xFFFFFFFFull
#define ATTN__CL_DEVICE_TYPE_CPU                 (1ull << 1)
#define ATTN__CL_DEVICE_TYPE_GPU                 (1ull << 2)
#define ATTN__CL_PLATFORM_NAME                   0x0902
#define ATTN__CL_DEVICE_TYPE                     0x1000
#define ATTN__CL_DEVICE_MAX_COMPUTE_UNITS        0x1002
#define ATTN__CL_DEVICE_MAX_WORK_GROUP_SIZE      0x1004
#define ATTN__CL_DEVICE_MAX_MEM_ALLOC_SIZE       0x1010
#define ATTN__CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE 0x1020
#define ATTN__CL_DEVICE_LOCAL_MEM_SIZE           0x1023
#define ATTN__CL_DEVICE_AVAILABLE                0x1027
#define ATTN__CL_DEVICE_COMPILER_AVAILABLE       0x1028
#define ATTN__CL_DEVICE_NAME                     0x102B
#define ATTN__CL_DEVICE_VERSION                  0x102F
#define ATTN__CL_DEVICE_HOST_UNIFIED_MEMORY      0x1035
#define ATTN__CL_DEVICE_OPENCL_C_VERSION         0x103D
#define ATTN__CL_CONTEXT_PLATFORM                0x1084
#define ATTN__CL_MEM_READ_WRITE                  (1ull << 0)
#define ATTN__CL_PROGRAM_BUILD_LOG               0x1183
#define ATTN__CL_KERNEL_WORK_GROUP_SIZE          0x11B0

/* The entry points, resolved once per process. */
typedef struct attn__cl_api {
    attn__cl_int (*GetPlatformIDs)(attn__cl_uint, attn__cl_platform_id *, attn__cl_uint *);
    attn__cl_int (*GetPlatformInfo)(attn__cl_platform_id, attn__cl_uint, size_t, void *, size_t *);
    attn__cl_int (*GetDeviceIDs)(attn__cl_platform_id, attn__cl_ulong, attn__cl_uint,
                                 attn__cl_device_id *, attn__cl_uint *);
    attn__cl_int (*GetDeviceInfo)(attn__cl_device_id, attn__cl_uint, size_t, void *, size_t *);
    attn__cl_context (*CreateContext)(const attn__cl_context_properties *, attn__cl_uint,
                                      const attn__cl_device_id *, void *, void *, attn__cl_int *);
    attn__cl_int (*ReleaseContext)(attn__cl_context);
    attn__cl_command_queue (*CreateCommandQueue)(attn__cl_context, attn__cl_device_id,
                                                 attn__cl_ulong, attn__cl_int *);
    attn__cl_int (*ReleaseCommandQueue)(attn__cl_command_queue);
    attn__cl_mem (*CreateBuffer)(attn__cl_context, attn__cl_ulong, size_t, void *, attn__cl_int *);
    attn__cl_int (*ReleaseMemObject)(attn__cl_mem);
    attn__cl_int (*EnqueueWriteBuffer)(attn__cl_command_queue, attn__cl_mem, attn__cl_bool, size_t,
                                       size_t, const void *, attn__cl_uint, const attn__cl_event *,
                                       attn__cl_event *);
    attn__cl_int (*EnqueueReadBuffer)(attn__cl_command_queue, attn__cl_mem, attn__cl_bool, size_t,
                                      size_t, void *, attn__cl_uint, const attn__cl_event *,
                                      attn__cl_event *);
    attn__cl_int (*EnqueueFillBuffer)(attn__cl_command_queue, attn__cl_mem, const void *, size_t,
                                      size_t, size_t, attn__cl_uint, const attn__cl_event *,
                                      attn__cl_event *);
    attn__cl_program (*CreateProgramWithSource)(attn__cl_context, attn__cl_uint, const char **,
                                                const size_t *, attn__cl_int *);
    attn__cl_int (*BuildProgram)(attn__cl_program, attn__cl_uint, const attn__cl_device_id *,
                                 const char *, void *, void *);
    attn__cl_int (*GetProgramBuildInfo)(attn__cl_program, attn__cl_device_id, attn__cl_uint, size_t,
                                        void *, size_t *);
    attn__cl_int (*ReleaseProgram)(attn__cl_program);
    attn__cl_kernel (*CreateKernel)(attn__cl_program, const char *, attn__cl_int *);
    attn__cl_int (*ReleaseKernel)(attn__cl_kernel);
    attn__cl_int (*SetKernelArg)(attn__cl_kernel, attn__cl_uint, size_t, const void *);
    attn__cl_int (*GetKernelWorkGroupInfo)(attn__cl_kernel, attn__cl_device_id, attn__cl_uint,
                                           size_t, void *, size_t *);
    attn__cl_int (*EnqueueNDRangeKernel)(attn__cl_command_queue, attn__cl_kernel, attn__cl_uint,
                                         const size_t *, const size_t *, const size_t *,
                                         attn__cl_uint, const attn__cl_event *, attn__cl_event *);
    attn__cl_int (*Finish)(attn__cl_command_queue);
} attn__cl_api;

/* The loaded API, or NULL with ATTN_PLATFORM_UNAVAILABLE and the loader's
 * reason as the detail. Loaded once (ATTN_OPENCL_LIBRARY overrides the
 * library name, as for the platform probe); never unloaded. */
const attn__cl_api *attn__cl_load(void);

/* "CL_OUT_OF_RESOURCES" for -5, "error -9999" for unknown codes (static
 * or thread-local text). */
const char *attn__cl_error_name(attn__cl_int code);

/* attn__fail(status, "<what>: <CL error name> (<code>)"). */
attn_status attn__cl_fail(attn_status s, const char *what, attn__cl_int code);

#endif
