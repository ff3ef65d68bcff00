/* SPDX-License-Identifier: MIT */
/* The portable kernel family (kernels.h): plain C with GCC/Clang vector
 * types of 4 floats, which every target has (SSE2 on x86-64, NEON on
 * aarch64), compiled with the build's baseline flags.  What CPUs without
 * AVX2 run, and what other architectures get until they have a family of
 * their own.  The attention tiles are 4 x 8 (8 accumulators: fits the 16
 * registers of SSE2 with room for b and the broadcast). */
#include "kernels.h"

/* VW = 4: vf, VLD/VST and mk4x2v (the 4 x 8 tile) from family_begin.h */
#define KF_VW 4
#include "family_begin.h"

/* c [M, N] (+)= a [M, K] @ b [K, N] (sdpa_tiles.h), M % 4 == 0, N % 8 == 0 */
INLINE void tile_gemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t ars, int64_t acs, const float *b,
                      int64_t ldb, float *c, int64_t ldc, bool acc) {
  for (int64_t i = 0; i < M; i += 4)
    for (int64_t j = 0; j < N; j += 2 * VW) mk4x2v(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
}

#define SDPA_VQ 4 /* queries per vector in the softmax loops */
#include "sdpa_tiles.h"

#define GEMM_MR 4
#define GEMM_NR (2 * VW)
#define gemm_tile(K, a, ars, acs, b, ldb, c, ldc) mk4x2v(K, a, ars, acs, b, ldb, c, ldc, false)
#include "gemm_kernels.h"

const attn__kernels attn__kernels_portable = ATTN__KERNEL_TABLE("portable");
