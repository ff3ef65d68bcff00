/* SPDX-License-Identifier: MIT */
/* Backward of the reductions, cumsum and softmax/log_softmax (torch 1.13's
 * derivative formulas, FunctionsManual.cpp).
 *
 * A reduction node has one input x [S] and output y, the reduced shape.
 * iargs: [0] op, [1] reduced dim or -1 for every element, [2] keepdim;
 * fargs: [0] correction (var/std), [1] p (norm).  Gradients are formed by
 * viewing the incoming g (and saved y) at x's rank with size 1 at the
 * reduced dims ("unreduce") and broadcasting against x.  Kernels that work
 * along the reduced dim see contiguous tensors as [outer, n, inner] blocks
 * (n the reduced dim; every element: outer = inner = 1). */
#include "backward/backward.h"
#include "kernels/kernels.h"

#include <math.h>

#define TRY(expr)                                                                                                      \
  do {                                                                                                                 \
    if ((st = (expr))) goto out;                                                                                       \
  } while (0)

#define REL(t) attn_tensor_release(t)

/* ------------------------------------------------------------------------ */
/* Geometry helpers                                                          */

static int node_dim(const attn_node *node) {
  /* a 0-d input reduced "along dim 0" is an all-reduction */
  return node->next[0].ndim == 0 ? -1 : (int)node->iargs[1];
}

/* t (reduced shape) viewed at the input's rank, size 1 where reduced. */
static attn_status unreduce(const attn_node *node, const attn_tensor *t, attn_tensor **out) {
  const attn__edge *in = &node->next[0];
  int dim = node_dim(node);
  int64_t shape[ATTN_MAX_DIMS] = {0};
  for (int d = 0; d < in->ndim; d++) shape[d] = (dim < 0 || d == dim) ? 1 : in->shape[d];
  return attn_reshape(t, in->ndim, shape, out);
}

/* [outer, n, inner] for the input's shape and the node's dim. */
static void blocks(const attn_node *node, int64_t *outer, int64_t *n, int64_t *inner) {
  const attn__edge *in = &node->next[0];
  int dim = node_dim(node);
  int64_t numel = attn__shape_numel(in->ndim, in->shape);
  if (dim < 0) {
    *outer = *inner = 1;
    *n = numel;
    return;
  }
  *outer = *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= in->shape[d];
  for (int d = dim + 1; d < in->ndim; d++) *inner *= in->shape[d];
  *n = in->shape[dim];
}

/* Contiguous copies (or retained originals) of the saved input and of the
   unreduced g and y, so that the kernels can index [outer, n, inner]. */
static attn_status contig_unreduced(const attn_node *node, const attn_tensor *t, attn_tensor **out) {
  attn_tensor *u;
  attn_status st = unreduce(node, t, &u);
  if (st) return st;
  st = attn_contiguous(u, out);
  REL(u);
  return st;
}

/* g broadcast back over the reduced dims (a stride-0 view). */
static attn_status expand_back(const attn_node *node, const attn_tensor *gk, attn_tensor **out) {
  return attn_expand(gk, node->next[0].ndim, node->next[0].shape, out);
}

/* ------------------------------------------------------------------------ */
/* sum, mean                                                                 */

attn_status attn__sum_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_tensor *gk = NULL, *t = NULL;
  attn_status st;
  TRY(unreduce(node, g, &gk));
  if (node->iargs[0] == ATTN_MEAN) {
    /* torch: sum_backward(grad) / numel, a float division */
    int64_t outer, n, inner;
    blocks(node, &outer, &n, &inner);
    TRY(attn_binary_scalar(ATTN_DIV, gk, (float)n, false, &t));
    REL(gk);
    gk = t;
    t = NULL;
  }
  st = expand_back(node, gk, &grads[0]);
out:
  REL(gk);
  REL(t);
  return st;
}

/* ------------------------------------------------------------------------ */
/* prod                                                                      */

/* The operands prod's and max's backward share: x (saved[0]) contiguous,
   g and y (saved[1]) contiguous with the reduced dim put back, and r, a
   fresh gradient of the input's shape; the caller releases what is set,
   also on failure. */
