/* MLA on an OpenCL device (TRITON_MLA's contract, REFERENCE_MLA's
 * semantics): the step, forward_mqa over the latent cache and forward_mha
 * by decompression then the standard paged attention kernel.
 *
 * The step plans once for every layer of a batch: the decodes' rows in
 * tiles with split-KV shares (forward_mqa), the prefills' keys in blocks of
 * KD_MLA_BN to decompress, and the metadata of the standard attention over
 * the decompressed keys (a step of ocl_attn.c). Each call checks the MLA
 * call as REFERENCE_MLA does (attn__mla_prepare), the step against the
 * call, and every buffer against the elements it will address, before
 * anything is enqueued. */
#include <stdlib.h>
#include <string.h>

#include "backends/mla/mla_internal.h"
#include "backends/opencl/ocl_impl.h"
#include "util/error.h"
#include "util/numeric.h"

struct attn__ocl_mla {
    attn__ocl *o;
    int H, R, P, N, V;
    attn_dtype dtype;
    attn__ocl_kernel *mha; /* the standard kernel over decompressed keys; NULL without N/V */
};

struct attn__ocl_mla_step {
    attn__ocl *o;
    int H, R, P, N, V;
    attn_dtype dtype;
    attn__kd_plan plan; /* decodes' tiles, prefills' decompression */
    attn__ocl_mem *meta;
    int num_decodes; /* -1: both entry points serve every request */
    attn__kd_mha_meta mha_meta;
    attn__ocl_step *mha_step; /* the standard step over the decompressed keys */
    attn__ocl_mem *keys;      /* decompressed keys and values */
    attn_kv_view keys_view;
    bool built;
};

/* The standard attention layer of forward_mha: every head its own KV head
 * of nope + rope keys and v_head_dim values, causal, unscaled cache. */
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
    if (l->num_heads < 1 || l->num_heads > ATTN_MAX_HEADS || l->kv_lora_rank < 1 ||
        l->qk_rope_head_dim < 0 || l->qk_nope_head_dim < 0 || l->v_head_dim < 0 ||
        (unsigned)l->dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "OpenCL MLA: heads %d, kv_lora_rank %d, rope %d, nope %d, v %d, "
                          "dtype %d",
                          l->num_heads, l->kv_lora_rank, l->qk_rope_head_dim, l->qk_nope_head_dim,
                          l->v_head_dim, (int)l->dtype);
    if (l->kv_lora_rank > KD_MLA_MAX_R)
        return attn__fail(ATTN_UNSUPPORTED,
                          "OpenCL MLA: kv_lora_rank %d; the kernels take up to %d", l->kv_lora_rank,
                          KD_MLA_MAX_R);
    return ATTN_OK;
}

attn_status attn__ocl_mla_create(attn__ocl *o, const attn_layer_params *layer, attn__ocl_mla **out)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(layer);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_status st = check_layer(layer);
    if (st != ATTN_OK) return st;
    attn__ocl_mla *k = calloc(1, sizeof *k);
    if (!k) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL MLA: out of memory");
    *k = (attn__ocl_mla){.o = o,
                         .H = layer->num_heads,
                         .R = layer->kv_lora_rank,
                         .P = layer->qk_rope_head_dim,
                         .N = layer->qk_nope_head_dim,
                         .V = layer->v_head_dim,
                         .dtype = layer->dtype};
    if (has_mha(layer)) {
        attn_layer_params ml = mha_layer(layer);
        st = attn__ocl_kernel_create(o, &ml, &k->mha);
        if (st != ATTN_OK) {
            free(k);
            return st;
        }
    }
    *out = k;
    return ATTN_OK;
}

void attn__ocl_mla_destroy(attn__ocl_mla *k)
{
    if (!k) return;
    attn__ocl_kernel_destroy(k->mha);
    free(k);
}

/* ---- the step ------------------------------------------------------------------ */

attn_status attn__ocl_mla_step_create(attn__ocl *o, const attn_layer_params *layer,
                                      attn__ocl_mla_step **out)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(layer);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_status st = check_layer(layer);
    if (st != ATTN_OK) return st;
    attn__ocl_mla_step *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL MLA step: out of memory");
    s->o = o;
    s->H = layer->num_heads;
    s->R = layer->kv_lora_rank;
    s->P = layer->qk_rope_head_dim;
    s->N = layer->qk_nope_head_dim;
    s->V = layer->v_head_dim;
    s->dtype = layer->dtype;
    if (has_mha(layer)) {
        attn_layer_params ml = mha_layer(layer);
        st = attn__ocl_step_create(o, &ml, &s->mha_step);
        if (st != ATTN_OK) {
            free(s);
            return st;
        }
    }
    *out = s;
    return ATTN_OK;
}

