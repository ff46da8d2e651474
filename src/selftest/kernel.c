/* The one way to call a kernel (attn/kernel.h): a backend's kernel opened
 * for one layer on one device instance, behind the self-test gate.
 *
 * It lives beside the self-test service because it is that service's
 * gate: opening runs (or reads) the cached known-answer test and refuses a
 * backend that failed it or declares none, so no caller (engine, DCP,
 * Python, benches, harness) can run kernel code libattn has not checked.
 * The oracles REFERENCE / REFERENCE_MLA(_SPARSE) are the known answer the
 * tests compare against, recognised by object identity.
 *
 * Each call checks, before the kernel runs: the entry point, the call's
 * layer geometry against the opened one, that the KV view is memory of the
 * kernel's device and, on a device that is not host-visible, that every
 * tensor range lies inside a live allocation. On a host-visible device the
 * element offsets are folded into the pointers (such kernels always see
 * 0). Everything a failed call would touch is untouched. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernel.h"
#include "attn/log.h"
#include "attn/mla.h"
#include "backends/mla/mla_internal.h"
#include "backends/reference/ref_mla.h"
#include "backends/reference/reference.h"
#include "device/device_impl.h"
#include "selftest/selftest.h"
#include "util/abi.h"
#include "util/error.h"
#include "util/numeric.h"

struct attn_kernel {
    const attn_backend *b;
    attn_kernel_ops ops; /* const copy; slots past the backend's struct_size are NULL */
    attn_device *dev;
    bool host_visible;
    bool mla, sparse;
    attn_layer_params layer;
    attn_layer_rows rows;
    void *impl;
};

/* ---- row widths ------------------------------------------------------------------- */

static bool attn__dim_ok(int v, int lo)
{
    return v >= lo && v <= ATTN_MAX_HEAD_SIZE;
}

attn_status attn_layer_rows_get(const attn_layer_params *l, attn_layer_rows *out)
{
    ATTN__CHECK_NULL(l);
    ATTN__CHECK_NULL(out);
    attn_layer_rows r = {.mla = l->kv_lora_rank > 0, .q_heads = l->num_heads};
    if (l->num_heads > ATTN_MAX_HEADS)
        return attn__fail(ATTN_INVALID_ARGUMENT, "num_heads %d exceeds ATTN_MAX_HEADS (%d)",
                          l->num_heads, ATTN_MAX_HEADS);
    if ((unsigned)l->dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "bad dtype %d", (int)l->dtype);
    if ((unsigned)l->attn_type >= ATTN_TYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "bad attention type %d", (int)l->attn_type);
    if (l->num_heads < 1)
        return attn__fail(ATTN_INVALID_ARGUMENT, "num_heads (%d) must be positive", l->num_heads);
    if (r.mla) {
        if (!attn__dim_ok(l->kv_lora_rank, 1) || !attn__dim_ok(l->qk_rope_head_dim, 0) ||
            !attn__dim_ok(l->qk_nope_head_dim, 0) || !attn__dim_ok(l->v_head_dim, 0) ||
            l->kv_lora_rank + l->qk_rope_head_dim > ATTN_MAX_HEAD_SIZE)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "MLA layer: kv_lora_rank %d, rope %d, nope %d, v_head_dim %d "
                              "outside the limits (1..%d)",
                              l->kv_lora_rank, l->qk_rope_head_dim, l->qk_nope_head_dim,
                              l->v_head_dim, ATTN_MAX_HEAD_SIZE);
        r.q_dim = l->qk_nope_head_dim + l->qk_rope_head_dim;
        r.out_dim = l->v_head_dim;
        r.kv_heads = 1;
        r.k_dim = l->kv_lora_rank;
        r.v_dim = l->qk_rope_head_dim;
        r.mqa_q_dim = l->kv_lora_rank + l->qk_rope_head_dim;
        r.mqa_out_dim = l->kv_lora_rank;
    } else {
        int hv = l->head_size_v > 0 ? l->head_size_v : l->head_size;
        if (l->num_kv_heads < 1 || l->num_kv_heads > l->num_heads ||
            l->num_heads % l->num_kv_heads != 0)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "layer: num_heads (%d) must be a positive multiple of num_kv_heads "
                              "(%d)",
                              l->num_heads, l->num_kv_heads);
        if (!attn__dim_ok(l->head_size, 1) || !attn__dim_ok(l->head_size_v, 0))
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "bad head sizes (head_size=%d, head_size_v=%d; limit %d)",
                              l->head_size, l->head_size_v, ATTN_MAX_HEAD_SIZE);
        r.q_dim = l->head_size;
        r.out_dim = hv;
        r.kv_heads = l->num_kv_heads;
        r.k_dim = l->head_size;
        r.v_dim = hv;
    }
    r.kv_dim = r.k_dim > r.v_dim ? r.k_dim : r.v_dim;
    r.q_row = (int64_t)r.q_heads * r.q_dim;
    r.out_row = (int64_t)r.q_heads * r.out_dim;
    r.k_row = (int64_t)r.kv_heads * r.k_dim;
    r.v_row = (int64_t)r.kv_heads * r.v_dim;
    *out = r;
    return ATTN_OK;
}

