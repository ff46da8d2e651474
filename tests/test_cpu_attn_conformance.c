/* Every CPU_ATTN variant usable here against REFERENCE on seeded random
 * configurations covering every option the descriptor claims: each head
 * size of the list, block sizes (multiples of 16), MHA/GQA/MQA, lengths
 * from 1 to 8k, mixed decode/prefill batches, speculative decodes, split-KV
 * decodes, cascade prefixes, sinks, sliding windows, soft-cap, ALiBi, fp8
 * e4m3/e5m2 KV with per-tensor and per-head scales, fp32/fp16/bf16, each
 * attention type (cross attention, encoder with and without a cache),
 * causal and non-causal, HND and NHD strides, with and without builder
 * metadata, and the LSE output.
 *
 * Tolerance: each variant's documented error against REFERENCE for the
 * class of call (attn__cpu_attn_variant_error: max |out - ref| / max |ref|
 * over the whole output, fp8 caches against REFERENCE reading the same fp8
 * cache; LSE: absolute error of the same size), per class fp32, fp32 over
 * an fp8 cache, fp16/bf16. The worst error per variant and class is
 * printed. Under ATTN_SANITIZED the sizes shrink (same number of
 * configurations).
 *
 *   test_cpu_attn_conformance            every variant usable here
 *   test_cpu_attn_conformance VARIANT    that variant only ("active": the one
 *                                        calls use here); exit 77 when this
 *                                        CPU cannot run it. ATTN_TEST_VARIANT
 *                                        does the same without an argument
 *   test_cpu_attn_conformance --variants the variants compiled in, one a line
 *                                        with active|usable|unusable
 *                                        (tests/cpu_variants.cmake makes a
 *                                        ctest of each) */
#include <stdio.h>

#include "attn_kernel_testutil.h"
#include "backends/cpu/cpu_attn.h"
#include "backends/reference/reference.h"
#include "test.h"

#ifdef ATTN_SANITIZED
#define COST_CAP 3.0e6
#else
#define COST_CAP 6.0e6
#endif
#define N_CONFIGS 320
#define MAX_REQ   8

static const int head_sizes[] = {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512};
#define N_HEAD_SIZES ((int)(sizeof head_sizes / sizeof head_sizes[0]))

typedef struct {
    attn_dtype dtype;
    attn_elem kv_elem;
    bool per_head_scale;
    int D, bs, kvh, group;
    attn_attn_type type;
    bool causal, direct, nhd, use_md, lse;
    int window;
    bool sinks, softcap, alibi;
    int nreq;
    int qlen[MAX_REQ], kvlen[MAX_REQ];
    int prefix; /* cascade: shared prefix tokens (whole blocks) */
    int spec;   /* speculative tokens (decode threshold - 1) */
    int threads_hint;
} config;

/* coverage counters */
enum {
    COV_FP32,
    COV_FP16,
    COV_BF16,
    COV_E4M3,
    COV_E5M2,
    COV_PERHEAD,
    COV_DEC,
    COV_ENC,
    COV_ENC_ONLY,
    COV_CROSS,
    COV_NONCAUSAL,
    COV_DIRECT,
    COV_WINDOW,
    COV_SINK,
    COV_SOFTCAP,
    COV_ALIBI,
    COV_CASCADE,
    COV_SPLIT,
    COV_MIXED,
    COV_SPEC,
    COV_MQA,
    COV_GQA,
    COV_MHA,
    COV_LONG8K,
    COV_NHD,
    COV_NOMD,
    COV_LSE,
    COV_COUNT
};
static const char *cov_names[COV_COUNT] = {"fp32",
                                           "fp16",
                                           "bf16",
                                           "fp8_e4m3",
                                           "fp8_e5m2",
                                           "per-head scales",
                                           "decoder",
                                           "encoder",
                                           "encoder_only",
                                           "encoder_decoder",
                                           "non-causal",
                                           "direct K/V",
                                           "sliding window",
                                           "sinks",
                                           "soft-cap",
                                           "alibi",
                                           "cascade",
                                           "split-KV",
                                           "mixed batch",
                                           "spec decode",
                                           "MQA",
                                           "GQA",
                                           "MHA",
                                           "context >= 7k",
                                           "NHD strides",
                                           "no builder md",
                                           "lse"};
static int cov[COV_COUNT];

