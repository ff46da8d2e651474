/* The CPU_MLA decode and prefill drivers, written once over a small set of
 * fp32 primitives that each vector variant (mla_kern_avx512.c,
 * mla_kern_avx2.c; most of them from mla_vec_tmpl.h) defines before
 * including this file:
 *
 *   k_gemm(M, N, K, A, lda, B, ldb, C, ldc, acc, rowscale)
 *       C[M][N] = (acc ? rowscale_i * C : 0) + A[M][K] . B[K][N]
 *       (rowscale NULL = 1), all fp32 row-major with leading dimensions;
 *   k_load_row(src, elem, n, dst)      n elements of any storage type -> fp32;
 *   k_transpose(src, lds, rows, cols, dst, ldd)   dst[c][r] = src[r][c];
 *   k_softmax(S, lds, M, nk, vis, mul, m, l, alpha)
 *       one online-softmax step in base 2 over a chunk of nk scores per row:
 *       scores S * mul, keys k >= vis[i] masked (vis NULL = all visible);
 *       S becomes the probabilities, alpha the factor for the old sums.
 *
 * and KN(name) to prefix the generated functions. Decode: each chunk of
 * ATTN__MLA_KCHUNK latent rows is converted and transposed once and used by
 * every row of the group (S = Q . K^T, then O = alpha O + P . V with V the
 * latent part of the same rows). Prefill: a chunk of latent rows becomes one
 * head's keys (W_UK . latent^T, plus the rope rows) and values (latent .
 * W_UV), then the request's queries attend to it. */

#define ATTN__PRE_KCHUNK 64

static size_t KN(al)(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

static size_t KN(decode_ws)(int R, int D, int rows)
{
    (void)R;
    size_t kc = ATTN__MLA_KCHUNK;
    return KN(al)(sizeof(float) * (size_t)rows * D) + KN(al)(sizeof(float) * kc * D) +
           KN(al)(sizeof(float) * (size_t)D * kc) + KN(al)(sizeof(float) * (size_t)rows * kc) +
           KN(al)(sizeof(float) * (size_t)rows) + KN(al)(sizeof(int) * (size_t)rows);
}

static void KN(decode)(const attn__mla_dec *d)
{
    const int D = d->D, R = d->R, H = d->H, n = d->nrows, KC = ATTN__MLA_KCHUNK;
    char *ws = d->ws;
    float *qf = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)n * D);
    float *kf = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)KC * D);
    float *kt = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)D * KC);
    float *s = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)n * KC);
    float *alpha = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)n);
    int *vis = (int *)ws;

    size_t qesz = d->q_elem == ATTN_ELEM_F32 ? 4 : 2;
    for (int i = 0; i < n; i++)
        k_load_row((const char *)d->q + (size_t)(d->row0 + i) * D * qesz, d->q_elem, D,
                   qf + (size_t)i * D);
    for (int i = 0; i < n; i++) {
        d->m[i] = -INFINITY;
        d->l[i] = 0.0f;
    }
    memset(d->acc, 0, sizeof(float) * (size_t)n * R);
    /* the first row's last visible position: chunks beyond it need masks */
    int min_limit = d->first_pos + d->row0 / H;
    int total = d->positions ? d->npositions : d->kv_end - d->kv_begin;
    for (int c0 = 0; c0 < total; c0 += KC) {
        int nk = total - c0 < KC ? total - c0 : KC;
        for (int k = 0; k < nk; k++) {
            int pos = d->positions ? d->positions[c0 + k] : d->kv_begin + c0 + k;
            k_load_row(attn__mla_row(d->kv, d->kv_esz, d->bt, pos), d->kv_elem, D,
                       kf + (size_t)k * D);
        }
        k_transpose(kf, (size_t)D, nk, D, kt, (size_t)KC);
        const int *v = NULL;
        int p0 = d->kv_begin + c0;
        if (!d->positions && p0 + nk - 1 > min_limit) {
            for (int i = 0; i < n; i++) {
                int lim = d->first_pos + (d->row0 + i) / H - p0 + 1;
                vis[i] = lim < 0 ? 0 : lim > nk ? nk : lim;
            }
            v = vis;
        }
        k_gemm(n, nk, D, qf, (size_t)D, kt, (size_t)KC, s, (size_t)KC, false, NULL);
        k_softmax(s, (size_t)KC, n, nk, v, d->score_mul, d->m, d->l, alpha);
        k_gemm(n, R, nk, s, (size_t)KC, kf, (size_t)D, d->acc, (size_t)R, true, alpha);
    }
}

