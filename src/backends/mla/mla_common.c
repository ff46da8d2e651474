/* What every MLA backend shares: the latent cache write (checked here, then
 * run by the view's device), the W_UK / W_UV projections around the
 * absorbed path, one-call layer execution for engines (run only through
 * the checked kernel handle, src/selftest/kernel.c), and the call
 * validation used by REFERENCE_MLA and CPU_MLA.
 *
 * Invariant: a function that fails has written nothing - every check runs
 * before the first store. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/mla/mla_internal.h"
#include "backends/reference/reference.h"
#include "device/device_impl.h"
#include "util/error.h"
#include "util/numeric.h"

/* ---- the kernel's slots ------------------------------------------------------ */

#define ATTN__HAS_SLOT(k, slot)                                                                    \
    ((k)->struct_size >= offsetof(attn_kernel_ops, slot) + sizeof((k)->slot) && (k)->slot)

static const char *attn__bname(const attn_backend *b)
{
    return b->desc && b->desc->name ? b->desc->name : "backend";
}

/* ---- small helpers ---------------------------------------------------------- */

static bool attn__is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

size_t attn_mla_row_bytes(int head_size, attn_elem elem)
{
    if (head_size <= 0 || (unsigned)elem >= ATTN_ELEM_COUNT) return 0;
    return (size_t)head_size * attn_elem_size(elem);
}

int attn_mla_view_latent_dim(const attn_kv_view *kv)
{
    if (!kv || kv->head_size <= 0) return 0;
    if (kv->head_size_v > 0 && kv->head_size_v < kv->head_size) return kv->head_size_v;
    return kv->head_size > ATTN_MLA_DEFAULT_ROPE_DIM ? kv->head_size - ATTN_MLA_DEFAULT_ROPE_DIM
                                                     : kv->head_size;
}

/* ---- the latent cache write ---------------------------------------------------- */

attn_status attn_mla_write_latent(const attn_kv_view *kv, const int64_t *slot_mapping,
                                  int num_tokens, const void *latent, const void *k_rope,
                                  attn_dtype dtype)
{
    return attn_mla_write_latent_at(kv, slot_mapping, num_tokens, latent, 0, k_rope, 0, dtype);
}

/* A source of rows [off, off + n * row) on a device that is not host-visible lies inside its
 * allocation. */
static attn_status attn__latent_src(attn_device *d, const void *p, int64_t off, int n, int row,
                                    size_t esz, const char *what)
{
    if (attn_device_host_visible(d) || row == 0) return ATTN_OK;
    size_t bytes, first;
    if (off < 0 || !attn__mul_size((size_t)n, (size_t)row, &bytes) ||
        !attn__mul_size(bytes, esz, &bytes) || !attn__mul_size((size_t)off, esz, &first))
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_mla_write_latent: %s range overflows", what);
    return attn__device_range(d, p, first, bytes, what);
}

attn_status attn_mla_write_latent_at(const attn_kv_view *kv, const int64_t *slot_mapping,
                                     int num_tokens, const void *latent, int64_t latent_offset,
                                     const void *k_rope, int64_t k_rope_offset, attn_dtype dtype)
{
    ATTN__CHECK_NULL(kv);
    if (num_tokens < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_mla_write_latent: num_tokens %d < 0",
                          num_tokens);
    if ((unsigned)dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "attn_mla_write_latent: unknown dtype %d",
                          (int)dtype);
    attn_status st = attn__latent_view_check("attn_mla_write_latent", kv);
    if (st != ATTN_OK) return st;
    if (num_tokens == 0) return ATTN_OK;
    ATTN__CHECK_NULL(slot_mapping);
    ATTN__CHECK_NULL(latent);
    int R = attn_mla_view_latent_dim(kv);
    int P = kv->head_size - R;
    if (P > 0 && !k_rope)
        return attn__fail(ATTN_NULL_ARGUMENT,
                          "attn_mla_write_latent: argument 'k_rope' is NULL (rope part %d)", P);
    if (latent_offset < 0 || k_rope_offset < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "attn_mla_write_latent: negative source offset (%lld, %lld)",
                          (long long)latent_offset, (long long)k_rope_offset);
    int64_t nslots = (int64_t)kv->num_blocks * kv->block_size;
    for (int t = 0; t < num_tokens; t++) {
        int64_t s = slot_mapping[t];
        if (s == -1) continue;
        if (s < 0 || s >= nslots)
            return attn__fail(ATTN_OUT_OF_RANGE,
                              "attn_mla_write_latent: slot_mapping[%d] = %lld is outside the "
                              "cache (%lld slots)",
                              t, (long long)s, (long long)nslots);
    }
    attn_device *d = kv->device;
    if (d && !d->ops->mla_write)
        return attn__fail(ATTN_UNSUPPORTED,
                          "attn_mla_write_latent: device %s cannot hold an MLA latent cache",
                          attn_device_name(d));
    attn_elem src = attn_dtype_elem(dtype);
    size_t ssz = attn_elem_size(src);
    if ((st = attn__device_view_range(kv, "attn_mla_write_latent")) != ATTN_OK ||
        (st = attn__latent_src(d, latent, latent_offset, num_tokens, R, ssz, "latent")) !=
            ATTN_OK ||
        (st = attn__latent_src(d, k_rope, k_rope_offset, num_tokens, P, ssz, "k_rope")) != ATTN_OK)
        return st;
    attn_mla_write_args a = {.struct_size = sizeof a,
                             .slot_mapping = slot_mapping,
                             .num_tokens = num_tokens,
                             .latent = latent,
                             .k_rope = P > 0 ? k_rope : NULL,
                             .latent_offset = latent_offset,
                             .k_rope_offset = k_rope_offset,
                             .latent_dim = R,
                             .rope_dim = P,
                             .src = src};
    return d ? d->ops->mla_write(d->state, kv, &a) : attn__host_mla_write(kv, &a);
}

