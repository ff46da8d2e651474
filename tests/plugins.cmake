# Broken plugins for tests/test_plugin_load.c, one folder per case under
# ${PROJECT_BINARY_DIR}/test-plugins/<case>/, so a test can put any mix of
# them on ATTN_PLUGIN_PATH next to the good example plugin (plugins/).
# Like the example, they take libattn's headers but do not link libattn.
set(ATTN_TEST_PLUGIN_DIR ${PROJECT_BINARY_DIR}/test-plugins)
set(ATTN_TEST_PLUGIN_CASES no_entry no_abi bad_abi init_fail missing_dep ctor_bad_abi hostile)

foreach(case ${ATTN_TEST_PLUGIN_CASES})
  add_library(attn_test_plugin_${case} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/${case}.c)
  target_include_directories(attn_test_plugin_${case} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  set_target_properties(attn_test_plugin_${case} PROPERTIES
    OUTPUT_NAME attn_test_${case}
    LIBRARY_OUTPUT_DIRECTORY ${ATTN_TEST_PLUGIN_DIR}/${case})
endforeach()

# missing_dep links a library that exists only in a folder on no search
# path, and carries no rpath to it: dlopen fails on the dependency.
add_library(attn_missingdep SHARED ${CMAKE_CURRENT_SOURCE_DIR}/plugins/missingdep_lib.c)
target_include_directories(attn_missingdep PRIVATE ${PROJECT_SOURCE_DIR}/include)
set_target_properties(attn_missingdep PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/test-plugin-deps)
target_link_libraries(attn_test_plugin_missing_dep PRIVATE attn_missingdep)
target_link_options(attn_test_plugin_missing_dep PRIVATE -Wl,--no-as-needed)
set_target_properties(attn_test_plugin_missing_dep PROPERTIES SKIP_BUILD_RPATH ON)

# The tests that load plugins need them (and the example) built first.
foreach(t test_plugin_load test_plugin_select test_select_threads test_plugin_elf test_badinput_elf)
  if(TARGET ${t})
    foreach(case ${ATTN_TEST_PLUGIN_CASES})
      add_dependencies(${t} attn_test_plugin_${case})
    endforeach()
    if(TARGET attn_example)
      add_dependencies(${t} attn_example)
    endif()
  endif()
endforeach()

