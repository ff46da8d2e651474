/* Internal view of the plugin loader (src/plugin/plugins.c) for other parts
 * of libattn. The public contract is in include/attn/plugin.h. */
#ifndef ATTN_PLUGIN_IMPL_H
#define ATTN_PLUGIN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/layer.h"
#include "util/elf_abi.h"

/* Name of the plugin whose attn_plugin_init is running on this thread, or
 * NULL. The registry may use it to label where a registration came from. */
const char *attn__plugins_current(void);

/* A registration plugin makes under name, by locator (NULL for an object)
 * or object b: the backend's descriptor must carry that name, and an
 * override of a name the registry knows must load. ATTN_OK, or
 * ATTN_INVALID_ARGUMENT / ATTN_IMPORT_ERROR naming the plugin and the name.
 * Resolving a locator here loads it (the loader caches the result). */
attn_status attn__plugin_check_target(const char *plugin, const char *name, const char *locator,
                                      const attn_backend *b);

#endif
