/* OpenCL instances and device memory: an instance is one device's shared
 * context, its own in-order queue and its own kernel objects from the
 * cached program; buffers belong to the device's context and are handed
 * out as opaque handles. Copies are blocking (the host buffer is free on
 * return); launches are not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/kd_embed.h"
#include "backends/opencl/ocl_impl.h"
#include "util/error.h"
#include "util/numeric.h"

_Static_assert(KD_ELEM_F32 == ATTN_ELEM_F32 && KD_ELEM_F16 == ATTN_ELEM_F16 &&
                   KD_ELEM_BF16 == ATTN_ELEM_BF16 && KD_ELEM_E4M3 == ATTN_ELEM_FP8_E4M3 &&
                   KD_ELEM_E5M2 == ATTN_ELEM_FP8_E5M2,
               "kd_params.h element codes are attn_elem's");
_Static_assert(KD_ROWS *KD_LANES == KD_WG && KD_WG % KD_TPK == 0, "kd_params.h geometry");

/* Local memory the attention kernel declares (kd_attention.cl). */
#define ATTN__OCL_LOCAL_BYTES                                                                      \
    (sizeof(float) * (KD_ROWS * KD_MAX_HEAD + KD_TILE + KD_ROWS * KD_MAX_BN + 3 * KD_ROWS) +       \
     sizeof(int64_t) * KD_MAX_BN)
/* The MLA kernels' (kd_mla.cl) stay within it. */
_Static_assert(sizeof(float) * (KD_ROWS * (KD_MLA_DC + 1) + KD_MLA_KC + KD_ROWS * (KD_MLA_BN + 1) +
                                3 * KD_ROWS) +
                       sizeof(int64_t) * KD_MLA_BN <=
                   ATTN__OCL_LOCAL_BYTES,
               "attn_kd_mla_decode's local memory");
_Static_assert(sizeof(float) * (KD_MLA_BN * (KD_MLA_TK + 1) + KD_MLA_TK * (KD_MLA_DC + 1)) +
                       sizeof(int64_t) * KD_MLA_BN <=
                   ATTN__OCL_LOCAL_BYTES,
               "attn_kd_mla_decompress's local memory");
_Static_assert(KD_MLA_KC >= KD_MLA_MAX_R && KD_MLA_BN % KD_LANES == 0, "kd_params.h MLA geometry");

/* OpenCL C version of "OpenCL C 1.2 ..." as major * 10 + minor (0: unknown). */
static int c_version(const char *s)
{
    int major = 0, minor = 0;
    if (sscanf(s, "OpenCL C %d.%d", &major, &minor) != 2) return 0;
    return major * 10 + minor;
}

static attn_status pick_device(const attn__ocl_options *opt, attn__ocl_dev **out)
{
    int n = 0;
    attn__ocl_dev *devs = attn__ocl_devices(&n);
    if (!devs) return ATTN_PLATFORM_UNAVAILABLE;
    int want = opt ? opt->device : -1;
    if (want >= n || want < -1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "OpenCL device %d: there are %d device(s)", want,
                          n);
    if (want < 0) {
        want = 0;
        for (int i = 0; i < n; i++)
            if (devs[i].gpu) {
                want = i;
                break;
            }
    }
    attn__ocl_dev *d = &devs[want];
    if (c_version(d->c_version) < 12)
        return attn__fail(ATTN_UNSUPPORTED, "OpenCL device %.200s: \"%s\", OpenCL C 1.2 is needed",
                          d->name, d->c_version);
    if (d->local_mem < ATTN__OCL_LOCAL_BYTES || d->max_wg < KD_WG)
        return attn__fail(ATTN_UNSUPPORTED,
                          "OpenCL device %.200s: %llu bytes of local memory and work-groups of "
                          "%zu; the kernels need %zu and %d",
                          d->name, (unsigned long long)d->local_mem, d->max_wg,
                          (size_t)ATTN__OCL_LOCAL_BYTES, KD_WG);
    *out = d;
    return ATTN_OK;
}

