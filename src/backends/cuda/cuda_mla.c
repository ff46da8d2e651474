/* MLA on a CUDA device: the OpenCL runtime's MLA calls (ocl_mla.c) over the
 * same plans and argument lists - forward_mqa by attn_kd_mla_decode (and
 * its merge when split), forward_mha by attn_kd_mla_decompress then the
 * standard paged attention over the decompressed keys; the step and the
 * launches are devkern/kd_step.c's. */
#include <math.h>
#include <stdlib.h>

#include "backends/cuda/cuda_impl.h"
#include "backends/mla/mla_internal.h"

struct attn__cuda_mla {
    attn__cuda *c;
    attn__kd_mla_geom g;
    attn__cuda_kernel *mha;
};

struct attn__cuda_mla_step {
    attn__cuda *c;
    attn__kd_mla kd;
    attn__cuda_step *mha_step;
};

#define WHO "CUDA MLA"

static attn_status check_layer(attn__cuda *c, const attn_layer_params *l)
{
    attn__kd_rt rt = attn__cuda_kd_rt(c, WHO);
    return attn__kd_mla_check_layer(&rt, l, 65535);
}

attn_status attn__cuda_mla_create(attn__cuda *c, const attn_layer_params *layer,
                                  attn__cuda_mla **out)
{
    if (!c || !layer || !out) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA: NULL");
    *out = NULL;
    attn_status st = check_layer(c, layer);
    if (st != ATTN_OK) return st;
    attn__cuda_mla *k = calloc(1, sizeof *k);
    if (!k) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA MLA: out of memory");
    *k = (attn__cuda_mla){
        .c = c, .g = attn__kd_mla_geom_of(layer, (int)attn__cuda_dtype_elem(layer->dtype))};
    if (attn__kd_mla_has_mha(layer)) {
        attn_layer_params ml = attn__kd_mla_mha_layer(layer);
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
    attn_status st = check_layer(c, layer);
    if (st != ATTN_OK) return st;
    attn__cuda_mla_step *s = calloc(1, sizeof *s);
    if (!s) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA MLA step: out of memory");
    s->c = c;
    attn__kd_mla_init(&s->kd, layer, (int)attn__cuda_dtype_elem(layer->dtype));
    if (attn__kd_mla_has_mha(layer)) {
        attn_layer_params ml = attn__kd_mla_mha_layer(layer);
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
    attn__kd_rt rt = attn__cuda_kd_rt(s->c, WHO);
    attn__kd_mla_free(&s->kd, &rt);
    attn__cuda_step_destroy(s->mha_step);
    free(s);
}

int attn__cuda_mla_step_splits(const attn__cuda_mla_step *s)
{
    return s && s->kd.built ? s->kd.plan.nsplit : 0;
}

attn_status attn__cuda_mla_step_build(attn__cuda_mla_step *s, const attn_common_metadata *cm,
                                      int num_decodes, int num_blocks, const attn__cuda_plan *plan)
{
    if (!s || !cm) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA step build: NULL");
    attn__kd_rt rt = attn__cuda_kd_rt(s->c, WHO);
    attn_status st =
        attn__kd_mla_build(&s->kd, &rt, cm, num_decodes, num_blocks, plan ? plan->split_len : 0,
                           plan ? plan->max_splits : 0, s->mha_step != NULL);
    if (st == ATTN_OK && s->kd.decompress)
        st =
            attn__cuda_step_build(s->mha_step, &s->kd.mha_meta.cm, s->kd.mha_meta.num_blocks, NULL);
    s->kd.built = st == ATTN_OK;
    return st;
}

static attn__kd_mla_io call_io(const attn__cuda_mla *k, const attn__cuda_mla_fwd *f, float kv_scale)
{
    return (attn__kd_mla_io){.kv = f->kv,
                             .q = f->q,
                             .w_uk = f->w_uk,
                             .w_uv = f->w_uv,
                             .out = f->out,
                             .lse = f->lse,
                             .q_off = f->q_offset,
                             .out_off = f->out_offset,
                             .lse_off = f->lse_offset,
                             .q_elem = (int)attn__cuda_dtype_elem(k->g.dtype),
                             .kv_elem = (int)f->kv->elem,
                             .scale = attn__mla_softmax_scale(f->layer),
                             .kv_scale = kv_scale};
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
    attn__kd_mla_geom lg = attn__kd_mla_geom_of(l, k->g.elem);
    if (!attn__kd_mla_geom_same(&lg, &k->g, mha) || l->dtype != k->g.dtype ||
        !attn__kd_mla_geom_same(&s->kd.g, &k->g, mha) || (mha && !k->mha))
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                               "CUDA MLA: the call's layer is not the kernel's or the step's");
    if (s->c != k->c || !s->kd.built)
        return attn__cuda_fail(ATTN_BAD_STATE, "CUDA MLA: the step is %s",
                               s->kd.built ? "of another instance (stream)" : "not built");
    bool fp8 = kv->elem == ATTN_ELEM_FP8_E4M3 || kv->elem == ATTN_ELEM_FP8_E5M2;
    *kv_scale = fp8 ? kv->k_scale : 1.0f;
    if (kv->head_size != k->g.R + k->g.P || kv->stride_token < kv->head_size ||
        attn__kd_elem_size((int)kv->elem) == 0 || !(*kv_scale > 0 && isfinite(*kv_scale)))
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                               "CUDA MLA: the latent view (rows of %d, kv_lora_rank %d + rope %d)",
                               kv->head_size, k->g.R, k->g.P);
    attn__kd_mla_io io = call_io(k, f, *kv_scale);
    attn__kd_rt rt = attn__cuda_kd_rt(k->c, WHO);
    return attn__kd_mla_check(&s->kd, &rt, f->common, &io, mha);
}

