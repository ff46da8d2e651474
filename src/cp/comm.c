/* The communicator wrapper and the one-rank communicator. The wrapper owns
 * the deadline, the broken flag and the framing, so every implementation
 * reports a timed-out peer the same way, a broken communicator is never
 * reused, and ranks out of step are caught before any payload moves: a
 * fixed-size header (kind, exchange count, size) goes first, through the
 * same implementation, and only equal headers let the payload follow. */
#include "attn/comm.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/abi.h"
#include "util/error.h"

struct attn_comm {
    attn_comm_ops ops;
    void *ctx;
    int rank, size;
    double timeout_s;
    bool broken;
    uint64_t seq;             /* exchanges started on this rank */
    struct attn__comm_hdr *h; /* [size] the headers of one exchange */
};

/* Fixed size on every rank, so a header exchange never mismatches in size. */
typedef struct attn__comm_hdr {
    uint32_t magic, kind;
    uint64_t seq, bytes;
    int32_t rank;
    uint32_t zero;
} attn__comm_hdr;
#define ATTN__COMM_MAGIC 0x46435441u /* "ATCF" */

attn_status attn_comm_create(const attn_comm_ops *ops, void *ctx, int rank, int size,
                             attn_comm **out)
{
    if (out) *out = NULL;
    attn_status st = ATTN_OK;
    if (!ops || !out)
        st = attn__fail(ATTN_NULL_ARGUMENT, "attn_comm_create: ops and out are required");
    else if (!attn__struct_size_ok(ops->struct_size, ATTN__V1_COMM_OPS, sizeof(attn_comm_ops)) ||
             !ops->allgather || !ops->name)
        st = attn__fail(ATTN_INVALID_ARGUMENT,
                        "attn_comm_create: ops need struct_size, name and allgather");
    else if (size < 1 || rank < 0 || rank >= size)
        st = attn__fail(ATTN_INVALID_ARGUMENT, "attn_comm_create: rank %d of size %d", rank, size);
    attn_comm *c = st == ATTN_OK ? calloc(1, sizeof *c) : NULL;
    if (c && !(c->h = calloc((size_t)size, sizeof *c->h))) {
        free(c);
        c = NULL;
    }
    if (st == ATTN_OK && !c) st = attn__fail(ATTN_OUT_OF_MEMORY, "attn_comm_create: out of memory");
    if (st != ATTN_OK) {
        if (ops && ATTN_STRUCT_HAS(attn_comm_ops, ops, destroy) && ops->destroy) ops->destroy(ctx);
        return st;
    }
    attn__struct_read(&c->ops, sizeof c->ops, ops, ops->struct_size,
                      offsetof(attn_comm_ops, struct_size)); /* calloc: missing ops NULL */
    c->ctx = ctx;
    c->rank = rank;
    c->size = size;
    c->timeout_s = ATTN_COMM_DEFAULT_TIMEOUT_S;
    *out = c;
    return ATTN_OK;
}

static attn_status attn__self_allgather(void *ctx, const void *send, size_t bytes, void *recv,
                                        double timeout_s)
{
    (void)ctx;
    (void)timeout_s;
    if (bytes) memmove(recv, send, bytes);
    return ATTN_OK;
}

static const attn_comm_ops attn__self_ops = {
    .struct_size = sizeof(attn_comm_ops),
    .name = "self",
    .allgather = attn__self_allgather,
};

attn_status attn_comm_self(attn_comm **out)
{
    return attn_comm_create(&attn__self_ops, NULL, 0, 1, out);
}

void attn_comm_free(attn_comm *c)
{
    if (!c) return;
    if (c->ops.destroy) c->ops.destroy(c->ctx);
    free(c->h);
    free(c);
}

int attn_comm_rank(const attn_comm *c)
{
    return c ? c->rank : 0;
}

int attn_comm_size(const attn_comm *c)
{
    return c ? c->size : 1;
}

const char *attn_comm_name(const attn_comm *c)
{
    return c ? c->ops.name : NULL;
}

