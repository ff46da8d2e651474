/* OPENCL_ATTN as a backend, through the public API only, as an engine or a
 * tool drives it: the registry resolves it, attn_device_open opens its
 * OpenCL device, memory is allocated and copied through the device,
 * the descriptor's builder plans and uploads the step, attn_kernel_open
 * runs the core self-test on the device and attn_kernel_forward calls the
 * kernel. Against REFERENCE on the host over the conformance matrix
 * reduced to one configuration per (head size 64/80/128/256, block size
 * 16/32/128, GQA ratio 1/4/8), each drawing its dtype (fp32/fp16/bf16),
 * KV cache (the model's, fp8 e4m3/e5m2 with per-tensor or per-head
 * scales), layout (NHD/HND), window, soft-cap, sinks, ALiBi, LSE, a
 * decode/prefill/chunked-prefill mix over a shuffled block table, tensors
 * at element offsets inside their allocations, and the builder's metadata
 * or none (the kernel's own step, as DCP's windowed calls run); within
 * the runtime conformance's tolerances (fp32 1e-4, fp8 KV 1e-3, fp16/bf16
 * 2e-2). Then: selection on the OpenCL platform chooses it; the device's
 * K/V write equals the host write byte for byte and a bad slot writes
 * nothing; misuse is refused.
 *
 * ATTN_TEST_OCL_PLANTED=1 (ctest test_opencl_backend_planted, with
 * ATTN_OPENCL_BUILD_OPTIONS=-DKD_CAUSAL_SLACK=1: the causal bound one key
 * late): the core self-test must refuse the backend (open and selection),
 * and with ATTN_SELFTEST=0 the matrix must fail. ATTN_TEST_OCL_PLANTED=build
 * (test_opencl_backend_nobuild, options that break the program): the
 * device does not open, the backend fails as an import would, the
 * compiler's log in the detail. Exit 77 without an OpenCL device. */
#include <stdio.h>

#include "attn_kernel_testutil.h"
#include "test.h"

static bool is_fp8(attn_elem e)
{
    return e == ATTN_ELEM_FP8_E4M3 || e == ATTN_ELEM_FP8_E5M2;
}

#define NAME    "test_opencl_backend"
#define MAX_REQ 4
#ifdef ATTN_SANITIZED
#define COST_CAP 6.0e5
#else
#define COST_CAP 1.5e6
#endif

static const int head_sizes[] = {64, 80, 128, 256};
static const int block_sizes[] = {16, 32, 128};
static const int groups[] = {1, 4, 8};

typedef struct {
    attn_dtype dtype;
    attn_elem kv;
    bool per_head, hnd, lse, sinks, softcap, alibi, cross, with_md;
    int D, bs, kvh, group, window, nreq, qlen[MAX_REQ], kvlen[MAX_REQ];
    int64_t off;
} config;

static double cost(const config *c)
{
    double x = 0;
    for (int r = 0; r < c->nreq; r++)
        x += (double)c->qlen[r] * c->kvlen[r] * c->kvh * c->group * 2.0 * c->D;
    return x;
}

