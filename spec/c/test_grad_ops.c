/* SPDX-License-Identifier: MIT */
/* Gradients of the reductions, cumsum, softmax/log_softmax and shape ops.
 *
 *  - gradcheck: the analytic gradient of L = sum(op(x) * w) (w random) is
 *    compared with central finite differences of L computed in double from
 *    the float outputs, on random shapes (0-d to 4-d), random dims and
 *    keepdim, and contiguous, permuted and stepped (non-contiguous) leaves.
 *    Inputs are drawn so that the op is smooth around them (distinct
 *    values, away from zero, where ties or kinks matter).
 *  - grad_fn names as torch 1.13 prints them; results of argmax/argmin/
 *    all/any, max indices and one_hot never require grad; no node under
 *    grad mode off.
 *  - exact values from torch 1.13 (the snippet that produced them is in a
 *    comment beside each): zero-safe prod, ties of max/min, NaN and -inf
 *    rows, the norm family, std at zero, ...
 *  - graphs are freed: after each backward the leaves are referenced only
 *    by the test again, and 10,000 graphs built and backpropagated in a
 *    loop leave the heap where it was.
 *  - random in-place fills refuse tensors that require grad and bump the
 *    storage version.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "attn.h"
#include "check.h"
#include "ops/ops.h"

/* ------------------------------------------------------------------------ */
/* Random numbers                                                            */

#define RNG_SEED 0x2545F4914F6CDD1Dull
#include "rng.h"

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */

static void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
}

enum { V_NORMAL, V_DISTINCT, V_PROD, V_PROD_ZEROS };

/* n values for a mode:
   V_NORMAL:     uniform in [-2, 2]
   V_DISTINCT:   +-(0.1 + 0.05 k) for a permutation k of 0..n-1: distinct
                 values and magnitudes, 0.05 apart, none near 0 (max/min,
                 norms, |x|)
   V_PROD:       magnitudes in [0.6, 1.4], random signs (products)
   V_PROD_ZEROS: V_PROD with about a third exact zeros (prod is linear in
                 each element, so finite differences stay exact) */
static void draw_values(int mode, int64_t n, float *v) {
  if (mode == V_DISTINCT) {
    for (int64_t i = 0; i < n; i++) v[i] = (float)i;
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1));
      float t = v[i];
      v[i] = v[j];
      v[j] = t;
    }
    for (int64_t i = 0; i < n; i++) v[i] = (rnd() & 1 ? 1.0f : -1.0f) * (0.1f + 0.05f * v[i]);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (mode == V_NORMAL) {
      v[i] = (float)(4 * rnd_unif() - 2);
    } else {
      v[i] = (float)((rnd() & 1 ? 1 : -1) * (0.6 + 0.8 * rnd_unif()));
      if (mode == V_PROD_ZEROS && rnd_int(3) == 0) v[i] = 0.0f;
    }
  }
}

static attn_tensor *from(int ndim, const int64_t *shape, const float *data) {
  attn_tensor *t = NULL;
  CHECK_OK(attn_from_data(ndim, shape, data, &t));
  return t;
}

/* A leaf of the given shape and values (row-major), laid out as
   layout 0: contiguous, 1: a permuted view (dims reversed) of a base,
   2: every other element of a base along the last dim. */
static attn_tensor *make_leaf(int ndim, const int64_t *shape, const float *vals, int layout, bool requires) {
  attn_tensor *base = NULL, *t = NULL;
  int64_t bshape[ATTN_MAX_DIMS];
  if (ndim < 2 && layout == 1) layout = 0;
  if (ndim < 1) layout = 0;
  if (layout == 0) {
    CHECK_OK(attn_zeros(ndim, shape, &t));
  } else if (layout == 1) {
    int perm[ATTN_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
      bshape[d] = shape[ndim - 1 - d];
      perm[d] = ndim - 1 - d;
    }
    CHECK_OK(attn_zeros(ndim, bshape, &base));
    CHECK_OK(attn_permute(base, perm, &t));
  } else {
    memcpy(bshape, shape, sizeof(int64_t) * (size_t)ndim);
    bshape[ndim - 1] = 2 * shape[ndim - 1];
    CHECK_OK(attn_zeros(ndim, bshape, &base));
    CHECK_OK(attn_slice(base, ndim - 1, 1, bshape[ndim - 1], 2, &t));
  }
  attn_tensor_release(base);
  int64_t n = attn_tensor_numel(t), idx[ATTN_MAX_DIMS];
  for (int64_t i = 0; i < n; i++) {
    unravel(i, ndim, shape, idx);
    attn_tensor_set(t, idx, vals[i]);
  }
  if (requires) CHECK_OK(attn_requires_grad_(t, true));
  return t;
}

static attn_tensor *random_leaf(int ndim, const int64_t *shape, int mode, bool requires) {
  int64_t n = attn__shape_numel(ndim, shape);
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  draw_values(mode, n, v);
  attn_tensor *t = make_leaf(ndim, shape, v, rnd_int(3), requires);
  free(v);
  return t;
}

static void random_shape(int minnd, int maxnd, int maxsize, int *ndim, int64_t *shape) {
  *ndim = minnd + rnd_int(maxnd - minnd + 1);
  for (int d = 0; d < *ndim; d++) shape[d] = 1 + rnd_int(maxsize);
}

/* A dim drawn from [-ndim, ndim) and wrapped as the Lua binding does (the
   C API takes 0-based dims); a 0-d tensor gets dim 0. */
static int random_dim(int ndim) {
  if (ndim == 0) return 0;
  int d = rnd_int(2 * ndim) - ndim;
  return d < 0 ? d + ndim : d;
}

/* ------------------------------------------------------------------------ */
/* The ops under test, behind one signature                                  */

typedef enum {
  OP_REDUCE_DIM,
  OP_REDUCE_ALL,
  OP_MAX_DIM,
  OP_CUMSUM,
  OP_SOFTMAX,
  OP_LOG_SOFTMAX,
  OP_TRIL,
  OP_TRIU,
  OP_CAT,
  OP_STACK,
  OP_INDEX_SELECT,
  OP_GATHER,
  OP_SPLIT,
  OP_SPLIT_SIZES,
  OP_CHUNK,
  OP_REPEAT,
  OP_FLIP
} op_kind;

typedef struct {
  op_kind kind;
  attn_reduce_op rop;
  int dim;
  bool keepdim, is_min;
  attn_reduce_opts opts;
  int64_t k;                   /* tril/triu diagonal, split size, chunks */
  attn_tensor *index;          /* index_select / gather */
  int nlist;                   /* split_sizes count, flip dims, repeat count */
  int64_t list[ATTN_MAX_DIMS]; /* split sizes, reps */
  int dims[ATTN_MAX_DIMS];     /* flip */
} op_ctx;

