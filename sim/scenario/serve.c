/* The scenario runner's adapter to the engine (include/attn/engine.h).
 *
 * Contract: one engine per (re)start of a machine, created with the
 * deployment's launch options and fed by the engine's own seeded traffic
 * generator. The step detail shown in stage 4 is read back from the engine
 * after its step (the common metadata and each KV group's describe()), and
 * a freshness check compares it with the previous step: every request that
 * continues from the last step must have a context (seq_len minus this
 * step's query tokens) equal to its seq_len then, so the metadata is this
 * step's batch and nothing older. Requests are identified across steps by
 * the first block of their block-table row (no shared prefixes are
 * generated, so first blocks are private). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine.h"
#include "harness/engine_json.h"
#include "harness/harness.h"
#include "scenario/serve.h"
#include "util/json.h"
#include "harness/json_put.h"

#define MAX_ARRIVALS 256

struct attn__srv {
    attn__harness *harness; /* inputs, stand-ins, checksums, REFERENCE */
    attn_engine *engine;
    attn_traffic *traffic;
    int num_blocks;
    int *last_seq; /* [num_blocks] seq_len of the request whose first block is i */
    int *seen;     /* [num_blocks] step in which last_seq was recorded, -1 never */
    int64_t steps;
    bool verify;
    int prev_finished;
    int dropped;
};

attn_status attn__srv_start(const attn_platform *p, const attn_model *m,
                            const attn__scn_launch *launch, const attn__scn_traffic *t,
                            uint64_t seed, bool verify, attn__srv **out)
{
    *out = NULL;
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.backend = launch->backend[0] ? launch->backend : NULL;
    for (int k = 0; k < ATTN_KIND_COUNT; k++)
        cfg.per_kind[k] = launch->per_kind[k][0] ? launch->per_kind[k] : NULL;
    cfg.block_size = launch->block_size;
    cfg.kv_cache_dtype = ATTN_KV_AUTO;
    if (launch->kv_cache_dtype[0] &&
        attn_kv_dtype_parse(launch->kv_cache_dtype, &cfg.kv_cache_dtype) != ATTN_OK)
        return attn_wrap_error(ATTN_INVALID_ARGUMENT, "kv_cache_dtype '%s'",
                               launch->kv_cache_dtype);
    cfg.num_blocks = ATTN__SRV_NUM_BLOCKS;
    cfg.run_kernels = true;
    cfg.layers_to_run = 0; /* one layer per KV group: the math is a check, not a benchmark */
    cfg.check_metadata = true;
    attn__harness_config hc = {.seed = seed, .verify = verify, .stand_ins = true};
    attn__harness *h = NULL;
    attn_status st = attn__harness_create(&hc, &h);
    if (st != ATTN_OK) return st;
    attn_engine *e = NULL;
    st = attn__harness_engine_create(h, &cfg, &e);
    if (st != ATTN_OK) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s",
                 e && attn_engine_error(e) ? attn_engine_error(e) : attn_last_error());
        attn_engine_free(e);
        attn__harness_free(h);
        return attn_set_error(st, "%s", msg);
    }
    attn__srv *s = calloc(1, sizeof *s);
    if (!s) {
        attn_engine_free(e);
        attn__harness_free(h);
        return attn_set_error(ATTN_OUT_OF_MEMORY, "scenario: out of memory");
    }
    s->harness = h;
    s->engine = e;
    s->verify = verify;
    attn_traffic_config tc;
    attn_traffic_config_init(&tc);
    tc.rate = t->rate;
    tc.prompt_min = t->prompt_min;
    tc.prompt_max = t->prompt_max;
    tc.output_min = t->output_min;
    tc.output_max = t->output_max;
    tc.prefix_fraction = 0;
    tc.seed = seed;
    if ((st = attn_traffic_create(&tc, &s->traffic)) != ATTN_OK) {
        attn__srv_free(s);
        return st;
    }
    s->num_blocks = attn_engine_num_groups(e) > 0 ? attn_engine_num_blocks(e) : 0;
    if (s->num_blocks > 0) {
        s->last_seq = calloc((size_t)s->num_blocks, sizeof *s->last_seq);
        s->seen = calloc((size_t)s->num_blocks, sizeof *s->seen);
        if (!s->last_seq || !s->seen) {
            attn__srv_free(s);
            return attn_set_error(ATTN_OUT_OF_MEMORY, "scenario: out of memory");
        }
        for (int i = 0; i < s->num_blocks; i++)
            s->seen[i] = -1;
    }
    *out = s;
    return ATTN_OK;
}

