/* CPU_ATTN streaming decode, FMA path (the avx512 and avx512-bf16
 * variants' decode): cpu_attn_decode_avx512.h without the tile code, built
 * with AVX512F/BW/VL/DQ only. */
#define SD_AMX 0
#include "backends/cpu/cpu_attn_decode_avx512.h"

const attn__cpu_isa attn__cpu_isa_stream_decode = {
    .name = "stream-decode",
    .usable = sd_usable,
    .prep_q = sd_prep,
    .chunk = attn__sd_chunk_fma,
    .finish = sd_finish,
    .accepts = sd_accepts,
};
