# SPDX-License-Identifier: MIT
# Kernel families (src/core/kernels/kernels.h): each family's unit gets its
# instruction set's flags; src/core/kernels/isa.c runs a family only on a CPU that
# has them.  The families are the psABI levels: avx512 = x86-64-v4, avx2 =
# x86-64-v3 (a later -march replaces ATTN_NATIVE's -march=native there).
# On other architectures the x86 units compile to nothing.
# Included by CMakeLists.txt and spec/fuzz/CMakeLists.txt; root: the
# checkout (the source properties are set for this directory's targets).
function(attn_kernel_flags root)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    set_source_files_properties(${root}/src/core/kernels/kernels_avx512.c PROPERTIES
      COMPILE_OPTIONS "-march=x86-64-v4")
    set_source_files_properties(${root}/src/core/kernels/kernels_avx2.c PROPERTIES
      COMPILE_OPTIONS "-march=x86-64-v3")
  endif()
endfunction()

# The x86 families call glibc's vector math library (src/core/kernels/vmath.h):
# appends mvec to the list ${libs} where the C library has it, else
# defines ATTN_NO_LIBMVEC for the objects of ${target} (the families then
# use libm).
function(attn_vector_math target libs)
  if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    return()
  endif()
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_LIBRARIES mvec m)
  set(CMAKE_REQUIRED_FLAGS "-march=x86-64-v3")
  check_c_source_compiles([[
#include <immintrin.h>
__m256 _ZGVdN8v_erff(__m256);
int main(void) { float r[8]; _mm256_storeu_ps(r, _ZGVdN8v_erff(_mm256_set1_ps(0.5f))); return r[0] > 1.0f; }
]] ATTN_HAVE_LIBMVEC)
  if(ATTN_HAVE_LIBMVEC)
    set(${libs} ${${libs}} mvec PARENT_SCOPE)
  else()
    target_compile_definitions(${target} PRIVATE ATTN_NO_LIBMVEC)
  endif()
endfunction()
