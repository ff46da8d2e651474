/* One known-answer call of a backend's kernel on an instance of its own
 * device (selftest.c, selftest_mla.c): the inputs are host memory; for a
 * backend on the host device the kernel reads them where they are (as
 * before devices existed: per-layer state from create, no builder
 * metadata), for any other device they are copied into its memory and the
 * outputs are copied back. A standard kernel there gets the metadata of
 * the backend's own builder created on that instance (plan on the host,
 * upload once); an MLA kernel gets none (args->metadata NULL, as on the
 * host: each entry point handles every request of the common metadata,
 * whose arrays are host memory), because an MLA builder's decode/prefill
 * split would leave one entry point untested. The instance is closed
 * afterwards, which frees everything allocated on it. */
#include <stdlib.h>
#include <string.h>

#include "device/device_impl.h"
#include "selftest/selftest.h"
#include "util/error.h"
#include "util/numeric.h"

/* What one call needs on the device. */
typedef struct st_dev {
    attn_device *d;
    void *builder_state;
    const attn_builder_ops *builder;
    void *impl;
    const attn_kernel_ops *ops;
} st_dev;

static void st_dev_close(st_dev *s)
{
    if (s->impl && s->ops->destroy) s->ops->destroy(s->impl);
    if (s->builder_state && s->builder->destroy) s->builder->destroy(s->builder_state);
    if (s->d && s->d != attn_device_host()) attn_device_close(s->d);
}

/* Host bytes -> a fresh allocation of s->d (NULL in, NULL out). */
static attn_status st_up(st_dev *s, const void *host, size_t bytes, const void **out)
{
    *out = NULL;
    if (!host || !bytes) return ATTN_OK;
    void *m = NULL;
    attn_status st = attn_device_alloc(s->d, bytes, ATTN_MEM_STEP, &m);
    if (st == ATTN_OK) st = attn_device_copy_in(s->d, m, 0, host, bytes);
    *out = m;
    return st;
}

static attn_status st_open(const attn_backend *b, const attn_layer_params *l,
                           const attn_common_metadata *cm, const attn_kv_view *kv, bool builder,
                           st_dev *s)
{
    memset(s, 0, sizeof *s);
    s->ops = b->kernel;
    bool host = attn__device_ops_of(b) == &attn__host_device_ops;
    attn_status st = host ? ATTN_OK : attn_device_open(b, NULL, &s->d);
    if (host) s->d = attn_device_host();
    if (st != ATTN_OK) return st;
    if (!host && builder && b->desc->builder) {
        s->builder = b->desc->builder;
        int maxb = cm->block_table_stride;
        attn_builder_init bi = {.desc = b->desc,
                                .layer = l,
                                .block_size = kv->block_size,
                                .num_blocks = kv->num_blocks,
                                .max_num_reqs = cm->num_reqs,
                                .max_num_tokens = cm->num_actual_tokens,
                                .max_blocks_per_req = maxb,
                                .device = s->d,
                                .device_state = s->d->state};
        if ((st = s->builder->create(&bi, &s->builder_state)) != ATTN_OK) {
            s->builder_state = NULL;
            return st;
        }
    }
    if (s->ops->create) {
        attn_kernel_init init = {
            .struct_size = sizeof init, .layer = l, .device = s->d, .device_state = s->d->state};
        if ((st = s->ops->create(&init, &s->impl)) != ATTN_OK) {
            s->impl = NULL;
            return st;
        }
    }
    return ATTN_OK;
}

/* The view of host memory hv as a copy in s->d's memory. */
static attn_status st_view_up(st_dev *s, const attn_kv_view *hv, attn_kv_view *dv)
{
    *dv = *hv;
    dv->device = s->d;
    int64_t n;
    if (!attn__view_extent(hv, &n))
        return attn__fail(ATTN_INTERNAL, "self-test: malformed KV view");
    const void *m;
    attn_status st = st_up(s, hv->data, (size_t)n * attn_elem_size(hv->elem), &m);
    dv->data = (void *)m;
    return st;
}

