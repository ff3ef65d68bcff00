/* SPDX-License-Identifier: MIT */
/* Elementwise row kernels (elementwise.c describes the rows), written once
 * and compiled by each kernel family's unit (kernels_*.c) with its flags,
 * so the unit-stride loops vectorise at that family's width; exp is
 * vmath.h's vm_expf (the same everywhere), GELU's Phi its vm_phi_e (fused
 * multiply-adds where the family has them), tanh and erf come from vmath.h
 * too (libmvec in the x86 families, libm in the portable one, so those
 * differ between families by up to 2 ulp).  Defines
 * the static tables binary_rows, unary_rows, unary_grad_rows and
 * clamp_inner. */
#include "base/base.h"

#include <math.h>

#include "vmath.h"

/* ------------------------------------------------------------------------ */
/* Scalar definitions (torch's float semantics)                              */

static inline float f_pow(float x, float y) {
  if (y == 2.0f) return x * x;
  if (y == 0.5f) return sqrtf(x);
  if (y == -0.5f) return 1.0f / sqrtf(x); /* torch's rsqrt: NaN at -inf, -inf at -0 (powf: 0, +inf) */
  if (y == 1.0f) return x;
  return powf(x, y);
}
static inline float f_max(float x, float y) { return (x != x || y != y) ? NAN : (x > y ? x : y); }
static inline float f_min(float x, float y) { return (x != x || y != y) ? NAN : (x < y ? x : y); }

#define OP_ADD(x, y) ((x) + (y))
#define OP_SUB(x, y) ((x) - (y))
#define OP_MUL(x, y) ((x) * (y))
#define OP_DIV(x, y) ((x) / (y))
#define OP_POW(x, y) f_pow((x), (y))
#define OP_EQ(x, y) ((x) == (y) ? 1.0f : 0.0f)
#define OP_NE(x, y) ((x) != (y) ? 1.0f : 0.0f)
#define OP_LT(x, y) ((x) < (y) ? 1.0f : 0.0f)
#define OP_LE(x, y) ((x) <= (y) ? 1.0f : 0.0f)
#define OP_GT(x, y) ((x) > (y) ? 1.0f : 0.0f)
#define OP_GE(x, y) ((x) >= (y) ? 1.0f : 0.0f)
#define OP_MAXIMUM(x, y) f_max((x), (y))
#define OP_MINIMUM(x, y) f_min((x), (y))
#define OP_ATAN2(x, y) atan2f((x), (y))
#define OP_FMOD(x, y) fmodf((x), (y))

/* One row: o[i*os] = OP(a[i*as], b[i*bs]) for i < n. */
#define BINARY_ROW(NAME, OP)                                                                                           \
  static void NAME(int64_t n, float *restrict o, int64_t os, const float *a, int64_t as, const float *b, int64_t bs) { \
    if (os == 1 && as == 1 && bs == 1) {                                                                               \
      for (int64_t i = 0; i < n; i++) o[i] = OP(a[i], b[i]);                                                           \
    } else if (os == 1 && as == 1 && bs == 0) {                                                                        \
      const float y = b[0];                                                                                            \
      for (int64_t i = 0; i < n; i++) o[i] = OP(a[i], y);                                                              \
    } else if (os == 1 && as == 0 && bs == 1) {                                                                        \
      const float x = a[0];                                                                                            \
      for (int64_t i = 0; i < n; i++) o[i] = OP(x, b[i]);                                                              \
    } else {                                                                                                           \
      for (int64_t i = 0; i < n; i++) o[i * os] = OP(a[i * as], b[i * bs]);                                            \
    }                                                                                                                  \
  }

BINARY_ROW(row_add, OP_ADD)
BINARY_ROW(row_sub, OP_SUB)
BINARY_ROW(row_mul, OP_MUL)
BINARY_ROW(row_div, OP_DIV)
BINARY_ROW(row_pow, OP_POW)
BINARY_ROW(row_eq, OP_EQ)
BINARY_ROW(row_ne, OP_NE)
BINARY_ROW(row_lt, OP_LT)
BINARY_ROW(row_le, OP_LE)
BINARY_ROW(row_gt, OP_GT)
BINARY_ROW(row_ge, OP_GE)
BINARY_ROW(row_maximum, OP_MAXIMUM)
BINARY_ROW(row_minimum, OP_MINIMUM)
BINARY_ROW(row_atan2, OP_ATAN2)
BINARY_ROW(row_fmod, OP_FMOD)

