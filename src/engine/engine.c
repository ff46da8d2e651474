/* Engine create, free and the startup sequence (its steps are in
 * engine_groups.c and engine_kernels.c, the accessors in engine_info.c).
 *
 * Contract: attn_engine_create runs the startup sequence once, in order
 * (plugins, platform, one selection per model group, KV-cache groups, block
 * size, pools and layouts, builders, kernels); the first failure stops it
 * and leaves the engine FAILED with the failing step's exact message, and a
 * failed engine admits nothing. After startup each KV group holds a const
 * copy of its backend's builder and kernel ops: the step loop
 * (scheduler.c) calls through them and never resolves a name again. The
 * engine owns every buffer a step writes, sized from the maxima here. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine.h"
#include "attn/log.h"
#include "attn/plugin.h"
#include "engine/engine_impl.h"
#include "util/abi.h"
#include "util/error.h"

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

void *attn__eng_calloc(size_t n, size_t size, bool *oom)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) *oom = true;
    return p;
}

static attn_status attn__startup(attn_engine *e)
{
    attn_status st = attn__engine_open_host(e);
    if (st != ATTN_OK) return st;
    st = attn_plugins_load();
    if (st != ATTN_OK) return attn__engine_fail(e, st, "plugins: %s", attn_last_error());
    if (!e->platform) {
        st = attn_platform_current(&e->platform);
        if (st != ATTN_OK) return attn__engine_fail(e, st, "platform: %s", attn_last_error());
    }
    if ((st = attn__engine_select_all(e)) != ATTN_OK ||
        (st = attn__engine_make_groups(e)) != ATTN_OK ||
        (st = attn__engine_make_enc_groups(e)) != ATTN_OK ||
        (st = attn__engine_size_pools(e)) != ATTN_OK ||
        (st = attn__engine_create_builders(e)) != ATTN_OK)
        return st;
    for (int g = 0; g < e->num_groups; g++)
        if ((st = attn__engine_setup_kernels(e, &e->groups[g])) != ATTN_OK) return st;
    for (int g = 0; g < e->num_enc; g++)
        if ((st = attn__engine_setup_enc_kernels(e, &e->enc[g])) != ATTN_OK) return st;
    if ((st = attn__engine_alloc_buffers(e)) != ATTN_OK ||
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
        attn__engine_kernel_free(gr, &gr->run);
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
        attn__engine_kernel_free(gr, &gr->run);
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
    free(e->selcfgs);
    free(e->sched);
    free(e->order);
    free(e->qlens);
    free(e->qsl);
    free(e->seq_lens);
    free(e->positions);
    free(e->is_prefilling);
    free(e->token_req_id);
    attn__engine_devices_free(e); /* last: caches, kernels and builders used them */
    free(e);
}
