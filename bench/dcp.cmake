# bench_dcp_mpi: DCP decode figures under mpirun (make bench-dcp); needs attn_mpi.
if(TARGET attn_mpi)
  add_executable(bench_dcp_mpi ${CMAKE_CURRENT_SOURCE_DIR}/dcp/bench_dcp_mpi.c)
  target_include_directories(bench_dcp_mpi PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(bench_dcp_mpi PRIVATE attn_mpi)
  set_target_properties(bench_dcp_mpi PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endif()