attn_status attn_comm_set_timeout(attn_comm *c, double seconds)
{
    ATTN__CHECK_NULL(c);
    if (!(seconds > 0) || seconds > 1e6)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_comm_set_timeout: %g s (need > 0 and <= 1e6)", seconds);
    c->timeout_s = seconds;
    return ATTN_OK;
}

double attn_comm_timeout(const attn_comm *c)
{
    return c ? c->timeout_s : 0;
}

const char *attn_comm_kind_name(uint32_t kind)
{
    static const char *const names[] = {"data", "agree", "dcp partial", "dcp choice", "report"};
    if (kind < sizeof names / sizeof names[0]) return names[kind];
    return kind >= ATTN_COMM_USER ? "user" : "unknown";
}

static int attn__hdr_text(char *buf, size_t size, const attn__comm_hdr *h)
{
    if (h->kind >= ATTN_COMM_USER)
        return snprintf(buf, size, "user kind %" PRIu32 ", %" PRIu64 " bytes, exchange #%" PRIu64,
                        h->kind, h->bytes, h->seq);
    return snprintf(buf, size, "%s, %" PRIu64 " bytes, exchange #%" PRIu64,
                    attn_comm_kind_name(h->kind), h->bytes, h->seq);
}

/* Every rank's header against this rank's: the same verdict on every rank,
 * since each one holds all of them. */
static attn_status attn__comm_check(const attn_comm *c, const attn__comm_hdr *mine)
{
    char buf[1600], one[160];
    int n = 0, bad = 0;
    for (int r = 0; r < c->size; r++) {
        const attn__comm_hdr *h = &c->h[r];
        bool framed = h->magic == ATTN__COMM_MAGIC && h->rank == r;
        if (framed && h->kind == mine->kind && h->seq == mine->seq && h->bytes == mine->bytes)
            continue;
        if (framed)
            attn__hdr_text(one, sizeof one, h);
        else
            snprintf(one, sizeof one,
                     "no exchange header (magic 0x%08" PRIx32 ", rank %" PRId32 ")", h->magic,
                     h->rank);
        if (n >= 0 && (size_t)n < sizeof buf)
            n += snprintf(buf + n, sizeof buf - (size_t)n, "%srank %d sent %s", bad ? "; " : "", r,
                          one);
        bad++;
    }
    if (!bad) return ATTN_OK;
    attn__hdr_text(one, sizeof one, mine);
    return attn__fail(
        ATTN_BAD_STATE,
        "exchange refused on rank %d: the ranks are out of step: this rank sends %s; %s", c->rank,
        one, buf);
}

attn_status attn_comm_exchange(attn_comm *c, uint32_t kind, const void *send, size_t bytes,
                               void *recv)
{
    ATTN__CHECK_NULL(c);
    if (bytes && (!send || !recv))
        return attn__fail(ATTN_NULL_ARGUMENT, "attn_comm_exchange: send and recv are required");
    if (c->broken)
        return attn__fail(ATTN_BAD_STATE,
                          "attn_comm_exchange: the communicator failed earlier (rank %d)", c->rank);
    if (bytes > SIZE_MAX / (size_t)c->size)
        return attn__fail(ATTN_OUT_OF_RANGE, "attn_comm_exchange: %zu bytes x %d ranks overflow",
                          bytes, c->size);
    attn__comm_hdr mine = {
        .magic = ATTN__COMM_MAGIC, .kind = kind, .seq = ++c->seq, .bytes = bytes, .rank = c->rank};
    memset(c->h, 0, (size_t)c->size * sizeof *c->h);
    attn_status st = c->ops.allgather(c->ctx, &mine, sizeof mine, c->h, c->timeout_s);
    if (st == ATTN_OK) st = attn__comm_check(c, &mine);
    if (st == ATTN_OK) st = c->ops.allgather(c->ctx, send, bytes, recv, c->timeout_s);
    if (st != ATTN_OK) c->broken = true;
    return st;
}

attn_status attn_comm_allgather(attn_comm *c, const void *send, size_t bytes, void *recv)
{
    return attn_comm_exchange(c, ATTN_COMM_DATA, send, bytes, recv);
}

void attn_comm_abort(attn_comm *c, int code)
{
    if (c && c->ops.abort) c->ops.abort(c->ctx, code);
    exit(code);
}
