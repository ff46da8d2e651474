/* REFERENCE: the exact scalar oracle every other kernel is checked against,
 * and the argument checks and attention semantics it shares with CPU_ATTN.
 *
 * Semantics (both backends implement exactly these):
 * - request r owns query tokens [query_start_loc[r], query_start_loc[r+1]);
 *   its keys are kv_len tokens: seq_lens[r] from the paged cache, or
 *   encoder_seq_lens[r] for encoder_decoder (cross attention over the
 *   encoder's K/V in the cache), or the request's own tokens when K/V are
 *   passed directly (args.k/args.v: encoder / encoder-only without a cache);
 * - query i (0-based in its request) sits at position kv_len - qlen + i;
 *   key j is visible when (not causal or j <= pos) and (no window or
 *   j > pos - window). Only decoder self-attention is causal (and only when
 *   common->causal); encoder, encoder_only and encoder_decoder are not;
 * - s = scale * q.k; s = cap * tanh(s / cap) when soft-capped; s += slope *
 *   (j - pos) with ALiBi; a sink logit joins the softmax denominator only;
 * - fp8 caches hold stored * scale (per-head scale when given, else the
 *   per-tensor one; a scale of 0 means 1); other caches are unscaled;
 * - lse = natural log of the full denominator (max-shifted, sink included);
 *   a row that sees no key and has no sink gets zeros and lse = -inf. */
#ifndef ATTN_BACKENDS_REFERENCE_H
#define ATTN_BACKENDS_REFERENCE_H

#include <math.h>

#include "attn/backend.h"

extern const attn_backend attn__backend_reference;
extern const attn_backend_desc attn__desc_reference;
extern const attn_builder_ops attn__builder_reference;

/* Runs the oracle (single thread, double accumulation). */
attn_status attn__reference_forward(const attn_forward_args *a);

/* ---- shared by REFERENCE and CPU_ATTN ------------------------------------ */

/* Full check of a forward call (pointers, layer, metadata consistency,
 * block ids, lengths, view geometry). ATTN_OK or a failure with detail;
 * nothing is touched. */
attn_status attn__fwd_check(const attn_forward_args *a);
/* The layer part of that check, for kernels' create (CPU_ATTN): head counts
 * and sizes within attn/types.h's limits, dtype, type, window, scale, soft
 * cap, and every sink logit finite. */
attn_status attn__fwd_check_layer(const attn_layer_params *l);
/* Sink logits (num_heads of them, when given) must be finite: a NaN or an
 * infinite sink would poison the softmax denominator. Shared by the standard
 * and the MLA call checks; who prefixes the message. */
attn_status attn__check_sinks(const char *who, const attn_layer_params *l, int num_heads);

/* Keys of request r (see the semantics above). */
static inline int attn__fwd_kv_len(const attn_forward_args *a, int r)
{
    const attn_common_metadata *cm = a->common;
    if (a->k) return cm->query_start_loc[r + 1] - cm->query_start_loc[r];
    if (a->layer->attn_type == ATTN_TYPE_ENCODER_DECODER && cm->encoder_seq_lens)
        return cm->encoder_seq_lens[r];
    return cm->seq_lens[r];
}

static inline bool attn__fwd_causal(const attn_forward_args *a)
{
    return a->layer->attn_type == ATTN_TYPE_DECODER && a->common->causal;
}

static inline float attn__fwd_scale(const attn_layer_params *l)
{
    return l->scale != 0.0f ? l->scale : 1.0f / sqrtf((float)l->head_size);
}

static inline int attn__fwd_head_size_v(const attn_layer_params *l)
{
    return l->head_size_v > 0 ? l->head_size_v : l->head_size;
}

static inline bool attn__elem_is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

/* What both CPU kernels of this library (REFERENCE and CPU_ATTN) support,
 * stated once for their descriptors: fp16/bf16/fp32 activations, sinks,
 * per-head fp8 scales, non-causal attention of every type, natural-log LSE
 * from every variant (also for decode); DCP runs over attn_dcp
 * (attn/dcp.h); no prefill context parallelism, no CUDA graphs. Each
 * descriptor adds its name, caches, sizes, layout and batch invariance. */
#define ATTN__CPU_DESC_COMMON                                                                      \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .platforms = "CPU",                                                                            \
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |                  \
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),                                                     \
    .is_mla = false, .supports_sink = true, .supports_per_head_quant_scales = true,                \
    .supports_non_causal = true,                                                                   \
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER) | ATTN_TYPE_BIT(ATTN_TYPE_ENCODER) |            \
                  ATTN_TYPE_BIT(ATTN_TYPE_ENCODER_ONLY) |                                          \
                  ATTN_TYPE_BIT(ATTN_TYPE_ENCODER_DECODER),                                        \
    .cg_support = ATTN_CG_NEVER, .can_return_lse_for_decode = true, .lse_base = ATTN_LSE_BASE_E,   \
    .supports_pcp = false, .supports_dcp = true

/* A CPU backend object: its descriptor and kernel. */
#define ATTN__CPU_BACKEND(desc_, kernel_)                                                          \
    {                                                                                              \
        .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend),              \
        .desc = (desc_), .kernel = (kernel_),                                                      \
    }

/* fp8 -> fp32 by table (the scalar conversions' values without ldexpf per
 * element), filled by attn__fp8_tables_init (once; call before reading). */
extern float attn__fp8_e4m3_f32[256], attn__fp8_e5m2_f32[256];
void attn__fp8_tables_init(void);

/* Dequantisation factor of a cache (1 for non-fp8 caches). */
static inline float attn__kv_scale(const attn_kv_view *kv, int kvh, bool value)
{
    if (!attn__elem_is_fp8(kv->elem)) return 1.0f;
    const float *ph = value ? kv->v_scale_per_head : kv->k_scale_per_head;
    float s = ph ? ph[kvh] : (value ? kv->v_scale : kv->k_scale);
    return s != 0.0f ? s : 1.0f;
}

#endif
