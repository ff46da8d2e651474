/* The structure glibc's dlopen trusts, checked in the file before dlopen
 * (elf_abi.c calls it): a plugin file that passes can be mapped, relocated
 * and searched without a read or write outside what it maps. dlopen itself
 * checks little of this: a segment past the end of the file, a dynamic
 * table outside the segments, a relocation aimed at a read-only page or a
 * hash chain running off its table crash it (found by mutating the example
 * plugin). The code of a file is not judged; its tables are.
 *
 * Every offset, address and size is checked against the file size and the
 * PT_LOAD segments before use, with overflow-checked arithmetic. */
#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/elf_img.h"
#include "util/elf_abi.h"

bool attn__elf_bad(attn__elf_img *m, const char *fmt, ...)
{
    int n = snprintf(m->why, m->wn, "malformed ELF: ");
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < m->wn) vsnprintf(m->why + n, m->wn - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* The file offset of [addr, addr + len) when it lies in the file-backed part
 * of one PT_LOAD (flags: each of them required), else false. */
bool attn__elf_in_file(const attn__elf_img *m, uint64_t addr, uint64_t len, uint32_t flags,
                       uint64_t *off)
{
    uint64_t end;
    if (!attn__elf_add_ok(addr, len, &end)) return false;
    for (int i = 0; i < m->nload; i++) {
        const Elf64_Phdr *p = &m->load[i];
        if ((p->p_flags & flags) != flags) continue;
        if (addr >= p->p_vaddr && end <= p->p_vaddr + p->p_filesz) {
            if (off) *off = p->p_offset + (addr - p->p_vaddr);
            return true;
        }
    }
    return false;
}

/* [addr, addr + len) inside the memory of one PT_LOAD with flags. */
bool attn__elf_in_mem(const attn__elf_img *m, uint64_t addr, uint64_t len, uint32_t flags)
{
    uint64_t end;
    if (!attn__elf_add_ok(addr, len, &end)) return false;
    for (int i = 0; i < m->nload; i++) {
        const Elf64_Phdr *p = &m->load[i];
        if ((p->p_flags & flags) == flags && addr >= p->p_vaddr && end <= p->p_vaddr + p->p_memsz)
            return true;
    }
    return false;
}

static bool check_ehdr(attn__elf_img *m, const Elf64_Ehdr *eh)
{
    if (eh->e_ident[EI_VERSION] != EV_CURRENT || eh->e_version != EV_CURRENT)
        return attn__elf_bad(m, "ELF version %u", (unsigned)eh->e_version);
    if (eh->e_ident[EI_OSABI] != ELFOSABI_SYSV && eh->e_ident[EI_OSABI] != ELFOSABI_GNU)
        return attn__elf_bad(m, "OS ABI %u", (unsigned)eh->e_ident[EI_OSABI]);
    if (eh->e_machine != ATTN__ELF_MACHINE)
        return attn__elf_bad(m, "machine %u is not this machine's (%u)", (unsigned)eh->e_machine,
                             (unsigned)ATTN__ELF_MACHINE);
    if (eh->e_ehsize != sizeof(Elf64_Ehdr) || eh->e_phentsize != sizeof(Elf64_Phdr))
        return attn__elf_bad(m, "header sizes %u/%u", (unsigned)eh->e_ehsize,
                             (unsigned)eh->e_phentsize);
    return true;
}

static bool check_phdrs(attn__elf_img *m, const Elf64_Ehdr *eh)
{
    uint64_t end;
    if (eh->e_phnum == 0 || eh->e_phnum > ATTN__ELF_MAX_PHDRS ||
        !attn__elf_add_ok(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), &end) ||
        end > m->sz)
        return attn__elf_bad(m, "%u program headers at offset %llu outside the file",
                             (unsigned)eh->e_phnum, (unsigned long long)eh->e_phoff);
    return true;
}

/* PT_LOAD segments: inside the file, in address order, not overlapping,
 * aligned as the loader maps them, within one bounded span. */
