/* Paged attention on an OpenCL device: the step (plan on the host, run on
 * the device) and the forward call.
 *
 * A step checks one batch's metadata, plans it (devkern/kd_plan.c, the
 * plan the CUDA module uses too) and uploads it once for every layer of
 * the step: query_start_loc, each request's key count (its
 * sequence, or its encoder's for cross attention), the work-group tiles of
 * up to KD_ROWS (token, head) rows and the block table rows. The plan also
 * picks the split-KV shares: when the tiles times the KV heads would leave
 * the device's compute units idle and contexts are long, each tile's keys
 * are cut into splits whose partial states a merge kernel combines.
 *
 * The forward call checks what the host can (REFERENCE's argument check,
 * the step against the call, every buffer against the elements it will
 * address) and enqueues one attention launch (and one merge launch when
 * split). A layer's kernel state holds its per-head parameters on the
 * device: sinks and ALiBi slopes uploaded once at create, the KV scales
 * whenever the view's differ from what the device holds. */
#include <stdlib.h>
#include <string.h>

#include "backends/devkern/kd_plan.h"
#include "backends/opencl/ocl_impl.h"
#include "backends/reference/reference.h"
#include "util/error.h"
#include "util/numeric.h"

struct attn__ocl_step {
    attn__ocl *o;
    attn__kd_att kd;
};

#define WHO "OPENCL_ATTN"

static attn_status check_geometry(attn__ocl *o, const attn_layer_params *layer)
{
    attn__kd_rt rt = attn__ocl_kd_rt(o, WHO);
    return attn__kd_att_check_layer(&rt, layer, ATTN_MAX_HEADS, ATTN_MAX_HEADS);
}

attn_status attn__ocl_step_create(attn__ocl *o, const attn_layer_params *layer,
                                  attn__ocl_step **out)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(layer);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_status st = check_geometry(o, layer);
    if (st != ATTN_OK) return st;
    attn__ocl_step *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "OpenCL step: out of memory");
    s->o = o;
    attn__kd_att_init(&s->kd, layer);
    *out = s;
    return ATTN_OK;
}

void attn__ocl_step_destroy(attn__ocl_step *s)
{
    if (!s) return;
    attn__kd_rt rt = attn__ocl_kd_rt(s->o, WHO);
    attn__kd_att_free(&s->kd, &rt);
    free(s);
}

int attn__ocl_step_splits(const attn__ocl_step *s)
{
    return s && s->kd.built ? s->kd.plan.nsplit : 0;
}

attn_status attn__ocl_step_build(attn__ocl_step *s, const attn_common_metadata *cm, int num_blocks,
                                 const attn__ocl_plan *plan)
{
    ATTN__CHECK_NULL(s);
    ATTN__CHECK_NULL(cm);
    attn__kd_rt rt = attn__ocl_kd_rt(s->o, WHO);
    return attn__kd_att_build(&s->kd, &rt, cm, num_blocks, plan ? plan->split_len : 0,
                              plan ? plan->max_splits : 0);
}

/* ---- forward ------------------------------------------------------------------ */

/* The call's buffers and scalars (hp and flags are the kernel state's). */
static attn__kd_att_io io_of(const attn__ocl_fwd *f)
{
    const attn_layer_params *l = f->layer;
    return (attn__kd_att_io){.kv = f->kv,
                             .q = f->q,
                             .out = f->out,
                             .lse = f->lse,
                             .q_off = f->q_offset,
                             .out_off = f->out_offset,
                             .lse_off = f->lse_offset,
                             .q_elem = (int)attn_dtype_elem(l->dtype),
                             .window = l->sliding_window,
                             .scale = attn__fwd_scale(l),
                             .softcap = l->logits_soft_cap};
}

static attn_status check_forward(attn__ocl *o, const attn__ocl_fwd *f)
{
    const attn__kd_att *s = &f->step->kd;
    attn_forward_args a = {
        .layer = f->layer, .common = f->common, .q = f->q, .kv = f->kv, .out = f->out};
    attn_status st = attn__fwd_check(&a);
    if (st != ATTN_OK) return st;
    const attn_layer_params *l = f->layer;
    /* one queue orders the step's upload before the launch that reads it */
    if (f->step->o != o || !s->built)
        return attn__fail(ATTN_BAD_STATE, "OPENCL_ATTN: the step is %s",
                          s->built ? "of another instance (queue)" : "not built");
    if (l->num_heads != s->H || l->num_kv_heads != s->KVH || l->head_size != s->D ||
        attn__fwd_head_size_v(l) != s->Dv || l->attn_type != s->type)
        return attn__fail(ATTN_INVALID_ARGUMENT, "OPENCL_ATTN: the step was made for another layer "
                                                 "geometry");
    attn__kd_att_io io = io_of(f);
    attn__kd_rt rt = attn__ocl_kd_rt(o, WHO);
    return attn__kd_att_check(s, &rt, f->common, &io);
}

/* ---- the layer's kernel state ------------------------------------------------ */

/* params on the device: sinks[H], ALiBi slopes[H] (uploaded at create), K
 * scales[KVH], V scales[KVH] (uploaded when the view's scales change). */
struct attn__ocl_kernel {
    attn__ocl *o;
    int H, KVH, D, Dv;
    attn_attn_type type;
    bool sinks, alibi;
    attn__ocl_mem *params;
    float *scales; /* what params holds after its 2 * H floats */
};

