/* MLA decode (forward_mqa) of CPU_MLA, every kernel variant usable here:
 *  1. absorbed decode (q_nope . W_UK, forward_mqa, per-head W_UV
 *     up-projection) equals naive decompressed attention (REFERENCE_MLA
 *     forward_mha: keys and values decompressed from the latent rows, in
 *     double) - over seeded random weights, several context lengths and
 *     batch mixes, fp32 and bf16;
 *  2. forward_mqa's latent output and LSE equal REFERENCE_MLA forward_mqa,
 *     including fp16, fp8 caches, DeepSeek-V3 shapes (128 heads, 512 + 64)
 *     and contexts long enough for split-KV pieces and their LSE merge,
 *     with and without the builder's metadata;
 *  3. the split-KV pieces of CPU_MLA's builder give the same bits as the
 *     pieces forward_mqa makes itself.
 * Tolerances (max |error| over max |reference|): fp32 1e-4, bf16 / fp16
 * 2e-2; LSE absolute: fp32 1e-4, bf16 / fp16 2e-2.
 * `test_mla_decode VARIANT` runs one variant (exit 77 where this CPU lacks
 * it; parts 1 and 3, which use the automatic choice, only for the best
 * usable one), `--variants` lists them (see mla_fx_variants). */
#include "kernel_call.h"
#include "mla_fixture.h"
#include "util/threadpool.h"

extern const attn_builder_ops attn__builder_mla_varlen;

typedef struct {
    const char *name;
    int nreq;
    int q[6], s[6];
} batch_t;

static const batch_t batches[] = {
    {"single token, context 1", 1, {1}, {1}},
    {"decodes 17/100/300", 3, {1, 1, 1}, {17, 100, 300}},
    {"spec-decode mix", 4, {1, 3, 1, 4}, {40, 129, 5, 257}},
    {"long 1000/2100", 2, {1, 1}, {1000, 2100}},
};

static double tol_for(attn_dtype dt)
{
    return dt == ATTN_DTYPE_FP32 ? 1e-4 : 2e-2;
}

static const char *variant_name(const attn__mla_kern *k)
{
    return k ? k->name : "auto";
}

/* Part 1: absorbed decode == naive decompressed attention. */
static void check_absorbed_vs_naive(const attn__mla_kern *k, attn_dtype dt, const batch_t *b, int H,
                                    int R, int P, int N, int V, int bs, uint64_t seed)
{
    if (!fx_autos) return;
    mla_fx f;
    mla_fx_init(&f, H, R, P, N, V, dt, attn_dtype_elem(dt), bs, b->nreq, b->q, b->s, seed);
    size_t nrow = (size_t)f.T * H;
    void *lat = calloc(nrow * R, f.qesz);
    void *outa = calloc(nrow * V, f.qesz), *outb = calloc(nrow * V, f.qesz);
    float *lsea = calloc(nrow, 4), *lseb = calloc(nrow, 4);
    attn_mla_args a = mla_fx_args(&f, false, lat, lsea);
    CHECK_OK(tk_mqa(&attn__backend_cpu_mla, &a));
    CHECK_OK(attn_mla_up_project(&f.lp, f.T, lat, f.w_uv, outa));
    attn_mla_args m = mla_fx_args(&f, true, outb, lseb);
    CHECK_OK(tk_mha(&attn__backend_reference_mla, &m));
    double e = fx_rel_err(outa, outb, f.qe, nrow * V);
    double le = fx_lse_err(lsea, lseb, nrow);
    CHECK_MSG(e <= tol_for(dt) && le <= tol_for(dt),
              "absorbed vs naive %s %s H=%d R=%d P=%d N=%d V=%d bs=%d variant %s: error %.3g, "
              "lse %.3g",
              b->name, attn_dtype_name(dt), H, R, P, N, V, bs, variant_name(k), e, le);
    printf("  absorbed vs naive  %-24s %-4s H=%-3d R=%-3d variant %-9s err %.2e lse %.2e\n",
           b->name, attn_dtype_name(dt), H, R, variant_name(k), e, le);
    free(lat), free(outa), free(outb), free(lsea), free(lseb);
    mla_fx_free(&f);
}

/* Part 2: CPU_MLA forward_mqa == REFERENCE_MLA forward_mqa, every variant
 * that handles the dtypes (the reference is computed once per case). */
static const attn__mla_kern *vars[8];
static int nv;
static double worst[8];

