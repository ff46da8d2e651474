/* CPU_ATTN metadata builder: turns the step's common metadata into the
 * tile list the kernels run (see cpu_attn.h for the work model).
 *
 * - decodes (query length <= decode_threshold) get one tile per request, or
 *   several along the keys (split-KV) when there are too few tiles to keep
 *   every thread busy or one context dwarfs the rest; split parts write
 *   partial results that phase C merges;
 * - prefills get tiles of one job's query tokens (ATTN_CPU_MAX_ROWS / group,
 *   more for a wide-rows variant: attn__cpu_job_tokens), each with
 *   the key range its rows can see (causal tiles and keys outside the
 *   sliding window are never visited);
 * - cascade (common_prefix_len > 0, at least two requests, and room for one
 *   partial per token): the prefix keys [0, P) are attended once by tiles
 *   whose rows are the tokens of every request (phase A), and each request's
 *   own tiles cover [P, kv_len) and merge the prefix partial at the end. P
 *   is the common prefix rounded down to whole blocks and clamped below
 *   every request's first query position (so the prefix is fully visible);
 * - tiles are ordered by estimated cost, largest first, for the dynamic
 *   scheduler.
 * Everything is allocated in create() for the init's maxima; build() only
 * writes into it, and refuses batches larger than those maxima. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_attn.h"
#include "backends/reference/reference.h"
#include "metadata/builders.h"
#include "util/error.h"
#include "util/threadpool.h"

/* Smallest key range worth a split part. */
#define ATTN_CPU_MIN_SPLIT 512
/* Cascade partials are capped at this many bytes (else no cascade). */
#define ATTN_CPU_CASCADE_BYTES (256ll << 20)
/* All partials (split parts or cascade): a larger init is refused. */
#define ATTN_CPU_PARTIAL_BYTES (16ll << 30)

typedef struct {
    attn__cpu_md md;
    int block_size;
    int max_reqs, max_tokens;
    int num_heads, num_kv_heads, head_size_v;
    int window;
    attn_attn_type attn_type;
    int threads;
    bool wide_kv; /* 16-bit cache (see attn__cpu_dec_heads) */
    int tile_tokens;
    int prefill_tokens; /* per prefill tile: the active variant's job (attn__cpu_job_tokens) */
    int max_tiles, max_prefix_tiles, max_splits;
    int64_t split_slots; /* partial slots reserved for split parts */
    int64_t cascade_slots;
    int32_t *order; /* sort scratch */
    attn__cpu_tile *tmp;
} cpu_builder;

/* The init's sizes within the stated limits, so every count create derives
 * stays an int and every allocation is bounded before it is attempted. */
static attn_status cpu_builder_check_init(const attn_builder_init *init)
{
    const attn_layer_params *l = init->layer;
    if (l->num_heads < 1 || l->num_kv_heads < 1 || l->num_heads % l->num_kv_heads)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "CPU_ATTN builder: num_heads %d is not a multiple of num_kv_heads %d",
                          l->num_heads, l->num_kv_heads);
    if (l->num_heads > ATTN_MAX_HEADS || l->head_size < 1 || l->head_size > ATTN_MAX_HEAD_SIZE ||
        l->head_size_v < 0 || l->head_size_v > ATTN_MAX_HEAD_SIZE)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "CPU_ATTN builder: %d heads of size %d/%d (limits %d heads, size %d)",
                          l->num_heads, l->head_size, l->head_size_v, ATTN_MAX_HEADS,
                          ATTN_MAX_HEAD_SIZE);
    if (init->max_num_reqs < 1 || init->max_num_tokens < 1 || init->block_size < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "CPU_ATTN builder: max_num_reqs %d, max_num_tokens %d and block_size "
                          "%d must be positive",
                          init->max_num_reqs, init->max_num_tokens, init->block_size);
    if (init->num_threads < 0 || init->num_threads > 4096 || init->num_speculative_tokens < 0 ||
        init->num_speculative_tokens > 1024)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "CPU_ATTN builder: num_threads %d (0..4096) / num_speculative_tokens %d "
                          "(0..1024)",
                          init->num_threads, init->num_speculative_tokens);
    if (init->max_num_reqs > ATTN_MAX_NUM_REQS || init->max_num_tokens > ATTN_MAX_SEQ_LEN)
        return attn__fail(ATTN_OUT_OF_MEMORY,
                          "CPU_ATTN builder: %d requests / %d tokens is too large (at most %d / "
                          "%d)",
                          init->max_num_reqs, init->max_num_tokens, ATTN_MAX_NUM_REQS,
                          ATTN_MAX_SEQ_LEN);
    return ATTN_OK;
}

