/* Shared fixture of the MLA tests: a seeded random MLA layer (weights,
 * latent cache written through attn_mla_write_latent, queries) over a batch
 * with given query and sequence lengths, blocks assigned in a shuffled
 * order so requests' rows are scattered over the cache. Header-only; each
 * test_mla_*.c includes it once. */
#ifndef ATTN_TESTS_MLA_FIXTURE_H
#define ATTN_TESTS_MLA_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/mla.h"
#include "backends/mla/mla_internal.h"
#include "backends/reference/ref_mla.h"
#include "test.h"
#include "util/numeric.h"

/* Extra elements after each cached row (0 = packed rows as the KV cache
 * lays them out); a test may change it before mla_fx_init. */
static int fx_row_pad = 8;

/* Whether this run also takes the checks that use the automatic variant
 * choice (set by mla_fx_variants) */
static bool fx_autos = true;

/* The CPU_MLA variants a run of an MLA test takes, into vars / *nv: every
 * usable one; or the one named by argv[1] or ATTN_TEST_VARIANT ("active":
 * the best usable one, which also takes the automatic-choice checks);
 * "--variants" lists every variant compiled in, one a line with
 * active|usable|unusable (tests/cpu_variants.cmake makes a ctest of each).
 * -1 to go on, else the exit status: 77 when this CPU cannot run the
 * variant named. */
static inline int mla_fx_variants(int argc, char **argv, const attn__mla_kern **vars, int *nv)
{
    const char *only = argc > 1 ? argv[1] : getenv("ATTN_TEST_VARIANT");
    const attn__mla_kern *best[8];
    int nb = attn__mla_variants(best, 8);
    if (only && !strcmp(only, "--variants")) {
        for (int i = 0; attn__mla_variant_at(i); i++) {
            const attn__mla_kern *k = attn__mla_variant_at(i);
            printf("%s %s\n", k->name,
                   nb > 0 && k == best[0] ? "active"
                   : k->usable()          ? "usable"
                                          : "unusable");
        }
        return 0;
    }
    *nv = nb;
    memcpy(vars, best, sizeof(best[0]) * (size_t)nb);
    if (!only) return -1;
    if (!strcmp(only, "active")) only = best[0]->name;
    for (int i = 0; attn__mla_variant_at(i); i++) {
        const attn__mla_kern *k = attn__mla_variant_at(i);
        if (strcmp(k->name, only)) continue;
        if (!k->usable()) {
            printf("SKIP variant %s: not usable on this CPU (features or ATTN_CPU_MASK)\n", only);
            return 77;
        }
        vars[0] = k;
        *nv = 1;
        fx_autos = k == best[0];
        return -1;
    }
    fprintf(stderr, "no CPU_MLA variant named '%s' (--variants lists them)\n", only);
    return 2;
}

typedef struct mla_fx {
    int H, R, P, N, V, D, bs, nb;
    attn_dtype dt;
    attn_elem qe, kve;
    size_t qesz;
    int nreq, T, bt_stride;
    int32_t *qsl, *sl, *bt;
    int64_t *slots;
    void *cache;
    attn_kv_view kv;
    attn_common_metadata cm;
    attn_layer_params lp;
    void *q;     /* [T][H][N + P] */
    void *q_abs; /* [T][H][D] absorbed, filled by attn_mla_absorb_q */
    void *w_uk;  /* [H][N][R] */
    void *w_uv;  /* [H][R][V] */
    uint64_t rng;
} mla_fx;

