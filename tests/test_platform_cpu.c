/* CPU detection and ATTN_CPU_MASK. The mask is read once per process, so
 * the environment path runs this binary again as a child with the variable
 * set and compares what it reports with attn_cpu_parse_mask; the mask's
 * vocabulary holds every CPU_ATTN variant name, and masking one leaves the
 * variants below it as they were. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "backends/cpu/cpu_attn.h"
#include "platform/detect.h"
#include "test.h"

#define BIT(f) (1ull << ATTN_CPU_##f)

static char self_path[4096];

static uint64_t mask_of(const char *s)
{
    uint64_t m = 0xdead;
    CHECK_OK(attn_cpu_parse_mask(s, &m));
    return m;
}

static uint64_t all_with_prefix(const char *prefix)
{
    uint64_t b = 0;
    for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++)
        if (!strncmp(attn_cpu_feature_name((attn_cpu_feature)f), prefix, strlen(prefix)))
            b |= 1ull << f;
    return b;
}

static void test_info_consistent(void)
{
    const attn_cpu_info *ci = attn_cpu_info_get();
    CHECK(ci != NULL);
    CHECK(ci == attn_cpu_info_get());
    CHECK(ci->vendor[0] && ci->model[0] && ci->arch[0]);
    CHECK(ci->logical_cores >= 1);
    CHECK(ci->memory_bytes > 0);
    CHECK((ci->usable & ~ci->present) == 0); /* usable ⊆ present */
    CHECK(ci->masked == 0);                  /* ATTN_CPU_MASK unset for this process */
    for (int f = 0; f < ATTN_CPU_FEATURE_COUNT; f++) {
        bool u = (ci->usable >> f) & 1;
        CHECK(attn_cpu_has((attn_cpu_feature)f) == u);
        uint64_t req = attn__cpu_feature_requires((attn_cpu_feature)f);
        CHECK_MSG(!u || (ci->usable & req) == req, "%s usable without what it needs",
                  attn_cpu_feature_name((attn_cpu_feature)f));
        CHECK(strcmp(attn_cpu_feature_name((attn_cpu_feature)f), "?") != 0);
    }
    if (attn_cpu_has(ATTN_CPU_AVX2)) CHECK(attn_cpu_has(ATTN_CPU_AVX));
    if (attn_cpu_has(ATTN_CPU_AVX512F))
        CHECK(attn_cpu_has(ATTN_CPU_AVX2) && attn_cpu_has(ATTN_CPU_FMA));
    if (attn_cpu_has(ATTN_CPU_AMX_BF16)) CHECK(attn_cpu_has(ATTN_CPU_AMX_TILE));
    CHECK(!attn_cpu_has(ATTN_CPU_FEATURE_COUNT));
    CHECK(!attn_cpu_has((attn_cpu_feature)-1));
    CHECK_STR(attn_cpu_feature_name(ATTN_CPU_FEATURE_COUNT), "?");
    CHECK_STR(attn_cpu_feature_name(ATTN_CPU_AVX512_BF16), "avx512_bf16");

    const attn_cpu_info *raw = attn__cpu_info_unmasked();
    CHECK(raw->present == ci->present && raw->usable == ci->usable);
#if defined(__x86_64__)
    CHECK_STR(ci->arch, "x86_64");
    CHECK((ci->present & all_with_prefix("neon")) == 0);
#elif defined(__aarch64__)
    CHECK_STR(ci->arch, "aarch64");
    CHECK((ci->present & BIT(AVX)) == 0);
#endif
    printf("test_platform_cpu: %s / %s, %d cores, usable 0x%llx of 0x%llx\n", ci->vendor, ci->model,
           ci->logical_cores, (unsigned long long)ci->usable, (unsigned long long)ci->present);
}

/* On Linux x86 the kernel's /proc/cpuinfo flags use the same tokens: what
 * the kernel shows, cpuid shows; what we call usable, the kernel shows. */