/* one row per op of the op table (attn_ops.h), named after it */
#define ROW_OF_(ID, NAME, ...) [ATTN_##ID] = row_##NAME,
#define DROW_OF_(ID, NAME, ...) [ATTN_##ID] = drow_##NAME,
static const attn__binary_row_fn binary_rows[ATTN_BINARY_OP_COUNT] = {ATTN_BINARY_OPS(ROW_OF_)};

/* ------------------------------------------------------------------------ */
/* Unary                                                                     */

static inline float f_relu(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
/* torch's exact GELU: x * Phi(x) (vmath.h's vm_phi_e, vectorised) */
static inline float f_gelu(float x) {
  float e;
  return x * vm_phi_e(x, &e);
}
static inline float f_gelu_tanh(float x) {
  const float k = 0.7978845608028654f; /* sqrt(2/pi) */
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
/* torch 1.13: (0 < x) - (x < 0), so NaN gives 0 */
static inline float f_sign(float x) { return (float)((x > 0.0f) - (x < 0.0f)); }

#define UNARY_ROW(NAME, EXPR)                                                                                          \
  static void NAME(int64_t n, float *restrict o, int64_t os, const float *a, int64_t as) {                             \
    if (os == 1 && as == 1) {                                                                                          \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        const float x = a[i];                                                                                          \
        o[i] = (EXPR);                                                                                                 \
      }                                                                                                                \
    } else {                                                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        const float x = a[i * as];                                                                                     \
        o[i * os] = (EXPR);                                                                                            \
      }                                                                                                                \
    }                                                                                                                  \
  }

/* A unary row around one transcendental function F of vmath.h: in blocks,
   t = PRE(x), t = F(t), o = POST(x, t), each a loop the compiler
   vectorises; strided rows take the scalar EXPR (libm). */
#define VM_UNARY_ROW(NAME, PRE, F, POST, EXPR)                                                                         \
  static void NAME(int64_t n, float *restrict o, int64_t os, const float *a, int64_t as) {                             \
    if (os == 1 && as == 1) {                                                                                          \
      float t[VM_BLOCK];                                                                                               \
      for (int64_t j = 0; j < n; j += VM_BLOCK) {                                                                      \
        const int64_t m = n - j < VM_BLOCK ? n - j : VM_BLOCK;                                                         \
        const float *aj = a + j;                                                                                       \
        for (int64_t i = 0; i < m; i++) {                                                                              \
          const float x = aj[i];                                                                                       \
          t[i] = (PRE);                                                                                                \
        }                                                                                                              \
        F(m, t, t);                                                                                                    \
        for (int64_t i = 0; i < m; i++) {                                                                              \
          const float x = aj[i], v = t[i];                                                                             \
          (void)x;                                                                                                     \
          o[j + i] = (POST);                                                                                           \
        }                                                                                                              \
      }                                                                                                                \
    } else {                                                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        const float x = a[i * as];                                                                                     \
        o[i * os] = (EXPR);                                                                                            \
      }                                                                                                                \
    }                                                                                                                  \
  }

#define SQRT1_2 0.70710678118654752440f
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

