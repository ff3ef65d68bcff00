/* SPDX-License-Identifier: MIT */
/* Tests of the reductions, cumsum and softmax: the optimised kernels of
 * reduce.c / softmax.c against a naive reference kept here (per-element
 * odometer over the full index, double math, the semantics spelled out
 * plainly), on random shapes and random views (permuted, stepped slices,
 * stride-0 expanded dims), plus torch's edge cases and the error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "check.h"

/* ------------------------------------------------------------------------ */
/* Random numbers                                                            */

#define RNG_SEED 0x9E3779B97F4A7C15ull
#include "rng.h"

/* mode 0: normal; 1: small integers (ties, zeros); 2: normal with NaN/inf */
static float rnd_value(int mode) {
  if (mode == 1) return (float)(rnd_int(5) - 2);
  if (mode == 2) {
    int r = rnd_int(100);
    if (r < 3) return NAN;
    if (r < 6) return INFINITY;
    if (r < 12) return -INFINITY;
  }
  return (float)rnd_normal();
}

static void fill_random(attn_tensor *t, int mode) {
  float *p = attn_tensor_data(t);
  int64_t n = attn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) p[i] = rnd_value(mode);
}

/* A random tensor of 0..4 dims, possibly a non-contiguous view: permuted,
   sliced with a step, or with size-1 dims expanded (stride 0). */
static attn_tensor *random_view(int mode, int maxsize, int64_t maxnumel) {
  int ndim;
  int64_t shape[ATTN_MAX_DIMS], numel;
  do {
    ndim = rnd_int(5);
    numel = 1;
    for (int i = 0; i < ndim; i++) {
      int r = rnd_int(10);
      shape[i] = r == 0 ? 0 : r == 1 ? 1 : 1 + rnd_int(maxsize);
      numel *= shape[i];
    }
  } while (numel > maxnumel);
  attn_tensor *t = NULL, *v = NULL;
  if (attn_empty(ndim, shape, &t)) return NULL;
  fill_random(t, mode);
  if (ndim >= 2 && rnd_int(2)) {
    int perm[ATTN_MAX_DIMS];
    for (int i = 0; i < ndim; i++) perm[i] = i;
    for (int i = ndim - 1; i > 0; i--) {
      int j = rnd_int(i + 1), tmp = perm[i];
      perm[i] = perm[j];
      perm[j] = tmp;
    }
    if (attn_permute(t, perm, &v) == ATTN_OK) {
      attn_tensor_release(t);
      t = v;
    }
  }
  if (ndim >= 1 && rnd_int(3) == 0) {
    int d = rnd_int(ndim);
    if (attn_slice(t, d, rnd_int(2), t->shape[d], 1 + rnd_int(2), &v) == ATTN_OK) {
      attn_tensor_release(t);
      t = v;
    }
  }
  if (ndim >= 1 && rnd_int(3) == 0) {
    int64_t want[ATTN_MAX_DIMS];
    for (int i = 0; i < ndim; i++) want[i] = t->shape[i] == 1 ? 1 + rnd_int(6) : -1;
    if (attn_expand(t, ndim, want, &v) == ATTN_OK) {
      attn_tensor_release(t);
      t = v;
    }
  }
  return t;
}

/* ------------------------------------------------------------------------ */
/* Reference                                                                 */

static const char *op_name(attn_reduce_op op) {
  static const char *names[] = {"sum", "mean", "prod", "max",       "min", "argmax", "argmin",
                                "var", "std",  "norm", "logsumexp", "all", "any"};
  return names[op];
}

static bool any_nan(const double *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (isnan(v[i])) return true;
  return false;
}

