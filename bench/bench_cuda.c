/* The CUDA module's kernels on an NVIDIA GPU against the device's limits
 * (issue 25's targets, never asserted by a test):
 *   copy     the device-to-device copy bandwidth (bytes read + written per
 *            second over a 1 GiB copy): decode's yardstick;
 *   decode   paged attention, B = 64, context 4096, 32 query / 8 KV heads,
 *            head 128, bf16, blocks of 16: KV bytes read per second and the
 *            fraction of the copy bandwidth (target >= 0.80);
 *   prefill  one 2048-token causal prefill, same heads: FLOP/s and the
 *            fraction of the bf16 tensor-core peak (target >= 0.40; the peak
 *            is SMs x boost clock x the dense bf16 FLOP per clock and SM of
 *            the capability: 2048 on 8.0, 1024 on 8.6/8.7/8.9, 4096 on 9.0;
 *            other capabilities print no fraction);
 *   mla      TRITON_MLA decode (forward_mqa), B = 64, context 4096, 128
 *            heads, latent 512 + 64, bf16: latent bytes per second against
 *            the copy bandwidth.
 * Each figure is the median of --repeat runs after one warm-up, timed on the
 * host around a stream synchronisation.
 *
 * usage: bench_cuda [--device N] [--repeat N] [--only copy|decode|prefill|mla] [--json]
 * Exit 77 without a driver or device (and where libattn_cuda.so is not built). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ATTN_HAVE_CUDA_MODULE
int main(void)
{
    printf("bench_cuda: libattn_cuda.so is not built (nvcc was not found when configuring)\n");
    return 77;
}
#else
#include "attn/attn.h"
#include "backends/cuda/cuda_rt.h"

typedef struct {
    int device, repeat;
    const char *only;
    bool json;
} args_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bool ok(attn_status st, const char *what)
{
    if (st == ATTN_OK) return true;
    fprintf(stderr, "bench_cuda: %s: %s (%s)\n", what, attn_status_name(st),
            attn__cuda_last_error());
    return false;
}

/* Dense bf16 tensor-core FLOP per clock and SM; 0 = unknown. */
static double bf16_flops_per_clock(int cc)
{
    switch (cc) {
    case 80: return 2048;
    case 86:
    case 87:
    case 89: return 1024;
    case 90: return 4096;
    default: return 0;
    }
}

typedef struct {
    attn__cuda *c;
    int repeat;
    double seconds; /* median */
} timing;

/* Median seconds of fn(ctx) over repeat runs (after a warm-up). */
static bool time_it(timing *t, bool (*fn)(void *), void *ctx)
{
    double *v = calloc((size_t)t->repeat, sizeof(double));
    if (!v || !fn(ctx) || !ok(attn__cuda_sync(t->c), "sync")) {
        free(v);
        return false;
    }
    for (int i = 0; i < t->repeat; i++) {
        double t0 = now_s();
        if (!fn(ctx) || !ok(attn__cuda_sync(t->c), "sync")) {
            free(v);
            return false;
        }
        v[i] = now_s() - t0;
    }
    qsort(v, (size_t)t->repeat, sizeof(double), cmp_double);
    t->seconds = v[t->repeat / 2];
    free(v);
    return true;
}

/* ---- copy ------------------------------------------------------------------------- */

typedef struct {
    attn__cuda *c;
    attn__cuda_mem *a, *b;
    size_t bytes;
} copy_ctx;

static bool copy_once(void *p)
{
    copy_ctx *x = p;
    return ok(attn__cuda_copy_dd(x->c, x->b, x->a, x->bytes), "copy");
}

/* ---- paged attention ---------------------------------------------------------------- */

typedef struct {
    attn_layer_params lp;
    attn_common_metadata cm;
    int32_t *qsl, *seq, *bt;
    attn_kv_view view;
    attn__cuda_mem *kv, *q, *out;
    attn__cuda_step *step;
    attn__cuda_kernel *k;
    attn__cuda_fwd fw;
} attn_case;

static bool attn_once(void *p)
{
    attn_case *x = p;
    return ok(attn__cuda_forward(x->k, &x->fw), "forward");
}