UNARY_ROW(row_neg, -x)
UNARY_ROW(row_exp, vm_expf(x))
UNARY_ROW(row_log, logf(x))
UNARY_ROW(row_sqrt, sqrtf(x))
UNARY_ROW(row_rsqrt, 1.0f / sqrtf(x))
VM_UNARY_ROW(row_tanh, x, vm_tanh, v, tanhf(x))
UNARY_ROW(row_sigmoid, vm_sigmoid(x))
UNARY_ROW(row_relu, f_relu(x))
UNARY_ROW(row_gelu, f_gelu(x))
VM_UNARY_ROW(row_gelu_tanh, GELU_K *(x + GELU_C * x * x * x), vm_tanh, 0.5f * x * (1.0f + v), f_gelu_tanh(x))
UNARY_ROW(row_abs, fabsf(x))
UNARY_ROW(row_sin, sinf(x))
UNARY_ROW(row_cos, cosf(x))
UNARY_ROW(row_sign, f_sign(x))
UNARY_ROW(row_reciprocal, 1.0f / x)
UNARY_ROW(row_square, x *x)
UNARY_ROW(row_log1p, log1pf(x))
UNARY_ROW(row_expm1, expm1f(x))
UNARY_ROW(row_floor, floorf(x))
UNARY_ROW(row_ceil, ceilf(x))
UNARY_ROW(row_round, nearbyintf(x))
UNARY_ROW(row_silu, x *vm_sigmoid(x))
VM_UNARY_ROW(row_erf, x, vm_erf, v, erff(x))
UNARY_ROW(row_tan, tanf(x))

static const attn__unary_row_fn unary_rows[ATTN_UNARY_OP_COUNT] = {ATTN_UNARY_OPS(ROW_OF_)};

/* ------------------------------------------------------------------------ */
/* Unary derivatives: o = g * f'(x) (y = f(x) where the derivative reads
   it more cheaply), one pass; grad_elementwise.c says which of x and y
   each op saves (an unsaved one points at g and is not read). */

/* (o = g * d, or o = o + g * d with acc: the same product, added after) */
#define GRAD_STORE(dst, val) ((dst) = acc ? (dst) + (val) : (val))

#define GRAD_ROW(NAME, DERIV)                                                                                          \
  static void NAME(int64_t n, float *restrict o, int64_t os, const float *g, int64_t gs, const float *xp, int64_t xs,  \
                   const float *yp, int64_t ys, bool acc) {                                                            \
    if (os == 1 && gs == 1 && xs == 1 && ys == 1) {                                                                    \
      /* two loops: with the select inside, GCC leaves long DERIVs scalar */                                           \
      if (acc)                                                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                                              \
          const float x = xp[i], y = yp[i];                                                                            \
          (void)x, (void)y;                                                                                            \
          o[i] = o[i] + g[i] * (DERIV);                                                                                \
        }                                                                                                              \
      else                                                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                                              \
          const float x = xp[i], y = yp[i];                                                                            \
          (void)x, (void)y;                                                                                            \
          o[i] = g[i] * (DERIV);                                                                                       \
        }                                                                                                              \
    } else {                                                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        const float x = xp[i * xs], y = yp[i * ys];                                                                    \
        (void)x, (void)y;                                                                                              \
        GRAD_STORE(o[i * os], g[i * gs] * (DERIV));                                                                    \
      }                                                                                                                \
    }                                                                                                                  \
  }

/* The same around a transcendental function of vmath.h: t = F(PRE), then
   the derivative from x and t; strided rows take SCALAR(x). */
#define VM_GRAD_ROW(NAME, PRE, F, DERIV, SCALAR)                                                                       \
  static void NAME(int64_t n, float *restrict o, int64_t os, const float *g, int64_t gs, const float *xp, int64_t xs,  \
                   const float *yp, int64_t ys, bool acc) {                                                            \
    (void)yp, (void)ys;                                                                                                \
    if (os == 1 && gs == 1 && xs == 1) {                                                                               \
      float t[VM_BLOCK];                                                                                               \
      for (int64_t j = 0; j < n; j += VM_BLOCK) {                                                                      \
        const int64_t m = n - j < VM_BLOCK ? n - j : VM_BLOCK;                                                         \
        const float *xj = xp + j, *gj = g + j;                                                                         \
        float *oj = o + j;                                                                                             \
        for (int64_t i = 0; i < m; i++) {                                                                              \
          const float x = xj[i];                                                                                       \
          t[i] = (PRE);                                                                                                \
        }                                                                                                              \
        F(m, t, t);                                                                                                    \
        for (int64_t i = 0; i < m; i++) {                                                                              \
          const float x = xj[i], v = t[i];                                                                             \
          GRAD_STORE(oj[i], gj[i] * (DERIV));                                                                          \
        }                                                                                                              \
      }                                                                                                                \
    } else {                                                                                                           \
      for (int64_t i = 0; i < n; i++) GRAD_STORE(o[i * os], g[i * gs] * SCALAR(xp[i * xs]));                           \
    }                                                                                                                  \
  }

