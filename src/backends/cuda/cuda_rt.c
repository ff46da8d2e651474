/* CUDA devices, instances and memory for the dialect's kernels: one primary
 * context per device (retained once), the module image loaded once per
 * (device, image) and cached with its failure, an instance per stream with
 * its own function handles, buffers as opaque handles. Copies in return
 * once the host buffer may be reused, copies out once the data is there;
 * launches return at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"

_Static_assert(KD_ELEM_F32 == ATTN_ELEM_F32 && KD_ELEM_F16 == ATTN_ELEM_F16 &&
                   KD_ELEM_BF16 == ATTN_ELEM_BF16 && KD_ELEM_E4M3 == ATTN_ELEM_FP8_E4M3 &&
                   KD_ELEM_E5M2 == ATTN_ELEM_FP8_E5M2,
               "kd_params.h element codes are attn_elem's");

/* The embedded fatbin (cmake/cuda.cmake: <build>/generated/cuda_fatbin.c). */
extern const unsigned char attn__cuda_fatbin_data[], attn__cuda_fatbin_end[];
extern const char attn__cuda_fatbin_arch_list[];

struct attn__cuda_modl {
    attn__cuda_modl *next;
    const void *image;
    attn__cu_module mod;
    attn_status status;
    char detail[400];
};

static attn__cuda_dev g_devs[ATTN__CUDA_MAX_DEVICES];
static int g_ndev = -1;
static attn_status g_dev_status;
static char g_dev_reason[400];
static pthread_once_t g_dev_once = PTHREAD_ONCE_INIT;

const void *attn__cuda_fatbin(void)
{
    return attn__cuda_fatbin_data;
}

size_t attn__cuda_fatbin_size(void)
{
    return (size_t)(attn__cuda_fatbin_end - attn__cuda_fatbin_data);
}

const char *attn__cuda_fatbin_archs(void)
{
    return attn__cuda_fatbin_arch_list;
}

static void devices_once(void)
{
    g_ndev = 0;
    const attn__cu_api *cu = attn__cu_load();
    if (!cu) {
        g_dev_status = attn__cu_load_status();
        snprintf(g_dev_reason, sizeof g_dev_reason, "%s", attn__cuda_last_error());
        return;
    }
    int n = 0;
    attn__cu_result r = cu->DeviceGetCount(&n);
    if (r != ATTN__CU_SUCCESS || n < 1) {
        g_dev_status = ATTN_PLATFORM_UNAVAILABLE;
        attn__cu_fail(ATTN_PLATFORM_UNAVAILABLE,
                      "libattn_cuda.so: no CUDA device (cuDeviceGetCount)",
                      r == ATTN__CU_SUCCESS ? ATTN__CU_ERROR_NO_DEVICE : r);
        snprintf(g_dev_reason, sizeof g_dev_reason, "%s", attn__cuda_last_error());
        return;
    }
    for (int i = 0; i < n && g_ndev < ATTN__CUDA_MAX_DEVICES; i++) {
        attn__cuda_dev *d = &g_devs[g_ndev];
        int major = 0, minor = 0;
        if (cu->DeviceGet(&d->dev, i) != ATTN__CU_SUCCESS) continue;
        char name[256] = "";
        cu->DeviceGetName(name, sizeof name, d->dev);
        cu->DeviceGetAttribute(&major, ATTN__CU_DEV_CC_MAJOR, d->dev);
        cu->DeviceGetAttribute(&minor, ATTN__CU_DEV_CC_MINOR, d->dev);
        cu->DeviceGetAttribute(&d->sm_count, ATTN__CU_DEV_SM_COUNT, d->dev);
        d->ordinal = i;
        d->cc = major * 10 + minor;
        snprintf(d->name, sizeof d->name, "%s (sm_%d, %d SMs)", name, d->cc, d->sm_count);
        pthread_mutex_init(&d->lock, NULL);
        g_ndev++;
    }
    g_dev_status = ATTN_OK;
}

int attn__cuda_device_count(void)
{
    pthread_once(&g_dev_once, devices_once);
    if (g_ndev == 0) attn__cuda_fail(g_dev_status, "%s", g_dev_reason);
    return g_ndev;
}

attn_status attn__cuda_enter(const attn__cuda_dev *d)
{
    const attn__cu_api *cu = attn__cu_load();
    if (!cu) return attn__cu_load_status();
    attn__cu_result r = cu->CtxPushCurrent(d->ctx);
    return r == ATTN__CU_SUCCESS ? ATTN_OK : attn__cu_fail(ATTN_INTERNAL, "cuCtxPushCurrent", r);
}