/* ---- open / close ----------------------------------------------------------------------- */

static const char *attn__kname(const attn_backend *b)
{
    return b->desc && b->desc->name ? b->desc->name : "backend";
}

static bool attn__is_oracle(const attn_backend *b)
{
    return b == &attn__backend_reference || b == &attn__backend_reference_mla ||
           b == &attn__backend_reference_mla_sparse;
}

/* The self-test gate: ATTN_OK only for a backend whose test passed (or an
 * oracle, or with ATTN_SELFTEST=0). */
static attn_status attn__kernel_gate(const attn_backend *b)
{
    if (attn__is_oracle(b)) return ATTN_OK;
    if (!attn__selftest_present(b))
        return attn__fail(ATTN_SELFTEST_FAILED,
                          "%s declares no self-test (no kernel kind, no self_test hook): libattn "
                          "calls no kernel it has not checked",
                          attn__kname(b));
    if (attn__selftest_disabled()) {
        static atomic_bool said; /* once per process, not per layer */
        if (!atomic_exchange(&said, true))
            attn_log(ATTN_LOG_INFO, "kernels open without their self-tests (ATTN_SELFTEST=0)");
        return ATTN_OK;
    }
    char detail[256];
    if (attn__selftest(b, detail, sizeof detail) != ATTN_OK)
        return attn__fail(ATTN_SELFTEST_FAILED, "%s failed its self-test: %s", attn__kname(b),
                          detail);
    return ATTN_OK;
}

static attn_status attn__kernel_abi(const attn_backend *b)
{
    if (b->abi_version != ATTN_BACKEND_ABI_VERSION)
        return attn__fail(ATTN_ABI_MISMATCH, "%s: backend ABI version %u, libattn expects %u",
                          attn__kname(b), b->abi_version, ATTN_BACKEND_ABI_VERSION);
    if (!b->kernel)
        return attn__fail(ATTN_UNSUPPORTED,
                          "%s has no kernel code here (descriptor only): it cannot run on this "
                          "machine",
                          attn__kname(b));
    if (b->kernel->struct_size < ATTN__V2_KERNEL_OPS ||
        b->kernel->struct_size > sizeof(attn_kernel_ops))
        return attn__fail(ATTN_ABI_MISMATCH,
                          "%s: kernel ops struct_size %u, libattn accepts %zu "
                          "to %zu",
                          attn__kname(b), b->kernel->struct_size, ATTN__V2_KERNEL_OPS,
                          sizeof(attn_kernel_ops));
    return ATTN_OK;
}

attn_status attn_kernel_open(const attn_backend *b, const attn_layer_params *layer,
                             attn_device *dev, attn_kernel **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(b);
    ATTN__CHECK_NULL(layer);
    attn_status st = attn__kernel_abi(b);
    if (st != ATTN_OK) return st;
    if (!dev) dev = attn_device_host();
    const attn_device_ops *want = attn__device_ops_of(b);
    if (dev->ops != want)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "%s runs on the %s device, not on an instance of %s", attn__kname(b),
                          want->name ? want->name : "(unnamed)", attn_device_name(dev));
    attn_layer_rows rows;
    if ((st = attn_layer_rows_get(layer, &rows)) != ATTN_OK)
        return attn__wrap(st, "%s kernel", attn__kname(b));
    if ((st = attn__kernel_gate(b)) != ATTN_OK) return st;
    attn_kernel *k = calloc(1, sizeof *k);
    if (!k) return attn__fail(ATTN_OUT_OF_MEMORY, "attn_kernel_open: out of memory");
    k->b = b;
    memcpy(&k->ops, b->kernel, b->kernel->struct_size);
    k->dev = dev;
    k->host_visible = attn_device_host_visible(dev);
    k->layer = *layer;
    k->rows = rows;
    k->mla = b->desc ? b->desc->is_mla : k->ops.forward_mqa != NULL;
    k->sparse = (b->desc && b->desc->is_sparse) || (k->mla && !k->ops.forward_mha);
    if (k->ops.create) {
        attn_kernel_init init = {.struct_size = sizeof init,
                                 .layer = &k->layer,
                                 .device = dev,
                                 .device_state = dev->state};
        if ((st = k->ops.create(&init, &k->impl)) != ATTN_OK) {
            free(k);
            return attn__wrap(st, "%s kernel create", attn__kname(b));
        }
    }
    *out = k;
    return ATTN_OK;
}

