/* vLLM 0.32.0's composite backends: TRITON_FLASH_ATTN (TRITON_ATTN for the
 * multimodal-prefix route, FLASH_ATTN for the causal one, SM 9.x) and
 * TRITON_FLASHINFER (TRITON_ATTN and FLASHINFER, SM 10.x). Both serve head
 * sizes 256 and 512 only. A composite accepts what both halves accept (head
 * size, dtype, KV dtype, blocks, capability, sliding window, R-SWA); the
 * causal half never sees the multimodal prefix; neither runs adaptive
 * verification (no device/CPU query-length mismatch); every other capability
 * is the backend base class's default (no sinks, no non-causal, no per-head
 * scales, no batch invariance, no PCP/DCP, decoder only). A half's own
 * combination reason is reported as "HALF: reason". */
#include <stdio.h>

#include "attn/registry.h"
#include "backends/catalog/catalog.h"
#include "metadata/builders.h"
#include "platform/platform_impl.h"

#define KV(x) ATTN_KV_BIT(ATTN_KV_##x)
#define DT(x) ATTN_DTYPE_BIT(ATTN_DTYPE_##x)

static const int attn__composite_heads[] = {256, 512};
static const int attn__blocks_16[] = {16};
static const int attn__blocks_64[] = {64};

static bool attn__major_is(const attn_check_ctx *c, int major)
{
    return c->has_cc && c->cc_major == major;
}

static bool composite_head(const attn_backend_desc *causal, const attn_check_ctx *c, int hs)
{
    return (hs == 256 || hs == 512) && attn__desc_head_ok(&attn__desc_triton_attn, c, hs) &&
           attn__desc_head_ok(causal, c, hs);
}

static bool composite_dtype(const attn_backend_desc *causal, const attn_check_ctx *c, attn_dtype dt)
{
    return attn__desc_dtype_ok(&attn__desc_triton_attn, c, dt) &&
           attn__desc_dtype_ok(causal, c, dt);
}

static bool composite_kv(const attn_backend_desc *causal, const attn_check_ctx *c, attn_kv_dtype kv)
{
    return attn__desc_kv_ok(&attn__desc_triton_attn, c, kv) && attn__desc_kv_ok(causal, c, kv);
}

static bool composite_cc(const attn_backend_desc *causal, const attn_check_ctx *c, int major)
{
    return attn__major_is(c, major) && attn__desc_cc_ok(&attn__desc_triton_attn, c) &&
           attn__desc_cc_ok(causal, c);
}

/* TRITON_ATTN's check with the request's multimodal prefix, then the causal
 * half's without it; the first reason wins, named after its half. */
static const char *composite_combination(const attn_backend_desc *causal, const char *causal_name,
                                         const attn_check_ctx *c, char *buf, size_t size,
                                         const char *(*extra)(const attn_check_ctx *))
{
    char inner[ATTN_REASON_MAX];
    inner[0] = '\0';
    const attn_backend_desc *t = &attn__desc_triton_attn;
    const char *r =
        t->supports_combination ? t->supports_combination(c, inner, sizeof inner) : NULL;
    if (r) {
        snprintf(buf, size, "TRITON_ATTN: %s", r);
        return buf;
    }
    attn_selector_config cfg = *c->cfg;
    cfg.use_mm_prefix = false;
    attn_check_ctx cc = *c;
    cc.cfg = &cfg;
    inner[0] = '\0';
    r = causal->supports_combination ? causal->supports_combination(&cc, inner, sizeof inner)
                                     : NULL;
    if (!r && extra) r = extra(&cc);
    if (!r) return NULL;
    snprintf(buf, size, "%s: %s", causal_name, r);
    return buf;
}

/* ---- TRITON_FLASH_ATTN --------------------------------------------------- */

/* Its FLASH_ATTN half takes only a causal route through FA3 or FA4. */
static const char *tfa_causal_route(const attn_check_ctx *c)
{
    attn__fa_query q = attn__fa_query_hd256(c);
    int v = attn__fa_version_for(c->platform, &q);
    return v == 3 || v == 4 ? NULL : "causal route requires FlashAttention v3 or v4";
}

static bool tfa_head(const attn_check_ctx *c, int hs)
{
    return composite_head(&attn__desc_flash_attn, c, hs);
}

static bool tfa_dtype(const attn_check_ctx *c, attn_dtype dt)
{
    return composite_dtype(&attn__desc_flash_attn, c, dt);
}

