/* Engine startup and accessors.
 *
 * Contract: attn_engine_create runs the startup sequence once, in order
 * (plugins, platform, one selection per model group, KV-cache groups, block
 * size, pools and layouts, builders, kernels); the first failure stops it
 * and leaves the engine FAILED with the failing step's exact message, and a
 * failed engine admits nothing. After startup each KV group holds a const
 * copy of its backend's builder and kernel ops: the step loop
 * (scheduler.c) calls through them and never resolves a name again. The
 * engine owns every buffer a step writes, sized from the maxima here. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine.h"
#include "attn/log.h"
#include "attn/mla.h"
#include "attn/plugin.h"
#include "attn/registry.h"
#include "backends/reference/ref_mla.h"
#include "engine/engine_impl.h"
#include "metadata/builders.h"
#include "model/model_impl.h"
#include "util/abi.h"
#include "util/error.h"
#include "util/numeric.h"

/* The catalog references the builders weakly (src/registry/builders_weak.h)
 * and a static link pulls archive members only for strong references: name
 * them here, where every program that serves pulls this file in. */
const attn_builder_ops *const attn__engine_builder_families[] = {
    &attn__builder_flash_attn, &attn__builder_flashinfer, &attn__builder_triton,
    &attn__builder_rocm,       &attn__builder_flex,
};

#define ATTN__CPU_KV_SPACE ((uint64_t)4 << 30) /* CPU KV budget before the fraction */

void attn_engine_config_init(attn_engine_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = sizeof *cfg;
    cfg->kv_cache_dtype = ATTN_KV_AUTO;
    cfg->run_kernels = true;
}

attn_status attn__engine_fail(attn_engine *e, attn_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof e->error, fmt, ap);
    va_end(ap);
    e->state = ATTN_ENGINE_FAILED;
    e->status = st;
    return attn__fail(st, "%s", e->error);
}

static void *attn__eng_calloc(size_t n, size_t size, bool *oom)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) *oom = true;
    return p;
}

/* ---- startup steps -------------------------------------------------------- */

