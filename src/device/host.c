/* The host device: libattn's own memory and cache writes, what every
 * backend without a device of its own runs on (REFERENCE, CPU_ATTN,
 * CPU_MLA). Handles are host pointers (ATTN_DEVICE_HOST_VISIBLE); caches
 * are reserved lazily with mmap(MAP_NORESERVE) so a pool sized for a
 * simulated 80 GB device costs only the pages written; step memory is
 * 64-byte aligned and zeroed (large blocks mapped, as calloc maps them);
 * copies are memcpy; nothing is asynchronous.
 *
 * The writes (vLLM's reshape_and_cache and concat_and_cache_mla) get
 * arguments the caller has checked in full: every slot is -1 or inside the
 * cache, the view is well formed, fp8 scales are finite and > 0. FP8
 * storage holds value / scale, rounded to nearest even and saturated at the
 * format's largest finite value (src/util/numeric.h); the scale is the
 * head's own when the view carries per-head scales. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device/device_impl.h"
#include "util/error.h"
#include "util/numeric.h"

/* ---- memory ------------------------------------------------------------------------ */

/* Step memory from this size on is mapped, as calloc does for large
 * blocks: zero pages committed when first written, not cleared up front. */
#define HOST_MAP_MIN ((size_t)128 << 10)

static bool host_mapped(size_t bytes, attn_mem_kind kind)
{
    return kind == ATTN_MEM_CACHE || bytes >= HOST_MAP_MIN;
}

static attn_status host_alloc(void *state, size_t bytes, attn_mem_kind kind, void **mem)
{
    (void)state;
    if (host_mapped(bytes, kind)) {
        int flags = MAP_PRIVATE | MAP_ANONYMOUS | (kind == ATTN_MEM_CACHE ? MAP_NORESERVE : 0);
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
        if (m == MAP_FAILED)
            return attn__fail(ATTN_OUT_OF_MEMORY, "host device: cannot reserve %zu bytes", bytes);
        *mem = m;
        return ATTN_OK;
    }
    size_t n = (bytes + 63) & ~(size_t)63;
    void *m = aligned_alloc(64, n);
    if (!m) return attn__fail(ATTN_OUT_OF_MEMORY, "host device: out of memory (%zu bytes)", bytes);
    memset(m, 0, n);
    *mem = m;
    return ATTN_OK;
}

static void host_free(void *state, void *mem, size_t bytes, attn_mem_kind kind)
{
    (void)state;
    if (host_mapped(bytes, kind))
        munmap(mem, bytes);
    else
        free(mem);
}

static attn_status host_copy_in(void *state, void *dst, size_t dst_offset, const void *src,
                                size_t bytes)
{
    (void)state;
    memcpy((char *)dst + dst_offset, src, bytes);
    return ATTN_OK;
}

static attn_status host_copy_out(void *state, void *dst, const void *src, size_t src_offset,
                                 size_t bytes)
{
    (void)state;
    memcpy(dst, (const char *)src + src_offset, bytes);
    return ATTN_OK;
}

static attn_status host_sync(void *state)
{
    (void)state;
    return ATTN_OK;
}

/* ---- reshape_and_cache ------------------------------------------------------------------ */

static inline bool host_is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

static inline size_t host_row_offset(const attn_kv_view *kv, int64_t slot, int head, bool value)
{
    int64_t b = slot / kv->block_size, t = slot % kv->block_size;
    return (size_t)((value ? kv->v_offset : kv->k_offset) + b * kv->stride_block +
                    t * kv->stride_token + head * kv->stride_head);
}

static float host_scale_of(const attn_kv_view *kv, int head, bool value)
{
    if (!host_is_fp8(kv->elem)) return 1.0f;
    const float *ph = value ? kv->v_scale_per_head : kv->k_scale_per_head;
    return ph ? ph[head] : value ? kv->v_scale : kv->k_scale;
}

