/* Requests and the step loop (the batch, metadata and attention calls of
 * steps (3)-(5b) are in step.c).
 *
 * Contract of a step: (1) the within-step reuse table is emptied; (2) the
 * scheduler picks this step's tokens under the token budget — running
 * decodes first, then running prefills (chunked), then waiting requests in
 * order (preempted ones at the front) — and secures their KV blocks in
 * every group, evicting cached prefixes and then preempting the newest
 * unscheduled running request when a pool runs dry; (3) the batch is laid
 * out decodes-first by the smallest builder reorder threshold and the
 * common metadata is built into the engine's buffers, with each group's own
 * block table and slot mapping; (4) each group's builder builds, or — when
 * an earlier group of this step has the same builder type and spec — only
 * swaps the block table into that group's metadata; (5) for the layers
 * chosen at startup the caller's io writes Q/K/V, K/V go into the cache,
 * attention runs and io reads the output; (5b) encoder groups
 * (no paged cache) run once, non-causal, over the scheduled requests' new
 * prompt tokens with K/V passed directly — with any such group a prompt is
 * scheduled whole or waits, never chunked; (6) requests advance, finish
 * (an encoder-only model's request once its prompt is processed) and
 * release their blocks. Nothing of a step is consulted by the
 * next one except the requests' own progress. A step allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "util/error.h"

static inline int attn__total(const attn__eng_req *r)
{
    return r->prompt_len + r->num_output;
}

/* ---- storage -------------------------------------------------------------- */

attn_status attn__engine_alloc_requests(attn_engine *e)
{
    int R = e->max_requests, S = e->max_seqs, G = e->num_groups;
    e->reqs = calloc((size_t)R, sizeof *e->reqs);
    e->free_reqs = calloc((size_t)R, sizeof(int));
    e->waiting = calloc((size_t)R, sizeof(int));
    e->running = calloc((size_t)S, sizeof(int));
    e->free_slots = calloc((size_t)S, sizeof(int));
    e->lists = calloc((size_t)S * (size_t)(G ? G : 1), sizeof(attn_block_list));
    e->list_ids =
        calloc((size_t)S * (size_t)(G ? G : 1) * (size_t)(e->max_blocks ? e->max_blocks : 1),
               sizeof(int32_t));
    e->prefix_ids = calloc((size_t)ATTN__ENG_MAX_PREFIXES * (size_t)(G ? G : 1) *
                               (size_t)(e->max_blocks ? e->max_blocks : 1),
                           sizeof(int32_t));
    e->reserve_before = calloc((size_t)(G ? G : 1), sizeof(int));
    if (!e->reqs || !e->free_reqs || !e->waiting || !e->running || !e->free_slots || !e->lists ||
        !e->list_ids || !e->prefix_ids || !e->reserve_before)
        return attn__engine_fail(e, ATTN_OUT_OF_MEMORY, "engine: out of memory for requests");
    for (int i = 0; i < R; i++)
        e->free_reqs[i] = R - 1 - i;
    e->num_free_reqs = R;
    for (int i = 0; i < S; i++)
        e->free_slots[i] = S - 1 - i;
    e->num_free_slots = S;
    for (int s = 0; s < S; s++)
        for (int g = 0; g < G; g++) {
            attn_block_list *l = &e->lists[(size_t)s * (size_t)G + (size_t)g];
            l->ids = e->list_ids + ((size_t)s * (size_t)G + (size_t)g) * (size_t)e->max_blocks;
            l->capacity = e->max_blocks;
        }
    for (int p = 0; p < ATTN__ENG_MAX_PREFIXES; p++)
        e->prefixes[p].blocks =
            e->prefix_ids + (size_t)p * (size_t)(G ? G : 1) * (size_t)e->max_blocks;
    return ATTN_OK;
}

void attn__engine_free_requests(attn_engine *e)
{
    free(e->reqs);
    free(e->free_reqs);
    free(e->waiting);
    free(e->running);
    free(e->free_slots);
    free(e->lists);
    free(e->list_ids);
    free(e->prefix_ids);
    free(e->reserve_before);
    e->reqs = NULL;
}

/* ---- queues ----------------------------------------------------------------- */

static void attn__wait_push_back(attn_engine *e, int idx)
{
    e->waiting[(e->wait_head + e->num_waiting) % e->max_requests] = idx;
    e->num_waiting++;
}

