/* MLA's device projections (tests/test_opencl_mla_project.c, the same
 * file) through the CUDA module's runtime on an NVIDIA GPU. Exit 77
 * without a GPU (here) or where libattn_cuda.so is not built. */
#ifdef ATTN_HAVE_CUDA_MODULE
#define NAME "test_cuda_mla_project"
#include "cuda_testutil.h"
#include "test_opencl_mla_project.c"
#else
#include "test.h"

int main(void)
{
    attn_test_skip("test_cuda_mla_project", "libattn_cuda.so is not built here (nvcc was not "
                                            "found when configuring: cmake/cuda.cmake)");
}
#endif
