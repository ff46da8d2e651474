/* A backend module built for a backend ABI that does not exist: the loader
 * must refuse it from its header alone. */
#include "attn/backend.h"

static const attn_backend_desc attn_test_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "MODBADABI",
};

ATTN_EXPORT const attn_backend attn_test_backend_badabi = {
    ATTN_BACKEND_ABI_VERSION + 41u, sizeof(attn_backend), &attn_test_desc, 0};