void attn_kernel_close(attn_kernel *k)
{
    if (!k) return;
    if (k->impl && k->ops.destroy) k->ops.destroy(k->impl);
    free(k);
}

const attn_backend *attn_kernel_backend(const attn_kernel *k)
{
    return k ? k->b : NULL;
}

const char *attn_kernel_name(const attn_kernel *k)
{
    return k ? attn__kname(k->b) : NULL;
}

const char *attn_kernel_variant(const attn_kernel *k)
{
    return k && k->ops.variant ? k->ops.variant() : NULL;
}

attn_device *attn_kernel_device(const attn_kernel *k)
{
    return k ? k->dev : NULL;
}

const attn_layer_params *attn_kernel_layer(const attn_kernel *k)
{
    return k ? &k->layer : NULL;
}

const attn_layer_rows *attn_kernel_rows(const attn_kernel *k)
{
    return k ? &k->rows : NULL;
}

bool attn_kernel_is_mla(const attn_kernel *k)
{
    return k && k->mla;
}

/* ---- the checks of a call ------------------------------------------------------------------ */

static attn_status attn__geometry(const attn_kernel *k, const attn_layer_params *l)
{
    const attn_layer_params *o = &k->layer;
    int ohv = o->head_size_v > 0 ? o->head_size_v : o->head_size;
    int lhv = l->head_size_v > 0 ? l->head_size_v : l->head_size;
    if (l->num_heads == o->num_heads && l->num_kv_heads == o->num_kv_heads &&
        l->head_size == o->head_size && lhv == ohv && l->dtype == o->dtype &&
        l->attn_type == o->attn_type && l->kv_lora_rank == o->kv_lora_rank &&
        l->qk_rope_head_dim == o->qk_rope_head_dim && l->qk_nope_head_dim == o->qk_nope_head_dim &&
        l->v_head_dim == o->v_head_dim)
        return ATTN_OK;
    return attn__fail(ATTN_INVALID_ARGUMENT,
                      "%s kernel was opened for heads %d/%d, head size %d/%d, dtype %s, type %s, "
                      "MLA %d/%d/%d/%d; the call's layer has %d/%d, %d/%d, %s, %s, %d/%d/%d/%d",
                      attn__kname(k->b), o->num_heads, o->num_kv_heads, o->head_size, ohv,
                      attn_dtype_name(o->dtype), attn_attn_type_name(o->attn_type), o->kv_lora_rank,
                      o->qk_rope_head_dim, o->qk_nope_head_dim, o->v_head_dim, l->num_heads,
                      l->num_kv_heads, l->head_size, lhv, attn_dtype_name(l->dtype),
                      attn_attn_type_name(l->attn_type), l->kv_lora_rank, l->qk_rope_head_dim,
                      l->qk_nope_head_dim, l->v_head_dim);
}

/* The view is memory of the kernel's device: on a host device, host memory
 * (no device, or a host-visible one); otherwise this very instance. */
static attn_status attn__view_device(const attn_kernel *k, const attn_kv_view *kv)
{
    if (!kv) return ATTN_OK;
    if (k->host_visible ? attn_device_host_visible(kv->device) : kv->device == k->dev)
        return attn__device_view_range(kv, attn__kname(k->b));
    return attn__fail(ATTN_INVALID_ARGUMENT, "%s runs on device %s: its KV view is memory of %s%s",
                      attn__kname(k->b), attn_device_name(k->dev),
                      kv->device ? "device " : "the host",
                      kv->device ? attn_device_name(kv->device) : "");
}

