/* The REFERENCE re-run of --verify: after every layer the engine runs,
 * the scalar oracle (REFERENCE, REFERENCE_MLA for MLA layers) computes the
 * same layer on the same KV cache and common metadata, with metadata from
 * its own builder, and the largest |difference| is kept. A group whose
 * kernel is REFERENCE itself, or that runs no kernel, is not re-run. A
 * cache on a device whose memory is not host-visible is not read: the
 * oracle runs on a host mirror the harness writes with the step's K/V. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/convert.h"
#include "attn/device.h"
#include "attn/kvcache.h"
#include "attn/mla.h"
#include "attn/registry.h"
#include "harness/harness_impl.h"

enum { ATTN__HNS_CHUNK = 256 };

static bool attn__hns_fits(const attn_backend *b, bool mla)
{
    return b && b->kernel &&
           (mla ? b->kernel->forward_mqa && b->kernel->forward_mha : b->kernel->forward != NULL);
}

/* io's layer K/V written into the host mirror of its device cache, whose
 * view (same geometry and scales, host memory) goes to *out. */
static attn_status attn__hns_mirror(attn__hns_ref *r, const attn_engine_layer_io *io,
                                    attn_kv_view *out)
{
    *out = *io->kv;
    out->device = NULL;
    void **m = &r->mirror[io->layer_slot];
    if (!*m) {
        int64_t n = 0;
        attn_status st = attn_kv_view_extent(io->kv, &n);
        if (st != ATTN_OK) return st;
        size_t bytes = (size_t)n * attn_elem_size(io->kv->elem);
        st = attn_device_alloc(attn_device_host(), bytes, ATTN_MEM_CACHE, m);
        if (st != ATTN_OK) return attn_wrap_error(st, "harness: host mirror of a device cache");
    }
    out->data = *m;
    const int64_t *slots = io->common->slot_mapping;
    if (r->mla)
        return attn_mla_write_latent(out, slots, io->num_tokens, io->k, io->v, io->params->dtype);
    return attn_kv_write(out, slots, io->num_tokens, io->k, io->v, io->elem);
}
static attn_status attn__hns_ref_init(attn__harness *h, const attn_engine *e, int g, bool encoder,
                                      attn__hns_ref *r)
{
    attn_engine_group_info gi;
    attn_status st = encoder ? attn_engine_encoder_group_info_get(e, g, &gi)
                             : attn_engine_group_info_get(e, g, &gi);
    if (st != ATTN_OK) return st;
    const attn_layer_spec *spec = attn_model_group_spec(attn_engine_model(e), gi.model_group);
    bool mla = spec->use_mla;
    if (gi.kernel_mode == ATTN_KERNEL_NONE) return ATTN_OK;
    const attn_backend *b = NULL;
    const char *name = mla ? "REFERENCE_MLA" : "REFERENCE";
    if ((st = attn_backend_resolve(h->cpu, name, &b)) != ATTN_OK)
        return attn_wrap_error(st, "harness: %s for --verify", name);
    if (!attn__hns_fits(b, mla) || !strcmp(b->desc->name, gi.kernel)) return ATTN_OK;
    r->backend = b;
    r->mla = mla;
    r->own_builder = !encoder;
    if (r->own_builder) {
        if (!b->desc->builder)
            return attn_set_error(ATTN_UNSUPPORTED, "%s has no metadata builder", b->desc->name);
        r->builder = *b->desc->builder;
        attn_builder_init init = {
            .desc = b->desc,
            .layer = gi.params,
            .block_size = attn_engine_block_size(e),
            .num_blocks = attn_engine_num_blocks(e),
            .max_num_reqs = gi.max_num_reqs,
            .max_num_tokens = gi.max_num_tokens,
            .max_blocks_per_req = gi.max_blocks_per_req,
            .device = attn_device_host(),
        };
        if ((st = r->builder.create(&init, &r->builder_state)) != ATTN_OK)
            return attn_wrap_error(st, "%s metadata builder", b->desc->name);
    }
    size_t n = (size_t)(gi.layers_run ? gi.layers_run : 1);
    r->k = calloc(n, sizeof *r->k);
    r->mirror = calloc(n, sizeof *r->mirror);
    if (!r->k || !r->mirror) return attn_set_error(ATTN_OUT_OF_MEMORY, "harness: out of memory");
    r->num_impl = gi.layers_run;
    for (int l = 0; l < gi.layers_run; l++)
        if ((st = attn_kernel_open(b, gi.params, NULL, &r->k[l])) != ATTN_OK)
            return attn_wrap_error(st, "%s kernel for layer %d", b->desc->name, gi.layers[l]);
    /* the REFERENCE output, as large as the group's largest step */
    const attn_layer_rows *rows = attn_kernel_rows(r->k[0]);
    size_t bytes = (size_t)gi.max_num_tokens * (size_t)rows->out_row *
                   attn_elem_size(attn_dtype_elem(gi.params->dtype));
    size_t ss = mla ? attn_kernel_mla_scratch_size(r->k[0], gi.max_num_tokens) : 0;
    if (bytes > h->out_ref_bytes) {
        free(h->out_ref);
        h->out_ref = calloc(1, bytes);
        h->out_ref_bytes = h->out_ref ? bytes : 0;
    }
    if (ss > h->mla_scratch_size) {
        free(h->mla_scratch);
        h->mla_scratch = aligned_alloc(64, (ss + 63) / 64 * 64);
        h->mla_scratch_size = h->mla_scratch ? ss : 0;
    }
    if (!h->out_ref || (ss && !h->mla_scratch))
        return attn_set_error(ATTN_OUT_OF_MEMORY, "harness: out of memory");
    return ATTN_OK;
}

