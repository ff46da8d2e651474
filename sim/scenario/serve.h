/* The scenario runner's view of one serving engine (serve.c adapts the
 * engine's public API, include/attn/engine.h). A server is started once per
 * (re)start of a machine; start either succeeds with every KV group's
 * backend fixed, or fails with the engine's startup error (the selector's
 * exact message) in attn_last_error(). */
#ifndef ATTN_SCENARIO_SERVE_H
#define ATTN_SCENARIO_SERVE_H

#include "attn/model.h"
#include "attn/platform.h"
#include "scenario/scenario.h"
#include "util/strbuf.h"

typedef struct attn__srv attn__srv;

typedef struct attn__srv_step {
    int num_reqs;      /* requests in this step's batch */
    int num_tokens;    /* tokens in this step's batch */
    int admitted;      /* requests admitted this step */
    int finished;      /* requests finished this step */
    int running;       /* requests in flight after the step */
    int waiting;       /* requests waiting for admission */
    int blocks_in_use; /* KV blocks in use after the step (first KV group) */
    int preempted;     /* requests preempted this step */
} attn__srv_step;

/* KV blocks per group the scenario engines use (the simulated devices'
 * memory would give tens of thousands; the traffic needs far fewer). */
#define ATTN__SRV_NUM_BLOCKS 1024

/* seed: the traffic seed for this machine; verify: also run the REFERENCE
 * oracle on every attention step and report the largest difference. */
attn_status attn__srv_start(const attn_platform *p, const attn_model *m,
                            const attn__scn_launch *launch, const attn__scn_traffic *traffic,
                            uint64_t seed, bool verify, attn__srv **out);
/* Writes the engine's startup summary as one JSON object: block size and
 * where it came from, blocks, KV groups (backend, builder, layout, cache
 * shape, kernel that computes and whether it is emulated). */
void attn__srv_write_startup(const attn__srv *s, attn__jw *w);
/* One engine step (new arrivals queued first). When detail is not NULL,
 * writes one JSON object there describing the step: the common metadata
 * built for it, each KV group's backend metadata (the builder's describe()),
 * the freshness check against the previous step, and the attention run. */
attn_status attn__srv_step_run(attn__srv *s, attn__jw *detail, attn__srv_step *info);
void attn__srv_free(attn__srv *s);

#endif
