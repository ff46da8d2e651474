/* ROCm-family metadata builder (ROCM_ATTN, ROCM_AITER_UNIFIED_ATTN,
 * ROCM_AITER_FA).
 *
 * Contract: vLLM's ROCm attention metadata carries the same fields as
 * FlashAttention's (varlen pass-through plus the cascade prefix/suffix
 * split), so this builder is the FlashAttention core under its own type
 * name, which keeps within-step reuse from mixing the two families. The
 * ROCm paged kernels pick their decode path per request from the query
 * length, so the batch is not reordered; num_decodes reports how many
 * requests take it. Graph tier: ALWAYS unless the descriptor says otherwise
 * (ROCM_AITER_FA: UNIFORM_BATCH). */
#include "metadata/builders.h"

static attn_status attn__rocm_create(const attn_builder_init *init, void **state)
{
    return attn__fa_create(init, "rocm", ATTN_CG_ALWAYS, state);
}

const attn_builder_ops attn__builder_rocm = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = "rocm",
    .cg_support = ATTN_CG_ALWAYS,
    .reorder_batch_threshold = 0,
    .supports_update_block_table = true,
    .create = attn__rocm_create,
    .destroy = attn__fa_destroy,
    .build = attn__fa_build,
    .build_for_capture = attn__fa_build_for_capture,
    .update_block_table = attn__fa_update_block_table,
    .describe = attn__fa_describe,
};
