/* Per-layer KV-cache memory laid out by the selected backend.
 *
 * Contract: the backend owns the logical shape (desc->kv_cache_shape) and
 * the permutation to memory order (desc->kv_stride_order, reference §12);
 * this file only turns them into element strides and an attn_kv_view, so
 * FlashAttention (2,nb,bs,h,d), FlashInfer/Triton (nb,2,bs,h,d), CPU_ATTN
 * (2,nb,h,bs,d), MLA (nb,bs,d), NHD and HND all come out of one rule. Axes
 * are identified by the shape's dim names, never by position or value. The
 * head_size axis must be innermost in memory: kernels read rows. Cache
 * memory comes from the device the cache is created on, one allocation per
 * layer (the host device reserves it with an anonymous mapping, so a pool
 * sized for a large simulated device costs only the pages written). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backend.h"
#include "attn/kvcache.h"
#include "attn/platform.h"
#include "util/error.h"
#include "util/numeric.h"

attn_kv_layout attn_kv_layout_resolve(const attn_backend_desc *d, const attn_platform *p,
                                      attn_kv_layout requested)
{
    if (d && d->required_layout != ATTN_LAYOUT_DEFAULT) return d->required_layout;
    if (d && p && d->required_layout_fn) {
        attn_kv_layout l = d->required_layout_fn(p);
        if (l != ATTN_LAYOUT_DEFAULT) return l;
    }
    if (p && attn_platform_get_kind(p) == ATTN_PLATFORM_XPU) return ATTN_LAYOUT_NHD;
    if (requested == ATTN_LAYOUT_NHD || requested == ATTN_LAYOUT_HND) return requested;
    return ATTN_LAYOUT_NHD;
}

int attn_kv_shape_format(const attn_kv_shape *s, char *buf, size_t size)
{
    if (!s) return snprintf(buf, size, "()");
    if (s->ndim < 0 || s->ndim > ATTN_MAX_KV_NDIM)
        return snprintf(buf, size, "(bad ndim %d)", s->ndim);
    size_t o = 0;
    int total = 0;
    for (int i = 0; i < s->ndim; i++) {
        int w = snprintf(buf ? buf + o : NULL, buf && o < size ? size - o : 0, "%s%lld",
                         i ? ", " : "(", (long long)s->dims[i]);
        total += w;
        o = (size_t)total;
    }
    int w = snprintf(buf && o < size ? buf + o : NULL, buf && o < size ? size - o : 0, ")");
    return total + w;
}

enum { AX_TWO, AX_BLOCKS, AX_BS, AX_HEADS, AX_HEAD, AX_COUNT };

static int attn__axis_of_name(const char *n)
{
    if (!strcmp(n, "2")) return AX_TWO;
    if (!strcmp(n, "num_blocks")) return AX_BLOCKS;
    if (!strcmp(n, "block_size")) return AX_BS;
    if (!strcmp(n, "num_kv_heads")) return AX_HEADS;
    if (!strncmp(n, "head_size", 9) || !strncmp(n, "slot_size", 9)) return AX_HEAD;
    return -1;
}

/* Without names, accept only shapes whose axes the values determine. */
static attn_status attn__infer_axes(const attn_kv_shape *s, int nb, int bs, int kvh, int *ax)
{
    int n = s->ndim;
    for (int i = 0; i < n; i++)
        ax[i] = -1;
    ax[0] = s->dims[0] == 2 && nb != 2 ? AX_TWO : (s->dims[0] == nb ? AX_BLOCKS : -1);
    ax[n - 1] = AX_HEAD;
    for (int i = 1; i < n - 1; i++) {
        int64_t v = s->dims[i];
        int hits = (v == 2) + (v == nb) + (v == bs) + (v == kvh);
        if (hits != 1)
            return attn__fail(ATTN_UNSUPPORTED,
                              "KV cache shape axis %d (size %lld) has no name and its size is "
                              "ambiguous",
                              i, (long long)v);
        ax[i] = v == 2 ? AX_TWO : v == nb ? AX_BLOCKS : v == bs ? AX_BS : AX_HEADS;
    }
    if (ax[0] < 0) return attn__fail(ATTN_UNSUPPORTED, "KV cache shape axis 0 has no name");
    return ATTN_OK;
}

