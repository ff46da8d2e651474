/* attn_comm over Open MPI (see attn/comm_mpi.h). Built into attn_mpi only.
 *
 * allgather sends to every peer and receives from each one only after
 * probing the message (MPI_Improbe): a receive is posted at the message's
 * own size, so a peer that sends another size than this rank expects is
 * reported by rank and never written past the block (a receive posted
 * smaller than the message overran the buffer inside Open MPI). Requests
 * are polled with MPI_Testall until done or the deadline: MPI collectives
 * have no timeout, and a peer that died or hangs must turn into an error
 * that names it. The poll sleeps briefly between tests so that waiting
 * ranks leave the cores to the ones still computing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/comm_mpi.h"
#include "util/check.h"

/* One peer's receive in the current allgather. */
typedef struct attn__mpi_peer {
    bool matched;
    int count;     /* bytes the peer sent */
    char *scratch; /* where a message of the wrong size lands */
} attn__mpi_peer;

typedef struct attn__mpi {
    MPI_Comm comm;
    int rank, size;
    bool finalize;
    MPI_Request *reqs;    /* [2 * size]: sends, then receives by peer rank */
    attn__mpi_peer *peer; /* [size] */
} attn__mpi;

#define ATTN__MPI_TAG 0x4443

static double attn__mpi_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Matches whatever peers have sent by now and posts their receives: 0, or
 * the peer whose message could not be taken. */
static int attn__mpi_match(attn__mpi *m, void *recv, size_t bytes, MPI_Request *rreq, int *left)
{
    for (int i = 0; i < m->size; i++) {
        attn__mpi_peer *p = &m->peer[i];
        if (i == m->rank || p->matched) continue;
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        if (MPI_Improbe(i, ATTN__MPI_TAG, m->comm, &flag, &msg, &st) != MPI_SUCCESS) return i + 1;
        if (!flag) continue;
        MPI_Get_count(&st, MPI_BYTE, &p->count);
        void *dst = (char *)recv + (size_t)i * bytes;
        if (p->count < 0 || (size_t)p->count != bytes) {
            dst = p->scratch = malloc(p->count > 0 ? (size_t)p->count : 1);
            if (!dst) return i + 1;
        }
        p->matched = true;
        (*left)--;
        if (MPI_Imrecv(dst, p->count, MPI_BYTE, &msg, &rreq[i]) != MPI_SUCCESS) return i + 1;
    }
    return 0;
}

static attn_status attn__mpi_timeout(const attn__mpi *m, MPI_Request *rreq, double timeout_s)
{
    char who[512];
    int w = 0;
    who[0] = 0;
    for (int i = 0; i < m->size; i++) {
        if (i == m->rank) continue;
        int flag = 0;
        if (m->peer[i].matched && rreq[i] != MPI_REQUEST_NULL)
            MPI_Test(&rreq[i], &flag, MPI_STATUS_IGNORE);
        bool waiting = !m->peer[i].matched || (rreq[i] != MPI_REQUEST_NULL && !flag);
        if (waiting && w >= 0 && (size_t)w < sizeof who)
            w += snprintf(who + w, sizeof who - (size_t)w, "%s%d", who[0] ? ", " : "", i);
    }
    return attn_set_error(ATTN_IO_ERROR,
                          "DCP exchange timed out on rank %d after %.1f s: no data from rank(s) %s "
                          "(a rank died or is stuck)",
                          m->rank, timeout_s, who[0] ? who : "?");
}

/* A peer that sent another size fails the call. A scratch buffer whose
 * receive is still in flight (a timeout) is left to MPI, never freed. */
static attn_status attn__mpi_sizes(attn__mpi *m, size_t bytes, const MPI_Request *rreq)
{
    attn_status st = ATTN_OK;
    for (int i = m->size - 1; i >= 0; i--) {
        attn__mpi_peer *p = &m->peer[i];
        if (!p->scratch) continue;
        st = attn_set_error(ATTN_BAD_STATE,
                            "DCP exchange refused on rank %d: rank %d sent %d bytes where %zu were "
                            "expected (nothing was written)",
                            m->rank, i, p->count, bytes);
        if (rreq[i] == MPI_REQUEST_NULL) free(p->scratch);
        p->scratch = NULL;
    }
    return st;
}

