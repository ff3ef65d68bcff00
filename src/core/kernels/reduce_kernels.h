/* SPDX-License-Identifier: MIT */
/* Reduction and cumsum kernels (the block layout is described in
 * reduce.c), written once and compiled by each kernel family's unit
 * (kernels_*.c) with its flags.  The includer defines INLINE.  Defines the
 * static block_rows, block_cols, cumsum_rows and cumsum_cols. */
#include "reduce_spec.h"

/* ------------------------------------------------------------------------ */
/* Row kernels: x[n] at stride s -> one value.  Inlined into the row driver
   with s == 1 and s != 1 as separate loops.                                */

#define LANES 8

/* sum of x (mode 0), x*x (1) or |x| (2) */
INLINE double row_sum(const float *x, int64_t n, int64_t s, int mode) {
  double acc = 0;
  int64_t i = 0;
  if (s == 1) {
    double a[LANES] = {0};
    for (; i + LANES <= n; i += LANES)
      for (int k = 0; k < LANES; k++) {
        double v = x[i + k];
        a[k] += mode == 0 ? v : mode == 1 ? v * v : fabs(v);
      }
    acc = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    for (; i < n; i++) {
      double v = x[i];
      acc += mode == 0 ? v : mode == 1 ? v * v : fabs(v);
    }
  } else {
    for (; i < n; i++) {
      double v = x[i * s];
      acc += mode == 0 ? v : mode == 1 ? v * v : fabs(v);
    }
  }
  return acc;
}

/* Extreme of x (mode 0 max, 1 min) or of |x| (2 max, 3 min); NaN sticks.
   n == 0 gives the identity (-inf for max, +inf for min). */
INLINE float pick(float a, float v, int mode) {
  if (mode >= 2) v = fabsf(v);
  bool better = (mode & 1) ? v < a : v > a;
  return (better || v != v) ? v : a;
}

#if defined(__GNUC__)
/* GCC does not vectorise the NaN-sticky select on its own, so the
   unit-stride loop uses 16-byte vector extensions (SSE2 / NEON, VEX-encoded
   in the AVX clones) with four independent accumulators. */
typedef float vec4f __attribute__((vector_size(16)));
typedef int32_t vec4i __attribute__((vector_size(16)));

INLINE vec4f pick4(vec4f a, vec4f v, int mode) {
  if (mode >= 2) v = (vec4f)((vec4i)v & 0x7fffffff);
  vec4i take = ((mode & 1) ? v < a : v > a) | (v != v);
  return (vec4f)(((vec4i)v & take) | ((vec4i)a & ~take));
}
#endif

INLINE float row_extreme(const float *x, int64_t n, int64_t s, int mode) {
  float init = (mode & 1) ? INFINITY : -INFINITY;
  float acc = init;
  int64_t i = 0;
  if (s == 1) {
#if defined(__GNUC__)
    vec4f a0 = {init, init, init, init}, a1 = a0, a2 = a0, a3 = a0;
    for (; i + 16 <= n; i += 16) {
      vec4f v0, v1, v2, v3;
      memcpy(&v0, x + i, sizeof v0);
      memcpy(&v1, x + i + 4, sizeof v1);
      memcpy(&v2, x + i + 8, sizeof v2);
      memcpy(&v3, x + i + 12, sizeof v3);
      a0 = pick4(a0, v0, mode);
      a1 = pick4(a1, v1, mode);
      a2 = pick4(a2, v2, mode);
      a3 = pick4(a3, v3, mode);
    }
    a0 = pick4(pick4(a0, a1, mode & 1), pick4(a2, a3, mode & 1), mode & 1); /* lanes are already |x| */
    for (int k = 0; k < 4; k++) acc = pick(acc, a0[k], mode & 1);
#endif
    for (; i < n; i++) acc = pick(acc, x[i], mode);
  } else {
    for (; i < n; i++) acc = pick(acc, x[i * s], mode);
  }
  return acc;
}

/* 0-based index of the first maximum (minimum) of x[n], n >= 1; the first
   NaN wins like in torch. */
INLINE int64_t row_arg(const float *x, int64_t n, int64_t s, bool is_min) {
  float best = x[0];
  int64_t bi = 0;
  if (best != best) return 0;
  for (int64_t i = 1; i < n; i++) {
    float v = x[i * s];
    if (v != v) return i;
    if (is_min ? v < best : v > best) {
      best = v;
      bi = i;
    }
  }
  return bi;
}