/* ---- projections ------------------------------------------------------------------ */

static attn_status attn__check_proj(const char *who, const attn_layer_params *layer, int n,
                                    bool absorb)
{
    if (n < 0) return attn__fail(ATTN_INVALID_ARGUMENT, "%s: num_tokens %d < 0", who, n);
    if ((unsigned)layer->dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: unknown dtype %d", who, (int)layer->dtype);
    if (layer->num_heads <= 0 || layer->kv_lora_rank <= 0 || layer->qk_rope_head_dim < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: needs num_heads > 0, kv_lora_rank > 0, qk_rope_head_dim >= 0 "
                          "(got %d, %d, %d)",
                          who, layer->num_heads, layer->kv_lora_rank, layer->qk_rope_head_dim);
    if (absorb ? layer->qk_nope_head_dim <= 0 : layer->v_head_dim <= 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: needs %s > 0 (got %d)", who,
                          absorb ? "qk_nope_head_dim" : "v_head_dim",
                          absorb ? layer->qk_nope_head_dim : layer->v_head_dim);
    return ATTN_OK;
}

attn_status attn_mla_absorb_q(const attn_layer_params *layer, int num_tokens, const void *q,
                              const void *w_uk, void *q_absorbed)
{
    ATTN__CHECK_NULL(layer);
    attn_status st = attn__check_proj("attn_mla_absorb_q", layer, num_tokens, true);
    if (st != ATTN_OK || num_tokens == 0) return st;
    ATTN__CHECK_NULL(q);
    ATTN__CHECK_NULL(w_uk);
    ATTN__CHECK_NULL(q_absorbed);
    attn_elem e = attn_dtype_elem(layer->dtype);
    int H = layer->num_heads, R = layer->kv_lora_rank, P = layer->qk_rope_head_dim;
    int N = layer->qk_nope_head_dim, D = R + P;
    st = attn__mla_project(num_tokens, H, N, R, q, (size_t)H * (N + P), (size_t)(N + P), w_uk,
                           q_absorbed, (size_t)H * D, (size_t)D, e);
    if (st != ATTN_OK) return st;
    /* the rope part is shared as it is */
    size_t esz = attn_elem_size(e);
    for (size_t row = 0; row < (size_t)num_tokens * H; row++)
        memcpy((char *)q_absorbed + (row * D + R) * esz,
               (const char *)q + (row * (N + P) + N) * esz, (size_t)P * esz);
    return ATTN_OK;
}

attn_status attn_mla_up_project(const attn_layer_params *layer, int num_tokens,
                                const void *o_latent, const void *w_uv, void *out)
{
    ATTN__CHECK_NULL(layer);
    attn_status st = attn__check_proj("attn_mla_up_project", layer, num_tokens, false);
    if (st != ATTN_OK || num_tokens == 0) return st;
    ATTN__CHECK_NULL(o_latent);
    ATTN__CHECK_NULL(w_uv);
    ATTN__CHECK_NULL(out);
    int H = layer->num_heads, R = layer->kv_lora_rank, V = layer->v_head_dim;
    return attn__mla_project(num_tokens, H, R, V, o_latent, (size_t)H * R, (size_t)R, w_uv, out,
                             (size_t)H * V, (size_t)V, attn_dtype_elem(layer->dtype));
}

/* ---- one layer, whole batch ------------------------------------------------------------ */

static size_t attn__align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

size_t attn_mla_forward_scratch_size(const attn_layer_params *layer, int max_tokens)
{
    if (!layer || max_tokens <= 0 || layer->num_heads <= 0 || layer->kv_lora_rank <= 0 ||
        (unsigned)layer->dtype >= ATTN_DTYPE_COUNT)
        return 0;
    size_t e = attn_elem_size(attn_dtype_elem(layer->dtype));
    size_t rows = (size_t)max_tokens * (size_t)layer->num_heads;
    size_t D = (size_t)layer->kv_lora_rank +
               (size_t)(layer->qk_rope_head_dim > 0 ? layer->qk_rope_head_dim : 0);
    return attn__align64(rows * D * e) + attn__align64(rows * (size_t)layer->kv_lora_rank * e);
}

attn_status attn__mla_forward(const attn_backend *b, void *impl, const attn_mla_args *a,
                              void *scratch, size_t scratch_size)
{
    const char *who = attn__bname(b);
    bool sparse = (b->desc && b->desc->is_sparse) || !ATTN__HAS_SLOT(b->kernel, forward_mha);

    /* Validate both halves before anything runs, so a bad call writes nothing. */
    attn__mla_call cq, ch;
    attn_status st = attn__mla_prepare(who, a, sparse ? ATTN__MLA_MQA_SPARSE : ATTN__MLA_MQA, &cq);
    if (st != ATTN_OK) return st;
    if (!sparse) {
        st = attn__mla_prepare(who, a, ATTN__MLA_MHA, &ch);
        if (st != ATTN_OK) return st;
    }
    const attn_common_metadata *cm = cq.cm;
    int ndt = 0;
    if (sparse)
        ndt = cm->num_actual_tokens;
    else if (cq.md)
        ndt = cq.md->num_decode_tokens;
    if (ndt > 0) {
        /* a device kernel's own projections: the scratch is its device's
         * memory, addressed by element offsets */
        bool dev = ATTN__HAS_SLOT(b->kernel, mla_project);
        size_t need = attn_mla_forward_scratch_size(a->layer, ndt);
        if (!scratch || scratch_size < need)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "attn_kernel_mla_forward: scratch of %zu bytes is too small for %d "
                              "decode tokens (%zu needed)",
                              scratch_size, ndt, need);
        if (!dev && ((uintptr_t)scratch & 63u) != 0)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "attn_kernel_mla_forward: scratch must be 64-byte aligned");
        size_t e = attn_elem_size(cq.q_elem);
        size_t rows = (size_t)ndt * (size_t)cq.H;
        size_t o_at = attn__align64(rows * (size_t)cq.D * e);
        attn_mla_args d = *a;
        if (dev) {
            st = b->kernel->mla_project(impl, a->layer, ndt, true, a->q, a->q_offset, a->w_uk,
                                        scratch, 0);
            d.q = scratch;
            d.q_offset = 0;
            d.out = scratch;
            d.out_offset = (int64_t)(o_at / e);
        } else {
            st = attn_mla_absorb_q(a->layer, ndt, a->q, a->w_uk, scratch);
            d.q = scratch;
            d.out = (char *)scratch + o_at;
        }
        if (st != ATTN_OK) return st;
        st = b->kernel->forward_mqa(impl, &d);
        if (st != ATTN_OK) return st;
        st = dev ? b->kernel->mla_project(impl, a->layer, ndt, false, scratch, d.out_offset,
                                          a->w_uv, a->out, a->out_offset)
                 : attn_mla_up_project(a->layer, ndt, d.out, a->w_uv, a->out);
        if (st != ATTN_OK) return st;
    }
    if (!sparse && ch.req_end > ch.req_begin) return b->kernel->forward_mha(impl, a);
    return ATTN_OK;
}

