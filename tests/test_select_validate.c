/* Generic validation (reference §3) on hand-made descriptors: every
 * predicate on its own, all reasons together in vLLM's order and wording,
 * zero fields meaning vLLM's base-class defaults, dynamic hooks replacing
 * static fields, preferred block sizes, and bad arguments. */
#include <stdio.h>
#include <string.h>

#include "test.h"

static char reasons[ATTN_REASONS_MAX][ATTN_REASON_MAX];

static attn_backend_desc base(void)
{
    attn_backend_desc d;
    memset(&d, 0, sizeof d);
    d.abi_version = ATTN_BACKEND_ABI_VERSION;
    d.struct_size = sizeof d;
    d.name = "HAND";
    return d;
}

static attn_selector_config cfg0(void)
{
    attn_selector_config c;
    attn_selector_config_init(&c);
    c.head_size = 128;
    return c;
}

/* Validates and checks the reasons are exactly `want` (NULL-terminated). */
static void expect(const attn_backend_desc *d, const attn_platform *p,
                   const attn_selector_config *c, const char *const *want, int line)
{
    int n = attn_backend_validate(d, p, c, reasons, ATTN_REASONS_MAX);
    int w = 0;
    while (want[w])
        w++;
    CHECK_MSG(n == w, "line %d: %d reasons, want %d (first: %s)", line, n, w,
              n > 0 ? reasons[0] : "-");
    for (int i = 0; i < n && i < w; i++)
        CHECK_MSG(!strcmp(reasons[i], want[i]), "line %d: reason %d is '%s', want '%s'", line, i,
                  reasons[i], want[i]);
}
#define EXPECT(d, p, c, ...)                                                                       \
    do {                                                                                           \
        const char *const w_[] = {__VA_ARGS__, NULL};                                              \
        expect((d), (p), (c), w_, __LINE__);                                                       \
    } while (0)
#define EXPECT_VALID(d, p, c)                                                                      \
    do {                                                                                           \
        const char *const w_[] = {NULL};                                                           \
        expect((d), (p), (c), w_, __LINE__);                                                       \
    } while (0)

static bool never(const attn_check_ctx *c)
{
    (void)c;
    return false;
}

static bool always(const attn_check_ctx *c)
{
    (void)c;
    return true;
}

static bool head_even(const attn_check_ctx *c, int hs)
{
    (void)c;
    return hs % 2 == 0;
}

static bool only_fp32(const attn_check_ctx *c, attn_dtype d)
{
    (void)c;
    return d == ATTN_DTYPE_FP32;
}

static bool only_fp8(const attn_check_ctx *c, attn_kv_dtype k)
{
    (void)c;
    return k == ATTN_KV_FP8;
}

static bool block_pow2(const attn_check_ctx *c, int bs)
{
    (void)c;
    return (bs & (bs - 1)) == 0;
}

static const char *combo(const attn_check_ctx *c, char *buf, size_t size)
{
    snprintf(buf, size, "needs %d heads", c->cfg->head_size * 2);
    return buf;
}

static void test_defaults(attn_platform *cuda9)
{
    attn_backend_desc d = base();
    attn_selector_config c = cfg0();
    EXPECT_VALID(&d, cuda9, &c);
    c.dtype = ATTN_DTYPE_FP32; /* base default dtypes: fp16, bf16 */
    EXPECT(&d, cuda9, &c, "dtype not supported");
    c = cfg0();
    c.kv_cache_dtype = ATTN_KV_FP8; /* base default kv: auto, float16, bfloat16 */
    EXPECT(&d, cuda9, &c, "kv_cache_dtype not supported");
    c.kv_cache_dtype = ATTN_KV_NONE; /* None is always fine ... */
    EXPECT_VALID(&d, cuda9, &c);
    d.kv_none_rejected = true; /* ... except for TURBOQUANT-style rules */
    EXPECT(&d, cuda9, &c, "kv_cache_dtype not supported");
    d = base();
    c = cfg0();
    c.attn_type = ATTN_TYPE_ENCODER_ONLY; /* base default: decoder only */
    EXPECT(&d, cuda9, &c, "attention type AttentionType.ENCODER_ONLY not supported");
    c.attn_type = ATTN_TYPE_ENCODER_DECODER;
    EXPECT(&d, cuda9, &c, "attention type AttentionType.ENCODER_DECODER not supported");
    d.attn_types = ATTN_TYPE_BIT(ATTN_TYPE_ENCODER_DECODER);
    EXPECT_VALID(&d, cuda9, &c);
}