void attn__ocl_mla_step_destroy(attn__ocl_mla_step *s)
{
    if (!s) return;
    attn__kd_plan_free(&s->plan);
    attn__kd_mha_meta_free(&s->mha_meta);
    attn__ocl_step_destroy(s->mha_step);
    attn__ocl_free(s->meta);
    attn__ocl_free(s->keys);
    free(s);
}

int attn__ocl_mla_step_splits(const attn__ocl_mla_step *s)
{
    return s && s->built ? s->plan.nsplit : 0;
}

/* The decompressed keys of the prefills as a paged cache (HND blocks of
 * KD_MLA_BN tokens, values after the keys), grown to the step's need. */
static attn_status keys_buffer(attn__ocl_mla_step *s)
{
    int nblk = s->mha_meta.num_blocks, pitch = s->N + s->P > s->V ? s->N + s->P : s->V;
    attn_elem e = attn_dtype_elem(s->dtype);
    size_t blk = 0, bytes = 0;
    if (!attn__mul_size((size_t)KD_MLA_BN * (size_t)pitch, (size_t)s->H, &blk) ||
        !attn__mul_size(blk, 2 * (size_t)nblk, &bytes) ||
        !attn__mul_size(bytes, attn_elem_size(e), &bytes) || bytes > INT64_MAX / 2)
        return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL MLA: decompressed keys overflow");
    s->keys_view = (attn_kv_view){.elem = e,
                                  .num_blocks = nblk,
                                  .block_size = KD_MLA_BN,
                                  .num_kv_heads = s->H,
                                  .head_size = s->N + s->P,
                                  .head_size_v = s->V,
                                  .k_offset = 0,
                                  .v_offset = (int64_t)blk * nblk,
                                  .stride_block = (int64_t)blk,
                                  .stride_token = pitch,
                                  .stride_head = (int64_t)KD_MLA_BN * pitch,
                                  .k_scale = 1.0f,
                                  .v_scale = 1.0f};
    attn_status st = attn__ocl_scratch(s->o, &s->keys, bytes);
    s->keys_view.data = s->keys;
    return st;
}

attn_status attn__ocl_mla_step_build(attn__ocl_mla_step *s, const attn_common_metadata *cm,
                                     int num_decodes, int num_blocks, const attn__ocl_plan *plan)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(cm);
    s->built = false;
    int n = cm->num_reqs;
    if (num_decodes < -1 || num_decodes > n)
        return attn__fail(ATTN_BAD_METADATA, "OpenCL MLA: num_decodes %d outside [-1, %d]",
                          num_decodes, n);
    int d_end = num_decodes < 0 ? n : num_decodes, p_begin = num_decodes < 0 ? 0 : num_decodes;
    if (!s->mha_step) p_begin = n; /* no prefill geometry: forward_mha is refused */
    attn__kd_plan_in in = {.who = "OpenCL MLA",
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
                           .compute_units = s->o->dev->compute_units};
    char why[256];
    attn_status st = attn__kd_plan_build(&s->plan, &in, why, sizeof why);
    if (st != ATTN_OK) return attn__fail(st, "%s", why);
    st = attn__ocl_upload_words(s->o, &s->meta, &s->plan);
    if (st == ATTN_OK && p_begin < n) {
        st = attn__kd_mha_meta_build(&s->mha_meta, cm, p_begin, n, why, sizeof why);
        if (st != ATTN_OK) return attn__fail(st, "%s", why);
        st = keys_buffer(s);
        if (st == ATTN_OK)
            st = attn__ocl_step_build(s->mha_step, &s->mha_meta.cm, s->mha_meta.num_blocks, NULL);
    }
    if (st != ATTN_OK) return st;
    s->num_decodes = num_decodes;
    s->built = true;
    return ATTN_OK;
}

/* ---- checks -------------------------------------------------------------------- */

static attn_status check_mem(const attn__ocl *o, const attn__ocl_mem *m, int64_t off, int64_t elems,
                             size_t esz, const char *what)
{
    int64_t end = 0, bytes = 0;
    if (m->dev != o->dev)
        return attn__fail(ATTN_INVALID_ARGUMENT, "OpenCL MLA: %s is on another device", what);
    if (off < 0 || !attn__add_i64(off, elems, &end) || !attn__mul_i64(end, (int64_t)esz, &bytes) ||
        (uint64_t)bytes > m->size)
        return attn__fail(ATTN_OUT_OF_RANGE,
                          "OpenCL MLA: %s needs elements [%lld, %lld + %lld) of %zu bytes each; "
                          "the buffer has %zu bytes",
                          what, (long long)off, (long long)off, (long long)elems, esz, m->size);
    return ATTN_OK;
}