static attn_status cpu_builder_create(const attn_builder_init *init, void **state)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(init->layer);
    ATTN__CHECK_NULL(state);
    *state = NULL;
    const attn_layer_params *l = init->layer;
    attn_status st = cpu_builder_check_init(init);
    if (st != ATTN_OK) return st;
    cpu_builder *b = calloc(1, sizeof *b);
    if (!b) return attn__fail(ATTN_OUT_OF_MEMORY, "CPU_ATTN builder: out of memory");
    b->block_size = init->block_size;
    b->max_reqs = init->max_num_reqs;
    b->max_tokens = init->max_num_tokens;
    b->num_heads = l->num_heads;
    b->num_kv_heads = l->num_kv_heads;
    b->head_size_v = attn__fwd_head_size_v(l);
    b->window = l->sliding_window;
    b->attn_type = l->attn_type;
    attn_kv_dtype kvd = l->kv_cache_dtype;
    b->wide_kv = kvd == ATTN_KV_BFLOAT16 || kvd == ATTN_KV_FLOAT16 ||
                 ((kvd == ATTN_KV_AUTO || kvd == ATTN_KV_NONE) &&
                  (l->dtype == ATTN_DTYPE_BF16 || l->dtype == ATTN_DTYPE_FP16));
    b->threads =
        init->num_threads > 0 ? init->num_threads : attn__pool_threads(attn__pool_global());
    int g = l->num_heads / l->num_kv_heads;
    b->tile_tokens = attn__cpu_tile_tokens(g);
    b->prefill_tokens = attn__cpu_job_tokens(attn__cpu_attn_active(), g, l->head_size);
    /* every request can add one partially filled tile */
    int64_t tiles = (int64_t)init->max_num_tokens / b->tile_tokens + init->max_num_reqs;
    b->max_splits = 16 * b->threads + 16;
    b->max_tiles = (int)(tiles + b->max_splits);
    b->max_prefix_tiles = init->max_num_tokens / b->tile_tokens + 1;
    /* split parts: each part of a decode holds its query tokens */
    int dec = 1 + (init->num_speculative_tokens > 0 ? init->num_speculative_tokens : 0);
    b->md.decode_threshold = dec;
    b->split_slots = (int64_t)b->max_splits * dec;
    int64_t slot_bytes = (int64_t)l->num_heads * (b->head_size_v + 2) * (int64_t)sizeof(float);
    b->cascade_slots = init->max_num_tokens;
    if (b->cascade_slots * slot_bytes > ATTN_CPU_CASCADE_BYTES)
        b->cascade_slots = ATTN_CPU_CASCADE_BYTES / slot_bytes;
    b->md.partial_slots = b->split_slots > b->cascade_slots ? b->split_slots : b->cascade_slots;
    if (b->md.partial_slots * slot_bytes > ATTN_CPU_PARTIAL_BYTES) {
        int64_t bytes = b->md.partial_slots * slot_bytes;
        free(b);
        return attn__fail(ATTN_OUT_OF_MEMORY,
                          "CPU_ATTN builder: %lld bytes of split-KV partials is too large",
                          (long long)bytes);
    }
    b->md.magic = ATTN_CPU_MD_MAGIC;
    b->md.num_heads = l->num_heads;
    b->md.num_kv_heads = l->num_kv_heads;
    b->md.head_size_v = b->head_size_v;
    b->md.tiles = calloc((size_t)b->max_tiles, sizeof(attn__cpu_tile));
    b->md.prefix_tiles = calloc((size_t)b->max_prefix_tiles, sizeof(attn__cpu_tile));
    b->md.splits = calloc((size_t)b->max_splits, sizeof(attn__cpu_split));
    b->md.partials =
        calloc((size_t)(b->md.partial_slots * slot_bytes / (int64_t)sizeof(float)), sizeof(float));
    b->order = calloc((size_t)b->max_tiles, sizeof(int32_t));
    b->tmp = calloc((size_t)b->max_tiles, sizeof(attn__cpu_tile));
    if (!b->md.tiles || !b->md.prefix_tiles || !b->md.splits || !b->md.partials || !b->order ||
        !b->tmp) {
        free(b->md.tiles);
        free(b->md.prefix_tiles);
        free(b->md.splits);
        free(b->md.partials);
        free(b->order);
        free(b->tmp);
        free(b);
        return attn__fail(ATTN_OUT_OF_MEMORY, "CPU_ATTN builder: out of memory");
    }
    *state = b;
    return ATTN_OK;
}