static void gen(trng *g, int idx, config *c)
{
    memset(c, 0, sizeof *c);
    c->D = head_sizes[idx % 4];
    c->bs = block_sizes[(idx / 4) % 3];
    c->group = groups[(idx / 12) % 3];
    int dt = trng_int(g, 3);
    c->dtype = dt == 0 ? ATTN_DTYPE_FP32 : dt == 1 ? ATTN_DTYPE_FP16 : ATTN_DTYPE_BF16;
    int k = trng_int(g, 4);
    c->kv = k <= 1 ? attn_dtype_elem(c->dtype) : k == 2 ? ATTN_ELEM_FP8_E4M3 : ATTN_ELEM_FP8_E5M2;
    c->per_head = is_fp8(c->kv) && trng_int(g, 2);
    c->kvh = 1 + trng_int(g, 2);
    c->hnd = trng_int(g, 2);
    c->lse = trng_int(g, 2);
    c->sinks = trng_int(g, 4) == 0;
    c->softcap = trng_int(g, 5) == 0;
    c->alibi = trng_int(g, 5) == 0;
    c->window = trng_int(g, 4) == 0 ? 1 + trng_int(g, 200) : 0;
    c->cross = trng_int(g, 12) == 0;
    c->with_md = idx % 3 != 2;
    c->off = trng_int(g, 3) == 0 ? 1 + trng_int(g, 100) : 0;
    c->nreq = 1 + trng_int(g, MAX_REQ);
    for (int r = 0; r < c->nreq; r++) {
        int kind = r == 0 ? 1 : trng_int(g, 3); /* a prefill, then decodes and chunks */
        int kv = 1 + trng_int(g, 500);
        int q = kind == 0 ? 1 : kind == 1 ? kv : 1 + trng_int(g, 60);
        c->qlen[r] = q < kv ? q : kv;
        c->kvlen[r] = kv;
        if (c->cross) c->qlen[r] = 1 + trng_int(g, 16);
    }
    while (cost(c) > COST_CAP) { /* shorter prefills, then shorter contexts */
        int r = 0;
        for (int i = 1; i < c->nreq; i++)
            if ((double)c->qlen[i] * c->kvlen[i] > (double)c->qlen[r] * c->kvlen[r]) r = i;
        if (c->qlen[r] > 8 && !c->cross) {
            int nq = (c->qlen[r] + 1) / 2;
            c->kvlen[r] -= c->qlen[r] - nq;
            c->qlen[r] = nq;
        } else if (c->kvlen[r] > 1) {
            c->kvlen[r] = (c->kvlen[r] + 1) / 2;
            if (!c->cross && c->qlen[r] > c->kvlen[r]) c->qlen[r] = c->kvlen[r];
        } else {
            break;
        }
    }
}

static void describe(const config *c, char *buf, size_t n)
{
    int o = snprintf(buf, n, "%s kv=%s%s D=%d bs=%d heads=%d/%d %s%s%s%s%s%s win=%d off=%lld %s [",
                     attn_dtype_name(c->dtype), attn_elem_name(c->kv),
                     c->per_head ? "(per-head)" : "", c->D, c->bs, c->kvh * c->group, c->kvh,
                     c->hnd ? "HND" : "NHD", c->cross ? " cross" : "", c->sinks ? " sinks" : "",
                     c->softcap ? " softcap" : "", c->alibi ? " alibi" : "", c->lse ? " lse" : "",
                     c->window, (long long)c->off, c->with_md ? "builder" : "no-metadata");
    for (int r = 0; r < c->nreq && o > 0 && (size_t)o < n; r++)
        o += snprintf(buf + o, n - (size_t)o, "%s%d/%d", r ? " " : "", c->qlen[r], c->kvlen[r]);
    if (o > 0 && (size_t)o < n) snprintf(buf + o, n - (size_t)o, "]");
}

static double tol_for(const config *c)
{
    if (c->dtype != ATTN_DTYPE_FP32) return 2e-2;
    return is_fp8(c->kv) ? 1e-3 : 1e-4;
}

/* ---- one configuration --------------------------------------------------------------- */

typedef struct {
    tcache cache;
    int32_t qsl[MAX_REQ + 1], seq[MAX_REQ], enc[MAX_REQ], *bt;
    int maxb, tokens;
    void *q, *ref;
    float *ref_lse, sinks[256], slopes[256];
    attn_layer_params lp;
    attn_common_metadata cm;
} fixture;

