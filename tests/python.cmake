# The Python package: tests/python/run.sh builds it over this build's
# libattn.so in a venv and runs its pytest suite.
add_test(NAME python_package COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/python/run.sh)
set_tests_properties(python_package PROPERTIES
  ENVIRONMENT "${ATTN_TEST_ENV};ATTN_SANITIZE=${ATTN_SANITIZE}"
  SKIP_RETURN_CODE 77 TIMEOUT 900 DEPENDS attn)
