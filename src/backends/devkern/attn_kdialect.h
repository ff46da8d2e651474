/* The kernel dialect: one kernel source for OpenCL C 1.2, CUDA and HIP.
 *
 * Kernel sources (*.cl in this folder) use only what this header defines
 * plus the C subset all three compilers accept (docs/design/device-kernels.md
 * lists the rules): fixed-width kd_ types, KD_ address-space and launch
 * macros, kd_ math and the element conversions below. The OpenCL runtime
 * embeds kd_params.h, this header and the kernel sources as program strings
 * (in that order); nvcc/hipcc compile a kernel file directly, which then
 * includes this header.
 *
 * Conversions are bit-exact with the host's (src/util/numeric.h):
 * round-to-nearest-even, fp8 saturating at the format's largest finite
 * value, NaN to the host's NaN codes. 16-bit values travel as integers
 * (no device needs half arithmetic: PoCL has no cl_khr_fp16). Vendor-only
 * speed-ups sit behind switches: KD_FAST_MATH (native/intrinsic exp, log,
 * tanh). */
#ifndef ATTN_KDIALECT_H
#define ATTN_KDIALECT_H

#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)

/* ---- OpenCL C 1.2 ---------------------------------------------------------- */
typedef uchar kd_u8;
typedef ushort kd_u16;
typedef uint kd_u32;
typedef int kd_i32;
typedef long kd_i64;

#define KD_KERNEL                     __kernel
#define KD_WG_SIZE(n)                 __attribute__((reqd_work_group_size(n, 1, 1)))
#define KD_GLOBAL                     __global
#define KD_CONSTANT                   __constant
#define KD_LOCAL                      __local
#define KD_LOCAL_ARRAY(type, name, n) __local type name[n]
#define KD_FUNC                       static inline
#define KD_RESTRICT                   restrict
#define KD_LOCAL_ID()                 ((int)get_local_id(0))
#define KD_GROUP_ID(d)                ((int)get_group_id(d))
#define KD_NUM_GROUPS(d)              ((int)get_num_groups(d))
#define KD_BARRIER()                  barrier(CLK_LOCAL_MEM_FENCE)
#define kd_as_u32(f)                  as_uint(f)
#define kd_as_f32(u)                  as_float(u)
#define kd_fmaxf(a, b)                fmax(a, b)
#define kd_rintf(x)                   rint(x)
#if defined(KD_FAST_MATH)
#define kd_expf(x)  native_exp(x)
#define kd_logf(x)  native_log(x)
#define kd_tanhf(x) tanh(x)
#else
#define kd_expf(x)  exp(x)
#define kd_logf(x)  log(x)
#define kd_tanhf(x) tanh(x)
#endif
/* vload_half is core OpenCL: it reads a half through a pointer without
 * needing cl_khr_fp16. */
#define kd_load_f16(p, i) vload_half((size_t)(i), (KD_GLOBAL const half *)(p))
/* Unrolling is left to the OpenCL compiler (a pragma is not OpenCL C 1.2). */
#define KD_UNROLL

#elif defined(__CUDACC__) || defined(__HIPCC__)

/* ---- CUDA / HIP ---------------------------------------------------------------- */
#if defined(__HIPCC__)
#include <hip/hip_fp16.h>
#else
#include <cuda_fp16.h>
#endif
#include "kd_params.h"
typedef unsigned char kd_u8;
typedef unsigned short kd_u16;
typedef unsigned int kd_u32;
typedef int kd_i32;
typedef long long kd_i64;

#define KD_KERNEL     extern "C" __global__
#define KD_WG_SIZE(n) __launch_bounds__(n)
#define KD_GLOBAL
#define KD_CONSTANT const
#define KD_LOCAL
#define KD_LOCAL_ARRAY(type, name, n) __shared__ type name[n]
#define KD_FUNC                       static __device__ __forceinline__
#define KD_RESTRICT                   __restrict__
#define KD_LOCAL_ID()                 ((int)threadIdx.x)
#define KD_GROUP_ID(d)                ((int)((d) == 0 ? blockIdx.x : (d) == 1 ? blockIdx.y : blockIdx.z))
#define KD_NUM_GROUPS(d)              ((int)((d) == 0 ? gridDim.x : (d) == 1 ? gridDim.y : gridDim.z))
#define KD_BARRIER()                  __syncthreads()
#define kd_as_u32(f)                  __float_as_uint(f)
#define kd_as_f32(u)                  __uint_as_float(u)
#define kd_fmaxf(a, b)                fmaxf(a, b)
#define kd_rintf(x)                   rintf(x)
#if defined(KD_FAST_MATH)
#define kd_expf(x)  __expf(x)
#define kd_logf(x)  __logf(x)
#define kd_tanhf(x) tanhf(x)
#else
#define kd_expf(x)  expf(x)
#define kd_logf(x)  logf(x)
#define kd_tanhf(x) tanhf(x)
#endif
#define kd_load_f16(p, i) __half2float(__ushort_as_half(((const kd_u16 *)(p))[i]))
/* Full unrolling of a loop over a private array keeps the array in
 * registers (nvcc otherwise leaves the accumulators on the stack). */
