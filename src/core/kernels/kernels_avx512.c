/* SPDX-License-Identifier: MIT */
/* The AVX-512 kernel family (kernels.h): compiled with -march=x86-64-v4
 * (scripts/cmake/kernel_flags.cmake), run only on CPUs that have all of it
 * (isa.c).  32 zmm registers: the attention tiles use 16-float vectors
 * and 8 x 32 register tiles (16 accumulators). */
#include "kernels.h"

#if defined(__x86_64__)
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__) || !defined(__AVX512VL__) ||             \
    !defined(__FMA__)
#error "kernels_avx512.c needs -march=x86-64-v4 (scripts/cmake/kernel_flags.cmake)"
#endif
/* VW = 16: vf, VLD/VST and mk4x2v (the 4 x 32 tile) from family_begin.h */
#define ATTN_VM_AVX512
#define KF_VW 16
#include "family_begin.h"

/* ------------------------------------------------------------------------ */
/* Attention micro-kernels                                                   */

/* c [8, 32] (+)= a [8, K] @ b [K, 32]: sixteen accumulators, for CPUs with
   32 vector registers (AVX-512); each b row feeds eight rows of a. */
INLINE void mk8x32(int64_t K, const float *restrict a, int64_t ars, int64_t acs, const float *restrict b, int64_t ldb,
                   float *restrict c, int64_t ldc, bool acc) {
  vf c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  vf c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0}, c60 = {0}, c61 = {0}, c70 = {0}, c71 = {0};
  const float *a0 = a, *a1 = a + ars, *a2 = a + 2 * ars, *a3 = a + 3 * ars;
  const float *a4 = a + 4 * ars, *a5 = a + 5 * ars, *a6 = a + 6 * ars, *a7 = a + 7 * ars;
  for (int64_t p = 0; p < K; p++) {
    vf b0, b1;
    VLD(b0, b + p * ldb);
    VLD(b1, b + p * ldb + VW);
    float x;
    x = a0[p * acs], c00 += x * b0, c01 += x * b1;
    x = a1[p * acs], c10 += x * b0, c11 += x * b1;
    x = a2[p * acs], c20 += x * b0, c21 += x * b1;
    x = a3[p * acs], c30 += x * b0, c31 += x * b1;
    x = a4[p * acs], c40 += x * b0, c41 += x * b1;
    x = a5[p * acs], c50 += x * b0, c51 += x * b1;
    x = a6[p * acs], c60 += x * b0, c61 += x * b1;
    x = a7[p * acs], c70 += x * b0, c71 += x * b1;
  }
#define MK_OUT(r, h, x)                                                                                                \
  do {                                                                                                                 \
    float *cp_ = c + (r)*ldc + (h)*VW;                                                                                 \
    if (acc) {                                                                                                         \
      vf t_;                                                                                                           \
      VLD(t_, cp_);                                                                                                    \
      x += t_;                                                                                                         \
    }                                                                                                                  \
    VST(cp_, x);                                                                                                       \
  } while (0)
  MK_OUT(0, 0, c00);
  MK_OUT(0, 1, c01);
  MK_OUT(1, 0, c10);
  MK_OUT(1, 1, c11);
  MK_OUT(2, 0, c20);
  MK_OUT(2, 1, c21);
  MK_OUT(3, 0, c30);
  MK_OUT(3, 1, c31);
  MK_OUT(4, 0, c40);
  MK_OUT(4, 1, c41);
  MK_OUT(5, 0, c50);
  MK_OUT(5, 1, c51);
  MK_OUT(6, 0, c60);
  MK_OUT(6, 1, c61);
  MK_OUT(7, 0, c70);
  MK_OUT(7, 1, c71);
#undef MK_OUT
}

/* c [4, 16] (+)= a [4, K] @ b [K, 16]: the column remainder. */
INLINE void mk4x16(int64_t K, const float *restrict a, int64_t ars, int64_t acs, const float *restrict b, int64_t ldb,
                   float *restrict c, int64_t ldc, bool acc) {
  vf c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
  const float *a0 = a, *a1 = a + ars, *a2 = a + 2 * ars, *a3 = a + 3 * ars;
  for (int64_t p = 0; p < K; p++) {
    vf b0;
    VLD(b0, b + p * ldb);
    c0 += a0[p * acs] * b0;
    c1 += a1[p * acs] * b0;
    c2 += a2[p * acs] * b0;
    c3 += a3[p * acs] * b0;
  }
  if (acc) {
    vf t;
    VLD(t, c), c0 += t;
    VLD(t, c + ldc), c1 += t;
    VLD(t, c + 2 * ldc), c2 += t;
    VLD(t, c + 3 * ldc), c3 += t;
  }
  VST(c, c0);
  VST(c + ldc, c1);
  VST(c + 2 * ldc, c2);
  VST(c + 3 * ldc, c3);
}

/* c [M, N] (+)= a [M, K] @ b [K, N] (sdpa_tiles.h): 8-row tiles, then
   4-row ones for the rest (M % 4 == 0, N % 16 == 0). */
INLINE void tile_gemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t ars, int64_t acs, const float *b,
                      int64_t ldb, float *c, int64_t ldc, bool acc) {
  int64_t i = 0;
  for (; i + 8 <= M; i += 8) {
    int64_t j = 0;
    for (; j + 2 * VW <= N; j += 2 * VW) mk8x32(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
    if (j < N) {
      mk4x16(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
      mk4x16(K, a + (i + 4) * ars, ars, acs, b + j, ldb, c + (i + 4) * ldc + j, ldc, acc);
    }
  }
  for (; i < M; i += 4) {
    int64_t j = 0;
    for (; j + 2 * VW <= N; j += 2 * VW) mk4x2v(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
    if (j < N) mk4x16(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
  }
}

#define SDPA_VQ 16 /* queries per vector in the softmax loops */
#include "sdpa_tiles.h"

#define GEMM_MR 8
#define GEMM_NR (2 * VW)
#define gemm_tile(K, a, ars, acs, b, ldb, c, ldc) mk8x32(K, a, ars, acs, b, ldb, c, ldc, false)
#include "gemm_kernels.h"

const attn__kernels attn__kernels_avx512 = ATTN__KERNEL_TABLE("avx512");

#else
typedef int attn__no_avx512_here; /* not x86-64: an empty unit */
#endif