static bool check_loads(attn__elf_img *m, const Elf64_Phdr *ph, int n)
{
    for (int i = 0; i < n; i++) {
        const Elf64_Phdr *p = &ph[i];
        if (p->p_type != PT_LOAD) continue;
        uint64_t fend, mend;
        if (!attn__elf_add_ok(p->p_offset, p->p_filesz, &fend) || fend > m->sz)
            return attn__elf_bad(
                m, "segment %d (offset %llu, %llu bytes) runs past the end of the file", i,
                (unsigned long long)p->p_offset, (unsigned long long)p->p_filesz);
        if (p->p_filesz > p->p_memsz || !attn__elf_add_ok(p->p_vaddr, p->p_memsz, &mend) ||
            mend > ATTN__ELF_MAX_SPAN)
            return attn__elf_bad(m, "segment %d sizes (file %llu, memory %llu at %#llx)", i,
                                 (unsigned long long)p->p_filesz, (unsigned long long)p->p_memsz,
                                 (unsigned long long)p->p_vaddr);
        /* the loader reads its own tables through these mappings */
        if (!(p->p_flags & PF_R) || (p->p_flags & ~(uint32_t)(PF_R | PF_W | PF_X)))
            return attn__elf_bad(m, "segment %d flags %#x", i, (unsigned)p->p_flags);
        if (!attn__elf_pow2(p->p_align) || p->p_align < 4096 || p->p_align > ((uint64_t)1 << 30) ||
            (p->p_vaddr - p->p_offset) % p->p_align)
            return attn__elf_bad(m, "segment %d alignment %llu", i, (unsigned long long)p->p_align);
        if (m->nload && p->p_vaddr < m->load[m->nload - 1].p_vaddr + m->load[m->nload - 1].p_memsz)
            return attn__elf_bad(m, "segment %d overlaps or precedes the one before it", i);
        m->load[m->nload++] = *p;
    }
    if (m->nload == 0) return attn__elf_bad(m, "no loadable segment");
    return true;
}

/* Notes (PT_NOTE, PT_GNU_PROPERTY) are parsed by dlopen: each header and
 * its name and descriptor inside the segment. */
static bool check_notes(attn__elf_img *m, const Elf64_Phdr *p, int i)
{
    uint64_t off;
    if (!attn__elf_in_file(m, p->p_vaddr, p->p_filesz, 0, &off) || p->p_offset != off)
        return attn__elf_bad(m, "note segment %d outside the loaded file", i);
    uint64_t pos = 0, align = p->p_align >= 8 ? 8 : 4;
    while (pos + sizeof(Elf64_Nhdr) <= p->p_filesz) {
        Elf64_Nhdr nh;
        memcpy(&nh, m->f + off + pos, sizeof nh);
        /* as the loader steps: the descriptor and the next note aligned from pos */
        uint64_t desc = (pos + sizeof nh + nh.n_namesz + align - 1) / align * align;
        pos = (desc + nh.n_descsz + align - 1) / align * align;
        if (desc + nh.n_descsz > p->p_filesz)
            return attn__elf_bad(m, "note in segment %d runs past it", i);
    }
    return true;
}

/* Every other segment dlopen reads lies inside what is loaded. */
static bool check_others(attn__elf_img *m, const Elf64_Phdr *ph, int n, const Elf64_Phdr **dyn)
{
    *dyn = NULL;
    for (int i = 0; i < n; i++) {
        const Elf64_Phdr *p = &ph[i];
        uint64_t off;
        switch (p->p_type) {
        case PT_DYNAMIC:
            if (*dyn) return attn__elf_bad(m, "two dynamic segments");
            if (p->p_filesz < sizeof(Elf64_Dyn) || p->p_filesz % sizeof(Elf64_Dyn) ||
                !attn__elf_in_file(m, p->p_vaddr, p->p_filesz, PF_R, &off) || off != p->p_offset)
                return attn__elf_bad(m, "dynamic segment outside the loaded file");
            *dyn = p;
            break;
        case PT_NOTE:
        case PT_GNU_PROPERTY:
            if (!check_notes(m, p, i)) return false;
            break;
        case PT_TLS:
            if (p->p_filesz > p->p_memsz ||
                !attn__elf_in_file(m, p->p_vaddr, p->p_filesz, 0, &off) || off != p->p_offset ||
                !attn__elf_pow2(p->p_align ? p->p_align : 1))
                return attn__elf_bad(m, "TLS segment outside the loaded file");
            m->has_tls = true;
            break;
        case PT_GNU_RELRO: /* protected in whole pages, so it may reach past its segment */
            if (!attn__elf_in_mem(m, p->p_vaddr, 0, PF_W) ||
                !attn__elf_add_ok(p->p_vaddr, p->p_memsz, &off) ||
                off > m->load[m->nload - 1].p_vaddr + m->load[m->nload - 1].p_memsz + 4096)
                return attn__elf_bad(m, "RELRO segment outside the writable segments");
            break;
        case PT_PHDR: /* the loader reads the headers again through this, in memory */
            if (!attn__elf_in_file(m, p->p_vaddr, p->p_filesz, 0, &off) || off != m->eh->e_phoff ||
                p->p_offset != off || p->p_filesz != (uint64_t)m->eh->e_phnum * sizeof(Elf64_Phdr))
                return attn__elf_bad(m, "PT_PHDR is not the program headers in memory");
            break;
        case PT_INTERP: /* dlopen ignores it; a path inside the file all the same */
            if (!attn__elf_add_ok(p->p_offset, p->p_filesz, &off) || off > m->sz)
                return attn__elf_bad(m, "interpreter path outside the file");
            break;
        default: break;
        }
    }
    if (!*dyn) return attn__elf_bad(m, "no dynamic segment");
    return true;
}

