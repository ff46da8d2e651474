/* Sparse MLA (CPU_MLA_SPARSE): each query token attends only to its listed
 * top-k positions (-1 = unused, positions after the token's own ignored).
 * Checked against REFERENCE_MLA_SPARSE for every decode variant usable here;
 * a full list equals dense attention; a token with no usable index gets
 * output 0 and LSE -inf; attn_kernel_mla_forward runs every token (prefills too)
 * through the absorbed path on a sparse backend.
 * Tolerances: fp32 1e-4, bf16 2e-2 (relative to the output's magnitude). */
#include "kernel_call.h"
#include "mla_fixture.h"

static double tol_for(attn_dtype dt)
{
    return dt == ATTN_DTYPE_FP32 ? 1e-4 : 2e-2;
}

static const attn__mla_kern *vars[8];
static int nv;

static void check_random(attn_dtype dt, int H, int R, int P, int topk, uint64_t seed)
{
    static const int q[] = {1, 5, 1, 30}, s[] = {300, 64, 9, 30};
    mla_fx f;
    mla_fx_init(&f, H, R, P, 32, 32, dt, attn_dtype_elem(dt), 16, 4, q, s, seed);
    int32_t *ix = malloc(sizeof(int32_t) * (size_t)f.T * topk);
    for (int r = 0; r < 4; r++)
        for (int t = f.qsl[r]; t < f.qsl[r + 1]; t++)
            for (int j = 0; j < topk; j++) {
                uint64_t v = fx_next(&f.rng);
                ix[(size_t)t * topk + j] = v % 5 == 0 ? -1 : (int32_t)((v >> 8) % (uint64_t)s[r]);
            }
    size_t nrow = (size_t)f.T * H;
    void *o1 = malloc(nrow * R * f.qesz), *o2 = malloc(nrow * R * f.qesz);
    float *l1 = malloc(nrow * 4), *l2 = malloc(nrow * 4);
    attn_mla_args a = mla_fx_args(&f, false, o1, l1);
    a.topk_indices = ix;
    a.topk = topk;
    CHECK_OK(tk_mqa(&attn__backend_reference_mla_sparse, &a));
    for (int vi = 0; vi < nv; vi++) {
        const attn__mla_kern *k = vars[vi];
        if (!k->decode_ok(f.qe, f.kve, R, R + P)) continue;
        attn__mla_force_variant(k);
        a.out = o2;
        a.lse = l2;
        CHECK_OK(tk_mqa(&attn__backend_cpu_mla_sparse, &a));
        double e = fx_rel_err(o2, o1, f.qe, nrow * R), le = fx_lse_err(l2, l1, nrow);
        CHECK_MSG(e <= tol_for(dt) && le <= tol_for(dt),
                  "sparse %s H=%d R=%d topk=%d variant %s: error %.3g lse %.3g",
                  attn_dtype_name(dt), H, R, topk, k->name, e, le);
        printf("  sparse %-4s H=%-3d R=%-3d topk=%-4d variant %-9s err %.2e lse %.2e\n",
               attn_dtype_name(dt), H, R, topk, k->name, e, le);
    }
    attn__mla_force_variant(NULL);
    free(ix), free(o1), free(o2), free(l1), free(l2);
    mla_fx_free(&f);
}

