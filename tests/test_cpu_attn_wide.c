/* Wide prefill jobs (attn__cpu_isa.wide_rows: the AVX2 variant's jobs of up
 * to ATTN_CPU_WIDE_ROWS rows) against REFERENCE where they differ from
 * 64-row jobs: partial last tiles and odd query counts, key panels that
 * span several blocks (block sizes 7, 16, 128), the causal diagonal inside
 * one job, sliding windows, head groups (G = 80), head sizes that cap the
 * rows (256), fp8 KV, soft-cap, sinks, ALiBi, LSE, cascade, mixed batches,
 * and the path without builder metadata. Every case also runs the portable
 * variant over the same (wide) builder tiles, which it runs in 64-row
 * pieces. Skips (77) where the AVX2 variant is not usable. */
#include <math.h>
#include <stdio.h>

#include "attn_kernel_testutil.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/reference/reference.h"
#include "test.h"

enum { CAUSAL = 1, SOFTCAP = 2, SINKS = 4, ALIBI = 8, LSE = 16, NO_MD = 32 };

typedef struct {
    const char *name;
    attn_dtype dt;
    attn_elem kv;
    int D, kvh, group, bs;
    int nreq;
    int qlen[2], ctx[2]; /* per request: query tokens, keys before them */
    int prefix;          /* cascade: shared leading keys (whole blocks) */
    int window;
    int flags;
} wcase;

