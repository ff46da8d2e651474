/* AVX2 + FMA loops of the machine measurements (see cpu_machine.h): 128
 * bytes a step; 12 FMA chains (16 ymm registers: 12 + the two operands). */
#include <immintrin.h>
#include <stdint.h>

static inline uint64_t sum4_u64(__m256i s)
{
    uint64_t v[4];
    _mm256_storeu_si256((__m256i *)v, s);
    return v[0] + v[1] + v[2] + v[3];
}

static inline double lanes_0_7(__m256 s)
{
    float v[8];
    _mm256_storeu_ps(v, s);
    return (double)v[0] + v[7];
}

#define MI         __m256i
#define MF         __m256
#define M_BYTES    32
#define M_ZEROI    _mm256_setzero_si256
#define M_LOADI(p) _mm256_load_si256((const __m256i *)(p))
#define M_ADD64    _mm256_add_epi64
#define M_SET1     _mm256_set1_ps
#define M_FMADD    _mm256_fmadd_ps
#define M_ADDF     _mm256_add_ps
#define M_PREFETCH(p)                                                                              \
    do {                                                                                           \
        const char *p_ = (p);                                                                      \
        _mm_prefetch(p_, _MM_HINT_T2);                                                             \
        _mm_prefetch(p_ + 64, _MM_HINT_T2);                                                        \
    } while (0)
#define M_SUM64(v)   sum4_u64(v)
#define M_FRESULT(v) lanes_0_7(v)
#define M_CHAINS     12
#define M_UNROLL     12
#define CM_READ      attn__cpu_read_avx2
#define CM_FMA       attn__cpu_fma_avx2
#include "backends/cpu/cpu_machine_tmpl.h"
