# Platform-layer test helpers: fake CUDA driver and HIP runtime libraries
# that test_platform_probe loads through ATTN_CUDA_LIBRARY / ATTN_HIP_LIBRARY.
add_library(attn_fake_cuda SHARED ${CMAKE_CURRENT_SOURCE_DIR}/platform/fake_driver.c)
target_compile_definitions(attn_fake_cuda PRIVATE FAKE_CUDA=1)
add_library(attn_fake_hip SHARED ${CMAKE_CURRENT_SOURCE_DIR}/platform/fake_driver.c)
target_compile_definitions(attn_fake_hip PRIVATE FAKE_HIP=1)
if(TARGET test_platform_probe)
  add_dependencies(test_platform_probe attn_fake_cuda attn_fake_hip)
  target_compile_definitions(test_platform_probe PRIVATE
    ATTN_FAKE_CUDA="$<TARGET_FILE:attn_fake_cuda>"
    ATTN_FAKE_HIP="$<TARGET_FILE:attn_fake_hip>")
endif()
# The CPU kernels again with AVX512_VBMI hidden: the fp8 paths for AVX-512
# machines without byte permutes (Skylake-X, Cascade Lake) run here too.
if(TARGET test_cpu_attn_conformance)
  add_test(NAME test_cpu_attn_conformance_novbmi COMMAND test_cpu_attn_conformance)
  set_tests_properties(test_cpu_attn_conformance_novbmi PROPERTIES
    ENVIRONMENT "${ATTN_TEST_ENV};ATTN_CPU_MASK=-avx512vbmi" TIMEOUT 600 SKIP_RETURN_CODE 77)
endif()
