/* MLA prefill (forward_mha) of CPU_MLA against REFERENCE_MLA, every prefill
 * variant usable here: fresh prefills, chunked prefills over a cached
 * prefix, fp32 / bf16 / fp16 and fp8 caches, DeepSeek per-head dims
 * (512 + 64, nope 128, v 128); the decode/prefill split of the MLA builder
 * (each entry point touches only its own rows); and attn_kernel_mla_forward
 * running a whole mixed batch (decodes absorbed, prefills decompressed)
 * against naive decompressed attention for every token.
 * Tolerances (max |error| over max |reference|): fp32 1e-4, bf16 / fp16
 * 2e-2; LSE absolute the same. `test_mla_prefill VARIANT` runs one variant
 * (exit 77 where this CPU lacks it; the whole-layer checks, which use the
 * automatic choice, only for the best usable one), `--variants` lists them
 * (see mla_fx_variants). */
#include "kernel_call.h"
#include "mla_fixture.h"

typedef struct {
    const char *name;
    int nreq;
    int q[6], s[6];
} batch_t;

static double tol_for(attn_dtype dt)
{
    return dt == ATTN_DTYPE_FP32 ? 1e-4 : 2e-2;
}

static double worst[8];

static void check_mha(int vi, const char *vname, attn_dtype dt, attn_elem kve, const batch_t *b,
                      int H, int R, int P, int N, int V, int bs, uint64_t seed)
{
    mla_fx f;
    mla_fx_init(&f, H, R, P, N, V, dt, kve, bs, b->nreq, b->q, b->s, seed);
    size_t nrow = (size_t)f.T * H;
    void *o1 = calloc(nrow * V, f.qesz), *o2 = calloc(nrow * V, f.qesz);
    float *l1 = calloc(nrow, 4), *l2 = calloc(nrow, 4);
    attn_mla_args a = mla_fx_args(&f, true, o1, l1);
    CHECK_OK(tk_mha(&attn__backend_reference_mla, &a));
    attn_mla_args c = mla_fx_args(&f, true, o2, l2);
    CHECK_OK(tk_mha(&attn__backend_cpu_mla, &c));
    double e = fx_rel_err(o2, o1, f.qe, nrow * V), le = fx_lse_err(l2, l1, nrow);
    double tol = tol_for(dt);
    CHECK_MSG(e <= tol && le <= tol,
              "forward_mha %s %s kv=%s H=%d R=%d P=%d N=%d V=%d bs=%d variant %s: error %.3g "
              "lse %.3g",
              b->name, attn_dtype_name(dt), attn_elem_name(kve), H, R, P, N, V, bs, vname, e, le);
    if (e / tol > worst[vi]) worst[vi] = e / tol;
    free(o1), free(o2), free(l1), free(l2);
    mla_fx_free(&f);
}

/* The builder's split: forward_mqa writes only decode rows, forward_mha only
 * prefill rows; together with attn_kernel_mla_forward they equal the naive
 * reference on every token. */
