/* The core's self-test service (selftest.c, selftest_mla.c).
 *
 * One known-answer test per kernel kind (attn_kernel_kind): small fixed
 * shapes with deterministic data, run through the backend's own kernel ops
 * and compared with REFERENCE / REFERENCE_MLA, tolerances per model dtype
 * (and fp8 cache). A backend declares its kind in its kernel ops; the
 * selector asks attn__selftest (cached per backend object) before a
 * candidate may be chosen. Shapes whose dtype or kv-cache dtype the
 * descriptor does not accept are skipped. Each call runs on an instance of
 * the backend's own device; on the host device the kernels get the common
 * metadata only (forward args' metadata NULL), as CPU_ATTN, CPU_MLA and
 * REFERENCE accept it, on any other the metadata of the backend's builder.
 * The checked kernel handle (kernel.c, attn/kernel.h) is the gate built on
 * this service. */
#ifndef ATTN_SELFTEST_SELFTEST_H
#define ATTN_SELFTEST_SELFTEST_H

#include "attn/backend.h"

/* The kernel's declared kind (ATTN_KERNEL_UNDECLARED for ops too short to
 * hold the field). */
attn_kernel_kind attn__kernel_kind(const attn_kernel_ops *k);
/* b has a test to run: a declared kind or a self_test hook. */
bool attn__selftest_present(const attn_backend *b);
/* attn_backend_self_test, cached; detail gets the reason text on failure. */
attn_status attn__selftest(const attn_backend *b, char *detail, size_t size);
bool attn__selftest_disabled(void); /* ATTN_SELFTEST=0 */

/* The model-dtype tolerance of a relative max error (fp8 caches: at least 1e-3). */
double attn__selftest_tolerance(attn_dtype dt, attn_elem kv);
/* A descriptor accepts the model dtype / cache element of a shape. */
bool attn__selftest_fits(const attn_backend_desc *d, attn_dtype dt, attn_elem kv);

/* The standard-attention known answer through fwd(impl, ...), uncached
 * (CPU_ATTN's tests run it on each variant); d (may be NULL) filters the
 * shapes. */
typedef attn_status (*attn__selftest_forward_fn)(void *impl, const attn_forward_args *a);
attn_status attn__selftest_standard(const attn_backend_desc *d, attn__selftest_forward_fn fwd,
                                    void *impl, char *detail, size_t size);
/* One call of b's kernel on an instance of its device (selftest_device.c):
 * a's tensors and view are host memory; per-layer state from create; for a
 * device other than the host's, copies in and out and metadata from b's
 * own builder. */
attn_status attn__selftest_call(const attn_backend *b, const attn_forward_args *a);
attn_status attn__selftest_call_mla(const attn_backend *b, bool mha, const attn_mla_args *a);

/* The MLA known answer (sparse: forward_mqa over top-k indices only). */
attn_status attn__selftest_mla(const attn_backend *b, bool sparse, char *detail, size_t size);

#endif
