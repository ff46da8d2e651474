/* OPENCL_ATTN's paged attention (src/backends/devkern/kd_attention.cl on
 * the OpenCL device, PoCL here) against REFERENCE on seeded random
 * configurations: head sizes 64/80/128/256 (and 32/96/192), block sizes
 * 16/32/128, GQA ratios 1/4/8 (and 2/16), head_size_v != head_size,
 * fp32/fp16/bf16 activations, KV caches auto (and a 16-bit cache of the
 * other 16-bit type) / fp8 e4m3 / e5m2 with per-tensor and per-head scales, the
 * FLASH_ATTN layout in HND and NHD stride order and TRITON_ATTN's, block
 * tables in shuffled order, decode / prefill / chunked-prefill / mixed
 * batches, decodes over 3k..8k keys with the split-KV merge (automatic and
 * forced split lengths), sliding window, soft-cap, sinks, ALiBi, LSE,
 * non-causal and cross attention over the cache, tensors at element
 * offsets inside their buffers.
 *
 * Tolerances are CPU_ATTN's conformance test's (max |out - ref| / max |ref|
 * over the whole output): fp32 1e-4, fp32 over an fp8 cache 1e-3, fp16/bf16
 * 2e-2; LSE absolute error of the same size. Output and LSE buffers start
 * as NaN: every element must be written.
 *
 * Then the planted off-by-one: the same kernels built with
 * -DKD_CAUSAL_SLACK=1 (the causal bound moved by one key) must fail the
 * comparison on a causal prefill that the real program passes. Exit 77
 * without an OpenCL device. */
#include <stdio.h>

#include "backends/reference/reference.h"
#include "ocl_testutil.h"

#ifdef ATTN_SANITIZED
#define COST_CAP 3.0e6
#else
#define COST_CAP 6.0e6
#endif
#define N_CONFIGS 216
#define MAX_REQ   6
#ifndef NAME /* test_cuda_conformance runs this file under its own name */
#define NAME "test_opencl_conformance"
#endif

static const int head_sizes[] = {64, 80, 128, 256};
static const int extra_heads[] = {32, 96, 192};
static const int block_sizes[] = {16, 32, 128};
static const int group_sizes[] = {1, 4, 8};

typedef struct {
    attn_dtype dtype;
    attn_elem kv_elem;
    bool per_head_scale;
    int D, Dv, bs, kvh, group, layout;
    attn_attn_type type;
    bool causal, lse, sinks, softcap, alibi;
    int window;
    int nreq, qlen[MAX_REQ], kvlen[MAX_REQ];
    int split_len; /* 0: the automatic plan */
    int64_t off;   /* element offset of q, out and lse in their buffers */
} config;

enum {
    COV_FP32,
    COV_FP16,
    COV_BF16,
    COV_E4M3,
    COV_E5M2,
    COV_PERHEAD,
    COV_HND,
    COV_NHD,
    COV_TRITON,
    COV_CROSS,
    COV_ENCODER,
    COV_NONCAUSAL,
    COV_WINDOW,
    COV_SINK,
    COV_SOFTCAP,
    COV_ALIBI,
    COV_LSE,
    COV_MIXED,
    COV_SPLIT,
    COV_LONG,
    COV_OFFSET,
    COV_DV,
    COV_KV_OTHER,
    COV_COUNT
};
static const char *cov_names[COV_COUNT] = {"fp32",
                                           "fp16",
                                           "bf16",
                                           "fp8_e4m3",
                                           "fp8_e5m2",
                                           "per-head scales",
                                           "flash-HND",
                                           "flash-NHD",
                                           "triton",
                                           "cross",
                                           "encoder",
                                           "non-causal decoder",
                                           "window",
                                           "sinks",
                                           "soft-cap",
                                           "alibi",
                                           "lse",
                                           "mixed batch",
                                           "split-KV",
                                           "context >= 3k",
                                           "offsets",
                                           "head_size_v != head_size",
                                           "16/32-bit cache of another element"};
