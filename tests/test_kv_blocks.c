/* The block pool: allocation order, all-or-nothing allocation, reference
 * counts for shared prefixes, double frees refused whole, per-request
 * reserve/release, and a seeded random walk checked against a model. */
#include "attn/kvcache.h"
#include "test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static void test_basics(void)
{
    attn_block_pool *p = NULL;
    CHECK_STATUS(attn_block_pool_create(0, 16, &p), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_block_pool_create(8, 0, &p), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_block_pool_create(8, 16, NULL), ATTN_NULL_ARGUMENT);
    CHECK_OK(attn_block_pool_create(8, 16, &p));
    CHECK(attn_block_pool_num_blocks(p) == 8 && attn_block_pool_block_size(p) == 16);
    CHECK(attn_block_pool_num_free(p) == 8);

    int32_t a[8];
    CHECK_OK(attn_block_pool_alloc(p, 3, a));
    CHECK(a[0] == 0 && a[1] == 1 && a[2] == 2); /* lowest ids first */
    CHECK(attn_block_pool_refcount(p, 1) == 1 && attn_block_pool_refcount(p, 5) == 0);
    CHECK(attn_block_pool_refcount(p, 8) == -1);

    /* all or nothing */
    int32_t b[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
    CHECK_STATUS(attn_block_pool_alloc(p, 6, b), ATTN_OUT_OF_BLOCKS);
    CHECK_CONTAINS(attn_last_error(), "6 blocks requested, 5 free of 8");
    CHECK(b[0] == -7 && attn_block_pool_num_free(p) == 5);
    CHECK_STATUS(attn_block_pool_alloc(p, -1, b), ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn_block_pool_alloc(p, 0, NULL));

    /* sharing a prefix: two references, freed only by the second release */
    CHECK_OK(attn_block_pool_share(p, 2, a));
    CHECK(attn_block_pool_refcount(p, 0) == 2 && attn_block_pool_refcount(p, 1) == 2);
    CHECK_OK(attn_block_pool_release(p, 3, a));
    CHECK(attn_block_pool_refcount(p, 0) == 1 && attn_block_pool_refcount(p, 2) == 0);
    CHECK(attn_block_pool_num_free(p) == 6);
    /* share of a free block is refused */
    CHECK_STATUS(attn_block_pool_share(p, 1, &a[2]), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_block_pool_share(p, 1, (int32_t[]){9}), ATTN_INVALID_ARGUMENT);

    /* double free: block 2 is already free; nothing of the call happens */
    attn_block_pool_stats s0, s1;
    attn_block_pool_get_stats(p, &s0);
    int32_t dbl[2] = {0, 2};
    CHECK_STATUS(attn_block_pool_release(p, 2, dbl), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "double free of block 2");
    CHECK(attn_block_pool_refcount(p, 0) == 1); /* block 0 kept its reference */
    attn_block_pool_get_stats(p, &s1);
    CHECK(s1.rejected_releases == s0.rejected_releases + 1);
    CHECK(s1.num_free == s0.num_free && s1.total_refs == s0.total_refs);
    /* the same id twice in one call beyond its references */
    int32_t twice[2] = {0, 0};
    CHECK_STATUS(attn_block_pool_release(p, 2, twice), ATTN_INVALID_ARGUMENT);
    CHECK(attn_block_pool_refcount(p, 0) == 1);
    CHECK_OK(attn_block_pool_share(p, 1, twice));
    CHECK_OK(attn_block_pool_release(p, 2, twice)); /* two references, two releases */
    CHECK(attn_block_pool_refcount(p, 0) == 0);
    /* an id outside the pool */
    CHECK_STATUS(attn_block_pool_release(p, 1, (int32_t[]){8}), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "outside the pool of 8 blocks");
    CHECK_OK(attn_block_pool_release(p, 1, &a[1])); /* a[1]'s remaining reference */
    CHECK(attn_block_pool_num_free(p) == 8);
    CHECK_OK(attn_block_pool_check(p));

    /* per-request lists */
    int32_t ids[4];
    attn_block_list l = {.ids = ids, .count = 0, .capacity = 4};
    CHECK_OK(attn_block_pool_reserve(p, &l, 17)); /* 2 blocks */
    CHECK(l.count == 2);
    CHECK_OK(attn_block_pool_reserve(p, &l, 32)); /* still 2 */
    CHECK(l.count == 2);
    CHECK_OK(attn_block_pool_reserve(p, &l, 33));
    CHECK(l.count == 3);
    CHECK_STATUS(attn_block_pool_reserve(p, &l, 80), ATTN_OUT_OF_RANGE); /* 5 > capacity 4 */
    CHECK(l.count == 3);
    int free_before = attn_block_pool_num_free(p);
    int32_t hog[8];
    CHECK_OK(attn_block_pool_alloc(p, free_before, hog));
    CHECK_STATUS(attn_block_pool_reserve(p, &l, 64), ATTN_OUT_OF_BLOCKS);
    CHECK(l.count == 3);
    CHECK_OK(attn_block_pool_release(p, free_before, hog));
    CHECK_OK(attn_block_pool_release_list(p, &l));
    CHECK(l.count == 0);
    CHECK(attn_block_pool_num_free(p) == 8);
    attn_block_list broken = {.ids = NULL, .count = 0, .capacity = 3};
    CHECK_STATUS(attn_block_pool_reserve(p, &broken, 1), ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn_block_pool_check(p));
    attn_block_pool_get_stats(p, &s1);
    CHECK(s1.num_used == 0 && s1.total_refs == 0 && s1.num_allocs == s1.num_frees);
    attn_block_pool_free(p);
}

/* Random alloc/share/release against a model of refcounts. */
static void test_random_walk(void)
{
    enum { NB = 64, NLIST = 12, CAP = 16 };
    attn_block_pool *p;
    CHECK_OK(attn_block_pool_create(NB, 4, &p));
    int32_t store[NLIST][CAP];
    attn_block_list lists[NLIST];
    int model[NB] = {0};
    for (int i = 0; i < NLIST; i++)
        lists[i] = (attn_block_list){.ids = store[i], .count = 0, .capacity = CAP};
    int failures = 0;
    for (int step = 0; step < 5000; step++) {
        int i = (int)rnd(NLIST);
        attn_block_list *l = &lists[i];
        switch (rnd(4)) {
        case 0:
        case 1: { /* grow */
            int before = l->count;
            attn_status st = attn_block_pool_reserve(p, l, (int)rnd(CAP * 4 + 1));
            if (st == ATTN_OK)
                for (int k = before; k < l->count; k++)
                    model[l->ids[k]]++;
            else
                failures += l->count != before;
            break;
        }
        case 2: /* release */
            for (int k = 0; k < l->count; k++)
                model[l->ids[k]]--;
            if (attn_block_pool_release_list(p, l) != ATTN_OK) failures++;
            break;
        default: { /* adopt another list's first blocks as a shared prefix */
            attn_block_list *o = &lists[rnd(NLIST)];
            if (o == l || l->count != 0 || o->count == 0) break;
            int n = 1 + (int)rnd((uint32_t)o->count);
            if (attn_block_pool_share(p, n, o->ids) != ATTN_OK) {
                failures++;
                break;
            }
            for (int k = 0; k < n; k++) {
                l->ids[k] = o->ids[k];
                model[o->ids[k]]++;
            }
            l->count = n;
        }
        }
        if (step % 97 == 0) {
            int nfree = 0;
            for (int b = 0; b < NB; b++) {
                nfree += model[b] == 0;
                failures += attn_block_pool_refcount(p, b) != model[b];
            }
            failures += nfree != attn_block_pool_num_free(p);
            failures += attn_block_pool_check(p) != ATTN_OK;
        }
    }
    CHECK(failures == 0);
    for (int i = 0; i < NLIST; i++)
        CHECK_OK(attn_block_pool_release_list(p, &lists[i]));
    CHECK(attn_block_pool_num_free(p) == NB);
    attn_block_pool_stats s;
    attn_block_pool_get_stats(p, &s);
    CHECK(s.rejected_releases == 0 && s.total_refs == 0);
    CHECK_OK(attn_block_pool_check(p));
    attn_block_pool_free(p);
}

int main(void)
{
    test_basics();
    test_random_walk();
    return attn_test_finish("test_kv_blocks");
}
