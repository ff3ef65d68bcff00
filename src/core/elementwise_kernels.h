/* Elementwise row kernels (elementwise.c describes the rows), written once
 * and compiled by each kernel family's unit (kernels_*.c) with its flags,
 * so the unit-stride loops vectorise at that family's width.  Defines the
 * static tables binary_rows and unary_rows and clamp_inner. */
#include "internal.h"

#include <math.h>

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
#define BINARY_ROW(NAME, OP)                                                               \
  static void NAME(int64_t n, float *restrict o, int64_t os, const float *a, int64_t as, \
                            const float *b, int64_t bs) {                                  \
    if (os == 1 && as == 1 && bs == 1) {                                                   \
      for (int64_t i = 0; i < n; i++) o[i] = OP(a[i], b[i]);                               \
    } else if (os == 1 && as == 1 && bs == 0) {                                            \
      const float y = b[0];                                                                \
      for (int64_t i = 0; i < n; i++) o[i] = OP(a[i], y);                                  \
    } else if (os == 1 && as == 0 && bs == 1) {                                            \
      const float x = a[0];                                                                \
      for (int64_t i = 0; i < n; i++) o[i] = OP(x, b[i]);                                  \
    } else {                                                                               \
      for (int64_t i = 0; i < n; i++) o[i * os] = OP(a[i * as], b[i * bs]);                \
    }                                                                                      \
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

static const attn__binary_row_fn binary_rows[ATTN_BINARY_OP_COUNT] = {
    row_add, row_sub, row_mul,     row_div,     row_pow,   row_eq,  row_ne, row_lt,
    row_le,  row_gt,  row_ge,      row_maximum, row_minimum, row_atan2, row_fmod};

/* ------------------------------------------------------------------------ */
/* Unary                                                                     */

static inline float f_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float f_relu(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
/* torch's exact GELU: x * Phi(x) via erf */
static inline float f_gelu(float x) { return x * 0.5f * (1.0f + erff(x * 0.70710678118654752440f)); }
static inline float f_gelu_tanh(float x) {
  const float k = 0.7978845608028654f; /* sqrt(2/pi) */
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
static inline float f_sign(float x) { return x != x ? x : (float)((x > 0.0f) - (x < 0.0f)); }

#define UNARY_ROW(NAME, EXPR)                                                               \
  static void NAME(int64_t n, float *restrict o, int64_t os, const float *a, int64_t as) { \
    if (os == 1 && as == 1) {                                                               \
      for (int64_t i = 0; i < n; i++) {                                                     \
        const float x = a[i];                                                               \
        o[i] = (EXPR);                                                                      \
      }                                                                                     \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) {                                                     \
        const float x = a[i * as];                                                          \
        o[i * os] = (EXPR);                                                                 \
      }                                                                                     \
    }                                                                                       \
  }

UNARY_ROW(row_neg, -x)
UNARY_ROW(row_exp, expf(x))
UNARY_ROW(row_log, logf(x))
UNARY_ROW(row_sqrt, sqrtf(x))
UNARY_ROW(row_rsqrt, 1.0f / sqrtf(x))
UNARY_ROW(row_tanh, tanhf(x))
UNARY_ROW(row_sigmoid, f_sigmoid(x))
UNARY_ROW(row_relu, f_relu(x))
UNARY_ROW(row_gelu, f_gelu(x))
UNARY_ROW(row_gelu_tanh, f_gelu_tanh(x))
UNARY_ROW(row_abs, fabsf(x))
UNARY_ROW(row_sin, sinf(x))
UNARY_ROW(row_cos, cosf(x))
UNARY_ROW(row_sign, f_sign(x))
UNARY_ROW(row_reciprocal, 1.0f / x)
UNARY_ROW(row_square, x * x)
UNARY_ROW(row_log1p, log1pf(x))
UNARY_ROW(row_expm1, expm1f(x))
UNARY_ROW(row_floor, floorf(x))
UNARY_ROW(row_ceil, ceilf(x))
UNARY_ROW(row_round, nearbyintf(x))
UNARY_ROW(row_silu, x * f_sigmoid(x))
UNARY_ROW(row_erf, erff(x))

static const attn__unary_row_fn unary_rows[ATTN_UNARY_OP_COUNT] = {
    row_neg,  row_exp,        row_log,    row_sqrt,   row_rsqrt, row_tanh,  row_sigmoid, row_relu,
    row_gelu, row_gelu_tanh,  row_abs,    row_sin,    row_cos,   row_sign,  row_reciprocal,
    row_square, row_log1p,    row_expm1,  row_floor,  row_ceil,  row_round, row_silu,    row_erf};

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