static int cov[COV_COUNT], cov_D[4], cov_bs[3], cov_g[3];

static double cost_of(const config *c)
{
    double x = 0;
    for (int r = 0; r < c->nreq; r++)
        x += (double)c->qlen[r] * c->kvlen[r] * c->kvh * c->group * (double)(c->D + c->Dv);
    return x;
}

static void gen_requests(trng *g, config *c, bool longmode)
{
    c->nreq = longmode ? 1 + trng_int(g, 2) : 1 + trng_int(g, MAX_REQ);
    for (int r = 0; r < c->nreq; r++) {
        int kind = longmode ? 0 : trng_int(g, 3); /* decode, prefill, chunked prefill */
        int kv = longmode ? 3000 + trng_int(g, 5193) : 1 + trng_int(g, 600);
        int q = kind == 0 ? 1 + (trng_int(g, 4) == 0 ? trng_int(g, 4) : 0)
                          : (kind == 1 ? kv : 1 + trng_int(g, 80));
        if (q > kv) q = kv;
        if (c->type == ATTN_TYPE_ENCODER) {
            q = 1 + trng_int(g, 120);
            kv = q;
        } else if (c->type == ATTN_TYPE_ENCODER_DECODER) {
            q = 1 + trng_int(g, 24);
            kv = trng_int(g, 12) == 0 ? 0 : 1 + trng_int(g, 600);
        }
        c->qlen[r] = q;
        c->kvlen[r] = kv;
    }
}

static void gen(trng *g, int idx, config *c)
{
    memset(c, 0, sizeof *c);
    int dt = trng_int(g, 3);
    c->dtype = dt == 0 ? ATTN_DTYPE_FP32 : dt == 1 ? ATTN_DTYPE_FP16 : ATTN_DTYPE_BF16;
    int kvk = trng_int(g, 5);
    c->kv_elem =
        kvk <= 2 ? attn_dtype_elem(c->dtype) : (kvk == 3 ? ATTN_ELEM_FP8_E4M3 : ATTN_ELEM_FP8_E5M2);
    if (kvk == 2 && trng_int(g, 3) == 0) /* a 16/32-bit cache of another element */
        c->kv_elem = c->dtype == ATTN_DTYPE_BF16 ? ATTN_ELEM_F16 : ATTN_ELEM_BF16;
    c->per_head_scale = attn__elem_is_fp8(c->kv_elem) && trng_int(g, 2);
    /* every (head size, block size, GQA ratio) of the matrix, then extras */
    c->D = head_sizes[idx % 4];
    c->bs = block_sizes[(idx / 4) % 3];
    c->group = group_sizes[(idx / 12) % 3];
    if (idx % 9 == 8) c->D = extra_heads[(idx / 9) % 3];
    if (idx % 17 == 16) c->group = trng_int(g, 2) ? 2 : 16;
    c->Dv = idx % 13 == 12 ? c->D / 2 : c->D; /* head_size_v != head_size */
    static const int kvhs[] = {1, 1, 2, 4};
    c->kvh = kvhs[trng_int(g, 4)];
    c->layout = trng_int(g, TLAYOUT_COUNT);
    int ty = trng_int(g, 12);
    c->type =
        ty < 10 ? ATTN_TYPE_DECODER : (ty == 10 ? ATTN_TYPE_ENCODER : ATTN_TYPE_ENCODER_DECODER);
    c->causal = c->type == ATTN_TYPE_DECODER && trng_int(g, 8) != 0;
    c->lse = trng_int(g, 2);
    c->window = trng_int(g, 5) == 0 ? 1 + trng_int(g, 300) : 0;
    c->sinks = trng_int(g, 4) == 0;
    c->softcap = trng_int(g, 6) == 0;
    c->alibi = trng_int(g, 6) == 0;
    c->off = trng_int(g, 4) == 0 ? 1 + trng_int(g, 200) : 0;
    bool longmode = c->type == ATTN_TYPE_DECODER && idx % 6 == 5;
    gen_requests(g, c, longmode);
    bool decodes = true;
    for (int r = 0; r < c->nreq; r++)
        decodes &= c->qlen[r] <= 4;
    if (decodes && trng_int(g, 2)) {
        static const int lens[] = {64, 100, 257, 1000};
        c->split_len = lens[trng_int(g, 4)];
    }
    /* cheaper: shorter prefills (keeping their context), fewer KV heads,
     * then shorter contexts; head size, block size and GQA ratio stay */
    while (cost_of(c) > COST_CAP) {
        int longest = 0;
        for (int r = 1; r < c->nreq; r++)
            if (c->qlen[r] * (int64_t)c->kvlen[r] > c->qlen[longest] * (int64_t)c->kvlen[longest])
                longest = r;
        int *q = &c->qlen[longest], *kv = &c->kvlen[longest];
        if (*q > 8) {
            int nq = (*q + 1) / 2;
            if (c->type == ATTN_TYPE_DECODER) *kv -= *q - nq;
            if (c->type == ATTN_TYPE_ENCODER) *kv = nq;
            *q = nq;
        } else if (c->kvh > 1) {
            c->kvh /= 2;
        } else if (*kv > 1) {
            *kv = (*kv + 1) / 2;
            if (*q > *kv && c->type != ATTN_TYPE_ENCODER_DECODER) *q = *kv;
        } else {
            break;
        }
    }
}

