/* CPU_MLA AVX-512 variant (placeholder until the vector kernels land). */
#include "backends/mla/mla_internal.h"

static bool no(void)
{
    return false;
}

const attn__mla_kern attn__mla_kern_avx512 = {
    .name = "avx512",
    .usable = no,
};
const attn__mla_kern attn__mla_kern_amx = {
    .name = "amx",
    .usable = no,
};