/* rows x row elements of esz bytes from element off lie inside allocation p */
static attn_status attn__tensor(const attn_kernel *k, const void *p, int64_t off, int64_t rows,
                                int64_t row, size_t esz, const char *what)
{
    if (off < 0)
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: %s offset %lld < 0", attn__kname(k->b), what,
                          (long long)off);
    if (k->host_visible || !p || rows <= 0 || row <= 0) return ATTN_OK;
    int64_t n, first, bytes;
    if (!attn__mul_i64(rows, row, &n) || !attn__mul_i64(n, (int64_t)esz, &bytes) ||
        !attn__mul_i64(off, (int64_t)esz, &first))
        return attn__fail(ATTN_INVALID_ARGUMENT, "%s: %s range overflows", attn__kname(k->b), what);
    char w[64];
    snprintf(w, sizeof w, "%s %s", attn__kname(k->b), what);
    return attn__device_range(k->dev, p, (uint64_t)first, (uint64_t)bytes, w);
}

static const void *attn__at(const void *p, int64_t off, size_t esz)
{
    return p && off ? (const char *)p + (size_t)off * esz : p;
}

static attn_status attn__wrong_entry(const attn_kernel *k, const char *entry)
{
    const char *n = attn__kname(k->b);
    if (!strcmp(entry, "forward")) {
        if (k->mla)
            return attn__fail(ATTN_WRONG_ENTRY_POINT,
                              "%s is an MLA backend: call forward_mqa (decode) or forward_mha "
                              "(prefill), not forward",
                              n);
        return attn__fail(ATTN_WRONG_ENTRY_POINT, "%s has no forward entry point", n);
    }
    if (!k->mla)
        return attn__fail(ATTN_WRONG_ENTRY_POINT, "%s is not an MLA backend: call forward, not %s",
                          n, entry);
    if (k->sparse && !strcmp(entry, "forward_mha"))
        return attn__fail(ATTN_WRONG_ENTRY_POINT,
                          "%s is a sparse MLA backend: call forward_mqa for every token, not "
                          "forward_mha",
                          n);
    return attn__fail(ATTN_WRONG_ENTRY_POINT, "%s has no %s entry point", n, entry);
}

/* ---- standard attention -------------------------------------------------------------------------
 */

attn_status attn_kernel_forward(attn_kernel *k, const attn_forward_args *a)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(a);
    if (!k->ops.forward) return attn__wrong_entry(k, "forward");
    attn_forward_args c = *a;
    attn_status st;
    if (!c.layer)
        c.layer = &k->layer;
    else if ((st = attn__geometry(k, c.layer)) != ATTN_OK)
        return st;
    ATTN__CHECK_NULL(a->common);
    if ((st = attn__view_device(k, a->kv)) != ATTN_OK) return st;
    const attn_layer_rows *r = &k->rows;
    size_t esz = attn_elem_size(attn_dtype_elem(k->layer.dtype));
    int64_t T = a->common->num_actual_tokens;
    if ((st = attn__tensor(k, a->q, a->q_offset, T, r->q_row, esz, "q")) != ATTN_OK ||
        (st = attn__tensor(k, a->out, a->out_offset, T, r->out_row, esz, "out")) != ATTN_OK ||
        (st = attn__tensor(k, a->lse, a->lse_offset, T, r->q_heads, sizeof(float), "lse")) !=
            ATTN_OK ||
        (st = attn__tensor(k, a->k, a->k_offset, T, r->k_row, esz, "k")) != ATTN_OK ||
        (st = attn__tensor(k, a->v, a->v_offset, T, r->v_row, esz, "v")) != ATTN_OK)
        return st;
    if (k->host_visible &&
        (c.q_offset | c.out_offset | c.lse_offset | c.k_offset | c.v_offset) != 0) {
        c.q = attn__at(c.q, c.q_offset, esz);
        c.out = (void *)attn__at(c.out, c.out_offset, esz);
        c.lse = (float *)attn__at(c.lse, c.lse_offset, sizeof(float));
        c.k = attn__at(c.k, c.k_offset, esz);
        c.v = attn__at(c.v, c.v_offset, esz);
        c.q_offset = c.out_offset = c.lse_offset = c.k_offset = c.v_offset = 0;
    }
    return k->ops.forward(k->impl, &c);
}

