/* A backend module built for backend contract v1 (abi_version 1, the v1
 * object layout without a device) with an ELF constructor: the loader must
 * refuse it from the file alone, before dlopen, so the constructor never
 * runs (it would set ATTN_TEST_MOD_BADABI_RAN in the process). */
#include <stdlib.h>

#include "attn/backend.h"

__attribute__((constructor)) static void attn_test_badabi_ctor(void)
{
    setenv("ATTN_TEST_MOD_BADABI_RAN", "1", 1);
}

/* attn_backend as contract v1 laid it out */
struct attn_test_v1_backend {
    uint32_t abi_version;
    uint32_t struct_size;
    const void *desc;
    const void *kernel;
};

static const struct {
    uint32_t abi_version, struct_size;
    const char *name;
} attn_test_desc = {1u, 256u, "MODBADABI"};

ATTN_EXPORT const struct attn_test_v1_backend attn_test_backend_badabi = {
    1u, sizeof(struct attn_test_v1_backend), &attn_test_desc, 0};
