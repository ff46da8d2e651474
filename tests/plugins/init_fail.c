/* Broken plugin: registers a new name, overrides CUSTOM with its own object
 * and FLASH_ATTN with a locator (its own built-in one), then fails. Expected: reported with
 * its reason, every registration rolled back (CUSTOM back to whatever an
 * earlier plugin registered), and the plugin kept mapped (it registered
 * something). attn_test_late_register proves the api refuses use after
 * init. */
#include "test_plugin.h"

ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;

static attn_status (*g_register)(const char *name, const char *locator);

static const attn_backend_desc g_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "CUSTOM",
    .platforms = "init_fail test plugin",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO),
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
};
static const attn_backend g_backend = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &g_desc,
};
/* a backend is registered under its descriptor's name */
static const attn_backend_desc g_desc_new = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "ATTN_TEST_ROLLBACK",
    .platforms = "init_fail test plugin",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
    .kv_dtypes = ATTN_KV_BIT(ATTN_KV_AUTO),
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER),
};
static const attn_backend g_backend_new = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &g_desc_new,
};

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    attn_test_plugin_mark("init_fail");
    g_register = api->register_backend;
    attn_status s = api->register_backend_object("ATTN_TEST_ROLLBACK", &g_backend_new);
    if (s == ATTN_OK) s = api->register_backend_object("CUSTOM", &g_backend);
    if (s == ATTN_OK) s = api->register_backend("FLASH_ATTN", "builtin:FLASH_ATTN");
    if (s != ATTN_OK) return s;
    return api->fail(ATTN_PLUGIN_ERROR, "init_fail gives up after registering 3 backends");
}

ATTN_EXPORT attn_status attn_test_late_register(void)
{
    return g_register ? g_register("ATTN_TEST_LATE", "builtin:REFERENCE") : ATTN_INTERNAL;
}
