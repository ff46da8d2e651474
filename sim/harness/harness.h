/* The test harness beside libattn: what a serving engine's caller supplies
 * when there is no model to run. It gives the engine deterministic
 * synthetic Q/K/V and weights (the same for a request's token whenever it
 * is computed, so a preempted request recomputes what it had), names the
 * CPU kernels that stand in for backends without code here (a simulated
 * h100: CPU_ATTN then REFERENCE, CPU_MLA for MLA, validated on the "cpu"
 * platform), sums every output and, with verify, re-runs the REFERENCE
 * oracle on the same cache and metadata and records the largest
 * difference. Built on libattn's public API only (attn_engine_io).
 *
 * Used by `attn serve`, `attn simulate` (sim/scenario), the benches and the
 * engine tests. A harness outlives the engines it configures; one harness
 * serves one engine at a time. */
#ifndef ATTN_HARNESS_H
#define ATTN_HARNESS_H

#include "attn/engine.h"

typedef struct attn__harness attn__harness;

typedef struct attn__harness_config {
    uint64_t seed;  /* of the synthetic inputs and weights */
    bool verify;    /* run REFERENCE after every layer (not with DCP) */
    bool stand_ins; /* CPU stand-ins for backends without a kernel here */
} attn__harness_config;

/* One step's results. */
typedef struct attn__harness_stats {
    double output_checksum; /* sum of the outputs of the layers run */
    bool output_finite;
    double max_abs_diff; /* vs REFERENCE when verify is on (else 0) */
} attn__harness_stats;

attn_status attn__harness_create(const attn__harness_config *c, attn__harness **out);
void attn__harness_free(attn__harness *h);

/* Points cfg's io and stand-ins at h (the rest of cfg is the caller's). */
void attn__harness_configure(attn__harness *h, attn_engine_config *cfg);
/* After a successful attn_engine_create with a configured cfg: sets up
 * the REFERENCE kernels of every group when verify is on. */
attn_status attn__harness_attach(attn__harness *h, const attn_engine *e);

/* configure + attn_engine_create + attach, with attn_engine_create's
 * contract (*out may be a FAILED engine to free). Refuses verify with a
 * DCP communicator of more than one rank. */
attn_status attn__harness_engine_create(attn__harness *h, attn_engine_config *cfg,
                                        attn_engine **out);
/* attn_engine_step, with this step's results in *hs (optional). */
attn_status attn__harness_step(attn__harness *h, attn_engine *e, attn_engine_step_stats *st,
                               attn__harness_stats *hs);

#endif
