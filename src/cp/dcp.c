/* DCP: token placement, the local metadata of a rank and the step's
 * collective forward (see attn/dcp.h).
 *
 * The local batch: every query token becomes a one-token request over this
 * rank's keys at or before its position (attn_dcp_local_len(pos + 1)), so
 * that causality holds for decodes and chunked prefills alike; a token with
 * no local key is left out and contributes (0, -inf). The rows of a token
 * are copied to the local batch, computed by the backend's own builder and
 * kernel with the LSE, widened to fp32, gathered from every rank and
 * merged. A sliding window makes the visible local keys a suffix of
 * per-token length, so windowed layers run one kernel call per token with
 * that length as the window. All scratch is allocated at create. The
 * kernels are checked handles (attn/kernel.h), one per layer, on the
 * cache's device; on a device whose memory is not host-visible the local
 * queries are copied in once per step and the outputs and LSE out once. */
#include "attn/backend.h"
#include "attn/dcp.h"
#include "attn/device.h"
#include "attn/kernel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/merge.h"
#include "attn/mla.h"
#include "device/device_impl.h"
#include "util/abi.h"
#include "util/error.h"
#include "util/numeric.h"

struct attn_dcp {
    attn_dcp_init init;
    attn_layer_params layer; /* copy; the local batch has no sliding window */
    const attn_backend *b;
    attn_kernel **k; /* [num_layers] */
    int num_layers;
    attn_device *dev;
    bool hv;                /* host-visible: the kernels read d->q/out/lse */
    void *dq, *dout, *dlse; /* otherwise their copies in the device's memory */
    bool mla;
    int W, rank, I, H, Dq, Dv, window;
    attn_elem el;  /* the caller's q / out element */
    attn_elem pel; /* the local batch's: fp32 for standard attention */
    size_t esz, pesz;
    void *builder_state;
    attn_builder_ops builder;
    /* local batch */
    int32_t *qsl, *seq_lens, *block_table, *tok_of; /* tok_of: local row -> global token */
    int64_t *slots;
    void *q, *out;
    float *lse;
    void *mla_scratch;
    size_t mla_scratch_size;
    /* exchange: [W][tokens][H][Dv + 1] floats (Dv outputs then the LSE) */
    float *send, *recv, *merged, *merged_lse;
    attn_dcp_timing timing;
};

attn_status attn_dcp_check(int world_size, int rank, int interleave, int block_size)
{
    if (world_size < 1 || world_size > 1024 || rank < 0 || rank >= world_size)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "DCP: rank %d of world size %d (need 0 <= rank < "
                          "world size <= 1024)",
                          rank, world_size);
    if (interleave < 1 || block_size < 1 || block_size % interleave != 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "DCP: interleave size %d must be >= 1 and divide the block size %d",
                          interleave, block_size);
    return ATTN_OK;
}

int32_t attn_dcp_local_len(int32_t len, int world_size, int rank, int interleave)
{
    if (len <= 0 || world_size < 1 || interleave < 1) return 0;
    int64_t base = (int64_t)len / interleave / world_size * interleave;
    int64_t rem = (int64_t)len - base * world_size - (int64_t)rank * interleave;
    rem = rem < 0 ? 0 : rem > interleave ? interleave : rem;
    return (int32_t)(base + rem);
}

int attn_dcp_owner(int32_t pos, int world_size, int interleave, int block_size)
{
    int64_t vbs = (int64_t)block_size * world_size;
    return (int)(((int64_t)pos % vbs) / interleave % world_size);
}

int64_t attn_dcp_local_slot(int32_t pos, const int32_t *block_row, int world_size, int rank,
                            int interleave, int block_size)
{
    int64_t vbs = (int64_t)block_size * world_size;
    int64_t vb = pos / vbs, off = pos % vbs;
    if ((off / interleave) % world_size != rank) return -1;
    int64_t local = off / ((int64_t)world_size * interleave) * interleave + off % interleave;
    return (int64_t)block_row[vb] * block_size + local;
}

