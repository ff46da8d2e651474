/* The device layer's internals (device.c: instances, the allocation table
 * and the range checks; host.c: the host device's ops and its cache
 * writes). Below kvcache and the kernels: they reach a device only through
 * this header and attn/device.h. */
#ifndef ATTN_DEVICE_IMPL_H
#define ATTN_DEVICE_IMPL_H

#include <pthread.h>

#include "attn/backend.h"
#include "attn/device.h"

typedef struct attn__dev_alloc {
    void *mem;
    size_t bytes;
    attn_mem_kind kind;
} attn__dev_alloc;

struct attn_device {
    const attn_device_ops *ops; /* never NULL: the host device's for the host */
    void *state;
    attn_device_config cfg;
    bool host_visible;
    bool shared; /* attn_device_host(): never closed */
    pthread_mutex_t mu;
    attn__dev_alloc *allocs;
    int num_allocs, cap_allocs;
    uint64_t bytes;
};

extern const attn_device_ops attn__host_device_ops;

/* The ops a backend's memory lives on (the host device's when it names
 * none); NULL b: the host device's. */
const attn_device_ops *attn__device_ops_of(const attn_backend *b);

/* [off, off + bytes) lies inside the live allocation mem of d. Always true
 * on a host-visible device (its handles are the caller's host pointers);
 * otherwise ATTN_INVALID_ARGUMENT naming `what`. */
attn_status attn__device_range(attn_device *d, const void *mem, uint64_t off, uint64_t bytes,
                               const char *what);
/* Elements a view addresses from data (its largest K/V element + 1), with
 * checked arithmetic; false when the view's geometry is negative or the
 * extent overflows. */
bool attn__view_extent(const attn_kv_view *kv, int64_t *elems);
/* kv->data is memory of kv->device covering the view's extent (a no-op on
 * the host and on host-visible devices). */
attn_status attn__device_view_range(const attn_kv_view *kv, const char *who);

/* A K/V cache view that a write may address: memory, a storable element,
 * sane geometry and finite fp8 scales (every device's kv_write runs it). */
attn_status attn__kv_view_check(const attn_kv_view *kv);
/* The same for an MLA latent cache view; `who` prefixes the message. */
attn_status attn__latent_view_check(const char *who, const attn_kv_view *kv);

/* The host device's cache writes (also what attn_kv_write and
 * attn_mla_write_latent run for a view without a device). Inputs are
 * checked by the caller. */
attn_status attn__host_kv_write(const attn_kv_view *kv, const attn_kv_write_args *a);
attn_status attn__host_mla_write(const attn_kv_view *kv, const attn_mla_write_args *a);

#endif
