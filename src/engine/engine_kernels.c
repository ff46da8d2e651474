/* The kernels a group runs and the buffers a step writes.
 *
 * A group computes with its backend's own kernel when the backend has code
 * here (native), else with the first stand-in the caller named in
 * attn_engine_config that is valid for the layer on stand_in_platform
 * (emulated), else with none (kernel_note says why). The caller's
 * io.weights fills the group's constant tensors once, here at startup. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine.h"
#include "attn/mla.h"
#include "attn/registry.h"
#include "engine/engine_impl.h"
#include "util/error.h"
#include "util/numeric.h"

static bool attn__kernel_fits(const attn_backend *b, bool mla)
{
    return b && b->kernel &&
           (mla ? b->kernel->forward_mqa && b->kernel->forward_mha : b->kernel->forward != NULL);
}

/* A kernel that can stand in for a descriptor-only backend: resolvable on
 * the stand-in platform, with the right entry points, and valid for this
 * layer there. */
static const attn_backend *attn__stand_in(attn_engine *e, attn__eng_group *g, const char *name)
{
    const attn_backend *b = NULL;
    if (attn_backend_resolve(e->cfg.stand_in_platform, name, &b) != ATTN_OK ||
        !attn__kernel_fits(b, g->spec.use_mla)) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "%s: %.300s", name,
                 b ? "no kernel for this layer type" : attn_last_error());
        attn_clear_error();
        return NULL;
    }
    attn_selector_config sc = g->selcfg;
    sc.block_size = e->block_size;
    char reasons[ATTN_REASONS_MAX][ATTN_REASON_MAX];
    int n =
        attn_backend_validate(b->desc, e->cfg.stand_in_platform, &sc, reasons, ATTN_REASONS_MAX);
    if (n > 0) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "%s cannot run this layer: %.300s", name,
                 reasons[0]);
        return NULL;
    }
    return b;
}

/* The first valid stand-in of the caller's list for this group's kind;
 * the note keeps the last refusal. */
static const attn_backend *attn__first_stand_in(attn_engine *e, attn__eng_group *g)
{
    const char *const *names = g->spec.use_mla ? e->cfg.stand_ins_mla : e->cfg.stand_ins;
    if (!names || !names[0] || !e->cfg.stand_in_platform) {
        snprintf(g->kernel_note, sizeof g->kernel_note,
                 "%s has no kernel here and no stand-in was given", g->backend->desc->name);
        return NULL;
    }
    for (; *names; names++) {
        const attn_backend *b = attn__stand_in(e, g, *names);
        if (b) return b;
    }
    return NULL;
}

/* The layers run, and the group's constant tensors (zeroed, then written
 * by the caller's io.weights). */
