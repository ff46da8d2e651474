/* Helpers for the kernel tests (test_ref_*, test_cpu_attn_*): a paged KV
 * cache in either layout with quantising writes, a seeded RNG, and the
 * error measure the tolerances are stated in (max |a - b| over the max |b|
 * of the whole output). Header-only: each test is one executable. */
#ifndef ATTN_KERNEL_TESTUTIL_H
#define ATTN_KERNEL_TESTUTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "util/numeric.h"

/* ---- RNG (splitmix64) ---------------------------------------------------- */

typedef struct {
    uint64_t s;
} trng;

static inline uint64_t trng_next(trng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, n) */
static inline int trng_int(trng *r, int n)
{
    return n <= 1 ? 0 : (int)(trng_next(r) % (uint64_t)n);
}

/* uniform in [lo, hi) */
static inline float trng_unif(trng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((trng_next(r) >> 40) * (1.0 / 16777216.0));
}

static inline float trng_normal(trng *r)
{
    /* sum of uniforms: cheap and bounded, good enough for test data */
    float s = 0;
    for (int i = 0; i < 4; i++)
        s += trng_unif(r, -1.0f, 1.0f);
    return s * 0.8660254f;
}

/* ---- paged cache ------------------------------------------------------------ */

typedef struct {
    attn_elem elem;
    int nb, bs, kvh, D, Dv;
    bool hnd; /* (2, nb, kvh, bs, D) when true, (2, nb, bs, kvh, D) otherwise */
    void *data;
    float kscale_ph[64], vscale_ph[64];
    attn_kv_view view;
} tcache;

static inline void tcache_init(tcache *c, attn_elem elem, int nb, int bs, int kvh, int D, int Dv,
                               bool hnd)
{
    memset(c, 0, sizeof *c);
    c->elem = elem;
    c->nb = nb;
    c->bs = bs;
    c->kvh = kvh;
    c->D = D;
    c->Dv = Dv ? Dv : D;
    c->hnd = hnd;
    int pitch = D > c->Dv ? D : c->Dv;
    int64_t per = (int64_t)nb * bs * kvh * pitch;
    c->data = calloc((size_t)(2 * per), attn_elem_size(elem));
    attn_kv_view *v = &c->view;
    v->data = c->data;
    v->elem = elem;
    v->num_blocks = nb;
    v->block_size = bs;
    v->num_kv_heads = kvh;
    v->head_size = D;
    v->head_size_v = c->Dv;
    v->k_offset = 0;
    v->v_offset = per;
    v->stride_block = (int64_t)bs * kvh * pitch;
    if (hnd) {
        v->stride_head = (int64_t)bs * pitch;
        v->stride_token = pitch;
    } else {
        v->stride_token = (int64_t)kvh * pitch;
        v->stride_head = pitch;
    }
    v->k_scale = 1.0f;
    v->v_scale = 1.0f;
}

static inline void tcache_free(tcache *c)
{
    free(c->data);
    c->data = NULL;
}

/* Stores row (real values) for (block, offset, head), quantising as the
 * cache's element requires: stored = real / scale for fp8. */
static inline void tcache_put(tcache *c, int block, int off, int h, bool value, const float *row)
{
    const attn_kv_view *v = &c->view;
    int n = value ? c->Dv : c->D;
    int64_t base = (value ? v->v_offset : v->k_offset) + block * v->stride_block +
                   (int64_t)off * v->stride_token + (int64_t)h * v->stride_head;
    float s = 1.0f;
    if (c->elem == ATTN_ELEM_FP8_E4M3 || c->elem == ATTN_ELEM_FP8_E5M2) {
        const float *ph = value ? v->v_scale_per_head : v->k_scale_per_head;
        s = ph ? ph[h] : (value ? v->v_scale : v->k_scale);
    }
    for (int d = 0; d < n; d++)
        attn__store_elem(c->data, c->elem, (size_t)(base + d), row[d] / s);
}

/* ---- comparison ---------------------------------------------------------------- */

/* max |got - want| / max(max |want|, 1e-6) over n elements of type e. */
static inline double trel_err(const void *got, const void *want, attn_elem e, size_t n)
{
    double maxd = 0, maxw = 0;
    for (size_t i = 0; i < n; i++) {
        double g = attn__load_elem(got, e, i), w = attn__load_elem(want, e, i);
        double d = fabs(g - w);
        if (!(d <= maxd)) /* NaN counts as infinite error */
            maxd = isnan(d) ? INFINITY : d;
        if (fabs(w) > maxw) maxw = fabs(w);
    }
    return maxd / (maxw > 1e-6 ? maxw : 1e-6);
}

#endif
