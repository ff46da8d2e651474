# bench_cuda measures the CUDA module's kernels on a GPU (make gpu-check).
if(TARGET attn_cuda)
  target_link_libraries(bench_cuda PRIVATE attn_cuda)
  target_compile_definitions(bench_cuda PRIVATE ATTN_HAVE_CUDA_MODULE=1)
endif()