static attn_status make_kernels(attn__ocl *o, attn__cl_program prog)
{
    for (int i = 0; i < ATTN__KD_KERNEL_COUNT; i++) {
        attn__cl_int r = ATTN__CL_SUCCESS;
        o->k[i] = o->cl->CreateKernel(prog, attn__kd_kernel_names[i], &r);
        if (!o->k[i]) return attn__cl_fail(ATTN_IMPORT_ERROR, attn__kd_kernel_names[i], r);
        size_t wg = 0;
        r = o->cl->GetKernelWorkGroupInfo(o->k[i], o->dev->id, ATTN__CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof wg, &wg, NULL);
        if (r != ATTN__CL_SUCCESS) return attn__cl_fail(ATTN_IMPORT_ERROR, "kernel info", r);
        if (wg < KD_WG)
            return attn__fail(ATTN_UNSUPPORTED,
                              "OpenCL device %.200s runs %s with work-groups of %zu, below %d",
                              o->dev->name, attn__kd_kernel_names[i], wg, KD_WG);
    }
    return ATTN_OK;
}

/* The dialect program: each embedded file preceded by a #line naming it,
 * so the compiler's log says "kd_attention.cl:120:9: error: ...". */
#define ATTN__OCL_MAX_FILES 16
static char g_lines[ATTN__OCL_MAX_FILES][96];
static const char *g_program[2 * ATTN__OCL_MAX_FILES];
static pthread_once_t g_program_once = PTHREAD_ONCE_INIT;

static void program_init(void)
{
    for (int i = 0; i < attn__kd_source_count && i < ATTN__OCL_MAX_FILES; i++) {
        snprintf(g_lines[i], sizeof g_lines[i], "\n#line 1 \"%.60s\"\n", attn__kd_source_names[i]);
        g_program[2 * i] = g_lines[i];
        g_program[2 * i + 1] = attn__kd_sources[i];
    }
}

static attn_status kernel_program(attn__ocl_dev *d, const char *options, attn__cl_program *out)
{
    if (attn__kd_source_count > ATTN__OCL_MAX_FILES)
        return attn__fail(ATTN_INTERNAL, "%d kernel files embedded, room for %d",
                          attn__kd_source_count, ATTN__OCL_MAX_FILES);
    pthread_once(&g_program_once, program_init);
    return attn__ocl_dev_program(d, g_program, 2 * attn__kd_source_count, options, out);
}

attn_status attn__ocl_open(const attn__ocl_options *opt, attn__ocl **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn__ocl_dev *d = NULL;
    attn_status st = pick_device(opt, &d);
    if (st != ATTN_OK) return st;
    st = attn__ocl_dev_context(d);
    if (st != ATTN_OK) return st;
    char options[512];
    int n =
        snprintf(options, sizeof options, "-cl-std=CL1.2%s%s", opt && opt->build_options ? " " : "",
                 opt && opt->build_options ? opt->build_options : "");
    if (n < 0 || (size_t)n >= sizeof options)
        return attn__fail(ATTN_INVALID_ARGUMENT, "OpenCL build options longer than %zu bytes",
                          sizeof options - 16);
    attn__cl_program prog = NULL;
    st = kernel_program(d, options, &prog);
    if (st != ATTN_OK) return st;
    attn__ocl *o = calloc(1, sizeof *o);
    if (!o) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL instance: out of memory");
    o->cl = attn__cl_load();
    o->dev = d;
    attn__cl_int r = ATTN__CL_SUCCESS;
    o->queue = o->cl->CreateCommandQueue(d->ctx, d->id, 0, &r);
    if (!o->queue) st = attn__cl_fail(ATTN_PLATFORM_UNAVAILABLE, "clCreateCommandQueue", r);
    if (st == ATTN_OK) st = make_kernels(o, prog);
    if (st != ATTN_OK) {
        attn__ocl_close(o);
        return st;
    }
    *out = o;
    return ATTN_OK;
}