static bool attn__elem_for_layout(attn_kv_dtype kv, attn_dtype model, attn_elem *elem)
{
    attn_status st = attn_kv_dtype_elem(kv, model, elem);
    if (st == ATTN_OK) return true;
    attn_clear_error();
    if (kv == ATTN_KV_FP8_INC) {
        *elem = ATTN_ELEM_FP8_E4M3; /* Intel Neural Compressor's fp8 is e4m3 */
        return true;
    }
    *elem = ATTN_ELEM_U8; /* packed / per-token-scaled formats: bytes */
    return false;
}

static attn_status attn__layout_args(const attn_backend_desc *d, attn_kv_layout layout,
                                     int num_blocks, int block_size, int num_kv_heads,
                                     int head_size, int head_size_v, attn_kv_dtype kv,
                                     attn_dtype model_dtype)
{
    if (!d->kv_cache_shape)
        return attn__fail(ATTN_UNSUPPORTED, "backend %s defines no KV cache shape",
                          d->name ? d->name : "?");
    if (num_blocks < 1 || block_size < 1 || num_kv_heads < 1 || head_size < 1 || head_size_v < 0 ||
        num_blocks > ATTN_MAX_NUM_BLOCKS || block_size > ATTN_MAX_BLOCK_SIZE ||
        num_kv_heads > ATTN_MAX_HEADS || head_size > ATTN_MAX_HEAD_SIZE ||
        head_size_v > ATTN_MAX_HEAD_SIZE)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV layout needs sizes within the limits of attn/types.h "
                          "(num_blocks=%d, block_size=%d, num_kv_heads=%d, head_size=%d, "
                          "head_size_v=%d)",
                          num_blocks, block_size, num_kv_heads, head_size, head_size_v);
    if ((unsigned)model_dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV layout: invalid model dtype %d",
                          (int)model_dtype);
    if (kv < ATTN_KV_NONE || kv >= ATTN_KV_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV layout: invalid KV cache dtype %d", (int)kv);
    if (layout != ATTN_LAYOUT_DEFAULT && layout != ATTN_LAYOUT_NHD && layout != ATTN_LAYOUT_HND)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV layout: invalid layout %d", (int)layout);
    return ATTN_OK;
}

/* The backend's logical shape, checked, and where each axis sits in it
 * (where[AX_*], -1 when absent); *named: every dim carries its name. */
static attn_status attn__layout_shape(const attn_backend_desc *d, const char *name, int num_blocks,
                                      int block_size, int num_kv_heads, int head_size,
                                      attn_kv_dtype kv, attn_kv_shape *shape, int *where,
                                      bool *named)
{
    attn_status st = d->kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size, kv, shape);
    if (st != ATTN_OK)
        return st; /* the backend's own message, e.g. "Block size must be a multiple of 16." */
    int n = shape->ndim;
    if (n < 2 || n > 6)
        return attn__fail(ATTN_INTERNAL, "backend %s: KV cache shape has %d dims", name, n);
    for (int i = 0; i < n; i++)
        if (shape->dims[i] <= 0)
            return attn__fail(ATTN_INTERNAL, "backend %s: KV cache shape dim %d is %lld", name, i,
                              (long long)shape->dims[i]);
    int ax[6];
    *named = true;
    for (int i = 0; i < n; i++)
        *named = *named && shape->dim_names[i];
    if (*named) {
        for (int i = 0; i < n; i++) {
            ax[i] = attn__axis_of_name(shape->dim_names[i]);
            if (ax[i] < 0)
                return attn__fail(ATTN_UNSUPPORTED, "backend %s: unknown KV cache axis '%s'", name,
                                  shape->dim_names[i]);
        }
    } else if ((st = attn__infer_axes(shape, num_blocks, block_size, num_kv_heads, ax)) !=
               ATTN_OK) {
        return st;
    }
    for (int a = 0; a < AX_COUNT; a++)
        where[a] = -1;
    for (int i = 0; i < n; i++) {
        if (where[ax[i]] >= 0)
            return attn__fail(ATTN_UNSUPPORTED, "backend %s: KV cache axis %d appears twice", name,
                              ax[i]);
        where[ax[i]] = i;
    }
    if (where[AX_BLOCKS] < 0 || where[AX_BS] < 0 || where[AX_HEAD] < 0)
        return attn__fail(ATTN_UNSUPPORTED,
                          "backend %s: KV cache shape lacks num_blocks, block_size or head_size",
                          name);
    return ATTN_OK;
}

