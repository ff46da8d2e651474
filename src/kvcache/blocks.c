/* The KV block pool: a free stack plus a reference count per block.
 *
 * Contract: a block is free (refcount 0, on the stack exactly once) or in
 * use (refcount > 0, not on the stack). Allocation pops the lowest free ids
 * first; release checks every id of the call before touching anything, so
 * a double free (including the same id listed twice beyond its references)
 * is refused whole and counted. No call allocates memory after creation:
 * the engine calls these every step. */
#include <stdlib.h>
#include <string.h>

#include "attn/kvcache.h"
#include "util/error.h"

struct attn_block_pool {
    int num_blocks;
    int block_size;
    int num_free;
    int32_t *free_stack; /* free_stack[num_free - 1] is the next block handed out */
    int32_t *refs;
    int32_t *pending; /* per-call scratch for release validation; all zero between calls */
    int64_t num_allocs, num_frees, rejected;
};

attn_status attn_block_pool_create(int num_blocks, int block_size, attn_block_pool **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    if (num_blocks < 1 || block_size < 1 || num_blocks > ATTN_MAX_NUM_BLOCKS ||
        block_size > ATTN_MAX_BLOCK_SIZE)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "block pool needs num_blocks in [1, %d] and block_size in [1, %d] (got "
                          "%d, %d)",
                          ATTN_MAX_NUM_BLOCKS, ATTN_MAX_BLOCK_SIZE, num_blocks, block_size);
    attn_block_pool *p = calloc(1, sizeof *p);
    if (!p) return attn__fail(ATTN_OUT_OF_MEMORY, "block pool: out of memory");
    p->free_stack = malloc(sizeof(int32_t) * (size_t)num_blocks);
    p->refs = calloc((size_t)num_blocks, sizeof(int32_t));
    p->pending = calloc((size_t)num_blocks, sizeof(int32_t));
    if (!p->free_stack || !p->refs || !p->pending) {
        attn_block_pool_free(p);
        return attn__fail(ATTN_OUT_OF_MEMORY, "block pool of %d blocks: out of memory", num_blocks);
    }
    p->num_blocks = num_blocks;
    p->block_size = block_size;
    p->num_free = num_blocks;
    for (int i = 0; i < num_blocks; i++)
        p->free_stack[i] = num_blocks - 1 - i;
    *out = p;
    return ATTN_OK;
}

void attn_block_pool_free(attn_block_pool *p)
{
    if (!p) return;
    free(p->free_stack);
    free(p->refs);
    free(p->pending);
    free(p);
}

int attn_block_pool_num_blocks(const attn_block_pool *p)
{
    return p ? p->num_blocks : 0;
}

int attn_block_pool_block_size(const attn_block_pool *p)
{
    return p ? p->block_size : 0;
}

int attn_block_pool_num_free(const attn_block_pool *p)
{
    return p ? p->num_free : 0;
}

int attn_block_pool_refcount(const attn_block_pool *p, int32_t block)
{
    if (!p || block < 0 || block >= p->num_blocks) return -1;
    return p->refs[block];
}

attn_status attn_block_pool_alloc(attn_block_pool *p, int n, int32_t *ids)
{
    ATTN__CHECK_NULL(p);
    if (n < 0) return attn__fail(ATTN_INVALID_ARGUMENT, "block pool: cannot allocate %d blocks", n);
    if (n == 0) return ATTN_OK;
    ATTN__CHECK_NULL(ids);
    if (n > p->num_free)
        return attn__fail(ATTN_OUT_OF_BLOCKS, "block pool: %d blocks requested, %d free of %d", n,
                          p->num_free, p->num_blocks);
    for (int i = 0; i < n; i++) {
        int32_t b = p->free_stack[--p->num_free];
        p->refs[b] = 1;
        ids[i] = b;
    }
    p->num_allocs += n;
    return ATTN_OK;
}

static attn_status attn__pool_check_ids(attn_block_pool *p, int n, const int32_t *ids,
                                        const char *what)
{
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= p->num_blocks) {
            if (!strcmp(what, "release")) p->rejected++; /* the stat counts releases only */
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "block pool: %s of block %d, outside the pool of %d blocks", what,
                              (int)ids[i], p->num_blocks);
        }
    }
    return ATTN_OK;
}

attn_status attn_block_pool_share(attn_block_pool *p, int n, const int32_t *ids)
{
    ATTN__CHECK_NULL(p);
    if (n <= 0)
        return n == 0 ? ATTN_OK
                      : attn__fail(ATTN_INVALID_ARGUMENT, "block pool: cannot share %d blocks", n);
    ATTN__CHECK_NULL(ids);
    attn_status st = attn__pool_check_ids(p, n, ids, "share");
    if (st != ATTN_OK) return st;
    for (int i = 0; i < n; i++)
        if (p->refs[ids[i]] <= 0)
            return attn__fail(ATTN_INVALID_ARGUMENT, "block pool: share of free block %d",
                              (int)ids[i]);
    for (int i = 0; i < n; i++)
        p->refs[ids[i]]++;
    return ATTN_OK;
}

