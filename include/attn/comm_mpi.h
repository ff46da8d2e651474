/* The Open MPI communicator (library attn_mpi, built when CMake finds MPI;
 * libattn itself has no MPI dependency). */
#ifndef ATTN_COMM_MPI_H
#define ATTN_COMM_MPI_H

#include "attn/comm.h"

ATTN_EXTERN_C_BEGIN

/* A communicator over MPI_COMM_WORLD (duplicated). Initialises MPI when it
 * is not yet (argc/argv may be NULL) and finalises it on attn_comm_free in
 * that case. Collectives are point-to-point exchanges polled against the
 * communicator's deadline, so a dead or stuck peer fails the call with
 * ATTN_IO_ERROR naming it instead of blocking forever. */
ATTN_API attn_status attn_comm_mpi_create(int *argc, char ***argv, attn_comm **out);

/* True when the process runs under an MPI launcher (mpirun's environment),
 * without initialising MPI. */
ATTN_API bool attn_comm_mpi_launched(void);

ATTN_EXTERN_C_END

#endif