static void check_layer(attn_dtype dt, uint64_t seed)
{
    if (!fx_autos) return;
    static const int q[] = {1, 3, 200, 150}, s[] = {50, 80, 260, 150};
    mla_fx f;
    mla_fx_init(&f, 4, 128, 32, 64, 48, dt, attn_dtype_elem(dt), 16, 4, q, s, seed);
    attn_builder_init bi = {0};
    bi.layer = &f.lp;
    bi.block_size = 16;
    bi.num_blocks = f.nb;
    bi.max_num_reqs = 4;
    bi.max_num_tokens = f.T;
    void *state = NULL;
    const void *mdp = NULL;
    CHECK_OK(attn__builder_mla_cpu.create(&bi, &state));
    CHECK_OK(attn__builder_mla_cpu.build(state, 0, &f.cm, false, &mdp));
    const attn_mla_metadata *md = mdp;
    CHECK(md->num_decodes == 2 && md->num_decode_tokens == 4 && md->num_prefills == 2 &&
          md->num_prefill_tokens == 350);

    size_t nrow = (size_t)f.T * f.H;
    size_t ob = nrow * f.V * f.qesz;
    unsigned char *ref = malloc(ob), *out = malloc(ob), *sent = malloc(ob);
    float *lref = malloc(nrow * 4), *lout = malloc(nrow * 4);
    memset(sent, 0xA5, ob);

    /* forward_mha with the split: decode rows untouched */
    memcpy(out, sent, ob);
    attn_mla_args a = mla_fx_args(&f, true, out, NULL);
    a.metadata = md;
    CHECK_OK(tk_mha(&attn__backend_cpu_mla, &a));
    size_t dec_bytes = (size_t)md->num_decode_tokens * f.H * f.V * f.qesz;
    CHECK(memcmp(out, sent, dec_bytes) == 0);
    CHECK(memcmp(out + dec_bytes, sent + dec_bytes, ob - dec_bytes) != 0);

    /* forward_mqa with the split: prefill rows untouched */
    size_t lb = nrow * f.R * f.qesz;
    unsigned char *lat = malloc(lb), *lsent = malloc(lb);
    memset(lsent, 0x5A, lb);
    memcpy(lat, lsent, lb);
    attn_mla_args d = mla_fx_args(&f, false, lat, NULL);
    d.metadata = md;
    CHECK_OK(tk_mqa(&attn__backend_cpu_mla, &d));
    size_t ldec = (size_t)md->num_decode_tokens * f.H * f.R * f.qesz;
    CHECK(memcmp(lat + ldec, lsent + ldec, lb - ldec) == 0);
    CHECK(memcmp(lat, lsent, ldec) != 0);

    /* the whole layer against naive decompressed attention for every token */
    attn_mla_args r = mla_fx_args(&f, true, ref, lref);
    CHECK_OK(tk_mha(&attn__backend_reference_mla, &r));
    size_t scratch_size = attn_mla_forward_scratch_size(&f.lp, f.T);
    void *scratch = aligned_alloc(64, (scratch_size + 63) & ~(size_t)63);
    attn_mla_args w = mla_fx_args(&f, true, out, lout);
    w.metadata = md;
    CHECK_OK(tk_mla_forward(&attn__backend_cpu_mla, &w, scratch, scratch_size));
    double e = fx_rel_err(out, ref, f.qe, nrow * f.V), le = fx_lse_err(lout, lref, nrow);
    CHECK_MSG(e <= tol_for(dt) && le <= tol_for(dt),
              "attn_kernel_mla_forward mixed batch %s: error %.3g lse %.3g", attn_dtype_name(dt), e,
              le);
    printf("  attn_kernel_mla_forward mixed batch %s: error %.2e, lse %.2e\n", attn_dtype_name(dt),
           e, le);
    /* too little scratch: refused, nothing written */
    memcpy(out, sent, ob);
    CHECK_STATUS(tk_mla_forward(&attn__backend_cpu_mla, &w, scratch, 64), ATTN_INVALID_ARGUMENT);
    CHECK(memcmp(out, sent, ob) == 0);
    /* REFERENCE_MLA through the same call */
    CHECK_OK(tk_mla_forward(&attn__backend_reference_mla, &w, scratch, scratch_size));
    e = fx_rel_err(out, ref, f.qe, nrow * f.V);
    CHECK_MSG(e <= tol_for(dt), "attn_kernel_mla_forward on REFERENCE_MLA %s: error %.3g",
              attn_dtype_name(dt), e);

    free(scratch), free(ref), free(out), free(sent), free(lref), free(lout), free(lat), free(lsent);
    attn__builder_mla_cpu.destroy(state);
    mla_fx_free(&f);
}

int main(int argc, char **argv)
{
    static const batch_t batches[] = {
        {"fresh prefill 37", 1, {37}, {37}},
        {"chunked prefill 20 of 100", 1, {20}, {100}},
        {"two prefills + a decode", 3, {1, 64, 90}, {33, 64, 131}},
    };
    static const struct {
        attn_dtype dt;
        attn_elem kv;
    } types[] = {
        {ATTN_DTYPE_FP32, ATTN_ELEM_F32},
        {ATTN_DTYPE_BF16, ATTN_ELEM_BF16},
        {ATTN_DTYPE_FP16, ATTN_ELEM_F16},
        {ATTN_DTYPE_BF16, ATTN_ELEM_FP8_E4M3},
    };
    const attn__mla_kern *vars[8];
    int nv = 0, rc = mla_fx_variants(argc, argv, vars, &nv);
    if (rc >= 0) return rc;
    if (nv == 1 && !vars[0]->prefill && !fx_autos) {
        printf("SKIP variant %s: no prefill kernel (decode only)\n", vars[0]->name);
        return 77;
    }
    uint64_t seed = 777;
    for (int vi = 0; vi < nv; vi++) {
        if (!vars[vi]->prefill) {
            printf("variant %s: no prefill kernel (decode only)\n", vars[vi]->name);
            continue;
        }
        attn__mla_force_variant(vars[vi]);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (int bi = 0; bi < 3; bi++) {
                check_mha(vi, vars[vi]->name, types[ti].dt, types[ti].kv, &batches[bi], 4, 64, 32,
                          32, 48, 16, seed++);
                check_mha(vi, vars[vi]->name, types[ti].dt, types[ti].kv, &batches[bi], 2, 512, 64,
                          128, 128, 32, seed++);
            }
        printf("variant %-9s forward_mha worst error / tolerance: %.3f\n", vars[vi]->name,
               worst[vi]);
    }
    attn__mla_force_variant(NULL);
    check_layer(ATTN_DTYPE_FP32, seed++);
    check_layer(ATTN_DTYPE_BF16, seed++);
    return attn_test_finish("test_mla_prefill");
}