/* The reduction of v[n] written out plainly. */
static double ref_vec(attn_reduce_op op, const double *v, int64_t n, double corr, double p) {
  double s = 0;
  switch (op) {
  case ATTN_SUM:
    for (int64_t i = 0; i < n; i++) s += v[i];
    return s;
  case ATTN_MEAN:
    for (int64_t i = 0; i < n; i++) s += v[i];
    return s / (double)n;
  case ATTN_PROD:
    s = 1;
    for (int64_t i = 0; i < n; i++) s *= v[i];
    return s;
  case ATTN_MAX:
  case ATTN_MIN: {
    if (any_nan(v, n)) return NAN;
    double b = v[0];
    for (int64_t i = 1; i < n; i++) b = op == ATTN_MAX ? fmax(b, v[i]) : fmin(b, v[i]);
    return b;
  }
  case ATTN_ARGMAX:
  case ATTN_ARGMIN: {
    for (int64_t i = 0; i < n; i++)
      if (isnan(v[i])) return (double)i;
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
      if (op == ATTN_ARGMAX ? v[i] > v[b] : v[i] < v[b]) b = i;
    return (double)b;
  }
  case ATTN_VAR:
  case ATTN_STD: {
    if (n == 0) return NAN;
    double mean = 0;
    for (int64_t i = 0; i < n; i++) mean += v[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) s += (v[i] - mean) * (v[i] - mean);
    double d = (double)n - corr;
    double var = s / (d > 0 ? d : 0);
    return op == ATTN_STD ? sqrt(var) : var;
  }
  case ATTN_NORM: {
    if (n == 0) return 0;
    if (isinf(p)) {
      if (any_nan(v, n)) return NAN;
      double b = fabs(v[0]);
      for (int64_t i = 1; i < n; i++) b = p > 0 ? fmax(b, fabs(v[i])) : fmin(b, fabs(v[i]));
      return b;
    }
    if (p == 0) {
      for (int64_t i = 0; i < n; i++) s += v[i] != 0;
      return s;
    }
    for (int64_t i = 0; i < n; i++) s += pow(fabs(v[i]), p);
    return pow(s, 1 / p);
  }
  case ATTN_LOGSUMEXP: {
    if (any_nan(v, n)) return NAN;
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = fmax(m, v[i]);
    if (isinf(m)) return m; /* all -inf (or empty): -inf; any +inf: +inf */
    for (int64_t i = 0; i < n; i++) s += exp(v[i] - m);
    return m + log(s);
  }
  case ATTN_ALL:
    for (int64_t i = 0; i < n; i++)
      if (v[i] == 0) return 0;
    return 1;
  case ATTN_ANY:
    for (int64_t i = 0; i < n; i++)
      if (v[i] != 0) return 1;
    return 0;
  default: return NAN;
  }
}

/* The reduced shape, as attn_reduce_dim documents it. */
static int reduced_shape(const attn_tensor *t, int dim, bool keepdim, int64_t *shape) {
  int n = 0;
  for (int d = 0; d < t->ndim; d++)
    if (d != dim)
      shape[n++] = t->shape[d];
    else if (keepdim)
      shape[n++] = 1;
  return n;
}

/* Walks the full index of t in row-major order; returns false at the end. */
static bool next_index(int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

/* Reference reduction of t along dim: out[j] for each output element in
   row-major order (the caller gives room for all of them). */
static void ref_reduce_dim(attn_reduce_op op, const attn_tensor *t, int dim, double corr, double p, double *out) {
  int64_t n = t->ndim ? t->shape[dim] : 1;
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  int64_t oshape[ATTN_MAX_DIMS], idx[ATTN_MAX_DIMS] = {0};
  for (int d = 0; d < t->ndim; d++) oshape[d] = d == dim ? 1 : t->shape[d];
  for (int d = 0; d < t->ndim; d++)
    if (oshape[d] == 0) {
      free(v);
      return;
    }
  int64_t j = 0;
  do {
    for (int64_t k = 0; k < n; k++) {
      int64_t full[ATTN_MAX_DIMS];
      memcpy(full, idx, sizeof full);
      if (t->ndim) full[dim] = k;
      v[k] = attn_tensor_get(t, full);
    }
    out[j++] = ref_vec(op, v, n, corr, p);
  } while (next_index(t->ndim, oshape, idx));
  free(v);
}

/* softmax / log_softmax / cumsum of v[n] in double */
static void ref_along(int which, const double *v, int64_t n, double *o) {
  if (which == 2) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) o[i] = s += v[i];
    return;
  }
  double m = -INFINITY, s = 0;
  for (int64_t i = 0; i < n; i++) m = (isnan(v[i]) || v[i] > m) ? v[i] : m;
  for (int64_t i = 0; i < n; i++) s += exp(v[i] - m);
  for (int64_t i = 0; i < n; i++) o[i] = which == 0 ? exp(v[i] - m) / s : (v[i] - m) - log(s);
}

/* Reference softmax (0), log_softmax (1) or cumsum (2) along dim, output in
   row-major order of t's shape. */
