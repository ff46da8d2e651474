/* Without OpenCL, OPENCL_ATTN's runtime fails cleanly: libattn has no
 * link-time OpenCL dependency (the ICD loader is opened with dlopen), so
 * where the loader cannot be opened (ATTN_OPENCL_LIBRARY naming a missing
 * file: the default run) or finds no platform (the second ctest run sets
 * OCL_ICD_VENDORS to an empty folder and ATTN_TEST_OCL_ABSENT=no-icd),
 * opening an instance is ATTN_PLATFORM_UNAVAILABLE with the loader's or the
 * runtime's reason, no device is counted, and asking again gives the same
 * answer. */
#include <stdlib.h>

#include "backends/opencl/opencl.h"
#include "test.h"

int main(void)
{
    const char *mode = getenv("ATTN_TEST_OCL_ABSENT");
    bool no_icd = mode && strcmp(mode, "no-icd") == 0;
    if (!no_icd) setenv("ATTN_OPENCL_LIBRARY", "/nonexistent/attn-test/libOpenCL.so.1", 1);
    for (int round = 0; round < 2; round++) {
        attn__ocl *o = NULL;
        attn_status st = attn__ocl_open(NULL, &o);
        if (no_icd && st == ATTN_OK) {
            attn__ocl_close(o);
            attn_test_skip("test_opencl_absent", "OCL_ICD_VENDORS did not hide the platforms "
                                                 "(an ICD loader that ignores it)");
        }
        CHECK_STATUS(st, ATTN_PLATFORM_UNAVAILABLE);
        CHECK(o == NULL);
        printf("%s: %s\n", no_icd ? "no ICD" : "no loader", attn_last_error());
        if (no_icd) {
            /* the loader's own "no platform", or our "no platform (ICD)" */
            CHECK_MSG(strstr(attn_last_error(), "platform") != NULL, "reason: %s",
                      attn_last_error());
        } else {
            CHECK_CONTAINS(attn_last_error(), "/nonexistent/attn-test/libOpenCL.so.1");
        }
        CHECK(attn__ocl_device_count() == 0);
    }
    return attn_test_finish("test_opencl_absent");
}