attn_status attn__ocl_kernel_create(attn__ocl *o, const attn_layer_params *layer,
                                    attn__ocl_kernel **out)
{
    ATTN__CHECK_NULL(o);
    ATTN__CHECK_NULL(layer);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_status st = check_geometry(o, layer);
    if (st != ATTN_OK) return st;
    size_t H = (size_t)layer->num_heads, KVH = (size_t)layer->num_kv_heads;
    size_t n = attn__kd_att_params(layer, NULL);
    if (sizeof(float) * n > o->dev->max_constant)
        return attn__fail(ATTN_UNSUPPORTED,
                          "OPENCL_ATTN: %zu heads / %zu KV heads need %zu bytes of per-head "
                          "parameters; %.200s's constant buffers hold %llu",
                          H, KVH, sizeof(float) * n, o->dev->name,
                          (unsigned long long)o->dev->max_constant);
    attn__ocl_kernel *k = calloc(1, sizeof *k);
    float *p = malloc(sizeof(float) * n);
    if (k) k->scales = malloc(sizeof(float) * 2 * KVH);
    if (!k || !p || !k->scales) {
        free(p);
        attn__ocl_kernel_destroy(k);
        return attn__fail(ATTN_OUT_OF_MEMORY, "OPENCL_ATTN: out of memory");
    }
    *k = (attn__ocl_kernel){.o = o,
                            .H = (int)H,
                            .KVH = (int)KVH,
                            .D = layer->head_size,
                            .Dv = attn__fwd_head_size_v(layer),
                            .type = layer->attn_type,
                            .sinks = layer->sinks != NULL,
                            .alibi = layer->alibi_slopes != NULL,
                            .scales = k->scales};
    attn__kd_att_params(layer, p);
    for (size_t h = 0; h < 2 * KVH; h++)
        k->scales[h] = 1.0f;
    st = attn__ocl_alloc(o, sizeof(float) * n, &k->params);
    if (st == ATTN_OK) st = attn__ocl_copy_in(o, k->params, 0, p, sizeof(float) * n);
    free(p);
    if (st != ATTN_OK) {
        attn__ocl_kernel_destroy(k);
        return st;
    }
    *out = k;
    return ATTN_OK;
}

void attn__ocl_kernel_destroy(attn__ocl_kernel *k)
{
    if (!k) return;
    attn__ocl_free(k->params);
    free(k->scales);
    free(k);
}

/* The view's dequantisation scales (1 for non-fp8 caches), uploaded when
 * they differ from what the device holds (rarely: they are set per layer). */
static attn_status update_scales(attn__ocl_kernel *k, const attn_kv_view *kv)
{
    float s[2 * KD_MAX_HEAD];
    bool same = true;
    float *sc = k->KVH <= KD_MAX_HEAD ? s : malloc(sizeof(float) * 2 * (size_t)k->KVH);
    if (!sc) return attn__fail(ATTN_OUT_OF_MEMORY, "OPENCL_ATTN: out of memory");
    for (int h = 0; h < k->KVH; h++) {
        sc[h] = attn__kv_scale(kv, h, false);
        sc[k->KVH + h] = attn__kv_scale(kv, h, true);
    }
    for (int h = 0; h < 2 * k->KVH; h++)
        same &= attn__f32_bits(sc[h]) == attn__f32_bits(k->scales[h]);
    attn_status st = ATTN_OK;
    if (!same) {
        size_t bytes = sizeof(float) * 2 * (size_t)k->KVH;
        st = attn__ocl_copy_in(k->o, k->params, sizeof(float) * 2 * (size_t)k->H, sc, bytes);
        if (st == ATTN_OK) memcpy(k->scales, sc, bytes);
    }
    if (sc != s) free(sc);
    return st;
}

attn_status attn__ocl_forward(attn__ocl_kernel *k, const attn__ocl_fwd *f)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(f);
    ATTN__CHECK_NULL(f->step);
    ATTN__CHECK_NULL(f->kv);
    ATTN__CHECK_NULL(f->q);
    ATTN__CHECK_NULL(f->out);
    attn__ocl *o = k->o;
    attn_status st = check_forward(o, f);
    if (st != ATTN_OK) return st;
    const attn_layer_params *l = f->layer;
    if (l->num_heads != k->H || l->num_kv_heads != k->KVH || l->head_size != k->D ||
        attn__fwd_head_size_v(l) != k->Dv || l->attn_type != k->type ||
        (l->sinks != NULL) != k->sinks || (l->alibi_slopes != NULL) != k->alibi)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "OPENCL_ATTN: the call's layer is not the kernel's (heads, head sizes, "
                          "attention type, sinks and ALiBi are fixed at create)");
    const attn__kd_att *s = &f->step->kd;
    if (s->plan.ntok == 0) return ATTN_OK;
    st = update_scales(k, f->kv);
    if (st != ATTN_OK) return st;
    attn_forward_args a = {.layer = l, .common = f->common};
    attn__kd_att_io io = io_of(f);
    io.hp = k->params;
    io.flags = (attn__fwd_causal(&a) ? KD_F_CAUSAL : 0) | (k->sinks ? KD_F_SINKS : 0) |
               (k->alibi ? KD_F_ALIBI : 0) | (f->lse ? KD_F_LSE : 0);
    attn__kd_rt rt = attn__ocl_kd_rt(o, WHO);
    return attn__kd_att_run(s, &rt, &io);
}
