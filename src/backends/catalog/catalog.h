/* The descriptors of the named backends (internal): vLLM 0.32.0's
 * backends and libattn's own, as data and their predicates, with the KV
 * shapes and FlashAttention version rules they share. GPU descriptors have
 * no kernel (kernel NULL): on simulated machines serving emulates them with
 * the CPU kernels. Each descriptor names its metadata builder (the catalog
 * sits on metadata/). The table of names (one entry per registry name: its
 * default locator and built-in object) is the registry's,
 * registry/catalog_table.h: it names the kernels' objects too, so it sits
 * above them. */
#ifndef ATTN_BACKENDS_CATALOG_H
#define ATTN_BACKENDS_CATALOG_H

#include "attn/backend.h"

/* Batch invariance in effect for a validation context: the config asks for
 * it or the machine's batch_invariant setting (VLLM_BATCH_INVARIANT) is on. */
bool attn__batch_invariant(const attn_check_ctx *c);

/* ---- the single field checks of a descriptor (desc_checks.c) ---------- */

/* The checks the selector's validator words its reasons from (a composite
 * asks them of its halves); each honours the descriptor's dynamic predicate. */
bool attn__desc_head_ok(const attn_backend_desc *d, const attn_check_ctx *c, int hs);
bool attn__desc_dtype_ok(const attn_backend_desc *d, const attn_check_ctx *c, attn_dtype dt);
bool attn__desc_kv_ok(const attn_backend_desc *d, const attn_check_ctx *c, attn_kv_dtype kv);
bool attn__desc_block_ok(const attn_backend_desc *d, const attn_check_ctx *c, int bs);
bool attn__desc_cc_ok(const attn_backend_desc *d, const attn_check_ctx *c);

/* The yes/no capabilities of a descriptor, each a static field (the
 * machine-independent statement) and an optional hook that refines it per
 * machine. Order: vLLM's validate_configuration. */
typedef enum attn__flag {
    ATTN__FLAG_MM_PREFIX,
    ATTN__FLAG_SINK,
    ATTN__FLAG_PER_HEAD_QUANT_SCALES,
    ATTN__FLAG_SLIDING_WINDOW,
    ATTN__FLAG_RSWA,
    ATTN__FLAG_NON_CAUSAL,
    ATTN__FLAG_NON_CAUSAL_DCP,
    ATTN__FLAG_BATCH_INVARIANCE,
    ATTN__FLAG_KV_CONNECTOR,
    ATTN__FLAG_PCP,
    ATTN__FLAG_DCP,
    ATTN__FLAG_QUERY_LENS_MISMATCH,
    ATTN__FLAG_COUNT
} attn__flag;
typedef bool (*attn__flag_hook)(const attn_check_ctx *c);
/* The static statement (fields past an older descriptor's struct_size read
 * as attn/backend.h states), the hook (NULL: none), and the answer on c
 * (the hook when there is one, else the static field). */
bool attn__desc_flag_static(const attn_backend_desc *d, attn__flag f);
attn__flag_hook attn__desc_flag_hook(const attn_backend_desc *d, attn__flag f);
bool attn__desc_flag_ok(const attn_backend_desc *d, const attn_check_ctx *c, attn__flag f);
/* The KV-cache layouts d's kernels consume on c's machine (ATTN_KVL_BIT
 * mask, 0 = any): the hook, else the field; any past an older descriptor's
 * end. */
uint32_t attn__desc_kv_layouts(const attn_backend_desc *d, const attn_check_ctx *c);
/* Whether two layout sets (0 = any) have a layout in common. */
bool attn__kv_layouts_meet(uint32_t a, uint32_t b);
/* imports_vllm_flash_attn, read as none past an older descriptor's end. */
attn_fa_import attn__desc_imports_fa(const attn_backend_desc *d);

/* ---- FlashAttention version resolution (reference §5d) ------------------ */

/* Whether FA version v (2, 3, 4) is supported on the platform. */
bool attn__fa_version_supported(const attn_platform *p, int v);
/* The version FLASH_ATTN would use: head_size 0 = no head-size argument
 * (what backend predicates use); requested 0 = no flash_attn_version in the
 * config; batch_invariant as VLLM_BATCH_INVARIANT. Returns 0 for None. */
int attn__fa_version(const attn_platform *p, int head_size, int requested, bool batch_invariant);
/* The full question vLLM 0.32.0's get_flash_attn_version answers (head_size
 * 0 = not given; block_size 0 = None); attn__fa_version asks it without
 * sinks, block size or the FA4 head-256 kernel. run_kv_quantized: the run's
 * cache dtype (cache_config.cache_dtype) is quantized, which the head-256
 * kernel does not take. */
typedef struct attn__fa_query {
    int head_size, requested, block_size;
    bool batch_invariant, has_sinks, fa4_hd256, run_kv_quantized;
} attn__fa_query;
/* The query a selector-config check asks with the FA4 head-256 kernel
 * (FLASH_ATTN's combination rule, TRITON_FLASH_ATTN's causal route). */
attn__fa_query attn__fa_query_hd256(const attn_check_ctx *c);
int attn__fa_version_for(const attn_platform *p, const attn__fa_query *q);
/* Default resolution for a validation context (no head size, no request,
 * batch invariance from the config or the machine setting). */
int attn__fa_version_ctx(const attn_check_ctx *c);
/* FA4 usable on this device (reference §5a FLASH_ATTN head-size rule). */
bool attn__fa4_supported(const attn_platform *p);

/* ---- descriptors shared between catalog files ------------------------- */

extern const attn_backend_desc attn__desc_flash_attn;
extern const attn_backend_desc attn__desc_flashinfer;
extern const attn_backend_desc attn__desc_triton_attn;
/* FlashInfer's KV-cache layouts on c's machine (attn_backend_desc's
 * kv_cache_layouts_fn; its composite asks it too). */
