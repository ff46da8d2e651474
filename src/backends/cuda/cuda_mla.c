/* MLA on a CUDA device: the OpenCL runtime's MLA calls (ocl_mla.c) over the
 * same plans and argument lists - forward_mqa by attn_kd_mla_decode (and
 * its merge when split), forward_mha by attn_kd_mla_decompress then the
 * standard paged attention over the decompressed keys. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"
#include "backends/mla/mla_internal.h"
#include "util/numeric.h"

struct attn__cuda_mla {
    attn__cuda *c;
    int H, R, P, N, V;
    attn_dtype dtype;
    attn__cuda_kernel *mha;
};

struct attn__cuda_mla_step {
    attn__cuda *c;
    int H, R, P, N, V;
    attn_dtype dtype;
    attn__kd_plan plan;
    attn__cuda_mem *meta;
    int num_decodes;
    attn__kd_mha_meta mha_meta;
    attn__cuda_step *mha_step;
    attn__cuda_mem *keys;
    attn_kv_view keys_view;
    bool built;
};

static attn_layer_params mha_layer(const attn_layer_params *l)
{
    return (attn_layer_params){.num_heads = l->num_heads,
                               .num_kv_heads = l->num_heads,
                               .head_size = l->qk_nope_head_dim + l->qk_rope_head_dim,
                               .head_size_v = l->v_head_dim,
                               .scale = attn__mla_softmax_scale(l),
                               .attn_type = ATTN_TYPE_DECODER,
                               .dtype = l->dtype,
                               .kv_cache_dtype = ATTN_KV_AUTO};
}

static bool has_mha(const attn_layer_params *l)
{
    return l->qk_nope_head_dim > 0 && l->v_head_dim > 0;
}

static attn_status check_layer(const attn_layer_params *l)
{
    if (l->num_heads < 1 || l->num_heads > 65535 || l->kv_lora_rank < 1 ||
        l->qk_rope_head_dim < 0 || l->qk_nope_head_dim < 0 || l->v_head_dim < 0 ||
        (unsigned)l->dtype >= ATTN_DTYPE_COUNT)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                               "CUDA MLA: heads %d, kv_lora_rank %d, rope %d", l->num_heads,
                               l->kv_lora_rank, l->qk_rope_head_dim);
    if (l->kv_lora_rank > KD_MLA_MAX_R)
        return attn__cuda_fail(ATTN_UNSUPPORTED,
                               "CUDA MLA: kv_lora_rank %d; the kernels take up to %d",
                               l->kv_lora_rank, KD_MLA_MAX_R);
    return ATTN_OK;
}

attn_status attn__cuda_mla_create(attn__cuda *c, const attn_layer_params *layer,
                                  attn__cuda_mla **out)
{
    if (!c || !layer || !out) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA: NULL");
    *out = NULL;
    attn_status st = check_layer(layer);
    if (st != ATTN_OK) return st;
    attn__cuda_mla *k = calloc(1, sizeof *k);
    if (!k) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA MLA: out of memory");
    *k = (attn__cuda_mla){.c = c,
                          .H = layer->num_heads,
                          .R = layer->kv_lora_rank,
                          .P = layer->qk_rope_head_dim,
                          .N = layer->qk_nope_head_dim,
                          .V = layer->v_head_dim,
                          .dtype = layer->dtype};
    if (has_mha(layer)) {
        attn_layer_params ml = mha_layer(layer);
        st = attn__cuda_kernel_create(c, &ml, &k->mha);
    }
    if (st != ATTN_OK) {
        free(k);
        return st;
    }
    *out = k;
    return ATTN_OK;
}

void attn__cuda_mla_destroy(attn__cuda_mla *k)
{
    if (!k) return;
    attn__cuda_kernel_destroy(k->mha);
    free(k);
}

attn_status attn__cuda_mla_step_create(attn__cuda *c, const attn_layer_params *layer,
                                       attn__cuda_mla_step **out)
{
    if (!c || !layer || !out) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA step: NULL");
    *out = NULL;
    attn_status st = check_layer(layer);
    if (st != ATTN_OK) return st;
    attn__cuda_mla_step *s = calloc(1, sizeof *s);
    if (!s) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA MLA step: out of memory");
    *s = (attn__cuda_mla_step){.c = c,
                               .H = layer->num_heads,
                               .R = layer->kv_lora_rank,
                               .P = layer->qk_rope_head_dim,
                               .N = layer->qk_nope_head_dim,
                               .V = layer->v_head_dim,
                               .dtype = layer->dtype};
    if (has_mha(layer)) {
        attn_layer_params ml = mha_layer(layer);
        st = attn__cuda_step_create(c, &ml, &s->mha_step);
    }
    if (st != ATTN_OK) {
        free(s);
        return st;
    }
    *out = s;
    return ATTN_OK;
}

void attn__cuda_mla_step_destroy(attn__cuda_mla_step *s)
{
    if (!s) return;
    attn__kd_plan_free(&s->plan);
    attn__kd_mha_meta_free(&s->mha_meta);
    attn__cuda_step_destroy(s->mha_step);
    attn__cuda_free(s->meta);
    attn__cuda_free(s->keys);
    free(s);
}

int attn__cuda_mla_step_splits(const attn__cuda_mla_step *s)
{
    return s && s->built ? s->plan.nsplit : 0;
}

/* The decompressed keys: HND blocks of KD_MLA_BN tokens, values after keys. */
static attn_status keys_buffer(attn__cuda_mla_step *s)
{
    int nblk = s->mha_meta.num_blocks, pitch = s->N + s->P > s->V ? s->N + s->P : s->V;
    attn_elem e = attn__cuda_dtype_elem(s->dtype);
    size_t blk = 0, bytes = 0;
    if (!attn__mul_size((size_t)KD_MLA_BN * (size_t)pitch, (size_t)s->H, &blk) ||
        !attn__mul_size(blk, 2 * (size_t)nblk, &bytes) ||
        !attn__mul_size(bytes, attn__kd_elem_size((int)e), &bytes) || bytes > INT64_MAX / 2)
        return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA MLA: decompressed keys overflow");
    attn_status st = attn__cuda_scratch(s->c, &s->keys, bytes);
    s->keys_view = (attn_kv_view){.data = s->keys,
                                  .elem = e,
                                  .num_blocks = nblk,
                                  .block_size = KD_MLA_BN,
                                  .num_kv_heads = s->H,
                                  .head_size = s->N + s->P,
                                  .head_size_v = s->V,
                                  .v_offset = (int64_t)blk * nblk,
                                  .stride_block = (int64_t)blk,
                                  .stride_token = pitch,
                                  .stride_head = (int64_t)KD_MLA_BN * pitch,
                                  .k_scale = 1.0f,
                                  .v_scale = 1.0f};
    return st;
}

