/* `attn serve`: start an engine on a machine and run steps of synthetic
 * traffic through it.
 *
 * Prints the startup summary (the backend of every KV group and why, the
 * block size and where it came from, the KV pool), one line per step
 * (requests running/waiting, tokens, blocks in use, preemptions, metadata
 * build time, attention time — labelled emulated when a CPU kernel stands
 * in for the machine's backend), and the final block accounting, before
 * and after every request is released. --json prints the same as one
 * object. Exit codes: 0 served, 3 startup failed (the message is the
 * selector's), 2 usage error, 1 a step failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/engine.h"
#include "attn/kvcache.h"
#include "attn/model.h"
#include "cli.h"
#include "harness/engine_json.h"
#include "harness/harness.h"
#include "serve.h"
#include "serve_dcp.h"
#include "util/strbuf.h"
#include "harness/json_put.h"

/* One `attn serve` run: what it opened, in the order it is closed. */
typedef struct attn__serve_run {
    attn__serve_opts o;
    const attn_platform *p;
    attn_platform *owned;
    attn_model *m;
    attn_traffic *traffic;
    attn__harness *h; /* synthetic inputs, CPU stand-ins, REFERENCE */
    attn_comm *dcp;
    attn_engine *e;
    attn__dcp_acc dcp_acc;
    attn__sb sb;
    attn__jw w;
    long rejected;
    bool emulated;
    double max_diff;
} attn__serve_run;

static void attn__serve_close(attn__serve_run *r)
{
    attn__sb_free(&r->sb);
    attn_engine_free(r->e);
    attn__harness_free(r->h);
    attn_comm_free(r->dcp);
    attn_traffic_free(r->traffic);
    attn_model_free(r->m);
    attn_platform_free(r->owned);
}

/* Platform, model, traffic, harness and DCP communicator: -1, or the exit
 * code to stop with. */
static int attn__serve_open(attn__serve_run *r)
{
    const attn__serve_opts *o = &r->o;
    if (attn_cli_machine(o->machine, o->installed, o->settings, o->num_settings, &r->p,
                         &r->owned) != ATTN_OK) {
        fprintf(stderr, "attn serve: %s\n", attn_last_error());
        return ATTN_EXIT_USAGE;
    }
    attn_status st = o->shape_given
                         ? attn_model_from_shape((int)o->layers, (int)o->heads, (int)o->kv_heads,
                                                 (int)o->head_size, o->dtype, &r->m)
                         : attn_model_load(o->model ? o->model : "llama-3.1-8b", &r->m);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn serve: model: %s\n", attn_last_error());
        return ATTN_EXIT_USAGE;
    }
    if (attn_traffic_create(&o->traffic, &r->traffic) != ATTN_OK) {
        fprintf(stderr, "attn serve: %s\n", attn_last_error());
        return ATTN_EXIT_USAGE;
    }
    attn__harness_config hc = {.seed = o->traffic.seed, .verify = o->verify, .stand_ins = true};
    if (attn__harness_create(&hc, &r->h) != ATTN_OK) {
        fprintf(stderr, "attn serve: %s\n", attn_last_error());
        return ATTN_EXIT_ERROR;
    }
    int rc = attn__serve_dcp_open(o->dcp, o->dcp_timeout, &r->dcp);
    if (rc < 0 && r->dcp) rc = attn__serve_dcp_agree_setup(r->dcp, o, r->m);
    return rc;
}

static attn_status attn__serve_start(attn__serve_run *r)
{
    const attn__serve_opts *o = &r->o;
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = r->p;
    cfg.model = r->m;
    cfg.backend = o->backend;
    for (int k = 0; k < ATTN_KIND_COUNT; k++)
        cfg.per_kind[k] = o->per_kind[k];
    cfg.block_size = (int)o->block_size;
    cfg.kv_cache_dtype = o->kv;
    cfg.num_blocks = (int)o->num_blocks;
    cfg.max_num_seqs = (int)o->max_seqs;
    cfg.max_num_batched_tokens = (int)o->max_tokens;
    cfg.max_model_len = (int)o->max_model_len;
    cfg.run_kernels = !o->no_kernels;
    cfg.layers_to_run = (int)o->layers_to_run;
    cfg.check_metadata = o->check;
    cfg.dcp_comm = r->dcp;
    cfg.dcp_interleave = (int)o->dcp_interleave;
    return attn__harness_engine_create(r->h, &cfg, &r->e);
}