static attn_status attn__select_all(attn_engine *e)
{
    const attn_model *m = e->model;
    e->num_model_groups = attn_model_num_groups(m);
    bool oom = false;
    e->selections = attn__eng_calloc((size_t)e->num_model_groups, sizeof *e->selections, &oom);
    e->requested = attn__eng_calloc((size_t)e->num_model_groups, sizeof *e->requested, &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    for (int mg = 0; mg < e->num_model_groups; mg++) {
        const attn_layer_spec *spec = attn_model_group_spec(m, mg);
        attn_selector_config sc;
        attn_model_selector_config(m, spec, e->cfg.kv_cache_dtype, e->cfg.block_size, &sc);
        const char *req = attn_requested_for(&sc, e->cfg.backend, e->cfg.per_kind);
        if (req) snprintf(e->requested[mg], sizeof e->requested[mg], "%s", req);
        const attn_selection *sel = NULL;
        attn_status st = attn_select(e->platform, req, &sc, &sel);
        e->selections[mg] = sel;
        if (st != ATTN_OK) {
            const char *msg = sel ? attn_selection_message(sel) : NULL;
            return attn__engine_fail(e, st, "%s", msg ? msg : attn_last_error());
        }
        const attn_backend *b = attn_selection_backend_object(sel);
        if (!b || !b->desc)
            return attn__engine_fail(e, ATTN_INTERNAL, "selection of %s returned no backend object",
                                     attn_selection_backend(sel));
    }
    return ATTN_OK;
}

static bool attn__is_kv_group(const attn_model *m, int mg)
{
    /* Decoder self-attention keeps the paged cache the step loop drives;
     * encoder layers run on the pass's own K/V, cross attention on the
     * encoder's (neither is part of a decoder step here). */
    const attn_layer_spec *s = attn_model_group_spec(m, mg);
    return s && s->attn_type == ATTN_TYPE_DECODER && attn_layer_spec_has_kv_cache(s);
}

/* vLLM's hybrid grouping: with several specs, each spec's layers are cut into
 * groups of the smallest spec's layer count, so every group has about the
 * same number of layers (and one block table each). */
static attn_status attn__make_groups(attn_engine *e)
{
    const attn_model *m = e->model;
    int nkv = 0, group_size = 0;
    for (int mg = 0; mg < e->num_model_groups; mg++) {
        if (!attn__is_kv_group(m, mg)) continue;
        int n = attn_model_group_layers(m, mg, NULL);
        group_size = nkv == 0 || n < group_size ? n : group_size;
        nkv++;
    }
    int total = 0;
    for (int mg = 0; mg < e->num_model_groups; mg++)
        if (attn__is_kv_group(m, mg)) {
            int n = attn_model_group_layers(m, mg, NULL);
            total += nkv > 1 ? (n + group_size - 1) / group_size : 1;
        }
    e->num_groups = total;
    if (total == 0) return ATTN_OK;
    bool oom = false;
    e->groups = attn__eng_calloc((size_t)total, sizeof *e->groups, &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    int g = 0;
    for (int mg = 0; mg < e->num_model_groups; mg++) {
        if (!attn__is_kv_group(m, mg)) continue;
        const int *layers;
        int n = attn_model_group_layers(m, mg, &layers);
        int per = nkv > 1 ? group_size : n;
        for (int off = 0; off < n; off += per, g++) {
            attn__eng_group *gr = &e->groups[g];
            gr->model_group = mg;
            gr->num_layers = n - off < per ? n - off : per;
            gr->layers = attn__eng_calloc((size_t)gr->num_layers, sizeof(int), &oom);
            if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
            memcpy(gr->layers, layers + off, sizeof(int) * (size_t)gr->num_layers);
            gr->spec = *attn_model_group_spec(m, mg);
            attn_model_selector_config(m, &gr->spec, e->cfg.kv_cache_dtype, e->cfg.block_size,
                                       &gr->selcfg);
            attn_model_layer_params(m, &gr->spec, e->cfg.kv_cache_dtype, &gr->params);
            gr->kind = attn_kv_kind_of(&gr->selcfg);
            gr->sel = e->selections[mg];
            gr->requested = e->requested[mg][0] ? e->requested[mg] : NULL;
            gr->backend = attn_selection_backend_object(gr->sel);
            if (!gr->backend->desc->builder)
                return attn__engine_fail(e, ATTN_UNSUPPORTED,
                                         "backend %s has no metadata builder in this build",
                                         gr->backend->desc->name);
            gr->builder = *gr->backend->desc->builder; /* resolve once: a const copy */
        }
    }
    return ATTN_OK;
}

static bool attn__is_encoder_group(const attn_model *m, int mg)
{
    const attn_layer_spec *s = attn_model_group_spec(m, mg);
    return s && !attn__is_kv_group(m, mg) &&
           (s->attn_type == ATTN_TYPE_ENCODER_ONLY || s->attn_type == ATTN_TYPE_ENCODER);
}

/* One encoder group per model group: without a paged cache there is no
 * block table to keep per group, so no hybrid split either. */
static attn_status attn__make_enc_groups(attn_engine *e)
{
    const attn_model *m = e->model;
    int n = 0;
    for (int mg = 0; mg < e->num_model_groups; mg++)
        n += attn__is_encoder_group(m, mg);
    e->num_enc = n;
    e->encoder_only = n > 0 && e->num_groups == 0;
    if (n == 0) return ATTN_OK;
    bool oom = false;
    e->enc = attn__eng_calloc((size_t)n, sizeof *e->enc, &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    int g = 0;
    for (int mg = 0; mg < e->num_model_groups; mg++) {
        if (!attn__is_encoder_group(m, mg)) continue;
        attn__eng_group *gr = &e->enc[g++];
        const int *layers;
        gr->model_group = mg;
        gr->num_layers = attn_model_group_layers(m, mg, &layers);
        gr->layers =
            attn__eng_calloc((size_t)(gr->num_layers ? gr->num_layers : 1), sizeof(int), &oom);
        if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
        memcpy(gr->layers, layers, sizeof(int) * (size_t)gr->num_layers);
        gr->spec = *attn_model_group_spec(m, mg);
        attn_model_selector_config(m, &gr->spec, e->cfg.kv_cache_dtype, e->cfg.block_size,
                                   &gr->selcfg);
        attn_model_layer_params(m, &gr->spec, e->cfg.kv_cache_dtype, &gr->params);
        gr->kind = attn_kv_kind_of(&gr->selcfg);
        gr->sel = e->selections[mg];
        gr->requested = e->requested[mg][0] ? e->requested[mg] : NULL;
        gr->backend = attn_selection_backend_object(gr->sel);
        gr->share_with = -1;
    }
    return ATTN_OK;
}

static int attn__kv_heads(const attn__eng_group *g)
{
    return g->spec.use_mla ? 1 : g->spec.num_kv_heads;
}

static attn_status attn__layout(attn_engine *e, attn__eng_group *g, int num_blocks)
{
    const attn_backend_desc *d = g->backend->desc;
    attn_kv_layout l = attn_kv_layout_resolve(d, e->platform, e->cfg.kv_layout);
    attn_status st = attn_kv_layout_compute(
        d, l, num_blocks, e->block_size, attn__kv_heads(g), g->spec.head_size, g->spec.head_size_v,
        e->cfg.kv_cache_dtype, attn_model_dtype(e->model), &g->layout);
    if (st != ATTN_OK)
        return attn__engine_fail(e, st, "KV cache layout of %s for KV group %d: %s", d->name,
                                 (int)(g - e->groups), attn_last_error());
    /* An MLA row is [latent | rope]; the kernels learn where the latent ends
     * from head_size_v rather than assuming DeepSeek's 64-wide rope. */
    if (g->spec.use_mla && g->spec.kv_lora_rank > 0)
        g->layout.view.head_size_v = g->spec.kv_lora_rank;
    return ATTN_OK;
}

static attn_status attn__size_pools(attn_engine *e)
{
    int w = e->cfg.dcp_comm ? attn_comm_size(e->cfg.dcp_comm) : 1;
    e->dcp_world = w > 1 ? w : 1;
    if (e->num_groups == 0) {
        snprintf(e->block_size_source, sizeof e->block_size_source, "no KV cache");
        e->max_model_len = e->cfg.max_model_len > 0 ? e->cfg.max_model_len : 8192;
        return ATTN_OK;
    }
    const attn_backend_desc *first = e->groups[0].backend->desc;
    if (e->cfg.block_size > 0) {
        e->block_size = e->cfg.block_size;
        snprintf(e->block_size_source, sizeof e->block_size_source, "--block-size");
    } else {
        e->block_size = attn_backend_preferred_block_size(first, e->platform, 16);
        snprintf(e->block_size_source, sizeof e->block_size_source, "preferred by %s", first->name);
        if (e->block_size != 16)
            attn_log(ATTN_LOG_INFO, "Setting kv cache block size to %d for %s backend.",
                     e->block_size, first->name);
    }
    for (int g = 0; g < e->num_groups; g++) {
        const attn_backend_desc *d = e->groups[g].backend->desc;
        if (!attn_backend_supports_block_size(d, e->platform, e->block_size))
            return attn__engine_fail(e, ATTN_UNSUPPORTED,
                                     "Block size %d is not supported by backend %s (KV group %d)",
                                     e->block_size, d->name, g);
    }
    /* Bytes of one block across every layer of every group. */
    uint64_t per_block = 0;
    for (int g = 0; g < e->num_groups; g++) {
        attn_status st = attn__layout(e, &e->groups[g], 1);
        if (st != ATTN_OK) return st;
        per_block += e->groups[g].layout.bytes_per_block * (uint64_t)e->groups[g].num_layers;
    }
    if (e->cfg.num_blocks > 0) {
        e->num_blocks = e->cfg.num_blocks;
    } else {
        bool cpu = attn_platform_get_kind(e->platform) == ATTN_PLATFORM_CPU;
        uint64_t mem = cpu ? ATTN__CPU_KV_SPACE : attn_platform_memory_bytes(e->platform);
        if (mem == 0) mem = ATTN__CPU_KV_SPACE;
        double frac = e->cfg.kv_memory_fraction > 0 ? e->cfg.kv_memory_fraction : 0.9;
        double nb = floor((double)mem * frac / (double)per_block);
        if (nb < 1)
            return attn__engine_fail(e, ATTN_OUT_OF_MEMORY,
                                     "No available memory for the cache blocks: one block needs "
                                     "%llu bytes, the budget is %.0f bytes",
                                     (unsigned long long)per_block, (double)mem * frac);
        e->num_blocks = nb > (double)(1 << 24) ? 1 << 24 : (int)nb;
    }
    if (e->dcp_world > 1024 || e->block_size > INT32_MAX / e->dcp_world)
        return attn__engine_fail(e, ATTN_INVALID_ARGUMENT,
                                 "DCP world size %d with block size %d: out of range", e->dcp_world,
                                 e->block_size);
    e->sched_block_size = e->block_size * e->dcp_world;
    int64_t capacity = (int64_t)e->num_blocks * e->sched_block_size;
    if (e->cfg.max_model_len > 0) {
        if (e->cfg.max_model_len > capacity)
            return attn__engine_fail(
                e, ATTN_OUT_OF_MEMORY,
                "The model's max seq len (%d) is larger than the maximum number of tokens that can "
                "be stored in KV cache (%lld). Try increasing the number of blocks or decreasing "
                "max_model_len when initializing the engine.",
                e->cfg.max_model_len, (long long)capacity);
        e->max_model_len = e->cfg.max_model_len;
    } else {
        e->max_model_len = capacity < 8192 ? (int)capacity : 8192;
    }
    e->max_blocks = (e->max_model_len + e->sched_block_size - 1) / e->sched_block_size;
    e->kv_bytes = per_block * (uint64_t)e->num_blocks;
    for (int g = 0; g < e->num_groups; g++) {
        attn__eng_group *gr = &e->groups[g];
        attn_status st = attn__layout(e, gr, e->num_blocks);
        if (st == ATTN_OK)
            st = attn_block_pool_create(e->num_blocks, e->sched_block_size, &gr->pool);
        if (st != ATTN_OK)
            return e->state == ATTN_ENGINE_FAILED
                       ? st
                       : attn__engine_fail(e, st, "KV group %d: %s", g, attn_last_error());
    }
    return ATTN_OK;
}

static attn_builder_init attn__builder_init(const attn_engine *e, const attn__eng_group *g,
                                            const attn_backend_desc *d)
{
    attn_builder_init init = {
        .desc = d,
        .layer = &g->params,
        .block_size = e->block_size,
        .num_blocks = e->num_blocks,
        .max_num_reqs = e->max_seqs,
        .max_num_tokens = e->max_tokens,
        .max_blocks_per_req = e->max_blocks,
    };
    return init;
}

static attn_status attn__create_builders(attn_engine *e)
{
    int threshold = 0;
    for (int g = 0; g < e->num_groups; g++) {
        attn__eng_group *gr = &e->groups[g];
        attn_builder_init init = attn__builder_init(e, gr, gr->backend->desc);
        attn_status st = gr->builder.create(&init, &gr->builder_state);
        if (st != ATTN_OK)
            return attn__engine_fail(e, st, "%s metadata builder for KV group %d: %s",
                                     gr->backend->desc->name, g, attn_last_error());
        int t = gr->builder.reorder_batch_threshold;
        if (t > 0 && (threshold == 0 || t < threshold)) threshold = t;
        /* Within-step reuse pairs are fixed by the groups' builders and
         * specs, so they are found once here, not searched every step. */
        gr->share_with = -1;
        for (int h = 0; h < g && gr->builder.update_block_table; h++) {
            const attn__eng_group *hg = &e->groups[h];
            if (hg->builder.supports_update_block_table &&
                !strcmp(hg->builder.type_name, gr->builder.type_name) &&
                attn__layer_spec_equal(&hg->spec, &gr->spec)) {
                gr->share_with = h;
                break;
            }
        }
    }
    e->reorder_threshold = threshold;
    return ATTN_OK;
}

/* ---- kernels -------------------------------------------------------------- */

static bool attn__kernel_fits(const attn_backend *b, bool mla)
{
    return b && b->kernel &&
           (mla ? b->kernel->forward_mqa && b->kernel->forward_mha : b->kernel->forward != NULL);
}

/* A CPU kernel that can stand in for a descriptor-only backend: resolvable,
 * with the right entry points, and valid for this layer on a CPU machine. */
static const attn_backend *attn__stand_in(attn_engine *e, attn__eng_group *g, const char *name)
{
    const attn_backend *b = NULL;
    if (attn_backend_resolve(e->emu_platform, name, &b) != ATTN_OK ||
        !attn__kernel_fits(b, g->spec.use_mla)) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "%s: %.300s", name,
                 b ? "no kernel for this layer type" : attn_last_error());
        attn_clear_error();
        return NULL;
    }
    attn_selector_config sc = g->selcfg;
    sc.block_size = e->block_size;
    char reasons[ATTN_REASONS_MAX][ATTN_REASON_MAX];
    int n = attn_backend_validate(b->desc, e->emu_platform, &sc, reasons, ATTN_REASONS_MAX);
    if (n > 0) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "%s cannot run this layer: %.300s", name,
                 reasons[0]);
        return NULL;
    }
    return b;
}