static void cpu_builder_destroy(void *state)
{
    cpu_builder *b = state;
    if (!b) return;
    free(b->md.tiles);
    free(b->md.prefix_tiles);
    free(b->md.splits);
    free(b->md.partials);
    free(b->order);
    free(b->tmp);
    free(b);
}

static int req_kv_len(const cpu_builder *b, const attn_common_metadata *cm, int r)
{
    if (b->attn_type == ATTN_TYPE_ENCODER_DECODER && cm->encoder_seq_lens)
        return cm->encoder_seq_lens[r];
    return cm->seq_lens ? cm->seq_lens[r] : cm->query_start_loc[r + 1] - cm->query_start_loc[r];
}

/* In-place heap sort of order[] by tiles[].cost descending (no allocation). */
static void sift(int32_t *o, const attn__cpu_tile *t, int i, int n)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) return;
        /* min-heap on cost, so the sorted array ends up descending */
        if (c + 1 < n && t[o[c + 1]].cost < t[o[c]].cost) c++;
        if (t[o[i]].cost <= t[o[c]].cost) return;
        int32_t x = o[i];
        o[i] = o[c];
        o[c] = x;
        i = c;
    }
}

static void sort_by_cost(int32_t *o, const attn__cpu_tile *t, int n)
{
    for (int i = n / 2 - 1; i >= 0; i--)
        sift(o, t, i, n);
    for (int end = n - 1; end > 0; end--) {
        int32_t x = o[0];
        o[0] = o[end];
        o[end] = x;
        sift(o, t, 0, end);
    }
}

/* The batch fits the builder and has the shape attn_backend_forward checks */
static attn_status check_batch(const cpu_builder *b, const attn_common_metadata *cm)
{
    if (cm->num_reqs < 0 || cm->num_reqs > b->max_reqs || cm->num_actual_tokens < 0 ||
        cm->num_actual_tokens > b->max_tokens)
        return attn__fail(ATTN_BAD_METADATA,
                          "CPU_ATTN builder: batch of %d requests / %d tokens exceeds the "
                          "builder's maxima (%d / %d)",
                          cm->num_reqs, cm->num_actual_tokens, b->max_reqs, b->max_tokens);
    if (cm->num_reqs > 0 && !cm->seq_lens && b->attn_type == ATTN_TYPE_DECODER)
        return attn__fail(ATTN_BAD_METADATA, "CPU_ATTN builder: seq_lens is NULL");
    bool cross = b->attn_type == ATTN_TYPE_ENCODER_DECODER && cm->encoder_seq_lens;
    return attn__check_batch("CPU_ATTN builder", cm, cross);
}

/* cascade prefix: whole blocks, visible to every query (0: no cascade) */
static int cascade_prefix(const cpu_builder *b, const attn_common_metadata *cm,
                          int common_prefix_len)
{
    const int32_t *qsl = cm->query_start_loc;
    int bs = b->block_size;
    int P = 0;
    if (common_prefix_len > 0 && cm->num_reqs >= 2 && b->attn_type == ATTN_TYPE_DECODER &&
        cm->num_actual_tokens <= b->cascade_slots) {
        P = common_prefix_len;
        for (int r = 0; r < cm->num_reqs; r++) {
            int first_pos = req_kv_len(b, cm, r) - (qsl[r + 1] - qsl[r]);
            if (first_pos < P) P = first_pos;
        }
        P = P / bs * bs;
        if (P < 0) P = 0;
    }
    return P;
}

/* decode split size (0: no splitting): aim for ~4 units per thread over
 * the decode keys */
