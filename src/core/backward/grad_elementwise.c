/* SPDX-License-Identifier: MIT */
/* Backward of the elementwise ops (torch 1.13's derivative formulas).
 * Every gradient has the output's (broadcast) shape and is summed back to
 * each input's shape with attn__sum_to_shape. */
#include "backward/backward.h"
#include "kernels/kernels.h"

#include <math.h>

/* Short names for the core ops used by the formulas (grad mode is off). */
static attn_status mul(const attn_tensor *a, const attn_tensor *b, attn_tensor **o) {
  return attn_binary(ATTN_MUL, a, b, o);
}
static attn_status mul_s(const attn_tensor *a, float s, attn_tensor **o) {
  return attn_binary_scalar(ATTN_MUL, a, s, false, o);
}

/* grads[i] = g summed to input i's shape, taking ownership of g. */
static attn_status give(attn_node *node, int i, attn_tensor *g, attn_tensor **grads) {
  attn_status st = attn__sum_to_shape(g, node->next[i].ndim, node->next[i].shape, &grads[i]);
  attn_tensor_release(g);
  return st;
}

#define TRY(expr)                                                                                                      \
  do {                                                                                                                 \
    if ((st = (expr))) goto out;                                                                                       \
  } while (0)

/* ------------------------------------------------------------------------ */
/* Binary                                                                    */

/* d max(a, b): g where a wins, g/2 on ties (torch splits ties evenly). */
static attn_status minmax_share(const attn_tensor *g, const attn_tensor *a, const attn_tensor *b, bool is_max,
                                attn_tensor **out) {
  attn_tensor *win = NULL, *tie = NULL, *w = NULL;
  attn_status st;
  TRY(attn__binary_raw(is_max ? ATTN_GT : ATTN_LT, a, b, &win));
  TRY(attn__binary_raw(ATTN_EQ, a, b, &tie));
  TRY(attn_binary_scalar_(ATTN_MUL, tie, 0.5f, false));
  TRY(attn_binary(ATTN_ADD, win, tie, &w));
  st = mul(g, w, out);
out:
  attn_tensor_release(win);
  attn_tensor_release(tie);
  attn_tensor_release(w);
  return st;
}

