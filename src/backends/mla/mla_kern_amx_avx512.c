/* CPU_MLA AMX-BF16 decode (placeholder until the tile kernel lands). */
#include "backends/mla/mla_internal.h"

static bool no(void)
{
    return false;
}

const attn__mla_kern attn__mla_kern_amx = {
    .name = "amx",
    .usable = no,
};
