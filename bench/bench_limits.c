/* The machine limits a benchmark run is held against, measured now on the
 * process-wide pool (ATTN_NUM_THREADS threads): DRAM read bandwidth and the
 * fp32 FMA peak (attn__cpu_measure_machine, the loops `attn bench` uses),
 * the AVX-512 BF16 dot-product peak (VDPBF16PS) where the CPU has it, and
 * the AMX-BF16 tile peak (register-resident and fed from L1) where it has
 * AMX. A limit the CPU lacks is null, never a guess. bench/peers/peers.py
 * runs it before and after its shapes.
 *
 * usage: bench_limits [--quick] [--json] */
#include <stdio.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/cpu.h"
#include "backends/cpu/cpu_machine.h"
#include "util/threadpool.h"

#include "bench_peaks.h"

static void json_num(const char *key, double v, bool have, bool last)
{
    if (have)
        printf("\"%s\": %.3f%s", key, v, last ? "" : ", ");
    else
        printf("\"%s\": null%s", key, last ? "" : ", ");
}

int main(int argc, char **argv)
{
    bool json = false, quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--quick")) {
            quick = true;
        } else {
            bool help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            fprintf(help ? stdout : stderr,
                    "usage: bench_limits [--quick] [--json]\n"
                    "Measures DRAM read bandwidth, the fp32 FMA peak, the VDPBF16PS peak and the "
                    "AMX-BF16 tile peak (where the CPU has them) on ATTN_NUM_THREADS threads.\n"
                    "--quick streams 256 MiB instead of max(1 GiB, 4 x LLC).\n");
            return help ? 0 : 2;
        }
    }
    attn__pool *pool = attn__pool_global();
    attn__cpu_machine m;
    if (attn__cpu_measure_machine(quick ? (size_t)256 << 20 : 0, &m) != ATTN_OK) {
        fprintf(stderr, "bench_limits: %s\n", attn_last_error());
        return 1;
    }
    bool has_dp = attn_cpu_has(ATTN_CPU_AVX512F) && attn_cpu_has(ATTN_CPU_AVX512_BF16);
    bool has_amx = attn_cpu_has(ATTN_CPU_AMX_TILE) && attn_cpu_has(ATTN_CPU_AMX_BF16);
    double dp = has_dp ? bench_peak(pool, 2) / 1e9 : 0;
    double amx = has_amx ? bench_peak(pool, 0) / 1e9 : 0;
    double amx_l1 = has_amx ? bench_peak(pool, 1) / 1e9 : 0;
    if (json) {
        printf("{\"threads\": %d, \"fma_isa\": \"%s\", \"llc_bytes\": %llu, "
               "\"buffer_bytes\": %zu, ",
               m.threads, m.isa, (unsigned long long)m.llc_bytes, m.buffer_bytes);
        json_num("dram_read_gbps", m.read_gbps, true, false);
        json_num("fma_gflops", m.peak_gflops, true, false);
        json_num("dpbf16_gflops", dp, has_dp, false);
        json_num("amx_bf16_gflops", amx, has_amx, false);
        json_num("amx_bf16_l1_fed_gflops", amx_l1, has_amx, true);
        printf("}\n");
        return 0;
    }
    printf("threads %d\n", m.threads);
    printf("DRAM read bandwidth  %8.1f GB/s (%zu MiB streamed)\n", m.read_gbps,
           m.buffer_bytes >> 20);
    printf("fp32 FMA peak (%s) %8.1f GFLOP/s\n", m.isa, m.peak_gflops);
    if (has_dp)
        printf("VDPBF16PS peak       %8.1f GFLOP/s\n", dp);
    else
        printf("VDPBF16PS peak       (no AVX512_BF16 on this CPU)\n");
    if (has_amx)
        printf("AMX-BF16 tile peak   %8.1f GFLOP/s (fed from L1: %.1f)\n", amx, amx_l1);
    else
        printf("AMX-BF16 tile peak   (no AMX on this CPU)\n");
    return 0;
}