attn_status attn__binary_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_binary_op op = (attn_binary_op)node->iargs[0];
  const attn_tensor *a = node->saved[0], *b = node->saved[1], *o = node->saved[2];
  bool need_a = node->next[0].node != NULL, need_b = node->next[1].node != NULL;
  attn_status st = ATTN_OK;
  attn_tensor *t1 = NULL, *t2 = NULL, *t3 = NULL, *r = NULL;
  switch (op) {
  case ATTN_ADD:
    if (need_a) TRY(give(node, 0, attn_tensor_retain((attn_tensor *)g), grads));
    if (need_b) TRY(give(node, 1, attn_tensor_retain((attn_tensor *)g), grads));
    break;
  case ATTN_SUB:
    if (need_a) TRY(give(node, 0, attn_tensor_retain((attn_tensor *)g), grads));
    if (need_b) {
      TRY(attn_unary(ATTN_NEG, g, &r));
      TRY(give(node, 1, r, grads));
      r = NULL;
    }
    break;
  case ATTN_MUL:
    if (need_a) {
      TRY(mul(g, b, &r));
      TRY(give(node, 0, r, grads));
      r = NULL;
    }
    if (need_b) {
      TRY(mul(g, a, &r));
      TRY(give(node, 1, r, grads));
      r = NULL;
    }
    break;
  case ATTN_DIV: /* ga = g / b, gb = -g * a / b^2 */
    if (need_a) {
      TRY(attn_binary(ATTN_DIV, g, b, &r));
      TRY(give(node, 0, r, grads));
      r = NULL;
    }
    if (need_b) {
      TRY(attn_binary(ATTN_MUL, b, b, &t1));
      TRY(attn_binary(ATTN_DIV, a, t1, &t2));
      TRY(mul(g, t2, &r));
      TRY(attn_unary_(ATTN_NEG, r));
      TRY(give(node, 1, r, grads));
      r = NULL;
    }
    break;
  case ATTN_POW: /* ga = g * b * a^(b-1); gb = g * a^b * log(a), 0 where a == 0 and b >= 0 */
    if (need_a) {
      TRY(attn_binary_scalar(ATTN_SUB, b, 1.0f, false, &t1));
      TRY(attn_binary(ATTN_POW, a, t1, &t2));
      attn_tensor_release(t1);
      t1 = NULL;
      TRY(mul(t2, b, &t1));
      TRY(mul(g, t1, &r));
      /* b == 0 gives 0 * a^-1: torch masks it to 0 */
      attn_tensor_release(t2);
      t2 = NULL;
      TRY(attn__binary_scalar_raw(ATTN_EQ, b, 0.0f, false, &t2));
      attn_tensor *m;
      TRY(attn_masked_fill(r, t2, 0.0f, &m));
      attn_tensor_release(r);
      r = NULL;
      TRY(give(node, 0, m, grads));
      attn_tensor_release(t1);
      attn_tensor_release(t2);
      t1 = t2 = NULL;
    }
    if (need_b) {
      TRY(attn_unary(ATTN_LOG, a, &t1));
      TRY(mul(o, t1, &t2));
      TRY(mul(g, t2, &t3));
      attn_tensor_release(t1);
      t1 = NULL;
      attn_tensor *z = NULL, *nb = NULL;
      TRY(attn__binary_scalar_raw(ATTN_EQ, a, 0.0f, false, &z));
      st = attn__binary_scalar_raw(ATTN_GE, b, 0.0f, false, &nb);
      if (st == ATTN_OK) st = attn_binary(ATTN_MUL, z, nb, &t1);
      attn_tensor_release(z);
      attn_tensor_release(nb);
      if (st) goto out;
      TRY(attn_masked_fill(t3, t1, 0.0f, &r));
      TRY(give(node, 1, r, grads));
      r = NULL;
    }
    break;
  case ATTN_MAXIMUM:
  case ATTN_MINIMUM:
    if (need_a) {
      TRY(minmax_share(g, a, b, op == ATTN_MAXIMUM, &r));
      TRY(give(node, 0, r, grads));
      r = NULL;
    }
    if (need_b) {
      TRY(minmax_share(g, b, a, op == ATTN_MAXIMUM, &r));
      TRY(give(node, 1, r, grads));
      r = NULL;
    }
    break;
  case ATTN_ATAN2: /* d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2) */
    TRY(attn_binary(ATTN_MUL, a, a, &t3));
    TRY(attn_binary(ATTN_MUL, b, b, &t2));
    /* out of place: a and b may broadcast to a larger shape */
    TRY(attn_binary(ATTN_ADD, t3, t2, &t1));
    attn_tensor_release(t3);
    t3 = NULL;
    if (need_a) {
      TRY(attn_binary(ATTN_DIV, b, t1, &t3));
      TRY(mul(g, t3, &r));
      TRY(give(node, 0, r, grads));
      r = NULL;
      attn_tensor_release(t3);
      t3 = NULL;
    }
    if (need_b) {
      TRY(attn_binary(ATTN_DIV, a, t1, &t3));
      TRY(mul(g, t3, &r));
      TRY(attn_unary_(ATTN_NEG, r));
      TRY(give(node, 1, r, grads));
      r = NULL;
    }
    break;
  case ATTN_FMOD: /* ga = g, gb = -g * trunc(a / b) */
    if (need_a) TRY(give(node, 0, attn_tensor_retain((attn_tensor *)g), grads));
    if (need_b) {
      TRY(attn_binary(ATTN_DIV, a, b, &t1));
      /* trunc = sign * floor(|x|) */
      TRY(attn_unary(ATTN_ABS, t1, &t2));
      TRY(attn_unary_(ATTN_FLOOR, t2));
      TRY(attn_unary_(ATTN_SIGN, t1));
      TRY(attn_binary_(ATTN_MUL, t2, t1));
      TRY(mul(g, t2, &r));
      TRY(attn_unary_(ATTN_NEG, r));
      TRY(give(node, 1, r, grads));
      r = NULL;
    }
    break;
  default: st = attn_set_error(ATTN_ERR_STATE, "backward: %s is not differentiable", attn_binary_op_name(op));
  }