static void describe(const config *c, char *buf, size_t n)
{
    int o = snprintf(
        buf, n,
        "%s kv=%s%s D=%d/%d bs=%d heads=%d/%d %s %s%s win=%d%s%s%s%s split=%d off=%lld "
        "reqs=[",
        attn_dtype_name(c->dtype), attn_elem_name(c->kv_elem),
        c->per_head_scale ? "(per-head)" : "", c->D, c->Dv, c->bs, c->kvh * c->group, c->kvh,
        tlayout_names[c->layout], attn_attn_type_name(c->type), c->causal ? "" : " non-causal",
        c->window, c->sinks ? " sinks" : "", c->softcap ? " softcap" : "", c->alibi ? " alibi" : "",
        c->lse ? " lse" : "", c->split_len, (long long)c->off);
    for (int r = 0; r < c->nreq && o < (int)n; r++)
        o += snprintf(buf + o, n - (size_t)o, "%s%d/%d", r ? " " : "", c->qlen[r], c->kvlen[r]);
    if (o < (int)n) snprintf(buf + o, n - (size_t)o, "]");
}

static double tol_for(const config *c)
{
    if (c->dtype != ATTN_DTYPE_FP32) return 2e-2;
    return attn__elem_is_fp8(c->kv_elem) ? 1e-3 : 1e-4;
}

/* Everything one configuration needs on the host. */
typedef struct {
    tcache cache;
    int32_t qsl[MAX_REQ + 1], seq[MAX_REQ], enc[MAX_REQ];
    int32_t *bt, *perm;
    void *q, *ref;
    float *ref_lse, sinks[256], slopes[256];
    attn_layer_params lp;
    attn_common_metadata cm;
    int tokens, nblocks;
} fixture;