static void test_each_predicate(attn_platform *cuda9, attn_platform *cpu)
{
    static const int sizes[] = {64, 128};
    static const int blocks[] = {64};
    static const int blocks2[] = {16, 24};
    attn_backend_desc d = base();
    attn_selector_config c = cfg0();

    d.heads.sizes = sizes, d.heads.n_sizes = 2;
    c.head_size = 96;
    EXPECT(&d, cuda9, &c, "head_size not supported");
    c.head_size = 64;
    EXPECT_VALID(&d, cuda9, &c);
    d = base();
    d.heads.min = 32, d.heads.max = 256, d.heads.multiple_of = 8;
    c.head_size = 16;
    EXPECT(&d, cuda9, &c, "head_size not supported");
    c.head_size = 264;
    EXPECT(&d, cuda9, &c, "head_size not supported");
    c.head_size = 100;
    EXPECT(&d, cuda9, &c, "head_size not supported");
    c.head_size = 104;
    EXPECT_VALID(&d, cuda9, &c);

    /* Block sizes: divisible by any entry; None always fine. */
    d = base();
    c = cfg0();
    d.block_sizes = blocks, d.n_block_sizes = 1;
    c.block_size = 128;
    EXPECT_VALID(&d, cuda9, &c);
    c.block_size = 32;
    EXPECT(&d, cuda9, &c, "block_size not supported");
    c.block_size = 0;
    EXPECT_VALID(&d, cuda9, &c);
    d.block_sizes = blocks2, d.n_block_sizes = 2;
    c.block_size = 48;
    EXPECT_VALID(&d, cuda9, &c);
    c.block_size = 40;
    EXPECT(&d, cuda9, &c, "block_size not supported");
    CHECK(attn_backend_supports_block_size(&d, cuda9, 72));
    CHECK(!attn_backend_supports_block_size(&d, cuda9, 20));
    CHECK(attn_backend_supports_block_size(&d, cuda9, 0));

    d = base();
    c = cfg0();
    c.use_mm_prefix = true;
    EXPECT(&d, cuda9, &c, "partial multimodal token full attention not supported");
    d.supports_mm_prefix = true;
    EXPECT_VALID(&d, cuda9, &c);

    d = base();
    c = cfg0();
    c.use_mla = true;
    EXPECT(&d, cuda9, &c, "MLA not supported");
    d.is_mla = true;
    EXPECT_VALID(&d, cuda9, &c);
    c.use_mla = false;
    EXPECT(&d, cuda9, &c, "non-MLA not supported");

    d = base();
    c = cfg0();
    c.has_sink = true;
    EXPECT(&d, cuda9, &c, "attention sinks not supported");
    d.supports_sink = true;
    EXPECT_VALID(&d, cuda9, &c);
    d.supports_sink_fn = never; /* the hook replaces the field */
    EXPECT(&d, cuda9, &c, "attention sinks not supported");

    d = base();
    c = cfg0();
    c.use_sparse = true;
    EXPECT(&d, cuda9, &c, "sparse not supported");
    d.is_sparse = true;
    EXPECT_VALID(&d, cuda9, &c);
    c.use_sparse = false;
    EXPECT(&d, cuda9, &c, "non-sparse not supported");

    d = base();
    c = cfg0();
    c.use_per_head_quant_scales = true;
    EXPECT(&d, cuda9, &c, "per-head quant scales not supported");
    d.supports_per_head_quant_scales_fn = always;
    EXPECT_VALID(&d, cuda9, &c);

    /* Capability ranges; a platform without one fails a bounded rule. */
    d = base();
    c = cfg0();
    d.cc_min = (attn_cc){8, 0};
    EXPECT_VALID(&d, cuda9, &c);
    d.cc_min = (attn_cc){9, 1};
    EXPECT(&d, cuda9, &c, "compute capability not supported");
    d.cc_min = (attn_cc){0, 0};
    d.cc_max = (attn_cc){8, 9};
    EXPECT(&d, cuda9, &c, "compute capability not supported");
    EXPECT(&d, cpu, &c, "compute capability not supported");
    d.cc_max = (attn_cc){0, 0};
    EXPECT_VALID(&d, cpu, &c);
    d.supports_compute_capability = never;
    EXPECT(&d, cuda9, &c, "compute capability not supported");

    d = base();
    c = cfg0();
    c.use_non_causal = true;
    EXPECT(&d, cuda9, &c, "non-causal attention not supported");
    d.supports_non_causal = true;
    EXPECT_VALID(&d, cuda9, &c);

    d = base();
    c = cfg0();
    c.use_batch_invariant = true;
    EXPECT(&d, cuda9, &c, "batch invariance not supported");
    d.supports_batch_invariance = true;
    EXPECT_VALID(&d, cuda9, &c);

    d = base();
    c = cfg0();
    d.supports_combination = combo;
    EXPECT(&d, cuda9, &c, "needs 256 heads");

    /* Dynamic hooks replace the static fields. */
    d = base();
    c = cfg0();
    d.supports_head_size = head_even;
    d.supports_dtype = only_fp32;
    d.supports_kv_cache_dtype = only_fp8;
    d.supports_block_size = block_pow2;
    c.head_size = 7;
    c.block_size = 48;
    EXPECT(&d, cuda9, &c, "head_size not supported", "dtype not supported",
           "kv_cache_dtype not supported", "block_size not supported");
    c.head_size = 8;
    c.block_size = 64;
    c.dtype = ATTN_DTYPE_FP32;
    c.kv_cache_dtype = ATTN_KV_FP8;
    EXPECT_VALID(&d, cuda9, &c);
}