uint32_t attn__fi_kv_layouts(const attn_check_ctx *c);
/* The KV layout FlashInfer's kernels need on p (HND with TRT-LLM on 10.x). */
attn_kv_layout attn__fi_layout(const attn_platform *p);

/* ---- KV-cache shapes and stride orders (reference §5, §12) ------------ */

/* Every shape function has the descriptor's kv_cache_shape signature, every
 * stride-order function its kv_stride_order signature. */
#define ATTN__KV_SHAPE_FN(name)                                                                    \
    attn_status name(int nb, int bs, int kvh, int hs, attn_kv_dtype kv, attn_kv_shape *out)
#define ATTN__STRIDE_ORDER_FN(name)                                                                \
    attn_status name(attn_kv_layout layout, bool include_layers, int *order, int *n)
ATTN__KV_SHAPE_FN(attn__kv_shape_flash);
ATTN__KV_SHAPE_FN(attn__kv_shape_flash_diffkv);
ATTN__KV_SHAPE_FN(attn__kv_shape_flashinfer);
ATTN__KV_SHAPE_FN(attn__kv_shape_triton);
ATTN__KV_SHAPE_FN(attn__kv_shape_split);
ATTN__KV_SHAPE_FN(attn__kv_shape_turboquant);
ATTN__KV_SHAPE_FN(attn__kv_shape_mla);
ATTN__KV_SHAPE_FN(attn__kv_shape_flashmla_sparse);
ATTN__STRIDE_ORDER_FN(attn__stride_order_flash);
ATTN__STRIDE_ORDER_FN(attn__stride_order_flashinfer);
ATTN__STRIDE_ORDER_FN(attn__stride_order_mla);

/* Descriptor fields whose count comes from the array itself. */
#define ATTN__COUNT(a)  ((int)(sizeof(a) / sizeof((a)[0])))
#define ATTN__BLOCKS(a) .block_sizes = (a), .n_block_sizes = ATTN__COUNT(a)
/* Compute capabilities lo.0 up to hi.x. */
#define ATTN__CC_MAJORS(lo, hi) .cc_min = {(lo), 0}, .cc_max = {(hi), 99}
#define ATTN__HEADS(a)          .heads = {.sizes = (a), .n_sizes = ATTN__COUNT(a)}

/* Defines fn() returning a descriptor-only built-in object for desc. */
#define ATTN__BUILTIN(fn, desc_)                                                                   \
    const attn_backend *fn(void)                                                                   \
    {                                                                                              \
        static const attn_backend b = {.abi_version = ATTN_BACKEND_ABI_VERSION,                    \
                                       .struct_size = sizeof(attn_backend),                        \
                                       .desc = &(desc_)};                                          \
        return &b;                                                                                 \
    }

/* Per-family descriptor getters used by the catalog table. */
const attn_backend *attn__builtin_flash_attn(void);
const attn_backend *attn__builtin_flash_attn_diffkv(void);
const attn_backend *attn__builtin_flashinfer(void);
const attn_backend *attn__builtin_triton_attn(void);
const attn_backend *attn__builtin_flex_attention(void);
const attn_backend *attn__builtin_turboquant(void);
const attn_backend *attn__builtin_triton_flashinfer(void);
const attn_backend *attn__builtin_triton_flash_attn(void);
const attn_backend *attn__builtin_rocm_attn(void);
const attn_backend *attn__builtin_rocm_aiter_unified_attn(void);
const attn_backend *attn__builtin_rocm_aiter_fa(void);
const attn_backend *attn__builtin_rocm_aiter_mla(void);
const attn_backend *attn__builtin_rocm_aiter_triton_mla(void);
const attn_backend *attn__builtin_rocm_aiter_mla_sparse(void);
const attn_backend *attn__builtin_flash_attn_mla(void);
const attn_backend *attn__builtin_flashmla(void);
const attn_backend *attn__builtin_flashinfer_mla(void);
const attn_backend *attn__builtin_tokenspeed_mla(void);
const attn_backend *attn__builtin_cutlass_mla(void);
const attn_backend *attn__builtin_triton_mla(void);
const attn_backend *attn__builtin_flashmla_sparse(void);
const attn_backend *attn__builtin_flashinfer_mla_sparse(void);
const attn_backend *attn__builtin_xpu_mla_sparse(void);
const attn_backend *attn__builtin_flash_attn_mla_sparse(void);
const attn_backend *attn__builtin_ultraquant(void);
const attn_backend *attn__builtin_flashinfer_mla_sparse_sm90(void);
const attn_backend *attn__builtin_flashinfer_mla_sparse_sm120(void);
const attn_backend *attn__builtin_triton_attn_diffkv(void);
const attn_backend *attn__builtin_rocm_segmented_attn(void);
const attn_backend *attn__builtin_amx_mla(void);
const attn_backend *attn__builtin_hpc_attn(void);
const attn_backend *attn__builtin_b12x(void);
const attn_backend *attn__builtin_flashmla_sparse_dsv4(void);
const attn_backend *attn__builtin_flashinfer_mla_sparse_dsv4(void);
const attn_backend *attn__builtin_rocm_flashmla_sparse_dsv4(void);
const attn_backend *attn__builtin_flashmla_sparse_dsv41(void);
const attn_backend *attn__builtin_flashinfer_mla_sparse_dsv41(void);
const attn_backend *attn__builtin_flashmla_mega_attn_dsv41(void);
const attn_backend *attn__builtin_minimax_m3_sparse(void);

/* vLLM's text when FlashMLA's extension is absent (FLASHMLA and the
 * FlashMLA-based sparse backends). */
extern const char attn__flashmla_unavailable[];

#endif