static void attn__wait_push_front(attn_engine *e, int idx)
{
    e->wait_head = (e->wait_head + e->max_requests - 1) % e->max_requests;
    e->waiting[e->wait_head] = idx;
    e->num_waiting++;
}

static int attn__wait_pop_front(attn_engine *e)
{
    int idx = e->waiting[e->wait_head];
    e->wait_head = (e->wait_head + 1) % e->max_requests;
    e->num_waiting--;
    return idx;
}

static void attn__running_remove(attn_engine *e, int idx)
{
    for (int i = 0; i < e->num_running; i++) {
        if (e->running[i] == idx) {
            memmove(&e->running[i], &e->running[i + 1],
                    sizeof(int) * (size_t)(e->num_running - i - 1));
            e->num_running--;
            return;
        }
    }
}

/* Releases every block a request holds, in every group. */
static void attn__release_blocks(attn_engine *e, attn__eng_req *r)
{
    if (r->slot < 0) return;
    for (int g = 0; g < e->num_groups; g++)
        attn_block_pool_release_list(e->groups[g].pool, attn__list(e, r, g));
    e->free_slots[e->num_free_slots++] = r->slot;
    r->slot = -1;
}

static void attn__preempt(attn_engine *e, int idx, attn_engine_step_stats *st)
{
    attn__eng_req *r = &e->reqs[idx];
    attn__release_blocks(e, r);
    attn__running_remove(e, idx);
    r->num_computed = 0; /* recomputed from scratch: prompt and generated tokens */
    r->scheduled = 0;
    r->state = ATTN__REQ_WAITING;
    attn__wait_push_front(e, idx);
    e->counts.preemptions++;
    st->preempted++;
}

static void attn__finish(attn_engine *e, int idx, attn_engine_step_stats *st)
{
    attn__eng_req *r = &e->reqs[idx];
    attn__release_blocks(e, r);
    attn__running_remove(e, idx);
    r->state = ATTN__REQ_FREE;
    e->free_reqs[e->num_free_reqs++] = idx;
    e->counts.finished++;
    if (st) st->finished++;
}

/* ---- the prefix cache ------------------------------------------------------ */

static attn__eng_prefix *attn__prefix_find(attn_engine *e, int prefix_id)
{
    for (int i = 0; i < e->num_prefixes; i++)
        if (e->prefixes[i].prefix_id == prefix_id) return &e->prefixes[i];
    return NULL;
}

static int32_t *attn__prefix_blocks(attn_engine *e, attn__eng_prefix *p, int g)
{
    return p->blocks + (size_t)g * (size_t)e->max_blocks;
}

/* Drops the oldest cached prefix (its blocks lose the cache's reference). */
static bool attn__prefix_evict(attn_engine *e)
{
    if (e->num_prefixes == 0) return false;
    attn__eng_prefix *p = &e->prefixes[0];
    for (int g = 0; g < e->num_groups; g++)
        attn_block_pool_release(e->groups[g].pool, p->num_blocks, attn__prefix_blocks(e, p, g));
    int32_t *store = p->blocks;
    memmove(&e->prefixes[0], &e->prefixes[1],
            sizeof(attn__eng_prefix) * (size_t)(e->num_prefixes - 1));
    e->num_prefixes--;
    e->prefixes[e->num_prefixes].blocks = store; /* keep every entry's storage */
    return true;
}

/* Once a request has computed its shared prefix's whole blocks, the cache
 * keeps them (one more reference) for later requests with the same prefix. */
static void attn__prefix_register(attn_engine *e, attn__eng_req *r)
{
    if (e->num_groups == 0 || r->prefix_id <= 0) return;
    int nblk = r->prefix_len / e->sched_block_size;
    if (nblk <= 0 || r->num_computed < nblk * e->sched_block_size ||
        e->num_prefixes == ATTN__ENG_MAX_PREFIXES || attn__prefix_find(e, r->prefix_id))
        return;
    attn__eng_prefix *p = &e->prefixes[e->num_prefixes];
    for (int g = 0; g < e->num_groups; g++) {
        attn_block_list *l = attn__list(e, r, g);
        if (l->count < nblk || attn_block_pool_share(e->groups[g].pool, nblk, l->ids) != ATTN_OK) {
            for (int h = 0; h < g; h++) /* undo the groups done */
                attn_block_pool_release(e->groups[h].pool, nblk, attn__prefix_blocks(e, p, h));
            attn_clear_error();
            return;
        }
        memcpy(attn__prefix_blocks(e, p, g), l->ids, sizeof(int32_t) * (size_t)nblk);
    }
    p->prefix_id = r->prefix_id;
    p->num_blocks = nblk;
    e->num_prefixes++;
}