/* Section headers inside the file, and every section's bytes too. */
static bool check_sections(attn__elf_img *m, const Elf64_Ehdr *eh)
{
    uint64_t end;
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 ||
        !attn__elf_add_ok(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), &end) ||
        end > m->sz || eh->e_shstrndx >= eh->e_shnum)
        return attn__elf_bad(m, "section headers outside the file");
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, m->f + eh->e_shoff + (size_t)i * sizeof sh, sizeof sh);
        if (sh.sh_link >= eh->e_shnum ||
            (sh.sh_type != SHT_NOBITS &&
             (!attn__elf_add_ok(sh.sh_offset, sh.sh_size, &end) || end > m->sz)))
            return attn__elf_bad(m, "section %u outside the file", i);
    }
    m->eh = eh;
    return true;
}

/* addr starts an executable section (DT_INIT is .init's) or a function of
 * the symbol tables (-Wl,-init=f): an entry point into the middle of code
 * is not one a linker made. */
static bool starts_code(const attn__elf_img *m, uint64_t addr)
{
    for (unsigned i = 0; i < m->eh->e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, m->f + m->eh->e_shoff + (size_t)i * sizeof sh, sizeof sh);
        if ((sh.sh_flags & SHF_EXECINSTR) && sh.sh_addr == addr && sh.sh_size > 0) return true;
        if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
            sh.sh_entsize != sizeof(Elf64_Sym))
            continue;
        for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym y;
            memcpy(&y, m->f + sh.sh_offset + k * sizeof y, sizeof y);
            if (ELF64_ST_TYPE(y.st_info) == STT_FUNC && y.st_shndx != SHN_UNDEF &&
                y.st_value == addr)
                return true;
        }
    }
    return false;
}

/* A section of type t starting at addr (its header in *out). */
bool attn__elf_section_at(const attn__elf_img *m, uint32_t t, uint64_t addr, Elf64_Shdr *out)
{
    for (unsigned i = 0; i < m->eh->e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, m->f + m->eh->e_shoff + (size_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type == t && sh.sh_addr == addr) {
            if (out) *out = sh;
            return true;
        }
    }
    return false;
}

/* The dynamic table names the same tables as the section headers: a table
 * address moved by corruption (a symbol table shifted by one entry makes
 * every relocation bind another symbol) disagrees with its section. */
