/* The host side of the dialect's attention kernels: plan on the host, run
 * on the device. Shared by the OpenCL runtime (libattn) and the CUDA module
 * (libattn_cuda.so), so it calls no device and no libattn function (only
 * the header-only helpers of util/numeric.h): a failure is a status and a
 * message in the caller's buffer.
 *
 * A plan checks what the kernels will read of one batch's metadata
 * (query_start_loc, key counts, every block id a request reads against the
 * pool), cuts the requests' (token, head) rows into work-group tiles of
 * KD_ROWS rows, chooses the split-KV shares, and packs the int32 words the
 * kernels index (one upload per step):
 *   m_qsl:   query_start_loc [nreq + 1]
 *   m_kvlen: key count per request [nreq]
 *   m_tiles: (request, first row) per tile [2 * ntiles]
 *   m_bt:    block table rows [nreq][bt_stride] (the columns any request reads)
 *   m_work:  MLA decompression work (request, first key, first destination
 *            key) [3 * nwork]: keys of the decompressed requests in steps of
 *            KD_MLA_BN, each request's destination starting on a multiple
 *            of KD_MLA_BN.
 * The kernels' argument lists are in kd_launch.h. */
#ifndef ATTN_DEVKERN_KD_PLAN_H
#define ATTN_DEVKERN_KD_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/layer.h"
#include "attn/metadata.h"
#include "attn/status.h"

typedef struct attn__kd_plan_in {
    const char *who; /* message prefix, e.g. "OPENCL_ATTN" */
    const attn_common_metadata *cm;
    const int32_t *kv_lens;   /* keys per request: cm->seq_lens or the encoder's lengths */
    bool cross;               /* encoder keys: queries may outnumber keys */
    int num_blocks;           /* the pool every block id must lie in */
    int rows_per_token;       /* query heads served by one work-group column (GQA group) */
    int bn;                   /* keys per tile of the kernel: split lengths are whole tiles */
    int tile_begin, tile_end; /* requests whose rows get tiles */
    int decompress_begin, decompress_end; /* MLA: requests whose keys are decompressed */
    int split_len;                        /* keys per split-KV share; 0 = chosen for the device */
    int max_splits;                       /* 0 = no limit, 1 = never split */
    int64_t groups_per_tile;              /* work-groups beside the splits (KV heads) */
    unsigned compute_units;
} attn__kd_plan_in;

typedef struct attn__kd_plan {
    int nreq, ntok, ntiles, nsplit, split_len, bt_stride, block_size, num_blocks;
    int m_qsl, m_kvlen, m_tiles, m_bt, m_work;
    int nwork; /* decompression work items */
    int dkeys; /* destination keys of the decompression (whole KD_MLA_BN blocks) */
    int32_t *words;
    size_t nwords, cap; /* words used / allocated */
} attn__kd_plan;

/* Builds p from in (p's buffer is reused across builds). ATTN_BAD_METADATA
 * for metadata the kernels cannot read safely, ATTN_UNSUPPORTED beyond the
 * grid's limits, ATTN_OUT_OF_MEMORY; why (why_size bytes) says which. */
attn_status attn__kd_plan_build(attn__kd_plan *p, const attn__kd_plan_in *in, char *why,
                                size_t why_size);
void attn__kd_plan_free(attn__kd_plan *p);

/* The metadata of the standard attention that follows the MLA
 * decompression: requests [begin, end) of cm with query_start_loc from 0,
 * their sequence lengths, and a block table of the destination's blocks
 * of KD_MLA_BN keys (the plan's m_work order). The arrays are owned by m. */
typedef struct attn__kd_mha_meta {
    attn_common_metadata cm;
    int num_blocks; /* destination blocks */
    int32_t *qsl, *seq, *bt;
    size_t cap_qsl, cap_seq, cap_bt;
} attn__kd_mha_meta;

attn_status attn__kd_mha_meta_build(attn__kd_mha_meta *m, const attn_common_metadata *cm, int begin,
                                    int end, char *why, size_t why_size);
void attn__kd_mha_meta_free(attn__kd_mha_meta *m);

/* MLA's projections around forward_mqa for T tokens of layer l (absorb:
 * q [T][H][N + P] -> q_absorbed [T][H][R + P] through W_UK [H][N][R];
 * else the latent output [T][H][R] -> out [T][H][V] through W_UV
 * [H][R][V]): the geometry of attn_kd_mla_project into x (buffers and
 * offsets left to the caller) and the elements each buffer must hold past
 * its offset. ATTN_INVALID_ARGUMENT / ATTN_UNSUPPORTED with why. */
typedef struct attn__kd_mla_project attn__kd_mla_project;
attn_status attn__kd_mla_project_plan(const attn_layer_params *l, int T, bool absorb,
                                      attn__kd_mla_project *x, int64_t *in_elems, int64_t *w_elems,
                                      int64_t *out_elems, char *why, size_t why_size);

/* Largest element index + 1 a paged view addresses: its K rows of
 * head_size and, when dv > 0, its V rows of dv elements. False on overflow
 * or a malformed view. */
bool attn__kd_view_extent(const attn_kv_view *kv, int dv, int64_t *elems);

/* Element size in bytes of a KD_ELEM_* code (0 for an unknown code). */
size_t attn__kd_elem_size(int elem);

#endif
