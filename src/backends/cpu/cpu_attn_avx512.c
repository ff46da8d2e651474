/* placeholder */
#include "attn/cpu.h"
#include "backends/cpu/cpu_attn.h"
static bool no(void) { return false; }
const attn__cpu_isa attn__cpu_isa_avx512 = {.name = "avx512", .usable = no};
const attn__cpu_isa attn__cpu_isa_avx512_bf16 = {.name = "avx512-bf16", .usable = no};