static void fixture_make(trng *g, const config *c, const attn_backend *ref, fixture *f)
{
    memset(f, 0, sizeof *f);
    int H = c->kvh * c->group, nblocks = 2, maxq = 0, maxs = 0;
    for (int r = 0; r < c->nreq; r++) {
        f->tokens += c->qlen[r];
        f->qsl[r + 1] = f->tokens;
        int nb = (c->kvlen[r] + c->bs - 1) / c->bs;
        f->maxb = nb > f->maxb ? nb : f->maxb;
        nblocks += nb;
        maxq = c->qlen[r] > maxq ? c->qlen[r] : maxq;
        maxs = c->kvlen[r] > maxs ? c->kvlen[r] : maxs;
        f->enc[r] = c->kvlen[r];
        f->seq[r] = c->cross ? c->qlen[r] : c->kvlen[r];
    }
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)nblocks);
    for (int i = 0; i < nblocks; i++)
        perm[i] = i;
    for (int i = nblocks - 1; i > 0; i--) {
        int k = trng_int(g, i + 1), t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
    }
    f->bt = calloc((size_t)(c->nreq * f->maxb), sizeof(int32_t));
    for (int r = 0, next = 0; r < c->nreq; r++)
        for (int b = 0; b < (c->kvlen[r] + c->bs - 1) / c->bs; b++)
            f->bt[r * f->maxb + b] = perm[next++];
    free(perm);
    tcache_init(&f->cache, c->kv, nblocks, c->bs, c->kvh, c->D, c->D, c->hnd);
    float amax = 1.0f + trng_unif(g, 0.0f, 2.0f);
    if (is_fp8(c->kv)) {
        float base = amax / (c->kv == ATTN_ELEM_FP8_E4M3 ? 300.0f : 20000.0f);
        f->cache.view.k_scale = base * trng_unif(g, 0.7f, 1.3f);
        f->cache.view.v_scale = base * trng_unif(g, 0.7f, 1.3f);
        for (int h = 0; c->per_head && h < c->kvh; h++) {
            f->cache.kscale_ph[h] = base * trng_unif(g, 0.5f, 1.5f);
            f->cache.vscale_ph[h] = base * trng_unif(g, 0.5f, 1.5f);
        }
        if (c->per_head) {
            f->cache.view.k_scale_per_head = f->cache.kscale_ph;
            f->cache.view.v_scale_per_head = f->cache.vscale_ph;
        }
    }
    float row[256];
    for (int b = 0; b < nblocks; b++)
        for (int o = 0; o < c->bs; o++)
            for (int h = 0; h < c->kvh; h++)
                for (int v = 0; v < 2; v++) {
                    for (int d = 0; d < c->D; d++)
                        row[d] = trng_normal(g) * amax / 2.5f;
                    tcache_put(&f->cache, b, o, h, v, row);
                }
    attn_elem qe = attn_dtype_elem(c->dtype);
    size_t qn = (size_t)f->tokens * H * c->D, qes = attn_elem_size(qe);
    f->q = malloc(qn * qes);
    float qmag = trng_unif(g, 0.3f, 2.0f) / amax;
    for (size_t i = 0; i < qn; i++)
        attn__store_elem(f->q, qe, i, trng_normal(g) * qmag);
    for (int h = 0; h < H; h++) {
        f->sinks[h] = trng_unif(g, -2.0f, 4.0f);
        f->slopes[h] = exp2f(-8.0f * (float)(h + 1) / (float)H) * 0.25f;
    }
    f->lp =
        (attn_layer_params){.num_heads = H,
                            .num_kv_heads = c->kvh,
                            .head_size = c->D,
                            .scale = trng_int(g, 2) ? 0.0f : trng_unif(g, 0.05f, 0.3f),
                            .logits_soft_cap = c->softcap ? trng_unif(g, 2.0f, 30.0f) : 0.0f,
                            .sliding_window = c->window,
                            .sinks = c->sinks ? f->sinks : NULL,
                            .alibi_slopes = c->alibi ? f->slopes : NULL,
                            .attn_type = c->cross ? ATTN_TYPE_ENCODER_DECODER : ATTN_TYPE_DECODER,
                            .dtype = c->dtype,
                            .kv_cache_dtype = ATTN_KV_AUTO};
    f->cm = (attn_common_metadata){.query_start_loc = f->qsl,
                                   .seq_lens = f->seq,
                                   .num_reqs = c->nreq,
                                   .num_actual_tokens = f->tokens,
                                   .max_query_len = maxq,
                                   .max_seq_len = maxs,
                                   .block_table = f->bt,
                                   .block_table_stride = f->maxb,
                                   .causal = true,
                                   .block_size = c->bs,
                                   .encoder_seq_lens = c->cross ? f->enc : NULL};
    f->ref = calloc(qn, qes);
    f->ref_lse = malloc(sizeof(float) * (size_t)f->tokens * (size_t)H);
    attn_kernel *rk = NULL;
    CHECK_OK(attn_kernel_open(ref, &f->lp, NULL, &rk));
    attn_forward_args a = {
        .common = &f->cm, .q = f->q, .kv = &f->cache.view, .out = f->ref, .lse = f->ref_lse};
    if (rk) CHECK_OK(attn_kernel_forward(rk, &a));
    attn_kernel_close(rk);
}

