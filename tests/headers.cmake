# Each public application header compiles alone where attn/backend.h (the
# implementer header) cannot be found, with the compiler of this build.
add_test(NAME headers_check COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/headers_check.sh)
set_tests_properties(headers_check PROPERTIES
  ENVIRONMENT "${ATTN_TEST_ENV};ATTN_CC=${CMAKE_C_COMPILER}" TIMEOUT 120 SKIP_RETURN_CODE 77)