static attn_status attn__kernel_init(attn_engine *e, attn__eng_group *g, attn__eng_kernel *k,
                                     const attn_backend *b, bool own_builder)
{
    k->backend = b;
    k->ops = *b->kernel; /* const copy */
    k->self = *b;
    k->self.kernel = &k->ops;
    k->own_builder = own_builder;
    if (own_builder) {
        if (!b->desc->builder)
            return attn__engine_fail(e, ATTN_UNSUPPORTED, "%s has no metadata builder",
                                     b->desc->name);
        k->builder = *b->desc->builder;
        attn_builder_init init = attn__builder_init(e, g, b->desc);
        attn_status st = k->builder.create(&init, &k->builder_state);
        if (st != ATTN_OK)
            return attn__engine_fail(e, st, "%s metadata builder: %s", b->desc->name,
                                     attn_last_error());
    }
    bool oom = false;
    k->impl = attn__eng_calloc((size_t)g->layers_run, sizeof(void *), &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    for (int l = 0; l < g->layers_run && k->ops.create; l++) {
        attn_status st = k->ops.create(&g->params, &k->impl[l]);
        if (st != ATTN_OK)
            return attn__engine_fail(e, st, "%s kernel for layer %d: %s", b->desc->name,
                                     g->run_layers[l], attn_last_error());
    }
    return ATTN_OK;
}

static void attn__kernel_free(attn__eng_group *g, attn__eng_kernel *k)
{
    if (k->impl && k->ops.destroy)
        for (int l = 0; l < g->layers_run; l++)
            if (k->impl[l]) k->ops.destroy(k->impl[l]);
    free(k->impl);
    if (k->own_builder && k->builder_state && k->builder.destroy)
        k->builder.destroy(k->builder_state);
    memset(k, 0, sizeof *k);
}

static attn_status attn__setup_kernels(attn_engine *e, attn__eng_group *g)
{
    if (!e->cfg.run_kernels) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "kernels disabled");
        return ATTN_OK;
    }
    if (!g->layout.writable) {
        snprintf(g->kernel_note, sizeof g->kernel_note,
                 "the %s cache format cannot be written here",
                 attn_kv_dtype_name(e->cfg.kv_cache_dtype));
        return ATTN_OK;
    }
    if (g->spec.use_sparse) {
        snprintf(g->kernel_note, sizeof g->kernel_note,
                 "sparse MLA needs an indexer's top-k tokens: metadata only");
        return ATTN_OK;
    }
    const attn_backend *b = g->backend;
    bool native = attn__kernel_fits(b, g->spec.use_mla);
    const attn_backend *stand_in = NULL;
    if (!native) {
        stand_in = attn__stand_in(e, g, g->spec.use_mla ? "CPU_MLA" : "CPU_ATTN");
        if (!stand_in && !g->spec.use_mla) stand_in = attn__stand_in(e, g, "REFERENCE");
        if (!stand_in) return ATTN_OK; /* kernel_note says why */
    }
    int want = e->cfg.layers_to_run;
    g->layers_run = want == 0 ? 1 : want < 0 || want > g->num_layers ? g->num_layers : want;
    bool oom = false;
    g->run_layers = attn__eng_calloc((size_t)g->layers_run, sizeof(int), &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    memcpy(g->run_layers, g->layers, sizeof(int) * (size_t)g->layers_run);
    attn_status st = attn_kv_cache_create(&g->layout, g->layers_run, &g->cache);
    if (st != ATTN_OK)
        return attn__engine_fail(e, st, "KV cache memory for KV group %d: %s", (int)(g - e->groups),
                                 attn_last_error());
    const int H = g->spec.num_heads;
    if (g->spec.has_sink) {
        g->sinks = attn__eng_calloc((size_t)H, sizeof(float), &oom);
        if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
        for (int h = 0; h < H; h++)
            g->sinks[h] = attn__synth(e->cfg.seed, 0x51, (uint64_t)h);
        g->params.sinks = g->sinks;
    }
    if (g->spec.use_mla) {
        /* W_UK [heads][qk_nope][kv_lora_rank], W_UV [heads][kv_lora_rank][v_head_dim] */
        size_t esz = attn_elem_size(attn_dtype_elem(g->params.dtype));
        size_t nuk = (size_t)H * (size_t)g->spec.qk_nope_head_dim * (size_t)g->spec.kv_lora_rank;
        size_t nuv = (size_t)H * (size_t)g->spec.kv_lora_rank * (size_t)g->spec.v_head_dim;
        g->w_uk = attn__eng_calloc(nuk, esz, &oom);
        g->w_uv = attn__eng_calloc(nuv, esz, &oom);
        if (oom)
            return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: MLA weights: out of memory");
        attn_elem el = attn_dtype_elem(g->params.dtype);
        float su = 1.0f / sqrtf((float)g->spec.kv_lora_rank + 1.0f);
        for (size_t i = 0; i < nuk; i++)
            attn__store_elem(g->w_uk, el, i, attn__synth(e->cfg.seed, 0x55, i) * su);
        for (size_t i = 0; i < nuv; i++)
            attn__store_elem(g->w_uv, el, i, attn__synth(e->cfg.seed, 0x56, i) * su);
    }
    if (native) {
        g->mode = ATTN_KERNEL_NATIVE;
        st = attn__kernel_init(e, g, &g->run, b, false);
    } else {
        g->mode = ATTN_KERNEL_EMULATED;
        st = attn__kernel_init(e, g, &g->run, stand_in, true);
    }
    if (st != ATTN_OK) return st;
    g->kernel_name = g->run.backend->desc->name;
    g->kernel_variant = g->run.ops.variant ? g->run.ops.variant() : NULL;
    g->kernel_note[0] = '\0';
    if (e->cfg.verify) {
        const attn_backend *ref = NULL;
        if (g->spec.use_mla)
            ref = &attn__backend_reference_mla;
        else if (attn_backend_resolve(e->emu_platform, "REFERENCE", &ref) != ATTN_OK)
            ref = NULL;
        if (ref && attn__kernel_fits(ref, g->spec.use_mla) && ref != g->run.backend)
            st = attn__kernel_init(e, g, &g->verify, ref, true);
    }
    return st;
}