static double attn__dcp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static attn_status attn__dcp_check_init(const attn_dcp_init *in)
{
    if (!attn__struct_size_ok(in->struct_size, ATTN__V1_DCP_INIT, sizeof(attn_dcp_init)) ||
        !in->backend || !in->layer || !in->comm)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_dcp_create: struct_size, backend, layer and comm are required");
    const attn_backend_desc *d = in->backend->desc;
    if (!d) return attn__fail(ATTN_INVALID_ARGUMENT, "attn_dcp_create: backend has no descriptor");
    attn_status st = attn_merge_check_backend(d);
    if (st != ATTN_OK) return st;
    if (!in->backend->kernel || !d->builder)
        return attn__fail(ATTN_UNSUPPORTED, "DCP: %s has no kernel code or builder here", d->name);
    const attn_layer_params *l = in->layer;
    if (l->sinks || l->alibi_slopes)
        return attn__fail(ATTN_UNSUPPORTED,
                          "DCP with %s is not supported: it needs one softmax denominator / global "
                          "key positions",
                          l->sinks ? "attention sinks" : "ALiBi");
    if (d->is_mla && l->sliding_window > 0)
        return attn__fail(ATTN_UNSUPPORTED, "DCP: MLA with a sliding window is not supported");
    if (d->is_mla && !attn_device_host_visible(in->device))
        return attn__fail(ATTN_UNSUPPORTED,
                          "DCP: MLA on device %s: its projections need host-visible memory",
                          attn_device_name(in->device));
    if (in->num_layers < 0 || in->num_layers > ATTN_MAX_LAYERS)
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_dcp_create: num_layers %d", in->num_layers);
    if (l->num_heads < 1 || l->head_size < 1 || in->max_num_tokens < 1 ||
        in->max_blocks_per_req < 1 || in->num_blocks < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_dcp_create: heads %d, head size %d, max tokens %d, max blocks per "
                          "request %d, blocks %d must be positive",
                          l->num_heads, l->head_size, in->max_num_tokens, in->max_blocks_per_req,
                          in->num_blocks);
    if (in->max_num_tokens > (1 << 24) || in->max_blocks_per_req > (1 << 24))
        return attn__fail(ATTN_OUT_OF_RANGE, "attn_dcp_create: max tokens %d / blocks %d too large",
                          in->max_num_tokens, in->max_blocks_per_req);
    return attn_dcp_check(attn_comm_size(in->comm), attn_comm_rank(in->comm),
                          in->interleave ? in->interleave : 1, in->block_size);
}

static void *attn__dcp_alloc(size_t n, size_t size, bool *oom)
{
    if (n == 0) n = 1;
    void *p = n <= SIZE_MAX / size ? calloc(n, size) : NULL;
    if (!p) *oom = true;
    return p;
}

/* One checked kernel per layer for the local layer, on the cache's device,
 * and the device copies of the local batch when its memory is not
 * host-visible. */
static attn_status attn__dcp_kernels(attn_dcp *d)
{
    d->num_layers = d->init.num_layers > 0 ? d->init.num_layers : 1;
    d->k = calloc((size_t)d->num_layers, sizeof *d->k);
    if (!d->k) return attn__fail(ATTN_OUT_OF_MEMORY, "attn_dcp_create: out of memory");
    for (int l = 0; l < d->num_layers; l++) {
        attn_status st = attn_kernel_open(d->b, &d->layer, d->dev, &d->k[l]);
        if (st != ATTN_OK) return st;
    }
    if (d->hv) return ATTN_OK;
    size_t rows = (size_t)d->init.max_num_tokens * (size_t)d->H;
    attn_status st;
    if ((st = attn_device_alloc(d->dev, rows * (size_t)d->Dq * d->pesz, ATTN_MEM_STEP, &d->dq)) !=
            ATTN_OK ||
        (st = attn_device_alloc(d->dev, rows * (size_t)d->Dv * d->pesz, ATTN_MEM_STEP, &d->dout)) !=
            ATTN_OK ||
        (st = attn_device_alloc(d->dev, rows * sizeof(float), ATTN_MEM_STEP, &d->dlse)) != ATTN_OK)
        return st;
    return ATTN_OK;
}

