# Kernel families (src/core/kernels.h): each family's unit gets its
# instruction set's flags; src/core/isa.c runs a family only on a CPU that
# has them.  The families are the psABI levels: avx512 = x86-64-v4, avx2 =
# x86-64-v3 (a later -march replaces ATTN_NATIVE's -march=native there).
# On other architectures the x86 units compile to nothing.
# Included by CMakeLists.txt and spec/fuzz/CMakeLists.txt; root: the
# checkout (the source properties are set for this directory's targets).
function(attn_kernel_flags root)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    set_source_files_properties(${root}/src/core/kernels_avx512.c PROPERTIES
      COMPILE_OPTIONS "-march=x86-64-v4")
    set_source_files_properties(${root}/src/core/kernels_avx2.c PROPERTIES
      COMPILE_OPTIONS "-march=x86-64-v3")
  endif()
endfunction()