static void ref_along_dim(int which, const attn_tensor *t, int dim, double *out) {
  int64_t n = t->ndim ? t->shape[dim] : 1;
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1) * 2), *o = v + (n ? n : 1);
  int64_t oshape[ATTN_MAX_DIMS], idx[ATTN_MAX_DIMS] = {0}, cstride[ATTN_MAX_DIMS];
  int64_t s = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    cstride[d] = s;
    s *= t->shape[d];
  }
  for (int d = 0; d < t->ndim; d++) oshape[d] = d == dim ? 1 : t->shape[d];
  if (attn_tensor_numel(t) == 0) {
    free(v);
    return;
  }
  do {
    int64_t base = 0;
    for (int d = 0; d < t->ndim; d++) base += idx[d] * cstride[d];
    for (int64_t k = 0; k < n; k++) {
      int64_t full[ATTN_MAX_DIMS];
      memcpy(full, idx, sizeof full);
      if (t->ndim) full[dim] = k;
      v[k] = attn_tensor_get(t, full);
    }
    ref_along(which, v, n, o);
    for (int64_t k = 0; k < n; k++) out[base + k * (t->ndim ? cstride[dim] : 0)] = o[k];
  } while (next_index(t->ndim, oshape, idx));
  free(v);
}

/* ------------------------------------------------------------------------ */
/* Comparison                                                                */

