/* The self-test service: the result cache, the dispatch on the kernel kind,
 * tolerances, and the standard-attention known answer (the shapes CPU_ATTN
 * has always been checked on). The MLA known answer is selftest_mla.c. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/log.h"
#include "backends/reference/reference.h"
#include "selftest/selftest.h"
#include "util/error.h"
#include "util/numeric.h"

attn_kernel_kind attn__kernel_kind(const attn_kernel_ops *k)
{
    if (!k || k->struct_size < offsetof(attn_kernel_ops, kind) + sizeof k->kind)
        return ATTN_KERNEL_UNDECLARED;
    return k->kind;
}

bool attn__selftest_present(const attn_backend *b)
{
    return b && b->kernel &&
           (attn__kernel_kind(b->kernel) != ATTN_KERNEL_UNDECLARED || b->kernel->self_test != NULL);
}

double attn__selftest_tolerance(attn_dtype dt, attn_elem kv)
{
    double tol = dt == ATTN_DTYPE_FP32 ? 1e-4 : 2e-2; /* fp16 / bf16 outputs round */
    if (attn__elem_is_fp8(kv) && tol < 1e-3) tol = 1e-3;
    return tol;
}

bool attn__selftest_fits(const attn_backend_desc *d, attn_dtype dt, attn_elem kv)
{
    if (!d) return true;
    if (d->dtypes && !((d->dtypes >> dt) & 1u)) return false;
    if (!attn__elem_is_fp8(kv)) return true;
    /* The default kv set (auto, fp16, bf16) has no fp8. */
    uint64_t fp8 = ATTN_KV_BIT(ATTN_KV_FP8) | ATTN_KV_BIT(ATTN_KV_FP8_E4M3);
    return (d->kv_dtypes & fp8) != 0;
}

/* ---- standard attention --------------------------------------------------------- */

typedef struct {
    const char *name;
    attn_dtype dtype;
    attn_elem kv;
    int heads, kv_heads, D, bs;
    int nreq;
    int qlen[3], seq[3];
} st_shape;

/* Mixed decode/prefill batches, GQA, a block table handed out backwards. */
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
     {37, 40, 130}},
    {"decode bf16", ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 8, 2, 128, 16, 2, {1, 1}, {70, 5}},
    {"prefill bf16", ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 8, 2, 128, 16, 2, {37, 1}, {60, 90}},
    {"decode+prefill fp8_e4m3",
     ATTN_DTYPE_FP32,
     ATTN_ELEM_FP8_E4M3,
     4,
     1,
     64,
     32,
     2,
     {1, 24},
     {50, 33}},
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

/* Relative max error of out against ref (NaN counts as infinite). */
static double st_rel_error(const void *out, const void *ref, attn_elem e, int64_t n)
{
    double maxd = 0, maxw = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = attn__load_elem(out, e, (size_t)i), w = attn__load_elem(ref, e, (size_t)i);
        double d = fabs(g - w);
        if (!(d <= maxd)) maxd = isnan(d) ? INFINITY : d;
        if (fabs(w) > maxw) maxw = fabs(w);
    }
    return maxd / (maxw > 1e-6 ? maxw : 1e-6);
}

typedef struct {
    unsigned char *cache;
    int32_t *bt;
    void *q, *out, *ref;
} st_bufs;

static void st_bufs_free(st_bufs *b)
{
    free(b->cache);
    free(b->bt);
    free(b->q);
    free(b->out);
    free(b->ref);
}

