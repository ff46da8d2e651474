/* AVX2 + FMA loops of the machine measurements (see cpu_machine.h). */
#include <immintrin.h>

#include "backends/cpu/cpu_machine.h"

uint64_t attn__cpu_read_avx2(const void *p, size_t n)
{
    const char *c = p;
    __m256i a = _mm256_setzero_si256(), b = a, d = a, e = a;
    for (size_t i = 0; i < n; i += 128) {
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
    __m256 x = _mm256_set1_ps(0.99999994f), y = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0, a8 = a0, a9 = a0;
    for (long i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, x, y);
        a1 = _mm256_fmadd_ps(a1, x, y);
        a2 = _mm256_fmadd_ps(a2, x, y);
        a3 = _mm256_fmadd_ps(a3, x, y);
        a4 = _mm256_fmadd_ps(a4, x, y);
        a5 = _mm256_fmadd_ps(a5, x, y);
        a6 = _mm256_fmadd_ps(a6, x, y);
        a7 = _mm256_fmadd_ps(a7, x, y);
        a8 = _mm256_fmadd_ps(a8, x, y);
        a9 = _mm256_fmadd_ps(a9, x, y);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
    float v[8];
    _mm256_storeu_ps(v, s);
    return (double)v[0] + v[7];
}
