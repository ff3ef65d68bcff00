/* Reductions (sum, mean, prod, max, min, argmax/argmin, var/std, norm,
 * logsumexp, all/any) along one dim or over every element, and cumsum.
 *
 * Layout: attn__dimsplit turns the input into an outer odometer of blocks;
 * a block is an [n, m] matrix, n = the reduced dim (input stride rs) and
 * m = the innermost other dim (input stride vs).  Two kernels cover a block:
 *  - rows:    one result per column from a row of n elements at stride rs.
 *             Reducing the last contiguous dim gives rs == 1: unit-stride
 *             rows that GCC vectorises (several independent accumulators).
 *  - columns: when vs == 1 and rs != 1 (a leading dim of a contiguous
 *             tensor), the n rows are combined element-wise into m
 *             accumulators, reading memory in order.
 * Neither kernel does per-element index arithmetic; any strides work
 * (transposed views, stride-0 expanded dims).
 *
 * Accumulators are double, so a float32 sum of 1e6 elements is exact to
 * float precision.  torch 1.13 sums float32 with a float cascade; the two
 * agree to about one ulp.  NaN semantics follow torch: max/min/argmax/argmin
 * and norm(inf) propagate NaN (the first NaN wins for the arg variants).
 *
 * Under autograd the differentiable results record their node at the end
 * of each entry point (backward formulas in grad_reduce.c); argmax/argmin/
 * all/any never do.
 */
#include "internal.h"

#include <math.h>

/* Selects on float compares (the NaN-propagating max, clamps) only
   vectorise when GCC may assume FP operations do not trap; attn never reads
   the FP exception flags, so this changes no result. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* The row helpers must be inlined into the ATTN_HOT drivers so that each
   target clone (AVX-512, AVX2, baseline) gets its own vector code. */
#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

static const char *const reduce_names[ATTN_REDUCE_OP_COUNT] = {
    "sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "norm", "logsumexp", "all", "any",
};

/* What a block computes; NORM is split by p so the loops stay branch-free. */
typedef enum {
  K_SUM, K_PROD, K_MAX, K_MIN, K_ARGMAX, K_ARGMIN, K_VAR, K_NORM2, K_NORM1, K_NORMINF, K_NORMNEGINF,
  K_NORM0, K_NORMP, K_LSE, K_ALL, K_ANY
} rkind;

typedef struct {
  attn_reduce_op op;
  rkind kind;
  double p;    /* norm order */
  double corr; /* var/std correction */
} rspec;

static bool kind_needs_elements(rkind k) { return k == K_MAX || k == K_MIN || k == K_ARGMAX || k == K_ARGMIN; }
static bool kind_is_arg(rkind k) { return k == K_ARGMAX || k == K_ARGMIN; }

