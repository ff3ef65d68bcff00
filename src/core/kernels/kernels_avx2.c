/* SPDX-License-Identifier: MIT */
/* The AVX2 + FMA kernel family (kernels.h): compiled with -march=x86-64-v3
 * (scripts/cmake/kernel_flags.cmake), run only on CPUs that have all of it
 * (isa.c).  16 ymm registers: the attention tiles use 6 x 16 register
 * tiles (12 accumulators, 2 registers for a row of b, 1 broadcast), so
 * nothing spills; the softmax loops vectorise 8 floats wide. */
#include "kernels.h"

#if defined(__x86_64__)
#if !defined(__AVX2__) || !defined(__FMA__)
#error "kernels_avx2.c needs -march=x86-64-v3 (scripts/cmake/kernel_flags.cmake)"
#endif
#include <immintrin.h>

#define ATTN_VM_AVX2
#include "family_begin.h"

/* ------------------------------------------------------------------------ */
/* Attention micro-kernels                                                   */

/* c [R, 16] (row stride ldc) = (acc ? c : 0) + a [R, K] @ b [K, 16] (row
   stride ldb), R <= 6, a's element (r, p) at a[r * ars + p * acs] (only
   broadcast, so P^T and dS^T are read in place).  Called with a constant
   R: the loops over r unroll and the accumulators stay in registers. */
INLINE void mk_r16(const int R, int64_t K, const float *restrict a, int64_t ars, int64_t acs, const float *restrict b,
                   int64_t ldb, float *restrict c, int64_t ldc, bool acc) {
  __m256 c0[6], c1[6];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) c0[r] = _mm256_setzero_ps(), c1[r] = _mm256_setzero_ps();
  for (int64_t p = 0; p < K; p++) {
    const __m256 b0 = _mm256_loadu_ps(b + p * ldb), b1 = _mm256_loadu_ps(b + p * ldb + 8);
    const float *ap = a + p * acs;
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      const __m256 x = _mm256_broadcast_ss(ap + r * ars);
      c0[r] = _mm256_fmadd_ps(x, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(x, b1, c1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    float *cr = c + r * ldc;
    if (acc) {
      c0[r] = _mm256_add_ps(c0[r], _mm256_loadu_ps(cr));
      c1[r] = _mm256_add_ps(c1[r], _mm256_loadu_ps(cr + 8));
    }
    _mm256_storeu_ps(cr, c0[r]);
    _mm256_storeu_ps(cr + 8, c1[r]);
  }
}

/* c [M, N] (+)= a [M, K] @ b [K, N] (sdpa_tiles.h), M % 4 == 0, N % 16
   == 0: 6-row tiles, and one of 4 or 2 rows for the rest. */
INLINE void tile_gemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t ars, int64_t acs, const float *b,
                      int64_t ldb, float *c, int64_t ldc, bool acc) {
  int64_t i = 0;
  for (; i + 6 <= M; i += 6)
    for (int64_t j = 0; j < N; j += 16) mk_r16(6, K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
  if (M - i == 4)
    for (int64_t j = 0; j < N; j += 16) mk_r16(4, K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
  else if (M - i == 2)
    for (int64_t j = 0; j < N; j += 16) mk_r16(2, K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
}

#define SDPA_VQ 8 /* queries per vector in the softmax loops */
#include "sdpa_tiles.h"

#define GEMM_MR 6
#define GEMM_NR 16
#define gemm_tile(K, a, ars, acs, b, ldb, c, ldc) mk_r16(6, K, a, ars, acs, b, ldb, c, ldc, false)
/* R < 6 rows: each case a constant R, so the loops over rows unroll */
INLINE void gemm_tile_rows(int R, int64_t K, const float *a, int64_t ars, int64_t acs, const float *b, int64_t ldb,
                           float *c, int64_t ldc) {
  switch (R) {
  case 1: mk_r16(1, K, a, ars, acs, b, ldb, c, ldc, false); break;
  case 2: mk_r16(2, K, a, ars, acs, b, ldb, c, ldc, false); break;
  case 3: mk_r16(3, K, a, ars, acs, b, ldb, c, ldc, false); break;
  case 4: mk_r16(4, K, a, ars, acs, b, ldb, c, ldc, false); break;
  default: mk_r16(5, K, a, ars, acs, b, ldb, c, ldc, false); break;
  }
}
#define gemm_tile_rows gemm_tile_rows
#include "gemm_kernels.h"

const attn__kernels attn__kernels_avx2 = ATTN__KERNEL_TABLE("avx2");

#else
typedef int attn__no_avx2_here; /* not x86-64: an empty unit */
#endif
