/* The MLA kernels of the dialect (src/backends/devkern/kd_mla.cl on the
 * OpenCL device, PoCL here) against REFERENCE_MLA on seeded random
 * configurations: forward_mqa (absorbed decode over the latent cache, the
 * split-KV merge automatic and forced, LSE) and forward_mha (decompression
 * through W_UK / W_UV, then the standard paged attention kernel), with
 * DeepSeek-V3-like dims scaled down for speed (kv_lora_rank 512 + rope 64,
 * nope 128 / 64, v 128 / 64) and smaller MLA layers (kv_lora_rank 256 / 96
 * / 64, rope 32 / 16 / 0), heads 16 and 128 (and 1 / 4 / 8, several
 * tokens per work-group), block sizes 16 / 32 / 64 / 128, fp32 / fp16 /
 * bf16 activations, latent caches auto, fp8 e4m3 / e5m2 and a 16-bit cache
 * of the other 16-bit type, padded latent rows, block tables in shuffled
 * order, batches of decodes (query lengths 1-4), fresh and chunked
 * prefills and mixes of both (the MLA builders' split: decodes first), or
 * both entry points over every request (no MLA metadata), tensors at
 * element offsets.
 *
 * Tolerances are CPU_MLA's tests' (max |out - ref| / max |ref|): fp32
 * 1e-4, fp16 / bf16 2e-2; LSE absolute the same. Outputs start as NaN:
 * each entry point must write exactly its own requests' rows (the others
 * stay NaN).
 *
 * Then the planted off-by-one: the kernels built with -DKD_CAUSAL_SLACK=1
 * (the causal bound moved by one key) must fail both entry points on a
 * batch of multi-token decodes and chunked prefills that the real program
 * passes. And bad input (a rank beyond the kernels, a block id outside
 * the pool, a buffer too small, a step of another batch or not built, a
 * forward_mha without weights or prefill dims, a view without memory) is
 * refused with its status and leaves the output as it was. Exit 77 without
 * an OpenCL device. */
#include "backends/devkern/kd_params.h"
#include "mla_fixture.h"
#include "ocl_testutil.h"

#ifdef ATTN_SANITIZED
#define COST_CAP 1.0e7
#else
#define COST_CAP 3.0e7
#endif
#define N_CONFIGS 48
#define MAX_REQ   6
#ifndef NAME /* test_cuda_mla_conformance runs this file under its own name */
#define NAME "test_opencl_mla_conformance"
#endif

typedef struct {
    int R, P, N, V;
} dims_t;

/* DeepSeek-V3 (512 + 64, nope 128, v 128), scaled, MiniCPM3-like, small,
 * and ranks that are not multiples of the 64-column chunk. */
static const dims_t dims[] = {{512, 64, 128, 128}, {512, 64, 64, 64}, {256, 32, 64, 64},
                              {96, 16, 48, 40},    {64, 0, 32, 32},   {200, 24, 40, 56}};
#define N_DIMS ((int)(sizeof dims / sizeof dims[0]))
static const int heads[] = {16, 128, 16, 4, 128, 1, 8};
static const int block_sizes[] = {16, 32, 64, 128};

typedef struct {
    attn_dtype dt;
    attn_elem kve;
    int H, bs, di;
    int nreq, nd; /* decodes first: requests [0, nd); -1 = no MLA metadata */
    int q[MAX_REQ], s[MAX_REQ];
    bool lse;
    int split_len; /* 0: the automatic plan */
    int64_t off;
} config;

enum { K_DECODES, K_PREFILLS, K_MIXED, K_LONG, K_ALL };

static double cost_of(const config *c)
{
    const dims_t *d = &dims[c->di];
    double x = 0;
    for (int r = 0; r < c->nreq; r++) {
        bool dec = c->nd < 0 || r < c->nd, pre = c->nd < 0 || r >= c->nd;
        if (dec) x += (double)c->q[r] * c->H * (c->s[r] + 1) * (2 * d->R + d->P);
        if (pre)
            x += (double)c->H * c->s[r] * d->R * (d->N + d->V) +
                 (double)c->q[r] * c->s[r] * c->H * (d->N + d->P + d->V);
    }
    return x;
}

