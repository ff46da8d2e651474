# OPENCL_ATTN's tests. PoCL compiles kernels with LLVM at run time (seconds
# per program): its kernel cache lives in this build tree, so a rerun
# finds the programs built. Under ASan, PoCL's own allocations that it
# keeps for the life of the process are not libattn's leaks: LSan skips
# them by the frames in tests/lsan_pocl.supp (PoCL/LLVM frames only).
set(ATTN_OCL_TEST_ENV ${ATTN_TEST_ENV} "POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache"
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan_pocl.supp:print_suppressions=0")
foreach(t test_opencl_conformance test_opencl_runtime test_opencl_mla_conformance)
  if(TARGET ${t})
    set_tests_properties(${t} PROPERTIES ENVIRONMENT "${ATTN_OCL_TEST_ENV}")
  endif()
endforeach()
# The kernel source compiled as CUDA (sm_80) and as OpenCL C 1.2 by clang,
# compile-only: the one source must stay inside what every target accepts.
# Each skips (77) where its compiler is missing.
foreach(kind nvcc opencl-c)
  add_test(NAME devkern_${kind}
           COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/devkern-compile-check.sh ${kind}
                   ${PROJECT_BINARY_DIR}/devkern-check)
  set_tests_properties(devkern_${kind} PROPERTIES ENVIRONMENT "${ATTN_TEST_ENV}"
                       SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
# No ICD installed: the loader opens but finds no platform.
if(TARGET test_opencl_absent)
  file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/empty-icd-vendors)
  add_test(NAME test_opencl_absent_icd COMMAND test_opencl_absent)
  set_tests_properties(test_opencl_absent_icd PROPERTIES ENVIRONMENT
    "${ATTN_TEST_ENV};OCL_ICD_VENDORS=${PROJECT_BINARY_DIR}/empty-icd-vendors;ATTN_TEST_OCL_ABSENT=no-icd"
    SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