static bool tfa_kv(const attn_check_ctx *c, attn_kv_dtype kv)
{
    return composite_kv(&attn__desc_flash_attn, c, kv);
}

/* Kernel blocks: TRITON_ATTN's and FLASH_ATTN's multiples of 16 agree. */
static bool tfa_block(const attn_check_ctx *c, int bs)
{
    return bs % 16 == 0 && attn__desc_block_ok(&attn__desc_triton_attn, c, bs) &&
           attn__desc_block_ok(&attn__desc_flash_attn, c, bs);
}

static bool tfa_cc(const attn_check_ctx *c)
{
    return composite_cc(&attn__desc_flash_attn, c, 9);
}

static const char *tfa_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    return composite_combination(&attn__desc_flash_attn, "FLASH_ATTN", c, buf, size,
                                 tfa_causal_route);
}

static const attn_backend_desc attn__desc_triton_flash_attn = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "TRITON_FLASH_ATTN",
    .platforms = "CUDA (SM 9.x)",
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3),
    ATTN__BLOCKS(attn__blocks_16),
    ATTN__HEADS(attn__composite_heads),
    ATTN__CC_MAJORS(9, 9),
    .supports_mm_prefix = true,
    .supports_sliding_window = true, /* both halves */
    .supports_rswa = true,
    .rejects_query_lens_mismatch = true,
    .imports_vllm_flash_attn = ATTN_FA_IMPORT_CUDA,
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .can_return_lse_for_decode = true,
    .supports_head_size = tfa_head,
    .supports_dtype = tfa_dtype,
    .supports_kv_cache_dtype = tfa_kv,
    .supports_block_size = tfa_block,
    .supports_compute_capability = tfa_cc,
    .supports_combination = tfa_combination,
    .kv_cache_shape = attn__kv_shape_flash,
    .kv_stride_order = attn__stride_order_flash,
    .builder = &attn__builder_flash_attn,
};

/* ---- TRITON_FLASHINFER --------------------------------------------------- */

static bool tfi_head(const attn_check_ctx *c, int hs)
{
    return composite_head(&attn__desc_flashinfer, c, hs);
}

static bool tfi_dtype(const attn_check_ctx *c, attn_dtype dt)
{
    return composite_dtype(&attn__desc_flashinfer, c, dt);
}

static bool tfi_kv(const attn_check_ctx *c, attn_kv_dtype kv)
{
    return composite_kv(&attn__desc_flashinfer, c, kv);
}

/* Kernel block 64, which both halves take. */
static bool tfi_block(const attn_check_ctx *c, int bs)
{
    (void)c;
    return bs % 64 == 0;
}

static bool tfi_cc(const attn_check_ctx *c)
{
    return composite_cc(&attn__desc_flashinfer, c, 10);
}

static const char *tfi_combination(const attn_check_ctx *c, char *buf, size_t size)
{
    return composite_combination(&attn__desc_flashinfer, "FLASHINFER", c, buf, size, NULL);
}

static const attn_backend_desc attn__desc_triton_flashinfer = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "TRITON_FLASHINFER",
    .platforms = "CUDA (SM 10.x)",
    .dtypes = DT(FP16) | DT(BF16),
    .kv_dtypes = KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2),
    ATTN__BLOCKS(attn__blocks_64),
    ATTN__HEADS(attn__composite_heads),
    ATTN__CC_MAJORS(10, 10),
    .supports_mm_prefix = true,
    .supports_sliding_window = true, /* both halves; R-SWA only TRITON_ATTN's */
    .rejects_query_lens_mismatch = true,
    .cg_support = ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE,
    .can_return_lse_for_decode = true,
    .import_requires = 1u << ATTN_COMPONENT_FLASHINFER,
    .supports_head_size = tfi_head,
    .supports_dtype = tfi_dtype,
    .supports_kv_cache_dtype = tfi_kv,
    .supports_block_size = tfi_block,
    .supports_compute_capability = tfi_cc,
    .supports_combination = tfi_combination,
    .kv_cache_shape = attn__kv_shape_flashinfer,
    .kv_stride_order = attn__stride_order_flashinfer,
    .builder = &attn__builder_flashinfer,
    .required_layout_fn = attn__fi_layout,
    /* the layouts both halves take: TRITON_ATTN takes any */
    .kv_cache_layouts_fn = attn__fi_kv_layouts,
};

ATTN__BUILTIN(attn__builtin_triton_flash_attn, attn__desc_triton_flash_attn)
ATTN__BUILTIN(attn__builtin_triton_flashinfer, attn__desc_triton_flashinfer)
