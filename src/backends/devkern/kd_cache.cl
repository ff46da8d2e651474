/* Cache writes (vLLM's reshape_and_cache and concat_and_cache_mla) and the
 * element read-back, in the kernel dialect.
 *
 * attn_kd_cache_write scatters rows of `dim` elements into a paged cache:
 * work-group g writes token g / nheads, head g % nheads. Source row:
 * src_off + token * src_tok_stride + head * dim; destination: dst_off +
 * block * s_blk + offset * s_tok + head * s_head, block/offset from the
 * token's slot (slot / bs, slot % bs; a negative slot is padding and is
 * skipped; the host has checked every slot against the cache). Values are
 * src * inv_scale[inv_off + head] stored in the cache's element type, or copied bit
 * for bit when raw_copy is set (same element type, not fp8: the host
 * write's memcpy). The standard K/V write is two calls (K, V), the MLA
 * latent write two (latent part, rope part at dst_off + rank). */
#if !defined(__OPENCL_C_VERSION__) && !defined(__OPENCL_VERSION__)
#include "attn_kdialect.h"
#endif

KD_KERNEL KD_WG_SIZE(KD_WG) void attn_kd_cache_write(
    KD_GLOBAL const kd_u8 *KD_RESTRICT src, kd_i64 src_off, int src_elem, kd_i64 src_tok_stride,
    KD_GLOBAL kd_u8 *KD_RESTRICT cache, int cache_elem, kd_i64 dst_off, kd_i64 s_blk, kd_i64 s_tok,
    kd_i64 s_head, int bs, KD_GLOBAL const kd_i64 *KD_RESTRICT slots, int nheads, int dim,
    KD_GLOBAL const float *KD_RESTRICT inv_scale, int inv_off, int raw_copy)
{
    int g = KD_GROUP_ID(0), lid = KD_LOCAL_ID();
    int tok = g / nheads, head = g - tok * nheads;
    kd_i64 slot = slots[tok];
    if (slot < 0) return; /* no barrier in this kernel: a whole group may leave */
    kd_i64 dst = dst_off + (slot / bs) * s_blk + (slot % bs) * s_tok + head * s_head;
    kd_i64 si = src_off + tok * src_tok_stride + (kd_i64)head * dim;
    if (raw_copy) {
        for (int d = lid; d < dim; d += KD_WG)
            kd_copy(cache, dst + d, src, si + d, cache_elem);
        return;
    }
    float inv = inv_scale[inv_off + head];
    for (int d = lid; d < dim; d += KD_WG)
        kd_store(cache, cache_elem, dst + d, kd_load(src, src_elem, si + d) * inv);
}

/* n elements of type elem from src + off, as float (reading a device
 * cache or output back; the conversion test's decode side). */
KD_KERNEL KD_WG_SIZE(KD_WG) void attn_kd_to_f32(KD_GLOBAL const kd_u8 *KD_RESTRICT src, kd_i64 off,
                                                int elem, kd_i64 n,
                                                KD_GLOBAL float *KD_RESTRICT dst)
{
    kd_i64 i = (kd_i64)KD_GROUP_ID(0) * KD_WG + KD_LOCAL_ID();
    if (i < n) dst[i] = kd_load(src, elem, off + i);
}
