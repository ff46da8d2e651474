/* Synthetic traffic: a seeded, deterministic request source.
 *
 * Contract: the object owns its whole random state (xoshiro256**, seeded by
 * splitmix64 from the seed), so two generators with the same config produce
 * the same requests regardless of anything else in the process. Arrivals
 * per step are Poisson (Knuth's product method, in chunks of mean <= 32 so
 * exp(-mean) never underflows); lengths are uniform and inclusive. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine.h"
#include "util/error.h"

struct attn_traffic {
    attn_traffic_config cfg;
    uint64_t s[4];
    int pending; /* arrivals not yet handed out */
};

void attn_traffic_config_init(attn_traffic_config *c)
{
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->rate = 1.0;
    c->prompt_min = 32;
    c->prompt_max = 512;
    c->output_min = 16;
    c->output_max = 128;
    c->num_prefixes = 1;
}

static uint64_t attn__rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t attn__next(attn_traffic *t)
{
    uint64_t *s = t->s;
    uint64_t r = attn__rotl(s[1] * 5, 7) * 9, u = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= u;
    s[3] = attn__rotl(s[3], 45);
    return r;
}

static double attn__uniform(attn_traffic *t)
{
    return (double)(attn__next(t) >> 11) * (1.0 / 9007199254740992.0);
}

static int attn__between(attn_traffic *t, int lo, int hi)
{
    return lo + (int)(attn__next(t) % (uint64_t)(hi - lo + 1));
}

static int attn__poisson(attn_traffic *t, double mean)
{
    int k = 0;
    while (mean > 0) {
        double m = mean > 32 ? 32 : mean;
        mean -= m;
        double limit = exp(-m), p = attn__uniform(t);
        while (p > limit) {
            k++;
            p *= attn__uniform(t);
        }
    }
    return k;
}

attn_status attn_traffic_create(const attn_traffic_config *c, attn_traffic **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(c);
    if (!(c->rate >= 0 && c->rate <= 1e6) || c->prompt_min < 1 || c->prompt_max < c->prompt_min ||
        c->output_min < 1 || c->output_max < c->output_min ||
        !(c->prefix_fraction >= 0 && c->prefix_fraction <= 1) || c->prefix_len < 0 ||
        (c->prefix_fraction > 0 && c->num_prefixes < 1))
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "traffic: rate %g (0..1e6), prompt %d..%d, output %d..%d (>= 1, "
                          "min <= max), prefix fraction %g (0..1), prefix length %d, %d prefixes",
                          c->rate, c->prompt_min, c->prompt_max, c->output_min, c->output_max,
                          c->prefix_fraction, c->prefix_len, c->num_prefixes);
    attn_traffic *t = calloc(1, sizeof *t);
    if (!t) return attn__fail(ATTN_OUT_OF_MEMORY, "traffic: out of memory");
    t->cfg = *c;
    uint64_t z = c->seed;
    for (int i = 0; i < 4; i++) {
        z += 0x9e3779b97f4a7c15ull;
        uint64_t x = z;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        t->s[i] = x ^ (x >> 31);
    }
    *out = t;
    return ATTN_OK;
}

void attn_traffic_free(attn_traffic *t)
{
    free(t);
}

int attn_traffic_next(attn_traffic *t, attn_request_desc *out, int max)
{
    if (!t || !out || max <= 0) return 0;
    t->pending += attn__poisson(t, t->cfg.rate);
    int n = t->pending < max ? t->pending : max;
    const attn_traffic_config *c = &t->cfg;
    for (int i = 0; i < n; i++) {
        attn_request_desc *r = &out[i];
        memset(r, 0, sizeof *r);
        r->prompt_len = attn__between(t, c->prompt_min, c->prompt_max);
        r->output_len = attn__between(t, c->output_min, c->output_max);
        if (c->prefix_fraction > 0 && c->prefix_len > 0 && attn__uniform(t) < c->prefix_fraction) {
            r->prefix_id = 1 + attn__between(t, 0, c->num_prefixes - 1);
            r->prefix_len = c->prefix_len;
            if (r->prompt_len <= c->prefix_len) r->prompt_len = c->prefix_len + 1;
        }
    }
    t->pending -= n;
    return n;
}