attn_status attn__cuda_mla_mqa(attn__cuda_mla *k, const attn__cuda_mla_fwd *f)
{
    if (!k || !f) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA forward_mqa: NULL");
    float kv_scale = 1.0f;
    attn_status st = check_call(k, f, false, &kv_scale);
    if (st != ATTN_OK) return st;
    attn__kd_mla_io io = call_io(k, f, kv_scale);
    attn__kd_rt rt = attn__cuda_kd_rt(k->c, WHO);
    return attn__kd_mla_mqa(&f->step->kd, &rt, &io);
}

attn_status attn__cuda_mla_mha(attn__cuda_mla *k, const attn__cuda_mla_fwd *f)
{
    if (!k || !f) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA forward_mha: NULL");
    float kv_scale = 1.0f;
    attn_status st = check_call(k, f, true, &kv_scale);
    if (st != ATTN_OK) return st;
    const attn__cuda_mla_step *s = f->step;
    if (s->kd.plan.nwork == 0) return ATTN_OK;
    attn__kd_mla_io io = call_io(k, f, kv_scale);
    attn__kd_rt rt = attn__cuda_kd_rt(k->c, WHO);
    st = attn__kd_mla_run_decompress(&s->kd, &rt, &io);
    if (st != ATTN_OK) return st;
    int64_t rows0 = attn__kd_mla_prefill_row(&s->kd, f->common);
    attn_layer_params ml = attn__kd_mla_mha_layer(f->layer);
    attn__cuda_fwd g = {.layer = &ml,
                        .common = &s->kd.mha_meta.cm,
                        .step = s->mha_step,
                        .kv = &s->kd.keys_view,
                        .q = f->q,
                        .q_offset = f->q_offset + rows0 * (k->g.N + k->g.P),
                        .out = f->out,
                        .out_offset = f->out_offset + rows0 * k->g.V,
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
    attn__kd_rt rt = attn__cuda_kd_rt(c, "CUDA");
    return attn__kd_mla_project_run(&rt, layer, T, absorb, in, in_offset, w, out, out_offset);
}
