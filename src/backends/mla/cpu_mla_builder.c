/* CPU_MLA's metadata builder (also REFERENCE_MLA's): the common MLA builder
 * of the varlen class with threshold 128 and no graph capture, plus the
 * split-KV partition of the decodes that forward_mqa runs, made once per
 * step here rather than per layer in the kernel (vLLM keeps backend
 * planning in the backend's builder too, e.g. FlashMLA's tile scheduler).
 * The partition needs the layer's head count: without a layer in the init
 * the metadata carries no pieces and forward_mqa partitions itself.
 * Scratch is allocated at create; build never allocates; nothing survives
 * from one build to the next. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/mla/mla_internal.h"
#include "metadata/mla_builder.h"
#include "util/error.h"
#include "util/strbuf.h"
#include "util/threadpool.h"

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
    const attn__mla_work *a = pa, *b = pb;
    int64_t wa = (int64_t)(a->row_end - a->row_begin) * (a->kv_end - a->kv_begin);
    int64_t wb = (int64_t)(b->row_end - b->row_begin) * (b->kv_end - b->kv_begin);
    if (wa != wb) return wa > wb ? -1 : 1;
    if (a->req != b->req) return a->req < b->req ? -1 : 1;
    if (a->row_begin != b->row_begin) return a->row_begin < b->row_begin ? -1 : 1;
    return a->split < b->split ? -1 : a->split > b->split;
}

int attn__mla_partition(const attn_common_metadata *cm, int r0, int r1, int H, int nthreads,
                        attn__mla_work *work, int max_work, int *num_partials)
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
                attn__mla_work *w = &work[np++];
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

/* ---- the builder ---------------------------------------------------------------- */

#define ATTN__CPU_MLA_CLASS     ATTN_MLA_QUERY_VARLEN
#define ATTN__CPU_MLA_THRESHOLD 128

typedef struct {
    int threshold;
    int num_heads, num_threads;
    int max_work;
    attn__mla_work *work;
    attn__cpu_mla_metadata md;
} attn__cpu_mla_builder;

static attn_status attn__cpu_mla_create(const attn_builder_init *init, void **state)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(state);
    int threshold = 0;
    attn_status st =
        attn__mla_builder_init(ATTN__CPU_MLA_CLASS, ATTN__CPU_MLA_THRESHOLD, init, &threshold);
    if (st != ATTN_OK) return st;
    attn__cpu_mla_builder *b = calloc(1, sizeof *b);
    if (!b) return attn__fail(ATTN_OUT_OF_MEMORY, "MLA builder: no memory");
    b->threshold = threshold;
    b->num_heads = init->layer && init->layer->num_heads > 0 ? init->layer->num_heads : 0;
    b->num_threads = init->num_threads > 0 ? init->num_threads : attn__pool_default_threads();
    if (b->num_heads > 0) {
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

static void attn__cpu_mla_destroy(void *state)
{
    attn__cpu_mla_builder *b = state;
    if (!b) return;
    free(b->work);
    free(b);
}

static attn_status attn__cpu_mla_build(void *state, int common_prefix_len,
                                       const attn_common_metadata *cm, bool fast_build,
                                       const void **out)
{
    (void)common_prefix_len, (void)fast_build;
    attn__cpu_mla_builder *b = state;
    ATTN__CHECK_NULL(b);
    ATTN__CHECK_NULL(cm);
    ATTN__CHECK_NULL(out);
    attn__cpu_mla_metadata *md = &b->md;
    attn_status st = attn__mla_fill(cm, ATTN__CPU_MLA_CLASS, b->threshold, &md->mla);
    if (st != ATTN_OK) return st;
    md->mla.struct_size = sizeof *md;
    md->magic = ATTN__CPU_MLA_MD_MAGIC;
    md->work = NULL;
    md->num_work = md->num_partials = md->work_heads = 0;
    if (b->work && md->mla.num_decodes > 0) {
        int np = attn__mla_partition(cm, 0, md->mla.num_decodes, b->num_heads, b->num_threads,
                                     b->work, b->max_work, &md->num_partials);
        if (np >= 0) {
            md->work = b->work;
            md->num_work = np;
            md->work_heads = b->num_heads;
        } else {
            md->num_partials = 0; /* larger than the builder was sized for: kernel partitions */
        }
    }
    *out = md;
    return ATTN_OK;
}

static attn_status attn__cpu_mla_build_capture(void *state, const attn_common_metadata *cm,
                                               const void **out)
{
    return attn__cpu_mla_build(state, 0, cm, false, out);
}

/* Within one step another group's metadata is reused with this group's
 * block table: the split and the partition depend only on lengths (the
 * pieces stay in the other builder's state, valid for the step). */
static attn_status attn__cpu_mla_update_block_table(void *state, const void *md_in,
                                                    const int32_t *block_table,
                                                    int block_table_stride,
                                                    const int64_t *slot_mapping, const void **out)
{
    attn__cpu_mla_builder *b = state;
    ATTN__CHECK_NULL(b);
    ATTN__CHECK_NULL(out);
    attn_status st = attn__mla_check_reuse(md_in, sizeof(attn_mla_metadata), block_table_stride);
    if (st != ATTN_OK) return st;
    const attn__cpu_mla_metadata *src = attn__cpu_mla_md(md_in);
    if (!src)
        return attn__fail(ATTN_BAD_METADATA,
                          "MLA builder: update_block_table needs metadata of CPU_MLA's builder");
    if (src != &b->md) b->md = *src;
    b->md.mla.common.block_table = block_table;
    b->md.mla.common.block_table_stride = block_table_stride;
    b->md.mla.common.slot_mapping = slot_mapping;
    *out = &b->md;
    return ATTN_OK;
}

static void attn__cpu_mla_describe_more(attn__jw *w, const attn_mla_metadata *md)
{
    const attn__cpu_mla_metadata *c = attn__cpu_mla_md(md);
    attn__jw_key(w, "decode_work_pieces");
    attn__jw_int(w, c ? c->num_work : 0);
    attn__jw_key(w, "decode_partials");
    attn__jw_int(w, c ? c->num_partials : 0);
}

static int attn__cpu_mla_describe(const void *md, char *buf, size_t size)
{
    return attn__mla_describe_with(md, attn__cpu_mla_describe_more, buf, size);
}

const attn_builder_ops attn__builder_mla_cpu = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = "mla_cpu",
    .cg_support = ATTN_CG_NEVER,
    .reorder_batch_threshold = ATTN__CPU_MLA_THRESHOLD,
    .supports_update_block_table = true,
    .create = attn__cpu_mla_create,
    .destroy = attn__cpu_mla_destroy,
    .build = attn__cpu_mla_build,
    .build_for_capture = attn__cpu_mla_build_capture,
    .update_block_table = attn__cpu_mla_update_block_table,
    .describe = attn__cpu_mla_describe,
};
