/* SPDX-License-Identifier: MIT */
/* The portable kernel family (kernels.h): plain C with GCC/Clang vector
 * types of 4 floats, which every target has (SSE2 on x86-64, NEON on
 * aarch64), compiled with the build's baseline flags.  What CPUs without
 * AVX2 run, and what other architectures get until they have a family of
 * their own.  The attention tiles are 4 x 8 (8 accumulators: fits the 16
 * registers of SSE2 with room for b and the broadcast). */
#include "kernels.h"

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

/* Softmax, reductions and elementwise loops: the same text for every
   family, vectorised at this unit's width (the same results, except the
   few-ulp differences of vmath.h's transcendental functions). */
#include "softmax_kernels.h"
#include "reduce_kernels.h"
#include "elementwise_kernels.h"
#include "norm_kernels.h"

#if defined(__GNUC__) && !defined(__clang__)
/* From here on (attention) FMA contraction too: ISO C mode turns it off. */
#pragma GCC optimize("fp-contract=fast")
#endif

#define VW 4 /* floats per vector */
typedef float vf __attribute__((vector_size(VW * sizeof(float))));
#define VLD(v, p) memcpy(&(v), (p), sizeof(vf))
#define VST(p, v) memcpy((p), &(v), sizeof(vf))

/* ------------------------------------------------------------------------ */
/* Attention micro-kernels                                                   */

/* c [4, 8] (row stride ldc) = (acc ? c : 0) + a [4, K] @ b [K, 8] (row
   stride ldb), a's element (r, p) at a[r * ars + p * acs]. */
INLINE void mk4x8(int64_t K, const float *restrict a, int64_t ars, int64_t acs, const float *restrict b, int64_t ldb,
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

/* c [M, N] (+)= a [M, K] @ b [K, N] (sdpa_tiles.h), M % 4 == 0, N % 8 == 0 */
INLINE void tile_gemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t ars, int64_t acs, const float *b,
                      int64_t ldb, float *c, int64_t ldc, bool acc) {
  for (int64_t i = 0; i < M; i += 4)
    for (int64_t j = 0; j < N; j += 2 * VW) mk4x8(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
}

#define SDPA_VQ 4 /* queries per vector in the softmax loops */
#include "sdpa_tiles.h"

#define GEMM_MR 4
#define GEMM_NR (2 * VW)
#define gemm_tile(K, a, ars, acs, b, ldb, c, ldc) mk4x8(K, a, ars, acs, b, ldb, c, ldc, false)
#include "gemm_kernels.h"

const attn__kernels attn__kernels_portable = ATTN__KERNEL_TABLE("portable");
