/* Storage-format conversions: exact round trips where the format can hold
 * the value, correct rounding and saturation where it cannot. */
#include "test.h"
#include "util/numeric.h"

int main(void)
{
    /* every fp16 bit pattern round-trips (NaNs stay NaN) */
    int bad16 = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = attn__f16_to_f32((uint16_t)h);
        uint16_t back = attn__f32_to_f16(f);
        if (isnan(f) ? !isnan(attn__f16_to_f32(back)) : back != h) bad16++;
    }
    CHECK_MSG(bad16 == 0, "%d fp16 patterns did not round-trip", bad16);
    CHECK(attn__f32_to_f16(65504.0f) == 0x7bff);
    CHECK(attn__f32_to_f16(1e6f) == 0x7c00);
    CHECK(attn__f32_to_f16(1.0f + 1.0f / 2048.0f) == 0x3c00); /* tie to even */
    /* bf16 */
    int bad16b = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = attn__bf16_to_f32((uint16_t)h);
        if (!isnan(f) && attn__f32_to_bf16(f) != h) bad16b++;
    }
    CHECK(bad16b == 0);
    CHECK(attn__f32_to_bf16(1.00390625f) == 0x3f80); /* tie to even */
    /* fp8: every code round-trips; saturation; known values */
    int bad8 = 0;
    for (int v = 0; v < 256; v++) {
        float a = attn__e4m3_to_f32((uint8_t)v);
        if (!isnan(a) && attn__f32_to_e4m3(a) != v && !(a == 0 && v == 0x80)) bad8++;
        float b = attn__e5m2_to_f32((uint8_t)v);
        if (!isnan(b) && !isinf(b) && attn__f32_to_e5m2(b) != v && !(b == 0 && v == 0x80)) bad8++;
    }
    CHECK_MSG(bad8 == 0, "%d fp8 codes did not round-trip", bad8);
    CHECK_NEAR(attn__e4m3_to_f32(attn__f32_to_e4m3(1000.0f)), 448.0, 0);
    CHECK_NEAR(attn__e4m3_to_f32(attn__f32_to_e4m3(-0.3f)), -0.3125, 0);
    CHECK_NEAR(attn__e5m2_to_f32(attn__f32_to_e5m2(1e9f)), 57344.0, 0);
    CHECK_NEAR(attn__e4m3_to_f32(0x01), ldexp(1.0, -9), 0); /* smallest subnormal */
    CHECK(isnan(attn__e4m3_to_f32(0x7f)));
    /* relative error bound of e4m3 for normal values: 2^-4 */
    double worst = 0;
    for (float x = 0.02f; x < 400.0f; x *= 1.01f) {
        double e = fabs(attn__e4m3_to_f32(attn__f32_to_e4m3(x)) - x) / x;
        if (e > worst) worst = e;
    }
    CHECK_MSG(worst <= 1.0 / 16 + 1e-6, "worst e4m3 rel error %g", worst);
    return attn_test_finish("test_util_numeric");
}
