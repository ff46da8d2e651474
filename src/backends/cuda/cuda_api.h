/* The CUDA driver API entry points the module uses, loaded at run time with
 * dlopen("libcuda.so.1"): the module has no link-time CUDA dependency and
 * does not include cuda.h. The types and constants below are the driver
 * API's (cuda.h of CUDA 11 and later, ABI-stable); only what the runtime
 * calls is declared. */
#ifndef ATTN_CUDA_CUDA_API_H
#define ATTN_CUDA_CUDA_API_H

#include <stddef.h>

#include "attn/status.h"

typedef int attn__cu_result; /* CUresult: 0 = CUDA_SUCCESS */
typedef int attn__cu_device;
typedef unsigned long long attn__cu_ptr; /* CUdeviceptr */
typedef struct attn__cu_ctx_s *attn__cu_ctx;
typedef struct attn__cu_module_s *attn__cu_module;
typedef struct attn__cu_func_s *attn__cu_func;
typedef struct attn__cu_stream_s *attn__cu_stream;

#define ATTN__CU_SUCCESS             0
#define ATTN__CU_ERROR_NO_DEVICE     100
#define ATTN__CU_ERROR_STUB_LIBRARY  34
#define ATTN__CU_STREAM_NON_BLOCKING 1
/* CUdevice_attribute */
#define ATTN__CU_DEV_CLOCK_RATE        13
#define ATTN__CU_DEV_SM_COUNT          16
#define ATTN__CU_DEV_MEMORY_CLOCK_RATE 36
#define ATTN__CU_DEV_MEMORY_BUS_WIDTH  37
#define ATTN__CU_DEV_CC_MAJOR          75
#define ATTN__CU_DEV_CC_MINOR          76
/* CUfunction_attribute */
#define ATTN__CU_FUNC_MAX_THREADS_PER_BLOCK 0

/* The table, filled by attn__cu_load (NULL entries never remain: a missing
 * symbol fails the load). Versioned names are the _v2 entry points cuda.h
 * maps the plain names to. */
typedef struct attn__cu_api {
    attn__cu_result (*Init)(unsigned flags);
    attn__cu_result (*DriverGetVersion)(int *v);
    attn__cu_result (*DeviceGetCount)(int *n);
    attn__cu_result (*DeviceGet)(attn__cu_device *d, int ordinal);
    attn__cu_result (*DeviceGetName)(char *name, int len, attn__cu_device d);
    attn__cu_result (*DeviceGetAttribute)(int *v, int attr, attn__cu_device d);
    attn__cu_result (*DeviceTotalMem)(size_t *bytes, attn__cu_device d);
    attn__cu_result (*DevicePrimaryCtxRetain)(attn__cu_ctx *c, attn__cu_device d);
    attn__cu_result (*DevicePrimaryCtxRelease)(attn__cu_device d);
    attn__cu_result (*CtxPushCurrent)(attn__cu_ctx c);
    attn__cu_result (*CtxPopCurrent)(attn__cu_ctx *c);
    attn__cu_result (*StreamCreate)(attn__cu_stream *s, unsigned flags);
    attn__cu_result (*StreamDestroy)(attn__cu_stream s);
    attn__cu_result (*StreamSynchronize)(attn__cu_stream s);
    attn__cu_result (*ModuleLoadData)(attn__cu_module *m, const void *image);
    attn__cu_result (*ModuleUnload)(attn__cu_module m);
    attn__cu_result (*ModuleGetFunction)(attn__cu_func *f, attn__cu_module m, const char *name);
    attn__cu_result (*FuncGetAttribute)(int *v, int attr, attn__cu_func f);
    attn__cu_result (*LaunchKernel)(attn__cu_func f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                    attn__cu_stream s, void **params, void **extra);
    attn__cu_result (*MemAlloc)(attn__cu_ptr *p, size_t bytes);
    attn__cu_result (*MemFree)(attn__cu_ptr p);
    attn__cu_result (*MemcpyHtoDAsync)(attn__cu_ptr dst, const void *src, size_t n,
                                       attn__cu_stream s);
    attn__cu_result (*MemcpyDtoHAsync)(void *dst, attn__cu_ptr src, size_t n, attn__cu_stream s);
    attn__cu_result (*MemcpyDtoDAsync)(attn__cu_ptr dst, attn__cu_ptr src, size_t n,
                                       attn__cu_stream s);
    attn__cu_result (*MemsetD8Async)(attn__cu_ptr dst, unsigned char v, size_t n,
                                     attn__cu_stream s);
    attn__cu_result (*GetErrorName)(attn__cu_result r, const char **s);
    attn__cu_result (*GetErrorString)(attn__cu_result r, const char **s);
} attn__cu_api;

/* The driver, loaded and initialised (cuInit) once per process:
 * libcuda.so.1, or ATTN_CUDA_LIBRARY when set. NULL when it cannot be
 * used; attn__cu_load_status then says why (ATTN_IMPORT_ERROR without a
 * driver or with one lacking an entry point, ATTN_PLATFORM_UNAVAILABLE when
 * cuInit fails, e.g. no device) and the detail holds the reason. */
const attn__cu_api *attn__cu_load(void);
attn_status attn__cu_load_status(void);

/* "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory" for r (the driver's names;
 * the number alone when they are unknown). */
void attn__cu_describe(attn__cu_result r, char *buf, size_t n);

/* The module's own failure detail (per thread): the CUDA module does not
 * link libattn, so its runtime reports here; attn__cuda_last_error reads
 * it. Returns st. */
attn_status attn__cuda_fail(attn_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* attn__cuda_fail with "<what>: <the driver's description of r>". */
attn_status attn__cu_fail(attn_status st, const char *what, attn__cu_result r);

#endif
