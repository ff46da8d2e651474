/* The step's batch, its metadata and the attention calls.
 *
 * The batch is laid out decodes-first by the smallest builder reorder
 * threshold; the common metadata goes into the engine's buffers with each
 * group's own block table and slot mapping; each group's builder builds, or
 * swaps the block table into an earlier group's metadata when the two
 * share a builder type and spec. Attention then runs per layer: the
 * caller's io.inputs writes Q/K/V, the engine writes K/V into the cache and
 * calls the kernel, io.outputs reads the output. Callback time is kept out
 * of attention_ns (io_ns). */
#include <string.h>
#include <time.h>

#include "attn/dcp.h"
#include "attn/kernel.h"
#include "attn/mla.h"
#include "engine/engine_impl.h"
#include "metadata/builders.h"
#include "model/model_impl.h"
#include "util/error.h"

double attn__engine_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

void attn__engine_build_batch(attn_engine *e, attn_engine_step_stats *st)
{
    const int n = e->num_sched, bs = e->block_size, sbs = e->sched_block_size;
    for (int i = 0; i < n; i++)
        e->qlens[i] = e->reqs[e->sched[i]].scheduled;
    attn__reorder_decodes_first(e->qlens, n, e->reorder_threshold, e->order);
    int32_t tok = 0, max_q = 0, max_s = 0;
    e->qsl[0] = 0;
    for (int b = 0; b < n; b++) {
        attn__eng_req *r = &e->reqs[e->sched[e->order[b]]];
        int32_t q = r->scheduled, seq = r->num_computed + q;
        r->order_pos = b;
        e->seq_lens[b] = seq;
        e->is_prefilling[b] = r->num_computed < r->prompt_len;
        for (int32_t j = 0; j < q; j++) {
            e->positions[tok + j] = r->num_computed + j;
            e->token_req_id[tok + j] = r->id;
        }
        tok += q;
        e->qsl[b + 1] = tok;
        max_q = q > max_q ? q : max_q;
        max_s = seq > max_s ? seq : max_s;
        if (q == 1 && r->num_computed >= r->prompt_len) {
            st->num_decode_reqs++;
            st->num_decode_tokens++;
        } else {
            st->num_prefill_reqs++;
            st->num_prefill_tokens += q;
        }
        for (int g = 0; g < e->num_groups; g++) {
            attn__eng_group *gr = &e->groups[g];
            const attn_block_list *l = attn__list(e, r, g);
            int32_t *row = gr->block_table + (size_t)b * (size_t)e->max_blocks;
            int nblk = (seq + sbs - 1) / sbs;
            memcpy(row, l->ids, sizeof(int32_t) * (size_t)nblk);
            int64_t *sl = gr->slot_mapping + (tok - q);
            for (int32_t j = 0; j < q; j++) {
                int32_t pos = r->num_computed + j;
                /* under DCP the rank's slots come from attn_dcp_slot_mapping */
                sl[j] = e->dcp_world > 1 ? -1 : (int64_t)row[pos / bs] * bs + pos % bs;
            }
        }
    }
    st->num_reqs = n;
    st->num_tokens = tok;
    for (int g = 0; g < e->num_groups; g++) {
        attn__eng_group *gr = &e->groups[g];
        attn_common_metadata cm = {
            .query_start_loc = e->qsl,
            .seq_lens = e->seq_lens,
            .num_reqs = n,
            .num_actual_tokens = tok,
            .max_query_len = max_q,
            .max_seq_len = max_s,
            .block_table = gr->block_table,
            .block_table_stride = e->max_blocks,
            .slot_mapping = gr->slot_mapping,
            .causal = true,
            .block_size = bs,
            .positions = e->positions,
            .is_prefilling = e->is_prefilling,
        };
        gr->cm = cm;
    }
}

