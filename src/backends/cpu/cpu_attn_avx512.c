/* CPU_ATTN "avx512" variant (AVX512F/BW/VL/DQ, no BF16): every cache goes
 * through the fp32 FMA path of cpu_attn_avx512_f32.h: rows widened to fp32
 * in scratch, 4 rows x 2 keys for QK and 4 rows x 32 lanes for PV. Decode
 * jobs (at most 8 rows) over bf16/fp8 caches go to the streaming kernel of
 * cpu_attn_decode_avx512.c. */
#include "backends/cpu/cpu_attn_avx512_f32.h"

const attn__cpu_isa attn__cpu_isa_avx512 = {
    .name = "avx512",
    .usable = avx512_usable,
    .prep_q = f32_prep_q,
    .chunk = f32_chunk,
    .first = &attn__cpu_isa_stream_decode,
};