void attn__ocl_close(attn__ocl *o)
{
    if (!o) return;
    if (o->queue) o->cl->Finish(o->queue);
    attn__ocl_free(o->part);
    attn__ocl_free(o->slots);
    attn__ocl_free(o->scales);
    for (int i = 0; i < ATTN__KD_KERNEL_COUNT; i++)
        if (o->k[i]) o->cl->ReleaseKernel(o->k[i]);
    if (o->queue) o->cl->ReleaseCommandQueue(o->queue);
    free(o);
}

const char *attn__ocl_device_name(const attn__ocl *o)
{
    return o ? o->dev->name : "";
}

attn_status attn__ocl_program_check(attn__ocl *o, const char *const *sources, int count,
                                    const char *options)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(sources);
    attn__cl_program p = NULL;
    return attn__ocl_dev_program(o->dev, sources, count, options, &p);
}

/* ---- memory ------------------------------------------------------------------ */

attn_status attn__ocl_alloc(attn__ocl *o, size_t bytes, attn__ocl_mem **out)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    if (bytes == 0 || bytes > o->dev->max_alloc)
        return attn__fail(bytes ? ATTN_OUT_OF_MEMORY : ATTN_INVALID_ARGUMENT,
                          "OpenCL buffer of %zu bytes (the device allows 1 to %llu)", bytes,
                          (unsigned long long)o->dev->max_alloc);
    attn__ocl_mem *m = calloc(1, sizeof *m);
    if (!m) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL buffer: out of memory");
    attn__cl_int r = ATTN__CL_SUCCESS;
    m->mem = o->cl->CreateBuffer(o->dev->ctx, ATTN__CL_MEM_READ_WRITE, bytes, NULL, &r);
    if (!m->mem) {
        free(m);
        return attn__cl_fail(ATTN_OUT_OF_MEMORY, "clCreateBuffer", r);
    }
    m->dev = o->dev;
    m->size = bytes;
    uint32_t zero = 0;
    /* zeroed as the contract wants; patterns of 4 bytes need a multiple of 4 */
    size_t whole = bytes & ~(size_t)3;
    if (whole) r = o->cl->EnqueueFillBuffer(o->queue, m->mem, &zero, 4, 0, whole, 0, NULL, NULL);
    if (r == ATTN__CL_SUCCESS && whole < bytes)
        r = o->cl->EnqueueFillBuffer(o->queue, m->mem, &zero, 1, whole, bytes - whole, 0, NULL,
                                     NULL);
    if (r != ATTN__CL_SUCCESS) {
        o->cl->ReleaseMemObject(m->mem);
        free(m);
        return attn__cl_fail(ATTN_OUT_OF_MEMORY, "clEnqueueFillBuffer", r);
    }
    *out = m;
    return ATTN_OK;
}

void attn__ocl_free(attn__ocl_mem *m)
{
    if (!m) return;
    /* OpenCL keeps the buffer until the commands that use it are done. */
    const attn__cl_api *cl = attn__cl_load();
    if (cl) cl->ReleaseMemObject(m->mem);
    free(m);
}

size_t attn__ocl_mem_size(const attn__ocl_mem *m)
{
    return m ? m->size : 0;
}

static attn_status check_range(const attn__ocl *o, const attn__ocl_mem *m, size_t off, size_t n,
                               const char *what)
{
    if (m->dev != o->dev)
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: the buffer belongs to another device", what);
    if (off > m->size || n > m->size - off)
        return attn__fail(ATTN_OUT_OF_RANGE, "%s: bytes [%zu, %zu + %zu) outside the buffer of %zu",
                          what, off, off, n, m->size);
    return ATTN_OK;
}

