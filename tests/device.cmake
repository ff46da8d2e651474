# The devtest plugin (tests/device/): DEVTEST_ATTN on an opaque test device
# whose handles fault when the host touches them, in its own folder
# ${PROJECT_BINARY_DIR}/test-devices/ so only the tests that ask for it
# (ATTN_PLUGIN_PATH) load it. Like the other test plugins it takes libattn's
# headers and does not link libattn.
set(ATTN_TEST_DEVICE_DIR ${PROJECT_BINARY_DIR}/test-devices)
add_library(attn_test_devtest MODULE ${CMAKE_CURRENT_SOURCE_DIR}/device/devtest_plugin.c)
target_include_directories(attn_test_devtest PRIVATE ${PROJECT_SOURCE_DIR}/include)
set_target_properties(attn_test_devtest PROPERTIES
  OUTPUT_NAME attn_devtest
  LIBRARY_OUTPUT_DIRECTORY ${ATTN_TEST_DEVICE_DIR})
foreach(t test_device_engine)
  if(TARGET ${t})
    add_dependencies(${t} attn_test_devtest)
  endif()
endforeach()
foreach(t test_device_engine test_device_api)
  if(TARGET ${t})
    target_include_directories(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/device)
  endif()
endforeach()
if(TARGET test_device_engine)
  target_link_libraries(test_device_engine PRIVATE attn_harness attn_static)
endif()
