/* The one check of a forward call shared by REFERENCE and CPU_ATTN: every
 * pointer, the layer parameters (sink logits finite: refused rather than
 * defined, the same in every kernel), the metadata's internal consistency,
 * each request's lengths and every block id the kernels will read. It only reads;
 * a failure names the first problem found and the kernels then touch
 * nothing. */
#include <math.h>

#include "backends/reference/reference.h"
#include "util/error.h"

attn_status attn__check_sinks(const char *who, const attn_layer_params *l, int num_heads)
{
    for (int h = 0; l->sinks && h < num_heads; h++)
        if (!isfinite(l->sinks[h]))
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "%s%ssink logit of head %d is %g (must be finite)", who,
                              *who ? ": " : "", h, (double)l->sinks[h]);
    return ATTN_OK;
}

attn_status attn__fwd_check_layer(const attn_layer_params *l)
{
    ATTN__CHECK_NULL(l);
    if (l->num_heads < 1 || l->num_kv_heads < 1 || l->num_heads % l->num_kv_heads != 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "num_heads (%d) must be a positive multiple of num_kv_heads (%d)",
                          l->num_heads, l->num_kv_heads);
    if (l->num_heads > ATTN_MAX_HEADS)
        return attn__fail(ATTN_INVALID_ARGUMENT, "num_heads %d exceeds ATTN_MAX_HEADS (%d)",
                          l->num_heads, ATTN_MAX_HEADS);
    if (l->head_size < 1 || l->head_size_v < 0 || l->head_size > ATTN_MAX_HEAD_SIZE ||
        l->head_size_v > ATTN_MAX_HEAD_SIZE)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "bad head sizes (head_size=%d, head_size_v=%d; limit %d)", l->head_size,
                          l->head_size_v, ATTN_MAX_HEAD_SIZE);
    if ((unsigned)l->dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "bad dtype %d", (int)l->dtype);
    if ((unsigned)l->attn_type >= ATTN_TYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "bad attention type %d", (int)l->attn_type);
    if (l->sliding_window < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "sliding_window %d < 0", l->sliding_window);
    if (!(l->logits_soft_cap >= 0.0f) || !isfinite(l->logits_soft_cap))
        return attn__fail(ATTN_INVALID_ARGUMENT, "logits_soft_cap must be finite and >= 0");
    if (!isfinite(l->scale) || l->scale < 0.0f)
        return attn__fail(ATTN_INVALID_ARGUMENT, "scale must be finite and >= 0");
    return attn__check_sinks("", l, l->num_heads);
}

static attn_status check_view(const attn_forward_args *a)
{
    const attn_kv_view *kv = a->kv;
    const attn_layer_params *l = a->layer;
    if (!kv) return attn__fail(ATTN_NULL_ARGUMENT, "forward: no KV cache view and no direct K/V");
    if (!kv->data) return attn__fail(ATTN_NULL_ARGUMENT, "forward: KV cache view has no data");
    if ((unsigned)kv->elem > ATTN_ELEM_FP8_E5M2)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV cache element %s is not readable here",
                          attn_elem_name(kv->elem));
    if (kv->num_kv_heads != l->num_kv_heads || kv->head_size != l->head_size)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV cache view (kv_heads=%d, head_size=%d) does not match the layer "
                          "(kv_heads=%d, head_size=%d)",
                          kv->num_kv_heads, kv->head_size, l->num_kv_heads, l->head_size);
    int hv = kv->head_size_v > 0 ? kv->head_size_v : kv->head_size;
    if (hv != attn__fwd_head_size_v(l))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "KV cache view head_size_v %d does not match the layer's %d", hv,
                          attn__fwd_head_size_v(l));
    if (kv->num_blocks < 1 || kv->block_size < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV cache view has %d blocks of %d tokens",
                          kv->num_blocks, kv->block_size);
    if (kv->stride_block < 0 || kv->stride_token < 0 || kv->stride_head < 0 || kv->k_offset < 0 ||
        kv->v_offset < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "KV cache view has negative strides/offsets");
    if (a->common->block_size > 0 && a->common->block_size != kv->block_size)
        return attn__fail(ATTN_BAD_METADATA, "metadata block_size %d != cache block_size %d",
                          a->common->block_size, kv->block_size);
    if (attn__elem_is_fp8(kv->elem)) {
        for (int h = 0; h < kv->num_kv_heads; h++) {
            float ks = attn__kv_scale(kv, h, false), vs = attn__kv_scale(kv, h, true);
            if (!(ks > 0.0f) || !(vs > 0.0f) || !isfinite(ks) || !isfinite(vs))
                return attn__fail(ATTN_INVALID_ARGUMENT,
                                  "fp8 KV scales must be finite and > 0 (head %d)", h);
        }
    }
    return ATTN_OK;
}

