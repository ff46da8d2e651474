/* `attn bench`: runs an attention backend on this machine for decode and
 * prefill shapes and reports, per shape, the median time of repeated calls,
 * tokens/s, KV bytes read per second against the read bandwidth measured in
 * the same run, GFLOP/s against the measured peak FMA rate, and the share of
 * the limit that binds the phase (attn/cpu_perf.h); --vs runs a
 * second backend on the same shapes and reports the speedup.
 *
 * Every call reads its KV blocks cold: the blocks of consecutive repeats
 * come from a pool as large as the bandwidth buffer (sized from the
 * last-level cache, attn/cpu_perf.h), as the layers of a real model would. Bytes are the KV cache
 * bytes the call must read at least once; flops count 2 per multiply-add of QK and PV over the keys
 * each query actually sees (causal work skipped is not credited). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

/* The CPU_ATTN variants of this build, best first, comma-separated. */
static void variant_names(char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; attn_cpu_attn_variant_name(i) && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? ", " : "",
                              attn_cpu_attn_variant_name(i));
}

static int usage(FILE *f)
{
    char variants[128];
    variant_names(variants, sizeof variants);
    fprintf(f,
            "usage: attn bench [--backend NAME] [--vs NAME] [--full] [--json]\n"
            "                  [--phase decode|prefill] [--batch LIST] [--context LIST]\n"
            "                  [--prefill LIST] [--kv LIST] [--repeats N] [--block-size N]\n"
            "                  [--threads N] [--variant NAME] [--max-seconds S]\n"
            "                  [--buffer-mb N] [--hot]\n\n"
            "Benchmark an attention backend on this machine: %d query heads, %d KV heads,\n"
            "head size %d, bf16 activations. Per shape: median time of repeated calls\n"
            "(after untimed warm-up calls: the first, then more up to 0.25 s),\n"
            "tokens/s, KV bytes read per second and %% of the read bandwidth measured in\n"
            "this run (all threads streaming a buffer much larger than the LLC), GFLOP/s\n"
            "and %% of the measured peak FMA rate (register-resident FMA loop on all\n"
            "threads, widest vector ISA; '-' where the kernels run other arithmetic),\n"
            "and %% of the limit that binds the phase (column limit): decode against\n"
            "the read bandwidth (cold KV), prefill and --hot against the peak of the\n"
            "arithmetic the CPU_ATTN variant runs; a peak this build cannot measure\n"
            "(AMX, AVX-512 BF16) is named and left without a value.\n\n"
            "  --backend NAME   backend to run (default CPU_ATTN)\n"
            "  --vs NAME        also run NAME on the same shapes; adds speedup_vs\n"
            "  --full           the whole sweep (batches 1,4,16,64; contexts 1k..32k;\n"
            "                   bf16, fp8_e4m3, fp8_e5m2; prefills 128..4096)\n"
            "  --json           one JSON object: {\"machine\": {...}, \"results\": [...]}\n"
            "  --phase P        only decode or only prefill shapes\n"
            "  --batch LIST     decode batch sizes, e.g. 1,16 (default 1,16)\n"
            "  --context LIST   decode contexts in tokens (default 1024,4096,16384)\n"
            "  --prefill LIST   prefill lengths (default 512,2048)\n"
            "  --kv LIST        KV dtypes: bf16 (auto), fp8, fp8_e4m3, fp8_e5m2\n"
            "                   (default bf16,fp8 for decode; prefill uses the first)\n"
            "  --repeats N      timed calls per shape (default 7; fewer when slow)\n"
            "  --max-seconds S  time budget per shape and backend (default 3)\n"
            "  --block-size N   KV block size (default 128, the CPU default)\n"
            "  --threads N      worker threads (sets ATTN_NUM_THREADS)\n"
            "  --variant NAME   force a CPU_ATTN kernel variant (default: the best this CPU\n"
            "                   runs): %s\n"
            "  --buffer-mb N    bandwidth buffer and minimum KV pool size (default: %dx the\n"
            "                   LLC of all its instances, at least 1 GiB, at most a quarter\n"
            "                   of memory); smaller pools make KV cache-resident\n"
            "  --hot            reuse the same KV blocks every call (cache-resident:\n"
            "                   shows the compute limit; not the default)\n"
            "A progress line goes to stderr. The default run takes well under a minute.\n"
            "Exit 77: the backend's code is libattn's but cannot load here (FLASH_ATTN\n"
            "without a CUDA driver).\n",
            BENCH_HEADS, BENCH_KV_HEADS, BENCH_HEAD, variants, ATTN_CPU_PROBE_LLC_TIMES);
    return f == stdout ? ATTN_EXIT_OK : ATTN_EXIT_USAGE;
}

