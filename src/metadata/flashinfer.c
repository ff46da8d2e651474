/* FlashInfer-family metadata builder (FLASHINFER, TRITON_FLASHINFER).
 *
 * Contract: FlashInfer's wrappers take CSR-style page lists, not a block
 * table: qo_indptr (= query_start_loc), paged_kv_indptr (pages per request,
 * cumulative), paged_kv_indices (the pages themselves, gathered from the
 * block table) and paged_kv_last_page_len (tokens in each request's last
 * page). Decodes (query length <= reorder_batch_threshold, 1 + speculative
 * tokens) come first in the batch — the runner reorders before it builds
 * the common metadata — and the leading run of them is split off for the
 * decode wrapper; everything after the first prefill goes to the prefill
 * wrapper, whose indptr views are rebased to 0. With
 * common_prefix_len > 0 (cascade) the shared pages are listed once and the
 * per-request lists hold only the suffix pages. Every array is sized at
 * create(); build() copies one contiguous row segment per request.
 * update_block_table regathers only paged_kv_indices (and the shared pages)
 * from the other group's table: the indptrs depend on lengths alone. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/builders.h"
#include "util/error.h"

#define TYPE_NAME "flashinfer"

typedef struct attn__fi_state {
    attn__builder_limits lim;
    int threshold;
    int32_t *kv_indptr;      /* [max_reqs + 1] */
    int32_t *kv_indices;     /* [max_reqs * max_blocks] */
    int32_t *last_page_len;  /* [max_reqs] */
    int32_t *prefill_qo;     /* [max_reqs + 1] */
    int32_t *prefill_kv;     /* [max_reqs + 1] */
    int32_t *shared_indices; /* [max_blocks] */
    int32_t shared_qo[2], shared_kv_indptr[2];
    attn_flashinfer_metadata md;
} attn__fi_state;
_Static_assert(offsetof(attn__fi_state, lim) == 0, "attn__capture_build reads the limits first");

static void attn__fi_destroy(void *state)
{
    attn__fi_state *s = state;
    if (!s) return;
    free(s->kv_indptr);
    free(s->kv_indices);
    free(s->last_page_len);
    free(s->prefill_qo);
    free(s->prefill_kv);
    free(s->shared_indices);
    free(s);
}

static attn_status attn__fi_create(const attn_builder_init *init, void **state)
{
    if (!state) return attn__fail(ATTN_NULL_ARGUMENT, TYPE_NAME " builder: state is NULL");
    *state = NULL;
    attn_status st = attn__init_check(TYPE_NAME, init);
    if (st != ATTN_OK) return st;
    attn__fi_state *s = calloc(1, sizeof *s);
    if (!s) return attn__fail(ATTN_OUT_OF_MEMORY, TYPE_NAME " builder: out of memory");
    size_t r = (size_t)init->max_num_reqs, b = (size_t)init->max_blocks_per_req;
    s->kv_indptr = calloc(r + 1, sizeof(int32_t));
    s->kv_indices = calloc(r * b, sizeof(int32_t));
    s->last_page_len = calloc(r, sizeof(int32_t));
    s->prefill_qo = calloc(r + 1, sizeof(int32_t));
    s->prefill_kv = calloc(r + 1, sizeof(int32_t));
    s->shared_indices = calloc(b, sizeof(int32_t));
    if (!s->kv_indptr || !s->kv_indices || !s->last_page_len || !s->prefill_qo || !s->prefill_kv ||
        !s->shared_indices) {
        attn__fi_destroy(s);
        return attn__fail(ATTN_OUT_OF_MEMORY, TYPE_NAME " builder: out of memory for %zu x %zu", r,
                          b);
    }
    s->threshold = 1 + init->num_speculative_tokens;
    attn__limits_init(&s->lim, TYPE_NAME, init, ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE);
    /* TRTLLM decode kernels (UNIFORM_BATCH) need whole query groups per KV head. */
    if (s->lim.cg == ATTN_CG_UNIFORM_BATCH && init->layer && init->layer->num_kv_heads > 0 &&
        init->layer->num_heads % init->layer->num_kv_heads != 0)
        s->lim.cg = ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE;
    *state = s;
    return ATTN_OK;
}