static attn_status attn__group_tensors(attn_engine *e, attn__eng_group *g, bool encoder)
{
    int want = e->cfg.layers_to_run;
    g->layers_run = want == 0 ? 1 : want < 0 || want > g->num_layers ? g->num_layers : want;
    bool oom = false;
    g->run_layers = attn__eng_calloc((size_t)g->layers_run, sizeof(int), &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    memcpy(g->run_layers, g->layers, sizeof(int) * (size_t)g->layers_run);
    const int H = g->spec.num_heads;
    attn_engine_weights w = {.group = (int)(g - (encoder ? e->enc : e->groups)),
                             .encoder = encoder,
                             .spec = &g->spec,
                             .elem = attn_dtype_elem(g->params.dtype)};
    if (g->spec.has_sink) {
        g->sinks = attn__eng_calloc((size_t)H, sizeof(float), &oom);
        if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
        g->params.sinks = g->sinks;
        w.sinks = g->sinks;
    }
    if (g->spec.use_mla && !encoder) {
        /* W_UK [heads][qk_nope][kv_lora_rank], W_UV [heads][kv_lora_rank][v_head_dim] */
        size_t esz = attn_elem_size(w.elem);
        w.n_uk = (size_t)H * (size_t)g->spec.qk_nope_head_dim * (size_t)g->spec.kv_lora_rank;
        w.n_uv = (size_t)H * (size_t)g->spec.kv_lora_rank * (size_t)g->spec.v_head_dim;
        g->w_uk = w.w_uk = attn__eng_calloc(w.n_uk, esz, &oom);
        g->w_uv = w.w_uv = attn__eng_calloc(w.n_uv, esz, &oom);
        if (oom)
            return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: MLA weights: out of memory");
    }
    if (e->cfg.io.weights && (w.sinks || w.w_uk)) {
        attn_status st = e->cfg.io.weights(e->cfg.io.user, &w);
        if (st != ATTN_OK)
            return attn__engine_fail(e, st, "engine: the caller's weights for group %d: %s",
                                     w.group, attn_last_error());
    }
    return ATTN_OK;
}

static attn_status attn__kernel_init(attn_engine *e, attn__eng_group *g, attn__eng_kernel *k,
                                     const attn_backend *b, bool own_builder)
{
    k->backend = b;
    k->own_builder = own_builder;
    attn_status st = attn__engine_device(e, b, &k->dev);
    if (st != ATTN_OK) return st;
    if (own_builder) {
        if (!b->desc->builder)
            return attn__engine_fail(e, ATTN_UNSUPPORTED, "%s has no metadata builder",
                                     b->desc->name);
        k->builder = *b->desc->builder;
        attn_builder_init init = attn__engine_builder_init(e, g, b->desc);
        init.device = k->dev->dev;
        init.device_state = k->dev->dev->state;
        st = k->builder.create(&init, &k->builder_state);
        if (st != ATTN_OK)
            return attn__engine_fail(e, st, "%s metadata builder: %s", b->desc->name,
                                     attn_last_error());
    }
    bool oom = false;
    k->k = attn__eng_calloc((size_t)g->layers_run, sizeof(attn_kernel *), &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    /* one checked handle per layer: the self-test gate, the layer's state */
    for (int l = 0; l < g->layers_run; l++) {
        st = attn_kernel_open(b, &g->params, k->dev->dev, &k->k[l]);
        if (st != ATTN_OK)
            return attn__engine_fail(e, st, "%s kernel for layer %d: %s", b->desc->name,
                                     g->run_layers[l], attn_last_error());
    }
    return ATTN_OK;
}

void attn__engine_kernel_free(attn__eng_group *g, attn__eng_kernel *k)
{
    for (int l = 0; k->k && l < g->layers_run; l++)
        attn_kernel_close(k->k[l]);
    free(k->k);
    if (k->own_builder && k->builder_state && k->builder.destroy)
        k->builder.destroy(k->builder_state);
    memset(k, 0, sizeof *k);
}

static attn_status attn__kernel_start(attn_engine *e, attn__eng_group *g, const attn_backend *b,
                                      bool native, bool own_builder)
{
    g->mode = native ? ATTN_KERNEL_NATIVE : ATTN_KERNEL_EMULATED;
    attn_status st = attn__kernel_init(e, g, &g->run, b, own_builder);
    if (st != ATTN_OK) return st;
    g->kernel_name = g->run.backend->desc->name;
    g->kernel_variant = g->layers_run > 0 ? attn_kernel_variant(g->run.k[0]) : NULL;
    g->kernel_note[0] = '\0';
    return ATTN_OK;
}

attn_status attn__engine_setup_kernels(attn_engine *e, attn__eng_group *g)
{
    if (!e->cfg.run_kernels) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "kernels disabled");
        return ATTN_OK;
    }
    if (!g->layout.writable) {
        snprintf(g->kernel_note, sizeof g->kernel_note,
                 "the %s cache format cannot be written here",
                 attn_kv_dtype_name(g->selcfg.kv_cache_dtype));
        return ATTN_OK;
    }
    if (g->spec.use_sparse) {
        snprintf(g->kernel_note, sizeof g->kernel_note,
                 "sparse MLA needs an indexer's top-k tokens: metadata only");
        return ATTN_OK;
    }
    bool native = attn__kernel_fits(g->backend, g->spec.use_mla);
    const attn_backend *use = native ? g->backend : attn__first_stand_in(e, g);
    if (!use) return ATTN_OK; /* kernel_note says why */
    attn__eng_dev *dev = NULL;
    attn_status st = attn__engine_device(e, use, &dev);
    if (st != ATTN_OK) return st;
    if (g->spec.use_mla && !dev->host_visible)
        return attn__engine_fail(e, ATTN_UNSUPPORTED,
                                 "%s: MLA layers need host-visible memory for the W_UK / W_UV "
                                 "projections; device %s has none",
                                 use->desc->name, attn_device_name(dev->dev));
    if ((st = attn__group_tensors(e, g, false)) != ATTN_OK) return st;
    st = attn_kv_cache_create_on(&g->layout, g->layers_run, dev->dev, &g->cache);
    if (st != ATTN_OK)
        return attn__engine_fail(e, st, "KV cache memory for KV group %d: %s", (int)(g - e->groups),
                                 attn_last_error());
    return attn__kernel_start(e, g, use, native, !native);
}

/* An encoder group's kernel: the selected backend's own when it has code
 * here, else a stand-in; every call passes K/V directly and no backend
 * metadata, so no builder is created. */
attn_status attn__engine_setup_enc_kernels(attn_engine *e, attn__eng_group *g)
{
    if (!e->cfg.run_kernels) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "kernels disabled");
        return ATTN_OK;
    }
    if (g->spec.use_mla) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "MLA encoder layers are not driven");
        return ATTN_OK;
    }
    bool native = attn__kernel_fits(g->backend, false);
    const attn_backend *use = native ? g->backend : attn__first_stand_in(e, g);
    if (!use) return ATTN_OK; /* kernel_note says why */
    attn_status st = attn__group_tensors(e, g, true);
    return st != ATTN_OK ? st : attn__kernel_start(e, g, use, native, false);
}