attn_status attn__ocl_copy_in(attn__ocl *o, attn__ocl_mem *dst, size_t dst_offset, const void *src,
                              size_t bytes)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(dst);
    if (bytes == 0) return ATTN_OK;
    ATTN__CHECK_NULL(src);
    attn_status st = check_range(o, dst, dst_offset, bytes, "OpenCL copy in");
    if (st != ATTN_OK) return st;
    attn__cl_int r = o->cl->EnqueueWriteBuffer(o->queue, dst->mem, ATTN__CL_TRUE, dst_offset, bytes,
                                               src, 0, NULL, NULL);
    return r == ATTN__CL_SUCCESS ? ATTN_OK
                                 : attn__cl_fail(ATTN_INTERNAL, "clEnqueueWriteBuffer", r);
}

attn_status attn__ocl_copy_out(attn__ocl *o, void *dst, const attn__ocl_mem *src, size_t src_offset,
                               size_t bytes)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(src);
    if (bytes == 0) return ATTN_OK;
    ATTN__CHECK_NULL(dst);
    attn_status st = check_range(o, src, src_offset, bytes, "OpenCL copy out");
    if (st != ATTN_OK) return st;
    attn__cl_int r = o->cl->EnqueueReadBuffer(o->queue, src->mem, ATTN__CL_TRUE, src_offset, bytes,
                                              dst, 0, NULL, NULL);
    return r == ATTN__CL_SUCCESS ? ATTN_OK : attn__cl_fail(ATTN_INTERNAL, "clEnqueueReadBuffer", r);
}

attn_status attn__ocl_sync(attn__ocl *o)
{
    ATTN__CHECK_NULL(o);
    attn__cl_int r = o->cl->Finish(o->queue);
    return r == ATTN__CL_SUCCESS ? ATTN_OK : attn__cl_fail(ATTN_INTERNAL, "clFinish", r);
}

attn_status attn__ocl_scratch(attn__ocl *o, attn__ocl_mem **slot, size_t bytes)
{
    if (*slot && (*slot)->size >= bytes) return ATTN_OK;
    size_t grow = bytes + bytes / 2; /* fewer reallocations as batches grow */
    if (grow > o->dev->max_alloc) grow = bytes;
    attn__ocl_mem *m = NULL;
    attn_status st = attn__ocl_alloc(o, grow, &m);
    if (st != ATTN_OK) return st;
    attn__ocl_free(*slot);
    *slot = m;
    return ATTN_OK;
}

attn_status attn__ocl_upload_words(attn__ocl *o, attn__ocl_mem **meta, const attn__kd_plan *p)
{
    if (p->nwords == 0) return ATTN_OK;
    size_t bytes = sizeof(int32_t) * p->nwords;
    if (!*meta || (*meta)->size < bytes) {
        attn__ocl_free(*meta);
        *meta = NULL;
        attn_status st = attn__ocl_alloc(o, bytes + bytes / 2, meta);
        if (st != ATTN_OK) return st;
    }
    return attn__ocl_copy_in(o, *meta, 0, p->words, bytes);
}

/* ---- launches ------------------------------------------------------------------ */

