/* A backend module that needs a library which is on no search path at run
 * time (built elsewhere, no rpath): opening it fails on the dependency. */
#include "attn/backend.h"

int attn_test_regdep_value(void);

static const attn_backend_desc attn_test_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "MODDEP",
};

ATTN_EXPORT const attn_backend attn_test_backend_dep = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                                                        .struct_size = sizeof(attn_backend),
                                                        .desc = &attn_test_desc,
                                                        .kernel = 0};

ATTN_EXPORT int attn_test_mod_dep_use(void);
ATTN_EXPORT int attn_test_mod_dep_use(void)
{
    return attn_test_regdep_value();
}
