/* Harness internals shared by harness.c (inputs, checksums, the engine
 * wrapper) and reference.c (the REFERENCE re-run). */
#ifndef ATTN_HARNESS_IMPL_H
#define ATTN_HARNESS_IMPL_H

#include "attn/backend.h"
#include "harness/harness.h"

/* REFERENCE for one group: its kernel per layer run and, for a paged
 * group, its own metadata builder. */
typedef struct attn__hns_ref {
    const attn_backend *backend;
    attn_kernel_ops ops;
    attn_backend self; /* for attn_mla_forward */
    bool mla;
    bool own_builder;
    attn_builder_ops builder;
    void *builder_state;
    const void *md;
    void **impl;
    int num_impl;
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