attn_status attn__fwd_check(const attn_forward_args *a)
{
    ATTN__CHECK_NULL(a);
    ATTN__CHECK_NULL(a->layer);
    ATTN__CHECK_NULL(a->common);
    const attn_layer_params *l = a->layer;
    const attn_common_metadata *cm = a->common;
    attn_status st = attn__fwd_check_layer(l);
    if (st != ATTN_OK) return st;
    if (cm->num_reqs > ATTN_MAX_NUM_REQS)
        return attn__fail(ATTN_BAD_METADATA, "num_reqs %d exceeds ATTN_MAX_NUM_REQS (%d)",
                          cm->num_reqs, ATTN_MAX_NUM_REQS);
    if (cm->num_reqs < 0 || cm->num_actual_tokens < 0)
        return attn__fail(ATTN_BAD_METADATA, "num_reqs %d / num_actual_tokens %d < 0", cm->num_reqs,
                          cm->num_actual_tokens);
    if (cm->num_actual_tokens > 0) {
        ATTN__CHECK_NULL(a->q);
        ATTN__CHECK_NULL(a->out);
    }
    if (cm->num_reqs == 0) {
        if (cm->num_actual_tokens != 0)
            return attn__fail(ATTN_BAD_METADATA, "%d tokens but no request", cm->num_actual_tokens);
        return ATTN_OK;
    }
    ATTN__CHECK_NULL(cm->query_start_loc);
    const int32_t *qsl = cm->query_start_loc;
    if (qsl[0] != 0)
        return attn__fail(ATTN_BAD_METADATA, "query_start_loc[0] = %d, want 0", qsl[0]);
    for (int r = 0; r < cm->num_reqs; r++)
        if (qsl[r + 1] < qsl[r])
            return attn__fail(ATTN_BAD_METADATA, "query_start_loc decreases at request %d", r);
    if (qsl[cm->num_reqs] != cm->num_actual_tokens)
        return attn__fail(ATTN_BAD_METADATA, "query_start_loc[%d] = %d != num_actual_tokens %d",
                          cm->num_reqs, qsl[cm->num_reqs], cm->num_actual_tokens);
    if ((a->k == NULL) != (a->v == NULL))
        return attn__fail(ATTN_INVALID_ARGUMENT, "direct K and V must be given together");
    if (a->k) {
        if (l->attn_type == ATTN_TYPE_ENCODER_DECODER)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "cross attention reads the encoder's K/V from the cache");
        return ATTN_OK;
    }
    st = check_view(a);
    if (st != ATTN_OK) return st;
    bool cross = l->attn_type == ATTN_TYPE_ENCODER_DECODER && cm->encoder_seq_lens;
    if (!cross) ATTN__CHECK_NULL(cm->seq_lens);
    ATTN__CHECK_NULL(cm->block_table);
    const attn_kv_view *kv = a->kv;
    for (int r = 0; r < cm->num_reqs; r++) {
        int qlen = qsl[r + 1] - qsl[r];
        int kv_len = attn__fwd_kv_len(a, r);
        if (kv_len < 0 || kv_len > ATTN_MAX_SEQ_LEN)
            return attn__fail(ATTN_BAD_METADATA, "request %d has %d keys (limit %d)", r, kv_len,
                              ATTN_MAX_SEQ_LEN);
        if (!cross && qlen > kv_len)
            return attn__fail(ATTN_BAD_METADATA,
                              "request %d: query length %d exceeds its sequence length %d", r, qlen,
                              kv_len);
        int64_t nblk = ((int64_t)kv_len + kv->block_size - 1) / kv->block_size;
        if (nblk > cm->block_table_stride)
            return attn__fail(ATTN_BAD_METADATA,
                              "request %d needs %lld blocks but the block table row holds %d", r,
                              (long long)nblk, cm->block_table_stride);
        const int32_t *bt = cm->block_table + (int64_t)r * cm->block_table_stride;
        for (int64_t b = 0; b < nblk; b++)
            if (bt[b] < 0 || bt[b] >= kv->num_blocks)
                return attn__fail(ATTN_BAD_METADATA,
                                  "request %d block %lld has id %d outside the pool of %d", r,
                                  (long long)b, bt[b], kv->num_blocks);
    }
    return ATTN_OK;
}
