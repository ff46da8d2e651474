/* A communicator for context parallelism: the few collectives DCP needs,
 * behind a vtable so that the core library has no MPI dependency. libattn
 * ships a one-rank communicator (attn_comm_self) and, when CMake finds MPI,
 * an Open MPI one in the separate library attn_mpi (attn/comm_mpi.h).
 *
 * Every collective has a deadline (attn_comm_set_timeout): a peer that
 * stops answering (a dead or stuck rank) makes the call fail with
 * ATTN_IO_ERROR naming the ranks it waited for, instead of hanging. After
 * such a failure the communicator is unusable; attn_comm_abort ends the job.
 *
 * Every exchange is framed: the ranks first exchange a fixed-size header
 * (the message's kind, the sender's exchange count and the payload size),
 * and the payload moves only when every rank's header equals this rank's.
 * Ranks that took different paths (one sends its final report while
 * another sends a step's partial output, different sizes, one exchange
 * more) fail on every rank with ATTN_BAD_STATE naming each rank that
 * differs, and nothing is written into recv. */
#ifndef ATTN_COMM_H
#define ATTN_COMM_H

#include "attn/types.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_comm attn_comm;

/* What an implementation provides. ctx is its own state. */
typedef struct attn_comm_ops {
    uint32_t struct_size; /* sizeof(attn_comm_ops): attn/abi.h */
    const char *name;     /* "self", "mpi" */
    /* recv [size][bytes]: every rank's send block, in rank order. A peer's
     * block of another size must never be written past bytes: refuse it
     * (an error naming the peer) or cut it to bytes. */
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

/* What an exchange carries; every rank must send the same kind at the same
 * point. Values below 256 are libattn's; callers may use 256 and up. */
typedef enum attn_comm_kind {
    ATTN_COMM_DATA = 0,        /* attn_comm_allgather */
    ATTN_COMM_AGREE = 1,       /* attn_comm_agree */
    ATTN_COMM_DCP_PARTIAL = 2, /* attn_dcp_forward's outputs and LSE */
    ATTN_COMM_DCP_CHOICE = 3,  /* attn_dcp_agree */
    ATTN_COMM_REPORT = 4,      /* a final per-rank report (attn serve --dcp) */
    ATTN_COMM_USER = 256
} attn_comm_kind;
/* "data", "agree", ...; "user" from ATTN_COMM_USER, "unknown" below it. */
ATTN_API const char *attn_comm_kind_name(uint32_t kind);

/* recv must hold size * bytes. ATTN_BAD_STATE after an earlier failure, or
 * when the ranks' kinds, sizes or exchange counts differ (see above). */
ATTN_API attn_status attn_comm_exchange(attn_comm *c, uint32_t kind, const void *send, size_t bytes,
                                        void *recv);
/* attn_comm_exchange with ATTN_COMM_DATA. */
ATTN_API attn_status attn_comm_allgather(attn_comm *c, const void *send, size_t bytes, void *recv);

/* One setting that every rank must hold equally: a name ("--steps") and
 * this rank's value as text. */
typedef struct attn_comm_field {
    const char *name;
    const char *value;
} attn_comm_field;
/* Startup agreement (a collective; every rank passes its own values):
 * ATTN_OK when every field has the same value on every rank, else
 * ATTN_INVALID_ARGUMENT on every rank with one message, the same on each,
 * naming every differing field and each rank's value ("<what> differ
 * between the ranks: --steps: rank 0: 3, rank 1: 6; ..."). A field that
 * a rank lacks reads "(none)". At most 256 fields of 4 KiB each. */
ATTN_API attn_status attn_comm_agree(attn_comm *c, const char *what, const attn_comm_field *fields,
                                     int n);

/* Ends the whole job with `code` (every rank). Does not return. */
ATTN_API void attn_comm_abort(attn_comm *c, int code);

ATTN_EXTERN_C_END

#endif