static attn_status make_spec(attn_reduce_op op, const attn_reduce_opts *opts, rspec *r) {
  if ((int)op < 0 || op >= ATTN_REDUCE_OP_COUNT)
    return attn_set_error(ATTN_ERR_ARG, "reduce: unknown reduction %d", (int)op);
  r->op = op;
  r->p = opts ? opts->p : 2.0;
  r->corr = opts ? opts->correction : 1.0;
  switch (op) {
  case ATTN_SUM: case ATTN_MEAN: r->kind = K_SUM; break;
  case ATTN_PROD: r->kind = K_PROD; break;
  case ATTN_MAX: r->kind = K_MAX; break;
  case ATTN_MIN: r->kind = K_MIN; break;
  case ATTN_ARGMAX: r->kind = K_ARGMAX; break;
  case ATTN_ARGMIN: r->kind = K_ARGMIN; break;
  case ATTN_VAR: case ATTN_STD:
    if (!isfinite(r->corr))
      return attn_set_error(ATTN_ERR_ARG, "%s: correction must be finite (got %g)", reduce_names[op], r->corr);
    r->kind = K_VAR;
    break;
  case ATTN_NORM:
    if (isnan(r->p)) return attn_set_error(ATTN_ERR_ARG, "norm: p must be a number (got nan)");
    if (r->p == 2) r->kind = K_NORM2;
    else if (r->p == 1) r->kind = K_NORM1;
    else if (r->p == INFINITY) r->kind = K_NORMINF;
    else if (r->p == -INFINITY) r->kind = K_NORMNEGINF;
    else if (r->p == 0) r->kind = K_NORM0;
    else r->kind = K_NORMP;
    break;
  case ATTN_LOGSUMEXP: r->kind = K_LSE; break;
  case ATTN_ALL: r->kind = K_ALL; break;
  case ATTN_ANY: r->kind = K_ANY; break;
  default: break;
  }
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Dim splitting                                                             */

void attn__dimsplit_init(attn__dimsplit *s, const attn_tensor *t, int dim, const int64_t *ostride) {
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (d == dim) continue;
    s->shape[n] = t->shape[d];
    s->strides[0][n] = t->stride[d];
    s->strides[1][n] = ostride[d];
    n++;
  }
  if (t->ndim == 0) {
    s->n = 1;
    s->in_stride = s->out_stride = 0;
  } else {
    s->n = t->shape[dim];
    s->in_stride = t->stride[dim];
    s->out_stride = ostride[dim];
  }
  if (n == 0) {
    s->nd = 1;
    s->shape[0] = 1;
    s->strides[0][0] = s->strides[1][0] = 0;
  } else {
    s->nd = attn__coalesce(n, s->shape, 2, s->strides);
  }
  s->outer = 1;
  for (int d = 0; d < s->nd - 1; d++) s->outer *= s->shape[d];
  s->m = s->shape[s->nd - 1];
  s->vs = s->strides[0][s->nd - 1];
  s->vos = s->strides[1][s->nd - 1];
}

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
  return log(acc) + (double)shift;
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

/* Turns a raw accumulation over n elements into the reduction's value. */
static double finalize(const rspec *r, double raw, int64_t n) {
  switch (r->op) {
  case ATTN_MEAN: return raw / (double)n; /* n == 0: NaN like torch */
  case ATTN_VAR:
  case ATTN_STD: {
    if (n == 0) return NAN;
    double v = raw / fmax(0.0, (double)n - r->corr); /* 0/0 = NaN, x/0 = inf as in torch */
    return r->op == ATTN_STD ? sqrt(v) : v;
  }
  case ATTN_NORM:
    if (n == 0) return 0; /* torch.Tensor.norm of an empty dim is 0 for every p */
    if (r->kind == K_NORM2) return sqrt(raw);
    if (r->kind == K_NORMP) return pow(raw, 1.0 / r->p);
    return raw;
  default: return raw;
  }
}

/* Row driver for one block: column j of m (stride vs) reduces x + j*vs over
   n elements at stride rs; vals/idxs (either may be NULL) get the results
   at stride os.  Block shapes: x [n, m] -> vals, idxs [m]. */
