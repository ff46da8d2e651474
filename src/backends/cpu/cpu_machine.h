/* Machine figures the benchmark reports against, measured in the same run:
 * the sustained read bandwidth (every pool thread streams its slice of a
 * buffer many times the last-level cache, with and without software
 * prefetch; the best pass counts, so kernels are measured against the most
 * this machine delivers) and the peak FMA rate
 * (every pool thread runs a register-resident FMA loop with the widest
 * usable vector ISA). */
#ifndef ATTN_BACKENDS_CPU_MACHINE_H
#define ATTN_BACKENDS_CPU_MACHINE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/cpu_perf.h"

/* The figures are public (attn/cpu_perf.h); one definition. */
typedef attn_cpu_machine attn__cpu_machine;

/* buffer_bytes 0 = attn__cpu_probe_bytes(the LLC of every CPU the process
 * may run on, memory). */
attn_status attn__cpu_measure_machine(size_t buffer_bytes, attn__cpu_machine *out);

/* The default streamed buffer (attn/cpu_perf.h), which `attn bench` also
 * takes as its KV pools' least size; memory_bytes 0: unknown. */
uint64_t attn__cpu_probe_bytes(uint64_t llc_bytes, uint64_t memory_bytes);

/* ISA kernels (cpu_machine_*.c): sum of n bytes (n multiple of 256), with
 * software prefetch pf bytes ahead (0 = hardware prefetch only), and
 * iters rounds of independent FMA chains (20 for AVX-512, 12 for AVX2;
 * the scalar loop uses 10), returning a value that depends on every step. */
uint64_t attn__cpu_read_avx512(const void *p, size_t n, size_t pf);
double attn__cpu_fma_avx512(long iters);
uint64_t attn__cpu_read_avx2(const void *p, size_t n, size_t pf);
double attn__cpu_fma_avx2(long iters);

#endif
