/* ROCm probe: the HIP runtime loaded with dlopen ("libamdhip64.so", then
 * ".so.6", ".so.5"; ATTN_HIP_LIBRARY overrides for tests), once per process.
 *
 * Name and memory come from function calls whose signatures are stable
 * (hipDeviceGetName, hipDeviceTotalMem). The gfx arch is only in
 * hipDeviceProp_t, whose layout differs between ROCm releases, so instead of
 * trusting an offset we hand the runtime a large zeroed buffer and look for
 * the gcnArchName field: a NUL-delimited string "gfx<digits>..." starting a
 * field. If that finds nothing, the KFD topology in sysfs gives
 * gfx_target_version per GPU node (the k-th GPU node is taken as HIP device
 * k, which holds unless HIP_VISIBLE_DEVICES reorders them). */
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/detect.h"
#include "util/error.h"

/* The §6b rule; on failure writes why into err and returns false. */
static bool attn__rocm_cap_parse(const char *gfx, int *major, int *minor, char *err, size_t errsz)
{
    size_t len = strcspn(gfx, ":");
    if (len < 3 || strncmp(gfx, "gfx", 3) != 0) {
        snprintf(err, errsz,
                 "invalid ROCm gfx arch '%s': expected 'gfx' followed by digits "
                 "(gfx942)",
                 gfx);
        return false;
    }
    size_t nd = 0;
    while (3 + nd < len && isdigit((unsigned char)gfx[3 + nd]))
        nd++;
    for (size_t i = 3 + nd; i < len; i++) {
        if (!isalnum((unsigned char)gfx[i])) {
            snprintf(err, errsz, "invalid ROCm gfx arch '%s': unexpected character '%c'", gfx,
                     gfx[i]);
            return false;
        }
    }
    if (nd < 2 || nd >= 5) {
        snprintf(err, errsz, "invalid ROCm gfx arch '%s': expected 2 to 4 digits after 'gfx'", gfx);
        return false;
    }
    const char *d = gfx + 3;
    int maj = nd == 4 ? (d[0] - '0') * 10 + (d[1] - '0') : d[0] - '0';
    int min = nd == 4 ? d[2] - '0' : d[1] - '0';
    if (maj < 9 || maj > 12) {
        snprintf(err, errsz, "invalid ROCm gfx arch '%s': major version %d is outside 9..12", gfx,
                 maj);
        return false;
    }
    *major = maj;
    *minor = min;
    return true;
}

attn_status attn__rocm_capability(const char *gfx, int *major, int *minor)
{
    ATTN__CHECK_NULL(gfx);
    ATTN__CHECK_NULL(major);
    ATTN__CHECK_NULL(minor);
    char err[256];
    if (!attn__rocm_cap_parse(gfx, major, minor, err, sizeof err))
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s", err);
    return ATTN_OK;
}

typedef int attn__hipError_t; /* 0 = hipSuccess */
typedef attn__hipError_t (*attn__hipInit_fn)(unsigned flags);
typedef attn__hipError_t (*attn__hipGetDeviceCount_fn)(int *count);
typedef attn__hipError_t (*attn__hipDeviceGet_fn)(int *dev, int ordinal);
typedef attn__hipError_t (*attn__hipDeviceGetName_fn)(char *name, int len, int dev);
typedef attn__hipError_t (*attn__hipDeviceTotalMem_fn)(size_t *bytes, int dev);
typedef attn__hipError_t (*attn__hipGetDeviceProperties_fn)(void *prop, int dev);
typedef const char *(*attn__hipGetErrorName_fn)(attn__hipError_t e);

#define ATTN__HIP_PROPS_BYTES 16384 /* far above any hipDeviceProp_t so far (~1.5 KiB) */

static attn__gpu_probe attn__rocm;
static pthread_once_t attn__rocm_once = PTHREAD_ONCE_INIT;

/* Copies the gfx arch out of a hipDeviceProp_t-shaped buffer, suffix dropped. */
static bool attn__rocm_scan_props(const char *buf, size_t size, char *out, size_t outsz)
{
    for (size_t o = 0; o + 5 < size; o++) {
        if ((o && buf[o - 1] != '\0') || strncmp(buf + o, "gfx", 3) != 0 ||
            !isdigit((unsigned char)buf[o + 3]))
            continue;
        size_t n = 0;
        while (o + n < size && n < 256 && buf[o + n] && isprint((unsigned char)buf[o + n]))
            n++;
        if (o + n >= size || buf[o + n] != '\0') continue;
        size_t keep = strcspn(buf + o, ":");
        if (keep >= outsz) continue;
        memcpy(out, buf + o, keep);
        out[keep] = '\0';
        return true;
    }
    return false;
}

static int attn__rocm_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* gfx arch of the index-th GPU node of the KFD topology. */
static bool attn__rocm_sysfs_gfx(int index, char *out, size_t outsz)
{
    const char *root = "/sys/class/kfd/kfd/topology/nodes";
    DIR *dir = opendir(root);
    if (!dir) return false;
    int nodes[256], n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) && n < 256)
        if (isdigit((unsigned char)e->d_name[0])) nodes[n++] = atoi(e->d_name);
    closedir(dir);
    qsort(nodes, (size_t)n, sizeof nodes[0], attn__rocm_cmp_int);
    int gpu = 0;
    for (int i = 0; i < n; i++) {
        char path[128], line[256];
        snprintf(path, sizeof path, "%s/%d/properties", root, nodes[i]);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        long v = 0;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "gfx_target_version %ld", &v) == 1) break;
        fclose(f);
        if (v <= 0) continue; /* a CPU node */
        if (gpu++ == index) {
            /* major*10000 + minor*100 + stepping; stepping is one hex digit */
            snprintf(out, outsz, "gfx%ld%ld%lx", v / 10000, (v / 100) % 100, v % 100);
            return true;
        }
    }
    return false;
}

