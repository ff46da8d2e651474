/* bench_metadata: what building per-step attention metadata costs.
 *
 * For every builder family, decode batches of 1, 64 and 256 requests with
 * 4096-token contexts and block size 16 (256 blocks per request, scattered
 * block ids): nanoseconds per build (median of repeats) and heap
 * allocations per build. Then whole engine steps (scheduler, common
 * metadata, builders, K/V write and attention) with allocations counted per
 * step. Targets: < 1 us for 1 request, < 40 us for 256, zero allocations.
 *
 * Allocations are counted by defining malloc/calloc/realloc/free (and the
 * aligned variants) in this executable, forwarding to glibc's __libc_*
 * entry points; libattn's calls resolve to them. Under sanitizers the hooks
 * are left out (the sanitizer owns malloc) and counts read "n/a".
 *
 * usage: bench_metadata [--reps N] [--steps N] */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/attn.h"
#include "attn/engine.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/mla/mla_internal.h"
#include "harness/harness.h"
#include "metadata/builders.h"

/* ---- allocation counting ---------------------------------------------------- */

#if defined(ATTN_SANITIZED) || defined(__SANITIZE_ADDRESS__)
#define COUNTING 0
static long long allocs(void)
{
    return -1;
}
#else
#define COUNTING 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
void *memalign(size_t a, size_t n); /* obsolete; not declared by stdlib.h */

static atomic_llong n_allocs;

void *malloc(size_t n)
{
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t s)
{
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    return __libc_calloc(n, s);
}

void *realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t a, size_t n)
{
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    return __libc_memalign(a, n);
}

int posix_memalign(void **out, size_t a, size_t n)
{
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    void *p = __libc_memalign(a, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}

void *memalign(size_t a, size_t n)
{
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    return __libc_memalign(a, n);
}

void free(void *p)
{
    __libc_free(p);
}

static long long allocs(void)
{
    return atomic_load(&n_allocs);
}
#endif

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- builder benchmark ----------------------------------------------------- */

enum { CONTEXT = 4096, BLOCK = 16, BLOCKS_PER_REQ = CONTEXT / BLOCK, MAX_REQS = 256 };

typedef struct batch {
    int32_t qsl[MAX_REQS + 1];
    int32_t seq[MAX_REQS];
    int32_t pos[MAX_REQS];
    int32_t *bt;
    int64_t slots[MAX_REQS];
    attn_common_metadata cm;
} batch;

/* n decodes at position CONTEXT-1 over scattered block ids. */
static void make_batch(batch *b, int n)
{
    b->bt = malloc(sizeof(int32_t) * (size_t)MAX_REQS * BLOCKS_PER_REQ);
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < MAX_REQS * BLOCKS_PER_REQ; i++)
        b->bt[i] = i;
    for (int i = MAX_REQS * BLOCKS_PER_REQ - 1; i > 0; i--) { /* Fisher-Yates */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1));
        int32_t t = b->bt[i];
        b->bt[i] = b->bt[j];
        b->bt[j] = t;
    }
    b->qsl[0] = 0;
    for (int r = 0; r < n; r++) {
        b->qsl[r + 1] = r + 1;
        b->seq[r] = CONTEXT;
        b->pos[r] = CONTEXT - 1;
        b->slots[r] = (int64_t)b->bt[r * BLOCKS_PER_REQ + BLOCKS_PER_REQ - 1] * BLOCK + BLOCK - 1;
    }
    attn_common_metadata cm = {.query_start_loc = b->qsl,
                               .seq_lens = b->seq,
                               .num_reqs = n,
                               .num_actual_tokens = n,
                               .max_query_len = 1,
                               .max_seq_len = CONTEXT,
                               .block_table = b->bt,
                               .block_table_stride = BLOCKS_PER_REQ,
                               .slot_mapping = b->slots,
                               .causal = true,
                               .block_size = BLOCK,
                               .positions = b->pos};
    b->cm = cm;
}

typedef struct family {
    const char *name;
    const attn_builder_ops *ops;
    const attn_layer_params *layer;
    bool mine; /* the targets of this benchmark apply */
} family;

static int reps = 41;

