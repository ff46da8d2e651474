/* The registry's public contract: names in declaration order (vLLM's enum
 * order, then libattn's own), case-insensitive lookup, default locators,
 * CUSTOM/TORCH_SDPA needing registration (reference §8 message), overrides
 * (is_overridden, clear), new names, in-memory objects with ABI checks,
 * overrides affecting explicit and automatic selection alike, snapshot and
 * restore (the plugin loader's rollback), concurrent registration, and
 * NULL/invalid arguments. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry_impl.h"
#include "test.h"

/* vLLM 0.32.0's AttentionBackendEnum, every member in its order (its
 * registry.py). libattn's own names follow in the catalog's order. */
static const char *const vllm_order[] = {
    "FLASH_ATTN",
    "FLASH_ATTN_DIFFKV",
    "TRITON_ATTN",
    "TRITON_ATTN_DIFFKV",
    "TRITON_FLASH_ATTN",
    "ROCM_ATTN",
    "ROCM_SEGMENTED_ATTN",
    "ROCM_AITER_MLA",
    "ROCM_AITER_TRITON_MLA",
    "ROCM_AITER_FA",
    "ROCM_AITER_MLA_SPARSE",
    "XPU_MLA_SPARSE",
    "TORCH_SDPA",
    "FLASHINFER",
    "TRITON_FLASHINFER",
    "FLASHINFER_MLA",
    "TOKENSPEED_MLA",
    "FLASHINFER_MLA_SPARSE",
    "FLASHINFER_MLA_SPARSE_SM120",
    "FLASHINFER_MLA_SPARSE_SM90",
    "TRITON_MLA",
    "CUTLASS_MLA",
    "FLASHMLA",
    "FLASHMLA_SPARSE",
    "FLASHMLA_SPARSE_DSV4",
    "FLASHINFER_MLA_SPARSE_DSV4",
    "ROCM_FLASHMLA_SPARSE_DSV4",
    "FLASHMLA_SPARSE_DSV41",
    "FLASHINFER_MLA_SPARSE_DSV41",
    "FLASHMLA_MEGA_ATTN_DSV41",
    "B12X",
    "FLASH_ATTN_MLA",
    "FLASH_ATTN_MLA_SPARSE",
    "MINIMAX_M3_SPARSE",
    "CUTLASS_MSA",
    "TRITON_MSA",
    "NO_ATTENTION",
    "FLEX_ATTENTION",
    "HPC_ATTN",
    "ROCM_AITER_UNIFIED_ATTN",
    "CPU_ATTN",
    "CPU_MLA",
    "AMX_MLA",
    "TURBOQUANT",
    "ULTRAQUANT",
    "CUSTOM",
};
#define NVLLM ((int)(sizeof vllm_order / sizeof vllm_order[0]))

static void test_names(void)
{
    /* vLLM's names first, then libattn's own (REFERENCE, CPU_MLA_SPARSE,
     * ..., OPENCL_ATTN: the catalog's libattn_only entries), none of
     * them vLLM's */
    int n = attn_backend_catalog_count();
    CHECK(NVLLM == 46 && n > NVLLM && attn_registry_count() == n);
    for (int i = 0; i < NVLLM; i++)
        CHECK_STR(attn_registry_name(i), vllm_order[i]);
    for (int i = NVLLM; i < n; i++) {
        CHECK_STR(attn_registry_name(i), attn_backend_catalog_name(i));
        for (int j = 0; j < NVLLM; j++)
            CHECK_MSG(strcmp(attn_registry_name(i) ? attn_registry_name(i) : "", vllm_order[j]),
                      "%s twice", vllm_order[j]);
    }
    CHECK_STR(attn_registry_name(NVLLM), "REFERENCE");
    CHECK(attn_registry_name(-1) == NULL);
    CHECK(attn_registry_name(n) == NULL);
    CHECK(attn_registry_contains("flash_attn"));
    CHECK(attn_registry_contains("Flash_Attn"));
    CHECK(!attn_registry_contains("FLASH-ATTN"));
    CHECK(!attn_registry_contains(""));
    CHECK(!attn_registry_contains(NULL));
    /* vLLM's text is its enum's members, in order, and only them */
    const char *v = attn_registry_valid_names();
    char want[2048] = "";
    for (int i = 0; i < NVLLM; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "",
                 vllm_order[i]);
    CHECK_STR(v, want);
    CHECK(attn_registry_contains("REFERENCE") && !strstr(v, "REFERENCE"));
    CHECK(attn_registry_valid_names() == v); /* unchanged registry: same text */
}