/* scalar derivatives (libm), for strided rows */
/* Phi(x) + x phi(x), both from one vm_phi_e */
static inline float d_gelu(float x) {
  float e;
  const float cdf = vm_phi_e(x, &e);
  return cdf + x * (e * 0.39894228040143267794f);
}
static inline float d_gelu_tanh_th(float x, float th) {
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
}
static inline float d_gelu_tanh(float x) { return d_gelu_tanh_th(x, tanhf(GELU_K * (x + GELU_C * x * x * x))); }
static inline float d_silu_s(float x, float s) { return s * (1.0f + x * (1.0f - s)); }
static inline float d_silu(float x) { return d_silu_s(x, vm_sigmoid(x)); }
static inline float d_erf(float x) { return 1.12837916709551257390f * vm_expf(-x * x); }

GRAD_ROW(drow_neg, -1.0f)
GRAD_ROW(drow_exp, y)
GRAD_ROW(drow_log, 1.0f / x)
GRAD_ROW(drow_sqrt, 0.5f / y)
GRAD_ROW(drow_rsqrt, -0.5f * y * y * y)
GRAD_ROW(drow_tanh, 1.0f - y * y)
GRAD_ROW(drow_sigmoid, y *(1.0f - y))
/* torch's threshold_backward: g where y > 0 (a select, so an infinite g
   gives 0, not NaN, where y <= 0), and a NaN output passes g */
static void drow_relu(int64_t n, float *restrict o, int64_t os, const float *g, int64_t gs, const float *xp, int64_t xs,
                      const float *yp, int64_t ys, bool acc) {
  (void)xp, (void)xs;
  if (os == 1 && gs == 1 && ys == 1)
    for (int64_t i = 0; i < n; i++) { /* g loaded unconditionally: a blend, not a masked load */
      const float gv = g[i];
      GRAD_STORE(o[i], yp[i] <= 0.0f ? 0.0f : gv);
    }
  else
    for (int64_t i = 0; i < n; i++) GRAD_STORE(o[i * os], yp[i * ys] <= 0.0f ? 0.0f : g[i * gs]);
}
GRAD_ROW(drow_gelu, d_gelu(x))
VM_GRAD_ROW(drow_gelu_tanh, GELU_K *(x + GELU_C * x * x * x), vm_tanh, d_gelu_tanh_th(x, v), d_gelu_tanh)
GRAD_ROW(drow_abs, x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f))
GRAD_ROW(drow_sin, cosf(x))
GRAD_ROW(drow_cos, -sinf(x))
GRAD_ROW(drow_zero, 0.0f) /* sign, floor, ceil, round: zero almost everywhere */
#define drow_sign drow_zero
#define drow_floor drow_zero
#define drow_ceil drow_zero
#define drow_round drow_zero
GRAD_ROW(drow_reciprocal, -y *y)
GRAD_ROW(drow_square, 2.0f * x)
GRAD_ROW(drow_log1p, 1.0f / (1.0f + x))
GRAD_ROW(drow_expm1, y + 1.0f)
GRAD_ROW(drow_silu, d_silu(x))
GRAD_ROW(drow_erf, d_erf(x))
GRAD_ROW(drow_tan, 1.0f + y * y)

static const attn__unary_grad_row_fn unary_grad_rows[ATTN_UNARY_OP_COUNT] = {ATTN_UNARY_OPS(DROW_OF_)};
#undef ROW_OF_
#undef DROW_OF_

static void clamp_inner(int64_t n, float **p, const int64_t *s, void *vctx) {
  const attn__clamp_ctx *c = vctx;
  float *o = p[0];
  const float *a = p[1];
  const float lo = c->lo, hi = c->hi;
  const bool has_lo = lo == lo, has_hi = hi == hi;
  for (int64_t i = 0; i < n; i++) {
    float x = a[i * s[1]];
    /* torch: min(max(x, lo), hi), NaN input stays NaN */
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    o[i * s[0]] = x;
  }
}
