/* AVX2 + FMA loops of the machine measurements (see cpu_machine.h). */
#include <immintrin.h>

#include "backends/cpu/cpu_machine.h"

uint64_t attn__cpu_read_avx2(const void *p, size_t n, size_t pf)
{
    const char *c = p;
    __m256i a = _mm256_setzero_si256(), b = a, d = a, e = a;
    for (size_t i = 0; i < n; i += 128) {
        if (pf && i + pf + 128 <= n) {
            _mm_prefetch(c + i + pf, _MM_HINT_T2);
            _mm_prefetch(c + i + pf + 64, _MM_HINT_T2);
        }
        a = _mm256_add_epi64(a, _mm256_load_si256((const __m256i *)(c + i)));
        b = _mm256_add_epi64(b, _mm256_load_si256((const __m256i *)(c + i + 32)));
        d = _mm256_add_epi64(d, _mm256_load_si256((const __m256i *)(c + i + 64)));
        e = _mm256_add_epi64(e, _mm256_load_si256((const __m256i *)(c + i + 96)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(d, e));
    uint64_t v[4];
    _mm256_storeu_si256((__m256i *)v, s);
    return v[0] + v[1] + v[2] + v[3];
}

double attn__cpu_fma_avx2(long iters)
{
    /* 12 independent chains (16 ymm registers: 12 + the two operands) */
    __m256 x = _mm256_set1_ps(0.99999994f), y = _mm256_set1_ps(1e-7f);
    __m256 a[12];
    for (int k = 0; k < 12; k++)
        a[k] = _mm256_set1_ps(1.0f + (float)k * 1e-3f);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++)
            a[k] = _mm256_fmadd_ps(a[k], x, y);
    }
    __m256 s = a[0];
    for (int k = 1; k < 12; k++)
        s = _mm256_add_ps(s, a[k]);
    float v[8];
    _mm256_storeu_ps(v, s);
    return (double)v[0] + v[7];
}
