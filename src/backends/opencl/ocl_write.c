/* Cache writes on an OpenCL device (the host writes' contracts:
 * src/kvcache/write.c for K/V, attn_mla_write_latent for the MLA latent):
 * the same checks, in the same order and with the same statuses, before
 * anything is enqueued, then the dialect's attn_kd_cache_write once per
 * part (K and V; latent and rope). Values are src * (1 / scale) computed on
 * the host exactly as the host write does, so results match it bit for
 * bit. The read-back helper converts device elements to float. */
#include <math.h>
#include <stdlib.h>

#include "backends/opencl/ocl_impl.h"
#include "device/device_impl.h"
#include "util/error.h"
#include "util/numeric.h"

static bool is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

static bool storable(attn_elem e)
{
    return e == ATTN_ELEM_F32 || e == ATTN_ELEM_F16 || e == ATTN_ELEM_BF16 || is_fp8(e);
}

/* Device-side sizes: the cache buffer holds every element the view
 * addresses, each source holds its rows. */
static attn_status check_sizes(const attn__ocl *o, const attn_kv_view *kv, int dv,
                               const attn__ocl_mem *srcs[2], const int64_t src_off[2],
                               const int64_t src_elems[2], attn_elem src, const char *who)
{
    const attn__ocl_mem *cache = kv->data;
    int64_t extent = 0, bytes = 0;
    if (!attn__ocl_view_extent(kv, dv, &extent) ||
        !attn__mul_i64(extent, (int64_t)attn_elem_size(kv->elem), &bytes))
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: the view's extent overflows", who);
    if (cache->dev != o->dev || (uint64_t)bytes > cache->size)
        return attn__fail(
            ATTN_OUT_OF_RANGE, "%s: the view addresses %lld bytes; the cache buffer has %zu%s", who,
            (long long)bytes, cache->size, cache->dev != o->dev ? " on another device" : "");
    for (int i = 0; i < 2; i++) {
        if (!srcs[i]) continue;
        int64_t end = 0;
        if (src_off[i] < 0 || !attn__add_i64(src_off[i], src_elems[i], &end) ||
            !attn__mul_i64(end, (int64_t)attn_elem_size(src), &bytes) || srcs[i]->dev != o->dev ||
            (uint64_t)bytes > srcs[i]->size)
            return attn__fail(ATTN_OUT_OF_RANGE,
                              "%s: source %d needs elements [%lld, +%lld) of %s; its buffer has "
                              "%zu bytes",
                              who, i, (long long)src_off[i], (long long)src_elems[i],
                              attn_elem_name(src), srcs[i]->size);
    }
    return ATTN_OK;
}

typedef struct {
    const attn__ocl_mem *src;
    int64_t src_off, tok_stride, dst_off, s_head;
    int nheads, dim, inv_off;
} write_part;

static attn_status launch_write(attn__ocl *o, const attn_kv_view *kv, attn_elem src, int ntok,
                                const write_part *p, bool raw)
{
    attn__kd_cache_write x = {.src = p->src,
                              .slots = o->slots,
                              .inv_scale = o->scales,
                              .cache = kv->data,
                              .src_off = p->src_off,
                              .tok_stride = p->tok_stride,
                              .dst_off = p->dst_off,
                              .s_blk = kv->stride_block,
                              .s_tok = kv->stride_token,
                              .s_head = p->s_head,
                              .src_elem = (int)src,
                              .cache_elem = (int)kv->elem,
                              .bs = kv->block_size,
                              .ntok = ntok,
                              .nheads = p->nheads,
                              .dim = p->dim,
                              .inv_off = p->inv_off,
                              .raw_copy = raw};
    attn__kd_args a;
    attn__kd_args_cache_write(&a, &x);
    return attn__ocl_run(o, &a);
}

/* Slots and inverse scales to the device (blocking copies: the in-order
 * queue runs them after any earlier write that still reads the buffers). */
static attn_status upload(attn__ocl *o, const int64_t *slots, int ntok, const float *inv, int ninv)
{
    attn_status st = attn__ocl_scratch(o, &o->slots, sizeof(int64_t) * (size_t)ntok);
    if (st == ATTN_OK) st = attn__ocl_scratch(o, &o->scales, sizeof(float) * (size_t)ninv);
    if (st == ATTN_OK)
        st = attn__ocl_copy_in(o, o->slots, 0, slots, sizeof(int64_t) * (size_t)ntok);
    if (st == ATTN_OK) st = attn__ocl_copy_in(o, o->scales, 0, inv, sizeof(float) * (size_t)ninv);
    return st;
}