/* ---- call validation --------------------------------------------------------------------- */

static attn_status attn__check_common(const char *who, const attn_common_metadata *cm,
                                      const attn_kv_view *kv, int r0, int r1)
{
    if (cm->num_reqs < 0 || cm->num_actual_tokens < 0)
        return attn__fail(ATTN_BAD_METADATA, "%s: num_reqs %d / num_actual_tokens %d < 0", who,
                          cm->num_reqs, cm->num_actual_tokens);
    if (cm->num_reqs == 0) return ATTN_OK;
    if (!cm->query_start_loc || !cm->seq_lens || !cm->block_table)
        return attn__fail(ATTN_BAD_METADATA,
                          "%s: query_start_loc, seq_lens and block_table are required", who);
    if (cm->block_size != 0 && cm->block_size != kv->block_size)
        return attn__fail(ATTN_BAD_METADATA,
                          "%s: metadata block_size %d differs from the cache's %d", who,
                          cm->block_size, kv->block_size);
    if (cm->query_start_loc[0] != 0 || cm->query_start_loc[cm->num_reqs] != cm->num_actual_tokens)
        return attn__fail(ATTN_BAD_METADATA,
                          "%s: query_start_loc must run from 0 to num_actual_tokens (%d..%d, "
                          "want 0..%d)",
                          who, cm->query_start_loc[0], cm->query_start_loc[cm->num_reqs],
                          cm->num_actual_tokens);
    int bs = kv->block_size;
    for (int r = r0; r < r1; r++) {
        int q0 = cm->query_start_loc[r], q1 = cm->query_start_loc[r + 1];
        int L = cm->seq_lens[r];
        if (q0 < 0 || q1 < q0 || q1 > cm->num_actual_tokens)
            return attn__fail(ATTN_BAD_METADATA,
                              "%s: query_start_loc of request %d is not non-decreasing within "
                              "the batch (%d..%d)",
                              who, r, q0, q1);
        if (L < q1 - q0)
            return attn__fail(ATTN_BAD_METADATA,
                              "%s: request %d has %d query tokens but seq_len %d", who, r, q1 - q0,
                              L);
        int64_t nb = ((int64_t)L + bs - 1) / bs;
        if (nb > cm->block_table_stride)
            return attn__fail(ATTN_BAD_METADATA,
                              "%s: request %d needs %lld blocks for %d tokens but the block "
                              "table has %d columns",
                              who, r, (long long)nb, L, cm->block_table_stride);
        const int32_t *bt = attn__mla_block_table(cm, r);
        for (int64_t i = 0; i < nb; i++)
            if (bt[i] < 0 || bt[i] >= kv->num_blocks)
                return attn__fail(ATTN_BAD_METADATA,
                                  "%s: request %d block_table[%lld] = %d is outside the cache "
                                  "(%d blocks)",
                                  who, r, (long long)i, bt[i], kv->num_blocks);
    }
    return ATTN_OK;
}

