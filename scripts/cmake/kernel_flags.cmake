# Kernel families (src/core/kernels.h): each family's unit gets its
# instruction set's flags; src/core/isa.c runs a family only on a CPU that
# has them (-mno-avx512f keeps the AVX2 unit AVX2 under ATTN_NATIVE too).
# On other architectures the x86 units compile to nothing.
# Included by CMakeLists.txt and spec/fuzz/CMakeLists.txt; root: the
# checkout (the source properties are set for this directory's targets).
function(attn_kernel_flags root)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    set_source_files_properties(${root}/src/core/kernels_avx512.c PROPERTIES
      COMPILE_OPTIONS "-mavx512f;-mavx512dq;-mavx512bw;-mavx512vl;-mavx2;-mfma")
    set_source_files_properties(${root}/src/core/kernels_avx2.c PROPERTIES
      COMPILE_OPTIONS "-mavx2;-mfma;-mno-avx512f")
  endif()
endfunction()
