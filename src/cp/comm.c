/* The communicator wrapper and the one-rank communicator. The wrapper owns
 * the deadline and the broken flag, so every implementation reports a
 * timed-out peer the same way and a broken communicator is never reused. */
#include "attn/comm.h"

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
};

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

attn_status attn_comm_allgather(attn_comm *c, const void *send, size_t bytes, void *recv)
{
    ATTN__CHECK_NULL(c);
    if (bytes && (!send || !recv))
        return attn__fail(ATTN_NULL_ARGUMENT, "attn_comm_allgather: send and recv are required");
    if (c->broken)
        return attn__fail(ATTN_BAD_STATE,
                          "attn_comm_allgather: the communicator failed earlier (rank %d)",
                          c->rank);
    if (bytes > SIZE_MAX / (size_t)c->size)
        return attn__fail(ATTN_OUT_OF_RANGE, "attn_comm_allgather: %zu bytes x %d ranks overflow",
                          bytes, c->size);
    attn_status st = c->ops.allgather(c->ctx, send, bytes, recv, c->timeout_s);
    if (st != ATTN_OK) c->broken = true;
    return st;
}

void attn_comm_abort(attn_comm *c, int code)
{
    if (c && c->ops.abort) c->ops.abort(c->ctx, code);
    exit(code);
}