attn_status attn_dcp_create(const attn_dcp_init *init, attn_dcp **out)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(out);
    *out = NULL;
    attn_dcp_init full = {0}; /* an older init: the fields it lacks are 0 */
    if (attn__struct_size_ok(init->struct_size, ATTN__V1_DCP_INIT, sizeof full)) {
        attn__struct_read(&full, sizeof full, init, init->struct_size,
                          offsetof(attn_dcp_init, struct_size));
        init = &full;
    }
    attn_status st = attn__dcp_check_init(init);
    if (st != ATTN_OK) return st;
    attn_dcp *d = calloc(1, sizeof *d);
    if (!d) return attn__fail(ATTN_OUT_OF_MEMORY, "attn_dcp_create: out of memory");
    d->init = *init;
    d->b = init->backend;
    d->dev = init->device;
    d->hv = attn_device_host_visible(d->dev);
    d->layer = *init->layer;
    d->window = d->layer.sliding_window;
    d->layer.sliding_window = 0;
    d->mla = d->b->desc->is_mla;
    d->W = attn_comm_size(init->comm);
    d->rank = attn_comm_rank(init->comm);
    d->I = init->interleave ? init->interleave : 1;
    d->H = d->layer.num_heads;
    if (d->mla) {
        d->Dq = d->layer.qk_nope_head_dim + d->layer.qk_rope_head_dim;
        d->Dv = d->layer.v_head_dim;
    } else {
        d->Dq = d->layer.head_size;
        d->Dv = d->layer.head_size_v ? d->layer.head_size_v : d->layer.head_size;
    }
    d->el = attn_dtype_elem(d->layer.dtype);
    d->esz = attn_elem_size(d->el);
    /* Standard attention runs the local part in fp32 (queries widen
     * exactly), so that the merged output is rounded to the model dtype
     * once, as one process does; MLA keeps the model dtype (its weights are
     * in it). The cache keeps its own element type. */
    if (!d->mla && d->layer.dtype != ATTN_DTYPE_FP32) {
        if (d->layer.kv_cache_dtype == ATTN_KV_AUTO)
            d->layer.kv_cache_dtype =
                d->layer.dtype == ATTN_DTYPE_BF16 ? ATTN_KV_BFLOAT16 : ATTN_KV_FLOAT16;
        d->layer.dtype = ATTN_DTYPE_FP32;
    }
    d->pel = attn_dtype_elem(d->layer.dtype);
    d->pesz = attn_elem_size(d->pel);
    int T = init->max_num_tokens;
    size_t rows = (size_t)T * (size_t)d->H, row = (size_t)d->Dv + 1;
    bool oom = false;
    d->qsl = attn__dcp_alloc((size_t)T + 1, sizeof(int32_t), &oom);
    d->seq_lens = attn__dcp_alloc((size_t)T, sizeof(int32_t), &oom);
    d->tok_of = attn__dcp_alloc((size_t)T, sizeof(int32_t), &oom);
    d->block_table =
        attn__dcp_alloc((size_t)T * (size_t)init->max_blocks_per_req, sizeof(int32_t), &oom);
    d->slots = attn__dcp_alloc((size_t)T, sizeof(int64_t), &oom);
    d->q = attn__dcp_alloc(rows * (size_t)d->Dq, d->pesz, &oom);
    d->out = attn__dcp_alloc(rows * (size_t)d->Dv, d->pesz, &oom);
    d->lse = attn__dcp_alloc(rows, sizeof(float), &oom);
    d->send = attn__dcp_alloc(rows * row, sizeof(float), &oom);
    d->recv = attn__dcp_alloc(rows * row * (size_t)d->W, sizeof(float), &oom);
    d->merged = attn__dcp_alloc(rows * (size_t)d->Dv, sizeof(float), &oom);
    d->merged_lse = attn__dcp_alloc(rows, sizeof(float), &oom);
    if (d->mla && !oom) {
        d->mla_scratch_size = attn_mla_forward_scratch_size(&d->layer, T);
        d->mla_scratch = aligned_alloc(64, (d->mla_scratch_size + 63) / 64 * 64 + 64);
        oom = !d->mla_scratch;
    }
    if (oom) {
        attn_dcp_free(d);
        return attn__fail(ATTN_OUT_OF_MEMORY, "attn_dcp_create: out of memory for %d tokens", T);
    }
    if ((st = attn__dcp_kernels(d)) != ATTN_OK) {
        attn_dcp_free(d);
        return st;
    }
    d->builder = *d->b->desc->builder;
    attn_builder_init bi = {
        .desc = d->b->desc,
        .layer = &d->layer,
        .block_size = init->block_size,
        .num_blocks = init->num_blocks,
        .max_num_reqs = T,
        .max_num_tokens = T,
        .max_blocks_per_req = init->max_blocks_per_req,
        .num_threads = init->num_threads,
        .device = d->dev,
        .device_state = d->dev ? d->dev->state : NULL,
    };
    st = d->builder.create(&bi, &d->builder_state);
    if (st != ATTN_OK) {
        d->builder_state = NULL;
        attn_dcp_free(d);
        return st;
    }
    *out = d;
    return ATTN_OK;
}