static void test_locators(void)
{
    const char *loc = NULL;
    CHECK_OK(attn_registry_get_locator("FLASH_ATTN", &loc));
    CHECK_STR(loc, "libattn_cuda.so:attn_backend_flash_attn");
    CHECK_OK(attn_registry_get_locator("cpu_attn", &loc));
    CHECK_STR(loc, "builtin:CPU_ATTN");
    CHECK_STATUS(attn_registry_get_locator("CUSTOM", &loc), ATTN_NOT_REGISTERED);
    CHECK_STR(attn_last_error(), "Backend CUSTOM must be registered before use. Use "
                                 "register_backend(Backend.CUSTOM, 'your.module.YourClass')");
    CHECK(loc == NULL);
    CHECK_STATUS(attn_registry_get_locator("TORCH_SDPA", &loc), ATTN_NOT_REGISTERED);
    CHECK_CONTAINS(attn_last_error(), "Backend TORCH_SDPA must be registered before use.");
    CHECK_STATUS(attn_registry_get_locator("FOO", &loc), ATTN_UNKNOWN_BACKEND);
    CHECK_CONTAINS(attn_last_error(), "Unknown attention backend: 'FOO'. Valid options are: "
                                      "FLASH_ATTN, FLASH_ATTN_DIFFKV,");
    CHECK_STATUS(attn_registry_get_locator(NULL, &loc), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_registry_get_locator("FLASH_ATTN", NULL), ATTN_NULL_ARGUMENT);

    /* On the real machine GPU code lives in modules this build lacks. */
    const attn_backend *b = NULL;
    CHECK_STATUS(attn_backend_resolve(NULL, "FLASH_ATTN", &b), ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "No module named libattn_cuda.so");
    CHECK_STATUS(attn_backend_resolve(NULL, "NO_ATTENTION", &b), ATTN_IMPORT_ERROR);
    CHECK_STATUS(attn_backend_resolve(NULL, "CUSTOM", &b), ATTN_NOT_REGISTERED);
    CHECK_STATUS(attn_backend_resolve(NULL, "BOGUS", &b), ATTN_UNKNOWN_BACKEND);
    CHECK_STATUS(attn_backend_resolve(NULL, NULL, &b), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_backend_resolve(NULL, "FLASH_ATTN", NULL), ATTN_NULL_ARGUMENT);

    /* On a simulated machine the descriptor resolves, gated by components. */
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cuda:9.0", &p));
    CHECK_OK(attn_platform_set_installed(p, "fa2,fa3"));
    CHECK_OK(attn_backend_resolve(p, "FLASH_ATTN", &b));
    CHECK(b && b->kernel == NULL && !strcmp(b->desc->name, "FLASH_ATTN"));
    CHECK_STATUS(attn_backend_resolve(p, "FLASHINFER", &b), ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "No module named flashinfer");
    CHECK_STATUS(attn_backend_resolve(p, "NO_ATTENTION", &b), ATTN_IMPORT_ERROR);
    CHECK_OK(attn_platform_set_installed(p, "flashinfer"));
    CHECK_OK(attn_backend_resolve(p, "TRITON_FLASHINFER", &b));
    CHECK_OK(attn_backend_resolve(p, "FLASHINFER_MLA_SPARSE", &b));
    attn_platform_free(p);
}

static const attn_backend_desc my_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "MINE",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_BF16),
};
static const attn_backend my_backend = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                                        .struct_size = sizeof(attn_backend),
                                        .desc = &my_desc,
                                        .kernel = NULL};