static inline uint64_t fx_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline float fx_unif(uint64_t *s)
{
    return (float)((fx_next(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static inline size_t fx_esz(attn_elem e)
{
    return e == ATTN_ELEM_F32 ? 4 : (e == ATTN_ELEM_F16 || e == ATTN_ELEM_BF16) ? 2 : 1;
}

static inline void *fx_rand_buf(mla_fx *f, size_t n, attn_elem e, float amp)
{
    void *p = malloc(n * fx_esz(e) + 64);
    for (size_t i = 0; i < n; i++)
        attn__store_elem(p, e, i, fx_unif(&f->rng) * amp);
    return p;
}

/* dims: H, R (kv_lora_rank), P (rope), N (qk_nope), V (v_head_dim). */
static inline void mla_fx_init(mla_fx *f, int H, int R, int P, int N, int V, attn_dtype dt,
                               attn_elem kve, int bs, int nreq, const int *qlens,
                               const int *seqlens, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->H = H, f->R = R, f->P = P, f->N = N, f->V = V, f->D = R + P;
    f->dt = dt;
    f->qe = attn_dtype_elem(dt);
    f->qesz = fx_esz(f->qe);
    f->kve = kve;
    f->bs = bs;
    f->nreq = nreq;
    f->rng = seed;
    f->qsl = calloc((size_t)nreq + 1, sizeof(int32_t));
    f->sl = calloc((size_t)nreq + 1, sizeof(int32_t));
    int maxb = 1, totb = 0;
    for (int r = 0; r < nreq; r++) {
        f->qsl[r + 1] = f->qsl[r] + qlens[r];
        f->sl[r] = seqlens[r];
        int b = (seqlens[r] + bs - 1) / bs;
        maxb = b > maxb ? b : maxb;
        totb += b;
    }
    f->T = f->qsl[nreq];
    f->bt_stride = maxb + 1;
    f->nb = totb + 3;
    f->bt = malloc(sizeof(int32_t) * (size_t)nreq * f->bt_stride + 4);
    /* a shuffled block order */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)f->nb);
    for (int i = 0; i < f->nb; i++)
        perm[i] = i;
    for (int i = f->nb - 1; i > 0; i--) {
        int j = (int)(fx_next(&f->rng) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int next = 0;
    for (int r = 0; r < nreq; r++)
        for (int b = 0; b < f->bt_stride; b++)
            f->bt[r * f->bt_stride + b] = b < (seqlens[r] + bs - 1) / bs ? perm[next++] : 0;
    free(perm);

    f->kv.elem = kve;
    f->kv.num_blocks = f->nb;
    f->kv.block_size = bs;
    f->kv.num_kv_heads = 1;
    f->kv.head_size = f->D;
    f->kv.head_size_v = R;
    f->kv.stride_token = f->D + fx_row_pad; /* the kernels must honour the stride */
    f->kv.stride_block = (int64_t)bs * f->kv.stride_token;
    f->kv.stride_head = f->kv.stride_token;
    f->kv.k_scale = f->kv.v_scale =
        (kve == ATTN_ELEM_FP8_E4M3 || kve == ATTN_ELEM_FP8_E5M2) ? 0.0625f : 1.0f;
    size_t cache_bytes = (size_t)f->nb * (size_t)f->kv.stride_block * fx_esz(kve);
    f->cache = aligned_alloc(64, (cache_bytes + 63) & ~(size_t)63);
    memset(f->cache, 0x7f, cache_bytes); /* garbage in padding and unused rows */
    f->kv.data = f->cache;

    /* every row of every sequence, written through the public write path */
    int tot = 0;
    for (int r = 0; r < nreq; r++)
        tot += seqlens[r];
    f->slots = malloc(sizeof(int64_t) * (size_t)(tot > 0 ? tot : 1));
    int k = 0;
    for (int r = 0; r < nreq; r++)
        for (int j = 0; j < seqlens[r]; j++)
            f->slots[k++] = (int64_t)f->bt[r * f->bt_stride + j / bs] * bs + j % bs;
    void *lat = fx_rand_buf(f, (size_t)tot * R, f->qe, 1.0f);
    void *rope = fx_rand_buf(f, (size_t)tot * (P > 0 ? P : 1), f->qe, 1.0f);
    attn_status st = attn_mla_write_latent(&f->kv, f->slots, tot, lat, rope, dt);
    if (st != ATTN_OK)
        fprintf(stderr, "fixture: write_latent %s: %s\n", attn_status_name(st), attn_last_error());
    free(lat);
    free(rope);

    f->cm.query_start_loc = f->qsl;
    f->cm.seq_lens = f->sl;
    f->cm.num_reqs = nreq;
    f->cm.num_actual_tokens = f->T;
    for (int r = 0; r < nreq; r++) {
        f->cm.max_query_len = qlens[r] > f->cm.max_query_len ? qlens[r] : f->cm.max_query_len;
        f->cm.max_seq_len = seqlens[r] > f->cm.max_seq_len ? seqlens[r] : f->cm.max_seq_len;
    }
    f->cm.block_table = f->bt;
    f->cm.block_table_stride = f->bt_stride;
    f->cm.causal = true;
    f->cm.block_size = bs;

    f->lp.num_heads = H;
    f->lp.num_kv_heads = 1;
    f->lp.head_size = f->D;
    f->lp.dtype = dt;
    f->lp.kv_cache_dtype = ATTN_KV_AUTO;
    f->lp.kv_lora_rank = R;
    f->lp.qk_rope_head_dim = P;
    f->lp.qk_nope_head_dim = N;
    f->lp.v_head_dim = V;

    f->q = fx_rand_buf(f, (size_t)(f->T > 0 ? f->T : 1) * H * (N + P), f->qe, 1.0f);
    f->w_uk = fx_rand_buf(f, (size_t)H * N * R, f->qe, 1.0f / sqrtf((float)R));
    f->w_uv = fx_rand_buf(f, (size_t)H * R * V, f->qe, 1.0f / sqrtf((float)R));
    f->q_abs = malloc((size_t)(f->T > 0 ? f->T : 1) * H * f->D * f->qesz + 64);
    if (f->T > 0) {
        st = attn_mla_absorb_q(&f->lp, f->T, f->q, f->w_uk, f->q_abs);
        if (st != ATTN_OK)
            fprintf(stderr, "fixture: absorb %s: %s\n", attn_status_name(st), attn_last_error());
    }
}

static inline void mla_fx_free(mla_fx *f)
{
    free(f->qsl), free(f->sl), free(f->bt), free(f->slots), free(f->cache), free(f->q),
        free(f->q_abs), free(f->w_uk), free(f->w_uv);
    memset(f, 0, sizeof *f);
}

static inline attn_mla_args mla_fx_args(const mla_fx *f, bool mha, void *out, float *lse)
{
    attn_mla_args a;
    memset(&a, 0, sizeof a);
    a.layer = &f->lp;
    a.common = &f->cm;
    a.kv = &f->kv;
    a.q = mha ? f->q : f->q_abs;
    a.out = out;
    a.lse = lse;
    a.w_uk = f->w_uk;
    a.w_uv = f->w_uv;
    return a;
}

/* max |x - y| over max |y| for n elements of type e (y the reference). */
static inline double fx_rel_err(const void *x, const void *y, attn_elem e, size_t n)
{
    double mag = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        double a = attn__load_elem(x, e, i), b = attn__load_elem(y, e, i);
        mag = fabs(b) > mag ? fabs(b) : mag;
        double d = fabs(a - b);
        if (d > err || isnan(d)) err = isnan(d) ? INFINITY : d;
    }
    return err / (mag > 1e-30 ? mag : 1.0);
}

static inline double fx_lse_err(const float *x, const float *y, size_t n)
{
    double err = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(x[i]) && isinf(y[i]) && (x[i] < 0) == (y[i] < 0)) continue;
        double d = fabs((double)x[i] - y[i]);
        if (d > err || isnan(d)) err = isnan(d) ? INFINITY : d;
    }
    return err;
}

#endif
