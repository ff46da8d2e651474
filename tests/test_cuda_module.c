/* libattn_cuda.so without a GPU: the module is built from the dialect's
 * kernel files (the ones OPENCL_ATTN embeds: one copy), dlopen of it works
 * on a machine without a CUDA driver (no link-time CUDA or libattn
 * dependency), it carries a fatbin (its magic, aligned) for the
 * architectures it names, and its
 * runtime fails at first use the way a Python import of a CUDA extension
 * does. ATTN_TEST_CUDA_DRIVER picks what the driver is (each case is its
 * own ctest run: the module loads its driver once per process):
 *   absent (the default run): ATTN_CUDA_LIBRARY names a missing file ->
 *       ATTN_IMPORT_ERROR, "libattn_cuda.so: the CUDA driver cannot be
 *       loaded: <file>: cannot open shared object file ...";
 *   stub:   the toolkit's stub libcuda.so -> ATTN_PLATFORM_UNAVAILABLE,
 *       cuInit's CUDA_ERROR_STUB_LIBRARY (skipped without the stub);
 *   nosym:  a library that is no driver (libm.so.6) -> ATTN_IMPORT_ERROR,
 *       "has no cuInit";
 *   system: libcuda.so.1 as the machine has it: without one (here) the
 *       dynamic loader's reason; with one, an instance opens or there is
 *       no device.
 * Every case asks twice and gets the same answer; no device is counted.
 * Exit 77 where the module was not built (nvcc missing). */
#include <dlfcn.h>
#include <stdlib.h>

#include "test.h"

#define NAME "test_cuda_module"

#ifndef ATTN_CUDA_MODULE_PATH
int main(void)
{
    attn_test_skip(NAME, "libattn_cuda.so is not built here (nvcc was not found when "
                         "configuring: cmake/cuda.cmake)");
}
#else
#include "backends/opencl/kd_embed.h"

typedef int (*count_fn)(void);
typedef attn_status (*open_fn)(const void *opt, void **out);
typedef void (*close_fn)(void *c);
typedef const char *(*text_fn)(void);
typedef size_t (*size_fn)(void);
typedef const void *(*image_fn)(void);

/* The generated CUDA translation unit includes exactly the kernel files
 * libattn embeds for OpenCL, in the same order. */
static void one_copy(void)
{
    FILE *f = fopen(ATTN_CUDA_TU_PATH, "r");
    CHECK_MSG(f != NULL, "cannot read %s", ATTN_CUDA_TU_PATH);
    if (!f) return;
    char line[1024];
    int next = 2; /* kd_params.h and attn_kdialect.h come first in the OpenCL program */
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "#include \"", 10) != 0) continue;
        char *end = strrchr(line, '"'), *base = strrchr(line, '/');
        if (!end || !base || end < base) continue;
        *end = '\0';
        CHECK_MSG(next < attn__kd_source_count &&
                      strcmp(base + 1, attn__kd_source_names[next]) == 0,
                  "the CUDA translation unit includes %s where OpenCL embeds %s", base + 1,
                  next < attn__kd_source_count ? attn__kd_source_names[next] : "nothing");
        CHECK_MSG(strstr(line, "/src/backends/devkern/") != NULL, "%s is not the source file",
                  line + 10);
        next++;
    }
    fclose(f);
    CHECK_MSG(next == attn__kd_source_count, "the CUDA translation unit has %d of %d kernel files",
              next - 2, attn__kd_source_count - 2);
}

int main(void)
{
    const char *mode = getenv("ATTN_TEST_CUDA_DRIVER");
    if (!mode || !*mode) mode = "absent";
    attn_status want = ATTN_IMPORT_ERROR;
    const char *needle = NULL;
    if (!strcmp(mode, "absent")) {
        setenv("ATTN_CUDA_LIBRARY", "/nonexistent/attn-test/libcuda.so.1", 1);
        needle = "/nonexistent/attn-test/libcuda.so.1: cannot open shared object file";
    } else if (!strcmp(mode, "stub")) {
        const char *stub = ATTN_CUDA_STUB_PATH;
        FILE *f = fopen(stub, "rb");
        if (!f) attn_test_skip(NAME, "the toolkit has no stub driver at %s", stub);
        fclose(f);
        setenv("ATTN_CUDA_LIBRARY", stub, 1);
        want = ATTN_PLATFORM_UNAVAILABLE;
        needle = "cuInit";
    } else if (!strcmp(mode, "nosym")) {
        setenv("ATTN_CUDA_LIBRARY", "libm.so.6", 1);
        needle = "has no cuInit";
    } else {
        unsetenv("ATTN_CUDA_LIBRARY");
    }
    void *h = dlopen(ATTN_CUDA_MODULE_PATH, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(h != NULL, "dlopen %s: %s", ATTN_CUDA_MODULE_PATH, dlerror());
    if (!h) return attn_test_finish(NAME);
    open_fn open = (open_fn)dlsym(h, "attn__cuda_open");
    close_fn close = (close_fn)dlsym(h, "attn__cuda_close");
    count_fn count = (count_fn)dlsym(h, "attn__cuda_device_count");
    text_fn last_error = (text_fn)dlsym(h, "attn__cuda_last_error");
    text_fn archs = (text_fn)dlsym(h, "attn__cuda_fatbin_archs");
    size_fn fatbin = (size_fn)dlsym(h, "attn__cuda_fatbin_size");
    image_fn image = (image_fn)dlsym(h, "attn__cuda_fatbin");
    CHECK(open && close && count && last_error && archs && fatbin && image);
    if (!open || !close || !count || !last_error || !archs || !fatbin || !image)
        return attn_test_finish(NAME);
    printf("libattn_cuda.so: fatbin of %zu bytes for %s\n", fatbin(), archs());
    CHECK(fatbin() > 4096);
    uint32_t magic = 0;
    memcpy(&magic, image(), sizeof magic);
    CHECK_MSG(magic == 0xBA55ED50u, "the embedded image starts with %08x, not a fatbin", magic);
    CHECK_MSG(((uintptr_t)image() & 63) == 0, "the fatbin is not 64-byte aligned");
    CHECK(strstr(archs(), "sm_") != NULL || !strcmp(archs(), "native"));
    one_copy();
    if (!strcmp(mode, "system")) {
        void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (drv) {
            dlclose(drv);
            void *c = NULL;
            attn_status st = open(NULL, &c);
            printf("system driver: %s (%s)\n", attn_status_name(st), last_error());
            CHECK_MSG(st == ATTN_OK || st == ATTN_PLATFORM_UNAVAILABLE, "open: %s (%s)",
                      attn_status_name(st), last_error());
            close(c);
            return attn_test_finish(NAME);
        }
        needle = "libcuda.so.1: cannot open shared object file";
    }
    for (int round = 0; round < 2; round++) {
        void *c = (void *)1;
        attn_status st = open(NULL, &c);
        printf("%s driver: %s: %s\n", mode, attn_status_name(st), last_error());
        CHECK_STATUS(st, want);
        CHECK(c == NULL);
        CHECK_CONTAINS(last_error(), needle);
        CHECK_CONTAINS(last_error(), "libattn_cuda.so");
        CHECK(count() == 0);
    }
    return attn_test_finish(NAME);
}
#endif
