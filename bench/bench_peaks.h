/* Compute peaks the CPU kernels are held against that the library's own
 * machine measurement (attn__cpu_measure_machine: read bandwidth, fp32 FMA)
 * has no loop for: AMX-BF16 tile products and AVX-512 BF16 dot products
 * (VDPBF16PS). Every pool thread runs a register-resident loop; the figure
 * is the sum over threads of each thread's rate, timed by the thread's own
 * CPU clock, best of 3 rounds: a loop that never leaves the core runs at
 * the same rate whenever it is scheduled, so on a shared machine this is
 * still the peak of the cores (wall-clock rates of the kernels measured
 * against it then come out low, never high).
 * Header-only, included by the benchmarks that report against them
 * (bench_mla.c, bench_limits.c). */
#ifndef ATTN_BENCH_PEAKS_H
#define ATTN_BENCH_PEAKS_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "util/numeric.h"
#include "util/threadpool.h"

static inline double bench_peaks_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    long iters;
    int kind; /* 0 AMX register-resident, 1 AMX fed from L1, 2 VDPBF16PS */
    double flops[64];
} bench_peak_job;

typedef struct {
    uint8_t palette, start;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} bench_amx_cfg;

/* n steps of 4 products on tiles 0..3: operands register-resident, or
 * (loads) 4 tile loads per step from 16 KiB of L1-resident operands (the
 * 2 x 2 blocking a GEMM with 8 tile registers can use). The tile unit does
 * not overlap loads with products, so the L1-fed rate is the most a kernel
 * streaming both operands can reach. */
__attribute__((target("amx-tile,amx-bf16,avx512f"))) static double bench_amx_bf16(long n,
                                                                                  bool loads)
{
    static _Alignas(64) uint16_t buf[4][4][16 * 32];
    for (int i = 0; i < 4 * 4 * 16 * 32; i++)
        (&buf[0][0][0])[i] = attn__f32_to_bf16((float)((i * 37) % 17) * 0.01f);
    bench_amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    /* asm with the whole struct as operand: GCC 12 drops the stores before
     * the ldtilecfg builtin (it does not model the read) */
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    if (loads) {
        for (long i = 0; i < n; i++) {
            uint16_t(*t)[16 * 32] = buf[i & 3];
            _tile_loadd(4, t[0], 64);
            _tile_loadd(5, t[1], 64);
            _tile_loadd(6, t[2], 64);
            _tile_loadd(7, t[3], 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    } else {
        _tile_loadd(4, buf[0][0], 64);
        _tile_loadd(5, buf[0][1], 64);
        _tile_loadd(6, buf[0][2], 64);
        _tile_loadd(7, buf[0][3], 64);
        for (long i = 0; i < n; i++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_release();
    return (double)n * 4 * 16 * 16 * 32 * 2;
}

/* n steps of 24 independent VDPBF16PS chains (latency x throughput <= 24 on
 * every AVX512_BF16 core): 64 flops per instruction (16 lanes x 2 products
 * x multiply-add). The result feeds a volatile store so nothing is dropped
 * (an asm barrier on the accumulators would send them through memory). */
__attribute__((target("avx512f,avx512bf16"))) static double bench_dpbf16(long n)
{
    __m512 a[24];
    for (int k = 0; k < 24; k++)
        a[k] = _mm512_set1_ps((float)k * 1e-3f);
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80); /* (1.0, 1.0) */
    __m512bh y = (__m512bh)_mm512_set1_epi32(0x33803380); /* (2^-24, 2^-24) */
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 24
        for (int k = 0; k < 24; k++)
            a[k] = _mm512_dpbf16_ps(a[k], x, y);
    }
    __m512 s = a[0];
    for (int k = 1; k < 24; k++)
        s = _mm512_add_ps(s, a[k]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)n * 24 * 64;
}

static void bench_peak_part(void *ctx, int64_t begin, int64_t end, int tid)
{
    bench_peak_job *j = ctx;
    for (int64_t i = begin; i < end && i < 64; i++) {
        double t = bench_peaks_cpu_s();
        double f = j->kind == 2 ? bench_dpbf16(j->iters) : bench_amx_bf16(j->iters, j->kind == 1);
        j->flops[i] = f / (bench_peaks_cpu_s() - t);
    }
    (void)tid;
}

/* flop/s of kind (0 AMX, 1 AMX fed from L1, 2 VDPBF16PS) summed over the
 * pool's threads; the caller checks the CPU has the instructions. */
static inline double bench_peak(attn__pool *pool, int kind)
{
    int nt = attn__pool_threads(pool);
    bench_peak_job j;
    memset(&j, 0, sizeof j);
    j.iters = kind == 2 ? 1000000 : 200000;
    j.kind = kind;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        attn__pool_for(pool, nt, 0, bench_peak_part, &j);
        double s = 0;
        for (int i = 0; i < nt && i < 64; i++)
            s += j.flops[i];
        best = s > best ? s : best;
    }
    return best;
}

#endif
