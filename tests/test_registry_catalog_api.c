/* The backend catalog through the public API (attn/registry.h) says exactly
 * what the internal table holds, entry by entry, and answers NULL / false
 * for indices and names outside it. */
#include "backends/catalog/catalog.h"
#include "registry/catalog_table.h"
#include "test.h"

int main(void)
{
    int n = attn_backend_catalog_count();
    CHECK(n == attn__catalog_count());
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        const attn__catalog_entry *e = attn__catalog_at(i);
        const char *name = attn_backend_catalog_name(i);
        CHECK_STR(name, e->name);
        CHECK(attn_backend_catalog_contains(name));
        CHECK(attn_backend_catalog_default_locator(name) == e->default_locator);
        CHECK(attn_backend_catalog_notes(name) == e->notes);
        CHECK(attn_backend_catalog_builtin(name) == (e->builtin ? e->builtin() : NULL));
    }
    CHECK(attn_backend_catalog_name(-1) == NULL);
    CHECK(attn_backend_catalog_name(n) == NULL);
    CHECK(!attn_backend_catalog_contains("NO_SUCH_BACKEND"));
    CHECK(!attn_backend_catalog_contains("flash_attn")); /* exact, upper case */
    CHECK(!attn_backend_catalog_contains(NULL));
    CHECK(attn_backend_catalog_default_locator("NO_SUCH_BACKEND") == NULL);
    CHECK(attn_backend_catalog_notes(NULL) == NULL);
    CHECK(attn_backend_catalog_builtin("NO_SUCH_BACKEND") == NULL);
    /* a GPU backend ships a descriptor without kernels; CUSTOM has no locator */
    const attn_backend *fa = attn_backend_catalog_builtin("FLASH_ATTN");
    CHECK(fa && fa->desc && fa->kernel == NULL);
    CHECK(attn_backend_catalog_contains("CUSTOM"));
    CHECK(attn_backend_catalog_default_locator("CUSTOM") == NULL);
    CHECK(attn_backend_catalog_builtin("CPU_ATTN") &&
          attn_backend_catalog_builtin("CPU_ATTN")->kernel);
    return attn_test_finish("test_registry_catalog_api");
}