static void test_custom(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    attn_selection *s = NULL;

    CHECK(!attn_registry_is_overridden("CUSTOM"));
    CHECK_STATUS(attn_select_uncached(p, "CUSTOM", &cfg, &s), ATTN_NOT_REGISTERED);
    CHECK(attn_selection_error(s) == ATTN_SELECT_NOT_REGISTERED);
    CHECK_STR(attn_select_error_name(attn_selection_error(s)), "not-registered");
    CHECK_STR(attn_selection_message(s), "Backend CUSTOM must be registered before use. Use "
                                         "register_backend(Backend.CUSTOM, "
                                         "'your.module.YourClass')");
    attn_selection_free(s);

    CHECK_OK(attn_register_backend_object("custom", &my_backend));
    CHECK(attn_registry_is_overridden("CUSTOM"));
    const char *loc = NULL;
    CHECK_OK(attn_registry_get_locator("CUSTOM", &loc));
    CHECK_STR(loc, "object:CUSTOM");
    CHECK_OK(attn_select_uncached(p, "CUSTOM", &cfg, &s));
    CHECK_STR(attn_selection_backend(s), "CUSTOM");
    CHECK(attn_selection_backend_object(s) == &my_backend);
    attn_selection_free(s);

    CHECK_OK(attn_register_backend("CUSTOM", "builtin:TRITON_ATTN"));
    CHECK_OK(attn_registry_get_locator("CUSTOM", &loc));
    CHECK_STR(loc, "builtin:TRITON_ATTN");
    CHECK_OK(attn_registry_clear_override("CUSTOM"));
    CHECK(!attn_registry_is_overridden("CUSTOM"));
    CHECK_OK(attn_registry_clear_override("CUSTOM")); /* absent: no error */
    CHECK_STATUS(attn_registry_get_locator("CUSTOM", &loc), ATTN_NOT_REGISTERED);
    CHECK_STATUS(attn_registry_clear_override("NOPE"), ATTN_UNKNOWN_BACKEND);
    attn_platform_free(p);
}

static void test_overrides_affect_selection(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = 128;
    const attn_selection *s1 = NULL, *s2 = NULL;
    CHECK_OK(attn_select(p, NULL, &cfg, &s1));
    CHECK_STR(attn_selection_backend(s1), "FLASH_ATTN");

    /* An override of the first choice that cannot load: auto falls through
     * to the next, with the loader's text as the reason; the cache does not
     * answer with the pre-override result. */
    CHECK_OK(attn_register_backend("FLASH_ATTN", "libattn_nowhere.so:attn_backend_fa"));
    CHECK(attn_registry_is_overridden("flash_attn"));
    CHECK_OK(attn_select(p, NULL, &cfg, &s2));
    CHECK(s2 != s1);
    CHECK_STR(attn_selection_backend(s2), "FLASHINFER");
    CHECK_CONTAINS(attn_selection_reason(s2, 0, 0), "ImportError: No module named "
                                                    "libattn_nowhere.so");
    attn_selection *u = NULL;
    CHECK_STATUS(attn_select_uncached(p, "FLASH_ATTN", &cfg, &u), ATTN_BACKEND_INVALID);
    CHECK_CONTAINS(attn_selection_message(u), "Reason: [ImportError: No module named "
                                              "libattn_nowhere.so");
    attn_selection_free(u);
    CHECK_OK(attn_registry_clear_override("FLASH_ATTN"));
    CHECK_OK(attn_select(p, NULL, &cfg, &s2));
    CHECK_STR(attn_selection_backend(s2), "FLASH_ATTN");
    attn_platform_free(p);
}

static void test_new_names(void)
{
    int n0 = attn_registry_count();
    CHECK_OK(attn_register_backend("my_backend", "builtin:TRITON_ATTN"));
    CHECK(attn_registry_count() == n0 + 1);
    CHECK_STR(attn_registry_name(n0), "MY_BACKEND");
    CHECK(attn_registry_contains("MY_BACKEND"));
    CHECK(attn_registry_is_overridden("MY_BACKEND"));
    CHECK_CONTAINS(attn_registry_valid_names(), ", ULTRAQUANT, CUSTOM, MY_BACKEND");
    /* Re-registering changes the locator, not the count. */
    CHECK_OK(attn_register_backend("MY_BACKEND", "builtin:FLEX_ATTENTION"));
    CHECK(attn_registry_count() == n0 + 1);
    const attn_backend *b = NULL;
    CHECK_OK(attn_backend_resolve(NULL, "MY_BACKEND", &b));
    CHECK(b && !strcmp(b->desc->name, "FLEX_ATTENTION"));
    /* Cleared, a new name stays known but needs registering again. */
    CHECK_OK(attn_registry_clear_override("MY_BACKEND"));
    CHECK(attn_registry_contains("MY_BACKEND"));
    CHECK_STATUS(attn_backend_resolve(NULL, "MY_BACKEND", &b), ATTN_NOT_REGISTERED);
    CHECK_CONTAINS(attn_last_error(), "Backend MY_BACKEND must be registered before use.");
}

