# The CUDA module's tests. Where cmake/cuda.cmake built libattn_cuda.so
# (nvcc found): test_cuda_module dlopens it and checks its failure without
# a driver in four driver situations (each its own process: the module
# loads its driver once); the conformance tests link it and run the OpenCL
# tests' matrices on a GPU (exit 77 without one: here). Without the module
# every test_cuda_* exits 77 with the reason.
if(TARGET attn_cuda)
  set(_attn_stub "")
  get_filename_component(_attn_cuda_root ${ATTN_NVCC} DIRECTORY)
  foreach(d lib64/stubs targets/x86_64-linux/lib/stubs lib/stubs)
    if(NOT _attn_stub AND EXISTS ${_attn_cuda_root}/../${d}/libcuda.so)
      get_filename_component(_attn_stub ${_attn_cuda_root}/../${d}/libcuda.so ABSOLUTE)
    endif()
  endforeach()
  target_compile_definitions(test_cuda_module PRIVATE
    ATTN_CUDA_MODULE_PATH="$<TARGET_FILE:attn_cuda>" ATTN_CUDA_TU_PATH="${ATTN_CUDA_TU}"
    ATTN_CUDA_STUB_PATH="${_attn_stub}")
  add_dependencies(test_cuda_module attn_cuda)
  foreach(mode stub nosym system)
    add_test(NAME test_cuda_module_${mode} COMMAND test_cuda_module)
    set_tests_properties(test_cuda_module_${mode} PROPERTIES
      ENVIRONMENT "${ATTN_TEST_ENV};ATTN_TEST_CUDA_DRIVER=${mode}" SKIP_RETURN_CODE 77 TIMEOUT 120)
  endforeach()
  foreach(t test_cuda_conformance test_cuda_mla_conformance test_cuda_mla_project)
    target_link_libraries(${t} PRIVATE attn_cuda)
    target_compile_definitions(${t} PRIVATE ATTN_HAVE_CUDA_MODULE=1
      ATTN_CUDA_SLACK_PTX="${PROJECT_BINARY_DIR}/generated/kd_cuda_slack.ptx")
  endforeach()
endif()
# test_cuda_backend: the module through the registry (found on the loader's
# path), once per driver situation; skipped (77) without the module.
if(TARGET attn_cuda)
  target_compile_definitions(test_cuda_backend PRIVATE ATTN_CUDA_STUB_PATH="${_attn_stub}")
  add_dependencies(test_cuda_backend attn_cuda)
  set(_attn_cuda_env "${ATTN_TEST_ENV};LD_LIBRARY_PATH=$<TARGET_FILE_DIR:attn_cuda>")
  set_tests_properties(test_cuda_backend PROPERTIES ENVIRONMENT "${_attn_cuda_env}")
  foreach(mode stub system)
    add_test(NAME test_cuda_backend_${mode} COMMAND test_cuda_backend)
    set_tests_properties(test_cuda_backend_${mode} PROPERTIES
      ENVIRONMENT "${_attn_cuda_env};ATTN_TEST_CUDA_DRIVER=${mode}" SKIP_RETURN_CODE 77 TIMEOUT 120)
  endforeach()
endif()
# test_cuda_backend_conformance: the harness over stand-ins here, then the
# three backends on a GPU (77 without one).
target_include_directories(test_cuda_backend_conformance PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/device)
if(TARGET attn_cuda)
  add_dependencies(test_cuda_backend_conformance attn_cuda)
  set_tests_properties(test_cuda_backend_conformance PROPERTIES ENVIRONMENT "${_attn_cuda_env}")
endif()
