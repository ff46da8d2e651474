/* `attn bench`: runs an attention backend on this machine for decode and
 * prefill shapes and reports, per shape, the median time of repeated calls,
 * tokens/s, KV bytes read per second against the read bandwidth measured in
 * the same run, GFLOP/s against the measured peak FMA rate, and the share of
 * the limit that binds the phase (attn/cpu_perf.h); --vs runs a
 * second backend on the same shapes and reports the speedup.
 *
 * Every call reads its KV blocks cold: the blocks of consecutive repeats
 * come from a pool much larger than the last-level cache, as the layers of
 * a real model would. Bytes are the KV cache bytes the call must read at
 * least once; flops count 2 per multiply-add of QK and PV over the keys each
 * query actually sees (causal work skipped is not credited). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/cpu_perf.h"
#include "attn/kvcache.h"
#include "cli.h"
#include "util/strbuf.h"

#define BENCH_HEADS    32
#define BENCH_KV_HEADS 8
#define BENCH_HEAD     128
#define MAX_SHAPES     256
#define MAX_LIST       16

typedef struct {
    bool prefill;
    int batch, context, qlen;
    attn_kv_dtype kv;
} shape_t;

typedef struct {
    double ms, best_ms, tokens_per_s, gbps, bw_fraction, gflops, flops_fraction;
    attn_cpu_limit limit;  /* what binds the phase (attn/cpu_perf.h) */
    double limit_fraction; /* < 0: the limit has no value here */
    int repeats;
    bool ok;
    char error[256];
} result_t;

typedef struct {
    const char *name;
    const attn_backend *b;
} backend_t;

typedef struct {
    int block_size;
    int repeats;
    double max_seconds; /* per shape and backend */
    bool json;
    bool progress;
    bool hot;            /* reuse the same blocks: cache-resident KV, compute-bound figures */
    size_t buffer_bytes; /* 0: default (>= 1 GiB); also the KV pool's minimum */
} opts_t;

#define BENCH_WARM_S     0.25  /* untimed calls before the samples, seconds */
#define BENCH_WARM_CALLS 10000 /* and calls at most */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *kv_label(attn_kv_dtype k)
{
    return k == ATTN_KV_AUTO ? "bf16" : attn_kv_dtype_name(k);
}

static int usage(FILE *f)
{
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
            "  --variant NAME   force a CPU_ATTN kernel variant (avx512-bf16, avx512,\n"
            "                   avx2, portable)\n"
            "  --buffer-mb N    bandwidth buffer and minimum KV pool size (default: max of\n"
            "                   1 GiB and 4x the LLC); smaller pools make KV cache-resident\n"
            "  --hot            reuse the same KV blocks every call (cache-resident:\n"
            "                   shows the compute limit; not the default)\n"
            "A progress line goes to stderr. The default run takes well under a minute.\n",
            BENCH_HEADS, BENCH_KV_HEADS, BENCH_HEAD);
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

/* ---- a KV pool per dtype, filled once ---------------------------------------- */

