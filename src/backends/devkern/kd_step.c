/* The attention and MLA steps of the device runtimes over their
 * operations (kd_step.h). */
#include "backends/devkern/kd_step.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/devkern/kd_params.h"
#include "backends/mla/mla_internal.h"
#include "backends/reference/reference.h"
#include "util/numeric.h"

__attribute__((format(printf, 3, 4))) static attn_status fail(const attn__kd_rt *rt, attn_status st,
                                                              const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rt->fail(st, msg);
}

/* The instance's split-KV partials when p splits: per tile, group (groups
 * of a tile) and split, KD_ROWS rows of width + 2 floats. */
static attn_status partials(const attn__kd_rt *rt, const attn__kd_plan *p, size_t groups,
                            size_t width, void **part)
{
    if (p->nsplit <= 1) return ATTN_OK;
    size_t bytes = 0;
    if (!attn__mul_size((size_t)p->ntiles * groups, (size_t)p->nsplit, &bytes) ||
        !attn__mul_size(bytes, (size_t)KD_ROWS * (width + 2) * sizeof(float), &bytes))
        return fail(rt, ATTN_OUT_OF_MEMORY, "%s: split-KV scratch overflows", rt->who);
    return rt->part(rt->ctx, bytes, part);
}

/* The step's plan against the call's batch and the view's blocks. */
static attn_status check_batch(const attn__kd_rt *rt, const attn__kd_plan *p,
                               const attn_common_metadata *cm, const attn_kv_view *kv)
{
    if (cm->num_reqs != p->nreq || cm->num_actual_tokens != p->ntok ||
        (p->nreq > 0 && (kv->block_size != p->block_size || kv->num_blocks < p->num_blocks)))
        return fail(rt, ATTN_BAD_METADATA,
                    "%s: the step was built for %d requests / %d tokens over %d blocks of %d, the "
                    "call has %d / %d over %d of %d",
                    rt->who, p->nreq, p->ntok, p->num_blocks, p->block_size, cm->num_reqs,
                    cm->num_actual_tokens, kv->num_blocks, kv->block_size);
    return ATTN_OK;
}

/* The cache (extent elements of the view's element) and the rows' q (qw
 * elements each), out (ow) and lse. */
static attn_status check_rows(const attn__kd_rt *rt, const attn_kv_view *kv, int64_t extent,
                              const char *cache, const void *q, int64_t q_off, const void *out,
                              int64_t out_off, const void *lse, int64_t lse_off, int64_t rows,
                              int qw, int ow, int q_elem)
{
    size_t qsz = attn__kd_elem_size(q_elem);
    attn_status st =
        rt->check(rt->ctx, rt->who, kv->data, 0, extent, attn__kd_elem_size((int)kv->elem), cache);
    if (st == ATTN_OK) st = rt->check(rt->ctx, rt->who, q, q_off, rows * qw, qsz, "q");
    if (st == ATTN_OK) st = rt->check(rt->ctx, rt->who, out, out_off, rows * ow, qsz, "out");
    if (st == ATTN_OK && lse)
        st = rt->check(rt->ctx, rt->who, lse, lse_off, rows, sizeof(float), "lse");
    return st;
}

/* ---- paged attention ---------------------------------------------------------- */

attn_status attn__kd_att_check_layer(const attn__kd_rt *rt, const attn_layer_params *l,
                                     int max_heads, int max_kv_heads)
{
    int Dv = attn__fwd_head_size_v(l);
    if (l->num_heads < 1 || l->num_kv_heads < 1 || l->num_heads % l->num_kv_heads != 0)
        return fail(rt, ATTN_INVALID_ARGUMENT,
                    "%s: num_heads (%d) must be a positive multiple of num_kv_heads (%d)", rt->who,
                    l->num_heads, l->num_kv_heads);
    if (l->num_heads > max_heads || l->num_kv_heads > max_kv_heads)
        return fail(rt, ATTN_INVALID_ARGUMENT,
                    "%s: %d heads / %d KV heads; the kernels take up to %d / %d", rt->who,
                    l->num_heads, l->num_kv_heads, max_heads, max_kv_heads);
    if (l->head_size < 8 || l->head_size > KD_MAX_HEAD || l->head_size % 8 || Dv < 8 ||
        Dv > KD_MAX_HEAD || Dv % 8)
        return fail(rt, ATTN_UNSUPPORTED,
                    "%s: head sizes %d/%d; the kernels take multiples of 8 up to %d", rt->who,
                    l->head_size, Dv, KD_MAX_HEAD);
    if ((unsigned)l->dtype >= ATTN_DTYPE_COUNT)
        return fail(rt, ATTN_INVALID_ARGUMENT, "%s: bad dtype %d", rt->who, (int)l->dtype);
    return ATTN_OK;
}