out:
  attn_tensor_release(t1);
  attn_tensor_release(t2);
  attn_tensor_release(t3);
  attn_tensor_release(r);
  return st;
}

/* tensor op scalar (or scalar op tensor when reversed) */
attn_status attn__binary_scalar_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_binary_op op = (attn_binary_op)node->iargs[0];
  bool rev = node->iargs[1] != 0;
  float s = (float)node->fargs[0];
  const attn_tensor *a = node->saved[0], *o = node->saved[1];
  attn_tensor *r = NULL, *t1 = NULL, *t2 = NULL;
  attn_status st = ATTN_OK;
  switch (op) {
  case ATTN_ADD: r = attn_tensor_retain((attn_tensor *)g); break;
  case ATTN_SUB:
    if (rev)
      TRY(attn_unary(ATTN_NEG, g, &r));
    else
      r = attn_tensor_retain((attn_tensor *)g);
    break;
  case ATTN_MUL: TRY(mul_s(g, s, &r)); break;
  case ATTN_DIV:
    if (!rev) {
      TRY(attn_binary_scalar(ATTN_DIV, g, s, false, &r));
    } else { /* s / a: -g * s / a^2 */
      TRY(attn_binary(ATTN_MUL, a, a, &t1));
      TRY(attn_binary_scalar(ATTN_DIV, t1, -s, true, &t2));
      TRY(mul(g, t2, &r));
    }
    break;
  case ATTN_POW:
    if (!rev) { /* a^s: g * s * a^(s-1), 0 when s == 0 */
      if (s == 0.0f) {
        TRY(attn_zeros(g->ndim, g->shape, &r));
      } else {
        TRY(attn_binary_scalar(ATTN_POW, a, s - 1.0f, false, &t1));
        TRY(attn_binary_scalar_(ATTN_MUL, t1, s, false));
        TRY(mul(g, t1, &r));
      }
    } else { /* s^a: g * s^a * log(s) */
      TRY(mul_s(o, logf(s), &t1));
      TRY(mul(g, t1, &r));
    }
    break;
  case ATTN_MAXIMUM:
  case ATTN_MINIMUM: {
    attn_tensor *st_t;
    TRY(attn_scalar(s, &st_t));
    st = minmax_share(g, a, st_t, op == ATTN_MAXIMUM, &r);
    attn_tensor_release(st_t);
    if (st) goto out;
    break;
  }
  case ATTN_ATAN2: /* atan2(a, s): s/(a^2+s^2); atan2(s, a): -s/(s^2+a^2) */
    TRY(attn_binary(ATTN_MUL, a, a, &t1));
    TRY(attn_binary_scalar_(ATTN_ADD, t1, s * s, false));
    TRY(attn_binary_scalar(ATTN_DIV, t1, rev ? -s : s, true, &t2));
    TRY(mul(g, t2, &r));
    break;
  case ATTN_FMOD:
    if (!rev) {
      r = attn_tensor_retain((attn_tensor *)g);
    } else { /* fmod(s, a): -g * trunc(s / a) */
      TRY(attn_binary_scalar(ATTN_DIV, a, s, true, &t1));
      TRY(attn_unary(ATTN_ABS, t1, &t2));
      TRY(attn_unary_(ATTN_FLOOR, t2));
      TRY(attn_unary_(ATTN_SIGN, t1));
      TRY(attn_binary_(ATTN_MUL, t2, t1));
      TRY(mul(g, t2, &r));
      TRY(attn_unary_(ATTN_NEG, r));
    }
    break;
  default: st = attn_set_error(ATTN_ERR_STATE, "backward: %s is not differentiable", attn_binary_op_name(op)); goto out;
  }
  st = give(node, 0, r, grads);
  r = NULL;
out:
  attn_tensor_release(r);
  attn_tensor_release(t1);
  attn_tensor_release(t2);
  return st;
}

attn_status attn__add_scaled_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_status st = ATTN_OK;
  if (node->next[0].node && (st = give(node, 0, attn_tensor_retain((attn_tensor *)g), grads))) return st;
  if (node->next[1].node) {
    attn_tensor *r;
    if ((st = mul_s(g, (float)node->fargs[0], &r))) return st;
    st = give(node, 1, r, grads);
  }
  return st;
}

