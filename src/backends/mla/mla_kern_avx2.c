/* CPU_MLA AVX2 + FMA variant (placeholder until the vector kernels land). */
#include "backends/mla/mla_internal.h"

static bool avx2_usable(void)
{
    return false;
}

const attn__mla_kern attn__mla_kern_avx2 = {
    .name = "avx2",
    .usable = avx2_usable,
};
