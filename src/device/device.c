/* Device instances (attn/device.h): one backend device opened once, its
 * allocations recorded so that every copy, write and kernel call on a
 * device whose memory is not host-visible is checked against the
 * allocation it names before the device sees it.
 *
 * Contract. A public entry point checks everything first and changes
 * nothing when it fails. The table is guarded by the instance's mutex
 * (the shared host instance is used by any thread; others by one thread at
 * a time, so the lock is uncontended). Host-visible devices skip the
 * lookups on the copy path: their handles are host pointers and may be
 * memory the caller owns. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/abi.h"
#include "attn/log.h"
#include "device/device_impl.h"
#include "util/error.h"
#include "util/numeric.h"

static attn_device g_host = {
    .ops = &attn__host_device_ops,
    .cfg = {.struct_size = sizeof(attn_device_config)},
    .host_visible = true,
    .shared = true,
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

attn_device *attn_device_host(void)
{
    return &g_host;
}

const attn_device_ops *attn__device_ops_of(const attn_backend *b)
{
    if (b && b->struct_size >= ATTN_STRUCT_END(attn_backend, device) && b->device) return b->device;
    return &attn__host_device_ops;
}

void attn_device_config_init(attn_device_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = sizeof *cfg;
}

static attn_status attn__device_ops_check(const attn_device_ops *o)
{
    if (o->struct_size < ATTN_STRUCT_END(attn_device_ops, synchronize) ||
        o->struct_size > sizeof(attn_device_ops))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "device ops struct_size %u: libattn accepts %zu to %zu", o->struct_size,
                          ATTN_STRUCT_END(attn_device_ops, synchronize), sizeof(attn_device_ops));
    if (!o->alloc || !o->free || !o->copy_in || !o->copy_out || !o->kv_write || !o->synchronize)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "device %s lacks a required op (alloc, free, copy_in, copy_out, "
                          "kv_write, synchronize)",
                          o->name ? o->name : "(unnamed)");
    return ATTN_OK;
}

attn_status attn_device_open(const attn_backend *b, const attn_device_config *cfg,
                             attn_device **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_device_config c;
    attn_device_config_init(&c);
    if (cfg) {
        if (cfg->struct_size < ATTN_STRUCT_END(attn_device_config, num_threads) ||
            cfg->struct_size > sizeof c)
            return attn__fail(ATTN_ABI_MISMATCH,
                              "attn_device_open: config struct_size is %u, expected %zu",
                              cfg->struct_size, sizeof c);
        memcpy(&c, cfg, cfg->struct_size);
        c.struct_size = sizeof c;
    }
    if (c.device_index < 0 || c.num_threads < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_device_open: device_index %d and num_threads %d must be >= 0",
                          c.device_index, c.num_threads);
    const attn_device_ops *ops = attn__device_ops_of(b);
    attn_status st = attn__device_ops_check(ops);
    if (st != ATTN_OK) return st;
    attn_device *d = calloc(1, sizeof *d);
    if (!d) return attn__fail(ATTN_OUT_OF_MEMORY, "attn_device_open: out of memory");
    d->ops = ops;
    d->cfg = c;
    d->host_visible = (ops->flags & ATTN_DEVICE_HOST_VISIBLE) != 0;
    pthread_mutex_init(&d->mu, NULL);
    if (ops->open) {
        st = ops->open(&d->cfg, &d->state);
        if (st != ATTN_OK) {
            pthread_mutex_destroy(&d->mu);
            free(d);
            return attn__wrap(st, "cannot open device %s", ops->name ? ops->name : "(unnamed)");
        }
    }
    *out = d;
    return ATTN_OK;
}

void attn_device_close(attn_device *d)
{
    if (!d || d->shared) return;
    for (int i = d->num_allocs - 1; i >= 0; i--)
        d->ops->free(d->state, d->allocs[i].mem, d->allocs[i].bytes, d->allocs[i].kind);
    if (d->ops->close) d->ops->close(d->state);
    free(d->allocs);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

const char *attn_device_name(const attn_device *d)
{
    const attn_device_ops *o = d ? d->ops : &attn__host_device_ops;
    return o->name ? o->name : "(unnamed)";
}

bool attn_device_host_visible(const attn_device *d)
{
    return !d || d->host_visible;
}

bool attn_device_same_kind(const attn_device *d, const attn_device *e)
{
    const attn_device_ops *a = d ? d->ops : &attn__host_device_ops;
    const attn_device_ops *b = e ? e->ops : &attn__host_device_ops;
    return a == b;
}

/* ---- the allocation table ----------------------------------------------------------- */

