/* Engine startup before the kernels: one selection per model group, the
 * KV-cache groups (vLLM's hybrid split) and encoder groups, the block size,
 * each group's layout and pool, and the metadata builders. Each step
 * records its exact failure message in the engine (attn__engine_fail). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine.h"
#include "attn/log.h"
#include "attn/registry.h"
#include "engine/engine_impl.h"
#include "model/model_impl.h"
#include "util/error.h"

#define ATTN__CPU_KV_SPACE ((uint64_t)4 << 30) /* CPU KV budget before the fraction */

/* Whether vLLM's kv_cache_dtype_skip_layers keeps model group mg's layers
 * at the model's dtype: "sliding_window" names every sliding-window layer,
 * a number one layer. The list must treat the group's layers alike. */
static attn_status attn__kv_skip_group(const attn_model *m, int mg, const char *list, bool *skip)
{
    *skip = false;
    if (!list || !*list) return ATTN_OK;
    const attn_layer_spec *spec = attn_model_group_spec(m, mg);
    const int *layers = NULL;
    int n = attn_model_group_layers(m, mg, &layers), listed = 0, first_out = -1, first_in = -1;
    bool window = false;
    bool *named = calloc((size_t)(attn_model_num_layers(m) + 1), sizeof *named);
    if (!named) return attn__fail(ATTN_OUT_OF_MEMORY, "kv_cache_dtype_skip_layers: out of memory");
    for (const char *t = list; *t;) {
        size_t len = strcspn(t, ",");
        char tok[32];
        attn_status st = ATTN_OK;
        if (len == 0 || len >= sizeof tok) {
            st = attn__fail(ATTN_INVALID_ARGUMENT,
                            "kv_cache_dtype_skip_layers: empty or overlong entry in '%s'", list);
        } else {
            memcpy(tok, t, len);
            tok[len] = '\0';
            char *end = NULL;
            long idx = strtol(tok, &end, 10);
            if (!strcmp(tok, "sliding_window"))
                window = true;
            else if (end != tok && !*end && idx >= 0 && idx < attn_model_num_layers(m))
                named[idx] = true;
            else
                st = attn__fail(ATTN_INVALID_ARGUMENT,
                                "kv_cache_dtype_skip_layers: '%s' is neither sliding_window nor a "
                                "layer index of %s (0 to %d)",
                                tok, attn_model_name(m), attn_model_num_layers(m) - 1);
        }
        if (st != ATTN_OK) {
            free(named);
            return st;
        }
        t += len;
        if (*t == ',') t++;
    }
    for (int i = 0; i < n; i++) {
        bool in = named[layers[i]] || (window && spec->sliding_window > 0);
        listed += in;
        if (in && first_in < 0) first_in = layers[i];
        if (!in && first_out < 0) first_out = layers[i];
    }
    free(named);
    if (listed > 0 && listed < n)
        return attn__fail(ATTN_UNSUPPORTED,
                          "kv_cache_dtype_skip_layers names layer %d but not layer %d of the same "
                          "layer group %d of %s: libattn keeps one KV dtype per group of equal "
                          "layers",
                          first_in, first_out, mg, attn_model_name(m));
    *skip = listed == n && n > 0;
    return ATTN_OK;
}

attn_status attn_engine_select_group(const attn_platform *p, const attn_model *m, int model_group,
                                     const attn_group_launch *l, attn_group_choice *out)
{
    ATTN__CHECK_NULL(m);
    ATTN__CHECK_NULL(l);
    ATTN__CHECK_NULL(out);
    memset(out, 0, sizeof *out);
    const attn_layer_spec *spec = attn_model_group_spec(m, model_group);
    if (!spec)
        return attn__fail(ATTN_OUT_OF_RANGE, "model %s has no layer group %d", attn_model_name(m),
                          model_group);
    attn_selector_config *c = &out->config;
    attn_model_selector_config(m, spec, l->kv_cache_dtype, l->block_size, c);
    bool skip = false;
    attn_status st = attn__kv_skip_group(m, model_group, l->kv_cache_dtype_skip_layers, &skip);
    if (st != ATTN_OK) return st; /* the config stays the group's, without a selection */
    if (skip) c->kv_cache_dtype = ATTN_KV_AUTO;
    /* the selection's cache key and ROCm's packed-run rules read the run's */
    c->run_kv_cache_dtype = l->kv_cache_dtype;
    if (l->dtype) c->dtype = *l->dtype;
    c->use_non_causal = c->use_non_causal || l->non_causal;
    c->use_batch_invariant = c->use_batch_invariant || l->batch_invariant;
    out->requested = attn_requested_for(c, l->backend, l->per_kind);
    return attn_select(p, out->requested, c, &out->selection);
}