/* An encoder group's kernel: the selected backend's own when it has code
 * here, else CPU_ATTN (then REFERENCE) standing in; every call passes K/V
 * directly and no backend metadata, so no builder is created. */
static attn_status attn__setup_enc_kernels(attn_engine *e, attn__eng_group *g)
{
    if (!e->cfg.run_kernels) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "kernels disabled");
        return ATTN_OK;
    }
    if (g->spec.use_mla) {
        snprintf(g->kernel_note, sizeof g->kernel_note, "MLA encoder layers are not driven");
        return ATTN_OK;
    }
    const attn_backend *b = g->backend;
    bool native = attn__kernel_fits(b, false);
    const attn_backend *use = b;
    if (!native) {
        use = attn__stand_in(e, g, "CPU_ATTN");
        if (!use) use = attn__stand_in(e, g, "REFERENCE");
        if (!use) return ATTN_OK; /* kernel_note says why */
    }
    int want = e->cfg.layers_to_run;
    g->layers_run = want == 0 ? 1 : want < 0 || want > g->num_layers ? g->num_layers : want;
    bool oom = false;
    g->run_layers = attn__eng_calloc((size_t)g->layers_run, sizeof(int), &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    memcpy(g->run_layers, g->layers, sizeof(int) * (size_t)g->layers_run);
    const int H = g->spec.num_heads;
    if (g->spec.has_sink) {
        g->sinks = attn__eng_calloc((size_t)H, sizeof(float), &oom);
        if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
        for (int h = 0; h < H; h++)
            g->sinks[h] = attn__synth(e->cfg.seed, 0x51, (uint64_t)h);
        g->params.sinks = g->sinks;
    }
    g->mode = native ? ATTN_KERNEL_NATIVE : ATTN_KERNEL_EMULATED;
    attn_status st = attn__kernel_init(e, g, &g->run, use, false);
    if (st != ATTN_OK) return st;
    g->kernel_name = g->run.backend->desc->name;
    g->kernel_variant = g->run.ops.variant ? g->run.ops.variant() : NULL;
    g->kernel_note[0] = '\0';
    if (e->cfg.verify) {
        const attn_backend *ref = NULL;
        if (attn_backend_resolve(e->emu_platform, "REFERENCE", &ref) != ATTN_OK) {
            ref = NULL;
            attn_clear_error();
        }
        if (ref && attn__kernel_fits(ref, false) && ref != g->run.backend)
            st = attn__kernel_init(e, g, &g->verify, ref, false);
    }
    return st;
}

