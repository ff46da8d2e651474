/* MLA decode benchmark (CPU_MLA forward_mqa) with DeepSeek-V3 shapes:
 * 128 heads, latent rows of 512 + 64, one query token per request, batch
 * 1 and 16, context 1k / 4k / 16k. Per shape: median time, tokens/s, bytes
 * of latent cache read per second and GFLOP/s, each against the machine
 * limits measured in the same run (read bandwidth of a buffer larger than
 * the caches, peak fp32 FMA rate on AVX-512/AVX2, peak AMX-BF16 rate), and
 * the fraction of the binding limit (whichever of memory and compute time
 * is larger for the instruction set the kernel uses). For the AMX kernel a
 * last column gives the rate against tile products fed from L1 (see
 * "machine limits"), what the tile unit reaches when it must load operands.
 *
 * The latent rows live in a 1 GiB block pool and every repetition reads a
 * different window of it, so rows come from memory as they do in a server
 * whose KV cache is far larger than the CPU caches (not from a warm L2/L3).
 *
 * usage: bench_mla [--dtype bf16|fp32|fp16] [--kv auto|fp8] [--repeat N]
 *                  [--variant amx|avx512|avx2|portable] [--batch N] [--context N]
 *                  [--quick] [--json]
 * Threads: ATTN_NUM_THREADS (default: the usable cores). */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "attn/attn.h"
#include "attn/backend.h"
#include "attn/mla.h"
#include "backends/cpu/cpu_machine.h"
#include "backends/mla/mla_internal.h"
#include "util/numeric.h"
#include "util/threadpool.h"

#include "bench_peaks.h"

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

/* ---- machine limits ------------------------------------------------------------
 * Read bandwidth and the fp32 FMA peak come from the CPU kernels' shared
 * measurement (attn__cpu_measure_machine); the AMX-BF16 peak, register
 * resident and fed from L1, from bench_peaks.h. */

/* ---- the decode shapes ----------------------------------------------------------- */

static uint64_t rng = 0x1234567;

static float urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Random rows straight into storage: bf16/fp16/fp32 values in (-1, 1),
 * fp8 bytes that are not NaN. */
static void fill_random(void *p, attn_elem e, size_t n)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    if (e == ATTN_ELEM_FP8_E4M3) {
        uint8_t *b = p;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint8_t v = (uint8_t)(x >> 24);
            b[i] = (v & 0x7f) == 0x7f ? (uint8_t)(v ^ 1) : v;
        }
        return;
    }
    if (e == ATTN_ELEM_F32) {
        float *f = p;
        for (size_t i = 0; i < n; i++)
            f[i] = urand();
        return;
    }
    uint16_t *h = p;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        for (int k = 0; k < 4; k++) {
            uint16_t r = (uint16_t)(x >> (16 * k));
            /* bf16: exponent 120..126; fp16: exponent 8..14 */
            h[i + k] = e == ATTN_ELEM_BF16
                           ? (uint16_t)((r & 0x807f) | ((120u + (r >> 7 & 7u) % 7u) << 7))
                           : (uint16_t)((r & 0x83ff) | ((8u + (r >> 10 & 7u) % 7u) << 10));
        }
    }
}

#define MLA_H  128 /* DeepSeek-V3: heads, latent rank, rope dims, block size */
#define MLA_R  512
#define MLA_P  64
#define MLA_D  (MLA_R + MLA_P)
#define MLA_BS 128

typedef struct {
    attn_dtype dt;
    bool fp8, json, quick;
    int repeat, only_batch, only_context;
    const char *variant;
} mla_args;

/* What the run measures against: the machine, the kernel, the pool. */
typedef struct {
    int nthreads;
    double bw, peak_fma, peak_amx, l1_amx, peak;
    attn_elem qe, kve;
    size_t esz;
    const attn__mla_kern *k;
    bool amx;
    void *cache;
    int pool_blocks, next_block;
    size_t pool_bytes;
} mla_env;

static int usage(bool help)
{
    fprintf(help ? stdout : stderr,
            "usage: bench_mla [--dtype bf16|fp32|fp16] [--kv auto|fp8] [--repeat N] "
            "[--variant NAME] [--batch 1|16] [--context 1024|4096|16384] [--quick] "
            "[--json]\n");
    return help ? 0 : 2;
}