static attn_status saved_operands(attn_node *node, const attn_tensor *g, const char *fn, attn_tensor **x,
                                  attn_tensor **gk, attn_tensor **yk, attn_tensor **r) {
  const attn__edge *in = &node->next[0];
  attn_status st;
  if ((st = attn_contiguous(node->saved[0], x))) return st;
  if ((st = contig_unreduced(node, g, gk))) return st;
  if ((st = contig_unreduced(node, node->saved[1], yk))) return st;
  return attn__alloc(fn, in->ndim, in->shape, r);
}

/* torch's prod_backward: with no zero anywhere in x, g * (y / x); else the
   zero-safe form g * (exclusive cumprod * reverse exclusive cumprod), the
   cumprods accumulated in double and rounded to float like torch's CPU
   cumprod.  Over every element with two or more zeros: all zeros. */
attn_status attn__prod_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn__edge *in = &node->next[0];
  if (in->ndim == 0) { /* torch returns grad as is */
    grads[0] = attn_tensor_retain((attn_tensor *)g);
    return ATTN_OK;
  }
  attn_tensor *x = NULL, *gk = NULL, *yk = NULL, *r = NULL;
  attn_status st;
  TRY(saved_operands(node, g, "prod backward", &x, &gk, &yk, &r));
  int64_t outer, n, inner;
  blocks(node, &outer, &n, &inner);
  const float *xp = attn_tensor_data(x), *gp = attn_tensor_data(gk), *yp = attn_tensor_data(yk);
  float *rp = attn_tensor_data(r);
  int64_t numel = outer * n * inner, zeros = 0;
  for (int64_t i = 0; i < numel; i++) zeros += xp[i] == 0.0f;
  if (zeros == 0) {
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < inner; j++) {
          int64_t k = (o * n + i) * inner + j, q = o * inner + j;
          rp[k] = gp[q] * (yp[q] / xp[k]);
        }
  } else if (node_dim(node) < 0 && zeros > 1) {
    memset(rp, 0, (size_t)numel * sizeof(float));
  } else {
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < inner; j++) {
        const float *xs = xp + o * n * inner + j;
        float *rs = rp + o * n * inner + j;
        float gv = gp[o * inner + j];
        double acc = 1.0;
        for (int64_t i = 0; i < n; i++) { /* rs[i] = prod of x before i */
          rs[i * inner] = (float)acc;
          acc *= xs[i * inner];
        }
        acc = 1.0;
        for (int64_t i = n - 1; i >= 0; i--) { /* times the product after i */
          rs[i * inner] = gv * (rs[i * inner] * (float)acc);
          acc *= xs[i * inner];
        }
      }
  }
  grads[0] = r;
  r = NULL;
out:
  REL(x), REL(gk), REL(yk), REL(r);
  return st;
}

/* ------------------------------------------------------------------------ */
/* max / min                                                                 */

/* max(dim) / min(dim) with indices: g goes to the returned index (torch's
   value_selecting_reduction_backward).  saved[0]: a private copy of the
   indices (the caller may rewrite the returned ones, e.g. 1-based). */
attn_status attn__max_dim_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn__edge *in = &node->next[0];
  if (in->ndim == 0) {
    grads[0] = attn_tensor_retain((attn_tensor *)g);
    return ATTN_OK;
  }
  attn_tensor *gk = NULL, *ik = NULL, *r = NULL;
  attn_status st;
  TRY(contig_unreduced(node, g, &gk));
  TRY(contig_unreduced(node, node->saved[0], &ik));
  TRY(attn_zeros(in->ndim, in->shape, &r));
  int64_t outer, n, inner;
  blocks(node, &outer, &n, &inner);
  const float *gp = attn_tensor_data(gk), *ip = attn_tensor_data(ik);
  float *rp = attn_tensor_data(r);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t q = o * inner + j, i = (int64_t)ip[q];
      if (i >= 0 && i < n) rp[(o * n + i) * inner + j] = gp[q];
    }
  grads[0] = r;
  r = NULL;
out:
  REL(gk), REL(ik), REL(r);
  return st;
}

/* Over every element (MaxBackward1): g / count at each element equal to
   the result (or NaN when the result is NaN), 0 elsewhere: torch's
   evenly_distribute_backward.  Along a dim without indices (amax/amin,
   AmaxBackward0): (g / count) * mask per slice, torch's scale_grad_by_count. */
