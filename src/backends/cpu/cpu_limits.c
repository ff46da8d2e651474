/* Which measured limit binds a benchmarked phase (see cpu_limits.h). */
#include "backends/cpu/cpu_limits.h"

#include <string.h>

void attn__cpu_phase_limit(const attn__cpu_machine *m, const char *variant, bool prefill, bool hot,
                           attn__cpu_limit *out)
{
    memset(out, 0, sizeof *out);
    if (!prefill && !hot) {
        /* every KV byte comes from memory once per call */
        out->kind = ATTN_CPU_LIMIT_BANDWIDTH;
        out->name = "DRAM read bandwidth";
        out->key = "dram-read";
        out->value = m->read_gbps;
        return;
    }
    out->kind = ATTN_CPU_LIMIT_COMPUTE;
    const char *v = variant ? variant : "";
    if (!strcmp(v, "amx-bf16")) {
        out->name = "AMX-BF16 tile peak (not measured in this build)";
        out->key = "amx-bf16";
        return;
    }
    if (!strcmp(v, "avx512-bf16")) {
        out->name = "AVX-512 BF16 dot-product peak (not measured in this build)";
        out->key = "dpbf16";
        return;
    }
    /* the fp32 FMA loop runs the widest ISA the machine has; the avx2 and
     * portable variants run on narrower units than an AVX-512 loop measures */
    bool same_isa = (!strcmp(v, "avx512") && !strcmp(m->isa, "avx512")) ||
                    (!strcmp(v, "avx2") && !strcmp(m->isa, "avx2"));
    if (!same_isa) {
        out->name = "fp32 FMA peak of this variant's ISA (not measured in this build)";
        out->key = "fma";
        return;
    }
    out->name = !strcmp(m->isa, "avx512") ? "fp32 FMA peak (avx512)" : "fp32 FMA peak (avx2)";
    out->key = !strcmp(m->isa, "avx512") ? "fma-avx512" : "fma-avx2";
    out->value = m->peak_gflops;
}

double attn__cpu_limit_fraction(const attn__cpu_limit *l, double gbps, double gflops)
{
    if (!(l->value > 0)) return -1.0;
    return (l->kind == ATTN_CPU_LIMIT_BANDWIDTH ? gbps : gflops) / l->value;
}