/* The widest q, k/v and out rows of the groups that run, in elements per
 * token (attn_layer_rows states each layer's once). */
static attn_status attn__engine_rows(attn_engine *e, size_t *qn, size_t *kn, size_t *on)
{
    *qn = *kn = *on = 0;
    for (int i = 0; i < e->num_groups + e->num_enc; i++) {
        attn__eng_group *gr = i < e->num_groups ? &e->groups[i] : &e->enc[i - e->num_groups];
        if (gr->mode == ATTN_KERNEL_NONE) continue;
        attn_layer_rows r;
        attn_status st = attn_layer_rows_get(&gr->params, &r);
        if (st != ATTN_OK) return attn__engine_fail(e, st, "engine: %s", attn_last_error());
        size_t kd = (size_t)r.kv_heads * (size_t)r.kv_dim;
        *qn = *qn > (size_t)r.q_row ? *qn : (size_t)r.q_row;
        *on = *on > (size_t)r.out_row ? *on : (size_t)r.out_row;
        *kn = *kn > kd ? *kn : kd;
        if (r.mla && i < e->num_groups) {
            size_t ss = attn_mla_forward_scratch_size(&gr->params, e->max_tokens);
            e->mla_scratch_size = ss > e->mla_scratch_size ? ss : e->mla_scratch_size;
        }
    }
    return ATTN_OK;
}

/* Host staging of T rows of n elements through the engine's host instance. */
static attn_status attn__staging(attn_engine *e, size_t n, size_t esz, void **p, size_t *bytes)
{
    size_t b;
    if (!attn__mul_size((size_t)e->max_tokens, n, &b) || !attn__mul_size(b, esz, &b))
        return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: step buffers too large");
    *bytes = b;
    attn_status st = attn_device_alloc(e->devs[0].dev, b, ATTN_MEM_STEP, p);
    return st == ATTN_OK ? ATTN_OK
                         : attn__engine_fail(e, st, "engine: step buffers: %s", attn_last_error());
}

attn_status attn__engine_alloc_buffers(attn_engine *e)
{
    bool oom = false;
    int S = e->max_seqs, T = e->max_tokens;
    e->sched = attn__eng_calloc((size_t)S, sizeof(int), &oom);
    e->order = attn__eng_calloc((size_t)S, sizeof(int), &oom);
    e->qlens = attn__eng_calloc((size_t)S, sizeof(int32_t), &oom);
    e->qsl = attn__eng_calloc((size_t)S + 1, sizeof(int32_t), &oom);
    e->seq_lens = attn__eng_calloc((size_t)S, sizeof(int32_t), &oom);
    e->positions = attn__eng_calloc((size_t)T, sizeof(int32_t), &oom);
    e->is_prefilling = attn__eng_calloc((size_t)S, sizeof(uint8_t), &oom);
    e->token_req_id = attn__eng_calloc((size_t)T, sizeof(uint64_t), &oom);
    if (e->num_enc > 0) {
        e->enc_qsl = attn__eng_calloc((size_t)S + 1, sizeof(int32_t), &oom);
        e->enc_seq_lens = attn__eng_calloc((size_t)S, sizeof(int32_t), &oom);
        e->enc_positions = attn__eng_calloc((size_t)T, sizeof(int32_t), &oom);
        e->enc_token_req_id = attn__eng_calloc((size_t)T, sizeof(uint64_t), &oom);
    }
    for (int g = 0; g < e->num_groups && !oom; g++) {
        attn__eng_group *gr = &e->groups[g];
        gr->block_table =
            attn__eng_calloc((size_t)S * (size_t)e->max_blocks, sizeof(int32_t), &oom);
        gr->slot_mapping = attn__eng_calloc((size_t)T, sizeof(int64_t), &oom);
    }
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory for buffers");
    /* Q/K/V and output, sized for the largest group that runs */
    size_t qn, kn, on, ignored;
    attn_status st = attn__engine_rows(e, &qn, &kn, &on);
    if (st != ATTN_OK) return st;
    size_t esz = attn_elem_size(attn_dtype_elem(attn_model_dtype(e->model)));
    if (qn && ((st = attn__staging(e, qn, esz, &e->q, &e->q_bytes)) != ATTN_OK ||
               (st = attn__staging(e, kn, esz, &e->k, &e->k_bytes)) != ATTN_OK ||
               (st = attn__staging(e, kn, esz, &e->v, &ignored)) != ATTN_OK ||
               (st = attn__staging(e, on, esz, &e->out, &e->out_bytes)) != ATTN_OK))
        return st;
    if (e->mla_scratch_size && (st = attn_device_alloc(e->devs[0].dev, e->mla_scratch_size,
                                                       ATTN_MEM_STEP, &e->mla_scratch)) != ATTN_OK)
        return attn__engine_fail(e, st, "engine: MLA scratch: %s", attn_last_error());
    return attn__engine_device_buffers(e);
}