#define KD_UNROLL         _Pragma("unroll")

#else
#error "attn_kdialect.h: compile as OpenCL C, CUDA or HIP"
#endif

/* ---- shared by every target ---------------------------------------------------- */

#define KD_INF (kd_as_f32(0x7f800000u))

KD_FUNC int kd_min(int a, int b)
{
    return a < b ? a : b;
}

KD_FUNC int kd_max(int a, int b)
{
    return a > b ? a : b;
}

/* fp16 bits -> float, exact (subnormals included); the load path uses the
 * target's own instruction (kd_load_f16), this one serves e5m2. */
KD_FUNC float kd_f16_to_f32(kd_u32 h)
{
    kd_u32 sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24 */
        return sign ? -v : v;
    }
    if (e == 31) return kd_as_f32(sign | 0x7f800000u | (m << 13));
    return kd_as_f32(sign | ((e + 112u) << 23) | (m << 13));
}

KD_FUNC kd_u32 kd_f32_to_f16(float f)
{
    kd_u32 u = kd_as_u32(f), sign = (u >> 16) & 0x8000u, au = u & 0x7fffffffu;
    if (au > 0x7f800000u) return sign | 0x7e00u;
    if (au >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: inf */
    if (au < 0x38800000u)                         /* below 2^-14: subnormal or zero */
        return sign | (kd_u32)kd_rintf(kd_as_f32(au) * 16777216.0f);
    kd_u32 m = au & 0x7fffffu, h = (((au >> 23) - 112u) << 10) | (m >> 13), rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return sign | h;
}

KD_FUNC float kd_bf16_to_f32(kd_u32 h)
{
    return kd_as_f32(h << 16);
}

KD_FUNC kd_u32 kd_f32_to_bf16(float f)
{
    kd_u32 u = kd_as_u32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu; /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}

/* e4m3fn: bias 7, no infinities, 0x7f/0xff NaN. */
KD_FUNC float kd_e4m3_to_f32(kd_u32 v)
{
    kd_u32 sign = (v & 0x80u) << 24, e = (v >> 3) & 15u, m = v & 7u;
    if (e == 15u && m == 7u) return kd_as_f32(0x7fc00000u);
    if (e == 0) {
        float r = (float)m * 0.001953125f; /* m * 2^-9 */
        return sign ? -r : r;
    }
    return kd_as_f32(sign | ((e + 120u) << 23) | (m << 20));
}

/* e5m2 is the top byte of an fp16. */
KD_FUNC float kd_e5m2_to_f32(kd_u32 v)
{
    return kd_f16_to_f32(v << 8);
}

/* Saturating round-to-nearest-even to an fp8 with mbits mantissa bits and
 * exponent bias `bias`: max_bits are the float bits of the largest finite
 * value, max_code its code, sub_scale = 2^(bias + mbits - 1) (the subnormal
 * quantum's inverse). NaN -> 0x7f, +-inf and overflow -> +-max. */
KD_FUNC kd_u32 kd_f32_to_fp8(float f, int mbits, int bias, kd_u32 max_bits, kd_u32 max_code,
                             float sub_scale)
{
    kd_u32 u = kd_as_u32(f), au = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
    if (au > 0x7f800000u) return 0x7fu;
    if (au >= max_bits) return sign | max_code;
    int e = (int)(au >> 23) - 127;
    if (e < 1 - bias) return sign | (kd_u32)kd_rintf(kd_as_f32(au) * sub_scale);
    int sh = 23 - mbits;
    kd_u32 m = au & 0x7fffffu, code = ((kd_u32)(e + bias) << mbits) | (m >> sh);
    kd_u32 rest = m & ((1u << sh) - 1u), mid = 1u << (sh - 1);
    if (rest > mid || (rest == mid && (code & 1u))) code++;
    return sign | (code < max_code ? code : max_code);
}

KD_FUNC kd_u32 kd_f32_to_e4m3(float f)
{
    return kd_f32_to_fp8(f, 3, 7, 0x43e00000u /* 448 */, 0x7eu, 512.0f);
}

KD_FUNC kd_u32 kd_f32_to_e5m2(float f)
{
    return kd_f32_to_fp8(f, 2, 15, 0x47600000u /* 57344 */, 0x7bu, 65536.0f);
}

/* Element i of a buffer of element type elem (KD_ELEM_*), as float. */
KD_FUNC float kd_load(KD_GLOBAL const kd_u8 *p, int elem, kd_i64 i)
{
    switch (elem) {
    case KD_ELEM_F16: return kd_load_f16(p, i);
    case KD_ELEM_BF16: return kd_bf16_to_f32(((KD_GLOBAL const kd_u16 *)p)[i]);
    case KD_ELEM_E4M3: return kd_e4m3_to_f32(p[i]);
    case KD_ELEM_E5M2: return kd_e5m2_to_f32(p[i]);
    default: return ((KD_GLOBAL const float *)p)[i];
    }
}

KD_FUNC void kd_store(KD_GLOBAL kd_u8 *p, int elem, kd_i64 i, float v)
{
    switch (elem) {
    case KD_ELEM_F16: ((KD_GLOBAL kd_u16 *)p)[i] = (kd_u16)kd_f32_to_f16(v); break;
    case KD_ELEM_BF16: ((KD_GLOBAL kd_u16 *)p)[i] = (kd_u16)kd_f32_to_bf16(v); break;
    case KD_ELEM_E4M3: p[i] = (kd_u8)kd_f32_to_e4m3(v); break;
    case KD_ELEM_E5M2: p[i] = (kd_u8)kd_f32_to_e5m2(v); break;
    default: ((KD_GLOBAL float *)p)[i] = v; break;
    }
}

/* Element i copied without conversion (NaN payloads kept, as the host's
 * memcpy does). */
KD_FUNC void kd_copy(KD_GLOBAL kd_u8 *dst, kd_i64 di, KD_GLOBAL const kd_u8 *src, kd_i64 si,
                     int elem)
{
    if (elem == KD_ELEM_F32)
        ((KD_GLOBAL kd_u32 *)dst)[di] = ((KD_GLOBAL const kd_u32 *)src)[si];
    else if (elem == KD_ELEM_F16 || elem == KD_ELEM_BF16)
        ((KD_GLOBAL kd_u16 *)dst)[di] = ((KD_GLOBAL const kd_u16 *)src)[si];
    else
        dst[di] = src[si];
}

/* ---- online softmax, shared by the attention kernels ----------------------------- */

/* a == b (both -inf included) -> 1, else exp(a - b). */
KD_FUNC float kd_exp_diff(float a, float b)
{
    return a == b ? 1.0f : kd_expf(a - b);
}

/* Online-softmax step of one row over the scores of a tile: the new max,
 * the factor the old state is rescaled by (row_a), and p = exp(s - max)
 * in place of the scores (0 for masked keys). */
KD_FUNC void kd_row_update(KD_LOCAL float *s, int nk, KD_LOCAL float *row_m, KD_LOCAL float *row_l,
                           KD_LOCAL float *row_a, int r)
{
    float m_old = row_m[r], mx = m_old, a = 1.0f, sum = 0.0f;
    for (int j = 0; j < nk; j++)
        mx = kd_fmaxf(mx, s[j]);
    if (mx > -KD_INF) {
        a = kd_expf(m_old - mx); /* 0 while no key was seen (m_old = -inf) */
        for (int j = 0; j < nk; j++) {
            float p = s[j] > -KD_INF ? kd_expf(s[j] - mx) : 0.0f;
            s[j] = p;
            sum += p;
        }
    } else {
        for (int j = 0; j < nk; j++)
            s[j] = 0.0f;
    }
    row_l[r] = row_l[r] * a + sum;
    row_m[r] = mx;
    row_a[r] = a;
}

#endif