static double cost_of(const config *c)
{
    double x = 0;
    int heads = c->kvh * c->group;
    for (int r = 0; r < c->nreq; r++)
        x += (double)c->qlen[r] * c->kvlen[r] * heads * 2.0 * c->D;
    return x;
}

/* at most 3 requests, each a decode of 1 + spec tokens over at most maxkv keys */
static void short_decodes(config *c, int maxkv)
{
    if (c->nreq > 3) c->nreq = 3;
    for (int r = 0; r < c->nreq; r++) {
        if (c->qlen[r] > 1 + c->spec) c->qlen[r] = 1 + c->spec;
        if (c->kvlen[r] > maxkv) c->kvlen[r] = maxkv;
        if (c->kvlen[r] < c->qlen[r]) c->kvlen[r] = c->qlen[r];
    }
}

static void gen(trng *g, int idx, config *c)
{
    memset(c, 0, sizeof *c);
    int dt = trng_int(g, 3);
    c->dtype = dt == 0 ? ATTN_DTYPE_FP32 : dt == 1 ? ATTN_DTYPE_FP16 : ATTN_DTYPE_BF16;
    int kvk = trng_int(g, 5);
    c->kv_elem =
        kvk <= 2 ? attn_dtype_elem(c->dtype) : (kvk == 3 ? ATTN_ELEM_FP8_E4M3 : ATTN_ELEM_FP8_E5M2);
    c->per_head_scale = attn__elem_is_fp8(c->kv_elem) && trng_int(g, 2);
    c->D = head_sizes[idx % N_HEAD_SIZES];
    c->bs = 16 * (1 + trng_int(g, 4)); /* 16..64 */
    if (trng_int(g, 6) == 0) c->bs = 128;
    static const int kvhs[] = {1, 1, 2, 2, 4, 8};
    static const int groups[] = {1, 2, 4, 4, 8, 16};
    c->kvh = kvhs[trng_int(g, 6)];
    c->group = groups[trng_int(g, 6)];
    if (trng_int(g, 12) == 0) c->group = 80; /* MQA with more heads than one tile's rows */
    int ty = trng_int(g, 10);
    c->type = ty < 6 ? ATTN_TYPE_DECODER
                     : (ty == 6 ? ATTN_TYPE_ENCODER
                                : (ty == 7 ? ATTN_TYPE_ENCODER_ONLY : ATTN_TYPE_ENCODER_DECODER));
    c->causal = c->type == ATTN_TYPE_DECODER ? trng_int(g, 6) != 0 : false;
    c->direct =
        (c->type == ATTN_TYPE_ENCODER || c->type == ATTN_TYPE_ENCODER_ONLY) && trng_int(g, 2);
    if (c->direct) c->kv_elem = attn_dtype_elem(c->dtype), c->per_head_scale = false;
    c->nhd = trng_int(g, 8) == 0;
    c->use_md = trng_int(g, 6) != 0;
    c->lse = trng_int(g, 2);
    c->window = trng_int(g, 5) == 0 ? 1 + trng_int(g, 300) : 0;
    c->sinks = trng_int(g, 4) == 0;
    c->softcap = trng_int(g, 6) == 0;
    c->alibi = trng_int(g, 6) == 0;
    c->spec = trng_int(g, 4) == 0 ? 1 + trng_int(g, 3) : 0;
    static const int thr[] = {0, 1, 4, 16};
    c->threads_hint = thr[trng_int(g, 4)];
    c->nreq = 1 + trng_int(g, 6);
    int longmode = trng_int(g, 4) == 0; /* a few long contexts */
    if (longmode) c->nreq = 1 + trng_int(g, 2);
    bool cascade = c->type == ATTN_TYPE_DECODER && trng_int(g, 4) == 0;
    if (cascade) {
        c->nreq = 2 + trng_int(g, 5);
        c->prefix = c->bs * (1 + trng_int(g, longmode ? 100 : 12));
        c->use_md = true;
    }
    for (int r = 0; r < c->nreq; r++) {
        int kind = trng_int(g, 3); /* 0 decode, 1 short prefill, 2 chunked prefill */
        int kv = longmode ? (kind == 0 ? 4096 + trng_int(g, 4097) : 1 + trng_int(g, 2000))
                          : 1 + trng_int(g, 700);
        int q = kind == 0 ? 1 + (c->spec ? trng_int(g, c->spec + 1) : 0)
                          : (kind == 1 ? kv : 1 + trng_int(g, 80));
        if (q > kv) q = kv;
        if (cascade) kv = c->prefix + trng_int(g, 150) + q;
        if (c->type == ATTN_TYPE_ENCODER || c->type == ATTN_TYPE_ENCODER_ONLY) {
            q = 1 + trng_int(g, 120);
            kv = q;
        } else if (c->type == ATTN_TYPE_ENCODER_DECODER) {
            q = 1 + trng_int(g, 24);
            kv = 1 + trng_int(g, longmode ? 3000 : 600);
            if (trng_int(g, 20) == 0) kv = 0; /* an empty encoder */
        }
        c->qlen[r] = q;
        c->kvlen[r] = kv;
    }
    /* every tenth configuration: decodes over 7k..8k keys */
    if (idx % 10 == 5) {
        c->type = ATTN_TYPE_DECODER;
        c->direct = false;
        c->prefix = 0;
        c->nreq = 1 + trng_int(g, 2);
        c->kvh = 1 + trng_int(g, 2);
        if (c->D > 128) c->D = 64;
        for (int r = 0; r < c->nreq; r++) {
            c->kvlen[r] = 7000 + trng_int(g, 1193);
            c->qlen[r] = 1 + (c->spec ? trng_int(g, c->spec + 1) : 0);
        }
    }
    /* order: fewer KV heads, shorter prefills, smaller groups, shorter
     * everything (long decodes and GQA ratios survive as long as possible) */
    while (cost_of(c) > COST_CAP) {
        bool long_q = false;
        for (int r = 0; r < c->nreq; r++)
            long_q |= c->qlen[r] > 16;
        if (c->kvh > 2 || (c->kvh > 1 && c->group == 1)) {
            c->kvh /= 2;
        } else if (long_q || (c->group <= 2 || c->group == 80)) {
            for (int r = 0; r < c->nreq; r++) {
                if (c->qlen[r] > 1 && (c->qlen[r] > 16 || !long_q)) {
                    int nq = (c->qlen[r] + 1) / 2;
                    if (c->type == ATTN_TYPE_DECODER)
                        c->kvlen[r] -= c->qlen[r] - nq; /* keep the context before */
                    else if (c->type != ATTN_TYPE_ENCODER_DECODER)
                        c->kvlen[r] = nq;
                    c->qlen[r] = nq;
                } else if (!long_q && c->kvlen[r] > 1) {
                    c->kvlen[r] = (c->kvlen[r] + 1) / 2;
                }
            }
            if (c->prefix) {
                int minfirst = 1 << 30;
                for (int r = 0; r < c->nreq; r++)
                    if (c->kvlen[r] - c->qlen[r] < minfirst) minfirst = c->kvlen[r] - c->qlen[r];
                if (c->prefix > minfirst) c->prefix = minfirst / c->bs * c->bs;
            }
        } else if (c->group > 1) {
            c->group /= 2;
        } else {
            c->kvh = 1;
        }
    }
    /* every twentieth decoder configuration without a cascade: bf16 over an
     * fp8 cache, head size 128, 8 query heads per KV head, short contexts
     * (Llama-70B-like decodes: the amx-bf16 tile path's 8-row fp8 jobs; set
     * after the cost cap, which would halve the group) */
    if (idx % 20 == 7 && c->type == ATTN_TYPE_DECODER && c->prefix == 0) {
        c->dtype = ATTN_DTYPE_BF16;
        c->kv_elem = (idx / 20) % 2 ? ATTN_ELEM_FP8_E5M2 : ATTN_ELEM_FP8_E4M3;
        c->D = 128;
        c->kvh = 1;
        c->group = 8;
        short_decodes(c, 100);
    }
    /* and ten later: bf16 over a bf16 cache with 12 KV heads, so decode
     * units of several KV heads run (8 heads, then 4: run_rows_heads)
     * across block boundaries */
    if (idx % 20 == 17 && c->type == ATTN_TYPE_DECODER && c->prefix == 0) {
        c->dtype = ATTN_DTYPE_BF16;
        c->kv_elem = ATTN_ELEM_BF16;
        c->per_head_scale = false;
        c->direct = false;
        c->D = 64;
        c->kvh = 12;
        c->group = 2;
        short_decodes(c, 300);
    }
}