ATTN_HOT static void block_rows(const rspec *r, const float *x, int64_t n, int64_t rs, int64_t m, int64_t vs,
                                float *vals, float *idxs, int64_t os) {
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
ATTN_HOT static void block_cols(const rspec *r, const float *x, int64_t n, int64_t rs, int64_t m,
                                double *restrict acc, double *restrict acc2) {
  rkind k = r->kind;
  double init = 0;
  switch (k) {
  case K_PROD: case K_ALL: init = 1; break;
  case K_MAX: case K_NORMINF: init = -INFINITY; break;
  case K_MIN: case K_NORMNEGINF: init = INFINITY; break;
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
  case K_MAX: case K_MIN: case K_NORMINF: case K_NORMNEGINF: {
    int mode = k == K_MAX ? 0 : k == K_MIN ? 1 : k == K_NORMINF ? 2 : 3;
    for (int64_t i = 0; i < n; i++) {
      const float *row = x + i * rs;
      for (int64_t j = 0; j < m; j++) acc[j] = pick((float)acc[j], row[j], mode);
    }
    break;
  }
  case K_ARGMAX: case K_ARGMIN: {
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

/* Under a deadline, rows longer than this (only expanded views can be
   much longer: their memory is not counted) go through col_polled. */
#define POLLED_ROW ((int64_t)1 << 20)

/* One column x[n] at stride rs, sequentially, in pieces with a deadline
   poll between them (false: cancelled).  The same arithmetic as the
   column kernel; *val gets the raw value (arg kinds: the value, *ix the
   index). */
static bool col_polled(const rspec *r, const float *x, int64_t n, int64_t rs, double *val, double *ix) {
  const rkind k = r->kind;
  const int64_t piece = ATTN__POLL_WORK;
  double acc = k == K_PROD || k == K_ALL ? 1 : k == K_MAX || k == K_NORMINF ? -INFINITY
               : k == K_MIN || k == K_NORMNEGINF ? INFINITY : 0;
  double acc2 = 0;
  const int mode = k == K_MAX ? 0 : k == K_MIN ? 1 : k == K_NORMINF ? 2 : 3;
  const bool is_min = k == K_ARGMIN;
  if (kind_is_arg(k)) acc = x[0];
  if (k == K_LSE) acc2 = -INFINITY;
  int passes = k == K_VAR || k == K_LSE ? 2 : 1;
  for (int pass = 0; pass < passes; pass++) {
    if (pass == 1 && k == K_VAR) acc2 = acc / (double)n, acc = 0;
    if (pass == 1 && k == K_LSE && isinf(acc2)) acc2 = 0;
    for (int64_t i0 = 0; i0 < n; i0 += piece) {
      if (attn__cancelled()) return false;
      const int64_t i1 = n - i0 < piece ? n : i0 + piece;
      for (int64_t i = i0; i < i1; i++) {
        const float v = x[i * rs];
        switch (k) {
        case K_SUM: acc += v; break;
        case K_NORM2: acc += (double)v * v; break;
        case K_NORM1: acc += fabs((double)v); break;
        case K_PROD: acc *= v; break;
        case K_MAX: case K_MIN: case K_NORMINF: case K_NORMNEGINF: acc = pick((float)acc, v, mode); break;
        case K_ARGMAX: case K_ARGMIN:
          if (i > 0 && acc == acc && (v != v || (is_min ? v < acc : v > acc))) acc = v, acc2 = (double)i;
          break;
        case K_VAR:
          if (pass == 0) acc += v;
          else acc += ((double)v - acc2) * ((double)v - acc2);
          break;
        case K_NORM0: acc += v != 0; break;
        case K_NORMP: acc += pow(fabs((double)v), r->p); break;
        case K_LSE:
          if (pass == 0) acc2 = pick((float)acc2, v, 0);
          else acc += expf(v - (float)acc2);
          break;
        case K_ALL: acc = v == 0 ? 0.0 : acc; break;
        case K_ANY: acc = v != 0 ? 1.0 : acc; break;
        }
      }
    }
  }
  if (k == K_LSE) acc = log(acc) + acc2;
  *val = acc;
  *ix = acc2;
  return true;
}

/* Runs the reduction over every block of the split.  buf (2*m doubles) is
   given when the column kernel should be used.  Polls the deadline
   between blocks (and inside very long rows): false when it stopped. */
static bool reduce_run(const rspec *r, const float *base, const attn__dimsplit *s, float *vals, float *idxs,
                       double *buf) {
  int64_t idx[ATTN_MAX_DIMS] = {0}, ip = 0, op = 0, work = 0;
  const bool deadline = attn_deadline_current() != 0;
  const bool polled = deadline && s->n > POLLED_ROW;
  /* Under a deadline a block goes in slices of columns, polled in
     between: columns are independent, so the results are the same. */
  int64_t slice = s->m;
  if (deadline && s->n > 0) {
    slice = ATTN__POLL_WORK / s->n;
    if (slice < 1) slice = 1;
  }
  for (int64_t o = 0; o < s->outer; o++) {
    const float *x = base + ip;
    if (attn__poll_work(&work, s->n * s->m)) return false;
    if (polled) {
      for (int64_t j = 0; j < s->m; j++) {
        double a, a2;
        if (!col_polled(r, x + j * s->vs, s->n, s->in_stride, &a, &a2)) return false;
        if (kind_is_arg(r->kind)) {
          if (vals) vals[op + j * s->vos] = (float)a;
          if (idxs) idxs[op + j * s->vos] = (float)a2;
        } else {
          vals[op + j * s->vos] = (float)finalize(r, a, s->n);
        }
      }
    } else if (buf) {
      double *acc = buf, *acc2 = buf + s->m;
      for (int64_t j0 = 0; j0 < s->m; j0 += slice) {
        if (j0 > 0 && attn__cancelled()) return false;
        int64_t mj = s->m - j0 < slice ? s->m - j0 : slice;
        block_cols(r, x + j0, s->n, s->in_stride, mj, acc + j0, acc2 + j0);
      }
      for (int64_t j = 0; j < s->m; j++) {
        if (kind_is_arg(r->kind)) {
          if (vals) vals[op + j * s->vos] = (float)acc[j];
          if (idxs) idxs[op + j * s->vos] = (float)acc2[j];
        } else {
          vals[op + j * s->vos] = (float)finalize(r, acc[j], s->n);
        }
      }
    } else {
      for (int64_t j0 = 0; j0 < s->m; j0 += slice) {
        if (j0 > 0 && attn__cancelled()) return false;
        int64_t mj = s->m - j0 < slice ? s->m - j0 : slice;
        block_rows(r, x + j0 * s->vs, s->n, s->in_stride, mj, s->vs, vals ? vals + op + j0 * s->vos : NULL,
                   idxs ? idxs + op + j0 * s->vos : NULL, s->vos);
      }
    }
    attn__dimsplit_next(s, idx, &ip, &op);
  }
  return true;
}

/* ------------------------------------------------------------------------ */
/* Public entry points                                                       */

static attn_status check_reduce_dim(const char *fn, const attn_tensor *t, int dim) {
  if (t->ndim == 0 ? dim != 0 : (dim < 0 || dim >= t->ndim))
    return attn_set_error(ATTN_ERR_INDEX, "%s: dim %d out of range for a %d-d tensor", fn, dim, t->ndim);
  return ATTN_OK;
}

static attn_status empty_error(const char *fn, const attn_tensor *t) {
  char sb[ATTN_SHAPE_BUF];
  return attn_set_error(ATTN_ERR_SHAPE, "%s: cannot reduce over a dim of size 0 (tensor %s): %s has no identity",
                        fn, ATTN_SHAPE(t, sb), fn);
}

/* Reduces t along dim into vals and/or idxs (fresh tensors of the reduced
   shape, allocated here); the common part of reduce_dim and max_dim. */
static attn_status reduce_dim_into(const rspec *r, const attn_tensor *t, int dim, bool keepdim, attn_tensor **vals,
                                   attn_tensor **idxs) {
  const char *fn = reduce_names[r->op];
  attn_status st = check_reduce_dim(fn, t, dim);
  if (st) return st;
  int64_t n = t->ndim ? t->shape[dim] : 1;
  if (n == 0 && kind_needs_elements(r->kind)) return empty_error(fn, t);

  int64_t keep[ATTN_MAX_DIMS], oshape[ATTN_MAX_DIMS], ostride[ATTN_MAX_DIMS];
  int ond = 0;
  for (int d = 0; d < t->ndim; d++) {
    keep[d] = d == dim ? 1 : t->shape[d];
    if (keepdim || d != dim) oshape[ond++] = keep[d];
  }
  attn__contiguous_strides(t->ndim, keep, ostride); /* same memory order with or without keepdim */

  attn__dimsplit s;
  attn__dimsplit_init(&s, t, dim, ostride);
  double *buf = NULL;
  if (s.in_stride != 1 && s.vs == 1 && s.m > 1 && s.n > 1 && s.outer > 0) {
    buf = attn__scratch_alloc((size_t)s.m * 2 * sizeof(double));
    if (!buf) return attn__nomem(fn, s.m * 2 * (int64_t)sizeof(double));
  }
  const size_t buf_bytes = buf ? (size_t)s.m * 2 * sizeof(double) : 0;
  attn_tensor *v = NULL, *ix = NULL;
  if ((vals && (st = attn__alloc(fn, ond, oshape, &v))) || (idxs && (st = attn__alloc(fn, ond, oshape, &ix)))) {
    attn_tensor_release(v);
    attn__scratch_free(buf, buf_bytes);
    return st;
  }
  /* an empty result has nothing to write, however many (empty) blocks */
  if (attn__shape_numel(ond, oshape) > 0 &&
      !reduce_run(r, attn_tensor_data(t), &s, v ? attn_tensor_data(v) : NULL, ix ? attn_tensor_data(ix) : NULL,
                  buf)) {
    attn_tensor_release(v);
    attn_tensor_release(ix);
    attn__scratch_free(buf, buf_bytes);
    return attn__limit_error(fn);
  }
  attn__scratch_free(buf, buf_bytes);
  if (vals) *vals = v;
  if (idxs) *idxs = ix;
  return ATTN_OK;
}

/* t [..., n, ...] -> out [..., (1), ...] */
attn_status attn_reduce_dim(attn_reduce_op op, const attn_tensor *t, int dim, bool keepdim,
                            const attn_reduce_opts *opts, attn_tensor **out) {
  rspec r;
  attn_status st = make_spec(op, opts, &r);
  if (st) return st;
  if (kind_is_arg(r.kind)) return reduce_dim_into(&r, t, dim, keepdim, NULL, out);
  attn_tensor *o;
  if ((st = reduce_dim_into(&r, t, dim, keepdim, &o, NULL))) return st;
  if ((st = attn__record_reduce(op, t, dim, keepdim, opts, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

/* t [..., n, ...] -> values, indices [..., (1), ...] */
attn_status attn_max_dim(const attn_tensor *t, int dim, bool keepdim, bool is_min, attn_tensor **values,
                         attn_tensor **indices) {
  rspec r;
  attn_status st = make_spec(is_min ? ATTN_ARGMIN : ATTN_ARGMAX, NULL, &r);
  if (st) return st;
  r.op = is_min ? ATTN_MIN : ATTN_MAX; /* for messages */
  /* Recording needs the indices even when the caller does not want them. */
  bool record = values && attn__ag_needed(1, &t);
  attn_tensor *v = NULL, *ix = NULL;
  if ((st = reduce_dim_into(&r, t, dim, keepdim, values ? &v : NULL, indices || record ? &ix : NULL))) return st;
  if (record && (st = attn__record_max_dim(t, dim, keepdim, is_min, ix, v))) {
    attn_tensor_release(v);
    attn_tensor_release(ix);
    return st;
  }
  if (values) *values = v;
  if (indices) *indices = ix;
  else attn_tensor_release(ix);
  return ATTN_OK;
}

/* t (any shape, numel N) -> out [] ; ARGMAX/ARGMIN give the flat row-major
   index. */
attn_status attn_reduce_all(attn_reduce_op op, const attn_tensor *t, const attn_reduce_opts *opts,
                            attn_tensor **out) {
  rspec r;
  attn_status st = make_spec(op, opts, &r);
  if (st) return st;
  const char *fn = reduce_names[op];
  int64_t numel = attn_tensor_numel(t);
  if (numel == 0 && kind_needs_elements(r.kind)) {
    char sb[ATTN_SHAPE_BUF];
    return attn_set_error(ATTN_ERR_SHAPE, "%s: cannot reduce an empty tensor %s: %s has no identity (give a dim)",
                          fn, ATTN_SHAPE(t, sb), fn);
  }
  /* Row-major order matters for the flat index of argmax and keeps the
     unit-stride row kernel; a non-contiguous input is copied once. */
  attn_tensor *c, *res;
  if ((st = attn_contiguous(t, &c))) return st;
  if ((st = attn__alloc(fn, 0, NULL, &res))) {
    attn_tensor_release(c);
    return st;
  }
  attn__dimsplit s = {.nd = 1, .shape = {1}, .outer = 1, .m = 1, .n = numel, .in_stride = 1};
  float *o = attn_tensor_data(res);
  bool done = reduce_run(&r, attn_tensor_data(c), &s, kind_is_arg(r.kind) ? NULL : o,
                         kind_is_arg(r.kind) ? o : NULL, NULL);
  attn_tensor_release(c);
  if (!done) {
    attn_tensor_release(res);
    return attn__limit_error(fn);
  }
  if ((st = attn__record_reduce(op, t, -1, false, opts, res))) {
    attn_tensor_release(res);
    return st;
  }
  *out = res;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* cumsum: double accumulator like torch's CPU kernel (acc_type of float is
   double there), rounded to float at each step.                            */

/* rows: x [m cols at vs] x [n at rs] -> y, same geometry with vos/ors */
ATTN_HOT static void cumsum_rows(const float *x, int64_t n, int64_t rs, int64_t m, int64_t vs, float *y,
                                 int64_t ors, int64_t vos) {
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
ATTN_HOT static void cumsum_cols(const float *x, int64_t n, int64_t rs, int64_t m, float *y, int64_t ors,
                                 int64_t vos, double *restrict acc) {
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
attn_status attn_cumsum(const attn_tensor *t, int dim, attn_tensor **out) {
  attn_status st = check_reduce_dim("cumsum", t, dim);
  if (st) return st;
  int64_t ostride[ATTN_MAX_DIMS];
  attn__contiguous_strides(t->ndim, t->shape, ostride);
  attn__dimsplit s;
  attn__dimsplit_init(&s, t, dim, ostride);
  double *buf = NULL;
  if (s.in_stride != 1 && s.vs == 1 && s.m > 1 && s.n > 1 && s.outer > 0) {
    buf = attn__scratch_alloc((size_t)s.m * sizeof(double));
    if (!buf) return attn__nomem("cumsum", s.m * (int64_t)sizeof(double));
  }
  const size_t buf_bytes = buf ? (size_t)s.m * sizeof(double) : 0;
  attn_tensor *res;
  if ((st = attn__alloc("cumsum", t->ndim, t->shape, &res))) {
    attn__scratch_free(buf, buf_bytes);
    return st;
  }
  const float *x = attn_tensor_data(t);
  float *y = attn_tensor_data(res);
  int64_t idx[ATTN_MAX_DIMS] = {0}, ip = 0, op = 0, work = 0;
  for (int64_t o = 0; o < s.outer; o++) {
    if (attn__poll_work(&work, s.n * s.m)) {
      attn__scratch_free(buf, buf_bytes);
      attn_tensor_release(res);
      return attn__limit_error("cumsum");
    }
    if (buf)
      cumsum_cols(x + ip, s.n, s.in_stride, s.m, y + op, s.out_stride, s.vos, buf);
    else
      cumsum_rows(x + ip, s.n, s.in_stride, s.m, s.vs, y + op, s.out_stride, s.vos);
    attn__dimsplit_next(&s, idx, &ip, &op);
  }
  attn__scratch_free(buf, buf_bytes);
  if ((st = attn__record_cumsum(t, dim, res))) {
    attn_tensor_release(res);
    return st;
  }
  *out = res;
  return ATTN_OK;
}
