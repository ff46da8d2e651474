/* The MLA metadata builders (vLLM's MLACommonMetadataBuilder and its
 * per-backend subclasses, reference §5b CG column and §11).
 *
 * Every variant produces attn_mla_metadata: the decode/prefill split of
 * split_decodes_and_prefills (decodes are the leading requests whose query
 * length is within the reorder threshold - for the UNIFORM class also equal
 * to the first request's; the first request that fails the test starts the
 * prefills), the fields of vLLM's MLACommonMetadata. The variants differ
 * only in query-length class, reorder threshold and capture tier:
 *
 *   attn__builder_mla          common (vLLM MLACommonMetadataBuilder): single, 1
 *   attn__builder_mla_varlen   FLASH_ATTN_MLA: varlen, 512
 *   attn__builder_mla_flashmla FLASHMLA: uniform, 128
 *   attn__builder_mla_uniform  FLASHINFER_MLA, TOKENSPEED_MLA: uniform, 1
 *   attn__builder_mla_single   CUTLASS_MLA: single token, 1
 *   attn__builder_mla_sparse   sparse MLA backends: every token runs forward_mqa
 *
 * CPU_MLA's builder (varlen, 128, with its split-KV decode partition) lives
 * with its kernel (src/backends/mla/cpu_mla_builder.c) and reuses the steps
 * of mla_builder.h.
 * Speculative decoding raises the threshold to 1 + num_speculative_tokens
 * for every class but single (vLLM's _init_reorder_batch_threshold).
 * Scratch is allocated at create; build never allocates; nothing survives
 * from one build to the next. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/mla.h"
#include "metadata/builders.h"
#include "metadata/mla_builder.h"
#include "util/error.h"
#include "util/strbuf.h"

const char *attn_mla_query_class_name(attn_mla_query_class c)
{
    switch (c) {
    case ATTN_MLA_QUERY_SINGLE: return "single";
    case ATTN_MLA_QUERY_UNIFORM: return "uniform";
    case ATTN_MLA_QUERY_VARLEN: return "varlen";
    }
    return "unknown";
}

void attn_mla_split_decodes(const attn_common_metadata *cm, int threshold, bool require_uniform,
                            int *num_decodes, int *num_decode_tokens, int *num_prefills,
                            int *num_prefill_tokens)
{
    int nd = 0, ndt = 0, nr = cm && cm->num_reqs > 0 ? cm->num_reqs : 0;
    int nt = cm && cm->num_actual_tokens > 0 ? cm->num_actual_tokens : 0;
    if (nr > 0 && cm->query_start_loc) {
        const int32_t *qsl = cm->query_start_loc;
        int first = qsl[1] - qsl[0];
        for (int r = 0; r < nr; r++) {
            int ql = qsl[r + 1] - qsl[r];
            if (ql > threshold || (require_uniform && ql != first)) break;
            nd++;
        }
        ndt = qsl[nd] - qsl[0];
        nt = qsl[nr] - qsl[0];
    }
    if (num_decodes) *num_decodes = nd;
    if (num_decode_tokens) *num_decode_tokens = ndt;
    if (num_prefills) *num_prefills = nr - nd;
    if (num_prefill_tokens) *num_prefill_tokens = nt - ndt;
}

/* ---- the steps every MLA builder takes ------------------------------------------ */

attn_status attn__mla_builder_init(attn_mla_query_class cls, int threshold,
                                   const attn_builder_init *init, int *effective_threshold)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(effective_threshold);
    if (init->max_num_reqs < 0 || init->max_num_tokens < 0 || init->num_speculative_tokens < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "MLA builder: max_num_reqs, max_num_tokens and "
                                                 "num_speculative_tokens must be >= 0");
    /* sized scratch (CPU_MLA's partition) must never see a narrowed count */
    if (init->max_num_reqs > ATTN_MAX_NUM_REQS || init->max_num_tokens > ATTN_MAX_SEQ_LEN)
        return attn__fail(ATTN_OUT_OF_MEMORY,
                          "MLA builder: %d requests / %d tokens is too large (at most %d / %d)",
                          init->max_num_reqs, init->max_num_tokens, ATTN_MAX_NUM_REQS,
                          ATTN_MAX_SEQ_LEN);
    if (cls != ATTN_MLA_QUERY_SINGLE && 1 + init->num_speculative_tokens > threshold)
        threshold = 1 + init->num_speculative_tokens;
    *effective_threshold = threshold;
    return ATTN_OK;
}