/* Index of mem in d's table, or -1 (caller holds d->mu). */
static int attn__find(const attn_device *d, const void *mem)
{
    for (int i = d->num_allocs - 1; i >= 0; i--)
        if (d->allocs[i].mem == mem) return i;
    return -1;
}

attn_status attn_device_alloc(attn_device *d, size_t bytes, attn_mem_kind kind, void **mem)
{
    ATTN__CHECK_NULL(d);
    ATTN__CHECK_NULL(mem);
    *mem = NULL;
    if (bytes == 0 || bytes > ((size_t)1 << 46))
        return attn__fail(ATTN_INVALID_ARGUMENT, "device %s: cannot allocate %zu bytes",
                          attn_device_name(d), bytes);
    if (kind != ATTN_MEM_CACHE && kind != ATTN_MEM_STEP)
        return attn__fail(ATTN_INVALID_ARGUMENT, "device %s: unknown memory kind %d",
                          attn_device_name(d), (int)kind);
    pthread_mutex_lock(&d->mu);
    if (d->num_allocs == d->cap_allocs) {
        int cap = d->cap_allocs ? d->cap_allocs * 2 : 16;
        attn__dev_alloc *t = realloc(d->allocs, sizeof *t * (size_t)cap);
        if (!t) {
            pthread_mutex_unlock(&d->mu);
            return attn__fail(ATTN_OUT_OF_MEMORY, "device %s: out of memory for its table",
                              attn_device_name(d));
        }
        d->allocs = t;
        d->cap_allocs = cap;
    }
    void *m = NULL;
    attn_clear_error();
    attn_status st = d->ops->alloc(d->state, bytes, kind, &m);
    if (st == ATTN_OK && !m)
        st = attn__fail(ATTN_INTERNAL, "device %s: alloc returned no handle", attn_device_name(d));
    if (st == ATTN_OK) {
        d->allocs[d->num_allocs++] = (attn__dev_alloc){m, bytes, kind};
        d->bytes += bytes;
        *mem = m;
    }
    pthread_mutex_unlock(&d->mu);
    if (st != ATTN_OK && !attn_last_error()[0])
        return attn__fail(st, "device %s: cannot allocate %zu bytes", attn_device_name(d), bytes);
    return st;
}

void attn_device_free(attn_device *d, void *mem)
{
    if (!d || !mem) return;
    pthread_mutex_lock(&d->mu);
    int i = attn__find(d, mem);
    attn__dev_alloc a = {0};
    if (i >= 0) {
        a = d->allocs[i];
        d->allocs[i] = d->allocs[--d->num_allocs];
        d->bytes -= a.bytes;
    }
    pthread_mutex_unlock(&d->mu);
    if (i < 0) {
        attn_log(ATTN_LOG_WARN, "device %s: free of %p, which is not one of its allocations",
                 attn_device_name(d), mem);
        return;
    }
    d->ops->free(d->state, a.mem, a.bytes, a.kind);
}

