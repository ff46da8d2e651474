/* CUDA probe: the driver API loaded with dlopen ("libcuda.so.1", then
 * "libcuda.so"; ATTN_CUDA_LIBRARY overrides for tests). Runs once per
 * process. The few driver types and constants used are declared here so no
 * CUDA header or library is needed to build. Absent driver, missing symbol,
 * failing cuInit or zero devices all give present == false with the
 * driver's or loader's own words as the reason. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "platform/detect.h"

typedef int attn__CUresult; /* CUresult: 0 = CUDA_SUCCESS */
typedef int attn__CUdevice;
#define ATTN__CU_ATTR_CC_MAJOR 75 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
#define ATTN__CU_ATTR_CC_MINOR 76 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */

typedef attn__CUresult (*attn__cuInit_fn)(unsigned flags);
typedef attn__CUresult (*attn__cuDeviceGetCount_fn)(int *count);
typedef attn__CUresult (*attn__cuDeviceGet_fn)(attn__CUdevice *dev, int ordinal);
typedef attn__CUresult (*attn__cuDeviceGetName_fn)(char *name, int len, attn__CUdevice dev);
typedef attn__CUresult (*attn__cuDeviceGetAttribute_fn)(int *v, int attr, attn__CUdevice dev);
typedef attn__CUresult (*attn__cuDeviceTotalMem_fn)(size_t *bytes, attn__CUdevice dev);
typedef attn__CUresult (*attn__cuGetErrorName_fn)(attn__CUresult r, const char **name);

static attn__gpu_probe attn__cuda;
static pthread_once_t attn__cuda_once = PTHREAD_ONCE_INIT;

/* "CUresult 100 (CUDA_ERROR_NO_DEVICE)" when the driver can name it. */
static void attn__cuda_err(char *buf, size_t size, const char *what, attn__CUresult r,
                           attn__cuGetErrorName_fn get_name)
{
    const char *name = NULL;
    if (get_name && get_name(r, &name) != 0) name = NULL;
    if (name)
        snprintf(buf, size, "%s failed: CUresult %d (%s)", what, r, name);
    else
        snprintf(buf, size, "%s failed: CUresult %d", what, r);
}

static void attn__cuda_init(void)
{
    attn__gpu_probe *pr = &attn__cuda;
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    void *h = attn__probe_dlopen("ATTN_CUDA_LIBRARY", names, pr->library, sizeof pr->library,
                                 pr->reason, sizeof pr->reason);
    if (!h) return;

    const char *missing = NULL;
#define ATTN__CU_SYM(var, type, sym)                                                               \
    type var = (type)dlsym(h, sym);                                                                \
    if (!var && !missing) missing = sym;
    ATTN__CU_SYM(cu_init, attn__cuInit_fn, "cuInit")
    ATTN__CU_SYM(get_count, attn__cuDeviceGetCount_fn, "cuDeviceGetCount")
    ATTN__CU_SYM(get_dev, attn__cuDeviceGet_fn, "cuDeviceGet")
    ATTN__CU_SYM(get_name, attn__cuDeviceGetName_fn, "cuDeviceGetName")
    ATTN__CU_SYM(get_attr, attn__cuDeviceGetAttribute_fn, "cuDeviceGetAttribute")
    ATTN__CU_SYM(total_mem, attn__cuDeviceTotalMem_fn, "cuDeviceTotalMem_v2")
#undef ATTN__CU_SYM
    if (missing) {
        snprintf(pr->reason, sizeof pr->reason, "%.200s: missing symbol %s", pr->library, missing);
        dlclose(h);
        return;
    }
    attn__cuGetErrorName_fn err_name = (attn__cuGetErrorName_fn)dlsym(h, "cuGetErrorName");

    /* From here on the driver may hold state: the handle stays open. */
    attn__CUresult r = cu_init(0);
    if (r != 0) {
        attn__cuda_err(pr->reason, sizeof pr->reason, "cuInit", r, err_name);
        return;
    }
    int count = 0;
    r = get_count(&count);
    if (r != 0) {
        attn__cuda_err(pr->reason, sizeof pr->reason, "cuDeviceGetCount", r, err_name);
        return;
    }
    if (count <= 0) {
        snprintf(pr->reason, sizeof pr->reason, "%.200s loaded but reports no CUDA device",
                 pr->library);
        return;
    }
    pr->device_count = count;
    for (int i = 0; i < count && pr->listed < ATTN__PROBE_MAX_DEVICES; i++) {
        attn__gpu_device *d = &pr->devices[pr->listed];
        attn__CUdevice dev = 0;
        size_t mem = 0;
        if ((r = get_dev(&dev, i)) != 0 || (r = get_name(d->name, sizeof d->name, dev)) != 0 ||
            (r = get_attr(&d->cc_major, ATTN__CU_ATTR_CC_MAJOR, dev)) != 0 ||
            (r = get_attr(&d->cc_minor, ATTN__CU_ATTR_CC_MINOR, dev)) != 0 ||
            (r = total_mem(&mem, dev)) != 0) {
            char what[64];
            snprintf(what, sizeof what, "querying CUDA device %d", i);
            attn__cuda_err(pr->reason, sizeof pr->reason, what, r, err_name);
            memset(d, 0, sizeof *d);
            if (pr->listed == 0) return; /* device 0 is the one that matters: not usable */
            break;
        }
        d->name[sizeof d->name - 1] = '\0';
        d->memory_bytes = mem;
        pr->listed++;
    }
    pr->present = true;
    pr->reason[0] = '\0';
}

const attn__gpu_probe *attn__probe_cuda(void)
{
    pthread_once(&attn__cuda_once, attn__cuda_init);
    return &attn__cuda;
}
