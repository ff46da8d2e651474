/* A plugin whose registrations lie (tests/test_plugin_load.c, hostile-*):
 * CPU_ATTN as an object whose descriptor is named EVIL, CPU_ATTN overridden
 * by a module that does not exist, then a new name on that module (allowed:
 * its import error is a reason later). ATTN_TEST_HOSTILE_MODE picks what
 * init returns: "unknown" a status outside the table (the report must not
 * borrow the text of the refused calls), "same" the status of the refused
 * override (its text is the reason), anything else ATTN_OK.
 * attn_test_hostile_heard() returns what the api answered. */
#include <string.h>

#include "test_plugin.h"

ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;

static const attn_backend_desc g_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "EVIL",
    .platforms = "hostile test plugin",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO),
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
};
static const attn_backend g_backend = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &g_desc,
};
static char g_heard[2048];

static void note(const attn_plugin_api *api, const char *what, attn_status s)
{
    size_t n = strlen(g_heard);
    snprintf(g_heard + n, sizeof g_heard - n, "%s: %d %s\n", what, (int)s,
             s == ATTN_OK ? "" : api->last_error());
}

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    attn_test_plugin_mark("hostile");
    g_heard[0] = '\0';
    note(api, "object", api->register_backend_object("CPU_ATTN", &g_backend));
    attn_status over = api->register_backend("CPU_ATTN", "libattn_nowhere.so:attn_backend_x");
    note(api, "override", over);
    note(api, "new", api->register_backend("ATTN_TEST_LATER", "libattn_nowhere.so:attn_backend_x"));
    const char *mode = getenv("ATTN_TEST_HOSTILE_MODE");
    if (mode && !strcmp(mode, "unknown")) return (attn_status)999;
    if (mode && !strcmp(mode, "same")) return over;
    return ATTN_OK;
}

ATTN_EXPORT const char *attn_test_hostile_heard(void)
{
    return g_heard;
}
