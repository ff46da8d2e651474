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

static const attn__cpu_isa *const g_variants[] = {
#if defined(__x86_64__)
    &attn__cpu_isa_amx_bf16, &attn__cpu_isa_avx512_bf16, &attn__cpu_isa_avx512, &attn__cpu_isa_avx2,
#endif
    &attn__cpu_isa_portable,
};
#define N_VARIANTS ((int)(sizeof g_variants / sizeof g_variants[0]))

static pthread_once_t g_sel_once = PTHREAD_ONCE_INIT;
static const attn__cpu_isa *g_auto;
static _Atomic(const attn__cpu_isa *) g_forced;

static void select_once(void)
{
    for (int i = 0; i < N_VARIANTS; i++)
        if (g_variants[i]->usable()) {
            g_auto = g_variants[i];
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
    return i >= 0 && i < N_VARIANTS ? g_variants[i] : NULL;
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
        if (strcmp(g_variants[i]->name, name) == 0) {
            if (!g_variants[i]->usable())
                return attn__fail(ATTN_UNSUPPORTED,
                                  "CPU_ATTN variant '%s' is not usable on this CPU", name);
            atomic_store(&g_forced, g_variants[i]);
            return ATTN_OK;
        }
    }
    return attn__fail(ATTN_NOT_FOUND, "no CPU_ATTN variant named '%s'", name);
}