static attn_status attn__alloc_buffers(attn_engine *e)
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
    /* Synthetic activations, sized for the largest group that runs. */
    size_t qn = 0, kn = 0, on = 0;
    size_t esz = attn_elem_size(attn_dtype_elem(attn_model_dtype(e->model)));
    for (int g = 0; g < e->num_groups; g++) {
        const attn__eng_group *gr = &e->groups[g];
        if (gr->mode == ATTN_KERNEL_NONE) continue;
        const attn_layer_spec *s = &gr->spec;
        size_t qd =
            s->use_mla ? (size_t)(s->qk_nope_head_dim + s->qk_rope_head_dim) : (size_t)s->head_size;
        size_t od = s->use_mla ? (size_t)s->v_head_dim
                               : (size_t)(s->head_size_v ? s->head_size_v : s->head_size);
        size_t kd = s->use_mla ? (size_t)s->head_size
                               : (size_t)attn__kv_heads(gr) *
                                     (size_t)(s->head_size > gr->layout.view.head_size_v
                                                  ? s->head_size
                                                  : gr->layout.view.head_size_v);
        qn = qn > (size_t)s->num_heads * qd ? qn : (size_t)s->num_heads * qd;
        on = on > (size_t)s->num_heads * od ? on : (size_t)s->num_heads * od;
        kn = kn > kd ? kn : kd;
        if (s->use_mla) {
            size_t ss = attn_mla_forward_scratch_size(&gr->params, T);
            e->mla_scratch_size = ss > e->mla_scratch_size ? ss : e->mla_scratch_size;
        }
    }
    for (int g = 0; g < e->num_enc; g++) { /* direct K/V: [tokens][kv_heads][head_size(_v)] */
        const attn__eng_group *gr = &e->enc[g];
        if (gr->mode == ATTN_KERNEL_NONE) continue;
        const attn_layer_spec *s = &gr->spec;
        size_t hv = (size_t)(s->head_size_v ? s->head_size_v : s->head_size);
        size_t hk = (size_t)s->head_size > hv ? (size_t)s->head_size : hv;
        size_t qd = (size_t)s->num_heads * (size_t)s->head_size;
        size_t od = (size_t)s->num_heads * hv;
        size_t kd = (size_t)s->num_kv_heads * hk;
        qn = qn > qd ? qn : qd;
        on = on > od ? on : od;
        kn = kn > kd ? kn : kd;
    }
    if (qn) {
        e->q = attn__eng_calloc((size_t)T * qn, esz, &oom);
        e->k = attn__eng_calloc((size_t)T * kn, esz, &oom);
        e->v = attn__eng_calloc((size_t)T * kn, esz, &oom);
        e->out_bytes = (size_t)T * on * esz;
        e->out = attn__eng_calloc((size_t)T * on, esz, &oom);
        if (e->cfg.verify) e->out_ref = attn__eng_calloc((size_t)T * on, esz, &oom);
    }
    if (e->mla_scratch_size && !oom) {
        e->mla_scratch = aligned_alloc(64, (e->mla_scratch_size + 63) / 64 * 64);
        oom = e->mla_scratch == NULL;
    }
    return oom ? attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory for buffers")
               : ATTN_OK;
}