static void test_matches_proc_cpuinfo(void)
{
#if defined(__linux__) && defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        printf("test_platform_cpu: SKIP /proc/cpuinfo comparison (unreadable)\n");
        return;
    }
    static char line[1 << 15];
    uint64_t flags = 0;
    bool seen = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        seen = true;
        for (int k = 0; k < ATTN_CPU_FEATURE_COUNT; k++) {
            char tok[40];
            snprintf(tok, sizeof tok, " %s", attn_cpu_feature_name((attn_cpu_feature)k));
            for (char *p = line; (p = strstr(p, tok)) != NULL; p++) {
                char end = p[strlen(tok)];
                if (end == ' ' || end == '\n' || end == '\0') {
                    flags |= 1ull << k;
                    break;
                }
            }
        }
        break;
    }
    fclose(f);
    if (!seen) {
        printf("test_platform_cpu: SKIP /proc/cpuinfo comparison (no flags line)\n");
        return;
    }
    const attn_cpu_info *ci = attn_cpu_info_get();
    CHECK_MSG((flags & ~ci->present) == 0, "kernel flags 0x%llx not all present 0x%llx",
              (unsigned long long)flags, (unsigned long long)ci->present);
    CHECK_MSG((ci->usable & ~flags) == 0, "usable 0x%llx beyond kernel flags 0x%llx",
              (unsigned long long)ci->usable, (unsigned long long)flags);
#else
    printf("test_platform_cpu: SKIP /proc/cpuinfo comparison (not Linux x86-64)\n");
#endif
}

