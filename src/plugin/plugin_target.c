/* What a plugin registers is checked before the registry takes it
 * (plugin_impl.h): the name a backend is registered under is its
 * descriptor's, and an override of a known name can load. */
#include <string.h>

#include "attn/backend.h"
#include "plugin/plugin_impl.h"
#include "registry/registry_impl.h"
#include "util/error.h"

/* A plugin registers a backend under the name its descriptor carries, and
 * an override of a known name must load: otherwise selection would report
 * one backend while running another, or quietly pass over the name. A new
 * name may point at a module installed later (its import error is a
 * reason, as in vLLM). */
attn_status attn__plugin_check_target(const char *plugin, const char *name, const char *locator,
                                      const attn_backend *b)
{
    char canon[64], dcanon[64];
    if (!attn__registry_canon(name, canon, sizeof canon)) return ATTN_OK; /* registry refuses */
    if (locator) {
        bool known = attn__registry_lookup(canon) != NULL;
        attn_status st = attn__loader_resolve(locator, &b);
        if (st != ATTN_OK && !known) return ATTN_OK;
        if (st != ATTN_OK)
            return attn__wrap(ATTN_IMPORT_ERROR,
                              "plugin %s overrides %s with '%s', which cannot load", plugin, canon,
                              locator);
    }
    if (!b || !b->desc || !b->desc->name) return ATTN_OK; /* the ABI check refuses it */
    if (!attn__registry_canon(b->desc->name, dcanon, sizeof dcanon) || strcmp(canon, dcanon) != 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "plugin %s registers %s, but the backend's descriptor is named '%s' (a "
                          "backend is registered under its own name)",
                          plugin, canon, b->desc->name);
    return ATTN_OK;
}