/* pieces p_i -> cat(p_i * (i + 1)) so that each piece gets its own gradient */
static attn_status join_pieces(int n, attn_tensor **p, int dim, attn_tensor **out) {
  attn_tensor **q = calloc((size_t)n, sizeof *q);
  attn_status st = ATTN_OK;
  for (int i = 0; i < n && st == ATTN_OK; i++) st = attn_binary_scalar(ATTN_MUL, p[i], (float)(i + 1), false, &q[i]);
  if (st == ATTN_OK) st = attn_cat(n, (const attn_tensor *const *)q, dim, out);
  for (int i = 0; i < n; i++) {
    attn_tensor_release(q[i]);
    attn_tensor_release(p[i]);
  }
  free(q);
  free(p);
  return st;
}

static attn_status run_op(const op_ctx *c, int nin, attn_tensor *const *in, attn_tensor **out) {
  const attn_tensor *x = in[0];
  attn_tensor **pieces = NULL, *idx = NULL;
  int n = 0;
  attn_status st;
  switch (c->kind) {
  case OP_REDUCE_DIM: return attn_reduce_dim(c->rop, x, c->dim, c->keepdim, &c->opts, out);
  case OP_REDUCE_ALL: return attn_reduce_all(c->rop, x, &c->opts, out);
  case OP_MAX_DIM:
    st = attn_max_dim(x, c->dim, c->keepdim, c->is_min, out, &idx);
    if (st == ATTN_OK && attn_requires_grad(idx)) st = attn_set_error(ATTN_ERR_STATE, "indices require grad");
    attn_tensor_release(idx);
    return st;
  case OP_CUMSUM: return attn_cumsum(x, c->dim, out);
  case OP_SOFTMAX: return attn_softmax(x, c->dim, out);
  case OP_LOG_SOFTMAX: return attn_log_softmax(x, c->dim, out);
  case OP_TRIL: return attn_tril(x, c->k, out);
  case OP_TRIU: return attn_triu(x, c->k, out);
  case OP_CAT: return attn_cat(nin, (const attn_tensor *const *)in, c->dim, out);
  case OP_STACK: return attn_stack(nin, (const attn_tensor *const *)in, c->dim, out);
  case OP_INDEX_SELECT: return attn_index_select(x, c->dim, c->index, out);
  case OP_GATHER: return attn_gather(x, c->dim, c->index, out);
  case OP_SPLIT:
  case OP_SPLIT_SIZES:
  case OP_CHUNK:
    if (c->kind == OP_SPLIT)
      st = attn_split(x, c->k, c->dim, &n, &pieces);
    else if (c->kind == OP_CHUNK)
      st = attn_chunk(x, c->k, c->dim, &n, &pieces);
    else
      st = attn_split_sizes(x, c->nlist, c->list, c->dim, &n, &pieces);
    if (st) return st;
    return join_pieces(n, pieces, c->dim, out);
  case OP_REPEAT: return attn_repeat(x, c->nlist, c->list, out);
  case OP_FLIP: return attn_flip(x, c->nlist, c->dims, out);
  }
  return ATTN_ERR_ARG;
}

/* L = sum(y * w) in double, forward under no_grad */
static double loss(const op_ctx *c, int nin, attn_tensor *const *in, const attn_tensor *w) {
  bool prev = attn_set_grad_enabled(false);
  attn_tensor *y = NULL;
  attn_status st = run_op(c, nin, in, &y);
  attn_set_grad_enabled(prev);
  if (st) {
    fprintf(stderr, "forward failed: %s\n", attn_last_error());
    return NAN;
  }
  double s = 0;
  int64_t n = attn_tensor_numel(y);
  for (int64_t i = 0; i < n; i++) s += (double)attn_tensor_get_flat(y, i) * attn_tensor_get_flat(w, i);
  attn_tensor_release(y);
  return s;
}

static int gradchecks_run, gradchecks_failed;
static double worst_err;

/* Runs op on inputs (leaves; those that require grad are checked), checks
   the grad_fn name, backpropagates a random w and compares each gradient
   with central differences.  Afterwards the graph must be gone: every
   input referenced once and its storage as often as before. */
static void gradcheck(const char *label, const op_ctx *c, int nin, attn_tensor **in, const char *name) {
  const double eps = 1e-3, tol = 1e-2;
  long storage_refs[16];
  for (int k = 0; k < nin; k++) storage_refs[k] = in[k]->storage->refcount;
  attn_tensor *y = NULL;
  attn_status st = run_op(c, nin, in, &y);
  CHECK_OK(st);
  if (st) {
    fprintf(stderr, "  in %s\n", label);
    return;
  }
  gradchecks_run++;
  bool ok = true;
  const char *got = attn_grad_fn_name(y);
  if (name && (!got || strcmp(got, name) != 0)) {
    fprintf(stderr, "%s: grad_fn %s, expected %s\n", label, got ? got : "(none)", name);
    ok = false;
  }
  attn_tensor *w = NULL;
  CHECK_OK(attn_empty(y->ndim, y->shape, &w));
  {
    float *wp = attn_tensor_data(w);
    for (int64_t i = 0; i < attn_tensor_numel(w); i++) wp[i] = (float)(2 * rnd_unif() - 1);
  }
  CHECK_OK(attn_backward(y, w, false));
  attn_tensor_release(y);
  for (int k = 0; k < nin; k++) {
    if (!attn_requires_grad(in[k])) {
      if (attn_grad(in[k])) {
        fprintf(stderr, "%s: input %d got a gradient without requiring one\n", label, k);
        ok = false;
      }
      continue;
    }
    const attn_tensor *gr = attn_grad(in[k]);
    if (!gr || !attn_same_shape(gr, in[k])) {
      fprintf(stderr, "%s: input %d has no gradient of its shape\n", label, k);
      ok = false;
      continue;
    }
    int64_t n = attn_tensor_numel(in[k]), idx[ATTN_MAX_DIMS];
    for (int64_t i = 0; i < n; i++) {
      unravel(i, in[k]->ndim, in[k]->shape, idx);
      float orig = attn_tensor_get(in[k], idx);
      float xp = (float)(orig + eps), xm = (float)(orig - eps);
      attn_tensor_set(in[k], idx, xp);
      double lp = loss(c, nin, in, w);
      attn_tensor_set(in[k], idx, xm);
      double lm = loss(c, nin, in, w);
      attn_tensor_set(in[k], idx, orig);
      double num = (lp - lm) / ((double)xp - (double)xm), ana = attn_tensor_get_flat(gr, i);
      double err = fabs(ana - num) / (1 + fabs(num));
      if (!(err <= tol)) {
        fprintf(stderr, "%s: input %d element %lld: analytic %.7g, numeric %.7g\n", label, k, (long long)i, ana, num);
        ok = false;
        break;
      }
      if (err > worst_err) worst_err = err;
    }
    CHECK_OK(attn_set_grad(in[k], NULL));
  }
  attn_tensor_release(w);
  for (int k = 0; k < nin; k++)
    if (in[k]->refcount != 1 || in[k]->storage->refcount != storage_refs[k]) {
      fprintf(stderr, "%s: input %d still referenced by the graph (%ld refs, storage %ld, was %ld)\n", label, k,
              in[k]->refcount, in[k]->storage->refcount, storage_refs[k]);
      ok = false;
    }
  if (!ok) gradchecks_failed++;
  CHECK(ok);
}

