/* attn/cpu_perf.h: the public face of the machine measurement
 * (cpu_machine.c), the phase limits (cpu_limits.c) and the CPU_ATTN variant
 * choice and the variants' documented errors (cpu_variants.c), for `attn
 * bench`, `attn platforms` and applications that report figures against
 * the same limits. */
#include "attn/cpu_perf.h"

#include "backends/cpu/cpu_attn.h"
#include "backends/cpu/cpu_limits.h"
#include "backends/cpu/cpu_machine.h"
#include "util/check.h"
#include "util/error.h"

attn_status attn_cpu_measure_machine(size_t buffer_bytes, attn_cpu_machine *out)
{
    ATTN__CHECK_NULL(out);
    return attn__cpu_measure_machine(buffer_bytes, out);
}

attn_status attn_cpu_phase_limit(const attn_cpu_machine *m, const char *variant, bool prefill,
                                 bool hot, attn_cpu_limit *out)
{
    ATTN__CHECK_NULL(m);
    ATTN__CHECK_NULL(out);
    if (!m->isa)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_cpu_phase_limit: machine not measured (isa is NULL)");
    attn__cpu_phase_limit(m, variant ? variant : attn_cpu_attn_variant(), prefill, hot, out);
    return ATTN_OK;
}

double attn_cpu_limit_fraction(const attn_cpu_limit *l, double gbps, double gflops)
{
    return l ? attn__cpu_limit_fraction(l, gbps, gflops) : -1.0;
}

const char *attn_cpu_attn_variant(void)
{
    return attn__cpu_attn_active()->name;
}

const char *attn_cpu_attn_variant_name(int i)
{
    const attn__cpu_isa *v = attn__cpu_attn_variant(i);
    return v ? v->name : NULL;
}

attn_status attn_cpu_attn_force_variant(const char *name)
{
    return attn__cpu_attn_force_variant(name);
}

int attn_cpu_attn_variant_count(void)
{
    return attn__cpu_attn_variant_count();
}

attn_status attn_cpu_attn_variant_get(int i, attn_cpu_attn_variant_info *out)
{
    ATTN__CHECK_NULL(out);
    const attn__cpu_isa *isa = attn__cpu_attn_variant(i);
    if (!isa)
        return attn__fail(ATTN_INVALID_ARGUMENT, "CPU_ATTN variant %d: there are %d (0..%d)", i,
                          attn__cpu_attn_variant_count(), attn__cpu_attn_variant_count() - 1);
    *out = (attn_cpu_attn_variant_info){
        .name = isa->name,
        .usable = isa->usable(),
        .active = isa == attn__cpu_attn_active(),
        .err_fp32 = attn__cpu_attn_variant_error(i, ATTN_CPU_ERR_FP32),
        .err_fp8_kv = attn__cpu_attn_variant_error(i, ATTN_CPU_ERR_FP8_KV),
        .err_half = attn__cpu_attn_variant_error(i, ATTN_CPU_ERR_HALF),
    };
    return ATTN_OK;
}