attn_status attn__engine_build_metadata(attn_engine *e, attn_engine_step_stats *st)
{
    /* Under DCP the block table counts scheduler blocks; each rank's runner
     * checks it and builds its own local metadata (attn_dcp_forward). */
    if (e->dcp_world > 1) return ATTN_OK;
    for (int g = 0; g < e->num_groups; g++) {
        attn__eng_group *gr = &e->groups[g];
        attn_status s;
        if (e->cfg.check_metadata &&
            (s = attn_common_metadata_check(&gr->cm, e->num_blocks)) != ATTN_OK)
            return s;
        gr->common_prefix_len = attn__common_prefix_len(&gr->cm);
        gr->reused = false;
        gr->built = false;
        int from = gr->share_with >= 0 && e->groups[gr->share_with].built ? gr->share_with : -1;
        if (from >= 0) {
            s = gr->builder.update_block_table(gr->builder_state, e->groups[from].md,
                                               gr->block_table, e->max_blocks, gr->slot_mapping,
                                               &gr->md);
            if (s == ATTN_OK) {
                gr->reused = true;
                gr->common_prefix_len = e->groups[from].common_prefix_len;
                st->block_table_updates++;
                continue;
            }
            attn_clear_error(); /* e.g. a cascade prefix this table does not share: build */
        }
        s = gr->builder.build(gr->builder_state, gr->common_prefix_len, &gr->cm, false, &gr->md);
        if (s != ATTN_OK) return s;
        st->builds++;
        gr->built = true;
    }
    return ATTN_OK;
}

/* ---- attention ---------------------------------------------------------------- */

static attn_status attn__kernel_md(attn__eng_group *g, attn__eng_kernel *k)
{
    if (!k->own_builder) {
        k->md = g->md;
        return ATTN_OK;
    }
    return k->builder.build(k->builder_state, g->common_prefix_len, &g->cm, false, &k->md);
}

/* One layer's attention on the kernel's device: q and out are the
 * device's step buffers (the staging buffers on a host-visible device). */
static attn_status attn__forward(attn_engine *e, attn__eng_group *g, attn__eng_kernel *k, int l,
                                 const attn_kv_view *view)
{
    if (g->spec.use_mla) {
        attn_mla_args a = {.common = &g->cm,
                           .metadata = k->md,
                           .kv = view,
                           .q = k->dev->q,
                           .out = k->dev->out,
                           .w_uk = g->w_uk,
                           .w_uv = g->w_uv};
        return attn_kernel_mla_forward(k->k[l], &a, e->mla_scratch, e->mla_scratch_size);
    }
    attn_forward_args a = {
        .common = &g->cm, .metadata = k->md, .q = k->dev->q, .kv = view, .out = k->dev->out};
    return attn_kernel_forward(k->k[l], &a);
}

/* DCP: this rank's write slots and, for the first group, the KV tokens
 * the batch's requests hold here and on all ranks. */
static attn_status attn__dcp_step(attn_engine *e, attn__eng_group *g, int gi,
                                  attn_engine_step_stats *st)
{
    attn_status s = attn_dcp_slot_mapping(g->dcp, &g->cm, g->dcp_slots);
    if (s != ATTN_OK || gi != 0) return s;
    int W = attn_dcp_world_size(g->dcp), rank = attn_dcp_rank(g->dcp);
    int I = e->cfg.dcp_interleave ? e->cfg.dcp_interleave : 1;
    for (int r = 0; r < g->cm.num_reqs; r++) {
        st->kv_tokens_total += g->cm.seq_lens[r];
        st->kv_tokens_local += attn_dcp_local_len(g->cm.seq_lens[r], W, rank, I);
    }
    return ATTN_OK;
}

static attn_status attn__dcp_forward(attn_engine *e, attn__eng_group *g, int l,
                                     const attn_kv_view *view, attn_engine_step_stats *st)
{
    attn_dcp_args a = {.cm = &g->cm,
                       .kv = view,
                       .layer = l,
                       .q = e->q,
                       .out = e->out,
                       .w_uk = g->w_uk,
                       .w_uv = g->w_uv};
    attn_status s = attn_dcp_forward(g->dcp, &a);
    attn_dcp_timing t;
    if (s == ATTN_OK && st && attn_dcp_last_timing(g->dcp, &t) == ATTN_OK) {
        st->dcp_local_ns += t.local_ns;
        st->dcp_exchange_ns += t.exchange_ns;
        st->dcp_merge_ns += t.merge_ns;
    }
    return s;
}

/* Calls one of the caller's io callbacks, timing it into io_ns. */
static attn_status attn__io(attn_engine *e, attn_status (*fn)(void *, const attn_engine_layer_io *),
                            const attn_engine_layer_io *io, attn_engine_step_stats *st)
{
    if (!fn) return ATTN_OK;
    double t0 = attn__engine_now_ns();
    attn_status s = fn(e->cfg.io.user, io);
    st->io_ns += attn__engine_now_ns() - t0;
    return s;
}