static const wcase cases[] = {
    {"bf16 G4 causal odd q",
     ATTN_DTYPE_BF16,
     ATTN_ELEM_BF16,
     128,
     2,
     4,
     16,
     1,
     {301},
     {0},
     0,
     0,
     CAUSAL},
    {"bf16 chunked prefill",
     ATTN_DTYPE_BF16,
     ATTN_ELEM_BF16,
     128,
     1,
     4,
     16,
     1,
     {77},
     {500},
     0,
     0,
     CAUSAL},
    {"f16 G8 D64 bs7", ATTN_DTYPE_FP16, ATTN_ELEM_F16, 64, 2, 8, 7, 1, {131}, {3}, 0, 0, CAUSAL},
    {"bf16 e4m3 window",
     ATTN_DTYPE_BF16,
     ATTN_ELEM_FP8_E4M3,
     128,
     2,
     4,
     16,
     1,
     {200},
     {40},
     0,
     50,
     CAUSAL},
    {"f32 MHA D96 lse",
     ATTN_DTYPE_FP32,
     ATTN_ELEM_F32,
     96,
     2,
     1,
     16,
     1,
     {257},
     {0},
     0,
     0,
     CAUSAL | LSE},
    {"f32 G80 head groups",
     ATTN_DTYPE_FP32,
     ATTN_ELEM_F32,
     64,
     1,
     80,
     16,
     1,
     {9},
     {5},
     0,
     0,
     CAUSAL},
    {"bf16 D256 e5m2 softcap sinks",
     ATTN_DTYPE_BF16,
     ATTN_ELEM_FP8_E5M2,
     256,
     1,
     2,
     16,
     1,
     {70},
     {10},
     0,
     0,
     CAUSAL | SOFTCAP | SINKS},
    {"bf16 non-causal alibi",
     ATTN_DTYPE_BF16,
     ATTN_ELEM_BF16,
     128,
     1,
     4,
     16,
     1,
     {150},
     {0},
     0,
     0,
     ALIBI},
    {"f16 D80 bs128 mixed decode",
     ATTN_DTYPE_FP16,
     ATTN_ELEM_F16,
     80,
     2,
     4,
     128,
     2,
     {260, 1},
     {0, 300},
     0,
     0,
     CAUSAL | LSE},
    {"bf16 cascade",
     ATTN_DTYPE_BF16,
     ATTN_ELEM_BF16,
     128,
     1,
     4,
     16,
     2,
     {70, 90},
     {64, 80},
     64,
     0,
     CAUSAL},
    {"bf16 no metadata",
     ATTN_DTYPE_BF16,
     ATTN_ELEM_BF16,
     128,
     1,
     4,
     16,
     1,
     {199},
     {17},
     0,
     0,
     CAUSAL | NO_MD},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static double tol_of(const wcase *w)
{
    if (w->dt != ATTN_DTYPE_FP32) return 2e-2;
    return attn__elem_is_fp8(w->kv) ? 1e-3 : 1e-4;
}

/* block b of request r: the prefix blocks are shared, the rest are r's own */
static int32_t block_id(const wcase *w, int maxb, int r, int b)
{
    int pre = w->prefix / w->bs;
    return b < pre ? b : pre + r * maxb + b;
}

/* every block of the pool holds random K and V rows */
static void fill_cache(trng *g, const wcase *w, int nblocks, tcache *cache)
{
    tcache_init(cache, w->kv, nblocks, w->bs, w->kvh, w->D, w->D, false);
    if (attn__elem_is_fp8(w->kv)) {
        float base = 1.0f / (w->kv == ATTN_ELEM_FP8_E4M3 ? 300.0f : 20000.0f);
        cache->view.k_scale = base * 1.1f;
        cache->view.v_scale = base * 0.9f;
    }
    float row[512];
    for (int id = 0; id < nblocks; id++)
        for (int o = 0; o < w->bs; o++)
            for (int h = 0; h < w->kvh; h++)
                for (int v = 0; v < 2; v++) {
                    for (int d = 0; d < w->D; d++)
                        row[d] = trng_normal(g) * 0.6f;
                    tcache_put(cache, id, o, h, v, row);
                }
}

/* the builder made tiles of one wide job (so the wide path runs), no
 * larger, and the cascade where asked for */
static void check_tiles(const wcase *w, const attn__cpu_md *m, int maxq, const attn__cpu_isa *avx2)
{
    int widest = 0;
    for (int i = 0; i < m->n_tiles; i++)
        if (m->tiles[i].nq > widest) widest = m->tiles[i].nq;
    int tt = attn__cpu_tile_tokens(w->group);
    CHECK_MSG(widest > tt || maxq <= tt, "%s: widest tile %d tokens, 64-row tiles hold %d", w->name,
              widest, tt);
    CHECK_MSG(widest <= attn__cpu_job_tokens(avx2, w->group, w->D), "%s: tile of %d tokens",
              w->name, widest);
    CHECK_MSG(!w->prefix || m->use_cascade, "%s: no cascade", w->name);
}

static void run_case(trng *g, const wcase *w, const attn__cpu_isa *avx2)
{
    int H = w->kvh * w->group, D = w->D, tokens = 0, maxb = 1, maxq = 0, maxs = 0;
    int32_t qsl[3] = {0}, seq[2];
    for (int r = 0; r < w->nreq; r++) {
        tokens += w->qlen[r];
        qsl[r + 1] = tokens;
        seq[r] = w->ctx[r] + w->qlen[r];
        int nb = (seq[r] + w->bs - 1) / w->bs;
        if (nb > maxb) maxb = nb;
        if (w->qlen[r] > maxq) maxq = w->qlen[r];
        if (seq[r] > maxs) maxs = seq[r];
    }
    int nblocks = w->prefix / w->bs + w->nreq * maxb + maxb;
    int32_t *bt = calloc((size_t)(w->nreq * maxb), sizeof(int32_t));
    tcache cache;
    fill_cache(g, w, nblocks, &cache);
    for (int r = 0; r < w->nreq; r++)
        for (int b = 0; b < maxb; b++)
            bt[r * maxb + b] = block_id(w, maxb, r, b);
    attn_elem qe = attn_dtype_elem(w->dt);
    size_t qes = attn_elem_size(qe), on = (size_t)tokens * H * D;
    void *q = malloc(on * qes), *ref = calloc(on, qes), *out = malloc(on * qes);
    for (size_t i = 0; i < on; i++)
        attn__store_elem(q, qe, i, trng_normal(g) * 0.7f);
    float *sinks = malloc(sizeof(float) * (size_t)H), *slopes = malloc(sizeof(float) * (size_t)H);
    float *ref_lse = malloc(sizeof(float) * (size_t)tokens * H);
    float *lse = malloc(sizeof(float) * (size_t)tokens * H);
    for (int h = 0; h < H; h++) {
        sinks[h] = trng_unif(g, -1.0f, 3.0f);
        slopes[h] = 0.25f * exp2f(-8.0f * (float)(h + 1) / (float)H);
    }
    attn_layer_params lp = {.num_heads = H,
                            .num_kv_heads = w->kvh,
                            .head_size = D,
                            .logits_soft_cap = (w->flags & SOFTCAP) ? 8.0f : 0.0f,
                            .sliding_window = w->window,
                            .sinks = (w->flags & SINKS) ? sinks : NULL,
                            .alibi_slopes = (w->flags & ALIBI) ? slopes : NULL,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = w->dt,
                            .kv_cache_dtype = ATTN_KV_AUTO};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = w->nreq,
                               .num_actual_tokens = tokens,
                               .max_query_len = maxq,
                               .max_seq_len = maxs,
                               .block_table = bt,
                               .block_table_stride = maxb,
                               .causal = (w->flags & CAUSAL),
                               .block_size = w->bs};
    attn_forward_args a = {.layer = &lp,
                           .common = &cm,
                           .q = q,
                           .kv = &cache.view,
                           .out = ref,
                           .lse = (w->flags & LSE) ? ref_lse : NULL};
    CHECK_OK(attn__reference_forward(&a));
    void *bstate = NULL;
    const void *md = NULL;
    attn_builder_init bi = {.desc = &attn__desc_cpu_attn,
                            .layer = &lp,
                            .block_size = w->bs,
                            .num_blocks = nblocks,
                            .max_num_reqs = w->nreq,
                            .max_num_tokens = tokens,
                            .max_blocks_per_req = maxb};
    if (!(w->flags & NO_MD)) {
        CHECK_OK(attn__builder_cpu.create(&bi, &bstate));
        CHECK_OK(attn__builder_cpu.build(bstate, w->prefix, &cm, false, &md));
        check_tiles(w, md, maxq, avx2);
    }
    a.metadata = md;
    const attn__cpu_isa *isas[2] = {avx2, &attn__cpu_isa_portable};
    for (int k = 0; k < 2; k++) {
        memset(out, 0xff, on * qes); /* NaN: every element must be written */
        a.out = out;
        a.lse = (w->flags & LSE) ? lse : NULL;
        CHECK_OK(attn__cpu_attn_forward_isa(isas[k], &a));
        double err = trel_err(out, ref, qe, on), lerr = 0;
        if ((w->flags & LSE))
            for (int i = 0; i < tokens * H; i++) {
                double d = fabs(lse[i] - ref_lse[i]);
                if (!(d <= lerr)) lerr = isnan(d) ? INFINITY : d;
            }
        CHECK_MSG(err <= tol_of(w) && lerr <= tol_of(w), "%s (%s): error %.3g, lse %.3g", w->name,
                  isas[k]->name, err, lerr);
        printf("%-30s %-9s error %.3g lse %.3g\n", w->name, isas[k]->name, err, lerr);
    }
    if (bstate) attn__builder_cpu.destroy(bstate);
    tcache_free(&cache);
    free(bt);
    free(q);
    free(ref);
    free(out);
    free(sinks);
    free(slopes);
    free(ref_lse);
    free(lse);
}