/* CPU_MLA_SPARSE: every top-k index is -1 (unused) or inside its request */
static attn_status attn__check_topk(const char *who, const attn_mla_args *a,
                                    const attn__mla_call *c)
{
    const attn_common_metadata *cm = c->cm;
    if (!a->topk_indices || a->topk <= 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s forward_mqa: a sparse backend needs topk_indices and topk > 0 "
                          "(got %s, %d)",
                          who, a->topk_indices ? "indices" : "NULL", a->topk);
    for (int r = c->req_begin; r < c->req_end; r++) {
        int Ls = cm->seq_lens[r];
        for (int t = cm->query_start_loc[r]; t < cm->query_start_loc[r + 1]; t++) {
            const int32_t *ix = a->topk_indices + (size_t)t * (size_t)a->topk;
            for (int k = 0; k < a->topk; k++)
                if (ix[k] < -1 || ix[k] >= Ls)
                    return attn__fail(ATTN_INVALID_ARGUMENT,
                                      "%s forward_mqa: topk_indices[%d][%d] = %d is outside "
                                      "request %d's sequence (%d tokens; -1 = unused)",
                                      who, t, k, ix[k], r, Ls);
        }
    }
    return ATTN_OK;
}

/* The layer's MLA dims into c, checked for the entry point */
static attn_status attn__mla_dims(const char *who, const attn_mla_args *a, attn__mla_entry entry,
                                  attn__mla_call *c)
{
    const attn_layer_params *L = a->layer;
    c->H = L->num_heads;
    c->R = L->kv_lora_rank;
    c->P = L->qk_rope_head_dim;
    c->D = c->R + c->P;
    c->nope = L->qk_nope_head_dim;
    c->V = L->v_head_dim;
    if (c->H <= 0 || c->R <= 0 || c->P < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: MLA needs num_heads > 0, kv_lora_rank > 0 and qk_rope_head_dim "
                          ">= 0 (got %d, %d, %d)",
                          who, c->H, c->R, c->P);
    if (L->head_size != 0 && L->head_size != c->D)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: head_size %d is not kv_lora_rank + qk_rope_head_dim = %d", who,
                          L->head_size, c->D);
    if (entry == ATTN__MLA_MHA) {
        if (c->nope <= 0 || c->V <= 0)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "%s forward_mha: needs qk_nope_head_dim > 0 and v_head_dim > 0 "
                              "(got %d, %d)",
                              who, c->nope, c->V);
        if (!a->w_uk || !a->w_uv)
            return attn__fail(ATTN_NULL_ARGUMENT,
                              "%s forward_mha: args->%s is NULL (the up-projection weights "
                              "decompress the latent cache)",
                              who, a->w_uk ? "w_uv" : "w_uk");
    }
    return ATTN_OK;
}

