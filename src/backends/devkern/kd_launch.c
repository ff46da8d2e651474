/* Argument lists of the dialect's kernels (kd_launch.h), in the order of
 * their signatures in the .cl files of src/backends/devkern/. */
#include "backends/devkern/kd_launch.h"
#include "backends/devkern/kd_params.h"

const char *const attn__kd_kernel_names[ATTN__KD_KERNEL_COUNT] = {
    "attn_kd_paged_attention", "attn_kd_attention_merge", "attn_kd_cache_write",
    "attn_kd_to_f32",          "attn_kd_mla_decode",      "attn_kd_mla_merge",
    "attn_kd_mla_decompress",  "attn_kd_mla_project"};

static void begin(attn__kd_args *l, attn__kd_kernel k, size_t g0, size_t g1, size_t g2)
{
    l->kernel = k;
    l->n = 0;
    l->groups[0] = g0;
    l->groups[1] = g1;
    l->groups[2] = g2;
}

/* The lists are fixed and shorter than ATTN__KD_MAX_ARGS (kd_launch.c's
 * own functions are the only callers). */
static void mem(attn__kd_args *l, const void *m)
{
    l->a[l->n].kind = ATTN__KD_ARG_MEM;
    l->a[l->n++].v.mem = m;
}

static void i32(attn__kd_args *l, int32_t v)
{
    l->a[l->n].kind = ATTN__KD_ARG_I32;
    l->a[l->n++].v.i32 = v;
}

static void i64(attn__kd_args *l, int64_t v)
{
    l->a[l->n].kind = ATTN__KD_ARG_I64;
    l->a[l->n++].v.i64 = v;
}

static void f32(attn__kd_args *l, float v)
{
    l->a[l->n].kind = ATTN__KD_ARG_F32;
    l->a[l->n++].v.f32 = v;
}

/* The head of the attention and MLA decode kernels' lists: q, the cache,
 * out and lse, the split partials and the plan's words. */
static void tiles_head(attn__kd_args *l, const attn__kd_plan *p, const void *q, int64_t q_off,
                       const void *kv, void *out, int64_t out_off, void *lse, int64_t lse_off,
                       void *part, const void *meta)
{
    mem(l, q);
    i64(l, q_off);
    mem(l, kv);
    mem(l, out);
    i64(l, out_off);
    mem(l, lse);
    i64(l, lse_off);
    mem(l, p->nsplit > 1 ? part : NULL);
    mem(l, meta);
    i32(l, p->m_qsl);
    i32(l, p->m_kvlen);
    i32(l, p->m_tiles);
    i32(l, p->m_bt);
    i32(l, p->bt_stride);
}

/* The head of both merge kernels' lists. */
static void merge_head(attn__kd_args *l, const attn__kd_plan *p, void *part, void *out,
                       int64_t out_off, void *lse, int64_t lse_off, const void *meta)
{
    mem(l, part);
    i32(l, p->nsplit);
    mem(l, out);
    i64(l, out_off);
    mem(l, lse);
    i64(l, lse_off);
    mem(l, meta);
    i32(l, p->m_qsl);
    i32(l, p->m_tiles);
}

void attn__kd_args_attention(attn__kd_args *l, const attn__kd_attention *x)
{
    const attn__kd_plan *p = x->plan;
    begin(l, ATTN__KD_ATTENTION, (size_t)p->ntiles, (size_t)x->KVH, (size_t)p->nsplit);
    tiles_head(l, p, x->q, x->q_off, x->kv, x->out, x->out_off, x->lse, x->lse_off, x->part,
               x->meta);
    mem(l, x->hp);
    i32(l, x->H);
    i32(l, x->KVH);
    i32(l, x->D);
    i32(l, x->Dv);
    i32(l, x->q_elem);
    i32(l, x->kv_elem);
    i64(l, x->k_off);
    i64(l, x->v_off);
    i64(l, x->s_blk);
    i64(l, x->s_tok);
    i64(l, x->s_head);
    i32(l, x->bs);
    f32(l, x->scale);
    f32(l, x->softcap);
    i32(l, x->window);
    i32(l, x->flags);
    i32(l, p->split_len);
    i32(l, x->bn);
}

void attn__kd_args_merge(attn__kd_args *l, const attn__kd_attention *x)
{
    const attn__kd_plan *p = x->plan;
    begin(l, ATTN__KD_MERGE, (size_t)p->ntiles, (size_t)x->KVH, 1);
    merge_head(l, p, x->part, x->out, x->out_off, x->lse, x->lse_off, x->meta);
    mem(l, x->hp);
    i32(l, x->H);
    i32(l, x->KVH);
    i32(l, x->Dv);
    i32(l, x->q_elem);
    i32(l, x->flags);
}

