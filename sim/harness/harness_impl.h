/* Harness internals shared by harness.c (inputs, checksums, the engine
 * wrapper) and reference.c (the REFERENCE re-run). */
#ifndef ATTN_HARNESS_IMPL_H
#define ATTN_HARNESS_IMPL_H

#include "attn/backend.h"
#include "attn/kernel.h"
#include "harness/harness.h"

/* REFERENCE for one group: its checked kernel per layer run and, for a
 * paged group, its own metadata builder. When the engine's cache is on a
 * device whose memory is not host-visible, REFERENCE reads a host mirror
 * of each layer's cache that the harness writes with the same K/V and
 * slots (the harness never reads device memory). */
typedef struct attn__hns_ref {
    const attn_backend *backend;
    bool mla;
    bool own_builder;
    attn_builder_ops builder;
    void *builder_state;
    const void *md;
    attn_kernel **k;
    int num_impl;
    void **mirror; /* [num_impl] host copies of a device cache, or NULL */
    size_t mirror_bytes;
} attn__hns_ref;

struct attn__harness {
    attn__harness_config cfg;
    attn_platform *cpu; /* owned: where the stand-ins and REFERENCE validate */
    /* verification, per group */
    attn__hns_ref *kv, *enc;
    int num_kv, num_enc;
    void *out_ref;
    size_t out_ref_bytes;
    void *mla_scratch;
    size_t mla_scratch_size;
    /* this step */
    double kv_sum, enc_sum, max_diff;
    bool finite;
};

/* reference.c */
attn_status attn__hns_ref_attach(attn__harness *h, const attn_engine *e);
void attn__hns_ref_free(attn__harness *h);
/* Runs REFERENCE for io's layer into out_ref and folds the difference
 * into h->max_diff (no-op for a group without one). */
attn_status attn__hns_ref_check(attn__harness *h, const attn_engine_layer_io *io);

#endif