static void fixture_free(fixture *f)
{
    free(f->q);
    free(f->ref);
    free(f->ref_lse);
    free(f->bt);
    tcache_free(&f->cache);
}

/* Host bytes into a fresh allocation of dev at byte offset off (NaN bytes
 * first when nan: every element must be written by the kernel). */
static void *dev_buf(attn_device *dev, const void *src, size_t off, size_t bytes, bool nan)
{
    void *m = NULL;
    CHECK_OK(attn_device_alloc(dev, off + bytes, ATTN_MEM_STEP, &m));
    if (!m) return NULL;
    if (nan) {
        unsigned char *x = malloc(off + bytes);
        memset(x, 0xff, off + bytes);
        CHECK_OK(attn_device_copy_in(dev, m, 0, x, off + bytes));
        free(x);
    }
    if (src) CHECK_OK(attn_device_copy_in(dev, m, off, src, bytes));
    return m;
}

typedef struct {
    double err, lerr;
    attn_status st;
} outcome;

static outcome run_device(const attn_backend *b, attn_device *dev, const config *c, fixture *f)
{
    outcome res = {INFINITY, INFINITY, ATTN_OK};
    int H = f->lp.num_heads;
    attn_elem qe = attn_dtype_elem(c->dtype);
    size_t qes = attn_elem_size(qe), rows = (size_t)f->tokens * H, n = rows * c->D;
    size_t off = (size_t)c->off;
    int64_t extent = 0;
    CHECK_OK(attn_kv_view_extent(&f->cache.view, &extent));
    attn_kv_view view = f->cache.view;
    view.data = dev_buf(dev, f->cache.data, 0, (size_t)extent * attn_elem_size(c->kv), false);
    view.device = dev;
    void *q = dev_buf(dev, f->q, off * qes, n * qes, false);
    void *out = dev_buf(dev, NULL, off * qes, n * qes, true);
    void *lse = dev_buf(dev, NULL, off * 4, rows * 4, true);
    /* the builder as a tool makes it: the instance named, its state found */
    const attn_builder_ops *bo = b->desc->builder;
    attn_builder_init bi = {.desc = b->desc,
                            .layer = &f->lp,
                            .block_size = c->bs,
                            .num_blocks = f->cache.nb,
                            .max_num_reqs = c->nreq,
                            .max_num_tokens = f->tokens,
                            .max_blocks_per_req = f->maxb,
                            .device = dev};
    void *bstate = NULL;
    const void *md = NULL;
    attn_kernel *k = NULL;
    res.st = bo->create(&bi, &bstate);
    if (res.st == ATTN_OK && c->with_md) res.st = bo->build(bstate, 0, &f->cm, false, &md);
    if (res.st == ATTN_OK) res.st = attn_kernel_open(b, &f->lp, dev, &k);
    attn_forward_args a = {.common = &f->cm,
                           .metadata = md,
                           .q = q,
                           .kv = &view,
                           .out = out,
                           .lse = c->lse ? lse : NULL,
                           .q_offset = (int64_t)off,
                           .out_offset = (int64_t)off,
                           .lse_offset = (int64_t)off};
    if (res.st == ATTN_OK) res.st = attn_kernel_forward(k, &a);
    void *got = malloc(n * qes);
    float *got_lse = malloc(rows * sizeof(float));
    if (res.st == ATTN_OK) res.st = attn_device_copy_out(dev, got, out, off * qes, n * qes);
    if (res.st == ATTN_OK) res.st = attn_device_copy_out(dev, got_lse, lse, off * 4, rows * 4);
    if (res.st == ATTN_OK) {
        res.err = trel_err(got, f->ref, qe, n);
        res.lerr = 0;
        for (size_t i = 0; c->lse && i < rows; i++) {
            double d = isinf(f->ref_lse[i]) ? (got_lse[i] == f->ref_lse[i] ? 0 : INFINITY)
                                            : fabs(got_lse[i] - f->ref_lse[i]);
            if (!(d <= res.lerr)) res.lerr = isnan(d) ? INFINITY : d;
        }
    }
    free(got);
    free(got_lse);
    attn_kernel_close(k);
    if (bstate) bo->destroy(bstate);
    attn_device_free(dev, view.data);
    attn_device_free(dev, q);
    attn_device_free(dev, out);
    attn_device_free(dev, lse);
    return res;
}