attn_status attn__mla_fill(const attn_common_metadata *cm, attn_mla_query_class cls, int threshold,
                           attn_mla_metadata *md)
{
    ATTN__CHECK_NULL(cm);
    ATTN__CHECK_NULL(md);
    if (cm->num_reqs > 0 && (!cm->query_start_loc || !cm->seq_lens))
        return attn__fail(ATTN_BAD_METADATA,
                          "MLA builder: query_start_loc and seq_lens are required");
    attn_status st = attn__check_batch("MLA builder", cm, false);
    if (st != ATTN_OK) return st;
    memset(md, 0, sizeof *md);
    md->magic = ATTN_MLA_METADATA_MAGIC;
    md->struct_size = sizeof *md;
    md->common = *cm;
    md->query_class = cls;
    md->reorder_batch_threshold = threshold;
    attn_mla_split_decodes(cm, threshold, cls == ATTN_MLA_QUERY_UNIFORM, &md->num_decodes,
                           &md->num_decode_tokens, &md->num_prefills, &md->num_prefill_tokens);
    for (int r = 0; r < cm->num_reqs; r++) {
        int ql = cm->query_start_loc[r + 1] - cm->query_start_loc[r], sl = cm->seq_lens[r];
        if (r < md->num_decodes) {
            md->max_decode_query_len =
                ql > md->max_decode_query_len ? ql : md->max_decode_query_len;
            md->max_decode_seq_len = sl > md->max_decode_seq_len ? sl : md->max_decode_seq_len;
        } else {
            md->max_prefill_query_len =
                ql > md->max_prefill_query_len ? ql : md->max_prefill_query_len;
            md->max_prefill_seq_len = sl > md->max_prefill_seq_len ? sl : md->max_prefill_seq_len;
        }
    }
    return ATTN_OK;
}

attn_status attn__mla_check_reuse(const void *md_in, size_t min_size, int block_table_stride)
{
    ATTN__CHECK_NULL(md_in);
    const attn_mla_metadata *src = md_in;
    if (src->magic != ATTN_MLA_METADATA_MAGIC || src->struct_size < min_size)
        return attn__fail(ATTN_BAD_METADATA,
                          "MLA builder: update_block_table needs metadata of an MLA builder");
    if (block_table_stride < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "MLA builder: block_table_stride %d < 0",
                          block_table_stride);
    return ATTN_OK;
}

int attn__mla_describe_with(const void *md_in,
                            void (*more)(attn__jw *w, const attn_mla_metadata *md), char *buf,
                            size_t size)
{
    const attn_mla_metadata *md = md_in;
    attn__sb sb;
    attn__sb_init(&sb);
    attn__jw w;
    attn__jw_init(&w, &sb, false);
    attn__jw_obj_begin(&w);
    if (md && md->magic == ATTN_MLA_METADATA_MAGIC) {
        attn__jw_key(&w, "query_class");
        attn__jw_str(&w, attn_mla_query_class_name(md->query_class));
        attn__jw_key(&w, "reorder_batch_threshold");
        attn__jw_int(&w, md->reorder_batch_threshold);
        attn__jw_key(&w, "num_decodes");
        attn__jw_int(&w, md->num_decodes);
        attn__jw_key(&w, "num_decode_tokens");
        attn__jw_int(&w, md->num_decode_tokens);
        attn__jw_key(&w, "num_prefills");
        attn__jw_int(&w, md->num_prefills);
        attn__jw_key(&w, "num_prefill_tokens");
        attn__jw_int(&w, md->num_prefill_tokens);
        attn__jw_key(&w, "max_decode_query_len");
        attn__jw_int(&w, md->max_decode_query_len);
        attn__jw_key(&w, "max_decode_seq_len");
        attn__jw_int(&w, md->max_decode_seq_len);
        attn__jw_key(&w, "max_prefill_query_len");
        attn__jw_int(&w, md->max_prefill_query_len);
        attn__jw_key(&w, "max_prefill_seq_len");
        attn__jw_int(&w, md->max_prefill_seq_len);
        if (more) more(&w, md);
    }
    attn__jw_obj_end(&w);
    int n = sb.oom ? 0 : (int)sb.len;
    if (buf && size > 0) {
        size_t c = (size_t)n < size - 1 ? (size_t)n : size - 1;
        if (c) memcpy(buf, sb.data, c);
        buf[c] = '\0';
    }
    attn__sb_free(&sb);
    return n;
}

/* ---- the common builders -------------------------------------------------------- */

typedef struct attn__mla_variant {
    const char *type_name;
    attn_mla_query_class cls;
    int threshold;
} attn__mla_variant;

typedef struct attn__mla_builder {
    attn__mla_variant v;
    int threshold;
    attn_mla_metadata md;
} attn__mla_builder;