static int64_t decode_split_len(const cpu_builder *b, const attn_common_metadata *cm, int P)
{
    const int32_t *qsl = cm->query_start_loc;
    int bs = b->block_size;
    const attn__cpu_md *md = &b->md;
    int64_t dec_keys = 0;
    int n_dec = 0;
    for (int r = 0; r < cm->num_reqs; r++) {
        int qlen = qsl[r + 1] - qsl[r];
        if (qlen >= 1 && qlen <= md->decode_threshold) {
            dec_keys += req_kv_len(b, cm, r) - P;
            n_dec++;
        }
    }
    int64_t want_units = 4ll * b->threads;
    int64_t split_len = 0; /* 0: no splitting */
    /* units per decode request: its KV heads, run ATTN_CPU_DEC_HEADS to a
     * unit by the streaming decode kernel */
    int mh = attn__cpu_dec_heads(b->num_kv_heads, b->md.num_heads / b->num_kv_heads, b->wide_kv);
    int64_t dec_units = (b->num_kv_heads + mh - 1) / mh;
    if (P == 0 && n_dec > 0 && (int64_t)n_dec * dec_units < want_units) {
        int64_t per = dec_keys * dec_units / want_units;
        if (per < ATTN_CPU_MIN_SPLIT) per = ATTN_CPU_MIN_SPLIT;
        split_len = (per + bs - 1) / bs * bs;
    }
    return split_len;
}

/* phase A tiles of a cascade: every token against the P prefix keys */
static void prefix_tiles(cpu_builder *b, const attn_common_metadata *cm, int P)
{
    attn__cpu_md *md = &b->md;
    const int32_t *qsl = cm->query_start_loc;
    int tt = b->tile_tokens;
    md->use_cascade = true;
    md->prefix_len = P;
    int np = 0;
    for (int t0 = 0; t0 < cm->num_actual_tokens; t0 += tt) {
        attn__cpu_tile *t = &md->prefix_tiles[np++];
        int n = cm->num_actual_tokens - t0 < tt ? cm->num_actual_tokens - t0 : tt;
        int r = 0;
        while (qsl[r + 1] <= t0)
            r++;
        t->req = r;
        t->q0 = t0;
        t->nq = n;
        t->kb = 0;
        t->ke = P;
        t->part = t0;
        t->flags = ATTN_CPU_TILE_PREFIX;
        t->cost = (int64_t)P * n;
    }
    md->n_prefix_tiles = np;
}

/* a decode request's keys [kb0, kv) cut into nparts tiles (at tl) whose
 * partials land in slots slots_used.. and are merged by split sp */
static void split_tiles(attn__cpu_split *sp, attn__cpu_tile *tl, int r, int q0, int qlen, int kv,
                        int kb0, int nparts, int bs, int64_t slots_used)
{
    sp->req = r;
    sp->nparts = nparts;
    sp->slot0 = (int32_t)slots_used;
    int64_t per = ((int64_t)(kv - kb0) + nparts - 1) / nparts;
    per = (per + bs - 1) / bs * bs;
    for (int p = 0; p < nparts; p++) {
        attn__cpu_tile *t = &tl[p];
        t->req = r;
        t->q0 = q0;
        t->nq = qlen;
        t->kb = (int32_t)(kb0 + p * per);
        t->ke = (int32_t)(kb0 + (p + 1) * per < kv ? kb0 + (p + 1) * per : kv);
        if (t->kb > t->ke) t->kb = t->ke;
        t->part = (int32_t)(slots_used + (int64_t)p * qlen);
        t->flags = 0;
        t->cost = (int64_t)(t->ke - t->kb) * qlen + 64;
    }
}