static void release_all(int n, attn_tensor **in) {
  for (int i = 0; i < n; i++) attn_tensor_release(in[i]);
}

/* ------------------------------------------------------------------------ */
/* Random gradchecks per op                                                  */

static const char *reduce_label[ATTN_REDUCE_OP_COUNT] = {"sum", "mean", "prod", "max",       "min", "argmax", "argmin",
                                                         "var", "std",  "norm", "logsumexp", "all", "any"};

static const char *reduce_node_name(attn_reduce_op op, bool all) {
  switch (op) {
  case ATTN_SUM: return all ? "SumBackward0" : "SumBackward1";
  case ATTN_MEAN: return all ? "MeanBackward0" : "MeanBackward1";
  case ATTN_PROD: return all ? "ProdBackward0" : "ProdBackward1";
  case ATTN_MAX: return all ? "MaxBackward1" : "AmaxBackward0";
  case ATTN_MIN: return all ? "MinBackward1" : "AminBackward0";
  case ATTN_VAR: return "VarBackward0";
  case ATTN_STD: return "StdBackward0";
  case ATTN_NORM: return "NormBackward1";
  case ATTN_LOGSUMEXP: return "LogsumexpBackward0";
  default: return NULL;
  }
}

static void test_reductions(void) {
  const attn_reduce_op ops[] = {ATTN_SUM, ATTN_MEAN, ATTN_PROD, ATTN_MAX,      ATTN_MIN,
                                ATTN_VAR, ATTN_STD,  ATTN_NORM, ATTN_LOGSUMEXP};
  const double ps[] = {2, 1, INFINITY, -INFINITY, 3, 1.5, 0.5, -1.5, 0};
  char label[160];
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
    attn_reduce_op op = ops[o];
    for (int trial = 0; trial < 40; trial++) {
      int ndim;
      int64_t shape[ATTN_MAX_DIMS] = {0}; /* the label prints 4 sizes whatever ndim */
      random_shape(0, 4, 3, &ndim, shape);
      bool all = trial % 3 == 0;
      op_ctx c = {.kind = all ? OP_REDUCE_ALL : OP_REDUCE_DIM,
                  .rop = op,
                  .dim = random_dim(ndim),
                  .keepdim = rnd_int(2),
                  .opts = {1.0, 2.0}};
      int64_t n = all ? attn__shape_numel(ndim, shape) : (ndim ? shape[c.dim] : 1);
      int mode = V_NORMAL;
      if (op == ATTN_MAX || op == ATTN_MIN || op == ATTN_NORM) mode = V_DISTINCT;
      if (op == ATTN_PROD) mode = trial % 2 ? V_PROD_ZEROS : V_PROD;
      if (op == ATTN_NORM) c.opts.p = ps[trial % (sizeof ps / sizeof *ps)];
      if (op == ATTN_VAR || op == ATTN_STD) {
        const double corr[] = {1, 0, 0.5, 2};
        c.opts.correction = corr[trial % 4];
        if (c.opts.correction >= (double)n) c.opts.correction = 0; /* dof > 0 here; dof <= 0 below */
        mode = V_DISTINCT;
      }
      attn_tensor *x = random_leaf(ndim, shape, mode, true);
      snprintf(label, sizeof label, "%s %s dim %d keepdim %d p %g corr %g on [%lld %lld %lld %lld] nd %d",
               reduce_label[op], all ? "all" : "dim", c.dim, c.keepdim, c.opts.p, c.opts.correction,
               (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3], ndim);
      gradcheck(label, &c, 1, &x, reduce_node_name(op, all || false));
      attn_tensor_release(x);
    }
  }
  /* max/min along a dim with indices */
  for (int trial = 0; trial < 40; trial++) {
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(0, 4, 4, &ndim, shape);
    op_ctx c = {.kind = OP_MAX_DIM, .dim = random_dim(ndim), .keepdim = rnd_int(2), .is_min = trial % 2};
    attn_tensor *x = random_leaf(ndim, shape, V_DISTINCT, true);
    snprintf(label, sizeof label, "%s(dim %d, keepdim %d) nd %d", c.is_min ? "min" : "max", c.dim, c.keepdim, ndim);
    gradcheck(label, &c, 1, &x, c.is_min ? "MinBackward0" : "MaxBackward0");
    attn_tensor_release(x);
  }
}

static void test_along(void) {
  char label[128];
  const op_kind kinds[] = {OP_CUMSUM, OP_SOFTMAX, OP_LOG_SOFTMAX};
  const char *names[] = {"CumsumBackward0", "SoftmaxBackward0", "LogSoftmaxBackward0"};
  for (int k = 0; k < 3; k++)
    for (int trial = 0; trial < 40; trial++) {
      int ndim;
      int64_t shape[ATTN_MAX_DIMS];
      random_shape(0, 4, 4, &ndim, shape);
      op_ctx c = {.kind = kinds[k], .dim = random_dim(ndim)};
      attn_tensor *x = random_leaf(ndim, shape, V_NORMAL, true);
      snprintf(label, sizeof label, "%s dim %d nd %d", names[k], c.dim, ndim);
      gradcheck(label, &c, 1, &x, names[k]);
      attn_tensor_release(x);
    }
}

