/* The persistent thread pool: every item runs exactly once, in static and
 * dynamic mode, on private and global pools, back to back (the hand-off
 * that spins and the one that sleeps), nested calls run inline with the
 * outer tid, and several caller threads may share one pool. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "test.h"
#include "util/threadpool.h"

#define N_ITEMS 10007

typedef struct {
    atomic_int hits[N_ITEMS];
    atomic_int bad_tid;
    int nthreads;
    attn__pool *pool;
    atomic_int nested_bad;
} count_ctx;

static void count_fn(void *c, int64_t b, int64_t e, int tid)
{
    count_ctx *cc = c;
    if (tid < 0 || tid >= cc->nthreads || attn__pool_current_tid() != tid)
        atomic_fetch_add(&cc->bad_tid, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&cc->hits[i], 1);
}

static void nested_inner(void *c, int64_t b, int64_t e, int tid)
{
    int *outer = c;
    (void)b;
    (void)e;
    if (tid != *outer) (*outer) = -1000;
}

static void nested_fn(void *c, int64_t b, int64_t e, int tid)
{
    count_ctx *cc = c;
    for (int64_t i = b; i < e; i++) {
        int t = tid;
        attn__pool_for(cc->pool, 8, 1, nested_inner, &t);
        if (t != tid) atomic_fetch_add(&cc->nested_bad, 1);
        atomic_fetch_add(&cc->hits[i], 1);
    }
}

static int all_once(count_ctx *cc, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (atomic_load(&cc->hits[i]) != 1) bad++;
        atomic_store(&cc->hits[i], 0);
    }
    return bad;
}

typedef struct {
    attn__pool *pool;
    atomic_long total;
} share_ctx;

static void add_fn(void *c, int64_t b, int64_t e, int tid)
{
    share_ctx *s = c;
    (void)tid;
    atomic_fetch_add(&s->total, (long)(e - b));
}

static void *caller_main(void *arg)
{
    share_ctx *s = arg;
    for (int r = 0; r < 200; r++)
        attn__pool_for(s->pool, 1000, 7, add_fn, s);
    return NULL;
}

int main(void)
{
    static count_ctx cc;
    for (int threads = 1; threads <= 4; threads++) {
        attn__pool *p = NULL;
        CHECK_OK(attn__pool_create(threads, &p));
        if (!p) continue;
        CHECK(attn__pool_threads(p) == threads);
        cc.nthreads = threads;
        cc.pool = p;
        for (int rep = 0; rep < 50; rep++) {
            int n = rep % 2 ? N_ITEMS : 1 + rep * 37;
            attn__pool_for(p, n, 0, count_fn, &cc);
            CHECK_MSG(all_once(&cc, n) == 0, "static threads=%d n=%d", threads, n);
            attn__pool_for(p, n, 1 + rep % 13, count_fn, &cc);
            CHECK_MSG(all_once(&cc, n) == 0, "dynamic threads=%d n=%d", threads, n);
        }
        /* after the workers fell asleep */
        usleep(2000);
        attn__pool_for(p, N_ITEMS, 64, count_fn, &cc);
        CHECK(all_once(&cc, N_ITEMS) == 0);
        attn__pool_for(p, 100, 3, nested_fn, &cc);
        CHECK(all_once(&cc, 100) == 0);
        CHECK(atomic_load(&cc.nested_bad) == 0);
        CHECK(atomic_load(&cc.bad_tid) == 0);
        attn__pool_for(p, 0, 1, count_fn, &cc); /* nothing */
        CHECK(all_once(&cc, N_ITEMS) == N_ITEMS);
        attn__pool_destroy(p);
    }
    CHECK_STATUS(attn__pool_create(0, &cc.pool), ATTN_INVALID_ARGUMENT);

    /* two caller threads sharing the global pool */
    attn__pool *g = attn__pool_global();
    CHECK(g != NULL);
    CHECK(attn__pool_global() == g);
    CHECK(attn__pool_threads(g) == attn__pool_default_threads());
    share_ctx s = {.pool = g};
    atomic_init(&s.total, 0);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, caller_main, &s);
    pthread_create(&t2, NULL, caller_main, &s);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(atomic_load(&s.total) == 2L * 200 * 1000);
    CHECK(attn__pool_current_tid() == -1);

    setenv("ATTN_NUM_THREADS", "3", 1);
    CHECK(attn__pool_default_threads() == 3);
    setenv("ATTN_NUM_THREADS", "zero", 1);
    CHECK(attn__pool_default_threads() >= 1);
    return attn_test_finish("test_cpu_attn_threadpool");
}
