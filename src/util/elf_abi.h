/* Reading a uint32_t data symbol from an ELF shared object without loading
 * it (elf_abi.c): the plugin loader's attn_plugin_abi check and the backend
 * module loader's abi_version check both run before dlopen, so nothing of
 * a file built for another ABI runs (ELF constructors included), and the
 * tables glibc's loader trusts are checked against the file first
 * (elf_check.c, elf_tables.c). */
#ifndef ATTN_UTIL_ELF_ABI_H
#define ATTN_UTIL_ELF_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The uint32_t at the start of data symbol `name` of the file at path: false
 * with the reason in why (not a readable 64-bit ELF of this machine's byte
 * order, no such defined object symbol, or a malformed file). */
bool attn__elf_read_u32(const char *path, const char *name, uint32_t *out, char *why,
                        size_t why_size);

/* The tables glibc's dlopen trusts (program headers, segments, the dynamic
 * table, symbols, hash tables, versions, relocations, init/fini arrays)
 * lie inside the file and its segments (elf_check.c). f holds sz >= the ELF
 * header's size bytes with a checked ELF64 ident; false with the reason. */
bool attn__elf_check_image(const unsigned char *f, size_t sz, char *why, size_t why_size);

/* On a loaded object: sym was found in the file itself (not in a library it
 * links) and has ELF symbol type want_type (STT_OBJECT of at least a
 * uint32_t, or STT_FUNC); false with the reason in why. */
bool attn__elf_own_symbol(void *handle, const void *sym, int want_type, const char *symname,
                          char *why, size_t whysz);

#endif