static void attn__serve_json_head(attn__serve_run *r)
{
    attn__jw *w = &r->w;
    attn__jw_obj_begin(w);
    attn__jw_key(w, "machine");
    attn__jw_obj_begin(w);
    attn__put_str(w, "name", attn_platform_name(r->p));
    attn__put_str(w, "device", attn_platform_device_name(r->p));
    attn__put_str(w, "kind", attn_platform_kind_name(attn_platform_get_kind(r->p)));
    attn__put_bool(w, "simulated", attn_platform_is_simulated(r->p));
    attn__jw_obj_end(w);
    attn__jw_key(w, "model");
    attn__jw_obj_begin(w);
    attn__put_str(w, "name", attn_model_name(r->m));
    attn__put_int(w, "layers", attn_model_num_layers(r->m));
    attn__put_str(w, "dtype", attn_dtype_name(attn_model_dtype(r->m)));
    attn__jw_obj_end(w);
    attn__put_str(w, "state",
                  r->e && attn_engine_get_state(r->e) == ATTN_ENGINE_READY ? "ready" : "failed");
    attn__put_str(w, "error", r->e ? attn_engine_error(r->e) : attn_last_error());
}

static void attn__serve_json_print(attn__serve_run *r)
{
    char *text = attn__sb_take(&r->sb);
    if (text) printf("%s\n", text);
    free(text);
}

/* The ready engine's summary, then the per-step table's header. */
static void attn__serve_ready(attn__serve_run *r)
{
    const attn__serve_opts *o = &r->o;
    int world = r->dcp ? attn_comm_size(r->dcp) : 1;
    if (o->json) {
        attn__engine_json_summary(&r->w, r->e, world);
        attn__jw_key(&r->w, "steps");
        attn__jw_arr_begin(&r->w);
        return;
    }
    attn__print_startup(r->e, r->p, r->m, world);
    printf("serving %ld steps: %g new requests per step, prompts %d..%d, outputs %d..%d", o->steps,
           o->traffic.rate, o->traffic.prompt_min, o->traffic.prompt_max, o->traffic.output_min,
           o->traffic.output_max);
    if (o->traffic.prefix_fraction > 0)
        printf(", %.0f%% with a %d-token shared prefix", o->traffic.prefix_fraction * 100,
               o->traffic.prefix_len);
    printf(", seed %llu\n", (unsigned long long)o->traffic.seed);
    if (!o->quiet)
        printf("%6s %5s %5s %5s %7s %11s %7s %7s %9s %9s\n", "step", "reqs", "run", "wait",
               "tokens", "prefill/dec", "blocks", "preempt", "meta_us", "attn_ms");
}

/* The steps: arrivals queued, one engine step, one line or JSON object. */
static int attn__serve_steps(attn__serve_run *r)
{
    attn_request_desc arrivals[256];
    for (long s = 0; s < r->o.steps; s++) {
        int n;
        while ((n = attn_traffic_next(r->traffic, arrivals, 256)) > 0) {
            for (int i = 0; i < n; i++)
                if (attn_engine_add_request(r->e, &arrivals[i], NULL) != ATTN_OK) r->rejected++;
            if (n < 256) break;
        }
        attn_engine_step_stats ss;
        attn__harness_stats hs;
        attn_status st = attn__harness_step(r->h, r->e, &ss, &hs);
        if (st != ATTN_OK) {
            fprintf(stderr, "attn serve: step %ld failed: %s: %s\n", s, attn_status_name(st),
                    attn_last_error());
            if (r->dcp) attn__serve_dcp_abort(r->dcp); /* the other ranks would wait for this one */
            return ATTN_EXIT_ERROR;
        }
        r->emulated = r->emulated || ss.emulated;
        if (r->dcp) attn__serve_dcp_step(&r->dcp_acc, &ss, &hs);
        r->max_diff = hs.max_abs_diff > r->max_diff ? hs.max_abs_diff : r->max_diff;
        if (r->o.json) {
            attn__engine_json_step(&r->w, &ss, &hs);
        } else if (!r->o.quiet) {
            char pd[32];
            snprintf(pd, sizeof pd, "%d/%d", ss.num_prefill_tokens, ss.num_decode_tokens);
            printf("%6lld %5d %5d %5d %7d %11s %7d %7d %9.1f %9.3f%s\n", (long long)ss.step,
                   ss.num_reqs, ss.running, ss.waiting, ss.num_tokens, pd, ss.blocks_in_use,
                   ss.preempted, ss.metadata_ns / 1e3, ss.attention_ns / 1e6,
                   ss.emulated ? " emulated" : "");
        }
    }
    return ATTN_EXIT_OK;
}

