/* Persistent thread pool for the CPU kernels.
 *
 * Contract: a pool's threads are created once (attn__pool_create, or the
 * process-wide attn__pool_global() sized by ATTN_NUM_THREADS, default the
 * cores this process may run on) and live until the pool is destroyed. A
 * parallel call creates no thread and allocates nothing: it publishes the
 * job, wakes the workers (they spin briefly, then sleep on a condition
 * variable) and the calling thread takes part as thread 0. Calls on one
 * pool are serialised by a mutex, so several engines may share the global
 * pool from different threads; a call made from inside a job (nested) runs
 * inline on the calling worker with that worker's thread id, which keeps
 * per-thread scratch indexed by tid valid. */
#ifndef ATTN_UTIL_THREADPOOL_H
#define ATTN_UTIL_THREADPOOL_H

#include <stdint.h>

#include "attn/status.h"

typedef struct attn__pool attn__pool;

/* Work callback: process items [begin, end) on thread tid (0 = the caller,
 * tid < attn__pool_threads()). */
typedef void (*attn__pool_fn)(void *ctx, int64_t begin, int64_t end, int tid);

/* The process-wide pool, created on first use (thread-safe). Never NULL:
 * when threads cannot be created it degrades to a single-thread pool. */
attn__pool *attn__pool_global(void);

/* Threads the global pool would have: ATTN_NUM_THREADS when it is a valid
 * positive integer, else the CPUs in this process's affinity mask. */
int attn__pool_default_threads(void);

/* A private pool of nthreads threads (the caller counts as one, so
 * nthreads - 1 workers are started). */
attn_status attn__pool_create(int nthreads, attn__pool **out);
void attn__pool_destroy(attn__pool *pool);
int attn__pool_threads(const attn__pool *pool);

/* Runs fn over the items [0, n). chunk > 0: dynamic scheduling, threads
 * take chunks of `chunk` items from an atomic counter (use for uneven work,
 * items ordered largest first). chunk == 0: static split, thread t gets one
 * contiguous range of about n / threads items (or none). Returns when every
 * item is done. n <= 0 returns at once. */
void attn__pool_for(attn__pool *pool, int64_t n, int64_t chunk, attn__pool_fn fn, void *ctx);

/* The tid of the calling thread inside a running job, -1 outside any job. */
int attn__pool_current_tid(void);

#endif