/* Sum of squared deviations from the mean (two passes, double). */
INLINE double row_m2(const float *x, int64_t n, int64_t s) {
  if (n == 0) return 0;
  double mean = row_sum(x, n, s, 0) / (double)n, acc = 0;
  if (s == 1) {
    double a[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
      for (int k = 0; k < LANES; k++) {
        double d = (double)x[i + k] - mean;
        a[k] += d * d;
      }
    acc = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    for (; i < n; i++) {
      double d = (double)x[i] - mean;
      acc += d * d;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      double d = (double)x[i * s] - mean;
      acc += d * d;
    }
  }
  return acc;
}

/* log(sum(exp(x))) shifted by the max; a +-inf max shifts by 0 so that all
   -inf gives -inf and any +inf gives +inf (torch's logsumexp). */
INLINE double row_lse(const float *x, int64_t n, int64_t s) {
  float mx = row_extreme(x, n, s, 0);
  if (mx != mx) return NAN;
  float shift = isinf(mx) ? 0.0f : mx;
  double acc = 0;
  for (int64_t i = 0; i < n; i++) acc += expf(x[i * s] - shift);
  return acc > 0 ? log(acc) + (double)shift : -INFINITY; /* every term 0: all -inf, or no terms */
}

/* Raw accumulation of one row for the non-arg kinds (see finalize). */
INLINE double row_reduce(const rspec *r, const float *x, int64_t n, int64_t s) {
  switch (r->kind) {
  case K_SUM: return row_sum(x, n, s, 0);
  case K_NORM2: return row_sum(x, n, s, 1);
  case K_NORM1: return row_sum(x, n, s, 2);
  case K_MAX: return row_extreme(x, n, s, 0);
  case K_MIN: return row_extreme(x, n, s, 1);
  case K_NORMINF: return row_extreme(x, n, s, 2);
  case K_NORMNEGINF: return row_extreme(x, n, s, 3);
  case K_PROD: {
    double a = 1;
    for (int64_t i = 0; i < n; i++) a *= x[i * s];
    return a;
  }
  case K_VAR: return row_m2(x, n, s);
  case K_NORM0: {
    double a = 0;
    for (int64_t i = 0; i < n; i++) a += x[i * s] != 0;
    return a;
  }
  case K_NORMP: {
    double a = 0;
    for (int64_t i = 0; i < n; i++) a += pow(fabs((double)x[i * s]), r->p);
    return a;
  }
  case K_LSE: return row_lse(x, n, s);
  case K_ALL:
    for (int64_t i = 0; i < n; i++)
      if (x[i * s] == 0) return 0;
    return 1;
  case K_ANY:
    for (int64_t i = 0; i < n; i++)
      if (x[i * s] != 0) return 1; /* NaN counts as true */
    return 0;
  default: return 0;
  }
}

/* Row driver for one block: column j of m (stride vs) reduces x + j*vs over
   n elements at stride rs; vals/idxs (either may be NULL) get the results
   at stride os.  Block shapes: x [n, m] -> vals, idxs [m]. */
static void block_rows(const rspec *r, const float *x, int64_t n, int64_t rs, int64_t m, int64_t vs, float *vals,
                       float *idxs, int64_t os) {
  if (kind_is_arg(r->kind)) {
    bool is_min = r->kind == K_ARGMIN;
    for (int64_t j = 0; j < m; j++) {
      const float *p = x + j * vs;
      int64_t i = rs == 1 ? row_arg(p, n, 1, is_min) : row_arg(p, n, rs, is_min);
      if (idxs) idxs[j * os] = (float)i;
      if (vals) vals[j * os] = p[i * rs];
    }
    return;
  }
  for (int64_t j = 0; j < m; j++) {
    const float *p = x + j * vs;
    double raw = rs == 1 ? row_reduce(r, p, n, 1) : row_reduce(r, p, n, rs);
    vals[j * os] = (float)finalize(r, raw, n);
  }
}

/* Column driver for one block with unit-stride columns: rows x + i*rs
   (i < n) are combined element-wise into acc[m] (and acc2[m]).  Block
   shapes: x [n, m] -> acc [m] raw values (arg kinds: acc values, acc2
   indices). */
static void block_cols(const rspec *r, const float *x, int64_t n, int64_t rs, int64_t m, double *restrict acc,
                       double *restrict acc2) {
  rkind k = r->kind;
  double init = 0;
  switch (k) {
  case K_PROD:
  case K_ALL: init = 1; break;
  case K_MAX:
  case K_NORMINF: init = -INFINITY; break;
  case K_MIN:
  case K_NORMNEGINF: init = INFINITY; break;
  default: break;
  }
  for (int64_t j = 0; j < m; j++) acc[j] = init;

  switch (k) {
  case K_SUM:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] += row[j];
    }
    break;
  case K_NORM2:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] += (double)row[j] * row[j];
    }
    break;
  case K_NORM1:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] += fabs((double)row[j]);
    }
    break;
  case K_PROD:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] *= row[j];
    }
    break;
  case K_MAX:
  case K_MIN:
  case K_NORMINF:
  case K_NORMNEGINF: {
    int mode = k == K_MAX ? 0 : k == K_MIN ? 1 : k == K_NORMINF ? 2 : 3;
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] = pick((float)acc[j], row[j], mode);
    }
    break;
  }
  case K_ARGMAX:
  case K_ARGMIN: {
    bool is_min = k == K_ARGMIN;
    for (int64_t j = 0; j < m; j++) {
      acc[j] = x[j];
      acc2[j] = 0;
    }
    for (int64_t i = 1; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) {
        double v = row[j], a = acc[j];
        if (a == a && (v != v || (is_min ? v < a : v > a))) {
          acc[j] = v;
          acc2[j] = (double)i;
        }
      }
    }
    break;
  }
  case K_VAR:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] += row[j];
    }
    for (int64_t j = 0; j < m; j++) {
      acc2[j] = acc[j] / (double)n; /* mean */
      acc[j] = 0;
    }
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) {
        double d = (double)row[j] - acc2[j];
        acc[j] += d * d;
      }
    }
    break;
  case K_NORM0:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] += row[j] != 0;
    }
    break;
  case K_NORMP:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] += pow(fabs((double)row[j]), r->p);
    }
    break;
  case K_LSE:
    /* acc2 = shift (the max, or 0 when it is infinite), acc = sum exp */
    for (int64_t j = 0; j < m; j++) acc2[j] = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc2[j] = pick((float)acc2[j], row[j], 0);
    }
    for (int64_t j = 0; j < m; j++)
      if (isinf(acc2[j])) acc2[j] = 0;
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] += expf(row[j] - (float)acc2[j]);
    }
    for (int64_t j = 0; j < m; j++) acc[j] = log(acc[j]) + acc2[j]; /* a NaN shift stays NaN */
    break;
  case K_ALL:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] = row[j] == 0 ? 0.0 : acc[j];
    }
    break;
  case K_ANY:
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] = row[j] != 0 ? 1.0 : acc[j];
    }
    break;
  }
}

/* rows: x [m cols at vs] x [n at rs] -> y, same geometry with vos/ors */
static void cumsum_rows(const float *x, int64_t n, int64_t rs, int64_t m, int64_t vs, float *y, int64_t ors,
                        int64_t vos) {
  for (int64_t j = 0; j < m; j++) {
    const float *p = x + j * vs;
    float *q = y + j * vos;
    double a = 0;
    for (int64_t i = 0; i < n; i++) {
      a += p[i * rs];
      q[i * ors] = (float)a;
    }
  }
}

/* columns: rows x + i*rs of m unit-stride elements; acc [m] running sums */
static void cumsum_cols(const float *x, int64_t n, int64_t rs, int64_t m, float *y, int64_t ors, int64_t vos,
                        double *restrict acc) {
  for (int64_t j = 0; j < m; j++) acc[j] = 0;
  for (int64_t i = 0; i < n; i++) {
    const float *row = x + i * rs;
    float *out = y + i * ors;
    if (vos == 1)
      for (int64_t j = 0; j < m; j++) out[j] = (float)(acc[j] += row[j]);
    else
      for (int64_t j = 0; j < m; j++) out[j * vos] = (float)(acc[j] += row[j]);
  }
}

/* t [..., n, ...] -> out of the same shape */
