/* Random sequences of block-pool operations (allocate, share, release,
 * reserve a request's list, preempt = release its list) checked after every
 * step against a model of the pool: per-block reference counts, the free
 * order (a fresh pool hands out lowest ids first; freed blocks are reused
 * most recently freed first), all-or-nothing failures, the rejected-release
 * count and the pool's own consistency walk. */
#include "attn/kvcache.h"
#include "fuzz_common.h"

#define NB_MAX 64
#define NREQ   4
#define CAP    16

typedef struct {
    const uint8_t *p;
    size_t n;
} rd;

static unsigned next(rd *r)
{
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

typedef struct {
    int ref[NB_MAX];
    int32_t stack[NB_MAX];
    int top;
} model;

/* The next n ids the pool must hand out, without taking them. */
static int model_peek(const model *m, int32_t *ids, int n)
{
    int k = 0;
    for (; k < n && k < m->top; k++)
        ids[k] = m->stack[m->top - 1 - k];
    return k;
}

static void model_take(model *m, int n)
{
    for (int i = 0; i < n; i++)
        m->ref[m->stack[--m->top]] = 1;
}

static void model_release(model *m, int n, const int32_t *ids)
{
    for (int i = 0; i < n; i++)
        if (--m->ref[ids[i]] == 0) m->stack[m->top++] = ids[i];
}

static void check_model(const attn_block_pool *p, const int *ref, int nb)
{
    int nfree = 0;
    int64_t total = 0;
    for (int b = 0; b < nb; b++) {
        FZ_ASSERT(attn_block_pool_refcount(p, b) == ref[b]);
        nfree += ref[b] == 0;
        total += ref[b];
    }
    FZ_ASSERT(attn_block_pool_refcount(p, -1) == -1 && attn_block_pool_refcount(p, nb) == -1);
    FZ_ASSERT(attn_block_pool_num_free(p) == nfree);
    attn_block_pool_stats s;
    attn_block_pool_get_stats(p, &s);
    FZ_ASSERT(s.num_free == nfree && s.num_used == nb - nfree && s.total_refs == total);
    FZ_ASSERT(attn_block_pool_check(p) == ATTN_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd r = {data, size};
    int nb = 1 + (int)(next(&r) % NB_MAX), bs = 1 + (int)(next(&r) % 8);
    attn_block_pool *p = NULL;
    FZ_ASSERT(attn_block_pool_create(nb, bs, &p) == ATTN_OK);
    model md = {.top = nb};
    for (int i = 0; i < nb; i++)
        md.stack[i] = nb - 1 - i;
    int *ref = md.ref;
    int32_t store[NREQ][CAP];
    attn_block_list lists[NREQ];
    for (int i = 0; i < NREQ; i++)
        lists[i] = (attn_block_list){store[i], 0, CAP};
    int64_t rejected = 0;
    while (r.n) {
        unsigned op = next(&r) % 6, a = next(&r);
        int32_t ids[8], want[CAP + 8];
        int n = (int)(a % 8);
        attn_status st;
        switch (op) {
        case 0: /* alloc n */
            st = attn_block_pool_alloc(p, n, ids);
            if (model_peek(&md, want, n) < n) {
                FZ_ASSERT(st == ATTN_OUT_OF_BLOCKS);
            } else {
                FZ_ASSERT(st == ATTN_OK);
                for (int i = 0; i < n; i++)
                    FZ_ASSERT(ids[i] == want[i]);
                model_take(&md, n);
            }
            break;
        case 1: /* share or release arbitrary ids (some bad) */
        case 2: {
            for (int i = 0; i < n; i++)
                ids[i] = (int32_t)(next(&r) % (unsigned)(nb + 2)) - 1;
            int cnt[NB_MAX + 2] = {0};
            bool ok = true;
            for (int i = 0; i < n; i++) {
                if (ids[i] < 0 || ids[i] >= nb)
                    ok = false;
                else if (op == 1 && ref[ids[i]] == 0)
                    ok = false;
                else if (op == 2 && ++cnt[ids[i]] > ref[ids[i]])
                    ok = false;
            }
            st = op == 1 ? attn_block_pool_share(p, n, ids) : attn_block_pool_release(p, n, ids);
            FZ_ASSERT(ok ? st == ATTN_OK : st == ATTN_INVALID_ARGUMENT);
            if (!ok && op == 2) rejected++;
            if (ok && op == 1)
                for (int i = 0; i < n; i++)
                    ref[ids[i]]++;
            if (ok && op == 2) model_release(&md, n, ids);
            break;
        }
        case 3: { /* reserve tokens for a request */
            attn_block_list *l = &lists[a % NREQ];
            int tokens = (int)next(&r) % (CAP * bs + 4);
            int need = (tokens + bs - 1) / bs, before = l->count;
            int add = need > before ? need - before : 0;
            st = attn_block_pool_reserve(p, l, tokens);
            if (need > CAP) {
                FZ_ASSERT(st == ATTN_OUT_OF_RANGE && l->count == before);
            } else if (model_peek(&md, want, add) < add) {
                FZ_ASSERT(st == ATTN_OUT_OF_BLOCKS && l->count == before);
            } else {
                FZ_ASSERT(st == ATTN_OK && l->count == (need > before ? need : before));
                for (int i = 0; i < add; i++)
                    FZ_ASSERT(l->ids[before + i] == want[i]);
                model_take(&md, add);
            }
            break;
        }
        case 4: { /* preempt / finish: release the whole list */
            attn_block_list *l = &lists[a % NREQ];
            bool ok = true;
            int cnt[NB_MAX] = {0};
            for (int i = 0; i < l->count; i++)
                if (++cnt[l->ids[i]] > ref[l->ids[i]]) ok = false;
            int32_t copy[CAP];
            int cn = l->count;
            memcpy(copy, l->ids, sizeof(int32_t) * (size_t)cn);
            st = attn_block_pool_release_list(p, l);
            if (ok) {
                FZ_ASSERT(st == ATTN_OK && l->count == 0);
                model_release(&md, cn, copy);
            } else {
                FZ_ASSERT(st == ATTN_INVALID_ARGUMENT);
                rejected++;
            }
            break;
        }
        default: /* share a request's blocks into another (prefix sharing) */ {
            attn_block_list *src = &lists[a % NREQ], *dst = &lists[(a / NREQ) % NREQ];
            if (src == dst || dst->count || !src->count) break;
            bool live = true; /* its blocks may have been released one by one since */
            for (int i = 0; i < src->count; i++)
                live = live && ref[src->ids[i]] > 0;
            st = attn_block_pool_share(p, src->count, src->ids);
            FZ_ASSERT(live ? st == ATTN_OK : st == ATTN_INVALID_ARGUMENT);
            if (!live) break;
            for (int i = 0; i < src->count; i++)
                dst->ids[i] = src->ids[i], ref[src->ids[i]]++;
            dst->count = src->count;
            break;
        }
        }
        check_model(p, ref, nb);
        attn_block_pool_stats s;
        attn_block_pool_get_stats(p, &s);
        FZ_ASSERT(s.rejected_releases == rejected);
    }
    attn_block_pool_free(p);
    return 0;
}
