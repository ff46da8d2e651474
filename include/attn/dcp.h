/* Decode context parallelism (DCP), as vLLM does it.
 *
 * Each of world_size ranks holds part of every request's KV cache. The
 * block table is the same on every rank; a request's tokens are dealt to
 * ranks in runs of `interleave` tokens within each virtual block of
 * block_size * world_size positions (vLLM's cp_kv_cache_interleave_size):
 * position p belongs to rank ((p mod (bs*W)) / I) mod W and is stored, on
 * that rank, at local offset ((p mod bs*W) / (W*I)) * I + p mod I of the
 * request's block p / (bs*W). A rank's tokens therefore fill its blocks
 * densely in position order, and it holds attn_dcp_local_len(seq_len)
 * of them (vLLM's get_dcp_local_seq_lens).
 *
 * A step: every rank writes only its own new tokens (attn_dcp_slot_mapping)
 * and runs attn_dcp_forward, which computes attention over its local keys
 * with the LSE (each query token sees the local keys at or before its
 * position, and within the sliding window), gathers (output, LSE) from
 * every rank and merges them (attn/merge.h): every rank ends with the
 * whole step's output. The backend must return the LSE for decode. */
#ifndef ATTN_DCP_H
#define ATTN_DCP_H

#include "attn/config.h"
#include "attn/layer.h"
#include "attn/platform.h"
#include "attn/comm.h"

ATTN_EXTERN_C_BEGIN

/* ---- token placement ------------------------------------------------------ */

/* Checks a placement: 1 <= world_size <= 1024, 0 <= rank < world_size,
 * interleave >= 1 dividing block_size (vLLM's requirement). */
ATTN_API attn_status attn_dcp_check(int world_size, int rank, int interleave, int block_size);
/* Tokens of positions [0, len) that rank holds. */
ATTN_API int32_t attn_dcp_local_len(int32_t len, int world_size, int rank, int interleave);
/* Rank holding position pos. */
ATTN_API int attn_dcp_owner(int32_t pos, int world_size, int interleave, int block_size);
/* The rank's slot for position pos given its request's block-table row, or
 * -1 when another rank holds it. */
ATTN_API int64_t attn_dcp_local_slot(int32_t pos, const int32_t *block_row, int world_size,
                                     int rank, int interleave, int block_size);

/* ---- the runner ------------------------------------------------------------ */

typedef struct attn_dcp attn_dcp;

typedef struct attn_dcp_init {
    uint32_t struct_size;        /* sizeof(attn_dcp_init): attn/abi.h */
    const attn_backend *backend; /* with kernel code; desc->can_return_lse_for_decode */
    const attn_layer_params *layer;
    attn_comm *comm; /* borrowed; its size is the DCP world */
    int interleave;  /* 0 = 1 */
    int block_size;
    int num_blocks;         /* of this rank's cache */
    int max_num_tokens;     /* tokens per step */
    int max_blocks_per_req; /* block table stride bound */
    int num_threads;        /* 0 = the pool's */
    /* (v2) the device the cache is on and the kernels run on (NULL = the
     * host device), and how many layers the runner serves: it opens one
     * checked kernel (attn/kernel.h) per layer at create. 0 = 1. */
    attn_device *device;
    int num_layers;
} attn_dcp_init;

/* ATTN_UNSUPPORTED (naming the backend) when it cannot return an LSE, has
 * no kernel, or the layer uses sinks or ALiBi (both need the global
 * position or a single denominator, which shards do not have); the kernel
 * open's failure (ATTN_SELFTEST_FAILED ...) when its kernel cannot be
 * opened. The local batch lives in the device's memory: the runner copies
 * its queries in and its outputs and LSE out by the device's copies. */
ATTN_API attn_status attn_dcp_create(const attn_dcp_init *init, attn_dcp **out);
ATTN_API void attn_dcp_free(attn_dcp *d);
ATTN_API int attn_dcp_world_size(const attn_dcp *d);
ATTN_API int attn_dcp_rank(const attn_dcp *d);

/* slots[t] for the step's tokens: this rank's slot, or -1 (another rank's
 * token). Positions are cm->positions, else seq_len - query_len + i. */
ATTN_API attn_status attn_dcp_slot_mapping(const attn_dcp *d, const attn_common_metadata *cm,
                                           int64_t *slots);

typedef struct attn_dcp_args {
    const attn_common_metadata *cm; /* the step's global metadata */
    const attn_kv_view *kv;         /* this rank's cache */
    int layer;                      /* (v2) which of the runner's layers, 0..num_layers-1 */
    const void *q;                  /* host memory, as attn_forward_args / attn_mla_args */
    void *out;                      /* host memory, [tokens][heads][head_size_v], layer dtype */
    float *lse;                     /* (optional) host memory, [tokens][heads], natural log */
    const void *w_uk, *w_uv;        /* MLA (host-visible devices only) */
} attn_dcp_args;

/* The whole step's attention on every rank (a collective: every rank calls
 * it with the same cm). A peer that does not answer within the
 * communicator's timeout fails the call with ATTN_IO_ERROR. */
ATTN_API attn_status attn_dcp_forward(attn_dcp *d, const attn_dcp_args *a);

typedef struct attn_dcp_timing {
    double local_ns;    /* metadata + local attention */
    double exchange_ns; /* allgather of (output, LSE) */
    double merge_ns;
    uint64_t exchange_bytes; /* sent by this rank */
} attn_dcp_timing;
/* Of the last attn_dcp_forward. */
ATTN_API attn_status attn_dcp_last_timing(const attn_dcp *d, attn_dcp_timing *t);

/* Startup consistency: every rank passes its own choice (e.g. "backend
 * CPU_ATTN, layout NHD, block size 16"); ATTN_OK when all are equal, else
 * ATTN_BACKEND_INVALID on every rank with msg "DCP ranks disagree on the
 * attention setup: rank 0: ...; rank 1: ...". A collective. */
#define ATTN_DCP_CHOICE_MAX 256
ATTN_API attn_status attn_dcp_agree(attn_comm *comm, const char *choice, char *msg, size_t size);

ATTN_EXTERN_C_END

#endif
