/* MLA's projections on a device (attn_kd_mla_project, kd_proj.cl) against
 * the host's attn_mla_absorb_q / attn_mla_up_project, on PoCL through the
 * OpenCL runtime (the CUDA module runs this file too:
 * test_cuda_mla_project). Per dtype and shape (DeepSeek-V3's, a small odd
 * one, a token count that is not a multiple of the tile, one head): the
 * absorbed q (the rope part copied bit for bit) and the up-projected
 * output from buffers at element offsets, within CPU_MLA's tolerances
 * (fp32 1e-4, 16-bit 2e-2 of the largest output); then bad input: a buffer
 * too short, overlapping input and output, a layer without the projection's
 * dimension - each refused with its status and the output unchanged. */
#ifndef NAME
#define NAME "test_opencl_mla_project"
#include "ocl_testutil.h"
#endif

typedef struct pshape {
    int T, H, N, R, P, V;
} pshape;

static attn_status host_project(const attn_layer_params *l, int T, bool absorb, const void *in,
                                const void *w, void *out)
{
    return absorb ? attn_mla_absorb_q(l, T, in, w, out) : attn_mla_up_project(l, T, in, w, out);
}

/* One direction of one shape: device vs host. */
static void one(attn__ocl *o, const pshape *s, attn_dtype dt, bool absorb, uint64_t seed)
{
    attn_layer_params l = {.num_heads = s->H,
                           .num_kv_heads = 1,
                           .head_size = s->R + s->P,
                           .dtype = dt,
                           .kv_lora_rank = s->R,
                           .qk_rope_head_dim = s->P,
                           .qk_nope_head_dim = s->N,
                           .v_head_dim = s->V};
    attn_elem e = attn_dtype_elem(dt);
    size_t esz = attn_elem_size(e);
    int in_w = absorb ? s->N + s->P : s->R, out_w = absorb ? s->R + s->P : s->V;
    int kin = absorb ? s->N : s->R, nout = absorb ? s->R : s->V;
    size_t ni = (size_t)s->T * s->H * in_w, nw = (size_t)s->H * kin * nout;
    size_t no = (size_t)s->T * s->H * out_w;
    enum { IN_OFF = 40, OUT_OFF = 24 };
    trng r = {seed};
    void *in = malloc((ni + IN_OFF) * esz), *w = malloc(nw * esz);
    void *want = malloc(no * esz), *got = malloc((no + OUT_OFF) * esz);
    for (size_t i = 0; i < ni + IN_OFF; i++)
        attn__store_elem(in, e, i, trng_normal(&r));
    for (size_t i = 0; i < nw; i++)
        attn__store_elem(w, e, i, trng_normal(&r) / sqrtf((float)kin));
    CHECK_OK(host_project(&l, s->T, absorb, (char *)in + IN_OFF * esz, w, want));
    attn__ocl_mem *din = tocl_upload(o, in, (ni + IN_OFF) * esz), *dw = tocl_upload(o, w, nw * esz);
    attn__ocl_mem *dout = tocl_upload(o, NULL, (no + OUT_OFF) * esz);
    attn_status st = attn__ocl_mla_project(o, &l, s->T, absorb, din, IN_OFF, dw, dout, OUT_OFF);
    CHECK_MSG(st == ATTN_OK, "project: %s", attn_last_error());
    CHECK_OK(attn__ocl_copy_out(o, got, dout, 0, (no + OUT_OFF) * esz));
    double err = trel_err((char *)got + OUT_OFF * esz, want, e, no), big = 0;
    for (size_t i = 0; i < no; i++)
        big = fmax(big, fabs(attn__load_elem(want, e, i)));
    CHECK_MSG(big > 0.1, "the host projection is all but zero (%g): the comparison is void", big);
    double tol = dt == ATTN_DTYPE_FP32 ? 1e-4 : 2e-2;
    bool rope_same = true;
    for (size_t row = 0; absorb && row < (size_t)s->T * s->H; row++)
        rope_same &= !memcmp((char *)got + (OUT_OFF + row * out_w + s->R) * esz,
                             (char *)want + (row * out_w + s->R) * esz, (size_t)s->P * esz);
    CHECK_MSG(err <= tol && rope_same,
              "%s %s T=%d H=%d N=%d R=%d P=%d V=%d: max error %.3g (tolerance %.1g)%s",
              absorb ? "absorb" : "up-projection", attn_dtype_name(dt), s->T, s->H, s->N, s->R,
              s->P, s->V, err, tol, rope_same ? "" : ", rope part not copied");
    printf("%s %s T=%d H=%d R=%d: max error %.3g\n", absorb ? "absorb" : "up", attn_dtype_name(dt),
           s->T, s->H, s->R, err);
    /* bad input: nothing is written */
    void *before = malloc((no + OUT_OFF) * esz);
    CHECK_OK(attn__ocl_copy_out(o, before, dout, 0, (no + OUT_OFF) * esz));
    CHECK_STATUS(attn__ocl_mla_project(o, &l, s->T, absorb, din, IN_OFF + 1, dw, dout, OUT_OFF),
                 ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn__ocl_mla_project(o, &l, s->T, absorb, din, IN_OFF, dw, dout, OUT_OFF + 1),
                 ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn__ocl_mla_project(o, &l, s->T, absorb, dout, 0, dw, dout, 0),
                 no >= ni ? ATTN_INVALID_ARGUMENT : ATTN_OUT_OF_RANGE);
    attn_layer_params bad = l;
    if (absorb)
        bad.qk_nope_head_dim = 0;
    else
        bad.v_head_dim = 0;
    CHECK_STATUS(attn__ocl_mla_project(o, &bad, s->T, absorb, din, IN_OFF, dw, dout, OUT_OFF),
                 ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn__ocl_mla_project(o, &l, -1, absorb, din, IN_OFF, dw, dout, OUT_OFF),
                 ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn__ocl_copy_out(o, got, dout, 0, (no + OUT_OFF) * esz));
    CHECK_MSG(!memcmp(got, before, (no + OUT_OFF) * esz), "a refused projection wrote");
    free(before);
    attn__ocl_free(din), attn__ocl_free(dw), attn__ocl_free(dout);
    free(in), free(w), free(want), free(got);
}

int main(void)
{
    attn__ocl *o = tocl_open_or_skip(NAME, NULL);
    static const pshape shapes[] = {
        {37, 16, 128, 512, 64, 128}, /* DeepSeek-V3 at TP 8, a tile and a partial one */
        {5, 3, 72, 200, 24, 40},     /* nothing a multiple of the tiles */
        {16, 1, 8, 64, 0, 8},        /* one head, no rope */
    };
    static const attn_dtype dts[] = {ATTN_DTYPE_FP32, ATTN_DTYPE_FP16, ATTN_DTYPE_BF16};
    uint64_t seed = 11;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 3; d++)
            for (int absorb = 0; absorb < 2; absorb++)
                one(o, &shapes[s], dts[d], absorb, seed++);
    attn__ocl_close(o);
    return attn_test_finish(NAME);
}
