/* FLASH_ATTN, TRITON_ATTN and TRITON_MLA of libattn_cuda.so against
 * REFERENCE / REFERENCE_MLA through the public API only: the backends the
 * registry resolves (the catalog's locators), their device
 * (attn_device_open), the cache laid out by their descriptor
 * (attn_kv_layout_compute: FLASH_ATTN's (2, blocks, bs, heads, D) in NHD
 * and HND order, TRITON_ATTN's (blocks, 2, bs, heads, D)) and written by
 * the device (attn_kv_write_at), the metadata of their descriptor's
 * builder (a FLASH_ATTN cascade build included), and the checked kernel
 * handle (attn_kernel_open runs the core self-test on the device first).
 *
 * The matrix: dtypes fp16 / bf16 / fp32, caches auto and fp8 e4m3 (per-head
 * scales), head sizes 64 / 128, block sizes 16 / 32, GQA 1 / 4, sliding
 * window, soft-cap, sinks, LSE, over a mixed batch (decodes, a long decode
 * that splits, a prefill, a chunked prefill). MLA: forward_mqa (absorbed)
 * and forward_mha of a DeepSeek-shaped layer.
 *
 * Without a CUDA device (here) the same harness first runs over stand-ins
 * (the catalog's descriptors and builders, REFERENCE on the opaque test
 * device), so the harness itself is checked, then the test exits 77 with
 * the registry's reason. make gpu-check runs it on a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn/attn.h"
#include "attn_kernel_testutil.h"
#include "backends/reference/reference.h"
#include "devtest_device.h"
#include "mla_fixture.h"
#include "test.h"

#define NAME "test_cuda_backend_conformance"

typedef struct std_case {
    attn_dtype dt;
    attn_kv_dtype kv;
    int D, bs, H, KVH, window;
    float softcap;
    bool sinks, hnd, cascade;
} std_case;

static int g_runs;

/* ---- stand-ins: the catalog's descriptors on the opaque test device ----------------- */

static devtest_stats g_stats;

static attn_status st_open(const attn_device_config *cfg, void **state)
{
    (void)cfg;
    return devtest_open_state(&g_stats, state);
}

DEVTEST_DEVICE_OPS(standin_ops, st_open);

static attn_status st_create(const attn_kernel_init *init, void **impl)
{
    *impl = init->device_state;
    return init->device_state ? ATTN_OK : ATTN_INVALID_ARGUMENT;
}

static attn_status st_forward(void *impl, const attn_forward_args *a)
{
    return devtest_forward(impl, attn__backend_reference.kernel, a);
}

static attn_status st_mqa(void *impl, const attn_mla_args *a)
{
    return devtest_forward_mla(impl, attn__backend_reference_mla.kernel, false, a);
}

static attn_status st_mha(void *impl, const attn_mla_args *a)
{
    return devtest_forward_mla(impl, attn__backend_reference_mla.kernel, true, a);
}

/* The host projections on the arena: what a device's own must equal. */
static attn_status st_project(void *impl, const attn_layer_params *l, int T, bool absorb,
                              const void *in, int64_t in_off, const void *w, void *out,
                              int64_t out_off)
{
    devtest_state *s = impl;
    size_t esz = attn_elem_size(attn_dtype_elem(l->dtype));
    const void *hin = devtest_at(s, in, (size_t)in_off * esz), *hw = devtest_at(s, w, 0);
    void *hout = devtest_at(s, out, (size_t)out_off * esz);
    s->stats->kernels++;
    return absorb ? attn_mla_absorb_q(l, T, hin, hw, hout)
                  : attn_mla_up_project(l, T, hin, hw, hout);
}

static const attn_kernel_ops standin_mla_kernel = {.struct_size = sizeof(attn_kernel_ops),
                                                   .create = st_create,
                                                   .forward_mqa = st_mqa,
                                                   .forward_mha = st_mha,
                                                   .kind = ATTN_KERNEL_MLA,
                                                   .mla_project = st_project};

static const attn_kernel_ops standin_kernel = {.struct_size = sizeof(attn_kernel_ops),
                                               .create = st_create,
                                               .forward = st_forward,
                                               .kind = ATTN_KERNEL_STANDARD};

/* ---- one standard configuration ---------------------------------------------------- */

