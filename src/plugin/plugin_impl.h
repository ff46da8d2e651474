/* Internal view of the plugin loader (src/plugin/plugins.c) for other parts
 * of libattn. The public contract is in include/attn/plugin.h. */
#ifndef ATTN_PLUGIN_IMPL_H
#define ATTN_PLUGIN_IMPL_H

#include <stdbool.h>

/* Name of the plugin whose attn_plugin_init is running on this thread, or
 * NULL. The registry may use it to label where a registration came from. */
const char *attn__plugins_current(void);

#endif
