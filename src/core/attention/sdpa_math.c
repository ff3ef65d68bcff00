/* SPDX-License-Identifier: MIT */
/* The composed scaled-dot-product attention: torch's math path built from
 * recorded core ops, so its gradients come from the autograd engine.
 *
 * Shapes: q [..., L, E], k [..., S, E], v [..., S, Ev]:
 *   s = (q * scale) @ k^T                  [..., L, S]
 *   s = masked_fill(s, causal/bool mask == 0, -inf)  or  s + additive mask
 *   rows with every key masked: s = 0 there, p = 0 there (torch 2.5's
 *   _safe_softmax; the zeros also keep NaN out of the gradients)
 *   p = softmax(s, -1)                     [..., L, S]
 *   p = p * (bernoulli(1 - dropout_p) / (1 - dropout_p))   when dropout_p > 0
 *   out = p @ v                            [..., L, Ev]
 * With GQA, k and v are repeat_interleave'd along the head dim (-3) first.
 * It materialises [..., L, S]; attn_sdpa (sdpa.c) takes this path for the
 * weights, for dropout and for additive masks that require grad, and the
 * tests compare the fused kernel with it (its reference twin).  It sits on
 * the ops floor below sdpa.c and calls only ordinary ops, never the fused
 * kernel, so sdpa.c -> sdpa_math.c runs one way; the options' defaults and
 * the causal mask it needs live here for the same reason.
 */
#include "attention/attention.h"

#include <math.h>

#define FN "scaled_dot_product_attention"

void attn_sdpa_opts_init(attn_sdpa_opts *opts) {
  memset(opts, 0, sizeof *opts);
  opts->scale = NAN;
}

/* [L, S]: 1 where j <= i (+ S - L with bottom_right) */
attn_status attn_causal_mask(int64_t L, int64_t S, bool bottom_right, attn_tensor **out) {
  if (L < 0 || S < 0)
    return attn_set_error(ATTN_ERR_ARG, "causal_mask: sizes must be >= 0, got L=%lld S=%lld", (long long)L,
                          (long long)S);
  int64_t shape[2] = {L, S};
  attn_tensor *t;
  attn_status st = attn__alloc("causal_mask", 2, shape, &t);
  if (st) return st;
  float *p = attn_tensor_data(t);
  int64_t off = bottom_right ? S - L : 0;
  for (int64_t i = 0; i < L; i++)
    for (int64_t j = 0; j < S; j++) p[i * S + j] = j <= i + off ? 1.0f : 0.0f;
  *out = t;
  return ATTN_OK;
}

/* Keeps every intermediate for one release at the end. */
typedef struct {
  attn_tensor *t[32];
  int n;
} temps;

static attn_tensor *keep(temps *T, attn_tensor *t) {
  T->t[T->n++] = t;
  return t;
}

/* k [..., H, S, E] -> [..., H * g, S, E], each head repeated g times in a
   row (torch's repeat_interleave(g, dim=-3)) */
static attn_status repeat_heads(const attn_tensor *k, int64_t g, temps *T, const attn_tensor **res) {
  int nd = k->ndim;
  if (nd + 1 > ATTN_MAX_DIMS) return attn_set_error(ATTN_ERR_ARG, FN ": too many dims for grouped-query attention");
  attn_tensor *u, *e, *r;
  attn_status st;
  if ((st = attn_unsqueeze(k, nd - 2, &u))) return st;
  keep(T, u);
  int64_t shape[ATTN_MAX_DIMS];
  for (int d = 0; d < nd + 1; d++) shape[d] = u->shape[d];
  shape[nd - 2] = g;
  if ((st = attn_expand(u, nd + 1, shape, &e))) return st;
  keep(T, e);
  int64_t rshape[ATTN_MAX_DIMS];
  for (int d = 0; d < nd; d++) rshape[d] = k->shape[d];
  rshape[nd - 3] *= g;
  if ((st = attn_reshape(e, nd, rshape, &r))) return st;
  *res = keep(T, r);
  return ATTN_OK;
}