static float scale_of(const attn_kv_view *kv, int h, bool value)
{
    if (!is_fp8(kv->elem)) return 1.0f;
    const float *ph = value ? kv->v_scale_per_head : kv->k_scale_per_head;
    return ph ? ph[h] : value ? kv->v_scale : kv->k_scale;
}

attn_status attn__ocl_kv_write(attn__ocl *o, const attn_kv_view *kv, const int64_t *slot_mapping,
                               int num_tokens, const attn__ocl_mem *k, int64_t k_offset,
                               const attn__ocl_mem *v, int64_t v_offset, attn_elem src)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(kv);
    if (num_tokens < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV write of %d tokens", num_tokens);
    if (num_tokens == 0) return ATTN_OK;
    ATTN__CHECK_NULL(slot_mapping);
    ATTN__CHECK_NULL(k);
    attn_status st = attn__kv_view_check(kv);
    if (st != ATTN_OK) return st;
    if (src != ATTN_ELEM_F32 && src != ATTN_ELEM_F16 && src != ATTN_ELEM_BF16)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV write: source element %s is not f32/f16/bf16",
                          attn_elem_name(src));
    if (v && kv->head_size_v < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV write: this cache stores no values (v given)");
    if (!v && kv->head_size_v >= 1)
        return attn__fail(ATTN_NULL_ARGUMENT, "KV write: this cache stores values but v is NULL");
    int64_t nslots = (int64_t)kv->num_blocks * kv->block_size;
    for (int i = 0; i < num_tokens; i++) {
        int64_t s = slot_mapping[i];
        if (s != -1 && (s < 0 || s >= nslots))
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "KV write: token %d has slot %lld outside the cache (%d blocks x %d "
                              "= %lld slots); nothing written",
                              i, (long long)s, kv->num_blocks, kv->block_size, (long long)nslots);
    }
    int kvh = kv->num_kv_heads, D = kv->head_size, Dv = v ? kv->head_size_v : 0;
    const attn__ocl_mem *srcs[2] = {k, v};
    int64_t offs[2] = {k_offset, v_offset};
    int64_t elems[2] = {(int64_t)num_tokens * kvh * D, (int64_t)num_tokens * kvh * Dv};
    st = check_sizes(o, kv, Dv, srcs, offs, elems, src, "OpenCL KV write");
    if (st != ATTN_OK) return st;
    if ((int64_t)num_tokens * kvh > INT32_MAX / KD_WG)
        return attn__fail(ATTN_UNSUPPORTED, "OpenCL KV write: %d tokens x %d heads in one call",
                          num_tokens, kvh);
    float *inv = malloc(sizeof(float) * 2 * (size_t)kvh);
    if (!inv) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL KV write: out of memory");
    for (int h = 0; h < kvh; h++) {
        inv[h] = 1.0f / scale_of(kv, h, false);
        inv[kvh + h] = 1.0f / scale_of(kv, h, true);
    }
    st = upload(o, slot_mapping, num_tokens, inv, 2 * kvh);
    free(inv);
    bool raw = src == kv->elem && !is_fp8(kv->elem);
    write_part pk = {k, k_offset, (int64_t)kvh * D, kv->k_offset, kv->stride_head, kvh, D, 0};
    if (st == ATTN_OK) st = launch_write(o, kv, src, num_tokens, &pk, raw);
    write_part pv = {v, v_offset, (int64_t)kvh * Dv, kv->v_offset, kv->stride_head, kvh, Dv, kvh};
    if (st == ATTN_OK && v) st = launch_write(o, kv, src, num_tokens, &pv, raw);
    return st;
}

