/* MLA on an OpenCL device (TRITON_MLA's contract, REFERENCE_MLA's
 * semantics): the step, forward_mqa over the latent cache and forward_mha
 * by decompression then the standard paged attention kernel.
 *
 * The step plans once for every layer of a batch: the decodes' rows in
 * tiles with split-KV shares (forward_mqa), the prefills' keys in blocks of
 * KD_MLA_BN to decompress, and the metadata of the standard attention over
 * the decompressed keys (a step of ocl_attn.c); its logic and the launches
 * are devkern/kd_step.c's, shared with the CUDA module. Each call checks the MLA
 * call as REFERENCE_MLA does (attn__mla_prepare), the step against the
 * call, and every buffer against the elements it will address, before
 * anything is enqueued. */
#include <stdlib.h>

#include "backends/mla/mla_internal.h"
#include "backends/opencl/ocl_impl.h"
#include "util/error.h"

struct attn__ocl_mla {
    attn__ocl *o;
    attn__kd_mla_geom g;
    attn__ocl_kernel *mha; /* the standard kernel over decompressed keys; NULL without N/V */
};

struct attn__ocl_mla_step {
    attn__ocl *o;
    attn__kd_mla kd;
    attn__ocl_step *mha_step; /* the standard step over the decompressed keys */
};

#define WHO "OpenCL MLA"

static attn_status check_layer(attn__ocl *o, const attn_layer_params *l)
{
    attn__kd_rt rt = attn__ocl_kd_rt(o, WHO);
    return attn__kd_mla_check_layer(&rt, l, ATTN_MAX_HEADS);
}

attn_status attn__ocl_mla_create(attn__ocl *o, const attn_layer_params *layer, attn__ocl_mla **out)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(layer);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_status st = check_layer(o, layer);
    if (st != ATTN_OK) return st;
    attn__ocl_mla *k = calloc(1, sizeof *k);
    if (!k) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL MLA: out of memory");
    *k = (attn__ocl_mla){.o = o,
                         .g = attn__kd_mla_geom_of(layer, (int)attn_dtype_elem(layer->dtype))};
    if (attn__kd_mla_has_mha(layer)) {
        attn_layer_params ml = attn__kd_mla_mha_layer(layer);
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
    attn_status st = check_layer(o, layer);
    if (st != ATTN_OK) return st;
    attn__ocl_mla_step *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL MLA step: out of memory");
    s->o = o;
    attn__kd_mla_init(&s->kd, layer, (int)attn_dtype_elem(layer->dtype));
    if (attn__kd_mla_has_mha(layer)) {
        attn_layer_params ml = attn__kd_mla_mha_layer(layer);
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
    attn__kd_rt rt = attn__ocl_kd_rt(s->o, WHO);
    attn__kd_mla_free(&s->kd, &rt);
    attn__ocl_step_destroy(s->mha_step);
    free(s);
}

int attn__ocl_mla_step_splits(const attn__ocl_mla_step *s)
{
    return s && s->kd.built ? s->kd.plan.nsplit : 0;
}

attn_status attn__ocl_mla_step_build(attn__ocl_mla_step *s, const attn_common_metadata *cm,
                                     int num_decodes, int num_blocks, const attn__ocl_plan *plan)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(cm);
    attn__kd_rt rt = attn__ocl_kd_rt(s->o, WHO);
    attn_status st =
        attn__kd_mla_build(&s->kd, &rt, cm, num_decodes, num_blocks, plan ? plan->split_len : 0,
                           plan ? plan->max_splits : 0, s->mha_step != NULL);
    if (st == ATTN_OK && s->kd.decompress)
        st = attn__ocl_step_build(s->mha_step, &s->kd.mha_meta.cm, s->kd.mha_meta.num_blocks, NULL);
    s->kd.built = st == ATTN_OK;
    return st;
}

/* ---- checks -------------------------------------------------------------------- */

static attn__kd_mla_io call_io(const attn__ocl_mla_fwd *f, const attn__mla_call *c)
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
                             .q_elem = (int)c->q_elem,
                             .kv_elem = (int)c->kv_elem,
                             .scale = c->scale,
                             .kv_scale = c->kv_scale};
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
    if (s->o != k->o || !s->kd.built)
        return attn__fail(ATTN_BAD_STATE, "OpenCL MLA: the step is %s",
                          s->kd.built ? "of another instance (queue)" : "not built");
    if (c->H != k->g.H || c->R != k->g.R || c->P != k->g.P || k->g.dtype != f->layer->dtype ||
        (mha && (c->nope != k->g.N || c->V != k->g.V || !k->mha)) ||
        !attn__kd_mla_geom_same(&s->kd.g, &k->g, mha))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "OpenCL MLA: the call's layer is not the kernel's or the step's (heads, "
                          "kv_lora_rank, rope, nope, v_head_dim and dtype are fixed at create)");
    attn__kd_mla_io io = call_io(f, c);
    attn__kd_rt rt = attn__ocl_kd_rt(k->o, WHO);
    return attn__kd_mla_check(&s->kd, &rt, c->cm, &io, mha);
}

/* ---- forward_mqa and forward_mha ------------------------------------------------ */

attn_status attn__ocl_mla_mqa(attn__ocl_mla *k, const attn__ocl_mla_fwd *f)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(f);
    ATTN__CHECK_NULL(f->step);
    attn__mla_call c;
    attn_status st = check_call(k, f, false, &c);
    if (st != ATTN_OK) return st;
    attn__kd_mla_io io = call_io(f, &c);
    attn__kd_rt rt = attn__ocl_kd_rt(k->o, WHO);
    return attn__kd_mla_mqa(&f->step->kd, &rt, &io);
}

attn_status attn__ocl_mla_mha(attn__ocl_mla *k, const attn__ocl_mla_fwd *f)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(f);
    ATTN__CHECK_NULL(f->step);
    attn__mla_call c;
    attn_status st = check_call(k, f, true, &c);
    if (st != ATTN_OK) return st;
    const attn__ocl_mla_step *s = f->step;
    if (s->kd.plan.nwork == 0) return ATTN_OK;
    attn__kd_mla_io io = call_io(f, &c);
    attn__kd_rt rt = attn__ocl_kd_rt(k->o, WHO);
    st = attn__kd_mla_run_decompress(&s->kd, &rt, &io);
    if (st != ATTN_OK) return st;
    int64_t rows0 = attn__kd_mla_prefill_row(&s->kd, c.cm);
    attn_layer_params ml = attn__kd_mla_mha_layer(f->layer);
    attn__ocl_fwd g = {.layer = &ml,
                       .common = &s->kd.mha_meta.cm,
                       .step = s->mha_step,
                       .kv = &s->kd.keys_view,
                       .q = f->q,
                       .q_offset = f->q_offset + rows0 * (k->g.N + k->g.P),
                       .out = f->out,
                       .out_offset = f->out_offset + rows0 * k->g.V,
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
    attn__kd_rt rt = attn__ocl_kd_rt(o, "OpenCL");
    return attn__kd_mla_project_run(&rt, layer, T, absorb, in, in_offset, w, out, out_offset);
}
