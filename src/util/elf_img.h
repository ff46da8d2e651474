/* The ELF image check shared by elf_check.c (headers, segments, the
 * dynamic table) and elf_tables.c (symbols, hash and version tables,
 * relocations): the image being checked, the machine's constants and the
 * bounds helpers every read goes through. Internal to src/plugin/. */
#ifndef ATTN_PLUGIN_ELF_IMG_H
#define ATTN_PLUGIN_ELF_IMG_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
#define ATTN__ELF_MACHINE  EM_X86_64
#define ATTN__R_NONE       R_X86_64_NONE
#define ATTN__R_RELATIVE   R_X86_64_RELATIVE
#define ATTN__R_IRELATIVE  R_X86_64_IRELATIVE
#define ATTN__R_COPY       R_X86_64_COPY
#define ATTN__R_WORD_BYTES 8
/* the relocations a shared object of this machine carries */
static inline bool attn__elf_reloc_type_ok(uint32_t t, bool *tls)
{
    *tls = t == R_X86_64_DTPMOD64 || t == R_X86_64_DTPOFF64 || t == R_X86_64_TPOFF64 ||
           t == R_X86_64_TLSDESC;
    return *tls || t == R_X86_64_64 || t == R_X86_64_GLOB_DAT || t == R_X86_64_JUMP_SLOT ||
           t == R_X86_64_RELATIVE || t == R_X86_64_IRELATIVE;
}
#elif defined(__aarch64__)
#define ATTN__ELF_MACHINE  EM_AARCH64
#define ATTN__R_NONE       R_AARCH64_NONE
#define ATTN__R_RELATIVE   R_AARCH64_RELATIVE
#define ATTN__R_IRELATIVE  R_AARCH64_IRELATIVE
#define ATTN__R_COPY       R_AARCH64_COPY
#define ATTN__R_WORD_BYTES 8
static inline bool attn__elf_reloc_type_ok(uint32_t t, bool *tls)
{
    *tls = t == R_AARCH64_TLS_DTPMOD64 || t == R_AARCH64_TLS_DTPREL64 ||
           t == R_AARCH64_TLS_TPREL64 || t == R_AARCH64_TLSDESC;
    return *tls || t == R_AARCH64_ABS64 || t == R_AARCH64_GLOB_DAT || t == R_AARCH64_JUMP_SLOT ||
           t == R_AARCH64_RELATIVE || t == R_AARCH64_IRELATIVE;
}
#else
#error "elf_check.c: add this machine's ELF constants"
#endif

#define ATTN__ELF_MAX_PHDRS 64
#define ATTN__ELF_MAX_SPAN  ((uint64_t)1 << 32) /* address space one plugin may map */

typedef struct attn__elf_img {
    const unsigned char *f;
    size_t sz;
    Elf64_Phdr load[ATTN__ELF_MAX_PHDRS];
    int nload;
    char *why;
    size_t wn;
    /* the dynamic table's entries below DT_NUM (has: present), and the GNU ones */
    uint64_t tag[DT_NUM];
    bool has[DT_NUM];
    uint64_t gnu_hash, versym, verneed, verneednum, verdef, verdefnum, relacount;
    bool has_tls;
    uint64_t strtab, strsz, symtab, nsyms;
    const Elf64_Ehdr *eh; /* sections: checked inside the file by check_sections */
    uint64_t dyn_off;     /* the dynamic table in the file, ndyn entries before DT_NULL */
    size_t ndyn;
} attn__elf_img;

/* Writes "malformed ELF: <what>" into the image's reason; returns false. */
bool attn__elf_bad(attn__elf_img *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline bool attn__elf_add_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

static inline bool attn__elf_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

/* The file offset of [addr, addr + len) when it lies in the file-backed part
 * of one PT_LOAD with all of flags, else false. */
bool attn__elf_in_file(const attn__elf_img *m, uint64_t addr, uint64_t len, uint32_t flags,
                       uint64_t *off);
/* [addr, addr + len) inside the memory of one PT_LOAD with all of flags. */
bool attn__elf_in_mem(const attn__elf_img *m, uint64_t addr, uint64_t len, uint32_t flags);
/* A section of type t starting at addr (its header in *out when not NULL). */
bool attn__elf_section_at(const attn__elf_img *m, uint32_t t, uint64_t addr, Elf64_Shdr *out);

/* A NUL-terminated string at offset o of the dynamic string table. */
bool attn__elf_str_ok(const attn__elf_img *m, uint64_t o);

/* elf_tables.c, after the dynamic table is read into m: */
bool attn__elf_check_symbols(attn__elf_img *m);
bool attn__elf_check_versions(attn__elf_img *m);
bool attn__elf_check_relocations(attn__elf_img *m);

#endif
