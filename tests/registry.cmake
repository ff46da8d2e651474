# Backend modules for tests/test_registry_loader.c, built into
# ${PROJECT_BINARY_DIR}/test-registry/: a good one (plus a failing
# self-test and a too-small descriptor), one with a wrong ABI version, and
# one whose dependency is on no search path. They take libattn's headers
# but do not link libattn.
set(ATTN_TEST_REGISTRY_DIR ${PROJECT_BINARY_DIR}/test-registry)
foreach(mod good badabi dep)
  add_library(attn_test_mod_${mod} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/registry/mod_${mod}.c)
  target_include_directories(attn_test_mod_${mod} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  set_target_properties(attn_test_mod_${mod} PROPERTIES
    OUTPUT_NAME attn_test_mod_${mod}
    LIBRARY_OUTPUT_DIRECTORY ${ATTN_TEST_REGISTRY_DIR})
endforeach()
add_library(attn_test_regdep SHARED ${CMAKE_CURRENT_SOURCE_DIR}/registry/regdep.c)
target_include_directories(attn_test_regdep PRIVATE ${PROJECT_SOURCE_DIR}/include)
set_target_properties(attn_test_regdep PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/test-registry-deps)
target_link_libraries(attn_test_mod_dep PRIVATE attn_test_regdep)
target_link_options(attn_test_mod_dep PRIVATE -Wl,--no-as-needed)
set_target_properties(attn_test_mod_dep PROPERTIES SKIP_BUILD_RPATH ON)

if(TARGET test_registry_loader)
  foreach(mod good badabi dep)
    add_dependencies(test_registry_loader attn_test_mod_${mod})
  endforeach()
endif()

# A plugin that registers a backend and its OpenCL platform rule
# (tests/cli_select.sh), alone in its folder for ATTN_PLUGIN_PATH.
add_library(attn_test_rules_plugin MODULE ${CMAKE_CURRENT_SOURCE_DIR}/registry/rules_plugin.c)
target_include_directories(attn_test_rules_plugin PRIVATE ${PROJECT_SOURCE_DIR}/include)
set_target_properties(attn_test_rules_plugin PROPERTIES
  OUTPUT_NAME attn_test_rules
  LIBRARY_OUTPUT_DIRECTORY ${ATTN_TEST_REGISTRY_DIR}/rules_plugin)
