/* The loader behind "file.so:symbol" locators: each way an import can fail
 * (module not found, missing dependency, symbol missing, ABI mismatch) is
 * an ATTN_IMPORT_ERROR with its own text, and becomes the selection reason
 * "ImportError: <text>". Also: ATTN_PLUGIN_PATH lookup of relative files,
 * builtin locators, and the self-test gate with a module whose known-answer
 * test fails. Modules come from tests/registry.cmake. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static char dir[2048];

static const char *mod(const char *file, const char *symbol)
{
    static char buf[4][2300];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s:%s", dir, file, symbol);
    return buf[k];
}

static attn_status resolve_as(const char *name, const char *locator, const attn_backend **b)
{
    attn_status st = attn_register_backend(name, locator);
    if (st != ATTN_OK) return st;
    return attn_backend_resolve(NULL, name, b);
}

static void test_failures(void)
{
    const attn_backend *b = NULL;
    CHECK_OK(resolve_as("MOD_GOOD", mod("libattn_test_mod_good.so", "attn_test_backend_good"), &b));
    CHECK(b && b->desc && !strcmp(b->desc->name, "MODGOOD"));

    CHECK_STATUS(resolve_as("MOD_NOSYM", mod("libattn_test_mod_good.so", "no_such_symbol"), &b),
                 ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "cannot import name no_such_symbol from");
    CHECK(b == NULL);

    CHECK_STATUS(resolve_as("MOD_ABSENT", "/nonexistent/dir/libattn_absent.so:sym", &b),
                 ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "No module named /nonexistent/dir/libattn_absent.so");

    CHECK_STATUS(resolve_as("MOD_ABSENT2", "libattn_absent_bare.so:sym", &b), ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "No module named libattn_absent_bare.so");
    CHECK_CONTAINS(attn_last_error(), "cannot open shared object file");

    CHECK_STATUS(resolve_as("MOD_DEP", mod("libattn_test_mod_dep.so", "attn_test_backend_dep"), &b),
                 ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "missing dependency");
    CHECK_CONTAINS(attn_last_error(), "libattn_test_regdep.so");

    CHECK_STATUS(
        resolve_as("MOD_BADABI", mod("libattn_test_mod_badabi.so", "attn_test_backend_badabi"), &b),
        ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "ABI version mismatch");
    CHECK_CONTAINS(attn_last_error(), "backend abi_version 1, libattn expects 2 (backend "
                                      "contract v2");
    CHECK_CONTAINS(attn_last_error(), "the module was not opened");
    CHECK_MSG(!getenv("ATTN_TEST_MOD_BADABI_RAN"), "the v1 module's ELF constructor ran");

    CHECK_STATUS(resolve_as("MOD_SMALL",
                            mod("libattn_test_mod_good.so", "attn_test_backend_small_desc"), &b),
                 ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "descriptor struct_size 8");

    /* Failures are cached, and so is success: the same answer twice. */
    CHECK_STATUS(attn_backend_resolve(NULL, "MOD_BADABI", &b), ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "ABI version mismatch");
    const attn_backend *b2 = NULL;
    CHECK_OK(attn_backend_resolve(NULL, "MOD_GOOD", &b));
    CHECK_OK(attn_backend_resolve(NULL, "mod_good", &b2));
    CHECK(b == b2);
}

static void test_plugin_path(void)
{
    setenv("ATTN_PLUGIN_PATH", "/nonexistent-first", 1);
    const attn_backend *b = NULL;
    CHECK_STATUS(resolve_as("MOD_REL0", "libattn_test_mod_good.so:attn_test_backend_good", &b),
                 ATTN_IMPORT_ERROR);
    char path[4200];
    snprintf(path, sizeof path, "/nonexistent-first::%s", dir);
    setenv("ATTN_PLUGIN_PATH", path, 1);
    CHECK_OK(resolve_as("MOD_REL", "libattn_test_mod_good.so:attn_test_backend_good", &b));
    CHECK(b && !strcmp(b->desc->name, "MODGOOD"));
    unsetenv("ATTN_PLUGIN_PATH");
}

static void test_builtin(void)
{
    const attn_backend *b = NULL;
    CHECK_OK(resolve_as("MOD_BUILTIN", "builtin:TRITON_ATTN", &b));
    CHECK(b && !strcmp(b->desc->name, "TRITON_ATTN") && b->kernel == NULL);
    CHECK_STATUS(resolve_as("MOD_BUILTIN2", "builtin:NO_SUCH", &b), ATTN_IMPORT_ERROR);
    CHECK_STR(attn_last_error(), "libattn has no built-in backend named NO_SUCH");
    CHECK_STATUS(attn_register_backend("X", "builtin:"), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_register_backend("X", "no-colon.so"), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_register_backend("X", ":sym"), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_register_backend("X", "file.so:"), ATTN_INVALID_ARGUMENT);
    CHECK(!attn_registry_contains("X"));
}

static const attn_selection *select_on(attn_platform *p, const char *name)
{
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 64;
    const attn_selection *s = NULL;
    attn_select(p, name, &cfg, &s);
    return s;
}

static void test_selection(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cpu", &p));
    if (!p) return;
    const attn_selection *s = select_on(p, "mod_good");
    CHECK_STR(attn_selection_backend(s), "MOD_GOOD");
    CHECK_CONTAINS(attn_selection_locator(s), "libattn_test_mod_good.so:attn_test_backend_good");

    s = select_on(p, "MOD_BADABI");
    CHECK(attn_selection_status(s) == ATTN_BACKEND_INVALID);
    CHECK_CONTAINS(attn_selection_message(s),
                   "Selected backend AttentionBackendEnum.MOD_BADABI is not valid for this "
                   "configuration. Reason: [ImportError: ABI version mismatch: ");

    /* A kernel whose known-answer test fails is never chosen. */
    CHECK_OK(attn_register_backend(
        "MOD_KAT", mod("libattn_test_mod_good.so", "attn_test_backend_selftest_fail")));
    s = select_on(p, "MOD_KAT");
    CHECK_STR(attn_selection_message(s), "Selected backend AttentionBackendEnum.MOD_KAT is not "
                                         "valid for this configuration. Reason: "
                                         "['self-test failed: max error 0.5 on [2x4x64]']");
    /* ATTN_SELFTEST=0 skips it and says so (uncached: the cache would answer
     * the earlier result for the same key). */
    setenv("ATTN_SELFTEST", "0", 1);
    attn_selection *u = NULL;
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 64;
    CHECK_OK(attn_select_uncached(p, "MOD_KAT", &cfg, &u));
    CHECK_STR(attn_selection_backend(u), "MOD_KAT");
    bool noted = false;
    for (int i = 0; i < attn_selection_num_notes(u); i++)
        noted = noted || !strcmp(attn_selection_note(u, i), "self-test skipped (ATTN_SELFTEST=0)");
    CHECK(noted);
    attn_selection_free(u);
    unsetenv("ATTN_SELFTEST");
    attn_platform_free(p);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/test-registry", attn_test_binary_dir());
    test_failures();
    test_plugin_path();
    test_builtin();
    test_selection();
    return attn_test_finish("test_registry_loader");
}