static attn_status st_run(const st_shape *sh, attn__selftest_forward_fn fwd, void *impl,
                          double *err)
{
    int bs = sh->bs, D = sh->D, KVH = sh->kv_heads, H = sh->heads;
    int tokens = 0, blocks = 0, maxb = 0, maxq = 0, maxs = 0;
    int32_t qsl[4] = {0}, seq[3];
    for (int r = 0; r < sh->nreq; r++) {
        tokens += sh->qlen[r];
        qsl[r + 1] = tokens;
        seq[r] = sh->seq[r];
        int nb = (sh->seq[r] + bs - 1) / bs;
        blocks += nb;
        maxb = nb > maxb ? nb : maxb;
        maxq = sh->qlen[r] > maxq ? sh->qlen[r] : maxq;
        maxs = sh->seq[r] > maxs ? sh->seq[r] : maxs;
    }
    attn_elem qe = attn_dtype_elem(sh->dtype);
    size_t qes = attn_elem_size(qe), kes = attn_elem_size(sh->kv);
    int64_t per = (int64_t)blocks * KVH * bs * D, nq = (int64_t)tokens * H * D;
    st_bufs m = {calloc((size_t)(2 * per), kes), calloc((size_t)(sh->nreq * maxb), sizeof(int32_t)),
                 calloc((size_t)nq, qes), calloc((size_t)nq, qes), calloc((size_t)nq, qes)};
    attn_status st = ATTN_OK;
    if (!m.cache || !m.bt || !m.q || !m.out || !m.ref) {
        st_bufs_free(&m);
        return attn__fail(ATTN_OUT_OF_MEMORY, "self-test: out of memory");
    }
    uint32_t rs = 12345;
    int next = blocks - 1; /* blocks handed out in reverse so the block table matters */
    for (int r = 0; r < sh->nreq; r++)
        for (int b = 0; b < (sh->seq[r] + bs - 1) / bs; b++)
            m.bt[r * maxb + b] = next--;
    float kvs = attn__elem_is_fp8(sh->kv) ? 0.02f : 1.0f;
    for (int64_t i = 0; i < 2 * per; i++)
        attn__store_elem(m.cache, sh->kv, (size_t)i, st_unif(&rs) * 2.0f / kvs);
    for (int64_t i = 0; i < nq; i++)
        attn__store_elem(m.q, qe, (size_t)i, st_unif(&rs) * 4.0f);
    attn_kv_view kv = {.data = m.cache,
                       .elem = sh->kv,
                       .num_blocks = blocks,
                       .block_size = bs,
                       .num_kv_heads = KVH,
                       .head_size = D,
                       .head_size_v = D,
                       .v_offset = per,
                       .stride_block = (int64_t)KVH * bs * D,
                       .stride_token = D,
                       .stride_head = (int64_t)bs * D,
                       .k_scale = kvs,
                       .v_scale = kvs};
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
                               .max_query_len = maxq,
                               .max_seq_len = maxs,
                               .block_table = m.bt,
                               .block_table_stride = maxb,
                               .causal = true,
                               .block_size = bs};
    attn_forward_args fa = {.layer = &lp, .common = &cm, .q = m.q, .kv = &kv, .out = m.ref};
    st = attn__reference_forward(&fa);
    if (st == ATTN_OK) {
        fa.out = m.out;
        st = fwd(impl, &fa);
    }
    if (st == ATTN_OK) *err = st_rel_error(m.out, m.ref, qe, nq);
    st_bufs_free(&m);
    return st;
}

attn_status attn__selftest_standard(const attn_backend_desc *d, attn__selftest_forward_fn fwd,
                                    void *impl, char *detail, size_t size)
{
    if (detail && size) detail[0] = '\0';
    for (size_t i = 0; i < sizeof st_shapes / sizeof st_shapes[0]; i++) {
        const st_shape *sh = &st_shapes[i];
        if (!attn__selftest_fits(d, sh->dtype, sh->kv)) continue;
        double err = INFINITY, tol = attn__selftest_tolerance(sh->dtype, sh->kv);
        attn_status st = st_run(sh, fwd, impl, &err);
        if (st == ATTN_IMPORT_ERROR) {
            /* the kernel's code does not load on its device (a device program
             * that does not build): an import failure, its text whole */
            if (detail && size) snprintf(detail, size, "%s", attn_last_error());
            return ATTN_IMPORT_ERROR;
        }
        char shape[128];
        snprintf(shape, sizeof shape, "%s heads=%d/%d head_size=%d block_size=%d", sh->name,
                 sh->heads, sh->kv_heads, sh->D, sh->bs);
        if (st != ATTN_OK) {
            if (detail && size)
                snprintf(detail, size, "max error inf on %s (%s: %s)", shape, attn_status_name(st),
                         attn_last_error());
            return attn__fail(ATTN_SELFTEST_FAILED, "max error inf on %s", shape);
        }
        if (!(err <= tol)) {
            if (detail && size) snprintf(detail, size, "max error %.3g on %s", err, shape);
            return attn__fail(ATTN_SELFTEST_FAILED, "max error %.3g on %s", err, shape);
        }
    }
    return ATTN_OK;
}