void attn__kd_args_cache_write(attn__kd_args *l, const attn__kd_cache_write *x)
{
    begin(l, ATTN__KD_CACHE_WRITE, (size_t)x->ntok * (size_t)x->nheads, 1, 1);
    mem(l, x->src);
    i64(l, x->src_off);
    i32(l, x->src_elem);
    i64(l, x->tok_stride);
    mem(l, x->cache);
    i32(l, x->cache_elem);
    i64(l, x->dst_off);
    i64(l, x->s_blk);
    i64(l, x->s_tok);
    i64(l, x->s_head);
    i32(l, x->bs);
    mem(l, x->slots);
    i32(l, x->nheads);
    i32(l, x->dim);
    mem(l, x->inv_scale);
    i32(l, x->inv_off);
    i32(l, x->raw_copy);
}

void attn__kd_args_to_f32(attn__kd_args *l, const void *src, int64_t off, int elem, int64_t n,
                          void *dst)
{
    begin(l, ATTN__KD_TO_F32, (size_t)((n + KD_WG - 1) / KD_WG), 1, 1);
    mem(l, src);
    i64(l, off);
    i32(l, elem);
    i64(l, n);
    mem(l, dst);
}

void attn__kd_args_mla_decode(attn__kd_args *l, const attn__kd_mla_decode *x)
{
    const attn__kd_plan *p = x->plan;
    begin(l, ATTN__KD_MLA_DECODE, (size_t)p->ntiles, 1, (size_t)p->nsplit);
    tiles_head(l, p, x->q, x->q_off, x->kv, x->out, x->out_off, x->lse, x->lse_off, x->part,
               x->meta);
    i32(l, x->H);
    i32(l, x->R);
    i32(l, x->D);
    i32(l, x->q_elem);
    i32(l, x->kv_elem);
    i64(l, x->k_off);
    i64(l, x->s_blk);
    i64(l, x->s_tok);
    i32(l, x->bs);
    f32(l, x->score_scale);
    f32(l, x->out_scale);
    i32(l, x->lse != NULL);
    i32(l, p->split_len);
}

void attn__kd_args_mla_merge(attn__kd_args *l, const attn__kd_mla_decode *x)
{
    const attn__kd_plan *p = x->plan;
    begin(l, ATTN__KD_MLA_MERGE, (size_t)p->ntiles, 1, 1);
    merge_head(l, p, x->part, x->out, x->out_off, x->lse, x->lse_off, x->meta);
    i32(l, x->H);
    i32(l, x->R);
    i32(l, x->q_elem);
    f32(l, x->out_scale);
    i32(l, x->lse != NULL);
}

void attn__kd_args_mla_decompress(attn__kd_args *l, const attn__kd_mla_decompress *x)
{
    const attn__kd_plan *p = x->plan;
    int nk_tiles = (x->N + KD_MLA_DC - 1) / KD_MLA_DC,
        nv_tiles = (x->V + KD_MLA_DC - 1) / KD_MLA_DC;
    begin(l, ATTN__KD_MLA_DECOMPRESS, (size_t)p->nwork, (size_t)x->H,
          (size_t)(nk_tiles + nv_tiles));
    mem(l, x->kv);
    i32(l, x->kv_elem);
    i64(l, x->k_off);
    i64(l, x->s_blk);
    i64(l, x->s_tok);
    i32(l, x->bs);
    f32(l, x->kv_scale);
    mem(l, x->w_uk);
    mem(l, x->w_uv);
    i32(l, x->w_elem);
    i32(l, x->R);
    i32(l, x->P);
    i32(l, x->N);
    i32(l, x->V);
    i32(l, nk_tiles);
    mem(l, x->meta);
    i32(l, p->m_kvlen);
    i32(l, p->m_work);
    i32(l, p->m_bt);
    i32(l, p->bt_stride);
    mem(l, x->dst);
    i32(l, x->dst_elem);
    i64(l, x->dst_v_off);
    i64(l, x->d_blk);
    i64(l, x->d_tok);
    i64(l, x->d_head);
}

void attn__kd_args_mla_project(attn__kd_args *l, const attn__kd_mla_project *x)
{
    begin(l, ATTN__KD_MLA_PROJECT, (size_t)(x->nout + KD_WG - 1) / KD_WG,
          (size_t)(x->T + KD_PJ_T - 1) / KD_PJ_T, (size_t)x->H);
    mem(l, x->in);
    i64(l, x->in_off);
    i64(l, x->in_tok);
    i64(l, x->in_head);
    mem(l, x->w);
    mem(l, x->out);
    i64(l, x->out_off);
    i64(l, x->out_tok);
    i64(l, x->out_head);
    i32(l, x->T);
    i32(l, x->kin);
    i32(l, x->nout);
    i32(l, x->ncopy);
    i32(l, x->elem);
}