attn_status attn__cuda_mla_step_build(attn__cuda_mla_step *s, const attn_common_metadata *cm,
                                      int num_decodes, int num_blocks, const attn__cuda_plan *plan)
{
    if (!s || !cm) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA step build: NULL");
    s->built = false;
    int n = cm->num_reqs;
    if (num_decodes < -1 || num_decodes > n)
        return attn__cuda_fail(ATTN_BAD_METADATA, "CUDA MLA: num_decodes %d outside [-1, %d]",
                               num_decodes, n);
    int d_end = num_decodes < 0 ? n : num_decodes, p_begin = num_decodes < 0 ? 0 : num_decodes;
    if (!s->mha_step) p_begin = n;
    attn__kd_plan_in in = {.who = "CUDA MLA",
                           .cm = cm,
                           .kv_lens = cm->seq_lens,
                           .num_blocks = num_blocks,
                           .rows_per_token = s->H,
                           .bn = KD_MLA_BN,
                           .tile_begin = 0,
                           .tile_end = d_end,
                           .decompress_begin = p_begin,
                           .decompress_end = n,
                           .split_len = plan ? plan->split_len : 0,
                           .max_splits = plan ? plan->max_splits : 0,
                           .groups_per_tile = 1,
                           .compute_units = (unsigned)s->c->dev->sm_count};
    char why[256];
    attn_status st = attn__kd_plan_build(&s->plan, &in, why, sizeof why);
    if (st != ATTN_OK) return attn__cuda_fail(st, "%s", why);
    st = attn__cuda_upload_words(s->c, &s->meta, &s->plan);
    if (st == ATTN_OK && p_begin < n) {
        st = attn__kd_mha_meta_build(&s->mha_meta, cm, p_begin, n, why, sizeof why);
        if (st != ATTN_OK) return attn__cuda_fail(st, "%s", why);
        st = keys_buffer(s);
        if (st == ATTN_OK)
            st = attn__cuda_step_build(s->mha_step, &s->mha_meta.cm, s->mha_meta.num_blocks, NULL);
    }
    if (st != ATTN_OK) return st;
    s->num_decodes = num_decodes;
    s->built = true;
    return ATTN_OK;
}