/* decodes (one long enough to split), a prefill, a chunked prefill; a
 * cascade batch's prefill has computed tokens covering the shared prefix */
enum { NREQ = 4 };
static const int q_lens[NREQ] = {1, 1, 23, 9};
static const int seq_plain[NREQ] = {37, 700, 23, 150};
static const int seq_cascade[NREQ] = {37, 700, 55, 150};

static void *dev_upload(attn_device *d, const void *src, size_t bytes)
{
    void *m = NULL;
    if (attn_device_alloc(d, bytes, ATTN_MEM_STEP, &m) != ATTN_OK) return NULL;
    if (src && attn_device_copy_in(d, m, 0, src, bytes) != ATTN_OK) {
        attn_device_free(d, m);
        return NULL;
    }
    return m;
}

static void fill(trng *r, void *p, attn_elem e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        attn__store_elem(p, e, i, trng_normal(r));
}

/* The batch: block tables over a shuffled pool (a cascade case shares the
 * first two blocks between all requests), every context token written. */
typedef struct batch {
    int nb, stride, ntok, nkeys, prefix;
    int32_t qsl[NREQ + 1], seq[NREQ], *bt;
    int64_t *kslots, *qslots;
    attn_common_metadata cm;
} batch;

static void batch_make(batch *b, int bs, bool cascade, trng *r)
{
    memset(b, 0, sizeof *b);
    const int *seq_lens = cascade ? seq_cascade : seq_plain;
    b->prefix = cascade ? 2 : 0;
    b->stride = 0;
    for (int i = 0; i < NREQ; i++) {
        int nblk = (seq_lens[i] + bs - 1) / bs;
        b->stride = nblk > b->stride ? nblk : b->stride;
        b->nb += nblk - b->prefix;
        b->qsl[i + 1] = b->qsl[i] + q_lens[i];
        b->seq[i] = seq_lens[i];
        b->nkeys += seq_lens[i];
    }
    b->nb += b->prefix + 3;
    b->ntok = b->qsl[NREQ];
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)b->nb);
    for (int i = 0; i < b->nb; i++)
        perm[i] = i;
    for (int i = b->nb - 1; i > 0; i--) {
        int j = trng_int(r, i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    b->bt = calloc((size_t)NREQ * (size_t)b->stride, sizeof(int32_t));
    int next = b->prefix;
    for (int i = 0; i < NREQ; i++)
        for (int k = 0; k < (seq_lens[i] + bs - 1) / bs; k++)
            b->bt[i * b->stride + k] = k < b->prefix ? perm[k] : perm[next++];
    free(perm);
    /* every key once (shared prefix keys by request 0), the queries' slots */
    b->kslots = malloc(sizeof(int64_t) * (size_t)b->nkeys);
    b->qslots = malloc(sizeof(int64_t) * (size_t)b->ntok);
    int n = 0;
    for (int i = 0; i < NREQ; i++)
        for (int t = 0; t < seq_lens[i]; t++) {
            int64_t s = (int64_t)b->bt[i * b->stride + t / bs] * bs + t % bs;
            b->kslots[n++] = i > 0 && t < b->prefix * bs ? -1 : s;
            if (t >= seq_lens[i] - q_lens[i])
                b->qslots[b->qsl[i] + t - (seq_lens[i] - q_lens[i])] = s;
        }
    b->cm = (attn_common_metadata){.query_start_loc = b->qsl,
                                   .seq_lens = b->seq,
                                   .num_reqs = NREQ,
                                   .num_actual_tokens = b->ntok,
                                   .max_query_len = q_lens[2],
                                   .max_seq_len = seq_lens[1],
                                   .block_table = b->bt,
                                   .block_table_stride = b->stride,
                                   .slot_mapping = b->qslots,
                                   .causal = true,
                                   .block_size = bs};
}

static void batch_free(batch *b)
{
    free(b->bt), free(b->kslots), free(b->qslots);
}

/* The OpenCL conformance tests' tolerances (relative to the largest
 * output; LSE absolute). */
static double tol_of(attn_dtype dt, bool fp8)
{
    return dt != ATTN_DTYPE_FP32 ? 2e-2 : fp8 ? 1e-3 : 1e-4;
}

/* One case on b's device against REFERENCE on a host twin of the cache. */
static void run_std(const char *who, const attn_backend *b, attn_device *d, const std_case *c,
                    uint64_t seed)
{
    trng r = {seed};
    batch bt;
    batch_make(&bt, c->bs, c->cascade, &r);
    float sinks[64];
    for (int h = 0; h < c->H; h++)
        sinks[h] = trng_normal(&r);
    attn_layer_params lp = {.num_heads = c->H,
                            .num_kv_heads = c->KVH,
                            .head_size = c->D,
                            .logits_soft_cap = c->softcap,
                            .sliding_window = c->window,
                            .sinks = c->sinks ? sinks : NULL,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = c->dt,
                            .kv_cache_dtype = c->kv};
    char what[200];
    snprintf(what, sizeof what, "%s %s kv=%s D=%d bs=%d H=%d/%d window=%d softcap=%g sinks=%d %s%s",
             who, attn_dtype_name(c->dt), attn_kv_dtype_name(c->kv), c->D, c->bs, c->H, c->KVH,
             c->window, c->softcap, c->sinks, c->hnd ? "HND" : "NHD", c->cascade ? " cascade" : "");
    attn_kv_layout_info li;
    attn_status st = attn_kv_layout_compute(b->desc, c->hnd ? ATTN_LAYOUT_HND : ATTN_LAYOUT_NHD,
                                            bt.nb, c->bs, c->KVH, c->D, 0, c->kv, c->dt, &li);
    CHECK_MSG(st == ATTN_OK, "%s: layout: %s", what, attn_last_error());
    attn_kv_cache *dc = NULL, *hc = NULL;
    if (st == ATTN_OK) st = attn_kv_cache_create_on(&li, 1, d, &dc);
    if (st == ATTN_OK) st = attn_kv_cache_create(&li, 1, &hc);
    float ks[8], vs[8];
    for (int h = 0; h < c->KVH; h++)
        ks[h] = 0.02f + 0.01f * (float)h, vs[h] = 0.03f + 0.005f * (float)h;
    bool fp8 = c->kv == ATTN_KV_FP8_E4M3;
    if (st == ATTN_OK && fp8) st = attn_kv_cache_set_scales(dc, 0, 1, 1, ks, vs);
    if (st == ATTN_OK && fp8) st = attn_kv_cache_set_scales(hc, 0, 1, 1, ks, vs);
    attn_kv_view dv, hv;
    if (st == ATTN_OK) st = attn_kv_cache_view(dc, 0, &dv);
    if (st == ATTN_OK) st = attn_kv_cache_view(hc, 0, &hv);
    CHECK_MSG(st == ATTN_OK, "%s: cache: %s", what, attn_last_error());
    attn_elem qe = attn_dtype_elem(c->dt);
    size_t esz = attn_elem_size(qe), krow = (size_t)c->KVH * (size_t)c->D;
    size_t qn = (size_t)bt.ntok * (size_t)c->H * (size_t)c->D;
    void *k = malloc((size_t)bt.nkeys * krow * esz), *v = malloc((size_t)bt.nkeys * krow * esz);
    void *q = malloc(qn * esz), *out = calloc(qn, esz), *ref = calloc(qn, esz);
    float *lse = calloc((size_t)bt.ntok * (size_t)c->H, sizeof(float));
    float *rlse = calloc((size_t)bt.ntok * (size_t)c->H, sizeof(float));
    fill(&r, k, qe, (size_t)bt.nkeys * krow);
    fill(&r, v, qe, (size_t)bt.nkeys * krow);
    fill(&r, q, qe, qn);
    void *dk = dev_upload(d, k, (size_t)bt.nkeys * krow * esz);
    void *dvv = dev_upload(d, v, (size_t)bt.nkeys * krow * esz);
    void *dq = dev_upload(d, NULL, qn * esz + 64 * esz);
    void *dout = dev_upload(d, NULL, qn * esz);
    void *dlse = dev_upload(d, NULL, (size_t)bt.ntok * (size_t)c->H * sizeof(float));
    CHECK_MSG(dk && dvv && dq && dout && dlse, "%s: device buffers: %s", what, attn_last_error());
    if (st == ATTN_OK && dk && dvv)
        st = attn_kv_write_at(&dv, bt.kslots, bt.nkeys, dk, 0, dvv, 0, qe);
    if (st == ATTN_OK) st = attn_kv_write(&hv, bt.kslots, bt.nkeys, k, v, qe);
    CHECK_MSG(st == ATTN_OK, "%s: KV write: %s", what, attn_last_error());
    /* the descriptor's builder, on the device */
    const attn_builder_ops *bo = b->desc->builder;
    attn_builder_init bi = {.desc = b->desc,
                            .layer = &lp,
                            .block_size = c->bs,
                            .num_blocks = bt.nb,
                            .max_num_reqs = 8,
                            .max_num_tokens = 256,
                            .max_blocks_per_req = bt.stride,
                            .num_threads = 1,
                            .device = d};
    void *bs = NULL;
    const void *md = NULL;
    if (st == ATTN_OK && bo) st = bo->create(&bi, &bs);
    if (st == ATTN_OK && bo) st = bo->build(bs, bt.prefix * c->bs, &bt.cm, false, &md);
    CHECK_MSG(st == ATTN_OK, "%s: builder %s: %s", what, bo ? bo->type_name : "-",
              attn_last_error());
    attn_kernel *kd = NULL, *kr = NULL;
    if (st == ATTN_OK) st = attn_kernel_open(b, &lp, d, &kd);
    CHECK_MSG(st == ATTN_OK, "%s: kernel: %s", what, attn_last_error());
    if (st == ATTN_OK)
        st = attn_kernel_open(attn_backend_catalog_builtin("REFERENCE"), &lp, NULL, &kr);
    if (st == ATTN_OK) {
        attn_forward_args a = {.layer = &lp,
                               .common = &bt.cm,
                               .metadata = md,
                               .q = dq,
                               .q_offset = 64, /* the kernel adds offsets */
                               .kv = &dv,
                               .out = dout,
                               .lse = dlse};
        CHECK_OK(attn_device_copy_in(d, dq, 64 * esz, q, qn * esz));
        st = attn_kernel_forward(kd, &a);
        CHECK_MSG(st == ATTN_OK, "%s: forward: %s", what, attn_last_error());
        attn_forward_args h = {
            .layer = &lp, .common = &bt.cm, .q = q, .kv = &hv, .out = ref, .lse = rlse};
        CHECK_OK(attn_kernel_forward(kr, &h));
    }
    if (st == ATTN_OK) {
        CHECK_OK(attn_device_copy_out(d, out, dout, 0, qn * esz));
        CHECK_OK(attn_device_copy_out(d, lse, dlse, 0, (size_t)bt.ntok * c->H * sizeof(float)));
        double e = trel_err(out, ref, qe, qn), le = 0;
        for (size_t i = 0; i < (size_t)bt.ntok * (size_t)c->H; i++) {
            double x = fabs((double)lse[i] - (double)rlse[i]);
            le = x > le || isnan(x) ? (isnan(x) ? INFINITY : x) : le;
        }
        double tol = tol_of(c->dt, fp8);
        CHECK_MSG(e <= tol && le <= tol, "%s: max error %.3g, LSE %.3g (tolerance %.3g)", what, e,
                  le, tol);
        g_runs++;
    }
    attn_kernel_close(kd);
    attn_kernel_close(kr);
    if (bs) bo->destroy(bs);
    attn_device_free(d, dk), attn_device_free(d, dvv), attn_device_free(d, dq);
    attn_device_free(d, dout), attn_device_free(d, dlse);
    attn_kv_cache_free(dc);
    attn_kv_cache_free(hc);
    free(k), free(v), free(q), free(out), free(ref), free(lse), free(rlse);
    batch_free(&bt);
}

/* The matrix over one backend; full = every combination, else one pass
 * through each axis (the stand-in run, and fp8 needs a real device write). */
static void matrix(const char *who, const attn_backend *b, attn_device *d, bool full, bool hnd)
{
    static const attn_dtype dts[] = {ATTN_DTYPE_BF16, ATTN_DTYPE_FP16, ATTN_DTYPE_FP32};
    static const int Ds[] = {128, 64}, bss[] = {16, 32}, gqa[][2] = {{32, 8}, {8, 8}};
    uint64_t seed = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int kb = 0; kb < 2; kb++)
                for (int g = 0; g < 2; g++) {
                    if (!full && (j != g || kb != (i & 1))) continue;
                    std_case c = {.dt = dts[i],
                                  .kv = ATTN_KV_AUTO,
                                  .D = Ds[j],
                                  .bs = bss[kb],
                                  .H = gqa[g][0],
                                  .KVH = gqa[g][1],
                                  .hnd = hnd};
                    run_std(who, b, d, &c, seed++);
                }
    std_case feats[] = {
        {ATTN_DTYPE_BF16, ATTN_KV_AUTO, 128, 16, 32, 8, 64, 0, false, hnd, false},
        {ATTN_DTYPE_FP16, ATTN_KV_AUTO, 64, 16, 16, 4, 0, 30.0f, true, hnd, false},
        {ATTN_DTYPE_BF16, ATTN_KV_FP8_E4M3, 128, 16, 32, 8, 0, 0, false, hnd, false},
        {ATTN_DTYPE_FP16, ATTN_KV_AUTO, 128, 16, 32, 8, 0, 0, false, hnd, true},
    };
    for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++) {
        if (feats[i].kv == ATTN_KV_FP8_E4M3 && !full) continue;
        if (feats[i].cascade && strcmp(b->desc->name, "FLASH_ATTN") != 0) continue;
        run_std(who, b, d, &feats[i], 100 + i);
    }
}

