/* The common MLA builder's steps (mla.c), shared with a backend's own MLA
 * builder whose metadata starts with attn_mla_metadata and appends its own
 * fields (CPU_MLA's, src/backends/mla/cpu_mla_builder.c). */
#ifndef ATTN_METADATA_MLA_BUILDER_H
#define ATTN_METADATA_MLA_BUILDER_H

#include <stddef.h>

#include "attn/backend.h"
#include "attn/mla.h"
#include "util/strbuf.h"

/* The generic MLA builders (mla.c: the variants' classes and thresholds),
 * named by the catalog's descriptors (the catalog sits on metadata). */
extern const attn_builder_ops attn__builder_mla;          /* common MLA */
extern const attn_builder_ops attn__builder_mla_varlen;   /* FLASH_ATTN_MLA */
extern const attn_builder_ops attn__builder_mla_flashmla; /* FLASHMLA */
extern const attn_builder_ops attn__builder_mla_uniform;  /* FlashInfer/TokenSpeed */
extern const attn_builder_ops attn__builder_mla_single;   /* CUTLASS_MLA */
extern const attn_builder_ops attn__builder_mla_sparse;   /* sparse MLA */

/* create(): checks init and gives the reorder threshold of a query class
 * for it (the speculative-decoding raise). */
attn_status attn__mla_builder_init(attn_mla_query_class cls, int threshold,
                                   const attn_builder_init *init, int *effective_threshold);

/* build(): checks cm and fills md (magic, struct_size = sizeof
 * (attn_mla_metadata), the decode/prefill split and its maxima). On failure
 * md is unchanged. */
attn_status attn__mla_fill(const attn_common_metadata *cm, attn_mla_query_class cls, int threshold,
                           attn_mla_metadata *md);

/* update_block_table(): md_in is MLA metadata of at least min_size bytes
 * and block_table_stride is usable. */
attn_status attn__mla_check_reuse(const void *md_in, size_t min_size, int block_table_stride);

/* describe(): the common fields as one JSON object; more (may be NULL)
 * appends a backend's keys. Returns the length (0 when out of memory). */
int attn__mla_describe_with(const void *md, void (*more)(attn__jw *w, const attn_mla_metadata *md),
                            char *buf, size_t size);

#endif