/* -1: go on; otherwise the exit code. */
static int parse_args(int argc, char **argv, mla_args *a)
{
    *a = (mla_args){.dt = ATTN_DTYPE_BF16};
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (!strcmp(argv[i], "--dtype") && more) {
            if (attn_dtype_parse(argv[++i], &a->dt) != ATTN_OK) {
                fprintf(stderr, "bench_mla: unknown dtype %s\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--kv") && more) {
            a->fp8 = !strcmp(argv[++i], "fp8");
        } else if (!strcmp(argv[i], "--repeat") && more) {
            a->repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--variant") && more) {
            a->variant = argv[++i];
        } else if (!strcmp(argv[i], "--batch") && more) {
            a->only_batch = atoi(argv[++i]);
            if (a->only_batch != 1 && a->only_batch != 16) {
                fprintf(stderr, "bench_mla: --batch takes 1 or 16, not %s\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--context") && more) {
            a->only_context = atoi(argv[++i]);
            if (a->only_context != 1024 && a->only_context != 4096 && a->only_context != 16384) {
                fprintf(stderr, "bench_mla: --context takes 1024, 4096 or 16384, not %s\n",
                        argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--json")) {
            a->json = true;
        } else if (!strcmp(argv[i], "--quick")) {
            a->quick = true;
        } else {
            return usage(!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"));
        }
    }
    return -1;
}

static bool force_variant(const char *variant)
{
    const attn__mla_kern *v[8];
    int nv = attn__mla_variants(v, 8), found = 0;
    for (int i = 0; i < nv; i++)
        if (!strcmp(v[i]->name, variant)) {
            attn__mla_force_variant(v[i]);
            found = 1;
        }
    if (!found) fprintf(stderr, "bench_mla: variant %s is not usable here\n", variant);
    return found;
}

/* The machine limits, the kernel and the 1 GiB block pool (at least the
 * largest shape), filled once. */
static bool env_make(const mla_args *a, attn__pool *pool, mla_env *e)
{
    memset(e, 0, sizeof *e);
    e->nthreads = attn__pool_threads(pool);
    e->qe = attn_dtype_elem(a->dt);
    e->kve = a->fp8 ? ATTN_ELEM_FP8_E4M3 : e->qe;
    e->k = attn__mla_decode_kern(e->qe, e->kve, MLA_R, MLA_D);
    e->amx = !strcmp(e->k->name, "amx");
    attn__cpu_machine mach;
    if (attn__cpu_measure_machine(0, &mach) != ATTN_OK) {
        fprintf(stderr, "bench_mla: machine measurement failed: %s\n", attn_last_error());
        return false;
    }
    e->bw = mach.read_gbps * 1e9;
    e->peak_fma = mach.peak_gflops * 1e9;
    bool has_amx = attn_cpu_has(ATTN_CPU_AMX_BF16);
    e->peak_amx = has_amx ? bench_peak(pool, 0) : 0;
    e->l1_amx = has_amx ? bench_peak(pool, 1) : 0;
    e->peak = e->amx ? e->peak_amx : e->peak_fma;
    e->esz = e->kve == ATTN_ELEM_F32 ? 4 : e->kve == ATTN_ELEM_FP8_E4M3 ? 1 : 2;
    size_t block_bytes = (size_t)MLA_BS * MLA_D * e->esz;
    e->pool_blocks = (int)(((size_t)1 << 30) / block_bytes);
    if (e->pool_blocks < 16 * (16384 / MLA_BS)) e->pool_blocks = 16 * (16384 / MLA_BS);
    /* the KV-pool page policy of the CPU benchmarks: transparent huge pages */
    e->pool_bytes = (size_t)e->pool_blocks * block_bytes;
    e->cache =
        mmap(NULL, e->pool_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (e->cache == MAP_FAILED) {
        fprintf(stderr, "bench_mla: no memory for the block pool\n");
        return false;
    }
#ifdef MADV_HUGEPAGE
    madvise(e->cache, e->pool_bytes, MADV_HUGEPAGE);
#endif
    fill_random(e->cache, e->kve, (size_t)e->pool_blocks * MLA_BS * MLA_D);
    return true;
}

static void print_header(const mla_args *a, const mla_env *e)
{
    if (!a->json) {
        printf("machine: %d threads; read bandwidth %.1f GB/s; peak fp32 FMA %.0f GFLOP/s; "
               "peak AMX-BF16 %.0f GFLOP/s (fed from L1, one tile load per product: %.0f, "
               "%.0f%%)\n",
               e->nthreads, e->bw / 1e9, e->peak_fma / 1e9, e->peak_amx / 1e9, e->l1_amx / 1e9,
               e->peak_amx > 0 ? 100 * e->l1_amx / e->peak_amx : 0.0);
        printf("CPU_MLA decode, DeepSeek-V3 shapes (128 heads, 512 + 64), dtype %s, latent "
               "cache %s, kernel %s (compute limit: %s)\n",
               attn_dtype_name(a->dt), attn_elem_name(e->kve), e->k->name,
               e->amx ? "AMX-BF16 peak" : "fp32 FMA peak");
        printf("%5s %7s %9s %11s %9s %6s %9s %6s %8s %7s%s\n", "batch", "context", "ms", "tokens/s",
               "GB/s", "%bw", "GFLOP/s", "%peak", "binds", "%limit", e->amx ? "  %L1-fed" : "");
    } else {
        printf("{\"machine\": {\"threads\": %d, \"read_gbps\": %.2f, \"peak_fma_gflops\": %.1f, "
               "\"peak_amx_bf16_gflops\": %.1f, \"amx_bf16_l1_fed_gflops\": %.1f}, \"kernel\": "
               "\"%s\", \"dtype\": \"%s\", \"kv\": \"%s\", \"results\": [",
               e->nthreads, e->bw / 1e9, e->peak_fma / 1e9, e->peak_amx / 1e9, e->l1_amx / 1e9,
               e->k->name, attn_dtype_name(a->dt), attn_elem_name(e->kve));
    }
}

static void print_row(const mla_args *a, const mla_env *e, int B, int L, double t, bool first)
{
    double flops = (double)B * L * MLA_H * (2.0 * MLA_D + 2.0 * MLA_R);
    double bytes = (double)B * L * MLA_D * (double)e->esz;
    double t_mem = bytes / e->bw, t_cmp = flops / e->peak;
    bool mem_binds = t_mem >= t_cmp;
    double frac = (mem_binds ? t_mem : t_cmp) / t;
    if (!a->json) {
        printf("%5d %7d %9.3f %11.0f %9.2f %5.1f%% %9.1f %5.1f%% %8s %6.1f%%", B, L, t * 1e3, B / t,
               bytes / t / 1e9, 100 * bytes / t / e->bw, flops / t / 1e9, 100 * flops / t / e->peak,
               mem_binds ? "memory" : "compute", 100 * frac);
        if (e->amx) printf("  %6.1f%%", 100 * flops / t / e->l1_amx);
        printf("\n");
    } else {
        printf("%s{\"batch\": %d, \"context\": %d, \"ms\": %.4f, \"tokens_per_s\": %.1f, "
               "\"gbps\": %.3f, \"bw_fraction\": %.4f, \"gflops\": %.2f, "
               "\"flops_fraction\": %.4f, \"fma_fraction\": %.4f, \"binds\": \"%s\", "
               "\"limit_fraction\": %.4f, \"l1_fed_fraction\": %.4f}",
               first ? "" : ", ", B, L, t * 1e3, B / t, bytes / t / 1e9, bytes / t / e->bw,
               flops / t / 1e9, flops / t / e->peak, flops / t / e->peak_fma,
               mem_binds ? "memory" : "compute", frac, e->l1_amx > 0 ? flops / t / e->l1_amx : 0.0);
    }
    fflush(stdout);
}

/* Each call reads the next window of the pool. */
static void rotate(mla_env *e, int32_t *bt, int nb)
{
    e->next_block = (e->next_block + nb) % e->pool_blocks;
    for (int i = 0; i < nb; i++)
        bt[i] = (e->next_block + i) % e->pool_blocks;
}

/* Median seconds of forward_mqa calls (about 0.3 s in all unless --repeat
 * is given), each on a fresh window of the pool. */
static double time_forward(const mla_args *a, mla_env *e, attn_kernel *k, attn_mla_args *fa,
                           int32_t *bt, int nb)
{
    rotate(e, bt, nb);
    double t1 = now_s();
    attn_kernel_forward_mqa(k, fa);
    t1 = now_s() - t1;
    int n = a->repeat > 0 ? a->repeat : (int)(0.3 / (t1 > 1e-6 ? t1 : 1e-6));
    n = n < 3 ? 3 : n > 200 ? 200 : n;
    double *ts = malloc(sizeof(double) * (size_t)n);
    if (!ts) return NAN;
    for (int i = 0; i < n; i++) {
        rotate(e, bt, nb);
        double t = now_s();
        attn_kernel_forward_mqa(k, fa);
        ts[i] = now_s() - t;
    }
    qsort(ts, (size_t)n, sizeof *ts, cmp_double);
    double t = ts[n / 2];
    free(ts);
    return t;
}

/* One (batch, context) shape: inputs, metadata, a checked first call, the
 * timed calls. false (message printed) when something failed. */
static bool run_shape(const mla_args *a, mla_env *e, int B, int L, double *t)
{
    int bpr = (L + MLA_BS - 1) / MLA_BS, nb = B * bpr;
    if (nb > e->pool_blocks) {
        fprintf(stderr, "bench_mla: shape larger than the pool\n");
        return false;
    }
    size_t qesz = e->qe == ATTN_ELEM_F32 ? 4 : 2;
    int32_t *qsl = malloc(sizeof(int32_t) * (size_t)(B + 1));
    int32_t *sl = malloc(sizeof(int32_t) * (size_t)B);
    int32_t *bt = malloc(sizeof(int32_t) * (size_t)nb);
    void *q = malloc((size_t)B * MLA_H * MLA_D * qesz);
    void *out = malloc((size_t)B * MLA_H * MLA_R * qesz);
    float *lse = malloc(sizeof(float) * (size_t)B * MLA_H);
    void *bst = NULL;
    attn_kernel *k = NULL;
    bool ok = false;
    if (!qsl || !sl || !bt || !q || !out || !lse) {
        fprintf(stderr, "bench_mla: out of memory\n");
        goto done;
    }
    for (int r = 0; r <= B; r++)
        qsl[r] = r;
    for (int r = 0; r < B; r++)
        sl[r] = L;
    for (int i = 0; i < nb; i++)
        bt[i] = (e->next_block + i) % e->pool_blocks;
    for (size_t i = 0; i < (size_t)B * MLA_H * MLA_D; i++)
        attn__store_elem(q, e->qe, i, urand());
    attn_layer_params lp = {.num_heads = MLA_H,
                            .num_kv_heads = 1,
                            .head_size = MLA_D,
                            .dtype = a->dt,
                            .kv_lora_rank = MLA_R,
                            .qk_rope_head_dim = MLA_P,
                            .qk_nope_head_dim = 128,
                            .v_head_dim = 128};
    attn_kv_view kv = {.data = e->cache,
                       .elem = e->kve,
                       .num_blocks = e->pool_blocks,
                       .block_size = MLA_BS,
                       .num_kv_heads = 1,
                       .head_size = MLA_D,
                       .head_size_v = MLA_R,
                       .stride_token = MLA_D,
                       .stride_block = (int64_t)MLA_BS * MLA_D,
                       .stride_head = MLA_D,
                       .k_scale = a->fp8 ? 1.0f / 16 : 1.0f,
                       .v_scale = a->fp8 ? 1.0f / 16 : 1.0f};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = sl,
                               .num_reqs = B,
                               .num_actual_tokens = B,
                               .max_query_len = 1,
                               .max_seq_len = L,
                               .block_table = bt,
                               .block_table_stride = bpr,
                               .causal = true,
                               .block_size = MLA_BS};
    attn_builder_init bi = {.layer = &lp,
                            .block_size = MLA_BS,
                            .num_blocks = e->pool_blocks,
                            .max_num_reqs = B,
                            .max_num_tokens = B,
                            .num_threads = e->nthreads};
    const void *md = NULL;
    if (attn__builder_mla_cpu.create(&bi, &bst) != ATTN_OK ||
        attn__builder_mla_cpu.build(bst, 0, &cm, false, &md) != ATTN_OK) {
        fprintf(stderr, "bench_mla: builder failed: %s\n", attn_last_error());
        goto done;
    }
    attn_mla_args fa = {
        .layer = &lp, .common = &cm, .metadata = md, .kv = &kv, .q = q, .out = out, .lse = lse};
    if (attn_kernel_open(&attn__backend_cpu_mla, &lp, NULL, &k) != ATTN_OK ||
        attn_kernel_forward_mqa(k, &fa) != ATTN_OK) {
        fprintf(stderr, "bench_mla: forward_mqa: %s\n", attn_last_error());
        goto done;
    }
    *t = time_forward(a, e, k, &fa, bt, nb);
    ok = true;
done:
    attn_kernel_close(k);
    if (bst) attn__builder_mla_cpu.destroy(bst);
    free(qsl), free(sl), free(bt), free(q), free(out), free(lse);
    return ok;
}

int main(int argc, char **argv)
{
    mla_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    if (a.variant && !force_variant(a.variant)) return 2;
    static mla_env e;
    if (!env_make(&a, attn__pool_global(), &e)) return 1;
    print_header(&a, &e);
    static const int batches[] = {1, 16}, contexts[] = {1024, 4096, 16384};
    bool first = true;
    for (int bi = 0; bi < 2; bi++)
        for (int ci = 0; ci < 3; ci++) {
            int B = batches[bi], L = contexts[ci];
            if (a.quick && B * L > 16 * 4096) continue;
            if ((a.only_batch && B != a.only_batch) || (a.only_context && L != a.only_context))
                continue;
            double t;
            if (!run_shape(&a, &e, B, L, &t)) return 1;
            print_row(&a, &e, B, L, t, first);
            first = false;
        }
    if (a.json) printf("]}\n");
    munmap(e.cache, e.pool_bytes);
    return 0;
}