static attn_status attn__startup(attn_engine *e)
{
    attn_status st = attn_plugins_load();
    if (st != ATTN_OK) return attn__engine_fail(e, st, "plugins: %s", attn_last_error());
    if (!e->platform) {
        st = attn_platform_current(&e->platform);
        if (st != ATTN_OK) return attn__engine_fail(e, st, "platform: %s", attn_last_error());
    }
    if ((st = attn__select_all(e)) != ATTN_OK || (st = attn__make_groups(e)) != ATTN_OK ||
        (st = attn__make_enc_groups(e)) != ATTN_OK || (st = attn__size_pools(e)) != ATTN_OK)
        return st;
    st = attn_platform_open("cpu", &e->emu_platform);
    if (st != ATTN_OK)
        return attn__engine_fail(e, st, "CPU platform for the kernels: %s", attn_last_error());
    if ((st = attn__create_builders(e)) != ATTN_OK) return st;
    for (int g = 0; g < e->num_groups; g++)
        if ((st = attn__setup_kernels(e, &e->groups[g])) != ATTN_OK) return st;
    for (int g = 0; g < e->num_enc; g++)
        if ((st = attn__setup_enc_kernels(e, &e->enc[g])) != ATTN_OK) return st;
    if ((st = attn__alloc_buffers(e)) != ATTN_OK ||
        (st = attn__engine_alloc_requests(e)) != ATTN_OK)
        return st;
    for (int g = 0; g < e->num_groups; g++)
        attn_log(ATTN_LOG_DEBUG, "engine: KV group %d (%d layers) -> %s", g,
                 e->groups[g].num_layers, e->groups[g].backend->desc->name);
    e->state = ATTN_ENGINE_READY;
    e->status = ATTN_OK;
    return ATTN_OK;
}

attn_status attn_engine_create(const attn_engine_config *cfg, attn_engine **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(cfg);
    if (!attn__struct_size_ok(cfg->struct_size, ATTN__V1_ENGINE_CONFIG, sizeof *cfg))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "attn_engine_config.struct_size is %u, expected %zu to %zu (call "
                          "attn_engine_config_init)",
                          cfg->struct_size, ATTN__V1_ENGINE_CONFIG, sizeof *cfg);
    attn_engine_config full; /* an older config: its missing fields take the defaults */
    attn_engine_config_init(&full);
    attn__struct_read(&full, sizeof full, cfg, cfg->struct_size,
                      offsetof(attn_engine_config, struct_size));
    cfg = &full;
    if (!cfg->model) return attn__fail(ATTN_INVALID_ARGUMENT, "attn_engine_create: no model");
    if (cfg->block_size < 0 || cfg->num_blocks < 0 || cfg->max_num_seqs < 0 ||
        cfg->max_num_batched_tokens < 0 || cfg->max_model_len < 0 || cfg->max_waiting < 0 ||
        cfg->block_size > ATTN_MAX_BLOCK_SIZE || cfg->num_blocks > ATTN_MAX_NUM_BLOCKS ||
        cfg->max_num_seqs > ATTN_MAX_NUM_REQS || cfg->max_waiting > ATTN_MAX_NUM_REQS ||
        cfg->max_num_batched_tokens > ATTN_MAX_SEQ_LEN || cfg->max_model_len > ATTN_MAX_SEQ_LEN ||
        cfg->layers_to_run < -1 || !(cfg->kv_memory_fraction >= 0 && cfg->kv_memory_fraction <= 1))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_engine_create: block_size %d, num_blocks %d, max_num_seqs %d, "
                          "max_num_batched_tokens %d, max_model_len %d, max_waiting %d, "
                          "layers_to_run %d, kv_memory_fraction %g: out of range",
                          cfg->block_size, cfg->num_blocks, cfg->max_num_seqs,
                          cfg->max_num_batched_tokens, cfg->max_model_len, cfg->max_waiting,
                          cfg->layers_to_run, cfg->kv_memory_fraction);
    if (cfg->kv_cache_dtype < ATTN_KV_NONE || cfg->kv_cache_dtype >= ATTN_KV_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_engine_create: kv_cache_dtype %d",
                          (int)cfg->kv_cache_dtype);
    attn_engine *e = calloc(1, sizeof *e);
    if (!e) return attn__fail(ATTN_OUT_OF_MEMORY, "attn_engine_create: out of memory");
    e->cfg = *cfg;
    for (int k = 0; k < ATTN_KIND_COUNT; k++)
        e->cfg.per_kind[k] = cfg->per_kind[k];
    e->platform = cfg->platform;
    e->model = cfg->model;
    e->max_seqs = cfg->max_num_seqs ? cfg->max_num_seqs : 256;
    e->max_tokens = cfg->max_num_batched_tokens ? cfg->max_num_batched_tokens : 2048;
    int waiting = cfg->max_waiting ? cfg->max_waiting : 4096;
    e->max_requests = waiting + e->max_seqs;
    e->state = ATTN_ENGINE_FAILED;
    e->status = ATTN_INTERNAL;
    attn_status st = attn__startup(e);
    if (cfg->dcp_comm && attn_comm_size(cfg->dcp_comm) > 1) st = attn__engine_dcp_setup(e, st);
    *out = e;
    if (st != ATTN_OK && e->error[0] == '\0') attn__engine_fail(e, st, "%s", attn_last_error());
    if (st != ATTN_OK) attn__fail(st, "%s", e->error);
    return st;
}