static bool bench_builder(const family *f, int n)
{
    batch b;
    make_batch(&b, n);
    if (attn_common_metadata_check(&b.cm, MAX_REQS * BLOCKS_PER_REQ) != ATTN_OK) {
        fprintf(stderr, "bad batch: %s\n", attn_last_error());
        exit(1);
    }
    attn_builder_init init = {.layer = f->layer,
                              .block_size = BLOCK,
                              .num_blocks = MAX_REQS * BLOCKS_PER_REQ,
                              .max_num_reqs = MAX_REQS,
                              .max_num_tokens = 2048,
                              .max_blocks_per_req = BLOCKS_PER_REQ};
    void *st = NULL;
    if (f->ops->create(&init, &st) != ATTN_OK) {
        printf("  %-12s %5d  create failed: %s\n", f->name, n, attn_last_error());
        free(b.bt);
        return true;
    }
    const void *md = NULL;
    /* calls per timed batch: about 50 us of work */
    int inner = n == 1 ? 256 : n == 64 ? 16 : 4;
    double *t = malloc(sizeof(double) * (size_t)reps);
    bool ok = true;
    for (int w = 0; w < 64; w++)
        ok = ok && f->ops->build(st, 0, &b.cm, false, &md) == ATTN_OK;
    long long a0 = allocs();
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int i = 0; i < inner; i++)
            ok = f->ops->build(st, 0, &b.cm, false, &md) == ATTN_OK && ok;
        t[r] = (now_ns() - t0) / inner;
    }
    long long a1 = allocs();
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    double med = t[reps / 2];
    double per = COUNTING ? (double)(a1 - a0) / ((double)reps * inner) : -1;
    const char *target = "";
    if (f->mine && (n == 1 || n == 256)) {
        bool met = n == 1 ? med < 1000 : med < 40000;
        target = met ? (n == 1 ? "  < 1 us: met" : "  < 40 us: met")
                     : (n == 1 ? "  < 1 us: MISSED" : "  < 40 us: MISSED");
    }
    if (COUNTING)
        printf("  %-12s %5d %12.0f %10.2f%s%s\n", f->name, n, med, per, target,
               ok ? "" : "  (build failed)");
    else
        printf("  %-12s %5d %12.0f %10s%s%s\n", f->name, n, med, "n/a", target,
               ok ? "" : "  (build failed)");
    f->ops->destroy(st);
    free(t);
    free(b.bt);
    return ok && (!COUNTING || per == 0.0);
}

/* ---- engine steps ------------------------------------------------------------ */

static void bench_engine(const char *machine, int layers, int heads, int kv_heads, int head,
                         bool kernels, int steps, int decodes, int context)
{
    attn_platform *p = NULL;
    attn_model *m = NULL;
    if (attn_platform_open(machine, &p) != ATTN_OK ||
        attn_model_from_shape(layers, heads, kv_heads, head, ATTN_DTYPE_BF16, &m) != ATTN_OK) {
        printf("  engine on %s: %s\n", machine, attn_last_error());
        return;
    }
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    int per_req = (context + 256 + BLOCK - 1) / BLOCK;
    cfg.num_blocks = decodes * per_req + 64;
    cfg.block_size = BLOCK;
    cfg.max_num_seqs = MAX_REQS;
    cfg.max_num_batched_tokens = 8192;
    cfg.max_model_len = per_req * BLOCK;
    cfg.run_kernels = kernels;
    attn__harness_config hc = {.stand_ins = true}; /* inputs and CPU stand-ins */
    attn__harness *h = NULL;
    attn_engine *e = NULL;
    if (attn__harness_create(&hc, &h) != ATTN_OK ||
        attn__harness_engine_create(h, &cfg, &e) != ATTN_OK) {
        printf("  engine on %s: %s\n", machine, e ? attn_engine_error(e) : attn_last_error());
        attn_engine_free(e);
        attn__harness_free(h);
        attn_model_free(m);
        attn_platform_free(p);
        return;
    }
    /* `decodes` requests with `context`-token prompts: prefill them, then
     * measure decode steps (each appends one token to every request). */
    attn_request_desc r = {.prompt_len = context - 8, .output_len = 250};
    for (int i = 0; i < decodes; i++)
        attn_engine_add_request(e, &r, NULL);
    attn_engine_step_stats st;
    attn_engine_counts c;
    do {
        attn_engine_step(e, &st);
        attn_engine_get_counts(e, &c);
    } while (st.num_prefill_reqs > 0 || c.waiting > 0);
    double *meta = malloc(sizeof(double) * (size_t)steps);
    long long a0 = allocs();
    double t0 = now_ns();
    int builds = 0;
    for (int s = 0; s < steps; s++) {
        attn_engine_step(e, &st);
        meta[s] = st.metadata_ns;
        builds += st.builds;
    }
    double wall = (now_ns() - t0) / steps;
    long long a1 = allocs();
    qsort(meta, (size_t)steps, sizeof(double), cmp_double);
    attn_engine_group_info gi;
    attn_engine_group_info_get(e, 0, &gi);
    char kern[64];
    snprintf(kern, sizeof kern, "%s", kernels ? (gi.kernel ? gi.kernel : "none") : "off");
    if (COUNTING)
        printf("  %-8s %-10s %5d %7d %-9s %12.0f %14.0f %12.2f\n", machine, gi.backend, st.num_reqs,
               context, kern, meta[steps / 2], wall, (double)(a1 - a0) / steps);
    else
        printf("  %-8s %-10s %5d %7d %-9s %12.0f %14.0f %12s\n", machine, gi.backend, st.num_reqs,
               context, kern, meta[steps / 2], wall, "n/a");
    free(meta);
    attn_engine_free(e);
    attn__harness_free(h);
    attn_model_free(m);
    attn_platform_free(p);
}

