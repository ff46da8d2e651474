/* `attn serve --dcp N` (see serve_dcp.h). Every rank serves the same
 * deterministic traffic; only rank 0 writes the normal output, and at the
 * end it prints one line (or JSON object) per rank: KV bytes this rank held
 * at the peak, its step times and the DCP parts of them.
 *
 * That works only when every rank was started alike, so before the engine
 * starts the ranks agree on every setting that shapes the batches, the
 * layers or the exchanged parts (attn_comm_agree), and after it they agree
 * on what the engine made of them (pool, lengths) and on having started;
 * the engine's own consensus compares backends and KV layouts. */
#include "serve_dcp.h"

#include <stdarg.h>
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

/* The settings every rank must share, as text. The machine may differ
 * between ranks (a mixed fleet); what it leads to is compared later. */
typedef struct attn__dcp_setup {
    attn_comm_field f[40];
    char v[40][256], names[ATTN_KIND_COUNT][64];
    char layers[4096];
    int n;
} attn__dcp_setup;

static void attn__dcp_put(attn__dcp_setup *s, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void attn__dcp_put(attn__dcp_setup *s, const char *name, const char *fmt, ...)
{
    if (s->n >= 40) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->v[s->n], sizeof s->v[s->n], fmt, ap);
    va_end(ap);
    s->f[s->n] = (attn_comm_field){name, s->v[s->n]};
    s->n++;
}

/* A size option: 0 is "default" (the engine decides). */
static void attn__dcp_put_size(attn__dcp_setup *s, const char *name, long v)
{
    if (v == 0)
        attn__dcp_put(s, name, "default");
    else
        attn__dcp_put(s, name, "%ld", v);
}

/* Every KV group's layers and shape, what is not the default only:
 * "full_attention decoder 0-31: heads 32/8, head size 128, window 4096". */
static void attn__dcp_layers(const attn_model *m, char *buf, size_t size)
{
    attn__sb sb;
    attn__sb_init(&sb);
    for (int g = 0; g < attn_model_num_groups(m); g++) {
        const attn_layer_spec *sp = attn_model_group_spec(m, g);
        const int *ls = NULL;
        int nl = attn_model_group_layers(m, g, &ls);
        char lt[256];
        attn_model_layers_text(ls, nl, lt, sizeof lt);
        attn__sb_printf(&sb, "%s%s %s %s: heads %d/%d, head size %d", g ? "; " : "",
                        attn_layer_spec_kind(sp), attn_attn_type_name(sp->attn_type), lt,
                        sp->num_heads, sp->num_kv_heads, sp->head_size);
        if (sp->head_size_v) attn__sb_printf(&sb, "/%d", sp->head_size_v);
        if (sp->sliding_window) attn__sb_printf(&sb, ", window %d", sp->sliding_window);
        if (sp->logits_soft_cap != 0.0f)
            attn__sb_printf(&sb, ", softcap %g", (double)sp->logits_soft_cap);
        if (sp->has_sink) attn__sb_puts(&sb, ", sinks");
        if (sp->use_mla)
            attn__sb_printf(&sb, ", MLA rank %d rope %d nope %d v %d", sp->kv_lora_rank,
                            sp->qk_rope_head_dim, sp->qk_nope_head_dim, sp->v_head_dim);
        if (sp->use_sparse) attn__sb_printf(&sb, ", sparse top-%d", sp->index_topk);
        if (sp->use_mm_prefix) attn__sb_puts(&sb, ", multimodal prefix");
    }
    snprintf(buf, size, "%s", sb.data && !sb.oom ? sb.data : "(out of memory)");
    attn__sb_free(&sb);
}

