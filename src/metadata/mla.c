/* The MLA metadata builders (vLLM's MLACommonMetadataBuilder and its
 * per-backend subclasses, reference §5b CG column and §11).
 *
 * Every variant produces attn_mla_metadata: the decode/prefill split of
 * split_decodes_and_prefills (decodes are the leading requests whose query
 * length is within the reorder threshold - for the UNIFORM class also equal
 * to the first request's; the first request that fails the test starts the
 * prefills) and, when the builder knows the layer's head count, the
 * split-KV partition the CPU decode kernel runs. The variants differ only
 * in query-length class, reorder threshold and capture tier:
 *
 *   attn__builder_mla          common (vLLM MLACommonMetadataBuilder): single, 1
 *   attn__builder_mla_varlen   FLASH_ATTN_MLA: varlen, 512
 *   attn__builder_mla_flashmla FLASHMLA: uniform, 128
 *   attn__builder_mla_uniform  FLASHINFER_MLA, TOKENSPEED_MLA: uniform, 1
 *   attn__builder_mla_single   CUTLASS_MLA: single token, 1
 *   attn__builder_mla_sparse   sparse MLA backends: every token runs forward_mqa
 *   attn__builder_mla_cpu      CPU_MLA, REFERENCE_MLA: varlen, 128
 *
 * Speculative decoding raises the threshold to 1 + num_speculative_tokens
 * for every class but single (vLLM's _init_reorder_batch_threshold).
 * Scratch is allocated at create; build never allocates; nothing survives
 * from one build to the next. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/mla.h"
#include "metadata/mla_builder.h"
#include "util/error.h"
#include "util/strbuf.h"
#include "util/threadpool.h"

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

/* ---- split-KV decode partition ------------------------------------------------ */

static int attn__rows_per_group(int H)
{
    return H >= ATTN__MLA_MAX_ROWS ? ATTN__MLA_MAX_ROWS : H * (ATTN__MLA_MAX_ROWS / H);
}

int attn__mla_partition_bound(int num_reqs, int num_tokens, int H, int nthreads)
{
    if (H <= 0) return 0;
    int G = attn__rows_per_group(H);
    int64_t groups = (int64_t)num_reqs + ((int64_t)num_tokens * H + G - 1) / G;
    int64_t n = groups + 3ll * (nthreads > 0 ? nthreads : 1) + 8;
    return n > INT_MAX / 2 ? INT_MAX / 2 : (int)n;
}

static int attn__work_cmp(const void *pa, const void *pb)
{
    const attn_mla_work *a = pa, *b = pb;
    int64_t wa = (int64_t)(a->row_end - a->row_begin) * (a->kv_end - a->kv_begin);
    int64_t wb = (int64_t)(b->row_end - b->row_begin) * (b->kv_end - b->kv_begin);
    if (wa != wb) return wa > wb ? -1 : 1;
    if (a->req != b->req) return a->req < b->req ? -1 : 1;
    if (a->row_begin != b->row_begin) return a->row_begin < b->row_begin ? -1 : 1;
    return a->split < b->split ? -1 : a->split > b->split;
}

int attn__mla_partition(const attn_common_metadata *cm, int r0, int r1, int H, int nthreads,
                        attn_mla_work *work, int max_work, int *num_partials)
{
    int G = attn__rows_per_group(H);
    if (nthreads < 1) nthreads = 1;
    double W = 0;
    for (int r = r0; r < r1; r++) {
        int n = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        int rows = n * H, fp = cm->seq_lens[r] - n;
        for (int rb = 0; rb < rows; rb += G) {
            int re = rows - rb < G ? rows : rb + G;
            W += (double)(re - rb) * (double)(fp + (re - 1) / H + 1);
        }
    }
    /* About three pieces per thread, but at least 512 keys of a full group per
     * piece: each piece packs its queries once and split pieces pay a merge. */
    double T = W / (3.0 * nthreads);
    if (T < 512.0 * ATTN__MLA_MAX_ROWS) T = 512.0 * ATTN__MLA_MAX_ROWS;
    int np = 0, nparts = 0;
    for (int r = r0; r < r1; r++) {
        int n = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
        int rows = n * H, fp = cm->seq_lens[r] - n;
        for (int rb = 0; rb < rows; rb += G) {
            int re = rows - rb < G ? rows : rb + G;
            int keys = fp + (re - 1) / H + 1;
            int splits = (int)ceil((double)(re - rb) * keys / T);
            if (splits < 1) splits = 1;
            int kps = (keys + splits - 1) / splits;
            kps = (kps + ATTN__MLA_KCHUNK - 1) / ATTN__MLA_KCHUNK * ATTN__MLA_KCHUNK;
            splits = (keys + kps - 1) / kps;
            for (int s = 0; s < splits; s++) {
                if (np >= max_work) return -1;
                attn_mla_work *w = &work[np++];
                w->req = r;
                w->row_begin = rb;
                w->row_end = re;
                w->kv_begin = s * kps;
                w->kv_end = (s + 1) * kps < keys ? (s + 1) * kps : keys;
                w->split = s;
                w->nsplits = splits;
                w->partial = splits > 1 ? nparts + s : -1;
            }
            if (splits > 1) nparts += splits;
        }
    }
    qsort(work, (size_t)np, sizeof *work, attn__work_cmp);
    if (num_partials) *num_partials = nparts;
    return np;
}