/* ---- block reservation ---------------------------------------------------- */

/* Grows r's lists in every group to cover `tokens`, all or nothing. */
static bool attn__reserve(attn_engine *e, attn__eng_req *r, int tokens)
{
    for (int g = 0; g < e->num_groups; g++) {
        attn_block_list *l = attn__list(e, r, g);
        e->reserve_before[g] = l->count;
        if (attn_block_pool_reserve(e->groups[g].pool, l, tokens) != ATTN_OK) {
            attn_clear_error();
            for (int h = 0; h < g; h++) { /* give back what this call added */
                attn_block_list *lh = attn__list(e, r, h);
                int keep = e->reserve_before[h];
                attn_block_pool_release(e->groups[h].pool, lh->count - keep, lh->ids + keep);
                lh->count = keep;
            }
            return false;
        }
    }
    return true;
}

enum { ATTN__GOT_BLOCKS, ATTN__PREEMPTED_SELF };

/* Secures blocks for a running request, evicting cached prefixes and then
 * preempting the newest unscheduled running request while the pools are dry;
 * when r itself is the only one left, r is preempted. */
static int attn__secure(attn_engine *e, int idx, int tokens, attn_engine_step_stats *st)
{
    attn__eng_req *r = &e->reqs[idx];
    while (!attn__reserve(e, r, tokens)) {
        if (attn__prefix_evict(e)) continue;
        int victim = -1;
        for (int i = e->num_running - 1; i >= 0; i--) {
            int v = e->running[i];
            if (v != idx && e->reqs[v].scheduled == 0) {
                victim = v;
                break;
            }
        }
        if (victim < 0) {
            attn__preempt(e, idx, st);
            return ATTN__PREEMPTED_SELF;
        }
        attn__preempt(e, victim, st);
    }
    return ATTN__GOT_BLOCKS;
}

/* ---- scheduling ------------------------------------------------------------ */