static bool close_to(double got, double want, double rtol, double atol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

static int mismatch_reports;

/* Checks out (contiguous, fresh) against shape and want[] */
static bool matches(const char *what, const attn_tensor *out, int ndim, const int64_t *shape, const double *want,
                    double rtol, double atol) {
  char sa[128], sb[128];
  bool same = out->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = out->shape[d] == shape[d];
  if (!attn_tensor_is_contiguous(out) || !same) {
    if (mismatch_reports++ < 20)
      fprintf(stderr, "%s: shape %s, expected %s\n", what, attn_shape_str(out->ndim, out->shape, sa, sizeof sa),
              attn_shape_str(ndim, shape, sb, sizeof sb));
    return false;
  }
  int64_t n = attn_tensor_numel(out);
  for (int64_t i = 0; i < n; i++)
    if (!close_to(attn_tensor_get_flat(out, i), want[i], rtol, atol)) { /* any dtype (argmax: int64, all: bool) */
      if (mismatch_reports++ < 20)
        fprintf(stderr, "%s: element %lld is %.9g, expected %.9g\n", what, (long long)i,
                (double)attn_tensor_get_flat(out, i), want[i]);
      return false;
    }
  return true;
}

static const char *describe(const attn_tensor *t, char *buf, size_t size) {
  char sa[128], sb[128];
  snprintf(buf, size, "shape %s strides %s", attn_shape_str(t->ndim, t->shape, sa, sizeof sa),
           attn_shape_str(t->ndim, t->stride, sb, sizeof sb));
  return buf;
}

/* ------------------------------------------------------------------------ */
/* Random comparisons                                                        */

typedef struct {
  attn_reduce_op op;
  double corr, p;
} variant;

static const variant variants[] = {
    {ATTN_SUM, 1, 2},          {ATTN_MEAN, 1, 2},   {ATTN_PROD, 1, 2}, {ATTN_MAX, 1, 2},    {ATTN_MIN, 1, 2},
    {ATTN_ARGMAX, 1, 2},       {ATTN_ARGMIN, 1, 2}, {ATTN_VAR, 1, 2},  {ATTN_VAR, 0, 2},    {ATTN_VAR, 2, 2},
    {ATTN_STD, 1, 2},          {ATTN_STD, 0.5, 2},  {ATTN_NORM, 1, 2}, {ATTN_NORM, 1, 1},   {ATTN_NORM, 1, INFINITY},
    {ATTN_NORM, 1, -INFINITY}, {ATTN_NORM, 1, 0},   {ATTN_NORM, 1, 3}, {ATTN_NORM, 1, 0.5}, {ATTN_NORM, 1, -1},
    {ATTN_LOGSUMEXP, 1, 2},    {ATTN_ALL, 1, 2},    {ATTN_ANY, 1, 2},
};
#define NVARIANTS (int)(sizeof variants / sizeof variants[0])

static bool needs_elements(attn_reduce_op op) {
  return op == ATTN_MAX || op == ATTN_MIN || op == ATTN_ARGMAX || op == ATTN_ARGMIN;
}

static void test_random_reduce(int trials, int maxsize, int64_t maxnumel) {
  int bad = 0, runs = 0;
  for (int trial = 0; trial < trials; trial++) {
    int mode = rnd_int(3);
    attn_tensor *t = random_view(mode, maxsize, maxnumel);
    if (!t) {
      bad++;
      continue;
    }
    char desc[300];
    describe(t, desc, sizeof desc);
    int64_t numel = attn_tensor_numel(t);
    int64_t room = 1; /* outputs of a reduction over an empty dim outnumber numel */
    for (int d = 0; d < t->ndim; d++) room *= t->shape[d] ? t->shape[d] : 1;
    double *want = malloc(sizeof(double) * (size_t)room);
    int ndims = t->ndim ? t->ndim : 1;
    for (int vi = 0; vi < NVARIANTS; vi++) {
      variant v = variants[vi];
      attn_reduce_opts opts = {v.corr, v.p};
      bool exact = v.op == ATTN_MAX || v.op == ATTN_MIN || v.op == ATTN_ARGMAX || v.op == ATTN_ARGMIN ||
                   v.op == ATTN_ALL || v.op == ATTN_ANY;
      double rtol = exact ? 0 : 2e-6, atol = exact ? 0 : 1e-6;
      for (int dim = 0; dim < ndims; dim++)
        for (int keep = 0; keep < 2; keep++) {
          attn_tensor *out = NULL;
          attn_status st = attn_reduce_dim(v.op, t, dim, keep, &opts, &out);
          int64_t n = t->ndim ? t->shape[dim] : 1;
          char what[400];
          snprintf(what, sizeof what, "%s(dim %d, keepdim %d, corr %g, p %g) of %s", op_name(v.op), dim, keep, v.corr,
                   v.p, desc);
          runs++;
          if (n == 0 && needs_elements(v.op)) {
            if (st != ATTN_ERR_SHAPE || out != NULL || !strstr(attn_last_error(), op_name(v.op))) {
              fprintf(stderr, "%s: expected an error, got %d (%s)\n", what, st, attn_last_error());
              bad++;
            }
            continue;
          }
          if (st != ATTN_OK) {
            fprintf(stderr, "%s: failed: %s\n", what, attn_last_error());
            bad++;
            continue;
          }
          int64_t oshape[ATTN_MAX_DIMS];
          int ond = reduced_shape(t, dim, keep, oshape);
          ref_reduce_dim(v.op, t, dim, v.corr, v.p, want);
          if (!matches(what, out, ond, oshape, want, rtol, atol)) bad++;
          attn_tensor_release(out);
        }
      /* over everything */
      attn_tensor *out = NULL;
      attn_status st = attn_reduce_all(v.op, t, &opts, &out);
      char what[400];
      snprintf(what, sizeof what, "%s(all, corr %g, p %g) of %s", op_name(v.op), v.corr, v.p, desc);
      runs++;
      if (numel == 0 && needs_elements(v.op)) {
        if (st != ATTN_ERR_SHAPE || out != NULL) bad++;
        continue;
      }
      if (st != ATTN_OK) {
        fprintf(stderr, "%s: failed: %s\n", what, attn_last_error());
        bad++;
        continue;
      }
      double *vals = malloc(sizeof(double) * (size_t)(numel + 1));
      for (int64_t i = 0; i < numel; i++) vals[i] = attn_tensor_get_flat(t, i);
      double w = ref_vec(v.op, vals, numel, v.corr, v.p);
      /* a long sum in a different order: allow for rounding of the total */
      if (!matches(what, out, 0, NULL, &w, exact ? 0 : 1e-5, exact ? 0 : 1e-5)) bad++;
      free(vals);
      attn_tensor_release(out);
    }

    /* max_dim gives values and indices */
    for (int dim = 0; dim < ndims; dim++)
      for (int is_min = 0; is_min < 2; is_min++) {
        attn_tensor *vals = NULL, *idxs = NULL;
        attn_status st = attn_max_dim(t, dim, dim & 1, is_min, &vals, &idxs);
        int64_t n = t->ndim ? t->shape[dim] : 1;
        runs++;
        if (n == 0) {
          if (st != ATTN_ERR_SHAPE || vals || idxs) bad++;
          continue;
        }
        if (st) {
          bad++;
          continue;
        }
        int64_t oshape[ATTN_MAX_DIMS];
        int ond = reduced_shape(t, dim, dim & 1, oshape);
        ref_reduce_dim(is_min ? ATTN_MIN : ATTN_MAX, t, dim, 1, 2, want);
        if (!matches("max_dim values", vals, ond, oshape, want, 0, 0)) bad++;
        ref_reduce_dim(is_min ? ATTN_ARGMIN : ATTN_ARGMAX, t, dim, 1, 2, want);
        if (!matches("max_dim indices", idxs, ond, oshape, want, 0, 0)) bad++;
        attn_tensor_release(vals);
        attn_tensor_release(idxs);
      }

    /* softmax, log_softmax, cumsum */
    for (int which = 0; which < 3; which++)
      for (int dim = 0; dim < ndims; dim++) {
        attn_tensor *out = NULL;
        attn_status st = which == 0   ? attn_softmax(t, dim, &out)
                         : which == 1 ? attn_log_softmax(t, dim, &out)
                                      : attn_cumsum(t, dim, &out);
        char what[400];
        snprintf(what, sizeof what, "%s(dim %d) of %s",
                 which == 0   ? "softmax"
                 : which == 1 ? "log_softmax"
                              : "cumsum",
                 dim, desc);
        runs++;
        if (st) {
          fprintf(stderr, "%s: failed: %s\n", what, attn_last_error());
          bad++;
          continue;
        }
        ref_along_dim(which, t, dim, want);
        if (!matches(what, out, t->ndim, t->shape, want, which == 0 ? 0 : 2e-6, which == 0 ? 1e-6 : 2e-6)) bad++;
        attn_tensor_release(out);
      }
    free(want);
    attn_tensor_release(t);
  }
  printf("random: %d comparisons on %d tensors, %d failed\n", runs, trials, bad);
  CHECK(bad == 0);
  CHECK(runs > trials * 50);
}

/* ------------------------------------------------------------------------ */
/* Fixed cases                                                               */

static attn_tensor *from(int ndim, const int64_t *shape, const float *data) {
  attn_tensor *t = NULL;
  CHECK_OK(attn_from_data(ndim, shape, data, &t));
  return t;
}

static float scalar_of(attn_tensor *t) { return attn_tensor_get_flat(t, 0); }

static void test_basic_values(void) {
  int64_t s23[2] = {2, 3};
  float d[6] = {1, 5, 3, 4, 2, 6};
  attn_tensor *t = from(2, s23, d), *o = NULL, *ix = NULL;
  attn_reduce_opts opts = {1, 2};

  CHECK_OK(attn_reduce_dim(ATTN_SUM, t, 1, false, NULL, &o));
  CHECK(o->ndim == 1 && o->shape[0] == 2);
  CHECK(attn_tensor_data(o)[0] == 9 && attn_tensor_data(o)[1] == 12);
  attn_tensor_release(o);

  CHECK_OK(attn_reduce_dim(ATTN_MEAN, t, 0, true, NULL, &o));
  CHECK(o->ndim == 2 && o->shape[0] == 1 && o->shape[1] == 3);
  CHECK(attn_tensor_data(o)[0] == 2.5f && attn_tensor_data(o)[1] == 3.5f && attn_tensor_data(o)[2] == 4.5f);
  attn_tensor_release(o);

  CHECK_OK(attn_reduce_all(ATTN_ARGMAX, t, NULL, &o));
  CHECK(o->ndim == 0 && scalar_of(o) == 5);
  attn_tensor_release(o);
  CHECK_OK(attn_reduce_all(ATTN_ARGMIN, t, NULL, &o));
  CHECK(scalar_of(o) == 0);
  attn_tensor_release(o);

  CHECK_OK(attn_max_dim(t, 1, false, false, &o, &ix));
  CHECK(attn_tensor_data(o)[0] == 5 && attn_tensor_data(o)[1] == 6);
  CHECK(attn_tensor_get_flat(ix, 0) == 1 && attn_tensor_get_flat(ix, 1) == 2);
  attn_tensor_release(o);
  attn_tensor_release(ix);

  CHECK_OK(attn_reduce_all(ATTN_VAR, t, NULL, &o)); /* mean 3.5, ss 17.5, /5 */
  CHECK_NEAR(scalar_of(o), 3.5, 1e-6);
  attn_tensor_release(o);
  opts.correction = 0;
  CHECK_OK(attn_reduce_all(ATTN_STD, t, &opts, &o));
  CHECK_NEAR(scalar_of(o), sqrt(17.5 / 6), 1e-6);
  attn_tensor_release(o);
  opts.p = 3;
  CHECK_OK(attn_reduce_all(ATTN_NORM, t, &opts, &o));
  CHECK_NEAR(scalar_of(o), cbrt(1 + 125 + 27 + 64 + 8 + 216), 1e-5);
  attn_tensor_release(o);
  CHECK_OK(attn_reduce_all(ATTN_PROD, t, NULL, &o));
  CHECK(scalar_of(o) == 720);
  attn_tensor_release(o);
  CHECK_OK(attn_cumsum(t, 0, &o));
  CHECK(attn_tensor_data(o)[3] == 5 && attn_tensor_data(o)[5] == 9);
  attn_tensor_release(o);

  /* the input is untouched */
  for (int i = 0; i < 6; i++) CHECK(attn_tensor_data(t)[i] == d[i]);
  attn_tensor_release(t);

  /* 0-d: dim 0 is the only dim, keepdim keeps it 0-d */
  attn_tensor *s = NULL;
  CHECK_OK(attn_scalar(3, &s));
  CHECK_OK(attn_reduce_dim(ATTN_SUM, s, 0, true, NULL, &o));
  CHECK(o->ndim == 0 && scalar_of(o) == 3);
  attn_tensor_release(o);
  CHECK_OK(attn_max_dim(s, 0, false, false, &o, &ix));
  CHECK(o->ndim == 0 && scalar_of(o) == 3 && scalar_of(ix) == 0);
  attn_tensor_release(o);
  attn_tensor_release(ix);
  CHECK_OK(attn_reduce_dim(ATTN_VAR, s, 0, false, NULL, &o));
  CHECK(isnan(scalar_of(o)));
  attn_tensor_release(o);
  CHECK_OK(attn_softmax(s, 0, &o));
  CHECK(o->ndim == 0 && scalar_of(o) == 1);
  attn_tensor_release(o);
  CHECK_OK(attn_cumsum(s, 0, &o));
  CHECK(o->ndim == 0 && scalar_of(o) == 3);
  attn_tensor_release(o);
  attn_tensor_release(s);
}

static void test_nan_inf(void) {
  int64_t s4[1] = {4};
  float d[4] = {1, NAN, 3, NAN};
  attn_tensor *t = from(1, s4, d), *o = NULL, *ix = NULL;
  attn_reduce_op ops[] = {ATTN_MAX, ATTN_MIN};
  for (int i = 0; i < 2; i++) {
    CHECK_OK(attn_reduce_all(ops[i], t, NULL, &o));
    CHECK(isnan(scalar_of(o)));
    attn_tensor_release(o);
  }
  CHECK_OK(attn_reduce_all(ATTN_ARGMAX, t, NULL, &o));
  CHECK(scalar_of(o) == 1);
  attn_tensor_release(o);
  CHECK_OK(attn_max_dim(t, 0, false, true, &o, &ix));
  CHECK(isnan(scalar_of(o)) && scalar_of(ix) == 1);
  attn_tensor_release(o);
  attn_tensor_release(ix);
  CHECK_OK(attn_reduce_all(ATTN_ALL, t, NULL, &o)); /* NaN is non-zero */
  CHECK(scalar_of(o) == 1);
  attn_tensor_release(o);
  attn_tensor_release(t);

  /* logsumexp: all -inf gives -inf, any +inf gives +inf */
  float a[2] = {-INFINITY, -INFINITY}, b[2] = {INFINITY, 1};
  int64_t s2[1] = {2};
  attn_tensor *ta = from(1, s2, a), *tb = from(1, s2, b);
  CHECK_OK(attn_reduce_all(ATTN_LOGSUMEXP, ta, NULL, &o));
  CHECK(scalar_of(o) == -INFINITY);
  attn_tensor_release(o);
  CHECK_OK(attn_reduce_all(ATTN_LOGSUMEXP, tb, NULL, &o));
  CHECK(scalar_of(o) == INFINITY);
  attn_tensor_release(o);

  /* softmax: an all -inf row and a +inf entry give NaN; -inf entries 0 */
  CHECK_OK(attn_softmax(ta, 0, &o));
  CHECK(isnan(attn_tensor_data(o)[0]) && isnan(attn_tensor_data(o)[1]));
  attn_tensor_release(o);
  CHECK_OK(attn_softmax(tb, 0, &o));
  CHECK(isnan(attn_tensor_data(o)[0]) && isnan(attn_tensor_data(o)[1]));
  attn_tensor_release(o);
  CHECK_OK(attn_log_softmax(ta, 0, &o));
  CHECK(isnan(attn_tensor_data(o)[0]));
  attn_tensor_release(o);
  attn_tensor_release(ta);
  attn_tensor_release(tb);

  float c[3] = {-INFINITY, 1, 1e4f};
  int64_t s3[1] = {3};
  attn_tensor *tc = from(1, s3, c);
  CHECK_OK(attn_softmax(tc, 0, &o));
  CHECK(attn_tensor_data(o)[0] == 0 && attn_tensor_data(o)[1] == 0 && attn_tensor_data(o)[2] == 1);
  attn_tensor_release(o);
  CHECK_OK(attn_log_softmax(tc, 0, &o));
  CHECK(attn_tensor_data(o)[0] == -INFINITY);
  CHECK_NEAR(attn_tensor_data(o)[1], 1 - 1e4, 1e-3);
  CHECK(attn_tensor_data(o)[2] == 0);
  attn_tensor_release(o);
  attn_tensor_release(tc);
}

/* Softmax over logits spread across exp's whole range, long rows (lane
   loops and tails) along the last dim (rows) and the first (columns). */
static void test_softmax_range(void) {
  for (int n = 1; n <= 70; n += 3) {
    int64_t shape[2] = {3, n};
    attn_tensor *t = NULL, *tt = NULL, *o = NULL, *ot = NULL;
    CHECK_OK(attn_empty(2, shape, &t));
    float *p = attn_tensor_data(t);
    for (int64_t i = 0; i < 3 * n; i++) p[i] = (float)(rnd_unif() * 200 - 150);
    CHECK_OK(attn_softmax(t, 1, &o));
    CHECK_OK(attn_transpose(t, 0, 1, &tt));
    CHECK_OK(attn_softmax(tt, 0, &ot)); /* [n, 3] strided like columns */
    double *want = malloc(sizeof(double) * 3 * (size_t)n);
    ref_along_dim(0, t, 1, want);
    CHECK(matches("softmax range rows", o, 2, shape, want, 0, 1e-6));
    /* columns of ot are the rows of o */
    bool same = true;
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < n; j++) same = same && close_to(attn_tensor_data(ot)[j * 3 + i], want[i * n + j], 0, 1e-6);
    CHECK(same);
    free(want);
    attn_tensor_release(t);
    attn_tensor_release(tt);
    attn_tensor_release(o);
    attn_tensor_release(ot);
  }
}