/* ---- the builders ------------------------------------------------------------- */

typedef struct attn__mla_variant {
    const char *type_name;
    attn_mla_query_class cls;
    int threshold;
    bool sparse;
} attn__mla_variant;

typedef struct attn__mla_builder {
    attn__mla_variant v;
    int threshold;
    int num_heads, num_threads;
    int max_work;
    attn_mla_work *work;
    attn_mla_metadata md;
} attn__mla_builder;

static attn_status attn__mla_create(const attn__mla_variant *v, const attn_builder_init *init,
                                    void **state)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(state);
    if (init->max_num_reqs < 0 || init->max_num_tokens < 0 || init->num_speculative_tokens < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "MLA builder: max_num_reqs, max_num_tokens and "
                                                 "num_speculative_tokens must be >= 0");
    attn__mla_builder *b = calloc(1, sizeof *b);
    if (!b) return attn__fail(ATTN_OUT_OF_MEMORY, "MLA builder: no memory");
    b->v = *v;
    b->threshold = v->threshold;
    if (v->cls != ATTN_MLA_QUERY_SINGLE && 1 + init->num_speculative_tokens > b->threshold)
        b->threshold = 1 + init->num_speculative_tokens;
    b->num_heads = init->layer && init->layer->num_heads > 0 ? init->layer->num_heads : 0;
    b->num_threads = init->num_threads > 0 ? init->num_threads : attn__pool_default_threads();
    if (b->num_heads > 0 && !v->sparse) {
        b->max_work = attn__mla_partition_bound(init->max_num_reqs, init->max_num_tokens,
                                                b->num_heads, b->num_threads);
        b->work = calloc((size_t)b->max_work, sizeof *b->work);
        if (!b->work) {
            int n = b->max_work;
            free(b);
            return attn__fail(ATTN_OUT_OF_MEMORY, "MLA builder: no memory for %d work pieces", n);
        }
    }
    *state = b;
    return ATTN_OK;
}