/* The matrix; returns the configurations over tolerance. */
static int run_matrix(const attn_backend *b, const attn_backend *ref, attn_device *dev,
                      bool expect_pass)
{
    trng g = {0x0c1ba5e5u};
    int fails = 0, n = 36, covered[8] = {0};
    double worst = 0;
    for (int i = 0; i < n; i++) {
        config c;
        gen(&g, i, &c);
        char desc[320];
        describe(&c, desc, sizeof desc);
        fixture f;
        fixture_make(&g, &c, ref, &f);
        outcome r = run_device(b, dev, &c, &f);
        double tol = tol_for(&c);
        bool ok = r.st == ATTN_OK && r.err <= tol && r.lerr <= tol;
        if (r.err / tol > worst) worst = r.err / tol;
        fails += !ok;
        if (expect_pass)
            CHECK_MSG(ok, "#%d %s: %s, error %.3g (lse %.3g) > %.1g (%s)", i, desc,
                      attn_status_name(r.st), r.err, r.lerr, tol, attn_last_error());
        else if (getenv("ATTN_TEST_VERBOSE"))
            printf("#%d %s: error %.3g\n", i, desc, r.err);
        covered[0] += is_fp8(c.kv);
        covered[1] += c.window > 0;
        covered[2] += c.softcap;
        covered[3] += c.sinks;
        covered[4] += c.alibi;
        covered[5] += c.lse;
        covered[6] += c.nreq > 1 && c.qlen[0] > 1 && c.qlen[1] == 1; /* a prefill and a decode */
        covered[7] += !c.with_md;
        fixture_free(&f);
    }
    static const char *what[8] = {"fp8 KV", "window", "soft-cap",      "sinks",
                                  "ALiBi",  "LSE",    "mixed batches", "no metadata"};
    printf("%d configurations through attn_kernel on %s, %d over tolerance; worst error %.3g of "
           "its tolerance; covered:",
           n, attn_device_name(dev), fails, worst);
    for (int i = 0; i < 8; i++) {
        printf(" %s=%d", what[i], covered[i]);
        if (expect_pass) CHECK_MSG(covered[i] > 0, "no configuration covered %s", what[i]);
    }
    printf("\n");
    return fails;
}

/* ---- selection, the device's writes, misuse ----------------------------------------------- */

static void check_selection(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("opencl", &p));
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    cfg.dtype = ATTN_DTYPE_BF16;
    attn_selection *s = NULL;
    CHECK_OK(attn_select_uncached(p, NULL, &cfg, &s));
    CHECK_STR(s ? attn_selection_backend(s) : NULL, "OPENCL_ATTN");
    attn_selection_free(s);
    /* the descriptor's limits are the kernels': head size 12 is refused */
    cfg.head_size = 12;
    s = NULL;
    CHECK_STATUS(attn_select_uncached(p, NULL, &cfg, &s), ATTN_NO_VALID_BACKEND);
    const char *r = s ? attn_selection_reason(s, 0, 0) : NULL;
    CHECK_STR(r, "head_size not supported");
    attn_selection_free(s);
    attn_platform_free(p);
    /* a simulated machine of another kind has no OpenCL device */
    CHECK_OK(attn_platform_open("h100", &p));
    cfg.head_size = 128;
    s = NULL;
    CHECK_STATUS(attn_select_uncached(p, "OPENCL_ATTN", &cfg, &s), ATTN_BACKEND_INVALID);
    r = s ? attn_selection_reason(s, 0, 0) : NULL;
    CHECK_STR(r, "OPENCL_ATTN runs on an OpenCL device; h100 is a simulated cuda machine");
    attn_selection_free(s);
    attn_platform_free(p);
}

