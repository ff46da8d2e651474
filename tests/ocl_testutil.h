/* Helpers of the OpenCL tests (test_opencl_*): open an instance or skip
 * (exit 77) when this machine has no OpenCL device, buffers filled from
 * host memory, and the paged cache in the three layouts the kernels must
 * read. Header-only, on top of attn_kernel_testutil.h. */
#ifndef ATTN_OCL_TESTUTIL_H
#define ATTN_OCL_TESTUTIL_H

#include <stdio.h>

#include "attn_kernel_testutil.h"
#include "backends/opencl/opencl.h"
#include "test.h"

#ifndef ATTN_TOCL_DEVICE /* tests/cuda_testutil.h brings the CUDA module's */
/* An instance on the default device; skips the test without OpenCL. */
static inline attn__ocl *tocl_open_or_skip(const char *test, const char *build_options)
{
    attn__ocl_options opt = {.device = -1, .build_options = build_options};
    attn__ocl *o = NULL;
    attn_status st = attn__ocl_open(&opt, &o);
    if (st == ATTN_PLATFORM_UNAVAILABLE)
        attn_test_skip(test, "no OpenCL platform/device here: %s", attn_last_error());
    CHECK_MSG(st == ATTN_OK, "attn__ocl_open: %s (%s)", attn_status_name(st), attn_last_error());
    if (st != ATTN_OK) exit(attn_test_finish(test));
    return o;
}

/* A device buffer holding a copy of bytes of host memory (bytes > 0). */
static inline attn__ocl_mem *tocl_upload(attn__ocl *o, const void *src, size_t bytes)
{
    attn__ocl_mem *m = NULL;
    CHECK_OK(attn__ocl_alloc(o, bytes, &m));
    if (m && src) CHECK_OK(attn__ocl_copy_in(o, m, 0, src, bytes));
    return m;
}
#endif

/* Cache layouts: FLASH_ATTN's (2, num_blocks, block_size, kv_heads, head)
 * in HND or NHD stride order, TRITON_ATTN's (num_blocks, 2, block_size,
 * kv_heads, head). */
enum { TLAYOUT_FLASH_HND, TLAYOUT_FLASH_NHD, TLAYOUT_TRITON, TLAYOUT_COUNT };
static const char *const tlayout_names[TLAYOUT_COUNT] = {"flash-HND", "flash-NHD", "triton"};

static inline void tcache_init_layout(tcache *c, attn_elem elem, int nb, int bs, int kvh, int D,
                                      int Dv, int layout)
{
    tcache_init(c, elem, nb, bs, kvh, D, Dv, layout == TLAYOUT_FLASH_HND);
    if (layout == TLAYOUT_TRITON) {
        int pitch = D > c->Dv ? D : c->Dv;
        c->view.v_offset = (int64_t)bs * kvh * pitch;
        c->view.stride_block = 2 * (int64_t)bs * kvh * pitch;
    }
}

static inline size_t tcache_bytes(const tcache *c)
{
    int pitch = c->D > c->Dv ? c->D : c->Dv;
    return 2 * (size_t)c->nb * (size_t)c->bs * (size_t)c->kvh * (size_t)pitch *
           attn_elem_size(c->elem);
}

#endif
