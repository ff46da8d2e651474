/* Engine accessors: the startup summary, per-group facts, the last step's
 * metadata and the block accounting. */
#include <string.h>

#include "attn/engine.h"
#include "engine/engine_impl.h"
#include "util/error.h"

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

/* The fields KV and encoder groups share; the cache fields stay zero. */
static void attn__group_info(const attn_engine *e, const attn__eng_group *g,
                             attn_engine_group_info *out)
{
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
    out->device =
        g->mode != ATTN_KERNEL_NONE && g->run.dev ? attn_device_name(g->run.dev->dev) : NULL;
    out->layers_run = g->mode == ATTN_KERNEL_NONE ? 0 : g->layers_run;
    out->params = &g->params;
    out->max_num_reqs = e->max_seqs;
    out->max_num_tokens = e->max_tokens;
    out->max_blocks_per_req = e->max_blocks;
}

attn_status attn_engine_group_info_get(const attn_engine *e, int group, attn_engine_group_info *out)
{
    ATTN__CHECK_NULL(e);
    ATTN__CHECK_NULL(out);
    const attn__eng_group *g = attn__group(e, group);
    if (!g)
        return attn__fail(ATTN_OUT_OF_RANGE, "engine: no KV group %d (the engine has %d)", group,
                          attn_engine_num_groups(e));
    attn__group_info(e, g, out);
    out->builder_type = g->builder.type_name;
    out->reorder_batch_threshold = g->builder.reorder_batch_threshold;
    out->layout = g->layout.layout;
    out->kv_shape = g->layout.shape;
    out->kv_elem = g->layout.elem;
    out->bytes_per_block = g->layout.bytes_per_block * (uint64_t)g->num_layers;
    out->num_blocks = e->num_blocks;
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
    attn__group_info(e, g, out);
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
