/* Broken plugin: needs libattn_missingdep.so, which is built into a folder
 * that is on no search path (and the plugin carries no rpath). Expected:
 * dlopen fails with the loader's text naming the missing library. */
#include "test_plugin.h"

ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    attn_test_plugin_mark("missing_dep");
    if (attn_missingdep_answer() != 42) return ATTN_INTERNAL;
    return api->register_backend("ATTN_TEST_MISSING_DEP", "builtin:REFERENCE");
}