void attn_engine_free(attn_engine *e)
{
    if (!e) return;
    if (e->reqs) attn__engine_release_all(e);
    for (int g = 0; g < e->num_groups; g++) {
        attn__eng_group *gr = &e->groups[g];
        attn__kernel_free(gr, &gr->run);
        attn__kernel_free(gr, &gr->verify);
        attn__engine_dcp_free(gr);
        if (gr->builder_state && gr->builder.destroy) gr->builder.destroy(gr->builder_state);
        attn_kv_cache_free(gr->cache);
        attn_block_pool_free(gr->pool);
        free(gr->layers);
        free(gr->run_layers);
        free(gr->sinks);
        free(gr->w_uk);
        free(gr->w_uv);
        free(gr->block_table);
        free(gr->slot_mapping);
    }
    for (int g = 0; g < e->num_enc; g++) {
        attn__eng_group *gr = &e->enc[g];
        attn__kernel_free(gr, &gr->run);
        attn__kernel_free(gr, &gr->verify);
        free(gr->layers);
        free(gr->run_layers);
        free(gr->sinks);
    }
    free(e->enc);
    free(e->enc_qsl);
    free(e->enc_seq_lens);
    free(e->enc_positions);
    free(e->enc_token_req_id);
    attn__engine_free_requests(e);
    free(e->groups);
    free(e->selections);
    free(e->requested);
    free(e->sched);
    free(e->order);
    free(e->qlens);
    free(e->qsl);
    free(e->seq_lens);
    free(e->positions);
    free(e->is_prefilling);
    free(e->token_req_id);
    free(e->q);
    free(e->k);
    free(e->v);
    free(e->out);
    free(e->out_ref);
    free(e->mla_scratch);
    attn_platform_free(e->emu_platform);
    free(e);
}

/* ---- accessors ------------------------------------------------------------ */

attn_engine_state attn_engine_get_state(const attn_engine *e)
{
    return e ? e->state : ATTN_ENGINE_FAILED;
}

attn_status attn_engine_status(const attn_engine *e)
{
    return e ? e->status : ATTN_NULL_ARGUMENT;
}

const char *attn_engine_error(const attn_engine *e)
{
    return e && e->state == ATTN_ENGINE_FAILED ? e->error : NULL;
}

const attn_platform *attn_engine_platform(const attn_engine *e)
{
    return e ? e->platform : NULL;
}

const attn_model *attn_engine_model(const attn_engine *e)
{
    return e ? e->model : NULL;
}

int attn_engine_block_size(const attn_engine *e)
{
    return e ? e->block_size : 0;
}

const char *attn_engine_block_size_source(const attn_engine *e)
{
    return e ? e->block_size_source : NULL;
}

int attn_engine_num_blocks(const attn_engine *e)
{
    return e ? e->num_blocks : 0;
}

uint64_t attn_engine_kv_bytes(const attn_engine *e)
{
    return e ? e->kv_bytes : 0;
}

int attn_engine_max_model_len(const attn_engine *e)
{
    return e ? e->max_model_len : 0;
}

const attn_selection *attn_engine_selection(const attn_engine *e, int model_group)
{
    if (!e || !e->selections || model_group < 0 || model_group >= e->num_model_groups) return NULL;
    return e->selections[model_group];
}

int attn_engine_num_groups(const attn_engine *e)
{
    return e && e->state == ATTN_ENGINE_READY ? e->num_groups : 0;
}

static const attn__eng_group *attn__group(const attn_engine *e, int g)
{
    if (!e || e->state != ATTN_ENGINE_READY || g < 0 || g >= e->num_groups) return NULL;
    return &e->groups[g];
}

