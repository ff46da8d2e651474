/* The tables of a plugin file that dlopen walks by index and offset (see
 * elf_check.c for the image around them): the symbol table and both hash
 * tables, the version needs and definitions, every relocation (RELA, PLT,
 * packed RELR) and the init/fini arrays the loader calls through. Each
 * index is bounded by its table and each address by the segments. */
#include <string.h>

#include "util/elf_img.h"

/* A NUL-terminated string at offset o of the dynamic string table. */
bool attn__elf_str_ok(const attn__elf_img *m, uint64_t o)
{
    uint64_t off;
    if (o >= m->strsz || !attn__elf_in_file(m, m->strtab, m->strsz, 0, &off)) return false;
    return memchr(m->f + off + o, '\0', m->strsz - o) != NULL;
}

/* n 32-bit words at addr, copied out of the file (false: not all there). */
static bool words_at(const attn__elf_img *m, uint64_t addr, uint64_t n, uint32_t *out)
{
    uint64_t off;
    if (n > ((uint64_t)1 << 28) || !attn__elf_in_file(m, addr, n * 4, 0, &off)) return false;
    if (out) memcpy(out, m->f + off, n * 4);
    return true;
}

/* DT_GNU_HASH: header, bloom words, buckets, and every chain ending inside
 * the table; its symbol count (one past the last chained symbol). */
static bool check_gnu_hash(attn__elf_img *m, uint64_t *nsyms)
{
    uint32_t h[4];
    if (!words_at(m, m->gnu_hash, 4, h))
        return attn__elf_bad(m, "GNU hash header outside the file");
    uint32_t nb = h[0], symoff = h[1], bloom = h[2];
    uint64_t buckets = m->gnu_hash + 16 + (uint64_t)bloom * 8, chains = buckets + (uint64_t)nb * 4;
    if (nb == 0 || !attn__elf_pow2(bloom) || h[3] >= 64 ||
        !words_at(m, m->gnu_hash + 16, (uint64_t)bloom * 2, NULL) ||
        !words_at(m, buckets, nb, NULL))
        return attn__elf_bad(m, "GNU hash table (%u buckets, %u bloom words)", nb, bloom);
    uint64_t n = symoff;
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t i = 0;
        words_at(m, buckets + (uint64_t)b * 4, 1, &i);
        if (i == 0) continue;
        if (i < symoff) return attn__elf_bad(m, "GNU hash bucket %u before the hashed symbols", b);
        for (;; i++) {
            uint32_t c;
            if (!words_at(m, chains + (uint64_t)(i - symoff) * 4, 1, &c))
                return attn__elf_bad(m, "GNU hash chain of bucket %u runs off the table", b);
            if (i + 1u > n) n = i + 1u;
            if (c & 1u) break;
        }
    }
    *nsyms = n;
    return true;
}

/* DT_HASH: bucket and chain entries are symbol indexes below nchain. */
static bool check_sysv_hash(attn__elf_img *m, uint64_t *nsyms)
{
    uint32_t h[2];
    if (!words_at(m, m->tag[DT_HASH], 2, h) ||
        !words_at(m, m->tag[DT_HASH] + 8, (uint64_t)h[0] + h[1], NULL) || h[0] == 0)
        return attn__elf_bad(m, "hash table outside the file");
    for (uint64_t k = 0; k < (uint64_t)h[0] + h[1]; k++) {
        uint32_t v = 0;
        words_at(m, m->tag[DT_HASH] + 8 + k * 4, 1, &v);
        if (v >= h[1])
            return attn__elf_bad(m, "hash table entry %llu is %u of %u symbols",
                                 (unsigned long long)k, v, h[1]);
    }
    *nsyms = h[1];
    return true;
}

static bool sym_at(const attn__elf_img *m, uint64_t i, Elf64_Sym *out)
{
    uint64_t off;
    if (i >= m->nsyms || !attn__elf_in_file(m, m->symtab + i * sizeof *out, sizeof *out, 0, &off))
        return false;
    memcpy(out, m->f + off, sizeof *out);
    return true;
}

/* The symbol table the hash tables describe: names inside the string table,
 * defined symbols inside the segments (resolvers inside the code). */