/* Gathers each request's pages after the shared prefix from a block table. */
static void attn__fi_gather(attn__fi_state *s, const attn_flashinfer_metadata *m,
                            const int32_t *block_table, int stride, int prefix_blocks)
{
    for (int r = 0; r < m->num_reqs; r++) {
        int32_t n = m->paged_kv_indptr[r + 1] - m->paged_kv_indptr[r];
        memcpy(s->kv_indices + m->paged_kv_indptr[r],
               block_table + (size_t)r * (size_t)stride + (size_t)prefix_blocks,
               sizeof(int32_t) * (size_t)n);
    }
    if (prefix_blocks > 0)
        memcpy(s->shared_indices, block_table, sizeof(int32_t) * (size_t)prefix_blocks);
}

static attn_status attn__fi_build(void *state, int common_prefix_len,
                                  const attn_common_metadata *cm, bool fast_build, const void **md)
{
    (void)fast_build;
    attn__fi_state *s = state;
    if (!s || !md) return attn__fail(ATTN_NULL_ARGUMENT, TYPE_NAME " build: state or md is NULL");
    attn_status st = attn__limits_build_args(&s->lim, cm);
    if (st != ATTN_OK) return st;
    if (cm->num_reqs > 0 && !cm->block_table)
        return attn__fail(ATTN_BAD_METADATA,
                          TYPE_NAME " build: paged attention needs a block table");
    if (common_prefix_len < 0)
        return attn__fail(ATTN_BAD_METADATA, TYPE_NAME ": common_prefix_len is %d",
                          common_prefix_len);
    if (common_prefix_len > 0 &&
        (st = attn__check_cascade(TYPE_NAME, cm, common_prefix_len)) != ATTN_OK)
        return st;
    int nd, ndt;
    st = attn__split_decodes_prefills(cm, s->threshold, false, &nd, &ndt);
    if (st != ATTN_OK) return st;

    attn_flashinfer_metadata *m = &s->md;
    memset(m, 0, sizeof *m);
    const int n = cm->num_reqs, bs = cm->block_size;
    const int prefix_blocks = common_prefix_len / bs;
    m->num_reqs = n;
    m->num_actual_tokens = cm->num_actual_tokens;
    m->max_query_len = cm->max_query_len;
    m->max_seq_len = cm->max_seq_len;
    m->page_size = bs;
    m->causal = cm->causal;
    m->slot_mapping = cm->slot_mapping;
    m->cg_support = s->lim.cg;
    m->reorder_batch_threshold = s->threshold;
    m->num_decodes = nd;
    m->num_decode_tokens = ndt;
    m->num_prefills = n - nd;
    m->num_prefill_tokens = cm->num_actual_tokens - ndt;
    m->qo_indptr = cm->query_start_loc;

    int32_t *indptr = s->kv_indptr;
    indptr[0] = 0;
    for (int r = 0; r < n; r++) {
        int32_t len = cm->seq_lens[r] - common_prefix_len;
        int32_t pages = (len + bs - 1) / bs;
        indptr[r + 1] = indptr[r] + pages;
        s->last_page_len[r] = pages > 0 ? len - (pages - 1) * bs : 0;
    }
    m->paged_kv_indptr = indptr;
    m->paged_kv_indices = s->kv_indices;
    m->paged_kv_last_page_len = s->last_page_len;
    attn__fi_gather(s, m, cm->block_table, cm->block_table_stride, prefix_blocks);

    const int32_t *qsl = cm->query_start_loc;
    for (int i = 0; i <= n - nd; i++) {
        s->prefill_qo[i] = qsl ? qsl[nd + i] - qsl[nd] : 0;
        s->prefill_kv[i] = indptr[nd + i] - indptr[nd];
    }
    m->prefill_qo_indptr = s->prefill_qo;
    m->prefill_kv_indptr = s->prefill_kv;

    if (common_prefix_len > 0) {
        m->use_cascade = true;
        m->common_prefix_len = common_prefix_len;
        s->shared_qo[0] = 0;
        s->shared_qo[1] = cm->num_actual_tokens;
        s->shared_kv_indptr[0] = 0;
        s->shared_kv_indptr[1] = prefix_blocks;
        m->shared_qo_indptr = s->shared_qo;
        m->shared_kv_page_indptr = s->shared_kv_indptr;
        m->shared_kv_page_indices = s->shared_indices;
        m->shared_kv_last_page_len = bs; /* the prefix is whole pages */
    }
    *md = m;
    return ATTN_OK;
}

static attn_status attn__fi_build_for_capture(void *state, const attn_common_metadata *cm,
                                              const void **md)
{
    return attn__capture_build(TYPE_NAME, state, cm, md, attn__fi_build);
}