/* ---- a backend's test ------------------------------------------------------------ */

/* The standard test through b's own ops on an instance of its device
 * (selftest_device.c). */
static _Thread_local const attn_backend *st_backend;

static attn_status st_forward(void *impl, const attn_forward_args *a)
{
    (void)impl;
    return attn__selftest_call(st_backend, a);
}

static attn_status attn__selftest_run(const attn_backend *b, char *detail, size_t size)
{
    const attn_kernel_ops *k = b->kernel;
    switch (attn__kernel_kind(k)) {
    case ATTN_KERNEL_STANDARD:
        if (!k->forward) break;
        st_backend = b;
        return attn__selftest_standard(b->desc, st_forward, NULL, detail, size);
    case ATTN_KERNEL_MLA:
        if (!k->forward_mqa || !k->forward_mha) break;
        return attn__selftest_mla(b, false, detail, size);
    case ATTN_KERNEL_MLA_SPARSE:
        if (!k->forward_mqa) break;
        return attn__selftest_mla(b, true, detail, size);
    case ATTN_KERNEL_UNDECLARED: return k->self_test ? k->self_test(detail, size) : ATTN_OK;
    }
    snprintf(detail, size, "kernel kind %d declared without its forward entry points",
             (int)attn__kernel_kind(k));
    return attn__fail(ATTN_SELFTEST_FAILED, "%s", detail);
}

attn_status attn_backend_self_test(const attn_backend *b, char *detail, size_t size)
{
    ATTN__CHECK_NULL(b);
    ATTN__CHECK_NULL(detail);
    detail[0] = size ? '\0' : detail[0];
    if (!b->kernel) return ATTN_OK;
    return attn__selftest(b, detail, size);
}

/* ---- the cache: once per process per backend object ------------------------------ */

typedef struct attn__selftest_result {
    struct attn__selftest_result *next;
    const attn_backend *backend;
    attn_status status;
    char detail[2048]; /* ATTN_IMPORT_ERROR: a compiler's log */
} attn__selftest_result;

static pthread_mutex_t attn__selftest_mu = PTHREAD_MUTEX_INITIALIZER;
static attn__selftest_result *attn__selftests;

attn_status attn__selftest(const attn_backend *b, char *detail, size_t size)
{
    pthread_mutex_lock(&attn__selftest_mu);
    attn__selftest_result *r = attn__selftests;
    while (r && r->backend != b)
        r = r->next;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&attn__selftest_mu);
            snprintf(detail, size, "out of memory");
            return ATTN_OUT_OF_MEMORY;
        }
        r->backend = b;
        r->status = attn__selftest_run(b, r->detail, sizeof r->detail);
        if (r->status != ATTN_OK && !r->detail[0])
            snprintf(r->detail, sizeof r->detail, "%s",
                     r->status == ATTN_IMPORT_ERROR && attn_last_error()[0]
                         ? attn_last_error()
                         : attn_strerror(r->status));
        r->next = attn__selftests;
        attn__selftests = r;
    }
    attn_status st = r->status;
    snprintf(detail, size, "%s", r->detail);
    pthread_mutex_unlock(&attn__selftest_mu);
    return st;
}

bool attn__selftest_disabled(void)
{
    const char *e = getenv("ATTN_SELFTEST");
    static atomic_bool warned;
    if (e && *e && strcmp(e, "0") && strcmp(e, "1") && !atomic_exchange(&warned, true))
        attn_log(ATTN_LOG_WARN, "ATTN_SELFTEST='%s' is not 0 or 1; self-tests stay on", e);
    return e && !strcmp(e, "0");
}
