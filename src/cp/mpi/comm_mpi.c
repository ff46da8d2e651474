/* attn_comm over Open MPI (see attn/comm_mpi.h). Built into attn_mpi only.
 *
 * allgather posts one receive from and one send to every peer, then polls
 * them with MPI_Testall until done or the deadline: MPI collectives have no
 * timeout, and a peer that died or hangs must turn into an error that names
 * it. The poll sleeps briefly between tests so that waiting ranks leave the
 * cores to the ones still computing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/comm_mpi.h"
#include "util/check.h"

typedef struct attn__mpi {
    MPI_Comm comm;
    int rank, size;
    bool finalize;
    MPI_Request *reqs; /* [2 * size] */
} attn__mpi;

#define ATTN__MPI_TAG 0x4443

static double attn__mpi_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static attn_status attn__mpi_allgather(void *ctx, const void *send, size_t bytes, void *recv,
                                       double timeout_s)
{
    attn__mpi *m = ctx;
    if (bytes > (size_t)1 << 30)
        return attn_set_error(ATTN_OUT_OF_RANGE,
                              "MPI allgather: %zu bytes per rank (at most 1 GiB)", bytes);
    int n = 0;
    for (int i = 0; i < m->size; i++) {
        char *dst = (char *)recv + (size_t)i * bytes;
        if (i == m->rank) {
            if (bytes) memmove(dst, send, bytes);
            continue;
        }
        MPI_Irecv(dst, (int)bytes, MPI_BYTE, i, ATTN__MPI_TAG, m->comm, &m->reqs[n++]);
    }
    for (int i = 0; i < m->size; i++)
        if (i != m->rank)
            MPI_Isend(send, (int)bytes, MPI_BYTE, i, ATTN__MPI_TAG, m->comm, &m->reqs[n++]);
    double deadline = attn__mpi_now() + timeout_s;
    int done = 0;
    long nap_ns = 1000;
    for (;;) {
        if (MPI_Testall(n, m->reqs, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return attn_set_error(ATTN_IO_ERROR, "MPI allgather on rank %d failed", m->rank);
        if (done) return ATTN_OK;
        if (attn__mpi_now() > deadline) break;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 200000) nap_ns *= 2;
    }
    char who[512];
    int w = 0;
    who[0] = 0;
    for (int i = 0, k = 0; i < m->size; i++) {
        if (i == m->rank) continue;
        int flag = 0;
        if (m->reqs[k] != MPI_REQUEST_NULL) MPI_Test(&m->reqs[k], &flag, MPI_STATUS_IGNORE);
        if (m->reqs[k] != MPI_REQUEST_NULL && !flag && w >= 0 && (size_t)w < sizeof who)
            w += snprintf(who + w, sizeof who - (size_t)w, "%s%d", who[0] ? ", " : "", i);
        k++;
    }
    return attn_set_error(ATTN_IO_ERROR,
                          "DCP exchange timed out on rank %d after %.1f s: no data from rank(s) %s "
                          "(a rank died or is stuck)",
                          m->rank, timeout_s, who[0] ? who : "?");
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
    if (!m->reqs) {
        attn__mpi_destroy(m);
        return attn_set_error(ATTN_OUT_OF_MEMORY, "attn_comm_mpi_create: out of memory");
    }
    return attn_comm_create(&attn__mpi_ops, m, m->rank, m->size, out);
}