attn_status attn__mla_prepare(const char *who, const attn_mla_args *a, attn__mla_entry entry,
                              attn__mla_call *c)
{
    static const char *const entry_name[] = {"forward_mqa", "forward_mha", "forward_mqa"};
    ATTN__CHECK_NULL(a);
    memset(c, 0, sizeof *c);
    c->a = a;
    const attn_layer_params *L = a->layer;
    if (!L)
        return attn__fail(ATTN_NULL_ARGUMENT, "%s %s: args->layer is NULL", who, entry_name[entry]);
    if (!a->kv)
        return attn__fail(ATTN_NULL_ARGUMENT, "%s %s: args->kv is NULL", who, entry_name[entry]);
    if (!a->q || !a->out)
        return attn__fail(ATTN_NULL_ARGUMENT, "%s %s: args->%s is NULL", who, entry_name[entry],
                          a->q ? "out" : "q");
    if ((unsigned)L->dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: unknown dtype %d", who, (int)L->dtype);
    attn_status st = attn__mla_dims(who, a, entry, c);
    if (st == ATTN_OK) st = attn__check_sinks(who, L, c->H);
    if (st != ATTN_OK) return st;
    const attn_kv_view *kv = a->kv;
    st = attn__latent_view_check(who, kv);
    if (st != ATTN_OK) return st;
    if (kv->head_size != c->D)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: the latent cache rows have %d elements, the layer needs %d "
                          "(kv_lora_rank %d + rope %d)",
                          who, kv->head_size, c->D, c->R, c->P);
    if (kv->head_size_v > 0 && kv->head_size_v < kv->head_size && kv->head_size_v != c->R)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s: the KV view says kv_lora_rank %d, the layer %d", who,
                          kv->head_size_v, c->R);
    c->q_elem = attn_dtype_elem(L->dtype);
    c->kv_elem = kv->elem;
    c->kv_esz = attn_elem_size(kv->elem);
    c->kv_scale = attn__is_fp8(kv->elem) ? kv->k_scale : 1.0f;
    c->scale = attn__mla_softmax_scale(L);
    if (!isfinite(c->scale))
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: softmax scale %g is not finite", who,
                          (double)c->scale);

    const attn_mla_metadata *md = NULL;
    if (a->metadata) {
        md = a->metadata;
        if (md->magic != ATTN_MLA_METADATA_MAGIC || md->struct_size < sizeof(attn_mla_metadata))
            return attn__fail(ATTN_BAD_METADATA,
                              "%s %s: args->metadata is not MLA metadata (build it with an MLA "
                              "builder)",
                              who, entry_name[entry]);
    }
    c->md = md;
    c->cm = md ? &md->common : a->common;
    if (!c->cm)
        return attn__fail(ATTN_NULL_ARGUMENT, "%s %s: args->common is NULL", who,
                          entry_name[entry]);
    const attn_common_metadata *cm = c->cm;
    if (md && (md->num_decodes < 0 || md->num_decodes > cm->num_reqs))
        return attn__fail(ATTN_BAD_METADATA, "%s: num_decodes %d outside [0, %d]", who,
                          md->num_decodes, cm->num_reqs);
    c->sparse = entry == ATTN__MLA_MQA_SPARSE;
    if (c->sparse || !md) {
        c->req_begin = 0;
        c->req_end = cm->num_reqs;
    } else if (entry == ATTN__MLA_MQA) {
        c->req_begin = 0;
        c->req_end = md->num_decodes;
    } else {
        c->req_begin = md->num_decodes;
        c->req_end = cm->num_reqs;
    }
    st = attn__check_common(who, cm, kv, c->req_begin, c->req_end);
    if (st != ATTN_OK) return st;
    if (c->sparse) return attn__check_topk(who, a, c);
    return ATTN_OK;
}