/* ---- MLA ------------------------------------------------------------------------------ */

static void run_mla(const attn_backend *b, attn_device *d, attn_dtype dt)
{
    static const int ql[] = {1, 1, 17}, sl[] = {90, 600, 40};
    mla_fx f;
    fx_row_pad = 0;
    mla_fx_init(&f, 16, 512, 64, 128, 128, dt, attn_dtype_elem(dt), 16, 3, ql, sl, 7);
    size_t esz = f.qesz, cache = (size_t)f.nb * (size_t)f.kv.stride_block * esz;
    size_t T = (size_t)f.T, H = 16;
    void *dcache = dev_upload(d, f.cache, cache);
    void *dqa = dev_upload(d, f.q_abs, T * H * 576 * esz),
         *dq = dev_upload(d, f.q, T * H * 192 * esz);
    void *duk = dev_upload(d, f.w_uk, H * 128 * 512 * esz),
         *duv = dev_upload(d, f.w_uv, H * 512 * 128 * esz);
    void *dout = dev_upload(d, NULL, T * H * 512 * esz);
    void *got = calloc(T * H * 512, esz), *want = calloc(T * H * 512, esz);
    CHECK_MSG(dcache && dqa && dq && duk && duv && dout, "MLA buffers: %s", attn_last_error());
    attn_kv_view dv = f.kv;
    dv.data = dcache;
    dv.device = d;
    attn_kernel *kd = NULL, *kr = NULL;
    attn_status st = attn_kernel_open(b, &f.lp, d, &kd);
    CHECK_MSG(st == ATTN_OK, "TRITON_MLA kernel: %s", attn_last_error());
    if (st == ATTN_OK)
        st = attn_kernel_open(attn_backend_catalog_builtin("REFERENCE_MLA"), &f.lp, NULL, &kr);
    for (int mha = 0; st == ATTN_OK && mha < 2; mha++) {
        size_t on = T * H * (mha ? 128 : 512);
        attn_mla_args a = {.layer = &f.lp,
                           .common = &f.cm,
                           .kv = &dv,
                           .q = mha ? dq : dqa,
                           .out = dout,
                           .w_uk = duk,
                           .w_uv = duv};
        attn_mla_args h = mla_fx_args(&f, mha, want, NULL);
        st = mha ? attn_kernel_forward_mha(kd, &a) : attn_kernel_forward_mqa(kd, &a);
        CHECK_MSG(st == ATTN_OK, "TRITON_MLA %s: %s", mha ? "forward_mha" : "forward_mqa",
                  attn_last_error());
        CHECK_OK(mha ? attn_kernel_forward_mha(kr, &h) : attn_kernel_forward_mqa(kr, &h));
        if (st != ATTN_OK) break;
        CHECK_OK(attn_device_copy_out(d, got, dout, 0, on * esz));
        double e = trel_err(got, want, f.qe, on);
        CHECK_MSG(e <= tol_of(dt, false), "TRITON_MLA %s %s: max error %.3g", attn_dtype_name(dt),
                  mha ? "forward_mha" : "forward_mqa", e);
        g_runs++;
    }
    attn_kernel_close(kd);
    attn_kernel_close(kr);
    attn_device_free(d, dcache), attn_device_free(d, dqa), attn_device_free(d, dq);
    attn_device_free(d, duk), attn_device_free(d, duv), attn_device_free(d, dout);
    free(got), free(want);
    mla_fx_free(&f);
}

