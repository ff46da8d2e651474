/* Broken plugin: built for a plugin ABI that does not exist. Expected:
 * reported "ABI version mismatch" and its init never runs (no marker, no
 * ATTN_TEST_BAD_ABI name). It has no constructor, so none of its code runs. */
#include "test_plugin.h"

ATTN_EXPORT const uint32_t attn_plugin_abi = 999u;

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    attn_test_plugin_mark("bad_abi");
    return api->register_backend("ATTN_TEST_BAD_ABI", "builtin:REFERENCE");
}
