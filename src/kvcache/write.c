/* Writing new keys and values into their cache slots (vLLM's
 * reshape_and_cache), and reading a row back.
 *
 * Contract: slot s addresses block s / block_size, offset s % block_size;
 * -1 marks a padding token and is skipped. Every slot and the view itself
 * are checked before the first byte is written, so a bad call changes
 * nothing. FP8 storage holds value / scale, rounded to nearest even and
 * saturated at the format's largest finite value (src/util/numeric.h); the
 * scale is the head's own when the view carries per-head scales. */
#include <math.h>
#include <string.h>

#include "attn/kvcache.h"
#include "util/error.h"
#include "util/numeric.h"

static bool attn__elem_storable(attn_elem e)
{
    return e == ATTN_ELEM_F32 || e == ATTN_ELEM_F16 || e == ATTN_ELEM_BF16 ||
           e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

static bool attn__elem_is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

static attn_status attn__view_check(const attn_kv_view *kv)
{
    if (!kv->data) return attn__fail(ATTN_INVALID_ARGUMENT, "KV view has no memory (data is NULL)");
    if (!attn__elem_storable(kv->elem))
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
    if (attn__elem_is_fp8(kv->elem)) {
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

static void attn__write_rows(const attn_kv_view *kv, int64_t slot, const void *src, attn_elem st,
                             size_t src_index, int dim, bool value)
{
    for (int h = 0; h < kv->num_kv_heads; h++) {
        size_t dst = attn__row_offset(kv, slot, h, value);
        size_t s0 = src_index + (size_t)h * (size_t)dim;
        float inv = 1.0f / attn__scale_of(kv, h, value);
        if (st == kv->elem && !attn__elem_is_fp8(kv->elem)) {
            size_t esz = attn_elem_size(st);
            memcpy((char *)kv->data + dst * esz, (const char *)src + s0 * esz, esz * (size_t)dim);
            continue;
        }
        for (int d = 0; d < dim; d++)
            attn__store_elem(kv->data, kv->elem, dst + (size_t)d,
                             attn__load_elem(src, st, s0 + (size_t)d) * inv);
    }
}

attn_status attn_kv_write(const attn_kv_view *kv, const int64_t *slot_mapping, int num_tokens,
                          const void *k, const void *v, attn_elem src)
{
    ATTN__CHECK_NULL(kv);
    if (num_tokens < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV write of %d tokens", num_tokens);
    if (num_tokens == 0) return ATTN_OK;
    ATTN__CHECK_NULL(slot_mapping);
    ATTN__CHECK_NULL(k);
    attn_status st = attn__view_check(kv);
    if (st != ATTN_OK) return st;
    if (src != ATTN_ELEM_F32 && src != ATTN_ELEM_F16 && src != ATTN_ELEM_BF16)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV write: source element %s is not f32/f16/bf16",
                          attn_elem_name(src));
    if (v && kv->head_size_v < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV write: this cache stores no values (v given)");
    if (!v && kv->head_size_v >= 1) /* K alone would leave stale values behind */
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
    size_t krow = (size_t)kv->num_kv_heads * (size_t)kv->head_size;
    size_t vrow = (size_t)kv->num_kv_heads * (size_t)kv->head_size_v;
    for (int i = 0; i < num_tokens; i++) {
        int64_t s = slot_mapping[i];
        if (s < 0) continue;
        attn__write_rows(kv, s, k, src, (size_t)i * krow, kv->head_size, false);
        if (v) attn__write_rows(kv, s, v, src, (size_t)i * vrow, kv->head_size_v, true);
    }
    return ATTN_OK;
}

attn_status attn_kv_read(const attn_kv_view *kv, int64_t slot, int head, bool value, float *out)
{
    ATTN__CHECK_NULL(kv);
    ATTN__CHECK_NULL(out);
    attn_status st = attn__view_check(kv);
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
    for (int d = 0; d < dim; d++)
        out[d] = attn__load_elem(kv->data, kv->elem, off + (size_t)d) * scale;
    return ATTN_OK;
}
