/* REFERENCE_MLA: MLA computed the naive way, in double precision, one query
 * row at a time - the oracle CPU_MLA is checked against.
 *
 * forward_mqa: absorbed queries (q_nope . W_UK, q_rope) against the raw
 * latent rows; output in latent space (before W_UV).
 * forward_mha: every cached row decompressed per head - key = (W_UK .
 * latent, rope), value = latent . W_UV - then causal softmax attention.
 * Sparse: each query token sees only its listed top-k positions (those <=
 * its own position; -1 = unused); a listed position counts once per listing.
 * LSE is natural-log; a row that sees no key gets output 0 and LSE -inf.
 * The reference allocates freely; it is slow by design. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "backends/mla/mla_internal.h"
#include "backends/reference/ref_mla.h"
#include "backends/reference/reference.h"
#include "util/error.h"
#include "util/numeric.h"

static void ref_load_row(const attn__mla_call *c, const int32_t *bt, int pos, double *row)
{
    const void *p = attn__mla_row(c->a->kv, c->kv_esz, bt, pos);
    for (int i = 0; i < c->D; i++)
        row[i] = (double)attn__load_elem(p, c->kv_elem, (size_t)i) * (double)c->kv_scale;
}

/* Keys visible to query token t at position pos: dense 0..pos, or the
 * top-k list filtered by causality. Returns the count written to keys. */
static int ref_keys(const attn__mla_call *c, int t, int pos, int32_t *keys)
{
    int n = 0;
    if (!c->sparse) {
        for (int j = 0; j <= pos; j++)
            keys[n++] = j;
        return n;
    }
    const int32_t *ix = c->a->topk_indices + (size_t)t * (size_t)c->a->topk;
    for (int k = 0; k < c->a->topk; k++)
        if (ix[k] >= 0 && ix[k] <= pos) keys[n++] = ix[k];
    return n;
}

attn_status attn__ref_mla_mqa(const attn_mla_args *a, bool sparse)
{
    attn__mla_call c;
    attn_status st = attn__mla_prepare(sparse ? "REFERENCE_MLA_SPARSE" : "REFERENCE_MLA", a,
                                       sparse ? ATTN__MLA_MQA_SPARSE : ATTN__MLA_MQA, &c);
    if (st != ATTN_OK) return st;
    const attn_common_metadata *cm = c.cm;
    int maxkeys = 1;
    for (int r = c.req_begin; r < c.req_end; r++)
        maxkeys = cm->seq_lens[r] > maxkeys ? cm->seq_lens[r] : maxkeys;
    if (sparse && a->topk > maxkeys) maxkeys = a->topk;
    int H = c.H, R = c.R, D = c.D;
    double *rows = malloc(sizeof(double) * (size_t)maxkeys * (size_t)D);
    double *s = malloc(sizeof(double) * (size_t)maxkeys * (size_t)H);
    double *q = malloc(sizeof(double) * (size_t)H * (size_t)D);
    double *o = malloc(sizeof(double) * (size_t)R);
    int32_t *keys = malloc(sizeof(int32_t) * (size_t)maxkeys);
    if (!rows || !s || !q || !o || !keys) {
        free(rows), free(s), free(q), free(o), free(keys);
        return attn__fail(ATTN_OUT_OF_MEMORY, "REFERENCE_MLA: no memory for %d keys", maxkeys);
    }
    for (int r = c.req_begin; r < c.req_end; r++) {
        const int32_t *bt = attn__mla_block_table(cm, r);
        int q0 = cm->query_start_loc[r], q1 = cm->query_start_loc[r + 1];
        int L = cm->seq_lens[r];
        for (int t = q0; t < q1; t++) {
            int pos = L - (q1 - q0) + (t - q0);
            int nk = ref_keys(&c, t, pos, keys);
            for (int j = 0; j < nk; j++)
                ref_load_row(&c, bt, keys[j], rows + (size_t)j * D);
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++)
                    q[(size_t)h * D + d] =
                        attn__load_elem(a->q, c.q_elem, ((size_t)t * H + (size_t)h) * D + d);
            for (int h = 0; h < H; h++) {
                const double *qh = q + (size_t)h * D;
                double mx = -INFINITY;
                for (int j = 0; j < nk; j++) {
                    const double *kr = rows + (size_t)j * D;
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += qh[d] * kr[d];
                    s[j] = dot * (double)c.scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                double sum = 0;
                memset(o, 0, sizeof(double) * (size_t)R);
                for (int j = 0; j < nk; j++) {
                    double p = exp(s[j] - mx);
                    sum += p;
                    const double *kr = rows + (size_t)j * D;
                    for (int i = 0; i < R; i++)
                        o[i] += p * kr[i];
                }
                size_t ob = ((size_t)t * H + (size_t)h) * R;
                for (int i = 0; i < R; i++)
                    attn__store_elem(a->out, c.q_elem, ob + i, nk ? (float)(o[i] / sum) : 0.0f);
                if (a->lse) a->lse[(size_t)t * H + h] = nk ? (float)(mx + log(sum)) : -INFINITY;
            }
        }
    }
    free(rows), free(s), free(q), free(o), free(keys);
    return ATTN_OK;
}