static void fixture_make(trng *g, const config *c, fixture *f)
{
    memset(f, 0, sizeof *f);
    int H = c->kvh * c->group, D = c->D, maxb = 1, maxq = 0, maxs = 0;
    attn_elem qe = attn_dtype_elem(c->dtype);
    for (int r = 0; r < c->nreq; r++) {
        f->tokens += c->qlen[r];
        f->qsl[r + 1] = f->tokens;
        int nb = (c->kvlen[r] + c->bs - 1) / c->bs;
        if (nb > maxb) maxb = nb;
        if (c->qlen[r] > maxq) maxq = c->qlen[r];
        if (c->kvlen[r] > maxs) maxs = c->kvlen[r];
        f->enc[r] = c->kvlen[r];
        f->seq[r] = c->type == ATTN_TYPE_ENCODER_DECODER ? c->qlen[r] : c->kvlen[r];
        f->nblocks += nb;
    }
    f->nblocks += 3;
    /* a shuffled pool: block ids in random order */
    f->perm = malloc(sizeof(int32_t) * (size_t)f->nblocks);
    for (int i = 0; i < f->nblocks; i++)
        f->perm[i] = i;
    for (int i = f->nblocks - 1; i > 0; i--) {
        int k = trng_int(g, i + 1);
        int32_t t = f->perm[i];
        f->perm[i] = f->perm[k];
        f->perm[k] = t;
    }
    f->bt = calloc((size_t)(c->nreq * maxb), sizeof(int32_t));
    int next = 0;
    for (int r = 0; r < c->nreq; r++)
        for (int b = 0; b < (c->kvlen[r] + c->bs - 1) / c->bs; b++)
            f->bt[r * maxb + b] = f->perm[next++];
    tcache_init_layout(&f->cache, c->kv_elem, f->nblocks, c->bs, c->kvh, D, c->Dv, c->layout);
    float amax = 1.0f + trng_unif(g, 0.0f, 3.0f);
    if (attn__elem_is_fp8(c->kv_elem)) {
        float base = amax / (c->kv_elem == ATTN_ELEM_FP8_E4M3 ? 300.0f : 20000.0f);
        f->cache.view.k_scale = base * trng_unif(g, 0.7f, 1.3f);
        f->cache.view.v_scale = base * trng_unif(g, 0.7f, 1.3f);
        if (c->per_head_scale) {
            for (int h = 0; h < c->kvh; h++) {
                f->cache.kscale_ph[h] = base * trng_unif(g, 0.5f, 1.5f);
                f->cache.vscale_ph[h] = base * trng_unif(g, 0.5f, 1.5f);
            }
            f->cache.view.k_scale_per_head = f->cache.kscale_ph;
            f->cache.view.v_scale_per_head = f->cache.vscale_ph;
        }
    }
    float row[256];
    for (int b = 0; b < f->nblocks; b++)
        for (int o = 0; o < c->bs; o++)
            for (int h = 0; h < c->kvh; h++)
                for (int v = 0; v < 2; v++) {
                    for (int d = 0; d < (v ? c->Dv : D); d++)
                        row[d] = trng_normal(g) * amax / 2.5f;
                    tcache_put(&f->cache, b, o, h, v, row);
                }
    size_t qn = (size_t)f->tokens * H * D, qes = attn_elem_size(qe);
    f->q = malloc(qn * qes + 1);
    float qmag = trng_unif(g, 0.3f, 2.0f) / amax;
    for (size_t i = 0; i < qn; i++)
        attn__store_elem(f->q, qe, i, trng_normal(g) * qmag);
    for (int h = 0; h < H; h++) {
        f->sinks[h] = trng_unif(g, -2.0f, 4.0f);
        f->slopes[h] = exp2f(-8.0f * (float)(h + 1) / (float)H) * 0.25f;
    }
    f->lp = (attn_layer_params){.num_heads = H,
                                .num_kv_heads = c->kvh,
                                .head_size = D,
                                .head_size_v = c->Dv,
                                .scale = trng_int(g, 2) ? 0.0f : trng_unif(g, 0.05f, 0.3f),
                                .logits_soft_cap = c->softcap ? trng_unif(g, 2.0f, 30.0f) : 0.0f,
                                .sliding_window = c->window,
                                .sinks = c->sinks ? f->sinks : NULL,
                                .alibi_slopes = c->alibi ? f->slopes : NULL,
                                .attn_type = c->type,
                                .dtype = c->dtype,
                                .kv_cache_dtype = ATTN_KV_AUTO};
    f->cm = (attn_common_metadata){.query_start_loc = f->qsl,
                                   .seq_lens = f->seq,
                                   .num_reqs = c->nreq,
                                   .num_actual_tokens = f->tokens,
                                   .max_query_len = maxq,
                                   .max_seq_len = maxs,
                                   .block_table = f->bt,
                                   .block_table_stride = maxb,
                                   .causal = c->causal,
                                   .block_size = c->bs,
                                   .encoder_seq_lens =
                                       c->type == ATTN_TYPE_ENCODER_DECODER ? f->enc : NULL};
    f->ref = calloc((size_t)f->tokens * H * c->Dv + 1, qes);
    f->ref_lse = malloc(sizeof(float) * ((size_t)f->tokens * H + 1));
    attn_forward_args a = {.layer = &f->lp,
                           .common = &f->cm,
                           .q = f->q,
                           .kv = &f->cache.view,
                           .out = f->ref,
                           .lse = f->ref_lse};
    CHECK_OK(attn__reference_forward(&a));
}