size_t attn_device_alloc_size(const attn_device *d, const void *mem)
{
    if (!d || !mem) return 0;
    attn_device *m = (attn_device *)d; /* the lock only */
    pthread_mutex_lock(&m->mu);
    int i = attn__find(d, mem);
    size_t n = i >= 0 ? d->allocs[i].bytes : 0;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void attn_device_usage(const attn_device *d, int *count, uint64_t *bytes)
{
    attn_device *m = (attn_device *)d;
    int n = 0;
    uint64_t b = 0;
    if (m) {
        pthread_mutex_lock(&m->mu);
        n = m->num_allocs;
        b = m->bytes;
        pthread_mutex_unlock(&m->mu);
    }
    if (count) *count = n;
    if (bytes) *bytes = b;
}

attn_status attn__device_range(attn_device *d, const void *mem, uint64_t off, uint64_t bytes,
                               const char *what)
{
    if (!d || d->host_visible) return ATTN_OK;
    if (!mem) return attn__fail(ATTN_NULL_ARGUMENT, "%s is NULL", what);
    pthread_mutex_lock(&d->mu);
    int i = attn__find(d, mem);
    uint64_t size = i >= 0 ? d->allocs[i].bytes : 0;
    pthread_mutex_unlock(&d->mu);
    if (i < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s is not memory of device %s (a handle must be a whole allocation "
                          "of the device, never an address computed from one)",
                          what, attn_device_name(d));
    uint64_t end;
    if (__builtin_add_overflow(off, bytes, &end) || end > size)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: bytes [%llu, %llu + %llu) run past its allocation of %llu bytes "
                          "on device %s",
                          what, (unsigned long long)off, (unsigned long long)off,
                          (unsigned long long)bytes, (unsigned long long)size, attn_device_name(d));
    return ATTN_OK;
}

/* ---- copies ------------------------------------------------------------------------- */

attn_status attn_device_copy_in(attn_device *d, void *dst, size_t dst_offset, const void *src,
                                size_t bytes)
{
    ATTN__CHECK_NULL(d);
    if (bytes == 0) return ATTN_OK;
    ATTN__CHECK_NULL(dst);
    ATTN__CHECK_NULL(src);
    attn_status st = attn__device_range(d, dst, dst_offset, bytes, "copy_in destination");
    if (st != ATTN_OK) return st;
    return d->ops->copy_in(d->state, dst, dst_offset, src, bytes);
}

attn_status attn_device_copy_out(attn_device *d, void *dst, const void *src, size_t src_offset,
                                 size_t bytes)
{
    ATTN__CHECK_NULL(d);
    if (bytes == 0) return ATTN_OK;
    ATTN__CHECK_NULL(dst);
    ATTN__CHECK_NULL(src);
    attn_status st = attn__device_range(d, src, src_offset, bytes, "copy_out source");
    if (st != ATTN_OK) return st;
    return d->ops->copy_out(d->state, dst, src, src_offset, bytes);
}

attn_status attn_device_synchronize(attn_device *d)
{
    ATTN__CHECK_NULL(d);
    return d->ops->synchronize(d->state);
}

/* ---- views ---------------------------------------------------------------------------- */

bool attn__view_extent(const attn_kv_view *kv, int64_t *elems)
{
    if (kv->num_blocks < 1 || kv->block_size < 1 || kv->num_kv_heads < 1 || kv->head_size < 1 ||
        kv->head_size_v < 0 || kv->k_offset < 0 || kv->v_offset < 0 || kv->stride_block < 0 ||
        kv->stride_token < 0 || kv->stride_head < 0)
        return false;
    int64_t last, t, base;
    /* the last row of the last block, last token, last head */
    if (!attn__mul_i64(kv->num_blocks - 1, kv->stride_block, &last) ||
        !attn__mul_i64(kv->block_size - 1, kv->stride_token, &t) ||
        !attn__add_i64(last, t, &last) ||
        !attn__mul_i64(kv->num_kv_heads - 1, kv->stride_head, &t) || !attn__add_i64(last, t, &last))
        return false;
    int64_t end = 0, e;
    if (!attn__add_i64(kv->k_offset, last, &base) || !attn__add_i64(base, kv->head_size, &e))
        return false;
    end = e;
    if (kv->head_size_v > 0) {
        if (!attn__add_i64(kv->v_offset, last, &base) || !attn__add_i64(base, kv->head_size_v, &e))
            return false;
        end = e > end ? e : end;
    }
    *elems = end;
    return true;
}

attn_status attn__device_view_range(const attn_kv_view *kv, const char *who)
{
    attn_device *d = kv->device;
    if (!d || d->host_visible) return ATTN_OK;
    int64_t n;
    size_t esz = attn_elem_size(kv->elem);
    if (!esz || !attn__view_extent(kv, &n) || n > INT64_MAX / (int64_t)esz)
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: the KV view's geometry is malformed", who);
    char what[96];
    snprintf(what, sizeof what, "%s: the KV view's memory", who);
    return attn__device_range(d, kv->data, 0, (uint64_t)n * esz, what);
}

/* ---- cache views ------------------------------------------------------------- */

static bool elem_is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

static bool elem_storable(attn_elem e)
{
    return e == ATTN_ELEM_F32 || e == ATTN_ELEM_F16 || e == ATTN_ELEM_BF16 || elem_is_fp8(e);
}

attn_status attn__kv_view_check(const attn_kv_view *kv)
{
    if (!kv->data) return attn__fail(ATTN_INVALID_ARGUMENT, "KV view has no memory (data is NULL)");
    if (!elem_storable(kv->elem))
        return attn__fail(ATTN_UNSUPPORTED, "KV cache element %s cannot be written",
                          attn_elem_name(kv->elem));
    if (kv->num_blocks < 1 || kv->block_size < 1 || kv->num_kv_heads < 1 || kv->head_size < 1 ||
        kv->head_size_v < 0 || kv->k_offset < 0 || kv->v_offset < 0 || kv->stride_block < 1 ||
        kv->stride_token < 1 || kv->stride_head < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV view is malformed (blocks %d, block size %d, heads %d, head size "
                          "%d/%d, strides %lld/%lld/%lld)",
                          kv->num_blocks, kv->block_size, kv->num_kv_heads, kv->head_size,
                          kv->head_size_v, (long long)kv->stride_block, (long long)kv->stride_token,
                          (long long)kv->stride_head);
    if (elem_is_fp8(kv->elem)) {
        if (!(isfinite(kv->k_scale) && kv->k_scale > 0) ||
            !(isfinite(kv->v_scale) && kv->v_scale > 0))
            return attn__fail(ATTN_INVALID_ARGUMENT, "FP8 KV scales must be finite and > 0");
        for (int h = 0; kv->k_scale_per_head && h < kv->num_kv_heads; h++)
            if (!(kv->k_scale_per_head[h] > 0) || !isfinite(kv->k_scale_per_head[h]))
                return attn__fail(ATTN_INVALID_ARGUMENT, "FP8 per-head K scale of head %d", h);
        for (int h = 0; kv->v_scale_per_head && h < kv->num_kv_heads; h++)
            if (!(kv->v_scale_per_head[h] > 0) || !isfinite(kv->v_scale_per_head[h]))
                return attn__fail(ATTN_INVALID_ARGUMENT, "FP8 per-head V scale of head %d", h);
    }
    return ATTN_OK;
}

attn_status attn__latent_view_check(const char *who, const attn_kv_view *kv)
{
    if (!kv->data)
        return attn__fail(ATTN_NULL_ARGUMENT, "%s: the KV view has no memory (data is NULL)", who);
    if (kv->num_blocks <= 0 || kv->block_size <= 0 || kv->head_size <= 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: the KV view needs num_blocks, block_size and head_size > 0 "
                          "(got %d, %d, %d)",
                          who, kv->num_blocks, kv->block_size, kv->head_size);
    if (!elem_storable(kv->elem))
        return attn__fail(ATTN_UNSUPPORTED,
                          "%s: latent cache element %s is not supported (f32, f16, bf16, "
                          "fp8_e4m3, fp8_e5m2)",
                          who, attn_elem_name(kv->elem));
    if (kv->stride_token < kv->head_size || kv->stride_block < 0 || kv->k_offset < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: the latent rows overlap (stride_token %lld < head_size %d) or a "
                          "stride is negative",
                          who, (long long)kv->stride_token, kv->head_size);
    if (elem_is_fp8(kv->elem) && !(isfinite(kv->k_scale) && kv->k_scale > 0.0f))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: an fp8 latent cache needs a finite k_scale > 0 (got %g)", who,
                          (double)kv->k_scale);
    return ATTN_OK;
}
