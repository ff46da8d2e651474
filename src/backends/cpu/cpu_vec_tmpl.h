/* The CPU_ATTN vector helpers written once for every vector width: exp,
 * soft-capping, loads of any storage type as fp32, rows to fp32. The
 * includer (cpu_simd_avx512.h, cpu_attn_avx2.c) defines, before including:
 *
 *   VF, VN                    the fp32 vector type and its lane count;
 *   V_SET1(x) V_LOADU(p) V_STOREU(p, v) V_MUL V_MAX V_FMADD(a, b, c)
 *   V_FNMADD(a, b, c)         the plain fp32 operations;
 *   V_ROUND(x)                round to nearest integer (as fp32);
 *   V_SCALE2N(p, n)           p * 2^n (n integral);
 *   V_FROM_BF16(p) V_FROM_F16(p) V_FROM_E5M2(p) V_FROM_E4M3(p)
 *                             VN elements at p as fp32 (e4m3: per ISA scale);
 *   CV_EXP CV_SOFTCAP CV_LOAD CV_ROW   the names of the generated functions,
 *   CV_LOAD_ATTR              the load's extra attributes (may be empty).
 *
 * Each ISA's object is compiled with its own flags (cmake/isa.cmake). */
#ifndef ATTN_CPU_VEC_TMPL_H
#define ATTN_CPU_VEC_TMPL_H

#include <math.h>
#include <string.h>

#include "attn/types.h"

/* e^x for x <= ~88; inputs below -87.3 give ~1e-38 (callers zero masked lanes) */
static inline VF CV_EXP(VF x)
{
    x = V_MAX(x, V_SET1(-87.3f));
    VF n = V_ROUND(V_MUL(x, V_SET1(1.44269504f)));
    VF r = V_FNMADD(n, V_SET1(0.693145752f), x);
    r = V_FNMADD(n, V_SET1(1.42860677e-6f), r);
    VF p = V_SET1(1.0f / 720.0f);
    p = V_FMADD(p, r, V_SET1(1.0f / 120.0f));
    p = V_FMADD(p, r, V_SET1(1.0f / 24.0f));
    p = V_FMADD(p, r, V_SET1(1.0f / 6.0f));
    p = V_FMADD(p, r, V_SET1(0.5f));
    p = V_FMADD(p, r, V_SET1(1.0f));
    p = V_FMADD(p, r, V_SET1(1.0f));
    return V_SCALE2N(p, n);
}

/* logits soft-capping, cap * tanh(x / cap), lane by lane (libm tanhf:
 * the same values as REFERENCE's) */
static inline VF CV_SOFTCAP(VF x, float cap)
{
    float tmp[VN];
    V_STOREU(tmp, x);
    for (int i = 0; i < VN; i++)
        tmp[i] = cap * tanhf(tmp[i] / cap);
    return V_LOADU(tmp);
}

/* VN elements of type e at src -> fp32 */
static inline CV_LOAD_ATTR VF CV_LOAD(const void *src, attn_elem e)
{
    switch (e) {
    case ATTN_ELEM_F32: return V_LOADU(src);
    case ATTN_ELEM_BF16: return V_FROM_BF16(src);
    case ATTN_ELEM_F16: return V_FROM_F16(src);
    case ATTN_ELEM_FP8_E5M2: return V_FROM_E5M2(src);
    default: return V_FROM_E4M3(src);
    }
}

/* d elements -> fp32, the last vector zero-filled up to a multiple of VN
 * (scalar tail through a bounce buffer) */
static inline void CV_ROW(float *dst, const void *src, int d, attn_elem e)
{
    size_t es = attn_elem_size(e);
    int i = 0;
    for (; i + VN <= d; i += VN)
        V_STOREU(dst + i, CV_LOAD((const char *)src + (size_t)i * es, e));
    if (i < d) {
        unsigned char tmp[4 * VN] = {0};
        memcpy(tmp, (const char *)src + (size_t)i * es, (size_t)(d - i) * es);
        V_STOREU(dst + i, CV_LOAD(tmp, e));
    }
}

#endif