static void test_shape_ops(void) {
  char label[128];
  for (int trial = 0; trial < 30; trial++) { /* tril / triu */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(2, 4, 4, &ndim, shape);
    op_ctx c = {.kind = trial % 2 ? OP_TRIU : OP_TRIL, .k = rnd_int(7) - 3};
    attn_tensor *x = random_leaf(ndim, shape, V_NORMAL, true);
    snprintf(label, sizeof label, "%s k %lld nd %d", trial % 2 ? "triu" : "tril", (long long)c.k, ndim);
    gradcheck(label, &c, 1, &x, trial % 2 ? "TriuBackward0" : "TrilBackward0");
    attn_tensor_release(x);
  }
  for (int trial = 0; trial < 30; trial++) { /* cat: some inputs without grad, skipped [0] inputs */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(1, 4, 3, &ndim, shape);
    int dim = random_dim(ndim), n = 1 + rnd_int(3), m = 0;
    attn_tensor *in[8];
    for (int i = 0; i < n; i++) {
      if (rnd_int(4) == 0) {
        int64_t zero = 0;
        in[m++] = random_leaf(1, &zero, V_NORMAL, rnd_int(2));
      }
      shape[dim] = rnd_int(4); /* 0 is a legal (non-skipped) slab unless ndim is 1 */
      if (ndim == 1 && shape[dim] == 0) shape[dim] = 1;
      in[m++] = random_leaf(ndim, shape, V_NORMAL, i == 0 || rnd_int(3));
    }
    op_ctx c = {.kind = OP_CAT, .dim = dim};
    snprintf(label, sizeof label, "cat of %d dim %d nd %d", m, dim, ndim);
    gradcheck(label, &c, m, in, "CatBackward0");
    release_all(m, in);
  }
  for (int trial = 0; trial < 30; trial++) { /* stack */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(0, 3, 3, &ndim, shape);
    int n = 1 + rnd_int(3);
    attn_tensor *in[3];
    for (int i = 0; i < n; i++) in[i] = random_leaf(ndim, shape, V_NORMAL, i == 0 || rnd_int(2));
    op_ctx c = {.kind = OP_STACK, .dim = rnd_int(ndim + 1)};
    snprintf(label, sizeof label, "stack of %d dim %d nd %d", n, c.dim, ndim);
    gradcheck(label, &c, n, in, "StackBackward0");
    release_all(n, in);
  }
  for (int trial = 0; trial < 30; trial++) { /* index_select with repeated indices */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(1, 4, 4, &ndim, shape);
    op_ctx c = {.kind = OP_INDEX_SELECT, .dim = random_dim(ndim)};
    int64_t k = rnd_int(6);
    float iv[6];
    for (int64_t j = 0; j < k; j++) iv[j] = (float)rnd_int((int)shape[c.dim]);
    if (trial % 5 == 0) { /* a 0-d index counts as [1] */
      iv[0] = (float)rnd_int((int)shape[c.dim]);
      k = 1;
      c.index = from(0, NULL, iv);
    } else {
      c.index = from(1, &k, iv);
    }
    attn_tensor *x = random_leaf(ndim, shape, V_NORMAL, true);
    snprintf(label, sizeof label, "index_select dim %d k %lld nd %d", c.dim, (long long)k, ndim);
    gradcheck(label, &c, 1, &x, "IndexSelectBackward0");
    attn_tensor_release(x);
    attn_tensor_release(c.index);
  }
  for (int trial = 0; trial < 30; trial++) { /* gather, index smaller and larger along dim */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS], ishape[ATTN_MAX_DIMS];
    random_shape(1, 4, 4, &ndim, shape);
    op_ctx c = {.kind = OP_GATHER, .dim = random_dim(ndim)};
    for (int d = 0; d < ndim; d++) ishape[d] = d == c.dim ? rnd_int(6) : 1 + rnd_int((int)shape[d]);
    int64_t ni = attn__shape_numel(ndim, ishape);
    float *iv = malloc((size_t)(ni ? ni : 1) * sizeof *iv);
    for (int64_t j = 0; j < ni; j++) iv[j] = (float)rnd_int((int)shape[c.dim]);
    c.index = make_leaf(ndim, ishape, iv, rnd_int(3), false); /* contiguous or not */
    free(iv);
    attn_tensor *x = random_leaf(ndim, shape, V_NORMAL, true);
    snprintf(label, sizeof label, "gather dim %d nd %d", c.dim, ndim);
    gradcheck(label, &c, 1, &x, "GatherBackward0");
    attn_tensor_release(x);
    attn_tensor_release(c.index);
  }
  for (int trial = 0; trial < 30; trial++) { /* split / split_sizes / chunk, joined with cat */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(1, 4, 5, &ndim, shape);
    op_ctx c = {.kind = trial % 3 == 0   ? OP_SPLIT
                        : trial % 3 == 1 ? OP_CHUNK
                                         : OP_SPLIT_SIZES,
                .dim = random_dim(ndim)};
    int64_t m = shape[c.dim];
    if (c.kind == OP_SPLIT_SIZES) {
      int64_t left = m;
      c.nlist = 0;
      while (left > 0 && c.nlist < ATTN_MAX_DIMS - 1) {
        int64_t s = 1 + rnd_int((int)left);
        c.list[c.nlist++] = s;
        left -= s;
      }
      if (left > 0) c.list[c.nlist++] = left;
    } else {
      c.k = 1 + rnd_int((int)m);
    }
    attn_tensor *x = random_leaf(ndim, shape, V_NORMAL, true);
    snprintf(label, sizeof label, "split kind %d dim %d nd %d", (int)c.kind, c.dim, ndim);
    gradcheck(label, &c, 1, &x, "CatBackward0");
    attn_tensor_release(x);
  }
  for (int trial = 0; trial < 30; trial++) { /* repeat, with extra leading dims */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(0, 3, 3, &ndim, shape);
    op_ctx c = {.kind = OP_REPEAT, .nlist = ndim + rnd_int(3)};
    for (int d = 0; d < c.nlist; d++) c.list[d] = rnd_int(5) == 0 ? 0 : 1 + rnd_int(3);
    attn_tensor *x = random_leaf(ndim, shape, V_NORMAL, true);
    snprintf(label, sizeof label, "repeat nd %d by %d", ndim, c.nlist);
    gradcheck(label, &c, 1, &x, "RepeatBackward0");
    attn_tensor_release(x);
  }
  for (int trial = 0; trial < 30; trial++) { /* flip */
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(1, 4, 3, &ndim, shape);
    op_ctx c = {.kind = OP_FLIP};
    for (int d = 0; d < ndim; d++)
      if (rnd_int(2)) c.dims[c.nlist++] = d;
    attn_tensor *x = random_leaf(ndim, shape, V_NORMAL, true);
    snprintf(label, sizeof label, "flip %d dims nd %d", c.nlist, ndim);
    gradcheck(label, &c, 1, &x, "FlipBackward0");
    attn_tensor_release(x);
  }
}

/* ------------------------------------------------------------------------ */
/* Exact values from torch 1.13                                              */

/* x [r, c] row-major, op(x).backward(gy) (gy NULL: ones) vs expected */
static void exact(const char *label, const op_ctx *c, int ndim, const int64_t *shape, const float *xv, const float *gy,
                  const float *want) {
  attn_tensor *x = make_leaf(ndim, shape, xv, 0, true), *y = NULL, *g = NULL;
  CHECK_OK(run_op(c, 1, &x, &y));
  if (!y) {
    attn_tensor_release(x);
    return;
  }
  if (gy) {
    g = from(y->ndim, y->shape, gy);
  } else {
    CHECK_OK(attn_ones(y->ndim, y->shape, &g));
  }
  CHECK_OK(attn_backward(y, g, false));
  const attn_tensor *gr = attn_grad(x);
  CHECK(gr != NULL);
  bool ok = gr != NULL;
  for (int64_t i = 0; ok && i < attn_tensor_numel(x); i++) {
    double a = attn_tensor_get_flat(gr, i), e = want[i];
    bool same = isnan(e) ? isnan(a) : isinf(e) ? a == e : fabs(a - e) <= 3e-7 * fmax(1.0, fabs(e));
    if (!same) {
      fprintf(stderr, "%s: element %lld is %.9g, torch gives %.9g\n", label, (long long)i, a, e);
      ok = false;
    }
  }
  CHECK(ok);
  attn_tensor_release(g);
  attn_tensor_release(y);
  attn_tensor_release(x);
}

