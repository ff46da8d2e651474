/* Variant dispatch: chosen once from the usable CPU features, and
 * ATTN_CPU_MASK forces each fallback (checked in child processes, since the
 * mask is read once per process): "-amx" -> avx512-bf16, "-amx,-avx512_bf16"
 * -> avx512, "-avx512" -> avx2, "-avx2,-avx512" -> portable. Forcing by name for tests, and the
 * kernel's variant() report. Masks this CPU cannot demonstrate are skipped
 * with a reason. */
#include <stdio.h>

#include "backends/cpu/cpu_attn.h"
#include "test.h"

static void expect(const char *self, const char *mask, const char *want)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ATTN_CPU_MASK='%s' '%s' --child", mask, self);
    char *out = NULL;
    int rc = attn_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "child with mask '%s' exited %d", mask, rc);
    char got[64] = "";
    if (out) sscanf(out, "%63s", got);
    CHECK_MSG(strcmp(got, want) == 0, "mask '%s': active variant '%s', want '%s'", mask, got, want);
    printf("ATTN_CPU_MASK='%s' -> %s\n", mask, got);
    free(out);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--child")) {
        printf("%s\n", attn__cpu_attn_active()->name);
        return 0;
    }
    /* what this process may use (OS support and AMX permission included) */
    const attn_cpu_info *ci = attn_cpu_info_get();
    bool avx512 = (ci->usable >> ATTN_CPU_AVX512F & 1) && (ci->usable >> ATTN_CPU_AVX512BW & 1);
    bool bf16 = avx512 && (ci->usable >> ATTN_CPU_AVX512_BF16 & 1);
    bool amx =
        bf16 && (ci->usable >> ATTN_CPU_AMX_TILE & 1) && (ci->usable >> ATTN_CPU_AMX_BF16 & 1);
    bool avx2 = (ci->usable >> ATTN_CPU_AVX2 & 1) && (ci->usable >> ATTN_CPU_FMA & 1);
    bool masked = getenv("ATTN_CPU_MASK") && *getenv("ATTN_CPU_MASK");
    if (masked)
        printf("SKIP mask checks: ATTN_CPU_MASK is set for this run\n");
    else {
        expect(argv[0], "",
               amx      ? "amx-bf16"
               : bf16   ? "avx512-bf16"
               : avx512 ? "avx512"
               : avx2   ? "avx2"
                        : "portable");
        if (amx)
            expect(argv[0], "-amx", "avx512-bf16");
        else
            printf("SKIP -amx: this CPU (or OS) offers no AMX-BF16\n");
        if (bf16)
            expect(argv[0], "-amx,-avx512_bf16", "avx512");
        else
            printf("SKIP -avx512_bf16: this CPU has no AVX512_BF16\n");
        if (avx512 && avx2)
            expect(argv[0], "-avx512", "avx2");
        else
            printf("SKIP -avx512: this CPU has no AVX-512 (or no AVX2)\n");
        expect(argv[0], "-avx2,-avx512", "portable");
        expect(argv[0], "none", "portable");
    }
    /* the variant list and forcing */
    CHECK(attn__cpu_attn_variant_count() >= 1);
    CHECK_STR(attn__cpu_attn_variant(attn__cpu_attn_variant_count() - 1)->name, "portable");
    CHECK(attn__cpu_attn_variant(-1) == NULL);
    const char *best = attn__cpu_attn_active()->name;
    CHECK_STR(attn__backend_cpu_attn.kernel->variant(), best);
    CHECK_OK(attn__cpu_attn_force_variant("portable"));
    CHECK_STR(attn__cpu_attn_active()->name, "portable");
    CHECK_STR(attn__backend_cpu_attn.kernel->variant(), "portable");
    CHECK_STATUS(attn__cpu_attn_force_variant("sse9"), ATTN_NOT_FOUND);
    for (int i = 0; i < attn__cpu_attn_variant_count(); i++) {
        const attn__cpu_isa *v = attn__cpu_attn_variant(i);
        if (!v->usable()) CHECK_STATUS(attn__cpu_attn_force_variant(v->name), ATTN_UNSUPPORTED);
    }
    CHECK_OK(attn__cpu_attn_force_variant(NULL));
    CHECK_STR(attn__cpu_attn_active()->name, best);
    return attn_test_finish("test_cpu_attn_dispatch");
}
