/* CPU_MLA AVX-512 variant: the fp32 drivers of mla_kern_tmpl.h over
 * AVX-512F/BW/VL/DQ primitives (register-blocked broadcast-FMA GEMM, 16x16
 * transposes, base-2 online softmax with a polynomial exp2), used for every
 * dtype; bf16 decode runs on AMX (mla_kern_amx.c) where the CPU has
 * it. Compiled with -mavx512*; only called after attn_cpu_has() said yes. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "attn/cpu.h"
#include "backends/mla/mla_internal.h"
#include "backends/mla/mla_vec_avx512.h"
#include "util/numeric.h"

#define KN(x) avx512_##x
#include "backends/mla/mla_kern_tmpl.h"

static bool avx512_usable(void)
{
    return attn_cpu_has(ATTN_CPU_AVX512F) && attn_cpu_has(ATTN_CPU_AVX512BW) &&
           attn_cpu_has(ATTN_CPU_AVX512VL) && attn_cpu_has(ATTN_CPU_AVX512DQ) &&
           attn_cpu_has(ATTN_CPU_FMA) && attn_cpu_has(ATTN_CPU_F16C) && attn_cpu_has(ATTN_CPU_AVX2);
}

static bool avx512_decode_ok(attn_elem q, attn_elem kv, int R, int D)
{
    (void)q, (void)kv, (void)R, (void)D;
    return true;
}

const attn__mla_kern attn__mla_kern_avx512 = {
    .name = "avx512",
    .usable = avx512_usable,
    .decode_ws = avx512_decode_ws,
    .prefill_ws = avx512_prefill_ws,
    .decode_ok = avx512_decode_ok,
    .decode = avx512_decode,
    .prefill = avx512_prefill,
    .load_row = k_load_row,
    .gemm = k_gemm,
    .store_row = k_store_row,
};