static void gen(trng *g, int idx, config *c)
{
    memset(c, 0, sizeof *c);
    int dt = trng_int(g, 3);
    c->dt = dt == 0 ? ATTN_DTYPE_FP32 : dt == 1 ? ATTN_DTYPE_FP16 : ATTN_DTYPE_BF16;
    int kk = trng_int(g, 5);
    c->kve = kk <= 1   ? attn_dtype_elem(c->dt)
             : kk == 2 ? ATTN_ELEM_FP8_E4M3
             : kk == 3 ? ATTN_ELEM_FP8_E5M2
                       : (c->dt == ATTN_DTYPE_BF16 ? ATTN_ELEM_F16 : ATTN_ELEM_BF16);
    c->di = idx % N_DIMS;
    c->H = heads[idx % 7];
    c->bs = block_sizes[(idx / 2) % 4];
    c->lse = trng_int(g, 3) != 0;
    c->off = trng_int(g, 4) == 0 ? 1 + trng_int(g, 100) : 0;
    int kind = idx % 5;
    c->nreq = kind == K_LONG ? 1 + trng_int(g, 2) : 1 + trng_int(g, MAX_REQ);
    int nd = kind == K_DECODES || kind == K_LONG ? c->nreq
             : kind == K_PREFILLS                ? 0
                                                 : trng_int(g, c->nreq + 1);
    c->nd = kind == K_ALL ? -1 : nd;
    for (int r = 0; r < c->nreq; r++) {
        bool dec = kind == K_ALL ? trng_int(g, 2) : r < nd;
        int s = kind == K_LONG ? 1000 + trng_int(g, 2200) : 1 + trng_int(g, 300);
        int q = dec ? 1 + (trng_int(g, 3) == 0 ? trng_int(g, 4) : 0)
                    : (trng_int(g, 2) ? s : 1 + trng_int(g, 40)); /* fresh or chunked */
        c->q[r] = q < s ? q : s;
        c->s[r] = s;
    }
    if ((kind == K_LONG || kind == K_DECODES) && trng_int(g, 2)) {
        static const int lens[] = {64, 128, 320, 1000};
        c->split_len = lens[trng_int(g, 4)];
    }
    /* cheaper: shorter prefills (keeping their context), then shorter
     * contexts, of the request that costs most and can still shrink; then
     * fewer requests */
    while (cost_of(c) > COST_CAP) {
        int big = -1;
        for (int r = 0; r < c->nreq; r++)
            if (c->s[r] > 1 && (big < 0 || c->s[r] * (int64_t)(c->q[r] + c->H) >
                                               c->s[big] * (int64_t)(c->q[big] + c->H)))
                big = r;
        if (big < 0) {
            if (c->nreq == 1) break;
            c->nreq--;
            if (c->nd > c->nreq) c->nd = c->nreq;
            continue;
        }
        int *q = &c->q[big], *sl = &c->s[big];
        if (*q > 8) {
            int nq = (*q + 1) / 2;
            *sl -= *q - nq;
            *q = nq;
        } else if (*sl > *q) {
            *sl = (*sl + *q) / 2;
        } else { /* a short fresh prefill or decode: both halve */
            *q = *sl = (*sl + 1) / 2;
        }
    }
}

static void describe(const config *c, char *buf, size_t n)
{
    const dims_t *d = &dims[c->di];
    int o = snprintf(buf, n,
                     "%s kv=%s H=%d R=%d P=%d N=%d V=%d bs=%d%s split=%d off=%lld nd=%d "
                     "reqs=[",
                     attn_dtype_name(c->dt), attn_elem_name(c->kve), c->H, d->R, d->P, d->N, d->V,
                     c->bs, c->lse ? " lse" : "", c->split_len, (long long)c->off, c->nd);
    for (int r = 0; r < c->nreq && o < (int)n; r++)
        o += snprintf(buf + o, n - (size_t)o, "%s%d/%d", r ? " " : "", c->q[r], c->s[r]);
    if (o < (int)n) snprintf(buf + o, n - (size_t)o, "]");
}

static double tol_for(const config *c)
{
    return c->dt == ATTN_DTYPE_FP32 ? 1e-4 : 2e-2;
}

typedef struct {
    double err[2], lerr[2]; /* forward_mqa, forward_mha */
    bool ran[2], untouched;
    int splits;
} outcome;

/* Max error over rows [r0, r1) of two [rows][w] outputs, and whether rows
 * outside them are still the NaN fill. */
static double rows_err(const void *got, const void *want, attn_elem e, size_t r0, size_t r1, int w)
{
    size_t es = attn_elem_size(e);
    return fx_rel_err((const char *)got + r0 * w * es, (const char *)want + r0 * w * es, e,
                      (r1 - r0) * (size_t)w);
}

