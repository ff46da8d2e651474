# The C sources follow .clang-format; skipped (not failed) where the
# formatter is missing or of another major version, whose output differs.
add_test(NAME format_check COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/format_check.sh)
set_tests_properties(format_check PROPERTIES ENVIRONMENT "${ATTN_TEST_ENV}" SKIP_RETURN_CODE 77
  TIMEOUT 300)