typedef struct {
    attn_kv_dtype kv;
    const attn_backend *b;
    int num_blocks;
    attn_kv_layout_info li;
    void *data;
    size_t bytes;
} pool_t;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static attn_status pool_make(pool_t *p, const attn_backend *b, attn_kv_dtype kv, int num_blocks,
                             int bs)
{
    memset(p, 0, sizeof *p);
    p->kv = kv;
    p->b = b;
    p->num_blocks = num_blocks;
    attn_kv_layout layout = b->desc->required_layout != ATTN_LAYOUT_DEFAULT
                                ? b->desc->required_layout
                                : ATTN_LAYOUT_NHD;
    attn_status st = attn_kv_layout_compute(b->desc, layout, num_blocks, bs, BENCH_KV_HEADS,
                                            BENCH_HEAD, 0, kv, ATTN_DTYPE_BF16, &p->li);
    if (st != ATTN_OK) return st;
    size_t bytes = (size_t)p->li.bytes_per_layer;
    p->bytes = (bytes + 4095) / 4096 * 4096;
    /* transparent huge pages where allowed, like the bandwidth buffer */
    p->data = mmap(NULL, p->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p->data == MAP_FAILED) {
        p->data = NULL;
        return ATTN_OUT_OF_MEMORY;
    }
#ifdef MADV_HUGEPAGE
    madvise(p->data, p->bytes, MADV_HUGEPAGE);
#endif
    uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)kv;
    if (p->li.elem == ATTN_ELEM_BF16) {
        uint16_t *u = p->data;
        size_t n = bytes / 2;
        for (size_t i = 0; i < n; i += 4) {
            uint64_t r = rng_next(&s);
            for (int k = 0; k < 4 && i + k < n; k++) {
                /* |x| in [2^-8, 2), random sign and mantissa */
                uint16_t v = (uint16_t)(r >> (16 * k));
                u[i + k] = (uint16_t)((v & 0x807f) | (uint16_t)((0x77 + (v >> 7 & 7)) << 7));
            }
        }
    } else {
        uint8_t *u = p->data;
        for (size_t i = 0; i < bytes; i += 8) {
            uint64_t r = rng_next(&s);
            for (int k = 0; k < 8 && i + (size_t)k < bytes; k++)
                u[i + (size_t)k] = (uint8_t)((r >> (8 * k)) & 0xbf); /* finite codes */
        }
    }
    p->li.view.data = p->data;
    return ATTN_OK;
}

static void pool_free(pool_t *p)
{
    if (p->data) munmap(p->data, p->bytes);
    p->data = NULL;
}

/* ---- one (backend, shape) measurement ---------------------------------------- */

static void shape_figures(const shape_t *sh, double *bytes, double *flops, double *tokens)
{
    double esz = sh->kv == ATTN_KV_AUTO || sh->kv == ATTN_KV_BFLOAT16 ? 2.0 : 1.0;
    *bytes = (double)sh->batch * sh->context * BENCH_KV_HEADS * BENCH_HEAD * 2.0 * esz;
    double seen = 0;
    for (int i = 0; i < sh->qlen; i++)
        seen += sh->context - sh->qlen + i + 1;
    *flops = (double)sh->batch * BENCH_HEADS * seen * BENCH_HEAD * 4.0;
    *tokens = (double)sh->batch * sh->qlen;
}