static size_t KN(prefill_ws)(int R, int P, int nope, int V, int nq)
{
    size_t KC = ATTN__PRE_KCHUNK, QK = (size_t)(nope + P), D = (size_t)(R + P);
    return KN(al)(sizeof(float) * (size_t)nope * R) + KN(al)(sizeof(float) * (size_t)R * V) +
           KN(al)(sizeof(float) * KC * D) + KN(al)(sizeof(float) * (size_t)R * KC) +
           KN(al)(sizeof(float) * QK * KC) + KN(al)(sizeof(float) * KC * V) +
           KN(al)(sizeof(float) * (size_t)nq * QK) + KN(al)(sizeof(float) * (size_t)nq * V) +
           KN(al)(sizeof(float) * (size_t)nq * KC) + 3 * KN(al)(sizeof(float) * (size_t)nq) +
           KN(al)(sizeof(int) * (size_t)nq);
}

static void KN(prefill)(const attn__mla_pre *p)
{
    const int R = p->R, P = p->P, N = p->nope, V = p->V, D = R + P, QK = N + P, nq = p->nq;
    const int KC = ATTN__PRE_KCHUNK;
    char *ws = p->ws;
    float *wk = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)N * R);
    float *wv = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)R * V);
    float *lf = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)KC * D);
    float *lt = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)R * KC);
    float *kt = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)QK * KC);
    float *vd = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)KC * V);
    float *qf = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)nq * QK);
    float *acc = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)nq * V);
    float *s = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)nq * KC);
    float *m = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)nq);
    float *l = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)nq);
    float *alpha = (float *)ws;
    ws += KN(al)(sizeof(float) * (size_t)nq);
    int *vis = (int *)ws;

    size_t esz = p->q_elem == ATTN_ELEM_F32 ? 4 : 2;
    k_load_row(p->w_uk, p->q_elem, N * R, wk);
    k_load_row(p->w_uv, p->q_elem, R * V, wv);
    for (int t = 0; t < nq; t++) {
        k_load_row((const char *)p->q + (size_t)t * p->q_stride * esz, p->q_elem, QK,
                   qf + (size_t)t * QK);
        m[t] = -INFINITY;
        l[t] = 0.0f;
    }
    memset(acc, 0, sizeof(float) * (size_t)nq * V);
    int nkeys = p->first_pos + nq;
    for (int c0 = 0; c0 < nkeys; c0 += KC) {
        int nk = nkeys - c0 < KC ? nkeys - c0 : KC;
        for (int k = 0; k < nk; k++) {
            float *row = lf + (size_t)k * D;
            k_load_row(attn__mla_row(p->kv, p->kv_esz, p->bt, c0 + k), p->kv_elem, D, row);
            if (p->kv_scale != 1.0f)
                for (int i = 0; i < D; i++)
                    row[i] *= p->kv_scale;
        }
        /* keys^T: W_UK . latent^T for the nope rows, the rope rows as they are */
        k_transpose(lf, (size_t)D, nk, R, lt, (size_t)KC);
        k_gemm(N, nk, R, wk, (size_t)R, lt, (size_t)KC, kt, (size_t)KC, false, NULL);
        if (P > 0) k_transpose(lf + R, (size_t)D, nk, P, kt + (size_t)N * KC, (size_t)KC);
        /* values: latent . W_UV */
        k_gemm(nk, V, R, lf, (size_t)D, wv, (size_t)V, vd, (size_t)V, false, NULL);
        int t0 = c0 - p->first_pos;
        if (t0 < 0) t0 = 0;
        int M = nq - t0;
        bool masked = false;
        for (int t = t0; t < nq; t++) {
            int lim = p->first_pos + t - c0 + 1;
            vis[t] = lim > nk ? nk : lim;
            masked |= lim < nk;
        }
        float *st = s + (size_t)t0 * KC;
        k_gemm(M, nk, QK, qf + (size_t)t0 * QK, (size_t)QK, kt, (size_t)KC, st, (size_t)KC, false,
               NULL);
        k_softmax(st, (size_t)KC, M, nk, masked ? vis + t0 : NULL, p->score_mul, m + t0, l + t0,
                  alpha + t0);
        k_gemm(M, V, nk, st, (size_t)KC, vd, (size_t)V, acc + (size_t)t0 * V, (size_t)V, true,
               alpha + t0);
    }
    for (int t = 0; t < nq; t++) {
        float inv = 1.0f / l[t];
        const float *o = acc + (size_t)t * V;
        size_t ob = (size_t)t * p->out_stride;
        switch (p->q_elem) {
        case ATTN_ELEM_F32:
            for (int v = 0; v < V; v++)
                ((float *)p->out)[ob + v] = o[v] * inv;
            break;
        case ATTN_ELEM_BF16:
            for (int v = 0; v < V; v++)
                ((uint16_t *)p->out)[ob + v] = attn__f32_to_bf16(o[v] * inv);
            break;
        default:
            for (int v = 0; v < V; v++)
                ((uint16_t *)p->out)[ob + v] = attn__f32_to_f16(o[v] * inv);
            break;
        }
        if (p->lse) p->lse[(size_t)t * p->H] = (float)((m[t] + log2((double)l[t])) * ATTN__LN2);
    }
}
