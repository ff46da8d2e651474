# test_opencl_mla_project runs on PoCL with OPENCL_ATTN's test environment
# (tests/opencl.cmake: the PoCL kernel cache, the LSan suppressions).
if(TARGET test_opencl_mla_project)
  set_tests_properties(test_opencl_mla_project PROPERTIES ENVIRONMENT "${ATTN_OCL_TEST_ENV}")
endif()
