/* The steps' logic that does not depend on the device API, written once
 * for the OpenCL runtime and the CUDA module: sizes and their checked
 * arithmetic, the plan, which buffers, which kernels launch in which order
 * with which arguments. Each runtime supplies its operations in an
 * attn__kd_rt (buffers are its opaque handles as void *). Like kd_plan.c
 * this calls no libattn function: failures go through rt->fail. */
#ifndef ATTN_DEVKERN_KD_STEP_H
#define ATTN_DEVKERN_KD_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/layer.h"
#include "attn/metadata.h"
#include "attn/status.h"
#include "backends/devkern/kd_launch.h"
#include "backends/devkern/kd_plan.h"

typedef struct attn__kd_rt {
    void *ctx;       /* the runtime's instance (attn__ocl *, attn__cuda *) */
    const char *who; /* message prefix ("OPENCL_ATTN", "CUDA MLA"; projections: the API) */
    unsigned compute_units;
    /* records msg as the thread's error; returns st */
    attn_status (*fail)(attn_status st, const char *msg);
    /* a buffer of at least bytes in *slot (reallocated when smaller) */
    attn_status (*scratch)(void *ctx, void **slot, size_t bytes);
    /* the instance's split-KV partials, at least bytes */
    attn_status (*part)(void *ctx, size_t bytes, void **part);
    /* a plan's words into *meta */
    attn_status (*upload)(void *ctx, void **meta, const attn__kd_plan *p);
    attn_status (*run)(void *ctx, const attn__kd_args *a);
    void (*release)(void *mem);
    /* mem's elements [off, off + elems) of esz bytes lie in it, on ctx's
     * device (who, what: for the message) */
    attn_status (*check)(void *ctx, const char *who, const void *mem, int64_t off, int64_t elems,
                         size_t esz, const char *what);
} attn__kd_rt;

/* A paged attention step: the layer's geometry, the plan of one batch and
 * its words on the device. */
typedef struct attn__kd_att {
    int H, KVH, D, Dv, bn;
    attn_attn_type type;
    attn__kd_plan plan; /* the last build */
    void *meta;         /* the plan's words */
    bool built;
} attn__kd_att;

/* One forward call's buffers and scalars. */
typedef struct attn__kd_att_io {
    const attn_kv_view *kv;
    const void *hp; /* the kernel state's per-head floats (kd_launch.h) */
    const void *q;
    void *out, *lse;
    int64_t q_off, out_off, lse_off;
    int q_elem, window, flags; /* flags: KD_F_* */
    float scale, softcap;
} attn__kd_att_io;

/* The layer geometries the kernels take (steps and kernel states alike):
 * heads and KV heads up to the runtime's grid limits. */
attn_status attn__kd_att_check_layer(const attn__kd_rt *rt, const attn_layer_params *l,
                                     int max_heads, int max_kv_heads);
/* A kernel state's per-head floats as first uploaded (kd_launch.h's hp:
 * sinks, ALiBi slopes, K and V scales of 1) into p when not NULL; returns
 * their count. */
size_t attn__kd_att_params(const attn_layer_params *l, float *p);
/* The step of a layer whose geometry the runtime has checked. */
void attn__kd_att_init(attn__kd_att *m, const attn_layer_params *l);
void attn__kd_att_free(attn__kd_att *m, const attn__kd_rt *rt);
/* Plans the batch and uploads its words; built on success. */
attn_status attn__kd_att_build(attn__kd_att *m, const attn__kd_rt *rt,
                               const attn_common_metadata *cm, int num_blocks, int split_len,
                               int max_splits);
/* The call against the step: its batch, the view's blocks, and every
 * buffer against the elements the launches address. */
attn_status attn__kd_att_check(const attn__kd_att *m, const attn__kd_rt *rt,
                               const attn_common_metadata *cm, const attn__kd_att_io *io);
/* The split-KV partials (when split), the attention launch and its merge. */
attn_status attn__kd_att_run(const attn__kd_att *m, const attn__kd_rt *rt,
                             const attn__kd_att_io *io);

/* An MLA layer's geometry as the kernels take it (kernel states and steps
 * alike). */
typedef struct attn__kd_mla_geom {
    int H, R, P, N, V;
    attn_dtype dtype;
    int elem; /* the activations' KD element */
} attn__kd_mla_geom;

