/* Horizontal max and sum of 8 floats, for the AVX2 kernels of CPU_ATTN and
 * CPU_MLA (included only by files compiled with AVX2 flags). The sum folds
 * halves with movehl/shuffle: cheaper than two hadd on every x86 core. */
#ifndef ATTN_BACKENDS_CPU_AVX2_REDUCE_H
#define ATTN_BACKENDS_CPU_AVX2_REDUCE_H

#include <immintrin.h>

static inline float attn__hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static inline float attn__hsum8(__m256 v)
{
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

#endif
