/* References to objects defined by other parts of libattn (internal).
 *
 * The catalog's descriptors point at the per-step metadata builders
 * (src/metadata/) and the registry resolves "builtin:CPU_ATTN" and friends
 * to the CPU kernels (src/backends/cpu, reference, mla).
 *
 * The references are strong by default: a weak undefined reference does
 * not pull an object out of a static archive, so with weak references an
 * executable linked against libattn.a would silently lose the builders and
 * the CPU kernels. A partial build (a part left out on purpose) may define
 * ATTN_CATALOG_WEAK_REFS: then an absent object reads as NULL — a descriptor
 * without a builder, or a builtin that resolves to the ImportError "libattn
 * was built without the CPU_ATTN kernels". */
#ifndef ATTN_BACKENDS_CATALOG_BUILDERS_WEAK_H
#define ATTN_BACKENDS_CATALOG_BUILDERS_WEAK_H

#include "attn/backend.h"

#ifdef ATTN_CATALOG_WEAK_REFS
#define ATTN__WEAK __attribute__((weak))
#else
#define ATTN__WEAK
#endif

extern const attn_builder_ops attn__builder_flash_attn ATTN__WEAK;
extern const attn_builder_ops attn__builder_flashinfer ATTN__WEAK;
extern const attn_builder_ops attn__builder_triton ATTN__WEAK;
extern const attn_builder_ops attn__builder_rocm ATTN__WEAK;
extern const attn_builder_ops attn__builder_flex ATTN__WEAK;
extern const attn_builder_ops attn__builder_mla ATTN__WEAK;          /* common MLA */
extern const attn_builder_ops attn__builder_mla_varlen ATTN__WEAK;   /* FLASH_ATTN_MLA */
extern const attn_builder_ops attn__builder_mla_flashmla ATTN__WEAK; /* FLASHMLA */
extern const attn_builder_ops attn__builder_mla_uniform ATTN__WEAK;  /* FlashInfer/TokenSpeed */
extern const attn_builder_ops attn__builder_mla_single ATTN__WEAK;   /* CUTLASS_MLA */
extern const attn_builder_ops attn__builder_mla_sparse ATTN__WEAK;   /* sparse MLA */

extern const attn_backend attn__backend_cpu_attn ATTN__WEAK;
extern const attn_backend attn__backend_cpu_mla ATTN__WEAK;
extern const attn_backend attn__backend_reference ATTN__WEAK;
extern const attn_backend attn__backend_cpu_mla_sparse ATTN__WEAK;
extern const attn_backend attn__backend_reference_mla ATTN__WEAK;
extern const attn_backend attn__backend_reference_mla_sparse ATTN__WEAK;

#endif
