/* The engine's side of decode context parallelism (see attn_engine_config
 * dcp_comm): the startup consensus and one attn_dcp runner per KV group.
 *
 * The consensus runs after the local startup whatever its result: a rank
 * whose startup failed still takes part (its choice is the failure), so no
 * rank waits in a collective for one that gave up. Ranks run the same
 * deterministic scheduler on the same traffic, so their batches and block
 * tables agree step by step without being exchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/backend.h"
#include "attn/dcp.h"
#include "engine/engine_impl.h"
#include "util/error.h"

static void attn__dcp_choice(const attn_engine *e, attn_status startup, char *buf, size_t size)
{
    if (startup != ATTN_OK) {
        snprintf(buf, size, "startup failed (%s)", attn_status_name(startup));
        return;
    }
    int n = 0;
    buf[0] = '\0';
    for (int g = 0; g < e->num_groups && n >= 0 && (size_t)n < size; g++) {
        const attn__eng_group *gr = &e->groups[g];
        n += snprintf(buf + n, size - (size_t)n, "%sbackend %s, layout %s, block size %d",
                      g ? " | " : "", gr->backend->desc->name, attn_layout_name(gr->layout.layout),
                      e->block_size);
    }
    if (e->num_groups == 0) snprintf(buf, size, "no KV cache");
}

static attn_status attn__dcp_group(attn_engine *e, attn__eng_group *g)
{
    if (g->mode == ATTN_KERNEL_NONE) return ATTN_OK;
    attn_dcp_init di = {
        .struct_size = sizeof di,
        .backend = g->run.backend,
        .layer = &g->params,
        .comm = e->cfg.dcp_comm,
        .interleave = e->cfg.dcp_interleave,
        .block_size = e->block_size,
        .num_blocks = e->num_blocks,
        .max_num_tokens = e->max_tokens,
        .max_blocks_per_req = e->max_blocks,
        .device = g->run.dev->dev,
        .num_layers = g->layers_run,
    };
    attn_status st = attn_dcp_create(&di, &g->dcp);
    if (st != ATTN_OK) return st;
    g->dcp_slots = calloc((size_t)e->max_tokens, sizeof(int64_t));
    if (!g->dcp_slots) return attn__fail(ATTN_OUT_OF_MEMORY, "DCP: out of memory");
    return ATTN_OK;
}

attn_status attn__engine_dcp_setup(attn_engine *e, attn_status startup)
{
    char choice[ATTN_DCP_CHOICE_MAX], msg[ATTN__ENGINE_ERR_MAX];
    attn__dcp_choice(e, startup, choice, sizeof choice);
    attn_status st = attn_dcp_agree(e->cfg.dcp_comm, choice, msg, sizeof msg);
    if (startup != ATTN_OK) return startup; /* its own message stays */
    if (st != ATTN_OK) return attn__engine_fail(e, st, "%s", msg);
    for (int g = 0; g < e->num_groups; g++) {
        st = attn__dcp_group(e, &e->groups[g]);
        if (st != ATTN_OK) return attn__engine_fail(e, st, "KV group %d: %s", g, attn_last_error());
    }
    return ATTN_OK;
}

void attn__engine_dcp_free(attn__eng_group *g)
{
    attn_dcp_free(g->dcp);
    free(g->dcp_slots);
    g->dcp = NULL;
    g->dcp_slots = NULL;
}