/* A whole mixed MLA batch the way an engine runs it (attn_kernel_mla_forward
 * with the descriptor's builder: decodes absorbed, forward_mqa and
 * up-projected by the device's own projections, the prefill through
 * forward_mha; scratch on the device) against REFERENCE_MLA on the host. */
static void run_mla_forward(const char *who, const attn_backend *b, attn_device *d, attn_dtype dt)
{
    static const int ql[] = {1, 1, 17}, sl[] = {90, 600, 40};
    mla_fx f;
    fx_row_pad = 0;
    mla_fx_init(&f, 16, 512, 64, 128, 128, dt, attn_dtype_elem(dt), 16, 3, ql, sl, 9);
    size_t esz = f.qesz, T = (size_t)f.T, H = 16, on = T * H * 128;
    void *dcache = dev_upload(d, f.cache, (size_t)f.nb * (size_t)f.kv.stride_block * esz);
    void *dq = dev_upload(d, f.q, T * H * 192 * esz), *dout = dev_upload(d, NULL, on * esz);
    void *duk = dev_upload(d, f.w_uk, H * 128 * 512 * esz);
    void *duv = dev_upload(d, f.w_uv, H * 512 * 128 * esz);
    void *got = calloc(on, esz), *want = calloc(on, esz);
    attn_kv_view dv = f.kv;
    dv.data = dcache;
    dv.device = d;
    const attn_builder_ops *bo = b->desc->builder;
    attn_builder_init bi = {.desc = b->desc,
                            .layer = &f.lp,
                            .block_size = 16,
                            .num_blocks = f.nb,
                            .max_num_reqs = 8,
                            .max_num_tokens = 256,
                            .max_blocks_per_req = f.bt_stride,
                            .num_threads = 1,
                            .device = d};
    void *bs = NULL, *hs = NULL, *ds = NULL;
    const void *md = NULL;
    attn_kernel *kd = NULL, *kr = NULL;
    attn_status st = bo ? bo->create(&bi, &bs) : ATTN_INTERNAL;
    if (st == ATTN_OK) st = bo->build(bs, 0, &f.cm, false, &md);
    if (st == ATTN_OK) st = attn_kernel_open(b, &f.lp, d, &kd);
    if (st == ATTN_OK)
        st = attn_kernel_open(attn_backend_catalog_builtin("REFERENCE_MLA"), &f.lp, NULL, &kr);
    CHECK_MSG(st == ATTN_OK, "%s MLA: %s", who, attn_last_error());
    size_t dss = kd ? attn_kernel_mla_scratch_size(kd, f.T) : 0;
    size_t hss = kr ? attn_kernel_mla_scratch_size(kr, f.T) : 0;
    if (st == ATTN_OK) st = attn_device_alloc(d, dss, ATTN_MEM_STEP, &ds);
    hs = aligned_alloc(64, (hss + 63) / 64 * 64 + 64);
    if (st == ATTN_OK) {
        attn_mla_args a = {.layer = &f.lp,
                           .common = &f.cm,
                           .metadata = md,
                           .kv = &dv,
                           .q = dq,
                           .out = dout,
                           .w_uk = duk,
                           .w_uv = duv};
        st = attn_kernel_mla_forward(kd, &a, ds, dss);
        CHECK_MSG(st == ATTN_OK, "%s attn_kernel_mla_forward: %s", who, attn_last_error());
        attn_mla_args h = {.layer = &f.lp,
                           .common = &f.cm,
                           .metadata = md,
                           .kv = &f.kv,
                           .q = f.q,
                           .out = want,
                           .w_uk = f.w_uk,
                           .w_uv = f.w_uv};
        CHECK_OK(attn_kernel_mla_forward(kr, &h, hs, hss));
        /* host scratch on the device: refused */
        CHECK_STATUS(attn_kernel_mla_forward(kd, &a, hs, hss), ATTN_INVALID_ARGUMENT);
    }
    if (st == ATTN_OK) {
        CHECK_OK(attn_device_copy_out(d, got, dout, 0, on * esz));
        double e = trel_err(got, want, f.qe, on);
        CHECK_MSG(e <= tol_of(dt, false), "%s MLA layer %s: max error %.3g", who,
                  attn_dtype_name(dt), e);
        g_runs++;
    }
    attn_kernel_close(kd);
    attn_kernel_close(kr);
    if (bs) bo->destroy(bs);
    attn_device_free(d, ds), attn_device_free(d, dcache), attn_device_free(d, dq);
    attn_device_free(d, duk), attn_device_free(d, duv), attn_device_free(d, dout);
    free(got), free(want), free(hs);
    mla_fx_free(&f);
}