size_t attn__kd_att_params(const attn_layer_params *l, float *p)
{
    size_t H = (size_t)l->num_heads, KVH = (size_t)l->num_kv_heads;
    if (p) {
        for (size_t h = 0; h < H; h++) {
            p[h] = l->sinks ? l->sinks[h] : 0.0f;
            p[H + h] = l->alibi_slopes ? l->alibi_slopes[h] : 0.0f;
        }
        for (size_t h = 0; h < 2 * KVH; h++)
            p[2 * H + h] = 1.0f;
    }
    return 2 * H + 2 * KVH;
}

void attn__kd_att_init(attn__kd_att *m, const attn_layer_params *l)
{
    int Dv = attn__fwd_head_size_v(l), w = l->head_size > Dv ? l->head_size : Dv, bn = KD_TILE / w;
    *m = (attn__kd_att){.H = l->num_heads,
                        .KVH = l->num_kv_heads,
                        .D = l->head_size,
                        .Dv = Dv,
                        .bn = bn < KD_MAX_BN ? bn : KD_MAX_BN,
                        .type = l->attn_type};
}

void attn__kd_att_free(attn__kd_att *m, const attn__kd_rt *rt)
{
    rt->release(m->meta);
    m->meta = NULL;
    attn__kd_plan_free(&m->plan);
}

attn_status attn__kd_att_build(attn__kd_att *m, const attn__kd_rt *rt,
                               const attn_common_metadata *cm, int num_blocks, int split_len,
                               int max_splits)
{
    m->built = false;
    bool cross = m->type == ATTN_TYPE_ENCODER_DECODER && cm->encoder_seq_lens;
    attn__kd_plan_in in = {.who = rt->who,
                           .cm = cm,
                           .kv_lens = cross ? cm->encoder_seq_lens : cm->seq_lens,
                           .cross = cross,
                           .num_blocks = num_blocks,
                           .rows_per_token = m->H / m->KVH,
                           .bn = m->bn,
                           .tile_begin = 0,
                           .tile_end = cm->num_reqs,
                           .split_len = split_len,
                           .max_splits = max_splits,
                           .groups_per_tile = m->KVH,
                           .compute_units = rt->compute_units};
    char why[256];
    attn_status st = attn__kd_plan_build(&m->plan, &in, why, sizeof why);
    if (st != ATTN_OK) return rt->fail(st, why);
    st = rt->upload(rt->ctx, &m->meta, &m->plan);
    m->built = st == ATTN_OK;
    return st;
}

attn_status attn__kd_att_check(const attn__kd_att *m, const attn__kd_rt *rt,
                               const attn_common_metadata *cm, const attn__kd_att_io *io)
{
    attn_status st = check_batch(rt, &m->plan, cm, io->kv);
    if (st != ATTN_OK) return st;
    int64_t extent = 0;
    if (!attn__kd_view_extent(io->kv, m->Dv, &extent))
        return fail(rt, ATTN_INVALID_ARGUMENT, "%s: the KV view's extent overflows", rt->who);
    return check_rows(rt, io->kv, extent, "the KV cache", io->q, io->q_off, io->out, io->out_off,
                      io->lse, io->lse_off, (int64_t)m->plan.ntok * m->H, m->D, m->Dv, io->q_elem);
}

attn_status attn__kd_att_run(const attn__kd_att *m, const attn__kd_rt *rt,
                             const attn__kd_att_io *io)
{
    const attn__kd_plan *p = &m->plan;
    void *part = NULL;
    attn_status st = partials(rt, p, (size_t)m->KVH, (size_t)m->Dv, &part);
    if (st != ATTN_OK) return st;
    const attn_kv_view *kv = io->kv;
    attn__kd_attention x = {.plan = p,
                            .meta = m->meta,
                            .hp = io->hp,
                            .q = io->q,
                            .kv = kv->data,
                            .out = io->out,
                            .lse = io->lse,
                            .part = part,
                            .q_off = io->q_off,
                            .out_off = io->out_off,
                            .lse_off = io->lse_off,
                            .H = m->H,
                            .KVH = m->KVH,
                            .D = m->D,
                            .Dv = m->Dv,
                            .bn = m->bn,
                            .q_elem = io->q_elem,
                            .kv_elem = (int)kv->elem,
                            .bs = kv->block_size,
                            .window = io->window,
                            .flags = io->flags,
                            .k_off = kv->k_offset,
                            .v_off = kv->v_offset,
                            .s_blk = kv->stride_block,
                            .s_tok = kv->stride_token,
                            .s_head = kv->stride_head,
                            .scale = io->scale,
                            .softcap = io->softcap};
    attn__kd_args a;
    attn__kd_args_attention(&a, &x);
    st = rt->run(rt->ctx, &a);
    if (st != ATTN_OK || p->nsplit == 1) return st;
    attn__kd_args_merge(&a, &x);
    return rt->run(rt->ctx, &a);
}