static bool nan_rows(const void *got, size_t esz, size_t r0, size_t r1, int w)
{
    const unsigned char *p = (const unsigned char *)got + r0 * w * esz;
    for (size_t i = 0; i < (r1 - r0) * (size_t)w * esz; i++)
        if (p[i] != 0xff) return false;
    return true;
}

/* One entry point on the device against REFERENCE_MLA's. */
static void run_entry(attn__ocl *o, const config *c, mla_fx *f, attn__ocl_mla *k,
                      attn__ocl_mla_step *step, bool mha, outcome *res)
{
    const dims_t *d = &dims[c->di];
    int H = c->H, qw = mha ? d->N + d->P : d->R + d->P, ow = mha ? d->V : d->R;
    size_t es = f->qesz, rows = (size_t)f->T * H, off = (size_t)c->off;
    int n = c->nreq, nd = c->nd < 0 ? n : c->nd;
    size_t r0 = c->nd < 0 ? 0 : (size_t)f->qsl[mha ? nd : 0] * H;
    size_t r1 = c->nd < 0 ? rows : (size_t)f->qsl[mha ? n : nd] * H;
    /* the reference, with the builders' split when there is one */
    attn_mla_metadata md = {.magic = ATTN_MLA_METADATA_MAGIC,
                            .struct_size = sizeof md,
                            .common = f->cm,
                            .num_decodes = nd,
                            .num_prefills = n - nd};
    void *ref = calloc(rows * ow + 1, es), *got = malloc(rows * ow * es + 1);
    float *rl = calloc(rows + 1, sizeof(float)), *gl = malloc(sizeof(float) * (rows + 1));
    attn_mla_args a = mla_fx_args(f, mha, ref, rl);
    a.metadata = c->nd < 0 ? NULL : &md;
    CHECK_OK(mha ? attn__ref_mla_mha(&a) : attn__ref_mla_mqa(&a, false));
    attn__ocl_mem *qm = tocl_upload(o, NULL, (off + rows * qw) * es + 4);
    attn__ocl_mem *om = tocl_upload(o, NULL, (off + rows * ow) * es + 4);
    attn__ocl_mem *lm = tocl_upload(o, NULL, (off + rows) * sizeof(float) + 4);
    attn__ocl_mem *wk = tocl_upload(o, f->w_uk, (size_t)H * d->N * d->R * es);
    attn__ocl_mem *wv = tocl_upload(o, f->w_uv, (size_t)H * d->R * d->V * es);
    attn__ocl_mem *kvm =
        tocl_upload(o, f->cache, (size_t)f->nb * f->kv.stride_block * fx_esz(c->kve));
    unsigned char *nan = malloc((off + rows * ow) * es + (off + rows) * sizeof(float) + 8);
    memset(nan, 0xff, (off + rows * ow) * es + (off + rows) * sizeof(float) + 8);
    if (rows) CHECK_OK(attn__ocl_copy_in(o, qm, off * es, mha ? f->q : f->q_abs, rows * qw * es));
    CHECK_OK(attn__ocl_copy_in(o, om, 0, nan, (off + rows * ow) * es));
    CHECK_OK(attn__ocl_copy_in(o, lm, 0, nan, (off + rows) * sizeof(float)));
    attn_kv_view view = f->kv;
    view.data = kvm;
    attn__ocl_mla_fwd fw = {.layer = &f->lp,
                            .common = &f->cm,
                            .step = step,
                            .kv = &view,
                            .q = qm,
                            .q_offset = (int64_t)off,
                            .out = om,
                            .out_offset = (int64_t)off,
                            .lse = c->lse ? lm : NULL,
                            .lse_offset = (int64_t)off,
                            .w_uk = wk,
                            .w_uv = wv};
    attn_status st = mha ? attn__ocl_mla_mha(k, &fw) : attn__ocl_mla_mqa(k, &fw);
    CHECK_MSG(st == ATTN_OK, "%s: %s (%s)", mha ? "forward_mha" : "forward_mqa",
              attn_status_name(st), attn_last_error());
    if (st == ATTN_OK && rows) {
        CHECK_OK(attn__ocl_copy_out(o, got, om, off * es, rows * ow * es));
        CHECK_OK(attn__ocl_copy_out(o, gl, lm, off * sizeof(float), rows * sizeof(float)));
        res->err[mha] = rows_err(got, ref, f->qe, r0, r1, ow);
        res->lerr[mha] = c->lse ? fx_lse_err(gl + r0, rl + r0, r1 - r0) : 0;
        res->untouched &= nan_rows(got, es, 0, r0, ow) && nan_rows(got, es, r1, rows, ow);
        res->ran[mha] = r1 > r0;
    } else if (st != ATTN_OK) {
        res->err[mha] = INFINITY;
    }
    free(ref), free(got), free(rl), free(gl), free(nan);
    attn__ocl_free(qm), attn__ocl_free(om), attn__ocl_free(lm), attn__ocl_free(wk),
        attn__ocl_free(wv), attn__ocl_free(kvm);
}