/* Stride order: memory position i holds logical dim order[i]. */
static attn_status attn__layout_order(const attn_backend_desc *d, const char *name,
                                      attn_kv_layout layout, int n, int *order)
{
    int count = n;
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (!d->kv_stride_order) return ATTN_OK;
    attn_status st = d->kv_stride_order(layout, false, order, &count);
    if (st != ATTN_OK) return st;
    if (count != n)
        return attn__fail(ATTN_INTERNAL,
                          "backend %s: stride order has %d entries for a %d-dim shape", name, count,
                          n);
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (order[i] < 0 || order[i] >= n || (seen & (1 << order[i])))
            return attn__fail(ATTN_INTERNAL, "backend %s: stride order is not a permutation", name);
        seen |= 1 << order[i];
    }
    return ATTN_OK;
}

/* The view of one layer and whether the writer can fill it. */
static void attn__layout_view(const attn_backend_desc *d, attn_kv_layout_info *li, const int *where,
                              bool named, bool plain, int num_blocks, int block_size, int head_size,
                              int head_size_v)
{
    int64_t last = li->shape.dims[where[AX_HEAD]];
    int hsv = head_size_v > 0 ? head_size_v : head_size;
    bool two = where[AX_TWO] >= 0;
    /* K|V side by side in the last axis (FLASH_ATTN_DIFFKV). */
    bool side = !two && !d->is_mla &&
                !strcmp(named ? li->shape.dim_names[where[AX_HEAD]] : "", "head_size+head_size_v");
    if (side) hsv = (int)(last - head_size);
    attn_kv_view *v = &li->view;
    v->data = NULL;
    v->elem = li->elem;
    v->num_blocks = num_blocks;
    v->block_size = block_size;
    v->num_kv_heads = where[AX_HEADS] >= 0 ? (int)li->shape.dims[where[AX_HEADS]] : 1;
    v->head_size = head_size;
    v->head_size_v = two || side ? hsv : 0;
    v->k_offset = 0;
    v->v_offset = two ? li->strides[where[AX_TWO]] : side ? head_size : 0;
    v->stride_block = li->strides[where[AX_BLOCKS]];
    v->stride_token = li->strides[where[AX_BS]];
    v->stride_head = where[AX_HEADS] >= 0 ? li->strides[where[AX_HEADS]] : 0;
    v->k_scale = 1.0f;
    v->v_scale = 1.0f;
    li->has_v = two || side;
    /* The writer handles plain and fp8 rows whose K (and V) fit the axis. */
    li->writable = plain && last >= (side ? head_size + hsv : head_size) && (!two || last >= hsv);
}

