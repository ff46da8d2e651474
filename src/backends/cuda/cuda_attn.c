/* Paged attention, the cache writes and the read-back on a CUDA device:
 * the OpenCL runtime's calls (ocl_attn.c, ocl_write.c) over the same plans
 * (kd_plan.c) and argument lists (kd_launch.c), on the module's stream.
 * Each call checks what the kernels will read before it enqueues. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"
#include "backends/reference/reference.h"
#include "util/numeric.h"

#define WHO "CUDA"

static bool is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

/* The kernels' geometry; KV heads are a grid dimension (at most 65535). */
static attn_status check_geometry(attn__cuda *c, const attn_layer_params *l)
{
    attn__kd_rt rt = attn__cuda_kd_rt(c, WHO);
    return attn__kd_att_check_layer(&rt, l, ATTN_MAX_HEADS, 65535);
}

/* ---- the step ---------------------------------------------------------------------- */

struct attn__cuda_step {
    attn__cuda *c;
    attn__kd_att kd;
};

attn_status attn__cuda_step_create(attn__cuda *c, const attn_layer_params *layer,
                                   attn__cuda_step **out)
{
    if (!c || !layer || !out) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA step: NULL");
    *out = NULL;
    attn_status st = check_geometry(c, layer);
    if (st != ATTN_OK) return st;
    attn__cuda_step *s = calloc(1, sizeof *s);
    if (!s) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA step: out of memory");
    s->c = c;
    attn__kd_att_init(&s->kd, layer);
    *out = s;
    return ATTN_OK;
}

void attn__cuda_step_destroy(attn__cuda_step *s)
{
    if (!s) return;
    attn__kd_rt rt = attn__cuda_kd_rt(s->c, WHO);
    attn__kd_att_free(&s->kd, &rt);
    free(s);
}

int attn__cuda_step_splits(const attn__cuda_step *s)
{
    return s && s->kd.built ? s->kd.plan.nsplit : 0;
}

attn_status attn__cuda_step_build(attn__cuda_step *s, const attn_common_metadata *cm,
                                  int num_blocks, const attn__cuda_plan *plan)
{
    if (!s || !cm) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA step build: NULL");
    attn__kd_rt rt = attn__cuda_kd_rt(s->c, WHO);
    return attn__kd_att_build(&s->kd, &rt, cm, num_blocks, plan ? plan->split_len : 0,
                              plan ? plan->max_splits : 0);
}

/* ---- the layer's kernel state and the forward ---------------------------------------- */

/* params: sinks[H], ALiBi slopes[H], K scales[KVH], V scales[KVH] */
struct attn__cuda_kernel {
    attn__cuda *c;
    int H, KVH, D, Dv;
    attn_attn_type type;
    bool sinks, alibi;
    attn__cuda_mem *params;
    float *host; /* what params holds */
};

attn_status attn__cuda_kernel_create(attn__cuda *c, const attn_layer_params *layer,
                                     attn__cuda_kernel **out)
{
    if (!c || !layer || !out) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA kernel: NULL");
    *out = NULL;
    attn_status st = check_geometry(c, layer);
    if (st != ATTN_OK) return st;
    int H = layer->num_heads, KVH = layer->num_kv_heads;
    size_t n = attn__kd_att_params(layer, NULL);
    attn__cuda_kernel *k = calloc(1, sizeof *k);
    float *p = malloc(sizeof(float) * n);
    if (!k || !p) {
        free(k);
        free(p);
        return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA kernel: out of memory");
    }
    *k = (attn__cuda_kernel){.c = c,
                             .H = H,
                             .KVH = KVH,
                             .D = layer->head_size,
                             .Dv = attn__fwd_head_size_v(layer),
                             .type = layer->attn_type,
                             .sinks = layer->sinks != NULL,
                             .alibi = layer->alibi_slopes != NULL,
                             .host = p};
    attn__kd_att_params(layer, p);
    st = attn__cuda_alloc(c, sizeof(float) * n, &k->params);
    if (st == ATTN_OK) st = attn__cuda_copy_in(c, k->params, 0, p, sizeof(float) * n);
    if (st != ATTN_OK) {
        attn__cuda_kernel_destroy(k);
        return st;
    }
    *out = k;
    return ATTN_OK;
}

void attn__cuda_kernel_destroy(attn__cuda_kernel *k)
{
    if (!k) return;
    attn__cuda_free(k->params);
    free(k->host);
    free(k);
}