static void describe(const config *c, char *buf, size_t n)
{
    int o = snprintf(buf, n,
                     "%s kv=%s%s D=%d bs=%d heads=%d/%d %s%s%s%s win=%d%s%s%s%s pre=%d "
                     "spec=%d reqs=[",
                     attn_dtype_name(c->dtype), attn_elem_name(c->kv_elem),
                     c->per_head_scale ? "(per-head)" : "", c->D, c->bs, c->kvh * c->group, c->kvh,
                     attn_attn_type_name(c->type), c->causal ? "" : " non-causal",
                     c->direct ? " direct" : "", c->nhd ? " NHD" : "", c->window,
                     c->sinks ? " sinks" : "", c->softcap ? " softcap" : "",
                     c->alibi ? " alibi" : "", c->use_md ? "" : " no-md", c->prefix, c->spec);
    for (int r = 0; r < c->nreq && o < (int)n; r++)
        o += snprintf(buf + o, n - (size_t)o, "%s%d/%d", r ? " " : "", c->qlen[r], c->kvlen[r]);
    if (o < (int)n) snprintf(buf + o, n - (size_t)o, "]");
}

enum { CLS_FP32 = ATTN_CPU_ERR_FP32, CLS_FP8 = ATTN_CPU_ERR_FP8_KV, CLS_HALF = ATTN_CPU_ERR_HALF };
#define CLS_COUNT ATTN_CPU_ERR_CLASSES
static const char *cls_names[CLS_COUNT] = {"fp32", "fp32+fp8 KV", "fp16/bf16"};