/* Every failure says why (an empty list, too many entries, a bad number). */
static bool parse_list(const char *opt, const char *s, int *out, int *n, long lo, long hi)
{
    *n = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf) {
        attn_cli_usage_error("bench", "%s: list longer than %zu characters", opt, sizeof buf - 1);
        return false;
    }
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        long v;
        if (*n >= MAX_LIST) {
            attn_cli_usage_error("bench", "%s: at most %d entries", opt, MAX_LIST);
            return false;
        }
        if (!attn_cli_int("bench", opt, tok, lo, hi, &v)) return false;
        out[(*n)++] = (int)v;
    }
    if (*n == 0)
        attn_cli_usage_error("bench", "%s: expected a comma-separated list, got '%s'", opt, s);
    return *n > 0;
}

/* What the command line asked for. */
typedef struct {
    const char *backend, *vs_name, *phase, *variant, *kv_list;
    bool full;
    opts_t o;
    int batches[MAX_LIST], nb, contexts[MAX_LIST], nc, prefills[MAX_LIST], np;
    bool user_b, user_c, user_p;
    attn_kv_dtype kvs[MAX_KV];
    int nkv;
} args_t;

/* One option at argv[*i]: 0 taken, 1 not an option of bench, or the exit
 * code of a usage error (already printed). */
static int parse_opt(int argc, char **argv, int *i, args_t *a)
{
    const char *v = NULL;
    bool bad = false;
    long x;
    if (attn_cli_flag(argv, *i, "--full")) {
        a->full = true;
    } else if (attn_cli_flag(argv, *i, "--hot")) {
        a->o.hot = true;
    } else if (attn_cli_flag(argv, *i, "--json")) {
        a->o.json = true;
    } else if (attn_cli_opt(argc, argv, i, "--backend", &v, &bad)) {
        a->backend = v;
    } else if (attn_cli_opt(argc, argv, i, "--vs", &v, &bad)) {
        a->vs_name = v;
    } else if (attn_cli_opt(argc, argv, i, "--phase", &v, &bad)) {
        if (!bad && strcmp(v, "decode") && strcmp(v, "prefill"))
            return attn_cli_usage_error("bench", "--phase must be decode or prefill");
        a->phase = v;
    } else if (attn_cli_opt(argc, argv, i, "--batch", &v, &bad)) {
        bad = bad || !parse_list("--batch", v, a->batches, &a->nb, 1, 4096);
        a->user_b = true;
    } else if (attn_cli_opt(argc, argv, i, "--context", &v, &bad)) {
        bad = bad || !parse_list("--context", v, a->contexts, &a->nc, 1, 1 << 20);
        a->user_c = true;
    } else if (attn_cli_opt(argc, argv, i, "--prefill", &v, &bad)) {
        bad = bad || !parse_list("--prefill", v, a->prefills, &a->np, 1, 1 << 16);
        a->user_p = true;
    } else if (attn_cli_opt(argc, argv, i, "--kv", &v, &bad)) {
        a->kv_list = v;
    } else if (attn_cli_opt(argc, argv, i, "--repeats", &v, &bad)) {
        bad = bad || !attn_cli_int("bench", "--repeats", v, 1, 1000, &x);
        a->o.repeats = bad ? a->o.repeats : (int)x;
    } else if (attn_cli_opt(argc, argv, i, "--max-seconds", &v, &bad)) {
        bad = bad || !attn_cli_int("bench", "--max-seconds", v, 1, 3600, &x);
        a->o.max_seconds = bad ? a->o.max_seconds : (double)x;
    } else if (attn_cli_opt(argc, argv, i, "--block-size", &v, &bad)) {
        bad = bad || !attn_cli_int("bench", "--block-size", v, 1, 4096, &x);
        a->o.block_size = bad ? a->o.block_size : (int)x;
    } else if (attn_cli_opt(argc, argv, i, "--threads", &v, &bad)) {
        bad = bad || !attn_cli_int("bench", "--threads", v, 1, 4096, &x);
        if (!bad) setenv("ATTN_NUM_THREADS", v, 1);
    } else if (attn_cli_opt(argc, argv, i, "--buffer-mb", &v, &bad)) {
        bad = bad || !attn_cli_int("bench", "--buffer-mb", v, 1, 1 << 20, &x);
        a->o.buffer_bytes = bad ? a->o.buffer_bytes : (size_t)x << 20;
    } else if (attn_cli_opt(argc, argv, i, "--variant", &v, &bad)) {
        a->variant = v;
    } else {
        return 1;
    }
    return bad ? ATTN_EXIT_USAGE : 0;
}