static void attn__mla_destroy(void *state)
{
    attn__mla_builder *b = state;
    if (!b) return;
    free(b->work);
    free(b);
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
    if (cm->num_reqs < 0 || cm->num_actual_tokens < 0)
        return attn__fail(ATTN_BAD_METADATA, "MLA builder: num_reqs %d / num_actual_tokens %d < 0",
                          cm->num_reqs, cm->num_actual_tokens);
    if (cm->num_reqs > 0 && (!cm->query_start_loc || !cm->seq_lens))
        return attn__fail(ATTN_BAD_METADATA,
                          "MLA builder: query_start_loc and seq_lens are required");
    const int32_t *qsl = cm->query_start_loc;
    /* qsl[0] = 0 and non-decreasing (checked in order) keep every difference in range */
    if (cm->num_reqs > 0 && (qsl[0] != 0 || qsl[cm->num_reqs] != cm->num_actual_tokens))
        return attn__fail(ATTN_BAD_METADATA,
                          "MLA builder: query_start_loc runs from %d to %d but the batch has %d "
                          "tokens",
                          qsl[0], qsl[cm->num_reqs], cm->num_actual_tokens);
    for (int r = 0; r < cm->num_reqs; r++) {
        if (qsl[r + 1] < qsl[r] || cm->seq_lens[r] < 0 || cm->seq_lens[r] > ATTN_MAX_SEQ_LEN ||
            qsl[r + 1] - qsl[r] > cm->seq_lens[r])
            return attn__fail(ATTN_BAD_METADATA,
                              "MLA builder: request %d has query_start_loc %d..%d and seq_len %d",
                              r, qsl[r], qsl[r + 1], cm->seq_lens[r]);
    }
    attn_mla_metadata *md = &b->md;
    memset(md, 0, sizeof *md);
    md->magic = ATTN_MLA_METADATA_MAGIC;
    md->struct_size = sizeof *md;
    md->common = *cm;
    md->query_class = b->v.cls;
    md->reorder_batch_threshold = b->threshold;
    attn_mla_split_decodes(cm, b->threshold, b->v.cls == ATTN_MLA_QUERY_UNIFORM, &md->num_decodes,
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
    if (b->work && md->num_decodes > 0) {
        int np = attn__mla_partition(cm, 0, md->num_decodes, b->num_heads, b->num_threads, b->work,
                                     b->max_work, &md->num_partials);
        if (np >= 0) {
            md->decode_work = b->work;
            md->num_decode_work = np;
            md->work_heads = b->num_heads;
        } else {
            md->num_partials = 0; /* larger than the builder was sized for: kernel partitions */
        }
    }
    *out = md;
    return ATTN_OK;
}

static attn_status attn__mla_build_capture(void *state, const attn_common_metadata *cm,
                                           const void **out)
{
    return attn__mla_build(state, 0, cm, false, out);
}

/* Within one step another group's metadata is reused with this group's
 * block table: the split and the partition depend only on lengths. */
static attn_status attn__mla_update_block_table(void *state, const void *md_in,
                                                const int32_t *block_table, int block_table_stride,
                                                const int64_t *slot_mapping, const void **out)
{
    attn__mla_builder *b = state;
    ATTN__CHECK_NULL(b);
    ATTN__CHECK_NULL(md_in);
    ATTN__CHECK_NULL(out);
    const attn_mla_metadata *src = md_in;
    if (src->magic != ATTN_MLA_METADATA_MAGIC || src->struct_size != sizeof *src)
        return attn__fail(ATTN_BAD_METADATA,
                          "MLA builder: update_block_table needs metadata of an MLA builder");
    if (block_table_stride < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "MLA builder: block_table_stride %d < 0",
                          block_table_stride);
    if (src != &b->md) b->md = *src;
    b->md.common.block_table = block_table;
    b->md.common.block_table_stride = block_table_stride;
    b->md.common.slot_mapping = slot_mapping;
    *out = &b->md;
    return ATTN_OK;
}

static int attn__mla_describe(const void *md_in, char *buf, size_t size)
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
        attn__jw_key(&w, "decode_work_pieces");
        attn__jw_int(&w, md->num_decode_work);
        attn__jw_key(&w, "decode_partials");
        attn__jw_int(&w, md->num_partials);
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

#define ATTN__MLA_VARIANT(sym, tname, cg, cls_, thr, sp)                                           \
    static const attn__mla_variant sym##_v = {tname, cls_, thr, sp};                               \
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

/* Declared here: the builders are referenced from descriptors in other
 * folders (weakly by the catalog). */
extern const attn_builder_ops attn__builder_mla_varlen, attn__builder_mla_flashmla,
    attn__builder_mla_uniform, attn__builder_mla_single, attn__builder_mla_cpu;

ATTN__MLA_VARIANT(attn__builder_mla, "mla", ATTN_CG_UNIFORM_BATCH, ATTN_MLA_QUERY_SINGLE, 1, false)
ATTN__MLA_VARIANT(attn__builder_mla_varlen, "mla_varlen", ATTN_CG_UNIFORM_BATCH,
                  ATTN_MLA_QUERY_VARLEN, 512, false)
ATTN__MLA_VARIANT(attn__builder_mla_flashmla, "mla_flashmla", ATTN_CG_UNIFORM_BATCH,
                  ATTN_MLA_QUERY_UNIFORM, 128, false)
ATTN__MLA_VARIANT(attn__builder_mla_uniform, "mla_uniform", ATTN_CG_UNIFORM_BATCH,
                  ATTN_MLA_QUERY_UNIFORM, 1, false)
ATTN__MLA_VARIANT(attn__builder_mla_single, "mla_single", ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE,
                  ATTN_MLA_QUERY_SINGLE, 1, false)
ATTN__MLA_VARIANT(attn__builder_mla_sparse, "mla_sparse", ATTN_CG_UNIFORM_BATCH,
                  ATTN_MLA_QUERY_SINGLE, 1, true)
ATTN__MLA_VARIANT(attn__builder_mla_cpu, "mla_cpu", ATTN_CG_NEVER, ATTN_MLA_QUERY_VARLEN, 128,
                  false)
