/* Writing new keys and values into their cache slots (vLLM's
 * reshape_and_cache), and reading a row back.
 *
 * Contract: slot s addresses block s / block_size, offset s % block_size;
 * -1 marks a padding token and is skipped. Every slot, the view itself and,
 * on a device whose memory is not host-visible, every source range and the
 * view's memory are checked here, on the host, before the view's device
 * writes (src/device/host.c for host memory), so a bad call changes nothing
 * on any device. */
#include <math.h>
#include <string.h>

#include "attn/kvcache.h"
#include "device/device_impl.h"
#include "util/error.h"
#include "util/numeric.h"

static bool attn__elem_is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

static inline size_t attn__row_offset(const attn_kv_view *kv, int64_t slot, int head, bool value)
{
    int64_t b = slot / kv->block_size, t = slot % kv->block_size;
    return (size_t)((value ? kv->v_offset : kv->k_offset) + b * kv->stride_block +
                    t * kv->stride_token + head * kv->stride_head);
}

static float attn__scale_of(const attn_kv_view *kv, int head, bool value)
{
    if (!attn__elem_is_fp8(kv->elem)) return 1.0f;
    const float *ph = value ? kv->v_scale_per_head : kv->k_scale_per_head;
    return ph ? ph[head] : value ? kv->v_scale : kv->k_scale;
}

/* The source rows [k_offset, k_offset + n * row) of a device that is not
 * host-visible lie inside their allocation. */
static attn_status attn__src_range(attn_device *d, const void *p, int64_t off, int n, size_t row,
                                   attn_elem e, const char *what)
{
    if (attn_device_host_visible(d)) return ATTN_OK;
    size_t esz = attn_elem_size(e), bytes, first;
    if (off < 0 || !attn__mul_size((size_t)n, row, &bytes) || !attn__mul_size(bytes, esz, &bytes) ||
        !attn__mul_size((size_t)off, esz, &first))
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV write: %s range overflows", what);
    return attn__device_range(d, p, first, bytes, what);
}

attn_status attn_kv_write(const attn_kv_view *kv, const int64_t *slot_mapping, int num_tokens,
                          const void *k, const void *v, attn_elem src)
{
    return attn_kv_write_at(kv, slot_mapping, num_tokens, k, 0, v, 0, src);
}

attn_status attn_kv_write_at(const attn_kv_view *kv, const int64_t *slot_mapping, int num_tokens,
                             const void *k, int64_t k_offset, const void *v, int64_t v_offset,
                             attn_elem src)
{
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
    if (!v && kv->head_size_v >= 1) /* K alone would leave stale values behind */
        return attn__fail(ATTN_NULL_ARGUMENT, "KV write: this cache stores values but v is NULL");
    if (k_offset < 0 || v_offset < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV write: negative source offset (%lld, %lld)",
                          (long long)k_offset, (long long)v_offset);
    int64_t nslots = (int64_t)kv->num_blocks * kv->block_size;
    for (int i = 0; i < num_tokens; i++) {
        int64_t s = slot_mapping[i];
        if (s != -1 && (s < 0 || s >= nslots))
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "KV write: token %d has slot %lld outside the cache (%d blocks x %d "
                              "= %lld slots); nothing written",
                              i, (long long)s, kv->num_blocks, kv->block_size, (long long)nslots);
    }
    attn_device *d = kv->device;
    size_t krow = (size_t)kv->num_kv_heads * (size_t)kv->head_size;
    size_t vrow = (size_t)kv->num_kv_heads * (size_t)kv->head_size_v;
    if ((st = attn__device_view_range(kv, "KV write")) != ATTN_OK ||
        (st = attn__src_range(d, k, k_offset, num_tokens, krow, src, "KV write: k")) != ATTN_OK ||
        (v &&
         (st = attn__src_range(d, v, v_offset, num_tokens, vrow, src, "KV write: v")) != ATTN_OK))
        return st;
    attn_kv_write_args a = {.struct_size = sizeof a,
                            .slot_mapping = slot_mapping,
                            .num_tokens = num_tokens,
                            .k = k,
                            .v = v,
                            .k_offset = k_offset,
                            .v_offset = v_offset,
                            .src = src};
    return d ? d->ops->kv_write(d->state, kv, &a) : attn__host_kv_write(kv, &a);
}

attn_status attn_kv_read(const attn_kv_view *kv, int64_t slot, int head, bool value, float *out)
{
    ATTN__CHECK_NULL(kv);
    ATTN__CHECK_NULL(out);
    attn_status st = attn__kv_view_check(kv);
    if (st != ATTN_OK) return st;
    int64_t nslots = (int64_t)kv->num_blocks * kv->block_size;
    if (slot < 0 || slot >= nslots)
        return attn__fail(ATTN_OUT_OF_RANGE, "KV read: slot %lld outside 0..%lld", (long long)slot,
                          (long long)nslots - 1);
    if (head < 0 || head >= kv->num_kv_heads)
        return attn__fail(ATTN_OUT_OF_RANGE, "KV read: head %d outside 0..%d", head,
                          kv->num_kv_heads - 1);
    if (value && kv->head_size_v < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV read: this cache stores no values");
    int dim = value ? kv->head_size_v : kv->head_size;
    size_t off = attn__row_offset(kv, slot, head, value);
    float scale = attn__scale_of(kv, head, value);
    if (attn_device_host_visible(kv->device)) {
        for (int d = 0; d < dim; d++)
            out[d] = attn__load_elem(kv->data, kv->elem, off + (size_t)d) * scale;
        return ATTN_OK;
    }
    /* the row is copied out first: the host never reads device memory */
    if (dim > ATTN_MAX_HEAD_SIZE)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV read: head size %d exceeds %d", dim,
                          ATTN_MAX_HEAD_SIZE);
    if ((st = attn__device_view_range(kv, "KV read")) != ATTN_OK) return st;
    unsigned char row[ATTN_MAX_HEAD_SIZE * sizeof(float)];
    size_t esz = attn_elem_size(kv->elem);
    st = attn_device_copy_out(kv->device, row, kv->data, off * esz, (size_t)dim * esz);
    if (st != ATTN_OK) return st;
    for (int d = 0; d < dim; d++)
        out[d] = attn__load_elem(row, kv->elem, (size_t)d) * scale;
    return ATTN_OK;
}

attn_status attn_kv_view_extent(const attn_kv_view *kv, int64_t *elements)
{
    ATTN__CHECK_NULL(kv);
    ATTN__CHECK_NULL(elements);
    if (!attn__view_extent(kv, elements))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV view is malformed (negative geometry or an extent that overflows)");
    return ATTN_OK;
}