/* The view's dequantisation scales, uploaded when they changed. */
static attn_status update_scales(attn__cuda_kernel *k, const attn_kv_view *kv)
{
    float *s = k->host + 2 * k->H;
    bool same = true;
    for (int h = 0; h < k->KVH; h++) {
        float ks = attn__kv_scale(kv, h, false), vs = attn__kv_scale(kv, h, true);
        same &= attn__f32_bits(ks) == attn__f32_bits(s[h]) &&
                attn__f32_bits(vs) == attn__f32_bits(s[k->KVH + h]);
        s[h] = ks;
        s[k->KVH + h] = vs;
    }
    if (same) return ATTN_OK;
    attn_status st = attn__cuda_copy_in(k->c, k->params, sizeof(float) * 2 * (size_t)k->H, s,
                                        sizeof(float) * 2 * (size_t)k->KVH);
    if (st != ATTN_OK) s[0] = attn__bits_f32(0x7fc00000u); /* differs from any scale: retry */
    return st;
}

/* The call's buffers and scalars (hp and flags are the kernel state's). */
static attn__kd_att_io io_of(const attn__cuda_fwd *f)
{
    const attn_layer_params *l = f->layer;
    return (attn__kd_att_io){.kv = f->kv,
                             .q = f->q,
                             .out = f->out,
                             .lse = f->lse,
                             .q_off = f->q_offset,
                             .out_off = f->out_offset,
                             .lse_off = f->lse_offset,
                             .q_elem = (int)attn__cuda_dtype_elem(l->dtype),
                             .window = l->sliding_window,
                             .scale = attn__fwd_scale(l),
                             .softcap = l->logits_soft_cap};
}

static attn_status check_forward(attn__cuda_kernel *k, const attn__cuda_fwd *f)
{
    const attn__kd_att *s = &f->step->kd;
    const attn_layer_params *l = f->layer;
    if (f->step->c != k->c || !s->built)
        return attn__cuda_fail(ATTN_BAD_STATE, "CUDA: the step is %s",
                               s->built ? "of another instance (stream)" : "not built");
    if (l->num_heads != k->H || l->num_kv_heads != k->KVH || l->head_size != k->D ||
        attn__fwd_head_size_v(l) != k->Dv || l->attn_type != k->type ||
        (l->sinks != NULL) != k->sinks || (l->alibi_slopes != NULL) != k->alibi || s->H != k->H ||
        s->KVH != k->KVH || s->D != k->D || s->Dv != k->Dv || s->type != k->type)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                               "CUDA: the call's layer is not the kernel's or the step's");
    attn__kd_att_io io = io_of(f);
    attn__kd_rt rt = attn__cuda_kd_rt(k->c, WHO);
    return attn__kd_att_check(s, &rt, f->common, &io);
}

attn_status attn__cuda_forward(attn__cuda_kernel *k, const attn__cuda_fwd *f)
{
    if (!k || !f || !f->step || !f->kv || !f->layer || !f->common)
        return attn__cuda_fail(ATTN_NULL_ARGUMENT, "attn__cuda_forward: NULL argument");
    attn_status st = check_forward(k, f);
    if (st != ATTN_OK) return st;
    const attn__kd_att *s = &f->step->kd;
    if (s->plan.ntok == 0) return ATTN_OK;
    st = update_scales(k, f->kv);
    if (st != ATTN_OK) return st;
    const attn_layer_params *l = f->layer;
    bool causal = l->attn_type == ATTN_TYPE_DECODER && f->common->causal;
    attn__kd_att_io io = io_of(f);
    io.hp = k->params;
    io.flags = (causal ? KD_F_CAUSAL : 0) | (k->sinks ? KD_F_SINKS : 0) |
               (k->alibi ? KD_F_ALIBI : 0) | (f->lse ? KD_F_LSE : 0);
    attn__kd_rt rt = attn__cuda_kd_rt(k->c, WHO);
    return attn__kd_att_run(s, &rt, &io);
}

/* ---- cache writes ------------------------------------------------------------------ */

typedef struct {
    const attn__cuda_mem *src;
    int64_t off, elems, tok_stride, dst_off, s_head;
    int nheads, dim, inv_off;
} part;

/* Slots (each -1 or inside the cache), the view, the sources' ranges;
 * then the slots and inverse scales uploaded and one launch per part. */