void attn__cuda_leave(void)
{
    attn__cu_ctx c = NULL;
    const attn__cu_api *cu = attn__cu_load();
    if (cu) cu->CtxPopCurrent(&c);
}

/* The device's primary context and the module of image, loaded once; the
 * caller holds no lock. */
static attn_status dev_module(attn__cuda_dev *d, const void *image, attn__cu_module *out)
{
    const attn__cu_api *cu = attn__cu_load();
    attn_status st = ATTN_OK;
    pthread_mutex_lock(&d->lock);
    if (!d->ctx) {
        attn__cu_result r = cu->DevicePrimaryCtxRetain(&d->ctx, d->dev);
        if (r != ATTN__CU_SUCCESS) {
            d->ctx = NULL;
            st = attn__cu_fail(ATTN_PLATFORM_UNAVAILABLE, "cuDevicePrimaryCtxRetain", r);
        }
    }
    attn__cuda_modl *m = d->mods;
    while (st == ATTN_OK && m && m->image != image)
        m = m->next;
    if (st == ATTN_OK && !m) {
        m = calloc(1, sizeof *m);
        if (!m) {
            st = attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA module: out of memory");
        } else {
            m->image = image;
            m->status = attn__cuda_enter(d);
            if (m->status == ATTN_OK) {
                attn__cu_result r = cu->ModuleLoadData(&m->mod, image);
                attn__cuda_leave();
                if (r != ATTN__CU_SUCCESS) {
                    char what[200];
                    snprintf(what, sizeof what, "libattn_cuda.so has no code for %.100s (%s)",
                             d->name,
                             image == attn__cuda_fatbin_data ? attn__cuda_fatbin_arch_list
                                                             : "a test image");
                    m->status = attn__cu_fail(ATTN_IMPORT_ERROR, what, r);
                }
            }
            snprintf(m->detail, sizeof m->detail, "%s", attn__cuda_last_error());
            m->next = d->mods;
            d->mods = m;
        }
    }
    if (st == ATTN_OK) {
        st = m->status;
        if (st != ATTN_OK) attn__cuda_fail(st, "%s", m->detail);
        *out = m->mod;
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

static attn_status make_functions(attn__cuda *c, attn__cu_module mod)
{
    for (int i = 0; i < ATTN__KD_KERNEL_COUNT; i++) {
        attn__cu_result r = c->cu->ModuleGetFunction(&c->f[i], mod, attn__kd_kernel_names[i]);
        if (r != ATTN__CU_SUCCESS)
            return attn__cu_fail(ATTN_IMPORT_ERROR, attn__kd_kernel_names[i], r);
        int most = 0;
        c->cu->FuncGetAttribute(&most, ATTN__CU_FUNC_MAX_THREADS_PER_BLOCK, c->f[i]);
        if (most < KD_WG)
            return attn__cuda_fail(ATTN_UNSUPPORTED, "%.200s runs %s with blocks of %d, below %d",
                                   c->dev->name, attn__kd_kernel_names[i], most, KD_WG);
    }
    return ATTN_OK;
}

attn_status attn__cuda_open(const attn__cuda_options *opt, attn__cuda **out)
{
    if (!out) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "attn__cuda_open: out is NULL");
    *out = NULL;
    int n = attn__cuda_device_count();
    if (n == 0) return g_dev_status;
    int want = opt ? opt->device : 0;
    if (want < 0 || want >= n)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA device %d: there are %d device(s)",
                               want, n);
    attn__cuda_dev *d = &g_devs[want];
    attn__cu_module mod = NULL;
    const void *image = opt && opt->image ? opt->image : attn__cuda_fatbin_data;
    attn_status st = dev_module(d, image, &mod);
    if (st != ATTN_OK) return st;
    attn__cuda *c = calloc(1, sizeof *c);
    if (!c) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA instance: out of memory");
    c->cu = attn__cu_load();
    c->dev = d;
    st = attn__cuda_enter(d);
    if (st == ATTN_OK) {
        attn__cu_result r = c->cu->StreamCreate(&c->stream, ATTN__CU_STREAM_NON_BLOCKING);
        if (r != ATTN__CU_SUCCESS)
            st = attn__cu_fail(ATTN_PLATFORM_UNAVAILABLE, "cuStreamCreate", r);
        if (st == ATTN_OK) st = make_functions(c, mod);
        attn__cuda_leave();
    }
    if (st != ATTN_OK) {
        attn__cuda_close(c);
        return st;
    }
    *out = c;
    return ATTN_OK;
}

