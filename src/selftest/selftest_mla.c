/* The MLA known answer of the self-test service: a small mixed batch in
 * each model dtype (and an fp8 cache) through the backend's forward_mqa
 * (decode) and forward_mha (prefill; dense only), checked against
 * REFERENCE_MLA / REFERENCE_MLA_SPARSE, output and LSE. The shapes CPU_MLA
 * has always been checked on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/reference/ref_mla.h"
#include "selftest/selftest.h"
#include "util/error.h"
#include "util/numeric.h"

typedef struct {
    attn_dtype dt;
    attn_elem kv;
} mla_case;

static const mla_case mla_cases[] = {
    {ATTN_DTYPE_BF16, ATTN_ELEM_BF16},
    {ATTN_DTYPE_FP32, ATTN_ELEM_F32},
    {ATTN_DTYPE_FP16, ATTN_ELEM_F16},
    {ATTN_DTYPE_BF16, ATTN_ELEM_FP8_E4M3},
};

enum { H = 16, R = 64, P = 32, D = R + P, N = 32, V = 32, BS = 16, NB = 16, NR = 3, TOPK = 24 };
enum { T = 8 }; /* total tokens of qlen */
static const int qlen[NR] = {1, 2, 5}, slen[NR] = {37, 70, 29};

static uint64_t st_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float st_uniform(uint64_t *s)
{
    return (float)((st_next(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* fp32 inputs drawn once; per case they are stored in the case's dtype. */
typedef struct {
    void *cache;
    float *qa, *qm, *wuk, *wuv, *o1, *o2, *l1, *l2;
    char *in, *in2, *w1, *w2;
    int32_t *topk;
    int32_t qsl[NR + 1], sl[NR], bt[NR * 6];
    uint64_t seed;
} mla_bufs;

static void mla_free(mla_bufs *m)
{
    free(m->cache), free(m->qa), free(m->qm), free(m->wuk), free(m->wuv), free(m->in);
    free(m->in2), free(m->w1), free(m->w2), free(m->o1), free(m->o2), free(m->l1), free(m->l2);
    free(m->topk);
}

static bool mla_alloc(mla_bufs *m)
{
    memset(m, 0, sizeof *m);
    size_t f = sizeof(float);
    m->cache = calloc((size_t)NB * BS * D, 4);
    m->qa = malloc(f * T * H * D), m->qm = malloc(f * T * H * (N + P));
    m->wuk = malloc(f * H * N * R), m->wuv = malloc(f * H * R * V);
    m->in = malloc(f * T * H * D), m->in2 = malloc(f * T * H * (N + P));
    m->w1 = malloc(f * H * N * R), m->w2 = malloc(f * H * R * V);
    m->o1 = malloc(f * T * H * R), m->o2 = malloc(f * T * H * R);
    m->l1 = malloc(f * T * H), m->l2 = malloc(f * T * H);
    m->topk = malloc(sizeof(int32_t) * T * TOPK);
    if (!m->cache || !m->qa || !m->qm || !m->wuk || !m->wuv || !m->in || !m->in2 || !m->w1 ||
        !m->w2 || !m->o1 || !m->o2 || !m->l1 || !m->l2 || !m->topk)
        return false;
    for (int r = 0; r < NR; r++) {
        m->qsl[r + 1] = m->qsl[r] + qlen[r];
        m->sl[r] = slen[r];
    }
    for (int i = 0; i < NR * 6; i++)
        m->bt[i] = (i * 7 + 3) % NB;
    m->seed = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < (size_t)T * H * D; i++)
        m->qa[i] = st_uniform(&m->seed);
    for (size_t i = 0; i < (size_t)T * H * (N + P); i++)
        m->qm[i] = st_uniform(&m->seed);
    for (size_t i = 0; i < (size_t)H * N * R; i++)
        m->wuk[i] = st_uniform(&m->seed) * 0.2f;
    for (size_t i = 0; i < (size_t)H * R * V; i++)
        m->wuv[i] = st_uniform(&m->seed) * 0.2f;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < TOPK; k++)
            m->topk[t * TOPK + k] = (int32_t)(st_next(&m->seed) % 30) - 1;
    return true;
}

static void mla_store_case(mla_bufs *m, const mla_case *tc)
{
    attn_elem qe = attn_dtype_elem(tc->dt);
    for (size_t i = 0; i < (size_t)NB * BS * D; i++)
        attn__store_elem(m->cache, tc->kv, i, st_uniform(&m->seed) * 2.0f);
    for (size_t i = 0; i < (size_t)T * H * D; i++)
        attn__store_elem(m->in, qe, i, m->qa[i]);
    for (size_t i = 0; i < (size_t)T * H * (N + P); i++)
        attn__store_elem(m->in2, qe, i, m->qm[i]);
    for (size_t i = 0; i < (size_t)H * N * R; i++)
        attn__store_elem(m->w1, qe, i, m->wuk[i]);
    for (size_t i = 0; i < (size_t)H * R * V; i++)
        attn__store_elem(m->w2, qe, i, m->wuv[i]);
}

/* Output and LSE errors of backend vs reference for one pass. */
static void mla_errors(const mla_bufs *m, attn_elem qe, int od, double *rel, double *lerr)
{
    double mag = 0, err = 0;
    *lerr = 0;
    for (size_t i = 0; i < (size_t)T * H * od; i++) {
        double x = attn__load_elem(m->o1, qe, i), y = attn__load_elem(m->o2, qe, i);
        mag = fabs(x) > mag ? fabs(x) : mag;
        err = fabs(x - y) > err ? fabs(x - y) : err;
    }
    for (int i = 0; i < T * H; i++) {
        if (isinf(m->l1[i]) && isinf(m->l2[i])) continue;
        double e = fabs((double)m->l1[i] - m->l2[i]);
        *lerr = e > *lerr || isnan(e) ? e : *lerr;
    }
    *rel = err / (mag > 1e-30 ? mag : 1.0);
}

/* One case through reference and backend, decode then (dense) prefill. */
static attn_status mla_case_run(const attn_backend *b, bool sparse, mla_bufs *m, const mla_case *tc,
                                char *detail, size_t size)
{
    const attn_kernel_ops *ref =
        sparse ? attn__backend_reference_mla_sparse.kernel : attn__backend_reference_mla.kernel;
    attn_elem qe = attn_dtype_elem(tc->dt);
    attn_layer_params lp = {.num_heads = H,
                            .num_kv_heads = 1,
                            .head_size = D,
                            .dtype = tc->dt,
                            .kv_lora_rank = R,
                            .qk_rope_head_dim = P,
                            .qk_nope_head_dim = N,
                            .v_head_dim = V};
    float scale = tc->kv == ATTN_ELEM_FP8_E4M3 ? 0.5f : 1.0f;
    attn_kv_view kv = {.data = m->cache,
                       .elem = tc->kv,
                       .num_blocks = NB,
                       .block_size = BS,
                       .num_kv_heads = 1,
                       .head_size = D,
                       .head_size_v = R,
                       .stride_block = (int64_t)BS * D,
                       .stride_token = D,
                       .stride_head = D,
                       .k_scale = scale,
                       .v_scale = scale};
    attn_common_metadata cm = {.query_start_loc = m->qsl,
                               .seq_lens = m->sl,
                               .num_reqs = NR,
                               .num_actual_tokens = T,
                               .max_query_len = 5,
                               .max_seq_len = 70,
                               .block_table = m->bt,
                               .block_table_stride = 6,
                               .causal = true,
                               .block_size = BS};
    for (int pass = 0; pass < (sparse ? 1 : 2); pass++) {
        bool mha = pass == 1;
        attn_mla_args a = {.layer = &lp,
                           .common = &cm,
                           .kv = &kv,
                           .q = mha ? (const void *)m->in2 : (const void *)m->in,
                           .w_uk = m->w1,
                           .w_uv = m->w2,
                           .topk_indices = sparse ? m->topk : NULL,
                           .topk = sparse ? TOPK : 0,
                           .out = m->o1,
                           .lse = m->l1};
        attn_status st = mha ? ref->forward_mha(NULL, &a) : ref->forward_mqa(NULL, &a);
        if (st != ATTN_OK) return st;
        a.out = m->o2;
        a.lse = m->l2;
        st = attn__selftest_call_mla(b, mha, &a);
        if (st != ATTN_OK) return st;
        double rel, lerr, tol = attn__selftest_tolerance(tc->dt, tc->kv);
        mla_errors(m, qe, mha ? V : R, &rel, &lerr);
        if (!(rel <= tol) || !(lerr <= tol * 10)) {
            const char *variant = b->kernel->variant ? b->kernel->variant() : "default";
            snprintf(detail, size,
                     "max error %.3g on %s %s dtype=%s kv=%s heads=%d rank=%d rope=%d "
                     "(variant %s, lse error %.3g)",
                     rel, sparse ? "sparse" : "", mha ? "forward_mha" : "forward_mqa",
                     attn_dtype_name(tc->dt), attn_elem_name(tc->kv), H, R, P, variant, lerr);
            return attn__fail(ATTN_SELFTEST_FAILED, "%s", detail);
        }
    }
    return ATTN_OK;
}

attn_status attn__selftest_mla(const attn_backend *b, bool sparse, char *detail, size_t size)
{
    if (detail && size) detail[0] = '\0';
    char scratch[256];
    if (!detail || !size) detail = scratch, size = sizeof scratch;
    mla_bufs m;
    attn_status st = ATTN_OK;
    if (!mla_alloc(&m)) {
        st = attn__fail(ATTN_OUT_OF_MEMORY, "MLA self-test: no memory");
    } else {
        for (size_t ci = 0; st == ATTN_OK && ci < sizeof mla_cases / sizeof mla_cases[0]; ci++) {
            if (!attn__selftest_fits(b->desc, mla_cases[ci].dt, mla_cases[ci].kv)) continue;
            mla_store_case(&m, &mla_cases[ci]);
            st = mla_case_run(b, sparse, &m, &mla_cases[ci], detail, size);
        }
    }
    mla_free(&m);
    return st;
}