static void measure(const backend_t *be, const shape_t *sh, pool_t *pool, const opts_t *o,
                    const attn_cpu_machine *m, result_t *res)
{
    memset(res, 0, sizeof *res);
    const attn_backend *b = be->b;
    const attn_builder_ops *bo = b->desc->builder;
    int bs = o->block_size;
    int nbr = (sh->context + bs - 1) / bs;
    int tokens = sh->batch * sh->qlen;
    size_t qn = (size_t)tokens * BENCH_HEADS * BENCH_HEAD;
    uint16_t *q = malloc(qn * 2), *out = malloc(qn * 2);
    int32_t *qsl = malloc(sizeof(int32_t) * (size_t)(sh->batch + 1));
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)sh->batch);
    int32_t *bt = malloc(sizeof(int32_t) * (size_t)sh->batch * (size_t)nbr);
    int64_t *slots = malloc(sizeof(int64_t) * (size_t)tokens);
    void *bstate = NULL, *impl = NULL;
    double *times = calloc((size_t)o->repeats + 1, sizeof(double));
    if (!q || !out || !qsl || !seq || !bt || !slots || !times) {
        snprintf(res->error, sizeof res->error, "out of memory");
        goto done;
    }
    uint64_t s = 12345;
    for (size_t i = 0; i < qn; i++)
        q[i] = (uint16_t)((rng_next(&s) & 0x807f) | 0x3c00); /* |q| in [2^-7, 2^-6) */
    for (int r = 0; r <= sh->batch; r++)
        qsl[r] = r * sh->qlen;
    for (int r = 0; r < sh->batch; r++)
        seq[r] = sh->context;
    attn_layer_params lp = {.num_heads = BENCH_HEADS,
                            .num_kv_heads = BENCH_KV_HEADS,
                            .head_size = BENCH_HEAD,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = ATTN_DTYPE_BF16,
                            .kv_cache_dtype = sh->kv};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = sh->batch,
                               .num_actual_tokens = tokens,
                               .max_query_len = sh->qlen,
                               .max_seq_len = sh->context,
                               .block_table = bt,
                               .block_table_stride = nbr,
                               .slot_mapping = slots,
                               .causal = true,
                               .block_size = bs};
    if (bo && bo->create) {
        attn_builder_init bi = {.desc = b->desc,
                                .layer = &lp,
                                .block_size = bs,
                                .num_blocks = pool->num_blocks,
                                .max_num_reqs = sh->batch,
                                .max_num_tokens = tokens,
                                .max_blocks_per_req = nbr};
        attn_status st = bo->create(&bi, &bstate);
        if (st != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "builder: %s", attn_last_error());
            goto done;
        }
    }
    if (b->kernel->create && b->kernel->create(&lp, &impl) != ATTN_OK) {
        snprintf(res->error, sizeof res->error, "kernel create: %s", attn_last_error());
        goto done;
    }
    int per_call = sh->batch * nbr;
    if (per_call > pool->num_blocks) {
        snprintf(res->error, sizeof res->error, "KV pool too small");
        goto done;
    }
    static int rot; /* where the next call's blocks start: every call reads cold KV */
    double spent = 0, warm_spent = 0;
    int n = 0, warm = 0;
    while (n < o->repeats) {
        if (rot + per_call > pool->num_blocks || o->hot) rot = 0;
        for (int i = 0; i < per_call; i++)
            bt[i] = rot + i;
        rot += per_call;
        for (int r = 0; r < sh->batch; r++)
            for (int i = 0; i < sh->qlen; i++) {
                int pos = sh->context - sh->qlen + i;
                slots[r * sh->qlen + i] = (int64_t)bt[r * nbr + pos / bs] * bs + pos % bs;
            }
        const void *md = NULL;
        if (bstate && bo->build(bstate, 0, &cm, false, &md) != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "build: %s", attn_last_error());
            goto done;
        }
        attn_forward_args a = {
            .layer = &lp, .common = &cm, .metadata = md, .q = q, .kv = &pool->li.view, .out = out};
        double t0 = now_s();
        attn_status st = b->kernel->forward(impl, &a);
        double dt = now_s() - t0;
        if (st != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "forward: %s: %s", attn_status_name(st),
                     attn_last_error());
            goto done;
        }
        /* Warm-up: the first call, then more while they take under
         * BENCH_WARM_S together. For a while after the pools are written,
         * calls run up to twice as slow (b16 4k bf16: 22 ms for the first
         * few after a REFERENCE pool was filled, 11 ms from then on; b1 4k,
         * the second shape of a sweep: 1.6 ms, 0.8 ms with this), and short
         * shapes take many calls to get past it. A call over 1 s is a
         * sample: not worth repeating. */
        if (n == 0 && dt <= 1.0 && warm < BENCH_WARM_CALLS &&
            (warm == 0 || warm_spent + dt <= BENCH_WARM_S)) {
            warm++;
            warm_spent += dt;
            continue;
        }
        spent += dt;
        times[n++] = dt;
        if (spent > o->max_seconds) break;
    }
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    double med = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    double bytes, flops, toks;
    shape_figures(sh, &bytes, &flops, &toks);
    res->ok = true;
    res->repeats = n;
    res->ms = med * 1e3;
    res->best_ms = times[0] * 1e3;
    res->tokens_per_s = toks / med;
    res->gbps = bytes / med / 1e9;
    res->bw_fraction = m->read_gbps > 0 ? res->gbps / m->read_gbps : 0;
    res->gflops = flops / med / 1e9;
    /* against the peak of the arithmetic the kernels run, never another's */
    const char *variant = attn_cpu_attn_variant();
    attn_cpu_limit peak;
    attn_cpu_phase_limit(m, variant, true, true, &peak);
    res->flops_fraction = attn_cpu_limit_fraction(&peak, res->gbps, res->gflops);
    attn_cpu_phase_limit(m, variant, sh->prefill, o->hot, &res->limit);
    res->limit_fraction = attn_cpu_limit_fraction(&res->limit, res->gbps, res->gflops);