/* ---- main ------------------------------------------------------------------------------- */

static void standins(void)
{
    static const char *const names[] = {"FLASH_ATTN", "TRITON_ATTN"};
    static attn_backend s[2]; /* the self-test result is kept per object */
    for (int i = 0; i < 2; i++) {
        s[i] = (attn_backend){.abi_version = ATTN_BACKEND_ABI_VERSION,
                              .struct_size = sizeof(attn_backend),
                              .desc = attn_backend_catalog_builtin(names[i])->desc,
                              .kernel = &standin_kernel,
                              .device = &standin_ops};
        attn_device *d = NULL;
        CHECK_OK(attn_device_open(&s[i], NULL, &d));
        if (!d) continue;
        char who[64];
        snprintf(who, sizeof who, "stand-in %s", names[i]);
        matrix(who, &s[i], d, false, false);
        matrix(who, &s[i], d, false, true);
        attn_device_close(d);
    }
    static attn_backend m;
    m = (attn_backend){.abi_version = ATTN_BACKEND_ABI_VERSION,
                       .struct_size = sizeof(attn_backend),
                       .desc = attn_backend_catalog_builtin("TRITON_MLA")->desc,
                       .kernel = &standin_mla_kernel,
                       .device = &standin_ops};
    attn_device *d = NULL;
    CHECK_OK(attn_device_open(&m, NULL, &d));
    if (d) run_mla_forward("stand-in TRITON_MLA", &m, d, ATTN_DTYPE_BF16);
    attn_device_close(d);
}