static void test_empty(void) {
  int64_t s03[2] = {0, 3};
  attn_tensor *e = NULL, *o = NULL, *ix = NULL;
  CHECK_OK(attn_zeros(2, s03, &e));
  struct {
    attn_reduce_op op;
    float want;
  } cases[] = {{ATTN_SUM, 0},
               {ATTN_PROD, 1},
               {ATTN_MEAN, NAN},
               {ATTN_VAR, NAN},
               {ATTN_NORM, 0},
               {ATTN_STD, NAN},
               {ATTN_LOGSUMEXP, -INFINITY},
               {ATTN_ALL, 1},
               {ATTN_ANY, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CHECK_OK(attn_reduce_dim(cases[i].op, e, 0, false, NULL, &o));
    CHECK(o->ndim == 1 && o->shape[0] == 3);
    CHECK(close_to(attn_tensor_get_flat(o, 2), cases[i].want, 0, 0));
    attn_tensor_release(o);
    CHECK_OK(attn_reduce_all(cases[i].op, e, NULL, &o));
    CHECK(close_to(scalar_of(o), cases[i].want, 0, 0));
    attn_tensor_release(o);
  }
  /* no identity: errors that name the op, outputs untouched */
  o = NULL;
  CHECK(attn_reduce_dim(ATTN_MAX, e, 0, false, NULL, &o) == ATTN_ERR_SHAPE && o == NULL);
  CHECK(strstr(attn_last_error(), "max:") && strstr(attn_last_error(), "[0,3]"));
  CHECK(attn_reduce_dim(ATTN_ARGMIN, e, 0, true, NULL, &o) == ATTN_ERR_SHAPE && o == NULL);
  CHECK(strstr(attn_last_error(), "argmin:") != NULL);
  CHECK(attn_max_dim(e, 0, false, true, &o, &ix) == ATTN_ERR_SHAPE && o == NULL && ix == NULL);
  CHECK(strstr(attn_last_error(), "min:") != NULL);
  CHECK(attn_reduce_all(ATTN_MAX, e, NULL, &o) == ATTN_ERR_SHAPE && o == NULL);
  CHECK(strstr(attn_last_error(), "max:") && strstr(attn_last_error(), "empty"));
  /* ... but over the non-empty dim the result is just empty */
  CHECK_OK(attn_max_dim(e, 1, false, false, &o, &ix));
  CHECK(o->ndim == 1 && o->shape[0] == 0 && ix->shape[0] == 0);
  attn_tensor_release(o);
  attn_tensor_release(ix);
  CHECK_OK(attn_softmax(e, 0, &o));
  CHECK(o->ndim == 2 && o->shape[0] == 0);
  attn_tensor_release(o);
  attn_tensor_release(e);
}

static void test_errors(void) {
  int64_t s23[2] = {2, 3};
  attn_tensor *t = NULL, *o = NULL, *ix = NULL;
  CHECK_OK(attn_ones(2, s23, &t));
  CHECK(attn_reduce_dim(ATTN_SUM, t, 2, false, NULL, &o) == ATTN_ERR_INDEX && o == NULL);
  CHECK(strstr(attn_last_error(), "sum:") && strstr(attn_last_error(), "dim 2"));
  CHECK(attn_reduce_dim(ATTN_MEAN, t, -1, false, NULL, &o) == ATTN_ERR_INDEX && o == NULL);
  CHECK(attn_max_dim(t, 5, false, false, &o, &ix) == ATTN_ERR_INDEX && o == NULL && ix == NULL);
  CHECK(attn_cumsum(t, 2, &o) == ATTN_ERR_INDEX && o == NULL);
  CHECK(strstr(attn_last_error(), "cumsum:") != NULL);
  CHECK(attn_softmax(t, -1, &o) == ATTN_ERR_INDEX && o == NULL);
  CHECK(strstr(attn_last_error(), "softmax:") != NULL);
  CHECK(attn_log_softmax(t, 3, &o) == ATTN_ERR_INDEX && o == NULL);
  CHECK(strstr(attn_last_error(), "log_softmax:") != NULL);
  attn_reduce_opts bad = {1, NAN};
  CHECK(attn_reduce_all(ATTN_NORM, t, &bad, &o) == ATTN_ERR_ARG && o == NULL);
  CHECK(strstr(attn_last_error(), "norm:") != NULL);
  bad.correction = INFINITY;
  CHECK(attn_reduce_dim(ATTN_VAR, t, 0, false, &bad, &o) == ATTN_ERR_ARG && o == NULL);
  CHECK(attn_reduce_all((attn_reduce_op)99, t, NULL, &o) == ATTN_ERR_ARG && o == NULL);
  CHECK(attn_reduce_all(ATTN_REDUCE_OP_COUNT, t, NULL, &o) == ATTN_ERR_ARG && o == NULL);
  attn_tensor *s = NULL;
  CHECK_OK(attn_scalar(1, &s));
  CHECK(attn_reduce_dim(ATTN_SUM, s, 1, false, NULL, &o) == ATTN_ERR_INDEX && o == NULL);
  attn_tensor_release(s);
  attn_tensor_release(t);
}

/* Sums of 1e6 float elements stay accurate to float precision, along rows
   (unit stride), along columns and over everything. */
static void test_accuracy(void) {
  const int64_t n = 1000000;
  int64_t shape[2] = {n, 2};
  attn_tensor *t = NULL, *tt = NULL, *o = NULL;
  CHECK_OK(attn_empty(2, shape, &t));
  float *p = attn_tensor_data(t);
  double s0 = 0, s1 = 0, q0 = 0;
  for (int64_t i = 0; i < n; i++) {
    p[2 * i] = 0.1f + (float)(i % 7) * 1e-3f;
    p[2 * i + 1] = (float)rnd_normal() + 1;
    s0 += p[2 * i];
    s1 += p[2 * i + 1];
  }
  double mean0 = s0 / n;
  for (int64_t i = 0; i < n; i++) q0 += (p[2 * i] - mean0) * (p[2 * i] - mean0);
  CHECK_OK(attn_reduce_dim(ATTN_SUM, t, 0, false, NULL, &o)); /* columns */
  CHECK(fabs(attn_tensor_data(o)[0] - s0) <= 1e-7 * fabs(s0));
  CHECK(fabs(attn_tensor_data(o)[1] - s1) <= 1e-7 * fabs(s1));
  attn_tensor_release(o);
  CHECK_OK(attn_transpose(t, 0, 1, &tt));
  CHECK_OK(attn_contiguous(tt, &o)); /* [2, n] contiguous: rows */
  attn_tensor *rows = o, *r = NULL;
  CHECK_OK(attn_reduce_dim(ATTN_SUM, rows, 1, false, NULL, &r));
  CHECK(fabs(attn_tensor_data(r)[0] - s0) <= 1e-7 * fabs(s0));
  attn_tensor_release(r);
  CHECK_OK(attn_reduce_dim(ATTN_VAR, rows, 1, false, NULL, &r));
  CHECK(fabs(attn_tensor_data(r)[0] - q0 / (n - 1)) <= 1e-6 * q0 / (n - 1));
  attn_tensor_release(r);
  CHECK_OK(attn_reduce_dim(ATTN_MEAN, tt, 1, false, NULL, &r)); /* strided rows */
  CHECK(fabs(attn_tensor_data(r)[0] - mean0) <= 1e-7 * mean0);
  attn_tensor_release(r);
  CHECK_OK(attn_reduce_all(ATTN_SUM, t, NULL, &r));
  CHECK(fabs(scalar_of(r) - (s0 + s1)) <= 1e-7 * fabs(s0 + s1));
  attn_tensor_release(r);
  CHECK_OK(attn_cumsum(rows, 1, &r));
  CHECK(fabs(attn_tensor_data(r)[n - 1] - s0) <= 1e-7 * fabs(s0));
  attn_tensor_release(r);
  attn_tensor_release(rows);
  attn_tensor_release(tt);
  attn_tensor_release(t);
}

int main(void) {
  test_basic_values();
  test_nan_inf();
  test_empty();
  test_errors();
  test_softmax_range();
  test_accuracy();
  test_random_reduce(300, 7, 1000);
  test_random_reduce(60, 40, 6000); /* long rows: lane loops and their tails */
  return check_summary();
}
