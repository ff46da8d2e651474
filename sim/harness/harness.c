/* Synthetic inputs, stand-ins, checksums and the engine wrapper (see
 * harness.h); the REFERENCE re-run is in reference.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/convert.h"
#include "attn/dcp.h"
#include "attn/platform.h"
#include "harness/harness_impl.h"
#include "util/check.h"

enum { ATTN__HNS_CHUNK = 256 }; /* floats converted at a time */

static const char *const attn__hns_stand_ins[] = {"CPU_ATTN", "REFERENCE", NULL};
static const char *const attn__hns_stand_ins_mla[] = {"CPU_MLA", NULL};

/* Deterministic synthetic values in [-1, 1) from (seed, stream, index). */
static inline float attn__hns_synth(uint64_t seed, uint64_t stream, uint64_t i)
{
    uint64_t z = seed ^ (stream * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / 8388608.0 - 1.0);
}

/* n values of stream `stream` scaled by `scale`, into buf from offset 0. */
static void attn__hns_fill_flat(uint64_t seed, void *buf, attn_elem el, size_t n, uint64_t stream,
                                float scale)
{
    float tmp[ATTN__HNS_CHUNK];
    for (size_t i = 0; i < n; i += ATTN__HNS_CHUNK) {
        size_t m = n - i < ATTN__HNS_CHUNK ? n - i : ATTN__HNS_CHUNK;
        for (size_t j = 0; j < m; j++)
            tmp[j] = attn__hns_synth(seed, stream, i + j) * scale;
        attn_elem_from_f32(buf, el, i, tmp, m);
    }
}

static attn_status attn__hns_weights(void *user, const attn_engine_weights *w)
{
    const attn__harness *h = user;
    uint64_t seed = h->cfg.seed;
    if (w->sinks)
        for (int i = 0; i < w->spec->num_heads; i++)
            w->sinks[i] = attn__hns_synth(seed, 0x51, (uint64_t)i);
    if (w->w_uk) {
        float su = 1.0f / sqrtf((float)w->spec->kv_lora_rank + 1.0f);
        attn__hns_fill_flat(seed, w->w_uk, w->elem, w->n_uk, 0x55, su);
        attn__hns_fill_flat(seed, w->w_uv, w->elem, w->n_uv, 0x56, su);
    }
    return ATTN_OK;
}

/* Rows of `dim` values per (token, head) from the tokens' (request,
 * position): a token's values do not depend on the batch it is in. */
static void attn__hns_fill_rows(uint64_t seed, const attn_engine_layer_io *io, void *buf, int heads,
                                int dim, uint64_t stream)
{
    float tmp[ATTN__HNS_CHUNK];
    for (int t = 0; t < io->num_tokens; t++) {
        uint64_t base = (io->token_req_ids[t] << 24) ^ (uint64_t)io->positions[t];
        for (int hd = 0; hd < heads; hd++) {
            size_t row = ((size_t)t * (size_t)heads + (size_t)hd) * (size_t)dim;
            uint64_t rs = stream ^ ((uint64_t)hd << 56);
            for (int d0 = 0; d0 < dim; d0 += ATTN__HNS_CHUNK) {
                int m = dim - d0 < ATTN__HNS_CHUNK ? dim - d0 : ATTN__HNS_CHUNK;
                for (int j = 0; j < m; j++)
                    tmp[j] = attn__hns_synth(seed, rs, base * 1024 + (uint64_t)(d0 + j));
                attn_elem_from_f32(buf, io->elem, row + (size_t)d0, tmp, (size_t)m);
            }
        }
    }
}

static attn_status attn__hns_inputs(void *user, const attn_engine_layer_io *io)
{
    const attn__harness *h = user;
    uint64_t layer = (uint64_t)io->layer << 40;
    attn__hns_fill_rows(h->cfg.seed, io, io->k, io->k_heads, io->k_dim, layer | 1);
    attn__hns_fill_rows(h->cfg.seed, io, io->v, io->v_heads, io->v_dim, layer | 2);
    attn__hns_fill_rows(h->cfg.seed, io, io->q, io->q_heads, io->q_dim, layer | 3);
    return ATTN_OK;
}