static attn_status attn__mpi_allgather(void *ctx, const void *send, size_t bytes, void *recv,
                                       double timeout_s)
{
    attn__mpi *m = ctx;
    if (bytes > (size_t)1 << 30)
        return attn_set_error(ATTN_OUT_OF_RANGE,
                              "MPI allgather: %zu bytes per rank (at most 1 GiB)", bytes);
    MPI_Request *sreq = m->reqs, *rreq = m->reqs + m->size;
    int ns = 0, left = m->size - 1;
    for (int i = 0; i < m->size; i++) {
        m->peer[i] = (attn__mpi_peer){0};
        rreq[i] = MPI_REQUEST_NULL;
        if (i == m->rank) {
            if (bytes) memmove((char *)recv + (size_t)i * bytes, send, bytes);
        } else {
            MPI_Isend(send, (int)bytes, MPI_BYTE, i, ATTN__MPI_TAG, m->comm, &sreq[ns++]);
        }
    }
    double deadline = attn__mpi_now() + timeout_s;
    long nap_ns = 1000;
    for (;;) {
        int done = 0, sdone = 0, bad = attn__mpi_match(m, recv, bytes, rreq, &left);
        if (bad) {
            attn__mpi_sizes(m, bytes, rreq);
            return attn_set_error(ATTN_IO_ERROR,
                                  "MPI allgather on rank %d: receiving from rank "
                                  "%d failed",
                                  m->rank, bad - 1);
        }
        if (MPI_Testall(m->size, rreq, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS ||
            MPI_Testall(ns, sreq, &sdone, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            attn__mpi_sizes(m, bytes, rreq);
            return attn_set_error(ATTN_IO_ERROR, "MPI allgather on rank %d failed", m->rank);
        }
        if (done && sdone && left == 0) return attn__mpi_sizes(m, bytes, rreq);
        if (attn__mpi_now() > deadline) break;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 200000) nap_ns *= 2;
    }
    attn__mpi_sizes(m, bytes, rreq);
    return attn__mpi_timeout(m, rreq, timeout_s);
}

static void attn__mpi_abort(void *ctx, int code)
{
    attn__mpi *m = ctx;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(m->comm, code);
}

static void attn__mpi_destroy(void *ctx)
{
    attn__mpi *m = ctx;
    if (!m) return;
    MPI_Comm_free(&m->comm);
    if (m->finalize) MPI_Finalize();
    free(m->reqs);
    free(m->peer);
    free(m);
}

static const attn_comm_ops attn__mpi_ops = {
    .struct_size = sizeof(attn_comm_ops),
    .name = "mpi",
    .allgather = attn__mpi_allgather,
    .abort = attn__mpi_abort,
    .destroy = attn__mpi_destroy,
};

bool attn_comm_mpi_launched(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    if (!v) v = getenv("PMIX_RANK");
    return v != NULL;
}

attn_status attn_comm_mpi_create(int *argc, char ***argv, attn_comm **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    bool finalize = false;
    if (!inited) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return attn_set_error(ATTN_IO_ERROR, "MPI_Init failed");
        finalize = true;
    }
    attn__mpi *m = calloc(1, sizeof *m);
    if (!m) return attn_set_error(ATTN_OUT_OF_MEMORY, "attn_comm_mpi_create: out of memory");
    MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &m->rank);
    MPI_Comm_size(m->comm, &m->size);
    m->finalize = finalize;
    m->reqs = calloc((size_t)2 * (size_t)m->size, sizeof(MPI_Request));
    m->peer = calloc((size_t)m->size, sizeof *m->peer);
    if (!m->reqs || !m->peer) {
        attn__mpi_destroy(m);
        return attn_set_error(ATTN_OUT_OF_MEMORY, "attn_comm_mpi_create: out of memory");
    }
    return attn_comm_create(&attn__mpi_ops, m, m->rank, m->size, out);
}