attn_status attn_engine_group_info_get(const attn_engine *e, int group, attn_engine_group_info *out)
{
    ATTN__CHECK_NULL(e);
    ATTN__CHECK_NULL(out);
    const attn__eng_group *g = attn__group(e, group);
    if (!g)
        return attn__fail(ATTN_OUT_OF_RANGE, "engine: no KV group %d (the engine has %d)", group,
                          attn_engine_num_groups(e));
    memset(out, 0, sizeof *out);
    out->model_group = g->model_group;
    out->num_layers = g->num_layers;
    out->layers = g->layers;
    out->kind = g->kind;
    out->backend = g->backend->desc->name;
    out->requested = g->requested;
    out->selection = g->sel;
    out->builder_type = g->builder.type_name;
    out->cg_support = g->backend->desc->cg_support;
    out->reorder_batch_threshold = g->builder.reorder_batch_threshold;
    out->layout = g->layout.layout;
    out->kv_shape = g->layout.shape;
    out->kv_elem = g->layout.elem;
    out->bytes_per_block = g->layout.bytes_per_block * (uint64_t)g->num_layers;
    out->num_blocks = e->num_blocks;
    out->kernel_mode = g->mode;
    out->kernel = g->kernel_name;
    out->kernel_variant = g->kernel_variant;
    out->kernel_note = g->kernel_note[0] ? g->kernel_note : NULL;
    out->layers_run = g->mode == ATTN_KERNEL_NONE ? 0 : g->layers_run;
    return ATTN_OK;
}

int attn_engine_num_encoder_groups(const attn_engine *e)
{
    return e && e->state == ATTN_ENGINE_READY ? e->num_enc : 0;
}

attn_status attn_engine_encoder_group_info_get(const attn_engine *e, int group,
                                               attn_engine_group_info *out)
{
    ATTN__CHECK_NULL(e);
    ATTN__CHECK_NULL(out);
    if (e->state != ATTN_ENGINE_READY || group < 0 || group >= e->num_enc)
        return attn__fail(ATTN_OUT_OF_RANGE, "engine: no encoder group %d (the engine has %d)",
                          group, attn_engine_num_encoder_groups(e));
    const attn__eng_group *g = &e->enc[group];
    memset(out, 0, sizeof *out);
    out->model_group = g->model_group;
    out->num_layers = g->num_layers;
    out->layers = g->layers;
    out->kind = g->kind;
    out->backend = g->backend->desc->name;
    out->requested = g->requested;
    out->selection = g->sel;
    out->cg_support = g->backend->desc->cg_support;
    out->kernel_mode = g->mode;
    out->kernel = g->kernel_name;
    out->kernel_variant = g->kernel_variant;
    out->kernel_note = g->kernel_note[0] ? g->kernel_note : NULL;
    out->layers_run = g->mode == ATTN_KERNEL_NONE ? 0 : g->layers_run;
    return ATTN_OK;
}

const char *attn_engine_group_backend(const attn_engine *e, int group)
{
    const attn__eng_group *g = attn__group(e, group);
    return g ? g->backend->desc->name : NULL;
}

const attn_selection *attn_engine_group_selection(const attn_engine *e, int group)
{
    const attn__eng_group *g = attn__group(e, group);
    return g ? g->sel : NULL;
}

const attn_common_metadata *attn_engine_common_metadata(const attn_engine *e, int group)
{
    const attn__eng_group *g = attn__group(e, group);
    return g && g->have_step ? &g->cm : NULL;
}

const void *attn_engine_group_metadata(const attn_engine *e, int group,
                                       const attn_builder_ops **builder)
{
    const attn__eng_group *g = attn__group(e, group);
    if (builder) *builder = g ? &g->builder : NULL;
    return g && g->have_step ? g->md : NULL;
}

int attn_engine_describe_metadata(const attn_engine *e, int group, char *buf, size_t size,
                                  bool *reused)
{
    const attn__eng_group *g = attn__group(e, group);
    if (reused) *reused = g && g->reused;
    if (!g || !g->have_step || !g->md || !g->builder.describe) return -1;
    return g->builder.describe(g->md, buf, size);
}

attn_status attn_engine_block_stats(const attn_engine *e, int group,
                                    attn_engine_block_accounting *out)
{
    ATTN__CHECK_NULL(e);
    ATTN__CHECK_NULL(out);
    const attn__eng_group *g = attn__group(e, group);
    if (!g) return attn__fail(ATTN_OUT_OF_RANGE, "engine: no KV group %d", group);
    memset(out, 0, sizeof *out);
    attn_block_pool_stats ps;
    attn_block_pool_get_stats(g->pool, &ps);
    out->num_blocks = ps.num_blocks;
    out->num_free = ps.num_free;
    out->num_used = ps.num_used;
    out->total_refs = ps.total_refs;
    out->rejected_releases = ps.rejected_releases;
    for (int i = 0; i < e->num_running; i++) {
        const attn__eng_req *r = &e->reqs[e->running[i]];
        out->held_by_requests +=
            e->lists[(size_t)r->slot * (size_t)e->num_groups + (size_t)group].count;
    }
    for (int i = 0; i < e->num_prefixes; i++)
        out->held_by_prefix_cache += e->prefixes[i].num_blocks;
    out->leaked = out->total_refs - out->held_by_requests - out->held_by_prefix_cache;
    out->consistent = attn_block_pool_check(g->pool) == ATTN_OK;
    if (!out->consistent) attn_clear_error();
    return ATTN_OK;
}

attn_status attn_engine_get_counts(const attn_engine *e, attn_engine_counts *out)
{
    ATTN__CHECK_NULL(e);
    ATTN__CHECK_NULL(out);
    *out = e->counts;
    out->running = e->num_running;
    out->waiting = e->num_waiting;
    return ATTN_OK;
}