/* The layer call of KV group g, minus the layer and its KV view. */
static attn_engine_layer_io attn__kv_io(attn_engine *e, attn__eng_group *g, int gi)
{
    const attn_layer_rows *r = attn_kernel_rows(g->run.k[0]);
    attn_engine_layer_io io = {
        .group = gi,
        .elem = attn_dtype_elem(attn_model_dtype(e->model)),
        .num_tokens = g->cm.num_actual_tokens,
        .token_req_ids = e->token_req_id,
        .positions = e->positions,
        .q_heads = r->q_heads,
        .q_dim = r->q_dim,
        .k_heads = r->kv_heads,
        .k_dim = r->k_dim,
        .v_heads = r->kv_heads,
        .v_dim = r->v_dim,
        .out_dim = r->out_dim,
        .q = e->q,
        .k = e->k,
        .v = e->v,
        .out = e->out,
        .params = &g->params,
        .common = &g->cm,
        .common_prefix_len = g->common_prefix_len,
        .w_uk = g->w_uk,
        .w_uv = g->w_uv,
    };
    return io;
}

/* The caller's q, k and v of this layer into the device's step buffers
 * (nothing to do on a host-visible device). */
static attn_status attn__inputs_in(const attn__eng_dev *d, const attn_engine_layer_io *io, bool q)
{
    size_t esz = attn_elem_size(io->elem), T = (size_t)io->num_tokens;
    attn_status s = ATTN_OK;
    if (q) s = attn__eng_dev_in(d, d->q, io->q, T * (size_t)io->q_heads * io->q_dim * esz);
    if (s == ATTN_OK)
        s = attn__eng_dev_in(d, d->k, io->k, T * (size_t)io->k_heads * io->k_dim * esz);
    if (s == ATTN_OK)
        s = attn__eng_dev_in(d, d->v, io->v, T * (size_t)io->v_heads * io->v_dim * esz);
    return s;
}

/* One layer of KV group g: inputs, K/V written, the kernel, outputs. The
 * K/V come from the device's buffers; DCP takes the host q and out (it
 * gathers its local batch on the host and copies it in itself). */
static attn_status attn__kv_layer(attn_engine *e, attn__eng_group *g, int gi, int l,
                                  const int64_t *slots, attn_engine_layer_io *io,
                                  attn_engine_step_stats *st)
{
    attn_kv_view view;
    attn_kv_cache_view(g->cache, l, &view);
    io->layer = g->run_layers[l];
    io->layer_slot = l;
    io->kv = &view;
    attn_status s = attn__io(e, e->cfg.io.inputs, io, st);
    if (s != ATTN_OK) return s;
    const attn__eng_dev *d = g->run.dev;
    if ((s = attn__inputs_in(d, io, !g->dcp)) != ATTN_OK) return s;
    int ntok = io->num_tokens;
    s = g->spec.use_mla
            ? attn_mla_write_latent(&view, slots, ntok, d->k, d->v, attn_model_dtype(e->model))
            : attn_kv_write(&view, slots, ntok, d->k, d->v, io->elem);
    if (s != ATTN_OK) return s;
    if (g->dcp) {
        s = attn__dcp_forward(e, g, l, &view, gi == 0 ? st : NULL);
    } else {
        s = attn__forward(e, g, &g->run, l, &view);
        size_t out =
            (size_t)ntok * (size_t)io->q_heads * (size_t)io->out_dim * attn_elem_size(io->elem);
        if (s == ATTN_OK) s = attn__eng_dev_out(d, e->out, d->out, out);
    }
    if (s != ATTN_OK) return s;
    st->layers_run++;
    return attn__io(e, e->cfg.io.outputs, io, st);
}

attn_status attn__engine_run_attention(attn_engine *e, attn_engine_step_stats *st)
{
    for (int gi = 0; gi < e->num_groups; gi++) {
        attn__eng_group *g = &e->groups[gi];
        if (g->mode == ATTN_KERNEL_NONE) continue;
        attn_status s = g->dcp ? ATTN_OK : attn__kernel_md(g, &g->run);
        if (s != ATTN_OK) return s;
        const int64_t *slots = g->slot_mapping;
        if (g->dcp) {
            if ((s = attn__dcp_step(e, g, gi, st)) != ATTN_OK) return s;
            slots = g->dcp_slots; /* this rank writes only its own tokens */
        }
        attn_engine_layer_io io = attn__kv_io(e, g, gi);
        for (int l = 0; l < g->layers_run; l++)
            if ((s = attn__kv_layer(e, g, gi, l, slots, &io, st)) != ATTN_OK) return s;
        st->emulated = st->emulated || g->mode == ATTN_KERNEL_EMULATED;
    }
    return ATTN_OK;
}

