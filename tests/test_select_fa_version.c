/* FlashAttention version resolution (reference §5d) as a table: machine,
 * installed FA builds, head size, requested version, batch invariance ->
 * version (0 = None), and the FLASH_ATTN rules that follow from it. */
#include <stdio.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "test.h"

typedef struct fa_row {
    const char *machine, *installed;
    int head, requested;
    bool batch_invariant;
    int want;
} fa_row;

static const fa_row rows[] = {
    {"cuda:9.0", "fa2,fa3,fa4", 0, 0, false, 3},
    {"cuda:9.0", "fa2,fa3,fa4", 0, 0, true, 3},
    {"cuda:9.0", "fa2,fa3,fa4", 512, 0, false, 4}, /* head > 256 on Hopper: FA4 */
    {"cuda:9.0", "fa2,fa3", 512, 0, false, 3},     /* ... when FA4 is there */
    {"cuda:9.0", "fa2,fa4", 0, 0, false, 2},
    {"cuda:9.0", "fa4", 0, 0, false, 0},        /* FA2 not installed: None */
    {"cuda:9.0", "fa2,fa3,fa4", 0, 4, true, 2}, /* batch invariance: no FA4 */
    {"cuda:10.0", "fa2,fa3,fa4", 0, 0, false, 4},
    {"cuda:10.0", "fa2,fa3,fa4", 0, 0, true, 2},
    {"cuda:10.0", "fa2,fa3,fa4", 128, 0, false, 4},
    {"cuda:10.0", "fa2,fa3,fa4", 192, 0, false, 2}, /* 192 needs a 128-wide V head */
    {"cuda:10.0", "fa2,fa3,fa4", 256, 0, false, 2}, /* no FA4 head-256 kernel asked for */
    {"cuda:10.0", "fa2,fa3,fa4", 320, 0, false, 2}, /* head > 128: TMEM */
    {"cuda:10.0", "fa2,fa3,fa4", 0, 3, false, 4},   /* FA3 requested on 10.x */
    {"cuda:10.0", "fa2,fa3", 0, 3, false, 2},
    {"cuda:10.0", "fa3", 0, 0, false, 0},
    {"cuda:8.0", "fa2,fa3,fa4", 0, 0, false, 2},
    {"cuda:8.9", "fa2,fa3,fa4", 0, 0, false, 2},
    {"cuda:8.0", "", 0, 0, false, 0},
    {"cuda:7.5", "fa2,fa3,fa4", 0, 0, false, 0}, /* every version needs >= 8.0 */
    {"cuda:7.0", "fa2,fa3,fa4", 0, 0, false, 0},
    {"cuda:11.0", "fa2,fa3,fa4", 0, 0, false, 2},
    {"cuda:12.0", "fa2,fa3,fa4", 0, 0, false, 2},
    {"cuda:8.0", "fa2,fa3,fa4", 0, 3, false, 0}, /* FA3 requested off Hopper: None */
    {"xpu", "", 0, 0, false, 2},
    {"rocm:gfx942", "", 0, 0, false, 0},
    {"cpu", "", 0, 0, false, 0},
};

/* FA4's head-256 kernel on 10.x, for callers that take it (FLASH_ATTN's
 * combination check, the TRITON_FLASH_ATTN causal route). */
typedef struct fa_hd256_row {
    int head, block;
    bool sinks, hd256;
    int want;
} fa_hd256_row;

static const fa_hd256_row hd256_rows[] = {
    {256, 0, false, true, 4},  {256, 128, false, true, 4}, {256, 256, false, true, 4},
    {256, 64, false, true, 2}, /* blocks must be whole 128-token pages */
    {256, 0, true, true, 2},   /* no sinks in that kernel */
    {256, 0, false, false, 2}, /* not asked for */
    {128, 64, true, true, 4},  /* other heads: unaffected */
};

static void test_hd256(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cuda:10.0", &p));
    if (!p) return;
    CHECK_OK(attn_platform_set_installed(p, "fa2,fa3,fa4"));
    for (size_t i = 0; i < sizeof hd256_rows / sizeof hd256_rows[0]; i++) {
        const fa_hd256_row *r = &hd256_rows[i];
        attn__fa_query q = {.head_size = r->head,
                            .block_size = r->block,
                            .has_sinks = r->sinks,
                            .fa4_hd256 = r->hd256};
        int got = attn__fa_version_for(p, &q);
        CHECK_MSG(got == r->want, "head %d block %d sinks %d hd256 %d: FA%d, want FA%d", r->head,
                  r->block, r->sinks, r->hd256, got, r->want);
    }
    attn_platform_free(p);
}

static void test_table(void)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const fa_row *r = &rows[i];
        attn_platform *p = NULL;
        CHECK_OK(attn_platform_open(r->machine, &p));
        if (!p) continue;
        if (strcmp(r->machine, "xpu") && strcmp(r->machine, "cpu"))
            CHECK_OK(attn_platform_set_installed(p, r->installed));
        int got = attn__fa_version(p, r->head, r->requested, r->batch_invariant);
        CHECK_MSG(got == r->want, "%s [%s] head %d req %d bi %d: FA%d, want FA%d", r->machine,
                  r->installed, r->head, r->requested, r->batch_invariant, got, r->want);
        attn_platform_free(p);
    }
}

