/* `attn serve --dcp N`: the communicator, per-rank accounting and the
 * per-rank report (serve_dcp.c). Without MPI in the build, --dcp above 1 is
 * refused. */
#ifndef ATTN_TOOLS_SERVE_DCP_H
#define ATTN_TOOLS_SERVE_DCP_H

#include "attn/attn.h"
#include "attn/comm.h"
#include "attn/engine.h"
#include "harness/harness.h"
#include "serve.h"
#include "util/strbuf.h"

typedef struct attn__dcp_acc {
    long steps;
    int64_t kv_tokens_local_peak, kv_tokens_total_peak;
    double step_ns, step_ns_max, local_ns, exchange_ns, merge_ns;
    double checksum; /* sum of every step's output checksum */
} attn__dcp_acc;

/* Opens the communicator for --dcp world (ranks must equal world).
 * Returns -1 on success (*out set; NULL when world is 1), else an exit code
 * after printing why. */
int attn__serve_dcp_open(long world, double timeout_s, attn_comm **out);
void attn__serve_dcp_step(attn__dcp_acc *acc, const attn_engine_step_stats *ss,
                          const attn__harness_stats *hs);
/* Before the engine starts: the ranks agree on every setting they must
 * share (model and layers, dtypes, block and pool sizes, interleave, steps
 * and traffic, backends, kernel flags). -1 when they do, else the exit
 * code after printing the one message every rank prints. */
int attn__serve_dcp_agree_setup(attn_comm *c, const attn__serve_opts *o, const attn_model *m);
/* After the engine started (or failed to) on every rank: they agree on
 * having started and on its pool and lengths. -1, or the exit code. */
int attn__serve_dcp_agree_engine(attn_comm *c, const attn_engine *e, attn_status startup);
/* Gathers every rank's figures; rank 0 prints them (text, or into w).
 * false after printing why (the ranks were out of step). */
bool attn__serve_dcp_report(attn_comm *c, const attn_engine *e, const attn__dcp_acc *acc,
                            long interleave, attn__jw *w);
/* A step failed on this rank: end every rank (does not return). */
void attn__serve_dcp_abort(attn_comm *c);

/* `attn simulate --dcp N` (simulate_dcp.c): the deployment's view. */
int attn__simulate_dcp(const char *machine, const char *model, long world, long interleave,
                       long context, bool json);

#endif
