/* CPU_ATTN: the kernel object and its self-test. The driver lives beside
 * it: variant dispatch (cpu_variants.c), per-thread scratch
 * (cpu_scratch.c), tile rows (cpu_rows.c), the forward and its phases
 * (cpu_forward.c), the descriptor (cpu_attn_desc.c). */
#include "backends/cpu/cpu_attn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/reference/reference.h"
#include "util/error.h"
#include "util/numeric.h"

/* ---- self-test ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    attn_dtype dtype;
    attn_elem kv;
    int heads, kv_heads, D, bs;
    int nreq;
    int qlen[3], seq[3];
    float tol;
} st_shape;

static const st_shape st_shapes[] = {
    {"decode+prefill fp32",
     ATTN_DTYPE_FP32,
     ATTN_ELEM_F32,
     8,
     2,
     64,
     16,
     3,
     {1, 19, 1},
     {37, 40, 130},
     1e-4f},
    {"decode bf16", ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 8, 2, 128, 16, 2, {1, 1}, {70, 5}, 2e-2f},
    {"prefill bf16", ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 8, 2, 128, 16, 2, {37, 1}, {60, 90}, 2e-2f},
    {"decode+prefill fp8_e4m3",
     ATTN_DTYPE_FP32,
     ATTN_ELEM_FP8_E4M3,
     4,
     1,
     64,
     32,
     2,
     {1, 24},
     {50, 33},
     1e-3f},
};

static uint32_t st_rand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static float st_unif(uint32_t *s)
{
    return (float)st_rand(s) / 16777216.0f * 2.0f - 1.0f;
}

static attn_status st_run(const st_shape *sh, attn__cpu_forward_fn fwd, void *impl, double *err)
{
    int bs = sh->bs, D = sh->D, KVH = sh->kv_heads, H = sh->heads;
    int tokens = 0, blocks = 0, maxb = 0;
    int32_t qsl[4] = {0}, seq[3];
    for (int r = 0; r < sh->nreq; r++) {
        tokens += sh->qlen[r];
        qsl[r + 1] = tokens;
        seq[r] = sh->seq[r];
        int nb = (sh->seq[r] + bs - 1) / bs;
        blocks += nb;
        if (nb > maxb) maxb = nb;
    }
    attn_elem qe = attn_dtype_elem(sh->dtype);
    size_t qes = attn_elem_size(qe), kes = attn_elem_size(sh->kv);
    int64_t per = (int64_t)blocks * KVH * bs * D;
    unsigned char *cache = calloc((size_t)(2 * per), kes);
    int32_t *bt = calloc((size_t)(sh->nreq * maxb), sizeof(int32_t));
    void *q = calloc((size_t)tokens * H * D, qes);
    void *out = calloc((size_t)tokens * H * D, qes);
    void *ref = calloc((size_t)tokens * H * D, qes);
    attn_status st = ATTN_OK;
    if (!cache || !bt || !q || !out || !ref) {
        st = attn__fail(ATTN_OUT_OF_MEMORY, "CPU_ATTN self-test: out of memory");
        goto done;
    }
    uint32_t rs = 12345;
    /* blocks handed out in reverse so the block table matters */
    int next = blocks - 1;
    for (int r = 0; r < sh->nreq; r++)
        for (int b = 0; b < (sh->seq[r] + bs - 1) / bs; b++)
            bt[r * maxb + b] = next--;
    float kvs = attn__elem_is_fp8(sh->kv) ? 0.02f : 1.0f;
    for (int64_t i = 0; i < 2 * per; i++)
        attn__store_elem(cache, sh->kv, (size_t)i, st_unif(&rs) * 2.0f / kvs);
    for (int64_t i = 0; i < (int64_t)tokens * H * D; i++)
        attn__store_elem(q, qe, (size_t)i, st_unif(&rs) * 4.0f);
    attn_kv_view kv = {
        .data = cache,
        .elem = sh->kv,
        .num_blocks = blocks,
        .block_size = bs,
        .num_kv_heads = KVH,
        .head_size = D,
        .head_size_v = D,
        .k_offset = 0,
        .v_offset = per,
        .stride_block = (int64_t)KVH * bs * D,
        .stride_token = D,
        .stride_head = (int64_t)bs * D,
        .k_scale = kvs,
        .v_scale = kvs,
    };
    attn_layer_params lp = {.num_heads = H,
                            .num_kv_heads = KVH,
                            .head_size = D,
                            .dtype = sh->dtype,
                            .kv_cache_dtype = ATTN_KV_AUTO,
                            .attn_type = ATTN_TYPE_DECODER};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = sh->nreq,
                               .num_actual_tokens = tokens,
                               .block_table = bt,
                               .block_table_stride = maxb,
                               .causal = true,
                               .block_size = bs};
    attn_forward_args fa = {.layer = &lp, .common = &cm, .q = q, .kv = &kv, .out = ref};
    st = attn__reference_forward(&fa);
    if (st != ATTN_OK) goto done;
    fa.out = out;
    st = fwd(impl, &fa);
    if (st != ATTN_OK) goto done;
    double maxd = 0, maxw = 0;
    for (int64_t i = 0; i < (int64_t)tokens * H * D; i++) {
        double g = attn__load_elem(out, qe, (size_t)i), w = attn__load_elem(ref, qe, (size_t)i);
        double d = fabs(g - w);
        if (!(d <= maxd)) maxd = isnan(d) ? INFINITY : d;
        if (fabs(w) > maxw) maxw = fabs(w);
    }
    *err = maxd / (maxw > 1e-6 ? maxw : 1e-6);
done:
    free(cache);
    free(bt);
    free(q);
    free(out);
    free(ref);
    return st;
}

attn_status attn__cpu_attn_self_test_with(attn__cpu_forward_fn fwd, void *impl, char *detail,
                                          size_t size)
{
    if (detail && size) detail[0] = '\0';
    for (size_t i = 0; i < sizeof st_shapes / sizeof st_shapes[0]; i++) {
        const st_shape *sh = &st_shapes[i];
        double err = INFINITY;
        attn_status st = st_run(sh, fwd, impl, &err);
        char shape[128];
        snprintf(shape, sizeof shape, "%s heads=%d/%d head_size=%d block_size=%d", sh->name,
                 sh->heads, sh->kv_heads, sh->D, sh->bs);
        if (st != ATTN_OK) {
            if (detail && size)
                snprintf(detail, size, "max error inf on %s (%s: %s)", shape, attn_status_name(st),
                         attn_last_error());
            return attn__fail(ATTN_SELFTEST_FAILED, "max error inf on %s", shape);
        }
        if (!(err <= sh->tol)) {
            if (detail && size) snprintf(detail, size, "max error %.3g on %s", err, shape);
            return attn__fail(ATTN_SELFTEST_FAILED, "max error %.3g on %s", err, shape);
        }
    }
    return ATTN_OK;
}

/* ---- kernel ops -------------------------------------------------------------- */

static attn_status cpu_forward(void *impl, const attn_forward_args *a)
{
    (void)impl;
    return attn__cpu_attn_forward_isa(NULL, a);
}

static attn_status cpu_self_test(char *detail, size_t size)
{
    return attn__cpu_attn_self_test_with(cpu_forward, NULL, detail, size);
}

static const char *cpu_variant(void)
{
    return attn__cpu_attn_active()->name;
}

static const attn_kernel_ops cpu_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward = cpu_forward,
    .self_test = cpu_self_test,
    .variant = cpu_variant,
};

const attn_backend attn__backend_cpu_attn = ATTN__CPU_BACKEND(&attn__desc_cpu_attn, &cpu_kernel);