static attn_status attn__hns_outputs(void *user, const attn_engine_layer_io *io)
{
    attn__harness *h = user;
    size_t n = (size_t)io->num_tokens * (size_t)io->q_heads * (size_t)io->out_dim;
    double sum = 0;
    bool finite = true;
    float tmp[ATTN__HNS_CHUNK];
    for (size_t i = 0; i < n; i += ATTN__HNS_CHUNK) {
        size_t m = n - i < ATTN__HNS_CHUNK ? n - i : ATTN__HNS_CHUNK;
        attn_elem_to_f32(tmp, io->out, io->elem, i, m);
        for (size_t j = 0; j < m; j++) {
            finite = finite && isfinite(tmp[j]);
            sum += tmp[j];
        }
    }
    /* Layers add up in the order they run, KV groups and encoder groups
     * apart, as two running sums. */
    double *acc = io->encoder ? &h->enc_sum : &h->kv_sum;
    *acc += sum;
    h->finite = h->finite && finite;
    return h->cfg.verify ? attn__hns_ref_check(h, io) : ATTN_OK;
}

attn_status attn__harness_create(const attn__harness_config *c, attn__harness **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(c);
    attn__harness *h = calloc(1, sizeof *h);
    if (!h) return attn_set_error(ATTN_OUT_OF_MEMORY, "harness: out of memory");
    h->cfg = *c;
    h->finite = true;
    if (c->stand_ins || c->verify) {
        attn_status st = attn_platform_open("cpu", &h->cpu);
        if (st != ATTN_OK) {
            free(h);
            return attn_wrap_error(st, "harness: CPU platform for the stand-in kernels");
        }
    }
    *out = h;
    return ATTN_OK;
}

void attn__harness_free(attn__harness *h)
{
    if (!h) return;
    attn__hns_ref_free(h);
    attn_platform_free(h->cpu);
    free(h);
}

void attn__harness_configure(attn__harness *h, attn_engine_config *cfg)
{
    cfg->io.user = h;
    cfg->io.weights = attn__hns_weights;
    cfg->io.inputs = attn__hns_inputs;
    cfg->io.outputs = attn__hns_outputs;
    if (h->cfg.stand_ins) {
        cfg->stand_in_platform = h->cpu;
        cfg->stand_ins = attn__hns_stand_ins;
        cfg->stand_ins_mla = attn__hns_stand_ins_mla;
    }
}

attn_status attn__harness_attach(attn__harness *h, const attn_engine *e)
{
    attn__hns_ref_free(h);
    return h->cfg.verify ? attn__hns_ref_attach(h, e) : ATTN_OK;
}

attn_status attn__harness_engine_create(attn__harness *h, attn_engine_config *cfg,
                                        attn_engine **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(h);
    ATTN__CHECK_NULL(cfg);
    if (h->cfg.verify && cfg->dcp_comm && attn_comm_size(cfg->dcp_comm) > 1)
        return attn_set_error(ATTN_UNSUPPORTED,
                              "DCP: --verify is not supported (REFERENCE would read only this "
                              "rank's share of the KV cache)");
    attn__harness_configure(h, cfg);
    attn_status st = attn_engine_create(cfg, out);
    if (st == ATTN_OK) st = attn__harness_attach(h, *out);
    return st;
}

attn_status attn__harness_step(attn__harness *h, attn_engine *e, attn_engine_step_stats *st,
                               attn__harness_stats *hs)
{
    h->kv_sum = h->enc_sum = h->max_diff = 0;
    h->finite = true;
    attn_status s = attn_engine_step(e, st);
    if (hs) {
        hs->output_checksum = h->kv_sum + h->enc_sum;
        hs->output_finite = h->finite;
        hs->max_abs_diff = h->max_diff;
    }
    return s;
}