int main(void)
{
    standins();
    printf("harness: %d stand-in configurations (REFERENCE on the opaque test device)\n", g_runs);
    const attn_backend *fa = NULL;
    if (attn_backend_resolve(NULL, "FLASH_ATTN", &fa) != ATTN_OK) {
        if (attn_test_finish(NAME) != 0) return 1;
        attn_test_skip(NAME, "FLASH_ATTN does not resolve to run here: ImportError: %s",
                       attn_last_error());
    }
    attn_device *d = NULL;
    if (attn_device_open(fa, NULL, &d) != ATTN_OK) {
        if (attn_test_finish(NAME) != 0) return 1;
        attn_test_skip(NAME, "no CUDA device: %s", attn_last_error());
    }
    int before = g_runs;
    static const char *const names[] = {"FLASH_ATTN", "TRITON_ATTN", "TRITON_MLA"};
    for (int i = 0; i < 3; i++) {
        const attn_backend *b = NULL;
        CHECK_OK(attn_backend_resolve(NULL, names[i], &b));
        if (!b) continue;
        CHECK(b->device == fa->device); /* one device kind: the instance serves all three */
        if (i == 2) {
            run_mla(b, d, ATTN_DTYPE_BF16);
            run_mla(b, d, ATTN_DTYPE_FP16);
            run_mla_forward(names[i], b, d, ATTN_DTYPE_BF16);
            run_mla_forward(names[i], b, d, ATTN_DTYPE_FP32);
        } else {
            matrix(names[i], b, d, true, false);
            matrix(names[i], b, d, true, true);
        }
    }
    printf("CUDA: %d configurations on %s\n", g_runs - before, attn_device_name(d));
    attn_device_close(d);
    return attn_test_finish(NAME);
}