void attn__srv_free(attn__srv *s)
{
    if (!s) return;
    attn_engine_free(s->engine);
    attn__harness_free(s->harness);
    attn_traffic_free(s->traffic);
    free(s->last_seq);
    free(s->seen);
    free(s);
}

/* What computes each KV group's attention, in one line. */
static void math_text(const attn_engine *e, char *math, size_t size)
{
    size_t mo = 0;
    math[0] = '\0';
    if (attn_engine_num_groups(e) == 0)
        snprintf(math, size, "no KV-cache groups (no paged attention)");
    for (int g = 0; g < attn_engine_num_groups(e) && mo < size; g++) {
        attn_engine_group_info gi;
        if (attn_engine_group_info_get(e, g, &gi) != ATTN_OK) continue;
        if (gi.kernel_mode == ATTN_KERNEL_NONE)
            mo += (size_t)snprintf(math + mo, size - mo, "%sgroup %d: none (%s)", mo ? "; " : "", g,
                                   gi.kernel_note ? gi.kernel_note : "");
        else
            mo += (size_t)snprintf(
                math + mo, size - mo, "%sgroup %d: %s%s%s%s%s", mo ? "; " : "", g,
                gi.kernel ? gi.kernel : "?", gi.kernel_variant ? " (" : "",
                gi.kernel_variant ? gi.kernel_variant : "", gi.kernel_variant ? ")" : "",
                gi.kernel_mode == ATTN_KERNEL_EMULATED ? ", emulated" : ", native");
    }
}

void attn__srv_write_startup(const attn__srv *s, attn__jw *w)
{
    char math[512];
    math_text(s->engine, math, sizeof math);
    attn__jw_obj_begin(w);
    attn__engine_json_summary(w, s->engine, 1);
    attn__put_str(w, "math", math);
    attn__jw_obj_end(w);
}

/* "0-49, 64-125" */
static void slot_ranges(const int64_t *sm, int n, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = 0;
    int i = 0, shown = 0;
    while (i < n && o < size) {
        int j = i;
        while (j + 1 < n && sm[j + 1] == sm[j] + 1)
            j++;
        if (shown == 8) {
            snprintf(buf + o, size - o, ", ... (%d more slots)", n - i);
            return;
        }
        if (sm[i] < 0)
            o += (size_t)snprintf(buf + o, size - o, "%spad x%d", o ? ", " : "", j - i + 1);
        else if (j > i)
            o += (size_t)snprintf(buf + o, size - o, "%s%lld-%lld", o ? ", " : "", (long long)sm[i],
                                  (long long)sm[j]);
        else
            o += (size_t)snprintf(buf + o, size - o, "%s%lld", o ? ", " : "", (long long)sm[i]);
        shown++;
        i = j + 1;
    }
}

static void int_array(attn__jw *w, const int32_t *a, int n, int max)
{
    attn__jw_arr_begin(w);
    for (int i = 0; i < n && i < max; i++)
        attn__jw_int(w, a[i]);
    attn__jw_arr_end(w);
}

/* Freshness: compare this step's batch with the last one (first KV group). */
static void freshness(attn__srv *s, const attn_common_metadata *cm, char *text, size_t size)
{
    int cont = 0, fresh = 0, resumed = 0, mismatch = 0;
    int64_t step = s->steps;
    for (int r = 0; cm && r < cm->num_reqs; r++) {
        int32_t key = cm->block_table[(size_t)r * (size_t)cm->block_table_stride];
        int q = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        int ctx = cm->seq_lens[r] - q;
        if (key < 0 || key >= s->num_blocks) continue;
        if (ctx == 0)
            fresh++;
        else if (s->seen[key] == step - 1 && s->last_seq[key] == ctx)
            cont++;
        else if (s->seen[key] == step - 1)
            mismatch++;
        else
            resumed++;
    }
    for (int r = 0; cm && r < cm->num_reqs; r++) {
        int32_t key = cm->block_table[(size_t)r * (size_t)cm->block_table_stride];
        if (key < 0 || key >= s->num_blocks) continue;
        s->seen[key] = (int)step;
        s->last_seq[key] = cm->seq_lens[r];
    }
    snprintf(text, size,
             "built from this step's batch: %d request%s continue%s from the last step (context "
             "= its seq_len then), %d start%s, %d resume%s; %d finished last step; %s",
             cont, cont == 1 ? "" : "s", cont == 1 ? "s" : "", fresh, fresh == 1 ? "s" : "",
             resumed, resumed == 1 ? "s" : "", s->prev_finished,
             mismatch ? "MISMATCH: a continuing request's context differs" : "consistent");
}

