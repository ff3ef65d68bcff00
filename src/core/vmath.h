/* Array math for the kernel families: y [n] = f(x [n]), unit stride, for
 * the transcendental functions the activations and their derivatives need
 * (exp, log, tanh, erf).  Included by each family unit (kernels_*.c) after
 * it defines ATTN_VM_AVX512, ATTN_VM_AVX2 or nothing (portable).
 *
 * The x86 families call glibc's vector math library (libmvec, part of
 * libc6: the _ZGV* entries of the x86-64 vector ABI, at most 4 ulp from
 * the correctly rounded result, as torch's Sleef u10 functions are 1 ulp):
 * one call per 8 or 16 floats instead of one libm call per float, which is
 * what made gelu's forward and backward 20x slower than torch's.  The
 * portable family loops over libm: it is also the reference the family
 * specs compare with.  ATTN_NO_LIBMVEC (set by CMake where the C library
 * lacks the entries, e.g. musl) falls back to libm everywhere.
 *
 * In place (y == x) is allowed. */
#ifndef ATTN_VMATH_H
#define ATTN_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* rows are processed in blocks of this many floats (a few KB on the stack) */
#define VM_BLOCK 512

#if (defined(ATTN_VM_AVX512) || defined(ATTN_VM_AVX2)) && !defined(ATTN_NO_LIBMVEC)
#include <immintrin.h>
#if defined(ATTN_VM_AVX512)
typedef __m512 vm_v;
#define VM_W 16
#define VM_LOAD _mm512_loadu_ps
#define VM_STORE _mm512_storeu_ps
#define VM_NAME(f) _ZGVeN16v_##f
#else
typedef __m256 vm_v;
#define VM_W 8
#define VM_LOAD _mm256_loadu_ps
#define VM_STORE _mm256_storeu_ps
#define VM_NAME(f) _ZGVdN8v_##f
#endif
vm_v VM_NAME(expf)(vm_v);
vm_v VM_NAME(logf)(vm_v);
vm_v VM_NAME(tanhf)(vm_v);
vm_v VM_NAME(erff)(vm_v);

/* whole vectors, then the tail through a padded vector (the padding lanes
   compute f(0), which every function here takes without a trap) */
#define VM_ARRAY(NAME, F)                                                 \
  static inline void NAME(int64_t n, const float *x, float *y) {         \
    int64_t i = 0;                                                        \
    for (; i + VM_W <= n; i += VM_W) VM_STORE(y + i, VM_NAME(F)(VM_LOAD(x + i))); \
    if (i < n) {                                                          \
      float pad[VM_W] = {0};                                              \
      memcpy(pad, x + i, (size_t)(n - i) * sizeof(float));                \
      VM_STORE(pad, VM_NAME(F)(VM_LOAD(pad)));                            \
      memcpy(y + i, pad, (size_t)(n - i) * sizeof(float));               \
    }                                                                     \
  }
#else
#define VM_ARRAY(NAME, F)                                                 \
  static inline void NAME(int64_t n, const float *x, float *y) {         \
    for (int64_t i = 0; i < n; i++) y[i] = F(x[i]);                       \
  }
#endif

VM_ARRAY(vm_exp, expf)
VM_ARRAY(vm_log, logf)
VM_ARRAY(vm_tanh, tanhf)
VM_ARRAY(vm_erf, erff)

#endif