static void check_vs_reference(attn_dtype dt, attn_elem kve, const batch_t *b, int H, int R, int P,
                               int bs, bool use_builder, uint64_t seed)
{
    mla_fx f;
    mla_fx_init(&f, H, R, P, 32, 32, dt, kve, bs, b->nreq, b->q, b->s, seed);
    size_t nrow = (size_t)f.T * H;
    void *o1 = malloc(nrow * R * f.qesz + 64), *o2 = malloc(nrow * R * f.qesz + 64);
    float *l1 = malloc(nrow * 4 + 64), *l2 = malloc(nrow * 4 + 64);
    attn_mla_args a = mla_fx_args(&f, false, o1, l1);
    CHECK_OK(tk_mqa(&attn__backend_reference_mla, &a));
    void *state = NULL;
    const void *md = NULL;
    if (use_builder) {
        attn_builder_init bi = {0};
        bi.layer = &f.lp;
        bi.block_size = bs;
        bi.num_blocks = f.nb;
        bi.max_num_reqs = b->nreq;
        bi.max_num_tokens = f.T;
        bi.max_blocks_per_req = f.bt_stride;
        CHECK_OK(attn__builder_mla_cpu.create(&bi, &state));
        CHECK_OK(attn__builder_mla_cpu.build(state, 0, &f.cm, false, &md));
    }
    for (int vi = 0; vi < nv; vi++) {
        if (!vars[vi]->decode_ok(f.qe, kve, R, R + P)) continue;
        attn__mla_force_variant(vars[vi]);
        attn_mla_args c = mla_fx_args(&f, false, o2, l2);
        c.metadata = md;
        CHECK_OK(tk_mqa(&attn__backend_cpu_mla, &c));
        double e = fx_rel_err(o2, o1, f.qe, nrow * R);
        double le = fx_lse_err(l2, l1, nrow);
        double tol = tol_for(dt);
        CHECK_MSG(e <= tol && le <= tol,
                  "CPU_MLA vs REFERENCE_MLA forward_mqa %s %s kv=%s H=%d R=%d P=%d bs=%d "
                  "builder=%d variant %s: error %.3g, lse %.3g",
                  b->name, attn_dtype_name(dt), attn_elem_name(kve), H, R, P, bs, use_builder,
                  vars[vi]->name, e, le);
        if (e / tol > worst[vi]) worst[vi] = e / tol;
    }
    attn__mla_force_variant(NULL);
    if (state) attn__builder_mla_cpu.destroy(state);
    free(o1), free(o2), free(l1), free(l2);
    mla_fx_free(&f);
}

/* Every finite fp8 code in the cache (subnormals, zeros, both signs): the
 * variants' fp8 widening must match the reference's value for each. */
static void check_fp8_codes(attn_elem kve, uint64_t seed)
{
    static const batch_t b = {"all fp8 codes", 2, {1, 1}, {300, 260}};
    mla_fx f;
    mla_fx_init(&f, 8, 64, 32, 32, 32, ATTN_DTYPE_BF16, kve, 16, b.nreq, b.q, b.s, seed);
    size_t n = (size_t)f.nb * (size_t)f.kv.stride_block;
    uint8_t *c = f.cache;
    unsigned code = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t v;
        do {
            v = (uint8_t)(code++ * 37u); /* all 256 codes, scrambled */
        } while (kve == ATTN_ELEM_FP8_E4M3 ? (v & 0x7f) == 0x7f : (v & 0x7c) == 0x7c);
        c[i] = v;
    }
    size_t nrow = (size_t)f.T * f.H;
    void *o1 = malloc(nrow * f.R * 2), *o2 = malloc(nrow * f.R * 2);
    float *l1 = malloc(nrow * 4), *l2 = malloc(nrow * 4);
    attn_mla_args a = mla_fx_args(&f, false, o1, l1);
    CHECK_OK(tk_mqa(&attn__backend_reference_mla, &a));
    for (int vi = 0; vi < nv; vi++) {
        if (!vars[vi]->decode_ok(ATTN_ELEM_BF16, kve, f.R, f.D)) continue;
        attn__mla_force_variant(vars[vi]);
        a.out = o2;
        a.lse = l2;
        CHECK_OK(tk_mqa(&attn__backend_cpu_mla, &a));
        double e = fx_rel_err(o2, o1, ATTN_ELEM_BF16, nrow * f.R), le = fx_lse_err(l2, l1, nrow);
        CHECK_MSG(e <= 2e-2 && le <= 2e-2, "every %s code, variant %s: error %.3g lse %.3g",
                  attn_elem_name(kve), vars[vi]->name, e, le);
        a.out = o1;
        a.lse = l1;
    }
    attn__mla_force_variant(NULL);
    free(o1), free(o2), free(l1), free(l2);
    mla_fx_free(&f);
}