static outcome run_config(attn__ocl *o, const config *c, uint64_t seed)
{
    const dims_t *d = &dims[c->di];
    outcome res = {.untouched = true};
    mla_fx f;
    mla_fx_init(&f, c->H, d->R, d->P, d->N, d->V, c->dt, c->kve, c->bs, c->nreq, c->q, c->s, seed);
    f.lp.scale = seed % 3 == 0 ? 0.0f : 0.05f + (float)(seed % 7) * 0.02f;
    attn__ocl_mla *k = NULL;
    attn__ocl_mla_step *step = NULL;
    CHECK_OK(attn__ocl_mla_create(o, &f.lp, &k));
    CHECK_OK(attn__ocl_mla_step_create(o, &f.lp, &step));
    attn__ocl_plan plan = {.split_len = c->split_len};
    attn_status st =
        step ? attn__ocl_mla_step_build(step, &f.cm, c->nd, f.nb, &plan) : ATTN_INTERNAL;
    CHECK_MSG(st == ATTN_OK, "step build: %s (%s)", attn_status_name(st), attn_last_error());
    if (st == ATTN_OK && k) {
        res.splits = attn__ocl_mla_step_splits(step);
        run_entry(o, c, &f, k, step, false, &res);
        run_entry(o, c, &f, k, step, true, &res);
    } else {
        res.err[0] = res.err[1] = INFINITY;
    }
    attn__ocl_mla_step_destroy(step);
    attn__ocl_mla_destroy(k);
    mla_fx_free(&f);
    return res;
}

enum {
    COV_FP32,
    COV_FP16,
    COV_BF16,
    COV_E4M3,
    COV_E5M2,
    COV_OTHER16,
    COV_MQA,
    COV_MHA,
    COV_MIXED,
    COV_NOMETA,
    COV_SPLIT,
    COV_LSE,
    COV_OFFSET,
    COV_MULTI,
    COV_DSV3,
    COV_COUNT
};
static const char *cov_names[COV_COUNT] = {"fp32",
                                           "fp16",
                                           "bf16",
                                           "fp8_e4m3",
                                           "fp8_e5m2",
                                           "16-bit cache of the other type",
                                           "mqa",
                                           "mha",
                                           "mixed batch",
                                           "no MLA metadata",
                                           "split-KV",
                                           "lse",
                                           "offsets",
                                           "multi-token decode",
                                           "512 + 64 with 16 and 128 heads"};
static int cov[COV_COUNT], cov_bs[4], cov_h16, cov_h128;

static void count_coverage(const config *c, const outcome *res)
{
    cov[c->dt == ATTN_DTYPE_FP32 ? COV_FP32 : c->dt == ATTN_DTYPE_FP16 ? COV_FP16 : COV_BF16]++;
    cov[COV_E4M3] += c->kve == ATTN_ELEM_FP8_E4M3;
    cov[COV_E5M2] += c->kve == ATTN_ELEM_FP8_E5M2;
    cov[COV_OTHER16] += c->kve != attn_dtype_elem(c->dt) && c->kve != ATTN_ELEM_FP8_E4M3 &&
                        c->kve != ATTN_ELEM_FP8_E5M2;
    cov[COV_MQA] += res->ran[0];
    cov[COV_MHA] += res->ran[1];
    cov[COV_MIXED] += c->nd > 0 && c->nd < c->nreq;
    cov[COV_NOMETA] += c->nd < 0;
    cov[COV_SPLIT] += res->splits > 1;
    cov[COV_LSE] += c->lse;
    cov[COV_OFFSET] += c->off > 0;
    for (int r = 0; r < (c->nd < 0 ? 0 : c->nd); r++)
        if (c->q[r] > 1) {
            cov[COV_MULTI]++;
            break;
        }
    if (dims[c->di].R == 512 && dims[c->di].P == 64) {
        cov_h16 += c->H == 16;
        cov_h128 += c->H == 128;
    }
    for (int i = 0; i < 4; i++)
        cov_bs[i] += c->bs == block_sizes[i];
}

