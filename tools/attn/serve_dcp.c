/* `attn serve --dcp N` (see serve_dcp.h). Every rank serves the same
 * deterministic traffic; only rank 0 writes the normal output, and at the
 * end it prints one line (or JSON object) per rank: KV bytes this rank held
 * at the peak, its step times and the DCP parts of them. */
#include "serve_dcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#ifdef ATTN_HAVE_MPI
#include "attn/comm_mpi.h"
#endif

int attn__serve_dcp_open(long world, double timeout_s, attn_comm **out)
{
    *out = NULL;
    if (world <= 1) return -1;
#ifdef ATTN_HAVE_MPI
    if (!attn_comm_mpi_launched()) {
        fprintf(stderr, "attn serve: --dcp %ld: run under mpirun -np %ld\n", world, world);
        return ATTN_EXIT_USAGE;
    }
    attn_comm *c = NULL;
    if (attn_comm_mpi_create(NULL, NULL, &c) != ATTN_OK) {
        fprintf(stderr, "attn serve: --dcp: %s\n", attn_last_error());
        return ATTN_EXIT_ERROR;
    }
    if (attn_comm_size(c) != world) {
        fprintf(stderr, "attn serve: --dcp %ld but mpirun started %d ranks\n", world,
                attn_comm_size(c));
        attn_comm_free(c);
        return ATTN_EXIT_USAGE;
    }
    if (timeout_s > 0) attn_comm_set_timeout(c, timeout_s);
    /* one report, from rank 0 */
    if (attn_comm_rank(c) != 0 && !freopen("/dev/null", "w", stdout)) {
        attn_comm_free(c);
        return ATTN_EXIT_ERROR;
    }
    *out = c;
    return -1;
#else
    (void)timeout_s;
    fprintf(stderr,
            "attn serve: --dcp %ld: this attn was built without MPI (install "
            "libopenmpi-dev: scripts/setup-deps.sh)\n",
            world);
    return ATTN_EXIT_USAGE;
#endif
}

void attn__serve_dcp_step(attn__dcp_acc *acc, const attn_engine_step_stats *ss,
                          const attn__harness_stats *hs)
{
    acc->steps++;
    double t = ss->metadata_ns + ss->attention_ns;
    acc->step_ns += t;
    acc->step_ns_max = t > acc->step_ns_max ? t : acc->step_ns_max;
    acc->local_ns += ss->dcp_local_ns;
    acc->exchange_ns += ss->dcp_exchange_ns;
    acc->merge_ns += ss->dcp_merge_ns;
    acc->checksum += hs->output_checksum;
    if (ss->kv_tokens_local > acc->kv_tokens_local_peak)
        acc->kv_tokens_local_peak = ss->kv_tokens_local;
    if (ss->kv_tokens_total > acc->kv_tokens_total_peak)
        acc->kv_tokens_total_peak = ss->kv_tokens_total;
}

/* KV bytes of one token across every KV group and layer. */
static double attn__bytes_per_token(const attn_engine *e)
{
    double b = 0;
    int bs = attn_engine_block_size(e);
    for (int g = 0; g < attn_engine_num_groups(e) && bs > 0; g++) {
        attn_engine_group_info gi;
        if (attn_engine_group_info_get(e, g, &gi) == ATTN_OK) b += (double)gi.bytes_per_block / bs;
    }
    return b;
}

void attn__serve_dcp_report(attn_comm *c, const attn_engine *e, const attn__dcp_acc *acc,
                            long interleave, attn__jw *w)
{
    int W = attn_comm_size(c);
    attn__dcp_acc *all = calloc((size_t)W, sizeof *all);
    if (!all || attn_comm_allgather(c, acc, sizeof *acc, all) != ATTN_OK) {
        fprintf(stderr, "attn serve: rank %d: DCP report: %s\n", attn_comm_rank(c),
                all ? attn_last_error() : "out of memory");
        free(all);
        return;
    }
    double bpt = attn__bytes_per_token(e);
    if (w) {
        attn__jw_key(w, "dcp");
        attn__jw_obj_begin(w);
        attn__jw_key(w, "world_size");
        attn__jw_int(w, W);
        attn__jw_key(w, "interleave");
        attn__jw_int(w, interleave ? interleave : 1);
        attn__jw_key(w, "kv_bytes_allocated_per_rank");
        attn__jw_int(w, (long long)attn_engine_kv_bytes(e));
        attn__jw_key(w, "ranks");
        attn__jw_arr_begin(w);
    } else {
        printf("dcp: %d ranks, interleave %ld, KV pool %.1f MiB per rank; peak KV held by the "
               "batch, all ranks: %.2f MiB (%lld tokens)\n",
               W, interleave ? interleave : 1, (double)attn_engine_kv_bytes(e) / 1048576.0,
               (double)all[0].kv_tokens_total_peak * bpt / 1048576.0,
               (long long)all[0].kv_tokens_total_peak);
    }
    for (int r = 0; r < W; r++) {
        const attn__dcp_acc *a = &all[r];
        double n = a->steps ? (double)a->steps : 1.0;
        if (w) {
            attn__jw_obj_begin(w);
            attn__jw_key(w, "rank");
            attn__jw_int(w, r);
            attn__jw_key(w, "kv_tokens_peak");
            attn__jw_int(w, (long long)a->kv_tokens_local_peak);
            attn__jw_key(w, "kv_bytes_peak");
            attn__jw_int(w, (long long)((double)a->kv_tokens_local_peak * bpt));
            attn__jw_key(w, "step_ms_mean");
            attn__jw_num(w, a->step_ns / n / 1e6);
            attn__jw_key(w, "step_ms_max");
            attn__jw_num(w, a->step_ns_max / 1e6);
            attn__jw_key(w, "local_attention_ms_mean");
            attn__jw_num(w, a->local_ns / n / 1e6);
            attn__jw_key(w, "exchange_ms_mean");
            attn__jw_num(w, a->exchange_ns / n / 1e6);
            attn__jw_key(w, "merge_ms_mean");
            attn__jw_num(w, a->merge_ns / n / 1e6);
            attn__jw_key(w, "output_checksum_sum");
            attn__jw_num(w, a->checksum);
            attn__jw_obj_end(w);
        } else {
            printf("dcp rank %d: KV held at peak %.2f MiB (%lld tokens); step %.3f ms mean, "
                   "%.3f ms max; local attention %.3f ms, exchange %.3f ms, merge %.3f ms per "
                   "step; output checksum sum %.6f\n",
                   r, (double)a->kv_tokens_local_peak * bpt / 1048576.0,
                   (long long)a->kv_tokens_local_peak, a->step_ns / n / 1e6, a->step_ns_max / 1e6,
                   a->local_ns / n / 1e6, a->exchange_ns / n / 1e6, a->merge_ns / n / 1e6,
                   a->checksum);
        }
    }
    if (w) {
        attn__jw_arr_end(w);
        attn__jw_obj_end(w);
    }
    free(all);
}

void attn__serve_dcp_abort(attn_comm *c)
{
    fflush(stdout);
    attn_comm_abort(c, ATTN_EXIT_ERROR);
}