/* ---- MLA ------------------------------------------------------------------------ */

attn_status attn__kd_mla_check_layer(const attn__kd_rt *rt, const attn_layer_params *l,
                                     int max_heads)
{
    if (l->num_heads < 1 || l->num_heads > max_heads || l->kv_lora_rank < 1 ||
        l->qk_rope_head_dim < 0 || l->qk_nope_head_dim < 0 || l->v_head_dim < 0 ||
        (unsigned)l->dtype >= ATTN_DTYPE_COUNT)
        return fail(rt, ATTN_INVALID_ARGUMENT,
                    "%s: heads %d, kv_lora_rank %d, rope %d, nope %d, v %d, dtype %d", rt->who,
                    l->num_heads, l->kv_lora_rank, l->qk_rope_head_dim, l->qk_nope_head_dim,
                    l->v_head_dim, (int)l->dtype);
    if (l->kv_lora_rank > KD_MLA_MAX_R)
        return fail(rt, ATTN_UNSUPPORTED, "%s: kv_lora_rank %d; the kernels take up to %d", rt->who,
                    l->kv_lora_rank, KD_MLA_MAX_R);
    return ATTN_OK;
}

bool attn__kd_mla_has_mha(const attn_layer_params *l)
{
    return l->qk_nope_head_dim > 0 && l->v_head_dim > 0;
}

attn_layer_params attn__kd_mla_mha_layer(const attn_layer_params *l)
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

attn__kd_mla_geom attn__kd_mla_geom_of(const attn_layer_params *l, int elem)
{
    return (attn__kd_mla_geom){.H = l->num_heads,
                               .R = l->kv_lora_rank,
                               .P = l->qk_rope_head_dim,
                               .N = l->qk_nope_head_dim,
                               .V = l->v_head_dim,
                               .dtype = l->dtype,
                               .elem = elem};
}

bool attn__kd_mla_geom_same(const attn__kd_mla_geom *a, const attn__kd_mla_geom *b, bool mha)
{
    return a->H == b->H && a->R == b->R && a->P == b->P && (!mha || (a->N == b->N && a->V == b->V));
}

void attn__kd_mla_init(attn__kd_mla *m, const attn_layer_params *l, int elem)
{
    *m = (attn__kd_mla){.g = attn__kd_mla_geom_of(l, elem)};
}

void attn__kd_mla_free(attn__kd_mla *m, const attn__kd_rt *rt)
{
    attn__kd_plan_free(&m->plan);
    attn__kd_mha_meta_free(&m->mha_meta);
    rt->release(m->meta);
    rt->release(m->keys);
    m->meta = m->keys = NULL;
}

/* The decompressed keys of the prefills as a paged cache (HND blocks of
 * KD_MLA_BN tokens, values after the keys), grown to the step's need. */
static attn_status keys_buffer(attn__kd_mla *m, const attn__kd_rt *rt)
{
    int nblk = m->mha_meta.num_blocks, pitch = m->g.N + m->g.P > m->g.V ? m->g.N + m->g.P : m->g.V;
    size_t blk = 0, bytes = 0;
    if (!attn__mul_size((size_t)KD_MLA_BN * (size_t)pitch, (size_t)m->g.H, &blk) ||
        !attn__mul_size(blk, 2 * (size_t)nblk, &bytes) ||
        !attn__mul_size(bytes, attn__kd_elem_size(m->g.elem), &bytes) || bytes > INT64_MAX / 2)
        return fail(rt, ATTN_OUT_OF_MEMORY, "%s: decompressed keys overflow", rt->who);
    attn_status st = rt->scratch(rt->ctx, &m->keys, bytes);
    m->keys_view = (attn_kv_view){.data = m->keys,
                                  .elem = (attn_elem)m->g.elem,
                                  .num_blocks = nblk,
                                  .block_size = KD_MLA_BN,
                                  .num_kv_heads = m->g.H,
                                  .head_size = m->g.N + m->g.P,
                                  .head_size_v = m->g.V,
                                  .k_offset = 0,
                                  .v_offset = (int64_t)blk * nblk,
                                  .stride_block = (int64_t)blk,
                                  .stride_token = pitch,
                                  .stride_head = (int64_t)KD_MLA_BN * pitch,
                                  .k_scale = 1.0f,
                                  .v_scale = 1.0f};
    return st;
}