attn_status attn_kv_layout_compute(const attn_backend_desc *d, attn_kv_layout layout,
                                   int num_blocks, int block_size, int num_kv_heads, int head_size,
                                   int head_size_v, attn_kv_dtype kv, attn_dtype model_dtype,
                                   attn_kv_layout_info *out)
{
    ATTN__CHECK_NULL(d);
    ATTN__CHECK_NULL(out);
    const char *name = d->name ? d->name : "?";
    attn_status st = attn__layout_args(d, layout, num_blocks, block_size, num_kv_heads, head_size,
                                       head_size_v, kv, model_dtype);
    if (st != ATTN_OK) return st;
    if (layout == ATTN_LAYOUT_DEFAULT) layout = ATTN_LAYOUT_NHD;

    attn_kv_layout_info li;
    memset(&li, 0, sizeof li);
    int where[AX_COUNT];
    bool named = false;
    if ((st = attn__layout_shape(d, name, num_blocks, block_size, num_kv_heads, head_size, kv,
                                 &li.shape, where, &named)) != ATTN_OK)
        return st;
    int n = li.shape.ndim;
    int order[6];
    if ((st = attn__layout_order(d, name, layout, n, order)) != ATTN_OK) return st;
    if (order[n - 1] != where[AX_HEAD])
        return attn__fail(ATTN_UNSUPPORTED,
                          "backend %s: the head_size axis is not innermost in the %s layout", name,
                          attn_layout_name(layout));
    int64_t stride = 1;
    for (int i = n - 1; i >= 0; i--) {
        li.strides[order[i]] = stride;
        if (!attn__mul_i64(stride, li.shape.dims[order[i]], &stride))
            return attn__fail(ATTN_OUT_OF_RANGE,
                              "backend %s: KV cache shape has more than 2^63 elements per layer",
                              name);
    }
    memcpy(li.stride_order, order, sizeof(int) * (size_t)n);
    li.layout = layout;
    li.elems_per_layer = stride;

    bool plain = attn__elem_for_layout(kv, model_dtype, &li.elem);
    size_t esz = attn_elem_size(li.elem);
    int64_t bytes;
    if (!attn__mul_i64(stride, (int64_t)esz, &bytes))
        return attn__fail(ATTN_OUT_OF_RANGE,
                          "backend %s: KV cache layer of %lld elements overflows the byte count",
                          name, (long long)stride);
    li.bytes_per_layer = (uint64_t)bytes;
    li.bytes_per_block = li.bytes_per_layer / (uint64_t)num_blocks;
    attn__layout_view(d, &li, where, named, plain, num_blocks, block_size, head_size, head_size_v);
    *out = li;
    return ATTN_OK;
}

/* ---- memory -------------------------------------------------------------- */

struct attn_kv_cache {
    attn_kv_layout_info li;
    int num_layers;
    attn_device *dev;         /* the views' device: NULL = host memory */
    attn_device *alloc_dev;   /* where the memory came from (the host instance for NULL) */
    void **mem;               /* [num_layers] one allocation each */
    float *k_scale, *v_scale; /* [num_layers] */
    float *ph;                /* [num_layers][2][num_kv_heads] */
    bool *has_ph;             /* [num_layers] */
};

attn_status attn_kv_cache_create(const attn_kv_layout_info *li, int num_layers, attn_kv_cache **out)
{
    return attn_kv_cache_create_on(li, num_layers, NULL, out);
}

