/* SPDX-License-Identifier: MIT */
/* Small and medium matrix products on the attention micro-kernels, written
 * once and compiled by each kernel family's translation unit
 * (kernels_avx512.c, kernels_avx2.c, kernels_portable.c).  In the products
 * of small models (per-head projections of 16 to 64 columns, the attention
 * of short sequences, their gradients) BLAS's fixed costs (packing both
 * operands, scaling C by beta, the call) weigh as much as the arithmetic.
 * Here A is read in place through its strides (it is only broadcast, so a
 * transposed A costs nothing) and only B is copied, into a panel of
 * GEMM_NR-column blocks, when its rows are not already such a panel.
 * The includer defines GEMM_MR, GEMM_NR and
 *   gemm_tile(K, a, ars, acs, b, ldb, c, ldc):
 *     c [GEMM_MR, GEMM_NR] (row stride ldc) = a [GEMM_MR, K] @ b [K,
 *     GEMM_NR] (row stride ldb), a's element (r, p) at a[r * ars + p * acs];
 * and may define gemm_tile_rows(R, K, ...), the same for R < GEMM_MR rows
 * (else those rows go one at a time).
 * Every element of c is summed over p in order, as BLAS does within a
 * block of k. */

#ifdef gemm_tile_rows
#define GEMM_TILE(R, ...) ((R) == GEMM_MR ? gemm_tile(__VA_ARGS__) : gemm_tile_rows(R, __VA_ARGS__))
#else
#define GEMM_TILE(R, ...) gemm_tile(__VA_ARGS__) /* R == GEMM_MR only */
#endif

/* rows [0, R) of c (row stride n) from a's rows ai, R <= GEMM_MR (R <
   GEMM_MR only with gemm_tile_rows): whole column blocks straight into c,
   the last partial one through the edge tile tmp [GEMM_MR, GEMM_NR] */
INLINE void gemm_rows(int R, int64_t n, int64_t np, int64_t k, const float *ai, int64_t ars, int64_t acs,
                      const float *bp, int64_t ldb, float *ci, float *tmp) {
  for (int64_t j = 0; j < np; j += GEMM_NR) {
    const bool edge = j + GEMM_NR > n;
    GEMM_TILE(R, k, ai, ars, acs, bp + j, ldb, edge ? tmp : ci + j, edge ? GEMM_NR : n);
    if (edge)
      for (int r = 0; r < R; r++) memcpy(ci + r * n + j, tmp + r * GEMM_NR, (size_t)(n - j) * sizeof(float));
  }
}

/* c [m, n] (contiguous) = a [m, k] (strides ars, acs) @ b [k, n] (strides
   brs, bcs), k >= 1; scratch holds GEMM_MR * GEMM_NR + k * round_up(n,
   GEMM_NR) floats. */
static void gemm_small(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b,
                       int64_t brs, int64_t bcs, float *restrict c, float *restrict scratch) {
  const int64_t np = (n + GEMM_NR - 1) / GEMM_NR * GEMM_NR;
  float *tmp = scratch; /* an edge tile [GEMM_MR, GEMM_NR] */
  const float *bp = b;
  int64_t ldb = brs;
  if (!(bcs == 1 && n == np)) {
    float *pk = scratch + GEMM_MR * GEMM_NR;
    if (brs == 1 && bcs != 1) {
      /* b transposed (a weight W [n, k] read as W^T): eight of its rows at
         a time, so that the lines read stay few even when W's row stride
         is a multiple of the cache's set stride */
      for (int64_t j0 = 0; j0 < n; j0 += 8) {
        const int64_t jn = n - j0 < 8 ? n - j0 : 8;
        for (int64_t p = 0; p < k; p++)
          for (int64_t j = 0; j < jn; j++) pk[p * np + j0 + j] = b[p + (j0 + j) * bcs];
      }
      for (int64_t p = 0; p < k; p++)
        for (int64_t j = n; j < np; j++) pk[p * np + j] = 0.0f;
    } else {
      for (int64_t p = 0; p < k; p++) {
        float *d = pk + p * np;
        const float *s = b + p * brs;
        if (bcs == 1)
          memcpy(d, s, (size_t)n * sizeof(float));
        else
          for (int64_t j = 0; j < n; j++) d[j] = s[j * bcs];
        for (int64_t j = n; j < np; j++) d[j] = 0.0f;
      }
    }
    bp = pk, ldb = np;
  }
  int64_t i = 0;
  for (; i + GEMM_MR <= m; i += GEMM_MR) gemm_rows(GEMM_MR, n, np, k, a + i * ars, ars, acs, bp, ldb, c + i * n, tmp);
#ifdef gemm_tile_rows
  if (i < m) { /* the last rows (fewer than GEMM_MR) as one shorter tile */
    gemm_rows((int)(m - i), n, np, k, a + i * ars, ars, acs, bp, ldb, c + i * n, tmp);
    i = m;
  }
#endif
  /* the last rows (fewer than GEMM_MR) one at a time, vectorised along
     the row */
  for (; i < m; i++) {
    const float *ai = a + i * ars;
    for (int64_t j = 0; j < np; j += GEMM_NR) {
      float acc[GEMM_NR] = {0};
      for (int64_t p = 0; p < k; p++) {
        const float x = ai[p * acs], *bj = bp + p * ldb + j;
        for (int jj = 0; jj < GEMM_NR; jj++) acc[jj] += x * bj[jj];
      }
      memcpy(c + i * n + j, acc, (size_t)(n - j < GEMM_NR ? n - j : GEMM_NR) * sizeof(float));
    }
  }
}