static attn_status write_parts(attn__cuda *c, const attn_kv_view *kv, const int64_t *slots,
                               int ntok, const part *parts, int nparts, const float *inv, int ninv,
                               attn_elem src, bool raw, int dv, const char *who)
{
    if (src != ATTN_ELEM_F32 && src != ATTN_ELEM_F16 && src != ATTN_ELEM_BF16)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "%s: source element %d", who, (int)src);
    if (!kv->data || attn__kd_elem_size((int)kv->elem) == 0 || kv->stride_token < 1)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "%s: the cache view is malformed", who);
    int64_t nslots = (int64_t)kv->num_blocks * kv->block_size, extent = 0;
    for (int t = 0; t < ntok; t++)
        if (slots[t] != -1 && (slots[t] < 0 || slots[t] >= nslots))
            return attn__cuda_fail(ATTN_OUT_OF_RANGE,
                                   "%s: token %d has slot %lld outside the cache (%lld slots)", who,
                                   t, (long long)slots[t], (long long)nslots);
    if (!attn__kd_view_extent(kv, dv, &extent))
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "%s: the view's extent overflows", who);
    attn_status st = attn__cuda_check_mem(c, kv->data, 0, extent, attn__kd_elem_size((int)kv->elem),
                                          "the cache");
    for (int i = 0; i < nparts && st == ATTN_OK; i++)
        st = attn__cuda_check_mem(c, parts[i].src, parts[i].off, parts[i].elems,
                                  attn__kd_elem_size((int)src), "a source");
    if ((int64_t)ntok * parts[0].nheads > INT32_MAX / KD_WG)
        return attn__cuda_fail(ATTN_UNSUPPORTED, "%s: %d tokens in one call", who, ntok);
    if (st == ATTN_OK) st = attn__cuda_scratch(c, &c->slots, sizeof(int64_t) * (size_t)ntok);
    if (st == ATTN_OK) st = attn__cuda_scratch(c, &c->scales, sizeof(float) * (size_t)ninv);
    if (st == ATTN_OK)
        st = attn__cuda_copy_in(c, c->slots, 0, slots, sizeof(int64_t) * (size_t)ntok);
    if (st == ATTN_OK) st = attn__cuda_copy_in(c, c->scales, 0, inv, sizeof(float) * (size_t)ninv);
    for (int i = 0; i < nparts && st == ATTN_OK; i++) {
        const part *pt = &parts[i];
        attn__kd_cache_write x = {.src = pt->src,
                                  .slots = c->slots,
                                  .inv_scale = c->scales,
                                  .cache = kv->data,
                                  .src_off = pt->off,
                                  .tok_stride = pt->tok_stride,
                                  .dst_off = pt->dst_off,
                                  .s_blk = kv->stride_block,
                                  .s_tok = kv->stride_token,
                                  .s_head = pt->s_head,
                                  .src_elem = (int)src,
                                  .cache_elem = (int)kv->elem,
                                  .bs = kv->block_size,
                                  .ntok = ntok,
                                  .nheads = pt->nheads,
                                  .dim = pt->dim,
                                  .inv_off = pt->inv_off,
                                  .raw_copy = raw};
        attn__kd_args a;
        attn__kd_args_cache_write(&a, &x);
        st = attn__cuda_run(c, &a);
    }
    return st;
}

static float scale_of(const attn_kv_view *kv, int h, bool value)
{
    if (!is_fp8(kv->elem)) return 1.0f;
    const float *ph = value ? kv->v_scale_per_head : kv->k_scale_per_head;
    return ph ? ph[h] : value ? kv->v_scale : kv->k_scale;
}