static void fixture_free(fixture *f)
{
    free(f->q);
    free(f->ref);
    free(f->ref_lse);
    free(f->bt);
    free(f->perm);
    tcache_free(&f->cache);
}

typedef struct {
    double err, lerr;
    int splits;
    bool ok;
} outcome;

/* One forward on the device; errors against the fixture's REFERENCE run. */
static outcome run_device(attn__ocl *o, const config *c, fixture *f)
{
    outcome res = {.err = INFINITY, .lerr = INFINITY};
    int H = f->lp.num_heads;
    attn_elem qe = attn_dtype_elem(c->dtype);
    size_t qes = attn_elem_size(qe), rows = (size_t)f->tokens * H, qn = rows * c->D,
           on = rows * c->Dv;
    size_t off = (size_t)c->off;
    attn__ocl_mem *kvm = tocl_upload(o, f->cache.data, tcache_bytes(&f->cache));
    attn__ocl_mem *qm = tocl_upload(o, NULL, (off + qn) * qes + 4);
    attn__ocl_mem *om = tocl_upload(o, NULL, (off + on) * qes + 4);
    attn__ocl_mem *lm = tocl_upload(o, NULL, (off + rows) * sizeof(float) + 4);
    unsigned char *nan = malloc((off + on) * qes + 4 + (off + rows) * sizeof(float));
    memset(nan, 0xff, (off + on) * qes + 4 + (off + rows) * sizeof(float));
    if (qn) CHECK_OK(attn__ocl_copy_in(o, qm, off * qes, f->q, qn * qes));
    CHECK_OK(attn__ocl_copy_in(o, om, 0, nan, (off + on) * qes));
    CHECK_OK(attn__ocl_copy_in(o, lm, 0, nan, (off + rows) * sizeof(float)));
    attn_kv_view view = f->cache.view;
    view.data = kvm;
    attn__ocl_step *step = NULL;
    attn__ocl_kernel *kern = NULL;
    CHECK_OK(attn__ocl_kernel_create(o, &f->lp, &kern));
    CHECK_OK(attn__ocl_step_create(o, &f->lp, &step));
    attn__ocl_plan plan = {.split_len = c->split_len};
    attn_status st = attn__ocl_step_build(step, &f->cm, f->nblocks, &plan);
    CHECK_OK(st);
    res.splits = attn__ocl_step_splits(step);
    attn__ocl_fwd fw = {.layer = &f->lp,
                        .common = &f->cm,
                        .step = step,
                        .kv = &view,
                        .q = qm,
                        .q_offset = (int64_t)off,
                        .out = om,
                        .out_offset = (int64_t)off,
                        .lse = c->lse ? lm : NULL,
                        .lse_offset = (int64_t)off};
    if (st == ATTN_OK) st = attn__ocl_forward(kern, &fw);
    CHECK_MSG(st == ATTN_OK, "forward: %s (%s)", attn_status_name(st), attn_last_error());
    void *out = malloc(on * qes + 1);
    float *lse = malloc(sizeof(float) * (rows + 1));
    if (st == ATTN_OK && on) {
        CHECK_OK(attn__ocl_copy_out(o, out, om, off * qes, on * qes));
        CHECK_OK(attn__ocl_copy_out(o, lse, lm, off * sizeof(float), rows * sizeof(float)));
        res.err = trel_err(out, f->ref, qe, on);
        res.lerr = 0;
        for (size_t i = 0; c->lse && i < rows; i++) {
            double d = isinf(f->ref_lse[i]) ? (lse[i] == f->ref_lse[i] ? 0 : INFINITY)
                                            : fabs(lse[i] - f->ref_lse[i]);
            if (!(d <= res.lerr)) res.lerr = isnan(d) ? INFINITY : d;
        }
        res.ok = true;
    }
    free(out);
    free(lse);
    free(nan);
    attn__ocl_step_destroy(step);
    attn__ocl_kernel_destroy(kern);
    attn__ocl_free(kvm);
    attn__ocl_free(qm);
    attn__ocl_free(om);
    attn__ocl_free(lm);
    return res;
}

