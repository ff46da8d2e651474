/* The MLA conformance matrix of the dialect's MLA kernels
 * (tests/test_opencl_mla_conformance.c, the same file) run through the CUDA
 * module's runtime against REFERENCE_MLA on an NVIDIA GPU (TRITON_MLA's
 * kernels): the kernels compiled by nvcc from the dialect's sources that
 * pass on PoCL (tests/cuda_testutil.h maps the runtime's names). Exit 77
 * without a GPU (here) or where libattn_cuda.so is not built; make
 * gpu-check runs it on a GPU machine. */
#ifdef ATTN_HAVE_CUDA_MODULE
#define NAME "test_cuda_mla_conformance"
#include "cuda_testutil.h"
#include "test_opencl_mla_conformance.c"
#else
#include "test.h"

int main(void)
{
    attn_test_skip("test_cuda_mla_conformance",
                   "libattn_cuda.so is not built here (nvcc was not found "
                   "when configuring: cmake/cuda.cmake)");
}
#endif