/* The layer, the latent view, the step and the buffers against the call. */
static attn_status check_call(attn__cuda_mla *k, const attn__cuda_mla_fwd *f, bool mha,
                              float *kv_scale)
{
    const attn_layer_params *l = f->layer;
    const attn_kv_view *kv = f->kv;
    const attn__cuda_mla_step *s = f->step;
    if (!l || !kv || !kv->data || !s || !f->common || !f->q || !f->out ||
        (mha && (!f->w_uk || !f->w_uv)))
        return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA %s: a NULL argument",
                               mha ? "forward_mha" : "forward_mqa");
    if (l->num_heads != k->H || l->kv_lora_rank != k->R || l->qk_rope_head_dim != k->P ||
        l->dtype != k->dtype || s->H != k->H || s->R != k->R || s->P != k->P ||
        (mha && (!k->mha || l->qk_nope_head_dim != k->N || l->v_head_dim != k->V || s->N != k->N ||
                 s->V != k->V)))
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                               "CUDA MLA: the call's layer is not the kernel's or the step's");
    if (s->c != k->c || !s->built)
        return attn__cuda_fail(ATTN_BAD_STATE, "CUDA MLA: the step is %s",
                               s->built ? "of another instance (stream)" : "not built");
    const attn__kd_plan *p = &s->plan;
    const attn_common_metadata *cm = f->common;
    if (cm->num_reqs != p->nreq || cm->num_actual_tokens != p->ntok ||
        (p->nreq > 0 && (kv->block_size != p->block_size || kv->num_blocks < p->num_blocks)))
        return attn__cuda_fail(ATTN_BAD_METADATA, "CUDA MLA: the step was built for another batch");
    bool fp8 = kv->elem == ATTN_ELEM_FP8_E4M3 || kv->elem == ATTN_ELEM_FP8_E5M2;
    *kv_scale = fp8 ? kv->k_scale : 1.0f;
    if (kv->head_size != k->R + k->P || kv->stride_token < kv->head_size ||
        attn__kd_elem_size((int)kv->elem) == 0 || !(*kv_scale > 0 && isfinite(*kv_scale)))
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                               "CUDA MLA: the latent view (rows of %d, kv_lora_rank %d + rope %d)",
                               kv->head_size, k->R, k->P);
    attn_kv_view one = *kv;
    one.num_kv_heads = 1;
    int64_t rows = (int64_t)p->ntok * k->H, extent = 0;
    int qw = mha ? k->N + k->P : k->R + k->P, ow = mha ? k->V : k->R;
    size_t qsz = attn__kd_elem_size((int)attn__cuda_dtype_elem(k->dtype));
    if (!attn__kd_view_extent(&one, 0, &extent))
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA MLA: the latent view is malformed");
    attn_status st = attn__cuda_check_mem(k->c, kv->data, 0, extent,
                                          attn__kd_elem_size((int)kv->elem), "the latent cache");
    if (st == ATTN_OK) st = attn__cuda_check_mem(k->c, f->q, f->q_offset, rows * qw, qsz, "q");
    if (st == ATTN_OK)
        st = attn__cuda_check_mem(k->c, f->out, f->out_offset, rows * ow, qsz, "out");
    if (st == ATTN_OK && f->lse)
        st = attn__cuda_check_mem(k->c, f->lse, f->lse_offset, rows, sizeof(float), "lse");
    if (st == ATTN_OK && mha)
        st = attn__cuda_check_mem(k->c, f->w_uk, 0, (int64_t)k->H * k->N * k->R, qsz, "w_uk");
    if (st == ATTN_OK && mha)
        st = attn__cuda_check_mem(k->c, f->w_uv, 0, (int64_t)k->H * k->R * k->V, qsz, "w_uv");
    return st;
}

attn_status attn__cuda_mla_mqa(attn__cuda_mla *k, const attn__cuda_mla_fwd *f)
{
    if (!k || !f) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA forward_mqa: NULL");
    float kv_scale = 1.0f;
    attn_status st = check_call(k, f, false, &kv_scale);
    if (st != ATTN_OK) return st;
    const attn__cuda_mla_step *s = f->step;
    const attn__kd_plan *p = &s->plan;
    if (p->ntiles == 0) return ATTN_OK;
    if (p->nsplit > 1)
        st = attn__cuda_scratch(k->c, &k->c->part,
                                (size_t)p->ntiles * (size_t)p->nsplit * KD_ROWS *
                                    (size_t)(k->R + 2) * sizeof(float));
    if (st != ATTN_OK) return st;
    const attn_kv_view *kv = f->kv;
    attn__kd_mla_decode x = {.plan = p,
                             .meta = s->meta,
                             .q = f->q,
                             .kv = kv->data,
                             .out = f->out,
                             .lse = f->lse,
                             .part = k->c->part,
                             .q_off = f->q_offset,
                             .out_off = f->out_offset,
                             .lse_off = f->lse_offset,
                             .k_off = kv->k_offset,
                             .s_blk = kv->stride_block,
                             .s_tok = kv->stride_token,
                             .H = k->H,
                             .R = k->R,
                             .D = k->R + k->P,
                             .q_elem = (int)attn__cuda_dtype_elem(k->dtype),
                             .kv_elem = (int)kv->elem,
                             .bs = kv->block_size,
                             .score_scale = attn__mla_softmax_scale(f->layer) * kv_scale,
                             .out_scale = kv_scale};
    attn__kd_args a;
    attn__kd_args_mla_decode(&a, &x);
    st = attn__cuda_run(k->c, &a);
    if (st != ATTN_OK || p->nsplit == 1) return st;
    attn__kd_args_mla_merge(&a, &x);
    return attn__cuda_run(k->c, &a);
}

