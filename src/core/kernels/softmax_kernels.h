/* SPDX-License-Identifier: MIT */
/* softmax / log_softmax kernels (the numerics are described in softmax.c),
 * written once and compiled by each kernel family's unit (kernels_*.c)
 * with its flags, so the compiler vectorises them at that family's width.
 * The includer defines INLINE.  Defines the static softmax_rows and
 * softmax_cols (kernels.h's attn__softmax_rows_fn / _cols_fn). */
#include "base/base.h"

#include <math.h>

#include "vmath.h"

INLINE float sm_max_nan(float a, float v) { return (v > a || v != v) ? v : a; }

#if defined(__GNUC__)
/* GCC does not vectorise the NaN-sticky max on its own: 16-byte vector
   extensions (SSE2 / NEON, VEX-encoded in the AVX clones), four
   accumulators. */
typedef float vec4f __attribute__((vector_size(16)));
typedef int32_t vec4i __attribute__((vector_size(16)));

INLINE vec4f sm_max_nan4(vec4f a, vec4f v) {
  vec4i take = (v > a) | (v != v);
  return (vec4f)(((vec4i)v & take) | ((vec4i)a & ~take));
}
#endif

/* max of x[n] (unit stride), NaN if any element is NaN, -inf if n == 0 */
INLINE float sm_max_contig(const float *x, int64_t n) {
  float mx = -INFINITY;
  int64_t i = 0;
#if defined(__GNUC__)
  vec4f a0 = {mx, mx, mx, mx}, a1 = a0, a2 = a0, a3 = a0;
  for (; i + 16 <= n; i += 16) {
    vec4f v0, v1, v2, v3;
    memcpy(&v0, x + i, sizeof v0);
    memcpy(&v1, x + i + 4, sizeof v1);
    memcpy(&v2, x + i + 8, sizeof v2);
    memcpy(&v3, x + i + 12, sizeof v3);
    a0 = sm_max_nan4(a0, v0);
    a1 = sm_max_nan4(a1, v1);
    a2 = sm_max_nan4(a2, v2);
    a3 = sm_max_nan4(a3, v3);
  }
  a0 = sm_max_nan4(sm_max_nan4(a0, a1), sm_max_nan4(a2, a3));
  for (int k = 0; k < 4; k++) mx = sm_max_nan(mx, a0[k]);
#endif
  for (; i < n; i++) mx = sm_max_nan(mx, x[i]);
  return mx;
}

#define LANES 8

/* One unit-stride row: x [n] -> y [n].  Every loop is vectorisable: lanes
   for the max and the double sum, vm_exp_neg for the exponentials (written
   into y first; log_softmax then overwrites them). */
INLINE void softmax_row_contig(const float *restrict x, float *restrict y, int64_t n, bool log_space) {
  float mx = sm_max_contig(x, n);
  int64_t i;
  for (i = 0; i < n; i++) y[i] = vm_exp_neg(x[i] - mx);
  double ls[LANES] = {0};
  for (i = 0; i + LANES <= n; i += LANES)
    for (int k = 0; k < LANES; k++) ls[k] += y[i + k];
  double sum = ((ls[0] + ls[4]) + (ls[1] + ls[5])) + ((ls[2] + ls[6]) + (ls[3] + ls[7]));
  for (; i < n; i++) sum += y[i];

  if (log_space) {
    float lse = (float)log(sum);
    for (i = 0; i < n; i++) y[i] = (x[i] - mx) - lse;
  } else {
    float inv = (float)(1.0 / sum);
    for (i = 0; i < n; i++) y[i] *= inv;
  }
}

/* One strided row: x [n] at stride rs -> y [n] at stride ys. */
INLINE void softmax_row(const float *x, int64_t rs, float *y, int64_t ys, int64_t n, bool log_space) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) mx = sm_max_nan(mx, x[i * rs]);
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    float e = vm_exp_neg(x[i * rs] - mx);
    y[i * ys] = e;
    sum += e;
  }
  if (log_space) {
    float lse = (float)log(sum);
    for (int64_t i = 0; i < n; i++) y[i * ys] = (x[i * rs] - mx) - lse;
  } else {
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i * ys] *= inv;
  }
}