static void test_supported(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cuda:9.0", &p));
    CHECK_OK(attn_platform_set_installed(p, "fa2,fa3,fa4"));
    CHECK(attn__fa_version_supported(p, 2) && attn__fa_version_supported(p, 3) &&
          attn__fa_version_supported(p, 4) && !attn__fa_version_supported(p, 5));
    CHECK(attn__fa4_supported(p));
    attn_platform_free(p);
    CHECK_OK(attn_platform_open("cuda:11.0", &p));
    CHECK_OK(attn_platform_set_installed(p, "fa2,fa3,fa4"));
    CHECK(attn__fa_version_supported(p, 4) && !attn__fa_version_supported(p, 3));
    attn_platform_free(p);
    CHECK_OK(attn_platform_open("cuda:12.0", &p));
    CHECK_OK(attn_platform_set_installed(p, "fa2,fa3,fa4"));
    CHECK(!attn__fa4_supported(p) && attn__fa_version_supported(p, 2));
    attn_platform_free(p);
    CHECK(!attn__fa_version_supported(NULL, 2));
    CHECK(attn__fa_version(NULL, 0, 0, false) == 0);
}

/* What the version means for FLASH_ATTN (the case file covers more). */
static int reasons_for(const char *machine, const char *installed, attn_selector_config *c,
                       char out[][ATTN_REASON_MAX])
{
    attn_platform *p = NULL;
    const attn_backend *b = NULL;
    if (attn_platform_open(machine, &p) != ATTN_OK) return -2;
    attn_platform_set_installed(p, installed);
    int n = -3;
    if (attn_backend_resolve(p, "FLASH_ATTN", &b) == ATTN_OK)
        n = attn_backend_validate(b->desc, p, c, out, ATTN_REASONS_MAX);
    attn_platform_free(p);
    return n;
}

static void test_flash_attn_rules(void)
{
    char r[ATTN_REASONS_MAX][ATTN_REASON_MAX];
    attn_selector_config c;
    attn_selector_config_init(&c);
    c.head_size = 128;
    c.kv_cache_dtype = ATTN_KV_FP8_E4M3;
    CHECK(reasons_for("cuda:9.0", "fa2,fa3", &c, r) == 0);
    /* vLLM 0.32.0: FA4 on 10.x takes an fp8 cache (FA version 4 by default). */
    CHECK(reasons_for("cuda:10.0", "fa2,fa3,fa4", &c, r) == 0);
    CHECK(reasons_for("cuda:10.0", "fa2", &c, r) == 2);
    CHECK_STR(r[0], "kv_cache_dtype not supported");
    CHECK_STR(r[1], "FP8 KV cache requires FA3 on SM90, FA4 with head_size=512 on SM90, or FA4 "
                    "on SM100");
    c.kv_cache_dtype = ATTN_KV_FP8_E5M2;
    CHECK(reasons_for("cuda:9.0", "fa2,fa3", &c, r) == 2);
    c.kv_cache_dtype = ATTN_KV_AUTO;
    c.use_batch_invariant = true; /* FA3 still, so fp8 stays fine on Hopper */
    c.kv_cache_dtype = ATTN_KV_FP8;
    CHECK(reasons_for("cuda:9.0", "fa2,fa3,fa4", &c, r) == 0);
    c.use_batch_invariant = false;
    c.kv_cache_dtype = ATTN_KV_AUTO;
    c.head_size = 512;
    CHECK(reasons_for("cuda:9.0", "fa2,fa3,fa4", &c, r) == 0);
    CHECK(reasons_for("cuda:9.0", "fa2,fa3", &c, r) == 1);
    CHECK_STR(r[0], "head_size not supported");
    c.head_size = 520;
    CHECK(reasons_for("cuda:9.0", "fa2,fa3,fa4", &c, r) == 1);
    c.head_size = 100;
    CHECK(reasons_for("cuda:9.0", "fa2,fa3,fa4", &c, r) == 1);
    /* Sinks: FA3/FA4 only, and a capability below 9.0 adds its own reason. */
    c.head_size = 64;
    c.has_sink = true;
    CHECK(reasons_for("cuda:10.0", "fa2,fa3,fa4", &c, r) == 0);
    CHECK(reasons_for("cuda:8.0", "fa2,fa3,fa4", &c, r) == 2);
    CHECK_STR(r[0], "attention sinks not supported");
    CHECK_STR(r[1], "sink not supported on compute capability < 9.0");
    /* Per-head quant scales need FA3 or later. */
    c.has_sink = false;
    c.use_per_head_quant_scales = true;
    CHECK(reasons_for("cuda:9.0", "fa2,fa3", &c, r) == 0);
    CHECK(reasons_for("cuda:9.0", "fa2", &c, r) == 1);
    CHECK_STR(r[0], "per-head quant scales not supported");
}

int main(void)
{
    test_table();
    test_hd256();
    test_supported();
    test_flash_attn_rules();
    return attn_test_finish("test_select_fa_version");
}
