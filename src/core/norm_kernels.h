/* SPDX-License-Identifier: MIT */
/* LayerNorm rows (norm.c describes the op), written once and compiled by
 * each kernel family's unit (kernels_*.c) so that the row loops vectorise
 * at that family's width.  Defines layer_norm_rows and layer_norm_bwd_rows.
 *
 * Numerics (the same as F.layer_norm composed of ops, and as torch's within
 * float rounding): mean = (float)(double row sum) / n; var = mean of the
 * float squares of x - mean, summed in double; rstd = 1 / sqrtf(var + eps);
 * y = (x - mean) * rstd, then * w, then + b.  Overflow gives NaN as torch's
 * float moments do: a row whose sum overflows float has mean inf, and a
 * squared deviation that overflows makes var inf, and var + (var - var)
 * NaN. */
#include "internal.h"

#include <math.h>

#define NORM_LANES 8
#define NORM_BLOCK 256 /* floats summed in float lanes before a double add */

/* sum of x [n] in double, in lanes the compiler vectorises */
INLINE double norm_sum(const float *x, int64_t n) {
  double s[NORM_LANES] = {0};
  int64_t i = 0;
  for (; i + NORM_LANES <= n; i += NORM_LANES)
    for (int k = 0; k < NORM_LANES; k++) s[k] += x[i + k];
  double t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; i++) t += x[i];
  return t;
}

/* sum of (x - m)^2 [n] (float squares) in double */
INLINE double norm_sumsq(const float *x, int64_t n, float m) {
  double s[NORM_LANES] = {0};
  int64_t i = 0;
  for (; i + NORM_LANES <= n; i += NORM_LANES)
    for (int k = 0; k < NORM_LANES; k++) {
      const float d = x[i + k] - m;
      s[k] += d * d;
    }
  double t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; i++) {
    const float d = x[i] - m;
    t += d * d;
  }
  return t;
}

/* x [rows, n] (contiguous) -> y [rows, n], mean [rows], rstd [rows];
   w, b [n] or NULL. */
static void layer_norm_rows(const float *x, int64_t rows, int64_t n, const float *w, const float *b, float eps,
                            float *restrict y, float *mean, float *rstd) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    const float m = (float)norm_sum(xr, n) / (float)n;
    float var = (float)(norm_sumsq(xr, n, m) / (double)n);
    var = var + (var - var);
    const float rs = 1.0f / sqrtf(var + eps);
    mean[r] = m;
    rstd[r] = rs;
    if (w && b)
      for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
    else if (w)
      for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * rs * w[i];
    else if (b)
      for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * rs + b[i];
    else
      for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * rs;
  }
}

/* Backward, per row with xh = (x - mean) * rstd and gy = g * w (g
   without w), sums in double:
     dx = rstd * (gy - mean(gy) - xh * mean(gy * xh))
     dw += g * xh, db += g   (summed over rows, in float as torch does)
   (row sums: float lanes over blocks of NORM_BLOCK, the blocks in double)
   This is torch's formula rearranged: its CPU kernel computes
   rstd * gy + b * x + c with b = (mean(gy) * mean - mean(gy * x)) * rstd^3,
   which cancels where the mean is large against the spread (float64
   references side with the form here) and overflows rstd^3 for a
   subnormal variance with eps = 0 (inf where this stays finite).
   g, x [rows, n] contiguous; dx [rows, n] or NULL; dw, db [n] or NULL,
   accumulated into (the caller zeroes them); scratch [n]. */
static void layer_norm_bwd_rows(const float *g, const float *x, int64_t rows, int64_t n, const float *w,
                                const float *mean, const float *rstd, float *dx, float *dw, float *db,
                                float *restrict scratch) {
  for (int64_t r = 0; r < rows; r++) {
    const float *gr = g + r * n, *xr = x + r * n;
    const float m = mean[r], rs = rstd[r];
    /* passes over one row (in L1 for the usual widths), each a loop
       without branches so that it vectorises */
    if (dw && db)
      for (int64_t i = 0; i < n; i++) {
        dw[i] += gr[i] * ((xr[i] - m) * rs);
        db[i] += gr[i];
      }
    else if (dw)
      for (int64_t i = 0; i < n; i++) dw[i] += gr[i] * ((xr[i] - m) * rs);
    else if (db)
      for (int64_t i = 0; i < n; i++) db[i] += gr[i];
    if (!dx) continue;
    const float *gy = gr;
    if (w) {
      for (int64_t i = 0; i < n; i++) scratch[i] = gr[i] * w[i];
      gy = scratch;
    }
    /* the two row sums: float lanes over blocks of NORM_BLOCK, folded
       into double */
    double a1 = 0, a2 = 0;
    for (int64_t j = 0; j < n; j += NORM_BLOCK) {
      const int64_t e = n - j < NORM_BLOCK ? n : j + NORM_BLOCK;
      float s1[NORM_LANES] = {0}, s2[NORM_LANES] = {0};
      int64_t i = j;
      for (; i + NORM_LANES <= e; i += NORM_LANES)
        for (int k = 0; k < NORM_LANES; k++) {
          s1[k] += gy[i + k];
          s2[k] += gy[i + k] * ((xr[i + k] - m) * rs);
        }
      for (; i < e; i++) {
        a1 += gy[i];
        a2 += gy[i] * ((xr[i] - m) * rs);
      }
      a1 += ((s1[0] + s1[4]) + (s1[1] + s1[5])) + ((s1[2] + s1[6]) + (s1[3] + s1[7]));
      a2 += ((s2[0] + s2[4]) + (s2[1] + s2[5])) + ((s2[2] + s2[6]) + (s2[3] + s2[7]));
    }
    const float mg = (float)(a1 / (double)n), mgx = (float)(a2 / (double)n);
    float *dr = dx + r * n;
    for (int64_t i = 0; i < n; i++) dr[i] = rs * (gy[i] - mg - ((xr[i] - m) * rs) * mgx);
  }
}
