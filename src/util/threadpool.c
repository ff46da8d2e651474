/* Persistent thread pool (see threadpool.h for the contract).
 *
 * Hand-off: the dispatcher bumps `gen` (seq_cst) after publishing the job;
 * workers spin on it for a short while (cheap wake-up for back-to-back
 * kernel calls) and then sleep on `wake_cv`. A sleeper registers itself in
 * `sleepers` while holding `mu` and rechecks `gen` before waiting; the
 * dispatcher bumps `gen` first and only then reads `sleepers`, so with
 * sequentially consistent atomics either the worker sees the new job or the
 * dispatcher sees the sleeper and broadcasts under `mu`. Completion uses the
 * same pattern in the other direction (`pending`, `caller_sleeping`). */
#include "util/threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/log.h"
#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ATTN__CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define ATTN__CPU_RELAX() __asm__ __volatile__("yield")
#else
#define ATTN__CPU_RELAX() ((void)0)
#endif

/* How long an idle worker (or a waiting caller) spins before sleeping. Short:
 * the machine may be shared, and a decode step is tens of microseconds. */
#define ATTN__SPIN_NS 50000ll

struct attn__pool {
    int nthreads;
    pthread_t *threads; /* nthreads - 1 workers */
    int started;        /* workers actually running */

    pthread_mutex_t dispatch_mu; /* one job at a time per pool */

    pthread_mutex_t mu;
    pthread_cond_t wake_cv;
    pthread_cond_t done_cv;
    atomic_uint gen;
    atomic_int sleepers;
    atomic_int pending;
    atomic_int caller_sleeping;
    atomic_bool stop;

    /* the published job (written before gen is bumped) */
    attn__pool_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;
};

typedef struct {
    attn__pool *pool;
    int tid;
} attn__worker_arg;

static _Thread_local int tl_tid = -1;

int attn__pool_current_tid(void)
{
    return tl_tid;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void run_share(attn__pool *p, int tid)
{
    int saved = tl_tid;
    tl_tid = tid;
    if (p->chunk > 0) {
        for (;;) {
            int64_t b = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
            if (b >= p->n) break;
            int64_t e = b + p->chunk < p->n ? b + p->chunk : p->n;
            p->fn(p->ctx, b, e, tid);
        }
    } else {
        int64_t t = p->nthreads;
        int64_t b = p->n * tid / t, e = p->n * (tid + 1) / t;
        if (b < e) p->fn(p->ctx, b, e, tid);
    }
    tl_tid = saved;
}

static void *worker_main(void *arg)
{
    attn__worker_arg *wa = arg;
    attn__pool *p = wa->pool;
    int tid = wa->tid;
    free(wa);
    unsigned seen = 0; /* gen at creation: a job published before this thread ran is not missed */
    for (;;) {
        /* spin, then sleep, until a new job (or stop) is published */
        int64_t t0 = now_ns();
        int spins = 0;
        while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) {
            ATTN__CPU_RELAX();
            if (++spins % 64 == 0 && now_ns() - t0 > ATTN__SPIN_NS) {
                pthread_mutex_lock(&p->mu);
                atomic_fetch_add(&p->sleepers, 1);
                while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                    pthread_cond_wait(&p->wake_cv, &p->mu);
                atomic_fetch_sub(&p->sleepers, 1);
                pthread_mutex_unlock(&p->mu);
                break;
            }
        }
        if (atomic_load(&p->stop)) break;
        seen = atomic_load(&p->gen);
        run_share(p, tid);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

int attn__pool_default_threads(void)
{
    const char *env = getenv("ATTN_NUM_THREADS");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        long v = strtol(env, &end, 10);
        if (errno == 0 && end && *end == '\0' && v >= 1 && v <= 4096) return (int)v;
        attn_log(ATTN_LOG_WARN, "ATTN_NUM_THREADS='%s' is not an integer in [1, 4096]; ignored",
                 env);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c >= 1) return c;
    }
    return 1;
}

