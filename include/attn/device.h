/* Devices: where a backend's memory lives and its kernels run (contract v2,
 * docs/design/contract-v2.md).
 *
 * Every backend names its device in its contract object (attn_backend.device
 * in attn/backend.h); a backend that names none runs on the host device,
 * libattn's own (ordinary host memory, the CPU kernels). An application
 * opens one instance of a backend's device per engine: a context with
 * exactly one queue, on which every operation of the instance runs in the
 * order it was issued. An instance is used by one thread at a time
 * (attn_device_host() excepted: it is shared and thread-safe).
 *
 * Device memory is an opaque handle (void *) that only its device
 * interprets: a host pointer on the host device, a CUDA device pointer, a
 * cl_mem for OpenCL. Host code never does pointer arithmetic on a handle
 * and never dereferences one unless attn_device_host_visible(): every
 * tensor is a whole allocation plus an offset (bytes for copies, elements
 * for the tensors of attn_forward_args / attn_mla_args / attn_kv_view).
 *
 * Ordering. Copies in return once the source may be reused; copies out
 * return once the destination holds the data. Kernel launches and cache
 * writes may return before the device has finished: a failure that only
 * shows while the device runs is reported by the next copy out or
 * attn_device_synchronize() of the instance.
 *
 * Checks. libattn records every allocation of an instance; on a device
 * whose memory is not host-visible a copy, a cache write or a kernel call
 * with a handle that is not a live allocation of that instance, or a range
 * that runs past its end, is refused with ATTN_INVALID_ARGUMENT before the
 * device sees it. On a host-visible device handles are host pointers and
 * may be any memory the caller owns (as before contract v2). */
#ifndef ATTN_DEVICE_H
#define ATTN_DEVICE_H

#include "attn/layer.h"
#include "attn/platform.h"

ATTN_EXTERN_C_BEGIN

/* attn_device (an open instance) is declared in attn/layer.h: the KV view
 * names the device of its memory. */

/* What an instance is opened for; passed on to the device's open(). */
typedef struct attn_device_config {
    uint32_t struct_size;          /* sizeof(attn_device_config): attn/abi.h */
    const attn_platform *platform; /* NULL = attn_platform_current(); borrowed */
    int device_index;              /* which device of the platform; 0 = the first */
    int num_threads;               /* host threads its ops may use; 0 = libattn's pool */
} attn_device_config;

/* Fills the defaults above. */
ATTN_API void attn_device_config_init(attn_device_config *cfg);

/* Opens an instance of backend b's device (b NULL, or a backend without a
 * device: the host device). cfg NULL = defaults. A device that cannot open
 * here (no driver, no such device) fails with its reason as detail and
 * *out NULL. */
ATTN_API attn_status attn_device_open(const attn_backend *b, const attn_device_config *cfg,
                                      attn_device **out);
/* Frees every allocation still live, then closes the instance. */
ATTN_API void attn_device_close(attn_device *d);
/* libattn's process-wide host device instance: never closed, thread-safe. */
ATTN_API attn_device *attn_device_host(void);

/* "host", "opencl", ... (the device ops' name). NULL d: the host device. */
ATTN_API const char *attn_device_name(const attn_device *d);
/* Handles are host pointers the host may read and write (NULL d: true). */
ATTN_API bool attn_device_host_visible(const attn_device *d);
/* d and e are the same device kind (the same device ops; NULL = host). */
ATTN_API bool attn_device_same_kind(const attn_device *d, const attn_device *e);

/* What an allocation is for: a KV cache (long-lived, possibly far larger
 * than what is ever touched: the host device reserves it lazily) or a
 * step buffer (inputs, outputs, scratch). */
typedef enum attn_mem_kind {
    ATTN_MEM_CACHE = 0,
    ATTN_MEM_STEP = 1,
} attn_mem_kind;

/* bytes (> 0) of zeroed memory, aligned to at least 64 bytes. */
ATTN_API attn_status attn_device_alloc(attn_device *d, size_t bytes, attn_mem_kind kind,
                                       void **mem);
/* mem NULL: nothing. A handle that is not a live allocation of d is
 * ignored (and logged). */
ATTN_API void attn_device_free(attn_device *d, void *mem);
/* Size of a live allocation of d, 0 when mem is none. */
ATTN_API size_t attn_device_alloc_size(const attn_device *d, const void *mem);
/* Live allocations of d and their bytes (tests; leak checks). */
ATTN_API void attn_device_usage(const attn_device *d, int *count, uint64_t *bytes);

/* Host src -> device dst at dst_offset bytes. */
ATTN_API attn_status attn_device_copy_in(attn_device *d, void *dst, size_t dst_offset,
                                         const void *src, size_t bytes);
/* Device src at src_offset bytes -> host dst. */
ATTN_API attn_status attn_device_copy_out(attn_device *d, void *dst, const void *src,
                                          size_t src_offset, size_t bytes);
/* Waits until everything issued on d has finished; its failure, if any. */
ATTN_API attn_status attn_device_synchronize(attn_device *d);

ATTN_EXTERN_C_END

#endif
