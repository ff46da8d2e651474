/* AVX-512 loops of the machine measurements (see cpu_machine.h). */
#include <immintrin.h>

#include "backends/cpu/cpu_machine.h"

uint64_t attn__cpu_read_avx512(const void *p, size_t n)
{
    const char *c = p;
    __m512i a = _mm512_setzero_si512(), b = a, d = a, e = a;
    for (size_t i = 0; i < n; i += 256) {
        a = _mm512_add_epi64(a, _mm512_load_si512(c + i));
        b = _mm512_add_epi64(b, _mm512_load_si512(c + i + 64));
        d = _mm512_add_epi64(d, _mm512_load_si512(c + i + 128));
        e = _mm512_add_epi64(e, _mm512_load_si512(c + i + 192));
    }
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a, b),
                                                              _mm512_add_epi64(d, e)));
}

double attn__cpu_fma_avx512(long iters)
{
    __m512 x = _mm512_set1_ps(0.99999994f), y = _mm512_set1_ps(1e-7f);
    __m512 a0 = _mm512_set1_ps(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0, a8 = a0, a9 = a0;
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_fmadd_ps(a0, x, y);
        a1 = _mm512_fmadd_ps(a1, x, y);
        a2 = _mm512_fmadd_ps(a2, x, y);
        a3 = _mm512_fmadd_ps(a3, x, y);
        a4 = _mm512_fmadd_ps(a4, x, y);
        a5 = _mm512_fmadd_ps(a5, x, y);
        a6 = _mm512_fmadd_ps(a6, x, y);
        a7 = _mm512_fmadd_ps(a7, x, y);
        a8 = _mm512_fmadd_ps(a8, x, y);
        a9 = _mm512_fmadd_ps(a9, x, y);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    return _mm512_reduce_add_ps(_mm512_add_ps(s, _mm512_add_ps(a8, a9)));
}