static void attn__schedule(attn_engine *e, attn_engine_step_stats *st)
{
    int budget = e->max_tokens;
    e->num_sched = 0;
    /* Running requests: decodes (one token left) first, then prefills. */
    for (int pass = 0; pass < 2 && budget > 0; pass++) {
        for (int i = 0; i < e->num_running && budget > 0; i++) {
            int idx = e->running[i];
            attn__eng_req *r = &e->reqs[idx];
            int remaining = attn__total(r) - r->num_computed;
            if (r->scheduled || remaining <= 0 || (pass == 0) != (remaining == 1)) continue;
            int n = remaining < budget ? remaining : budget;
            if (e->num_enc > 0 && r->num_computed < r->prompt_len &&
                n < r->prompt_len - r->num_computed)
                continue; /* encoder attention sees the whole prompt or nothing */
            if (attn__secure(e, idx, r->num_computed + n, st) == ATTN__PREEMPTED_SELF) {
                i = -1; /* running changed: rescan (scheduled ones are skipped) */
                continue;
            }
            /* victims may have been removed before i: find r again */
            for (i = 0; e->running[i] != idx; i++)
                ;
            r->scheduled = n;
            e->sched[e->num_sched++] = idx;
            budget -= n;
        }
    }
    /* Waiting requests in order, while there is budget, a slot and blocks. */
    while (e->num_waiting > 0 && budget > 0 && e->num_running < e->max_seqs) {
        int idx = e->waiting[e->wait_head];
        attn__eng_req *r = &e->reqs[idx];
        r->slot = e->free_slots[--e->num_free_slots];
        /* A cached prefix: share its blocks, skip its tokens (at least one
         * token is always left to compute, in a block of its own). */
        int shared = 0;
        attn__eng_prefix *p = r->prefix_id > 0 ? attn__prefix_find(e, r->prefix_id) : NULL;
        if (p && e->num_groups > 0) {
            shared = p->num_blocks;
            int cap = (attn__total(r) - 1) / e->sched_block_size;
            int own = r->prefix_len / e->sched_block_size;
            shared = shared < cap ? shared : cap;
            shared = shared < own ? shared : own;
            for (int g = 0; g < e->num_groups && shared > 0; g++) {
                attn_block_list *l = attn__list(e, r, g);
                attn_block_pool_share(e->groups[g].pool, shared, attn__prefix_blocks(e, p, g));
                memcpy(l->ids, attn__prefix_blocks(e, p, g), sizeof(int32_t) * (size_t)shared);
                l->count = shared;
            }
        }
        r->num_computed = shared * e->sched_block_size;
        int remaining = attn__total(r) - r->num_computed;
        int n = remaining < budget ? remaining : budget;
        /* Encoder attention cannot be chunked: a prompt that does not fit
         * what is left of the budget waits, in order, for the next step. */
        bool fits = !(e->num_enc > 0 && r->num_computed < r->prompt_len &&
                      n < r->prompt_len - r->num_computed);
        bool got = fits && attn__reserve(e, r, r->num_computed + n);
        while (!got && fits && attn__prefix_evict(e)) /* cached prefixes yield to requests */
            got = attn__reserve(e, r, r->num_computed + n);
        if (!got) {
            /* No preemption for admissions: wait for blocks to come back. */
            for (int g = 0; g < e->num_groups; g++)
                attn_block_pool_release_list(e->groups[g].pool, attn__list(e, r, g));
            r->num_computed = 0;
            e->free_slots[e->num_free_slots++] = r->slot;
            r->slot = -1;
            break;
        }
        attn__wait_pop_front(e);
        r->state = ATTN__REQ_RUNNING;
        e->running[e->num_running++] = idx;
        r->scheduled = n;
        e->sched[e->num_sched++] = idx;
        budget -= n;
        st->admitted++;
        e->counts.admitted++;
    }
}

/* ---- the batch and its common metadata ------------------------------------- */

/* ---- requests: public ---------------------------------------------------------- */

attn_status attn_engine_add_request(attn_engine *e, const attn_request_desc *rd, uint64_t *id)
{
    ATTN__CHECK_NULL(e);
    ATTN__CHECK_NULL(rd);
    if (e->state != ATTN_ENGINE_READY)
        return attn__fail(ATTN_BAD_STATE, "engine failed at startup, no request admitted: %s",
                          e->error);
    /* an encoder-only model has no decode: a request is its prompt */
    const int out_len = e->encoder_only ? 0 : rd->output_len;
    if (rd->prompt_len < 1 || (!e->encoder_only && rd->output_len < 1) ||
        (int64_t)rd->prompt_len + (out_len > 0 ? out_len - 1 : 0) > e->max_model_len)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "request of %d prompt + %d output tokens: lengths must be >= 1 and fit "
                          "max_model_len %d",
                          rd->prompt_len, out_len, e->max_model_len);
    if (e->num_enc > 0 && rd->prompt_len > e->max_tokens)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "request of %d prompt tokens: encoder attention needs the whole prompt "
                          "in one step, but a step holds at most %d tokens "
                          "(max_num_batched_tokens)",
                          rd->prompt_len, e->max_tokens);
    if (rd->prefix_id < 0 || rd->prefix_len < 0 || rd->prefix_len > rd->prompt_len)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "request prefix %d of %d tokens: must be >= 0 and within the prompt (%d)",
                          rd->prefix_id, rd->prefix_len, rd->prompt_len);
    if (e->num_free_reqs == 0)
        return attn__fail(ATTN_OUT_OF_RANGE, "engine: waiting queue full (%d requests)",
                          e->max_requests - e->max_seqs);
    int idx = e->free_reqs[--e->num_free_reqs];
    attn__eng_req *r = &e->reqs[idx];
    memset(r, 0, sizeof *r);
    r->id = e->next_id++;
    r->state = ATTN__REQ_WAITING;
    r->prompt_len = rd->prompt_len;
    r->output_len = out_len;
    r->prefix_id = rd->prefix_id;
    r->prefix_len = rd->prefix_id > 0 ? rd->prefix_len : 0;
    r->slot = -1;
    attn__wait_push_back(e, idx);
    e->counts.added++;
    if (id) *id = r->id;
    return ATTN_OK;
}

