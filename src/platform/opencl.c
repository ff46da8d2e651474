/* OpenCL probe: the ICD loader ("libOpenCL.so.1", then "libOpenCL.so";
 * ATTN_OPENCL_LIBRARY overrides) loaded with dlopen, once per process.
 * Lists platforms (name, vendor, version) and their devices (name, type,
 * version, compute units, memory, extensions, fp16/fp64). Constants and
 * types are the few the OpenCL 1.2 ABI fixes, declared here so no OpenCL
 * header or link dependency is needed. Only run when asked (`attn
 * platforms`, the "opencl" machine): loading an ICD (PoCL) costs time and
 * memory that the normal startup path must not pay. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/detect.h"

typedef int32_t attn__cl_int;
typedef uint32_t attn__cl_uint;
typedef uint64_t attn__cl_ulong;
typedef void *attn__cl_platform_id;
typedef void *attn__cl_device_id;

#define ATTN__CL_PLATFORM_VERSION          0x0901
#define ATTN__CL_PLATFORM_NAME             0x0902
#define ATTN__CL_PLATFORM_VENDOR           0x0903
#define ATTN__CL_DEVICE_TYPE               0x1000
#define ATTN__CL_DEVICE_MAX_COMPUTE_UNITS  0x1002
#define ATTN__CL_DEVICE_MAX_MEM_ALLOC_SIZE 0x1010
#define ATTN__CL_DEVICE_GLOBAL_MEM_SIZE    0x101F
#define ATTN__CL_DEVICE_NAME               0x102B
#define ATTN__CL_DEVICE_VENDOR             0x102C
#define ATTN__CL_DRIVER_VERSION            0x102D
#define ATTN__CL_DEVICE_VERSION            0x102F
#define ATTN__CL_DEVICE_EXTENSIONS         0x1030
#define ATTN__CL_DEVICE_TYPE_ALL           0xFFFFFFFFull
#define ATTN__CL_PLATFORM_NOT_FOUND_KHR    (-1001)

typedef attn__cl_int (*attn__clGetPlatformIDs_fn)(attn__cl_uint n, attn__cl_platform_id *ids,
                                                  attn__cl_uint *count);
typedef attn__cl_int (*attn__clGetPlatformInfo_fn)(attn__cl_platform_id id, attn__cl_uint param,
                                                   size_t size, void *value, size_t *ret);
typedef attn__cl_int (*attn__clGetDeviceIDs_fn)(attn__cl_platform_id id, attn__cl_ulong type,
                                                attn__cl_uint n, attn__cl_device_id *ids,
                                                attn__cl_uint *count);
typedef attn__cl_int (*attn__clGetDeviceInfo_fn)(attn__cl_device_id id, attn__cl_uint param,
                                                 size_t size, void *value, size_t *ret);

static attn__opencl_probe attn__ocl;
static pthread_once_t attn__ocl_once = PTHREAD_ONCE_INIT;

static void attn__ocl_platform_str(attn__clGetPlatformInfo_fn fn, attn__cl_platform_id id,
                                   attn__cl_uint param, char *buf, size_t size)
{
    buf[0] = '\0';
    if (fn(id, param, size - 1, buf, NULL) != 0) buf[0] = '\0';
    buf[size - 1] = '\0';
}

static void attn__ocl_device_str(attn__clGetDeviceInfo_fn fn, attn__cl_device_id id,
                                 attn__cl_uint param, char *buf, size_t size)
{
    buf[0] = '\0';
    if (fn(id, param, size - 1, buf, NULL) != 0) buf[0] = '\0';
    buf[size - 1] = '\0';
}

/* Whole extension string (it can be kilobytes long); "" on failure. Kept
 * for the life of the process like the rest of the probe. */
static const char *attn__ocl_extensions(attn__clGetDeviceInfo_fn fn, attn__cl_device_id id)
{
    size_t n = 0;
    if (fn(id, ATTN__CL_DEVICE_EXTENSIONS, 0, NULL, &n) != 0 || n == 0) return "";
    char *s = calloc(1, n + 1);
    if (!s) return "";
    if (fn(id, ATTN__CL_DEVICE_EXTENSIONS, n, s, NULL) != 0) {
        free(s);
        return "";
    }
    return s;
}