/* The planted off-by-one: multi-token decodes and chunked prefills that the
 * real program passes and the mutant (keys j <= pos + 1 visible) fails. */
static void planted_off_by_one(attn__ocl *good)
{
    attn__ocl *bad = tocl_open_or_skip(NAME, "-DKD_CAUSAL_SLACK=1");
    config c = {.dt = ATTN_DTYPE_FP32,
                .kve = ATTN_ELEM_F32,
                .H = 16,
                .bs = 16,
                .di = 2,
                .nreq = 3,
                .nd = 1,
                .q = {3, 20, 7},
                .s = {70, 50, 33},
                .lse = true};
    outcome ok = run_config(good, &c, 0x0ff1u), mutant = run_config(bad, &c, 0x0ff1u);
    double tol = tol_for(&c);
    printf("planted off-by-one (KD_CAUSAL_SLACK=1): forward_mqa error %.3g (lse %.3g), "
           "forward_mha %.3g (lse %.3g); the real kernels %.3g / %.3g, tolerance %.1g\n",
           mutant.err[0], mutant.lerr[0], mutant.err[1], mutant.lerr[1], ok.err[0], ok.err[1], tol);
    CHECK_MSG(ok.ran[0] && ok.ran[1] && ok.err[0] <= tol && ok.err[1] <= tol && ok.lerr[0] <= tol &&
                  ok.lerr[1] <= tol,
              "the real kernels fail the control case");
    CHECK_MSG(mutant.ran[0] && mutant.err[0] > tol, "forward_mqa's off-by-one passed (%.3g)",
              mutant.err[0]);
    CHECK_MSG(mutant.ran[1] && mutant.err[1] > tol, "forward_mha's off-by-one passed (%.3g)",
              mutant.err[1]);
    attn__ocl_close(bad);
}

/* Bad input gets a status and changes nothing on the device. */
static void misuse(attn__ocl *o)
{
    attn_layer_params big = {.num_heads = 16,
                             .kv_lora_rank = KD_MLA_MAX_R + 8,
                             .qk_rope_head_dim = 64,
                             .dtype = ATTN_DTYPE_BF16};
    attn__ocl_mla *k = NULL;
    CHECK_STATUS(attn__ocl_mla_create(o, &big, &k), ATTN_UNSUPPORTED);
    CHECK(k == NULL);
    mla_fx f;
    int q[2] = {1, 10}, sl[2] = {40, 10};
    mla_fx_init(&f, 16, 64, 16, 32, 32, ATTN_DTYPE_FP32, ATTN_ELEM_F32, 16, 2, q, sl, 77);
    attn__ocl_mla_step *step = NULL;
    CHECK_OK(attn__ocl_mla_create(o, &f.lp, &k));
    CHECK_OK(attn__ocl_mla_step_create(o, &f.lp, &step));
    if (!k || !step) return;
    size_t rows = (size_t)f.T * 16, outb = rows * 64 * sizeof(float);
    attn__ocl_mem *qm = tocl_upload(o, f.q_abs, rows * 80 * sizeof(float));
    attn__ocl_mem *small = tocl_upload(o, NULL, 64);
    attn__ocl_mem *om = tocl_upload(o, NULL, outb);
    attn__ocl_mem *kvm = tocl_upload(o, f.cache, (size_t)f.nb * f.kv.stride_block * 4);
    unsigned char *fill = malloc(outb), *back = malloc(outb);
    memset(fill, 0xff, outb);
    CHECK_OK(attn__ocl_copy_in(o, om, 0, fill, outb));
    attn_kv_view view = f.kv;
    view.data = kvm;
    attn__ocl_mla_fwd fw = {
        .layer = &f.lp, .common = &f.cm, .step = step, .kv = &view, .q = qm, .out = om};
    CHECK_STATUS(attn__ocl_mla_mqa(k, &fw), ATTN_BAD_STATE); /* not built */
    CHECK_STATUS(attn__ocl_mla_step_build(step, &f.cm, 3, f.nb, NULL), ATTN_BAD_METADATA);
    CHECK_STATUS(attn__ocl_mla_step_build(step, &f.cm, 1, 2, NULL), ATTN_BAD_METADATA);
    CHECK_CONTAINS(attn_last_error(), "outside the pool");
    CHECK_OK(attn__ocl_mla_step_build(step, &f.cm, 1, f.nb, NULL));
    fw.q = small;
    CHECK_STATUS(attn__ocl_mla_mqa(k, &fw), ATTN_OUT_OF_RANGE);
    CHECK_CONTAINS(attn_last_error(), "q needs elements");
    fw.q = qm;
    attn_common_metadata other = f.cm;
    other.num_reqs = 1;
    other.num_actual_tokens = 1;
    fw.common = &other;
    CHECK_STATUS(attn__ocl_mla_mqa(k, &fw), ATTN_BAD_METADATA);
    CHECK_CONTAINS(attn_last_error(), "the step was built for");
    fw.common = &f.cm;
    CHECK_STATUS(attn__ocl_mla_mha(k, &fw), ATTN_NULL_ARGUMENT); /* no W_UK / W_UV */
    attn_layer_params dec = f.lp;
    dec.qk_nope_head_dim = dec.v_head_dim = 0;
    attn__ocl_mla *kd = NULL;
    CHECK_OK(attn__ocl_mla_create(o, &dec, &kd));
    fw.w_uk = fw.w_uv = qm;
    CHECK_STATUS(attn__ocl_mla_mha(kd, &fw), ATTN_INVALID_ARGUMENT);
    view.data = NULL;
    CHECK_STATUS(attn__ocl_mla_mqa(k, &fw), ATTN_NULL_ARGUMENT);
    CHECK_OK(attn__ocl_copy_out(o, back, om, 0, outb));
    CHECK_MSG(memcmp(back, fill, outb) == 0, "a refused call wrote the output");
    free(fill), free(back);
    attn__ocl_free(qm), attn__ocl_free(small), attn__ocl_free(om), attn__ocl_free(kvm);
    attn__ocl_mla_destroy(kd);
    attn__ocl_mla_destroy(k);
    attn__ocl_mla_step_destroy(step);
    mla_fx_free(&f);
}