/* --full's sweep where the user gave no list, then the KV dtypes. */
static int finish_args(args_t *a)
{
    if (a->full) {
        int fb[] = {1, 4, 16, 64}, fc[] = {1024, 2048, 4096, 8192, 16384, 32768},
            fp[] = {128, 512, 1024, 2048, 4096};
        if (!a->user_b) memcpy(a->batches, fb, sizeof fb), a->nb = 4;
        if (!a->user_c) memcpy(a->contexts, fc, sizeof fc), a->nc = 6;
        if (!a->user_p) memcpy(a->prefills, fp, sizeof fp), a->np = 5;
        if (!a->kv_list) a->kv_list = "bf16,fp8_e4m3,fp8_e5m2";
    }
    char buf[128];
    snprintf(buf, sizeof buf, "%s", a->kv_list ? a->kv_list : "bf16,fp8");
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        attn_kv_dtype k;
        if (!strcmp(t, "bf16") || !strcmp(t, "auto"))
            k = ATTN_KV_AUTO;
        else if (attn_kv_dtype_parse(t, &k) != ATTN_OK ||
                 !(k == ATTN_KV_FP8 || k == ATTN_KV_FP8_E4M3 || k == ATTN_KV_FP8_E5M2 ||
                   k == ATTN_KV_BFLOAT16))
            return attn_cli_usage_error("bench", "--kv: unsupported KV dtype '%s'", t);
        if (a->nkv < MAX_KV) a->kvs[a->nkv++] = k;
    }
    return ATTN_EXIT_OK;
}

static int parse_args(int argc, char **argv, args_t *a)
{
    *a = (args_t){.backend = "CPU_ATTN",
                  .o = {.block_size = 128, .repeats = 7, .max_seconds = 3.0},
                  .batches = {1, 16},
                  .nb = 2,
                  .contexts = {1024, 4096, 16384},
                  .nc = 3,
                  .prefills = {512, 2048},
                  .np = 2};
    for (int i = 1; i < argc; i++) {
        if (attn_cli_is_help(argv[i])) {
            usage(stdout);
            return -1; /* done: exit 0 */
        }
        int rc = parse_opt(argc, argv, &i, a);
        if (rc == 1) return attn_cli_usage_error("bench", "unknown option '%s'", argv[i]);
        if (rc) return rc;
    }
    return finish_args(a);
}

/* Resolves the backends on the real machine and forces --variant; each
 * backend's self-test runs when its kernel is opened (attn/kernel.h): a
 * backend that fails it is not measured. */