static void test_all_in_order(attn_platform *cuda9)
{
    static const int sizes[] = {64};
    static const int blocks[] = {16};
    attn_backend_desc d = base();
    d.heads.sizes = sizes, d.heads.n_sizes = 1;
    d.dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16);
    d.kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO);
    d.block_sizes = blocks, d.n_block_sizes = 1;
    d.cc_min = (attn_cc){10, 0};
    d.is_sparse = true;
    d.supports_combination = combo;
    attn_selector_config c = cfg0();
    c.head_size = 100;
    c.dtype = ATTN_DTYPE_BF16;
    c.kv_cache_dtype = ATTN_KV_FP8;
    c.block_size = 8;
    c.use_mm_prefix = c.use_mla = c.has_sink = c.use_per_head_quant_scales = true;
    c.use_non_causal = c.use_batch_invariant = true;
    c.attn_type = ATTN_TYPE_ENCODER;
    EXPECT(&d, cuda9, &c, "head_size not supported", "dtype not supported",
           "kv_cache_dtype not supported", "block_size not supported",
           "partial multimodal token full attention not supported", "MLA not supported",
           "attention sinks not supported", "non-sparse not supported",
           "per-head quant scales not supported", "compute capability not supported",
           "attention type AttentionType.ENCODER not supported",
           "non-causal attention not supported", "batch invariance not supported",
           "needs 200 heads");
    /* The count is every failed check even when fewer are written. */
    char few[2][ATTN_REASON_MAX];
    CHECK(attn_backend_validate(&d, cuda9, &c, few, 2) == 14);
    CHECK_STR(few[1], "dtype not supported");
    CHECK(attn_backend_validate(&d, cuda9, &c, NULL, 0) == 14);
}