attn_status attn__kd_mla_build(attn__kd_mla *m, const attn__kd_rt *rt,
                               const attn_common_metadata *cm, int num_decodes, int num_blocks,
                               int split_len, int max_splits, bool prefills)
{
    m->built = false;
    m->decompress = false;
    int n = cm->num_reqs;
    if (num_decodes < -1 || num_decodes > n)
        return fail(rt, ATTN_BAD_METADATA, "%s: num_decodes %d outside [-1, %d]", rt->who,
                    num_decodes, n);
    int d_end = num_decodes < 0 ? n : num_decodes, p_begin = num_decodes < 0 ? 0 : num_decodes;
    if (!prefills) p_begin = n; /* no prefill geometry: forward_mha is refused */
    attn__kd_plan_in in = {.who = rt->who,
                           .cm = cm,
                           .kv_lens = cm->seq_lens,
                           .num_blocks = num_blocks,
                           .rows_per_token = m->g.H,
                           .bn = KD_MLA_BN,
                           .tile_begin = 0,
                           .tile_end = d_end,
                           .decompress_begin = p_begin,
                           .decompress_end = n,
                           .split_len = split_len,
                           .max_splits = max_splits,
                           .groups_per_tile = 1,
                           .compute_units = rt->compute_units};
    char why[256];
    attn_status st = attn__kd_plan_build(&m->plan, &in, why, sizeof why);
    if (st != ATTN_OK) return rt->fail(st, why);
    st = rt->upload(rt->ctx, &m->meta, &m->plan);
    if (st == ATTN_OK && p_begin < n) {
        st = attn__kd_mha_meta_build(&m->mha_meta, cm, p_begin, n, why, sizeof why);
        if (st != ATTN_OK) return rt->fail(st, why);
        st = keys_buffer(m, rt);
        m->decompress = st == ATTN_OK;
    }
    if (st == ATTN_OK) m->num_decodes = num_decodes;
    return st;
}

attn_status attn__kd_mla_check(const attn__kd_mla *m, const attn__kd_rt *rt,
                               const attn_common_metadata *cm, const attn__kd_mla_io *io, bool mha)
{
    attn_status st = check_batch(rt, &m->plan, cm, io->kv);
    if (st != ATTN_OK) return st;
    attn_kv_view one = *io->kv;
    one.num_kv_heads = 1;
    int64_t extent = 0;
    if (!attn__kd_view_extent(&one, 0, &extent))
        return fail(rt, ATTN_INVALID_ARGUMENT, "%s: the latent view's extent overflows", rt->who);
    st = check_rows(rt, io->kv, extent, "the latent cache", io->q, io->q_off, io->out, io->out_off,
                    io->lse, io->lse_off, (int64_t)m->plan.ntok * m->g.H,
                    mha ? m->g.N + m->g.P : m->g.R + m->g.P, mha ? m->g.V : m->g.R, io->q_elem);
    size_t wsz = attn__kd_elem_size(io->q_elem);
    if (st == ATTN_OK && mha)
        st = rt->check(rt->ctx, rt->who, io->w_uk, 0, (int64_t)m->g.H * m->g.N * m->g.R, wsz,
                       "w_uk");
    if (st == ATTN_OK && mha)
        st = rt->check(rt->ctx, rt->who, io->w_uv, 0, (int64_t)m->g.H * m->g.R * m->g.V, wsz,
                       "w_uv");
    return st;
}