/* The AMX staging widens every fp8 code to the bf16 of its value, bit for bit. */
static void check_fp8_widening(void)
{
#if defined(__x86_64__)
    if (!attn__mla_kern_amx.usable()) {
        printf("  fp8 widening: amx variant not usable here (skipped)\n");
        return;
    }
    bool mine = false;
    for (int vi = 0; vi < nv; vi++)
        mine |= vars[vi] == &attn__mla_kern_amx;
    if (!mine) return; /* another variant's run */
    static const attn_elem es[] = {ATTN_ELEM_FP8_E4M3, ATTN_ELEM_FP8_E5M2};
    for (int ei = 0; ei < 2; ei++) {
        uint8_t codes[256];
        uint16_t out[256];
        for (int i = 0; i < 256; i++)
            codes[i] = (uint8_t)i;
        attn__mla_amx_widen_row(codes, es[ei], 256, out);
        int bad = 0;
        for (int i = 0; i < 256; i++) {
            float v = es[ei] == ATTN_ELEM_FP8_E4M3 ? attn__e4m3_to_f32((uint8_t)i)
                                                   : attn__e5m2_to_f32((uint8_t)i);
            float got = attn__bf16_to_f32(out[i]);
            bool ok = isnan(v) ? isnan(got) : (got == v && signbit(got) == signbit(v));
            if (!ok && bad++ < 4)
                fprintf(stderr, "  %s code 0x%02x: got %g, want %g\n", attn_elem_name(es[ei]), i,
                        (double)got, (double)v);
        }
        CHECK_MSG(bad == 0, "%s widening: %d codes wrong", attn_elem_name(es[ei]), bad);
    }
#endif
}

/* The pieces CPU_MLA's builder makes once per step are the ones forward_mqa
 * would make itself for the same thread count: the same bits with that
 * metadata, with none, and with a common MLA builder's (which carries no
 * partition), over a batch long enough for split pieces and their merge. */
static void check_builder_pieces(void)
{
    if (!fx_autos) return;
    static const int q[] = {1, 1, 1}, s[] = {3000, 9000, 40};
    mla_fx f;
    mla_fx_init(&f, 16, 64, 32, 32, 32, ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 16, 3, q, s, 99);
    attn_builder_init bi = {0};
    bi.layer = &f.lp;
    bi.block_size = 16;
    bi.num_blocks = f.nb;
    bi.max_num_reqs = 3;
    bi.max_num_tokens = f.T;
    bi.num_threads = attn__pool_threads(attn__pool_global());
    void *cs = NULL, *gs = NULL;
    const void *cmd = NULL, *gmd = NULL;
    CHECK_OK(attn__builder_mla_cpu.create(&bi, &cs));
    CHECK_OK(attn__builder_mla_cpu.build(cs, 0, &f.cm, false, &cmd));
    const attn__cpu_mla_metadata *c = attn__cpu_mla_md(cmd);
    CHECK(c && c->work && c->work_heads == 16 && c->num_partials > 0);
    CHECK_OK(attn__builder_mla_varlen.create(&bi, &gs));
    CHECK_OK(attn__builder_mla_varlen.build(gs, 0, &f.cm, false, &gmd));
    CHECK(!attn__cpu_mla_md(gmd));
    size_t nrow = (size_t)f.T * f.H, ob = nrow * f.R * f.qesz;
    const void *mds[3] = {cmd, NULL, gmd};
    void *o[3];
    float *l[3];
    for (int i = 0; i < 3; i++) {
        o[i] = calloc(ob + 64, 1);
        l[i] = calloc(nrow + 16, sizeof(float));
        attn_mla_args a = mla_fx_args(&f, false, o[i], l[i]);
        a.metadata = mds[i];
        CHECK_OK(tk_mqa(&attn__backend_cpu_mla, &a));
    }
    for (int i = 1; i < 3; i++)
        CHECK_MSG(!memcmp(o[0], o[i], ob) && !memcmp(l[0], l[i], nrow * sizeof(float)),
                  "CPU_MLA forward_mqa: the builder's pieces and %s differ in bits",
                  i == 1 ? "no metadata" : "a common builder's metadata");
    for (int i = 0; i < 3; i++)
        free(o[i]), free(l[i]);
    attn__builder_mla_cpu.destroy(cs);
    attn__builder_mla_varlen.destroy(gs);
    mla_fx_free(&f);
}

