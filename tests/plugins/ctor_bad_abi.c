/* Hostile plugin: built for backend contract v1 (plugin ABI 1, as every
 * plugin before contract v2) with an ELF constructor. The loader reads the
 * ABI from the file before dlopen, so the constructor must never run: its
 * marker "<ATTN_TEST_MARKER_DIR>/ctor_bad_abi.ctor" must not appear. */
#include "test_plugin.h"

__attribute__((constructor)) static void ctor_bad_abi_ctor(void)
{
    attn_test_plugin_mark("ctor_bad_abi.ctor");
}

ATTN_EXPORT const uint32_t attn_plugin_abi = 1u; /* contract v1 */

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    attn_test_plugin_mark("ctor_bad_abi");
    return api->register_backend("ATTN_TEST_CTOR_BAD_ABI", "builtin:REFERENCE");
}