static int resolve_backends(const args_t *a, backend_t *bes, int nbe)
{
    attn_platform *plat = NULL;
    if (attn_platform_detect(&plat) != ATTN_OK) {
        fprintf(stderr, "attn bench: cannot detect this machine: %s\n", attn_last_error());
        return ATTN_EXIT_FAILED;
    }
    for (int i = 0; i < nbe; i++) {
        /* the library's text only when the resolve itself failed (else it is stale) */
        attn_status st = attn_backend_resolve(plat, bes[i].name, &bes[i].b);
        bool resolved = st == ATTN_OK, code = false;
        if (st == ATTN_IMPORT_ERROR && attn_backend_has_kernel(bes[i].name, &code) == ATTN_OK &&
            code) {
            /* libattn has its code (libattn_cuda.so) but no driver here */
            fprintf(stderr, "attn bench: backend %s: skipped, its code cannot load here: %s\n",
                    bes[i].name, attn_last_error());
            attn_platform_free(plat);
            return ATTN_EXIT_SKIP;
        }
        if (!resolved || !bes[i].b || !bes[i].b->kernel || bes[i].b->desc->is_mla) {
            fprintf(stderr, "attn bench: backend %s cannot run here: %s\n", bes[i].name,
                    resolved ? "no standard forward kernel" : attn_last_error());
            attn_platform_free(plat);
            return ATTN_EXIT_FAILED;
        }
    }
    attn_platform_free(plat);
    if (a->variant && attn_cpu_attn_force_variant(a->variant) != ATTN_OK) {
        char names[128];
        variant_names(names, sizeof names);
        fprintf(stderr, "attn bench: --variant: %s (variants: %s)\n", attn_last_error(), names);
        return ATTN_EXIT_USAGE;
    }
    return ATTN_EXIT_OK;
}

/* Decode shapes per KV dtype (those whose KV fits in 4 GiB), then prefill
 * shapes (every dtype with --full, else the first). */
static int build_shapes(const args_t *a, shape_t *shapes)
{
    int ns = 0;
    if (!a->phase || !strcmp(a->phase, "decode"))
        for (int k = 0; k < a->nkv; k++)
            for (int bi = 0; bi < a->nb; bi++)
                for (int ci = 0; ci < a->nc && ns < MAX_SHAPES; ci++) {
                    shape_t sh = {false, a->batches[bi], a->contexts[ci], 1, a->kvs[k]};
                    double bytes, fl, tk;
                    bench_shape_figures(&sh, &bytes, &fl, &tk);
                    if (bytes > 4.0 * (1 << 30)) /* keep the pool in memory */
                        continue;
                    shapes[ns++] = sh;
                }
    if (!a->phase || !strcmp(a->phase, "prefill"))
        for (int k = 0; k < (a->full ? a->nkv : 1); k++)
            for (int pi = 0; pi < a->np && ns < MAX_SHAPES; pi++)
                shapes[ns++] = (shape_t){true, 1, a->prefills[pi], a->prefills[pi], a->kvs[k]};
    return ns;
}

/* One KV pool per backend and dtype: at least the bandwidth buffer m
 * streamed (sized from the LLC, or --buffer-mb), so decode reads its KV
 * from as far as the bandwidth it is held against, and at least the
 * largest shape; a second backend with the same layout shares the first's. */