static void host_write_rows(const attn_kv_view *kv, int64_t slot, const void *src, attn_elem st,
                            size_t src_index, int dim, bool value)
{
    for (int h = 0; h < kv->num_kv_heads; h++) {
        size_t dst = host_row_offset(kv, slot, h, value);
        size_t s0 = src_index + (size_t)h * (size_t)dim;
        float inv = 1.0f / host_scale_of(kv, h, value);
        if (st == kv->elem && !host_is_fp8(kv->elem)) {
            size_t esz = attn_elem_size(st);
            memcpy((char *)kv->data + dst * esz, (const char *)src + s0 * esz, esz * (size_t)dim);
            continue;
        }
        for (int d = 0; d < dim; d++)
            attn__store_elem(kv->data, kv->elem, dst + (size_t)d,
                             attn__load_elem(src, st, s0 + (size_t)d) * inv);
    }
}

attn_status attn__host_kv_write(const attn_kv_view *kv, const attn_kv_write_args *a)
{
    size_t krow = (size_t)kv->num_kv_heads * (size_t)kv->head_size;
    size_t vrow = (size_t)kv->num_kv_heads * (size_t)kv->head_size_v;
    for (int i = 0; i < a->num_tokens; i++) {
        int64_t s = a->slot_mapping[i];
        if (s < 0) continue;
        host_write_rows(kv, s, a->k, a->src, (size_t)a->k_offset + (size_t)i * krow, kv->head_size,
                        false);
        if (a->v)
            host_write_rows(kv, s, a->v, a->src, (size_t)a->v_offset + (size_t)i * vrow,
                            kv->head_size_v, true);
    }
    return ATTN_OK;
}

static attn_status host_kv_write(void *state, const attn_kv_view *kv, const attn_kv_write_args *a)
{
    (void)state;
    return attn__host_kv_write(kv, a);
}

/* ---- concat_and_cache_mla ----------------------------------------------------------------- */

attn_status attn__host_mla_write(const attn_kv_view *kv, const attn_mla_write_args *a)
{
    const int R = a->latent_dim, P = a->rope_dim;
    attn_elem src = a->src;
    size_t ssz = attn_elem_size(src), dsz = attn_elem_size(kv->elem);
    float inv = host_is_fp8(kv->elem) ? 1.0f / kv->k_scale : 1.0f;
    const char *latent = (const char *)a->latent + (size_t)a->latent_offset * ssz;
    const char *k_rope = P > 0 ? (const char *)a->k_rope + (size_t)a->k_rope_offset * ssz : NULL;
    for (int t = 0; t < a->num_tokens; t++) {
        int64_t s = a->slot_mapping[t];
        if (s == -1) continue;
        int64_t blk = s / kv->block_size, off = s % kv->block_size;
        char *row = (char *)kv->data +
                    (size_t)(kv->k_offset + blk * kv->stride_block + off * kv->stride_token) * dsz;
        const char *lat = latent + (size_t)t * R * ssz;
        const char *rope = P > 0 ? k_rope + (size_t)t * P * ssz : NULL;
        if (src == kv->elem) {
            memcpy(row, lat, (size_t)R * ssz);
            if (P > 0) memcpy(row + (size_t)R * dsz, rope, (size_t)P * ssz);
            continue;
        }
        for (int i = 0; i < R; i++)
            attn__store_elem(row, kv->elem, (size_t)i, attn__load_elem(lat, src, (size_t)i) * inv);
        for (int i = 0; i < P; i++)
            attn__store_elem(row, kv->elem, (size_t)(R + i),
                             attn__load_elem(rope, src, (size_t)i) * inv);
    }
    return ATTN_OK;
}

static attn_status host_mla_write(void *state, const attn_kv_view *kv, const attn_mla_write_args *a)
{
    (void)state;
    return attn__host_mla_write(kv, a);
}

const attn_device_ops attn__host_device_ops = {
    .struct_size = sizeof(attn_device_ops),
    .name = "host",
    .flags = ATTN_DEVICE_HOST_VISIBLE,
    .alloc = host_alloc,
    .free = host_free,
    .copy_in = host_copy_in,
    .copy_out = host_copy_out,
    .kv_write = host_kv_write,
    .mla_write = host_mla_write,
    .synchronize = host_sync,
};
