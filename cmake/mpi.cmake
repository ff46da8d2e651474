# attn_mpi: the Open MPI communicator (attn/comm_mpi.h), built only when MPI
# is found. The CLI links it for `attn serve --dcp N` (ATTN_HAVE_MPI); without
# it --dcp above 1 is refused with a clear message.
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  file(GLOB ATTN_MPI_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cp/mpi/*.c)
  add_library(attn_mpi STATIC ${ATTN_MPI_SOURCES})
  # Built on libattn.so's public API only (attn/comm.h): no src/ include path.
  target_link_libraries(attn_mpi PUBLIC attn MPI::MPI_C PRIVATE attn_common)
  target_compile_definitions(attn_mpi PUBLIC ATTN_HAVE_MPI=1)
  target_link_libraries(attn_cli PRIVATE attn_mpi)
  set(ATTN_MPIEXEC "${MPIEXEC_EXECUTABLE}")
  message(STATUS "attn: MPI found (${MPIEXEC_EXECUTABLE}): building attn_mpi")
else()
  message(STATUS "attn: MPI not found: attn_mpi and the mpirun tests are not built")
endif()