static void test_exact(void) {
  const float NaN = NAN, inf = INFINITY;
  const int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s3[1] = {3}, s4[1] = {4}, s22[2] = {2, 2};
  /* x = torch.tensor([[0.5,-1.25,2.0],[1.5,0.25,-0.75]]);
     gy = torch.tensor([[0.3,-0.2,0.9],[1.1,0.4,-0.6]]) */
  const float x[6] = {0.5f, -1.25f, 2.0f, 1.5f, 0.25f, -0.75f};
  const float gy[6] = {0.3f, -0.2f, 0.9f, 1.1f, 0.4f, -0.6f};
  const float gcol[2] = {0.3f, 1.1f}; /* gy[:, 0] */
  op_ctx c = {.kind = OP_SOFTMAX, .dim = 1, .opts = {1.0, 2.0}};
  /* x.softmax(1).backward(gy) */
  exact("softmax dim 1", &c, 2, s23, x, gy,
        (const float[]){-0.0813564658f, -0.0295010041f, 0.110857457f, 0.196001172f, -0.0879303515f, -0.108070828f});
  c.dim = 0; /* x.softmax(0).backward(gy) */
  exact("softmax dim 0", &c, 2, s23, x, gy,
        (const float[]){-0.157289565f, -0.0894878656f, 0.0847143605f, 0.15728952f, 0.089487873f, -0.0847143605f});
  c.kind = OP_LOG_SOFTMAX, c.dim = 1; /* x.log_softmax(1).backward(gy) */
  exact("log_softmax dim 1", &c, 2, s23, x, gy,
        (const float[]){0.123179838f, -0.230726749f, 0.107546926f, 0.453403711f, 0.214747071f, -0.668150783f});
  /* rows [-inf, 1, 2] and [-inf, -inf, -inf]: .softmax(1) / .log_softmax(1), backward(gy) */
  const float xinf[6] = {-inf, 1, 2, -inf, -inf, -inf};
  c.kind = OP_SOFTMAX;
  exact("softmax -inf rows", &c, 2, s23, xinf, gy, (const float[]){-0.0f, -0.216273129f, 0.216273129f, NaN, NaN, NaN});
  c.kind = OP_LOG_SOFTMAX;
  exact("log_softmax -inf rows", &c, 2, s23, xinf, gy,
        (const float[]){0.300000012f, -0.46894145f, 0.168941379f, NaN, NaN, NaN});

  /* torch.tensor([[2.,0,3],[0,0,4],[1,2,3]]).prod(1).backward(ones) */
  c = (op_ctx){.kind = OP_REDUCE_DIM, .rop = ATTN_PROD, .dim = 1, .opts = {1.0, 2.0}};
  exact("prod(1) with zeros", &c, 2, s33, (const float[]){2, 0, 3, 0, 0, 4, 1, 2, 3}, NULL,
        (const float[]){0, 6, 0, 0, 0, 0, 6, 3, 2});
  c.kind = OP_REDUCE_ALL; /* torch.tensor([2.,0,3]).prod(); [2.,0,0].prod() */
  exact("prod() one zero", &c, 1, s3, (const float[]){2, 0, 3}, NULL, (const float[]){0, 6, 0});
  exact("prod() two zeros", &c, 1, s3, (const float[]){2, 0, 0}, NULL, (const float[]){0, 0, 0});
  c.kind = OP_REDUCE_DIM, c.dim = 0; /* x.prod(0).backward(gy[0]) */
  exact("prod(0)", &c, 2, s23, x, gy,
        (const float[]){0.450000018f, -0.0500000007f, -0.674999952f, 0.150000006f, 0.25f, 1.79999995f});

  /* torch.tensor([1.,3,3,2]).max(); torch.tensor([1.,nan,3,nan]).min() */
  c = (op_ctx){.kind = OP_REDUCE_ALL, .rop = ATTN_MAX, .opts = {1.0, 2.0}};
  exact("max() ties", &c, 1, s4, (const float[]){1, 3, 3, 2}, NULL, (const float[]){0, 0.5f, 0.5f, 0});
  c.rop = ATTN_MIN;
  exact("min() NaN", &c, 1, s4, (const float[]){1, NaN, 3, NaN}, NULL, (const float[]){0, 0.5f, 0, 0.5f});
  /* torch.tensor([[1.,3,3],[2,2,1]]).max(1)[0]: the first index takes it */
  c = (op_ctx){.kind = OP_MAX_DIM, .dim = 1};
  exact("max(1) ties", &c, 2, s23, (const float[]){1, 3, 3, 2, 2, 1}, NULL, (const float[]){0, 1, 0, 1, 0, 0});
  /* torch.tensor([[1.,3,3],[2,2,1]]).amax(1): ties share */
  c = (op_ctx){.kind = OP_REDUCE_DIM, .rop = ATTN_MAX, .dim = 1, .opts = {1.0, 2.0}};
  exact("amax(1) ties", &c, 2, s23, (const float[]){1, 3, 3, 2, 2, 1}, NULL,
        (const float[]){0, 0.5f, 0.5f, 0.5f, 0.5f, 0});

  /* norms: torch.tensor([1.,-3,3,2]).norm(inf); [0.,1,-2].norm(3);
     x.norm(1.5, dim=1).backward(gy[:,0]); [0.,1,-2].norm(0.5);
     [[0.,0],[3,4]].norm(dim=1); [1.,-1,3,2].norm(-inf) */
  c = (op_ctx){.kind = OP_REDUCE_ALL, .rop = ATTN_NORM, .opts = {1.0, INFINITY}};
  exact("norm(inf) ties", &c, 1, s4, (const float[]){1, -3, 3, 2}, NULL, (const float[]){0, -0.5f, 0.5f, 0});
  c.opts.p = -INFINITY;
  exact("norm(-inf) ties", &c, 1, s4, (const float[]){1, -1, 3, 2}, NULL, (const float[]){0.5f, -0.5f, 0, 0});
  c.opts.p = 3;
  exact("norm(3)", &c, 1, s3, (const float[]){0, 1, -2}, NULL, (const float[]){0, 0.231120422f, -0.92448169f});
  c.opts.p = 0.5;
  exact("norm(0.5)", &c, 1, s3, (const float[]){0, 1, -2}, NULL, (const float[]){0, 2.41421366f, -1.70710683f});
  c.opts.p = 0; /* torch gives no gradient (None): zeros here */
  exact("norm(0)", &c, 1, s3, (const float[]){0, 1, -2}, NULL, (const float[]){0, 0, 0});
  c.kind = OP_REDUCE_DIM, c.dim = 1, c.opts.p = 1.5;
  exact("norm(1.5, dim 1)", &c, 2, s23, x, gcol,
        (const float[]){0.127741739f, -0.201977432f, 0.255483478f, 0.978289604f, 0.399385035f, -0.691755176f});
  c.opts.p = 2;
  exact("norm(dim 1) zero row", &c, 2, s22, (const float[]){0, 0, 3, 4}, NULL,
        (const float[]){0, 0, 0.600000024f, 0.800000012f});

  /* torch.tensor([[2.,2],[1,3]]).std(1); x.var(0, unbiased=False).backward(gy[0]); x.std() */
  c = (op_ctx){.kind = OP_REDUCE_DIM, .rop = ATTN_STD, .dim = 1, .opts = {1.0, 2.0}};
  exact("std(1) zero row", &c, 2, s22, (const float[]){2, 2, 1, 3}, NULL,
        (const float[]){0, 0, -0.707106769f, 0.707106769f});
  c.rop = ATTN_VAR, c.dim = 0, c.opts.correction = 0;
  exact("var(0, unbiased=False)", &c, 2, s23, x, gy,
        (const float[]){-0.150000006f, 0.150000006f, 1.23749995f, 0.150000006f, -0.150000006f, -1.23749995f});
  c.kind = OP_REDUCE_ALL, c.rop = ATTN_STD, c.opts.correction = 1;
  exact("std()", &c, 2, s23, x, NULL,
        (const float[]){0.0199601185f, -0.259481549f, 0.259481549f, 0.179641068f, -0.0199601185f, -0.179641068f});
  /* torch.var(x, 1, correction=3) on [[1, 2, 2.5]]: 2 / 0 = inf times the deviation */
  c = (op_ctx){.kind = OP_REDUCE_DIM, .rop = ATTN_VAR, .dim = 1, .opts = {3.0, 2.0}};
  exact("var dof 0", &c, 2, (const int64_t[]){1, 3}, (const float[]){1, 2, 2.5f}, NULL,
        (const float[]){-inf, inf, inf});

  /* x.logsumexp(1).backward(gy[:,0]); [[-inf,-inf],[1,inf]].logsumexp(1) */
  c = (op_ctx){.kind = OP_REDUCE_DIM, .rop = ATTN_LOGSUMEXP, .dim = 1, .opts = {1.0, 2.0}};
  exact("logsumexp(1)", &c, 2, s23, x, gcol,
        (const float[]){0.0530460589f, 0.00921802316f, 0.237735957f, 0.790284336f, 0.226420254f, 0.0832953528f});
  exact("logsumexp(1) inf", &c, 2, s22, (const float[]){-inf, -inf, 1, inf}, NULL, (const float[]){NaN, NaN, 0, NaN});
  /* x.mean(0).backward(gy[0]) */
  c.rop = ATTN_MEAN, c.dim = 0;
  exact("mean(0)", &c, 2, s23, x, gy,
        (const float[]){0.150000006f, -0.100000001f, 0.449999988f, 0.150000006f, -0.100000001f, 0.449999988f});
  /* x.cumsum(1).backward(gy) */
  c = (op_ctx){.kind = OP_CUMSUM, .dim = 1};
  exact("cumsum(1)", &c, 2, s23, x, gy,
        (const float[]){1, 0.699999988f, 0.899999976f, 0.899999976f, -0.200000018f, -0.600000024f});
  /* x.repeat(2,1,2).backward(torch.arange(24.).reshape(2,2,6)) */
  float ar[24];
  for (int i = 0; i < 24; i++) ar[i] = (float)i;
  c = (op_ctx){.kind = OP_REPEAT, .nlist = 3, .list = {2, 1, 2}};
  exact("repeat(2,1,2)", &c, 2, s23, x, ar, (const float[]){30, 34, 38, 54, 58, 62});
  /* x.gather(1, [[0,0],[2,1]]).backward([[1.,2],[3,4]]) */
  c = (op_ctx){.kind = OP_GATHER, .dim = 1, .index = from(2, s22, (const float[]){0, 0, 2, 1})};
  exact("gather(1)", &c, 2, s23, x, (const float[]){1, 2, 3, 4}, (const float[]){3, 0, 0, 0, 4, 3});
  attn_tensor_release(c.index);
  /* x.index_select(1, [2,0,2]).backward([[1.,2,3],[4,5,6]]) */
  c = (op_ctx){.kind = OP_INDEX_SELECT, .dim = 1, .index = from(1, s3, (const float[]){2, 0, 2})};
  exact("index_select(1)", &c, 2, s23, x, (const float[]){1, 2, 3, 4, 5, 6}, (const float[]){2, 0, 4, 5, 0, 10});
  attn_tensor_release(c.index);
}

