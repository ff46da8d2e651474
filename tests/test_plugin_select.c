/* An application that links libattn statically and never calls the plugin
 * API itself still gets its plugins: attn_select loads them first. This
 * file must not reference any attn_plugins_* symbol (a weak reference from
 * the selector would otherwise go unnoticed: it does not pull the loader
 * out of libattn.a). */
#include "test.h"

int main(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/plugins", attn_test_binary_dir());
    setenv("ATTN_PLUGIN_PATH", dir, 1);
    unsetenv("ATTN_PLUGINS");

    const char *loc = NULL;
    CHECK_STATUS(attn_registry_get_locator("CUSTOM", &loc), ATTN_NOT_REGISTERED);

    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cpu", &p));
    if (!p) return attn_test_finish("test_plugin_select");
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    cfg.dtype = ATTN_DTYPE_BF16;
    const attn_selection *sel = NULL;
    CHECK_OK(attn_select(p, "CUSTOM", &cfg, &sel));
    CHECK(sel != NULL);
    if (sel) {
        CHECK_STR(attn_selection_backend(sel), "CUSTOM");
        CHECK_STR(attn_selection_locator(sel), "object:CUSTOM");
        const attn_backend *b = attn_selection_backend_object(sel);
        CHECK(b != NULL && b->desc != NULL);
        if (b && b->desc) CHECK_CONTAINS(b->desc->platforms, "REFERENCE");
    }
    CHECK_OK(attn_registry_get_locator("CUSTOM", &loc));
    CHECK_STR(loc, "object:CUSTOM");
    attn_platform_free(p);
    return attn_test_finish("test_plugin_select");
}
