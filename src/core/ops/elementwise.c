/* SPDX-License-Identifier: MIT */
/* Elementwise math with NumPy broadcasting.
 *
 * Shapes: out = broadcast(a, b); every kernel below works on one innermost
 * row of n elements with per-operand strides (0 = broadcast scalar), after
 * attn__foreach has merged all the dims it can.  The row kernels are in
 * elementwise_kernels.h, compiled once per kernel family (kernels.h), the
 * unit-stride cases as separate loops so they vectorise at its width.
 */
#include "ops/ops.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Names, integer rules and kinds from the op table (attn_ops.h). */
#define NAME_OF_(ID, NAME, ...) #NAME,
#define UNARY_INTS_(ID, NAME, SIG, READS, INTS, ...) ATTN_OP_INTS_##INTS,
#define BINARY_INTS_(ID, NAME, SIG, KIND, INTS, ...) ATTN_OP_INTS_##INTS,
#define BINARY_KIND_(ID, NAME, SIG, KIND, ...) ATTN_OP_KIND_##KIND,
static const char *binary_names[ATTN_BINARY_OP_COUNT] = {ATTN_BINARY_OPS(NAME_OF_)};
static const char *unary_names[ATTN_UNARY_OP_COUNT] = {ATTN_UNARY_OPS(NAME_OF_)};
static const unsigned char unary_ints[ATTN_UNARY_OP_COUNT] = {ATTN_UNARY_OPS(UNARY_INTS_)};
static const unsigned char binary_ints[ATTN_BINARY_OP_COUNT] = {ATTN_BINARY_OPS(BINARY_INTS_)};
static const unsigned char binary_kinds[ATTN_BINARY_OP_COUNT] = {ATTN_BINARY_OPS(BINARY_KIND_)};
#undef NAME_OF_
#undef UNARY_INTS_
#undef BINARY_INTS_
#undef BINARY_KIND_