static void count_coverage(const config *c, const outcome *res)
{
    cov[c->dtype == ATTN_DTYPE_FP32   ? COV_FP32
        : c->dtype == ATTN_DTYPE_FP16 ? COV_FP16
                                      : COV_BF16]++;
    cov[COV_E4M3] += c->kv_elem == ATTN_ELEM_FP8_E4M3;
    cov[COV_E5M2] += c->kv_elem == ATTN_ELEM_FP8_E5M2;
    cov[COV_PERHEAD] += c->per_head_scale;
    cov[COV_HND + c->layout]++;
    cov[COV_CROSS] += c->type == ATTN_TYPE_ENCODER_DECODER;
    cov[COV_ENCODER] += c->type == ATTN_TYPE_ENCODER;
    cov[COV_NONCAUSAL] += c->type == ATTN_TYPE_DECODER && !c->causal;
    cov[COV_WINDOW] += c->window > 0;
    cov[COV_SINK] += c->sinks;
    cov[COV_SOFTCAP] += c->softcap;
    cov[COV_ALIBI] += c->alibi;
    cov[COV_LSE] += c->lse;
    bool dec = false, pre = false;
    int maxkv = 0;
    for (int r = 0; r < c->nreq; r++) {
        dec |= c->qlen[r] <= 4;
        pre |= c->qlen[r] > 4;
        if (c->kvlen[r] > maxkv) maxkv = c->kvlen[r];
    }
    cov[COV_MIXED] += dec && pre;
    cov[COV_SPLIT] += res->splits > 1;
    cov[COV_LONG] += maxkv >= 3000;
    cov[COV_OFFSET] += c->off > 0;
    cov[COV_DV] += c->Dv != c->D;
    cov[COV_KV_OTHER] += !attn__elem_is_fp8(c->kv_elem) && c->kv_elem != attn_dtype_elem(c->dtype);
    for (int i = 0; i < 4; i++)
        cov_D[i] += c->D == head_sizes[i];
    for (int i = 0; i < 3; i++) {
        cov_bs[i] += c->bs == block_sizes[i];
        cov_g[i] += c->group == group_sizes[i];
    }
}

/* The planted off-by-one: a causal prefill over a chunked context that the
 * real program passes and the mutant (keys j <= pos + 1 visible) fails. */
