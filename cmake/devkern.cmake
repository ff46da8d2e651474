# The device kernels (src/backends/devkern/): one kernel source, several
# compilers (docs/design/device-kernels.md).
# - OpenCL: kd_params.h, attn_kdialect.h and every *.cl file (in name order)
#   are embedded into libattn at build time as program strings
#   (cmake/embed_sources.cmake -> <build>/generated/kd_sources.c, compiled
#   into the attn_opencl layer); the driver compiles them at run time.
# - CUDA/HIP: nvcc compiles the same files (scripts/devkern-compile-check.sh,
#   ctest devkern_nvcc); no copy of the text exists anywhere else.
set(ATTN_KD_DIR ${PROJECT_SOURCE_DIR}/src/backends/devkern)
file(GLOB ATTN_KD_KERNELS CONFIGURE_DEPENDS ${ATTN_KD_DIR}/*.cl)
list(SORT ATTN_KD_KERNELS)
set(ATTN_KD_FILES ${ATTN_KD_DIR}/kd_params.h ${ATTN_KD_DIR}/attn_kdialect.h ${ATTN_KD_KERNELS})
set(ATTN_KD_EMBEDDED ${PROJECT_BINARY_DIR}/generated/kd_sources.c)
string(REPLACE ";" "|" _attn_kd_list "${ATTN_KD_FILES}")
add_custom_command(OUTPUT ${ATTN_KD_EMBEDDED}
  COMMAND ${CMAKE_COMMAND} -DOUT=${ATTN_KD_EMBEDDED} -DHEADER=backends/opencl/kd_embed.h
          -DPREFIX=attn__kd -DSOURCES=${_attn_kd_list}
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_sources.cmake
  DEPENDS ${ATTN_KD_FILES} ${PROJECT_SOURCE_DIR}/cmake/embed_sources.cmake
  COMMENT "Embedding the device kernel sources (src/backends/devkern)" VERBATIM)
target_sources(attn_opencl PRIVATE ${ATTN_KD_EMBEDDED})