static void test_bad_args(attn_platform *cuda9)
{
    attn_backend_desc d = base();
    attn_selector_config c = cfg0();
    CHECK(attn_backend_validate(NULL, cuda9, &c, reasons, 4) == -1);
    CHECK(attn_backend_validate(&d, cuda9, NULL, reasons, 4) == -1);
    d.abi_version = 7;
    CHECK(attn_backend_validate(&d, cuda9, &c, reasons, 4) == -1);
    CHECK_CONTAINS(attn_last_error(), "abi_version 7");
    d = base();
    d.struct_size = 16;
    CHECK(attn_backend_validate(&d, cuda9, &c, reasons, 4) == -1);
    /* No platform: no capability. */
    d = base();
    CHECK(attn_backend_validate(&d, NULL, &c, reasons, 4) == 0);
    CHECK(!attn_backend_supports_block_size(NULL, cuda9, 16));
    CHECK(attn_backend_preferred_block_size(NULL, cuda9, 16) == 16);
}

static void test_preferred(attn_platform *cuda9, attn_platform *cpu, attn_platform *xpu)
{
    static const int b64[] = {64}, b128[] = {128}, b3264[] = {32, 64}, b16[] = {16};
    attn_backend_desc d = base();
    CHECK(attn_backend_preferred_block_size(&d, cuda9, 16) == 16);
    d.block_sizes = b16, d.n_block_sizes = 1;
    CHECK(attn_backend_preferred_block_size(&d, cuda9, 16) == 16);
    d.block_sizes = b64;
    CHECK(attn_backend_preferred_block_size(&d, cuda9, 16) == 64);
    d.block_sizes = b128;
    CHECK(attn_backend_preferred_block_size(&d, cuda9, 16) == 128);
    d.block_sizes = b3264, d.n_block_sizes = 2;
    CHECK(attn_backend_preferred_block_size(&d, cuda9, 16) == 32);
    CHECK(attn_backend_preferred_block_size(&d, cuda9, 64) == 64);
    d.preferred_block_size = 64;
    CHECK(attn_backend_preferred_block_size(&d, cuda9, 16) == 64);
    /* The CPU platform defaults to 128. */
    d = base();
    d.block_sizes = b16, d.n_block_sizes = 1;
    CHECK(attn_backend_preferred_block_size(&d, cpu, 16) == 128);
    /* Catalog descriptors through the registry (simulated machines). */
    const attn_backend *b = NULL;
    const struct {
        const char *name;
        attn_platform *p;
        int want;
    } cat[] = {{"FLASHMLA", cuda9, 64},
               {"FLASHMLA_SPARSE", cuda9, 64},
               {"CUTLASS_MLA", cuda9, 128},
               {"FLASHINFER_MLA", cuda9, 32},
               {"TOKENSPEED_MLA", cuda9, 32},
               {"FLASHINFER_MLA_SPARSE", cuda9, 32},
               {"ROCM_AITER_UNIFIED_ATTN", cuda9, 64},
               {"FLASH_ATTN", cuda9, 16},
               {"TRITON_ATTN", cuda9, 16},
               {"FLASH_ATTN", xpu, 64},
               {"TRITON_ATTN", xpu, 16},
               {"TRITON_ATTN", cpu, 128}};
    for (size_t i = 0; i < sizeof cat / sizeof cat[0]; i++) {
        CHECK_OK(attn_backend_resolve(cat[i].p, cat[i].name, &b));
        if (!b) continue;
        int got = attn_backend_preferred_block_size(b->desc, cat[i].p, 16);
        CHECK_MSG(got == cat[i].want, "%s: preferred %d, want %d", cat[i].name, got, cat[i].want);
    }
}

int main(void)
{
    attn_platform *cuda9 = NULL, *cpu = NULL, *xpu = NULL;
    CHECK_OK(attn_platform_open("cuda:9.0", &cuda9));
    CHECK_OK(attn_platform_open("cpu", &cpu));
    CHECK_OK(attn_platform_open("xpu", &xpu));
    if (cuda9 && cpu && xpu) {
        CHECK_OK(attn_platform_set_installed(cuda9, "fa2,fa3,fa4,flashinfer"));
        test_defaults(cuda9);
        test_each_predicate(cuda9, cpu);
        test_all_in_order(cuda9);
        test_bad_args(cuda9);
        test_preferred(cuda9, cpu, xpu);
    }
    attn_platform_free(cuda9);
    attn_platform_free(cpu);
    attn_platform_free(xpu);
    return attn_test_finish("test_select_validate");
}
