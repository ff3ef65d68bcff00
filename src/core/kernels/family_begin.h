/* SPDX-License-Identifier: MIT */
/* The body every kernel family (kernels_{portable,avx2,avx512}.c) shares,
 * in Torch7's generic-file manner: each family unit includes this once,
 * after kernels.h and its own ATTN_VM_* choice, and so compiles the same
 * text with its own -march flags (scripts/cmake/kernel_flags.cmake).
 *
 * It gives the unit INLINE, the softmax, reduction, elementwise and norm
 * loops (vectorised at the unit's width: the same results, except the
 * few-ulp differences of vmath.h's transcendental functions), and turns
 * on FMA contraction for what follows (the attention tiles).  A family
 * that defines KF_VW (floats per vector) before including it also gets
 * the vector type vf, VW, VLD/VST and mk4x2v, the 4 x (2 * VW) tile. */
#ifndef ATTN_KERNELS_FAMILY_BEGIN_H
#define ATTN_KERNELS_FAMILY_BEGIN_H

#if defined(__GNUC__) && !defined(__clang__)
/* Selects on float compares only vectorise when GCC may assume FP
   operations do not trap; attn never reads the FP exception flags. */
#pragma GCC optimize("no-trapping-math")
#endif

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

#include "softmax_kernels.h"
#include "reduce_kernels.h"
#include "elementwise_kernels.h"
#include "norm_kernels.h"

#if defined(__GNUC__) && !defined(__clang__)
/* From here on (attention) FMA contraction too: ISO C mode turns it off. */
#pragma GCC optimize("fp-contract=fast")
#endif

#if defined(KF_VW)
#define VW KF_VW /* floats per vector */
typedef float vf __attribute__((vector_size(VW * sizeof(float))));
/* unaligned vector loads and stores (tile rows need no alignment) */
#define VLD(v, p) memcpy(&(v), (p), sizeof(vf))
#define VST(p, v) memcpy((p), &(v), sizeof(vf))

/* c [4, 2 * VW] (row stride ldc) = (acc ? c : 0) + a [4, K] @ b [K, 2 * VW]
   (row stride ldb), where a's element (r, p) is a[r * ars + p * acs]: any
   layout of a works (it is only broadcast), so P^T and dS^T need no
   transposed copy.  Eight vector accumulators; each b row is loaded once
   for four rows of a. */
INLINE void mk4x2v(int64_t K, const float *restrict a, int64_t ars, int64_t acs, const float *restrict b, int64_t ldb,
                   float *restrict c, int64_t ldc, bool acc) {
  vf c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  const float *a0 = a, *a1 = a + ars, *a2 = a + 2 * ars, *a3 = a + 3 * ars;
  for (int64_t p = 0; p < K; p++) {
    vf b0, b1;
    VLD(b0, b + p * ldb);
    VLD(b1, b + p * ldb + VW);
    float x0 = a0[p * acs], x1 = a1[p * acs], x2 = a2[p * acs], x3 = a3[p * acs];
    c00 += x0 * b0;
    c01 += x0 * b1;
    c10 += x1 * b0;
    c11 += x1 * b1;
    c20 += x2 * b0;
    c21 += x2 * b1;
    c30 += x3 * b0;
    c31 += x3 * b1;
  }
  if (acc) {
    vf t;
    VLD(t, c), c00 += t;
    VLD(t, c + VW), c01 += t;
    VLD(t, c + ldc), c10 += t;
    VLD(t, c + ldc + VW), c11 += t;
    VLD(t, c + 2 * ldc), c20 += t;
    VLD(t, c + 2 * ldc + VW), c21 += t;
    VLD(t, c + 3 * ldc), c30 += t;
    VLD(t, c + 3 * ldc + VW), c31 += t;
  }
  VST(c, c00);
  VST(c + VW, c01);
  VST(c + ldc, c10);
  VST(c + ldc + VW, c11);
  VST(c + 2 * ldc, c20);
  VST(c + 2 * ldc + VW, c21);
  VST(c + 3 * ldc, c30);
  VST(c + 3 * ldc + VW, c31);
}
#endif

#endif