void attn_dcp_free(attn_dcp *d)
{
    if (!d) return;
    if (d->builder_state && d->builder.destroy) d->builder.destroy(d->builder_state);
    for (int l = 0; d->k && l < d->num_layers; l++)
        attn_kernel_close(d->k[l]);
    free(d->k);
    if (!d->hv) {
        attn_device_free(d->dev, d->dq);
        attn_device_free(d->dev, d->dout);
        attn_device_free(d->dev, d->dlse);
    }
    free(d->qsl);
    free(d->seq_lens);
    free(d->tok_of);
    free(d->block_table);
    free(d->slots);
    free(d->q);
    free(d->out);
    free(d->lse);
    free(d->send);
    free(d->recv);
    free(d->merged);
    free(d->merged_lse);
    free(d->mla_scratch);
    free(d);
}

int attn_dcp_world_size(const attn_dcp *d)
{
    return d ? d->W : 0;
}

int attn_dcp_rank(const attn_dcp *d)
{
    return d ? d->rank : -1;
}

/* Token t's request and position; false on inconsistent metadata. */
static attn_status attn__dcp_check_cm(const attn_dcp *d, const attn_common_metadata *cm)
{
    if (!cm->query_start_loc || !cm->seq_lens || !cm->block_table || cm->num_reqs < 0)
        return attn__fail(ATTN_BAD_METADATA, "DCP: metadata without query_start_loc, seq_lens or "
                                             "block_table");
    if (cm->num_actual_tokens > d->init.max_num_tokens || cm->num_actual_tokens < 0 ||
        cm->query_start_loc[0] != 0 || cm->query_start_loc[cm->num_reqs] != cm->num_actual_tokens)
        return attn__fail(ATTN_BAD_METADATA, "DCP: %d tokens (at most %d) or query_start_loc off",
                          cm->num_actual_tokens, d->init.max_num_tokens);
    if (cm->block_size != d->init.block_size || cm->block_table_stride < 1)
        return attn__fail(ATTN_BAD_METADATA, "DCP: block size %d (runner %d), stride %d",
                          cm->block_size, d->init.block_size, cm->block_table_stride);
    int64_t vbs = (int64_t)cm->block_size * d->W;
    for (int r = 0; r < cm->num_reqs; r++) {
        int32_t q0 = cm->query_start_loc[r], q1 = cm->query_start_loc[r + 1];
        if (q1 < q0 || q1 - q0 > cm->seq_lens[r] ||
            (cm->seq_lens[r] + vbs - 1) / vbs > cm->block_table_stride ||
            (cm->seq_lens[r] + vbs - 1) / vbs > d->init.max_blocks_per_req)
            return attn__fail(ATTN_BAD_METADATA,
                              "DCP: request %d has %d query tokens, seq len %d, %d blocks", r,
                              q1 - q0, cm->seq_lens[r], cm->block_table_stride);
    }
    return ATTN_OK;
}

static int32_t attn__dcp_pos(const attn_common_metadata *cm, int r, int t)
{
    if (cm->positions) return cm->positions[t];
    int32_t qlen = cm->query_start_loc[r + 1] - cm->query_start_loc[r];
    return cm->seq_lens[r] - qlen + (t - cm->query_start_loc[r]);
}