attn_status attn_block_pool_release(attn_block_pool *p, int n, const int32_t *ids)
{
    ATTN__CHECK_NULL(p);
    if (n <= 0)
        return n == 0
                   ? ATTN_OK
                   : attn__fail(ATTN_INVALID_ARGUMENT, "block pool: cannot release %d blocks", n);
    ATTN__CHECK_NULL(ids);
    attn_status st = attn__pool_check_ids(p, n, ids, "release");
    if (st != ATTN_OK) return st;
    /* Count this call's releases per block before applying any of them. */
    int bad = -1;
    int i;
    for (i = 0; i < n; i++) {
        int32_t b = ids[i];
        if (++p->pending[b] > p->refs[b]) {
            bad = b;
            i++;
            break;
        }
    }
    for (int j = 0; j < i; j++)
        p->pending[ids[j]] = 0;
    if (bad >= 0) {
        p->rejected++;
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "block pool: double free of block %d (refcount %d); nothing released",
                          bad, p->refs[bad]);
    }
    for (i = 0; i < n; i++) {
        int32_t b = ids[i];
        if (--p->refs[b] == 0) {
            p->free_stack[p->num_free++] = b;
            p->num_frees++;
        }
    }
    return ATTN_OK;
}

void attn_block_pool_get_stats(const attn_block_pool *p, attn_block_pool_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!p) return;
    out->num_blocks = p->num_blocks;
    out->block_size = p->block_size;
    out->num_free = p->num_free;
    out->num_used = p->num_blocks - p->num_free;
    for (int i = 0; i < p->num_blocks; i++)
        out->total_refs += p->refs[i];
    out->num_allocs = p->num_allocs;
    out->num_frees = p->num_frees;
    out->rejected_releases = p->rejected;
}

attn_status attn_block_pool_check(const attn_block_pool *p)
{
    ATTN__CHECK_NULL(p);
    /* pending is all zero between calls; use it as a seen-marker and clear it. */
    int32_t *seen = p->pending;
    attn_status st = ATTN_OK;
    int k;
    for (k = 0; k < p->num_free; k++) {
        int32_t b = p->free_stack[k];
        if (b < 0 || b >= p->num_blocks) {
            st = attn__fail(ATTN_INTERNAL, "block pool: free list holds id %d", (int)b);
            break;
        }
        if (seen[b]) {
            st =
                attn__fail(ATTN_INTERNAL, "block pool: block %d is on the free list twice", (int)b);
            break;
        }
        if (p->refs[b] != 0) {
            st = attn__fail(ATTN_INTERNAL, "block pool: free block %d has refcount %d", (int)b,
                            p->refs[b]);
            break;
        }
        seen[b] = 1;
    }
    if (st == ATTN_OK) {
        for (int b = 0; b < p->num_blocks; b++) {
            if (!seen[b] && p->refs[b] <= 0) {
                st = attn__fail(ATTN_INTERNAL,
                                "block pool: block %d is neither free nor referenced (leaked)", b);
                break;
            }
        }
    }
    for (int j = 0; j < k && j < p->num_free; j++) {
        int32_t b = p->free_stack[j];
        if (b >= 0 && b < p->num_blocks) seen[b] = 0;
    }
    return st;
}

attn_status attn_block_pool_reserve(attn_block_pool *p, attn_block_list *l, int num_tokens)
{
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(l);
    if (num_tokens < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "block pool: reserve for %d tokens", num_tokens);
    if (l->count < 0 || l->count > l->capacity || (l->capacity > 0 && !l->ids))
        return attn__fail(ATTN_INVALID_ARGUMENT, "block list: count %d, capacity %d, ids %p",
                          l->count, l->capacity, (void *)l->ids);
    int64_t need = ((int64_t)num_tokens + p->block_size - 1) / p->block_size;
    if (need <= l->count) return ATTN_OK;
    if (need > l->capacity)
        return attn__fail(ATTN_OUT_OF_RANGE,
                          "block list: %d tokens need %lld blocks, capacity is %d", num_tokens,
                          (long long)need, l->capacity);
    int extra = (int)need - l->count;
    attn_status st = attn_block_pool_alloc(p, extra, l->ids + l->count);
    if (st != ATTN_OK) return st;
    l->count += extra;
    return ATTN_OK;
}

attn_status attn_block_pool_release_list(attn_block_pool *p, attn_block_list *l)
{
    ATTN__CHECK_NULL(p);
    ATTN__CHECK_NULL(l);
    if (l->count == 0) return ATTN_OK;
    attn_status st = attn_block_pool_release(p, l->count, l->ids);
    if (st == ATTN_OK) l->count = 0;
    return st;
}