const char *attn_binary_op_name(attn_binary_op op) {
  return (unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "?";
}
/* gelu_tanh is gelu's approximate = "tanh": messages name gelu */
const char *attn_unary_op_name(attn_unary_op op) {
  if (op == ATTN_GELU_TANH) return "gelu";
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
  for (int i = 0; same && i < dst->ndim; i++) same = dst->shape[i] == src->shape[i] && dst->stride[i] == src->stride[i];
  if (same) return ATTN_OK;
  return attn__clone_raw(src, tmp); /* a private data copy: no graph */
}

static attn_status check_binary(attn_binary_op op) {
  if ((unsigned)op >= ATTN_BINARY_OP_COUNT) return attn_set_error(ATTN_ERR_ARG, "binary: unknown op %d", (int)op);
  return ATTN_OK;
}

/* torch refuses a - b with a bool operand and pow of two bools; b_bool is
   false for a number operand. */
static attn_status check_bool_operands(attn_binary_op op, bool a_bool, bool b_bool, bool b_number) {
  if (op == ATTN_SUB && (a_bool || b_bool))
    return attn_set_error(ATTN_ERR_ARG, "sub: subtraction with a bool tensor is not supported (as in torch): for "
                                        "masks use a:logical_xor(b) or a:logical_and(b:logical_not()), else convert "
                                        "with :long() first");
  if (op == ATTN_POW && a_bool && b_bool && !b_number)
    return attn_set_error(ATTN_ERR_ARG, "pow: not supported for two bool tensors (convert with :long() first)");
  return ATTN_OK;
}

attn_status attn__binary_raw(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
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

static attn_status binary_inplace_f32(attn_binary_op op, attn_tensor *a, const attn_tensor *b) {
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
                          name, attn_shape_str(ndim, shape, sa, sizeof sa), ATTN_SHAPE(a, sb), ATTN_SHAPE(b, sa));
  if ((st = check_writable(name, a))) return st;
  if (attn__ag_inplace_needed(a, 1, &b)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check(name, a)) || (st = attn__binary_raw(op, a, b, &r))) return st;
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

attn_status attn__binary_scalar_raw(attn_binary_op op, const attn_tensor *a, float s, bool reversed,
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

static attn_status binary_scalar_inplace_f32(attn_binary_op op, attn_tensor *a, float s, bool reversed) {
  attn_status st = check_binary(op);
  if (st) return st;
  char name[32];
  snprintf(name, sizeof name, "%s_", binary_names[op]);
  if ((st = check_writable(name, a))) return st;
  if (attn__ag_inplace_needed(a, 0, NULL)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check(name, a)) || (st = attn__binary_scalar_raw(op, a, s, reversed, &r))) return st;
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

static attn_status unary_f32(attn_unary_op op, const attn_tensor *a, attn_tensor **out) {
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

static attn_status unary_inplace_f32(attn_unary_op op, attn_tensor *a) {
  if ((unsigned)op >= ATTN_UNARY_OP_COUNT) return attn_set_error(ATTN_ERR_ARG, "unary: unknown op %d", (int)op);
  char name[32];
  snprintf(name, sizeof name, "%s_", unary_names[op]);
  attn_status st = check_writable(name, a);
  if (st) return st;
  if (attn__ag_inplace_needed(a, 0, NULL)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check(name, a)) || (st = unary_f32(op, a, &r))) return st;
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
  if (!attn__foreach(a->ndim, a->shape, 2, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, attn__kern()->clamp_inner,
                     &c))
    return attn__limit_error("clamp");
  return ATTN_OK;
}

static attn_status clamp_f32(const attn_tensor *a, float lo, float hi, attn_tensor **out) {
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

static attn_status clamp_inplace_f32(attn_tensor *a, float lo, float hi) {
  attn_status st = check_writable("clamp_", a);
  if (st) return st;
  if (attn__ag_inplace_needed(a, 0, NULL)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check("clamp_", a)) || (st = clamp_f32(a, lo, hi, &r))) return st;
    return attn__ag_inplace_commit(a, r);
  }
  attn__bump_version(a);
  return clamp_into(a, a, lo, hi);
}

static void where_inner(int64_t n, float **p, const int64_t *s, void *ctx) {
  for (int64_t i = 0; i < n; i++) p[0][i * s[0]] = p[1][i * s[1]] != 0.0f ? p[2][i * s[2]] : p[3][i * s[3]];
}

static attn_status where_f32(const attn_tensor *cond, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
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
  bool done = attn__foreach(ndim, shape, 3, base, (const int64_t(*)[ATTN_MAX_DIMS])strides, masked_fill_inner, &value);
  attn_tensor_release(tmp);
  return done ? ATTN_OK : attn__limit_error(fn);
}

static attn_status masked_fill_f32(const attn_tensor *t, const attn_tensor *mask, float value, attn_tensor **out) {
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

static attn_status masked_fill_inplace_f32(attn_tensor *t, const attn_tensor *mask, float value) {
  attn_status st = check_writable("masked_fill_", t);
  if (st) return st;
  if (attn__ag_inplace_needed(t, 0, NULL)) {
    attn_tensor *r;
    if ((st = attn__ag_inplace_check("masked_fill_", t)) || (st = masked_fill_f32(t, mask, value, &r))) return st;
    return attn__ag_inplace_commit(t, r);
  }
  attn__bump_version(t);
  return masked_fill_into("masked_fill_", t, t, mask, value);
}

static void add_scaled_inner(int64_t n, float **p, const int64_t *s, void *ctx) {
  const float alpha = *(const float *)ctx;
  for (int64_t i = 0; i < n; i++) p[0][i * s[0]] = p[1][i * s[1]] + alpha * p[2][i * s[2]];
}

static attn_status add_scaled_f32(const attn_tensor *a, const attn_tensor *b, float alpha, attn_tensor **out) {
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

/* ------------------------------------------------------------------------ */
/* Dtypes: torch's promotion around the float32 kernels above, and plain
   loops for int64 and bool results.                                         */

static bool is_compare(attn_binary_op op) { return binary_kinds[op] == ATTN_OP_KIND_COMPARE; }

/* Ops with exact integer kernels (the table's KEEP: an int64 result, or
   bool for comparisons); the others (div, atan2) compute in float32. */
static bool int_capable(attn_binary_op op) { return binary_ints[op] == ATTN_OP_INTS_KEEP; }

/* x^y for y >= 0 by squaring (wrapping like torch's int64 pow) */
static int64_t ipow(int64_t x, int64_t y) {
  uint64_t r = 1, b = (uint64_t)x;
  while (y > 0) {
    if (y & 1) r *= b;
    b *= b;
    y >>= 1;
  }
  return (int64_t)r;
}

/* A float32 copy of t (retained when it is one). */
static attn_status as_float(const attn_tensor *t, attn_tensor **out) { return attn_to_dtype(t, ATTN_FLOAT32, out); }

/* Odometer over a broadcast shape with up to 4 operands' storage positions. */
typedef struct {
  int ndim, n;
  int64_t shape[ATTN_MAX_DIMS], stride[4][ATTN_MAX_DIMS], idx[ATTN_MAX_DIMS], pos[4];
} bc_iter;

static void bc_init(bc_iter *it, int ndim, const int64_t *shape, int n, const attn_tensor *const *ts) {
  it->ndim = ndim;
  it->n = n;
  for (int d = 0; d < ndim; d++) {
    it->shape[d] = shape[d];
    it->idx[d] = 0;
  }
  for (int k = 0; k < n; k++) {
    attn__broadcast_strides(ts[k], ndim, shape, it->stride[k]);
    it->pos[k] = ts[k]->offset;
  }
}

static bool bc_next(bc_iter *it) {
  for (int d = it->ndim - 1; d >= 0; d--) {
    if (++it->idx[d] < it->shape[d]) {
      for (int k = 0; k < it->n; k++) it->pos[k] += it->stride[k][d];
      return true;
    }
    for (int k = 0; k < it->n; k++) it->pos[k] -= it->stride[k][d] * (it->shape[d] - 1);
    it->idx[d] = 0;
  }
  return false;
}

static inline int64_t int_op(attn_binary_op op, int64_t x, int64_t y) {
  switch (op) {
  case ATTN_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
  case ATTN_SUB: return (int64_t)((uint64_t)x - (uint64_t)y);
  case ATTN_MUL: return (int64_t)((uint64_t)x * (uint64_t)y);
  case ATTN_MAXIMUM: return x > y ? x : y;
  case ATTN_MINIMUM: return x < y ? x : y;
  case ATTN_FMOD: return (y == -1) ? 0 : x % y; /* y != 0 checked before */
  case ATTN_POW: return ipow(x, y);             /* y >= 0 checked before */
  case ATTN_EQ: return x == y;
  case ATTN_NE: return x != y;
  case ATTN_LT: return x < y;
  case ATTN_LE: return x <= y;
  case ATTN_GT: return x > y;
  case ATTN_GE: return x >= y;
  default: return 0;
  }
}

static inline bool float_cmp(attn_binary_op op, double x, double y) {
  switch (op) {
  case ATTN_EQ: return x == y;
  case ATTN_NE: return x != y;
  case ATTN_LT: return x < y;
  case ATTN_LE: return x <= y;
  case ATTN_GT: return x > y;
  default: return x >= y;
  }
}

/* out = a op b for integer/bool a and b (int_capable ops); out dtype is
   int64, or bool for comparisons and for bool inputs. */
static attn_status binary_int(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  const char *fn = binary_names[op];
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st;
  if ((st = attn_broadcast_shape(fn, a, b, &ndim, shape))) return st;
  attn_dtype rt = is_compare(op) ? ATTN_BOOL : attn_promote_types(a->dtype, b->dtype);
  if (rt == ATTN_BOOL && op == ATTN_SUB)
    return attn_set_error(ATTN_ERR_ARG, "sub: subtracting two bool tensors is not supported (use logical_xor)");
  attn_tensor *o;
  if ((st = attn__alloc_dtype(fn, rt, ndim, shape, &o))) return st;
  if (attn_tensor_numel(o) > 0) {
    const attn_tensor *ts[2] = {a, b};
    bc_iter it;
    bc_init(&it, ndim, shape, 2, ts);
    int64_t i = 0, work = 0;
    do {
      if ((i & 0xffff) == 0 && attn__poll_work(&work, 0x10000)) {
        attn_tensor_release(o);
        return attn__limit_error(fn);
      }
      int64_t x = attn__load_i64(a->storage, it.pos[0]), y = attn__load_i64(b->storage, it.pos[1]);
      if (op == ATTN_FMOD && y == 0) {
        attn_tensor_release(o);
        return attn_set_error(ATTN_ERR_ARG, "fmod: integer division by zero");
      }
      if (op == ATTN_POW && y < 0) {
        attn_tensor_release(o);
        return attn_set_error(ATTN_ERR_ARG, "pow: integers to negative integer powers are not allowed (use :float())");
      }
      int64_t r = int_op(op, x, y);
      if (rt == ATTN_BOOL)
        attn_tensor_bool(o)[i] = r != 0;
      else
        attn_tensor_i64(o)[i] = r;
      i++;
    } while (bc_next(&it));
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_binary(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  if (attn_check_compute((unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "binary", 1, NULL, a) ||
      attn_check_compute((unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "binary", 2, NULL, b))
    return ATTN_ERR_ARG;
  attn_status st = check_binary(op);
  if (!st) st = check_bool_operands(op, a->dtype == ATTN_BOOL, b->dtype == ATTN_BOOL, false);
  if (st) return st;
  attn_dtype rt = attn_promote_types(a->dtype, b->dtype);
  if (rt != ATTN_FLOAT32 && int_capable(op)) return binary_int(op, a, b, out);
  attn_tensor *fa = NULL, *fb = NULL, *r = NULL;
  if ((st = as_float(a, &fa)) || (st = as_float(b, &fb))) goto done;
  if ((st = attn__binary_raw(op, fa, fb, &r))) goto done;
  if (is_compare(op)) {
    attn_tensor *c;
    st = attn_to_dtype(r, ATTN_BOOL, &c);
    attn_tensor_release(r);
    r = st ? NULL : c;
  }
done:
  attn_tensor_release(fa);
  attn_tensor_release(fb);
  if (st == ATTN_OK) *out = r;
  return st;
}

/* Writes r (an out-of-place result) into a, refusing torch's unsafe casts. */
static attn_status commit_into(const char *fn, attn_tensor *a, attn_tensor *r) {
  attn_status st = ATTN_OK;
  if (r->dtype == ATTN_FLOAT32 && a->dtype != ATTN_FLOAT32)
    st = attn_set_error(ATTN_ERR_ARG, "%s: result type float32 can't be cast to the destination's dtype %s", fn,
                        attn_dtype_name(a->dtype));
  else if (r->dtype == ATTN_INT64 && a->dtype == ATTN_BOOL)
    st = attn_set_error(ATTN_ERR_ARG, "%s: result type int64 can't be cast to the destination's dtype bool", fn);
  else if ((st = attn__copy_check(a, r)) == ATTN_OK) /* a is not float32: no graph to record */
    st = attn__copy_raw(a, r);
  attn_tensor_release(r);
  return st;
}

attn_status attn_binary_(attn_binary_op op, attn_tensor *a, const attn_tensor *b) {
  if (attn_check_compute((unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "binary", 1, NULL, a) ||
      attn_check_compute((unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "binary", 2, NULL, b))
    return ATTN_ERR_ARG;
  attn_status st = check_binary(op);
  if (!st) st = check_bool_operands(op, a->dtype == ATTN_BOOL, b->dtype == ATTN_BOOL, false);
  if (st) return st;
  char name[32];
  snprintf(name, sizeof name, "%s_", binary_names[op]);
  if (a->dtype == ATTN_FLOAT32) {
    if (b->dtype == ATTN_FLOAT32) return binary_inplace_f32(op, a, b);
    attn_tensor *fb;
    if ((st = as_float(b, &fb))) return st;
    st = binary_inplace_f32(op, a, fb);
    attn_tensor_release(fb);
    return st;
  }
  if ((st = check_writable(name, a))) return st;
  attn_tensor *r;
  if ((st = attn_binary(op, a, b, &r))) return st;
  return commit_into(name, a, r);
}

/* a op s for integer/bool a and an integral s: int64 (bool for
   comparisons); comparisons against any s are exact in double. */
static attn_status binary_scalar_int_any(attn_binary_op op, const attn_tensor *a, double s, int64_t si, bool reversed,
                                         attn_tensor **out) {
  const char *fn = binary_names[op];
  bool cmp = is_compare(op);
  attn_dtype rt = cmp ? ATTN_BOOL : ATTN_INT64;
  attn_tensor *o;
  attn_status st = attn__alloc_dtype(fn, rt, a->ndim, a->shape, &o);
  if (st) return st;
  int64_t n = attn_tensor_numel(a);
  if (op == ATTN_FMOD && !reversed && si == 0) {
    attn_tensor_release(o);
    return attn_set_error(ATTN_ERR_ARG, "fmod: integer division by zero");
  }
  if (op == ATTN_POW && !reversed && si < 0) {
    attn_tensor_release(o);
    return attn_set_error(ATTN_ERR_ARG, "pow: integers to negative integer powers are not allowed (use :float())");
  }
  if (n > 0) {
    attn__iter it;
    attn__iter_init(&it, a);
    int64_t i = 0, work = 0;
    do {
      if ((i & 0xffff) == 0 && attn__poll_work(&work, 0x10000)) {
        attn_tensor_release(o);
        return attn__limit_error(fn);
      }
      int64_t x = attn__load_i64(a->storage, it.pos);
      if (cmp && (double)si != s) {
        double xd = (double)x;
        attn_tensor_bool(o)[i] = reversed ? float_cmp(op, s, xd) : float_cmp(op, xd, s);
      } else if (cmp) { /* exact for any int64 */
        attn_tensor_bool(o)[i] = (reversed ? int_op(op, si, x) : int_op(op, x, si)) != 0;
      } else {
        if (op == ATTN_FMOD && reversed && x == 0) {
          attn_tensor_release(o);
          return attn_set_error(ATTN_ERR_ARG, "fmod: integer division by zero");
        }
        if (op == ATTN_POW && reversed && x < 0) {
          attn_tensor_release(o);
          return attn_set_error(ATTN_ERR_ARG,
                                "pow: integers to negative integer powers are not allowed (use :float())");
        }
        attn_tensor_i64(o)[i] = reversed ? int_op(op, si, x) : int_op(op, x, si);
      }
      i++;
    } while (attn__iter_next(&it));
  }
  *out = o;
  return ATTN_OK;
}

static attn_status binary_scalar_int(attn_binary_op op, const attn_tensor *a, double s, bool reversed,
                                     attn_tensor **out) {
  int64_t si = (s >= -9.2233720368547758e18 && s < 9.2233720368547758e18) ? (int64_t)s : 0;
  return binary_scalar_int_any(op, a, s, si, reversed, out);
}

static attn_status binary_scalar_int_exact(attn_binary_op op, const attn_tensor *a, int64_t s, bool reversed,
                                           attn_tensor **out) {
  return binary_scalar_int_any(op, a, (double)s, s, reversed, out);
}

attn_status attn_binary_scalar(attn_binary_op op, const attn_tensor *a, float s, bool reversed, attn_tensor **out) {
  if (attn_check_compute((unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "binary", 1, NULL, a))
    return ATTN_ERR_ARG;
  attn_status st = check_binary(op);
  if (!st) st = check_bool_operands(op, a->dtype == ATTN_BOOL, false, true);
  if (st) return st;
  if (a->dtype != ATTN_FLOAT32) {
    /* torch: int tensor op int scalar stays int64, comparisons give bool;
       a fractional scalar or a float op promotes to float32 */
    bool integral = s == floorf(s) && fabsf(s) < 9.2e18f;
    if (is_compare(op) || (int_capable(op) && integral)) return binary_scalar_int(op, a, s, reversed, out);
  }
  attn_tensor *fa, *r;
  if ((st = as_float(a, &fa))) return st;
  st = attn__binary_scalar_raw(op, fa, s, reversed, &r);
  attn_tensor_release(fa);
  if (st) return st;
  if (is_compare(op)) {
    attn_tensor *c;
    st = attn_to_dtype(r, ATTN_BOOL, &c);
    attn_tensor_release(r);
    if (st) return st;
    r = c;
  }
  *out = r;
  return ATTN_OK;
}

attn_status attn_binary_scalar_(attn_binary_op op, attn_tensor *a, float s, bool reversed) {
  if (attn_check_compute((unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "binary", 1, NULL, a))
    return ATTN_ERR_ARG;
  attn_status st = check_binary(op);
  if (st) return st;
  if (a->dtype == ATTN_FLOAT32) return binary_scalar_inplace_f32(op, a, s, reversed);
  char name[32];
  snprintf(name, sizeof name, "%s_", binary_names[op]);
  if ((st = check_writable(name, a))) return st;
  attn_tensor *r;
  if ((st = attn_binary_scalar(op, a, s, reversed, &r))) return st;
  return commit_into(name, a, r);
}

/* Unary ops that keep integers integers in torch (the table's KEEP,
   KEEP_BOOL and BOOL_TO_INT; each has a case in unary_int). */
static bool unary_int_capable(attn_unary_op op) {
  return unary_ints[op] != ATTN_OP_INTS_FLOAT && unary_ints[op] != ATTN_OP_INTS_REFUSE;
}

static attn_status unary_int(attn_unary_op op, const attn_tensor *a, attn_tensor **out) {
  const char *fn = unary_names[op];
  /* torch: sign keeps a bool a bool, square makes it int64, the others refuse it */
  if (a->dtype == ATTN_BOOL && unary_ints[op] == ATTN_OP_INTS_KEEP)
    return attn_set_error(ATTN_ERR_ARG, "%s: not supported for bool tensors (convert with :long() first%s)", fn,
                          op == ATTN_NEG ? ", or invert a mask with :logical_not()" : "");
  attn_dtype rt = a->dtype == ATTN_BOOL && unary_ints[op] == ATTN_OP_INTS_KEEP_BOOL ? ATTN_BOOL : ATTN_INT64;
  attn_tensor *o;
  attn_status st = attn__alloc_dtype(fn, rt, a->ndim, a->shape, &o);
  if (st) return st;
  if (attn_tensor_numel(a) > 0) {
    attn__iter it;
    attn__iter_init(&it, a);
    int64_t i = 0;
    do {
      int64_t x = attn__load_i64(a->storage, it.pos), r;
      switch (op) {
      case ATTN_NEG: r = (int64_t)(0 - (uint64_t)x); break;
      case ATTN_ABS: r = x < 0 ? (int64_t)(0 - (uint64_t)x) : x; break;
      case ATTN_SIGN: r = (x > 0) - (x < 0); break;
      case ATTN_RELU: r = x > 0 ? x : 0; break;
      case ATTN_SQUARE: r = (int64_t)((uint64_t)x * (uint64_t)x); break;
      default: r = x; break;
      }
      if (rt == ATTN_BOOL)
        attn_tensor_bool(o)[i] = r != 0;
      else
        attn_tensor_i64(o)[i] = r;
      if ((++i & 0xffff) == 0 && attn__cancelled()) {
        attn_tensor_release(o);
        return attn__limit_error(fn);
      }
    } while (attn__iter_next(&it));
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_unary(attn_unary_op op, const attn_tensor *a, attn_tensor **out) {
  if (attn_check_compute((unsigned)op < ATTN_UNARY_OP_COUNT ? unary_names[op] : "unary", 1, NULL, a))
    return ATTN_ERR_ARG;
  if ((unsigned)op >= ATTN_UNARY_OP_COUNT) return attn_set_error(ATTN_ERR_ARG, "unary: unknown op %d", (int)op);
  if (a->dtype == ATTN_FLOAT32) return unary_f32(op, a, out);
  if (unary_int_capable(op)) return unary_int(op, a, out);
  if (unary_ints[op] == ATTN_OP_INTS_REFUSE) /* torch refuses integers too */
    return attn_set_error(ATTN_ERR_ARG, "%s: expected a floating tensor, got %s (convert with :float() first)",
                          unary_names[op], attn_dtype_name(a->dtype));
  attn_tensor *fa;
  attn_status st = as_float(a, &fa);
  if (st) return st;
  st = unary_f32(op, fa, out);
  attn_tensor_release(fa);
  return st;
}

attn_status attn_unary_(attn_unary_op op, attn_tensor *a) {
  if (attn_check_compute((unsigned)op < ATTN_UNARY_OP_COUNT ? unary_names[op] : "unary", 1, NULL, a))
    return ATTN_ERR_ARG;
  if ((unsigned)op >= ATTN_UNARY_OP_COUNT) return attn_set_error(ATTN_ERR_ARG, "unary: unknown op %d", (int)op);
  if (a->dtype == ATTN_FLOAT32) return unary_inplace_f32(op, a);
  char name[32];
  snprintf(name, sizeof name, "%s_", unary_names[op]);
  attn_status st = check_writable(name, a);
  if (st) return st;
  attn_tensor *r;
  if ((st = attn_unary(op, a, &r))) return st;
  return commit_into(name, a, r);
}

/* clamp of an int64 or bool tensor between integral bounds (nan: open):
   int64, like torch's clamp with integer scalars. */
static attn_status clamp_int(const attn_tensor *a, float lo, float hi, attn_tensor **out) {
  attn_tensor *o;
  attn_status st = attn__alloc_dtype("clamp", ATTN_INT64, a->ndim, a->shape, &o);
  if (st) return st;
  /* bounds beyond int64 clamp nothing on their side */
  bool has_lo = lo == lo && lo > -9.2233720368547758e18f, has_hi = hi == hi && hi < 9.2233720368547758e18f;
  int64_t l = has_lo ? (lo >= 9.2233720368547758e18f ? INT64_MAX : (int64_t)lo) : INT64_MIN;
  int64_t h = has_hi ? (hi <= -9.2233720368547758e18f ? INT64_MIN : (int64_t)hi) : INT64_MAX;
  if (attn_tensor_numel(a) > 0) {
    attn__iter it;
    attn__iter_init(&it, a);
    int64_t *p = attn_tensor_i64(o), i = 0;
    do {
      int64_t x = attn__load_i64(a->storage, it.pos);
      x = x < l ? l : x;
      p[i++] = x > h ? h : x; /* torch: max wins when min > max */
      if ((i & 0xffff) == 0 && attn__cancelled()) {
        attn_tensor_release(o);
        return attn__limit_error("clamp");
      }
    } while (attn__iter_next(&it));
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_clamp(const attn_tensor *a, float lo, float hi, attn_tensor **out) {
  if (attn_check_compute("clamp", 1, NULL, a)) return ATTN_ERR_ARG;
  if (a->dtype == ATTN_FLOAT32) return clamp_f32(a, lo, hi, out);
  if ((lo != lo || lo == floorf(lo)) && (hi != hi || hi == floorf(hi))) return clamp_int(a, lo, hi, out);
  attn_tensor *fa;
  attn_status st = as_float(a, &fa);
  if (st) return st;
  st = clamp_f32(fa, lo, hi, out);
  attn_tensor_release(fa);
  return st;
}

attn_status attn_clamp_(attn_tensor *a, float lo, float hi) {
  if (attn_check_compute("clamp_", 1, NULL, a)) return ATTN_ERR_ARG;
  if (a->dtype == ATTN_FLOAT32) return clamp_inplace_f32(a, lo, hi);
  attn_status st = check_writable("clamp_", a);
  if (st) return st;
  attn_tensor *r;
  if ((st = attn_clamp(a, lo, hi, &r))) return st;
  return commit_into("clamp_", a, r);
}

/* where/masked_fill for int64 and bool values (no autograd: no float input). */
static attn_status where_int(const attn_tensor *cond, const attn_tensor *a, const attn_tensor *b, int ndim,
                             const int64_t *shape, attn_tensor **out) {
  attn_dtype rt = attn_promote_types(a->dtype, b->dtype);
  attn_tensor *o;
  attn_status st = attn__alloc_dtype("where", rt, ndim, shape, &o);
  if (st) return st;
  if (attn_tensor_numel(o) > 0) {
    const attn_tensor *ts[3] = {cond, a, b};
    bc_iter it;
    bc_init(&it, ndim, shape, 3, ts);
    int64_t i = 0, work = 0;
    do {
      if ((i & 0xffff) == 0 && attn__poll_work(&work, 0x10000)) {
        attn_tensor_release(o);
        return attn__limit_error("where");
      }
      bool c = attn__load_f64(cond->storage, it.pos[0]) != 0;
      int64_t v = c ? attn__load_i64(a->storage, it.pos[1]) : attn__load_i64(b->storage, it.pos[2]);
      if (rt == ATTN_BOOL)
        attn_tensor_bool(o)[i] = v != 0;
      else
        attn_tensor_i64(o)[i] = v;
      i++;
    } while (bc_next(&it));
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_where(const attn_tensor *cond, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  if (attn_check_compute("where", 1, "condition", cond) || attn_check_compute("where", 2, "input", a) ||
      attn_check_compute("where", 3, "other", b))
    return ATTN_ERR_ARG;
  attn_status st;
  if (attn_promote_types(a->dtype, b->dtype) != ATTN_FLOAT32) {
    int n1, ndim;
    int64_t s1[ATTN_MAX_DIMS], shape[ATTN_MAX_DIMS];
    if ((st = attn_broadcast_shape("where", cond, a, &n1, s1))) return st;
    attn_tensor tmp = {.ndim = n1};
    for (int i = 0; i < n1; i++) tmp.shape[i] = s1[i];
    if ((st = attn_broadcast_shape("where", &tmp, b, &ndim, shape))) return st;
    return where_int(cond, a, b, ndim, shape, out);
  }
  if (cond->dtype == ATTN_FLOAT32 && a->dtype == ATTN_FLOAT32 && b->dtype == ATTN_FLOAT32)
    return where_f32(cond, a, b, out);
  attn_tensor *fc = NULL, *fa = NULL, *fb = NULL;
  if (!(st = as_float(cond, &fc)) && !(st = as_float(a, &fa)) && !(st = as_float(b, &fb)))
    st = where_f32(fc, fa, fb, out);
  attn_tensor_release(fc);
  attn_tensor_release(fa);
  attn_tensor_release(fb);
  return st;
}

static attn_status masked_fill_int(const char *fn, attn_tensor *o, const attn_tensor *t, const attn_tensor *mask,
                                   double value) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st = attn_broadcast_shape(fn, t, mask, &ndim, shape);
  bool fits = st == ATTN_OK && ndim == t->ndim;
  for (int d = 0; fits && d < ndim; d++) fits = shape[d] == t->shape[d];
  if (!fits)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: mask of shape %s cannot be broadcast to the tensor's shape %s", fn,
                          ATTN_SHAPE(mask, sa), ATTN_SHAPE(t, sb));
  if ((st = attn__check_value(fn, o->dtype, value))) return st;
  if (attn_tensor_numel(t) == 0) return ATTN_OK;
  const attn_tensor *ts[3] = {o, t, mask};
  bc_iter it;
  bc_init(&it, ndim, shape, 3, ts);
  int64_t vi = o->dtype == ATTN_BOOL ? value != 0 : (int64_t)value; /* bool: nonzero (0.5, nan) is true */
  do {
    bool m = attn__load_f64(mask->storage, it.pos[2]) != 0;
    int64_t v = m ? vi : attn__load_i64(t->storage, it.pos[1]);
    if (o->dtype == ATTN_BOOL)
      ((bool *)o->storage->data)[it.pos[0]] = v != 0;
    else
      ((int64_t *)o->storage->data)[it.pos[0]] = v;
  } while (bc_next(&it));
  return ATTN_OK;
}

attn_status attn_masked_fill(const attn_tensor *t, const attn_tensor *mask, float value, attn_tensor **out) {
  if (attn_check_compute("masked_fill", 1, "input", t) || attn_check_compute("masked_fill", 2, "mask", mask))
    return ATTN_ERR_ARG;
  attn_status st;
  if (t->dtype != ATTN_FLOAT32) {
    attn_tensor *o;
    if ((st = attn__alloc_dtype("masked_fill", t->dtype, t->ndim, t->shape, &o))) return st;
    if ((st = masked_fill_int("masked_fill", o, t, mask, value))) {
      attn_tensor_release(o);
      return st;
    }
    *out = o;
    return ATTN_OK;
  }
  if (mask->dtype == ATTN_FLOAT32) return masked_fill_f32(t, mask, value, out);
  attn_tensor *fm;
  if ((st = as_float(mask, &fm))) return st;
  st = masked_fill_f32(t, fm, value, out);
  attn_tensor_release(fm);
  return st;
}

attn_status attn_masked_fill_(attn_tensor *t, const attn_tensor *mask, float value) {
  if (attn_check_compute("masked_fill_", 1, "input", t) || attn_check_compute("masked_fill_", 2, "mask", mask))
    return ATTN_ERR_ARG;
  attn_status st;
  if (t->dtype != ATTN_FLOAT32) {
    if ((st = check_writable("masked_fill_", t))) return st;
    attn__bump_version(t);
    attn_tensor *m2 = NULL;
    if (attn__may_overlap(t, mask) && (st = attn__clone_raw(mask, &m2))) return st;
    st = masked_fill_int("masked_fill_", t, t, m2 ? m2 : mask, value);
    attn_tensor_release(m2);
    return st;
  }
  if (mask->dtype == ATTN_FLOAT32) return masked_fill_inplace_f32(t, mask, value);
  attn_tensor *fm;
  if ((st = as_float(mask, &fm))) return st;
  st = masked_fill_inplace_f32(t, fm, value);
  attn_tensor_release(fm);
  return st;
}

attn_status attn_add_scaled(const attn_tensor *a, const attn_tensor *b, float alpha, attn_tensor **out) {
  if (attn_check_compute("add", 1, NULL, a) || attn_check_compute("add", 2, NULL, b)) return ATTN_ERR_ARG;
  if (a->dtype == ATTN_FLOAT32 && b->dtype == ATTN_FLOAT32) return add_scaled_f32(a, b, alpha, out);
  attn_tensor *fa = NULL, *fb = NULL;
  attn_status st;
  if (!(st = as_float(a, &fa)) && !(st = as_float(b, &fb))) st = add_scaled_f32(fa, fb, alpha, out);
  attn_tensor_release(fa);
  attn_tensor_release(fb);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Logical ops, float classification, integer division                      */

attn_status attn_logical(attn_logical_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  if (attn_check_compute("logical", 1, NULL, a) || attn_check_compute("logical", 2, NULL, b)) return ATTN_ERR_ARG;
  static const attn_binary_op as_bool_op[] = {ATTN_MUL, ATTN_ADD, ATTN_NE};
  static const char *const names[] = {"logical_and", "logical_or", "logical_xor"};
  if ((unsigned)op > ATTN_LOGICAL_XOR) return attn_set_error(ATTN_ERR_ARG, "logical: unknown op %d", (int)op);
  attn_tensor *ba = NULL, *bb = NULL;
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st = attn_broadcast_shape(names[op], a, b, &ndim, shape);
  if (st) return st;
  if (!(st = attn_to_dtype(a, ATTN_BOOL, &ba)) && !(st = attn_to_dtype(b, ATTN_BOOL, &bb)))
    st = binary_int(as_bool_op[op], ba, bb, out); /* on bools: and, or, xor */
  attn_tensor_release(ba);
  attn_tensor_release(bb);
  return st;
}

attn_status attn_logical_not(const attn_tensor *a, attn_tensor **out) {
  if (attn_check_compute("logical_not", 1, NULL, a)) return ATTN_ERR_ARG;
  attn_tensor *ba;
  attn_status st = attn_to_dtype(a, ATTN_BOOL, &ba);
  if (st) return st;
  st = binary_scalar_int(ATTN_EQ, ba, 0, false, out);
  attn_tensor_release(ba);
  return st;
}

/* kind 0: isnan, 1: isinf, 2: isfinite (integers: never nan/inf) */
static attn_status classify(int kind, const attn_tensor *a, attn_tensor **out) {
  static const char *const names[] = {"isnan", "isinf", "isfinite"};
  if (attn_check_compute(names[kind], 1, NULL, a)) return ATTN_ERR_ARG;
  attn_tensor *o;
  attn_status st = attn__alloc_dtype(names[kind], ATTN_BOOL, a->ndim, a->shape, &o);
  if (st) return st;
  int64_t n = attn_tensor_numel(a);
  bool *p = attn_tensor_bool(o);
  if (a->dtype != ATTN_FLOAT32) {
    memset(p, kind == 2, (size_t)n);
  } else if (n > 0) {
    attn__iter it;
    attn__iter_init(&it, a);
    const float *base = a->storage->data;
    int64_t i = 0;
    do {
      float x = base[it.pos];
      p[i++] = kind == 0 ? isnan(x) : kind == 1 ? isinf(x) : isfinite(x);
      if ((i & 0xffff) == 0 && attn__cancelled()) {
        attn_tensor_release(o);
        return attn__limit_error(names[kind]);
      }
    } while (attn__iter_next(&it));
  }
  *out = o;
  return ATTN_OK;
}
attn_status attn_isnan(const attn_tensor *a, attn_tensor **out) { return classify(0, a, out); }
attn_status attn_isinf(const attn_tensor *a, attn_tensor **out) { return classify(1, a, out); }
attn_status attn_isfinite(const attn_tensor *a, attn_tensor **out) { return classify(2, a, out); }

/* torch.floor_divide / torch.remainder (Python's // and %): exact on
   integers (division by zero is an error), floor(a / b) and
   a - floor(a / b) * b on floats (composed, so autograd follows). */
static attn_status int_divmod(bool rem, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  const char *fn = rem ? "remainder" : "floor_divide";
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st;
  if ((st = attn_broadcast_shape(fn, a, b, &ndim, shape))) return st;
  attn_tensor *o;
  if ((st = attn__alloc_dtype(fn, ATTN_INT64, ndim, shape, &o))) return st;
  if (attn_tensor_numel(o) > 0) {
    const attn_tensor *ts[2] = {a, b};
    bc_iter it;
    bc_init(&it, ndim, shape, 2, ts);
    int64_t *p = attn_tensor_i64(o), i = 0;
    do {
      int64_t x = attn__load_i64(a->storage, it.pos[0]), y = attn__load_i64(b->storage, it.pos[1]);
      if (y == 0) {
        attn_tensor_release(o);
        return attn_set_error(ATTN_ERR_ARG, "%s: integer division by zero", fn);
      }
      int64_t q = (y == -1) ? (int64_t)(0 - (uint64_t)x) : x / y, r = (y == -1) ? 0 : x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        q -= 1;
        r += y;
      }
      p[i++] = rem ? r : q;
    } while (bc_next(&it));
  }
  *out = o;
  return ATTN_OK;
}

static attn_status float_divmod(bool rem, const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  attn_tensor *q = NULL, *fq = NULL, *m = NULL;
  attn_status st;
  if ((st = attn_binary(ATTN_DIV, a, b, &q))) return st;
  st = attn_unary(ATTN_FLOOR, q, &fq);
  attn_tensor_release(q);
  if (st) return st;
  if (!rem) {
    *out = fq;
    return ATTN_OK;
  }
  /* a - floor(a / b) * b, with a bool a as float (sub refuses bools; it carries no gradient) */
  attn_tensor *fa = NULL;
  if (!(st = attn_binary(ATTN_MUL, fq, b, &m)) && !(a->dtype == ATTN_BOOL && (st = as_float(a, &fa))))
    st = attn_binary(ATTN_SUB, fa ? fa : a, m, out);
  attn_tensor_release(fa);
  attn_tensor_release(fq);
  attn_tensor_release(m);
  return st;
}

attn_status attn_floor_divide(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  if (attn_check_compute("floor_divide", 1, NULL, a) || attn_check_compute("floor_divide", 2, NULL, b))
    return ATTN_ERR_ARG;
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st = attn_broadcast_shape("floor_divide", a, b, &ndim, shape);
  if (st) return st;
  if (attn_promote_types(a->dtype, b->dtype) != ATTN_FLOAT32) return int_divmod(false, a, b, out);
  return float_divmod(false, a, b, out);
}

attn_status attn_remainder(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  if (attn_check_compute("remainder", 1, NULL, a) || attn_check_compute("remainder", 2, NULL, b)) return ATTN_ERR_ARG;
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st = attn_broadcast_shape("remainder", a, b, &ndim, shape);
  if (st) return st;
  if (attn_promote_types(a->dtype, b->dtype) != ATTN_FLOAT32) return int_divmod(true, a, b, out);
  return float_divmod(true, a, b, out);
}

attn_status attn_binary_scalar_i64(attn_binary_op op, const attn_tensor *a, int64_t s, bool reversed,
                                   attn_tensor **out) {
  if (attn_check_compute((unsigned)op < ATTN_BINARY_OP_COUNT ? binary_names[op] : "binary", 1, NULL, a))
    return ATTN_ERR_ARG;
  attn_status st = check_binary(op);
  if (!st) st = check_bool_operands(op, a->dtype == ATTN_BOOL, false, true);
  if (st) return st;
  if (a->dtype != ATTN_FLOAT32 && int_capable(op)) return binary_scalar_int_exact(op, a, s, reversed, out);
  return attn_binary_scalar(op, a, (float)s, reversed, out);
}
