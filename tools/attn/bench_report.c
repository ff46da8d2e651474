/* `attn bench`: the report of a run, as one JSON object or as a table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cli.h"
#include "util/strbuf.h"

static void json_result(attn__jw *w, const char *backend, const shape_t *sh, const result_t *r,
                        const result_t *vs, const char *vs_name)
{
    attn__jw_obj_begin(w);
    attn__jw_key(w, "backend");
    attn__jw_str(w, backend);
    attn__jw_key(w, "phase");
    attn__jw_str(w, sh->prefill ? "prefill" : "decode");
    attn__jw_key(w, "batch");
    attn__jw_int(w, sh->batch);
    attn__jw_key(w, "context");
    attn__jw_int(w, sh->context);
    attn__jw_key(w, "query_len");
    attn__jw_int(w, sh->qlen);
    attn__jw_key(w, "kv_dtype");
    attn__jw_str(w, bench_kv_label(sh->kv));
    attn__jw_key(w, "kv_pool_bytes");
    attn__jw_int(w, (long long)r->pool_bytes);
    if (!r->ok) {
        attn__jw_key(w, "error");
        attn__jw_str(w, r->error);
        attn__jw_obj_end(w);
        return;
    }
    attn__jw_key(w, "ms");
    attn__jw_num(w, r->ms);
    attn__jw_key(w, "best_ms");
    attn__jw_num(w, r->best_ms);
    attn__jw_key(w, "repeats");
    attn__jw_int(w, r->repeats);
    attn__jw_key(w, "tokens_per_s");
    attn__jw_num(w, r->tokens_per_s);
    attn__jw_key(w, "gbps");
    attn__jw_num(w, r->gbps);
    attn__jw_key(w, "bw_fraction");
    attn__jw_num(w, r->bw_fraction);
    attn__jw_key(w, "gflops");
    attn__jw_num(w, r->gflops);
    attn__jw_key(w, "flops_fraction");
    if (r->flops_fraction >= 0)
        attn__jw_num(w, r->flops_fraction);
    else
        attn__jw_null(w);
    attn__jw_key(w, "limit");
    attn__jw_str(w, r->limit.name);
    attn__jw_key(w, "limit_value");
    if (r->limit.value > 0)
        attn__jw_num(w, r->limit.value);
    else
        attn__jw_null(w);
    attn__jw_key(w, "limit_unit");
    attn__jw_str(w, r->limit.kind == ATTN_CPU_LIMIT_BANDWIDTH ? "GB/s" : "GFLOP/s");
    attn__jw_key(w, "limit_fraction");
    if (r->limit_fraction >= 0)
        attn__jw_num(w, r->limit_fraction);
    else
        attn__jw_null(w);
    if (vs) {
        attn__jw_key(w, "vs_backend");
        attn__jw_str(w, vs_name);
        if (vs->ok) {
            attn__jw_key(w, "vs_ms");
            attn__jw_num(w, vs->ms);
            attn__jw_key(w, "speedup_vs");
            attn__jw_num(w, vs->ms / r->ms);
        } else {
            attn__jw_key(w, "speedup_vs");
            attn__jw_null(w);
        }
    }
    attn__jw_obj_end(w);
}

static void text_row(const char *backend, const shape_t *sh, const result_t *r, const result_t *vs)
{
    printf("%-11s %-7s %5d %7d %6d %-9s ", backend, sh->prefill ? "prefill" : "decode", sh->batch,
           sh->context, sh->qlen, bench_kv_label(sh->kv));
    if (!r->ok) {
        printf("error: %s\n", r->error);
        return;
    }
    printf("%10.3f %11.0f %7.2f %5.0f%% %8.1f", r->ms, r->tokens_per_s, r->gbps,
           r->bw_fraction * 100, r->gflops);
    if (r->flops_fraction >= 0)
        printf(" %5.1f%%", r->flops_fraction * 100);
    else
        printf(" %6s", "-");
    printf(" %-10s", r->limit.key);
    if (r->limit_fraction >= 0)
        printf(" %5.1f%%", r->limit_fraction * 100);
    else
        printf(" %6s", "-");
    if (vs) printf(" %10.3f %8.1fx", vs->ok ? vs->ms : NAN, vs->ok ? vs->ms / r->ms : NAN);
    printf("\n");
}

static void json_machine(attn__jw *w, const bench_run *r)
{
    const attn_cpu_machine *m = r->m;
    attn__jw_obj_begin(w);
    attn__jw_key(w, "read_gbps");
    attn__jw_num(w, m->read_gbps);
    attn__jw_key(w, "peak_gflops");
    attn__jw_num(w, m->peak_gflops);
    attn__jw_key(w, "threads");
    attn__jw_int(w, m->threads);
    attn__jw_key(w, "isa");
    attn__jw_str(w, m->isa);
    attn__jw_key(w, "cpu_attn_variant");
    attn__jw_str(w, attn_cpu_attn_variant());
    attn__jw_key(w, "cpu");
    attn__jw_str(w, attn_cpu_info_get()->model);
    attn__jw_key(w, "buffer_bytes");
    attn__jw_int(w, (long long)m->buffer_bytes);
    attn__jw_key(w, "llc_bytes");
    attn__jw_int(w, (long long)m->llc_bytes);
    attn__jw_key(w, "block_size");
    attn__jw_int(w, r->o->block_size);
    attn__jw_key(w, "model");
    attn__jw_str(w, "32 query heads, 8 KV heads, head size 128, bf16");
    attn__jw_obj_end(w);
}

int bench_report_json(const bench_run *r)
{
    attn__sb sb;
    attn__jw w;
    attn_cli_json_begin(&sb, &w);
    attn__jw_key(&w, "machine");
    json_machine(&w, r);
    attn__jw_key(&w, "results");
    attn__jw_arr_begin(&w);
    bool vs = r->nbe > 1;
    for (int i = 0; i < r->ns; i++) {
        json_result(&w, r->bes[0].name, &r->shapes[i], &r->res[2 * i],
                    vs ? &r->res[2 * i + 1] : NULL, vs ? r->bes[1].name : NULL);
        if (vs) json_result(&w, r->bes[1].name, &r->shapes[i], &r->res[2 * i + 1], NULL, NULL);
    }
    attn__jw_arr_end(&w);
    return attn_cli_json_end(&sb, &w, "bench");
}

void bench_report_text(const bench_run *r)
{
    const attn_cpu_machine *m = r->m;
    printf("machine: %s, %d threads; read %.1f GB/s (%zu MiB buffer, LLC %llu MiB); peak %.1f "
           "GFLOP/s (%s fp32 FMA); CPU_ATTN variant %s\n",
           attn_cpu_info_get()->model, m->threads, m->read_gbps, m->buffer_bytes >> 20,
           (unsigned long long)(m->llc_bytes >> 20), m->peak_gflops, m->isa,
           attn_cpu_attn_variant());
    printf("model: %d query heads, %d KV heads, head size %d, bf16; block size %d\n", BENCH_HEADS,
           BENCH_KV_HEADS, BENCH_HEAD, r->o->block_size);
    attn_cpu_limit ld, lp;
    attn_cpu_phase_limit(m, NULL, false, r->o->hot, &ld);
    attn_cpu_phase_limit(m, NULL, true, r->o->hot, &lp);
    printf("limits: decode against %s", ld.name);
    if (ld.value > 0) printf(" %.1f %s", ld.value, ld.kind ? "GFLOP/s" : "GB/s");
    printf("; prefill against %s", lp.name);
    if (lp.value > 0) printf(" %.1f GFLOP/s", lp.value);
    printf("\n\n");
    printf("%-11s %-7s %5s %7s %6s %-9s %10s %11s %7s %6s %8s %6s %-10s %6s", "backend", "phase",
           "batch", "context", "qlen", "kv", "ms", "tokens/s", "GB/s", "%bw", "GFLOP/s", "%peak",
           "limit", "%limit");
    bool vs = r->nbe > 1;
    if (vs) printf(" %10s %9s", "vs ms", "speedup");
    printf("\n");
    for (int i = 0; i < r->ns; i++)
        text_row(r->bes[0].name, &r->shapes[i], &r->res[2 * i], vs ? &r->res[2 * i + 1] : NULL);
    if (vs) {
        printf("\n(vs %s)\n", r->bes[1].name);
        for (int i = 0; i < r->ns; i++)
            text_row(r->bes[1].name, &r->shapes[i], &r->res[2 * i + 1], NULL);
    }
}
