/* The public API the tools are built on (issue 14: `attn platforms` and
 * `attn bench` use no libattn internals): GPU runtime probes, the CPU as
 * text and JSON, platform accessors, and the CPU performance limits and
 * CPU_ATTN variant control. Bad input: a clear status, nothing changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/cpu_perf.h"
#include "attn/probe.h"
#include "test.h"

static void test_probes(void)
{
    static attn_gpu_probe g;
    static attn_opencl_probe cl;
    memset(&g, 0x5a, sizeof g);
    CHECK_STATUS(attn_probe_gpu((attn_gpu_runtime)7, &g), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "unknown runtime 7");
    CHECK(g.device_count == 0x5a5a5a5a); /* unchanged */
    CHECK_STATUS(attn_probe_gpu(ATTN_GPU_RUNTIME_CUDA, NULL), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_probe_opencl(NULL), ATTN_NULL_ARGUMENT);
    for (int r = ATTN_GPU_RUNTIME_CUDA; r <= ATTN_GPU_RUNTIME_ROCM; r++) {
        CHECK_OK(attn_probe_gpu((attn_gpu_runtime)r, &g));
        CHECK(g.listed >= 0 && g.listed <= ATTN_PROBE_MAX_DEVICES);
        CHECK(g.present ? g.reason[0] == '\0' : g.reason[0] != '\0');
    }
    CHECK_OK(attn_probe_opencl(&cl));
    CHECK(cl.present ? cl.reason[0] == '\0' : cl.reason[0] != '\0');
    for (int i = 0; i < cl.device_count; i++)
        CHECK(cl.devices[i].extensions != NULL && cl.devices[i].type != NULL);
}

static void test_cpu_text(void)
{
    char buf[64];
    attn_cpu_feature_list(0, buf, sizeof buf);
    CHECK_STR(buf, "-");
    attn_cpu_feature_list((1ull << ATTN_CPU_AVX2) | (1ull << ATTN_CPU_FMA), buf, sizeof buf);
    CHECK_STR(buf, "avx2 fma");
    attn_cpu_feature_list(1ull << ATTN_CPU_AVX2, NULL, 0); /* no buffer: nothing written */
    char *json = NULL;
    CHECK_STATUS(attn_cpu_info_to_json(NULL, &json), ATTN_NULL_ARGUMENT);
    CHECK(json == NULL);
    CHECK_OK(attn_cpu_info_to_json(attn_cpu_info_get(), &json));
    CHECK_CONTAINS(json, "\"vendor\":");
    CHECK_CONTAINS(json, "\"features\":{\"present\":[");
    free(json);

    attn_platform *gpu = NULL, *cpu = NULL;
    CHECK_OK(attn_platform_open("h100", &gpu));
    CHECK_OK(attn_platform_open("cpu", &cpu));
    CHECK(attn_platform_cpu(gpu) == NULL);
    CHECK(attn_platform_cpu(NULL) == NULL);
    CHECK(attn_platform_cpu(cpu) != NULL);
    CHECK(attn_platform_description(gpu)[0] != '\0');
    CHECK_STR(attn_platform_description(NULL), "");
    attn_platform_free(gpu);
    attn_platform_free(cpu);
}