attn_status attn__ocl_run(attn__ocl *o, const attn__kd_args *l)
{
    const char *what = attn__kd_kernel_names[l->kernel];
    attn__cl_kernel k = o->k[l->kernel];
    for (int i = 0; i < l->n; i++) {
        const attn__kd_arg *x = &l->a[i];
        attn__cl_mem m = NULL;
        attn__cl_int r;
        switch (x->kind) {
        case ATTN__KD_ARG_MEM:
            m = x->v.mem ? ((const attn__ocl_mem *)x->v.mem)->mem : NULL;
            r = o->cl->SetKernelArg(k, (attn__cl_uint)i, sizeof m, &m);
            break;
        case ATTN__KD_ARG_I32: r = o->cl->SetKernelArg(k, (attn__cl_uint)i, 4, &x->v.i32); break;
        case ATTN__KD_ARG_I64: r = o->cl->SetKernelArg(k, (attn__cl_uint)i, 8, &x->v.i64); break;
        default: r = o->cl->SetKernelArg(k, (attn__cl_uint)i, 4, &x->v.f32); break;
        }
        if (r != ATTN__CL_SUCCESS) {
            char buf[96];
            snprintf(buf, sizeof buf, "clSetKernelArg %d of %s", i, what);
            return attn__cl_fail(ATTN_INTERNAL, buf, r);
        }
    }
    size_t global[3] = {l->groups[0] * KD_WG, l->groups[1], l->groups[2]};
    size_t local[3] = {KD_WG, 1, 1};
    attn__cl_int r =
        o->cl->EnqueueNDRangeKernel(o->queue, k, 3, NULL, global, local, 0, NULL, NULL);
    if (r == ATTN__CL_SUCCESS) return ATTN_OK;
    char buf[96];
    snprintf(buf, sizeof buf, "clEnqueueNDRangeKernel (%s)", what);
    return attn__cl_fail(r == -4 || r == -5 || r == -6 ? ATTN_OUT_OF_MEMORY : ATTN_INTERNAL, buf,
                         r);
}

bool attn__ocl_view_extent(const attn_kv_view *kv, int dv, int64_t *elems)
{
    return attn__kd_view_extent(kv, dv, elems);
}

attn_status attn__ocl_check_mem(const attn__ocl *o, const char *who, const attn__ocl_mem *m,
                                int64_t off, int64_t elems, size_t esz, const char *what)
{
    int64_t end = 0, bytes = 0;
    if (m->dev != o->dev)
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: %s is on another device", who, what);
    if (off < 0 || !attn__add_i64(off, elems, &end) || !attn__mul_i64(end, (int64_t)esz, &bytes) ||
        (uint64_t)bytes > m->size)
        return attn__fail(ATTN_OUT_OF_RANGE,
                          "%s: %s needs elements [%lld, %lld + %lld) of %zu bytes each; the "
                          "buffer has %zu bytes",
                          who, what, (long long)off, (long long)off, (long long)elems, esz,
                          m->size);
    return ATTN_OK;
}

/* ---- the runtime's operations for the shared steps (kd_step.h) ------------------ */

static attn_status rt_fail(attn_status st, const char *msg)
{
    return attn__fail(st, "%s", msg);
}

static attn_status rt_scratch(void *ctx, void **slot, size_t bytes)
{
    attn__ocl_mem *m = *slot;
    attn_status st = attn__ocl_scratch(ctx, &m, bytes);
    *slot = m;
    return st;
}

static attn_status rt_part(void *ctx, size_t bytes, void **part)
{
    attn__ocl *o = ctx;
    attn_status st = attn__ocl_scratch(o, &o->part, bytes);
    *part = o->part;
    return st;
}

static attn_status rt_upload(void *ctx, void **meta, const attn__kd_plan *p)
{
    attn__ocl_mem *m = *meta;
    attn_status st = attn__ocl_upload_words(ctx, &m, p);
    *meta = m;
    return st;
}

static attn_status rt_run(void *ctx, const attn__kd_args *a)
{
    return attn__ocl_run(ctx, a);
}

static void rt_release(void *mem)
{
    attn__ocl_free(mem);
}

static attn_status rt_check(void *ctx, const char *who, const void *mem, int64_t off, int64_t elems,
                            size_t esz, const char *what)
{
    return attn__ocl_check_mem(ctx, who, mem, off, elems, esz, what);
}

attn__kd_rt attn__ocl_kd_rt(attn__ocl *o, const char *who)
{
    return (attn__kd_rt){.ctx = o,
                         .who = who,
                         .compute_units = o->dev->compute_units,
                         .fail = rt_fail,
                         .scratch = rt_scratch,
                         .part = rt_part,
                         .upload = rt_upload,
                         .run = rt_run,
                         .release = rt_release,
                         .check = rt_check};
}