static attn_status cpu_builder_build(void *state, int common_prefix_len,
                                     const attn_common_metadata *cm, bool fast_build,
                                     const void **md_out)
{
    (void)fast_build;
    ATTN__CHECK_NULL(state);
    ATTN__CHECK_NULL(cm);
    ATTN__CHECK_NULL(md_out);
    cpu_builder *b = state;
    attn__cpu_md *md = &b->md;
    attn_status st = check_batch(b, cm);
    if (st != ATTN_OK) return st;
    const int32_t *qsl = cm->query_start_loc;
    md->num_tokens = cm->num_actual_tokens;
    md->num_reqs = cm->num_reqs;
    md->n_tiles = md->n_prefix_tiles = md->n_splits = 0;
    md->use_cascade = false;
    md->prefix_len = 0;
    md->num_decodes = md->num_prefills = 0;
    bool causal = b->attn_type == ATTN_TYPE_DECODER && cm->causal;
    bool self = b->attn_type != ATTN_TYPE_ENCODER_DECODER;
    int bs = b->block_size;

    int P = cascade_prefix(b, cm, common_prefix_len);

    int64_t split_len = decode_split_len(b, cm, P);

    int tt = b->tile_tokens;
    int nt = 0, nsplit = 0;
    int64_t slots_used = 0;
    attn__cpu_tile *tl = b->tmp;
    for (int r = 0; r < cm->num_reqs; r++) {
        int qlen = qsl[r + 1] - qsl[r];
        int kv = req_kv_len(b, cm, r);
        if (qlen == 0) continue;
        bool decode = qlen <= md->decode_threshold;
        if (decode)
            md->num_decodes++;
        else
            md->num_prefills++;
        int kb0 = P; /* cascade: the prefix is done by phase A */
        int nparts = 1;
        if (decode && split_len > 0 && kv - kb0 > split_len && qlen <= b->tile_tokens) {
            nparts = (int)((kv - kb0 + split_len - 1) / split_len);
            if (nsplit >= b->max_splits || slots_used + (int64_t)nparts * qlen > b->split_slots ||
                nt + nparts > b->max_tiles)
                nparts = 1;
        }
        if (nparts > 1) {
            split_tiles(&md->splits[nsplit++], tl + nt, r, qsl[r], qlen, kv, kb0, nparts, bs,
                        slots_used);
            nt += nparts;
            slots_used += (int64_t)nparts * qlen;
            continue;
        }
        int step = decode ? tt : b->prefill_tokens; /* >= tt: max_tiles holds */
        for (int i0 = 0; i0 < qlen; i0 += step) {
            int n = qlen - i0 < step ? qlen - i0 : step;
            if (nt >= b->max_tiles)
                return attn__fail(ATTN_INTERNAL, "CPU_ATTN builder: tile capacity exceeded");
            attn__cpu_tile *t = &tl[nt++];
            int pos_first = kv - qlen + i0, pos_last = pos_first + n - 1;
            int lo = kb0, hi = kv; /* [lo, hi) */
            if (self && causal && pos_last + 1 < hi) hi = pos_last + 1;
            if (self && b->window > 0 && pos_first - b->window + 1 > lo)
                lo = pos_first - b->window + 1;
            if (hi < lo) hi = lo;
            t->req = r;
            t->q0 = qsl[r] + i0;
            t->nq = n;
            t->kb = lo;
            t->ke = hi;
            t->part = -1;
            t->flags = P > 0 ? ATTN_CPU_TILE_MERGE_PREFIX : 0;
            t->cost = (int64_t)(hi - lo) * n + 64;
        }
    }
    md->n_splits = nsplit;
    for (int i = 0; i < nt; i++)
        b->order[i] = i;
    sort_by_cost(b->order, tl, nt);
    for (int i = 0; i < nt; i++)
        md->tiles[i] = tl[b->order[i]];
    md->n_tiles = nt;

    if (P > 0) prefix_tiles(b, cm, P);
    *md_out = md;
    return ATTN_OK;
}

static attn_status cpu_builder_update_block_table(void *state, const void *md,
                                                  const int32_t *block_table, int stride,
                                                  const int64_t *slot_mapping, const void **new_md)
{
    (void)block_table;
    (void)stride;
    (void)slot_mapping;
    ATTN__CHECK_NULL(state);
    ATTN__CHECK_NULL(new_md);
    /* the tiles depend on lengths only; the kernel reads the block table
     * from the common metadata it is given */
    *new_md = md ? md : &((cpu_builder *)state)->md;
    return ATTN_OK;
}

static int cpu_builder_describe(const void *mdv, char *buf, size_t size)
{
    const attn__cpu_md *md = mdv;
    if (!md) return snprintf(buf, size, "null");
    int parts = 0;
    for (int i = 0; i < md->n_splits; i++)
        parts += md->splits[i].nparts;
    return snprintf(buf, size,
                    "{\"kind\": \"cpu_attn\", \"num_decodes\": %d, \"num_prefills\": %d, "
                    "\"decode_threshold\": %d, \"tiles\": %d, \"split_requests\": %d, "
                    "\"split_parts\": %d, \"use_cascade\": %s, \"prefix_len\": %d, "
                    "\"prefix_tiles\": %d}",
                    md->num_decodes, md->num_prefills, md->decode_threshold, md->n_tiles,
                    md->n_splits, parts, md->use_cascade ? "true" : "false", md->prefix_len,
                    md->n_prefix_tiles);
}

const attn_builder_ops attn__builder_cpu = {
    .struct_size = sizeof(attn_builder_ops),
    .type_name = "CPUAttentionMetadataBuilder",
    .cg_support = ATTN_CG_NEVER,
    .reorder_batch_threshold = 0,
    .supports_update_block_table = true,
    .create = cpu_builder_create,
    .destroy = cpu_builder_destroy,
    .build = cpu_builder_build,
    .update_block_table = cpu_builder_update_block_table,
    .describe = cpu_builder_describe,
};