bool attn__elf_check_symbols(attn__elf_img *m)
{
    uint64_t ng = 0, ns = 0;
    if (!m->gnu_hash && !m->has[DT_HASH]) return attn__elf_bad(m, "no hash table");
    if (m->gnu_hash && !check_gnu_hash(m, &ng)) return false;
    if (m->has[DT_HASH] && !check_sysv_hash(m, &ns)) return false;
    m->nsyms = ng > ns ? ng : ns;
    /* the hash tables count only what they hash: relocations may name the
     * symbols after them, which the symbol table's section counts */
    Elf64_Shdr dsym;
    if (attn__elf_section_at(m, SHT_DYNSYM, m->symtab, &dsym) &&
        dsym.sh_entsize == sizeof(Elf64_Sym) && dsym.sh_size / sizeof(Elf64_Sym) > m->nsyms)
        m->nsyms = dsym.sh_size / sizeof(Elf64_Sym);
    if (m->nsyms > ((uint64_t)1 << 24) ||
        !attn__elf_in_file(m, m->symtab, m->nsyms * sizeof(Elf64_Sym), 0, NULL))
        return attn__elf_bad(m, "symbol table of %llu symbols outside the file",
                             (unsigned long long)m->nsyms);
    for (uint64_t i = 1; i < m->nsyms; i++) {
        Elf64_Sym y;
        sym_at(m, i, &y);
        if (!attn__elf_str_ok(m, y.st_name))
            return attn__elf_bad(m, "symbol %llu has no name", (unsigned long long)i);
        int t = ELF64_ST_TYPE(y.st_info);
        /* an undefined symbol binds elsewhere: only with default visibility */
        if ((y.st_other & ~3u) || (y.st_shndx == SHN_UNDEF && ELF64_ST_VISIBILITY(y.st_other)))
            return attn__elf_bad(m, "symbol %llu visibility %u", (unsigned long long)i,
                                 (unsigned)y.st_other);
        if (y.st_shndx == SHN_UNDEF || y.st_shndx == SHN_ABS || t == STT_TLS) continue;
        if (!attn__elf_in_mem(m, y.st_value, 0, t == STT_GNU_IFUNC ? PF_X : 0))
            return attn__elf_bad(m, "symbol %llu lies outside the segments", (unsigned long long)i);
    }
    return true;
}

/* The string at offset o names a DT_NEEDED library (a version need of a
 * library that is not loaded has nothing to be matched against). */
static bool is_needed(const attn__elf_img *m, uint64_t o)
{
    uint64_t base = 0;
    attn__elf_in_file(m, m->strtab, m->strsz, 0, &base);
    const char *want = (const char *)m->f + base + o;
    for (size_t i = 0; i < m->ndyn; i++) {
        Elf64_Dyn e;
        memcpy(&e, m->f + m->dyn_off + i * sizeof e, sizeof e);
        if (e.d_tag == DT_NEEDED && !strcmp((const char *)m->f + base + e.d_un.d_val, want))
            return true;
    }
    return false;
}

/* Version needs and definitions, walked as the loader walks them (by the
 * next offsets until a zero, not by the counts): every record, auxiliary
 * and name inside the file; *maxv the highest version index they define. */
static bool check_verneed(attn__elf_img *m, uint32_t *maxv)
{
    uint64_t a = m->verneed, off;
    for (int k = 0; m->verneed; k++) {
        Elf64_Verneed vn;
        if (k == 1024 || !attn__elf_in_file(m, a, sizeof vn, 0, &off))
            return attn__elf_bad(m, "version need %d outside the file", k);
        memcpy(&vn, m->f + off, sizeof vn);
        if (vn.vn_version != 1 || !attn__elf_str_ok(m, vn.vn_file) || !is_needed(m, vn.vn_file))
            return attn__elf_bad(m, "version need %d (version %u)", k, (unsigned)vn.vn_version);
        uint64_t x = a + vn.vn_aux;
        for (int j = 0;; j++) {
            Elf64_Vernaux va;
            if (j == 1024 || !attn__elf_in_file(m, x, sizeof va, 0, &off) ||
                (memcpy(&va, m->f + off, sizeof va), !attn__elf_str_ok(m, va.vna_name)))
                return attn__elf_bad(m, "version need %d auxiliary %d", k, j);
            if ((va.vna_other & 0x7fffu) > *maxv) *maxv = va.vna_other & 0x7fffu;
            if (!va.vna_next) break;
            x += va.vna_next;
        }
        if (!vn.vn_next) break;
        a += vn.vn_next;
    }
    return true;
}