static void attn__rocm_err(char *buf, size_t size, const char *what, attn__hipError_t r,
                           attn__hipGetErrorName_fn err_name)
{
    const char *name = err_name ? err_name(r) : NULL;
    if (name)
        snprintf(buf, size, "%s failed: hipError_t %d (%s)", what, r, name);
    else
        snprintf(buf, size, "%s failed: hipError_t %d", what, r);
}

static void attn__rocm_init(void)
{
    attn__gpu_probe *pr = &attn__rocm;
    static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5",
                                        NULL};
    void *h = attn__probe_dlopen("ATTN_HIP_LIBRARY", names, pr->library, sizeof pr->library,
                                 pr->reason, sizeof pr->reason);
    if (!h) return;
    attn__hipGetDeviceCount_fn get_count =
        (attn__hipGetDeviceCount_fn)dlsym(h, "hipGetDeviceCount");
    if (!get_count) {
        snprintf(pr->reason, sizeof pr->reason, "%.200s: missing symbol hipGetDeviceCount",
                 pr->library);
        dlclose(h);
        return;
    }
    attn__hipInit_fn hip_init = (attn__hipInit_fn)dlsym(h, "hipInit");
    attn__hipDeviceGet_fn get_dev = (attn__hipDeviceGet_fn)dlsym(h, "hipDeviceGet");
    attn__hipDeviceGetName_fn get_name = (attn__hipDeviceGetName_fn)dlsym(h, "hipDeviceGetName");
    attn__hipDeviceTotalMem_fn total_mem =
        (attn__hipDeviceTotalMem_fn)dlsym(h, "hipDeviceTotalMem");
    /* ROCm 6 renamed the symbol for its new struct; both carry gcnArchName. */
    attn__hipGetDeviceProperties_fn get_props =
        (attn__hipGetDeviceProperties_fn)dlsym(h, "hipGetDevicePropertiesR0600");
    if (!get_props) get_props = (attn__hipGetDeviceProperties_fn)dlsym(h, "hipGetDeviceProperties");
    attn__hipGetErrorName_fn err_name = (attn__hipGetErrorName_fn)dlsym(h, "hipGetErrorName");

    attn__hipError_t r;
    if (hip_init && (r = hip_init(0)) != 0) {
        attn__rocm_err(pr->reason, sizeof pr->reason, "hipInit", r, err_name);
        return;
    }
    int count = 0;
    if ((r = get_count(&count)) != 0) {
        attn__rocm_err(pr->reason, sizeof pr->reason, "hipGetDeviceCount", r, err_name);
        return;
    }
    if (count <= 0) {
        snprintf(pr->reason, sizeof pr->reason, "%.200s loaded but reports no ROCm device",
                 pr->library);
        return;
    }
    pr->device_count = count;
    char *props = calloc(1, ATTN__HIP_PROPS_BYTES);
    for (int i = 0; i < count && pr->listed < ATTN__PROBE_MAX_DEVICES; i++) {
        attn__gpu_device *d = &pr->devices[pr->listed];
        int dev = i;
        if (get_dev && get_dev(&dev, i) != 0) dev = i;
        bool have_props = false;
        if (props && get_props) {
            memset(props, 0, ATTN__HIP_PROPS_BYTES);
            have_props = get_props(props, i) == 0;
        }
        if (!get_name || get_name(d->name, sizeof d->name, dev) != 0) {
            /* name is the first field of every hipDeviceProp_t version */
            if (have_props)
                snprintf(d->name, sizeof d->name, "%.*s", (int)sizeof d->name - 1, props);
            else
                d->name[0] = '\0';
        }
        d->name[sizeof d->name - 1] = '\0';
        if (!d->name[0]) snprintf(d->name, sizeof d->name, "AMD GPU %d", i);
        size_t mem = 0;
        if (total_mem && total_mem(&mem, dev) == 0) d->memory_bytes = mem;
        if (!(have_props &&
              attn__rocm_scan_props(props, ATTN__HIP_PROPS_BYTES, d->gfx_arch, sizeof d->gfx_arch)))
            attn__rocm_sysfs_gfx(i, d->gfx_arch, sizeof d->gfx_arch);
        char why[256];
        d->cc_major = d->cc_minor = -1;
        if (d->gfx_arch[0] &&
            !attn__rocm_cap_parse(d->gfx_arch, &d->cc_major, &d->cc_minor, why, sizeof why))
            d->cc_major = d->cc_minor = -1;
        pr->listed++;
    }
    free(props);
    pr->present = true;
    pr->reason[0] = '\0';
}

const attn__gpu_probe *attn__probe_rocm(void)
{
    pthread_once(&attn__rocm_once, attn__rocm_init);
    return &attn__rocm;
}