static attn_status attn__fi_update_block_table(void *state, const void *md,
                                               const int32_t *block_table, int block_table_stride,
                                               const int64_t *slot_mapping, const void **new_md)
{
    attn__fi_state *s = state;
    const attn_flashinfer_metadata *src = md;
    if (!s || !src || !new_md)
        return attn__fail(ATTN_NULL_ARGUMENT, TYPE_NAME " update_block_table: NULL argument");
    attn_status ust = attn__limits_update(&s->lim, src->num_reqs, src->num_actual_tokens,
                                          block_table, block_table_stride, slot_mapping);
    if (ust != ATTN_OK) return ust;
    int prefix_blocks = src->use_cascade ? src->common_prefix_len / src->page_size : 0;
    for (int r = 0; r < src->num_reqs; r++) {
        int32_t pages = src->paged_kv_indptr[r + 1] - src->paged_kv_indptr[r];
        if (prefix_blocks + pages > block_table_stride || pages > s->lim.max_blocks)
            return attn__fail(ATTN_BAD_METADATA,
                              TYPE_NAME " update_block_table: request %d needs %d pages, the "
                                        "table holds %d",
                              r, prefix_blocks + pages, block_table_stride);
    }
    if (prefix_blocks > 0) {
        attn_status st = attn__check_shared_prefix(TYPE_NAME, block_table, block_table_stride,
                                                   src->num_reqs, prefix_blocks);
        if (st != ATTN_OK) return st;
    }
    /* Lengths, split and indptrs are the same batch: borrow them. */
    s->md = *src;
    s->md.slot_mapping = slot_mapping;
    s->md.paged_kv_indices = s->kv_indices;
    if (prefix_blocks > 0) s->md.shared_kv_page_indices = s->shared_indices;
    attn__fi_gather(s, &s->md, block_table, block_table_stride, prefix_blocks);
    *new_md = &s->md;
    return ATTN_OK;
}

static int attn__fi_describe(const void *md, char *buf, size_t size)
{
    const attn_flashinfer_metadata *m = md;
    if (!m) return -1;
    attn__sb sb;
    attn__jw w;
    attn__describe_begin(&sb, &w, m->num_reqs, m->num_actual_tokens);
    attn__jw_key(&w, "page_size");
    attn__jw_int(&w, m->page_size);
    attn__jw_key(&w, "reorder_batch_threshold");
    attn__jw_int(&w, m->reorder_batch_threshold);
    attn__jw_key(&w, "num_decodes");
    attn__jw_int(&w, m->num_decodes);
    attn__jw_key(&w, "num_decode_tokens");
    attn__jw_int(&w, m->num_decode_tokens);
    attn__jw_key(&w, "num_prefills");
    attn__jw_int(&w, m->num_prefills);
    attn__jw_key(&w, "num_prefill_tokens");
    attn__jw_int(&w, m->num_prefill_tokens);
    attn__jw_key(&w, "cg_support");
    attn__jw_str(&w, attn_cg_support_name(m->cg_support));
    attn__describe_i32(&w, "qo_indptr", m->qo_indptr, m->qo_indptr ? m->num_reqs + 1 : 0);
    attn__describe_i32(&w, "paged_kv_indptr", m->paged_kv_indptr, m->num_reqs + 1);
    attn__describe_i32(&w, "paged_kv_indices", m->paged_kv_indices,
                       m->paged_kv_indptr[m->num_reqs]);
    attn__describe_i32(&w, "paged_kv_last_page_len", m->paged_kv_last_page_len, m->num_reqs);
    attn__jw_key(&w, "use_cascade");
    attn__jw_bool(&w, m->use_cascade);
    if (m->use_cascade) {
        attn__jw_key(&w, "common_prefix_len");
        attn__jw_int(&w, m->common_prefix_len);
        attn__describe_i32(&w, "shared_kv_page_indices", m->shared_kv_page_indices,
                           m->shared_kv_page_indptr[1]);
    }
    attn__jw_obj_end(&w);
    return attn__describe_finish(&sb, buf, size);
}

const attn_builder_ops attn__builder_flashinfer = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = TYPE_NAME,
    .cg_support = ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE,
    .reorder_batch_threshold = 1,
    .supports_update_block_table = true,
    .create = attn__fi_create,
    .destroy = attn__fi_destroy,
    .build = attn__fi_build,
    .build_for_capture = attn__fi_build_for_capture,
    .update_block_table = attn__fi_update_block_table,
    .describe = attn__fi_describe,
};