/* The attention part of a step's detail: which kernel ran, in place of
 * what, and what the harness saw of its outputs. */
static void write_attention(attn__srv *s, attn__jw *d, const attn_engine_step_stats *ss,
                            const attn__harness_stats *hs, const attn_common_metadata *cm)
{
    int ng = attn_engine_num_groups(s->engine);
    attn__jw_key(d, "attention");
    attn__jw_obj_begin(d);
    attn__put_bool(d, "emulated", ss->emulated);
    attn__put_int(d, "layers_run", ss->layers_run);
    attn__put_bool(d, "output_finite", hs->output_finite);
    attn__put_bool(d, "verified", s->verify);
    attn__jw_key(d, "max_abs_diff_vs_reference");
    if (s->verify)
        attn__jw_num(d, hs->max_abs_diff);
    else
        attn__jw_null(d);
    char text[512];
    attn_engine_group_info g0;
    bool have = ng > 0 && attn_engine_group_info_get(s->engine, 0, &g0) == ATTN_OK;
    if (!cm && ng == 0)
        snprintf(text, sizeof text, "no paged attention: the model has no KV-cache group");
    else if (!cm)
        snprintf(text, sizeof text, "no attention this step");
    else if (ss->layers_run == 0)
        snprintf(text, sizeof text, "no kernel ran (%s)",
                 have && g0.kernel_note ? g0.kernel_note : "kernels off");
    else {
        char check[96];
        if (s->verify)
            snprintf(check, sizeof check, "max |diff| vs REFERENCE %.3g", hs->max_abs_diff);
        else
            snprintf(check, sizeof check, "not checked against REFERENCE (--verify)");
        snprintf(text, sizeof text, "%s: %d layer%s run on %s%s%s%s%s%s, outputs %s, %s",
                 ss->emulated ? "emulated" : "native", ss->layers_run,
                 ss->layers_run == 1 ? "" : "s", have && g0.kernel ? g0.kernel : "?",
                 have && g0.kernel_variant ? " (" : "",
                 have && g0.kernel_variant ? g0.kernel_variant : "",
                 have && g0.kernel_variant ? ")" : "", ss->emulated ? " in place of " : "",
                 ss->emulated && have ? g0.backend : "",
                 hs->output_finite ? "finite" : "NOT FINITE", check);
    }
    attn__put_str(d, "text", text);
    attn__jw_obj_end(d);
}