/* attn_kv_write into the device's cache equals the host write, byte for
 * byte (fp8 with per-head scales); a bad slot writes nothing. */
static void check_kv_write(const attn_backend *b, attn_device *dev)
{
    attn_kv_layout_info li;
    CHECK_OK(attn_kv_layout_compute(b->desc, ATTN_LAYOUT_NHD, 8, 16, 2, 64, 0, ATTN_KV_FP8_E4M3,
                                    ATTN_DTYPE_BF16, &li));
    attn_kv_cache *dc = NULL, *hc = NULL;
    CHECK_OK(attn_kv_cache_create_on(&li, 1, dev, &dc));
    CHECK_OK(attn_kv_cache_create(&li, 1, &hc));
    if (!dc || !hc) return;
    const float kph[2] = {0.01f, 0.03f}, vph[2] = {0.02f, 0.005f};
    CHECK_OK(attn_kv_cache_set_scales(dc, 0, 0.02f, 0.02f, kph, vph));
    CHECK_OK(attn_kv_cache_set_scales(hc, 0, 0.02f, 0.02f, kph, vph));
    attn_kv_view dv, hv;
    CHECK_OK(attn_kv_cache_view(dc, 0, &dv));
    CHECK_OK(attn_kv_cache_view(hc, 0, &hv));
    CHECK(dv.device == dev);
    enum { T = 21 };
    int64_t slots[T];
    uint16_t k[T * 2 * 64], v[T * 2 * 64];
    trng g = {77};
    for (int t = 0; t < T; t++)
        slots[t] = t == 5 ? -1 : (int64_t)(t * 5 % 128);
    for (int i = 0; i < T * 2 * 64; i++) {
        attn__store_elem(k, ATTN_ELEM_BF16, (size_t)i, trng_normal(&g) * 3.0f);
        attn__store_elem(v, ATTN_ELEM_BF16, (size_t)i, trng_normal(&g) * 1000.0f); /* saturates */
    }
    void *dk = dev_buf(dev, k, 0, sizeof k, false), *dvv = dev_buf(dev, v, 0, sizeof v, false);
    CHECK_OK(attn_kv_write(&dv, slots, T, dk, dvv, ATTN_ELEM_BF16));
    CHECK_OK(attn_kv_write(&hv, slots, T, k, v, ATTN_ELEM_BF16));
    size_t bytes = (size_t)li.bytes_per_layer;
    unsigned char *got = malloc(bytes), *was = malloc(bytes);
    CHECK_OK(attn_device_copy_out(dev, got, dv.data, 0, bytes));
    CHECK_MSG(memcmp(got, hv.data, bytes) == 0,
              "the device's fp8 K/V write differs from the host's");
    /* a slot outside the cache: refused, nothing written */
    slots[3] = 8 * 16;
    CHECK_STATUS(attn_kv_write(&dv, slots, T, dk, dvv, ATTN_ELEM_BF16), ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn_device_copy_out(dev, was, dv.data, 0, bytes));
    CHECK(memcmp(got, was, bytes) == 0);
    free(got);
    free(was);
    attn_device_free(dev, dk);
    attn_device_free(dev, dvv);
    attn_kv_cache_free(dc);
    attn_kv_cache_free(hc);
}

