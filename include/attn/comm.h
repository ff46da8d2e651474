/* A communicator for context parallelism: the few collectives DCP needs,
 * behind a vtable so that the core library has no MPI dependency. libattn
 * ships a one-rank communicator (attn_comm_self) and, when CMake finds MPI,
 * an Open MPI one in the separate library attn_mpi (attn/comm_mpi.h).
 *
 * Every collective has a deadline (attn_comm_set_timeout): a peer that
 * stops answering (a dead or stuck rank) makes the call fail with
 * ATTN_IO_ERROR naming the ranks it waited for, instead of hanging. After
 * such a failure the communicator is unusable; attn_comm_abort ends the job. */
#ifndef ATTN_COMM_H
#define ATTN_COMM_H

#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_comm attn_comm;

/* What an implementation provides. ctx is its own state. */
typedef struct attn_comm_ops {
    uint32_t struct_size; /* sizeof(attn_comm_ops): attn/abi.h */
    const char *name;     /* "self", "mpi" */
    /* recv [size][bytes]: every rank's send block, in rank order. */
    attn_status (*allgather)(void *ctx, const void *send, size_t bytes, void *recv,
                             double timeout_s);
    void (*abort)(void *ctx, int code); /* (optional) end every rank; default exit(code) */
    void (*destroy)(void *ctx);         /* (optional) */
} attn_comm_ops;

/* Wraps an implementation: rank in [0, size). Takes ownership of ctx
 * (ops->destroy runs on attn_comm_free, and on failure here). */
ATTN_API attn_status attn_comm_create(const attn_comm_ops *ops, void *ctx, int rank, int size,
                                      attn_comm **out);
/* A communicator of one rank (allgather copies). */
ATTN_API attn_status attn_comm_self(attn_comm **out);
ATTN_API void attn_comm_free(attn_comm *c);

ATTN_API int attn_comm_rank(const attn_comm *c);
ATTN_API int attn_comm_size(const attn_comm *c);
ATTN_API const char *attn_comm_name(const attn_comm *c);

#define ATTN_COMM_DEFAULT_TIMEOUT_S 60.0
/* Deadline of each collective; > 0. */
ATTN_API attn_status attn_comm_set_timeout(attn_comm *c, double seconds);
ATTN_API double attn_comm_timeout(const attn_comm *c);

/* recv must hold size * bytes. ATTN_BAD_STATE after an earlier failure. */
ATTN_API attn_status attn_comm_allgather(attn_comm *c, const void *send, size_t bytes, void *recv);

/* Ends the whole job with `code` (every rank). Does not return. */
ATTN_API void attn_comm_abort(attn_comm *c, int code);

ATTN_EXTERN_C_END

#endif