void attn__cuda_close(attn__cuda *c)
{
    if (!c) return;
    if (c->stream && attn__cuda_enter(c->dev) == ATTN_OK) {
        c->cu->StreamSynchronize(c->stream); /* the scratch below is free after this */
        attn__cuda_leave();
    }
    attn__cuda_free(c->part);
    attn__cuda_free(c->slots);
    attn__cuda_free(c->scales);
    if (c->stream && attn__cuda_enter(c->dev) == ATTN_OK) {
        c->cu->StreamDestroy(c->stream);
        attn__cuda_leave();
    }
    free(c);
}

const char *attn__cuda_device_name(const attn__cuda *c)
{
    return c ? c->dev->name : "";
}

int attn__cuda_capability(const attn__cuda *c)
{
    return c ? c->dev->cc : 0;
}

int attn__cuda_sm_count(const attn__cuda *c)
{
    return c ? c->dev->sm_count : 0;
}

/* ---- memory ------------------------------------------------------------------------- */

attn_status attn__cuda_alloc(attn__cuda *c, size_t bytes, attn__cuda_mem **out)
{
    if (!c || !out) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "attn__cuda_alloc: NULL argument");
    *out = NULL;
    if (bytes == 0) return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA buffer of 0 bytes");
    attn__cuda_mem *m = calloc(1, sizeof *m);
    if (!m) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA buffer: out of memory");
    attn_status st = attn__cuda_enter(c->dev);
    if (st == ATTN_OK) {
        attn__cu_result r = c->cu->MemAlloc(&m->ptr, bytes);
        if (r != ATTN__CU_SUCCESS) {
            char what[80];
            snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
            st = attn__cu_fail(ATTN_OUT_OF_MEMORY, what, r);
        } else if ((r = c->cu->MemsetD8Async(m->ptr, 0, bytes, c->stream)) != ATTN__CU_SUCCESS) {
            c->cu->MemFree(m->ptr);
            st = attn__cu_fail(ATTN_INTERNAL, "cuMemsetD8Async", r);
        }
        attn__cuda_leave();
    }
    if (st != ATTN_OK) {
        free(m);
        return st;
    }
    m->dev = c->dev;
    m->size = bytes;
    *out = m;
    return ATTN_OK;
}

void attn__cuda_free(attn__cuda_mem *m)
{
    if (!m) return;
    const attn__cu_api *cu = attn__cu_load();
    /* cuMemFree waits for the work that uses the buffer */
    if (cu && attn__cuda_enter(m->dev) == ATTN_OK) {
        cu->MemFree(m->ptr);
        attn__cuda_leave();
    }
    free(m->shadow);
    free(m);
}

size_t attn__cuda_mem_size(const attn__cuda_mem *m)
{
    return m ? m->size : 0;
}

static attn_status check_range(const attn__cuda *c, const attn__cuda_mem *m, size_t off, size_t n,
                               const char *what)
{
    if (m->dev != c->dev)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "%s: the buffer belongs to another device",
                               what);
    if (off > m->size || n > m->size - off)
        return attn__cuda_fail(ATTN_OUT_OF_RANGE,
                               "%s: bytes [%zu, %zu + %zu) outside the buffer of %zu", what, off,
                               off, n, m->size);
    return ATTN_OK;
}

attn_status attn__cuda_copy_in(attn__cuda *c, attn__cuda_mem *dst, size_t dst_offset,
                               const void *src, size_t bytes)
{
    if (!c || !dst) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA copy in: NULL argument");
    if (bytes == 0) return ATTN_OK;
    if (!src) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA copy in: src is NULL");
    attn_status st = check_range(c, dst, dst_offset, bytes, "CUDA copy in");
    if (st == ATTN_OK) st = attn__cuda_enter(c->dev);
    if (st != ATTN_OK) return st;
    /* from pageable memory the call returns once src is staged */
    attn__cu_result r = c->cu->MemcpyHtoDAsync(dst->ptr + dst_offset, src, bytes, c->stream);
    attn__cuda_leave();
    return r == ATTN__CU_SUCCESS ? ATTN_OK : attn__cu_fail(ATTN_INTERNAL, "cuMemcpyHtoDAsync", r);
}