attn_status attn__kd_mla_mqa(const attn__kd_mla *m, const attn__kd_rt *rt,
                             const attn__kd_mla_io *io)
{
    const attn__kd_plan *p = &m->plan;
    if (p->ntiles == 0) return ATTN_OK;
    void *part = NULL;
    attn_status st = partials(rt, p, 1, (size_t)m->g.R, &part);
    if (st != ATTN_OK) return st;
    const attn_kv_view *kv = io->kv;
    attn__kd_mla_decode x = {.plan = p,
                             .meta = m->meta,
                             .q = io->q,
                             .kv = kv->data,
                             .out = io->out,
                             .lse = io->lse,
                             .part = part,
                             .q_off = io->q_off,
                             .out_off = io->out_off,
                             .lse_off = io->lse_off,
                             .k_off = kv->k_offset,
                             .s_blk = kv->stride_block,
                             .s_tok = kv->stride_token,
                             .H = m->g.H,
                             .R = m->g.R,
                             .D = m->g.R + m->g.P,
                             .q_elem = io->q_elem,
                             .kv_elem = io->kv_elem,
                             .bs = kv->block_size,
                             .score_scale = io->scale * io->kv_scale,
                             .out_scale = io->kv_scale};
    attn__kd_args a;
    attn__kd_args_mla_decode(&a, &x);
    st = rt->run(rt->ctx, &a);
    if (st != ATTN_OK || p->nsplit == 1) return st;
    attn__kd_args_mla_merge(&a, &x);
    return rt->run(rt->ctx, &a);
}

attn_status attn__kd_mla_run_decompress(const attn__kd_mla *m, const attn__kd_rt *rt,
                                        const attn__kd_mla_io *io)
{
    const attn_kv_view *kv = io->kv, *dv = &m->keys_view;
    attn__kd_mla_decompress x = {.plan = &m->plan,
                                 .meta = m->meta,
                                 .kv = kv->data,
                                 .w_uk = io->w_uk,
                                 .w_uv = io->w_uv,
                                 .dst = m->keys,
                                 .k_off = kv->k_offset,
                                 .s_blk = kv->stride_block,
                                 .s_tok = kv->stride_token,
                                 .dst_v_off = dv->v_offset,
                                 .d_blk = dv->stride_block,
                                 .d_tok = dv->stride_token,
                                 .d_head = dv->stride_head,
                                 .kv_elem = io->kv_elem,
                                 .bs = kv->block_size,
                                 .w_elem = io->q_elem,
                                 .H = m->g.H,
                                 .R = m->g.R,
                                 .P = m->g.P,
                                 .N = m->g.N,
                                 .V = m->g.V,
                                 .dst_elem = (int)dv->elem,
                                 .kv_scale = io->kv_scale};
    attn__kd_args a;
    attn__kd_args_mla_decompress(&a, &x);
    return rt->run(rt->ctx, &a);
}

int64_t attn__kd_mla_prefill_row(const attn__kd_mla *m, const attn_common_metadata *cm)
{
    return (int64_t)cm->query_start_loc[m->num_decodes < 0 ? 0 : m->num_decodes] * m->g.H;
}

attn_status attn__kd_mla_project_run(const attn__kd_rt *rt, const attn_layer_params *layer, int T,
                                     bool absorb, const void *in, int64_t in_offset, const void *w,
                                     void *out, int64_t out_offset)
{
    attn__kd_mla_project x;
    int64_t ni = 0, nw = 0, no = 0;
    char why[256];
    attn_status st =
        attn__kd_mla_project_plan(layer, T, absorb, &x, &ni, &nw, &no, why, sizeof why);
    if (st != ATTN_OK) return fail(rt, st, "%s %s", rt->who, why);
    size_t esz = attn__kd_elem_size(x.elem);
    char who[64];
    snprintf(who, sizeof who, "%s MLA", rt->who);
    st = rt->check(rt->ctx, who, in, in_offset, ni, esz, absorb ? "q" : "the latent output");
    if (st == ATTN_OK) st = rt->check(rt->ctx, who, w, 0, nw, esz, absorb ? "w_uk" : "w_uv");
    if (st == ATTN_OK)
        st = rt->check(rt->ctx, who, out, out_offset, no, esz, absorb ? "q_absorbed" : "out");
    if (st == ATTN_OK && in == out && in_offset < out_offset + no && out_offset < in_offset + ni)
        st =
            fail(rt, ATTN_INVALID_ARGUMENT, "%s MLA projection: input and output overlap", rt->who);
    if (st != ATTN_OK || T == 0) return st;
    x.in = in;
    x.w = w;
    x.out = out;
    x.in_off = in_offset;
    x.out_off = out_offset;
    attn__kd_args a;
    attn__kd_args_mla_project(&a, &x);
    return rt->run(rt->ctx, &a);
}
