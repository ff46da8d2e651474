/* AVX-512 loops of the machine measurements (see cpu_machine.h): 256 bytes
 * a step; 20 FMA chains (latency x ports <= 20 on any AVX-512 core). */
#include <immintrin.h>
#include <stdint.h>

/* In unsigned lanes: the lane sums wrap by design, and the intrinsic
 * _mm512_reduce_add_epi64 adds them as signed long long (UB on overflow). */
static inline uint64_t sum8_u64(__m512i s)
{
    uint64_t v[8];
    _mm512_storeu_si512(v, s);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

#define MI         __m512i
#define MF         __m512
#define M_BYTES    64
#define M_ZEROI    _mm512_setzero_si512
#define M_LOADI(p) _mm512_load_si512(p)
#define M_ADD64    _mm512_add_epi64
#define M_SET1     _mm512_set1_ps
#define M_FMADD    _mm512_fmadd_ps
#define M_ADDF     _mm512_add_ps
#define M_PREFETCH(p)                                                                              \
    do {                                                                                           \
        const char *p_ = (p);                                                                      \
        _mm_prefetch(p_, _MM_HINT_T2);                                                             \
        _mm_prefetch(p_ + 64, _MM_HINT_T2);                                                        \
        _mm_prefetch(p_ + 128, _MM_HINT_T2);                                                       \
        _mm_prefetch(p_ + 192, _MM_HINT_T2);                                                       \
    } while (0)
#define M_SUM64(v)   sum8_u64(v)
#define M_FRESULT(v) _mm512_reduce_add_ps(v)
#define M_CHAINS     20
#define M_UNROLL     20
#define CM_READ      attn__cpu_read_avx512
#define CM_FMA       attn__cpu_fma_avx512
#include "backends/cpu/cpu_machine_tmpl.h"