attn_status attn_dcp_slot_mapping(const attn_dcp *d, const attn_common_metadata *cm, int64_t *slots)
{
    ATTN__CHECK_NULL(d);
    ATTN__CHECK_NULL(cm);
    ATTN__CHECK_NULL(slots);
    attn_status st = attn__dcp_check_cm(d, cm);
    if (st != ATTN_OK) return st;
    for (int r = 0; r < cm->num_reqs; r++) {
        const int32_t *row = cm->block_table + (size_t)r * (size_t)cm->block_table_stride;
        for (int t = cm->query_start_loc[r]; t < cm->query_start_loc[r + 1]; t++) {
            int32_t p = attn__dcp_pos(cm, r, t);
            slots[t] = p < 0 || p >= cm->seq_lens[r]
                           ? -1
                           : attn_dcp_local_slot(p, row, d->W, d->rank, d->I, cm->block_size);
        }
    }
    return ATTN_OK;
}

/* Local batch rows [k0, k1) -> one kernel call over d->q/out/lse. */
static attn_status attn__dcp_run(attn_dcp *d, const attn_dcp_args *a, int li, int k0, int k1,
                                 int window)
{
    const attn_common_metadata *g = a->cm;
    int n = k1 - k0;
    int stride = g->block_table_stride;
    int32_t *qsl = d->qsl + k0; /* local requests k are tokens: qsl[k] = k */
    int32_t maxlen = 0;
    for (int k = 0; k < n; k++)
        maxlen = d->seq_lens[k0 + k] > maxlen ? d->seq_lens[k0 + k] : maxlen;
    attn_common_metadata cm = {
        .query_start_loc = qsl,
        .seq_lens = d->seq_lens + k0,
        .num_reqs = n,
        .num_actual_tokens = n,
        .max_query_len = 1,
        .max_seq_len = maxlen,
        .block_table = d->block_table + (size_t)k0 * (size_t)stride,
        .block_table_stride = stride,
        .slot_mapping = d->slots + k0,
        .causal = true,
        .block_size = g->block_size,
    };
    /* query_start_loc must start at 0 for this call */
    int32_t base = qsl[0];
    for (int k = 0; k <= n; k++)
        qsl[k] -= base;
    attn_layer_params layer = d->layer;
    layer.sliding_window = window;
    const void *md = NULL;
    attn_status st = ATTN_OK;
    if (window == 0) st = d->builder.build(d->builder_state, 0, &cm, false, &md);
    /* rows [k0, k1) of the local batch: offsets into whole allocations */
    int64_t r0 = (int64_t)k0 * d->H;
    attn_kernel *kern = d->k[li];
    if (st == ATTN_OK && d->mla) {
        attn_mla_args ma = {.layer = &layer,
                            .common = &cm,
                            .metadata = md,
                            .kv = a->kv,
                            .q = d->q,
                            .out = d->out,
                            .lse = d->lse,
                            .w_uk = a->w_uk,
                            .w_uv = a->w_uv,
                            .q_offset = r0 * d->Dq,
                            .out_offset = r0 * d->Dv,
                            .lse_offset = r0};
        st = attn_kernel_mla_forward(kern, &ma, d->mla_scratch, d->mla_scratch_size);
    } else if (st == ATTN_OK) {
        attn_forward_args fa = {.layer = &layer,
                                .common = &cm,
                                .metadata = md,
                                .q = d->hv ? d->q : d->dq,
                                .kv = a->kv,
                                .out = d->hv ? d->out : d->dout,
                                .lse = d->hv ? d->lse : d->dlse,
                                .q_offset = r0 * d->Dq,
                                .out_offset = r0 * d->Dv,
                                .lse_offset = r0};
        st = attn_kernel_forward(kern, &fa);
    }
    for (int k = 0; k <= n; k++)
        qsl[k] += base;
    return st;
}

/* The local batch: tokens with local keys, their rows of q. Returns the
 * count; windows[k] is the local window of row k (0 = none). */
