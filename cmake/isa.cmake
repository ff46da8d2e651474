# Per-variant ISA flags of the CPU kernel files, chosen by the file name's
# suffix, so each variant's code is compiled with exactly what its CPU has:
#   *_avx2.c        AVX2 + FMA + F16C
#   *_avx512.c      AVX512F/BW/VL/DQ (+ AVX2, FMA, F16C), no BF16
#   *_avx512bf16.c  the same + AVX512_BF16
#   *_amx.c         the same as *_avx512bf16.c: the tile instructions are
#                   inline asm (src/util/amx.h), so no -mamx-* flag is needed
# On other architectures these files are left out of the build.
set(ATTN_ISA_AVX2 "-mavx2;-mfma;-mf16c")
set(ATTN_ISA_AVX512 "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mfma;-mavx2;-mf16c")
set(ATTN_ISA_AVX512BF16 "${ATTN_ISA_AVX512};-mavx512bf16")
set(ATTN_ISA_SUFFIX_REGEX "_(avx2|avx512|avx512bf16|amx)\\.c$")

# attn_isa_flags(<files>): set each ISA file's flags (x86 only).
function(attn_isa_flags srcs)
  if(NOT ATTN_IS_X86)
    return()
  endif()
  foreach(f ${srcs})
    if(f MATCHES "_avx2\\.c$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${ATTN_ISA_AVX2}")
    elseif(f MATCHES "_avx512\\.c$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${ATTN_ISA_AVX512}")
    elseif(f MATCHES "_(avx512bf16|amx)\\.c$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${ATTN_ISA_AVX512BF16}")
    endif()
  endforeach()
endfunction()

# attn_isa_sources(<list var>): drop the ISA files off x86, set their flags on it.
function(attn_isa_sources var)
  set(srcs ${${var}})
  if(NOT ATTN_IS_X86)
    list(FILTER srcs EXCLUDE REGEX "${ATTN_ISA_SUFFIX_REGEX}")
    set(${var} ${srcs} PARENT_SCOPE)
  endif()
  attn_isa_flags("${srcs}")
endfunction()