static void check_misuse(const attn_backend *b, attn_device *dev)
{
    attn_layer_params lp = {.num_heads = 4,
                            .num_kv_heads = 2,
                            .head_size = 64,
                            .dtype = ATTN_DTYPE_FP32,
                            .attn_type = ATTN_TYPE_DECODER};
    attn_kernel *k = NULL;
    /* on the host device: the core refuses a device of another kind */
    CHECK_STATUS(attn_kernel_open(b, &lp, NULL, &k), ATTN_INVALID_ARGUMENT);
    lp.head_size = 12;
    CHECK_STATUS(attn_kernel_open(b, &lp, dev, &k), ATTN_UNSUPPORTED);
    lp.head_size = 64;
    CHECK_OK(attn_kernel_open(b, &lp, dev, &k));
    /* the builder needs the device too */
    attn_builder_init bi = {.desc = b->desc,
                            .layer = &lp,
                            .block_size = 16,
                            .num_blocks = 4,
                            .max_num_reqs = 1,
                            .max_num_tokens = 4,
                            .max_blocks_per_req = 4,
                            .device = attn_device_host()};
    void *bs = NULL;
    CHECK_STATUS(b->desc->builder->create(&bi, &bs), ATTN_INVALID_ARGUMENT);
    /* direct K/V (encoder self-attention) is not supported; metadata that
     * is not the builder's is refused */
    int32_t qsl[2] = {0, 4}, seq[1] = {4}, bt[1] = {0};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = 1,
                               .num_actual_tokens = 4,
                               .max_query_len = 4,
                               .max_seq_len = 4,
                               .block_table = bt,
                               .block_table_stride = 1,
                               .causal = true,
                               .block_size = 16};
    void *q = dev_buf(dev, NULL, 0, 4 * 4 * 64 * 4, false),
         *out = dev_buf(dev, NULL, 0, 4096, false);
    void *kk = dev_buf(dev, NULL, 0, 4 * 2 * 64 * 4, false);
    attn_forward_args a = {.common = &cm, .q = q, .out = out, .k = kk, .v = kk};
    CHECK_STATUS(attn_kernel_forward(k, &a), ATTN_UNSUPPORTED);
    attn_kv_layout_info li;
    CHECK_OK(attn_kv_layout_compute(b->desc, ATTN_LAYOUT_NHD, 4, 16, 2, 64, 0, ATTN_KV_AUTO,
                                    ATTN_DTYPE_FP32, &li));
    attn_kv_cache *c = NULL;
    CHECK_OK(attn_kv_cache_create_on(&li, 1, dev, &c));
    attn_kv_view view;
    CHECK_OK(attn_kv_cache_view(c, 0, &view));
    uint64_t junk[8] = {0};
    a = (attn_forward_args){.common = &cm, .metadata = junk, .q = q, .kv = &view, .out = out};
    CHECK_STATUS(attn_kernel_forward(k, &a), ATTN_INVALID_ARGUMENT);
    /* metadata uploaded through another instance (queue) */
    attn_device *other = NULL;
    CHECK_OK(attn_device_open(b, NULL, &other));
    bi.device = other;
    const void *md = NULL;
    CHECK_OK(b->desc->builder->create(&bi, &bs));
    if (bs) CHECK_OK(b->desc->builder->build(bs, 0, &cm, false, &md));
    a.metadata = md;
    CHECK_STATUS(attn_kernel_forward(k, &a), ATTN_BAD_STATE);
    a.metadata = NULL; /* the kernel's own step: fine */
    CHECK_OK(attn_kernel_forward(k, &a));
    CHECK_OK(attn_device_synchronize(dev));
    if (bs) b->desc->builder->destroy(bs);
    attn_device_close(other);
    attn_kv_cache_free(c);
    attn_device_free(dev, q);
    attn_device_free(dev, out);
    attn_device_free(dev, kk);
    attn_kernel_close(k);
}

/* The mutant program (ATTN_OPENCL_BUILD_OPTIONS=-DKD_CAUSAL_SLACK=1): the
 * self-test refuses it wherever it would run; unchecked, the matrix fails. */
static void planted(const attn_backend *b, const attn_backend *ref, attn_device *dev)
{
    attn_layer_params lp = {.num_heads = 8,
                            .num_kv_heads = 2,
                            .head_size = 128,
                            .dtype = ATTN_DTYPE_BF16,
                            .attn_type = ATTN_TYPE_DECODER};
    attn_kernel *k = NULL;
    CHECK_STATUS(attn_kernel_open(b, &lp, dev, &k), ATTN_SELFTEST_FAILED);
    printf("planted off-by-one: attn_kernel_open refused: %s\n", attn_last_error());
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("opencl", &p));
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    cfg.dtype = ATTN_DTYPE_BF16;
    attn_selection *s = NULL;
    CHECK_STATUS(attn_select_uncached(p, NULL, &cfg, &s), ATTN_NO_VALID_BACKEND);
    const char *r = s ? attn_selection_reason(s, 0, 0) : NULL;
    CHECK_MSG(r && !strncmp(r, "self-test failed: max error", 27), "reason: %s", r ? r : "(none)");
    printf("planted off-by-one: selection refused: %s\n", r ? r : "(none)");
    attn_selection_free(s);
    attn_platform_free(p);
    setenv("ATTN_SELFTEST", "0", 1);
    int fails = run_matrix(b, ref, dev, false);
    CHECK_MSG(fails > 0, "the off-by-one passed every configuration");
    printf("planted off-by-one, self-test off: %d configurations over tolerance\n", fails);
}