attn_status attn__hns_ref_attach(attn__harness *h, const attn_engine *e)
{
    h->num_kv = attn_engine_num_groups(e);
    h->num_enc = attn_engine_num_encoder_groups(e);
    h->kv = calloc((size_t)(h->num_kv ? h->num_kv : 1), sizeof *h->kv);
    h->enc = calloc((size_t)(h->num_enc ? h->num_enc : 1), sizeof *h->enc);
    if (!h->kv || !h->enc) return attn_set_error(ATTN_OUT_OF_MEMORY, "harness: out of memory");
    attn_status st = ATTN_OK;
    for (int g = 0; g < h->num_kv && st == ATTN_OK; g++)
        st = attn__hns_ref_init(h, e, g, false, &h->kv[g]);
    for (int g = 0; g < h->num_enc && st == ATTN_OK; g++)
        st = attn__hns_ref_init(h, e, g, true, &h->enc[g]);
    return st;
}

static void attn__hns_ref_release(attn__hns_ref *r)
{
    for (int l = 0; r->k && l < r->num_impl; l++)
        attn_kernel_close(r->k[l]);
    for (int l = 0; r->mirror && l < r->num_impl; l++)
        attn_device_free(attn_device_host(), r->mirror[l]);
    free(r->k);
    free(r->mirror);
    if (r->builder_state && r->builder.destroy) r->builder.destroy(r->builder_state);
    memset(r, 0, sizeof *r);
}

void attn__hns_ref_free(attn__harness *h)
{
    for (int g = 0; h->kv && g < h->num_kv; g++)
        attn__hns_ref_release(&h->kv[g]);
    for (int g = 0; h->enc && g < h->num_enc; g++)
        attn__hns_ref_release(&h->enc[g]);
    free(h->kv);
    free(h->enc);
    free(h->out_ref);
    free(h->mla_scratch);
    h->kv = h->enc = NULL;
    h->out_ref = h->mla_scratch = NULL;
    h->num_kv = h->num_enc = 0;
    h->out_ref_bytes = h->mla_scratch_size = 0;
}

static attn_status attn__hns_ref_forward(attn__harness *h, attn__hns_ref *r,
                                         const attn_engine_layer_io *io)
{
    attn_kernel *k = r->k[io->layer_slot];
    if (io->encoder) {
        attn_forward_args a = {.layer = io->params,
                               .common = io->common,
                               .q = io->q,
                               .out = h->out_ref,
                               .k = io->k,
                               .v = io->v};
        return attn_kernel_forward(k, &a);
    }
    /* the metadata is the same for every layer of the step: built once */
    attn_status st = ATTN_OK;
    if (io->layer_slot == 0)
        st = r->builder.build(r->builder_state, io->common_prefix_len, io->common, false, &r->md);
    if (st != ATTN_OK) return st;
    attn_kv_view host_kv;
    const attn_kv_view *kv = io->kv;
    if (!attn_device_host_visible(kv->device)) {
        if ((st = attn__hns_mirror(r, io, &host_kv)) != ATTN_OK) return st;
        kv = &host_kv;
    }
    if (r->mla) {
        attn_mla_args a = {.layer = io->params,
                           .common = io->common,
                           .metadata = r->md,
                           .kv = kv,
                           .q = io->q,
                           .out = h->out_ref,
                           .w_uk = io->w_uk,
                           .w_uv = io->w_uv};
        return attn_kernel_mla_forward(k, &a, h->mla_scratch, h->mla_scratch_size);
    }
    attn_forward_args a = {.layer = io->params,
                           .common = io->common,
                           .metadata = r->md,
                           .q = io->q,
                           .kv = kv,
                           .out = h->out_ref};
    return attn_kernel_forward(k, &a);
}

attn_status attn__hns_ref_check(attn__harness *h, const attn_engine_layer_io *io)
{
    int ng = io->encoder ? h->num_enc : h->num_kv;
    if (io->group < 0 || io->group >= ng) return ATTN_OK;
    attn__hns_ref *r = io->encoder ? &h->enc[io->group] : &h->kv[io->group];
    if (!r->k || io->layer_slot >= r->num_impl) return ATTN_OK;
    attn_status st = attn__hns_ref_forward(h, r, io);
    if (st != ATTN_OK) return st;
    size_t n = (size_t)io->num_tokens * (size_t)io->q_heads * (size_t)io->out_dim;
    float a[ATTN__HNS_CHUNK], b[ATTN__HNS_CHUNK];
    for (size_t i = 0; i < n; i += ATTN__HNS_CHUNK) {
        size_t m = n - i < ATTN__HNS_CHUNK ? n - i : ATTN__HNS_CHUNK;
        attn_elem_to_f32(a, io->out, io->elem, i, m);
        attn_elem_to_f32(b, h->out_ref, io->elem, i, m);
        for (size_t j = 0; j < m; j++) {
            double d = fabs((double)a[j] - (double)b[j]);
            h->max_diff = d > h->max_diff ? d : h->max_diff;
        }
    }
    return ATTN_OK;
}