attn_status attn_kv_cache_create_on(const attn_kv_layout_info *li, int num_layers, attn_device *dev,
                                    attn_kv_cache **out)
{
    ATTN__CHECK_NULL(li);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    if (num_layers < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV cache needs at least one layer (got %d)",
                          num_layers);
    /* the per-layer arrays are sized by it: the stated limit, before any size */
    if (num_layers > ATTN_MAX_LAYERS)
        return attn__fail(ATTN_OUT_OF_MEMORY, "KV cache of %d layers is too large (at most %d)",
                          num_layers, ATTN_MAX_LAYERS);
    if (li->bytes_per_layer == 0 || li->view.num_kv_heads < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV cache: empty layout");
    size_t total;
    if (li->bytes_per_layer > SIZE_MAX ||
        !attn__mul_size((size_t)li->bytes_per_layer, (size_t)num_layers, &total) ||
        total > ((size_t)1 << 46))
        return attn__fail(ATTN_OUT_OF_MEMORY, "KV cache of %d layers x %llu bytes is too large",
                          num_layers, (unsigned long long)li->bytes_per_layer);
    attn_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return attn__fail(ATTN_OUT_OF_MEMORY, "KV cache: out of memory");
    c->li = *li;
    c->num_layers = num_layers;
    c->dev = dev;
    c->alloc_dev = dev ? dev : attn_device_host();
    int h = li->view.num_kv_heads;
    c->mem = calloc((size_t)num_layers, sizeof(void *));
    c->k_scale = malloc(sizeof(float) * (size_t)num_layers);
    c->v_scale = malloc(sizeof(float) * (size_t)num_layers);
    c->ph = calloc((size_t)num_layers * 2 * (size_t)h, sizeof(float));
    c->has_ph = calloc((size_t)num_layers, sizeof(bool));
    if (!c->mem || !c->k_scale || !c->v_scale || !c->ph || !c->has_ph) {
        attn_kv_cache_free(c);
        return attn__fail(ATTN_OUT_OF_MEMORY, "KV cache: out of memory");
    }
    /* One allocation per layer: each view is a whole allocation of the
     * device, which is all a device's memory may be handed around as. */
    for (int l = 0; l < num_layers; l++) {
        attn_status st = attn_device_alloc(c->alloc_dev, (size_t)li->bytes_per_layer,
                                           ATTN_MEM_CACHE, &c->mem[l]);
        if (st != ATTN_OK) {
            attn_kv_cache_free(c);
            return attn__wrap(st, "KV cache: cannot reserve %llu bytes for %d layers",
                              (unsigned long long)total, num_layers);
        }
    }
    for (int l = 0; l < num_layers; l++)
        c->k_scale[l] = c->v_scale[l] = 1.0f;
    *out = c;
    return ATTN_OK;
}

void attn_kv_cache_free(attn_kv_cache *c)
{
    if (!c) return;
    for (int l = 0; c->mem && l < c->num_layers; l++)
        attn_device_free(c->alloc_dev, c->mem[l]);
    free(c->mem);
    free(c->k_scale);
    free(c->v_scale);
    free(c->ph);
    free(c->has_ph);
    free(c);
}

int attn_kv_cache_num_layers(const attn_kv_cache *c)
{
    return c ? c->num_layers : 0;
}

attn_device *attn_kv_cache_device(const attn_kv_cache *c)
{
    return c ? c->dev : NULL;
}

attn_status attn_kv_cache_view(const attn_kv_cache *c, int layer, attn_kv_view *out)
{
    ATTN__CHECK_NULL(c);
    ATTN__CHECK_NULL(out);
    if (layer < 0 || layer >= c->num_layers)
        return attn__fail(ATTN_OUT_OF_RANGE, "KV cache: layer %d outside 0..%d", layer,
                          c->num_layers - 1);
    *out = c->li.view;
    out->data = c->mem[layer];
    out->device = c->dev;
    out->k_scale = c->k_scale[layer];
    out->v_scale = c->v_scale[layer];
    int h = c->li.view.num_kv_heads;
    if (c->has_ph[layer]) {
        out->k_scale_per_head = c->ph + (size_t)layer * 2 * (size_t)h;
        out->v_scale_per_head = out->k_scale_per_head + h;
    }
    return ATTN_OK;
}

static bool attn__scale_ok(float s)
{
    return isfinite(s) && s > 0.0f;
}

attn_status attn_kv_cache_set_scales(attn_kv_cache *c, int layer, float k_scale, float v_scale,
                                     const float *k_scale_per_head, const float *v_scale_per_head)
{
    ATTN__CHECK_NULL(c);
    if (layer < 0 || layer >= c->num_layers)
        return attn__fail(ATTN_OUT_OF_RANGE, "KV cache: layer %d outside 0..%d", layer,
                          c->num_layers - 1);
    if (!attn__scale_ok(k_scale) || !attn__scale_ok(v_scale))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV cache scales must be finite and > 0 (k %g, v %g)", (double)k_scale,
                          (double)v_scale);
    if (!k_scale_per_head != !v_scale_per_head)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV cache: per-head scales need both K and V arrays");
    int h = c->li.view.num_kv_heads;
    for (int i = 0; k_scale_per_head && i < h; i++)
        if (!attn__scale_ok(k_scale_per_head[i]) || !attn__scale_ok(v_scale_per_head[i]))
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "KV cache: per-head scale of head %d must be finite and > 0", i);
    c->k_scale[layer] = k_scale;
    c->v_scale[layer] = v_scale;
    c->has_ph[layer] = k_scale_per_head != NULL;
    if (k_scale_per_head) {
        float *dst = c->ph + (size_t)layer * 2 * (size_t)h;
        memcpy(dst, k_scale_per_head, sizeof(float) * (size_t)h);
        memcpy(dst + h, v_scale_per_head, sizeof(float) * (size_t)h);
    }
    return ATTN_OK;
}
