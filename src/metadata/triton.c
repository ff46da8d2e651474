/* Triton-family metadata builder (TRITON_ATTN and TRITON_FLASH_ATTN).
 *
 * Contract: the unified Triton kernel reads the varlen common metadata as is
 * (borrowed), plus its launch plan, computed here: each program of the 2D
 * kernel covers block_q query tokens of one request for the block_m rows of
 * one KV head (block_m = 16, or the next power of two of the query heads per
 * KV head when larger; block_q = block_m / queries-per-KV-head), and
 * q_block_start maps programs to requests without a search. Decode-only
 * batches of at most seq_threshold_3d = 128 / num_kv_heads requests take the
 * 3D kernel (16 softmax segments per sequence, merged afterwards). No
 * cascade and no reordering; graph tier ALWAYS. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/builders.h"
#include "util/error.h"

#define TYPE_NAME                "triton"
#define ATTN__TRITON_MIN_GRID_2D 128
#define ATTN__TRITON_SEGMENTS    16

typedef struct attn__triton_state {
    attn__builder_limits lim;
    int qpkv, block_m, block_q, threshold_3d;
    int32_t *q_block_start; /* [max_reqs + 1] */
    attn_triton_metadata md;
} attn__triton_state;
_Static_assert(offsetof(attn__triton_state, lim) == 0,
               "attn__capture_build reads the limits first");

static void attn__triton_destroy(void *state)
{
    attn__triton_state *s = state;
    if (!s) return;
    free(s->q_block_start);
    free(s);
}

static attn_status attn__triton_create(const attn_builder_init *init, void **state)
{
    if (!state) return attn__fail(ATTN_NULL_ARGUMENT, TYPE_NAME " builder: state is NULL");
    *state = NULL;
    attn_status st = attn__init_check(TYPE_NAME, init);
    if (st != ATTN_OK) return st;
    attn__triton_state *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, TYPE_NAME " builder: out of memory");
    s->q_block_start = calloc((size_t)init->max_num_reqs + 1, sizeof(int32_t));
    if (!s->q_block_start) {
        free(s);
        return attn__fail(ATTN_OUT_OF_MEMORY, TYPE_NAME " builder: out of memory");
    }
    attn__limits_init(&s->lim, TYPE_NAME, init, ATTN_CG_ALWAYS);
    int heads = init->layer ? init->layer->num_heads : 1;
    int kv_heads = init->layer ? init->layer->num_kv_heads : 1;
    if (heads < 1) heads = 1;
    if (kv_heads < 1) kv_heads = 1;
    s->qpkv = heads >= kv_heads ? heads / kv_heads : 1;
    int bm = 16;
    while (bm < s->qpkv)
        bm *= 2;
    s->block_m = bm;
    s->block_q = bm / s->qpkv;
    s->threshold_3d = ATTN__TRITON_MIN_GRID_2D / kv_heads;
    *state = s;
    return ATTN_OK;
}

static attn_status attn__triton_build(void *state, int common_prefix_len,
                                      const attn_common_metadata *cm, bool fast_build,
                                      const void **md)
{
    (void)common_prefix_len; /* the unified kernel has no cascade path */
    (void)fast_build;
    attn__triton_state *s = state;
    if (!s || !md) return attn__fail(ATTN_NULL_ARGUMENT, TYPE_NAME " build: state or md is NULL");
    attn_status st = attn__limits_build_args(&s->lim, cm);
    if (st != ATTN_OK) return st;
    attn_triton_metadata *m = &s->md;
    memset(m, 0, sizeof *m);
    const int n = cm->num_reqs;
    m->num_reqs = n;
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
    m->num_queries_per_kv = s->qpkv;
    m->block_m = s->block_m;
    m->block_q = s->block_q;
    int32_t *qb = s->q_block_start;
    qb[0] = 0;
    for (int r = 0; r < n; r++) {
        int32_t q = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        qb[r + 1] = qb[r] + (q + s->block_q - 1) / s->block_q;
    }
    m->q_block_start = qb;
    m->total_q_blocks = qb[n];
    m->seq_threshold_3d = s->threshold_3d;
    m->num_segments = ATTN__TRITON_SEGMENTS;
    m->use_3d = n > 0 && cm->max_query_len <= 1 && n <= s->threshold_3d;
    *md = m;
    return ATTN_OK;
}

static attn_status attn__triton_build_for_capture(void *state, const attn_common_metadata *cm,
                                                  const void **md)
{
    return attn__capture_build(TYPE_NAME, state, cm, md, attn__triton_build);
}

static attn_status attn__triton_update_block_table(void *state, const void *md,
                                                   const int32_t *block_table,
                                                   int block_table_stride,
                                                   const int64_t *slot_mapping, const void **new_md)
{
    attn__triton_state *s = state;
    const attn_triton_metadata *src = md;
    if (!s || !src || !new_md)
        return attn__fail(ATTN_NULL_ARGUMENT, TYPE_NAME " update_block_table: NULL argument");
    attn_status ust = attn__limits_update(&s->lim, src->num_reqs, src->num_actual_tokens,
                                          block_table, block_table_stride, slot_mapping);
    if (ust != ATTN_OK) return ust;
    s->md = *src;
    s->md.block_table = block_table;
    s->md.block_table_stride = block_table_stride;
    s->md.slot_mapping = slot_mapping;
    *new_md = &s->md;
    return ATTN_OK;
}

static int attn__triton_describe(const void *md, char *buf, size_t size)
{
    const attn_triton_metadata *m = md;
    if (!m) return -1;
    attn__sb sb;
    attn__jw w;
    attn__describe_begin(&sb, &w, m->num_reqs, m->num_actual_tokens);
    attn__jw_key(&w, "max_query_len");
    attn__jw_int(&w, m->max_query_len);
    attn__jw_key(&w, "max_seq_len");
    attn__jw_int(&w, m->max_seq_len);
    attn__jw_key(&w, "cg_support");
    attn__jw_str(&w, attn_cg_support_name(m->cg_support));
    attn__describe_i32(&w, "query_start_loc", m->query_start_loc,
                       m->query_start_loc ? m->num_reqs + 1 : 0);
    attn__describe_i32(&w, "seq_lens", m->seq_lens, m->num_reqs);
    attn__jw_key(&w, "block_m");
    attn__jw_int(&w, m->block_m);
    attn__jw_key(&w, "block_q");
    attn__jw_int(&w, m->block_q);
    attn__describe_i32(&w, "q_block_start", m->q_block_start, m->num_reqs + 1);
    attn__jw_key(&w, "total_q_blocks");
    attn__jw_int(&w, m->total_q_blocks);
    attn__jw_key(&w, "use_3d");
    attn__jw_bool(&w, m->use_3d);
    attn__jw_key(&w, "seq_threshold_3d");
    attn__jw_int(&w, m->seq_threshold_3d);
    attn__jw_key(&w, "num_segments");
    attn__jw_int(&w, m->num_segments);
    attn__jw_obj_end(&w);
    return attn__describe_finish(&sb, buf, size);
}

const attn_builder_ops attn__builder_triton = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = TYPE_NAME,
    .cg_support = ATTN_CG_ALWAYS,
    .reorder_batch_threshold = 0,
    .supports_update_block_table = true,
    .create = attn__triton_create,
    .destroy = attn__triton_destroy,
    .build = attn__triton_build,
    .build_for_capture = attn__triton_build_for_capture,
    .update_block_table = attn__triton_update_block_table,
    .describe = attn__triton_describe,
};
