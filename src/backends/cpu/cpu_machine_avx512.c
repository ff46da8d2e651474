/* AVX-512 loops of the machine measurements (see cpu_machine.h). */
#include <immintrin.h>

#include "backends/cpu/cpu_machine.h"

uint64_t attn__cpu_read_avx512(const void *p, size_t n, size_t pf)
{
    const char *c = p;
    __m512i a = _mm512_setzero_si512(), b = a, d = a, e = a;
    for (size_t i = 0; i < n; i += 256) {
        if (pf && i + pf + 256 <= n) {
            _mm_prefetch(c + i + pf, _MM_HINT_T2);
            _mm_prefetch(c + i + pf + 64, _MM_HINT_T2);
            _mm_prefetch(c + i + pf + 128, _MM_HINT_T2);
            _mm_prefetch(c + i + pf + 192, _MM_HINT_T2);
        }
        a = _mm512_add_epi64(a, _mm512_load_si512(c + i));
        b = _mm512_add_epi64(b, _mm512_load_si512(c + i + 64));
        d = _mm512_add_epi64(d, _mm512_load_si512(c + i + 128));
        e = _mm512_add_epi64(e, _mm512_load_si512(c + i + 192));
    }
    return (uint64_t)_mm512_reduce_add_epi64(
        _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(d, e)));
}

double attn__cpu_fma_avx512(long iters)
{
    /* 20 independent chains: enough to cover the FMA latency on both ports
     * of any AVX-512 core (latency x ports <= 20) */
    __m512 x = _mm512_set1_ps(0.99999994f), y = _mm512_set1_ps(1e-7f);
    __m512 a[20];
    for (int k = 0; k < 20; k++)
        a[k] = _mm512_set1_ps(1.0f + (float)k * 1e-3f);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 20
        for (int k = 0; k < 20; k++)
            a[k] = _mm512_fmadd_ps(a[k], x, y);
    }
    __m512 s = a[0];
    for (int k = 1; k < 20; k++)
        s = _mm512_add_ps(s, a[k]);
    return _mm512_reduce_add_ps(s);
}