/* ------------------------------------------------------------------------ */
/* Names, non-differentiable results, grad mode off                          */

static void check_name(const attn_tensor *t, const char *want) {
  const char *got = t ? attn_grad_fn_name(t) : NULL;
  bool ok = got && strcmp(got, want) == 0;
  if (!ok) fprintf(stderr, "grad_fn %s, expected %s\n", got ? got : "(none)", want);
  CHECK(ok);
}

static void test_names_and_modes(void) {
  const int64_t s34[2] = {3, 4};
  attn_tensor *x = random_leaf(2, s34, V_DISTINCT, true), *y = NULL, *ix = NULL;
  /* split / split_sizes / chunk pieces: torch's multi-output node names */
  int n = 0;
  attn_tensor **p = NULL;
  CHECK_OK(attn_split(x, 2, 1, &n, &p));
  for (int i = 0; i < n; i++) {
    check_name(p[i], "SplitBackward0");
    attn_tensor_release(p[i]);
  }
  free(p);
  const int64_t sizes[2] = {1, 2};
  CHECK_OK(attn_split_sizes(x, 2, sizes, 0, &n, &p));
  for (int i = 0; i < n; i++) {
    check_name(p[i], "SplitWithSizesBackward0");
    attn_tensor_release(p[i]);
  }
  free(p);
  CHECK_OK(attn_chunk(x, 3, 1, &n, &p));
  CHECK(n == 2);
  for (int i = 0; i < n; i++) {
    check_name(p[i], "SplitBackward0");
    attn_tensor_release(p[i]);
  }
  free(p);

  /* cat of skipped [0] inputs only: a [0] result whose inputs get [0] gradients */
  {
    const int64_t zero = 0;
    attn_tensor *e[2] = {random_leaf(1, &zero, V_NORMAL, true), random_leaf(1, &zero, V_NORMAL, false)}, *g = NULL;
    CHECK_OK(attn_cat(2, (const attn_tensor *const *)e, 0, &y));
    check_name(y, "CatBackward0");
    CHECK_OK(attn_zeros(1, &zero, &g));
    CHECK_OK(attn_backward(y, g, false));
    CHECK(attn_grad(e[0]) && attn_grad(e[0])->ndim == 1 && attn_grad(e[0])->shape[0] == 0 && !attn_grad(e[1]));
    attn_tensor_release(g), attn_tensor_release(y);
    release_all(2, e);
  }

  /* not differentiable: argmax/argmin/all/any, max indices, one_hot */
  const attn_reduce_op nd[4] = {ATTN_ARGMAX, ATTN_ARGMIN, ATTN_ALL, ATTN_ANY};
  for (int i = 0; i < 4; i++) {
    CHECK_OK(attn_reduce_dim(nd[i], x, 1, false, NULL, &y));
    CHECK(!attn_requires_grad(y) && attn_grad_fn_name(y) == NULL);
    attn_tensor_release(y);
    CHECK_OK(attn_reduce_all(nd[i], x, NULL, &y));
    CHECK(!attn_requires_grad(y) && attn_grad_fn_name(y) == NULL);
    attn_tensor_release(y);
  }
  attn_tensor *v = NULL;
  CHECK_OK(attn_max_dim(x, 0, true, false, &v, &ix));
  CHECK(attn_requires_grad(v) && !attn_requires_grad(ix));
  attn_tensor_release(v);
  attn_tensor_release(ix);
  /* values only: indices are computed for the graph, not handed out */
  CHECK_OK(attn_max_dim(x, 1, false, true, &v, NULL));
  check_name(v, "MinBackward0");
  attn_tensor_release(v);
  {
    const int64_t s2 = 2;
    attn_tensor *ids = from(1, &s2, (const float[]){1, 2});
    CHECK_OK(attn_requires_grad_(ids, true));
    CHECK_OK(attn_one_hot(ids, 4, &y));
    CHECK(!attn_requires_grad(y));
    attn_tensor_release(y);
    attn_tensor_release(ids);
  }

  /* grad mode off: no op records a node */
  bool prev = attn_set_grad_enabled(false);
  {
    attn_tensor *outs[24] = {0};
    int k = 0;
    const attn_reduce_op ops[9] = {ATTN_SUM, ATTN_MEAN, ATTN_PROD, ATTN_MAX,      ATTN_MIN,
                                   ATTN_VAR, ATTN_STD,  ATTN_NORM, ATTN_LOGSUMEXP};
    for (int i = 0; i < 9; i++) {
      CHECK_OK(attn_reduce_dim(ops[i], x, 1, false, NULL, &outs[k++]));
      CHECK_OK(attn_reduce_all(ops[i], x, NULL, &outs[k++]));
    }
    for (int i = 0; i < k; i++) {
      CHECK(!attn_requires_grad(outs[i]) && attn_grad_fn_name(outs[i]) == NULL);
      attn_tensor_release(outs[i]);
    }
    k = 0;
    CHECK_OK(attn_max_dim(x, 0, false, false, &outs[k], &outs[k + 1]));
    k += 2;
    CHECK_OK(attn_cumsum(x, 1, &outs[k++]));
    CHECK_OK(attn_softmax(x, 1, &outs[k++]));
    CHECK_OK(attn_log_softmax(x, 0, &outs[k++]));
    CHECK_OK(attn_tril(x, 0, &outs[k++]));
    CHECK_OK(attn_triu(x, 1, &outs[k++]));
    const attn_tensor *two[2] = {x, x};
    CHECK_OK(attn_cat(2, two, 0, &outs[k++]));
    CHECK_OK(attn_stack(2, two, 1, &outs[k++]));
    const int64_t s2 = 2;
    attn_tensor *id = from(1, &s2, (const float[]){0, 2});
    CHECK_OK(attn_index_select(x, 0, id, &outs[k++]));
    attn_tensor *gi = from(2, (const int64_t[]){1, 2}, (const float[]){0, 2});
    CHECK_OK(attn_gather(x, 0, gi, &outs[k++]));
    const int64_t reps[3] = {2, 1, 2};
    CHECK_OK(attn_repeat(x, 3, reps, &outs[k++]));
    const int dims[1] = {1};
    CHECK_OK(attn_flip(x, 1, dims, &outs[k++]));
    for (int i = 0; i < k; i++) {
      CHECK(!attn_requires_grad(outs[i]) && attn_grad_fn_name(outs[i]) == NULL);
      attn_tensor_release(outs[i]);
    }
    CHECK_OK(attn_split(x, 1, 0, &n, &p));
    for (int i = 0; i < n; i++) {
      CHECK(!attn_requires_grad(p[i]));
      attn_tensor_release(p[i]);
    }
    free(p);
    attn_tensor_release(id);
    attn_tensor_release(gi);
  }
  attn_set_grad_enabled(prev);
  CHECK(x->refcount == 1 && x->storage->refcount == 1);
  attn_tensor_release(x);
}