done:
    if (impl && b->kernel->destroy) b->kernel->destroy(impl);
    if (bstate) bo->destroy(bstate);
    free(q);
    free(out);
    free(qsl);
    free(seq);
    free(bt);
    free(slots);
    free(times);
}

/* ---- driver ---------------------------------------------------------------------- */

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
    attn__jw_str(w, kv_label(sh->kv));
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
    printf("%-10s %-7s %5d %7d %6d %-9s ", backend, sh->prefill ? "prefill" : "decode", sh->batch,
           sh->context, sh->qlen, kv_label(sh->kv));
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

int attn_cmd_bench(int argc, char **argv)
{
    const char *backend = "CPU_ATTN", *vs_name = NULL, *phase = NULL, *variant = NULL;
    const char *kv_list = NULL;
    bool full = false;
    opts_t o = {.block_size = 128, .repeats = 7, .max_seconds = 3.0};
    int batches[MAX_LIST] = {1, 16}, nb = 2;
    int contexts[MAX_LIST] = {1024, 4096, 16384}, nc = 3;
    int prefills[MAX_LIST] = {512, 2048}, np = 2;
    bool user_b = false, user_c = false, user_p = false;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        bool bad = false;
        long x;
        if (attn_cli_is_help(argv[i])) return usage(stdout);
        if (attn_cli_flag(argv, i, "--full")) {
            full = true;
        } else if (attn_cli_flag(argv, i, "--hot")) {
            o.hot = true;
        } else if (attn_cli_flag(argv, i, "--json")) {
            o.json = true;
        } else if (attn_cli_opt(argc, argv, &i, "--backend", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            backend = v;
        } else if (attn_cli_opt(argc, argv, &i, "--vs", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            vs_name = v;
        } else if (attn_cli_opt(argc, argv, &i, "--phase", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            if (strcmp(v, "decode") && strcmp(v, "prefill"))
                return attn_cli_usage_error("bench", "--phase must be decode or prefill");
            phase = v;
        } else if (attn_cli_opt(argc, argv, &i, "--batch", &v, &bad)) {
            if (bad || !parse_list("--batch", v, batches, &nb, 1, 4096)) return ATTN_EXIT_USAGE;
            user_b = true;
        } else if (attn_cli_opt(argc, argv, &i, "--context", &v, &bad)) {
            if (bad || !parse_list("--context", v, contexts, &nc, 1, 1 << 20))
                return ATTN_EXIT_USAGE;
            user_c = true;
        } else if (attn_cli_opt(argc, argv, &i, "--prefill", &v, &bad)) {
            if (bad || !parse_list("--prefill", v, prefills, &np, 1, 1 << 16))
                return ATTN_EXIT_USAGE;
            user_p = true;
        } else if (attn_cli_opt(argc, argv, &i, "--kv", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            kv_list = v;
        } else if (attn_cli_opt(argc, argv, &i, "--repeats", &v, &bad)) {
            if (bad || !attn_cli_int("bench", "--repeats", v, 1, 1000, &x)) return ATTN_EXIT_USAGE;
            o.repeats = (int)x;
        } else if (attn_cli_opt(argc, argv, &i, "--max-seconds", &v, &bad)) {
            if (bad || !attn_cli_int("bench", "--max-seconds", v, 1, 3600, &x))
                return ATTN_EXIT_USAGE;
            o.max_seconds = (double)x;
        } else if (attn_cli_opt(argc, argv, &i, "--block-size", &v, &bad)) {
            if (bad || !attn_cli_int("bench", "--block-size", v, 1, 4096, &x))
                return ATTN_EXIT_USAGE;
            o.block_size = (int)x;
        } else if (attn_cli_opt(argc, argv, &i, "--threads", &v, &bad)) {
            if (bad || !attn_cli_int("bench", "--threads", v, 1, 4096, &x)) return ATTN_EXIT_USAGE;
            setenv("ATTN_NUM_THREADS", v, 1);
        } else if (attn_cli_opt(argc, argv, &i, "--buffer-mb", &v, &bad)) {
            if (bad || !attn_cli_int("bench", "--buffer-mb", v, 1, 1 << 20, &x))
                return ATTN_EXIT_USAGE;
            o.buffer_bytes = (size_t)x << 20;
        } else if (attn_cli_opt(argc, argv, &i, "--variant", &v, &bad)) {
            if (bad) return ATTN_EXIT_USAGE;
            variant = v;
        } else {
            return attn_cli_usage_error("bench", "unknown option '%s'", argv[i]);
        }
    }
    if (full) {
        int fb[] = {1, 4, 16, 64}, fc[] = {1024, 2048, 4096, 8192, 16384, 32768},
            fp[] = {128, 512, 1024, 2048, 4096};
        if (!user_b) memcpy(batches, fb, sizeof fb), nb = 4;
        if (!user_c) memcpy(contexts, fc, sizeof fc), nc = 6;
        if (!user_p) memcpy(prefills, fp, sizeof fp), np = 5;
        if (!kv_list) kv_list = "bf16,fp8_e4m3,fp8_e5m2";
    }
    attn_kv_dtype kvs[4];
    int nkv = 0;
    {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", kv_list ? kv_list : "bf16,fp8");
        for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
            attn_kv_dtype k;
            if (!strcmp(t, "bf16") || !strcmp(t, "auto"))
                k = ATTN_KV_AUTO;
            else if (attn_kv_dtype_parse(t, &k) != ATTN_OK ||
                     !(k == ATTN_KV_FP8 || k == ATTN_KV_FP8_E4M3 || k == ATTN_KV_FP8_E5M2 ||
                       k == ATTN_KV_BFLOAT16))
                return attn_cli_usage_error("bench", "--kv: unsupported KV dtype '%s'", t);
            if (nkv < 4) kvs[nkv++] = k;
        }
    }
    /* resolve the backends on the real machine */
    attn_platform *plat = NULL;
    if (attn_platform_detect(&plat) != ATTN_OK) {
        fprintf(stderr, "attn bench: cannot detect this machine: %s\n", attn_last_error());
        return ATTN_EXIT_FAILED;
    }
    backend_t bes[2] = {{backend, NULL}, {vs_name, NULL}};
    int nbe = vs_name ? 2 : 1;
    for (int i = 0; i < nbe; i++) {
        if (attn_backend_resolve(plat, bes[i].name, &bes[i].b) != ATTN_OK || !bes[i].b ||
            !bes[i].b->kernel || !bes[i].b->kernel->forward) {
            fprintf(stderr, "attn bench: backend %s cannot run here: %s\n", bes[i].name,
                    attn_last_error()[0] ? attn_last_error() : "no standard forward kernel");
            attn_platform_free(plat);
            return ATTN_EXIT_FAILED;
        }
    }
    attn_platform_free(plat);
    if (variant && attn_cpu_attn_force_variant(variant) != ATTN_OK) {
        fprintf(stderr, "attn bench: --variant: %s\n", attn_last_error());
        return ATTN_EXIT_USAGE;
    }
    for (int i = 0; i < nbe; i++) {
        char detail[256] = "";
        if (bes[i].b->kernel->self_test &&
            bes[i].b->kernel->self_test(detail, sizeof detail) != ATTN_OK)
            fprintf(stderr, "attn bench: warning: %s self-test failed: %s\n", bes[i].name, detail);
    }

    /* shapes */
    static shape_t shapes[MAX_SHAPES];
    int ns = 0;
    if (!phase || !strcmp(phase, "decode"))
        for (int k = 0; k < nkv; k++)
            for (int bi = 0; bi < nb; bi++)
                for (int ci = 0; ci < nc && ns < MAX_SHAPES; ci++) {
                    shape_t sh = {false, batches[bi], contexts[ci], 1, kvs[k]};
                    double bytes, fl, tk;
                    shape_figures(&sh, &bytes, &fl, &tk);
                    if (bytes > 4.0 * (1 << 30)) /* keep the pool in memory */
                        continue;
                    shapes[ns++] = sh;
                }
    if (!phase || !strcmp(phase, "prefill"))
        for (int k = 0; k < (full ? nkv : 1); k++)
            for (int pi = 0; pi < np && ns < MAX_SHAPES; pi++)
                shapes[ns++] = (shape_t){true, 1, prefills[pi], prefills[pi], kvs[k]};
    o.progress = ns > 1;

    attn_cpu_machine m;
    if (o.progress) fprintf(stderr, "attn bench: measuring read bandwidth and peak FMA rate...\n");
    if (attn_cpu_measure_machine(o.buffer_bytes, &m) != ATTN_OK) {
        fprintf(stderr, "attn bench: machine measurement failed: %s\n", attn_last_error());
        return ATTN_EXIT_ERROR;
    }
    const attn_cpu_info *ci = attn_cpu_info_get();

    /* one KV pool per dtype: >= 1 GiB and >= the largest shape */
    pool_t pools[2][4];
    memset(pools, 0, sizeof pools);
    result_t *res = calloc((size_t)ns * 2, sizeof(result_t));
    if (!res) return ATTN_EXIT_ERROR;
    int rc = ATTN_EXIT_OK;
    for (int bi = 0; bi < nbe; bi++)
        for (int k = 0; k < nkv; k++) {
            int need = 0;
            for (int i = 0; i < ns; i++)
                if (shapes[i].kv == kvs[k]) {
                    int nbl =
                        shapes[i].batch * ((shapes[i].context + o.block_size - 1) / o.block_size);
                    if (nbl > need) need = nbl;
                }
            if (!need) continue;
            double esz = kvs[k] == ATTN_KV_AUTO || kvs[k] == ATTN_KV_BFLOAT16 ? 2.0 : 1.0;
            double blk_bytes = 2.0 * o.block_size * BENCH_KV_HEADS * BENCH_HEAD * esz;
            double min_bytes = o.buffer_bytes ? (double)o.buffer_bytes : (double)(1 << 30);
            int gib = (int)(min_bytes / blk_bytes);
            if (need < gib) need = gib;
            if (bi == 1 && bes[1].b->desc->required_layout == bes[0].b->desc->required_layout) {
                pools[1][k] = pools[0][k]; /* same layout: share the memory */
                continue;
            }
            if (pool_make(&pools[bi][k], bes[bi].b, kvs[k], need, o.block_size) != ATTN_OK) {
                fprintf(stderr, "attn bench: cannot lay out a %s KV pool for %s: %s\n",
                        kv_label(kvs[k]), bes[bi].name, attn_last_error());
                rc = ATTN_EXIT_ERROR;
                goto out;
            }
        }
    for (int i = 0; i < ns; i++) {
        int k = 0;
        while (kvs[k] != shapes[i].kv)
            k++;
        for (int bi = 0; bi < nbe; bi++) {
            if (o.progress)
                fprintf(stderr, "attn bench: [%d/%d] %s %s batch=%d context=%d kv=%s\n", i + 1, ns,
                        bes[bi].name, shapes[i].prefill ? "prefill" : "decode", shapes[i].batch,
                        shapes[i].context, kv_label(shapes[i].kv));
            measure(&bes[bi], &shapes[i], &pools[bi][k], &o, &m, &res[2 * i + bi]);
        }
    }

    if (o.json) {
        attn__sb sb;
        attn__sb_init(&sb);
        attn__jw w;
        attn__jw_init(&w, &sb, true);
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "machine");
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "read_gbps");
        attn__jw_num(&w, m.read_gbps);
        attn__jw_key(&w, "peak_gflops");
        attn__jw_num(&w, m.peak_gflops);
        attn__jw_key(&w, "threads");
        attn__jw_int(&w, m.threads);
        attn__jw_key(&w, "isa");
        attn__jw_str(&w, m.isa);
        attn__jw_key(&w, "cpu_attn_variant");
        attn__jw_str(&w, attn_cpu_attn_variant());
        attn__jw_key(&w, "cpu");
        attn__jw_str(&w, ci->model);
        attn__jw_key(&w, "buffer_bytes");
        attn__jw_int(&w, (long long)m.buffer_bytes);
        attn__jw_key(&w, "llc_bytes");
        attn__jw_int(&w, (long long)m.llc_bytes);
        attn__jw_key(&w, "block_size");
        attn__jw_int(&w, o.block_size);
        attn__jw_key(&w, "model");
        attn__jw_str(&w, "32 query heads, 8 KV heads, head size 128, bf16");
        attn__jw_obj_end(&w);
        attn__jw_key(&w, "results");
        attn__jw_arr_begin(&w);
        for (int i = 0; i < ns; i++) {
            json_result(&w, bes[0].name, &shapes[i], &res[2 * i], nbe > 1 ? &res[2 * i + 1] : NULL,
                        vs_name);
            if (nbe > 1) json_result(&w, bes[1].name, &shapes[i], &res[2 * i + 1], NULL, NULL);
        }
        attn__jw_arr_end(&w);
        attn__jw_obj_end(&w);
        char *txt = attn__sb_take(&sb);
        if (txt) {
            printf("%s\n", txt);
            free(txt);
        }
    } else {
        printf("machine: %s, %d threads; read %.1f GB/s (%zu MiB buffer); peak %.1f GFLOP/s "
               "(%s fp32 FMA); CPU_ATTN variant %s\n",
               ci->model, m.threads, m.read_gbps, m.buffer_bytes >> 20, m.peak_gflops, m.isa,
               attn_cpu_attn_variant());
        printf("model: %d query heads, %d KV heads, head size %d, bf16; block size %d\n",
               BENCH_HEADS, BENCH_KV_HEADS, BENCH_HEAD, o.block_size);
        attn_cpu_limit ld, lp;
        attn_cpu_phase_limit(&m, attn_cpu_attn_variant(), false, o.hot, &ld);
        attn_cpu_phase_limit(&m, attn_cpu_attn_variant(), true, o.hot, &lp);
        printf("limits: decode against %s", ld.name);
        if (ld.value > 0) printf(" %.1f %s", ld.value, ld.kind ? "GFLOP/s" : "GB/s");
        printf("; prefill against %s", lp.name);
        if (lp.value > 0) printf(" %.1f GFLOP/s", lp.value);
        printf("\n\n");
        printf("%-10s %-7s %5s %7s %6s %-9s %10s %11s %7s %6s %8s %6s %-10s %6s", "backend",
               "phase", "batch", "context", "qlen", "kv", "ms", "tokens/s", "GB/s", "%bw",
               "GFLOP/s", "%peak", "limit", "%limit");
        if (nbe > 1) printf(" %10s %9s", "vs ms", "speedup");
        printf("\n");
        for (int i = 0; i < ns; i++) {
            text_row(bes[0].name, &shapes[i], &res[2 * i], nbe > 1 ? &res[2 * i + 1] : NULL);
        }
        if (nbe > 1) {
            printf("\n(vs %s)\n", vs_name);
            for (int i = 0; i < ns; i++)
                text_row(bes[1].name, &shapes[i], &res[2 * i + 1], NULL);
        }
    }
    for (int i = 0; i < 2 * ns; i++)
        if (i % 2 < nbe && !res[i].ok) rc = ATTN_EXIT_ERROR;
out:
    for (int k = 0; k < nkv; k++) {
        if (pools[1][k].data && pools[1][k].data != pools[0][k].data) pool_free(&pools[1][k]);
        pool_free(&pools[0][k]);
    }
    free(res);
    return rc;
}