static void test_bad_args(void)
{
    int n0 = attn_registry_count();
    CHECK_STATUS(attn_register_backend(NULL, "builtin:X"), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_register_backend("A", NULL), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_register_backend("bad-name", "builtin:X"), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_register_backend("", "builtin:X"), ATTN_INVALID_ARGUMENT);
    char longname[100];
    memset(longname, 'A', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_STATUS(attn_register_backend(longname, "builtin:X"), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_register_backend_object("A", NULL), ATTN_NULL_ARGUMENT);
    attn_backend bad = my_backend;
    bad.abi_version = 3;
    CHECK_STATUS(attn_register_backend_object("A", &bad), ATTN_ABI_MISMATCH);
    CHECK_CONTAINS(attn_last_error(), "backend abi_version 3, libattn expects 2");
    bad = my_backend;
    bad.struct_size = 4;
    CHECK_STATUS(attn_register_backend_object("A", &bad), ATTN_ABI_MISMATCH);
    bad = my_backend;
    bad.desc = NULL;
    CHECK_STATUS(attn_register_backend_object("A", &bad), ATTN_ABI_MISMATCH);
    attn_backend_desc d = my_desc;
    d.abi_version = 9;
    bad = my_backend;
    bad.desc = &d;
    CHECK_STATUS(attn_register_backend_object("A", &bad), ATTN_ABI_MISMATCH);
    CHECK(attn_registry_count() == n0); /* bad input changes nothing */
    CHECK(!attn_registry_is_overridden(NULL));
    CHECK_STATUS(attn_registry_clear_override(NULL), ATTN_NULL_ARGUMENT);
}

static void test_snapshot(void)
{
    int n0 = attn_registry_count();
    attn__registry_snapshot *snap = attn__registry_snapshot_take();
    CHECK(snap != NULL);
    CHECK_OK(attn_register_backend("CUSTOM", "builtin:REFERENCE"));
    CHECK_OK(attn_register_backend("FLASHINFER", "builtin:TRITON_ATTN"));
    CHECK_OK(attn_register_backend("SNAP_NEW", "builtin:TRITON_ATTN"));
    const char *name = attn_registry_name(n0);
    CHECK_STR(name, "SNAP_NEW");
    uint64_t gen = attn__registry_generation();
    attn__registry_snapshot_restore(snap);
    CHECK(attn__registry_generation() > gen);
    CHECK(attn_registry_count() == n0);
    CHECK(!attn_registry_contains("SNAP_NEW"));
    CHECK(!attn_registry_is_overridden("CUSTOM"));
    CHECK(!attn_registry_is_overridden("FLASHINFER"));
    CHECK_STR(name, "SNAP_NEW"); /* handed-out names stay valid */
    attn__registry_snapshot_free(attn__registry_snapshot_take());
}

static void *reg_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    char name[32];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof name, "T%d_%d", id, i % 5);
        attn_register_backend(name, "builtin:REFERENCE");
        attn_registry_contains("FLASH_ATTN");
        attn_registry_valid_names();
        attn_registry_is_overridden(name);
    }
    return NULL;
}

static void test_threads(void)
{
    int n0 = attn_registry_count();
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, reg_thread, (void *)(intptr_t)i);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK(attn_registry_count() == n0 + 40);
}

int main(void)
{
    test_names();
    test_locators();
    test_custom();
    test_overrides_affect_selection();
    test_new_names();
    test_bad_args();
    test_snapshot();
    test_threads();
    return attn_test_finish("test_registry_api");
}