static int attn__dcp_gather(attn_dcp *d, const attn_dcp_args *a, int32_t *windows)
{
    const attn_common_metadata *cm = a->cm;
    int stride = cm->block_table_stride, nk = 0;
    size_t qrow = (size_t)d->H * (size_t)d->Dq * d->esz, qn = (size_t)d->H * (size_t)d->Dq;
    for (int r = 0; r < cm->num_reqs; r++) {
        const int32_t *row = cm->block_table + (size_t)r * (size_t)stride;
        for (int t = cm->query_start_loc[r]; t < cm->query_start_loc[r + 1]; t++) {
            int32_t p = attn__dcp_pos(cm, r, t);
            int32_t n = attn_dcp_local_len(p + 1, d->W, d->rank, d->I);
            int32_t w = 0;
            if (d->window > 0 && p + 1 > d->window) {
                int32_t s0 = attn_dcp_local_len(p + 1 - d->window, d->W, d->rank, d->I);
                if (s0 >= n) continue; /* no local key inside the window */
                if (s0 > 0) w = n - s0;
            }
            if (n <= 0) continue;
            d->tok_of[nk] = t;
            d->qsl[nk] = nk;
            d->seq_lens[nk] = n;
            d->slots[nk] = -1;
            windows[nk] = w;
            int nb = (int)((n + cm->block_size - 1) / cm->block_size);
            memcpy(d->block_table + (size_t)nk * (size_t)stride, row, (size_t)nb * sizeof(int32_t));
            if (d->pel == d->el)
                memcpy((char *)d->q + (size_t)nk * qrow, (const char *)a->q + (size_t)t * qrow,
                       qrow);
            else
                for (size_t i = 0; i < qn; i++)
                    ((float *)d->q)[(size_t)nk * qn + i] =
                        attn__load_elem(a->q, d->el, (size_t)t * qn + i);
            nk++;
        }
    }
    d->qsl[nk] = nk;
    return nk;
}