attn_status attn__engine_select_all(attn_engine *e)
{
    const attn_model *m = e->model;
    e->num_model_groups = attn_model_num_groups(m);
    bool oom = false;
    e->selections = attn__eng_calloc((size_t)e->num_model_groups, sizeof *e->selections, &oom);
    e->requested = attn__eng_calloc((size_t)e->num_model_groups, sizeof *e->requested, &oom);
    e->selcfgs = attn__eng_calloc((size_t)e->num_model_groups, sizeof *e->selcfgs, &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    attn_group_launch l = {.backend = e->cfg.backend,
                           .per_kind = e->cfg.per_kind,
                           .kv_cache_dtype = e->cfg.kv_cache_dtype,
                           .block_size = e->cfg.block_size,
                           .kv_cache_dtype_skip_layers = e->cfg.kv_cache_dtype_skip_layers};
    for (int mg = 0; mg < e->num_model_groups; mg++) {
        attn_group_choice ch;
        attn_status st = attn_engine_select_group(e->platform, m, mg, &l, &ch);
        const attn_selection *sel = ch.selection;
        e->selections[mg] = sel;
        e->selcfgs[mg] = ch.config;
        if (ch.requested) snprintf(e->requested[mg], sizeof e->requested[mg], "%s", ch.requested);
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

/* A group record for model group mg's layers [layers, layers + n). */
static attn_status attn__group_init(attn_engine *e, attn__eng_group *gr, int mg, const int *layers,
                                    int n)
{
    bool oom = false;
    gr->model_group = mg;
    gr->num_layers = n;
    gr->layers = attn__eng_calloc((size_t)(n ? n : 1), sizeof(int), &oom);
    if (oom) return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory");
    memcpy(gr->layers, layers, sizeof(int) * (size_t)n);
    gr->spec = *attn_model_group_spec(e->model, mg);
    gr->selcfg = e->selcfgs[mg];
    /* the group's own KV dtype: the run's, or "auto" for skipped layers */
    attn_model_layer_params(e->model, &gr->spec, gr->selcfg.kv_cache_dtype, &gr->params);
    gr->kind = attn_kv_kind_of(&gr->selcfg);
    gr->sel = e->selections[mg];
    gr->requested = e->requested[mg][0] ? e->requested[mg] : NULL;
    gr->backend = attn_selection_backend_object(gr->sel);
    gr->share_with = -1;
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
attn_status attn__engine_make_groups(attn_engine *e)
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
            attn_status st =
                attn__group_init(e, gr, mg, layers + off, n - off < per ? n - off : per);
            if (st != ATTN_OK) return st;
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
attn_status attn__engine_make_enc_groups(attn_engine *e)
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
        const int *layers;
        int nl = attn_model_group_layers(m, mg, &layers);
        attn_status st = attn__group_init(e, &e->enc[g++], mg, layers, nl);
        if (st != ATTN_OK) return st;
    }
    return ATTN_OK;
}

int attn__engine_kv_heads(const attn__eng_group *g)
{
    return g->spec.use_mla ? 1 : g->spec.num_kv_heads;
}

static attn_status attn__layout(attn_engine *e, attn__eng_group *g, int num_blocks)
{
    const attn_backend_desc *d = g->backend->desc;
    attn_kv_layout l = attn_kv_layout_resolve(d, e->platform, e->cfg.kv_layout);
    attn_status st = attn_kv_layout_compute(
        d, l, num_blocks, e->block_size, attn__engine_kv_heads(g), g->spec.head_size,
        g->spec.head_size_v, g->selcfg.kv_cache_dtype, attn_model_dtype(e->model), &g->layout);
    if (st != ATTN_OK)
        return attn__engine_fail(e, st, "KV cache layout of %s for KV group %d: %s", d->name,
                                 (int)(g - e->groups), attn_last_error());
    /* An MLA row is [latent | rope]; the kernels learn where the latent ends
     * from head_size_v rather than assuming DeepSeek's 64-wide rope. */
    if (g->spec.use_mla && g->spec.kv_lora_rank > 0)
        g->layout.view.head_size_v = g->spec.kv_lora_rank;
    return ATTN_OK;
}

attn_status attn__engine_size_pools(attn_engine *e)
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

attn_builder_init attn__engine_builder_init(const attn_engine *e, const attn__eng_group *g,
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

attn_status attn__engine_create_builders(attn_engine *e)
{
    int threshold = 0;
    for (int g = 0; g < e->num_groups; g++) {
        attn__eng_group *gr = &e->groups[g];
        /* the metadata is the native kernel's: built on the backend's device */
        attn_status st = attn__engine_device(e, gr->backend, &gr->builder_dev);
        if (st != ATTN_OK) return st;
        attn_builder_init init = attn__engine_builder_init(e, gr, gr->backend->desc);
        init.device = gr->builder_dev->dev;
        init.device_state = gr->builder_dev->dev->state;
        st = gr->builder.create(&init, &gr->builder_state);
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
