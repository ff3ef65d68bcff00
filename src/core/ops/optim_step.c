/* SPDX-License-Identifier: MIT */
/* Fused optimizer updates: the elementwise arithmetic of attn.optim's Adam
 * and AdamW in one pass over a parameter.  Composed from tensor ops, one
 * update is a dozen passes, each with a temporary and a trip through the
 * binding; for the many small parameters of small models (a character GPT
 * has about a hundred) the optimizer step was mostly that overhead.  Each
 * element gets the composed version's float operations in the same order,
 * each rounded on its own (this unit is ISO C: no FMA contraction), so the
 * results are the same bit for bit. */
#include "ops/ops.h"

#include <math.h>

#define FN "adam_update"

/* elements per block between cancel polls */
#define ADAM_BLOCK 65536

/* p [n] (+)= the update; exp_avg, exp_avg_sq, max_sq [n]; decoupled and
   amsgrad constant per instance, so that each loop is branch-free and
   vectorises (sqrt and division are exact IEEE operations at any width) */
static inline __attribute__((always_inline)) void adam_rows(float *restrict p, const float *restrict g,
                                                            float *restrict m, float *restrict v, float *restrict mx,
                                                            int64_t n, const attn_adam_coeffs *c, const bool decoupled,
                                                            const bool amsgrad) {
  const float decay = c->decay, b1 = c->beta1, ob1 = c->one_minus_beta1, b2 = c->beta2, ob2 = c->one_minus_beta2;
  const float neg_step = c->neg_step_size, bc2s = c->bias_correction2_sqrt, eps = c->eps;
  for (int64_t i = 0; i < n; i++) {
    const float gi = g[i];
    const float pi = decoupled ? p[i] * decay : p[i];
    const float mi = m[i] * b1 + gi * ob1;
    const float vi = v[i] * b2 + (gi * ob2) * gi;
    float vd = vi;
    if (amsgrad && mx) { /* torch.maximum: NaN wins (mx is never NULL here) */
      const float a = mx[i];
      vd = (a != a || vi != vi) ? NAN : (a > vi ? a : vi);
      mx[i] = vd;
    }
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + (mi * neg_step) / (sqrtf(vd) / bc2s + eps);
  }
}

static void adam_block(float *p, const float *g, float *m, float *v, float *mx, int64_t n, const attn_adam_coeffs *c) {
  if (c->decoupled) {
    if (mx)
      adam_rows(p, g, m, v, mx, n, c, true, true);
    else
      adam_rows(p, g, m, v, NULL, n, c, true, false);
  } else {
    if (mx)
      adam_rows(p, g, m, v, mx, n, c, false, true);
    else
      adam_rows(p, g, m, v, NULL, n, c, false, false);
  }
}

bool attn_adam_fusable(const attn_tensor *p, const attn_tensor *grad, const attn_tensor *exp_avg,
                       const attn_tensor *exp_avg_sq, const attn_tensor *max_exp_avg_sq) {
  const attn_tensor *all[5] = {p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq};
  for (int i = 0; i < 5; i++) {
    const attn_tensor *t = all[i];
    if (!t && i < 4) return false;
    if (t && (t->dtype != ATTN_FLOAT32 || !attn_tensor_is_contiguous(t) || !attn_same_shape(t, p))) return false;
  }
  return true;
}

attn_status attn_adam_update(attn_tensor *p, const attn_tensor *grad, attn_tensor *exp_avg, attn_tensor *exp_avg_sq,
                             attn_tensor *max_exp_avg_sq, const attn_adam_coeffs *c) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (!p || !grad || !exp_avg || !exp_avg_sq || !c)
    return attn_set_error(ATTN_ERR_ARG, FN ": p, grad, exp_avg, exp_avg_sq and the coefficients are required");
  const attn_tensor *all[5] = {p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq};
  static const char *const names[5] = {"p", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  for (int i = 0; i < 5; i++) {
    const attn_tensor *t = all[i];
    if (!t) continue;
    if (t->dtype != ATTN_FLOAT32) return attn_check_float(FN, names[i], t);
    if (!attn_tensor_is_contiguous(t))
      return attn_set_error(ATTN_ERR_ARG, FN ": %s %s must be contiguous", names[i], ATTN_SHAPE(t, sa));
    if (!attn_same_shape(t, p))
      return attn_set_error(ATTN_ERR_SHAPE, FN ": %s %s must have p's shape %s", names[i], ATTN_SHAPE(t, sa),
                            ATTN_SHAPE(p, sb));
  }
  if (attn_grad_enabled() && attn_requires_grad(p))
    return attn_set_error(ATTN_ERR_STATE, FN ": p requires grad and grad mode is on; run the update under no_grad");
  attn_tensor *written[4] = {p, exp_avg, exp_avg_sq, max_exp_avg_sq};
  for (int i = 0; i < 4; i++)
    if (written[i]) attn__bump_version(written[i]);
  float *pd = attn_tensor_data(p), *m = attn_tensor_data(exp_avg), *v = attn_tensor_data(exp_avg_sq);
  float *mx = max_exp_avg_sq ? attn_tensor_data(max_exp_avg_sq) : NULL;
  const float *g = attn_tensor_data(grad);
  const int64_t n = attn_tensor_numel(p);
  for (int64_t i = 0; i < n; i += ADAM_BLOCK) {
    if (attn__cancelled()) return attn__limit_error(FN);
    const int64_t len = n - i < ADAM_BLOCK ? n - i : ADAM_BLOCK;
    adam_block(pd + i, g + i, m + i, v + i, mx ? mx + i : NULL, len, c);
  }
  return ATTN_OK;
}
