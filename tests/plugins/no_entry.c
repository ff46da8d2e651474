/* Broken plugin: has the ABI symbol but no attn_plugin_init (a typo'd name
 * instead). Expected: reported "no entry point", skipped, dlclose'd. */
#include "test_plugin.h"

ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;

ATTN_EXPORT attn_status attn_plugin_initialize(const attn_plugin_api *api);
ATTN_EXPORT attn_status attn_plugin_initialize(const attn_plugin_api *api)
{
    attn_test_plugin_mark("no_entry");
    return api->register_backend("ATTN_TEST_NO_ENTRY", "builtin:REFERENCE");
}
