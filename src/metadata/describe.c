/* Helpers shared by the builders: describe() JSON text, create()-time checks
 * and cascade validation. None of this runs per token except the cascade
 * check, which is O(requests x shared blocks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/builders.h"
#include "util/error.h"

#define ATTN__DESCRIBE_MAX 64

/* An int array (32- or 64-bit elements) as a JSON array of its first
 * ATTN__DESCRIBE_MAX values, plus "<key>_len" when longer; null for NULL. */
static void attn__describe_ints(attn__jw *w, const char *key, const void *a, bool wide, int n)
{
    attn__jw_key(w, key);
    if (!a) {
        attn__jw_null(w);
        return;
    }
    attn__jw_arr_begin(w);
    for (int i = 0; i < n && i < ATTN__DESCRIBE_MAX; i++)
        attn__jw_int(w, wide ? (long long)((const int64_t *)a)[i] : ((const int32_t *)a)[i]);
    attn__jw_arr_end(w);
    if (n > ATTN__DESCRIBE_MAX) {
        char k[96];
        snprintf(k, sizeof k, "%s_len", key);
        attn__jw_key(w, k);
        attn__jw_int(w, n);
    }
}

void attn__describe_i32(attn__jw *w, const char *key, const int32_t *a, int n)
{
    attn__describe_ints(w, key, a, false, n);
}

void attn__describe_i64(attn__jw *w, const char *key, const int64_t *a, int n)
{
    attn__describe_ints(w, key, a, true, n);
}

void attn__describe_begin(attn__sb *sb, attn__jw *w, int num_reqs, int num_actual_tokens)
{
    attn__sb_init(sb);
    attn__jw_init(w, sb, false);
    attn__jw_obj_begin(w);
    attn__jw_key(w, "num_reqs");
    attn__jw_int(w, num_reqs);
    attn__jw_key(w, "num_actual_tokens");
    attn__jw_int(w, num_actual_tokens);
}

int attn__describe_finish(attn__sb *sb, char *buf, size_t size)
{
    if (sb->oom) {
        attn__sb_free(sb);
        return -1;
    }
    int len = (int)sb->len;
    if (buf && size > 0) {
        size_t n = sb->len < size - 1 ? sb->len : size - 1;
        if (n) memcpy(buf, sb->data, n);
        buf[n] = '\0';
    }
    attn__sb_free(sb);
    return len;
}

attn_status attn__init_check(const char *type_name, const attn_builder_init *init)
{
    if (!init) return attn__fail(ATTN_NULL_ARGUMENT, "%s builder: init is NULL", type_name);
    if (init->block_size < 1 || init->max_num_reqs < 1 || init->max_num_tokens < 1 ||
        init->max_blocks_per_req < 1 || init->num_speculative_tokens < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s builder: block_size %d, max_num_reqs %d, max_num_tokens %d, "
                          "max_blocks_per_req %d, num_speculative_tokens %d (sizes must be >= 1)",
                          type_name, init->block_size, init->max_num_reqs, init->max_num_tokens,
                          init->max_blocks_per_req, init->num_speculative_tokens);
    if (init->max_num_reqs > ATTN_MAX_NUM_REQS || init->max_num_tokens > ATTN_MAX_SEQ_LEN)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s builder: max_num_reqs %d / max_num_tokens %d is too large (at most "
                          "%d / %d)",
                          type_name, init->max_num_reqs, init->max_num_tokens, ATTN_MAX_NUM_REQS,
                          ATTN_MAX_SEQ_LEN);
    if ((int64_t)init->max_num_reqs * init->max_blocks_per_req > (int64_t)1 << 30)
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s builder: %d requests x %d blocks is too large",
                          type_name, init->max_num_reqs, init->max_blocks_per_req);
    if (init->layer && (init->layer->num_heads < 0 || init->layer->num_kv_heads < 0))
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s builder: negative head counts", type_name);
    return ATTN_OK;
}

attn_cg_support attn__init_cg(const attn_builder_init *init, attn_cg_support family_cg)
{
    return init && init->desc ? init->desc->cg_support : family_cg;
}

attn_status attn__check_shared_prefix(const char *type_name, const int32_t *block_table, int stride,
                                      int num_reqs, int prefix_blocks)
{
    for (int r = 1; r < num_reqs; r++) {
        const int32_t *row = block_table + (size_t)r * (size_t)stride;
        for (int k = 0; k < prefix_blocks; k++)
            if (row[k] != block_table[k])
                return attn__fail(ATTN_BAD_METADATA,
                                  "%s: cascade prefix of %d blocks is not shared: "
                                  "block_table[%d][%d] is %d, row 0 has %d",
                                  type_name, prefix_blocks, r, k, row[k], block_table[k]);
    }
    return ATTN_OK;
}

attn_status attn__check_cascade(const char *type_name, const attn_common_metadata *cm,
                                int common_prefix_len)
{
    if (common_prefix_len < 0 || common_prefix_len % cm->block_size != 0)
        return attn__fail(ATTN_BAD_METADATA,
                          "%s: common_prefix_len %d is not a multiple of the block size %d",
                          type_name, common_prefix_len, cm->block_size);
    if (!cm->block_table || cm->num_reqs < 1)
        return attn__fail(ATTN_BAD_METADATA, "%s: cascade needs requests and a block table",
                          type_name);
    int prefix_blocks = common_prefix_len / cm->block_size;
    if (prefix_blocks > cm->block_table_stride)
        return attn__fail(ATTN_BAD_METADATA, "%s: common_prefix_len %d exceeds the block table",
                          type_name, common_prefix_len);
    for (int r = 0; r < cm->num_reqs; r++) {
        int32_t q = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        if ((int64_t)cm->seq_lens[r] - q < common_prefix_len)
            return attn__fail(ATTN_BAD_METADATA,
                              "%s: common_prefix_len %d exceeds request %d's computed tokens (%d)",
                              type_name, common_prefix_len, r, cm->seq_lens[r] - q);
    }
    return attn__check_shared_prefix(type_name, cm->block_table, cm->block_table_stride,
                                     cm->num_reqs, prefix_blocks);
}