static bool attn__ocl_has_ext(const char *exts, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = exts; (p = strstr(p, name)) != NULL; p += n)
        if ((p == exts || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

static const char *attn__ocl_type_name(attn__cl_ulong t)
{
    if (t & 4) return "gpu";
    if (t & 2) return "cpu";
    if (t & 8) return "accelerator";
    if (t & 16) return "custom";
    return "default";
}

static void attn__ocl_init(void)
{
    attn__opencl_probe *pr = &attn__ocl;
    static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so", NULL};
    void *h = attn__probe_dlopen("ATTN_OPENCL_LIBRARY", names, pr->library, sizeof pr->library,
                                 pr->reason, sizeof pr->reason);
    if (!h) return;
    attn__clGetPlatformIDs_fn get_platforms =
        (attn__clGetPlatformIDs_fn)dlsym(h, "clGetPlatformIDs");
    attn__clGetPlatformInfo_fn platform_info =
        (attn__clGetPlatformInfo_fn)dlsym(h, "clGetPlatformInfo");
    attn__clGetDeviceIDs_fn get_devices = (attn__clGetDeviceIDs_fn)dlsym(h, "clGetDeviceIDs");
    attn__clGetDeviceInfo_fn device_info = (attn__clGetDeviceInfo_fn)dlsym(h, "clGetDeviceInfo");
    if (!get_platforms || !platform_info || !get_devices || !device_info) {
        snprintf(pr->reason, sizeof pr->reason, "%.200s: missing OpenCL 1.x entry points",
                 pr->library);
        dlclose(h);
        return;
    }
    /* ICDs start threads and keep state: never unloaded from here on. */
    attn__cl_platform_id ids[ATTN__PROBE_MAX_CL_PLATFORMS];
    attn__cl_uint np = 0;
    attn__cl_int r = get_platforms(ATTN__PROBE_MAX_CL_PLATFORMS, ids, &np);
    if (r == ATTN__CL_PLATFORM_NOT_FOUND_KHR || (r == 0 && np == 0)) {
        snprintf(pr->reason, sizeof pr->reason,
                 "%.200s loaded but no OpenCL platform (ICD) is installed", pr->library);
        return;
    }
    if (r != 0) {
        snprintf(pr->reason, sizeof pr->reason, "clGetPlatformIDs failed: error %d", (int)r);
        return;
    }
    if (np > ATTN__PROBE_MAX_CL_PLATFORMS) np = ATTN__PROBE_MAX_CL_PLATFORMS;
    for (attn__cl_uint i = 0; i < np; i++) {
        attn__opencl_platform *pl = &pr->platforms[pr->platform_count++];
        attn__ocl_platform_str(platform_info, ids[i], ATTN__CL_PLATFORM_NAME, pl->name,
                               sizeof pl->name);
        attn__ocl_platform_str(platform_info, ids[i], ATTN__CL_PLATFORM_VENDOR, pl->vendor,
                               sizeof pl->vendor);
        attn__ocl_platform_str(platform_info, ids[i], ATTN__CL_PLATFORM_VERSION, pl->version,
                               sizeof pl->version);
        attn__cl_device_id devs[ATTN__PROBE_MAX_DEVICES];
        attn__cl_uint nd = 0;
        if (get_devices(ids[i], ATTN__CL_DEVICE_TYPE_ALL, ATTN__PROBE_MAX_DEVICES, devs, &nd) != 0)
            nd = 0;
        if (nd > ATTN__PROBE_MAX_DEVICES) nd = ATTN__PROBE_MAX_DEVICES;
        for (attn__cl_uint k = 0; k < nd && pr->device_count < ATTN__PROBE_MAX_DEVICES; k++) {
            attn__opencl_device *d = &pr->devices[pr->device_count++];
            pl->device_count++;
            d->platform = (int)i;
            attn__ocl_device_str(device_info, devs[k], ATTN__CL_DEVICE_NAME, d->name,
                                 sizeof d->name);
            attn__ocl_device_str(device_info, devs[k], ATTN__CL_DEVICE_VENDOR, d->vendor,
                                 sizeof d->vendor);
            attn__ocl_device_str(device_info, devs[k], ATTN__CL_DEVICE_VERSION, d->version,
                                 sizeof d->version);
            attn__ocl_device_str(device_info, devs[k], ATTN__CL_DRIVER_VERSION, d->driver_version,
                                 sizeof d->driver_version);
            attn__cl_ulong type = 0, mem = 0, alloc = 0;
            attn__cl_uint cu = 0;
            if (device_info(devs[k], ATTN__CL_DEVICE_TYPE, sizeof type, &type, NULL) != 0) type = 0;
            if (device_info(devs[k], ATTN__CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL))
                cu = 0;
            if (device_info(devs[k], ATTN__CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL))
                mem = 0;
            if (device_info(devs[k], ATTN__CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc,
                            NULL))
                alloc = 0;
            d->type = attn__ocl_type_name(type);
            d->compute_units = cu;
            d->global_mem_bytes = mem;
            d->max_alloc_bytes = alloc;
            d->extensions = attn__ocl_extensions(device_info, devs[k]);
            d->fp16 = attn__ocl_has_ext(d->extensions, "cl_khr_fp16");
            d->fp64 = attn__ocl_has_ext(d->extensions, "cl_khr_fp64");
        }
    }
    if (pr->device_count == 0) {
        snprintf(pr->reason, sizeof pr->reason, "%d OpenCL platform(s) but no device",
                 pr->platform_count);
        return;
    }
    pr->present = true;
}

const attn__opencl_probe *attn__probe_opencl(void)
{
    pthread_once(&attn__ocl_once, attn__ocl_init);
    return &attn__ocl;
}