attn_status attn__extreme_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_tensor *x = NULL, *gk = NULL, *yk = NULL, *r = NULL;
  attn_status st;
  TRY(saved_operands(node, g, "max backward", &x, &gk, &yk, &r));
  int64_t outer, n, inner;
  blocks(node, &outer, &n, &inner);
  bool all = node_dim(node) < 0;
  const float *xp = attn_tensor_data(x), *gp = attn_tensor_data(gk), *yp = attn_tensor_data(yk);
  float *rp = attn_tensor_data(r);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      const float *xs = xp + o * n * inner + j;
      float *rs = rp + o * n * inner + j;
      float y = yp[o * inner + j], gv = gp[o * inner + j];
      bool ynan = all && y != y;
      int64_t count = 0;
      for (int64_t i = 0; i < n; i++) {
        float v = xs[i * inner];
        count += ynan ? v != v : v == y;
      }
      float share = gv / (float)count;
      for (int64_t i = 0; i < n; i++) {
        float v = xs[i * inner];
        bool hit = ynan ? v != v : v == y;
        rs[i * inner] = all ? (hit ? share : 0.0f) : share * (hit ? 1.0f : 0.0f);
      }
    }
  grads[0] = r;
  r = NULL;
out:
  REL(x), REL(gk), REL(yk), REL(r);
  return st;
}

/* ------------------------------------------------------------------------ */
/* var / std                                                                 */

/* torch's var_backward for gv, the gradient of the variance (reduced
   shape): (2 / (n - correction)) * gv * (x - mean).  Over every element a
   dof <= 0 gives gv * (x == mean ? NaN : inf). */
static attn_status var_grad(attn_node *node, const attn_tensor *gv, attn_tensor **grad) {
  const attn_tensor *x = node->saved[0];
  double corr = node->fargs[0];
  int dim = node_dim(node);
  attn_tensor *gk = NULL, *mean = NULL, *t1 = NULL, *t2 = NULL, *a = NULL, *b = NULL;
  attn_status st;
  TRY(unreduce(node, gv, &gk));
  if (dim < 0) {
    TRY(attn_reduce_all(ATTN_MEAN, x, NULL, &mean));
    double dof = (double)attn_tensor_numel(x) - corr;
    if (dof <= 0) {
      TRY(attn__binary_raw(ATTN_EQ, x, mean, &t1));
      TRY(attn_scalar(NAN, &a));
      TRY(attn_scalar(INFINITY, &b));
      TRY(attn_where(t1, a, b, &t2));
      TRY(attn_binary(ATTN_MUL, gk, t2, grad));
      goto out;
    }
    TRY(attn_binary_scalar(ATTN_MUL, gk, (float)(2.0 / dof), false, &t1));
  } else {
    TRY(attn_reduce_dim(ATTN_MEAN, x, dim, true, NULL, &mean));
    TRY(attn_binary_scalar(ATTN_MUL, gk, (float)(2.0 / ((double)x->shape[dim] - corr)), false, &t1));
  }
  TRY(attn_binary(ATTN_SUB, x, mean, &t2));
  st = attn_binary(ATTN_MUL, t1, t2, grad);
out:
  REL(gk), REL(mean), REL(t1), REL(t2), REL(a), REL(b);
  return st;
}

attn_status attn__var_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  return var_grad(node, g, &grads[0]);
}

/* std: gv = (g / (2 y)) with 0 where y == 0, then the variance's backward */
attn_status attn__std_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn_tensor *y = node->saved[1];
  attn_tensor *y2 = NULL, *q = NULL, *z = NULL, *gv = NULL;
  attn_status st;
  TRY(attn_binary_scalar(ATTN_MUL, y, 2.0f, false, &y2));
  TRY(attn_binary(ATTN_DIV, g, y2, &q));
  TRY(attn__binary_scalar_raw(ATTN_EQ, y, 0.0f, false, &z));
  TRY(attn_masked_fill(q, z, 0.0f, &gv));
  st = var_grad(node, gv, &grads[0]);
out:
  REL(y2), REL(q), REL(z), REL(gv);
  return st;
}

/* ------------------------------------------------------------------------ */
/* norm                                                                      */

/* torch's norm_backward with x, the unreduced norm yk and gradient gk:
     p = 0:     zeros (torch gives no gradient)
     p = 1:     sgn(x) * g
     p = 2:     g * (x / y), 0 where y == 0
     p = +-inf: sgn(x) * ((g / count) * mask), mask = |x| == y or NaN
     p < 1:     (sgn(x) |x|^(p-1), 0 where x == 0) * g * y^(1-p)
     p < 2:     sgn(x) |x|^(p-1) * (g / y^(p-1), 0 where y == 0)
     p >= 2:    x |x|^(p-2) * (g / y^(p-1), 0 where y == 0) */
