/* FlexAttention metadata builder (FLEX_ATTENTION).
 *
 * Contract: FlexAttention runs a mask function over a sparse block mask.
 * Here the mask is built directly from the batch: doc_ids (request of each
 * query token) and query_pos (its position) drive the mask function, and the
 * block mask lists, per q tile, which KV blocks can be visible at all
 * (kv_start_block/kv_num_blocks, causal and sliding-window pruned) and which
 * of them are visible to every query of the tile (full blocks, no mask
 * needed). Tiles hold at most q_block_size tokens of one request, so each
 * tile's KV blocks are one contiguous run of its request's block-table row:
 * the mask indexes the block table instead of copying it, and a block shared
 * by several requests (a common prefix) is never listed twice in a tile.
 * Work per build is O(tokens + tiles); nothing depends on the block ids, so
 * update_block_table only swaps the table and slots. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/builders.h"
#include "util/error.h"

#define TYPE_NAME          "flex"
#define ATTN__FLEX_Q_BLOCK 16

typedef struct attn__flex_state {
    attn__builder_limits lim;
    int max_tiles;
    int sliding_window;
    int32_t *doc_ids, *query_pos; /* [max_tokens] */
    int32_t *tile_req, *tile_start, *tile_len, *kv_start, *kv_num, *full_start, *full_num;
    attn_flex_metadata md;
} attn__flex_state;
_Static_assert(offsetof(attn__flex_state, lim) == 0, "attn__capture_build reads the limits first");

static void attn__flex_destroy(void *state)
{
    attn__flex_state *s = state;
    if (!s) return;
    free(s->doc_ids);
    free(s->query_pos);
    free(s->tile_req);
    free(s->tile_start);
    free(s->tile_len);
    free(s->kv_start);
    free(s->kv_num);
    free(s->full_start);
    free(s->full_num);
    free(s);
}

static attn_status attn__flex_create(const attn_builder_init *init, void **state)
{
    if (!state) return attn__fail(ATTN_NULL_ARGUMENT, TYPE_NAME " builder: state is NULL");
    *state = NULL;
    attn_status st = attn__init_check(TYPE_NAME, init);
    if (st != ATTN_OK) return st;
    attn__flex_state *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, TYPE_NAME " builder: out of memory");
    /* A request of q tokens makes ceil(q / Q) <= q / Q + 1 tiles. */
    s->max_tiles = init->max_num_tokens / ATTN__FLEX_Q_BLOCK + init->max_num_reqs;
    size_t t = (size_t)init->max_num_tokens, k = (size_t)s->max_tiles;
    s->doc_ids = calloc(t, sizeof(int32_t));
    s->query_pos = calloc(t, sizeof(int32_t));
    s->tile_req = calloc(k, sizeof(int32_t));
    s->tile_start = calloc(k, sizeof(int32_t));
    s->tile_len = calloc(k, sizeof(int32_t));
    s->kv_start = calloc(k, sizeof(int32_t));
    s->kv_num = calloc(k, sizeof(int32_t));
    s->full_start = calloc(k, sizeof(int32_t));
    s->full_num = calloc(k, sizeof(int32_t));
    if (!s->doc_ids || !s->query_pos || !s->tile_req || !s->tile_start || !s->tile_len ||
        !s->kv_start || !s->kv_num || !s->full_start || !s->full_num) {
        attn__flex_destroy(s);
        return attn__fail(ATTN_OUT_OF_MEMORY, TYPE_NAME " builder: out of memory");
    }
    attn__limits_init(&s->lim, TYPE_NAME, init, ATTN_CG_ALWAYS);
    s->sliding_window = init->layer ? init->layer->sliding_window : 0;
    *state = s;
    return ATTN_OK;
}

static int32_t attn__max32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