int attn__serve_dcp_agree_setup(attn_comm *c, const attn__serve_opts *o, const attn_model *m)
{
    attn__dcp_setup *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "attn serve: rank %d: out of memory\n", attn_comm_rank(c));
        attn__serve_dcp_abort(c);
    }
    const attn_traffic_config *t = &o->traffic;
    attn__dcp_put(s, "model", "%s", attn_model_name(m));
    attn__dcp_layers(m, s->layers, sizeof s->layers);
    s->f[s->n++] = (attn_comm_field){"layers", s->layers};
    attn__dcp_put(s, "--dtype", "%s", attn_dtype_name(attn_model_dtype(m)));
    attn__dcp_put(s, "--kv-cache-dtype", "%s", attn_kv_dtype_name(o->kv));
    attn__dcp_put(s, "--backend", "%s", o->backend ? o->backend : "auto");
    for (int k = 0; k < ATTN_KIND_COUNT; k++) {
        snprintf(s->names[k], sizeof s->names[k], "--backend-for %s",
                 attn_kv_kind_name((attn_kv_kind)k));
        attn__dcp_put(s, s->names[k], "%s", o->per_kind[k] ? o->per_kind[k] : "(unset)");
    }
    attn__dcp_put_size(s, "--block-size", o->block_size);
    attn__dcp_put_size(s, "--num-blocks", o->num_blocks);
    attn__dcp_put_size(s, "--max-num-seqs", o->max_seqs);
    attn__dcp_put_size(s, "--max-batched-tokens", o->max_tokens);
    attn__dcp_put_size(s, "--max-model-len", o->max_model_len);
    attn__dcp_put(s, "--dcp-interleave", "%ld", o->dcp_interleave ? o->dcp_interleave : 1);
    attn__dcp_put(s, "--steps", "%ld", o->steps);
    attn__dcp_put(s, "--rate", "%.17g", t->rate);
    attn__dcp_put(s, "--prompt-len", "%d:%d", t->prompt_min, t->prompt_max);
    attn__dcp_put(s, "--output-len", "%d:%d", t->output_min, t->output_max);
    attn__dcp_put(s, "--prefix-share", "%.17g", t->prefix_fraction);
    attn__dcp_put(s, "--prefix-len", "%d", t->prefix_len);
    attn__dcp_put(s, "--seed", "%llu", (unsigned long long)t->seed);
    if (o->layers_to_run < 0)
        attn__dcp_put(s, "--layers-to-run", "all");
    else
        attn__dcp_put_size(s, "--layers-to-run", o->layers_to_run);
    attn__dcp_put(s, "--no-kernels", "%d", o->no_kernels);
    attn__dcp_put(s, "--verify", "%d", o->verify);
    attn__dcp_put(s, "--check", "%d", o->check);
    attn_status st = attn_comm_agree(c, "DCP settings", s->f, s->n);
    free(s);
    if (st == ATTN_OK) return -1;
    fprintf(stderr, "attn serve: rank %d: %s\n", attn_comm_rank(c), attn_last_error());
    return st == ATTN_INVALID_ARGUMENT ? ATTN_EXIT_USAGE : ATTN_EXIT_ERROR;
}

int attn__serve_dcp_agree_engine(attn_comm *c, const attn_engine *e, attn_status startup)
{
    attn__dcp_setup s = {0};
    attn__dcp_put(&s, "startup", "%s", attn_status_name(startup));
    if (startup == ATTN_OK) {
        attn__dcp_put(&s, "block size", "%d", attn_engine_block_size(e));
        attn__dcp_put(&s, "blocks per KV group", "%d", attn_engine_num_blocks(e));
        attn__dcp_put(&s, "KV groups", "%d", attn_engine_num_groups(e));
        attn__dcp_put(&s, "max model length", "%d", attn_engine_max_model_len(e));
    }
    attn_status st = attn_comm_agree(c, "DCP engines after startup", s.f, s.n);
    if (st == ATTN_OK) return -1;
    fprintf(stderr, "attn serve: rank %d: %s\n", attn_comm_rank(c), attn_last_error());
    return ATTN_EXIT_FAILED;
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

bool attn__serve_dcp_report(attn_comm *c, const attn_engine *e, const attn__dcp_acc *acc,
                            long interleave, attn__jw *w)
{
    int W = attn_comm_size(c);
    attn__dcp_acc *all = calloc((size_t)W, sizeof *all);
    if (!all || attn_comm_exchange(c, ATTN_COMM_REPORT, acc, sizeof *acc, all) != ATTN_OK) {
        fprintf(stderr, "attn serve: rank %d: DCP report: %s\n", attn_comm_rank(c),
                all ? attn_last_error() : "out of memory");
        free(all);
        return false;
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
    return true;
}

void attn__serve_dcp_abort(attn_comm *c)
{
    fflush(stdout);
    attn_comm_abort(c, ATTN_EXIT_ERROR);
}