attn_status attn__norm_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn__edge *in = &node->next[0];
  const attn_tensor *x = node->saved[0];
  double p = node->fargs[1];
  attn_tensor *gk = NULL, *yk = NULL, *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL, *sg = NULL;
  attn_status st;
  if (p == 0) return attn_zeros(in->ndim, in->shape, &grads[0]);
  TRY(unreduce(node, g, &gk));
  TRY(unreduce(node, node->saved[1], &yk));
  if (p != 2) TRY(attn_unary(ATTN_SIGN, x, &sg));
  if (p == 1) {
    st = attn_binary(ATTN_MUL, sg, gk, &grads[0]);
  } else if (p == 2) {
    TRY(attn_binary(ATTN_DIV, x, yk, &t1));
    TRY(attn__binary_scalar_raw(ATTN_EQ, yk, 0.0f, false, &t2));
    TRY(attn_masked_fill(t1, t2, 0.0f, &t3));
    st = attn_binary(ATTN_MUL, gk, t3, &grads[0]);
  } else if (isinf(p)) {
    /* mask = |x| == y or isnan(|x|); count over the reduced dims */
    TRY(attn_unary(ATTN_ABS, x, &t1));
    TRY(attn__binary_raw(ATTN_EQ, t1, yk, &t2));
    TRY(attn__binary_raw(ATTN_NE, t1, t1, &t3));
    TRY(attn_binary_(ATTN_MAXIMUM, t2, t3)); /* logical or of 0/1 */
    REL(t1), REL(t3);
    t1 = t3 = NULL;
    int dim = node_dim(node);
    if (dim < 0) {
      TRY(attn_reduce_all(ATTN_SUM, t2, NULL, &t1));
    } else {
      TRY(attn_reduce_dim(ATTN_SUM, t2, dim, true, NULL, &t1));
    }
    TRY(attn_binary(ATTN_DIV, gk, t1, &t3));
    TRY(attn_binary(ATTN_MUL, t3, t2, &t4));
    st = attn_binary(ATTN_MUL, sg, t4, &grads[0]);
  } else if (p < 1) {
    TRY(attn_unary(ATTN_ABS, x, &t1));
    TRY(attn_binary_scalar_(ATTN_POW, t1, (float)(p - 1), false));
    TRY(attn__binary_scalar_raw(ATTN_EQ, x, 0.0f, false, &t2));
    TRY(attn_masked_fill(t1, t2, 0.0f, &t3));
    REL(t1), REL(t2);
    t1 = t2 = NULL;
    TRY(attn_binary(ATTN_MUL, sg, t3, &t1)); /* self_scaled */
    TRY(attn_binary(ATTN_MUL, t1, gk, &t2));
    TRY(attn_binary_scalar(ATTN_POW, yk, (float)(1 - p), false, &t4));
    st = attn_binary(ATTN_MUL, t2, t4, &grads[0]);
  } else {
    TRY(attn_unary(ATTN_ABS, x, &t1));
    if (p < 2) {
      TRY(attn_binary_scalar_(ATTN_POW, t1, (float)(p - 1), false));
      TRY(attn_binary(ATTN_MUL, sg, t1, &t2)); /* self_scaled */
    } else {
      TRY(attn_binary_scalar_(ATTN_POW, t1, (float)(p - 2), false));
      TRY(attn_binary(ATTN_MUL, x, t1, &t2));
    }
    REL(t1);
    t1 = NULL;
    TRY(attn_binary_scalar(ATTN_POW, yk, (float)(p - 1), false, &t1));
    TRY(attn_binary(ATTN_DIV, gk, t1, &t3));
    REL(t1);
    t1 = NULL;
    TRY(attn__binary_scalar_raw(ATTN_EQ, yk, 0.0f, false, &t1));
    TRY(attn_masked_fill_(t3, t1, 0.0f)); /* scale_v */
    st = attn_binary(ATTN_MUL, t2, t3, &grads[0]);
  }
out:
  REL(gk), REL(yk), REL(t1), REL(t2), REL(t3), REL(t4), REL(sg);
  return st;
}