typedef struct {
    const char *name;
    bool chosen, usable;
    double cls_worst[CLS_COUNT];
    double worst, worst_lse;
    char worst_cfg[480];
    int fails, runs;
} vstat;

/* the variants to run: every usable one, or the one named by the argument
 * or ATTN_TEST_VARIANT ("active": the one calls use here; 77 when this CPU
 * cannot run it); -1 to go on, else the exit status */
static int pick_variants(int argc, char **argv, vstat *vs, int nv)
{
    const char *only = argc > 1 ? argv[1] : getenv("ATTN_TEST_VARIANT");
    if (only && !strcmp(only, "--variants")) {
        for (int i = 0; i < nv; i++) {
            const attn__cpu_isa *v = attn__cpu_attn_variant(i);
            printf("%s %s\n", v->name,
                   v == attn__cpu_attn_active() ? "active"
                   : v->usable()                ? "usable"
                                                : "unusable");
        }
        return 0;
    }
    if (only && !strcmp(only, "active")) only = attn__cpu_attn_active()->name;
    bool found = false;
    for (int i = 0; i < nv; i++) {
        memset(&vs[i], 0, sizeof vs[i]);
        vs[i].name = attn__cpu_attn_variant(i)->name;
        vs[i].usable = attn__cpu_attn_variant(i)->usable();
        if (only && strcmp(only, vs[i].name)) {
            vs[i].usable = false;
            continue;
        }
        found = vs[i].chosen = true;
        if (!vs[i].usable) {
            printf("SKIP variant %s: not usable on this CPU (features or ATTN_CPU_MASK)\n",
                   vs[i].name);
            if (only) return 77;
        }
    }
    if (!found) {
        fprintf(stderr, "no CPU_ATTN variant named '%s' (--variants lists them)\n", only);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    trng g = {0x5eed0001u};
    int nv = attn__cpu_attn_variant_count();
    vstat vs[8];
    if (nv > 8) return 1;
    int rc = pick_variants(argc, argv, vs, nv);
    if (rc >= 0) return rc;
    for (int ci = 0; ci < N_CONFIGS; ci++) {
        config c;
        gen(&g, ci, &c);
        char desc[400];
        describe(&c, desc, sizeof desc);
        if (getenv("ATTN_TEST_VERBOSE")) fprintf(stderr, "config %d: %s\n", ci, desc);
        int H = c.kvh * c.group, D = c.D;
        attn_elem qe = attn_dtype_elem(c.dtype);
        size_t qes = attn_elem_size(qe);
        int tokens = 0;
        int32_t qsl[MAX_REQ + 1], seq[MAX_REQ], enc[MAX_REQ];
        qsl[0] = 0;
        int maxb = 1;
        bool mixed_dec = false, mixed_pre = false;
        for (int r = 0; r < c.nreq; r++) {
            tokens += c.qlen[r];
            qsl[r + 1] = tokens;
            int nb = (c.kvlen[r] + c.bs - 1) / c.bs;
            if (nb > maxb) maxb = nb;
            if (c.qlen[r] <= 1 + c.spec)
                mixed_dec = true;
            else
                mixed_pre = true;
            if (c.type == ATTN_TYPE_ENCODER_DECODER) {
                enc[r] = c.kvlen[r];
                seq[r] = c.qlen[r];
            } else {
                seq[r] = c.kvlen[r];
            }
        }
        /* block table: a shuffled pool; the prefix blocks are shared */
        int pre_blocks = c.prefix / c.bs;
        int nblocks = pre_blocks;
        for (int r = 0; r < c.nreq; r++)
            nblocks += (c.kvlen[r] + c.bs - 1) / c.bs - pre_blocks;
        nblocks += 3;
        int32_t *perm = malloc(sizeof(int32_t) * (size_t)nblocks);
        for (int i = 0; i < nblocks; i++)
            perm[i] = i;
        for (int i = nblocks - 1; i > 0; i--) {
            int k = trng_int(&g, i + 1);
            int32_t t = perm[i];
            perm[i] = perm[k];
            perm[k] = t;
        }
        int32_t *bt = calloc((size_t)(c.nreq * maxb), sizeof(int32_t));
        int next = pre_blocks;
        for (int r = 0; r < c.nreq; r++)
            for (int b = 0; b < (c.kvlen[r] + c.bs - 1) / c.bs; b++)
                bt[r * maxb + b] = b < pre_blocks ? perm[b] : perm[next++];
        tcache cache;
        tcache_init(&cache, c.kv_elem, nblocks, c.bs, c.kvh, D, D, !c.nhd);
        float amax = 1.0f + trng_unif(&g, 0.0f, 3.0f);
        if (attn__elem_is_fp8(c.kv_elem)) {
            float base = amax / (c.kv_elem == ATTN_ELEM_FP8_E4M3 ? 300.0f : 20000.0f);
            cache.view.k_scale = base * trng_unif(&g, 0.7f, 1.3f);
            cache.view.v_scale = base * trng_unif(&g, 0.7f, 1.3f);
            if (c.per_head_scale) {
                for (int h = 0; h < c.kvh; h++) {
                    cache.kscale_ph[h] = base * trng_unif(&g, 0.5f, 1.5f);
                    cache.vscale_ph[h] = base * trng_unif(&g, 0.5f, 1.5f);
                }
                cache.view.k_scale_per_head = cache.kscale_ph;
                cache.view.v_scale_per_head = cache.vscale_ph;
            }
        }
        float row[512];
        bool *written = calloc((size_t)nblocks, 1);
        if (!c.direct) {
            for (int r = 0; r < c.nreq; r++)
                for (int b = 0; b < (c.kvlen[r] + c.bs - 1) / c.bs; b++) {
                    int32_t id = bt[r * maxb + b];
                    if (written[id]) continue;
                    written[id] = true;
                    for (int o = 0; o < c.bs; o++)
                        for (int h = 0; h < c.kvh; h++) {
                            for (int d = 0; d < D; d++)
                                row[d] = trng_normal(&g) * amax / 2.5f;
                            tcache_put(&cache, id, o, h, false, row);
                            for (int d = 0; d < D; d++)
                                row[d] = trng_normal(&g) * amax / 2.5f;
                            tcache_put(&cache, id, o, h, true, row);
                        }
                }
        }
        size_t qn = (size_t)tokens * H * D;
        void *q = malloc(qn * qes);
        float qmag = trng_unif(&g, 0.3f, 2.0f) / amax;
        for (size_t i = 0; i < qn; i++)
            attn__store_elem(q, qe, i, trng_normal(&g) * qmag);
        void *kd = NULL, *vd = NULL;
        if (c.direct) {
            size_t kn = (size_t)tokens * c.kvh * D;
            kd = malloc(kn * qes);
            vd = malloc(kn * qes);
            for (size_t i = 0; i < kn; i++) {
                attn__store_elem(kd, qe, i, trng_normal(&g) * amax / 2.5f);
                attn__store_elem(vd, qe, i, trng_normal(&g) * amax / 2.5f);
            }
        }
        float *sinks = malloc(sizeof(float) * (size_t)H);
        float *slopes = malloc(sizeof(float) * (size_t)H);
        for (int h = 0; h < H; h++) {
            sinks[h] = trng_unif(&g, -2.0f, 4.0f);
            slopes[h] = -exp2f(-8.0f * (float)(h + 1) / (float)H) * -1.0f * 0.25f;
        }
        attn_layer_params lp = {.num_heads = H,
                                .num_kv_heads = c.kvh,
                                .head_size = D,
                                .scale = trng_int(&g, 2) ? 0.0f : trng_unif(&g, 0.05f, 0.3f),
                                .logits_soft_cap = c.softcap ? trng_unif(&g, 2.0f, 30.0f) : 0.0f,
                                .sliding_window = c.window,
                                .sinks = c.sinks ? sinks : NULL,
                                .alibi_slopes = c.alibi ? slopes : NULL,
                                .attn_type = c.type,
                                .dtype = c.dtype,
                                .kv_cache_dtype = ATTN_KV_AUTO};
        int maxq = 0, maxs = 0;
        for (int r = 0; r < c.nreq; r++) {
            if (c.qlen[r] > maxq) maxq = c.qlen[r];
            if (c.kvlen[r] > maxs) maxs = c.kvlen[r];
        }
        attn_common_metadata cm = {.query_start_loc = qsl,
                                   .seq_lens = seq,
                                   .num_reqs = c.nreq,
                                   .num_actual_tokens = tokens,
                                   .max_query_len = maxq,
                                   .max_seq_len = maxs,
                                   .block_table = bt,
                                   .block_table_stride = maxb,
                                   .causal = c.causal,
                                   .block_size = c.bs,
                                   .encoder_seq_lens =
                                       c.type == ATTN_TYPE_ENCODER_DECODER ? enc : NULL};
        if (c.direct) cm.seq_lens = NULL, cm.block_table = NULL, cm.block_table_stride = 0;
        size_t on = (size_t)tokens * H * D;
        void *ref = calloc(on, qes);
        float *ref_lse = malloc(sizeof(float) * ((size_t)tokens * H + 1));
        attn_forward_args a = {.layer = &lp,
                               .common = &cm,
                               .q = q,
                               .kv = c.direct ? NULL : &cache.view,
                               .out = ref,
                               .lse = c.lse ? ref_lse : NULL,
                               .k = kd,
                               .v = vd};
        CHECK_OK(attn__reference_forward(&a));
        /* builder metadata */
        void *bstate = NULL;
        const void *md = NULL;
        attn_builder_init bi = {.desc = &attn__desc_cpu_attn,
                                .layer = &lp,
                                .block_size = c.bs,
                                .num_blocks = nblocks,
                                .max_num_reqs = c.nreq + trng_int(&g, 4),
                                .max_num_tokens = tokens + trng_int(&g, 64),
                                .max_blocks_per_req = maxb,
                                .num_speculative_tokens = c.spec,
                                .num_threads = c.threads_hint};
        bool cascade = false, split = false;
        if (c.use_md) {
            CHECK_OK(attn__builder_cpu.create(&bi, &bstate));
            CHECK_OK(attn__builder_cpu.build(bstate, c.prefix, &cm, false, &md));
            const attn__cpu_md *m = md;
            cascade = m && m->use_cascade;
            split = m && m->n_splits > 0;
        }
        a.metadata = md;
        void *out = malloc(on * qes);
        float *lse = malloc(sizeof(float) * ((size_t)tokens * H + 1));
        int cls = c.dtype != ATTN_DTYPE_FP32     ? CLS_HALF
                  : attn__elem_is_fp8(c.kv_elem) ? CLS_FP8
                                                 : CLS_FP32;
        for (int vi = 0; vi < nv; vi++) {
            if (!vs[vi].usable) continue;
            memset(out, 0xff, on * qes); /* NaN: every element must be written */
            for (int i = 0; i < tokens * H; i++)
                lse[i] = NAN;
            a.out = out;
            a.lse = c.lse ? lse : NULL;
            attn_status st = attn__cpu_attn_forward_isa(attn__cpu_attn_variant(vi), &a);
            CHECK_MSG(st == ATTN_OK, "config %d %s: %s on %s (%s)", ci, vs[vi].name,
                      attn_status_name(st), desc, attn_last_error());
            double err = trel_err(out, ref, qe, on);
            double lerr = 0;
            if (c.lse)
                for (int i = 0; i < tokens * H; i++) {
                    double d = isinf(ref_lse[i]) ? (lse[i] == ref_lse[i] ? 0 : INFINITY)
                                                 : fabs(lse[i] - ref_lse[i]);
                    if (!(d <= lerr)) lerr = isnan(d) ? INFINITY : d;
                }
            vs[vi].runs++;
            double tol = attn__cpu_attn_variant_error(vi, (attn__cpu_err_class)cls);
            if (err > vs[vi].cls_worst[cls] || isnan(err)) vs[vi].cls_worst[cls] = err;
            if (err > vs[vi].worst || isnan(err)) {
                vs[vi].worst = err;
                snprintf(vs[vi].worst_cfg, sizeof vs[vi].worst_cfg, "#%d %s", ci, desc);
            }
            if (lerr > vs[vi].worst_lse) vs[vi].worst_lse = lerr;
            if (!(err <= tol) || !(lerr <= tol)) {
                vs[vi].fails++;
                CHECK_MSG(false,
                          "config %d variant %s: error %.3g (lse %.3g) > %.1g (its documented "
                          "%s error) on %s",
                          ci, vs[vi].name, err, lerr, tol, cls_names[cls], desc);
            }
        }
        a.out = ref;
        a.lse = NULL;
        /* coverage */
        cov[c.dtype == ATTN_DTYPE_FP32   ? COV_FP32
            : c.dtype == ATTN_DTYPE_FP16 ? COV_FP16
                                         : COV_BF16]++;
        if (c.kv_elem == ATTN_ELEM_FP8_E4M3) cov[COV_E4M3]++;
        if (c.kv_elem == ATTN_ELEM_FP8_E5M2) cov[COV_E5M2]++;
        cov[COV_PERHEAD] += c.per_head_scale;
        cov[c.type == ATTN_TYPE_DECODER        ? COV_DEC
            : c.type == ATTN_TYPE_ENCODER      ? COV_ENC
            : c.type == ATTN_TYPE_ENCODER_ONLY ? COV_ENC_ONLY
                                               : COV_CROSS]++;
        cov[COV_NONCAUSAL] += c.type == ATTN_TYPE_DECODER && !c.causal;
        cov[COV_DIRECT] += c.direct;
        cov[COV_WINDOW] += c.window > 0;
        cov[COV_SINK] += c.sinks;
        cov[COV_SOFTCAP] += c.softcap;
        cov[COV_ALIBI] += c.alibi;
        cov[COV_CASCADE] += cascade;
        cov[COV_SPLIT] += split;
        cov[COV_MIXED] += mixed_dec && mixed_pre;
        cov[COV_SPEC] += c.spec > 0;
        cov[c.kvh == 1 && c.group > 1 ? COV_MQA : c.group > 1 ? COV_GQA : COV_MHA]++;
        cov[COV_LONG8K] += maxs >= 7000;
        cov[COV_NHD] += c.nhd;
        cov[COV_NOMD] += !c.use_md;
        cov[COV_LSE] += c.lse;
        if (bstate) attn__builder_cpu.destroy(bstate);
        free(out);
        free(lse);
        free(ref);
        free(ref_lse);
        free(sinks);
        free(slopes);
        free(q);
        free(kd);
        free(vd);
        free(written);
        free(bt);
        free(perm);
        tcache_free(&cache);
    }
    printf("%d configurations; coverage:", N_CONFIGS);
    for (int i = 0; i < COV_COUNT; i++) {
        printf(" %s=%d", cov_names[i], cov[i]);
        CHECK_MSG(cov[i] > 0, "no configuration covered %s", cov_names[i]);
    }
    printf("\n");
    for (int vi = 0; vi < nv; vi++) {
        if (!vs[vi].chosen) continue;
        if (!vs[vi].usable)
            printf("variant %-12s SKIPPED (not usable here)\n", vs[vi].name);
        else
            printf("variant %-12s %d configs, %d over tolerance, worst error %.3g (lse %.3g) "
                   "on %s\n",
                   vs[vi].name, vs[vi].runs, vs[vi].fails, vs[vi].worst, vs[vi].worst_lse,
                   vs[vi].worst_cfg);
        if (vs[vi].usable)
            for (int k = 0; k < CLS_COUNT; k++)
                printf("    worst %-12s %.3g (documented %.0e)\n", cls_names[k],
                       vs[vi].cls_worst[k],
                       attn__cpu_attn_variant_error(vi, (attn__cpu_err_class)k));
    }
    return attn_test_finish("test_cpu_attn_conformance");
}
