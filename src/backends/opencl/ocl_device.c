/* The process-wide OpenCL state: the device table (enumerated once), one
 * context per device (created at its first open) and the program cache.
 *
 * A program is keyed by (device, sources, build options) and built once per
 * process: the device's lock is held across the build, so a second thread
 * asking for the same program waits and then finds it. A build failure is
 * kept as well (status and the compiler's log), so a broken program costs
 * one compile, not one per open. Nothing here is ever released: contexts
 * and programs live as long as the process, as the ICD does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_impl.h"
#include "util/error.h"

struct attn__ocl_prog {
    attn__ocl_prog *next;
    uint64_t hash; /* FNV-1a of the sources */
    size_t length; /* total source bytes */
    char *options;
    attn__cl_program prog; /* NULL when the build failed */
    attn_status status;
    char *log; /* compiler log of a failed build */
};

static attn__ocl_dev g_devs[ATTN__OCL_MAX_DEVICES];
static int g_ndev;
static char g_reason[512];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_count_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_builds;

static void dev_str(const attn__cl_api *cl, attn__cl_device_id id, attn__cl_uint param, char *buf,
                    size_t size)
{
    buf[0] = '\0';
    if (cl->GetDeviceInfo(id, param, size - 1, buf, NULL) != ATTN__CL_SUCCESS) buf[0] = '\0';
    buf[size - 1] = '\0';
}

/* Fills d from the device's info; false when it cannot run kernels. */
static bool dev_init(const attn__cl_api *cl, attn__cl_platform_id p, attn__cl_device_id id,
                     attn__ocl_dev *d)
{
    attn__cl_bool avail = 0, compiler = 0;
    attn__cl_ulong type = 0, local = 0, alloc = 0, constant = 0;
    attn__cl_uint cus = 0;
    size_t wg = 0;
    if (cl->GetDeviceInfo(id, ATTN__CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL) ||
        cl->GetDeviceInfo(id, ATTN__CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler,
                          NULL) ||
        !avail || !compiler)
        return false;
    if (cl->GetDeviceInfo(id, ATTN__CL_DEVICE_TYPE, sizeof type, &type, NULL)) type = 0;
    if (cl->GetDeviceInfo(id, ATTN__CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL))
        local = 0;
    if (cl->GetDeviceInfo(id, ATTN__CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL))
        alloc = 0;
    if (cl->GetDeviceInfo(id, ATTN__CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, sizeof constant, &constant,
                          NULL))
        constant = 0;
    if (cl->GetDeviceInfo(id, ATTN__CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL)) cus = 0;
    if (cl->GetDeviceInfo(id, ATTN__CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL)) wg = 0;
    char dname[256], pname[120];
    dev_str(cl, id, ATTN__CL_DEVICE_NAME, dname, sizeof dname);
    pname[0] = '\0';
    if (cl->GetPlatformInfo(p, ATTN__CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL)) pname[0] = 0;
    pname[sizeof pname - 1] = '\0';
    snprintf(d->name, sizeof d->name, "%s (%s)", dname, pname);
    dev_str(cl, id, ATTN__CL_DEVICE_OPENCL_C_VERSION, d->c_version, sizeof d->c_version);
    d->platform = p;
    d->id = id;
    d->gpu = (type & ATTN__CL_DEVICE_TYPE_GPU) != 0;
    d->compute_units = cus;
    d->local_mem = local;
    d->max_alloc = alloc;
    d->max_constant = constant;
    d->max_wg = wg;
    pthread_mutex_init(&d->lock, NULL);
    return true;
}

static void enumerate(void)
{
    const attn__cl_api *cl = attn__cl_load();
    if (!cl) {
        snprintf(g_reason, sizeof g_reason, "%s", attn_last_error());
        return;
    }
    attn__cl_platform_id plats[8];
    attn__cl_uint np = 0;
    attn__cl_int r = cl->GetPlatformIDs(8, plats, &np);
    if (r == ATTN__CL_PLATFORM_NOT_FOUND_KHR || (r == ATTN__CL_SUCCESS && np == 0)) {
        snprintf(g_reason, sizeof g_reason, "OpenCL: no platform (ICD) is installed");
        return;
    }
    if (r != ATTN__CL_SUCCESS) {
        snprintf(g_reason, sizeof g_reason, "OpenCL clGetPlatformIDs failed: %s (%d)",
                 attn__cl_error_name(r), (int)r);
        return;
    }
    if (np > 8) np = 8;
    for (attn__cl_uint i = 0; i < np; i++) {
        attn__cl_device_id ids[ATTN__OCL_MAX_DEVICES];
        attn__cl_uint nd = 0;
        if (cl->GetDeviceIDs(plats[i], ATTN__CL_DEVICE_TYPE_ALL, ATTN__OCL_MAX_DEVICES, ids, &nd))
            continue;
        if (nd > ATTN__OCL_MAX_DEVICES) nd = ATTN__OCL_MAX_DEVICES;
        for (attn__cl_uint k = 0; k < nd && g_ndev < ATTN__OCL_MAX_DEVICES; k++)
            if (dev_init(cl, plats[i], ids[k], &g_devs[g_ndev])) g_ndev++;
    }
    if (g_ndev == 0)
        snprintf(g_reason, sizeof g_reason,
                 "OpenCL: %u platform(s) but no available device with a compiler", (unsigned)np);
}