/* A program that does not build: an import failure everywhere, the log
 * carried whole (selection's detail), never a crash or a self-test verdict. */
static int unbuildable(const attn_backend *b, attn_status open_st)
{
    CHECK_STATUS(open_st, ATTN_IMPORT_ERROR);
    CHECK_MSG(strstr(attn_last_error(), "CL_BUILD_PROGRAM_FAILURE"), "open: %s", attn_last_error());
    char detail[2048];
    CHECK_STATUS(attn_backend_self_test(b, detail, sizeof detail), ATTN_IMPORT_ERROR);
    CHECK_MSG(strstr(detail, "CL_BUILD_PROGRAM_FAILURE"), "self-test: %s", detail);
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("opencl", &p));
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    cfg.dtype = ATTN_DTYPE_BF16;
    attn_selection *s = NULL;
    CHECK_STATUS(attn_select_uncached(p, NULL, &cfg, &s), ATTN_NO_VALID_BACKEND);
    const char *r = s ? attn_selection_reason(s, 0, 0) : NULL;
    CHECK_MSG(r &&
                  !strncmp(r, "ImportError: cannot open device opencl: OpenCL program build failed",
                           67) &&
                  !strchr(r, '\n'),
              "reason: %s", r ? r : "(none)");
    char *json = NULL;
    CHECK_OK(attn_selection_to_json(s, &json));
    CHECK_MSG(json && strstr(json, "\"detail\": \"cannot open device opencl: OpenCL program build"),
              "the compiler's log is not the candidate's detail: %s", json ? json : "(none)");
    free(json);
    printf("unbuildable program: selection refused: %s\n", r ? r : "(none)");
    attn_selection_free(s);
    attn_platform_free(p);
    return attn_test_finish(NAME);
}

int main(void)
{
    const attn_platform *cur = NULL;
    const attn_backend *b = NULL, *ref = NULL;
    CHECK_OK(attn_platform_current(&cur));
    CHECK_OK(attn_backend_resolve(cur, "OPENCL_ATTN", &b));
    CHECK_OK(attn_backend_resolve(cur, "REFERENCE", &ref));
    if (!b || !ref) return attn_test_finish(NAME);
    CHECK(b->device && b->kernel && b->kernel->kind == ATTN_KERNEL_STANDARD);
    attn_device *dev = NULL;
    attn_status st = attn_device_open(b, NULL, &dev);
    if (st == ATTN_PLATFORM_UNAVAILABLE)
        attn_test_skip(NAME, "no OpenCL device here: %s", attn_last_error());
    const char *planted_env = getenv("ATTN_TEST_OCL_PLANTED");
    if (planted_env && !strcmp(planted_env, "build")) return unbuildable(b, st);
    CHECK_OK(st);
    if (!dev) return attn_test_finish(NAME);
    CHECK_STR(attn_device_name(dev), "opencl");
    CHECK(!attn_device_host_visible(dev));
    if (planted_env && !strcmp(planted_env, "1")) {
        planted(b, ref, dev);
    } else {
        char detail[256];
        CHECK_OK(attn_backend_self_test(b, detail, sizeof detail));
        run_matrix(b, ref, dev, true);
        check_selection();
        check_kv_write(b, dev);
        check_misuse(b, dev);
    }
    int count = 0;
    attn_device_usage(dev, &count, NULL);
    CHECK_MSG(count == 0, "%d allocations left on the device", count);
    attn_device_close(dev);
    return attn_test_finish(NAME);
}