/* B requests of qlen queries over ctx keys; FLASH_ATTN's NHD cache in
 * blocks of bs, blocks in a scattered order. */
static bool attn_make(attn__cuda *c, attn_case *x, int B, int qlen, int ctx, int H, int KVH, int D,
                      int bs)
{
    memset(x, 0, sizeof *x);
    int nb = (ctx + bs - 1) / bs, blocks = B * nb, T = B * qlen;
    x->qsl = calloc((size_t)B + 1, sizeof(int32_t));
    x->seq = calloc((size_t)B, sizeof(int32_t));
    x->bt = calloc((size_t)blocks, sizeof(int32_t));
    if (!x->qsl || !x->seq || !x->bt) return false;
    for (int r = 0; r < B; r++) {
        x->qsl[r + 1] = x->qsl[r] + qlen;
        x->seq[r] = ctx;
        for (int b = 0; b < nb; b++) /* a stride coprime with the pool: scattered blocks */
            x->bt[r * nb + b] = (int32_t)(((int64_t)(r * nb + b) * 7919) % blocks);
    }
    x->lp = (attn_layer_params){.num_heads = H,
                                .num_kv_heads = KVH,
                                .head_size = D,
                                .attn_type = ATTN_TYPE_DECODER,
                                .dtype = ATTN_DTYPE_BF16,
                                .kv_cache_dtype = ATTN_KV_AUTO};
    x->cm = (attn_common_metadata){.query_start_loc = x->qsl,
                                   .seq_lens = x->seq,
                                   .num_reqs = B,
                                   .num_actual_tokens = T,
                                   .max_query_len = qlen,
                                   .max_seq_len = ctx,
                                   .block_table = x->bt,
                                   .block_table_stride = nb,
                                   .causal = true,
                                   .block_size = bs};
    size_t per = (size_t)blocks * bs * KVH * D;
    x->view = (attn_kv_view){.elem = ATTN_ELEM_BF16,
                             .num_blocks = blocks,
                             .block_size = bs,
                             .num_kv_heads = KVH,
                             .head_size = D,
                             .head_size_v = D,
                             .v_offset = (int64_t)per,
                             .stride_block = (int64_t)bs * KVH * D,
                             .stride_token = (int64_t)KVH * D,
                             .stride_head = D,
                             .k_scale = 1,
                             .v_scale = 1};
    if (!ok(attn__cuda_alloc(c, 2 * per * 2, &x->kv), "KV cache") ||
        !ok(attn__cuda_alloc(c, (size_t)T * H * D * 2, &x->q), "q") ||
        !ok(attn__cuda_alloc(c, (size_t)T * H * D * 2, &x->out), "out") ||
        !ok(attn__cuda_kernel_create(c, &x->lp, &x->k), "kernel") ||
        !ok(attn__cuda_step_create(c, &x->lp, &x->step), "step") ||
        !ok(attn__cuda_step_build(x->step, &x->cm, blocks, NULL), "step build"))
        return false;
    x->view.data = x->kv;
    x->fw = (attn__cuda_fwd){.layer = &x->lp,
                             .common = &x->cm,
                             .step = x->step,
                             .kv = &x->view,
                             .q = x->q,
                             .out = x->out};
    return true;
}

static void attn_free(attn_case *x)
{
    attn__cuda_step_destroy(x->step);
    attn__cuda_kernel_destroy(x->k);
    attn__cuda_free(x->kv);
    attn__cuda_free(x->q);
    attn__cuda_free(x->out);
    free(x->qsl);
    free(x->seq);
    free(x->bt);
}

/* ---- MLA decode ---------------------------------------------------------------------- */

typedef struct {
    attn_case a; /* metadata and the latent cache (one "KV head" of 576) */
    attn__cuda_mla *k;
    attn__cuda_mla_step *step;
    attn__cuda_mla_fwd fw;
} mla_case;

static bool mla_once(void *p)
{
    mla_case *x = p;
    return ok(attn__cuda_mla_mqa(x->k, &x->fw), "forward_mqa");
}