/* ------------------------------------------------------------------------ */
/* Graph behaviour: retain_graph, saved-tensor versions, in-place on pieces  */

static float grad_at(const attn_tensor *t, int64_t i) { return attn_tensor_get_flat(attn_grad(t), i); }

static void test_graph_rules(void) {
  const int64_t s23[2] = {2, 3};
  const float xv[6] = {0.5f, -1.25f, 2.0f, 1.5f, 0.25f, -0.75f};
  attn_tensor *x = make_leaf(2, s23, xv, 0, true), *y = NULL, *s = NULL, *w = NULL;

  /* retain_graph: twice the gradient; without it the second call fails */
  CHECK_OK(attn_log_softmax(x, 1, &y));
  CHECK_OK(attn_reduce_all(ATTN_STD, y, NULL, &s));
  CHECK_OK(attn_backward(s, NULL, true));
  float g1 = grad_at(x, 4);
  CHECK_OK(attn_backward(s, NULL, false));
  CHECK_NEAR(grad_at(x, 4), 2 * g1, 1e-6);
  CHECK(attn_backward(s, NULL, false) == ATTN_ERR_STATE);
  attn_tensor_release(s), attn_tensor_release(y);
  CHECK_OK(attn_set_grad(x, NULL));

  /* max(dim) keeps its own indices: rewriting the returned ones (the Lua
     binding makes them 1-based in place) changes nothing */
  attn_tensor *ix = NULL;
  CHECK_OK(attn_max_dim(x, 1, false, false, &y, &ix));
  for (int i = 0; i < 2; i++) attn_tensor_data(ix)[i] += 1.0f;
  CHECK_OK(attn_reduce_all(ATTN_SUM, y, NULL, &s));
  CHECK_OK(attn_backward(s, NULL, false));
  CHECK(grad_at(x, 2) == 1.0f && grad_at(x, 3) == 1.0f && grad_at(x, 0) == 0.0f && grad_at(x, 5) == 0.0f);
  attn_tensor_release(s), attn_tensor_release(y), attn_tensor_release(ix);
  CHECK_OK(attn_set_grad(x, NULL));

  /* a saved index changed in place: backward refuses */
  const int64_t s2 = 2;
  attn_tensor *idx = from(1, &s2, (const float[]){0, 2});
  CHECK_OK(attn_index_select(x, 1, idx, &y));
  CHECK_OK(attn_reduce_all(ATTN_SUM, y, NULL, &s));
  CHECK_OK(attn_random_int_(idx, 0, 3, NULL)); /* idx does not require grad: allowed, version bumped */
  CHECK(attn_backward(s, NULL, false) == ATTN_ERR_STATE);
  CHECK(strstr(attn_last_error(), "modified in place") != NULL);
  attn_tensor_release(s), attn_tensor_release(y), attn_tensor_release(idx);

  /* split pieces are views: in-place on one is refused under autograd,
     allowed under no_grad */
  int n;
  attn_tensor **p = NULL;
  attn_tensor *h = NULL;
  CHECK_OK(attn_binary_scalar(ATTN_MUL, x, 2.0f, false, &h));
  CHECK_OK(attn_chunk(h, 2, 1, &n, &p));
  CHECK(attn_binary_scalar_(ATTN_ADD, p[0], 1.0f, false) == ATTN_ERR_STATE);
  for (int i = 0; i < n; i++) attn_tensor_release(p[i]);
  free(p);
  attn_tensor_release(h);

  /* a graph dropped without backward frees itself */
  CHECK_OK(attn_softmax(x, 0, &y));
  CHECK_OK(attn_cumsum(y, 1, &s));
  CHECK(x->refcount > 1);
  attn_tensor_release(s), attn_tensor_release(y);
  CHECK(x->refcount == 1 && x->storage->refcount == 1);

  /* x * w saves w; refilling w at random bumps its version: backward refuses */
  CHECK_OK(attn_ones(2, s23, &w));
  CHECK_OK(attn_binary(ATTN_MUL, x, w, &y));
  CHECK_OK(attn_reduce_all(ATTN_SUM, y, NULL, &s));
  CHECK_OK(attn_uniform_(w, 0, 1, NULL));
  CHECK(attn_backward(s, NULL, false) == ATTN_ERR_STATE);
  attn_tensor_release(s), attn_tensor_release(y), attn_tensor_release(w);
  attn_tensor_release(x);
}

