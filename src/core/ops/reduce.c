/* SPDX-License-Identifier: MIT */
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
#include "ops/ops.h"
#include "kernels/kernels.h"

#include <math.h>

/* Selects on float compares (the NaN-propagating max, clamps) only
   vectorise when GCC may assume FP operations do not trap; attn never reads
   the FP exception flags, so this changes no result. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* The block kernels are in reduce_kernels.h, compiled once per kernel
   family (kernels.h); this file picks the family's and walks the blocks. */

static const char *const reduce_names[ATTN_REDUCE_OP_COUNT] = {
    "sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "norm", "logsumexp", "all", "any",
};

static attn_status make_spec(attn_reduce_op op, const attn_reduce_opts *opts, rspec *r) {
  if ((int)op < 0 || op >= ATTN_REDUCE_OP_COUNT)
    return attn_set_error(ATTN_ERR_ARG, "reduce: unknown reduction %d", (int)op);
  r->op = op;
  r->p = opts ? opts->p : 2.0;
  r->corr = opts ? opts->correction : 1.0;
  switch (op) {
  case ATTN_SUM:
  case ATTN_MEAN: r->kind = K_SUM; break;
  case ATTN_PROD: r->kind = K_PROD; break;
  case ATTN_MAX: r->kind = K_MAX; break;
  case ATTN_MIN: r->kind = K_MIN; break;
  case ATTN_ARGMAX: r->kind = K_ARGMAX; break;
  case ATTN_ARGMIN: r->kind = K_ARGMIN; break;
  case ATTN_VAR:
  case ATTN_STD:
    if (!isfinite(r->corr))
      return attn_set_error(ATTN_ERR_ARG, "%s: correction must be finite (got %g)", reduce_names[op], r->corr);
    r->kind = K_VAR;
    break;
  case ATTN_NORM:
    if (isnan(r->p)) return attn_set_error(ATTN_ERR_ARG, "norm: p must be a number (got nan)");
    if (r->p == 2)
      r->kind = K_NORM2;
    else if (r->p == 1)
      r->kind = K_NORM1;
    else if (r->p == INFINITY)
      r->kind = K_NORMINF;
    else if (r->p == -INFINITY)
      r->kind = K_NORMNEGINF;
    else if (r->p == 0)
      r->kind = K_NORM0;
    else
      r->kind = K_NORMP;
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

/* Under a deadline, rows longer than this (only expanded views can be
   much longer: their memory is not counted) go through col_polled. */
#define POLLED_ROW ((int64_t)1 << 20)

/* One column x[n] at stride rs, sequentially, in pieces with a deadline
   poll between them (false: cancelled).  The same arithmetic as the
   column kernel; *val gets the raw value (arg kinds: the value, *ix the
   index). */
/* The kernels' NaN-sticky extreme (reduce_kernels.h), for this
   sequential path. */
static float pick(float a, float v, int mode) {
  if (mode >= 2) v = fabsf(v);
  bool better = (mode & 1) ? v < a : v > a;
  return (better || v != v) ? v : a;
}

static bool col_polled(const rspec *r, const float *x, int64_t n, int64_t rs, double *val, double *ix) {
  const rkind k = r->kind;
  const int64_t piece = ATTN__POLL_WORK;
  double acc = k == K_PROD || k == K_ALL         ? 1
               : k == K_MAX || k == K_NORMINF    ? -INFINITY
               : k == K_MIN || k == K_NORMNEGINF ? INFINITY
                                                 : 0;
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
        case K_MAX:
        case K_MIN:
        case K_NORMINF:
        case K_NORMNEGINF: acc = pick((float)acc, v, mode); break;
        case K_ARGMAX:
        case K_ARGMIN:
          if (i > 0 && acc == acc && (v != v || (is_min ? v < acc : v > acc))) acc = v, acc2 = (double)i;
          break;
        case K_VAR:
          if (pass == 0)
            acc += v;
          else
            acc += ((double)v - acc2) * ((double)v - acc2);
          break;
        case K_NORM0: acc += v != 0; break;
        case K_NORMP: acc += pow(fabs((double)v), r->p); break;
        case K_LSE:
          if (pass == 0)
            acc2 = pick((float)acc2, v, 0);
          else
            acc += expf(v - (float)acc2);
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
  const attn__kernels *K = attn__kern();
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
        K->reduce_cols(r, x + j0, s->n, s->in_stride, mj, acc + j0, acc2 + j0);
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
        K->reduce_rows(r, x + j0 * s->vs, s->n, s->in_stride, mj, s->vs, vals ? vals + op + j0 * s->vos : NULL,
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
  return attn_set_error(ATTN_ERR_SHAPE, "%s: cannot reduce over a dim of size 0 (tensor %s): %s has no identity", fn,
                        ATTN_SHAPE(t, sb), fn);
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
      !reduce_run(r, attn_tensor_data(t), &s, v ? attn_tensor_data(v) : NULL, ix ? attn_tensor_data(ix) : NULL, buf)) {
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
static attn_status reduce_dim_f32(attn_reduce_op op, const attn_tensor *t, int dim, bool keepdim,
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
static attn_status max_dim_f32(const attn_tensor *t, int dim, bool keepdim, bool is_min, attn_tensor **values,
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
  if (indices)
    *indices = ix;
  else
    attn_tensor_release(ix);
  return ATTN_OK;
}

/* t (any shape, numel N) -> out [] ; ARGMAX/ARGMIN give the flat row-major
   index. */
static attn_status reduce_all_f32(attn_reduce_op op, const attn_tensor *t, const attn_reduce_opts *opts,
                                  attn_tensor **out) {
  rspec r;
  attn_status st = make_spec(op, opts, &r);
  if (st) return st;
  const char *fn = reduce_names[op];
  int64_t numel = attn_tensor_numel(t);
  if (numel == 0 && kind_needs_elements(r.kind)) {
    char sb[ATTN_SHAPE_BUF];
    return attn_set_error(ATTN_ERR_SHAPE, "%s: cannot reduce an empty tensor %s: %s has no identity (give a dim)", fn,
                          ATTN_SHAPE(t, sb), fn);
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
  bool done =
      reduce_run(&r, attn_tensor_data(c), &s, kind_is_arg(r.kind) ? NULL : o, kind_is_arg(r.kind) ? o : NULL, NULL);
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

static attn_status cumsum_f32(const attn_tensor *t, int dim, attn_tensor **out) {
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
  const attn__kernels *K = attn__kern();
  for (int64_t o = 0; o < s.outer; o++) {
    if (attn__poll_work(&work, s.n * s.m)) {
      attn__scratch_free(buf, buf_bytes);
      attn_tensor_release(res);
      return attn__limit_error("cumsum");
    }
    if (buf)
      K->cumsum_cols(x + ip, s.n, s.in_stride, s.m, y + op, s.out_stride, s.vos, buf);
    else
      K->cumsum_rows(x + ip, s.n, s.in_stride, s.m, s.vs, y + op, s.out_stride, s.vos);
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

/* ------------------------------------------------------------------------ */
/* Dtypes.  Float32 inputs use the kernels above (argmax/argmin indices come
   back as int64, all/any as bool); int64 and bool inputs reduce exactly in
   int64 for sum, prod, max, min, argmax, argmin, all, any and cumsum (sum
   of bool counts, like torch), and are promoted to float32 for mean, var,
   std, norm and logsumexp.                                                  */

static bool int_reducible(attn_reduce_op op) {
  return op == ATTN_SUM || op == ATTN_PROD || op == ATTN_MAX || op == ATTN_MIN || op == ATTN_ARGMAX ||
         op == ATTN_ARGMIN || op == ATTN_ALL || op == ATTN_ANY;
}

static attn_dtype int_result_dtype(attn_reduce_op op, attn_dtype in) {
  if (op == ATTN_ALL || op == ATTN_ANY) return ATTN_BOOL;
  if ((op == ATTN_MAX || op == ATTN_MIN) && in == ATTN_BOOL) return ATTN_BOOL;
  return ATTN_INT64;
}

/* Reduces n values at storage positions base + i*stride (integers). */
static void int_reduce_run(attn_reduce_op op, const attn_storage *st, int64_t base, int64_t n, int64_t stride,
                           int64_t *val, int64_t *arg) {
  int64_t acc = op == ATTN_PROD || op == ATTN_ALL ? 1 : 0, best = 0, bi = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t x = attn__load_i64(st, base + i * stride);
    switch (op) {
    case ATTN_SUM: acc = (int64_t)((uint64_t)acc + (uint64_t)x); break;
    case ATTN_PROD: acc = (int64_t)((uint64_t)acc * (uint64_t)x); break;
    case ATTN_ALL: acc = acc && x != 0; break;
    case ATTN_ANY: acc = acc || x != 0; break;
    case ATTN_MAX:
    case ATTN_ARGMAX:
      if (i == 0 || x > best) best = x, bi = i;
      break;
    default: /* MIN, ARGMIN */
      if (i == 0 || x < best) best = x, bi = i;
      break;
    }
  }
  if (op == ATTN_MAX || op == ATTN_MIN || op == ATTN_ARGMAX || op == ATTN_ARGMIN) acc = best;
  if (val) *val = acc;
  if (arg) *arg = bi;
}

static void store_int(attn_tensor *o, int64_t i, int64_t v) {
  if (o->dtype == ATTN_BOOL)
    attn_tensor_bool(o)[i] = v != 0;
  else
    attn_tensor_i64(o)[i] = v;
}

/* Integer reduction along dim (dim < 0: over everything, 0-d results). */
static attn_status int_reduce(attn_reduce_op op, const attn_tensor *t, int dim, bool keepdim, attn_tensor **vals,
                              attn_tensor **idxs) {
  const char *fn = reduce_names[op];
  char sb[ATTN_SHAPE_BUF];
  attn_status st;
  int64_t shape[ATTN_MAX_DIMS];
  int nd = 0;
  int64_t n;
  attn_tensor *c = NULL;
  if (dim < 0) {
    n = attn_tensor_numel(t);
    if ((st = attn_contiguous(t, &c))) return st;
  } else {
    if ((st = check_reduce_dim(fn, t, dim))) return st;
    n = t->shape[dim];
    for (int d = 0; d < t->ndim; d++) {
      if (d == dim) {
        if (keepdim) shape[nd++] = 1;
      } else {
        shape[nd++] = t->shape[d];
      }
    }
  }
  bool needs = op == ATTN_MAX || op == ATTN_MIN || op == ATTN_ARGMAX || op == ATTN_ARGMIN;
  if (n == 0 && needs) { /* no identity: an error unless there is nothing to reduce into */
    int64_t outer = 1;
    for (int d = 0; d < nd; d++) outer *= shape[d];
    if (dim < 0 || outer > 0) {
      attn_tensor_release(c);
      return attn_set_error(ATTN_ERR_SHAPE, "%s: cannot reduce an empty tensor %s: %s has no identity", fn,
                            ATTN_SHAPE(t, sb), fn);
    }
  }
  attn_tensor *v = NULL, *ix = NULL;
  attn_dtype vt = int_result_dtype(op == ATTN_ARGMAX ? ATTN_MAX : op == ATTN_ARGMIN ? ATTN_MIN : op, t->dtype);
  if ((vals && (st = attn__alloc_dtype(fn, vt, nd, shape, &v))) ||
      (idxs && (st = attn__alloc_dtype(fn, ATTN_INT64, nd, shape, &ix)))) {
    attn_tensor_release(v);
    attn_tensor_release(c);
    return st;
  }
  if (dim < 0) {
    int64_t val, arg;
    int_reduce_run(op, c->storage, c->offset, n, 1, &val, &arg);
    if (v) store_int(v, 0, val);
    if (ix) attn_tensor_i64(ix)[0] = arg;
  } else {
    /* odometer over the other dims of t */
    attn_tensor outer = *t;
    outer.shape[dim] = 1;
    int64_t count = attn_tensor_numel(&outer), work = 0;
    if (count > 0) {
      attn__iter it;
      attn__iter_init(&it, &outer);
      int64_t i = 0;
      do {
        if (attn__poll_work(&work, n + 1)) {
          attn_tensor_release(v);
          attn_tensor_release(ix);
          return attn__limit_error(fn);
        }
        int64_t val, arg;
        int_reduce_run(op, t->storage, it.pos, n, t->stride[dim], &val, &arg);
        if (v) store_int(v, i, val);
        if (ix) attn_tensor_i64(ix)[i] = arg;
        i++;
      } while (attn__iter_next(&it));
    }
  }
  attn_tensor_release(c);
  if (vals) *vals = v;
  if (idxs) *idxs = ix;
  return ATTN_OK;
}

/* float32 result of a float kernel converted to dt (consumes r). */
static attn_status convert_result(attn_tensor *r, attn_dtype dt, attn_tensor **out) {
  if (r->dtype == dt) {
    *out = r;
    return ATTN_OK;
  }
  attn_status st = attn_to_dtype(r, dt, out);
  attn_tensor_release(r);
  return st;
}

static attn_dtype float_result_dtype(attn_reduce_op op) {
  if (op == ATTN_ARGMAX || op == ATTN_ARGMIN) return ATTN_INT64;
  if (op == ATTN_ALL || op == ATTN_ANY) return ATTN_BOOL;
  return ATTN_FLOAT32;
}

/* torch refuses mean, var, std and norm of int64 and bool tensors (no
   output dtype to infer) and argmax/argmin of bools. */
static attn_status check_reduce_dtype(attn_reduce_op op, const attn_tensor *t) {
  if (t->dtype == ATTN_FLOAT32) return ATTN_OK;
  if (attn_check_compute(reduce_names[op], 1, NULL, t)) return ATTN_ERR_ARG;
  if (op == ATTN_MEAN || op == ATTN_VAR || op == ATTN_STD || op == ATTN_NORM)
    return attn_set_error(ATTN_ERR_ARG,
                          "%s: expected a floating tensor, got %s (torch cannot infer the output dtype either: "
                          "convert first, e.g. x:float():%s())",
                          reduce_names[op], attn_dtype_name(t->dtype), reduce_names[op]);
  if (t->dtype == ATTN_BOOL && (op == ATTN_ARGMAX || op == ATTN_ARGMIN))
    return attn_set_error(ATTN_ERR_ARG, "%s: not supported for bool tensors (convert with :long() first)",
                          reduce_names[op]);
  return ATTN_OK;
}

/* attn_reduce_dim (all false) and attn_reduce_all (all true, dim -1,
   keepdim false): dtype checks, the integer reductions, and float32
   conversion around the float kernels. */
static attn_status reduce_entry(attn_reduce_op op, const attn_tensor *t, bool all, int dim, bool keepdim,
                                const attn_reduce_opts *opts, attn_tensor **out) {
  attn_status st;
  attn_tensor *r;
  if ((unsigned)op >= ATTN_REDUCE_OP_COUNT) return attn_set_error(ATTN_ERR_ARG, "reduce: unknown op %d", (int)op);
  if ((st = check_reduce_dtype(op, t))) return st;
  const attn_tensor *f = t;
  attn_tensor *conv = NULL;
  if (t->dtype != ATTN_FLOAT32) {
    if (int_reducible(op)) {
      bool arg = op == ATTN_ARGMAX || op == ATTN_ARGMIN;
      return int_reduce(op, t, dim, keepdim, arg ? NULL : out, arg ? out : NULL);
    }
    if ((st = attn_to_dtype(t, ATTN_FLOAT32, &conv))) return st;
    f = conv;
  }
  st = all ? reduce_all_f32(op, f, opts, conv ? out : &r) : reduce_dim_f32(op, f, dim, keepdim, opts, conv ? out : &r);
  if (conv) {
    attn_tensor_release(conv);
    return st;
  }
  if (st) return st;
  return convert_result(r, float_result_dtype(op), out);
}

attn_status attn_reduce_dim(attn_reduce_op op, const attn_tensor *t, int dim, bool keepdim,
                            const attn_reduce_opts *opts, attn_tensor **out) {
  return reduce_entry(op, t, false, dim, keepdim, opts, out);
}

attn_status attn_reduce_all(attn_reduce_op op, const attn_tensor *t, const attn_reduce_opts *opts, attn_tensor **out) {
  return reduce_entry(op, t, true, -1, false, opts, out);
}

attn_status attn_max_dim(const attn_tensor *t, int dim, bool keepdim, bool is_min, attn_tensor **values,
                         attn_tensor **indices) {
  attn_status st;
  if (attn_check_compute(is_min ? "min" : "max", 1, NULL, t)) return ATTN_ERR_ARG;
  if (t->dtype != ATTN_FLOAT32) return int_reduce(is_min ? ATTN_MIN : ATTN_MAX, t, dim, keepdim, values, indices);
  attn_tensor *ix = NULL;
  if ((st = max_dim_f32(t, dim, keepdim, is_min, values, indices ? &ix : NULL))) return st;
  if (indices && (st = convert_result(ix, ATTN_INT64, indices)) && values) {
    attn_tensor_release(*values);
    *values = NULL;
  }
  return st;
}

attn_status attn_cumsum(const attn_tensor *t, int dim, attn_tensor **out) {
  if (attn_check_compute("cumsum", 1, NULL, t)) return ATTN_ERR_ARG;
  if (t->dtype == ATTN_FLOAT32) return cumsum_f32(t, dim, out);
  attn_status st = check_reduce_dim("cumsum", t, dim);
  if (st) return st;
  attn_tensor *o;
  if ((st = attn__alloc_dtype("cumsum", ATTN_INT64, t->ndim, t->shape, &o))) return st;
  if (attn_tensor_numel(t) > 0) {
    int64_t ostride[ATTN_MAX_DIMS];
    attn__contiguous_strides(t->ndim, t->shape, ostride);
    attn_tensor outer = *t;
    outer.shape[dim] = 1;
    attn__iter it;
    attn__iter_init(&it, &outer);
    int64_t *y = attn_tensor_i64(o);
    int64_t n = t->shape[dim], i = 0, work = 0;
    do {
      /* the output position of this row's first element */
      int64_t opos = 0;
      for (int d = 0; d < t->ndim; d++) opos += it.idx[d] * ostride[d];
      int64_t acc = 0;
      for (int64_t k = 0; k < n; k++) {
        acc = (int64_t)((uint64_t)acc + (uint64_t)attn__load_i64(t->storage, it.pos + k * t->stride[dim]));
        y[opos + k * ostride[dim]] = acc;
      }
      if (attn__poll_work(&work, n)) {
        attn_tensor_release(o);
        return attn__limit_error("cumsum");
      }
      i++;
    } while (attn__iter_next(&it));
  }
  *out = o;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Summing a broadcast gradient back to its input's shape (the backward of
   every broadcasting op; here because it is a sum)                          */

attn_status attn__sum_to_shape(const attn_tensor *grad, int ndim, const int64_t *shape, attn_tensor **out) {
  if (grad->ndim == ndim) {
    bool same = true;
    for (int i = 0; i < ndim && same; i++) same = grad->shape[i] == shape[i];
    if (same) {
      *out = attn_tensor_retain((attn_tensor *)grad);
      return ATTN_OK;
    }
  }
  attn_tensor *cur = attn_tensor_retain((attn_tensor *)grad);
  attn_status st = ATTN_OK;
  /* leading dims added by broadcasting: folded into one (a view where the
     layout allows) and summed in one reduction, or just dropped when they
     hold one element (a batch of 1: no reduction at all) */
  if (cur->ndim > ndim) {
    const int lead = cur->ndim - ndim;
    int64_t fshape[ATTN_MAX_DIMS], n = 1;
    for (int i = 0; i < lead; i++) n *= cur->shape[i];
    fshape[0] = n;
    for (int i = 0; i < ndim; i++) fshape[1 + i] = cur->shape[lead + i];
    attn_tensor *folded, *next;
    if (n == 1) {
      st = attn_reshape(cur, ndim, fshape + 1, &next);
    } else if ((st = attn_reshape(cur, ndim + 1, fshape, &folded)) == ATTN_OK) {
      st = attn_reduce_dim(ATTN_SUM, folded, 0, false, NULL, &next);
      attn_tensor_release(folded);
    }
    if (st == ATTN_OK) {
      attn_tensor_release(cur);
      cur = next;
    }
  }
  for (int d = 0; d < ndim && st == ATTN_OK; d++) {
    if (shape[d] == 1 && cur->shape[d] != 1) {
      attn_tensor *next;
      if ((st = attn_reduce_dim(ATTN_SUM, cur, d, true, NULL, &next))) break;
      attn_tensor_release(cur);
      cur = next;
    }
  }
  if (st) {
    attn_tensor_release(cur);
    return st;
  }
  *out = cur;
  return ATTN_OK;
}