attn_status attn__cuda_kv_write(attn__cuda *c, const attn_kv_view *kv, const int64_t *slot_mapping,
                                int num_tokens, const attn__cuda_mem *k, int64_t k_offset,
                                const attn__cuda_mem *v, int64_t v_offset, attn_elem src)
{
    if (!c || !kv) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA KV write: NULL argument");
    if (num_tokens <= 0)
        return num_tokens == 0
                   ? ATTN_OK
                   : attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA KV write: %d tokens", num_tokens);
    if (!slot_mapping || !k || (!v) != (kv->head_size_v < 1) || kv->num_kv_heads < 1 ||
        kv->head_size < 1)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                               "CUDA KV write: slots, k, and v exactly when the cache stores "
                               "values, are needed");
    int kvh = kv->num_kv_heads, D = kv->head_size, Dv = v ? kv->head_size_v : 0;
    float *inv = malloc(sizeof(float) * 2 * (size_t)kvh);
    if (!inv) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA KV write: out of memory");
    for (int h = 0; h < kvh; h++) {
        float ks = scale_of(kv, h, false), vs = scale_of(kv, h, true);
        if (!(ks > 0 && isfinite(ks)) || !(vs > 0 && isfinite(vs))) {
            free(inv);
            return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA KV write: fp8 scales of head %d",
                                   h);
        }
        inv[h] = 1.0f / ks;
        inv[kvh + h] = 1.0f / vs;
    }
    part parts[2] = {{k, k_offset, (int64_t)num_tokens * kvh * D, (int64_t)kvh * D, kv->k_offset,
                      kv->stride_head, kvh, D, 0},
                     {v, v_offset, (int64_t)num_tokens * kvh * Dv, (int64_t)kvh * Dv, kv->v_offset,
                      kv->stride_head, kvh, Dv, kvh}};
    attn_status st = write_parts(c, kv, slot_mapping, num_tokens, parts, v ? 2 : 1, inv, 2 * kvh,
                                 src, src == kv->elem && !is_fp8(kv->elem), Dv, "CUDA KV write");
    free(inv);
    return st;
}

attn_status attn__cuda_mla_write(attn__cuda *c, const attn_kv_view *kv, const int64_t *slot_mapping,
                                 int num_tokens, const attn__cuda_mem *latent,
                                 int64_t latent_offset, const attn__cuda_mem *rope,
                                 int64_t rope_offset, int latent_dim, int rope_dim, attn_elem src)
{
    if (!c || !kv) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA MLA write: NULL argument");
    if (num_tokens <= 0)
        return num_tokens == 0 ? ATTN_OK
                               : attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA MLA write: %d tokens",
                                                 num_tokens);
    int R = latent_dim, P = rope_dim;
    if (!slot_mapping || !latent || R < 1 || P < 0 || R + P != kv->head_size || (P > 0 && !rope))
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT,
                               "CUDA MLA write: latent %d + rope %d against the view's %d, or a "
                               "NULL argument",
                               R, P, kv->head_size);
    float inv = is_fp8(kv->elem) ? 1.0f / kv->k_scale : 1.0f;
    if (!(inv > 0 && isfinite(inv)))
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA MLA write: fp8 k_scale %g",
                               (double)kv->k_scale);
    attn_kv_view one = *kv; /* the latent rows as a one-head view */
    one.num_kv_heads = 1;
    one.stride_head = 0;
    part parts[2] = {{latent, latent_offset, (int64_t)num_tokens * R, R, kv->k_offset, 0, 1, R, 0},
                     {rope, rope_offset, (int64_t)num_tokens * P, P, kv->k_offset + R, 0, 1, P, 0}};
    return write_parts(c, &one, slot_mapping, num_tokens, parts, P > 0 ? 2 : 1, &inv, 1, src,
                       src == kv->elem, 0, "CUDA MLA write");
}

attn_status attn__cuda_to_f32(attn__cuda *c, const attn__cuda_mem *src, int64_t offset,
                              attn_elem elem, size_t n, float *dst)
{
    if (!c || !src) return attn__cuda_fail(ATTN_NULL_ARGUMENT, "CUDA read-back: NULL argument");
    if (n == 0) return ATTN_OK;
    if (!dst || attn__kd_elem_size((int)elem) == 0 || n > (size_t)INT32_MAX * KD_WG / 2)
        return attn__cuda_fail(ATTN_INVALID_ARGUMENT, "CUDA read-back: element %d, %zu values",
                               (int)elem, n);
    attn_status st = attn__cuda_check_mem(c, src, offset, (int64_t)n, attn__kd_elem_size((int)elem),
                                          "the read-back source");
    attn__cuda_mem *tmp = NULL;
    if (st == ATTN_OK) st = attn__cuda_alloc(c, n * sizeof(float), &tmp);
    if (st != ATTN_OK) return st;
    attn__kd_args a;
    attn__kd_args_to_f32(&a, src, offset, (int)elem, (int64_t)n, tmp);
    st = attn__cuda_run(c, &a);
    if (st == ATTN_OK) st = attn__cuda_copy_out(c, dst, tmp, 0, n * sizeof(float));
    attn__cuda_free(tmp);
    return st;
}