/* ------------------------------------------------------------------------ */
/* Random fills under autograd                                               */

static void test_random_fills(void) {
  const int64_t s4 = 4;
  attn_tensor *x = NULL, *y = NULL;
  CHECK_OK(attn_zeros(1, &s4, &x));
  for (int f = 0; f < 5; f++) {
    long v0 = x->storage->version;
    switch (f) {
    case 0: CHECK_OK(attn_uniform_(x, 0, 1, NULL)); break;
    case 1: CHECK_OK(attn_normal_(x, 0, 1, NULL)); break;
    case 2: CHECK_OK(attn_random_int_(x, 0, 5, NULL)); break;
    case 3: CHECK_OK(attn_bernoulli_(x, 0.5, NULL)); break;
    case 4: CHECK_OK(attn_exponential_(x, 1, NULL)); break;
    }
    CHECK(x->storage->version > v0);
  }
  /* a failing fill changes nothing, version included */
  long v0 = x->storage->version;
  CHECK(attn_uniform_(x, 1, 0, NULL) == ATTN_ERR_ARG);
  CHECK(x->storage->version == v0);

  CHECK_OK(attn_requires_grad_(x, true));
  attn_status st[5] = {attn_uniform_(x, 0, 1, NULL), attn_normal_(x, 0, 1, NULL), attn_random_int_(x, 0, 5, NULL),
                       attn_bernoulli_(x, 0.5, NULL), attn_exponential_(x, 1, NULL)};
  for (int f = 0; f < 5; f++) CHECK(st[f] == ATTN_ERR_STATE);
  CHECK(strstr(attn_last_error(), "leaf tensor that requires grad") != NULL);
  CHECK(x->storage->version == v0);
  /* a non-leaf is refused too (no node records the fill) */
  CHECK_OK(attn_binary_scalar(ATTN_MUL, x, 2.0f, false, &y));
  CHECK(attn_normal_(y, 0, 1, NULL) == ATTN_ERR_STATE);
  /* under no_grad the fill runs */
  bool prev = attn_set_grad_enabled(false);
  CHECK_OK(attn_uniform_(x, 0, 1, NULL));
  CHECK_OK(attn_normal_(y, 0, 1, NULL));
  attn_set_grad_enabled(prev);
  CHECK(x->storage->version > v0);
  attn_tensor_release(y);
  attn_tensor_release(x);
}

/* ------------------------------------------------------------------------ */
/* Memory: 10,000 graphs                                                     */

static size_t heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#else
  return 0;
#endif
}

/* One small graph through most of the ops here, then backward. */
static void one_graph(attn_tensor *x, attn_tensor *idx) {
  attn_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *v = NULL, *ix = NULL, *s = NULL;
  attn_tensor **p = NULL;
  int n = 0;
  attn_reduce_opts o = {1.0, 3.0};
  CHECK_OK(attn_softmax(x, 1, &a));
  CHECK_OK(attn_chunk(a, 2, 1, &n, &p));
  CHECK_OK(attn_cat(n, (const attn_tensor *const *)p, 0, &b));
  CHECK_OK(attn_index_select(b, 0, idx, &c));
  CHECK_OK(attn_max_dim(c, 1, true, false, &v, &ix));
  CHECK_OK(attn_reduce_dim(ATTN_NORM, c, 0, false, &o, &d));
  CHECK_OK(attn_cumsum(d, 0, &e));
  attn_tensor *parts[2] = {e, NULL};
  CHECK_OK(attn_reduce_all(ATTN_STD, v, NULL, &parts[1]));
  attn_tensor *f = NULL;
  CHECK_OK(attn_reduce_all(ATTN_SUM, parts[0], NULL, &f));
  CHECK_OK(attn_binary(ATTN_ADD, f, parts[1], &s));
  attn_tensor_release(f);
  attn_tensor_release(parts[1]);
  CHECK_OK(attn_backward(s, NULL, false));
  for (int i = 0; i < n; i++) attn_tensor_release(p[i]);
  free(p);
  attn_tensor_release(a), attn_tensor_release(b), attn_tensor_release(c), attn_tensor_release(d);
  attn_tensor_release(e), attn_tensor_release(v), attn_tensor_release(ix), attn_tensor_release(s);
}

static void test_memory(void) {
  const int64_t s[2] = {4, 6}, k = 3;
  attn_tensor *x = random_leaf(2, s, V_DISTINCT, true);
  attn_tensor *idx = from(1, &k, (const float[]){0, 3, 3});
  int before_failed = check_failed;
  for (int i = 0; i < 200; i++) one_graph(x, idx); /* warm the allocator */
  size_t h0 = heap_in_use();
  for (int i = 0; i < 10000 && check_failed == before_failed; i++) one_graph(x, idx);
  size_t h1 = heap_in_use();
  if (h0) {
    long growth = (long)h1 - (long)h0;
    printf("heap after 10,000 graphs: %+ld bytes\n", growth);
    CHECK(growth < 16 * 1024); /* one leaked node per graph would be > 1 MB */
  } else {
    printf("heap statistics unavailable: the 10,000-graph loop checks references only\n");
  }
  CHECK(x->refcount == 1 && x->storage->refcount == 1 && idx->refcount == 1 && idx->storage->refcount == 1);
  attn_tensor_release(idx);
  attn_tensor_release(x);
}

int main(void) {
  test_exact();
  test_names_and_modes();
  test_graph_rules();
  test_random_fills();
  test_reductions();
  test_along();
  test_shape_ops();
  test_memory();
  printf("%d gradchecks (%d failed), worst relative error %.3g\n", gradchecks_run, gradchecks_failed, worst_err);
  return check_summary();
}