attn_status attn__cuda_mla_mha(attn__cuda_mla *k, const attn__cuda_mla_fwd *f)
{
    if (!k || !f) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA forward_mha: NULL");
    float kv_scale = 1.0f;
    attn_status st = check_call(k, f, true, &kv_scale);
    if (st != ATTN_OK) return st;
    const attn__cuda_mla_step *s = f->step;
    if (s->plan.nwork == 0) return ATTN_OK;
    const attn_kv_view *kv = f->kv, *dv = &s->keys_view;
    attn__kd_mla_decompress x = {.plan = &s->plan,
                                 .meta = s->meta,
                                 .kv = kv->data,
                                 .w_uk = f->w_uk,
                                 .w_uv = f->w_uv,
                                 .dst = s->keys,
                                 .k_off = kv->k_offset,
                                 .s_blk = kv->stride_block,
                                 .s_tok = kv->stride_token,
                                 .dst_v_off = dv->v_offset,
                                 .d_blk = dv->stride_block,
                                 .d_tok = dv->stride_token,
                                 .d_head = dv->stride_head,
                                 .kv_elem = (int)kv->elem,
                                 .bs = kv->block_size,
                                 .w_elem = (int)attn__cuda_dtype_elem(k->dtype),
                                 .H = k->H,
                                 .R = k->R,
                                 .P = k->P,
                                 .N = k->N,
                                 .V = k->V,
                                 .dst_elem = (int)dv->elem,
                                 .kv_scale = kv_scale};
    attn__kd_args a;
    attn__kd_args_mla_decompress(&a, &x);
    st = attn__cuda_run(k->c, &a);
    if (st != ATTN_OK) return st;
    int64_t rows0 =
        (int64_t)f->common->query_start_loc[s->num_decodes < 0 ? 0 : s->num_decodes] * k->H;
    attn_layer_params ml = mha_layer(f->layer);
    attn__cuda_fwd g = {.layer = &ml,
                        .common = &s->mha_meta.cm,
                        .step = s->mha_step,
                        .kv = dv,
                        .q = f->q,
                        .q_offset = f->q_offset + rows0 * (k->N + k->P),
                        .out = f->out,
                        .out_offset = f->out_offset + rows0 * k->V,
                        .lse = f->lse,
                        .lse_offset = f->lse_offset + rows0};
    return attn__cuda_forward(k->mha, &g);
}

attn_status attn__cuda_mla_project(attn__cuda *c, const attn_layer_params *layer, int T,
                                   bool absorb, const attn__cuda_mem *in, int64_t in_offset,
                                   const attn__cuda_mem *w, attn__cuda_mem *out, int64_t out_offset)
{
    if (!c || !layer || !in || !w || !out)
        return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA projection: a NULL argument");
    attn__kd_mla_project x;
    int64_t ni = 0, nw = 0, no = 0;
    char why[256];
    attn_status st =
        attn__kd_mla_project_plan(layer, T, absorb, &x, &ni, &nw, &no, why, sizeof why);
    if (st != ATTN_OK) return attn__cuda_fail(st, "CUDA %s", why);
    size_t esz = attn__kd_elem_size(x.elem);
    st = attn__cuda_check_mem(c, in, in_offset, ni, esz, absorb ? "q" : "the latent output");
    if (st == ATTN_OK) st = attn__cuda_check_mem(c, w, 0, nw, esz, absorb ? "w_uk" : "w_uv");
    if (st == ATTN_OK)
        st = attn__cuda_check_mem(c, out, out_offset, no, esz, absorb ? "q_absorbed" : "out");
    if (st == ATTN_OK && in == out && in_offset < out_offset + no && out_offset < in_offset + ni)
        st =
            attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA MLA projection: input and output overlap");
    if (st != ATTN_OK || T == 0) return st;
    x.in = in;
    x.w = w;
    x.out = out;
    x.in_off = in_offset;
    x.out_off = out_offset;
    attn__kd_args a;
    attn__kd_args_mla_project(&a, &x);
    return attn__cuda_run(c, &a);
}