/* ---- encoder groups ------------------------------------------------------------ */

/* The encoder batch: each scheduled request's new prompt tokens (its whole
 * prompt, since prompts are never chunked here), each request one
 * non-causal sequence of its own tokens. */
void attn__engine_build_enc_batch(attn_engine *e, attn_engine_step_stats *st)
{
    int n = 0;
    int32_t tok = 0, max_q = 0;
    e->enc_qsl[0] = 0;
    for (int i = 0; i < e->num_sched; i++) {
        const attn__eng_req *r = &e->reqs[e->sched[i]];
        int end = r->num_computed + r->scheduled;
        end = end < r->prompt_len ? end : r->prompt_len;
        int32_t q = end - r->num_computed;
        if (q <= 0) continue;
        for (int32_t j = 0; j < q; j++) {
            e->enc_positions[tok + j] = r->num_computed + j;
            e->enc_token_req_id[tok + j] = r->id;
        }
        tok += q;
        e->enc_seq_lens[n] = q;
        e->enc_qsl[++n] = tok;
        max_q = q > max_q ? q : max_q;
    }
    attn_common_metadata cm = {
        .query_start_loc = e->enc_qsl,
        .seq_lens = e->enc_seq_lens,
        .num_reqs = n,
        .num_actual_tokens = tok,
        .max_query_len = max_q,
        .max_seq_len = max_q,
        .causal = false,
        .positions = e->enc_positions,
    };
    e->enc_cm = cm;
    st->encoder_reqs = n;
    st->encoder_tokens = tok;
}

attn_status attn__engine_run_encoder(attn_engine *e, attn_engine_step_stats *st)
{
    for (int gi = 0; gi < e->num_enc; gi++) {
        attn__eng_group *g = &e->enc[gi];
        if (g->mode == ATTN_KERNEL_NONE) continue;
        const attn_layer_rows *r = attn_kernel_rows(g->run.k[0]);
        attn_engine_layer_io io = {
            .group = gi,
            .encoder = true,
            .elem = attn_dtype_elem(attn_model_dtype(e->model)),
            .num_tokens = e->enc_cm.num_actual_tokens,
            .token_req_ids = e->enc_token_req_id,
            .positions = e->enc_positions,
            .q_heads = r->q_heads,
            .q_dim = r->q_dim,
            .k_heads = r->kv_heads,
            .k_dim = r->k_dim,
            .v_heads = r->kv_heads,
            .v_dim = r->v_dim,
            .out_dim = r->out_dim,
            .q = e->q,
            .k = e->k,
            .v = e->v,
            .out = e->out,
            .params = &g->params,
            .common = &e->enc_cm,
        };
        for (int l = 0; l < g->layers_run; l++) {
            io.layer = g->run_layers[l];
            io.layer_slot = l;
            attn_status s = attn__io(e, e->cfg.io.inputs, &io, st);
            if (s != ATTN_OK) return s;
            const attn__eng_dev *d = g->run.dev;
            if ((s = attn__inputs_in(d, &io, true)) != ATTN_OK) return s;
            attn_forward_args a = {
                .common = &e->enc_cm, .q = d->q, .out = d->out, .k = d->k, .v = d->v};
            if ((s = attn_kernel_forward(g->run.k[l], &a)) != ATTN_OK ||
                (s = attn__eng_dev_out(d, e->out, d->out,
                                       (size_t)io.num_tokens * (size_t)io.q_heads *
                                           (size_t)io.out_dim * attn_elem_size(io.elem))) !=
                    ATTN_OK)
                return s;
            st->encoder_layers_run++;
            if ((s = attn__io(e, e->cfg.io.outputs, &io, st)) != ATTN_OK) return s;
        }
        st->emulated = st->emulated || g->mode == ATTN_KERNEL_EMULATED;
    }
    return ATTN_OK;
}