static void test_parse_mask(void)
{
    uint64_t avx512 = all_with_prefix("avx512"), amx = all_with_prefix("amx");
    uint64_t all = attn__cpu_all_features();
    CHECK(avx512 == (BIT(AVX512F) | BIT(AVX512BW) | BIT(AVX512VL) | BIT(AVX512DQ) |
                     BIT(AVX512_BF16) | BIT(AVX512_FP16) | BIT(AVX512_VNNI) | BIT(AVX512_VBMI)));
    CHECK(mask_of("") == 0);
    CHECK(mask_of(",, ,") == 0);
    /* groups; AMX code lives with the AVX-512 kernels, so it goes too */
    CHECK(mask_of("-avx512") == (avx512 | amx));
    CHECK(mask_of("avx512") == (avx512 | amx)); /* bare token also hides */
    CHECK(mask_of("-amx") == amx);
    CHECK(mask_of("-avx512f") == (avx512 | amx));
    /* a leaf feature hides only itself */
    CHECK(mask_of("-avx512_bf16") == BIT(AVX512_BF16));
    CHECK(mask_of("-amx_bf16") == BIT(AMX_BF16));
    CHECK(mask_of("-amx_tile") == amx);
    /* dependencies: -avx2 leaves avx, fma, f16c; takes AVX-512 (built with -mavx2) */
    CHECK(mask_of("-avx2") == (BIT(AVX2) | avx512 | amx));
    CHECK(mask_of("-fma") == (BIT(FMA) | avx512 | amx));
    CHECK(mask_of("-avx") == (BIT(AVX) | BIT(AVX2) | BIT(FMA) | BIT(F16C) | avx512 | amx));
    CHECK(mask_of("-sse4_2") == (all & ~(BIT(NEON) | BIT(ASIMDHP) | BIT(SVE) | BIT(BF16_ARM))));
    CHECK(mask_of("-neon") == (BIT(NEON) | BIT(ASIMDHP) | BIT(SVE) | BIT(BF16_ARM)));
    CHECK(mask_of("-sve") == BIT(SVE));
    CHECK(mask_of("none") == all);
    CHECK(mask_of("-none") == all);
    CHECK(mask_of("-avx512,-avx2") == (BIT(AVX2) | avx512 | amx));
    CHECK(mask_of(" -AVX2 , -F16C ") == (BIT(AVX2) | BIT(F16C) | avx512 | amx));
    CHECK(mask_of("-avx512_vnni,") == BIT(AVX512_VNNI));
    /* one vocabulary: variant names, feature names, case, '-' and '_' aside */
    CHECK(mask_of("-avx512bf16") == BIT(AVX512_BF16));
    CHECK(mask_of("-avx512-bf16") == BIT(AVX512_BF16));
    CHECK(mask_of("-AVX512_BF16") == BIT(AVX512_BF16));
    CHECK(mask_of("-amx-bf16") == BIT(AMX_BF16));
    CHECK(mask_of("-amxbf16") == BIT(AMX_BF16));
    CHECK(mask_of("avx-512") == (avx512 | amx));
    CHECK(mask_of("-sse42") == mask_of("-sse4_2"));
    CHECK(mask_of("-amx-bf16,-avx512-bf16") == (BIT(AMX_BF16) | BIT(AVX512_BF16)));

    static const struct {
        const char *in, *frag;
    } bad[] = {
        {"-bogus", "'bogus'"},
        {"-avx2,-bogus", "'bogus'"},
        {"+avx2", "'+avx2'"},
        {"-", "'-'"},
        {"-avx512bf17", "kernel variants: amx-bf16 avx512-bf16 avx512 avx2; groups: amx none"},
        {"-avx512bf17", "features: sse4_2 avx avx2"},
        {"-portable", "the portable variant needs no CPU feature"},
        {"-amx,-portable", "'portable'"},
        {"-avx2 -fma", "'avx2 -fma'"},
        {"-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "too long"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t m = 42;
        CHECK_STATUS(attn_cpu_parse_mask(bad[i].in, &m), ATTN_INVALID_ARGUMENT);
        CHECK(m == 42); /* unchanged on error */
        CHECK_CONTAINS(attn_last_error(), bad[i].frag);
    }
    uint64_t m = 0;
    CHECK_STATUS(attn_cpu_parse_mask(NULL, &m), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_cpu_parse_mask("-avx2", NULL), ATTN_NULL_ARGUMENT);
}

static void test_feature_parse(void)
{
    attn_cpu_feature f;
    CHECK_OK(attn__cpu_feature_parse("AMX_INT8", &f));
    CHECK(f == ATTN_CPU_AMX_INT8);
    CHECK_OK(attn__cpu_feature_parse("bf16", &f));
    CHECK(f == ATTN_CPU_BF16_ARM);
    CHECK_STATUS(attn__cpu_feature_parse("avx512", &f), ATTN_INVALID_ARGUMENT); /* a group */
    char buf[64];
    attn__cpu_feature_list(BIT(AVX) | BIT(FMA), buf, sizeof buf);
    CHECK_STR(buf, "avx fma");
    attn__cpu_feature_list(0, buf, sizeof buf);
    CHECK_STR(buf, "-");
}

/* bit i: CPU_ATTN variant i is usable in this process */
static unsigned variants_usable(void)
{
    unsigned v = 0;
    for (int i = 0; i < attn__cpu_attn_variant_count(); i++)
        if (attn__cpu_attn_variant(i)->usable()) v |= 1u << i;
    return v;
}

static void child_report(void)
{
    const attn_cpu_info *ci = attn_cpu_info_get();
    printf("present=%llx usable=%llx masked=%llx avx512f=%d variants=%x active=%s\n",
           (unsigned long long)ci->present, (unsigned long long)ci->usable,
           (unsigned long long)ci->masked, attn_cpu_has(ATTN_CPU_AVX512F), variants_usable(),
           attn__cpu_attn_active()->name);
}

static void run_mask_child(const char *mask, uint64_t *usable, uint64_t *masked, char **text)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "ATTN_CPU_MASK='%s' '%s' --child 2>&1", mask, self_path);
    char *out = NULL;
    int rc = attn_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "child with ATTN_CPU_MASK=%s exited %d", mask, rc);
    unsigned long long p = 0, u = 0, m = 0;
    const char *line = out ? strstr(out, "present=") : NULL;
    CHECK_MSG(line && sscanf(line, "present=%llx usable=%llx masked=%llx", &p, &u, &m) == 3,
              "child output: %s", out ? out : "(none)");
    CHECK(p == attn_cpu_info_get()->present);
    *usable = u;
    *masked = m;
    *text = out;
}