int main(int argc, char **argv)
{
    int rc = mla_fx_variants(argc, argv, vars, &nv);
    if (rc >= 0) return rc;
    printf("CPU_MLA decode variants this run takes: %d (", nv);
    for (int vi = 0; vi < nv; vi++)
        printf("%s%s", vi ? ", " : "", vars[vi]->name);
    printf("; automatic choice here: %s)\n", attn__backend_cpu_mla.kernel->variant());
    uint64_t seed = 1234;

    /* 1. absorbed == naive decompressed (DeepSeek per-head dims, few heads;
     *    and a small shape), fp32 and bf16, automatic variant choice. */
    static const attn_dtype dts[] = {ATTN_DTYPE_FP32, ATTN_DTYPE_BF16};
    for (int di = 0; di < 2; di++) {
        for (int bi = 0; bi < 3; bi++)
            check_absorbed_vs_naive(NULL, dts[di], &batches[bi], 4, 512, 64, 128, 128, 16, seed++);
        for (int bi = 0; bi < 4; bi++)
            check_absorbed_vs_naive(NULL, dts[di], &batches[bi], 6, 64, 32, 48, 40, 32, seed++);
    }
    /* and 320-wide rows (256 + 64), block size 64, packed rows */
    fx_row_pad = 0;
    check_absorbed_vs_naive(NULL, ATTN_DTYPE_BF16, &batches[2], 8, 256, 64, 128, 128, 64, seed++);
    check_absorbed_vs_naive(NULL, ATTN_DTYPE_FP32, &batches[2], 8, 256, 64, 128, 128, 64, seed++);
    fx_row_pad = 8;

    /* 2. every variant against the reference. */
    static const struct {
        attn_dtype dt;
        attn_elem kv;
    } types[] = {
        {ATTN_DTYPE_FP32, ATTN_ELEM_F32},      {ATTN_DTYPE_BF16, ATTN_ELEM_BF16},
        {ATTN_DTYPE_FP16, ATTN_ELEM_F16},      {ATTN_DTYPE_BF16, ATTN_ELEM_FP8_E4M3},
        {ATTN_DTYPE_FP32, ATTN_ELEM_FP8_E5M2}, {ATTN_DTYPE_FP32, ATTN_ELEM_BF16},
    };
    for (int vi = 0; vi < nv; vi++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            if (!vars[vi]->decode_ok(attn_dtype_elem(types[ti].dt), types[ti].kv, 512, 576))
                printf("  variant %-9s dtype %s kv %s: unsupported by this variant (another "
                       "variant runs it)\n",
                       vars[vi]->name, attn_dtype_name(types[ti].dt), attn_elem_name(types[ti].kv));
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int bi = 0; bi < 4; bi++) {
            check_vs_reference(types[ti].dt, types[ti].kv, &batches[bi], 8, 512, 64, 16,
                               bi % 2 == 0, seed++);
            check_vs_reference(types[ti].dt, types[ti].kv, &batches[bi], 5, 96, 32, 48, bi % 2 == 1,
                               seed++);
        }
    /* DeepSeek-V3 decode shape: 128 heads, long contexts -> split-KV + merge */
    static const batch_t ds[] = {
        {"ds batch 1 ctx 1100", 1, {1}, {1100}},
        {"ds batch 3 mixed", 3, {1, 2, 1}, {700, 900, 64}},
    };
    for (int bi = 0; bi < 2; bi++) {
        check_vs_reference(ATTN_DTYPE_BF16, ATTN_ELEM_BF16, &ds[bi], 128, 512, 64, 64, true,
                           seed++);
        check_vs_reference(ATTN_DTYPE_FP32, ATTN_ELEM_F32, &ds[bi], 128, 512, 64, 64, false,
                           seed++);
    }
    /* more heads than a row group holds (groups split a token's heads), and
     * a block size that no 16-row tile fits (every tile staged) */
    check_vs_reference(ATTN_DTYPE_BF16, ATTN_ELEM_BF16, &batches[2], 160, 64, 32, 16, true, seed++);
    check_vs_reference(ATTN_DTYPE_FP32, ATTN_ELEM_F32, &batches[2], 160, 64, 32, 16, false, seed++);
    check_vs_reference(ATTN_DTYPE_BF16, ATTN_ELEM_BF16, &batches[3], 8, 512, 64, 7, true, seed++);
    check_fp8_widening();
    check_fp8_codes(ATTN_ELEM_FP8_E4M3, seed++);
    check_fp8_codes(ATTN_ELEM_FP8_E5M2, seed++);
    /* 16 heads x 8 tokens: full 128-row groups of several tokens */
    static const batch_t g[] = {{"8-token queries", 2, {8, 8}, {300, 90}}};
    check_vs_reference(ATTN_DTYPE_BF16, ATTN_ELEM_BF16, &g[0], 16, 512, 64, 16, true, seed++);
    check_builder_pieces();
    for (int vi = 0; vi < nv; vi++)
        printf("variant %-9s worst error / tolerance: %.3f\n", vars[vi]->name, worst[vi]);
    attn__mla_force_variant(NULL);
    return attn_test_finish("test_mla_decode");
}
