/* FLASH_ATTN, TRITON_ATTN and TRITON_MLA as libattn_cuda.so exports them,
 * through the registry (the catalog's default locators, the module found
 * beside libattn or on the loader's path):
 *   - the exported objects carry kernels and the CUDA device, known without
 *     a driver (attn_backend_has_kernel); the names the module does not
 *     export stay descriptor only;
 *   - a simulated machine still resolves the catalog's descriptor (the CPU
 *     stand-ins emulate it, as before);
 *   - ATTN_TEST_CUDA_DRIVER picks the driver (each its own ctest run: the
 *     module loads its driver once per process):
 *       absent (default): ATTN_CUDA_LIBRARY names a missing file -> resolving
 *           any of the three to run its code is the import failure
 *           "libattn_cuda.so: the CUDA driver cannot be loaded: <file>: cannot
 *           open shared object file ...";
 *       stub: the toolkit's stub libcuda.so (loads, cuInit fails) -> the
 *           three resolve and their descriptors ARE the catalog's objects
 *           (pointer equality: the module states no fact); opening the
 *           device fails with cuInit's error, carried into attn_last_error();
 *           a name the module does not export fails as an import;
 *       system: libcuda.so.1 as the machine has it (here: none).
 * Exit 77 where the module was not built (nvcc missing). */
#include <dlfcn.h>
#include <stdlib.h>

#include "attn/attn.h"
#include "test.h"

#define NAME "test_cuda_backend"

#ifndef ATTN_CUDA_STUB_PATH
int main(void)
{
    attn_test_skip(NAME, "libattn_cuda.so is not built here (nvcc was not found when "
                         "configuring: cmake/cuda.cmake)");
}
#else
static const char *const exported[] = {"FLASH_ATTN", "TRITON_ATTN", "TRITON_MLA"};

/* Backed by code or not, known without a driver. */
static void kernels_known(void)
{
    for (int i = 0; i < 3; i++) {
        bool has = false;
        CHECK_OK(attn_backend_has_kernel(exported[i], &has));
        CHECK_MSG(has, "%s: the module's object has no kernel ops", exported[i]);
    }
    static const char *const without[] = {"FLASHMLA",   "CUTLASS_MLA",  "FLASH_ATTN_DIFFKV",
                                          "FLASHINFER", "NO_ATTENTION", "ROCM_ATTN"};
    for (size_t i = 0; i < sizeof without / sizeof without[0]; i++) {
        bool has = true;
        CHECK_OK(attn_backend_has_kernel(without[i], &has));
        CHECK_MSG(!has, "%s is not libattn_cuda.so's but reads as backed by code", without[i]);
    }
    bool has = false;
    CHECK_OK(attn_backend_has_kernel("CPU_ATTN", &has));
    CHECK(has);
    CHECK_STATUS(attn_backend_has_kernel("BOGUS", &has), ATTN_UNKNOWN_BACKEND);
    CHECK_STATUS(attn_backend_has_kernel(NULL, &has), ATTN_NULL_ARGUMENT);
}

/* A simulated H100 emulates the three with the catalog's descriptor. */
static void simulated_unchanged(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    for (int i = 0; p && i < 3; i++) {
        const attn_backend *b = NULL;
        CHECK_OK(attn_backend_resolve(p, exported[i], &b));
        CHECK(b == attn_backend_catalog_builtin(exported[i]));
        CHECK(b && b->kernel == NULL);
    }
    attn_platform_free(p);
}

static void import_fails(const char *needle)
{
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 3; i++) {
            const attn_backend *b = (const attn_backend *)1;
            CHECK_STATUS(attn_backend_resolve(NULL, exported[i], &b), ATTN_IMPORT_ERROR);
            CHECK(b == NULL);
            printf("%s: ImportError: %s\n", exported[i], attn_last_error());
            CHECK_CONTAINS(attn_last_error(),
                           "libattn_cuda.so: the CUDA driver cannot be loaded: ");
            CHECK_CONTAINS(attn_last_error(), needle);
        }
}

/* The driver loads: the objects resolve, bound to the catalog. */
static void bound_to_catalog(bool device_fails)
{
    for (int i = 0; i < 3; i++) {
        const attn_backend *b = NULL, *cat = attn_backend_catalog_builtin(exported[i]);
        CHECK_OK(attn_backend_resolve(NULL, exported[i], &b));
        if (!b || !cat) continue;
        CHECK_MSG(b != cat && b->desc == cat->desc,
                  "%s: the module's descriptor is not the catalog's object", exported[i]);
        CHECK(b->kernel && b->device && !strcmp(b->device->name, "cuda"));
        CHECK(b->device && (b->device->flags & ATTN_DEVICE_HOST_VISIBLE) == 0);
        bool mla = !strcmp(exported[i], "TRITON_MLA");
        CHECK(b->kernel && b->kernel->kind == (mla ? ATTN_KERNEL_MLA : ATTN_KERNEL_STANDARD));
        CHECK(b->kernel &&
              (mla ? b->kernel->forward_mqa && b->kernel->forward_mha && !b->kernel->forward
                   : b->kernel->forward && !b->kernel->forward_mqa));
        if (!device_fails) continue;
        attn_device *d = (attn_device *)1;
        attn_status st = attn_device_open(b, NULL, &d);
        printf("%s: device: %s: %s\n", exported[i], attn_status_name(st), attn_last_error());
        CHECK_STATUS(st, ATTN_PLATFORM_UNAVAILABLE);
        CHECK(d == NULL);
        CHECK_CONTAINS(attn_last_error(), "cuInit");
    }
    const attn_backend *b = NULL;
    CHECK_STATUS(attn_backend_resolve(NULL, "FLASHMLA", &b), ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "cannot import name attn_backend_flashmla from");
}

int main(void)
{
    const char *mode = getenv("ATTN_TEST_CUDA_DRIVER");
    if (!mode || !*mode) mode = "absent";
    if (!strcmp(mode, "absent")) {
        setenv("ATTN_CUDA_LIBRARY", "/nonexistent/attn-test/libcuda.so.1", 1);
    } else if (!strcmp(mode, "stub")) {
        FILE *f = fopen(ATTN_CUDA_STUB_PATH, "rb");
        if (!f) attn_test_skip(NAME, "the toolkit has no stub driver at %s", ATTN_CUDA_STUB_PATH);
        fclose(f);
        setenv("ATTN_CUDA_LIBRARY", ATTN_CUDA_STUB_PATH, 1);
    } else {
        unsetenv("ATTN_CUDA_LIBRARY");
    }
    kernels_known();
    simulated_unchanged();
    if (!strcmp(mode, "absent")) {
        import_fails("/nonexistent/attn-test/libcuda.so.1: cannot open shared object file");
    } else if (!strcmp(mode, "stub")) {
        bound_to_catalog(true);
    } else {
        void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (drv) {
            dlclose(drv);
            bound_to_catalog(false);
        } else {
            import_fails("libcuda.so.1: cannot open shared object file");
        }
    }
    kernels_known(); /* unchanged by the import's outcome */
    return attn_test_finish(NAME);
}
#endif
