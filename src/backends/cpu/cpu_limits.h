/* The limit each benchmarked phase is measured against (`attn bench`):
 * decode over a cold cache against the measured read bandwidth; prefill,
 * and decode over cache-resident KV, against the measured peak of the
 * arithmetic the active CPU_ATTN variant runs. Where that peak is not
 * measured here (AMX tiles, AVX-512 BF16 dot products: this build has no
 * peak loop for them) the limit says so and has no value, rather than a
 * fraction of a peak the kernel does not run on (fp32 FMA). */
#ifndef ATTN_BACKENDS_CPU_LIMITS_H
#define ATTN_BACKENDS_CPU_LIMITS_H

#include <stdbool.h>

#include "backends/cpu/cpu_machine.h"

/* The limit is public (attn/cpu_perf.h); one definition. */
typedef attn_cpu_limit_kind attn__cpu_limit_kind;
typedef attn_cpu_limit attn__cpu_limit;

/* The limit of a phase (prefill, or decode; hot: KV reused, cache-resident)
 * for kernels of CPU_ATTN variant `variant` (attn__cpu_isa name) on a
 * machine measured as m. */
void attn__cpu_phase_limit(const attn__cpu_machine *m, const char *variant, bool prefill, bool hot,
                           attn__cpu_limit *out);

/* achieved / limit for a run that read `gbps` and computed `gflops`;
 * negative when the limit has no value here */
double attn__cpu_limit_fraction(const attn__cpu_limit *l, double gbps, double gflops);

#endif
