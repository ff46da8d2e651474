/* Internal view of the plugin loader (src/plugin/plugins.c) for other parts
 * of libattn. The public contract is in include/attn/plugin.h. */
#ifndef ATTN_PLUGIN_IMPL_H
#define ATTN_PLUGIN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/layer.h"

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

/* Reads the uint32_t data symbol `name` from the dynamic symbol table of the
 * ELF shared object at `path` without loading it (no code of the file runs).
 * false with the reason in why: not a readable 64-bit ELF of this machine's
 * byte order, no such defined object symbol, or a malformed file. */
bool attn__elf_read_u32(const char *path, const char *name, uint32_t *out, char *why,
                        size_t why_size);

/* The tables glibc's dlopen trusts (program headers, segments, the dynamic
 * table, symbols, hash tables, versions, relocations, init/fini arrays)
 * lie inside the file and its segments (elf_check.c). f holds sz >= the ELF
 * header's size bytes with a checked ELF64 ident; false with the reason. */
bool attn__elf_check_image(const unsigned char *f, size_t sz, char *why, size_t why_size);

/* On a loaded plugin: sym was found in the plugin file itself (not in a
 * library it links) and has ELF symbol type want_type (STT_OBJECT of at
 * least a uint32_t, or STT_FUNC); false with the reason in why. */
bool attn__elf_own_symbol(void *handle, const void *sym, int want_type, const char *symname,
                          char *why, size_t whysz);

#endif