attn_status attn__cuda_copy_out(attn__cuda *c, void *dst, const attn__cuda_mem *src,
                                size_t src_offset, size_t bytes)
{
    if (!c || !src) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA copy out: NULL argument");
    if (bytes == 0) return ATTN_OK;
    if (!dst) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA copy out: dst is NULL");
    attn_status st = check_range(c, src, src_offset, bytes, "CUDA copy out");
    if (st == ATTN_OK) st = attn__cuda_enter(c->dev);
    if (st != ATTN_OK) return st;
    attn__cu_result r = c->cu->MemcpyDtoHAsync(dst, src->ptr + src_offset, bytes, c->stream);
    if (r == ATTN__CU_SUCCESS) r = c->cu->StreamSynchronize(c->stream);
    attn__cuda_leave();
    return r == ATTN__CU_SUCCESS ? ATTN_OK : attn__cu_fail(ATTN_INTERNAL, "CUDA copy out", r);
}

attn_status attn__cuda_sync(attn__cuda *c)
{
    if (!c) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "attn__cuda_sync: NULL instance");
    attn_status st = attn__cuda_enter(c->dev);
    if (st != ATTN_OK) return st;
    attn__cu_result r = c->cu->StreamSynchronize(c->stream);
    attn__cuda_leave();
    return r == ATTN__CU_SUCCESS ? ATTN_OK : attn__cu_fail(ATTN_INTERNAL, "cuStreamSynchronize", r);
}

attn_status attn__cuda_copy_dd(attn__cuda *c, attn__cuda_mem *dst, const attn__cuda_mem *src,
                               size_t bytes)
{
    if (!c || !dst || !src) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA copy: NULL argument");
    attn_status st = check_range(c, dst, 0, bytes, "CUDA copy (destination)");
    if (st == ATTN_OK) st = check_range(c, src, 0, bytes, "CUDA copy (source)");
    if (st == ATTN_OK) st = attn__cuda_enter(c->dev);
    if (st != ATTN_OK || bytes == 0) return st;
    attn__cu_result r = c->cu->MemcpyDtoDAsync(dst->ptr, src->ptr, bytes, c->stream);
    attn__cuda_leave();
    return r == ATTN__CU_SUCCESS ? ATTN_OK : attn__cu_fail(ATTN_INTERNAL, "cuMemcpyDtoDAsync", r);
}

attn_status attn__cuda_get_info(const attn__cuda *c, attn__cuda_info *out)
{
    if (!c || !out) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "attn__cuda_get_info: NULL");
    *out = (attn__cuda_info){.cc = c->dev->cc, .sm_count = c->dev->sm_count};
    c->cu->DeviceGetAttribute(&out->clock_khz, ATTN__CU_DEV_CLOCK_RATE, c->dev->dev);
    c->cu->DeviceGetAttribute(&out->mem_clock_khz, ATTN__CU_DEV_MEMORY_CLOCK_RATE, c->dev->dev);
    c->cu->DeviceGetAttribute(&out->bus_bits, ATTN__CU_DEV_MEMORY_BUS_WIDTH, c->dev->dev);
    c->cu->DeviceTotalMem(&out->total_mem, c->dev->dev);
    return ATTN_OK;
}

attn_status attn__cuda_scratch(attn__cuda *c, attn__cuda_mem **slot, size_t bytes)
{
    if (*slot && (*slot)->size >= bytes) return ATTN_OK;
    attn__cuda_mem *m = NULL;
    attn_status st = attn__cuda_alloc(c, bytes + bytes / 2, &m);
    if (st != ATTN_OK) return st;
    attn__cuda_free(*slot);
    *slot = m;
    return ATTN_OK;
}

attn_status attn__cuda_upload_words(attn__cuda *c, attn__cuda_mem **meta, const attn__kd_plan *p)
{
    if (p->nwords == 0) return ATTN_OK;
    size_t bytes = sizeof(int32_t) * p->nwords;
    attn__cuda_mem *m = *meta;
    if (m && m->shadow && m->shadow_n == p->nwords && !memcmp(m->shadow, p->words, bytes))
        return ATTN_OK;
    attn_status st = attn__cuda_scratch(c, meta, bytes);
    if (st != ATTN_OK) return st;
    m = *meta;
    m->shadow_n = 0;
    st = attn__cuda_copy_in(c, m, 0, p->words, bytes);
    if (st != ATTN_OK) return st;
    int32_t *sh = realloc(m->shadow, bytes); /* without it, the next call uploads again */
    if (sh) {
        memcpy(sh, p->words, bytes);
        m->shadow = sh;
        m->shadow_n = p->nwords;
    }
    return ATTN_OK;
}