static bool attn__serve_json_final(attn__serve_run *r, const attn_engine_counts *c)
{
    attn__jw *w = &r->w;
    attn__jw_arr_end(w);
    attn__jw_key(w, "final");
    attn__jw_obj_begin(w);
#define I(k, v)                                                                                    \
    attn__jw_key(w, k);                                                                            \
    attn__jw_int(w, (long long)(v))
    I("steps", c->steps);
    I("added", c->added);
    I("rejected", r->rejected);
    I("admitted", c->admitted);
    I("finished", c->finished);
    I("preemptions", c->preemptions);
    I("tokens", c->tokens);
    I("running", c->running);
    I("waiting", c->waiting);
#undef I
    attn__put_bool(w, "emulated", r->emulated);
    attn__put_num(w, "max_abs_diff", r->max_diff);
    attn__jw_key(w, "blocks");
    attn__engine_json_blocks(w, r->e);
    return !r->dcp || attn__serve_dcp_report(r->dcp, r->e, &r->dcp_acc, r->o.dcp_interleave, w);
}

static bool attn__serve_text_final(attn__serve_run *r, const attn_engine_counts *c)
{
    printf("served %lld steps: %lld requests added (%ld refused), %lld admitted, %lld "
           "finished, %lld preemptions, %lld tokens; %d running, %d waiting\n",
           (long long)c->steps, (long long)c->added, r->rejected, (long long)c->admitted,
           (long long)c->finished, (long long)c->preemptions, (long long)c->tokens, c->running,
           c->waiting);
    if (r->emulated)
        printf("attention math: emulated on this machine's CPU kernels%s\n",
               r->o.verify ? "" : " (use --verify to check against REFERENCE)");
    if (r->o.verify) printf("largest difference from REFERENCE: %.3g\n", r->max_diff);
    bool ok =
        !r->dcp || attn__serve_dcp_report(r->dcp, r->e, &r->dcp_acc, r->o.dcp_interleave, NULL);
    attn__print_blocks(r->e, "at the end");
    return ok;
}

/* The totals and the block accounting before and after every request is
 * released; a leak makes a served run fail. */
static int attn__serve_final(attn__serve_run *r, int exit_code)
{
    attn_engine_counts c;
    attn_engine_get_counts(r->e, &c);
    bool ok_before = attn__blocks_ok(r->e, false);
    bool reported = r->o.json ? attn__serve_json_final(r, &c) : attn__serve_text_final(r, &c);
    if (!reported && exit_code == ATTN_EXIT_OK) exit_code = ATTN_EXIT_ERROR;
    attn_engine_abort_all(r->e);
    bool ok_after = attn__blocks_ok(r->e, true);
    if (r->o.json) {
        attn__jw_key(&r->w, "after_release");
        attn__engine_json_blocks(&r->w, r->e);
        attn__put_bool(&r->w, "accounting_ok", ok_before && ok_after);
        attn__jw_obj_end(&r->w);
        attn__jw_obj_end(&r->w);
        attn__serve_json_print(r);
    } else {
        attn__print_blocks(r->e, "after releasing every request");
        printf("block accounting: %s\n", ok_before && ok_after ? "ok" : "FAILED");
    }
    if (!(ok_before && ok_after) && exit_code == ATTN_EXIT_OK) exit_code = ATTN_EXIT_ERROR;
    return exit_code;
}

int attn_cmd_serve(int argc, char **argv)
{
    attn__serve_run r;
    memset(&r, 0, sizeof r);
    attn__sb_init(&r.sb);
    attn__jw_init(&r.w, &r.sb, true);
    int rc = attn__serve_parse(argc, argv, &r.o);
    if (rc < 0) rc = attn__serve_open(&r);
    if (rc >= 0) {
        attn__serve_close(&r);
        return rc;
    }
    attn_status st = attn__serve_start(&r);
    /* every rank takes part, started or not, so none waits for one that gave up */
    int agreed = r.dcp ? attn__serve_dcp_agree_engine(r.dcp, r.e, st) : -1;
    if (r.o.json) attn__serve_json_head(&r);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn serve: startup failed: %s\n",
                r.e ? attn_engine_error(r.e) : attn_last_error());
        if (r.o.json) {
            attn__jw_obj_end(&r.w);
            attn__serve_json_print(&r);
        }
        rc = r.e ? ATTN_EXIT_FAILED : ATTN_EXIT_USAGE;
        attn__serve_close(&r);
        return rc;
    }
    if (agreed >= 0) {
        attn__serve_close(&r);
        return agreed;
    }
    attn__serve_ready(&r);
    rc = attn__serve_final(&r, attn__serve_steps(&r));
    attn__serve_close(&r);
    return rc;
}