void attn__engine_release_all(attn_engine *e)
{
    while (e->num_running > 0)
        attn__finish(e, e->running[e->num_running - 1], NULL);
    while (e->num_waiting > 0) {
        int idx = attn__wait_pop_front(e);
        e->reqs[idx].state = ATTN__REQ_FREE;
        e->free_reqs[e->num_free_reqs++] = idx;
    }
    while (attn__prefix_evict(e))
        ;
}

attn_status attn_engine_abort_all(attn_engine *e)
{
    ATTN__CHECK_NULL(e);
    if (e->state != ATTN_ENGINE_READY)
        return attn__fail(ATTN_BAD_STATE, "engine failed at startup: %s", e->error);
    attn__engine_release_all(e);
    return ATTN_OK;
}

/* ---- the step ------------------------------------------------------------------- */

attn_status attn_engine_step(attn_engine *e, attn_engine_step_stats *out)
{
    ATTN__CHECK_NULL(e);
    if (e->state != ATTN_ENGINE_READY)
        return attn__fail(ATTN_BAD_STATE, "engine failed at startup: %s", e->error);
    attn_engine_step_stats st;
    memset(&st, 0, sizeof st);
    st.step = e->counts.steps;

    attn__schedule(e, &st);
    attn_status s = ATTN_OK;
    if (e->num_groups == 0) {
        /* Attention-free for the decoder loop: tokens are scheduled and
         * counted, but no metadata exists to build. */
        for (int i = 0; i < e->num_sched; i++) {
            const attn__eng_req *r = &e->reqs[e->sched[i]];
            bool decode = r->scheduled == 1 && r->num_computed >= r->prompt_len;
            st.num_decode_reqs += decode;
            st.num_decode_tokens += decode;
            st.num_prefill_reqs += !decode;
            st.num_prefill_tokens += decode ? 0 : r->scheduled;
            st.num_tokens += r->scheduled;
        }
        st.num_reqs = e->num_sched;
    } else if (e->num_sched > 0) {
        double t0 = attn__engine_now_ns();
        attn__engine_build_batch(e, &st);
        s = attn__engine_build_metadata(e, &st);
        double t1 = attn__engine_now_ns();
        st.metadata_ns = t1 - t0;
        for (int g = 0; g < e->num_groups; g++)
            e->groups[g].have_step = s == ATTN_OK;
        if (s == ATTN_OK) {
            s = attn__engine_run_attention(e, &st);
            st.attention_ns = attn__engine_now_ns() - t1 - st.io_ns;
        }
        st.common_prefix_len = e->groups[0].common_prefix_len;
    }
    if (s == ATTN_OK && e->num_enc > 0 && e->num_sched > 0) {
        double t0 = attn__engine_now_ns(), io0 = st.io_ns;
        attn__engine_build_enc_batch(e, &st);
        if (e->enc_cm.num_actual_tokens > 0) s = attn__engine_run_encoder(e, &st);
        st.encoder_attention_ns = attn__engine_now_ns() - t0 - (st.io_ns - io0);
        st.attention_ns += st.encoder_attention_ns;
    }
    /* Advance every scheduled request, whatever the kernels said: the
     * scheduler's bookkeeping must stay consistent with the blocks. */
    for (int i = 0; i < e->num_sched; i++) {
        attn__eng_req *r = &e->reqs[e->sched[i]];
        r->num_computed += r->scheduled;
        e->counts.tokens += r->scheduled;
        r->scheduled = 0;
        if (!e->encoder_only && r->num_computed == attn__total(r)) r->num_output++;
        attn__prefix_register(e, r);
    }
    for (int i = 0; i < e->num_sched; i++) {
        int idx = e->sched[i];
        attn__eng_req *r = &e->reqs[idx];
        if (r->state == ATTN__REQ_RUNNING && r->num_output >= r->output_len)
            attn__finish(e, idx, &st);
    }
    e->num_sched = 0;
    e->counts.steps++;
    st.running = e->num_running;
    st.waiting = e->num_waiting;
    if (e->num_groups > 0)
        st.blocks_in_use = e->num_blocks - attn_block_pool_num_free(e->groups[0].pool);
    if (out) *out = st;
    return s;
}