static void write_detail(attn__srv *s, attn__jw *d, const attn_engine_step_stats *ss,
                         const attn__harness_stats *hs, const attn_common_metadata *cm,
                         const char *fresh)
{
    int ng = attn_engine_num_groups(s->engine);
    attn__jw_obj_begin(d);
    attn__jw_key(d, "common");
    attn__jw_obj_begin(d);
    attn__put_int(d, "num_reqs", cm ? cm->num_reqs : 0);
    attn__put_int(d, "num_actual_tokens", cm ? cm->num_actual_tokens : 0);
    attn__put_int(d, "max_query_len", cm ? cm->max_query_len : 0);
    attn__put_int(d, "max_seq_len", cm ? cm->max_seq_len : 0);
    attn__put_bool(d, "causal", cm ? cm->causal : true);
    attn__put_int(d, "block_size", cm ? cm->block_size : 0);
    static const int32_t zero = 0;
    attn__jw_key(d, "query_start_loc");
    int_array(d, cm ? cm->query_start_loc : &zero, cm ? cm->num_reqs + 1 : 1, 1 << 20);
    attn__jw_key(d, "seq_lens");
    int_array(d, cm ? cm->seq_lens : &zero, cm ? cm->num_reqs : 0, 1 << 20);
    attn__jw_key(d, "block_table");
    attn__jw_arr_begin(d);
    for (int r = 0; cm && r < cm->num_reqs && r < 8; r++) {
        int used = (cm->seq_lens[r] + cm->block_size - 1) / cm->block_size;
        if (used > cm->block_table_stride) used = cm->block_table_stride;
        int_array(d, cm->block_table + (size_t)r * (size_t)cm->block_table_stride, used, 12);
    }
    attn__jw_arr_end(d);
    attn__put_int(d, "block_table_rows_shown", cm ? (cm->num_reqs < 8 ? cm->num_reqs : 8) : 0);
    char ranges[512] = "";
    if (cm) slot_ranges(cm->slot_mapping, cm->num_actual_tokens, ranges, sizeof ranges);
    attn__jw_key(d, "slot_mapping");
    attn__jw_obj_begin(d);
    attn__put_int(d, "count", cm ? cm->num_actual_tokens : 0);
    attn__put_str(d, "ranges", ranges);
    attn__jw_obj_end(d);
    attn__jw_obj_end(d); /* common */
    attn__put_str(d, "fresh", cm ? fresh : (ng ? "no batch this step" : "no KV-cache groups"));
    attn__put_int(d, "builds", ss->builds);
    attn__put_int(d, "block_table_updates", ss->block_table_updates);
    attn__put_int(d, "common_prefix_len", ss->common_prefix_len);
    attn__jw_key(d, "groups");
    attn__jw_arr_begin(d);
    for (int g = 0; cm && g < ng; g++) {
        attn_engine_group_info gi;
        if (attn_engine_group_info_get(s->engine, g, &gi) != ATTN_OK) continue;
        char buf[4096];
        bool reused = false;
        int len = attn_engine_describe_metadata(s->engine, g, buf, sizeof buf, &reused);
        attn__jw_obj_begin(d);
        attn__put_int(d, "group", g);
        attn__put_int(d, "model_group", gi.model_group);
        attn__put_str(d, "backend", gi.backend);
        attn__put_str(d, "builder", gi.builder_type);
        attn__jw_key(d, "how");
        attn__jw_str(d, reused ? "reused this step's build, block table swapped"
                               : "built for this step");
        attn__jw_key(d, "metadata");
        attn__json *chk = NULL;
        char err[64];
        if (len >= 0 && (size_t)len < sizeof buf &&
            attn__json_parse(buf, (size_t)len, &chk, err, sizeof err) == ATTN_OK)
            attn__jw_raw(d, buf);
        else if (len >= 0)
            attn__jw_str(d, (size_t)len < sizeof buf ? buf : "(describe output too long)");
        else
            attn__jw_null(d);
        attn__json_free(chk);
        attn__jw_obj_end(d);
    }
    attn__jw_arr_end(d);
    write_attention(s, d, ss, hs, cm);
    attn__jw_obj_end(d);
}

attn_status attn__srv_step_run(attn__srv *s, attn__jw *d, attn__srv_step *info)
{
    attn_request_desc arr[MAX_ARRIVALS];
    int n = attn_traffic_next(s->traffic, arr, MAX_ARRIVALS);
    for (int i = 0; i < n; i++) {
        attn_status st = attn_engine_add_request(s->engine, &arr[i], NULL);
        if (st == ATTN_OUT_OF_RANGE || st == ATTN_INVALID_ARGUMENT)
            s->dropped++; /* queue full / longer than the pool holds: not admitted */
        else if (st != ATTN_OK)
            return st;
    }
    attn_engine_step_stats ss;
    attn__harness_stats hs;
    memset(&ss, 0, sizeof ss);
    attn_status st = attn__harness_step(s->harness, s->engine, &ss, &hs);
    if (st != ATTN_OK) return st; /* the step set the detail */
    memset(info, 0, sizeof *info);
    info->num_reqs = ss.num_reqs;
    info->num_tokens = ss.num_tokens;
    info->admitted = ss.admitted;
    info->finished = ss.finished;
    info->running = ss.running;
    info->waiting = ss.waiting;
    info->blocks_in_use = ss.blocks_in_use;
    info->preempted = ss.preempted;

    int ng = attn_engine_num_groups(s->engine);
    const attn_common_metadata *cm =
        (ng > 0 && ss.num_reqs > 0) ? attn_engine_common_metadata(s->engine, 0) : NULL;
    char fresh[512] = "";
    freshness(s, cm, fresh, sizeof fresh);
    if (d) write_detail(s, d, &ss, &hs, cm, fresh);
    s->prev_finished = ss.finished;
    s->steps++;
    return ATTN_OK;
}
