/* The one way to call a kernel (contract v2, docs/design/contract-v2.md).
 *
 * An attn_kernel is a backend's kernel opened for one layer on one device
 * instance. Opening it runs the backend's core self-test (once per process
 * per backend, cached; attn_backend_self_test) and refuses a backend whose
 * test failed or that has none: nothing calls kernel code libattn has not
 * checked, whoever the caller is (engine, DCP, Python, benches, the
 * harness). REFERENCE and REFERENCE_MLA, the oracles the tests compare
 * against, are the known answer themselves and open without one.
 * ATTN_SELFTEST=0 skips the test here as in the selector (logged).
 *
 * Every call checks, before the kernel sees anything: the entry point
 * (forward on an MLA backend, forward_mqa/forward_mha on a standard one:
 * ATTN_WRONG_ENTRY_POINT naming the right one), that args->layer (NULL =
 * the opened layer) has the opened geometry, that the KV view is memory of
 * the kernel's device, and on a device that is not host-visible that every
 * tensor range lies inside a live allocation of it. On a host-visible
 * device the element offsets are folded into the pointers. The kernel's
 * own checks (REFERENCE, CPU_ATTN, CPU_MLA: every block id, every length)
 * follow. A failed call touches nothing.
 *
 * A handle is used by one thread at a time; handles are independent. */
#ifndef ATTN_KERNEL_H
#define ATTN_KERNEL_H

#include "attn/device.h"
#include "attn/layer.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_kernel attn_kernel;

/* ---- a layer's row widths ------------------------------------------------------
 * The widths of the rows a layer's tensors hold per token, stated once.
 * Standard attention: q [num_heads][head_size], out [num_heads][head_size_v],
 * K/V written to the cache [num_kv_heads][head_size] / [num_kv_heads]
 * [head_size_v]. MLA (kv_lora_rank > 0): q [num_heads][qk_nope + rope],
 * out [num_heads][v_head_dim], the cache row written per token is the
 * latent [1][kv_lora_rank] then the rope key [1][qk_rope_head_dim];
 * forward_mqa's absorbed q is [num_heads][kv_lora_rank + rope] and its
 * latent out [num_heads][kv_lora_rank]. */
typedef struct attn_layer_rows {
    bool mla;
    int q_heads, q_dim;
    int out_dim;          /* per query head */
    int kv_heads;         /* K/V rows per token (MLA: 1) */
    int k_dim, v_dim;     /* MLA: kv_lora_rank and qk_rope_head_dim */
    int kv_dim;           /* max(k_dim, v_dim): a row of the step's K or V buffer */
    int mqa_q_dim;        /* MLA: kv_lora_rank + rope; 0 otherwise */
    int mqa_out_dim;      /* MLA: kv_lora_rank; 0 otherwise */
    int64_t q_row;        /* elements per token: q_heads * q_dim */
    int64_t out_row;      /* q_heads * out_dim */
    int64_t k_row, v_row; /* kv_heads * k_dim, kv_heads * v_dim */
} attn_layer_rows;

/* The rows of l, checked (positive heads and sizes within attn/types.h's
 * limits; num_heads a multiple of num_kv_heads for standard attention). */
ATTN_API attn_status attn_layer_rows_get(const attn_layer_params *l, attn_layer_rows *out);

/* ---- the handle ------------------------------------------------------------------ */

/* b's kernel for a layer on dev (NULL = libattn's host device instance;
 * else an instance of b's own device, attn_device_open(b, ...)). The layer
 * is copied; its sinks / ALiBi arrays are borrowed and must outlive the
 * handle. ATTN_UNSUPPORTED for a backend without kernel code here (its
 * reason names it), ATTN_SELFTEST_FAILED with the test's detail,
 * ATTN_INVALID_ARGUMENT for a device of another kind, or create's failure. */
ATTN_API attn_status attn_kernel_open(const attn_backend *b, const attn_layer_params *layer,
                                      attn_device *dev, attn_kernel **out);
ATTN_API void attn_kernel_close(attn_kernel *k);

ATTN_API const attn_backend *attn_kernel_backend(const attn_kernel *k);
ATTN_API const char *attn_kernel_name(const attn_kernel *k);    /* the descriptor's name */
ATTN_API const char *attn_kernel_variant(const attn_kernel *k); /* NULL when not reported */
ATTN_API attn_device *attn_kernel_device(const attn_kernel *k); /* never NULL */
ATTN_API const attn_layer_params *attn_kernel_layer(const attn_kernel *k);
ATTN_API const attn_layer_rows *attn_kernel_rows(const attn_kernel *k);
ATTN_API bool attn_kernel_is_mla(const attn_kernel *k);

/* Standard attention (attn/layer.h's attn_forward_args). */
ATTN_API attn_status attn_kernel_forward(attn_kernel *k, const attn_forward_args *a);
/* MLA decode over the latent cache (absorbed q) and prefill (decompressed
 * K/V), as attn/mla.h states them. */
ATTN_API attn_status attn_kernel_forward_mqa(attn_kernel *k, const attn_mla_args *a);
ATTN_API attn_status attn_kernel_forward_mha(attn_kernel *k, const attn_mla_args *a);

/* One MLA layer over a whole mixed batch, as an engine runs it (attn/mla.h
 * "one layer, whole batch"): decodes absorbed through W_UK, forward_mqa,
 * up-projected through W_UV; prefills by forward_mha; a sparse backend runs
 * every token through forward_mqa. The projections are host code, or the
 * kernel's own mla_project op (attn/backend.h) on its device: on a device
 * whose memory is not host-visible and a kernel without it this is
 * ATTN_UNSUPPORTED (call forward_mqa / forward_mha instead). scratch: at
 * least attn_kernel_mla_scratch_size bytes, host memory 64-byte aligned, or
 * memory of the kernel's device when the kernel projects there. */
ATTN_API size_t attn_kernel_mla_scratch_size(const attn_kernel *k, int max_tokens);
ATTN_API attn_status attn_kernel_mla_forward(attn_kernel *k, const attn_mla_args *a, void *scratch,
                                             size_t scratch_size);

ATTN_EXTERN_C_END

#endif
