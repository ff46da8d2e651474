/* Scalar conversions between float and the storage formats (fp16, bf16,
 * fp8 e4m3fn / e5m2). Round-to-nearest-even everywhere; fp8 saturates to
 * the format's max finite value (as KV-cache quantisation does) and maps NaN
 * to NaN. Header-only so kernels inline them. */
#ifndef ATTN_UTIL_NUMERIC_H
#define ATTN_UTIL_NUMERIC_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "attn/types.h"

static inline uint32_t attn__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float attn__bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float attn__bf16_to_f32(uint16_t h)
{
    return attn__bits_f32((uint32_t)h << 16);
}

static inline uint16_t attn__f32_to_bf16(float f)
{
    uint32_t u = attn__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float attn__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return attn__bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return attn__bits_f32(sign | 0x7f800000u | (man << 13));
    return attn__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t attn__f32_to_f16(float f)
{
    uint32_t u = attn__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t au = u & 0x7fffffffu;
    if (au > 0x7f800000u) return sign | 0x7e00u;
    if (au >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return sign | 0x7c00u;
    if (au < 0x38800000u) { /* below 2^-14: subnormal or zero */
        float a = attn__bits_f32(au);
        /* round-to-nearest-even of a / 2^-24 */
        float q = a * 16777216.0f;
        float r = nearbyintf(q);
        return sign | (uint16_t)r;
    }
    uint32_t e = (au >> 23) - 112u;
    uint32_t m = au & 0x7fffffu;
    uint32_t h = (e << 10) | (m >> 13);
    uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return sign | (uint16_t)h;
}

/* Generic minifloat encode: ebits exponent bits, mbits mantissa bits, bias,
 * max finite value. Saturating, round-to-nearest-even. */
static inline uint8_t attn__f32_to_fp8(float f, int mbits, int bias, float maxv, uint8_t nan)
{
    if (isnan(f)) return nan;
    uint8_t sign = f < 0 || (f == 0 && signbit(f)) ? 0x80 : 0;
    float a = fabsf(f);
    if (a >= maxv) a = maxv;
    if (a == 0) return sign;
    int e;
    frexpf(a, &e);   /* a = m * 2^e, m in [0.5, 1) */
    int exp = e - 1; /* a = 1.x * 2^exp */
    int min_exp = 1 - bias;
    if (exp < min_exp) exp = min_exp; /* subnormal range shares the min exponent's quantum */
    float quantum = ldexpf(1.0f, exp - mbits);
    float q = nearbyintf(a / quantum) * quantum;
    if (q > maxv) q = maxv;
    /* re-encode q exactly */
    if (q == 0) return sign;
    frexpf(q, &e);
    exp = e - 1;
    uint32_t code;
    if (exp < min_exp) {
        code = (uint32_t)(q / ldexpf(1.0f, min_exp - mbits)); /* subnormal */
    } else {
        uint32_t man = (uint32_t)((q / ldexpf(1.0f, exp) - 1.0f) * (float)(1 << mbits) + 0.5f);
        code = ((uint32_t)(exp + bias) << mbits) | man;
    }
    return sign | (uint8_t)code;
}

static inline float attn__fp8_to_f32(uint8_t v, int mbits, int bias, int ebits, int e4m3fn)
{
    int sign = v & 0x80;
    int exp = (v >> mbits) & ((1 << ebits) - 1);
    int man = v & ((1 << mbits) - 1);
    float r;
    if (e4m3fn && exp == 15 && man == 7) return NAN;
    if (!e4m3fn && exp == 31) return man ? NAN : (sign ? -INFINITY : INFINITY);
    if (exp == 0)
        r = ldexpf((float)man, 1 - bias - mbits);
    else
        r = ldexpf(1.0f + (float)man / (float)(1 << mbits), exp - bias);
    return sign ? -r : r;
}

/* e4m3fn: bias 7, max 448, no inf, NaN = 0x7f. */
static inline uint8_t attn__f32_to_e4m3(float f)
{
    return attn__f32_to_fp8(f, 3, 7, 448.0f, 0x7f);
}
static inline float attn__e4m3_to_f32(uint8_t v)
{
    return attn__fp8_to_f32(v, 3, 7, 4, 1);
}
/* e5m2: bias 15, max 57344, inf/NaN as IEEE. */
static inline uint8_t attn__f32_to_e5m2(float f)
{
    return attn__f32_to_fp8(f, 2, 15, 57344.0f, 0x7f);
}
static inline float attn__e5m2_to_f32(uint8_t v)
{
    return attn__fp8_to_f32(v, 2, 15, 5, 0);
}

/* Checked size arithmetic: every size, element count and byte count derived
 * from caller input goes through these. They return false on overflow (and
 * leave *out unspecified); callers turn that into a status with detail. */
static inline bool attn__mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool attn__add_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline bool attn__mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool attn__add_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
/* a * b * c as int64, all >= 0 expected; false on overflow or a negative. */
static inline bool attn__mul3_i64(int64_t a, int64_t b, int64_t c, int64_t *out)
{
    int64_t t;
    if (a < 0 || b < 0 || c < 0) return false;
    return attn__mul_i64(a, b, &t) && attn__mul_i64(t, c, out);
}

/* Load element i of a buffer of the given storage type as float (no scale). */
static inline float attn__load_elem(const void *p, attn_elem t, size_t i)
{
    switch (t) {
    case ATTN_ELEM_F32: return ((const float *)p)[i];
    case ATTN_ELEM_F16: return attn__f16_to_f32(((const uint16_t *)p)[i]);
    case ATTN_ELEM_BF16: return attn__bf16_to_f32(((const uint16_t *)p)[i]);
    case ATTN_ELEM_FP8_E4M3: return attn__e4m3_to_f32(((const uint8_t *)p)[i]);
    case ATTN_ELEM_FP8_E5M2: return attn__e5m2_to_f32(((const uint8_t *)p)[i]);
    default: return (float)((const uint8_t *)p)[i];
    }
}

static inline void attn__store_elem(void *p, attn_elem t, size_t i, float v)
{
    switch (t) {
    case ATTN_ELEM_F32: ((float *)p)[i] = v; break;
    case ATTN_ELEM_F16: ((uint16_t *)p)[i] = attn__f32_to_f16(v); break;
    case ATTN_ELEM_BF16: ((uint16_t *)p)[i] = attn__f32_to_bf16(v); break;
    case ATTN_ELEM_FP8_E4M3: ((uint8_t *)p)[i] = attn__f32_to_e4m3(v); break;
    case ATTN_ELEM_FP8_E5M2: ((uint8_t *)p)[i] = attn__f32_to_e5m2(v); break;
    default: ((uint8_t *)p)[i] = (uint8_t)v; break;
    }
}

#endif
