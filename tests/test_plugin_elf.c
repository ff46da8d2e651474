/* The plugin ABI is read from the ELF file before dlopen: a plugin with the
 * wrong ABI and an ELF constructor is refused without its constructor ever
 * running (before: the constructor ran during dlopen, then the ABI check
 * refused it), and files that are no 64-bit ELF shared object (text, a
 * truncated ELF header, an executable-looking stub) are refused with a reason
 * and never opened. The good example plugin next to them still loads. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/attn.h"
#include "test.h"

static char g_tmp[256];

static bool report_of(const char *name, attn_plugin_report *r)
{
    for (int i = 0; i < attn_plugins_count(); i++)
        if (attn_plugins_report(i, r) == ATTN_OK && strcmp(r->name, name) == 0) return true;
    memset(r, 0, sizeof *r);
    return false;
}

static bool is_mapped(const char *file)
{
    void *h = dlopen(file, RTLD_NOW | RTLD_NOLOAD);
    if (h) dlclose(h);
    return h != NULL;
}

static void write_file(const char *name, const void *data, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/junk/%s", g_tmp, name);
    FILE *f = fopen(p, "wb");
    if (f) fwrite(data, 1, n, f), fclose(f);
}

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/attn_plugin_elf_XXXXXX");
    if (!mkdtemp(g_tmp)) return 77;
    char junk[300], path[2048], marker[512], ctor_so[1024];
    snprintf(junk, sizeof junk, "%s/junk", g_tmp);
    mkdir(junk, 0700);
    write_file("libtext.so", "not an ELF file at all\n", 23);
    write_file("libshort.so",
               "\x7f"
               "ELF\x02\x01",
               6);
    unsigned char hdr[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    hdr[16] = 3; /* ET_DYN of this machine, but the section headers point past the end */
    hdr[18] = 62, hdr[20] = 1, hdr[0x34] = 64, hdr[0x36] = 56;
    hdr[0x3a] = 64, hdr[0x3c] = 200, hdr[0x28] = 0xff, hdr[0x29] = 0xff;
    write_file("libsections.so", hdr, sizeof hdr);
    const char *bin = attn_test_binary_dir();
    snprintf(ctor_so, sizeof ctor_so, "%s/test-plugins/ctor_bad_abi/libattn_test_ctor_bad_abi.so",
             bin);
    snprintf(path, sizeof path, "%s/test-plugins/ctor_bad_abi:%s:%s/plugins", bin, junk, bin);
    setenv("ATTN_PLUGIN_PATH", path, 1);
    unsetenv("ATTN_PLUGINS");
    setenv("ATTN_TEST_MARKER_DIR", g_tmp, 1);
    setenv("ATTN_LOG", "error", 1);
    if (access(ctor_so, F_OK) != 0) {
        fprintf(stderr, "test_plugin_elf: %s not built\n", ctor_so);
        return 77;
    }

    attn_plugins_load();
    attn_plugin_report r;
    CHECK(report_of("attn_test_ctor_bad_abi", &r));
    CHECK(!r.loaded);
    CHECK_STR(r.error, "ABI version mismatch: the plugin was built for plugin ABI 1, this "
                       "libattn has ABI 2 (backend contract v1: rebuild it against this "
                       "libattn's headers, docs/design/contract-v2.md)");
    snprintf(marker, sizeof marker, "%s/ctor_bad_abi.ctor.ran", g_tmp);
    CHECK_MSG(access(marker, F_OK) != 0, "the plugin's ELF constructor ran");
    snprintf(marker, sizeof marker, "%s/ctor_bad_abi.ran", g_tmp);
    CHECK_MSG(access(marker, F_OK) != 0, "the plugin's init ran");
    CHECK_MSG(!is_mapped(ctor_so), "a plugin with the wrong ABI was opened");
    CHECK(!attn_registry_contains("ATTN_TEST_CTOR_BAD_ABI"));

    CHECK(report_of("text", &r));
    CHECK_STR(r.error, "not an ELF file");
    CHECK(report_of("short", &r));
    CHECK_STR(r.error, "not an ELF file");
    CHECK(report_of("sections", &r));
    CHECK_STR(r.error, "malformed ELF: section headers outside the file");

    CHECK(report_of("attn_example", &r));
    CHECK_MSG(r.loaded, "the good plugin did not load: %s", r.error ? r.error : "");

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return attn_test_finish("test_plugin_elf");
}
