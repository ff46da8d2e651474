/* Machine specs: a spec either loads into a platform whose JSON is valid
 * UTF-8 and reloads to the same JSON, or is refused with detail text. The
 * platform then answers the selector questions without crashing. */
#include "attn/attn.h"
#include "fuzz_common.h"

FZ_DEFAULT_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fz_cstr(data, size);
    attn_platform *p = NULL;
    attn_status st = attn_platform_from_json(s, &p);
    if (st != ATTN_OK) {
        FZ_ASSERT(p == NULL);
        FZ_ASSERT(attn_last_error()[0] != '\0');
        FZ_ASSERT(fz_utf8_ok(attn_last_error()) || !fz_utf8_ok(s));
        free(s);
        return 0;
    }
    char *json = NULL;
    FZ_ASSERT(attn_platform_to_json(p, &json) == ATTN_OK);
    FZ_ASSERT(fz_utf8_ok(json));
    FZ_ASSERT(fz_utf8_ok(attn_platform_name(p)));
    FZ_ASSERT(fz_utf8_ok(attn_platform_device_name(p)));
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    const char *names[64];
    int n = attn_platform_priorities(p, &cfg, names, 64);
    FZ_ASSERT(n >= 0);
    attn_selection *sel = NULL;
    (void)attn_select_uncached(p, NULL, &cfg, &sel);
    if (sel) {
        char *txt = NULL;
        if (attn_selection_to_json(sel, &txt) == ATTN_OK) FZ_ASSERT(fz_utf8_ok(txt));
        free(txt);
        attn_selection_free(sel);
    }
    free(json);
    attn_platform_free(p);
    free(s);
    return 0;
}
