/* FlashAttention-family metadata builder (FLASH_ATTN and the backends that
 * share its metadata), and the FlashAttention-style core the ROCm family
 * reuses.
 *
 * Contract: the kernel consumes the common metadata as is (varlen
 * cu_seqlens_q = query_start_loc, seqused_k = seq_lens, the block table and
 * slot mapping), so build() borrows those arrays and only computes what is
 * new: use_cascade = common_prefix_len > 0 and the prefix/suffix split
 * (prefix attended once through row 0 of the block table, non-causally;
 * suffixes through the table shifted by the shared blocks, causally). The
 * only owned array is suffix_kv_lens, sized at create(). No reordering
 * (reorder_batch_threshold 0); update_block_table swaps the table and slots
 * and re-points the suffix table. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/builders.h"
#include "util/error.h"

typedef struct attn__fa_state {
    attn__builder_limits lim;
    int32_t cu_prefix_query_lens[2];
    int32_t prefix_kv_lens[1];
    int32_t *suffix_kv_lens; /* [max_reqs] */
    attn_fa_metadata md;
} attn__fa_state;
_Static_assert(offsetof(attn__fa_state, lim) == 0, "attn__capture_build reads the limits first");

attn_status attn__fa_create(const attn_builder_init *init, const char *type_name,
                            attn_cg_support family_cg, void **state)
{
    if (!state) return attn__fail(ATTN_NULL_ARGUMENT, "%s builder: state is NULL", type_name);
    *state = NULL;
    attn_status st = attn__init_check(type_name, init);
    if (st != ATTN_OK) return st;
    attn__fa_state *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, "%s builder: out of memory", type_name);
    s->suffix_kv_lens = calloc((size_t)init->max_num_reqs, sizeof(int32_t));
    if (!s->suffix_kv_lens) {
        free(s);
        return attn__fail(ATTN_OUT_OF_MEMORY, "%s builder: out of memory", type_name);
    }
    attn__limits_init(&s->lim, type_name, init, family_cg);
    *state = s;
    return ATTN_OK;
}

void attn__fa_destroy(void *state)
{
    attn__fa_state *s = state;
    if (!s) return;
    free(s->suffix_kv_lens);
    free(s);
}

attn_status attn__fa_build(void *state, int common_prefix_len, const attn_common_metadata *cm,
                           bool fast_build, const void **md)
{
    (void)fast_build; /* nothing here is expensive enough to skip */
    attn__fa_state *s = state;
    if (!s || !md)
        return attn__fail(ATTN_NULL_ARGUMENT, "FlashAttention build: state or md is NULL");
    attn_status st = attn__limits_build_args(&s->lim, cm);
    if (st == ATTN_OK && common_prefix_len > 0)
        st = attn__check_cascade(s->lim.type_name, cm, common_prefix_len);
    else if (st == ATTN_OK && common_prefix_len < 0)
        st = attn__fail(ATTN_BAD_METADATA, "%s: common_prefix_len is %d", s->lim.type_name,
                        common_prefix_len);
    if (st != ATTN_OK) return st;
    attn_fa_metadata *m = &s->md;
    memset(m, 0, sizeof *m);
    m->num_reqs = cm->num_reqs;
    m->num_actual_tokens = cm->num_actual_tokens;
    m->max_query_len = cm->max_query_len;
    m->max_seq_len = cm->max_seq_len;
    m->block_size = cm->block_size;
    m->query_start_loc = cm->query_start_loc;
    m->seq_lens = cm->seq_lens;
    m->block_table = cm->block_table;
    m->block_table_stride = cm->block_table_stride;
    m->slot_mapping = cm->slot_mapping;
    m->causal = cm->causal;
    m->cg_support = s->lim.cg;
    const int32_t *qsl = cm->query_start_loc;
    for (int r = 0; r < cm->num_reqs; r++)
        m->num_decodes += qsl[r + 1] - qsl[r] == 1;
    if (common_prefix_len > 0) {
        m->use_cascade = true;
        m->common_prefix_len = common_prefix_len;
        m->prefix_num_blocks = common_prefix_len / cm->block_size;
        s->cu_prefix_query_lens[0] = 0;
        s->cu_prefix_query_lens[1] = cm->num_actual_tokens;
        s->prefix_kv_lens[0] = common_prefix_len;
        int32_t mx = 0;
        for (int r = 0; r < cm->num_reqs; r++) {
            int32_t v = cm->seq_lens[r] - common_prefix_len;
            s->suffix_kv_lens[r] = v;
            mx = v > mx ? v : mx;
        }
        m->cu_prefix_query_lens = s->cu_prefix_query_lens;
        m->prefix_kv_lens = s->prefix_kv_lens;
        m->suffix_kv_lens = s->suffix_kv_lens;
        m->max_suffix_kv_len = mx;
        m->suffix_block_table = cm->block_table + m->prefix_num_blocks;
    }
    *md = m;
    return ATTN_OK;
}

