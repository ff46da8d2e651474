# Context-parallel tests under mpirun on loopback (built only with MPI).
# Rank counts 1, 2 and 4 share one binary; --mismatch, --stall and --die
# check the startup consensus message and that a dead or stuck rank ends
# the job with a clear error instead of a hang; --frames that ranks out of
# step (a report against a step's part) are refused, nothing written. Root needs
# --allow-run-as-root; --oversubscribe lets 4 ranks share 2 cores.
# Under ASan, leak detection is off for these runs only: Open MPI leaks from
# components it has dlclosed by exit, which LeakSanitizer reports as
# "<unknown module>" and no suppression can name (tests/cp/lsan-openmpi.supp
# covers the ones it can). Memory errors are still fatal; libattn's DCP code
# is leak-checked without MPI by test_cp_merge.
if(TARGET attn_mpi)
  add_executable(cp_dcp_mpi ${CMAKE_CURRENT_SOURCE_DIR}/cp/dcp_mpi.c)
  target_include_directories(cp_dcp_mpi PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(cp_dcp_mpi PRIVATE attn_mpi)
  set(ATTN_MPIRUN ${ATTN_MPIEXEC} --allow-run-as-root --oversubscribe --mca btl self,tcp
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
  set(ATTN_MPI_ENV ${ATTN_TEST_ENV} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_rmaps_base_oversubscribe=1 ATTN_NUM_THREADS=1
    "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
    "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/cp/lsan-openmpi.supp")
  foreach(np 1 2 4)
    add_test(NAME cp_dcp_mpi_np${np} COMMAND ${ATTN_MPIRUN} -np ${np} $<TARGET_FILE:cp_dcp_mpi>)
    set_tests_properties(cp_dcp_mpi_np${np} PROPERTIES ENVIRONMENT "${ATTN_MPI_ENV}"
      TIMEOUT 300 SKIP_RETURN_CODE 77)
  endforeach()
  add_test(NAME cp_dcp_mpi_mismatch COMMAND ${ATTN_MPIRUN} -np 2 $<TARGET_FILE:cp_dcp_mpi> --mismatch)
  set_tests_properties(cp_dcp_mpi_mismatch PROPERTIES ENVIRONMENT "${ATTN_MPI_ENV}" TIMEOUT 60
    SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "rank 0: BACKEND_INVALID: DCP ranks disagree on the attention setup: rank 0: backend CPU_ATTN, layout HND, block size 16; rank 1: backend REFERENCE, layout NHD, block size 16")
  add_test(NAME cp_dcp_mpi_frames COMMAND ${ATTN_MPIRUN} -np 2 $<TARGET_FILE:cp_dcp_mpi> --frames)
  set_tests_properties(cp_dcp_mpi_frames PROPERTIES ENVIRONMENT "${ATTN_MPI_ENV}" TIMEOUT 60
    SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "PASS: 0 failure\\(s\\) over 2 ranks")
  add_test(NAME cp_dcp_mpi_stall COMMAND ${ATTN_MPIRUN} -np 2 $<TARGET_FILE:cp_dcp_mpi> --stall)
  set_tests_properties(cp_dcp_mpi_stall PROPERTIES ENVIRONMENT "${ATTN_MPI_ENV}" TIMEOUT 60
    SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "attn: rank 0: DCP exchange timed out on rank 0 after 2.0 s: no data from rank\\(s\\) 1")
  add_test(NAME cp_dcp_mpi_die COMMAND ${ATTN_MPIRUN} -np 2 $<TARGET_FILE:cp_dcp_mpi> --die)
  set_tests_properties(cp_dcp_mpi_die PROPERTIES ENVIRONMENT "${ATTN_MPI_ENV}" TIMEOUT 60
    SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "DCP exchange timed out on rank 0|exited on signal|non-zero exit code|exited without|process rank 1")
endif()
