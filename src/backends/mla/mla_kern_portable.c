/* CPU_MLA portable kernels (plain C, any CPU): the fallback variant and the
 * shared scalar building blocks. Same algorithm as the vector variants:
 * decode walks the keys in chunks of ATTN__MLA_KCHUNK converted to fp32
 * once and used for every row of the group (online softmax in base 2);
 * prefill decompresses a chunk of latent rows into one head's keys and
 * values, then runs causal online-softmax attention for the request's
 * queries. */
#include <math.h>
#include <string.h>

#include "backends/mla/mla_internal.h"
#include "util/numeric.h"

void attn__mla_load_row_f32(const void *src, attn_elem e, int n, float *dst)
{
    switch (e) {
    case ATTN_ELEM_F32: memcpy(dst, src, sizeof(float) * (size_t)n); break;
    case ATTN_ELEM_BF16: {
        const uint16_t *s = src;
        for (int i = 0; i < n; i++)
            dst[i] = attn__bits_f32((uint32_t)s[i] << 16);
        break;
    }
    case ATTN_ELEM_F16: {
        const uint16_t *s = src;
        for (int i = 0; i < n; i++)
            dst[i] = attn__f16_to_f32(s[i]);
        break;
    }
    case ATTN_ELEM_FP8_E4M3: {
        const uint8_t *s = src;
        for (int i = 0; i < n; i++)
            dst[i] = attn__e4m3_to_f32(s[i]);
        break;
    }
    case ATTN_ELEM_FP8_E5M2: {
        const uint8_t *s = src;
        for (int i = 0; i < n; i++)
            dst[i] = attn__e5m2_to_f32(s[i]);
        break;
    }
    default:
        for (int i = 0; i < n; i++)
            dst[i] = attn__load_elem(src, e, (size_t)i);
        break;
    }
}