/* ------------------------------------------------------------------------ */
/* Unary                                                                     */

/* g * op'(x) in one pass over the innermost runs (the kernel family's
   unary_grad_rows: vectorised where the run is contiguous), written to a
   new tensor or added into the leaf's .grad (attn__grad_into). */
typedef struct {
  attn__unary_grad_row_fn fn;
  bool acc;
} dunary_ctx;

static void dunary_inner(int64_t n, float **p, const int64_t *s, void *vctx) {
  const dunary_ctx *c = vctx;
  c->fn(n, p[0], s[0], p[1], s[1], p[2], s[2], p[3], s[3], c->acc);
}

attn_status attn__unary_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  /* an unsaved operand is never read: g stands in for its geometry */
  const attn_tensor *x = node->saved[0] ? node->saved[0] : g, *y = node->saved[1] ? node->saved[1] : g;
  attn_tensor *r;
  attn_status st = attn__grad_out(node, 0, "backward", &r);
  if (st) return st;
  int64_t strides[4][ATTN_MAX_DIMS];
  for (int d = 0; d < g->ndim; d++) {
    strides[0][d] = r->stride[d];
    strides[1][d] = g->stride[d];
    strides[2][d] = x->stride[d];
    strides[3][d] = y->stride[d];
  }
  float *base[4] = {attn_tensor_data(r), attn_tensor_data(g), attn_tensor_data(x), attn_tensor_data(y)};
  dunary_ctx c = {attn__kern()->unary_grad_rows[node->iargs[0]], r == attn__grad_into(node, 0)};
  bool ok = attn__foreach(g->ndim, g->shape, 4, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, dunary_inner, &c);
  attn__grad_give(node, 0, r, ok, grads);
  return ok ? ATTN_OK : attn__limit_error("backward");
}

/* ------------------------------------------------------------------------ */
/* clamp, where, masked_fill                                                 */

static void clamp_grad_inner(int64_t n, float **p, const int64_t *s, void *vctx) {
  const float *b = vctx;
  const float lo = b[0], hi = b[1];
  for (int64_t i = 0; i < n; i++) {
    const float x = p[2][i * s[2]];
    const bool in = (lo != lo || x >= lo) && (hi != hi || x <= hi);
    p[0][i * s[0]] = in ? p[1][i * s[1]] : 0.0f;
  }
}

attn_status attn__clamp_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn_tensor *x = node->saved[0];
  attn_tensor *r;
  attn_status st = attn_empty(g->ndim, g->shape, &r);
  if (st) return st;
  int64_t strides[3][ATTN_MAX_DIMS];
  for (int d = 0; d < g->ndim; d++) {
    strides[0][d] = r->stride[d];
    strides[1][d] = g->stride[d];
    strides[2][d] = x->stride[d];
  }
  float bounds[2] = {(float)node->fargs[0], (float)node->fargs[1]};
  float *base[3] = {attn_tensor_data(r), attn_tensor_data(g), attn_tensor_data(x)};
  if (!attn__foreach(g->ndim, g->shape, 3, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, clamp_grad_inner, bounds)) {
    attn_tensor_release(r);
    return attn__limit_error("backward");
  }
  grads[0] = r;
  return ATTN_OK;
}

attn_status attn__where_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn_tensor *c = node->saved[0];
  attn_tensor *zero, *r = NULL;
  attn_status st = attn_scalar(0.0f, &zero);
  if (st) return st;
  if (node->next[0].node) {
    TRY(attn_where(c, g, zero, &r));
    TRY(give(node, 0, r, grads));
    r = NULL;
  }
  if (node->next[1].node) {
    TRY(attn_where(c, zero, g, &r));
    TRY(give(node, 1, r, grads));
    r = NULL;
  }
out:
  attn_tensor_release(zero);
  attn_tensor_release(r);
  return st;
}

attn_status attn__masked_fill_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_tensor *r;
  attn_status st = attn_masked_fill(g, node->saved[0], 0.0f, &r);
  if (st) return st;
  return give(node, 0, r, grads);
}