attn_status attn__cuda_check_mem(const attn__cuda *c, const attn__cuda_mem *m, int64_t off,
                                 int64_t elems, size_t esz, const char *what)
{
    if (!m) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA: %s is NULL", what);
    if (m->dev != c->dev)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA: %s is on another device", what);
    if (off < 0 || elems < 0 || off > INT64_MAX - elems ||
        (uint64_t)(off + elems) > m->size / (esz ? esz : 1))
        return attn__cuda_fail(ATTN_OUT_OF_RANGE,
                               "CUDA: %s needs elements [%lld, %lld + %lld) of %zu bytes each; "
                               "the buffer has %zu bytes",
                               what, (long long)off, (long long)off, (long long)elems, esz,
                               m->size);
    return ATTN_OK;
}

/* ---- launches ---------------------------------------------------------------------------- */

attn_status attn__cuda_run(attn__cuda *c, const attn__kd_args *l)
{
    void *params[ATTN__KD_MAX_ARGS];
    attn__cu_ptr ptrs[ATTN__KD_MAX_ARGS];
    for (int i = 0; i < l->n; i++) {
        const attn__kd_arg *a = &l->a[i];
        if (a->kind == ATTN__KD_ARG_MEM) {
            ptrs[i] = a->v.mem ? ((const attn__cuda_mem *)a->v.mem)->ptr : 0;
            params[i] = &ptrs[i];
        } else {
            params[i] = (void *)&a->v; /* the union's first bytes hold i32, i64 and f32 alike */
        }
    }
    if (l->groups[0] > 0x7fffffffu || l->groups[1] > 65535 || l->groups[2] > 65535)
        return attn__cuda_fail(ATTN_UNSUPPORTED, "%s: a grid of %zu x %zu x %zu blocks",
                               attn__kd_kernel_names[l->kernel], l->groups[0], l->groups[1],
                               l->groups[2]);
    if (l->groups[0] == 0 || l->groups[1] == 0 || l->groups[2] == 0) return ATTN_OK;
    attn_status st = attn__cuda_enter(c->dev);
    if (st != ATTN_OK) return st;
    attn__cu_result r =
        c->cu->LaunchKernel(c->f[l->kernel], (unsigned)l->groups[0], (unsigned)l->groups[1],
                            (unsigned)l->groups[2], KD_WG, 1, 1, 0, c->stream, params, NULL);
    attn__cuda_leave();
    if (r == ATTN__CU_SUCCESS) return ATTN_OK;
    return attn__cu_fail(ATTN_INTERNAL, attn__kd_kernel_names[l->kernel], r);
}

/* ---- the module's operations for the shared steps (kd_step.h) ------------------- */

static attn_status rt_fail(attn_status st, const char *msg)
{
    return attn__cuda_fail(st, "%s", msg);
}

static attn_status rt_scratch(void *ctx, void **slot, size_t bytes)
{
    attn__cuda_mem *m = *slot;
    attn_status st = attn__cuda_scratch(ctx, &m, bytes);
    *slot = m;
    return st;
}

static attn_status rt_part(void *ctx, size_t bytes, void **part)
{
    attn__cuda *c = ctx;
    attn_status st = attn__cuda_scratch(c, &c->part, bytes);
    *part = c->part;
    return st;
}

static attn_status rt_upload(void *ctx, void **meta, const attn__kd_plan *p)
{
    attn__cuda_mem *m = *meta;
    attn_status st = attn__cuda_upload_words(ctx, &m, p);
    *meta = m;
    return st;
}

static attn_status rt_run(void *ctx, const attn__kd_args *a)
{
    return attn__cuda_run(ctx, a);
}

static void rt_release(void *mem)
{
    attn__cuda_free(mem);
}

static attn_status rt_check(void *ctx, const char *who, const void *mem, int64_t off, int64_t elems,
                            size_t esz, const char *what)
{
    (void)who; /* the module's messages say "CUDA" */
    return attn__cuda_check_mem(ctx, mem, off, elems, esz, what);
}

attn__kd_rt attn__cuda_kd_rt(attn__cuda *c, const char *who)
{
    return (attn__kd_rt){.ctx = c,
                         .who = who,
                         .compute_units = (unsigned)c->dev->sm_count,
                         .fail = rt_fail,
                         .scratch = rt_scratch,
                         .part = rt_part,
                         .upload = rt_upload,
                         .run = rt_run,
                         .release = rt_release,
                         .check = rt_check};
}