static void test_env_mask(void)
{
    if (!self_path[0]) {
        printf("test_platform_cpu: SKIP ATTN_CPU_MASK child runs (no /proc/self/exe)\n");
        return;
    }
    const attn_cpu_info *ci = attn_cpu_info_get();
    static const char *const masks[] = {"-avx512", "-avx2", "-amx", "none", "-avx512_bf16,-fma"};
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        uint64_t u, m, want = mask_of(masks[i]);
        char *out;
        run_mask_child(masks[i], &u, &m, &out);
        CHECK_MSG(m == (want & ci->present), "%s: masked %llx", masks[i], (unsigned long long)m);
        CHECK_MSG(u == (ci->usable & ~want), "%s: usable %llx", masks[i], (unsigned long long)u);
        CHECK(!strstr(out, "WARNING"));
        free(out);
    }
    /* A bad name is reported with the accepted ones and skipped; the names
     * around it still hide. */
    uint64_t u, m;
    char *out;
    run_mask_child("-avx2,-bogus", &u, &m, &out);
    CHECK(m == (mask_of("-avx2") & ci->present) && u == (ci->usable & ~mask_of("-avx2")));
    CHECK_CONTAINS(out, "ATTN_CPU_MASK='-avx2,-bogus': unknown name 'bogus'");
    CHECK_CONTAINS(out, "kernel variants: amx-bf16 avx512-bf16 avx512 avx2");
    CHECK_CONTAINS(out, "that name is ignored, hidden here: ");
    free(out);
}

/* Every CPU_ATTN variant name is a mask name: masking variant i makes it
 * and the variants above it unusable, leaves those below it as they are
 * here, and the first of those runs. The portable floor cannot be masked. */
static void test_variant_names_mask(void)
{
    if (!self_path[0]) {
        printf("test_platform_cpu: SKIP variant-name child runs (no /proc/self/exe)\n");
        return;
    }
    unsigned here = variants_usable();
    int n = attn__cpu_attn_variant_count();
    for (int i = 0; i < n; i++) {
        const char *name = attn__cpu_attn_variant(i)->name;
        uint64_t bits = 0;
        if (!strcmp(name, "portable")) {
            CHECK_STATUS(attn_cpu_parse_mask(name, &bits), ATTN_INVALID_ARGUMENT);
            CHECK(i == n - 1);
            continue;
        }
        CHECK_OK(attn_cpu_parse_mask(name, &bits));
        char mask[80], *out = NULL;
        snprintf(mask, sizeof mask, "-%s", name);
        uint64_t u, m;
        run_mask_child(mask, &u, &m, &out);
        unsigned v = 0;
        char active[32] = "";
        const char *line = out ? strstr(out, "variants=") : NULL;
        CHECK_MSG(line && sscanf(line, "variants=%x active=%31s", &v, active) == 2, "child: %s",
                  out ? out : "(none)");
        unsigned above = (2u << i) - 1; /* variants 0..i */
        CHECK_MSG((v & above) == 0, "%s: variants 0x%x still usable", mask, v & above);
        CHECK_MSG((v & ~above) == (here & ~above), "%s: variants below changed: 0x%x, here 0x%x",
                  mask, v, here);
        int first = i + 1;
        while (first < n && !(v >> first & 1))
            first++;
        CHECK_MSG(first < n && !strcmp(active, attn__cpu_attn_variant(first)->name), "%s: runs %s",
                  mask, active);
        CHECK(!strstr(out, "WARNING"));
        free(out);
    }
}

static void *thread_get(void *arg)
{
    (void)arg;
    return (void *)attn_cpu_info_get();
}

static void test_threads(void)
{
    pthread_t t[8];
    void *r[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, thread_get, NULL);
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], &r[i]);
        CHECK(r[i] == (void *)attn_cpu_info_get());
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--child")) {
        child_report();
        return 0;
    }
    unsetenv("ATTN_CPU_MASK"); /* before the first detection in this process */
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    self_path[n > 0 ? n : 0] = '\0';
    test_threads();
    test_info_consistent();
    test_matches_proc_cpuinfo();
    test_parse_mask();
    test_feature_parse();
    test_env_mask();
    test_variant_names_mask();
    return attn_test_finish("test_platform_cpu");
}