int main(void)
{
    nv = attn__mla_variants(vars, 8);
    uint64_t seed = 4242;
    check_random(ATTN_DTYPE_FP32, 8, 64, 32, 40, seed++);
    check_random(ATTN_DTYPE_BF16, 8, 64, 32, 40, seed++);
    check_random(ATTN_DTYPE_BF16, 128, 512, 64, 256, seed++);
    check_random(ATTN_DTYPE_BF16, 16, 512, 64, 300, seed++);

    /* a full list (every position, in scrambled order) equals dense attention */
    {
        static const int q[] = {1, 3}, s[] = {70, 50};
        mla_fx f;
        mla_fx_init(&f, 4, 64, 32, 32, 32, ATTN_DTYPE_FP32, ATTN_ELEM_F32, 16, 2, q, s, 9);
        int topk = 70;
        int32_t *ix = malloc(sizeof(int32_t) * (size_t)f.T * topk);
        for (int r = 0; r < 2; r++)
            for (int t = f.qsl[r]; t < f.qsl[r + 1]; t++)
                for (int j = 0; j < topk; j++)
                    ix[(size_t)t * topk + j] = j < s[r] ? (j * 37) % s[r] : -1;
        size_t nrow = (size_t)f.T * f.H;
        float *o1 = malloc(nrow * f.R * 4), *o2 = malloc(nrow * f.R * 4);
        float *l1 = malloc(nrow * 4), *l2 = malloc(nrow * 4);
        attn_mla_args a = mla_fx_args(&f, false, o1, l1);
        CHECK_OK(tk_mqa(&attn__backend_cpu_mla, &a));
        a.out = o2;
        a.lse = l2;
        a.topk_indices = ix;
        a.topk = topk;
        CHECK_OK(tk_mqa(&attn__backend_cpu_mla_sparse, &a));
        CHECK(fx_rel_err(o2, o1, ATTN_ELEM_F32, nrow * f.R) <= 1e-5);
        CHECK(fx_lse_err(l2, l1, nrow) <= 1e-5);

        /* no usable index (all -1 or in the future): output 0, LSE -inf */
        for (int j = 0; j < topk; j++)
            ix[j] = j == 0 ? -1 : 69; /* token 0 is at position 69: 69 is fine */
        for (int j = 0; j < topk; j++)
            ix[(size_t)1 * topk + j] = j % 2 ? -1 : 49; /* token 1 (req 1, position 47) */
        CHECK_OK(tk_mqa(&attn__backend_cpu_mla_sparse, &a));
        bool zero = true;
        for (int i = 0; i < f.H * f.R; i++)
            zero &= o2[(size_t)1 * f.H * f.R + i] == 0.0f;
        CHECK(zero);
        for (int h = 0; h < f.H; h++)
            CHECK(isinf(l2[f.H + h]) && l2[f.H + h] < 0);
        CHECK_OK(tk_mqa(&attn__backend_reference_mla_sparse, &a));
        CHECK(isinf(l2[f.H]) && l2[f.H] < 0);
        free(ix), free(o1), free(o2), free(l1), free(l2);
        mla_fx_free(&f);
    }

    /* attn_kernel_mla_forward on the sparse backend: every token absorbed */
    {
        static const int q[] = {1, 20}, s[] = {40, 20};
        mla_fx f;
        mla_fx_init(&f, 4, 64, 32, 32, 48, ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 16, 2, q, s, 10);
        int topk = 16;
        int32_t *ix = malloc(sizeof(int32_t) * (size_t)f.T * topk);
        for (int t = 0; t < f.T * topk; t++)
            ix[t] = (int32_t)(fx_next(&f.rng) % 20);
        size_t nrow = (size_t)f.T * f.H;
        void *lat = malloc(nrow * f.R * 2), *ref = malloc(nrow * f.V * 2),
             *out = malloc(nrow * f.V * 2);
        attn_mla_args a = mla_fx_args(&f, false, lat, NULL);
        a.topk_indices = ix;
        a.topk = topk;
        CHECK_OK(tk_mqa(&attn__backend_reference_mla_sparse, &a));
        CHECK_OK(attn_mla_up_project(&f.lp, f.T, lat, f.w_uv, ref));
        size_t ss = attn_mla_forward_scratch_size(&f.lp, f.T);
        void *scratch = aligned_alloc(64, (ss + 63) & ~(size_t)63);
        attn_mla_args w = mla_fx_args(&f, true, out, NULL);
        w.topk_indices = ix;
        w.topk = topk;
        CHECK_OK(tk_mla_forward(&attn__backend_cpu_mla_sparse, &w, scratch, ss));
        double e = fx_rel_err(out, ref, ATTN_ELEM_BF16, nrow * f.V);
        CHECK_MSG(e <= 2e-2, "attn_kernel_mla_forward sparse: error %.3g", e);
        free(scratch), free(ix), free(lat), free(ref), free(out);
        mla_fx_free(&f);
    }
    return attn_test_finish("test_mla_sparse");
}