int main(void)
{
    const attn__cpu_isa *avx2 = NULL;
    for (int i = 0; i < attn__cpu_attn_variant_count(); i++)
        if (strcmp(attn__cpu_attn_variant(i)->name, "avx2") == 0) avx2 = attn__cpu_attn_variant(i);
    if (!avx2 || !avx2->usable()) {
        printf("test_cpu_attn_wide: SKIP (the avx2 variant is not usable here)\n");
        return 77;
    }
    /* the builder sizes prefill tiles for the active variant */
    CHECK_OK(attn__cpu_attn_force_variant("avx2"));
    CHECK(avx2->wide_rows > ATTN_CPU_MAX_ROWS);
    CHECK(attn__cpu_job_tokens(avx2, 4, 128) == ATTN_CPU_WIDE_ROWS / 4);
    CHECK(attn__cpu_job_tokens(avx2, 2, 256) == ATTN_CPU_WIDE_BYTES / (8 * 256) / 2);
    CHECK(attn__cpu_job_tokens(&attn__cpu_isa_portable, 4, 128) == attn__cpu_tile_tokens(4));
    trng g = {0x71de0001u};
    for (int i = 0; i < N_CASES; i++)
        run_case(&g, &cases[i], avx2);
    CHECK_OK(attn__cpu_attn_force_variant(NULL));
    return attn_test_finish("test_cpu_attn_wide");
}