static bool mla_make(attn__cuda *c, mla_case *x, int B, int ctx)
{
    memset(x, 0, sizeof *x);
    int H = 128, R = 512, P = 64, bs = 64, nb = (ctx + bs - 1) / bs, blocks = B * nb;
    attn_case *a = &x->a;
    a->qsl = calloc((size_t)B + 1, sizeof(int32_t));
    a->seq = calloc((size_t)B, sizeof(int32_t));
    a->bt = calloc((size_t)blocks, sizeof(int32_t));
    if (!a->qsl || !a->seq || !a->bt) return false;
    for (int r = 0; r < B; r++) {
        a->qsl[r + 1] = r + 1;
        a->seq[r] = ctx;
        for (int b = 0; b < nb; b++)
            a->bt[r * nb + b] = (int32_t)(((int64_t)(r * nb + b) * 7919) % blocks);
    }
    a->lp = (attn_layer_params){.num_heads = H,
                                .num_kv_heads = 1,
                                .head_size = R + P,
                                .dtype = ATTN_DTYPE_BF16,
                                .kv_lora_rank = R,
                                .qk_rope_head_dim = P,
                                .qk_nope_head_dim = 128,
                                .v_head_dim = 128};
    a->cm = (attn_common_metadata){.query_start_loc = a->qsl,
                                   .seq_lens = a->seq,
                                   .num_reqs = B,
                                   .num_actual_tokens = B,
                                   .max_query_len = 1,
                                   .max_seq_len = ctx,
                                   .block_table = a->bt,
                                   .block_table_stride = nb,
                                   .causal = true,
                                   .block_size = bs};
    a->view = (attn_kv_view){.elem = ATTN_ELEM_BF16,
                             .num_blocks = blocks,
                             .block_size = bs,
                             .num_kv_heads = 1,
                             .head_size = R + P,
                             .head_size_v = R,
                             .stride_block = (int64_t)bs * (R + P),
                             .stride_token = R + P,
                             .stride_head = R + P,
                             .k_scale = 1,
                             .v_scale = 1};
    if (!ok(attn__cuda_alloc(c, (size_t)blocks * bs * (R + P) * 2, &a->kv), "latent cache") ||
        !ok(attn__cuda_alloc(c, (size_t)B * H * (R + P) * 2, &a->q), "q") ||
        !ok(attn__cuda_alloc(c, (size_t)B * H * R * 2, &a->out), "out") ||
        !ok(attn__cuda_mla_create(c, &a->lp, &x->k), "MLA kernel") ||
        !ok(attn__cuda_mla_step_create(c, &a->lp, &x->step), "MLA step") ||
        !ok(attn__cuda_mla_step_build(x->step, &a->cm, B, blocks, NULL), "MLA step build"))
        return false;
    a->view.data = a->kv;
    x->fw = (attn__cuda_mla_fwd){.layer = &a->lp,
                                 .common = &a->cm,
                                 .step = x->step,
                                 .kv = &a->view,
                                 .q = a->q,
                                 .out = a->out};
    return true;
}

/* ---- main ------------------------------------------------------------------------------ */

static int usage(bool help)
{
    fprintf(help ? stdout : stderr,
            "usage: bench_cuda [--device N] [--repeat N] [--only copy|decode|prefill|mla] "
            "[--json]\n");
    return help ? 0 : 2;
}

static bool want(const args_t *a, const char *what)
{
    return !a->only || !strcmp(a->only, what) || (strcmp(what, "copy") == 0);
}

