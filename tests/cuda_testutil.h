/* The OpenCL runtime's test vocabulary on the CUDA module: the module's
 * runtime (src/backends/cuda/cuda_rt.h) mirrors the OpenCL runtime's API
 * call for call, so the names of opencl.h map one to one onto it and
 * test_cuda_conformance / test_cuda_mla_conformance run the OPENCL_ATTN
 * test files themselves (one matrix, one source) against REFERENCE on a
 * GPU. Include it first, then ocl_testutil.h (for the cache layouts) and the
 * OpenCL test. Without a device the tests exit 77. */
#ifndef ATTN_CUDA_TESTUTIL_H
#define ATTN_CUDA_TESTUTIL_H

#include <stdio.h>

#include "attn_kernel_testutil.h"
#include "backends/cuda/cuda_rt.h"
#include "test.h"

#define ATTN_OPENCL_OPENCL_H /* the OpenCL declarations stay out */
#define ATTN_TOCL_DEVICE     /* tocl_open_or_skip and tocl_upload are below */

#define attn__ocl                  attn__cuda
#define attn__ocl_mem              attn__cuda_mem
#define attn__ocl_alloc            attn__cuda_alloc
#define attn__ocl_free             attn__cuda_free
#define attn__ocl_copy_in          attn__cuda_copy_in
#define attn__ocl_copy_out         attn__cuda_copy_out
#define attn__ocl_close            attn__cuda_close
#define attn__ocl_device_name      attn__cuda_device_name
#define attn__ocl_kernel           attn__cuda_kernel
#define attn__ocl_kernel_create    attn__cuda_kernel_create
#define attn__ocl_kernel_destroy   attn__cuda_kernel_destroy
#define attn__ocl_plan             attn__cuda_plan
#define attn__ocl_step             attn__cuda_step
#define attn__ocl_step_create      attn__cuda_step_create
#define attn__ocl_step_destroy     attn__cuda_step_destroy
#define attn__ocl_step_build       attn__cuda_step_build
#define attn__ocl_step_splits      attn__cuda_step_splits
#define attn__ocl_fwd              attn__cuda_fwd
#define attn__ocl_forward          attn__cuda_forward
#define attn__ocl_mla              attn__cuda_mla
#define attn__ocl_mla_create       attn__cuda_mla_create
#define attn__ocl_mla_destroy      attn__cuda_mla_destroy
#define attn__ocl_mla_step         attn__cuda_mla_step
#define attn__ocl_mla_step_create  attn__cuda_mla_step_create
#define attn__ocl_mla_step_destroy attn__cuda_mla_step_destroy
#define attn__ocl_mla_step_build   attn__cuda_mla_step_build
#define attn__ocl_mla_step_splits  attn__cuda_mla_step_splits
#define attn__ocl_mla_fwd          attn__cuda_mla_fwd
#define attn__ocl_mla_mqa          attn__cuda_mla_mqa
#define attn__ocl_mla_mha          attn__cuda_mla_mha
#define attn__ocl_mla_project      attn__cuda_mla_project
/* failure details of the device calls are the module's */
#define attn_last_error attn__cuda_last_error

/* An instance on device 0; skips the test without a driver or device. The
 * OpenCL tests pass "-DKD_CAUSAL_SLACK=1" for the planted off-by-one: the
 * CUDA build compiles those kernels once, as PTX (cmake/cuda.cmake). */
static inline attn__cuda *tocl_open_or_skip(const char *test, const char *build_options)
{
    attn__cuda_options opt = {.device = 0};
    if (build_options) {
        static char *ptx;
        if (!ptx) {
            FILE *f = fopen(ATTN_CUDA_SLACK_PTX, "rb");
            if (!f)
                attn_test_skip(test,
                               "the planted off-by-one's PTX %s is not built (the sanitizer "
                               "build skips it)",
                               ATTN_CUDA_SLACK_PTX);
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            fseek(f, 0, SEEK_SET);
            ptx = calloc((size_t)n + 1, 1);
            if (!ptx || fread(ptx, 1, (size_t)n, f) != (size_t)n) {
                fclose(f);
                attn_test_skip(test, "cannot read %s", ATTN_CUDA_SLACK_PTX);
            }
            fclose(f);
        }
        opt.image = ptx;
    }
    attn__cuda *c = NULL;
    attn_status st = attn__cuda_open(&opt, &c);
    if (st == ATTN_IMPORT_ERROR || st == ATTN_PLATFORM_UNAVAILABLE)
        attn_test_skip(test, "no CUDA device here: %s", attn__cuda_last_error());
    CHECK_MSG(st == ATTN_OK, "attn__cuda_open: %s (%s)", attn_status_name(st),
              attn__cuda_last_error());
    if (st != ATTN_OK) exit(attn_test_finish(test));
    return c;
}

static inline attn__cuda_mem *tocl_upload(attn__cuda *c, const void *src, size_t bytes)
{
    attn__cuda_mem *m = NULL;
    CHECK_OK(attn__cuda_alloc(c, bytes, &m));
    if (m && src) CHECK_OK(attn__cuda_copy_in(c, m, 0, src, bytes));
    return m;
}

#endif
