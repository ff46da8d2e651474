/* Broken plugin: an init function but no ABI symbol, like a random shared
 * object dropped into a plugin folder. Expected: reported "not an attn
 * plugin", and its init never runs. */
#include "test_plugin.h"

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    attn_test_plugin_mark("no_abi");
    return api->register_backend("ATTN_TEST_NO_ABI", "builtin:REFERENCE");
}