int main(int argc, char **argv)
{
    args_t a = {.repeat = 10};
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (!strcmp(argv[i], "--device") && more)
            a.device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && more)
            a.repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && more)
            a.only = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            a.json = true;
        else
            return usage(!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"));
    }
    if (a.repeat < 1) a.repeat = 1;
    attn__cuda *c = NULL;
    attn__cuda_options opt = {.device = a.device};
    attn_status st = attn__cuda_open(&opt, &c);
    if (st != ATTN_OK) {
        printf("bench_cuda: no CUDA device: %s\n", attn__cuda_last_error());
        return st == ATTN_IMPORT_ERROR || st == ATTN_PLATFORM_UNAVAILABLE ? 77 : 1;
    }
    attn__cuda_info info;
    attn__cuda_get_info(c, &info);
    double peak = bf16_flops_per_clock(info.cc) * info.sm_count * info.clock_khz * 1e3;
    double mem_bw = 2.0 * info.mem_clock_khz * 1e3 * info.bus_bits / 8.0;
    timing t = {.c = c, .repeat = a.repeat};
    int rc = 0;
    double copy_bw = 0, dec_bw = 0, pre_flops = 0, mla_bw = 0;

    copy_ctx cc = {.c = c, .bytes = (size_t)1 << 30};
    if (!ok(attn__cuda_alloc(c, cc.bytes, &cc.a), "copy source") ||
        !ok(attn__cuda_alloc(c, cc.bytes, &cc.b), "copy destination") ||
        !time_it(&t, copy_once, &cc))
        rc = 1;
    else
        copy_bw = 2.0 * (double)cc.bytes / t.seconds;
    attn__cuda_free(cc.a);
    attn__cuda_free(cc.b);

    attn_case x;
    if (rc == 0 && want(&a, "decode")) {
        if (attn_make(c, &x, 64, 1, 4096, 32, 8, 128, 16) && time_it(&t, attn_once, &x))
            dec_bw = (double)attn__cuda_mem_size(x.kv) / t.seconds;
        else
            rc = 1;
        attn_free(&x);
    }
    if (rc == 0 && want(&a, "prefill")) {
        if (attn_make(c, &x, 1, 2048, 2048, 32, 8, 128, 16) && time_it(&t, attn_once, &x))
            pre_flops = 4.0 * 32 * 128 * (2048.0 * 2049.0 / 2.0) / t.seconds;
        else
            rc = 1;
        attn_free(&x);
    }
    if (rc == 0 && want(&a, "mla")) {
        mla_case m;
        if (mla_make(c, &m, 64, 4096) && time_it(&t, mla_once, &m))
            mla_bw = 64.0 * 4096 * 576 * 2 / t.seconds;
        else
            rc = 1;
        attn__cuda_mla_step_destroy(m.step);
        attn__cuda_mla_destroy(m.k);
        attn_free(&m.a);
    }
    if (a.json) {
        printf("{\"device\": \"%s\", \"cc\": %d, \"sms\": %d, \"copy_bytes_per_s\": %.4g, "
               "\"dram_peak_bytes_per_s\": %.4g, \"bf16_peak_flops\": %.4g, "
               "\"decode_bytes_per_s\": %.4g, \"decode_of_copy\": %.3f, "
               "\"prefill_flops\": %.4g, \"prefill_of_peak\": %.3f, "
               "\"mla_decode_bytes_per_s\": %.4g, \"mla_decode_of_copy\": %.3f}\n",
               attn__cuda_device_name(c), info.cc, info.sm_count, copy_bw, mem_bw, peak, dec_bw,
               copy_bw > 0 ? dec_bw / copy_bw : 0, pre_flops, peak > 0 ? pre_flops / peak : 0,
               mla_bw, copy_bw > 0 ? mla_bw / copy_bw : 0);
    } else {
        printf("device  %s; DRAM %.0f GB/s nominal; bf16 tensor peak %.0f TFLOP/s%s\n",
               attn__cuda_device_name(c), mem_bw / 1e9, peak / 1e12,
               peak > 0 ? "" : " (unknown capability)");
        printf("copy    %.0f GB/s (device-to-device, read + write)\n", copy_bw / 1e9);
        if (dec_bw > 0)
            printf("decode  %.0f GB/s of KV = %.2f of the copy bandwidth (target 0.80)\n",
                   dec_bw / 1e9, dec_bw / copy_bw);
        if (pre_flops > 0)
            printf("prefill %.1f TFLOP/s = %.3f of the bf16 tensor peak (target 0.40)\n",
                   pre_flops / 1e12, peak > 0 ? pre_flops / peak : 0);
        if (mla_bw > 0)
            printf("mla     %.0f GB/s of latent rows = %.2f of the copy bandwidth\n", mla_bw / 1e9,
                   mla_bw / copy_bw);
    }
    attn__cuda_close(c);
    return rc;
}
#endif