attn_status attn__ocl_mla_write(attn__ocl *o, const attn_kv_view *kv, const int64_t *slot_mapping,
                                int num_tokens, const attn__ocl_mem *latent, int64_t latent_offset,
                                const attn__ocl_mem *rope, int64_t rope_offset, int latent_dim,
                                int rope_dim, attn_elem src)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(kv);
    if (num_tokens < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_mla_write_latent: num_tokens %d < 0",
                          num_tokens);
    if (src != ATTN_ELEM_F32 && src != ATTN_ELEM_F16 && src != ATTN_ELEM_BF16)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_mla_write_latent: source element %s is not f32/f16/bf16",
                          attn_elem_name(src));
    attn_status st = attn__latent_view_check("attn_mla_write_latent", kv);
    if (st != ATTN_OK || num_tokens == 0) return st;
    ATTN__CHECK_NULL(slot_mapping);
    ATTN__CHECK_NULL(latent);
    int R = latent_dim, P = rope_dim;
    if (R < 1 || P < 0 || R + P != kv->head_size)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_mla_write_latent: latent %d + rope %d != the view's head_size %d",
                          R, P, kv->head_size);
    if (P > 0 && !rope)
        return attn__fail(ATTN_NULL_ARGUMENT,
                          "attn_mla_write_latent: argument 'k_rope' is NULL (rope part %d)", P);
    int64_t nslots = (int64_t)kv->num_blocks * kv->block_size;
    for (int t = 0; t < num_tokens; t++) {
        int64_t s = slot_mapping[t];
        if (s != -1 && (s < 0 || s >= nslots))
            return attn__fail(ATTN_OUT_OF_RANGE,
                              "attn_mla_write_latent: slot_mapping[%d] = %lld is outside the "
                              "cache (%lld slots)",
                              t, (long long)s, (long long)nslots);
    }
    attn_kv_view one = *kv; /* the latent rows as a one-head view */
    one.num_kv_heads = 1;
    one.stride_head = 0;
    const attn__ocl_mem *srcs[2] = {latent, P > 0 ? rope : NULL};
    int64_t offs[2] = {latent_offset, rope_offset};
    int64_t elems[2] = {(int64_t)num_tokens * R, (int64_t)num_tokens * P};
    st = check_sizes(o, &one, 0, srcs, offs, elems, src, "OpenCL MLA latent write");
    if (st != ATTN_OK) return st;
    if (num_tokens > INT32_MAX / KD_WG)
        return attn__fail(ATTN_UNSUPPORTED, "OpenCL MLA latent write: %d tokens in one call",
                          num_tokens);
    float inv = is_fp8(kv->elem) ? 1.0f / kv->k_scale : 1.0f;
    st = upload(o, slot_mapping, num_tokens, &inv, 1);
    bool raw = src == kv->elem;
    write_part pl = {latent, latent_offset, R, kv->k_offset, 0, 1, R, 0};
    if (st == ATTN_OK) st = launch_write(o, kv, src, num_tokens, &pl, raw);
    write_part pr = {rope, rope_offset, P, kv->k_offset + R, 0, 1, P, 0};
    if (st == ATTN_OK && P > 0) st = launch_write(o, kv, src, num_tokens, &pr, raw);
    return st;
}

attn_status attn__ocl_to_f32(attn__ocl *o, const attn__ocl_mem *src, int64_t offset, attn_elem elem,
                             size_t n, float *dst)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(src);
    if (n == 0) return ATTN_OK;
    ATTN__CHECK_NULL(dst);
    if (!storable(elem))
        return attn__fail(ATTN_INVALID_ARGUMENT, "OpenCL read-back: element %s",
                          attn_elem_name(elem));
    int64_t end = 0, bytes = 0;
    if (offset < 0 || n > (size_t)INT32_MAX * KD_WG / 2 ||
        !attn__add_i64(offset, (int64_t)n, &end) ||
        !attn__mul_i64(end, (int64_t)attn_elem_size(elem), &bytes) || (uint64_t)bytes > src->size ||
        src->dev != o->dev)
        return attn__fail(ATTN_OUT_OF_RANGE,
                          "OpenCL read-back: elements [%lld, +%zu) outside the "
                          "buffer of %zu bytes",
                          (long long)offset, n, src->size);
    attn__ocl_mem *tmp = NULL;
    attn_status st = attn__ocl_alloc(o, n * sizeof(float), &tmp);
    if (st != ATTN_OK) return st;
    attn__kd_args a;
    attn__kd_args_to_f32(&a, src, offset, (int)elem, (int64_t)n, tmp);
    st = attn__ocl_run(o, &a);
    if (st == ATTN_OK) st = attn__ocl_copy_out(o, dst, tmp, 0, n * sizeof(float));
    attn__ocl_free(tmp);
    return st;
}
