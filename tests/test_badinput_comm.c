/* Ranks out of step, without MPI: two threads, each a rank of a two-rank
 * communicator over an in-process transport (barrier, copy, barrier; a
 * block of another size is cut, as comm.h asks of a transport). A report
 * against a step's partial output (different kinds and sizes: the heap
 * overflow of `attn serve --dcp` with different --steps) is refused on both
 * ranks with a message naming the other rank, recv untouched, and the
 * communicator stays failed; attn_comm_agree names every differing field
 * with each rank's value, the same text on both ranks. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/comm.h"
#include "test.h"

typedef struct wire {
    pthread_barrier_t bar;
    const void *send[2];
    size_t bytes[2];
} wire;

typedef struct end {
    wire *w;
    int rank;
} end;

static attn_status wire_allgather(void *ctx, const void *send, size_t bytes, void *recv,
                                  double timeout_s)
{
    (void)timeout_s;
    end *e = ctx;
    wire *w = e->w;
    w->send[e->rank] = send;
    w->bytes[e->rank] = bytes;
    pthread_barrier_wait(&w->bar);
    for (int r = 0; r < 2; r++) {
        size_t n = w->bytes[r] < bytes ? w->bytes[r] : bytes;
        memcpy((char *)recv + (size_t)r * bytes, w->send[r], n);
    }
    pthread_barrier_wait(&w->bar);
    return ATTN_OK;
}

static const attn_comm_ops wire_ops = {
    .struct_size = sizeof(attn_comm_ops),
    .name = "wire",
    .allgather = wire_allgather,
};

typedef struct rank_run {
    end e;
    attn_comm *c;
    void (*fn)(struct rank_run *);
    attn_status st, st2;
    char msg[2048], msg2[2048];
    bool untouched;
} rank_run;

static void *rank_main(void *p)
{
    rank_run *r = p;
    r->fn(r);
    return NULL;
}

/* fn runs on both ranks at once. */
static void run2(void (*fn)(rank_run *), rank_run out[2])
{
    wire w;
    pthread_barrier_init(&w.bar, NULL, 2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].e = (end){&w, i};
        out[i].fn = fn;
        CHECK_OK(attn_comm_create(&wire_ops, &out[i].e, i, 2, &out[i].c));
    }
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, rank_main, &out[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        attn_comm_free(out[i].c);
    pthread_barrier_destroy(&w.bar);
}

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return false;
    return true;
}

/* rank 0 gathers its 144-byte report while rank 1 sends a 30704-byte step part */
static void report_vs_partial(rank_run *r)
{
    size_t bytes = r->e.rank == 0 ? 144 : 30704;
    uint32_t kind = r->e.rank == 0 ? ATTN_COMM_REPORT : ATTN_COMM_DCP_PARTIAL;
    unsigned char *send = malloc(bytes), *recv = malloc(2 * bytes);
    memset(send, 0x11, bytes);
    memset(recv, 0xAB, 2 * bytes);
    r->st = attn_comm_exchange(r->c, kind, send, bytes, recv);
    snprintf(r->msg, sizeof r->msg, "%s", attn_last_error());
    r->untouched = all_bytes(recv, 2 * bytes, 0xAB);
    /* failed for good: no later exchange, not even a matching one */
    r->st2 = attn_comm_exchange(r->c, kind, send, bytes, recv);
    snprintf(r->msg2, sizeof r->msg2, "%s", attn_last_error());
    free(send);
    free(recv);
}

static void test_out_of_step(void)
{
    rank_run r[2];
    run2(report_vs_partial, r);
    CHECK(r[0].st == ATTN_BAD_STATE && r[1].st == ATTN_BAD_STATE);
    CHECK_STR(r[0].msg, "exchange refused on rank 0: the ranks are out of step: this rank sends "
                        "report, 144 bytes, exchange #1; rank 1 sent dcp partial, 30704 bytes, "
                        "exchange #1");
    CHECK_STR(r[1].msg, "exchange refused on rank 1: the ranks are out of step: this rank sends "
                        "dcp partial, 30704 bytes, exchange #1; rank 0 sent report, 144 bytes, "
                        "exchange #1");
    for (int i = 0; i < 2; i++) {
        CHECK(r[i].untouched);
        CHECK(r[i].st2 == ATTN_BAD_STATE);
        CHECK_CONTAINS(r[i].msg2, "the communicator failed earlier");
    }
}