attn_status attn__fa_build_for_capture(void *state, const attn_common_metadata *cm, const void **md)
{
    return attn__capture_build("FlashAttention", state, cm, md, attn__fa_build);
}

attn_status attn__fa_update_block_table(void *state, const void *md, const int32_t *block_table,
                                        int block_table_stride, const int64_t *slot_mapping,
                                        const void **new_md)
{
    attn__fa_state *s = state;
    const attn_fa_metadata *src = md;
    if (!s || !src || !new_md)
        return attn__fail(ATTN_NULL_ARGUMENT, "FlashAttention update_block_table: NULL argument");
    attn_status ust = attn__limits_update(&s->lim, src->num_reqs, src->num_actual_tokens,
                                          block_table, block_table_stride, slot_mapping);
    if (ust != ATTN_OK) return ust;
    if (src->use_cascade) {
        if (src->prefix_num_blocks > block_table_stride)
            return attn__fail(ATTN_BAD_METADATA,
                              "%s update_block_table: prefix of %d blocks, table stride %d",
                              s->lim.type_name, src->prefix_num_blocks, block_table_stride);
        attn_status st =
            attn__check_shared_prefix(s->lim.type_name, block_table, block_table_stride,
                                      src->num_reqs, src->prefix_num_blocks);
        if (st != ATTN_OK) return st;
    }
    s->md = *src;
    s->md.block_table = block_table;
    s->md.block_table_stride = block_table_stride;
    s->md.slot_mapping = slot_mapping;
    if (src->use_cascade) s->md.suffix_block_table = block_table + src->prefix_num_blocks;
    *new_md = &s->md;
    return ATTN_OK;
}

int attn__fa_describe(const void *md, char *buf, size_t size)
{
    const attn_fa_metadata *m = md;
    if (!m) return -1;
    attn__sb sb;
    attn__jw w;
    attn__describe_begin(&sb, &w, m->num_reqs, m->num_actual_tokens);
    attn__jw_key(&w, "max_query_len");
    attn__jw_int(&w, m->max_query_len);
    attn__jw_key(&w, "max_seq_len");
    attn__jw_int(&w, m->max_seq_len);
    attn__jw_key(&w, "num_decodes");
    attn__jw_int(&w, m->num_decodes);
    attn__jw_key(&w, "causal");
    attn__jw_bool(&w, m->causal);
    attn__jw_key(&w, "cg_support");
    attn__jw_str(&w, attn_cg_support_name(m->cg_support));
    attn__describe_i32(&w, "query_start_loc", m->query_start_loc,
                       m->query_start_loc ? m->num_reqs + 1 : 0);
    attn__describe_i32(&w, "seq_lens", m->seq_lens, m->num_reqs);
    attn__jw_key(&w, "use_cascade");
    attn__jw_bool(&w, m->use_cascade);
    attn__jw_key(&w, "common_prefix_len");
    attn__jw_int(&w, m->common_prefix_len);
    if (m->use_cascade) {
        attn__describe_i32(&w, "cu_prefix_query_lens", m->cu_prefix_query_lens, 2);
        attn__describe_i32(&w, "prefix_kv_lens", m->prefix_kv_lens, 1);
        attn__describe_i32(&w, "suffix_kv_lens", m->suffix_kv_lens, m->num_reqs);
        attn__jw_key(&w, "max_suffix_kv_len");
        attn__jw_int(&w, m->max_suffix_kv_len);
    }
    attn__jw_obj_end(&w);
    return attn__describe_finish(&sb, buf, size);
}

static attn_status attn__flash_create(const attn_builder_init *init, void **state)
{
    /* FA2's tier; the descriptor raises it to ALWAYS where FA3 runs. */
    return attn__fa_create(init, "flash_attn", ATTN_CG_UNIFORM_BATCH, state);
}

const attn_builder_ops attn__builder_flash_attn = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = "flash_attn",
    .cg_support = ATTN_CG_UNIFORM_BATCH,
    .reorder_batch_threshold = 0,
    .supports_update_block_table = true,
    .create = attn__flash_create,
    .destroy = attn__fa_destroy,
    .build = attn__fa_build,
    .build_for_capture = attn__fa_build_for_capture,
    .update_block_table = attn__fa_update_block_table,
    .describe = attn__fa_describe,
};