attn_status attn__selftest_call(const attn_backend *b, const attn_forward_args *a)
{
    st_dev s;
    attn_status st = st_open(b, a->layer, a->common, a->kv, true, &s);
    if (st == ATTN_OK && s.d == attn_device_host()) {
        st = s.ops->forward(s.impl, a);
        st_dev_close(&s);
        return st;
    }
    const attn_layer_params *l = a->layer;
    size_t esz = attn_elem_size(attn_dtype_elem(l->dtype));
    size_t T = (size_t)a->common->num_actual_tokens, H = (size_t)l->num_heads;
    size_t hv = (size_t)(l->head_size_v > 0 ? l->head_size_v : l->head_size);
    attn_forward_args c = *a;
    attn_kv_view dv;
    const void *out = NULL;
    if (st == ATTN_OK) st = st_view_up(&s, a->kv, &dv);
    if (st == ATTN_OK) st = st_up(&s, a->q, T * H * (size_t)l->head_size * esz, &c.q);
    if (st == ATTN_OK) st = st_up(&s, a->out, T * H * hv * esz, &out);
    if (st == ATTN_OK && s.builder)
        st = s.builder->build(s.builder_state, 0, a->common, false, &c.metadata);
    if (st == ATTN_OK) {
        c.kv = &dv;
        c.out = (void *)out;
        c.lse = NULL; /* the standard test compares outputs only */
        st = s.ops->forward(s.impl, &c);
    }
    if (st == ATTN_OK) st = attn_device_copy_out(s.d, a->out, out, 0, T * H * hv * esz);
    st_dev_close(&s);
    return st;
}

attn_status attn__selftest_call_mla(const attn_backend *b, bool mha, const attn_mla_args *a)
{
    st_dev s;
    /* no builder metadata: an MLA builder splits decodes from prefills,
     * and each entry point must be checked on every request */
    attn_status st = st_open(b, a->layer, a->common, a->kv, false, &s);
    const attn_kernel_ops *k = b->kernel;
    if (st == ATTN_OK && s.d == attn_device_host()) {
        st = mha ? k->forward_mha(s.impl, a) : k->forward_mqa(s.impl, a);
        st_dev_close(&s);
        return st;
    }
    const attn_layer_params *l = a->layer;
    size_t esz = attn_elem_size(attn_dtype_elem(l->dtype));
    size_t T = (size_t)a->common->num_actual_tokens, H = (size_t)l->num_heads;
    size_t R = (size_t)l->kv_lora_rank, P = (size_t)l->qk_rope_head_dim;
    size_t N = (size_t)l->qk_nope_head_dim, V = (size_t)l->v_head_dim;
    size_t qd = mha ? N + P : R + P, od = mha ? V : R;
    attn_mla_args c = *a;
    attn_kv_view dv;
    const void *out = NULL, *lse = NULL, *topk = NULL;
    if (st == ATTN_OK) st = st_view_up(&s, a->kv, &dv);
    if (st == ATTN_OK) st = st_up(&s, a->q, T * H * qd * esz, &c.q);
    if (st == ATTN_OK) st = st_up(&s, a->out, T * H * od * esz, &out);
    if (st == ATTN_OK) st = st_up(&s, a->lse, T * H * sizeof(float), &lse);
    if (st == ATTN_OK) st = st_up(&s, a->w_uk, H * N * R * esz, &c.w_uk);
    if (st == ATTN_OK) st = st_up(&s, a->w_uv, H * R * V * esz, &c.w_uv);
    if (st == ATTN_OK && a->topk_indices)
        st = st_up(&s, a->topk_indices, T * (size_t)a->topk * sizeof(int32_t), &topk);
    if (st == ATTN_OK) {
        c.kv = &dv;
        c.out = (void *)out;
        c.lse = (float *)lse;
        c.topk_indices = topk;
        st = mha ? k->forward_mha(s.impl, &c) : k->forward_mqa(s.impl, &c);
    }
    if (st == ATTN_OK) st = attn_device_copy_out(s.d, a->out, out, 0, T * H * od * esz);
    if (st == ATTN_OK && lse) st = attn_device_copy_out(s.d, a->lse, lse, 0, T * H * sizeof(float));
    st_dev_close(&s);
    return st;
}
