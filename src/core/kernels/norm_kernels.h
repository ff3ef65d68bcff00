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
#include "base/base.h"

#include <math.h>
#include <string.h>

#define NORM_BLOCK 256 /* floats summed in float lanes before a double add */

/* Row sums in 8-float vectors (GCC/Clang vector extensions: one ymm in the
   AVX families, two xmm in the portable one) over blocks of NORM_BLOCK,
   each block's vector folded into a double: vectorised whatever the
   compiler thinks of reassociating float sums, and as accurate as the
   double lanes they replace for rows of any length. */
typedef float norm_v8 __attribute__((vector_size(8 * sizeof(float))));

/* (macros, not functions: a function taking or returning an 8-float
   vector has an ABI of its own without AVX, which GCC warns about) */
#define NV_LOAD(v, p) memcpy(&(v), (p), sizeof(norm_v8))
#define NV_FOLD(v)                                                                                                     \
  ((((double)(v)[0] + (v)[4]) + ((double)(v)[1] + (v)[5])) + (((double)(v)[2] + (v)[6]) + ((double)(v)[3] + (v)[7])))

/* sum of x [n] (squares false), or of (x - m)^2 in float squares (true) */
INLINE double norm_sum(const float *x, int64_t n, float m, const bool squares) {
  double t = 0;
  int64_t i = 0;
  for (int64_t j = 0; j + 8 <= n; j = i) {
    const int64_t e = n - j < NORM_BLOCK ? n - (n - j) % 8 : j + NORM_BLOCK;
    norm_v8 acc = {0};
    for (i = j; i < e; i += 8) {
      norm_v8 v;
      NV_LOAD(v, x + i);
      if (squares) {
        v -= m;
        acc += v * v;
      } else {
        acc += v;
      }
    }
    t += NV_FOLD(acc);
  }
  for (; i < n; i++) {
    const float d = x[i] - m;
    t += squares ? d * d : x[i];
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
    const float m = (float)norm_sum(xr, n, 0.0f, false) / (float)n;
    float var = (float)(norm_sum(xr, n, m, true) / (double)n);
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
   g, x [rows, n] contiguous; dx [rows, n] or NULL, written, or added to
   with dx_acc (dx + the value, one rounding after it: a leaf's .grad);
   dw, db [n] or NULL, accumulated into (the caller zeroes them);
   scratch [n].  Two passes per row: dw, db, gy and the row sums, then
   dx (the row stays in L1 between them). */
static void layer_norm_bwd_rows(const float *g, const float *x, int64_t rows, int64_t n, const float *w,
                                const float *mean, const float *rstd, float *dx, bool dx_acc, float *dw, float *db,
                                float *restrict scratch) {
  for (int64_t r = 0; r < rows; r++) {
    const float *gr = g + r * n, *xr = x + r * n;
    const float m = mean[r], rs = rstd[r];
    /* gy: g itself, or g * w kept in scratch for the dx pass */
    const float *gy = w ? scratch : gr;
    double a1 = 0, a2 = 0;
    int64_t i = 0;
    for (int64_t j = 0; j + 8 <= n; j = i) {
      const int64_t e = n - j < NORM_BLOCK ? n - (n - j) % 8 : j + NORM_BLOCK;
      norm_v8 s1 = {0}, s2 = {0};
      for (i = j; i < e; i += 8) {
        norm_v8 gv, xh, t;
        NV_LOAD(gv, gr + i);
        NV_LOAD(xh, xr + i);
        xh = (xh - m) * rs;
        if (dw) {
          NV_LOAD(t, dw + i);
          t += gv * xh;
          memcpy(dw + i, &t, sizeof t);
        }
        if (db) {
          NV_LOAD(t, db + i);
          t += gv;
          memcpy(db + i, &t, sizeof t);
        }
        if (w) {
          NV_LOAD(t, w + i);
          gv *= t;
          memcpy(scratch + i, &gv, sizeof gv);
        }
        s1 += gv;
        s2 += gv * xh;
      }
      a1 += NV_FOLD(s1);
      a2 += NV_FOLD(s2);
    }
    for (; i < n; i++) {
      const float gv = gr[i], xh = (xr[i] - m) * rs, gw = w ? gv * w[i] : gv;
      if (dw) dw[i] += gv * xh;
      if (db) db[i] += gv;
      if (w) scratch[i] = gw;
      a1 += gw;
      a2 += gw * xh;
    }
    if (!dx) continue;
    const float mg = (float)(a1 / (double)n), mgx = (float)(a2 / (double)n);
    float *dr = dx + r * n;
    if (dx_acc)
      for (int64_t k = 0; k < n; k++) dr[k] = dr[k] + rs * (gy[k] - mg - ((xr[k] - m) * rs) * mgx);
    else
      for (int64_t k = 0; k < n; k++) dr[k] = rs * (gy[k] - mg - ((xr[k] - m) * rs) * mgx);
  }
}
