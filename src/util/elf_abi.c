/* The plugin ABI check without loading the plugin: the `attn_plugin_abi`
 * data symbol is looked up in the file's .dynsym and its value read from the
 * section that holds it. Nothing of the file runs (ELF constructors run at
 * dlopen, which comes only after this check passes).
 *
 * Contract: every offset and size read from the file is bounds-checked
 * against the file before use; a malformed file is a reason, never a read
 * out of bounds. Only 64-bit ELF of the host's byte order is understood
 * (the only kind dlopen could load here). attn__elf_own_symbol checks, on
 * the loaded image, that a symbol is the plugin's own. Used by the plugin
 * loader and, before dlopen, by the backend module loader (registry). */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/elf_abi.h"
#include "util/numeric.h"

static bool elf_why(char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool elf_why(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

/* [off, off + len) lies inside a file of size sz. */
static bool in_file(uint64_t off, uint64_t len, size_t sz)
{
    uint64_t end;
    return !__builtin_add_overflow(off, len, &end) && end <= sz;
}

static bool read_sym(const unsigned char *f, size_t sz, const char *name, uint32_t *out, char *why,
                     size_t wn)
{
    Elf64_Ehdr eh;
    if (sz < sizeof eh || memcmp(f, ELFMAG, SELFMAG) != 0)
        return elf_why(why, wn, "not an ELF file");
    memcpy(&eh, f, sizeof eh);
    const unsigned char host_data =
        __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != host_data)
        return elf_why(why, wn, "not a 64-bit ELF of this machine's byte order");
    if (eh.e_type != ET_DYN) return elf_why(why, wn, "not an ELF shared object");
    /* what dlopen will trust, before anything here trusts it either */
    if (!attn__elf_check_image(f, sz, why, wn)) return false;
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
        !in_file(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), sz))
        return elf_why(why, wn, "malformed ELF: section headers outside the file");
    const unsigned char *shbase = f + eh.e_shoff;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, shbase + (size_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_DYNSYM) continue;
        Elf64_Shdr str;
        if (sh.sh_link >= eh.e_shnum || sh.sh_entsize != sizeof(Elf64_Sym) ||
            !in_file(sh.sh_offset, sh.sh_size, sz))
            return elf_why(why, wn, "malformed ELF: bad .dynsym");
        memcpy(&str, shbase + (size_t)sh.sh_link * sizeof str, sizeof str);
        if (!in_file(str.sh_offset, str.sh_size, sz))
            return elf_why(why, wn, "malformed ELF: bad .dynstr");
        size_t nlen = strlen(name);
        for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym;
            memcpy(&sym, f + sh.sh_offset + k * sizeof sym, sizeof sym);
            if (sym.st_name >= str.sh_size || str.sh_size - sym.st_name <= nlen) continue;
            const char *sn = (const char *)f + str.sh_offset + sym.st_name;
            if (memcmp(sn, name, nlen + 1) != 0) continue;
            if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= eh.e_shnum)
                return elf_why(why, wn, "'%s' is not defined by the file itself", name);
            if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_size < sizeof(uint32_t))
                return elf_why(why, wn, "'%s' is not a uint32_t data symbol", name);
            Elf64_Shdr home;
            memcpy(&home, shbase + (size_t)sym.st_shndx * sizeof home, sizeof home);
            if (sym.st_value < home.sh_addr || sym.st_value - home.sh_addr > home.sh_size ||
                home.sh_size - (sym.st_value - home.sh_addr) < sizeof(uint32_t))
                return elf_why(why, wn, "malformed ELF: '%s' lies outside its section", name);
            if (home.sh_type == SHT_NOBITS) { /* .bss: zero-initialised */
                *out = 0;
                return true;
            }
            uint64_t off = home.sh_offset + (sym.st_value - home.sh_addr);
            if (!in_file(off, sizeof(uint32_t), sz))
                return elf_why(why, wn, "malformed ELF: '%s' lies outside the file", name);
            memcpy(out, f + off, sizeof *out);
            return true;
        }
        return elf_why(why, wn, "no '%s' symbol (not an attn plugin)", name);
    }
    return elf_why(why, wn, "no dynamic symbol table (not a shared object)");
}

bool attn__elf_read_u32(const char *path, const char *name, uint32_t *out, char *why,
                        size_t why_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return elf_why(why, why_size, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return elf_why(why, why_size, "not a regular, non-empty file");
    }
    size_t sz = (size_t)st.st_size;
    void *map = mmap(NULL, sz, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return elf_why(why, why_size, "cannot map: %s", strerror(errno));
    bool ok = read_sym(map, sz, name, out, why, why_size);
    munmap(map, sz);
    return ok;
}

static const char *dlerror_text(void)
{
    const char *e = dlerror();
    return e ? e : "unknown loader error";
}

bool attn__elf_own_symbol(void *handle, const void *sym, int want_type, const char *symname,
                          char *why, size_t whysz)
{
    struct link_map *plugin_map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &plugin_map) != 0 || !plugin_map) {
        snprintf(why, whysz, "cannot inspect the plugin: %s", dlerror_text());
        return false;
    }
    Dl_info info = {0};
    struct link_map *sym_map = NULL;
    if (!dladdr1(sym, &info, (void **)&sym_map, RTLD_DL_LINKMAP) || sym_map != plugin_map) {
        snprintf(why, whysz, "'%s' is not defined by the plugin itself (found in %s)", symname,
                 info.dli_fname ? info.dli_fname : "another object");
        return false;
    }
    const ElfW(Sym) *es = NULL;
    if (!dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) || !es ||
        ELF64_ST_TYPE(es->st_info) /* same as ELF32_ST_TYPE */ != want_type ||
        (want_type == STT_OBJECT && es->st_size < sizeof(uint32_t))) {
        snprintf(why, whysz, "'%s' is not %s", symname,
                 want_type == STT_OBJECT ? "a uint32_t data symbol" : "a function");
        return false;
    }
    return true;
}