attn_status attn__pool_create(int nthreads, attn__pool **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    if (nthreads < 1 || nthreads > 4096)
        return attn__fail(ATTN_INVALID_ARGUMENT, "thread pool size %d outside [1, 4096]", nthreads);
    attn__pool *p = calloc(1, sizeof *p);
    if (!p) return attn__fail(ATTN_OUT_OF_MEMORY, "thread pool: out of memory");
    p->nthreads = nthreads;
    pthread_mutex_init(&p->dispatch_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->gen, 0u);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->caller_sleeping, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->next, 0);
    if (nthreads > 1) {
        p->threads = calloc((size_t)nthreads - 1, sizeof *p->threads);
        if (!p->threads) {
            attn__pool_destroy(p);
            return attn__fail(ATTN_OUT_OF_MEMORY, "thread pool: out of memory");
        }
        for (int i = 1; i < nthreads; i++) {
            attn__worker_arg *wa = malloc(sizeof *wa);
            if (!wa) break;
            wa->pool = p;
            wa->tid = i;
            if (pthread_create(&p->threads[i - 1], NULL, worker_main, wa) != 0) {
                free(wa);
                break;
            }
            p->started++;
        }
        if (p->started != nthreads - 1) {
            /* run with what we have: tids stay dense */
            attn_log(ATTN_LOG_WARN, "thread pool: started %d of %d threads", p->started + 1,
                     nthreads);
            p->nthreads = p->started + 1;
        }
    }
    *out = p;
    return ATTN_OK;
}

void attn__pool_destroy(attn__pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->wake_cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->dispatch_mu);
    free(p);
}

int attn__pool_threads(const attn__pool *p)
{
    return p ? p->nthreads : 1;
}

static attn__pool *g_pool;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static attn__pool g_single; /* fallback: a one-thread pool that needs no allocation */

static void global_init(void)
{
    if (attn__pool_create(attn__pool_default_threads(), &g_pool) != ATTN_OK || !g_pool) {
        memset(&g_single, 0, sizeof g_single);
        g_single.nthreads = 1;
        pthread_mutex_init(&g_single.dispatch_mu, NULL);
        g_pool = &g_single;
    }
}

attn__pool *attn__pool_global(void)
{
    pthread_once(&g_pool_once, global_init);
    return g_pool;
}

static void run_inline(int64_t n, int64_t chunk, attn__pool_fn fn, void *ctx, int tid)
{
    if (chunk <= 0) {
        fn(ctx, 0, n, tid);
        return;
    }
    for (int64_t b = 0; b < n; b += chunk)
        fn(ctx, b, b + chunk < n ? b + chunk : n, tid);
}

void attn__pool_for(attn__pool *p, int64_t n, int64_t chunk, attn__pool_fn fn, void *ctx)
{
    if (n <= 0 || !fn) return;
    if (!p) p = attn__pool_global();
    /* nested call from inside a job, a one-thread pool, or a single chunk */
    int64_t nchunks = chunk > 0 ? (n + chunk - 1) / chunk : n;
    if (tl_tid >= 0 || p->nthreads == 1 || nchunks == 1) {
        int tid = tl_tid >= 0 ? tl_tid : 0;
        int saved = tl_tid;
        tl_tid = tid;
        run_inline(n, chunk, fn, ctx, tid);
        tl_tid = saved;
        return;
    }
    pthread_mutex_lock(&p->dispatch_mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    atomic_store(&p->pending, p->nthreads - 1);
    atomic_fetch_add(&p->gen, 1u);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake_cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_share(p, 0);
    /* wait for the workers: spin briefly, then sleep */
    int64_t t0 = now_ns();
    int spins = 0;
    while (atomic_load(&p->pending) > 0) {
        ATTN__CPU_RELAX();
        if (++spins % 64 == 0 && now_ns() - t0 > ATTN__SPIN_NS) {
            pthread_mutex_lock(&p->mu);
            atomic_store(&p->caller_sleeping, 1);
            while (atomic_load(&p->pending) > 0)
                pthread_cond_wait(&p->done_cv, &p->mu);
            atomic_store(&p->caller_sleeping, 0);
            pthread_mutex_unlock(&p->mu);
            break;
        }
    }
    p->fn = NULL;
    p->ctx = NULL;
    pthread_mutex_unlock(&p->dispatch_mu);
}