void attn__mla_store_row(const float *src, float mul, int n, attn_elem e, void *dst)
{
    switch (e) {
    case ATTN_ELEM_F32:
        for (int i = 0; i < n; i++)
            ((float *)dst)[i] = src[i] * mul;
        break;
    case ATTN_ELEM_BF16:
        for (int i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = attn__f32_to_bf16(src[i] * mul);
        break;
    default:
        for (int i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = attn__f32_to_f16(src[i] * mul);
        break;
    }
}

void attn__mla_gemm(int M, int N, int K, const float *A, size_t lda, const float *B, size_t ldb,
                    float *C, size_t ldc, bool acc, const float *rowscale)
{
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        float sc = rowscale ? rowscale[i] : 1.0f;
        for (int j = 0; j < N; j++)
            c[j] = acc ? c[j] * sc : 0.0f;
        for (int k = 0; k < K; k++) {
            float a = A[(size_t)i * lda + k];
            const float *b = B + (size_t)k * ldb;
            for (int j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

float attn__mla_exp2(float x)
{
    return exp2f(x);
}

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* ---- decode --------------------------------------------------------------------- */

static size_t port_decode_ws(int R, int D, int rows)
{
    (void)R;
    return align64(sizeof(float) * (size_t)rows * D) +
           align64(sizeof(float) * ATTN__MLA_KCHUNK * (size_t)D) +
           align64(sizeof(float) * ATTN__MLA_KCHUNK) + align64(sizeof(int32_t) * ATTN__MLA_KCHUNK);
}

static bool port_decode_ok(attn_elem q, attn_elem kv, int R, int D)
{
    (void)q, (void)kv, (void)R, (void)D;
    return true;
}

static void port_decode(const attn__mla_dec *d)
{
    int D = d->D, R = d->R, H = d->H, n = d->nrows;
    char *ws = d->ws;
    float *qf = (float *)ws;
    ws += align64(sizeof(float) * (size_t)n * D);
    float *kb = (float *)ws;
    ws += align64(sizeof(float) * ATTN__MLA_KCHUNK * (size_t)D);
    float *s = (float *)ws;
    ws += align64(sizeof(float) * ATTN__MLA_KCHUNK);
    int32_t *pos = (int32_t *)ws;

    size_t qesz = d->q_elem == ATTN_ELEM_F32 ? 4 : 2;
    for (int i = 0; i < n; i++)
        attn__mla_load_row_f32((const char *)d->q + (size_t)(d->row0 + i) * D * qesz, d->q_elem, D,
                               qf + (size_t)i * D);
    for (int i = 0; i < n; i++) {
        d->m[i] = -INFINITY;
        d->l[i] = 0.0f;
    }
    memset(d->acc, 0, sizeof(float) * (size_t)n * R);

    int total = d->positions ? d->npositions : d->kv_end - d->kv_begin;
    for (int c0 = 0; c0 < total; c0 += ATTN__MLA_KCHUNK) {
        int nk = total - c0 < ATTN__MLA_KCHUNK ? total - c0 : ATTN__MLA_KCHUNK;
        for (int k = 0; k < nk; k++) {
            pos[k] = d->positions ? d->positions[c0 + k] : d->kv_begin + c0 + k;
            attn__mla_load_row_f32(attn__mla_row(d->kv, d->kv_esz, d->bt, pos[k]), d->kv_elem, D,
                                   kb + (size_t)k * D);
        }
        for (int i = 0; i < n; i++) {
            int limit = d->positions ? INT32_MAX : d->first_pos + (d->row0 + i) / H;
            const float *q = qf + (size_t)i * D;
            float mx = -INFINITY;
            for (int k = 0; k < nk; k++) {
                if (pos[k] > limit) {
                    s[k] = -INFINITY;
                    continue;
                }
                const float *kr = kb + (size_t)k * D;
                float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                int e = 0;
                for (; e + 4 <= D; e += 4) {
                    a0 += q[e] * kr[e];
                    a1 += q[e + 1] * kr[e + 1];
                    a2 += q[e + 2] * kr[e + 2];
                    a3 += q[e + 3] * kr[e + 3];
                }
                for (; e < D; e++)
                    a0 += q[e] * kr[e];
                s[k] = (a0 + a1 + a2 + a3) * d->score_mul;
                mx = s[k] > mx ? s[k] : mx;
            }
            if (mx == -INFINITY) continue;
            float mn = d->m[i] > mx ? d->m[i] : mx;
            float alpha = attn__mla_exp2(d->m[i] - mn);
            float *o = d->acc + (size_t)i * R;
            float sum = 0;
            if (alpha != 1.0f)
                for (int r = 0; r < R; r++)
                    o[r] *= alpha;
            for (int k = 0; k < nk; k++) {
                if (s[k] == -INFINITY) continue;
                float p = attn__mla_exp2(s[k] - mn);
                sum += p;
                const float *kr = kb + (size_t)k * D;
                for (int r = 0; r < R; r++)
                    o[r] += p * kr[r];
            }
            d->l[i] = d->l[i] * alpha + sum;
            d->m[i] = mn;
        }
    }
}

/* ---- prefill -------------------------------------------------------------------- */

#define ATTN__PRE_KC 64

static size_t port_prefill_ws(int R, int P, int nope, int V, int nq)
{
    int QK = nope + P;
    int D = R + P;
    return align64(sizeof(float) * (size_t)nope * R) + align64(sizeof(float) * (size_t)R * V) +
           align64(sizeof(float) * ATTN__PRE_KC * (size_t)D) +
           align64(sizeof(float) * ATTN__PRE_KC * (size_t)QK) +
           align64(sizeof(float) * ATTN__PRE_KC * (size_t)V) +
           align64(sizeof(float) * (size_t)nq * QK) + align64(sizeof(float) * (size_t)nq * V) +
           2 * align64(sizeof(float) * (size_t)nq) + align64(sizeof(float) * ATTN__PRE_KC);
}

static void port_prefill(const attn__mla_pre *p)
{
    int R = p->R, P = p->P, N = p->nope, V = p->V, D = R + P, QK = N + P, nq = p->nq;
    char *ws = p->ws;
    float *wk = (float *)ws;
    ws += align64(sizeof(float) * (size_t)N * R);
    float *wv = (float *)ws;
    ws += align64(sizeof(float) * (size_t)R * V);
    float *lat = (float *)ws;
    ws += align64(sizeof(float) * ATTN__PRE_KC * (size_t)D);
    float *kd = (float *)ws;
    ws += align64(sizeof(float) * ATTN__PRE_KC * (size_t)QK);
    float *vd = (float *)ws;
    ws += align64(sizeof(float) * ATTN__PRE_KC * (size_t)V);
    float *qf = (float *)ws;
    ws += align64(sizeof(float) * (size_t)nq * QK);
    float *acc = (float *)ws;
    ws += align64(sizeof(float) * (size_t)nq * V);
    float *m = (float *)ws;
    ws += align64(sizeof(float) * (size_t)nq);
    float *l = (float *)ws;
    ws += align64(sizeof(float) * (size_t)nq);
    float *s = (float *)ws;

    size_t esz = p->q_elem == ATTN_ELEM_F32 ? 4 : 2;
    attn__mla_load_row_f32(p->w_uk, p->q_elem, N * R, wk);
    attn__mla_load_row_f32(p->w_uv, p->q_elem, R * V, wv);
    for (int t = 0; t < nq; t++) {
        attn__mla_load_row_f32((const char *)p->q + (size_t)t * p->q_stride * esz, p->q_elem, QK,
                               qf + (size_t)t * QK);
        m[t] = -INFINITY;
        l[t] = 0;
    }
    memset(acc, 0, sizeof(float) * (size_t)nq * V);
    int nkeys = p->first_pos + nq; /* the last query sees keys [0, first_pos + nq - 1] */
    for (int c0 = 0; c0 < nkeys; c0 += ATTN__PRE_KC) {
        int nk = nkeys - c0 < ATTN__PRE_KC ? nkeys - c0 : ATTN__PRE_KC;
        for (int k = 0; k < nk; k++) {
            float *row = lat + (size_t)k * D;
            attn__mla_load_row_f32(attn__mla_row(p->kv, p->kv_esz, p->bt, c0 + k), p->kv_elem, D,
                                   row);
            if (p->kv_scale != 1.0f)
                for (int i = 0; i < D; i++)
                    row[i] *= p->kv_scale;
            float *kk = kd + (size_t)k * QK;
            for (int n = 0; n < N; n++) {
                const float *w = wk + (size_t)n * R;
                float a = 0;
                for (int i = 0; i < R; i++)
                    a += w[i] * row[i];
                kk[n] = a;
            }
            memcpy(kk + N, row + R, sizeof(float) * (size_t)P);
            float *vv = vd + (size_t)k * V;
            memset(vv, 0, sizeof(float) * (size_t)V);
            for (int i = 0; i < R; i++) {
                const float *w = wv + (size_t)i * V;
                float x = row[i];
                for (int v = 0; v < V; v++)
                    vv[v] += x * w[v];
            }
        }
        int t0 = c0 - p->first_pos; /* earlier queries do not see this chunk */
        if (t0 < 0) t0 = 0;
        for (int t = t0; t < nq; t++) {
            int pos = p->first_pos + t;
            int kmax = pos - c0 + 1 < nk ? pos - c0 + 1 : nk;
            const float *q = qf + (size_t)t * QK;
            float mx = -INFINITY;
            for (int k = 0; k < kmax; k++) {
                const float *kk = kd + (size_t)k * QK;
                float a = 0;
                for (int e = 0; e < QK; e++)
                    a += q[e] * kk[e];
                s[k] = a * p->score_mul;
                mx = s[k] > mx ? s[k] : mx;
            }
            float mn = m[t] > mx ? m[t] : mx;
            float alpha = attn__mla_exp2(m[t] - mn);
            float *o = acc + (size_t)t * V;
            if (alpha != 1.0f)
                for (int v = 0; v < V; v++)
                    o[v] *= alpha;
            float sum = 0;
            for (int k = 0; k < kmax; k++) {
                float pr = attn__mla_exp2(s[k] - mn);
                sum += pr;
                const float *vv = vd + (size_t)k * V;
                for (int v = 0; v < V; v++)
                    o[v] += pr * vv[v];
            }
            l[t] = l[t] * alpha + sum;
            m[t] = mn;
        }
    }
    for (int t = 0; t < nq; t++) {
        float inv = 1.0f / l[t];
        const float *o = acc + (size_t)t * V;
        size_t ob = (size_t)t * p->out_stride;
        for (int v = 0; v < V; v++)
            attn__store_elem(p->out, p->q_elem, ob + (size_t)v, o[v] * inv);
        if (p->lse) p->lse[(size_t)t * p->H] = (float)((m[t] + log2((double)l[t])) * ATTN__LN2);
    }
}

static bool port_usable(void)
{
    return true;
}

const attn__mla_kern attn__mla_kern_portable = {
    .name = "portable",
    .usable = port_usable,
    .decode_ws = port_decode_ws,
    .prefill_ws = port_prefill_ws,
    .decode_ok = port_decode_ok,
    .decode = port_decode,
    .prefill = port_prefill,
    .store_row = attn__mla_store_row,
    .load_row = attn__mla_load_row_f32,
    .gemm = attn__mla_gemm,
};