/* The call as REFERENCE_MLA checks it, the step against it, the buffers
 * against what the kernels address (q, out and lse over the whole batch). */
static attn_status check_call(attn__ocl_mla *k, const attn__ocl_mla_fwd *f, bool mha,
                              attn__mla_call *c)
{
    attn_mla_args a = {.layer = f->layer,
                       .common = f->common,
                       .kv = f->kv,
                       .q = f->q,
                       .out = f->out,
                       .w_uk = f->w_uk,
                       .w_uv = f->w_uv};
    attn_status st = attn__mla_prepare("OpenCL MLA", &a, mha ? ATTN__MLA_MHA : ATTN__MLA_MQA, c);
    if (st != ATTN_OK) return st;
    const attn__ocl_mla_step *s = f->step;
    const attn__kd_plan *p = &s->plan;
    if (s->o != k->o || !s->built)
        return attn__fail(ATTN_BAD_STATE, "OpenCL MLA: the step is %s",
                          s->built ? "of another instance (queue)" : "not built");
    if (c->H != k->H || c->R != k->R || c->P != k->P || k->dtype != f->layer->dtype ||
        (mha && (c->nope != k->N || c->V != k->V || !k->mha)) || s->H != k->H || s->R != k->R ||
        s->P != k->P || (mha && (s->N != k->N || s->V != k->V)))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "OpenCL MLA: the call's layer is not the kernel's or the step's (heads, "
                          "kv_lora_rank, rope, nope, v_head_dim and dtype are fixed at create)");
    const attn_common_metadata *cm = c->cm;
    if (cm->num_reqs != p->nreq || cm->num_actual_tokens != p->ntok ||
        (p->nreq > 0 && (f->kv->block_size != p->block_size || f->kv->num_blocks < p->num_blocks)))
        return attn__fail(ATTN_BAD_METADATA,
                          "OpenCL MLA: the step was built for %d requests / %d tokens over %d "
                          "blocks of %d, the call has %d / %d over %d of %d",
                          p->nreq, p->ntok, p->num_blocks, p->block_size, cm->num_reqs,
                          cm->num_actual_tokens, f->kv->num_blocks, f->kv->block_size);
    int64_t rows = (int64_t)p->ntok * k->H, extent = 0;
    int qw = mha ? k->N + k->P : k->R + k->P, ow = mha ? k->V : k->R;
    size_t qsz = attn_elem_size(c->q_elem);
    attn_kv_view one = *f->kv;
    one.num_kv_heads = 1;
    if (!attn__ocl_view_extent(&one, 0, &extent))
        return attn__fail(ATTN_INVALID_ARGUMENT, "OpenCL MLA: the latent view's extent overflows");
    st = check_mem(k->o, f->kv->data, 0, extent, c->kv_esz, "the latent cache");
    if (st == ATTN_OK) st = check_mem(k->o, f->q, f->q_offset, rows * qw, qsz, "q");
    if (st == ATTN_OK) st = check_mem(k->o, f->out, f->out_offset, rows * ow, qsz, "out");
    if (st == ATTN_OK && f->lse)
        st = check_mem(k->o, f->lse, f->lse_offset, rows, sizeof(float), "lse");
    if (st == ATTN_OK && mha)
        st = check_mem(k->o, f->w_uk, 0, (int64_t)k->H * k->N * k->R, qsz, "w_uk");
    if (st == ATTN_OK && mha)
        st = check_mem(k->o, f->w_uv, 0, (int64_t)k->H * k->R * k->V, qsz, "w_uv");
    return st;
}

/* ---- forward_mqa ----------------------------------------------------------------- */

attn_status attn__ocl_mla_mqa(attn__ocl_mla *k, const attn__ocl_mla_fwd *f)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(f);
    ATTN__CHECK_NULL(f->step);
    attn__mla_call c;
    attn_status st = check_call(k, f, false, &c);
    if (st != ATTN_OK) return st;
    const attn__ocl_mla_step *s = f->step;
    const attn__kd_plan *p = &s->plan;
    if (p->ntiles == 0) return ATTN_OK;
    if (p->nsplit > 1) {
        size_t bytes = 0;
        if (!attn__mul_size((size_t)p->ntiles * (size_t)p->nsplit,
                            (size_t)KD_ROWS * (size_t)(k->R + 2) * sizeof(float), &bytes))
            return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL MLA: split-KV scratch overflows");
        st = attn__ocl_scratch(k->o, &k->o->part, bytes);
        if (st != ATTN_OK) return st;
    }
    const attn_kv_view *kv = f->kv;
    attn__kd_mla_decode x = {.plan = p,
                             .meta = s->meta,
                             .q = f->q,
                             .kv = kv->data,
                             .out = f->out,
                             .lse = f->lse,
                             .part = k->o->part,
                             .q_off = f->q_offset,
                             .out_off = f->out_offset,
                             .lse_off = f->lse_offset,
                             .k_off = kv->k_offset,
                             .s_blk = kv->stride_block,
                             .s_tok = kv->stride_token,
                             .H = k->H,
                             .R = k->R,
                             .D = k->R + k->P,
                             .q_elem = (int)c.q_elem,
                             .kv_elem = (int)c.kv_elem,
                             .bs = kv->block_size,
                             .score_scale = c.scale * c.kv_scale,
                             .out_scale = c.kv_scale};
    attn__kd_args a;
    attn__kd_args_mla_decode(&a, &x);
    st = attn__ocl_run(k->o, &a);
    if (st != ATTN_OK || p->nsplit == 1) return st;
    attn__kd_args_mla_merge(&a, &x);
    return attn__ocl_run(k->o, &a);
}

