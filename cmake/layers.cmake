# The layers inside src/, one CMake object library each (docs/design.md,
# "Layers, targets and what each may include").
#
# Each layer lists its folders under src/ and the layers directly below it.
# A layer's files are compiled with one include root of their own,
# <build>/layers/<layer>/, that holds symbolic links to the folders of the
# layer and of every layer below it (transitively) and nothing else: an
# #include "<folder>/x.h" of a folder above the layer, or beside it, finds
# no file and fails to compile. include/ and common/ stay visible to all.
# The objects of all layers make libattn.so and libattn.a, as one object
# library did before.
#
# A new .c or .h in a listed folder needs nothing here (each folder is
# globbed). A new folder under src/ must be given to a layer here: a .c
# file that belongs to no layer stops the configure step.

# ATTN_LAYER_<layer>_DIRS: its folders under src/; _DEPS: the layers
# directly below it (what it sees is the closure). docs/design.md has the
# table. The edges are those of the code at link level too: every attn_
# symbol a layer's objects reference is defined in the layer or below it
# (tests/cli_layers.sh checks it with nm), so the graph is a DAG and a
# layer's objects link without anything above them.
set(ATTN_LAYERS util platform model device metadata catalog kvcache kernels opencl selftest
                registry plugin cp select engine)
set(ATTN_LAYER_util_DIRS util)
set(ATTN_LAYER_util_DEPS)
set(ATTN_LAYER_platform_DIRS platform)
set(ATTN_LAYER_platform_DEPS util)
set(ATTN_LAYER_model_DIRS model)
set(ATTN_LAYER_model_DEPS util)
set(ATTN_LAYER_device_DIRS device)
set(ATTN_LAYER_device_DEPS util)
set(ATTN_LAYER_metadata_DIRS metadata)
set(ATTN_LAYER_metadata_DEPS util)
# The descriptors name their metadata builders.
set(ATTN_LAYER_catalog_DIRS backends/catalog)
set(ATTN_LAYER_catalog_DEPS platform metadata)
# The KV layout depends on the platform kind (XPU: NHD).
set(ATTN_LAYER_kvcache_DIRS kvcache)
set(ATTN_LAYER_kvcache_DEPS device platform)
set(ATTN_LAYER_kernels_DIRS backends/cpu backends/mla backends/reference)
set(ATTN_LAYER_kernels_DEPS catalog metadata device)
# OPENCL_ATTN: the kernel dialect sources (no .c) and the OpenCL runtime;
# it shares REFERENCE's checks and semantics (backends/reference).
set(ATTN_LAYER_opencl_DIRS backends/devkern backends/opencl)
set(ATTN_LAYER_opencl_DEPS kernels)
set(ATTN_LAYER_selftest_DIRS selftest)
set(ATTN_LAYER_selftest_DEPS kernels)
# The registry's catalog table names every built-in backend's object, so it
# sits above the folders that define them (kernels, opencl).
set(ATTN_LAYER_registry_DIRS registry)
set(ATTN_LAYER_registry_DEPS catalog kernels opencl)
set(ATTN_LAYER_plugin_DIRS plugin)
set(ATTN_LAYER_plugin_DEPS registry)
set(ATTN_LAYER_cp_DIRS cp)
set(ATTN_LAYER_cp_DEPS selftest)
# The selector loads the plugins before it selects (attn_plugins_load).
set(ATTN_LAYER_select_DIRS select)
set(ATTN_LAYER_select_DEPS selftest registry plugin)
set(ATTN_LAYER_engine_DIRS engine)
set(ATTN_LAYER_engine_DEPS select plugin model kvcache cp)

# attn_layer_closure(<layer> <out var>): the layer and every layer below it.
function(attn_layer_closure layer out)
  set(seen)
  set(pending ${layer})
  while(pending)
    list(POP_FRONT pending l)
    if(NOT DEFINED ATTN_LAYER_${l}_DIRS)
      message(FATAL_ERROR "cmake/layers.cmake: unknown layer '${l}'")
    endif()
    if(NOT l IN_LIST seen)
      list(APPEND seen ${l})
      list(APPEND pending ${ATTN_LAYER_${l}_DEPS})
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# attn_layer_root(<layer> <out var>): (re)creates the layer's include root.
function(attn_layer_root layer out)
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  # Links only: REMOVE_RECURSE removes a link, never what it points at.
  file(REMOVE_RECURSE ${root})
  attn_layer_closure(${layer} below)
  foreach(l ${below})
    foreach(d ${ATTN_LAYER_${l}_DIRS})
      get_filename_component(parent ${root}/${d} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${d} ${root}/${d} SYMBOLIC)
    endforeach()
  endforeach()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# attn_add_layers(<out var>): one OBJECT library attn_<layer> per layer;
# <out var> receives their $<TARGET_OBJECTS:...>. Every .c under src/
# except src/cp/mpi/ (its own library, cmake/mpi.cmake) and
# src/backends/cuda/ (the CUDA module, cmake/cuda.cmake) must be in one.
function(attn_add_layers out)
  file(GLOB_RECURSE all CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.c)
  list(FILTER all EXCLUDE REGEX "/src/cp/mpi/|/src/backends/cuda/")
  set(objects)
  foreach(layer ${ATTN_LAYERS})
    set(srcs)
    foreach(d ${ATTN_LAYER_${layer}_DIRS})
      file(GLOB s CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${d}/*.c)
      list(APPEND srcs ${s})
    endforeach()
    if(srcs)
      list(REMOVE_ITEM all ${srcs})
    endif()
    attn_isa_sources(srcs)
    attn_layer_root(${layer} root)
    add_library(attn_${layer} OBJECT ${srcs})
    target_include_directories(attn_${layer} PRIVATE ${root}
      ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/common)
    target_compile_definitions(attn_${layer} PRIVATE ${ATTN_LIB_DEFINITIONS})
    list(GET ATTN_LAYER_${layer}_DIRS 0 first)
    list(APPEND objects "${first}|$<TARGET_OBJECTS:attn_${layer}>")
  endforeach()
  if(all)
    string(REPLACE ";" "\n  " all "${all}")
    message(FATAL_ERROR "cmake/layers.cmake: these files belong to no layer:\n  ${all}")
  endif()
  # In the order of their folders' paths, the order one glob over src/ gave
  # the objects before the split (the libraries' layout stays as it was).
  list(SORT objects)
  list(TRANSFORM objects REPLACE "^[^|]*\\|" "")
  set(${out} ${objects} PARENT_SCOPE)
endfunction()
