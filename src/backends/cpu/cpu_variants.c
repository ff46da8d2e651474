/* CPU_ATTN variant dispatch: decided once. The first forward (or
 * self-test) picks the best variant whose CPU features are usable
 * (attn_cpu_has, which honours ATTN_CPU_MASK) and keeps the pointer; the hot
 * path is one indirect call per key chunk. Tests may force a variant by
 * name. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "backends/cpu/cpu_attn.h"
#include "util/error.h"

/* Each variant, best first, with its documented error against REFERENCE
 * per class of call (fp32, fp32 over fp8 KV, fp16/bf16): about 1.5-3x the
 * worst test_cpu_attn_conformance measured, which holds every variant to
 * its row (figures: docs/perf/decode-split-issue28.md). The bf16-input
 * variants round probabilities to bf16 before P.V (and amx-bf16's fp32
 * rows were measured only on the machine of issue 28, so they keep the
 * test's former limits). */
static const struct {
    const attn__cpu_isa *isa;
    double err[ATTN_CPU_ERR_CLASSES];
} g_variants[] = {
#if defined(__x86_64__)
    {&attn__cpu_isa_amx_bf16, {1e-4, 1e-3, 1e-2}}, {&attn__cpu_isa_avx512_bf16, {2e-5, 2e-5, 1e-2}},
    {&attn__cpu_isa_avx512, {1e-5, 1e-5, 4e-3}},   {&attn__cpu_isa_avx2, {1e-5, 1e-5, 5e-3}},
#endif
    {&attn__cpu_isa_portable, {1e-5, 1e-5, 5e-3}},
};
#define N_VARIANTS ((int)(sizeof g_variants / sizeof g_variants[0]))

static pthread_once_t g_sel_once = PTHREAD_ONCE_INIT;
static const attn__cpu_isa *g_auto;
static _Atomic(const attn__cpu_isa *) g_forced;

static void select_once(void)
{
    for (int i = 0; i < N_VARIANTS; i++)
        if (g_variants[i].isa->usable()) {
            g_auto = g_variants[i].isa;
            return;
        }
    g_auto = &attn__cpu_isa_portable;
}

int attn__cpu_attn_variant_count(void)
{
    return N_VARIANTS;
}

const attn__cpu_isa *attn__cpu_attn_variant(int i)
{
    return i >= 0 && i < N_VARIANTS ? g_variants[i].isa : NULL;
}

double attn__cpu_attn_variant_error(int i, attn__cpu_err_class c)
{
    if (i < 0 || i >= N_VARIANTS || (int)c < 0 || c >= ATTN_CPU_ERR_CLASSES) return -1.0;
    return g_variants[i].err[c];
}

const attn__cpu_isa *attn__cpu_attn_active(void)
{
    const attn__cpu_isa *f = atomic_load(&g_forced);
    if (f) return f;
    pthread_once(&g_sel_once, select_once);
    return g_auto;
}

attn_status attn__cpu_attn_force_variant(const char *name)
{
    if (!name) {
        atomic_store(&g_forced, NULL);
        return ATTN_OK;
    }
    for (int i = 0; i < N_VARIANTS; i++) {
        if (strcmp(g_variants[i].isa->name, name) == 0) {
            if (!g_variants[i].isa->usable())
                return attn__fail(ATTN_UNSUPPORTED,
                                  "CPU_ATTN variant '%s' is not usable on this CPU", name);
            atomic_store(&g_forced, g_variants[i].isa);
            return ATTN_OK;
        }
    }
    return attn__fail(ATTN_NOT_FOUND, "no CPU_ATTN variant named '%s'", name);
}