static bool check_verdef(attn__elf_img *m, uint32_t *maxv)
{
    uint64_t a = m->verdef, off;
    for (int k = 0; m->verdef; k++) {
        Elf64_Verdef vd;
        Elf64_Verdaux va;
        if (k == 1024 || !attn__elf_in_file(m, a, sizeof vd, 0, &off))
            return attn__elf_bad(m, "version definition %d outside the file", k);
        memcpy(&vd, m->f + off, sizeof vd);
        if (vd.vd_version != 1 || !attn__elf_in_file(m, a + vd.vd_aux, sizeof va, 0, &off) ||
            (memcpy(&va, m->f + off, sizeof va), !attn__elf_str_ok(m, va.vda_name)))
            return attn__elf_bad(m, "version definition %d", k);
        if ((vd.vd_ndx & 0x7fffu) > *maxv) *maxv = vd.vd_ndx & 0x7fffu;
        if (!vd.vd_next) break;
        a += vd.vd_next;
    }
    return true;
}

bool attn__elf_check_versions(attn__elf_img *m)
{
    if (m->versym && !attn__elf_in_file(m, m->versym, m->nsyms * 2, 0, NULL))
        return attn__elf_bad(m, "version symbol table outside the file");
    uint32_t maxv = 1; /* 0 local, 1 global; needs and definitions add their own */
    if (!check_verneed(m, &maxv) || !check_verdef(m, &maxv)) return false;
    /* the loader indexes its version array by these without a bound */
    uint64_t off = 0;
    for (uint64_t i = 0; m->versym && i < m->nsyms; i++) {
        uint16_t v;
        attn__elf_in_file(m, m->versym + i * 2, 2, 0, &off);
        memcpy(&v, m->f + off, sizeof v);
        if ((v & 0x7fff) > maxv)
            return attn__elf_bad(m, "symbol %llu has version %u of %u", (unsigned long long)i,
                                 v & 0x7fffu, maxv);
    }
    return true;
}

/* One relocation: a known symbol, a target inside a writable segment, an
 * IRELATIVE resolver inside the code, no COPY (a shared object has none). */
static bool check_rela(attn__elf_img *m, const Elf64_Rela *r)
{
    uint32_t type = ELF64_R_TYPE(r->r_info);
    uint64_t sym = ELF64_R_SYM(r->r_info);
    bool tls = false;
    if (type == ATTN__R_NONE) return true;
    if (type == ATTN__R_COPY) return attn__elf_bad(m, "a COPY relocation in a shared object");
    if (!attn__elf_reloc_type_ok(type, &tls)) return attn__elf_bad(m, "relocation type %u", type);
    if (tls && sym == 0 && !m->has_tls)
        return attn__elf_bad(m, "a TLS relocation without a TLS segment");
    if (sym >= m->nsyms)
        return attn__elf_bad(m, "relocation of symbol %llu of %llu", (unsigned long long)sym,
                             (unsigned long long)m->nsyms);
    if (!attn__elf_in_mem(m, r->r_offset, ATTN__R_WORD_BYTES, PF_W))
        return attn__elf_bad(m, "relocation at %#llx outside the writable segments",
                             (unsigned long long)r->r_offset);
    if (type == ATTN__R_IRELATIVE && !attn__elf_in_mem(m, (uint64_t)r->r_addend, 1, PF_X))
        return attn__elf_bad(m, "IRELATIVE resolver outside the code");
    return true;
}

/* A table of relocations; init_lo..init_hi (the init/fini arrays) collects
 * which array slots a relocation fills. */
static bool check_relocs(attn__elf_img *m, uint64_t addr, uint64_t size, uint64_t *slots,
                         uint64_t lo, uint64_t n, uint64_t relative)
{
    uint64_t off;
    if (!size)
        return relative == 0 ? true : attn__elf_bad(m, "a relative count without relocations");
    if (size % sizeof(Elf64_Rela) || addr % 8 || !attn__elf_in_file(m, addr, size, 0, &off))
        return attn__elf_bad(m, "relocation table outside the file");
    if (relative > size / sizeof(Elf64_Rela))
        return attn__elf_bad(m, "relative count %llu of %llu relocations",
                             (unsigned long long)relative,
                             (unsigned long long)(size / sizeof(Elf64_Rela)));
    for (uint64_t k = 0; k < size / sizeof(Elf64_Rela); k++) {
        Elf64_Rela r;
        memcpy(&r, m->f + off + k * sizeof r, sizeof r);
        /* the loader applies the leading `relative` ones as RELATIVE, unchecked */
        if (k < relative && ELF64_R_TYPE(r.r_info) != ATTN__R_RELATIVE)
            return attn__elf_bad(m, "relocation %llu within the relative count is not relative",
                                 (unsigned long long)k);
        if (!check_rela(m, &r)) return false;
        if (r.r_offset >= lo && r.r_offset - lo < n * 8 && (r.r_offset - lo) % 8 == 0) {
            uint32_t type = ELF64_R_TYPE(r.r_info);
            bool code = type == ATTN__R_RELATIVE
                            ? attn__elf_in_mem(m, (uint64_t)r.r_addend, 1, PF_X)
                            : ELF64_R_SYM(r.r_info) != 0;
            if (!code) return attn__elf_bad(m, "an init/fini entry that is not code");
            slots[(r.r_offset - lo) / 8 / 64] |= 1ull << ((r.r_offset - lo) / 8 % 64);
        }
    }
    return true;
}

