# CPU kernel tests that take a variant (test_cpu_attn_conformance): the
# test's own entry runs the variant calls use on this machine
# (ATTN_TEST_VARIANT=active), and NAME_VARIANT runs each other variant
# compiled in, exiting 77 (skipped) where this CPU cannot run it. The list
# comes from the binary at ctest time (NAME --variants), so the variants
# are named once, in the C table.
foreach(t test_cpu_attn_conformance)
  if(NOT TARGET ${t})
    continue()
  endif()
  set_tests_properties(${t} PROPERTIES ENVIRONMENT "${ATTN_TEST_ENV};ATTN_TEST_VARIANT=active")
  set(env "${ATTN_TEST_ENV}")
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/${t}_variants.cmake CONTENT "
execute_process(COMMAND \"$<TARGET_FILE:${t}>\" --variants OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  add_test(${t}_variants \"$<TARGET_FILE:${t}>\" --variants)
else()
  string(REGEX MATCHALL \"[^\\n]+\" lines \"\${out}\")
  foreach(line \${lines})
    string(REGEX REPLACE \" .*\" \"\" v \"\${line}\")
    if(NOT line MATCHES \" active$\")
      add_test(${t}_\${v} \"$<TARGET_FILE:${t}>\" \${v})
      set_tests_properties(${t}_\${v} PROPERTIES ENVIRONMENT \"${env}\" TIMEOUT 600
        SKIP_RETURN_CODE 77)
    endif()
  endforeach()
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
    ${CMAKE_CURRENT_BINARY_DIR}/${t}_variants.cmake)
endforeach()