static int make_pools(const args_t *a, const backend_t *bes, int nbe, const shape_t *shapes, int ns,
                      const attn_cpu_machine *m, pool_t pools[2][MAX_KV])
{
    const opts_t *o = &a->o;
    for (int bi = 0; bi < nbe; bi++)
        for (int k = 0; k < a->nkv; k++) {
            int need = 0;
            for (int i = 0; i < ns; i++)
                if (shapes[i].kv == a->kvs[k]) {
                    int nbl =
                        shapes[i].batch * ((shapes[i].context + o->block_size - 1) / o->block_size);
                    if (nbl > need) need = nbl;
                }
            if (!need) continue;
            double esz = a->kvs[k] == ATTN_KV_AUTO || a->kvs[k] == ATTN_KV_BFLOAT16 ? 2.0 : 1.0;
            double blk_bytes = 2.0 * o->block_size * BENCH_KV_HEADS * BENCH_HEAD * esz;
            double least = (double)m->buffer_bytes / blk_bytes;
            if (need < least) need = least < INT32_MAX ? (int)least : INT32_MAX;
            if (bi == 1 && bes[1].b->desc->required_layout == bes[0].b->desc->required_layout) {
                pools[1][k] = pools[0][k]; /* same layout: share the memory */
                continue;
            }
            if (bench_pool_make(&pools[bi][k], bes[bi].b, a->kvs[k], need, o->block_size) !=
                ATTN_OK) {
                fprintf(stderr, "attn bench: cannot lay out a %s KV pool for %s: %s\n",
                        bench_kv_label(a->kvs[k]), bes[bi].name, attn_last_error());
                return ATTN_EXIT_ERROR;
            }
        }
    return ATTN_EXIT_OK;
}

static void measure_all(const args_t *a, const backend_t *bes, int nbe, const shape_t *shapes,
                        int ns, pool_t pools[2][MAX_KV], const attn_cpu_machine *m, result_t *res)
{
    for (int i = 0; i < ns; i++) {
        int k = 0;
        while (a->kvs[k] != shapes[i].kv)
            k++;
        for (int bi = 0; bi < nbe; bi++) {
            if (a->o.progress)
                fprintf(stderr, "attn bench: [%d/%d] %s %s batch=%d context=%d kv=%s\n", i + 1, ns,
                        bes[bi].name, shapes[i].prefill ? "prefill" : "decode", shapes[i].batch,
                        shapes[i].context, bench_kv_label(shapes[i].kv));
            bench_measure(&bes[bi], &shapes[i], &pools[bi][k], &a->o, m, &res[2 * i + bi]);
        }
    }
}

int attn_cmd_bench(int argc, char **argv)
{
    args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? ATTN_EXIT_OK : rc;
    backend_t bes[2] = {{a.backend, NULL}, {a.vs_name, NULL}};
    int nbe = a.vs_name ? 2 : 1;
    if ((rc = resolve_backends(&a, bes, nbe)) != ATTN_EXIT_OK) return rc;
    static shape_t shapes[MAX_SHAPES];
    int ns = build_shapes(&a, shapes);
    a.o.progress = ns > 1;

    attn_cpu_machine m;
    if (a.o.progress)
        fprintf(stderr, "attn bench: measuring read bandwidth and peak FMA rate...\n");
    if (attn_cpu_measure_machine(a.o.buffer_bytes, &m) != ATTN_OK) {
        fprintf(stderr, "attn bench: machine measurement failed: %s\n", attn_last_error());
        return ATTN_EXIT_ERROR;
    }
    pool_t pools[2][MAX_KV];
    memset(pools, 0, sizeof pools);
    result_t *res = calloc((size_t)ns * 2, sizeof(result_t));
    if (!res) return ATTN_EXIT_ERROR;
    rc = make_pools(&a, bes, nbe, shapes, ns, &m, pools);
    if (rc == ATTN_EXIT_OK) {
        measure_all(&a, bes, nbe, shapes, ns, pools, &m, res);
        bench_run run = {&a.o, &m, bes, nbe, shapes, ns, res};
        if (a.o.json)
            rc = bench_report_json(&run);
        else
            bench_report_text(&run);
        for (int i = 0; i < 2 * ns; i++)
            if (i % 2 < nbe && !res[i].ok) rc = ATTN_EXIT_ERROR;
    }
    for (int k = 0; k < a.nkv; k++) {
        if (pools[1][k].data && pools[1][k].data != pools[0][k].data) bench_pool_free(&pools[1][k]);
        bench_pool_free(&pools[0][k]);
    }
    free(res);
    return rc;
}