/* Backward of rows [rows, n] (unit stride, torch's CPU formulas) with y the
   forward's output: softmax r = (g - sum(g * y)) * y, log_softmax
   r = g - exp(y) * sum(g); sums in double lanes, exp(y) by vm_exp_neg
   (y <= 0: a log-probability).  acc: r = r + that (a leaf's .grad). */
static void softmax_bwd_rows(const float *g, const float *y, float *r, int64_t rows, int64_t n, bool log_space,
                             bool acc) {
  for (int64_t o = 0; o < rows; o++) {
    const float *gr = g + o * n, *yr = y + o * n;
    float *rr = r + o * n;
    double ls[LANES] = {0};
    int64_t i = 0;
    if (log_space)
      for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) ls[k] += gr[i + k];
    else
      for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) ls[k] += (double)gr[i + k] * yr[i + k];
    double a = ((ls[0] + ls[4]) + (ls[1] + ls[5])) + ((ls[2] + ls[6]) + (ls[3] + ls[7]));
    for (; i < n; i++) a += log_space ? (double)gr[i] : (double)gr[i] * yr[i];
    const float af = (float)a;
    if (log_space && acc)
      for (i = 0; i < n; i++) rr[i] = rr[i] + (gr[i] - vm_exp_neg(yr[i]) * af);
    else if (log_space)
      for (i = 0; i < n; i++) rr[i] = gr[i] - vm_exp_neg(yr[i]) * af;
    else if (acc)
      for (i = 0; i < n; i++) rr[i] = rr[i] + (gr[i] - af) * yr[i];
    else
      for (i = 0; i < n; i++) rr[i] = (gr[i] - af) * yr[i];
  }
}

/* Row driver: m columns (input stride vs, output stride vos), each a row of
   n elements.  Block shapes: x [n, m] -> y [n, m]. */
static void softmax_rows(const float *x, int64_t n, int64_t rs, int64_t m, int64_t vs, float *y, int64_t ors,
                         int64_t vos, bool log_space) {
  for (int64_t j = 0; j < m; j++) {
    if (rs == 1 && ors == 1)
      softmax_row_contig(x + j * vs, y + j * vos, n, log_space);
    else
      softmax_row(x + j * vs, rs, y + j * vos, ors, n, log_space);
  }
}

/* Column driver: rows x + i*rs hold m unit-stride elements; mx [m] and
   sum [m] are the per-column running max and sum.  Block shapes:
   x [n, m] -> y [n, m] (row stride ors, column stride vos). */
static void softmax_cols(const float *x, int64_t n, int64_t rs, int64_t m, float *y, int64_t ors, int64_t vos,
                         bool log_space, float *restrict mx, double *restrict sum) {
  for (int64_t j = 0; j < m; j++) {
    mx[j] = -INFINITY;
    sum[j] = 0;
  }
  for (int64_t i = 0; i < n; i++) {
    const float *row = x + i * rs;
    for (int64_t j = 0; j < m; j++) mx[j] = sm_max_nan(mx[j], row[j]);
  }
  for (int64_t i = 0; i < n; i++) {
    const float *row = x + i * rs;
    float *out = y + i * ors;
    /* e is stored even for log_softmax (overwritten below) so the loop has
       no branch; the unit-stride case is its own loop to vectorise */
    if (vos == 1)
      for (int64_t j = 0; j < m; j++) {
        float e = vm_exp_neg(row[j] - mx[j]);
        out[j] = e;
        sum[j] += e;
      }
    else
      for (int64_t j = 0; j < m; j++) {
        float e = vm_exp_neg(row[j] - mx[j]);
        out[j * vos] = e;
        sum[j] += e;
      }
  }
  if (log_space) {
    for (int64_t j = 0; j < m; j++) sum[j] = log(sum[j]); /* now log(sum) */
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      float *out = y + i * ors;
      for (int64_t j = 0; j < m; j++) out[j * vos] = (row[j] - mx[j]) - (float)sum[j];
    }
  } else {
    for (int64_t j = 0; j < m; j++) sum[j] = (float)(1.0 / sum[j]); /* now 1/sum */
    for (int64_t i = 0; i < n; i++) {
      float *out = y + i * ors;
      for (int64_t j = 0; j < m; j++) out[j * vos] *= (float)sum[j];
    }
  }
}
