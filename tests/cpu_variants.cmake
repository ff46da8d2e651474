# CPU kernel tests that take a variant (CPU_ATTN's conformance, CPU_MLA's
# decode and prefill against their references): the test's own entry runs
# the variant calls use on this machine (ATTN_TEST_VARIANT=active), and
# NAME_VARIANT runs each other variant compiled in, exiting 77 (skipped)
# where this CPU cannot run it. The list comes from the binary at ctest
# time (NAME --variants: "name active|usable|unusable" lines), so the
# variants are named once, in the C tables; a binary that cannot list them
# gives a failing NAME_variants entry.
foreach(t test_cpu_attn_conformance test_mla_decode test_mla_prefill)
  if(NOT TARGET ${t})
    continue()
  endif()
  set_tests_properties(${t} PROPERTIES ENVIRONMENT "${ATTN_TEST_ENV};ATTN_TEST_VARIANT=active")
  set(env "${ATTN_TEST_ENV}")
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/${t}_variants.cmake CONTENT "
execute_process(COMMAND \"$<TARGET_FILE:${t}>\" --variants OUTPUT_VARIABLE out RESULT_VARIABLE rc)
set(n 0)
if(rc EQUAL 0)
  string(REGEX MATCHALL \"[^\\n]+\" lines \"\${out}\")
  foreach(line \${lines})
    if(line MATCHES \"^([A-Za-z0-9_.-]+) (active|usable|unusable)$\")
      math(EXPR n \"\${n} + 1\")
      if(NOT CMAKE_MATCH_2 STREQUAL \"active\")
        set(v \${CMAKE_MATCH_1})
        add_test(${t}_\${v} \"$<TARGET_FILE:${t}>\" \${v})
        set_tests_properties(${t}_\${v} PROPERTIES ENVIRONMENT \"${env}\" TIMEOUT 600
          SKIP_RETURN_CODE 77)
      endif()
    endif()
  endforeach()
endif()
if(n EQUAL 0)
  add_test(${t}_variants \"${CMAKE_COMMAND}\" -E false)
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
    ${CMAKE_CURRENT_BINARY_DIR}/${t}_variants.cmake)
endforeach()