static void planted_off_by_one(attn__ocl *good)
{
    attn__ocl *bad = tocl_open_or_skip(NAME, "-DKD_CAUSAL_SLACK=1");
    trng g = {0x0ff1u};
    config c = {.dtype = ATTN_DTYPE_FP32,
                .kv_elem = ATTN_ELEM_F32,
                .D = 64,
                .Dv = 64,
                .bs = 16,
                .kvh = 2,
                .group = 4,
                .type = ATTN_TYPE_DECODER,
                .causal = true,
                .lse = true,
                .nreq = 2,
                .qlen = {40, 17},
                .kvlen = {40, 90}};
    fixture f;
    fixture_make(&g, &c, &f);
    outcome ok = run_device(good, &c, &f), mutant = run_device(bad, &c, &f);
    double tol = tol_for(&c);
    printf("planted off-by-one (KD_CAUSAL_SLACK=1): error %.3g (lse %.3g) vs %.3g (lse %.3g) "
           "for the real kernels, tolerance %.1g\n",
           mutant.err, mutant.lerr, ok.err, ok.lerr, tol);
    CHECK_MSG(ok.ok && ok.err <= tol && ok.lerr <= tol, "the real kernels fail the control case");
    CHECK_MSG(mutant.ok && mutant.err > tol, "the off-by-one passed the comparison (error %.3g)",
              mutant.err);
    fixture_free(&f);
    attn__ocl_close(bad);
}

int main(void)
{
    attn__ocl *o = tocl_open_or_skip(NAME, NULL);
    printf("device: %s\n", attn__ocl_device_name(o));
    trng g = {0x5eed0c1u};
    double worst[3] = {0, 0, 0}, worst_lse = 0;
    char worst_cfg[520] = "";
    int fails = 0, n = N_CONFIGS;
    const char *env = getenv("ATTN_TEST_OCL_CONFIGS");
    if (env && atoi(env) > 0) n = atoi(env);
    for (int ci = 0; ci < n; ci++) {
        config c;
        gen(&g, ci, &c);
        char desc[480];
        describe(&c, desc, sizeof desc);
        if (getenv("ATTN_TEST_VERBOSE")) fprintf(stderr, "config %d: %s\n", ci, desc);
        fixture f;
        fixture_make(&g, &c, &f);
        outcome r = run_device(o, &c, &f);
        double tol = tol_for(&c);
        int cls = c.dtype != ATTN_DTYPE_FP32 ? 2 : attn__elem_is_fp8(c.kv_elem) ? 1 : 0;
        if (!(r.err <= worst[cls])) worst[cls] = r.err;
        if (!(r.lerr <= worst_lse)) worst_lse = r.lerr;
        if (!(r.err <= tol) || !(r.lerr <= tol)) {
            fails++;
            snprintf(worst_cfg, sizeof worst_cfg, "#%d %s", ci, desc);
            CHECK_MSG(false, "config %d: error %.3g (lse %.3g) > %.1g on %s (splits %d)", ci, r.err,
                      r.lerr, tol, desc, r.splits);
        }
        count_coverage(&c, &r);
        fixture_free(&f);
    }
    printf("%d configurations, %d over tolerance; worst error fp32 %.3g, fp32+fp8 KV %.3g, "
           "fp16/bf16 %.3g, lse %.3g%s%s\n",
           n, fails, worst[0], worst[1], worst[2], worst_lse, fails ? "; last failure " : "",
           worst_cfg);
    printf("coverage:");
    for (int i = 0; i < COV_COUNT; i++) {
        printf(" %s=%d", cov_names[i], cov[i]);
        if (n >= N_CONFIGS) CHECK_MSG(cov[i] > 0, "no configuration covered %s", cov_names[i]);
    }
    for (int i = 0; i < 4; i++) {
        printf(" D%d=%d", head_sizes[i], cov_D[i]);
        if (n >= N_CONFIGS) CHECK(cov_D[i] > 0);
    }
    for (int i = 0; i < 3; i++) {
        printf(" bs%d=%d gqa%d=%d", block_sizes[i], cov_bs[i], group_sizes[i], cov_g[i]);
        if (n >= N_CONFIGS) CHECK(cov_bs[i] > 0 && cov_g[i] > 0);
    }
    printf("\n");
    planted_off_by_one(o);
    attn__ocl_close(o);
    return attn_test_finish(NAME);
}