/* ------------------------------------------------------------------------ */
/* logsumexp                                                                 */

/* g * exp(x - y) */
attn_status attn__logsumexp_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_tensor *gk = NULL, *yk = NULL, *t = NULL;
  attn_status st;
  TRY(unreduce(node, g, &gk));
  TRY(unreduce(node, node->saved[1], &yk));
  TRY(attn_binary(ATTN_SUB, node->saved[0], yk, &t));
  TRY(attn_unary_(ATTN_EXP, t));
  st = attn_binary(ATTN_MUL, gk, t, &grads[0]);
out:
  REL(gk), REL(yk), REL(t);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Recording                                                                 */

/* ------------------------------------------------------------------------ */
/* cumsum                                                                    */

/* reversed cumsum of g: flip, cumsum, flip */
attn_status attn__cumsum_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  int dim = (int)node->iargs[1];
  if (g->ndim == 0 || attn_tensor_numel(g) <= 1 || g->shape[dim] == 1) {
    grads[0] = attn_tensor_retain((attn_tensor *)g);
    return ATTN_OK;
  }
  attn_tensor *f = NULL, *c = NULL;
  attn_status st;
  TRY(attn_flip(g, 1, &dim, &f));
  TRY(attn_cumsum(f, dim, &c));
  st = attn_flip(c, 1, &dim, &grads[0]);
out:
  REL(f), REL(c);
  return st;
}

/* ------------------------------------------------------------------------ */
/* softmax / log_softmax                                                     */

/* Along dim, with y the saved output (torch's CPU kernels):
     softmax:     gi = (g - sum(g * y)) * y
     log_softmax: gi = g - exp(y) * sum(g)
   A row of NaN outputs (all -inf input) gives NaN, like torch.  g and y
   are made contiguous and walked as [outer, n, inner]; sums in double,
   one accumulator per inner column. */
attn_status attn__softmax_backward(attn_node *node, const attn_tensor *g_in, attn_tensor **grads) {
  bool log_space = node->iargs[0] != 0;
  attn_tensor *g = NULL, *y = NULL, *r = NULL;
  double *acc = NULL;
  size_t acc_bytes = 0;
  attn_status st;
  TRY(attn_contiguous(g_in, &g));
  TRY(attn_contiguous(node->saved[0], &y));
  /* straight into the leaf's .grad where the engine allows (attn__grad_into) */
  TRY(attn__grad_out(node, 0, log_space ? "log_softmax backward" : "softmax backward", &r));
  const bool into = r == attn__grad_into(node, 0);
  int64_t outer, n, inner;
  blocks(node, &outer, &n, &inner);
  acc_bytes = (size_t)(inner ? inner : 1) * sizeof *acc;
  acc = attn__scratch_alloc(acc_bytes);
  if (!acc) {
    st = attn__nomem("softmax backward", (int64_t)acc_bytes);
    goto out;
  }
  const float *gp = attn_tensor_data(g), *yp = attn_tensor_data(y);
  float *rp = attn_tensor_data(r);
  if (inner == 1) { /* the last dim (the common case): the family's vectorised rows */
    attn__kern()->softmax_bwd_rows(gp, yp, rp, outer, n, log_space, into);
    outer = 0;
  }
  for (int64_t o = 0; o < outer; o++) {
    const int64_t base = o * n * inner;
    for (int64_t j = 0; j < inner; j++) acc[j] = 0;
    for (int64_t i = 0; i < n; i++) {
      const float *gr = gp + base + i * inner, *yr = yp + base + i * inner;
      if (log_space)
        for (int64_t j = 0; j < inner; j++) acc[j] += gr[j];
      else
        for (int64_t j = 0; j < inner; j++) acc[j] += (double)gr[j] * yr[j];
    }
    for (int64_t i = 0; i < n; i++) {
      const float *gr = gp + base + i * inner, *yr = yp + base + i * inner;
      float *rr = rp + base + i * inner;
      for (int64_t j = 0; j < inner; j++) {
        const float v = log_space ? gr[j] - expf(yr[j]) * (float)acc[j] : (gr[j] - (float)acc[j]) * yr[j];
        rr[j] = into ? rr[j] + v : v;
      }
    }
  }
  attn__grad_give(node, 0, r, true, grads);
  r = NULL;
out:
  attn__scratch_free(acc, acc_bytes);
  REL(g), REL(y), REL(r);
  return st;
}