attn_status attn__ref_mla_mha(const attn_mla_args *a)
{
    attn__mla_call c;
    attn_status st = attn__mla_prepare("REFERENCE_MLA", a, ATTN__MLA_MHA, &c);
    if (st != ATTN_OK) return st;
    const attn_common_metadata *cm = c.cm;
    int H = c.H, R = c.R, P = c.P, D = c.D, N = c.nope, V = c.V, QK = c.nope + c.P;
    int maxkeys = 1;
    for (int r = c.req_begin; r < c.req_end; r++)
        maxkeys = cm->seq_lens[r] > maxkeys ? cm->seq_lens[r] : maxkeys;
    double *lat = malloc(sizeof(double) * (size_t)maxkeys * (size_t)D);
    double *kd = malloc(sizeof(double) * (size_t)maxkeys * (size_t)QK);
    double *vd = malloc(sizeof(double) * (size_t)maxkeys * (size_t)V);
    double *s = malloc(sizeof(double) * (size_t)maxkeys);
    double *w = malloc(sizeof(double) * (size_t)R * (size_t)(N > V ? N : V));
    double *q = malloc(sizeof(double) * (size_t)QK);
    double *o = malloc(sizeof(double) * (size_t)V);
    if (!lat || !kd || !vd || !s || !w || !q || !o) {
        free(lat), free(kd), free(vd), free(s), free(w), free(q), free(o);
        return attn__fail(ATTN_OUT_OF_MEMORY, "REFERENCE_MLA: no memory for %d keys", maxkeys);
    }
    for (int r = c.req_begin; r < c.req_end; r++) {
        const int32_t *bt = attn__mla_block_table(cm, r);
        int q0 = cm->query_start_loc[r], q1 = cm->query_start_loc[r + 1];
        int L = cm->seq_lens[r];
        if (q1 == q0) continue;
        for (int j = 0; j < L; j++)
            ref_load_row(&c, bt, j, lat + (size_t)j * D);
        for (int h = 0; h < H; h++) {
            /* keys: nope part through W_UK[h] ([N][R]), then the shared rope */
            for (size_t i = 0; i < (size_t)N * R; i++)
                w[i] = attn__load_elem(a->w_uk, c.q_elem, (size_t)h * N * R + i);
            for (int j = 0; j < L; j++) {
                const double *lj = lat + (size_t)j * D;
                double *kj = kd + (size_t)j * QK;
                for (int n = 0; n < N; n++) {
                    double acc = 0;
                    for (int i = 0; i < R; i++)
                        acc += w[(size_t)n * R + i] * lj[i];
                    kj[n] = acc;
                }
                for (int p = 0; p < P; p++)
                    kj[N + p] = lj[R + p];
            }
            /* values through W_UV[h] ([R][V]) */
            for (size_t i = 0; i < (size_t)R * V; i++)
                w[i] = attn__load_elem(a->w_uv, c.q_elem, (size_t)h * R * V + i);
            for (int j = 0; j < L; j++) {
                const double *lj = lat + (size_t)j * D;
                double *vj = vd + (size_t)j * V;
                for (int v = 0; v < V; v++)
                    vj[v] = 0;
                for (int i = 0; i < R; i++)
                    for (int v = 0; v < V; v++)
                        vj[v] += lj[i] * w[(size_t)i * V + v];
            }
            for (int t = q0; t < q1; t++) {
                int pos = L - (q1 - q0) + (t - q0);
                for (int d = 0; d < QK; d++)
                    q[d] = attn__load_elem(a->q, c.q_elem, ((size_t)t * H + (size_t)h) * QK + d);
                double mx = -INFINITY;
                for (int j = 0; j <= pos; j++) {
                    const double *kj = kd + (size_t)j * QK;
                    double dot = 0;
                    for (int d = 0; d < QK; d++)
                        dot += q[d] * kj[d];
                    s[j] = dot * (double)c.scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                double sum = 0;
                memset(o, 0, sizeof(double) * (size_t)V);
                for (int j = 0; j <= pos; j++) {
                    double p = exp(s[j] - mx);
                    sum += p;
                    const double *vj = vd + (size_t)j * V;
                    for (int v = 0; v < V; v++)
                        o[v] += p * vj[v];
                }
                size_t ob = ((size_t)t * H + (size_t)h) * V;
                for (int v = 0; v < V; v++)
                    attn__store_elem(a->out, c.q_elem, ob + v, (float)(o[v] / sum));
                if (a->lse) a->lse[(size_t)t * H + h] = (float)(mx + log(sum));
            }
        }
    }
    free(lat), free(kd), free(vd), free(s), free(w), free(q), free(o);
    return ATTN_OK;
}

static attn_status ref_mqa(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__ref_mla_mqa(a, false);
}

static attn_status ref_mqa_sparse(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__ref_mla_mqa(a, true);
}

static attn_status ref_mha(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__ref_mla_mha(a);
}

static const char *ref_variant(void)
{
    return "double";
}

static const attn_kernel_ops ref_mla_ops = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward_mqa = ref_mqa,
    .forward_mha = ref_mha,
    .variant = ref_variant,
};