static attn_status attn__flex_build(void *state, int common_prefix_len,
                                    const attn_common_metadata *cm, bool fast_build,
                                    const void **md)
{
    (void)common_prefix_len; /* shared blocks are handled by the per-request tiles */
    (void)fast_build;
    attn__flex_state *s = state;
    if (!s || !md) return attn__fail(ATTN_NULL_ARGUMENT, TYPE_NAME " build: state or md is NULL");
    attn_status st = attn__limits_build_args(&s->lim, cm);
    if (st != ATTN_OK) return st;
    attn_flex_metadata *m = &s->md;
    memset(m, 0, sizeof *m);
    const int n = cm->num_reqs, bs = cm->block_size, Q = ATTN__FLEX_Q_BLOCK;
    const bool causal = cm->causal;
    const int32_t win = causal ? s->sliding_window : 0;
    m->num_reqs = n;
    m->num_actual_tokens = cm->num_actual_tokens;
    m->max_query_len = cm->max_query_len;
    m->max_seq_len = cm->max_seq_len;
    m->block_size = bs;
    m->query_start_loc = cm->query_start_loc;
    m->seq_lens = cm->seq_lens;
    m->block_table = cm->block_table;
    m->block_table_stride = cm->block_table_stride;
    m->slot_mapping = cm->slot_mapping;
    m->causal = causal;
    m->sliding_window = win;
    m->cg_support = s->lim.cg;
    m->q_block_size = Q;
    int tiles = 0;
    for (int r = 0; r < n; r++) {
        const int32_t q0 = cm->query_start_loc[r], q1 = cm->query_start_loc[r + 1];
        const int32_t seq = cm->seq_lens[r], ctx = seq - (q1 - q0);
        for (int32_t i = q0; i < q1; i++) {
            s->doc_ids[i] = r;
            s->query_pos[i] = ctx + (i - q0);
        }
        for (int32_t t0 = q0; t0 < q1; t0 += Q) {
            int32_t len = q1 - t0 < Q ? q1 - t0 : Q;
            int32_t first = ctx + (t0 - q0), last = first + len - 1;
            /* Keys any query of the tile may see, and keys all of them see. */
            int32_t lo_any = win > 0 ? attn__max32(0, first - win + 1) : 0;
            int32_t hi_any = causal ? last : seq - 1;
            int32_t lo_all = win > 0 ? attn__max32(0, last - win + 1) : 0;
            int32_t hi_all = causal ? first : seq - 1;
            int32_t kv0 = lo_any / bs, kv1 = hi_any / bs + 1;
            int32_t f0 = (lo_all + bs - 1) / bs, f1 = (hi_all + 1) / bs;
            s->tile_req[tiles] = r;
            s->tile_start[tiles] = t0;
            s->tile_len[tiles] = len;
            s->kv_start[tiles] = kv0;
            s->kv_num[tiles] = kv1 - kv0;
            s->full_start[tiles] = f0;
            s->full_num[tiles] = f1 > f0 ? f1 - f0 : 0;
            tiles++;
        }
    }
    m->doc_ids = s->doc_ids;
    m->query_pos = s->query_pos;
    m->num_q_tiles = tiles;
    m->q_tile_req = s->tile_req;
    m->q_tile_start = s->tile_start;
    m->q_tile_len = s->tile_len;
    m->kv_start_block = s->kv_start;
    m->kv_num_blocks = s->kv_num;
    m->full_kv_start_block = s->full_start;
    m->full_kv_num_blocks = s->full_num;
    *md = m;
    return ATTN_OK;
}

static attn_status attn__flex_build_for_capture(void *state, const attn_common_metadata *cm,
                                                const void **md)
{
    return attn__capture_build(TYPE_NAME, state, cm, md, attn__flex_build);
}

static attn_status attn__flex_update_block_table(void *state, const void *md,
                                                 const int32_t *block_table, int block_table_stride,
                                                 const int64_t *slot_mapping, const void **new_md)
{
    attn__flex_state *s = state;
    const attn_flex_metadata *src = md;
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

static int attn__flex_describe(const void *md, char *buf, size_t size)
{
    const attn_flex_metadata *m = md;
    if (!m) return -1;
    attn__sb sb;
    attn__jw w;
    attn__describe_begin(&sb, &w, m->num_reqs, m->num_actual_tokens);
    attn__jw_key(&w, "causal");
    attn__jw_bool(&w, m->causal);
    attn__jw_key(&w, "sliding_window");
    attn__jw_int(&w, m->sliding_window);
    attn__jw_key(&w, "cg_support");
    attn__jw_str(&w, attn_cg_support_name(m->cg_support));
    attn__describe_i32(&w, "doc_ids", m->doc_ids, m->num_actual_tokens);
    attn__describe_i32(&w, "query_pos", m->query_pos, m->num_actual_tokens);
    attn__jw_key(&w, "q_block_size");
    attn__jw_int(&w, m->q_block_size);
    attn__jw_key(&w, "num_q_tiles");
    attn__jw_int(&w, m->num_q_tiles);
    attn__describe_i32(&w, "q_tile_req", m->q_tile_req, m->num_q_tiles);
    attn__describe_i32(&w, "kv_start_block", m->kv_start_block, m->num_q_tiles);
    attn__describe_i32(&w, "kv_num_blocks", m->kv_num_blocks, m->num_q_tiles);
    attn__describe_i32(&w, "full_kv_start_block", m->full_kv_start_block, m->num_q_tiles);
    attn__describe_i32(&w, "full_kv_num_blocks", m->full_kv_num_blocks, m->num_q_tiles);
    attn__jw_obj_end(&w);
    return attn__describe_finish(&sb, buf, size);
}

const attn_builder_ops attn__builder_flex = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = TYPE_NAME,
    .cg_support = ATTN_CG_ALWAYS,
    .reorder_batch_threshold = 0,
    .supports_update_block_table = true,
    .create = attn__flex_create,
    .destroy = attn__flex_destroy,
    .build = attn__flex_build,
    .build_for_capture = attn__flex_build_for_capture,
    .update_block_table = attn__flex_update_block_table,
    .describe = attn__flex_describe,
};