int main(void)
{
    attn__ocl *o = tocl_open_or_skip(NAME, NULL);
    printf("device: %s\n", attn__ocl_device_name(o));
    trng g = {0x31a5eedu};
    double worst[2][2] = {{0, 0}, {0, 0}}, worst_lse = 0;
    int fails = 0, n = N_CONFIGS;
    const char *env = getenv("ATTN_TEST_OCL_CONFIGS");
    if (env && atoi(env) > 0) n = atoi(env);
    for (int ci = 0; ci < n; ci++) {
        config c;
        gen(&g, ci, &c);
        char desc[320];
        describe(&c, desc, sizeof desc);
        if (getenv("ATTN_TEST_VERBOSE")) fprintf(stderr, "config %d: %s\n", ci, desc);
        outcome r = run_config(o, &c, 1000u + (uint64_t)ci);
        double tol = tol_for(&c);
        int cls = c.dt != ATTN_DTYPE_FP32;
        for (int e = 0; e < 2; e++) {
            if (!(r.err[e] <= worst[cls][e])) worst[cls][e] = r.err[e];
            if (!(r.lerr[e] <= worst_lse)) worst_lse = r.lerr[e];
            if (!(r.err[e] <= tol) || !(r.lerr[e] <= tol)) {
                fails++;
                CHECK_MSG(false, "config %d %s: error %.3g (lse %.3g) > %.1g on %s (splits %d)", ci,
                          e ? "forward_mha" : "forward_mqa", r.err[e], r.lerr[e], tol, desc,
                          r.splits);
            }
        }
        CHECK_MSG(r.untouched, "config %d: an entry point wrote rows of the other's requests: %s",
                  ci, desc);
        count_coverage(&c, &r);
    }
    printf("%d configurations, %d over tolerance; worst error forward_mqa fp32 %.3g, 16-bit %.3g; "
           "forward_mha fp32 %.3g, 16-bit %.3g; lse %.3g\n",
           n, fails, worst[0][0], worst[1][0], worst[0][1], worst[1][1], worst_lse);
    printf("coverage:");
    for (int i = 0; i < COV_COUNT; i++) {
        int v = i == COV_DSV3 ? (cov_h16 > 0 && cov_h128 > 0) : cov[i];
        printf(" %s=%d", cov_names[i], v);
        if (n >= N_CONFIGS) CHECK_MSG(v > 0, "no configuration covered %s", cov_names[i]);
    }
    for (int i = 0; i < 4; i++) {
        printf(" bs%d=%d", block_sizes[i], cov_bs[i]);
        if (n >= N_CONFIGS) CHECK(cov_bs[i] > 0);
    }
    printf("\n");
    misuse(o);
    planted_off_by_one(o);
    attn__ocl_close(o);
    return attn_test_finish(NAME);
}
