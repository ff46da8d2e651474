/* The machine measurement behind `attn bench` (cpu_machine.c): the read
 * loops of every ISA usable here return the sum of the buffer's 64-bit
 * words modulo 2^64, also where the lane sums pass INT64_MAX (the AVX-512
 * loop's old signed reduction was undefined there: UBSan stopped `attn
 * bench` with its default buffer); the default buffer follows the LLC; a
 * measurement reports the LLC the platform layer found. ISAs this CPU
 * cannot run print SKIP, never pass. */
#include <stdint.h>
#include <stdlib.h>

#include "attn/cpu.h"
#include "attn/cpu_perf.h"
#include "backends/cpu/cpu_machine.h"
#include "platform/detect.h"
#include "test.h"

#define GIB ((uint64_t)1 << 30)
#define MIB ((uint64_t)1 << 20)

static uint64_t sum_words(const uint64_t *w, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += w[i];
    return s;
}

/* words near 2^62..2^63: every lane sum and the final reduction wrap */
static void fill_large(uint64_t *w, size_t n)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w[i] = 0x7000000000000000ull | (x >> 4);
    }
}

static void test_read_loops(void)
{
    enum { BYTES = 64 * 1024 };
    uint64_t *w = aligned_alloc(64, BYTES);
    CHECK(w != NULL);
    if (!w) return;
    fill_large(w, BYTES / 8);
    const size_t sizes[] = {256, 4096, BYTES};
    const size_t pfs[] = {0, 1024};
#if defined(__x86_64__)
    bool avx512 = attn_cpu_has(ATTN_CPU_AVX512F);
    bool avx2 = attn_cpu_has(ATTN_CPU_AVX2) && attn_cpu_has(ATTN_CPU_FMA);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t pi = 0; pi < 2; pi++) {
            uint64_t want = sum_words(w, sizes[si] / 8);
            if (avx512)
                CHECK_MSG(attn__cpu_read_avx512(w, sizes[si], pfs[pi]) == want,
                          "avx512 read of %zu bytes (pf %zu)", sizes[si], pfs[pi]);
            if (avx2)
                CHECK_MSG(attn__cpu_read_avx2(w, sizes[si], pfs[pi]) == want,
                          "avx2 read of %zu bytes (pf %zu)", sizes[si], pfs[pi]);
        }
    if (!avx512) printf("SKIP avx512 read loop: AVX-512F not usable here\n");
    if (!avx2) printf("SKIP avx2 read loop: AVX2+FMA not usable here\n");
#else
    printf("SKIP x86 read loops: not an x86-64 build\n");
#endif
    free(w);
}

static void test_probe_bytes(void)
{
    CHECK(attn__cpu_probe_bytes(0, 0) == GIB);                        /* nothing known */
    CHECK(attn__cpu_probe_bytes(32 * MIB, 24 * GIB) == GIB);          /* small LLC: the floor */
    CHECK(attn__cpu_probe_bytes(128 * MIB, 0) == GIB);                /* exactly 8x = 1 GiB */
    CHECK(attn__cpu_probe_bytes(300 * MIB, 512 * GIB) == 2400 * MIB); /* a 300 MiB LLC */
    CHECK(attn__cpu_probe_bytes(300 * MIB, 4 * GIB) == GIB);          /* a quarter of memory */
    CHECK(attn__cpu_probe_bytes(300 * MIB, 2 * GIB) == GIB / 2);
    CHECK(attn__cpu_probe_bytes(UINT64_MAX / 4, 0) == UINT64_MAX); /* saturates */
    CHECK(ATTN_CPU_PROBE_LLC_TIMES == 8);
}

static void test_measure_reports_llc(void)
{
    attn_cpu_machine m;
    CHECK_OK(attn_cpu_measure_machine(8 * MIB, &m));
    const attn__cpu_llc *llc = attn__cpu_llc_get();
    CHECK(m.llc_bytes == llc->total_bytes);
    CHECK(m.buffer_bytes <= 8 * MIB && m.buffer_bytes + (size_t)m.threads * 256 > 8 * MIB);
    CHECK(m.read_gbps > 0 && m.peak_gflops > 0);
    printf("LLC here: %llu bytes (%d x %llu, L%d, from %s); default buffer %llu MiB\n",
           (unsigned long long)llc->total_bytes, llc->instances,
           (unsigned long long)llc->instance_bytes, llc->level, llc->source,
           (unsigned long long)(attn__cpu_probe_bytes(llc->total_bytes,
                                                      attn_cpu_info_get()->memory_bytes) >>
                                20));
}

int main(void)
{
    test_read_loops();
    test_probe_bytes();
    test_measure_reports_llc();
    return attn_test_finish("test_cpu_machine");
}
