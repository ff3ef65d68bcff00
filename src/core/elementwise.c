/* Elementwise math with NumPy broadcasting.
 *
 * Shapes: out = broadcast(a, b); every kernel below works on one innermost
 * row of n elements with per-operand strides (0 = broadcast scalar), after
 * attn__foreach has merged all the dims it can.  The row kernels are in
 * elementwise_kernels.h, compiled once per kernel family (kernels.h), the
 * unit-stride cases as separate loops so they vectorise at its width.
 */
#include "kernels.h"

#include <math.h>
#include <stdio.h>

static const char *binary_names[ATTN_BINARY_OP_COUNT] = {
    "add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum", "atan2", "fmod"};
static const char *unary_names[ATTN_UNARY_OP_COUNT] = {
    "neg",  "exp",        "log",    "sqrt", "rsqrt", "tanh",  "sigmoid", "relu",  "gelu", "gelu",  "abs", "sin",
    "cos",  "sign",       "reciprocal", "square", "log1p", "expm1", "floor", "ceil", "round", "silu", "erf"};

const char *attn_binary_op_name(attn_binary_op op) {
  return (unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "?";
}
const char *attn_unary_op_name(attn_unary_op op) {
  return (unsigned)op < ATTN_UNARY_OP_COUNT ? unary_names[op] : "?";
}

static void binary_inner(int64_t n, float **p, const int64_t *s, void *ctx) {
  attn__binary_row_fn fn = *(attn__binary_row_fn *)ctx;
  fn(n, p[0], s[0], p[1], s[1], p[2], s[2]);
}

static void unary_inner(int64_t n, float **p, const int64_t *s, void *ctx) {
  attn__unary_row_fn fn = *(attn__unary_row_fn *)ctx;
  fn(n, p[0], s[0], p[1], s[1]);
}

/* ------------------------------------------------------------------------ */
/* Drivers                                                                   */

static attn_status check_writable(const char *fn, const attn_tensor *t) {
  char sb[ATTN_SHAPE_BUF];
  if (attn__has_internal_overlap(t))
    return attn_set_error(ATTN_ERR_ARG,
                          "%s: the destination %s is an expanded view whose elements share memory; "
                          "clone it before writing in place",
                          fn, ATTN_SHAPE(t, sb));
  return ATTN_OK;
}

/* A private copy of src when it overlaps dst in anything but the exact same
   layout (a.add_(a) is fine, a.add_(a.t()) is not). */
static attn_status unalias(const attn_tensor *dst, const attn_tensor *src, attn_tensor **tmp) {
  *tmp = NULL;
  if (!attn__may_overlap(dst, src)) return ATTN_OK;
  bool same = dst->offset == src->offset && dst->ndim == src->ndim;
  for (int i = 0; same && i < dst->ndim; i++)
    same = dst->shape[i] == src->shape[i] && dst->stride[i] == src->stride[i];
  if (same) return ATTN_OK;
  return attn_clone(src, tmp);
}

static attn_status check_binary(attn_binary_op op) {
  if ((unsigned)op >= ATTN_BINARY_OP_COUNT) return attn_set_error(ATTN_ERR_ARG, "binary: unknown op %d", (int)op);
  return ATTN_OK;
}

attn_status attn_binary(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  attn_status st = check_binary(op);
  if (st) return st;
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  if ((st = attn_broadcast_shape(binary_names[op], a, b, &ndim, shape))) return st;
  attn_tensor *o;
  if ((st = attn__alloc(binary_names[op], ndim, shape, &o))) return st;
  int64_t strides[3][ATTN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) strides[0][d] = o->stride[d];
  attn__broadcast_strides(a, ndim, shape, strides[1]);
  attn__broadcast_strides(b, ndim, shape, strides[2]);
  float *base[3] = {attn_tensor_data(o), attn_tensor_data(a), attn_tensor_data(b)};
  attn__binary_row_fn fn = attn__kern()->binary_rows[op];
  if (!attn__foreach(ndim, shape, 3, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, binary_inner, &fn)) {
    attn_tensor_release(o);
    return attn__limit_error(binary_names[op]);
  }
  if ((st = attn__record_binary(op, a, b, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_binary_(attn_binary_op op, attn_tensor *a, const attn_tensor *b) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  attn_status st = check_binary(op);
  if (st) return st;
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  char name[32];
  snprintf(name, sizeof name, "%s_", binary_names[op]);
  if ((st = attn_broadcast_shape(name, a, b, &ndim, shape))) return st;
  bool fits = ndim == a->ndim;
  for (int d = 0; fits && d < ndim; d++) fits = shape[d] == a->shape[d];
  if (!fits)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: the result of shape %s does not fit in place into %s (other is %s)",
                          name, attn_shape_str(ndim, shape, sa, sizeof sa), ATTN_SHAPE(a, sb),
                          ATTN_SHAPE(b, sa));
  if ((st = check_writable(name, a))) return st;
  if (attn__ag_inplace_needed(a, 1, &b)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check(name, a)) || (st = attn_binary(op, a, b, &r))) return st;
    return attn__ag_inplace_commit(a, r);
  }
  attn__bump_version(a);
  attn_tensor *tmp;
  if ((st = unalias(a, b, &tmp))) return st;
  if (tmp) b = tmp;
  int64_t strides[3][ATTN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) strides[0][d] = strides[1][d] = a->stride[d];
  attn__broadcast_strides(b, ndim, shape, strides[2]);
  float *base[3] = {attn_tensor_data(a), attn_tensor_data(a), attn_tensor_data(b)};
  attn__binary_row_fn fn = attn__kern()->binary_rows[op];
  bool done = attn__foreach(ndim, shape, 3, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, binary_inner, &fn);
  attn_tensor_release(tmp);
  return done ? ATTN_OK : attn__limit_error(name);
}

/* Scalars ride along as a stride-0 operand: no 0-d tensor is allocated. */
static void scalar_operand(const attn_tensor *a, int64_t *stride) {
  for (int d = 0; d < a->ndim; d++) stride[d] = 0;
}

attn_status attn_binary_scalar(attn_binary_op op, const attn_tensor *a, float s, bool reversed,
                               attn_tensor **out) {
  attn_status st = check_binary(op);
  if (st) return st;
  attn_tensor *o;
  if ((st = attn__alloc(binary_names[op], a->ndim, a->shape, &o))) return st;
  int64_t strides[3][ATTN_MAX_DIMS];
  int at = reversed ? 2 : 1, sc = reversed ? 1 : 2;
  for (int d = 0; d < a->ndim; d++) {
    strides[0][d] = o->stride[d];
    strides[at][d] = a->stride[d];
  }
  scalar_operand(a, strides[sc]);
  float *base[3];
  base[0] = attn_tensor_data(o);
  base[at] = attn_tensor_data(a);
  base[sc] = &s;
  attn__binary_row_fn fn = attn__kern()->binary_rows[op];
  if (!attn__foreach(a->ndim, a->shape, 3, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, binary_inner, &fn)) {
    attn_tensor_release(o);
    return attn__limit_error(binary_names[op]);
  }
  if ((st = attn__record_binary_scalar(op, a, s, reversed, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_binary_scalar_(attn_binary_op op, attn_tensor *a, float s, bool reversed) {
  attn_status st = check_binary(op);
  if (st) return st;
  char name[32];
  snprintf(name, sizeof name, "%s_", binary_names[op]);
  if ((st = check_writable(name, a))) return st;
  if (attn__ag_inplace_needed(a, 0, NULL)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check(name, a)) || (st = attn_binary_scalar(op, a, s, reversed, &r))) return st;
    return attn__ag_inplace_commit(a, r);
  }
  attn__bump_version(a);
  int64_t strides[3][ATTN_MAX_DIMS];
  int at = reversed ? 2 : 1, sc = reversed ? 1 : 2;
  for (int d = 0; d < a->ndim; d++) strides[0][d] = strides[at][d] = a->stride[d];
  scalar_operand(a, strides[sc]);
  float *base[3];
  base[0] = base[at] = attn_tensor_data(a);
  base[sc] = &s;
  attn__binary_row_fn fn = attn__kern()->binary_rows[op];
  if (!attn__foreach(a->ndim, a->shape, 3, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, binary_inner, &fn))
    return attn__limit_error(name);
  return ATTN_OK;
}

attn_status attn_unary(attn_unary_op op, const attn_tensor *a, attn_tensor **out) {
  if ((unsigned)op >= ATTN_UNARY_OP_COUNT) return attn_set_error(ATTN_ERR_ARG, "unary: unknown op %d", (int)op);
  attn_tensor *o;
  attn_status st = attn__alloc(unary_names[op], a->ndim, a->shape, &o);
  if (st) return st;
  int64_t strides[2][ATTN_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) {
    strides[0][d] = o->stride[d];
    strides[1][d] = a->stride[d];
  }
  float *base[2] = {attn_tensor_data(o), attn_tensor_data(a)};
  attn__unary_row_fn fn = attn__kern()->unary_rows[op];
  if (!attn__foreach(a->ndim, a->shape, 2, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, unary_inner, &fn)) {
    attn_tensor_release(o);
    return attn__limit_error(unary_names[op]);
  }
  if ((st = attn__record_unary(op, a, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_unary_(attn_unary_op op, attn_tensor *a) {
  if ((unsigned)op >= ATTN_UNARY_OP_COUNT) return attn_set_error(ATTN_ERR_ARG, "unary: unknown op %d", (int)op);
  char name[32];
  snprintf(name, sizeof name, "%s_", unary_names[op]);
  attn_status st = check_writable(name, a);
  if (st) return st;
  if (attn__ag_inplace_needed(a, 0, NULL)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check(name, a)) || (st = attn_unary(op, a, &r))) return st;
    return attn__ag_inplace_commit(a, r);
  }
  attn__bump_version(a);
  int64_t strides[2][ATTN_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) strides[0][d] = strides[1][d] = a->stride[d];
  float *base[2] = {attn_tensor_data(a), attn_tensor_data(a)};
  attn__unary_row_fn fn = attn__kern()->unary_rows[op];
  if (!attn__foreach(a->ndim, a->shape, 2, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, unary_inner, &fn))
    return attn__limit_error(name);
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* clamp, where, masked_fill, add_scaled                                     */

typedef attn__clamp_ctx clamp_ctx;

static attn_status clamp_into(attn_tensor *o, const attn_tensor *a, float lo, float hi) {
  int64_t strides[2][ATTN_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) {
    strides[0][d] = o->stride[d];
    strides[1][d] = a->stride[d];
  }
  float *base[2] = {attn_tensor_data(o), attn_tensor_data(a)};
  clamp_ctx c = {lo, hi};
  if (!attn__foreach(a->ndim, a->shape, 2, base, (const int64_t(*)[ATTN_MAX_DIMS])strides,
                      attn__kern()->clamp_inner, &c))
    return attn__limit_error("clamp");
  return ATTN_OK;
}

attn_status attn_clamp(const attn_tensor *a, float lo, float hi, attn_tensor **out) {
  attn_tensor *o;
  attn_status st = attn__alloc("clamp", a->ndim, a->shape, &o);
  if (st) return st;
  if ((st = clamp_into(o, a, lo, hi)) || (st = attn__record_clamp(a, lo, hi, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_clamp_(attn_tensor *a, float lo, float hi) {
  attn_status st = check_writable("clamp_", a);
  if (st) return st;
  if (attn__ag_inplace_needed(a, 0, NULL)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check("clamp_", a)) || (st = attn_clamp(a, lo, hi, &r))) return st;
    return attn__ag_inplace_commit(a, r);
  }
  attn__bump_version(a);
  return clamp_into(a, a, lo, hi);
}

static void where_inner(int64_t n, float **p, const int64_t *s, void *ctx) {
  for (int64_t i = 0; i < n; i++) p[0][i * s[0]] = p[1][i * s[1]] != 0.0f ? p[2][i * s[2]] : p[3][i * s[3]];
}

attn_status attn_where(const attn_tensor *cond, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  int n1, ndim;
  int64_t s1[ATTN_MAX_DIMS], shape[ATTN_MAX_DIMS];
  attn_status st;
  if ((st = attn_broadcast_shape("where", cond, a, &n1, s1))) return st;
  attn_tensor tmp = {.ndim = n1};
  for (int i = 0; i < n1; i++) tmp.shape[i] = s1[i];
  if ((st = attn_broadcast_shape("where", &tmp, b, &ndim, shape))) return st;
  attn_tensor *o;
  if ((st = attn__alloc("where", ndim, shape, &o))) return st;
  int64_t strides[4][ATTN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) strides[0][d] = o->stride[d];
  attn__broadcast_strides(cond, ndim, shape, strides[1]);
  attn__broadcast_strides(a, ndim, shape, strides[2]);
  attn__broadcast_strides(b, ndim, shape, strides[3]);
  float *base[4] = {attn_tensor_data(o), attn_tensor_data(cond), attn_tensor_data(a), attn_tensor_data(b)};
  if (!attn__foreach(ndim, shape, 4, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, where_inner, NULL)) {
    attn_tensor_release(o);
    return attn__limit_error("where");
  }
  if ((st = attn__record_where(cond, a, b, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

static void masked_fill_inner(int64_t n, float **p, const int64_t *s, void *ctx) {
  const float v = *(const float *)ctx;
  for (int64_t i = 0; i < n; i++) p[0][i * s[0]] = p[2][i * s[2]] != 0.0f ? v : p[1][i * s[1]];
}

static attn_status masked_fill_into(const char *fn, attn_tensor *o, const attn_tensor *t, const attn_tensor *mask,
                                    float value) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st = attn_broadcast_shape(fn, t, mask, &ndim, shape);
  bool fits = st == ATTN_OK && ndim == t->ndim;
  for (int d = 0; fits && d < ndim; d++) fits = shape[d] == t->shape[d];
  if (!fits)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: mask of shape %s cannot be broadcast to the tensor's shape %s", fn,
                          ATTN_SHAPE(mask, sa), ATTN_SHAPE(t, sb));
  attn_tensor *tmp = NULL;
  if (o == t && (st = unalias(o, mask, &tmp))) return st;
  if (tmp) mask = tmp;
  int64_t strides[3][ATTN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) {
    strides[0][d] = o->stride[d];
    strides[1][d] = t->stride[d];
  }
  attn__broadcast_strides(mask, ndim, shape, strides[2]);
  float *base[3] = {attn_tensor_data(o), attn_tensor_data(t), attn_tensor_data(mask)};
  bool done =
      attn__foreach(ndim, shape, 3, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, masked_fill_inner, &value);
  attn_tensor_release(tmp);
  return done ? ATTN_OK : attn__limit_error(fn);
}

attn_status attn_masked_fill(const attn_tensor *t, const attn_tensor *mask, float value, attn_tensor **out) {
  attn_tensor *o;
  attn_status st = attn__alloc("masked_fill", t->ndim, t->shape, &o);
  if (st) return st;
  if ((st = masked_fill_into("masked_fill", o, t, mask, value)) || (st = attn__record_masked_fill(t, mask, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_masked_fill_(attn_tensor *t, const attn_tensor *mask, float value) {
  attn_status st = check_writable("masked_fill_", t);
  if (st) return st;
  if (attn__ag_inplace_needed(t, 0, NULL)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check("masked_fill_", t)) || (st = attn_masked_fill(t, mask, value, &r))) return st;
    return attn__ag_inplace_commit(t, r);
  }
  attn__bump_version(t);
  return masked_fill_into("masked_fill_", t, t, mask, value);
}

static void add_scaled_inner(int64_t n, float **p, const int64_t *s, void *ctx) {
  const float alpha = *(const float *)ctx;
  for (int64_t i = 0; i < n; i++) p[0][i * s[0]] = p[1][i * s[1]] + alpha * p[2][i * s[2]];
}

attn_status attn_add_scaled(const attn_tensor *a, const attn_tensor *b, float alpha, attn_tensor **out) {
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st = attn_broadcast_shape("add", a, b, &ndim, shape);
  if (st) return st;
  attn_tensor *o;
  if ((st = attn__alloc("add", ndim, shape, &o))) return st;
  int64_t strides[3][ATTN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) strides[0][d] = o->stride[d];
  attn__broadcast_strides(a, ndim, shape, strides[1]);
  attn__broadcast_strides(b, ndim, shape, strides[2]);
  float *base[3] = {attn_tensor_data(o), attn_tensor_data(a), attn_tensor_data(b)};
  if (!attn__foreach(ndim, shape, 3, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, add_scaled_inner, &alpha)) {
    attn_tensor_release(o);
    return attn__limit_error("add");
  }
  if ((st = attn__record_add_scaled(a, b, alpha, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}
