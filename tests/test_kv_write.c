/* Writing new K/V into their slots: the element lands where the backend's
 * logical shape and strides say (every family, NHD and HND), padding slots
 * are skipped, a bad slot writes nothing, and FP8 (e4m3, e5m2) with
 * per-tensor and per-head scales reads back within the format's precision. */
#include <math.h>

#include "attn/kvcache.h"
#include "backends/catalog/catalog.h"
#include "backends/cpu/cpu_attn.h"
#include "registry/catalog_table.h"
#include "test.h"
#include "util/numeric.h"

static uint64_t seed = 12345;
static float frand(void)
{
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((seed >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

enum { NB = 6, BS = 16, H = 4, D = 32, T = 5 };

static const attn_backend_desc *desc(const char *name)
{
    const attn_backend *b = attn__catalog_builtin(name, NULL);
    CHECK_MSG(b != NULL, "%s missing", name);
    return b ? b->desc : NULL;
}

/* Element index of (kv, block, token, head, d) from the logical strides. */
static int64_t logical_index(const attn_kv_layout_info *li, int kv, int b, int t, int h, int d)
{
    int64_t idx = 0;
    for (int i = 0; i < li->shape.ndim; i++) {
        const char *n = li->shape.dim_names[i];
        int64_t v = !strcmp(n, "2")              ? kv
                    : !strcmp(n, "num_blocks")   ? b
                    : !strcmp(n, "block_size")   ? t
                    : !strcmp(n, "num_kv_heads") ? h
                                                 : d;
        idx += v * li->strides[i];
    }
    return idx;
}

static void test_placement(const attn_backend_desc *d, attn_kv_layout layout)
{
    attn_kv_layout_info li;
    CHECK_OK(
        attn_kv_layout_compute(d, layout, NB, BS, H, D, 0, ATTN_KV_AUTO, ATTN_DTYPE_FP32, &li));
    attn_kv_cache *c;
    CHECK_OK(attn_kv_cache_create(&li, 1, &c));
    attn_kv_view v;
    CHECK_OK(attn_kv_cache_view(c, 0, &v));
    float k[T][H][D], val[T][H][D];
    for (int i = 0; i < T; i++)
        for (int h = 0; h < H; h++)
            for (int e = 0; e < D; e++)
                k[i][h][e] = frand(), val[i][h][e] = frand();
    const int64_t slots[T] = {5 * BS + 15, 0, -1, 2 * BS + 3, 3 * BS};
    CHECK_OK(attn_kv_write(&v, slots, T, k, val, ATTN_ELEM_F32));
    const float *mem = v.data;
    int bad = 0;
    for (int i = 0; i < T; i++) {
        if (slots[i] < 0) continue;
        int b = (int)(slots[i] / BS), t = (int)(slots[i] % BS);
        for (int h = 0; h < H; h++)
            for (int e = 0; e < D; e++) {
                bad += mem[logical_index(&li, 0, b, t, h, e)] != k[i][h][e];
                bad += mem[logical_index(&li, 1, b, t, h, e)] != val[i][h][e];
            }
        float row[D];
        CHECK_OK(attn_kv_read(&v, slots[i], H - 1, true, row));
        bad += memcmp(row, val[i][H - 1], sizeof row) != 0;
    }
    CHECK_MSG(bad == 0, "%s %s: %d misplaced elements", d->name, attn_layout_name(layout), bad);
    /* the padding token wrote nothing: count non-zero elements */
    int64_t nonzero = 0;
    for (int64_t i = 0; i < li.elems_per_layer; i++)
        nonzero += mem[i] != 0.0f;
    CHECK(nonzero == 4 * 2 * H * D);

    /* a bad slot anywhere in the call: nothing written */
    float before = mem[logical_index(&li, 0, 1, 1, 0, 0)];
    const int64_t bad_slots[2] = {BS + 1, NB * BS};
    CHECK_STATUS(attn_kv_write(&v, bad_slots, 2, k, val, ATTN_ELEM_F32), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "token 1 has slot 96 outside the cache");
    CHECK(mem[logical_index(&li, 0, 1, 1, 0, 0)] == before);
    attn_kv_cache_free(c);
}

/* x stored with scale s reads back as r: saturated at the format's max, else
 * within half an ulp (relative) or half the subnormal quantum (absolute). */
static bool within(double x, double r, double s, double maxv, double rel, double quantum)
{
    if (fabs(x) >= maxv * s) return fabs(r - copysign(maxv * s, x)) <= 1e-6 * maxv * s;
    return fabs(r - x) <= fmax(rel * fabs(x), quantum / 2 * s) * 1.0001;
}

/* e4m3: 3 mantissa bits (half ulp 2^-4), subnormal quantum 2^-9.
 * e5m2: 2 bits (2^-3), quantum 2^-16. */
static void test_fp8(attn_kv_dtype kvd, bool per_head, attn_elem src)
{
    const attn_backend_desc *d = desc("FLASHINFER");
    if (!d) return;
    attn_kv_layout_info li;
    CHECK_OK(
        attn_kv_layout_compute(d, ATTN_LAYOUT_NHD, NB, BS, H, D, 0, kvd, ATTN_DTYPE_BF16, &li));
    bool e4 = li.elem == ATTN_ELEM_FP8_E4M3;
    CHECK(li.elem == (kvd == ATTN_KV_FP8_E5M2 ? ATTN_ELEM_FP8_E5M2 : ATTN_ELEM_FP8_E4M3));
    double rel = e4 ? 1.0 / 16 : 1.0 / 8, quantum = e4 ? ldexp(1, -9) : ldexp(1, -16);
    double maxv = e4 ? 448.0 : 57344.0;
    attn_kv_cache *c;
    CHECK_OK(attn_kv_cache_create(&li, 1, &c));
    float ks[H], vs[H];
    for (int h = 0; h < H; h++)
        ks[h] = 0.01f * (float)(h + 1), vs[h] = 0.02f * (float)(h + 1);
    CHECK_OK(
        attn_kv_cache_set_scales(c, 0, 0.05f, 0.03f, per_head ? ks : NULL, per_head ? vs : NULL));
    attn_kv_view v;
    CHECK_OK(attn_kv_cache_view(c, 0, &v));
    /* values spanning the format: tiny, normal, and beyond max (saturate) */
    float kf[T][H][D], vf[T][H][D];
    uint16_t kb[T][H][D], vb[T][H][D];
    for (int i = 0; i < T; i++)
        for (int h = 0; h < H; h++)
            for (int e = 0; e < D; e++) {
                float mag = powf(10.0f, (float)((e % 8) - 5)); /* 1e-5 .. 1e2 */
                float kx = frand() * mag, vx = frand() * mag;
                if (e == D - 1) kx = 1e6f; /* beyond any scale's range */
                if (src == ATTN_ELEM_BF16) {
                    kb[i][h][e] = attn__f32_to_bf16(kx);
                    vb[i][h][e] = attn__f32_to_bf16(vx);
                    kx = attn__bf16_to_f32(kb[i][h][e]);
                    vx = attn__bf16_to_f32(vb[i][h][e]);
                }
                kf[i][h][e] = kx;
                vf[i][h][e] = vx;
            }
    const int64_t slots[T] = {3, BS + 7, 4 * BS + 2, 5 * BS + 15, 2 * BS};
    if (src == ATTN_ELEM_BF16)
        CHECK_OK(attn_kv_write(&v, slots, T, kb, vb, ATTN_ELEM_BF16));
    else
        CHECK_OK(attn_kv_write(&v, slots, T, kf, vf, ATTN_ELEM_F32));
    int out_of_tol = 0;
    for (int i = 0; i < T; i++)
        for (int h = 0; h < H; h++) {
            float kr[D], vr[D];
            CHECK_OK(attn_kv_read(&v, slots[i], h, false, kr));
            CHECK_OK(attn_kv_read(&v, slots[i], h, true, vr));
            double sk = per_head ? ks[h] : 0.05, sv = per_head ? vs[h] : 0.03;
            for (int e = 0; e < D; e++) {
                out_of_tol += !within(kf[i][h][e], kr[e], sk, maxv, rel, quantum);
                out_of_tol += !within(vf[i][h][e], vr[e], sv, maxv, rel, quantum);
            }
        }
    CHECK_MSG(out_of_tol == 0, "%s %s %s: %d values outside the format's precision",
              attn_kv_dtype_name(kvd), per_head ? "per-head" : "per-tensor", attn_elem_name(src),
              out_of_tol);
    /* exact encodings at known places: 1.0 / scale 0.5 = 2.0 -> e4m3 0x40,
     * e5m2 0x40; the byte sits at the slot's NHD offset */
    if (!per_head) {
        CHECK_OK(attn_kv_cache_set_scales(c, 0, 0.5f, 0.5f, NULL, NULL));
        CHECK_OK(attn_kv_cache_view(c, 0, &v));
        float one[H][D], zero[H][D];
        for (int h = 0; h < H; h++)
            for (int e = 0; e < D; e++)
                one[h][e] = 1.0f, zero[h][e] = 0.0f;
        const int64_t s = 3 * BS + 5;
        CHECK_OK(attn_kv_write(&v, &s, 1, one, zero, ATTN_ELEM_F32));
        const uint8_t *bytes = v.data;
        size_t off = (size_t)(3 * v.stride_block + 5 * v.stride_token + 2 * v.stride_head + 7);
        CHECK(bytes[off] == 0x40);
        CHECK(bytes[off + (size_t)v.v_offset] == 0x00);
        float r[D];
        CHECK_OK(attn_kv_read(&v, s, 2, false, r));
        CHECK(r[7] == 1.0f);
    }
    attn_kv_cache_free(c);
}

static void test_misuse(void)
{
    attn_kv_view v;
    memset(&v, 0, sizeof v);
    float k[D] = {0};
    int64_t s = 0;
    CHECK_STATUS(attn_kv_write(NULL, &s, 1, k, k, ATTN_ELEM_F32), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_kv_write(&v, &s, 1, k, k, ATTN_ELEM_F32), ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn_kv_write(&v, NULL, 0, NULL, NULL, ATTN_ELEM_F32)); /* nothing to do */
    const attn_backend_desc *mla = desc("FLASHMLA");
    if (!mla) return;
    attn_kv_layout_info li;
    CHECK_OK(attn_kv_layout_compute(mla, ATTN_LAYOUT_NHD, 4, 64, 1, 576, 0, ATTN_KV_AUTO,
                                    ATTN_DTYPE_FP32, &li));
    attn_kv_cache *c;
    CHECK_OK(attn_kv_cache_create(&li, 1, &c));
    CHECK_OK(attn_kv_cache_view(c, 0, &v));
    static float lat[2][576];
    for (int i = 0; i < 576; i++)
        lat[0][i] = (float)i, lat[1][i] = -(float)i;
    const int64_t slots[2] = {64 + 1, 3 * 64 + 63};
    CHECK_STATUS(attn_kv_write(&v, slots, 2, lat, lat, ATTN_ELEM_F32), ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn_kv_write(&v, slots, 2, lat, NULL, ATTN_ELEM_F32)); /* latent rows only */
    float r[576];
    CHECK_OK(attn_kv_read(&v, slots[1], 0, false, r));
    CHECK(r[575] == -575.0f && r[1] == -1.0f);
    CHECK_STATUS(attn_kv_read(&v, slots[1], 0, true, r), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_kv_read(&v, 4 * 64, 0, false, r), ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn_kv_write(&v, slots, 2, lat, NULL, ATTN_ELEM_FP8_E4M3), ATTN_INVALID_ARGUMENT);
    attn_kv_cache_free(c);
}

int main(void)
{
    const char *names[] = {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"};
    for (int i = 0; i < 4; i++) {
        const attn_backend_desc *d = desc(names[i]);
        if (!d) continue;
        test_placement(d, ATTN_LAYOUT_NHD);
        test_placement(d, ATTN_LAYOUT_HND);
    }
    test_placement(&attn__desc_cpu_attn, ATTN_LAYOUT_HND);
    const attn_kv_dtype fmts[] = {ATTN_KV_FP8, ATTN_KV_FP8_E4M3, ATTN_KV_FP8_E5M2};
    for (int f = 0; f < 3; f++)
        for (int ph = 0; ph < 2; ph++) {
            test_fp8(fmts[f], ph, ATTN_ELEM_F32);
            test_fp8(fmts[f], ph, ATTN_ELEM_BF16);
        }
    test_misuse();
    return attn_test_finish("test_kv_write");
}
