/* Stand-ins for the CUDA driver (libcuda) and the HIP runtime (libamdhip64),
 * built as two shared objects so the probes' loaded-driver paths run on a
 * machine without a GPU. Behaviour is steered by environment variables:
 *   FAKE_CUDA_MODE = ok (default) | init_fail | no_device | query_fail
 *   FAKE_HIP_GFX   = gcnArchName reported (default "gfx942:sramecc+:xnack-")
 *   FAKE_HIP_NOPROPS = 1: hipGetDeviceProperties* fails (sysfs fallback path)
 * Only the entry points the probes use exist; signatures mirror the real ones. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

static const char *fake_env(const char *k, const char *def)
{
    const char *v = getenv(k);
    return v && *v ? v : def;
}

#if defined(FAKE_CUDA)
int cuInit(unsigned flags);
int cuDeviceGetCount(int *count);
int cuDeviceGet(int *dev, int ordinal);
int cuDeviceGetName(char *name, int len, int dev);
int cuDeviceGetAttribute(int *v, int attr, int dev);
int cuDeviceTotalMem_v2(size_t *bytes, int dev);
int cuGetErrorName(int r, const char **name);

FAKE_API int cuInit(unsigned flags)
{
    (void)flags;
    return strcmp(fake_env("FAKE_CUDA_MODE", "ok"), "init_fail") ? 0 : 100;
}

FAKE_API int cuDeviceGetCount(int *count)
{
    *count = strcmp(fake_env("FAKE_CUDA_MODE", "ok"), "no_device") ? 2 : 0;
    return 0;
}

FAKE_API int cuDeviceGet(int *dev, int ordinal)
{
    *dev = ordinal;
    return ordinal >= 0 && ordinal < 2 ? 0 : 101;
}

FAKE_API int cuDeviceGetName(char *name, int len, int dev)
{
    if (!strcmp(fake_env("FAKE_CUDA_MODE", "ok"), "query_fail")) return 999;
    const char *n = dev == 0 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB";
    strncpy(name, n, (size_t)len);
    return 0;
}

FAKE_API int cuDeviceGetAttribute(int *v, int attr, int dev)
{
    if (attr == 75)
        *v = dev == 0 ? 9 : 8;
    else if (attr == 76)
        *v = 0;
    else
        return 1;
    return 0;
}

FAKE_API int cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
    (void)dev;
    *bytes = (size_t)80 << 30;
    return 0;
}

FAKE_API int cuGetErrorName(int r, const char **name)
{
    if (r == 100) {
        *name = "CUDA_ERROR_NO_DEVICE";
        return 0;
    }
    return 1;
}
#elif defined(FAKE_HIP)
int hipGetDeviceCount(int *count);
int hipDeviceGetName(char *name, int len, int dev);
int hipDeviceTotalMem(size_t *bytes, int dev);
int hipGetDevicePropertiesR0600(void *prop, int dev);

FAKE_API int hipGetDeviceCount(int *count)
{
    *count = 1;
    return 0;
}

FAKE_API int hipDeviceGetName(char *name, int len, int dev)
{
    (void)dev;
    strncpy(name, "AMD Instinct MI300X", (size_t)len);
    return 0;
}

FAKE_API int hipDeviceTotalMem(size_t *bytes, int dev)
{
    (void)dev;
    *bytes = (size_t)192 << 30;
    return 0;
}

/* Name first, other fields, gcnArchName somewhere later: the layout the
 * probe must not depend on. */
FAKE_API int hipGetDevicePropertiesR0600(void *prop, int dev)
{
    (void)dev;
    if (!strcmp(fake_env("FAKE_HIP_NOPROPS", "0"), "1")) return 1;
    char *p = prop;
    strcpy(p, "AMD Instinct MI300X");
    memset(p + 256, 0x7f, 16); /* non-string bytes before the field */
    strcpy(p + 1160, fake_env("FAKE_HIP_GFX", "gfx942:sramecc+:xnack-"));
    return 0;
}
#endif