/* the same kind and size, one exchange behind: rank 1 skips one */
static void one_behind(rank_run *r)
{
    int64_t x = 7, all[2] = {0, 0};
    if (r->e.rank == 0) {
        r->st = attn_comm_exchange(r->c, ATTN_COMM_USER + 1, &x, sizeof x, all);
        r->st = attn_comm_exchange(r->c, ATTN_COMM_DATA, &x, sizeof x, all);
    } else {
        r->st = attn_comm_exchange(r->c, ATTN_COMM_USER + 1, &x, sizeof x, all);
        attn_comm *c = r->c;
        /* rank 1's second exchange happens on a fresh communicator (count 1) */
        attn_comm *fresh = NULL;
        attn_comm_create(&wire_ops, &r->e, 1, 2, &fresh);
        r->c = fresh;
        r->st = attn_comm_exchange(fresh, ATTN_COMM_DATA, &x, sizeof x, all);
        r->c = c;
        attn_comm_free(fresh);
    }
    snprintf(r->msg, sizeof r->msg, "%s", attn_last_error());
}

static void test_sequence(void)
{
    rank_run r[2];
    run2(one_behind, r);
    CHECK(r[0].st == ATTN_BAD_STATE && r[1].st == ATTN_BAD_STATE);
    CHECK_STR(r[0].msg, "exchange refused on rank 0: the ranks are out of step: this rank sends "
                        "data, 8 bytes, exchange #2; rank 1 sent data, 8 bytes, exchange #1");
    CHECK_STR(r[1].msg, "exchange refused on rank 1: the ranks are out of step: this rank sends "
                        "data, 8 bytes, exchange #1; rank 0 sent data, 8 bytes, exchange #2");
}

static void agree_differ(rank_run *r)
{
    bool one = r->e.rank == 1;
    attn_comm_field f[4] = {{"model", "llama-3.1-8b"},
                            {"--steps", one ? "6" : "3"},
                            {"--dcp-interleave", one ? "16" : "1"},
                            {"only-on-1", "x"}};
    r->st = attn_comm_agree(r->c, "settings", f, one ? 4 : 3);
    snprintf(r->msg, sizeof r->msg, "%s", attn_last_error());
    /* a later agreement on equal values works: a disagreement breaks nothing */
    r->st2 = attn_comm_agree(r->c, "settings", f, 1);
}

static void agree_same(rank_run *r)
{
    attn_comm_field f[2] = {{"model", "llama-3.1-8b"}, {"--steps", "3"}};
    r->st = attn_comm_agree(r->c, "settings", f, 2);
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    attn_comm_field b = {"--big", big};
    /* refused before any exchange, alike on both ranks */
    r->st2 = attn_comm_agree(r->c, "settings", &b, 1);
    snprintf(r->msg2, sizeof r->msg2, "%s", attn_last_error());
}

static void test_agree(void)
{
    rank_run r[2];
    run2(agree_differ, r);
    const char *want = "settings differ between the ranks: --steps: rank 0 has '3', rank 1 has "
                       "'6'; --dcp-interleave: rank 0 has '1', rank 1 has '16'; only-on-1: rank "
                       "0 has (none), rank 1 has 'x'";
    for (int i = 0; i < 2; i++) {
        CHECK(r[i].st == ATTN_INVALID_ARGUMENT);
        CHECK_STR(r[i].msg, want);
        CHECK(r[i].st2 == ATTN_OK);
    }
    run2(agree_same, r);
    for (int i = 0; i < 2; i++) {
        CHECK(r[i].st == ATTN_OK);
        CHECK(r[i].st2 == ATTN_INVALID_ARGUMENT);
        CHECK_CONTAINS(r[i].msg2, "attn_comm_agree: field 0 needs a name");
    }
}

static void test_self_and_names(void)
{
    attn_comm *c = NULL;
    CHECK_OK(attn_comm_self(&c));
    attn_comm_field f = {"x", "1"};
    CHECK_OK(attn_comm_agree(c, NULL, &f, 1));
    CHECK_STATUS(attn_comm_agree(c, NULL, NULL, 1), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_comm_agree(NULL, NULL, &f, 1), ATTN_NULL_ARGUMENT);
    int64_t x = 5, y = 0;
    CHECK_OK(attn_comm_exchange(c, ATTN_COMM_REPORT, &x, sizeof x, &y));
    CHECK(y == 5);
    attn_comm_free(c);
    CHECK_STR(attn_comm_kind_name(ATTN_COMM_DCP_PARTIAL), "dcp partial");
    CHECK_STR(attn_comm_kind_name(ATTN_COMM_USER + 3), "user");
    CHECK_STR(attn_comm_kind_name(100), "unknown");
}

int main(void)
{
    test_out_of_step();
    test_sequence();
    test_agree();
    test_self_and_names();
    return attn_test_finish("test_badinput_comm");
}
