/* REFERENCE_MLA: the double-precision MLA oracle (ref_mla.c). Two backend
 * objects, because a descriptor is either sparse or dense (vLLM's
 * use_sparse != is_sparse rule): REFERENCE_MLA (dense: forward_mqa and
 * forward_mha) and REFERENCE_MLA_SPARSE (forward_mqa over top-k indices,
 * every token). */
#ifndef ATTN_BACKENDS_REFERENCE_REF_MLA_H
#define ATTN_BACKENDS_REFERENCE_REF_MLA_H

#include "attn/backend.h"

extern const attn_backend attn__backend_reference_mla;
extern const attn_backend attn__backend_reference_mla_sparse;

#endif