/* ---- forward_mha ----------------------------------------------------------------- */

attn_status attn__ocl_mla_mha(attn__ocl_mla *k, const attn__ocl_mla_fwd *f)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(f);
    ATTN__CHECK_NULL(f->step);
    attn__mla_call c;
    attn_status st = check_call(k, f, true, &c);
    if (st != ATTN_OK) return st;
    const attn__ocl_mla_step *s = f->step;
    if (s->plan.nwork == 0) return ATTN_OK;
    const attn_kv_view *kv = f->kv;
    const attn_kv_view *dv = &s->keys_view;
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
                                 .kv_elem = (int)c.kv_elem,
                                 .bs = kv->block_size,
                                 .w_elem = (int)c.q_elem,
                                 .H = k->H,
                                 .R = k->R,
                                 .P = k->P,
                                 .N = k->N,
                                 .V = k->V,
                                 .dst_elem = (int)dv->elem,
                                 .kv_scale = c.kv_scale};
    attn__kd_args a;
    attn__kd_args_mla_decompress(&a, &x);
    st = attn__ocl_run(k->o, &a);
    if (st != ATTN_OK) return st;
    /* the prefills' tokens start at their first query in q, out and lse */
    int64_t t0 = c.cm->query_start_loc[s->num_decodes < 0 ? 0 : s->num_decodes];
    int64_t rows0 = t0 * k->H;
    attn_layer_params ml = mha_layer(f->layer);
    attn__ocl_fwd g = {.layer = &ml,
                       .common = &s->mha_meta.cm,
                       .step = s->mha_step,
                       .kv = dv,
                       .q = f->q,
                       .q_offset = f->q_offset + rows0 * (k->N + k->P),
                       .out = f->out,
                       .out_offset = f->out_offset + rows0 * k->V,
                       .lse = f->lse,
                       .lse_offset = f->lse_offset + rows0};
    return attn__ocl_forward(k->mha, &g);
}

attn_status attn__ocl_mla_project(attn__ocl *o, const attn_layer_params *layer, int T, bool absorb,
                                  const attn__ocl_mem *in, int64_t in_offset,
                                  const attn__ocl_mem *w, attn__ocl_mem *out, int64_t out_offset)
{
    if (!o || !layer || !in || !w || !out)
        return attn__fail(ATTN_NULL_ARGUMENT, "OpenCL MLA projection: a NULL argument");
    attn__kd_mla_project x;
    int64_t ni = 0, nw = 0, no = 0;
    char why[256];
    attn_status st =
        attn__kd_mla_project_plan(layer, T, absorb, &x, &ni, &nw, &no, why, sizeof why);
    if (st != ATTN_OK) return attn__fail(st, "OpenCL %s", why);
    size_t esz = attn__kd_elem_size(x.elem);
    st = check_mem(o, in, in_offset, ni, esz, absorb ? "q" : "the latent output");
    if (st == ATTN_OK) st = check_mem(o, w, 0, nw, esz, absorb ? "w_uk" : "w_uv");
    if (st == ATTN_OK) st = check_mem(o, out, out_offset, no, esz, absorb ? "q_absorbed" : "out");
    if (st == ATTN_OK && in == out && in_offset < out_offset + no && out_offset < in_offset + ni)
        st = attn__fail(ATTN_INVALID_ARGUMENT, "OpenCL MLA projection: input and output overlap");
    if (st != ATTN_OK || T == 0) return st;
    x.in = in;
    x.w = w;
    x.out = out;
    x.in_off = in_offset;
    x.out_off = out_offset;
    attn__kd_args a;
    attn__kd_args_mla_project(&a, &x);
    return attn__ocl_run(o, &a);
}