static const attn_kernel_ops ref_mla_sparse_ops = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward_mqa = ref_mqa_sparse,
    .variant = ref_variant,
};

#define KV(x) ATTN_KV_BIT(ATTN_KV_##x)
#define ATTN__REF_MLA_DESC                                                                         \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .platforms = "CPU",                                                                            \
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |                  \
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),                                                     \
    .kv_dtypes = KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2),    \
    .is_mla = true, .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER), .cg_support = ATTN_CG_NEVER,   \
    .can_return_lse_for_decode = true, .lse_base = ATTN_LSE_BASE_E, .supports_pcp = false,         \
    .kv_cache_shape = attn__kv_shape_mla, .kv_stride_order = attn__stride_order_mla

/* Any block size, any kv_lora_rank + rope split: the oracle is generic. */
static const attn_backend_desc ref_mla_desc = {
    ATTN__REF_MLA_DESC,
    .name = "REFERENCE_MLA",
    .supports_dcp = true,
    .builder = &attn__builder_mla_cpu,
};

static const attn_backend_desc ref_mla_sparse_desc = {
    ATTN__REF_MLA_DESC,
    .name = "REFERENCE_MLA_SPARSE",
    .is_sparse = true,
    .builder = &attn__builder_mla_sparse,
};

const attn_backend attn__backend_reference_mla = ATTN__CPU_BACKEND(&ref_mla_desc, &ref_mla_ops);

const attn_backend attn__backend_reference_mla_sparse =
    ATTN__CPU_BACKEND(&ref_mla_sparse_desc, &ref_mla_sparse_ops);