/* An MLA step: the plan of one batch (the decodes' tiles, the prefills'
 * decompression), its words on the device, and the decompressed keys of
 * the prefills as a paged cache with the metadata of the standard
 * attention over them (that step is the runtime's). */
typedef struct attn__kd_mla {
    attn__kd_mla_geom g;
    attn__kd_plan plan; /* decodes' tiles, prefills' decompression */
    void *meta;         /* the plan's words */
    int num_decodes;    /* -1: both entry points serve every request */
    bool decompress;    /* the last build has prefills to decompress */
    bool built;         /* set by the runtime once its standard step is built too */
    attn__kd_mha_meta mha_meta;
    void *keys; /* decompressed keys and values */
    attn_kv_view keys_view;
} attn__kd_mla;

/* One MLA call's buffers and element kinds (w_uk / w_uv: forward_mha). */
typedef struct attn__kd_mla_io {
    const attn_kv_view *kv; /* the latent cache */
    const void *q, *w_uk, *w_uv;
    void *out, *lse;
    int64_t q_off, out_off, lse_off;
    int q_elem, kv_elem;
    float scale;    /* softmax scale */
    float kv_scale; /* the fp8 cache's scale, 1 otherwise */
} attn__kd_mla_io;

/* The layer's MLA geometry against what the kernels take (heads up to
 * max_heads). */
attn_status attn__kd_mla_check_layer(const attn__kd_rt *rt, const attn_layer_params *l,
                                     int max_heads);
/* Whether forward_mha has a geometry (nope and v_head_dim). */
bool attn__kd_mla_has_mha(const attn_layer_params *l);
/* The standard attention layer of forward_mha: every head its own KV head
 * of nope + rope keys and v_head_dim values, causal, unscaled cache. */
attn_layer_params attn__kd_mla_mha_layer(const attn_layer_params *l);

attn__kd_mla_geom attn__kd_mla_geom_of(const attn_layer_params *l, int elem);
/* Whether a and b have the same heads, kv_lora_rank and rope (mha: nope
 * and v_head_dim too). */
bool attn__kd_mla_geom_same(const attn__kd_mla_geom *a, const attn__kd_mla_geom *b, bool mha);
void attn__kd_mla_init(attn__kd_mla *m, const attn_layer_params *l, int elem);
void attn__kd_mla_free(attn__kd_mla *m, const attn__kd_rt *rt);

/* Plans the batch (num_decodes as attn_mla_step_build's; prefills: the
 * runtime has a standard step), uploads the words and, when m->decompress
 * comes back true, sizes the decompressed keys and their metadata; the
 * runtime then builds its standard step over m->mha_meta and sets built. */
attn_status attn__kd_mla_build(attn__kd_mla *m, const attn__kd_rt *rt,
                               const attn_common_metadata *cm, int num_decodes, int num_blocks,
                               int split_len, int max_splits, bool prefills);

/* The call against the step (its batch, the latent view's blocks) and
 * every buffer against what the launches address (mha: forward_mha's). */
attn_status attn__kd_mla_check(const attn__kd_mla *m, const attn__kd_rt *rt,
                               const attn_common_metadata *cm, const attn__kd_mla_io *io, bool mha);
/* forward_mqa's launches: the decode and, when split, its merge. */
attn_status attn__kd_mla_mqa(const attn__kd_mla *m, const attn__kd_rt *rt,
                             const attn__kd_mla_io *io);
/* forward_mha's decompression into m->keys (the standard attention over
 * m->keys_view follows, from query row attn__kd_mla_prefill_row). */
attn_status attn__kd_mla_run_decompress(const attn__kd_mla *m, const attn__kd_rt *rt,
                                        const attn__kd_mla_io *io);
int64_t attn__kd_mla_prefill_row(const attn__kd_mla *m, const attn_common_metadata *cm);

/* MLA's projections around forward_mqa (attn__kd_mla_project_plan): the
 * buffers checked, then one launch. rt->who names the API ("OpenCL"). */
attn_status attn__kd_mla_project_run(const attn__kd_rt *rt, const attn_layer_params *layer, int T,
                                     bool absorb, const void *in, int64_t in_offset, const void *w,
                                     void *out, int64_t out_offset);

#endif
