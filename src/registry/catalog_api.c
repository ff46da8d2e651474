/* The public view of the backend catalog (attn/registry.h): names in
 * declaration order and, per name, the default locator, the notes and the
 * built-in object. Read-only over the immutable table of
 * src/backends/catalog, so tools and applications list every backend
 * without the internal entry layout. */
#include "attn/registry.h"
#include "registry/catalog_table.h"

int attn_backend_catalog_count(void)
{
    return attn__catalog_count();
}

const char *attn_backend_catalog_name(int i)
{
    const attn__catalog_entry *e = i >= 0 && i < attn__catalog_count() ? attn__catalog_at(i) : NULL;
    return e ? e->name : NULL;
}

const char *attn_backend_catalog_default_locator(const char *name)
{
    const attn__catalog_entry *e = name ? attn__catalog_find(name) : NULL;
    return e ? e->default_locator : NULL;
}

const char *attn_backend_catalog_notes(const char *name)
{
    const attn__catalog_entry *e = name ? attn__catalog_find(name) : NULL;
    return e ? e->notes : NULL;
}

const attn_backend *attn_backend_catalog_builtin(const char *name)
{
    const attn__catalog_entry *e = name ? attn__catalog_find(name) : NULL;
    return e && e->builtin ? e->builtin() : NULL;
}

bool attn_backend_catalog_contains(const char *name)
{
    return name && attn__catalog_find(name) != NULL;
}
