/* Mutated plugin files against the check made before dlopen (the finding:
 * 2 of 40 mutated plugins passed the ABI check and crashed inside glibc's
 * dlopen). The example plugin is mutated, seeded, in the tables dlopen
 * trusts - the ELF header, the program headers, the dynamic table, the
 * section headers - and sometimes cut short; every file the check lets
 * through is dlopen'ed in a child process, which must not die by a signal.
 * The check's own bounds-checked reads run in this process (under ASan in
 * the sanitizer pass). Mutations that keep a valid structure but send an
 * entry point to other code are outside what a file check can judge and
 * are not made here. */
#include <dlfcn.h>
#include <elf.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin/plugin_impl.h"
#include "test.h"

#define MUTANTS 400

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *b = malloc(1 << 22);
    *n = b ? fread(b, 1, 1 << 22, f) : 0;
    fclose(f);
    return b;
}

/* dlopen in a child: the signal that ended it, or 0. */
static int dlopen_in_child(const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h) dlsym(h, "attn_plugin_init");
        _exit(h ? 0 : 3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

typedef struct region {
    size_t lo, hi;
} region;

/* The four tables dlopen reads before any code of the file runs. */
static int regions_of(const unsigned char *f, size_t n, region r[4])
{
    Elf64_Ehdr eh;
    if (n < sizeof eh) return 0;
    memcpy(&eh, f, sizeof eh);
    r[0] = (region){0, sizeof eh};
    r[1] = (region){eh.e_phoff, eh.e_phoff + (size_t)eh.e_phnum * sizeof(Elf64_Phdr)};
    r[3] = (region){eh.e_shoff, eh.e_shoff + (size_t)eh.e_shnum * sizeof(Elf64_Shdr)};
    r[2] = r[1];
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr p;
        memcpy(&p, f + eh.e_phoff + (size_t)i * sizeof p, sizeof p);
        if (p.p_type == PT_DYNAMIC) r[2] = (region){p.p_offset, p.p_offset + p.p_filesz};
    }
    for (int i = 0; i < 4; i++)
        if (r[i].hi > n || r[i].lo >= r[i].hi) return 0;
    return 4;
}

int main(void)
{
    char ex[1024], tmp[] = "/tmp/attn_elf_mutants_XXXXXX", path[1100];
    snprintf(ex, sizeof ex, "%s/plugins/libattn_example.so", attn_test_binary_dir());
    size_t n = 0;
    unsigned char *orig = slurp(ex, &n), *m = malloc(n ? n : 1);
    region reg[4];
    if (!orig || !m || !regions_of(orig, n, reg) || !mkdtemp(tmp)) {
        fprintf(stderr, "test_badinput_elf: cannot read %s\n", ex);
        return 77;
    }
    uint32_t abi = 0;
    char why[512] = "";
    CHECK_MSG(attn__elf_read_u32(ex, ATTN_PLUGIN_ABI_SYMBOL, &abi, why, sizeof why), "%s", why);
    CHECK(abi == ATTN_PLUGIN_ABI_VERSION);
    CHECK(dlopen_in_child(ex) == 0);
    int refused = 0, passed = 0, died = 0;
    for (int it = 0; it < MUTANTS; it++) {
        memcpy(m, orig, n);
        size_t len = n;
        for (int k = 1 + (int)(rnd() % 3); k > 0; k--) {
            const region *r = &reg[rnd() % 4];
            size_t off = r->lo + rnd() % (r->hi - r->lo);
            int how = (int)(rnd() % 3);
            m[off] = how == 0   ? m[off] ^ (unsigned char)(1u << (rnd() % 8))
                     : how == 1 ? (unsigned char)rnd()
                                : 0xff;
        }
        if (rnd() % 10 == 0) len = n - rnd() % (n / 2);
        snprintf(path, sizeof path, "%s/mutant-%d.so", tmp, it);
        FILE *f = fopen(path, "wb");
        if (!f) break;
        fwrite(m, 1, len, f);
        fclose(f);
        if (!attn__elf_read_u32(path, ATTN_PLUGIN_ABI_SYMBOL, &abi, why, sizeof why)) {
            refused++;
        } else {
            passed++;
            int sig = dlopen_in_child(path);
            CHECK_MSG(sig == 0, "mutant %d passed the check and dlopen died of signal %d", it, sig);
            died += sig != 0;
        }
        if (!attn_test_failures) unlink(path); /* a failing one stays to be looked at */
    }
    printf("%d mutants: %d refused before dlopen, %d passed (none may crash dlopen: %d did)\n",
           MUTANTS, refused, passed, died);
    CHECK(refused + passed == MUTANTS);
    CHECK(refused > MUTANTS / 2); /* the mutations hit what the check reads */
    if (!attn_test_failures) rmdir(tmp);
    free(orig);
    free(m);
    return attn_test_finish("test_badinput_elf");
}