static attn_status attn__mla_create(const attn__mla_variant *v, const attn_builder_init *init,
                                    void **state)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(state);
    int threshold = 0;
    attn_status st = attn__mla_builder_init(v->cls, v->threshold, init, &threshold);
    if (st != ATTN_OK) return st;
    attn__mla_builder *b = calloc(1, sizeof *b);
    if (!b) return attn__fail(ATTN_OUT_OF_MEMORY, "MLA builder: no memory");
    b->v = *v;
    b->threshold = threshold;
    *state = b;
    return ATTN_OK;
}

static void attn__mla_destroy(void *state)
{
    free(state);
}

static attn_status attn__mla_build(void *state, int common_prefix_len,
                                   const attn_common_metadata *cm, bool fast_build,
                                   const void **out)
{
    (void)common_prefix_len, (void)fast_build;
    attn__mla_builder *b = state;
    ATTN__CHECK_NULL(b);
    ATTN__CHECK_NULL(cm);
    ATTN__CHECK_NULL(out);
    attn_status st = attn__mla_fill(cm, b->v.cls, b->threshold, &b->md);
    if (st != ATTN_OK) return st;
    *out = &b->md;
    return ATTN_OK;
}

static attn_status attn__mla_build_capture(void *state, const attn_common_metadata *cm,
                                           const void **out)
{
    return attn__mla_build(state, 0, cm, false, out);
}

/* Within one step another group's metadata is reused with this group's
 * block table: the split depends only on lengths. */
static attn_status attn__mla_update_block_table(void *state, const void *md_in,
                                                const int32_t *block_table, int block_table_stride,
                                                const int64_t *slot_mapping, const void **out)
{
    attn__mla_builder *b = state;
    ATTN__CHECK_NULL(b);
    ATTN__CHECK_NULL(out);
    attn_status st = attn__mla_check_reuse(md_in, sizeof(attn_mla_metadata), block_table_stride);
    if (st != ATTN_OK) return st;
    const attn_mla_metadata *src = md_in;
    if (src != &b->md) {
        b->md = *src;
        b->md.struct_size = sizeof b->md; /* a backend's extension is not copied */
    }
    b->md.common.block_table = block_table;
    b->md.common.block_table_stride = block_table_stride;
    b->md.common.slot_mapping = slot_mapping;
    *out = &b->md;
    return ATTN_OK;
}

static int attn__mla_describe(const void *md, char *buf, size_t size)
{
    return attn__mla_describe_with(md, NULL, buf, size);
}

#define ATTN__MLA_VARIANT(sym, tname, cg, cls_, thr)                                               \
    static const attn__mla_variant sym##_v = {tname, cls_, thr};                                   \
    static attn_status sym##_create(const attn_builder_init *init, void **state)                   \
    {                                                                                              \
        return attn__mla_create(&sym##_v, init, state);                                            \
    }                                                                                              \
    const attn_builder_ops sym = {                                                                 \
        .struct_size = sizeof(attn_builder_ops),                                                   \
        .type_name = tname,                                                                        \
        .cg_support = cg,                                                                          \
        .reorder_batch_threshold = thr,                                                            \
        .supports_update_block_table = true,                                                       \
        .create = sym##_create,                                                                    \
        .destroy = attn__mla_destroy,                                                              \
        .build = attn__mla_build,                                                                  \
        .build_for_capture = attn__mla_build_capture,                                              \
        .update_block_table = attn__mla_update_block_table,                                        \
        .describe = attn__mla_describe,                                                            \
    };

ATTN__MLA_VARIANT(attn__builder_mla, "mla", ATTN_CG_UNIFORM_BATCH, ATTN_MLA_QUERY_SINGLE, 1)
ATTN__MLA_VARIANT(attn__builder_mla_varlen, "mla_varlen", ATTN_CG_UNIFORM_BATCH,
                  ATTN_MLA_QUERY_VARLEN, 512)
ATTN__MLA_VARIANT(attn__builder_mla_flashmla, "mla_flashmla", ATTN_CG_UNIFORM_BATCH,
                  ATTN_MLA_QUERY_UNIFORM, 128)
ATTN__MLA_VARIANT(attn__builder_mla_uniform, "mla_uniform", ATTN_CG_UNIFORM_BATCH,
                  ATTN_MLA_QUERY_UNIFORM, 1)
ATTN__MLA_VARIANT(attn__builder_mla_single, "mla_single", ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE,
                  ATTN_MLA_QUERY_SINGLE, 1)
ATTN__MLA_VARIANT(attn__builder_mla_sparse, "mla_sparse", ATTN_CG_UNIFORM_BATCH,
                  ATTN_MLA_QUERY_SINGLE, 1)