static void test_limits(void)
{
    attn_cpu_machine m = {0};
    attn_cpu_limit l = {.key = "untouched"};
    CHECK_STATUS(attn_cpu_phase_limit(&m, "avx2", true, false, &l), ATTN_INVALID_ARGUMENT);
    CHECK_STR(l.key, "untouched");
    CHECK_STATUS(attn_cpu_phase_limit(NULL, "avx2", true, false, &l), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_cpu_phase_limit(&m, "avx2", true, false, NULL), ATTN_NULL_ARGUMENT);
    m = (attn_cpu_machine){.threads = 2, .isa = "avx2", .read_gbps = 10, .peak_gflops = 100};
    CHECK_OK(attn_cpu_phase_limit(&m, "avx2", false, false, &l));
    CHECK(l.kind == ATTN_CPU_LIMIT_BANDWIDTH);
    CHECK_STR(l.key, "dram-read");
    CHECK_NEAR(attn_cpu_limit_fraction(&l, 5, 999), 0.5, 1e-12);
    CHECK_OK(attn_cpu_phase_limit(&m, "avx2", true, false, &l));
    CHECK(l.kind == ATTN_CPU_LIMIT_COMPUTE);
    CHECK_STR(l.key, "fma-avx2");
    CHECK_NEAR(attn_cpu_limit_fraction(&l, 999, 25), 0.25, 1e-12);
    CHECK_OK(attn_cpu_phase_limit(&m, "amx-bf16", true, false, &l));
    CHECK(l.value == 0);
    CHECK(attn_cpu_limit_fraction(&l, 1, 1) < 0);
    CHECK(attn_cpu_limit_fraction(NULL, 1, 1) < 0);
}

static void test_variant(void)
{
    const char *before = attn_cpu_attn_variant();
    CHECK(before != NULL && before[0] != '\0');
    CHECK_STATUS(attn_cpu_attn_force_variant("no-such-variant"), ATTN_NOT_FOUND);
    CHECK_CONTAINS(attn_last_error(), "no-such-variant");
    CHECK_STR(attn_cpu_attn_variant(), before);
    CHECK_OK(attn_cpu_attn_force_variant("portable"));
    CHECK_STR(attn_cpu_attn_variant(), "portable");
    CHECK_OK(attn_cpu_attn_force_variant(NULL));
    CHECK_STR(attn_cpu_attn_variant(), before);
    /* the list of variants: the active one is on it, portable last */
    int n = 0;
    bool seen = false;
    while (attn_cpu_attn_variant_name(n)) {
        seen = seen || !strcmp(attn_cpu_attn_variant_name(n), before);
        n++;
    }
    CHECK(seen && n >= 1);
    CHECK_STR(attn_cpu_attn_variant_name(n - 1), "portable");
    CHECK(attn_cpu_attn_variant_name(-1) == NULL);
#if defined(__x86_64__)
    CHECK(n == 5);
    CHECK_STR(attn_cpu_attn_variant_name(0), "amx-bf16");
#endif
}

/* The variant table: one active variant (the one calls use), portable
 * last and always usable, a positive documented error for every class;
 * an index out of range or a NULL is refused with out unchanged. */
static void test_variant_table(void)
{
    int n = attn_cpu_attn_variant_count(), active = 0;
    CHECK(n >= 1);
    for (int i = 0; i < n; i++) {
        attn_cpu_attn_variant_info v;
        CHECK_OK(attn_cpu_attn_variant_get(i, &v));
        CHECK(v.name && v.name[0]);
        CHECK(v.err_fp32 > 0 && v.err_fp8_kv > 0 && v.err_half > 0 && v.err_half < 0.1);
        CHECK(!v.active || v.usable);
        if (v.active) {
            active++;
            CHECK_STR(v.name, attn_cpu_attn_variant());
        }
        if (i == n - 1) CHECK(!strcmp(v.name, "portable") && v.usable);
    }
    CHECK(active == 1);
    attn_cpu_attn_variant_info keep = {.name = "unchanged"};
    CHECK_STATUS(attn_cpu_attn_variant_get(n, &keep), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "there are");
    CHECK_STATUS(attn_cpu_attn_variant_get(-1, &keep), ATTN_INVALID_ARGUMENT);
    CHECK_STR(keep.name, "unchanged");
    CHECK(attn_cpu_attn_variant_get(0, NULL) != ATTN_OK);
}

int main(void)
{
    test_probes();
    test_cpu_text();
    test_limits();
    test_variant();
    test_variant_table();
    return attn_test_finish("test_tools_api");
}