/* ---- MLA
 * ------------------------------------------------------------------------------------------- */

/* Checks shared by the MLA entry points; *c is the call as the kernel gets it. */
static attn_status attn__mla_call_check(attn_kernel *k, const attn_mla_args *a, bool mqa,
                                        attn_mla_args *c)
{
    ATTN__CHECK_NULL(a);
    *c = *a;
    attn_status st;
    if (!c->layer)
        c->layer = &k->layer;
    else if ((st = attn__geometry(k, c->layer)) != ATTN_OK)
        return st;
    if ((st = attn__view_device(k, a->kv)) != ATTN_OK) return st;
    const attn_layer_rows *r = &k->rows;
    size_t esz = attn_elem_size(attn_dtype_elem(k->layer.dtype));
    int64_t T = a->common ? a->common->num_actual_tokens : 0;
    int64_t qd = mqa ? r->mqa_q_dim : r->q_dim, od = mqa ? r->mqa_out_dim : r->out_dim;
    if ((st = attn__tensor(k, a->q, a->q_offset, T, qd * r->q_heads, esz, "q")) != ATTN_OK ||
        (st = attn__tensor(k, a->out, a->out_offset, T, od * r->q_heads, esz, "out")) != ATTN_OK ||
        (st = attn__tensor(k, a->lse, a->lse_offset, T, r->q_heads, sizeof(float), "lse")) !=
            ATTN_OK)
        return st;
    if (k->host_visible && (c->q_offset | c->out_offset | c->lse_offset) != 0) {
        c->q = attn__at(c->q, c->q_offset, esz);
        c->out = (void *)attn__at(c->out, c->out_offset, esz);
        c->lse = (float *)attn__at(c->lse, c->lse_offset, sizeof(float));
        c->q_offset = c->out_offset = c->lse_offset = 0;
    }
    return ATTN_OK;
}

attn_status attn_kernel_forward_mqa(attn_kernel *k, const attn_mla_args *a)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(a);
    if (!k->ops.forward_mqa) return attn__wrong_entry(k, "forward_mqa");
    attn_mla_args c;
    attn_status st = attn__mla_call_check(k, a, true, &c);
    return st != ATTN_OK ? st : k->ops.forward_mqa(k->impl, &c);
}

attn_status attn_kernel_forward_mha(attn_kernel *k, const attn_mla_args *a)
{
    ATTN__CHECK_NULL(k);
    ATTN__CHECK_NULL(a);
    if (!k->ops.forward_mha) return attn__wrong_entry(k, "forward_mha");
    attn_mla_args c;
    attn_status st = attn__mla_call_check(k, a, false, &c);
    return st != ATTN_OK ? st : k->ops.forward_mha(k->impl, &c);
}

size_t attn_kernel_mla_scratch_size(const attn_kernel *k, int max_tokens)
{
    return k && k->mla ? attn_mla_forward_scratch_size(&k->layer, max_tokens) : 0;
}

attn_status attn_kernel_mla_forward(attn_kernel *k, const attn_mla_args *a, void *scratch,
                                    size_t scratch_size)
{
    ATTN__CHECK_NULL(k);
    if (!k->mla || !k->ops.forward_mqa)
        return attn__fail(ATTN_WRONG_ENTRY_POINT,
                          "%s is not an MLA backend: call forward, not attn_kernel_mla_forward",
                          attn__kname(k->b));
    if (!k->host_visible && !k->ops.mla_project)
        return attn__fail(ATTN_UNSUPPORTED,
                          "%s: the MLA projections around forward_mqa are host code and device "
                          "%s's memory is not host-visible: call forward_mqa / forward_mha with "
                          "the device's own projections",
                          attn__kname(k->b), attn_device_name(k->dev));
    attn_mla_args c;
    attn_status st = attn__mla_call_check(k, a, false, &c);
    if (st != ATTN_OK) return st;
    /* on the device the projections' scratch is the device's memory */
    if (!k->host_visible && scratch_size > 0 &&
        (st = attn__tensor(k, scratch, 0, 1, (int64_t)scratch_size, 1, "scratch")) != ATTN_OK)
        return st;
    /* the batch runs through this handle's state, on the resolved object */
    attn_backend self = *k->b;
    self.kernel = &k->ops;
    return attn__mla_forward(&self, k->impl, &c, scratch, scratch_size);
}