int main(int argc, char **argv)
{
    int steps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]) | 1;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_metadata [--reps N] [--steps N]\n");
            return 2;
        }
    }
    if (reps < 3) reps = 3;
    if (steps < 1) steps = 1;
    attn_layer_params llama = {
        .num_heads = 32, .num_kv_heads = 8, .head_size = 128, .dtype = ATTN_DTYPE_BF16};
    attn_layer_params mla = {.num_heads = 128,
                             .num_kv_heads = 1,
                             .head_size = 576,
                             .dtype = ATTN_DTYPE_BF16,
                             .kv_lora_rank = 512,
                             .qk_rope_head_dim = 64,
                             .qk_nope_head_dim = 128,
                             .v_head_dim = 128};
    const family fams[] = {
        {"flash_attn", &attn__builder_flash_attn, &llama, true},
        {"flashinfer", &attn__builder_flashinfer, &llama, true},
        {"triton", &attn__builder_triton, &llama, true},
        {"rocm", &attn__builder_rocm, &llama, true},
        {"flex", &attn__builder_flex, &llama, true},
        {"cpu_attn", &attn__builder_cpu, &llama, false},
        {"mla", &attn__builder_mla, &mla, false},
    };
    printf("metadata build cost: decode batches, %d-token contexts, block size %d, median of %d\n",
           CONTEXT, BLOCK, reps);
    printf("  %-12s %5s %12s %10s\n", "builder", "reqs", "ns/build", "allocs");
    bool ok = true;
    const int sizes[] = {1, 64, 256};
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++)
        for (int s = 0; s < 3; s++)
            ok = bench_builder(&fams[f], sizes[s]) && ok;
    printf("(targets apply to the five standard families; cpu_attn and mla are the CPU and\n"
           " MLA backends' own builders, shown for comparison)\n\n");
    printf("engine decode steps (%d measured): common metadata + builders, whole step, heap "
           "allocations per step\n",
           steps);
    printf("  %-8s %-10s %5s %7s %-9s %12s %14s %12s\n", "machine", "backend", "reqs", "context",
           "kernel", "meta ns", "step ns", "allocs/step");
    bench_engine("h100", 32, 32, 8, 128, false, steps, 1, CONTEXT);
    bench_engine("h100", 32, 32, 8, 128, false, steps, 64, CONTEXT);
    bench_engine("h100", 32, 32, 8, 128, false, steps, 256, CONTEXT);
    bench_engine("h100", 2, 8, 2, 64, true, steps, 16, 512);
    bench_engine("cpu", 2, 8, 2, 64, true, steps, 16, 512);
    if (!COUNTING) printf("\nallocation counting is off in sanitizer builds\n");
    return ok ? 0 : 1;
}
