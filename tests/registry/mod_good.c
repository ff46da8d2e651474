/* A backend module for tests/test_registry_loader.c: two well-formed
 * backend objects (one whose known-answer test fails) and one whose
 * descriptor is too small. Built as a MODULE, not linked to libattn. */
#include "attn/backend.h"

static const attn_backend_desc attn_test_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend_desc),
    .name = "MODGOOD",
    .platforms = "any",
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),
};

ATTN_EXPORT const attn_backend attn_test_backend_good = {.abi_version = ATTN_BACKEND_ABI_VERSION,
                                                         .struct_size = sizeof(attn_backend),
                                                         .desc = &attn_test_desc,
                                                         .kernel = 0};

static attn_status attn_test_bad_self_test(char *detail, size_t size)
{
    const char msg[] = "max error 0.5 on [2x4x64]";
    size_t i = 0;
    for (; i + 1 < size && msg[i]; i++)
        detail[i] = msg[i];
    if (size) detail[i] = '\0';
    return ATTN_SELFTEST_FAILED;
}

static const attn_kernel_ops attn_test_bad_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .self_test = attn_test_bad_self_test,
};

ATTN_EXPORT const attn_backend attn_test_backend_selftest_fail = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = sizeof(attn_backend),
    .desc = &attn_test_desc,
    .kernel = &attn_test_bad_kernel};

static const attn_backend_desc attn_test_small_desc = {
    .abi_version = ATTN_BACKEND_ABI_VERSION,
    .struct_size = 8,
    .name = "SMALL",
};

ATTN_EXPORT const attn_backend attn_test_backend_small_desc = {.abi_version =
                                                                   ATTN_BACKEND_ABI_VERSION,
                                                               .struct_size = sizeof(attn_backend),
                                                               .desc = &attn_test_small_desc,
                                                               .kernel = 0};