attn__ocl_dev *attn__ocl_devices(int *count)
{
    pthread_once(&g_once, enumerate);
    *count = g_ndev;
    if (g_ndev > 0) return g_devs;
    attn__fail(ATTN_PLATFORM_UNAVAILABLE, "%s", g_reason);
    return NULL;
}

int attn__ocl_device_count(void)
{
    int n = 0;
    attn__ocl_devices(&n);
    return n;
}

const char *attn__ocl_unavailable(void)
{
    pthread_once(&g_once, enumerate);
    return g_ndev > 0 ? NULL : g_reason;
}

attn_status attn__ocl_dev_context(attn__ocl_dev *d)
{
    const attn__cl_api *cl = attn__cl_load();
    if (!cl) return ATTN_PLATFORM_UNAVAILABLE;
    pthread_mutex_lock(&d->lock);
    attn__cl_int r = ATTN__CL_SUCCESS;
    if (!d->ctx) {
        attn__cl_context_properties props[] = {ATTN__CL_CONTEXT_PLATFORM,
                                               (attn__cl_context_properties)d->platform, 0};
        d->ctx = cl->CreateContext(props, 1, &d->id, NULL, NULL, &r);
    }
    pthread_mutex_unlock(&d->lock);
    if (!d->ctx) return attn__cl_fail(ATTN_PLATFORM_UNAVAILABLE, "clCreateContext", r);
    return ATTN_OK;
}

unsigned attn__ocl_build_count(void)
{
    pthread_mutex_lock(&g_count_lock);
    unsigned n = g_builds;
    pthread_mutex_unlock(&g_count_lock);
    return n;
}

static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static char *build_log(const attn__cl_api *cl, attn__cl_program p, attn__cl_device_id id)
{
    size_t n = 0;
    if (cl->GetProgramBuildInfo(p, id, ATTN__CL_PROGRAM_BUILD_LOG, 0, NULL, &n) || n == 0)
        return strdup("(no build log)");
    char *log = calloc(1, n + 1);
    if (log && cl->GetProgramBuildInfo(p, id, ATTN__CL_PROGRAM_BUILD_LOG, n, log, NULL)) log[0] = 0;
    return log;
}

/* Builds e's program (lock held); sets e->prog or e->status and e->log. */
static void build(const attn__cl_api *cl, attn__ocl_dev *d, attn__ocl_prog *e,
                  const char *const *sources, int count)
{
    attn__cl_int r = ATTN__CL_SUCCESS;
    size_t *lens = malloc(sizeof(size_t) * (size_t)count);
    if (!lens) {
        e->status = ATTN_OUT_OF_MEMORY;
        return;
    }
    for (int i = 0; i < count; i++)
        lens[i] = strlen(sources[i]);
    attn__cl_program p =
        cl->CreateProgramWithSource(d->ctx, (attn__cl_uint)count, (const char **)sources, lens, &r);
    free(lens);
    if (!p) {
        e->status = ATTN_IMPORT_ERROR;
        e->log = strdup(attn__cl_error_name(r));
        return;
    }
    pthread_mutex_lock(&g_count_lock);
    g_builds++;
    pthread_mutex_unlock(&g_count_lock);
    r = cl->BuildProgram(p, 1, &d->id, e->options, NULL, NULL);
    if (r == ATTN__CL_SUCCESS) {
        e->prog = p;
        e->status = ATTN_OK;
        return;
    }
    char *log = build_log(cl, p, d->id);
    size_t n = (log ? strlen(log) : 0) + 64;
    e->log = malloc(n);
    if (e->log) snprintf(e->log, n, "%s (%d): %s", attn__cl_error_name(r), (int)r, log ? log : "");
    free(log);
    cl->ReleaseProgram(p);
    e->status = ATTN_IMPORT_ERROR;
}

attn_status attn__ocl_dev_program(attn__ocl_dev *d, const char *const *sources, int count,
                                  const char *options, attn__cl_program *out)
{
    const attn__cl_api *cl = attn__cl_load();
    if (!cl) return ATTN_PLATFORM_UNAVAILABLE;
    if (count < 1) return attn__fail(ATTN_INVALID_ARGUMENT, "OpenCL program: no source");
    for (int i = 0; i < count; i++)
        ATTN__CHECK_NULL(sources[i]);
    options = options ? options : "";
    uint64_t h = 0xcbf29ce484222325ull;
    size_t len = 0;
    for (int i = 0; i < count; i++) {
        size_t n = strlen(sources[i]);
        h = fnv1a(h, sources[i], n);
        len += n;
    }
    pthread_mutex_lock(&d->lock);
    attn__ocl_prog *e = d->progs;
    while (e && !(e->hash == h && e->length == len && strcmp(e->options, options) == 0))
        e = e->next;
    if (!e) {
        e = calloc(1, sizeof *e);
        char *opts = strdup(options);
        if (!e || !opts) {
            free(e);
            free(opts);
            pthread_mutex_unlock(&d->lock);
            return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL program cache: out of memory");
        }
        e->hash = h;
        e->length = len;
        e->options = opts;
        build(cl, d, e, sources, count);
        e->next = d->progs;
        d->progs = e;
    }
    attn__cl_program p = e->prog;
    attn_status st = e->status;
    const char *log = e->log ? e->log : "";
    pthread_mutex_unlock(&d->lock);
    if (st != ATTN_OK)
        return attn__fail(st, "OpenCL program build failed on %.200s (options \"%.200s\"): %.1400s",
                          d->name, options, log);
    *out = p;
    return ATTN_OK;
}