/* One packed relative relocation at addr (RELR); an init/fini slot it
 * fills must hold the address of code (the loader adds the base to it). */
static bool relr_one(attn__elf_img *m, uint64_t addr, uint64_t *slots, uint64_t lo, uint64_t n)
{
    if (!attn__elf_in_mem(m, addr, 8, PF_W))
        return attn__elf_bad(m, "packed relocation at %#llx outside the writable segments",
                             (unsigned long long)addr);
    if (addr >= lo && addr - lo < n * 8 && (addr - lo) % 8 == 0) {
        uint64_t off, v;
        if (!attn__elf_in_file(m, addr, 8, 0, &off) ||
            (memcpy(&v, m->f + off, 8), !attn__elf_in_mem(m, v, 1, PF_X)))
            return attn__elf_bad(m, "an init/fini entry that is not code");
        slots[(addr - lo) / 8 / 64] |= 1ull << ((addr - lo) / 8 % 64);
    }
    return true;
}

/* DT_RELR: an even word is an address, an odd one a bitmap of the 63 words
 * after the last address (glibc's decoding). */
static bool check_relr(attn__elf_img *m, uint64_t *slots, uint64_t lo, uint64_t n)
{
    uint64_t addr = m->tag[DT_RELR], size = m->tag[DT_RELRSZ], off, next = 0;
    if (!m->has[DT_RELR]) return true;
    if (size % 8 || addr % 8 || !attn__elf_in_file(m, addr, size, 0, &off))
        return attn__elf_bad(m, "packed relocation table outside the file");
    for (uint64_t k = 0; k < size / 8; k++) {
        uint64_t e;
        memcpy(&e, m->f + off + k * 8, 8);
        if (!(e & 1)) {
            if (!relr_one(m, e, slots, lo, n)) return false;
            next = e + 8;
            continue;
        }
        if (k == 0) return attn__elf_bad(m, "packed relocations start with a bitmap");
        for (int b = 1; b < 64; b++)
            if ((e >> b & 1) && !relr_one(m, next + (uint64_t)(b - 1) * 8, slots, lo, n))
                return false;
        next += 63 * 8;
    }
    return true;
}

/* Relocations, and every init/fini array entry set by one (dlopen calls
 * them: an unrelocated entry is a link-time address, not code). */
bool attn__elf_check_relocations(attn__elf_img *m)
{
    if (m->has[DT_PREINIT_ARRAY]) return attn__elf_bad(m, "a preinit array in a shared object");
    static const int arr[2][2] = {{DT_INIT_ARRAY, DT_INIT_ARRAYSZ},
                                  {DT_FINI_ARRAY, DT_FINI_ARRAYSZ}};
    for (int a = 0; a < 2; a++) {
        uint64_t lo = m->has[arr[a][0]] ? m->tag[arr[a][0]] : 0, sz = m->tag[arr[a][1]];
        if (!m->has[arr[a][0]]) sz = 0;
        if (sz % 8 || sz > 64 * 64 * 8 || (sz && !attn__elf_in_mem(m, lo, sz, PF_W)))
            return attn__elf_bad(m, "init/fini array outside the writable segments");
        uint64_t slots[64] = {0}, n = sz / 8;
        if (!check_relocs(m, m->tag[DT_RELA], m->has[DT_RELA] ? m->tag[DT_RELASZ] : 0, slots, lo, n,
                          m->relacount) ||
            !check_relocs(m, m->tag[DT_JMPREL], m->has[DT_JMPREL] ? m->tag[DT_PLTRELSZ] : 0, slots,
                          lo, n, 0) ||
            !check_relr(m, slots, lo, n))
            return false;
        for (uint64_t k = 0; k < n; k++)
            if (!(slots[k / 64] >> (k % 64) & 1))
                return attn__elf_bad(m, "init/fini array entry %llu is not relocated",
                                     (unsigned long long)k);
    }
    return true;
}