attn_status attn__sdpa_math(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                            const attn_sdpa_opts *opts, attn_tensor **out, attn_tensor **weights) {
  attn_sdpa_opts defaults;
  if (!opts) attn_sdpa_opts_init(&defaults), opts = &defaults;
  char sq[ATTN_SHAPE_BUF], sk[ATTN_SHAPE_BUF];
  if (q->ndim < 2 || k->ndim != q->ndim || v->ndim != q->ndim)
    return attn_set_error(ATTN_ERR_SHAPE, FN ": query %s and key %s must have the same number of dims, at least 2",
                          ATTN_SHAPE(q, sq), ATTN_SHAPE(k, sk));
  const int nd = q->ndim;
  const int64_t L = q->shape[nd - 2], S = k->shape[nd - 2], E = q->shape[nd - 1];
  temps T = {{0}, 0};
  attn_status st = ATTN_OK;
  const attn_tensor *kk = k, *vv = v;
  if (opts->enable_gqa && nd >= 3 && q->shape[nd - 3] != k->shape[nd - 3]) {
    int64_t hk = k->shape[nd - 3];
    if (hk == 0 || q->shape[nd - 3] % hk != 0)
      return attn_set_error(ATTN_ERR_SHAPE, FN ": query heads %s are not a multiple of key heads %s", ATTN_SHAPE(q, sq),
                            ATTN_SHAPE(k, sk));
    int64_t g = q->shape[nd - 3] / hk;
    if ((st = repeat_heads(k, g, &T, &kk)) || (st = repeat_heads(v, g, &T, &vv))) goto out;
  }
  double scale = opts->scale;
  if (isnan(scale) || scale == 0.0) scale = 1.0 / sqrt((double)E);
  attn_tensor *qs, *kt, *s, *x;
  if ((st = attn_binary_scalar(ATTN_MUL, q, (float)scale, false, &qs))) goto out;
  keep(&T, qs);
  if ((st = attn_transpose(kk, nd - 2, nd - 1, &kt))) goto out;
  keep(&T, kt);
  if ((st = attn_matmul(qs, kt, &s))) goto out;
  keep(&T, s);

  /* the bias */
  const attn_tensor *hide = NULL; /* 1 where a key is hidden */
  if (opts->is_causal) {
    attn_tensor *cm;
    if ((st = attn_causal_mask(L, S, opts->causal_bottom_right, &cm))) goto out;
    keep(&T, cm);
    if ((st = attn__binary_scalar_raw(ATTN_EQ, cm, 0.0f, false, &x))) goto out;
    hide = keep(&T, x);
  } else if (opts->attn_mask && opts->mask_is_bool) {
    if ((st = attn__binary_scalar_raw(ATTN_EQ, opts->attn_mask, 0.0f, false, &x))) goto out;
    hide = keep(&T, x);
  }
  if (hide) {
    if ((st = attn_masked_fill(s, hide, -INFINITY, &x))) goto out;
    s = keep(&T, x);
  } else if (opts->attn_mask) {
    if ((st = attn_binary(ATTN_ADD, s, opts->attn_mask, &x))) goto out;
    s = keep(&T, x);
  }

  /* rows with no visible key (row max -inf), found outside the graph */
  attn_tensor *dead = NULL;
  {
    bool prev = attn_set_grad_enabled(false);
    attn_tensor *mx = NULL;
    st = attn_reduce_dim(ATTN_MAX, s, nd - 1, true, NULL, &mx);
    if (!st) st = attn__binary_scalar_raw(ATTN_EQ, mx, -INFINITY, false, &dead);
    attn_tensor_release(mx);
    attn_set_grad_enabled(prev);
    if (st) goto out;
    keep(&T, dead);
    bool any = false;
    int64_t n = attn_tensor_numel(dead);
    const float *d = attn_tensor_data(dead);
    for (int64_t i = 0; i < n && !any; i++) any = d[i] != 0.0f;
    if (!any) dead = NULL;
  }
  if (dead) {
    if ((st = attn_masked_fill(s, dead, 0.0f, &x))) goto out;
    s = keep(&T, x);
  }
  attn_tensor *p;
  if ((st = attn_softmax(s, nd - 1, &p))) goto out;
  keep(&T, p);
  if (dead) {
    if ((st = attn_masked_fill(p, dead, 0.0f, &x))) goto out;
    p = keep(&T, x);
  }

  /* dropout as torch's _dropout_impl: noise = bernoulli_(1 - p) / (1 - p) */
  double dp = opts->dropout_p;
  if (dp > 0.0) {
    if (dp >= 1.0) {
      if ((st = attn_binary_scalar(ATTN_MUL, p, 0.0f, false, &x))) goto out;
    } else {
      attn_tensor *noise;
      if ((st = attn_empty(p->ndim, p->shape, &noise))) goto out;
      keep(&T, noise);
      if ((st = attn_bernoulli_(noise, 1.0 - dp, opts->generator)) ||
          (st = attn_binary_scalar_(ATTN_DIV, noise, (float)(1.0 - dp), false)) ||
          (st = attn_binary(ATTN_MUL, p, noise, &x)))
        goto out;
    }
    p = keep(&T, x);
  }
  attn_tensor *o;
  if ((st = attn_matmul(p, vv, &o))) goto out;
  *out = o;
  if (weights) *weights = attn_tensor_retain(p);
out:
  for (int i = 0; i < T.n; i++) attn_tensor_release(T.t[i]);
  return st;
}