attn_status attn_dcp_forward(attn_dcp *d, const attn_dcp_args *a)
{
    ATTN__CHECK_NULL(d);
    ATTN__CHECK_NULL(a);
    ATTN__CHECK_NULL(a->cm);
    ATTN__CHECK_NULL(a->kv);
    attn_status st = attn__dcp_check_cm(d, a->cm);
    if (st != ATTN_OK) return st;
    if (a->layer < 0 || a->layer >= d->num_layers)
        return attn__fail(ATTN_OUT_OF_RANGE, "attn_dcp_forward: layer %d outside 0..%d", a->layer,
                          d->num_layers - 1);
    if (a->cm->num_actual_tokens > 0 && (!a->q || !a->out))
        return attn__fail(ATTN_NULL_ARGUMENT, "attn_dcp_forward: q and out are required");
    double t0 = attn__dcp_now();
    const int T = a->cm->num_actual_tokens, H = d->H, Dv = d->Dv;
    const size_t rows = (size_t)T * (size_t)H;
    /* the per-row windows live in merged_lse, unused until the merge */
    int32_t *windows = (int32_t *)d->merged_lse;
    int nk = attn__dcp_gather(d, a, windows);
    size_t qb = (size_t)nk * (size_t)H * (size_t)d->Dq * d->pesz;
    size_t ob = (size_t)nk * (size_t)H * (size_t)Dv * d->pesz;
    if (!d->hv && nk > 0) st = attn_device_copy_in(d->dev, d->dq, 0, d->q, qb);
    if (st == ATTN_OK && d->window == 0) {
        if (nk > 0) st = attn__dcp_run(d, a, a->layer, 0, nk, 0);
    } else {
        for (int k = 0; k < nk && st == ATTN_OK; k++)
            st = attn__dcp_run(d, a, a->layer, k, k + 1, windows[k]);
    }
    if (st == ATTN_OK && !d->hv && nk > 0 &&
        (st = attn_device_copy_out(d->dev, d->out, d->dout, 0, ob)) == ATTN_OK)
        st = attn_device_copy_out(d->dev, d->lse, d->dlse, 0,
                                  (size_t)nk * (size_t)H * sizeof(float));
    if (st != ATTN_OK) return st;
    /* this rank's part: outputs [T][H][Dv] then LSE [T][H], fp32 */
    float *po = d->send, *pl = d->send + rows * (size_t)Dv;
    for (size_t i = 0; i < rows * (size_t)Dv; i++)
        po[i] = 0.0f;
    for (size_t i = 0; i < rows; i++)
        pl[i] = -INFINITY;
    for (int k = 0; k < nk; k++) {
        size_t dst = (size_t)d->tok_of[k] * (size_t)H, src = (size_t)k * (size_t)H;
        for (int h = 0; h < H; h++) {
            for (int e = 0; e < Dv; e++)
                po[(dst + (size_t)h) * (size_t)Dv + (size_t)e] =
                    attn__load_elem(d->out, d->pel, (src + (size_t)h) * (size_t)Dv + (size_t)e);
            pl[dst + (size_t)h] = d->lse[src + (size_t)h];
        }
    }
    double t1 = attn__dcp_now();
    size_t part = rows * ((size_t)Dv + 1);
    st = attn_comm_exchange(d->init.comm, ATTN_COMM_DCP_PARTIAL, d->send, part * sizeof(float),
                            d->recv);
    if (st != ATTN_OK) return st;
    double t2 = attn__dcp_now();
    attn_partial_state parts[1024];
    for (int i = 0; i < d->W; i++) {
        const float *blk = d->recv + (size_t)i * part;
        parts[i] = (attn_partial_state){
            .out = blk, .lse = blk + rows * (size_t)Dv, .base = d->b->desc->lse_base};
    }
    st = attn_merge_states(parts, d->W, (int64_t)rows, Dv, d->merged, d->merged_lse);
    if (st != ATTN_OK) return st;
    for (size_t i = 0; i < rows * (size_t)Dv; i++)
        attn__store_elem(a->out, d->el, i, d->merged[i]);
    if (a->lse) memcpy(a->lse, d->merged_lse, rows * sizeof(float));
    double t3 = attn__dcp_now();
    d->timing = (attn_dcp_timing){.local_ns = t1 - t0,
                                  .exchange_ns = t2 - t1,
                                  .merge_ns = t3 - t2,
                                  .exchange_bytes = (uint64_t)(part * sizeof(float))};
    return ATTN_OK;
}

attn_status attn_dcp_last_timing(const attn_dcp *d, attn_dcp_timing *t)
{
    ATTN__CHECK_NULL(d);
    ATTN__CHECK_NULL(t);
    *t = d->timing;
    return ATTN_OK;
}

attn_status attn_dcp_agree(attn_comm *comm, const char *choice, char *msg, size_t size)
{
    ATTN__CHECK_NULL(comm);
    ATTN__CHECK_NULL(choice);
    int W = attn_comm_size(comm);
    char mine[ATTN_DCP_CHOICE_MAX] = {0};
    snprintf(mine, sizeof mine, "%s", choice);
    char *all = calloc((size_t)W, sizeof mine);
    if (!all) return attn__fail(ATTN_OUT_OF_MEMORY, "attn_dcp_agree: out of memory");
    attn_status st = attn_comm_exchange(comm, ATTN_COMM_DCP_CHOICE, mine, sizeof mine, all);
    bool same = true;
    for (int i = 1; st == ATTN_OK && i < W; i++)
        same = same && strcmp(all, all + (size_t)i * sizeof mine) == 0;
    if (st == ATTN_OK && !same) {
        char buf[4096];
        int n = snprintf(buf, sizeof buf, "DCP ranks disagree on the attention setup:");
        for (int i = 0; i < W && n > 0 && (size_t)n < sizeof buf; i++)
            n += snprintf(buf + n, sizeof buf - (size_t)n, "%s rank %d: %s", i ? ";" : "", i,
                          all + (size_t)i * sizeof mine);
        if (msg && size) snprintf(msg, size, "%s", buf);
        st = attn__fail(ATTN_BACKEND_INVALID, "%s", buf);
    } else if (st != ATTN_OK && msg && size) {
        snprintf(msg, size, "%s", attn_last_error());
    }
    free(all);
    return st;
}
