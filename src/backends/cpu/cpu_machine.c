/* Machine measurements for `attn bench` (see cpu_machine.h). Both loops run
 * on the same process-wide pool the kernels use, one static slice per
 * thread, and the best of a few passes is kept (the machine may be shared,
 * so the best pass is the closest to what it can do). */
#include "backends/cpu/cpu_machine.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "attn/cpu.h"
#include "platform/detect.h"
#include "util/error.h"
#include "util/threadpool.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t attn__cpu_probe_bytes(uint64_t llc_bytes, uint64_t memory_bytes)
{
    uint64_t b = (uint64_t)1 << 30;
    if (llc_bytes > UINT64_MAX / ATTN_CPU_PROBE_LLC_TIMES)
        b = UINT64_MAX;
    else if (llc_bytes > b / ATTN_CPU_PROBE_LLC_TIMES)
        b = llc_bytes * ATTN_CPU_PROBE_LLC_TIMES;
    if (memory_bytes && b > memory_bytes / 4) b = memory_bytes / 4;
    return b;
}

typedef enum { ISA_SCALAR, ISA_AVX2, ISA_AVX512 } isa_t;

static isa_t best_isa(void)
{
#if defined(__x86_64__)
    if (attn_cpu_has(ATTN_CPU_AVX512F)) return ISA_AVX512;
    if (attn_cpu_has(ATTN_CPU_AVX2) && attn_cpu_has(ATTN_CPU_FMA)) return ISA_AVX2;
#endif
    return ISA_SCALAR;
}

static uint64_t read_scalar(const void *p, size_t n)
{
    const uint64_t *u = p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        a += u[i];
        b += u[i + 1];
        c += u[i + 2];
        d += u[i + 3];
    }
    return a + b + c + d;
}

static double fma_scalar(long iters)
{
    float x = 0.99999994f, y = 1e-7f;
    float a[10];
    for (int k = 0; k < 10; k++)
        a[k] = 1.0f;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 10; k++)
            a[k] = a[k] * x + y;
    double s = 0;
    for (int k = 0; k < 10; k++)
        s += a[k];
    return s;
}

typedef struct {
    isa_t isa;
    const char *buf;
    size_t bytes;
    size_t pf;
    long iters;
    /* Keeps the measured work alive. Every pool thread adds into it, so it is
     * atomic (relaxed: only the final value matters, and nobody reads it). */
    _Atomic uint64_t sink;
} job_t;

static void read_fn(void *ctx, int64_t b, int64_t e, int tid)
{
    (void)e;
    (void)tid;
    job_t *j = ctx;
    int t = attn__pool_threads(attn__pool_global());
    size_t per = j->bytes / (size_t)t / 256 * 256;
    const char *p = j->buf + per * (size_t)b;
    uint64_t s;
#if defined(__x86_64__)
    if (j->isa == ISA_AVX512)
        s = attn__cpu_read_avx512(p, per, j->pf);
    else if (j->isa == ISA_AVX2)
        s = attn__cpu_read_avx2(p, per, j->pf);
    else
#endif
        s = read_scalar(p, per);
    atomic_fetch_add_explicit(&j->sink, s, memory_order_relaxed);
}

static void fma_fn(void *ctx, int64_t b, int64_t e, int tid)
{
    (void)b;
    (void)e;
    (void)tid;
    job_t *j = ctx;
    double s;
#if defined(__x86_64__)
    if (j->isa == ISA_AVX512)
        s = attn__cpu_fma_avx512(j->iters);
    else if (j->isa == ISA_AVX2)
        s = attn__cpu_fma_avx2(j->iters);
    else
#endif
        s = fma_scalar(j->iters);
    uint64_t bits;
    memcpy(&bits, &s, sizeof bits);
    atomic_fetch_xor_explicit(&j->sink, bits, memory_order_relaxed);
}

attn_status attn__cpu_measure_machine(size_t buffer_bytes, attn__cpu_machine *out)
{
    ATTN__CHECK_NULL(out);
    memset(out, 0, sizeof *out);
    attn__pool *pool = attn__pool_global();
    int T = attn__pool_threads(pool);
    isa_t isa = best_isa();
    out->threads = T;
    out->isa = isa == ISA_AVX512 ? "avx512" : isa == ISA_AVX2 ? "avx2" : "scalar";
    out->llc_bytes = attn__cpu_llc_get()->total_bytes;
    if (buffer_bytes == 0) {
        uint64_t b = attn__cpu_probe_bytes(out->llc_bytes, attn_cpu_info_get()->memory_bytes);
        buffer_bytes = b > SIZE_MAX ? SIZE_MAX : (size_t)b;
    }
    buffer_bytes = buffer_bytes / ((size_t)T * 256) * ((size_t)T * 256);
    if (buffer_bytes == 0) return attn__fail(ATTN_INVALID_ARGUMENT, "bandwidth buffer too small");
    /* same page policy as the benchmark's KV pools (transparent huge pages
     * where the kernel allows them) */
    char *buf =
        mmap(NULL, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return attn__fail(ATTN_OUT_OF_MEMORY, "cannot allocate a %zu-byte bandwidth buffer",
                          buffer_bytes);
#ifdef MADV_HUGEPAGE
    madvise(buf, buffer_bytes, MADV_HUGEPAGE);
#endif
    memset(buf, 1, buffer_bytes); /* fault every page in before timing */
    out->buffer_bytes = buffer_bytes;
    job_t j = {.isa = isa, .buf = buf, .bytes = buffer_bytes};
    double best = 0;
    static const size_t pfs[] = {0, 1024, 2048};
    for (int pass = 0; pass < 6; pass++) {
        j.pf = pfs[pass % 3];
        double t0 = now_s();
        attn__pool_for(pool, T, 0, read_fn, &j);
        double dt = now_s() - t0;
        double gbps = (double)(buffer_bytes / (size_t)T / 256 * 256 * (size_t)T) / dt / 1e9;
        if (gbps > best) best = gbps;
    }
    out->read_gbps = best;
    munmap(buf, buffer_bytes);

    /* FMA: calibrate to ~40 ms per pass, keep the best of 3 */
    double lanes = isa == ISA_AVX512 ? 16 : isa == ISA_AVX2 ? 8 : 1;
    j.iters = 100000;
    for (;;) {
        double t0 = now_s();
        attn__pool_for(pool, T, 0, fma_fn, &j);
        double dt = now_s() - t0;
        if (dt > 0.01 || j.iters > (1l << 34)) break;
        j.iters *= 4;
    }
    j.iters *= 2;
    best = 0;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = now_s();
        attn__pool_for(pool, T, 0, fma_fn, &j);
        double dt = now_s() - t0;
        double chains = isa == ISA_AVX512 ? 20 : isa == ISA_AVX2 ? 12 : 10;
        double gf = (double)T * (double)j.iters * chains * lanes * 2.0 / dt / 1e9;
        if (gf > best) best = gf;
    }
    out->peak_gflops = best;
    return ATTN_OK;
}
