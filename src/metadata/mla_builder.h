/* The MLA family's per-step metadata builders (mla.c, internal).
 *
 * The builders are referenced from descriptors in other folders: the
 * catalog's GPU MLA backends (weakly, backends/catalog/builders_weak.h),
 * CPU_MLA and REFERENCE_MLA (src/backends/). The split-KV decode partition
 * that attn__builder_mla_cpu plans is CPU_MLA's (its decode walks it), so
 * the kernel's row group and key chunk are stated here, where the planner
 * that depends on them sits: the kernels include this header, never the
 * reverse. */
#ifndef ATTN_METADATA_MLA_BUILDER_H
#define ATTN_METADATA_MLA_BUILDER_H

#include "attn/backend.h"
#include "attn/mla.h"

extern const attn_builder_ops attn__builder_mla;
extern const attn_builder_ops attn__builder_mla_cpu;
extern const attn_builder_ops attn__builder_mla_sparse;

/* Rows per decode group: one group's latent accumulators stay in a thread's
 * scratch ([rows][kv_lora_rank] fp32). */
#define ATTN__MLA_MAX_ROWS 128
/* Keys per decode step of the kernels. */
#define ATTN__MLA_KCHUNK 32

/* Split-KV decode partition of requests [r0, r1) (see attn_mla_work): rows
 * grouped by ATTN__MLA_MAX_ROWS, long key ranges split so that about three
 * pieces per thread exist, pieces ordered largest first. Returns the number
 * of pieces, or -1 when more than max_work would be needed. *num_partials
 * receives the partial slots used. */
int attn__mla_partition(const attn_common_metadata *cm, int r0, int r1, int H, int nthreads,
                        attn_mla_work *work, int max_work, int *num_partials);
/* Upper bound of attn__mla_partition's pieces for a batch shape. */
int attn__mla_partition_bound(int num_reqs, int num_tokens, int H, int nthreads);

#endif