static bool check_against_sections(attn__elf_img *m)
{
    Elf64_Shdr sh;
    if (!attn__elf_section_at(m, SHT_DYNSYM, m->symtab, &sh) ||
        sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_size / sizeof(Elf64_Sym) < m->nsyms ||
        !attn__elf_section_at(m, SHT_STRTAB, m->strtab, &sh) || sh.sh_size != m->strsz)
        return attn__elf_bad(m, "the dynamic symbol or string table is not where its section is");
    static const struct {
        int tag;
        uint32_t type;
    } t[] = {{DT_HASH, SHT_HASH},
             {DT_RELA, SHT_RELA},
             {DT_JMPREL, SHT_RELA},
             {DT_INIT_ARRAY, SHT_INIT_ARRAY},
             {DT_FINI_ARRAY, SHT_FINI_ARRAY}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (m->has[t[i].tag] && !attn__elf_section_at(m, t[i].type, m->tag[t[i].tag], NULL))
            return attn__elf_bad(m, "dynamic entry %d is not where its section is", t[i].tag);
    if ((m->gnu_hash && !attn__elf_section_at(m, SHT_GNU_HASH, m->gnu_hash, NULL)) ||
        (m->versym && !attn__elf_section_at(m, SHT_GNU_versym, m->versym, NULL)) ||
        (m->verneed && !attn__elf_section_at(m, SHT_GNU_verneed, m->verneed, NULL)) ||
        (m->verdef && !attn__elf_section_at(m, SHT_GNU_verdef, m->verdef, NULL)))
        return attn__elf_bad(m, "a hash or version table is not where its section is");
    return true;
}

/* Tags dlopen understands; anything else (a corrupted tag, a filter that
 * would load another object) is refused rather than guessed at. */
static bool known_tag(int64_t t)
{
    switch (t) {
    case DT_GNU_HASH:
    case DT_VERSYM:
    case DT_RELACOUNT:
    case DT_FLAGS_1:
    case DT_VERDEF:
    case DT_VERDEFNUM:
    case DT_VERNEED:
    case DT_VERNEEDNUM:
    case DT_GNU_PRELINKED:
    case DT_CHECKSUM:
    case DT_TLSDESC_PLT:
    case DT_TLSDESC_GOT: return true;
    default: return t >= 0 && t < DT_NUM;
    }
}

/* Entries that only make sense together: the loader reads one through the
 * other without asking whether it is there. */
static bool check_pairs(attn__elf_img *m)
{
    static const int pairs[][2] = {{DT_JMPREL, DT_PLTRELSZ},
                                   {DT_JMPREL, DT_PLTREL},
                                   {DT_RELA, DT_RELASZ},
                                   {DT_RELR, DT_RELRSZ},
                                   {DT_RELR, DT_RELRENT},
                                   {DT_RELA, DT_RELAENT},
                                   {DT_INIT_ARRAY, DT_INIT_ARRAYSZ},
                                   {DT_FINI_ARRAY, DT_FINI_ARRAYSZ}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (m->has[pairs[i][0]] != m->has[pairs[i][1]])
            return attn__elf_bad(m, "dynamic entries %d and %d come only together", pairs[i][0],
                                 pairs[i][1]);
    if ((m->verneed != 0) != (m->verneednum != 0) || (m->verdef != 0) != (m->verdefnum != 0) ||
        (m->versym && !m->verneed && !m->verdef))
        return attn__elf_bad(m, "version tables without their counts or definitions");
    return true;
}

/* The dynamic table: terminated, address entries inside their segments,
 * string references inside the string table. */
static bool check_dynamic(attn__elf_img *m, const Elf64_Phdr *dp)
{
    size_t nd = dp->p_filesz / sizeof(Elf64_Dyn), end = 0;
    Elf64_Dyn d;
    for (; end < nd; end++) {
        memcpy(&d, m->f + dp->p_offset + end * sizeof d, sizeof d);
        int64_t t = d.d_tag;
        if (t == DT_NULL) break;
        if (!known_tag(t))
            return attn__elf_bad(m, "unknown dynamic tag %#llx", (unsigned long long)t);
        /* one of each (the loader keeps the last one; a second is corruption) */
        for (size_t j = 0; j < end && t != DT_NEEDED; j++) {
            Elf64_Dyn e;
            memcpy(&e, m->f + dp->p_offset + j * sizeof e, sizeof e);
            if (e.d_tag == t)
                return attn__elf_bad(m, "dynamic tag %#llx twice", (unsigned long long)t);
        }
        if (t == DT_TEXTREL || (t == DT_FLAGS && (d.d_un.d_val & DF_TEXTREL)))
            return attn__elf_bad(m, "text relocations");
        if (t == DT_REL || t == DT_RELSZ || t == DT_RELENT)
            return attn__elf_bad(m, "REL relocations (this machine uses RELA)");
        if (t >= 0 && t < DT_NUM) m->tag[t] = d.d_un.d_val, m->has[t] = true;
        if (t == DT_GNU_HASH) m->gnu_hash = d.d_un.d_val;
        if (t == DT_VERSYM) m->versym = d.d_un.d_val;
        if (t == DT_VERNEED) m->verneed = d.d_un.d_val;
        if (t == DT_VERNEEDNUM) m->verneednum = d.d_un.d_val;
        if (t == DT_VERDEF) m->verdef = d.d_un.d_val;
        if (t == DT_VERDEFNUM) m->verdefnum = d.d_un.d_val;
        if (t == DT_RELACOUNT) m->relacount = d.d_un.d_val;
    }
    if (end == nd) return attn__elf_bad(m, "dynamic table without DT_NULL");
    m->dyn_off = dp->p_offset, m->ndyn = end;
    if (!check_pairs(m)) return false;
    m->strtab = m->tag[DT_STRTAB], m->strsz = m->tag[DT_STRSZ], m->symtab = m->tag[DT_SYMTAB];
    if (!m->has[DT_STRTAB] || !m->strsz || !m->has[DT_SYMTAB] || m->symtab % 8 || m->gnu_hash % 8 ||
        (m->has[DT_HASH] && m->tag[DT_HASH] % 4) || m->versym % 2 || m->verneed % 4 ||
        m->verdef % 4 || !attn__elf_in_file(m, m->strtab, m->strsz, 0, NULL))
        return attn__elf_bad(m, "no dynamic string or symbol table inside the file");
    if (m->tag[DT_SYMENT] != sizeof(Elf64_Sym) ||
        (m->has[DT_RELA] && m->tag[DT_RELAENT] != sizeof(Elf64_Rela)) ||
        (m->has[DT_JMPREL] && m->tag[DT_PLTREL] != DT_RELA) ||
        (m->has[DT_RELR] && m->tag[DT_RELRENT] != 8))
        return attn__elf_bad(m, "dynamic entry sizes");
    for (size_t i = 0; i < end; i++) {
        memcpy(&d, m->f + dp->p_offset + i * sizeof d, sizeof d);
        int64_t t = d.d_tag;
        if ((t == DT_NEEDED || t == DT_SONAME || t == DT_RPATH || t == DT_RUNPATH) &&
            !attn__elf_str_ok(m, d.d_un.d_val))
            return attn__elf_bad(m, "dynamic entry %zu names a string outside the string table", i);
    }
    if ((m->has[DT_INIT] &&
         (!attn__elf_in_mem(m, m->tag[DT_INIT], 1, PF_X) || !starts_code(m, m->tag[DT_INIT]))) ||
        (m->has[DT_FINI] &&
         (!attn__elf_in_mem(m, m->tag[DT_FINI], 1, PF_X) || !starts_code(m, m->tag[DT_FINI]))) ||
        (m->has[DT_PLTGOT] && !attn__elf_in_mem(m, m->tag[DT_PLTGOT], 8, PF_W)))
        return attn__elf_bad(m, "DT_INIT/DT_FINI is not .init/.fini or a function (plugins have "
                                "no constructors of their own), or DT_PLTGOT is not writable");
    return attn__elf_check_symbols(m) && check_against_sections(m) && attn__elf_check_versions(m) &&
           attn__elf_check_relocations(m);
}

bool attn__elf_check_image(const unsigned char *f, size_t sz, char *why, size_t wn)
{
    attn__elf_img m;
    memset(&m, 0, sizeof m);
    m.f = f, m.sz = sz, m.why = why, m.wn = wn;
    Elf64_Ehdr eh;
    memcpy(&eh, f, sizeof eh); /* the caller checked the size and the ident */
    if (!check_ehdr(&m, &eh) || !check_sections(&m, &eh) || !check_phdrs(&m, &eh)) return false;
    Elf64_Phdr ph[ATTN__ELF_MAX_PHDRS];
    memcpy(ph, f + eh.e_phoff, (size_t)eh.e_phnum * sizeof(Elf64_Phdr));
    const Elf64_Phdr *dyn = NULL;
    if (!check_loads(&m, ph, eh.e_phnum) || !check_others(&m, ph, eh.e_phnum, &dyn)) return false;
    return check_dynamic(&m, dyn);
}
