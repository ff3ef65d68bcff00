/* SPDX-License-Identifier: MIT */
/* The bad-input catalogue for the C API (issue 8): every entry point of
 * attn.h is called with negative, huge and overflowing sizes, out-of-range
 * dims, indices and enum values, NaN/inf parameters, mismatched shapes,
 * empty tensors, non-contiguous views and aliasing outputs.  A failing call
 * must return a status (never abort), set a message that starts with the
 * function's name, leave *out untouched (a sentinel pointer survives) and
 * leave its inputs unchanged; NULL is passed only where the header allows
 * it (generators, opts, weights, info, grad, ...), and those calls must
 * work.  Calls that torch allows on empty tensors must succeed with torch
 * 1.13's answer.  Prints "N passed, N failed" (check.h) and the number of
 * failing calls tried. */
#define _POSIX_C_SOURCE 200809L
#include "attn.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

#define BIG ((int64_t)1 << 62)
#define HUGE40 ((int64_t)1 << 40)

static attn_tensor SENTINEL_STORAGE;
#define SENTINEL (&SENTINEL_STORAGE)

static int bad_calls; /* failing calls tried */

/* A fresh contiguous tensor with distinct values (i * 0.37 - 1). */
static attn_tensor *mk(int ndim, const int64_t *shape) {
  attn_tensor *t = NULL;
  if (attn_empty(ndim, shape, &t)) abort();
  float *p = attn_tensor_data(t);
  int64_t n = attn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) p[i] = (float)i * 0.37f - 1.0f;
  return t;
}
static attn_tensor *mk1(int64_t a) { return mk(1, (int64_t[]){a}); }
static attn_tensor *mk2(int64_t a, int64_t b) { return mk(2, (int64_t[]){a, b}); }
static attn_tensor *mk3(int64_t a, int64_t b, int64_t c) { return mk(3, (int64_t[]){a, b, c}); }

/* A snapshot of a tensor's geometry and values. */
typedef struct {
  const attn_tensor *t;
  int ndim;
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS], offset;
  int64_t n;
  float *vals;
  long version;
} snap;

static snap take(const attn_tensor *t) {
  snap s = {.t = t, .ndim = t->ndim, .offset = t->offset, .n = attn_tensor_numel(t)};
  memcpy(s.shape, t->shape, sizeof s.shape);
  memcpy(s.stride, t->stride, sizeof s.stride);
  s.vals = malloc(sizeof(float) * (size_t)(s.n ? s.n : 1));
  for (int64_t i = 0; i < s.n; i++) s.vals[i] = attn_tensor_get_flat(t, i);
  s.version = t->storage->version;
  return s;
}

/* Whether t still matches the snapshot (values bit for bit); frees it. */
static bool unchanged(snap s) {
  const attn_tensor *t = s.t;
  bool ok = t->ndim == s.ndim && t->offset == s.offset && attn_tensor_numel(t) == s.n;
  for (int d = 0; ok && d < t->ndim; d++) ok = t->shape[d] == s.shape[d] && t->stride[d] == s.stride[d];
  for (int64_t i = 0; ok && i < s.n; i++) {
    float v = attn_tensor_get_flat(t, i);
    ok = memcmp(&v, &s.vals[i], sizeof v) == 0;
  }
  free(s.vals);
  return ok;
}

/* The last message starts with "name:" (or, for a refused budget,
   "not enough memory: name needs ..."). */
static bool names(const char *name) {
  const char *m = attn_last_error();
  size_t n = strlen(name);
  static const char nomem[] = "not enough memory: ";
  if (strncmp(m, nomem, sizeof nomem - 1) == 0) {
    m += sizeof nomem - 1;
    return strncmp(m, name, n) == 0 && strncmp(m + n, " needs ", 7) == 0;
  }
  return strncmp(m, name, n) == 0 && m[n] == ':';
}

static bool report(bool ok, const char *what, const char *name) {
  if (!ok) fprintf(stderr, "  %s: message \"%s\" (expected to start with \"%s:\")\n", what, attn_last_error(), name);
  return ok;
}

/* A call that must fail: status not OK, message names fn, *out (a
   sentinel) untouched.  Use as BAD("zeros", attn_zeros(1, s, &out)). */
#define BAD(name, call)                                                                                                \
  do {                                                                                                                 \
    bad_calls++;                                                                                                       \
    attn_set_error(ATTN_OK, "%s", "");                                                                                 \
    out = SENTINEL;                                                                                                    \
    attn_status st_ = (call);                                                                                          \
    CHECK(st_ != ATTN_OK);                                                                                             \
    CHECK(report(names(name), #call, name));                                                                           \
    CHECK(out == SENTINEL);                                                                                            \
  } while (0)

/* The same for calls whose single input a must stay as it was. */
#define BAD_IN(name, a, call)                                                                                          \
  do {                                                                                                                 \
    snap sa_ = take(a);                                                                                                \
    BAD(name, call);                                                                                                   \
    CHECK(unchanged(sa_));                                                                                             \
  } while (0)

/* A call that must succeed; the result is released after fn(out). */
#define GOOD(call)                                                                                                     \
  do {                                                                                                                 \
    out = NULL;                                                                                                        \
    CHECK_OK(call);                                                                                                    \
  } while (0)

static bool shape_is(const attn_tensor *t, int ndim, const int64_t *shape) {
  if (!t || t->ndim != ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (t->shape[d] != shape[d]) return false;
  return true;
}

static attn_tensor *out; /* the result slot every BAD/GOOD uses */

static void drop(void) {
  if (out != SENTINEL) attn_tensor_release(out);
  out = NULL;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

static void test_creation(void) {
  const int64_t neg[] = {2, -1}, big[] = {BIG, 4}, prod[] = {(int64_t)1 << 32, (int64_t)1 << 32, 2};
  const int64_t over56[] = {(int64_t)1 << 30, (int64_t)1 << 30}, huge[] = {HUGE40};
  const int64_t ok2[] = {2, 3}, zero[] = {0, 3};
  typedef attn_status (*mkfn)(int, const int64_t *, attn_tensor **);
  struct {
    const char *name;
    mkfn f;
  } fns[] = {{"empty", attn_empty}, {"zeros", attn_zeros}, {"ones", attn_ones}};
  for (int i = 0; i < 3; i++) {
    BAD(fns[i].name, fns[i].f(-1, ok2, &out));
    BAD(fns[i].name, fns[i].f(ATTN_MAX_DIMS + 1, ok2, &out));
    BAD(fns[i].name, fns[i].f(2, neg, &out));
    BAD(fns[i].name, fns[i].f(2, big, &out));
    BAD(fns[i].name, fns[i].f(3, prod, &out));
    BAD(fns[i].name, fns[i].f(2, over56, &out));
    BAD(fns[i].name, fns[i].f(1, huge, &out)); /* 4 TB: the allocation fails */
    GOOD(fns[i].f(2, zero, &out));
    CHECK(shape_is(out, 2, zero) && attn_tensor_numel(out) == 0);
    drop();
    GOOD(fns[i].f(0, NULL, &out)); /* a 0-d tensor needs no shape */
    CHECK(out && out->ndim == 0);
    drop();
  }
  BAD("full", attn_full(2, neg, 1.0f, &out));
  BAD("full", attn_full(2, big, 1.0f, &out));
  GOOD(attn_full(1, (int64_t[]){2}, NAN, &out)); /* torch.full accepts NaN */
  CHECK(isnan(attn_tensor_get_flat(out, 0)));
  drop();

  float data[6] = {1, 2, 3, 4, 5, 6};
  BAD("tensor", attn_from_data(2, neg, data, &out));
  BAD("tensor", attn_from_data(3, prod, data, &out));
  BAD("tensor", attn_from_data(2, ok2, NULL, &out));
  GOOD(attn_from_data(2, zero, NULL, &out)); /* nothing to copy */
  drop();

  BAD("wrap", attn_wrap(NULL, 1, (int64_t[]){2}, NULL, NULL, NULL, &out));
  BAD("wrap", attn_wrap(data, 2, neg, NULL, NULL, NULL, &out));
  BAD("wrap", attn_wrap(data, ATTN_MAX_DIMS + 1, ok2, NULL, NULL, NULL, &out));
  BAD("wrap", attn_wrap(data, 2, ok2, (int64_t[]){-3, 1}, NULL, NULL, &out));
  BAD("wrap", attn_wrap(data, 3, prod, NULL, NULL, NULL, &out));

  BAD("arange", attn_arange(0, NAN, 1, &out));
  BAD("arange", attn_arange(0, INFINITY, 1, &out));
  BAD("arange", attn_arange(-INFINITY, 0, 1, &out));
  BAD("arange", attn_arange(0, 5, 0, &out));
  BAD("arange", attn_arange(0, 5, -1, &out));
  BAD("arange", attn_arange(0, 1e300, 1, &out));
  BAD("arange", attn_arange(0, 5, 1e-300, &out));
  BAD("arange", attn_arange(0, 4.6e18, 1, &out));
  GOOD(attn_arange(3, 3, 1, &out)); /* torch: an empty range */
  CHECK(out && attn_tensor_numel(out) == 0);
  drop();

  BAD("linspace", attn_linspace(0, 1, -1, &out));
  BAD("linspace", attn_linspace(0, 1, BIG, &out));
  BAD("linspace", attn_linspace(0, 1, HUGE40, &out));
  GOOD(attn_linspace(NAN, 1, 3, &out)); /* torch gives NaNs */
  drop();
  GOOD(attn_linspace(0, 1, 0, &out));
  CHECK(out && attn_tensor_numel(out) == 0);
  drop();

  BAD("eye", attn_eye(BIG, BIG, &out));
  BAD("eye", attn_eye(HUGE40, 4, &out));
  BAD("eye", attn_eye(-2, 3, &out));
  GOOD(attn_eye(0, 0, &out)); /* torch.eye(0) is [0, 0] */
  CHECK(shape_is(out, 2, (int64_t[]){0, 0}));
  drop();

  attn_tensor *idx = mk1(3), *bad_idx = mk1(2);
  float *p = attn_tensor_data(idx);
  p[0] = 0, p[1] = 2, p[2] = 1;
  float *q = attn_tensor_data(bad_idx);
  q[0] = 1, q[1] = -1;
  BAD_IN("one_hot", idx, attn_one_hot(idx, 2, &out)); /* index 2 of 2 classes */
  BAD_IN("one_hot", idx, attn_one_hot(idx, 0, &out));
  BAD_IN("one_hot", idx, attn_one_hot(idx, BIG, &out));
  BAD_IN("one_hot", bad_idx, attn_one_hot(bad_idx, 3, &out));
  q[1] = 0.5f;
  BAD_IN("one_hot", bad_idx, attn_one_hot(bad_idx, 3, &out));
  q[1] = NAN;
  BAD_IN("one_hot", bad_idx, attn_one_hot(bad_idx, -1, &out));
  q[1] = 1e30f;
  BAD_IN("one_hot", bad_idx, attn_one_hot(bad_idx, -1, &out));
  q[1] = INFINITY;
  BAD_IN("one_hot", bad_idx, attn_one_hot(bad_idx, -1, &out));
  attn_tensor *none = mk1(0);
  BAD_IN("one_hot", none, attn_one_hot(none, -1, &out)); /* torch: cannot infer from empty */
  GOOD(attn_one_hot(none, 4, &out));
  CHECK(shape_is(out, 2, (int64_t[]){0, 4}));
  drop();
  attn_tensor_release(idx);
  attn_tensor_release(bad_idx);
  attn_tensor_release(none);

  /* a scalar: 0-d, any value */
  GOOD(attn_scalar(NAN, &out));
  CHECK(out && out->ndim == 0);
  drop();
}

/* ------------------------------------------------------------------------ */
/* Copies and views                                                          */

static void test_views(void) {
  attn_tensor *a = mk2(2, 3), *b = mk2(3, 2), *c = mk3(2, 3, 4);
  BAD_IN("copy_", a, attn_copy_(a, b));
  attn_tensor *row;
  if (attn_zeros(1, (int64_t[]){3}, &row)) abort(); /* defined values: the check below compares them */
  attn_tensor *ex;
  CHECK_OK(attn_expand(row, 2, (int64_t[]){2, 3}, &ex));
  BAD_IN("copy_", ex, attn_copy_(ex, a)); /* several destinations share memory, like torch */
  attn_tensor_release(ex);
  attn_tensor_release(row);
  /* aliasing: a copy from a transposed view of itself equals a copy from a clone */
  attn_tensor *sq = mk2(3, 3), *sq2 = mk2(3, 3), *tv, *tv2, *tc;
  CHECK_OK(attn_t(sq, &tv));
  CHECK_OK(attn_t(sq2, &tv2));
  CHECK_OK(attn_clone(tv2, &tc));
  CHECK_OK(attn_copy_(sq, tv));
  CHECK_OK(attn_copy_(sq2, tc));
  bool same = true;
  for (int64_t i = 0; i < 9; i++) same = same && attn_tensor_get_flat(sq, i) == attn_tensor_get_flat(sq2, i);
  CHECK(same);
  attn_tensor_release(tv);
  attn_tensor_release(tv2);
  attn_tensor_release(tc);
  attn_tensor_release(sq);
  attn_tensor_release(sq2);

  BAD_IN("transpose", c, attn_transpose(c, 0, 3, &out));
  BAD_IN("transpose", c, attn_transpose(c, -1, 1, &out));
  BAD_IN("transpose", c, attn_transpose(c, 0, 1 << 30, &out));
  BAD_IN("t", c, attn_t(c, &out));
  BAD_IN("permute", c, attn_permute(c, (int[]){0, 0, 1}, &out));
  BAD_IN("permute", c, attn_permute(c, (int[]){0, 1, 3}, &out));
  BAD_IN("permute", c, attn_permute(c, (int[]){0, 1, -1}, &out));
  BAD_IN("view", c, attn_view(c, 2, (int64_t[]){5, 5}, &out));
  BAD_IN("view", c, attn_view(c, 2, (int64_t[]){-1, -1}, &out));
  BAD_IN("view", c, attn_view(c, 2, (int64_t[]){-2, 12}, &out));
  BAD_IN("view", c, attn_view(c, 2, (int64_t[]){BIG, BIG}, &out));
  BAD_IN("view", c, attn_view(c, 2, (int64_t[]){0, -1}, &out));
  BAD_IN("view", c, attn_view(c, ATTN_MAX_DIMS + 1, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 24}, &out));
  BAD_IN("view", c, attn_view(c, -1, (int64_t[]){24}, &out));
  attn_tensor *ct;
  CHECK_OK(attn_transpose(c, 0, 2, &ct));
  BAD_IN("view", ct, attn_view(ct, 1, (int64_t[]){24}, &out)); /* strides do not allow it */
  GOOD(attn_reshape(ct, 1, (int64_t[]){24}, &out));            /* reshape copies */
  drop();
  attn_tensor_release(ct);
  BAD_IN("reshape", c, attn_reshape(c, 2, (int64_t[]){7, -1}, &out));
  BAD_IN("reshape", c, attn_reshape(c, 2, (int64_t[]){-1, -1}, &out));
  BAD_IN("narrow", c, attn_narrow(c, 1, 2, 2, &out));
  BAD_IN("narrow", c, attn_narrow(c, 1, -1, 1, &out));
  BAD_IN("narrow", c, attn_narrow(c, 1, 1, -1, &out));
  BAD_IN("narrow", c, attn_narrow(c, 1, 1, INT64_MAX, &out)); /* start + length overflows */
  BAD_IN("narrow", c, attn_narrow(c, 3, 0, 1, &out));
  GOOD(attn_narrow(c, 1, 3, 0, &out)); /* torch: an empty narrow at the end */
  CHECK(shape_is(out, 3, (int64_t[]){2, 0, 4}));
  drop();
  BAD_IN("slice", c, attn_slice(c, 1, 0, 3, 0, &out));
  BAD_IN("slice", c, attn_slice(c, 1, 0, 3, -2, &out));
  BAD_IN("slice", c, attn_slice(c, 5, 0, 3, 1, &out));
  GOOD(attn_slice(c, 1, 1, 3, INT64_MAX, &out)); /* one element, no overflow */
  CHECK(shape_is(out, 3, (int64_t[]){2, 1, 4}));
  drop();
  GOOD(attn_slice(c, 1, 0, INT64_MAX, 1, &out)); /* clamped */
  CHECK(shape_is(out, 3, (int64_t[]){2, 3, 4}));
  drop();
  BAD_IN("select", c, attn_select(c, 1, 3, &out));
  BAD_IN("select", c, attn_select(c, 1, -1, &out));
  BAD_IN("select", c, attn_select(c, 1, INT64_MIN, &out));
  BAD_IN("unsqueeze", c, attn_unsqueeze(c, 4, &out));
  BAD_IN("unsqueeze", c, attn_unsqueeze(c, -2, &out));
  attn_tensor *full8;
  const int64_t ones8[ATTN_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
  CHECK_OK(attn_zeros(ATTN_MAX_DIMS, ones8, &full8));
  BAD_IN("unsqueeze", full8, attn_unsqueeze(full8, 0, &out)); /* a 9th dim */
  attn_tensor_release(full8);
  BAD_IN("squeeze", c, attn_squeeze(c, 3, &out));
  BAD_IN("expand", a, attn_expand(a, 2, (int64_t[]){4, 3}, &out));
  BAD_IN("expand", a, attn_expand(a, 1, (int64_t[]){3}, &out));
  BAD_IN("expand", a, attn_expand(a, 3, (int64_t[]){-1, 2, 3}, &out));
  BAD_IN("expand", a, attn_expand(a, 3, (int64_t[]){BIG, 2, 3}, &out));
  BAD_IN("expand", a, attn_expand(a, 3, (int64_t[]){-5, 2, 3}, &out));
  BAD_IN("flatten", c, attn_flatten(c, 2, 1, &out));
  BAD_IN("flatten", c, attn_flatten(c, 0, 3, &out));
  BAD_IN("flatten", c, attn_flatten(c, -1, 1, &out));
  /* as_strided: every reachable element inside the storage */
  BAD_IN("as_strided", a, attn_as_strided(a, 1, (int64_t[]){7}, (int64_t[]){1}, 0, &out));
  BAD_IN("as_strided", a, attn_as_strided(a, 1, (int64_t[]){2}, (int64_t[]){1}, 5, &out));
  BAD_IN("as_strided", a, attn_as_strided(a, 1, (int64_t[]){2}, (int64_t[]){-1}, 0, &out));
  BAD_IN("as_strided", a, attn_as_strided(a, 1, (int64_t[]){2}, (int64_t[]){1}, -1, &out));
  BAD_IN("as_strided", a, attn_as_strided(a, 1, (int64_t[]){2}, (int64_t[]){BIG}, 0, &out));
  BAD_IN("as_strided", a, attn_as_strided(a, 2, (int64_t[]){BIG, BIG}, (int64_t[]){0, 0}, 0, &out));
  BAD_IN("as_strided", a, attn_as_strided(a, 1, (int64_t[]){-1}, (int64_t[]){1}, 0, &out));
  BAD_IN("as_strided", a, attn_as_strided(a, 1, (int64_t[]){2}, (int64_t[]){1}, INT64_MAX, &out));
  int nd = 7;
  int64_t sh[ATTN_MAX_DIMS] = {0};
  bad_calls++;
  CHECK(attn_broadcast_shape("matmul", a, b, &nd, sh) != ATTN_OK && names("matmul") && nd == 7);

  attn_tensor_release(a);
  attn_tensor_release(b);
  attn_tensor_release(c);
}

/* ------------------------------------------------------------------------ */
/* Elementwise math, reductions, products, softmax                          */

static void test_math(void) {
  attn_tensor *a = mk2(2, 3), *b = mk2(3, 2), *v = mk1(3), *e = mk2(0, 3);
  BAD_IN("add", a, attn_binary(ATTN_ADD, a, b, &out));
  BAD_IN("binary", a, attn_binary((attn_binary_op)ATTN_BINARY_OP_COUNT, a, a, &out));
  BAD_IN("binary", a, attn_binary((attn_binary_op)-1, a, a, &out));
  BAD_IN("binary", a, attn_binary_scalar((attn_binary_op)99, a, 1.0f, false, &out));
  BAD_IN("unary", a, attn_unary((attn_unary_op)ATTN_UNARY_OP_COUNT, a, &out));
  BAD_IN("unary", a, attn_unary((attn_unary_op)-5, a, &out));
  out = NULL;
  {
    snap s = take(a);
    bad_calls += 3;
    CHECK(attn_binary_((attn_binary_op)77, a, a) != ATTN_OK);
    CHECK(attn_unary_((attn_unary_op)77, a) != ATTN_OK);
    CHECK(attn_binary_scalar_((attn_binary_op)77, a, 2.0f, false) != ATTN_OK);
    CHECK(unchanged(s));
  }
  CHECK(strcmp(attn_binary_op_name((attn_binary_op)1000), "?") == 0);
  CHECK(strcmp(attn_unary_op_name((attn_unary_op)-3), "?") == 0);
  /* in place: b must broadcast to a's shape; a's shape never grows */
  {
    snap s = take(v);
    bad_calls++;
    CHECK(attn_binary_(ATTN_ADD, v, a) != ATTN_OK && names("add_") && unchanged(s));
  }
  /* an expanded target: several elements share memory */
  attn_tensor *ex;
  CHECK_OK(attn_expand(v, 2, (int64_t[]){2, 3}, &ex));
  {
    snap s = take(v);
    bad_calls += 4;
    CHECK(attn_binary_(ATTN_MUL, ex, a) != ATTN_OK && names("mul_"));
    CHECK(attn_unary_(ATTN_EXP, ex) != ATTN_OK && names("exp_"));
    CHECK(attn_binary_scalar_(ATTN_ADD, ex, 1.0f, false) != ATTN_OK && names("add_"));
    CHECK(attn_clamp_(ex, 0.0f, 1.0f) != ATTN_OK && names("clamp_"));
    CHECK(unchanged(s));
  }
  attn_tensor_release(ex);
  /* aliasing: a op= a^T equals a op= clone(a^T) */
  {
    attn_tensor *x = mk2(3, 3), *y = mk2(3, 3), *xt, *yt, *yc;
    CHECK_OK(attn_t(x, &xt));
    CHECK_OK(attn_t(y, &yt));
    CHECK_OK(attn_clone(yt, &yc));
    CHECK_OK(attn_binary_(ATTN_SUB, x, xt));
    CHECK_OK(attn_binary_(ATTN_SUB, y, yc));
    bool same = true;
    for (int64_t i = 0; i < 9; i++) same = same && attn_tensor_get_flat(x, i) == attn_tensor_get_flat(y, i);
    CHECK(same);
    attn_tensor *xx = mk2(3, 3), *yy = mk2(3, 3), *yyc;
    CHECK_OK(attn_clone(yy, &yyc));
    CHECK_OK(attn_binary_(ATTN_MUL, xx, xx));
    CHECK_OK(attn_binary_(ATTN_MUL, yy, yyc));
    same = true;
    for (int64_t i = 0; i < 9; i++) same = same && attn_tensor_get_flat(xx, i) == attn_tensor_get_flat(yy, i);
    CHECK(same);
    attn_tensor *w = mk2(3, 3), *wt;
    CHECK_OK(attn_t(w, &wt));
    CHECK_OK(attn_masked_fill_(w, wt, 5.0f)); /* mask reads the target's own memory */
    attn_tensor *w2 = mk2(3, 3), *w2t, *w2c;
    CHECK_OK(attn_t(w2, &w2t));
    CHECK_OK(attn_clone(w2t, &w2c));
    CHECK_OK(attn_masked_fill_(w2, w2c, 5.0f));
    same = true;
    for (int64_t i = 0; i < 9; i++) same = same && attn_tensor_get_flat(w, i) == attn_tensor_get_flat(w2, i);
    CHECK(same);
    attn_tensor *tens[] = {x, y, xt, yt, yc, xx, yy, yyc, w, wt, w2, w2t, w2c};
    for (size_t i = 0; i < sizeof tens / sizeof *tens; i++) attn_tensor_release(tens[i]);
  }
  BAD_IN("where", a, attn_where(a, b, a, &out));
  BAD_IN("masked_fill", a, attn_masked_fill(a, b, 0.0f, &out));
  {
    snap s = take(v);
    bad_calls++;
    CHECK(attn_masked_fill_(v, a, 0.0f) != ATTN_OK && names("masked_fill_") && unchanged(s));
  }
  BAD_IN("add", a, attn_add_scaled(a, b, 2.0f, &out));
  GOOD(attn_clamp(a, NAN, NAN, &out)); /* NaN bounds: no bound */
  drop();

  /* reductions */
  attn_reduce_opts o = {1.0, 2.0};
  BAD_IN("sum", a, attn_reduce_dim(ATTN_SUM, a, 2, false, NULL, &out));
  BAD_IN("sum", a, attn_reduce_dim(ATTN_SUM, a, -1, false, NULL, &out));
  BAD_IN("reduce", a, attn_reduce_dim((attn_reduce_op)ATTN_REDUCE_OP_COUNT, a, 0, false, &o, &out));
  BAD_IN("reduce", a, attn_reduce_all((attn_reduce_op)-2, a, &o, &out));
  BAD_IN("max", e, attn_reduce_dim(ATTN_MAX, e, 0, false, NULL, &out)); /* torch: no identity */
  BAD_IN("argmax", e, attn_reduce_all(ATTN_ARGMAX, e, NULL, &out));
  BAD_IN("min", e, attn_reduce_all(ATTN_MIN, e, NULL, &out));
  GOOD(attn_reduce_dim(ATTN_MAX, e, 1, false, NULL, &out)); /* torch: [0] */
  CHECK(shape_is(out, 1, (int64_t[]){0}));
  drop();
  GOOD(attn_reduce_all(ATTN_SUM, e, NULL, &out));
  CHECK(attn_tensor_get_flat(out, 0) == 0.0f);
  drop();
  GOOD(attn_reduce_all(ATTN_MEAN, e, NULL, &out)); /* torch: nan */
  CHECK(isnan(attn_tensor_get_flat(out, 0)));
  drop();
  GOOD(attn_reduce_all(ATTN_PROD, e, NULL, &out)); /* torch: 1 */
  CHECK(attn_tensor_get_flat(out, 0) == 1.0f);
  drop();
  GOOD(attn_reduce_dim(ATTN_LOGSUMEXP, e, 0, false, NULL, &out)); /* torch: -inf */
  CHECK(shape_is(out, 1, (int64_t[]){3}) && attn_tensor_get_flat(out, 0) == -INFINITY);
  drop();
  GOOD(attn_reduce_all(ATTN_VAR, e, NULL, &out)); /* torch: nan */
  CHECK(isnan(attn_tensor_get_flat(out, 0)));
  drop();
  attn_tensor *vals, *inds;
  vals = inds = SENTINEL;
  bad_calls++;
  CHECK(attn_max_dim(e, 0, false, false, &vals, &inds) != ATTN_OK && names("max") && vals == SENTINEL &&
        inds == SENTINEL);
  bad_calls++;
  CHECK(attn_max_dim(a, 5, false, true, &vals, &inds) != ATTN_OK && names("min") && vals == SENTINEL);
  BAD_IN("cumsum", a, attn_cumsum(a, 2, &out));
  BAD_IN("softmax", a, attn_softmax(a, 2, &out));
  BAD_IN("log_softmax", a, attn_log_softmax(a, -1, &out));
  GOOD(attn_softmax(e, 0, &out)); /* torch: [0, 3] */
  CHECK(shape_is(out, 2, (int64_t[]){0, 3}));
  drop();

  /* products */
  attn_tensor *s0;
  CHECK_OK(attn_scalar(2.0f, &s0));
  BAD_IN("matmul", a, attn_matmul(a, a, &out));
  BAD_IN("matmul", s0, attn_matmul(s0, a, &out));
  BAD_IN("mm", v, attn_mm(v, a, &out));
  BAD_IN("mm", a, attn_mm(a, a, &out));
  BAD_IN("bmm", a, attn_bmm(a, b, &out));
  attn_tensor *c3 = mk3(2, 2, 3), *d3 = mk3(3, 3, 2);
  BAD_IN("bmm", c3, attn_bmm(c3, d3, &out));
  BAD_IN("matmul", c3, attn_matmul(c3, d3, &out)); /* batch dims 2 vs 3 */
  BAD_IN("outer", a, attn_outer(a, v, &out));
  BAD_IN("dot", v, attn_dot(v, a, &out));
  attn_tensor *v4 = mk1(4);
  BAD_IN("dot", v, attn_dot(v, v4, &out));
  attn_tensor *z0 = mk1(0), *m20 = mk2(2, 0), *m03 = mk2(0, 3);
  GOOD(attn_dot(z0, z0, &out)); /* torch: 0 */
  CHECK(attn_tensor_get_flat(out, 0) == 0.0f);
  drop();
  GOOD(attn_matmul(m20, m03, &out)); /* torch: zeros [2, 3] */
  CHECK(shape_is(out, 2, (int64_t[]){2, 3}) && attn_tensor_get_flat(out, 5) == 0.0f);
  drop();
  GOOD(attn_matmul(a, b, &out)); /* [2, 3] @ [3, 2] */
  drop();
  attn_tensor *tens[] = {a, b, v, e, s0, c3, d3, v4, z0, m20, m03};
  for (size_t i = 0; i < sizeof tens / sizeof *tens; i++) attn_tensor_release(tens[i]);
}

/* ------------------------------------------------------------------------ */
/* Shape operations                                                          */

static void test_shape_ops(void) {
  attn_tensor *a = mk2(2, 3), *b = mk2(2, 4), *v = mk1(3), *c = mk3(2, 3, 4);
  int n = -7;
  attn_tensor **pieces = (attn_tensor **)SENTINEL;
  BAD_IN("tril", v, attn_tril(v, 0, &out));
  BAD_IN("triu", v, attn_triu(v, INT64_MIN, &out));
  GOOD(attn_tril(a, INT64_MAX, &out)); /* every element kept */
  drop();
  GOOD(attn_triu(a, INT64_MIN, &out));
  drop();
  const attn_tensor *ab[] = {a, b}, *av[] = {a, v}, *aa[] = {a, a};
  BAD("cat", attn_cat(0, ab, 0, &out));
  BAD("cat", attn_cat(-1, ab, 0, &out));
  BAD_IN("cat", a, attn_cat(2, ab, 0, &out));
  BAD_IN("cat", a, attn_cat(2, av, 0, &out));
  BAD_IN("cat", a, attn_cat(2, aa, 2, &out));
  BAD_IN("cat", a, attn_cat(2, aa, -1, &out));
  BAD("stack", attn_stack(0, ab, 0, &out));
  BAD_IN("stack", a, attn_stack(2, ab, 0, &out));
  BAD_IN("stack", a, attn_stack(2, aa, 3, &out));
  GOOD(attn_stack(2, aa, 2, &out)); /* the same tensor twice */
  CHECK(shape_is(out, 3, (int64_t[]){2, 3, 2}));
  drop();

  attn_tensor *idx = mk1(2);
  float *ip = attn_tensor_data(idx);
  ip[0] = 0, ip[1] = 3;
  BAD_IN("index_select", a, attn_index_select(a, 1, idx, &out));
  ip[1] = -1;
  BAD_IN("index_select", a, attn_index_select(a, 1, idx, &out));
  ip[1] = 0.5f;
  BAD_IN("index_select", a, attn_index_select(a, 1, idx, &out));
  ip[1] = NAN;
  BAD_IN("index_select", a, attn_index_select(a, 1, idx, &out));
  ip[1] = 1e30f;
  BAD_IN("index_select", a, attn_index_select(a, 1, idx, &out));
  ip[1] = 1;
  BAD_IN("index_select", a, attn_index_select(a, 2, idx, &out));
  BAD_IN("index_select", a, attn_index_select(a, 1, a, &out)); /* a 2-d index */
  attn_tensor *gi = mk2(2, 3);
  float *gp = attn_tensor_data(gi);
  for (int i = 0; i < 6; i++) gp[i] = (float)(i % 3);
  gp[4] = 3;
  BAD_IN("gather", a, attn_gather(a, 1, gi, &out));
  gp[4] = -INFINITY;
  BAD_IN("gather", a, attn_gather(a, 1, gi, &out));
  gp[4] = 0;
  BAD_IN("gather", a, attn_gather(a, 1, v, &out)); /* rank differs */
  BAD_IN("gather", a, attn_gather(a, 5, gi, &out));
  attn_tensor *gbig = mk2(3, 3);
  memset(attn_tensor_data(gbig), 0, 9 * sizeof(float));
  BAD_IN("gather", a, attn_gather(a, 1, gbig, &out)); /* larger off the gather dim */

  bad_calls += 8;
  CHECK(attn_split(a, 0, 1, &n, &pieces) != ATTN_OK && names("split") && n == -7);
  CHECK(attn_split(a, -1, 1, &n, &pieces) != ATTN_OK && names("split") && n == -7);
  CHECK(attn_split(a, 1, 2, &n, &pieces) != ATTN_OK && names("split"));
  CHECK(attn_split_sizes(a, 2, (int64_t[]){1, 1}, 1, &n, &pieces) != ATTN_OK && names("split_sizes"));
  CHECK(attn_split_sizes(a, 2, (int64_t[]){4, -1}, 1, &n, &pieces) != ATTN_OK && names("split_sizes"));
  CHECK(attn_split_sizes(a, 3, (int64_t[]){INT64_MAX, INT64_MAX, 5}, 1, &n, &pieces) != ATTN_OK);
  CHECK(attn_chunk(a, 0, 1, &n, &pieces) != ATTN_OK && names("chunk"));
  CHECK(attn_chunk(a, -3, 1, &n, &pieces) != ATTN_OK && names("chunk") && n == -7 &&
        pieces == (attn_tensor **)SENTINEL);
  CHECK_OK(attn_chunk(a, INT64_MAX, 1, &n, &pieces)); /* at most one piece per element */
  CHECK(n == 3);
  for (int i = 0; i < n; i++) attn_tensor_release(pieces[i]);
  free(pieces);

  BAD_IN("repeat", a, attn_repeat(a, 1, (int64_t[]){2}, &out));
  BAD_IN("repeat", a, attn_repeat(a, 2, (int64_t[]){2, -1}, &out));
  BAD_IN("repeat", a, attn_repeat(a, 2, (int64_t[]){BIG, BIG}, &out));
  BAD_IN("repeat", a, attn_repeat(a, 2, (int64_t[]){HUGE40, 1}, &out));
  BAD_IN("repeat", a, attn_repeat(a, ATTN_MAX_DIMS + 1, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, &out));
  GOOD(attn_repeat(a, 2, (int64_t[]){0, 2}, &out)); /* torch: [0, 6] */
  CHECK(shape_is(out, 2, (int64_t[]){0, 6}));
  drop();
  BAD_IN("flip", c, attn_flip(c, 2, (int[]){1, 1}, &out));
  BAD_IN("flip", c, attn_flip(c, 1, (int[]){3}, &out));
  BAD_IN("flip", c, attn_flip(c, 1, (int[]){-1}, &out));
  BAD_IN("flip", c, attn_flip(c, ATTN_MAX_DIMS + 1, (int[]){0, 1, 2, 0, 1, 2, 0, 1, 2}, &out));
  attn_tensor *tens[] = {a, b, v, c, idx, gi, gbig};
  for (size_t i = 0; i < sizeof tens / sizeof *tens; i++) attn_tensor_release(tens[i]);
}

/* ------------------------------------------------------------------------ */
/* Random numbers                                                            */

static void test_random(void) {
  attn_tensor *a = mk2(2, 3), *ex, *row = mk1(3);
  CHECK_OK(attn_expand(row, 2, (int64_t[]){2, 3}, &ex));
  attn_generator *g = NULL;
  CHECK_OK(attn_generator_new(5, &g));
  unsigned char *state = malloc(attn_generator_state_size());
  attn_generator_get_state(g, state);
#define BAD_FILL(name, call)                                                                                           \
  do {                                                                                                                 \
    snap s_ = take(a);                                                                                                 \
    bad_calls++;                                                                                                       \
    attn_set_error(ATTN_OK, "%s", "");                                                                                 \
    CHECK((call) != ATTN_OK);                                                                                          \
    CHECK(report(names(name), #call, name));                                                                           \
    CHECK(unchanged(s_));                                                                                              \
  } while (0)
  BAD_FILL("uniform_", attn_uniform_(a, 1, 0, g));
  BAD_FILL("uniform_", attn_uniform_(a, -INFINITY, 0, g));
  BAD_FILL("uniform_", attn_uniform_(a, 0, NAN, NULL));
  BAD_FILL("normal_", attn_normal_(a, 0, -1, g));
  BAD_FILL("normal_", attn_normal_(a, 0, NAN, NULL));
  BAD_FILL("random_", attn_random_int_(a, 3, 3, g));
  BAD_FILL("random_", attn_random_int_(a, INT64_MAX, INT64_MIN, g));
  BAD_FILL("bernoulli_", attn_bernoulli_(a, 1.5, g));
  BAD_FILL("bernoulli_", attn_bernoulli_(a, NAN, g));
  BAD_FILL("exponential_", attn_exponential_(a, -1, g));
  BAD_FILL("exponential_", attn_exponential_(a, NAN, g));
  /* the failed fills drew nothing: the stream is where it was (torch
     allows an infinite mean: checked after this) */
  unsigned char *now = malloc(attn_generator_state_size());
  attn_generator_get_state(g, now);
  CHECK(memcmp(now, state, attn_generator_state_size()) == 0);
  free(now);
  {
    attn_tensor *t = mk1(2);
    CHECK_OK(attn_normal_(t, INFINITY, 1, g)); /* torch: inf everywhere */
    CHECK(attn_tensor_get_flat(t, 0) == INFINITY);
    attn_tensor_release(t);
  }
  /* expanded targets: like torch, refused */
  {
    snap s = take(row);
    bad_calls += 4;
    CHECK(attn_uniform_(ex, 0, 1, g) != ATTN_OK && names("uniform_"));
    CHECK(attn_normal_(ex, 0, 1, g) != ATTN_OK && names("normal_"));
    CHECK(attn_bernoulli_(ex, 0.5, g) != ATTN_OK && names("bernoulli_"));
    CHECK(attn_random_int_(ex, 0, 5, g) != ATTN_OK && names("random_"));
    CHECK(unchanged(s));
  }
  attn_tensor *probs = mk1(3);
  float *pp = attn_tensor_data(probs);
  pp[0] = 0.5f, pp[1] = 1.5f, pp[2] = 0;
  BAD_IN("bernoulli", probs, attn_bernoulli_tensor(probs, g, &out));
  pp[1] = NAN;
  BAD_IN("bernoulli", probs, attn_bernoulli_tensor(probs, NULL, &out));
  BAD("randperm", attn_randperm(-1, g, &out));
  BAD("randperm", attn_randperm(BIG, g, &out));
  GOOD(attn_randperm(0, NULL, &out)); /* torch: empty */
  CHECK(out && attn_tensor_numel(out) == 0);
  drop();
  pp[0] = -1, pp[1] = 1, pp[2] = 1;
  BAD_IN("multinomial", probs, attn_multinomial(probs, 1, false, g, &out));
  pp[0] = INFINITY;
  BAD_IN("multinomial", probs, attn_multinomial(probs, 1, false, g, &out));
  pp[0] = 0, pp[1] = 0, pp[2] = 0;
  BAD_IN("multinomial", probs, attn_multinomial(probs, 1, true, g, &out)); /* torch: sum <= 0 */
  pp[0] = 1, pp[1] = 1, pp[2] = 1;
  BAD_IN("multinomial", probs, attn_multinomial(probs, 4, false, g, &out));
  BAD_IN("multinomial", probs, attn_multinomial(probs, 0, false, g, &out));
  BAD_IN("multinomial", probs, attn_multinomial(probs, -2, true, g, &out));
  BAD_IN("multinomial", probs, attn_multinomial(probs, BIG, true, g, &out));
  attn_tensor *c3 = mk3(2, 2, 2);
  BAD_IN("multinomial", c3, attn_multinomial(c3, 1, true, g, &out));
  bad_calls += 3;
  CHECK(attn_generator_set_state(g, state, attn_generator_state_size() - 1) != ATTN_OK);
  CHECK(attn_generator_set_state(g, state, 0) != ATTN_OK);
  unsigned char *junk = calloc(1, attn_generator_state_size());
  CHECK(attn_generator_set_state(g, junk, attn_generator_state_size()) != ATTN_OK);
  free(junk);
  CHECK_OK(attn_generator_set_state(g, state, attn_generator_state_size()));
  free(state);
  attn_generator_free(g);
  attn_generator_free(NULL); /* allowed */
  attn_tensor *tens[] = {a, ex, row, probs, c3};
  for (size_t i = 0; i < sizeof tens / sizeof *tens; i++) attn_tensor_release(tens[i]);
}

/* ------------------------------------------------------------------------ */
/* Autograd, printing, BLAS, budgets                                         */

static void test_autograd(void) {
  attn_tensor *x = mk1(3), *y;
  CHECK_OK(attn_requires_grad_(x, true));
  CHECK_OK(attn_binary_scalar(ATTN_MUL, x, 2.0f, false, &y));
  bad_calls++;
  CHECK(attn_requires_grad_(y, false) != ATTN_OK); /* a non-leaf cannot stop */
  attn_tensor *g2 = mk1(2);
  bad_calls++;
  CHECK(attn_set_grad(x, g2) != ATTN_OK && attn_grad(x) == NULL); /* shape mismatch */
  bad_calls++;
  CHECK(attn_backward(y, NULL, false) != ATTN_OK && attn_grad(x) == NULL); /* 3 elements, no gradient */
  bad_calls++;
  CHECK(attn_backward(y, g2, false) != ATTN_OK && attn_grad(x) == NULL);
  attn_tensor *plain = mk1(2);
  bad_calls++;
  CHECK(attn_backward(plain, NULL, false) != ATTN_OK);
  bad_calls++;
  CHECK(attn_retain_grad(plain) != ATTN_OK);
  /* in place on a leaf that requires grad: refused, values kept */
  {
    snap s = take(x);
    bad_calls++;
    CHECK(attn_binary_scalar_(ATTN_ADD, x, 1.0f, false) != ATTN_OK && unchanged(s));
  }
  CHECK_OK(attn_set_grad(x, NULL)); /* NULL clears: allowed */
  attn_tensor *w = mk2(4, 3), *ids = mk1(2);
  float *ip = attn_tensor_data(ids);
  ip[0] = 0, ip[1] = 4;
  BAD_IN("embedding", w, attn_embedding(w, ids, -1, &out));
  ip[1] = -1;
  BAD_IN("embedding", w, attn_embedding(w, ids, -1, &out));
  ip[1] = 2.5f;
  BAD_IN("embedding", w, attn_embedding(w, ids, -1, &out));
  ip[1] = 1;
  BAD_IN("embedding", w, attn_embedding(w, ids, 4, &out));
  BAD_IN("embedding", w, attn_embedding(ids, ids, -1, &out)); /* a 1-d weight */
  GOOD(attn_embedding(w, ids, 1, &out));
  drop();
  attn_tensor *tens[] = {x, y, g2, plain, w, ids};
  for (size_t i = 0; i < sizeof tens / sizeof *tens; i++) attn_tensor_release(tens[i]);
}

static void test_print_blas_budget(void) {
  attn_tensor *a = mk2(2, 3), *e = mk2(0, 3);
  attn_print_opts o;
  attn_print_opts_default(&o);
  char *s = NULL;
  CHECK_OK(attn_tensor_format(a, NULL, &s)); /* NULL: torch's defaults */
  free(s);
  /* odd options must not crash: either a message or a string */
  int precisions[] = {-5, 0, 1000}, widths[] = {-1, 0, 1 << 30};
  int64_t thresholds[] = {-1, 0, INT64_MAX};
  for (int i = 0; i < 3; i++) {
    attn_print_opts p = o;
    p.precision = precisions[i];
    p.linewidth = widths[i];
    p.threshold = thresholds[i];
    p.edgeitems = i == 0 ? -3 : (i == 1 ? 0 : 1 << 30);
    s = NULL;
    attn_status st = attn_tensor_format(a, &p, &s);
    CHECK(st == ATTN_OK ? s != NULL : (s == NULL && names("format")));
    free(s);
  }
  s = NULL;
  CHECK_OK(attn_tensor_format(e, &o, &s));
  CHECK(s && strstr(s, "size=(0, 3)"));
  free(s);

  float A[6] = {1, 2, 3, 4, 5, 6}, C[4] = {7, 7, 7, 7};
  bad_calls += 6;
  CHECK(attn_sgemm(false, false, -1, 2, 3, 1, A, 3, A, 2, 0, C, 2) != ATTN_OK && names("sgemm"));
  CHECK(attn_sgemm(false, false, 2, 2, -3, 1, A, 3, A, 2, 0, C, 2) != ATTN_OK && names("sgemm"));
  CHECK(attn_sgemm(false, false, 2, 2, 3, 1, A, 2, A, 2, 0, C, 2) != ATTN_OK && names("sgemm")); /* lda < k */
  CHECK(attn_sgemm(false, false, 2, 2, 3, 1, A, 3, A, 1, 0, C, 2) != ATTN_OK && names("sgemm")); /* ldb < n */
  CHECK(attn_sgemm(false, false, 2, 2, 3, 1, A, 3, A, 2, 0, C, 1) != ATTN_OK && names("sgemm")); /* ldc < n */
  CHECK(attn_sgemm(true, false, 2, 2, 3, 1, A, 1, A, 2, 0, C, 2) != ATTN_OK && names("sgemm"));  /* lda < m */
  CHECK(C[0] == 7 && C[3] == 7);
  CHECK_OK(attn_sgemm(false, false, 0, 2, 3, 1, NULL, 3, A, 2, 0, NULL, 2)); /* nothing to do */
  int before = attn_get_num_threads();
  bad_calls += 2;
  CHECK(attn_set_num_threads(0) != ATTN_OK && attn_get_num_threads() == before);
  CHECK(attn_set_num_threads(-4) != ATTN_OK && attn_get_num_threads() == before);

  attn_budget *b = (attn_budget *)SENTINEL;
  bad_calls += 2;
  CHECK(attn_budget_new(0, &b) != ATTN_OK && b == (attn_budget *)SENTINEL);
  CHECK(attn_budget_new(-5, &b) != ATTN_OK && b == (attn_budget *)SENTINEL);
  CHECK_OK(attn_budget_new(1000, &b));
  CHECK(!attn_budget_charge(b, 2000) && attn_budget_used(b) == 0);
  CHECK(!attn_budget_charge(b, INT64_MAX) && attn_budget_used(b) == 0);
  attn_budget *prev = attn_budget_set_current(b);
  BAD("zeros", attn_zeros(1, (int64_t[]){1000}, &out)); /* 4000 bytes > 1000 */
  CHECK(attn_budget_used(b) == 0);
  attn_budget_set_current(prev);
  attn_budget_release(b);
  attn_budget_release(NULL); /* allowed */
  attn_tensor_release(NULL); /* allowed */
  attn_tensor_release(a);
  attn_tensor_release(e);
}

/* ------------------------------------------------------------------------ */
/* Weight files and named lists                                              */

static void test_io(void) {
  char dir[] = "/tmp/attn_bad_input_XXXXXX";
  if (!mkdtemp(dir)) abort();
  char path[256], missing[256], txt[256];
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  snprintf(missing, sizeof missing, "%s/no/such/dir/w.safetensors", dir);
  snprintf(txt, sizeof txt, "%s/x.txt", dir);
  FILE *f = fopen(txt, "w");
  fputs("not a weight file\n", f);
  fclose(f);

  attn_named_tensors *nt = NULL, *loaded = (attn_named_tensors *)SENTINEL;
  CHECK_OK(attn_named_tensors_new(&nt));
  attn_tensor *a = mk2(2, 3), *at;
  CHECK_OK(attn_t(a, &at));
  bad_calls += 5;
  CHECK(attn_named_tensors_add(nt, "", a) != ATTN_OK && names("named_tensors_add"));
  CHECK(attn_named_tensors_add(nt, NULL, a) != ATTN_OK && names("named_tensors_add"));
  CHECK(attn_named_tensors_add(nt, "a", NULL) != ATTN_OK && names("named_tensors_add"));
  CHECK_OK(attn_named_tensors_add(nt, "a", a));
  CHECK(attn_named_tensors_add(nt, "a", at) != ATTN_OK && names("named_tensors_add") && nt->n == 1);
  CHECK(attn_named_tensors_set_meta(nt, NULL, "v") != ATTN_OK);
  CHECK_OK(attn_named_tensors_add(nt, "at", at)); /* non-contiguous: written in row-major order */
  CHECK(attn_named_tensors_get(nt, "nope") == NULL && attn_named_tensors_meta(nt, "nope") == NULL);

  bad_calls += 3;
  CHECK(attn_safetensors_save(missing, nt) != ATTN_OK && strstr(attn_last_error(), missing));
  CHECK(attn_safetensors_save(dir, nt) != ATTN_OK); /* a directory */
  CHECK(attn_npz_save(missing, nt) != ATTN_OK);
  CHECK_OK(attn_safetensors_save(path, nt));
  bad_calls += 6;
  CHECK(attn_safetensors_load(missing, &loaded) != ATTN_OK && loaded == (attn_named_tensors *)SENTINEL);
  CHECK(attn_safetensors_load(txt, &loaded) != ATTN_OK && loaded == (attn_named_tensors *)SENTINEL);
  CHECK(attn_safetensors_load(dir, &loaded) != ATTN_OK && loaded == (attn_named_tensors *)SENTINEL);
  CHECK(attn_safetensors_info(txt, &loaded) != ATTN_OK && loaded == (attn_named_tensors *)SENTINEL);
  CHECK(attn_npz_load(txt, &loaded) != ATTN_OK && loaded == (attn_named_tensors *)SENTINEL);
  CHECK(attn_npz_load(path, &loaded) != ATTN_OK && loaded == (attn_named_tensors *)SENTINEL);
  BAD("npy_load", attn_npy_load(txt, &out, NULL)); /* info may be NULL */
  BAD("npy_load", attn_npy_load(missing, &out, NULL));
  /* a truncated copy of a good file */
  {
    FILE *in = fopen(path, "rb");
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    if (fread(buf, 1, (size_t)n, in) != (size_t)n) abort();
    fclose(in);
    char cut[256];
    snprintf(cut, sizeof cut, "%s/cut.safetensors", dir);
    for (long keep = 0; keep < n; keep += n / 7 + 1) {
      FILE *o = fopen(cut, "wb");
      fwrite(buf, 1, (size_t)keep, o);
      fclose(o);
      bad_calls++;
      loaded = (attn_named_tensors *)SENTINEL;
      CHECK(attn_safetensors_load(cut, &loaded) != ATTN_OK && loaded == (attn_named_tensors *)SENTINEL);
    }
    remove(cut);
    free(buf);
  }
  CHECK_OK(attn_safetensors_load(path, &loaded));
  attn_tensor *back = attn_named_tensors_get(loaded, "at");
  CHECK(back && shape_is(back, 2, (int64_t[]){3, 2}) && attn_tensor_get_flat(back, 1) == attn_tensor_get_flat(at, 1));
  attn_named_tensors_free(loaded);
  attn_named_tensors_free(NULL); /* allowed */
  char npy[256];
  snprintf(npy, sizeof npy, "%s/a.npy", dir);
  bad_calls++;
  CHECK(attn_npy_save(missing, a) != ATTN_OK);
  CHECK_OK(attn_npy_save(npy, at));
  GOOD(attn_npy_load(npy, &out, NULL));
  CHECK(shape_is(out, 2, (int64_t[]){3, 2}));
  drop();
  attn_named_tensors_free(nt);
  remove(npy);
  remove(path);
  remove(txt);
  rmdir(dir);
  attn_tensor_release(a);
  attn_tensor_release(at);
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */

static void test_attention(void) {
  attn_tensor *q = mk3(2, 4, 3), *k = mk3(2, 5, 3), *v = mk3(2, 5, 2), *k4 = mk3(2, 5, 4), *v6 = mk3(2, 6, 2);
  attn_tensor *w = (attn_tensor *)SENTINEL;
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  BAD_IN("scaled_dot_product_attention", q, attn_sdpa(q, k4, v, NULL, &out, NULL));
  BAD_IN("scaled_dot_product_attention", q, attn_sdpa(q, k, v6, NULL, &out, NULL));
  attn_tensor *q1 = mk1(3);
  BAD_IN("scaled_dot_product_attention", q1, attn_sdpa(q1, q1, q1, NULL, &out, NULL));
  attn_tensor *mask = mk2(3, 5);
  o.attn_mask = mask;
  BAD_IN("scaled_dot_product_attention", q, attn_sdpa(q, k, v, &o, &out, &w));
  CHECK(w == (attn_tensor *)SENTINEL);
  attn_tensor *mask_ok = mk2(4, 5);
  o.attn_mask = mask_ok;
  o.is_causal = true;
  BAD_IN("scaled_dot_product_attention", q, attn_sdpa(q, k, v, &o, &out, NULL)); /* mask and is_causal */
  attn_sdpa_opts_init(&o);
  double ps[] = {-0.1, 1.5, NAN};
  for (int i = 0; i < 3; i++) {
    o.dropout_p = ps[i];
    BAD_IN("scaled_dot_product_attention", q, attn_sdpa(q, k, v, &o, &out, NULL));
  }
  attn_sdpa_opts_init(&o);
  o.causal_bottom_right = true; /* needs is_causal */
  BAD_IN("scaled_dot_product_attention", q, attn_sdpa(q, k, v, &o, &out, NULL));
  attn_sdpa_opts_init(&o);
  o.enable_gqa = true;
  attn_tensor *qh = mk(4, (int64_t[]){1, 3, 4, 2}), *kh = mk(4, (int64_t[]){1, 2, 5, 2});
  BAD_IN("scaled_dot_product_attention", qh, attn_sdpa(qh, kh, kh, &o, &out, NULL)); /* 3 heads over 2 */
  o.enable_gqa = false;
  BAD_IN("scaled_dot_product_attention", qh, attn_sdpa(qh, kh, kh, &o, &out, NULL));
  /* no keys: zero rows (torch's math path: softmax of [L, 0] @ [0, Ev]) */
  attn_tensor *k0 = mk3(2, 0, 3), *v0 = mk3(2, 0, 2);
  GOOD(attn_sdpa(q, k0, v0, NULL, &out, NULL));
  CHECK(shape_is(out, 3, (int64_t[]){2, 4, 2}) && attn_tensor_get_flat(out, 0) == 0.0f);
  drop();
  /* aliasing: q, k and v the same tensor */
  attn_tensor *x = mk3(2, 4, 3), *xk, *xv, *o1, *o2;
  CHECK_OK(attn_clone(x, &xk));
  CHECK_OK(attn_clone(x, &xv));
  CHECK_OK(attn_sdpa(x, x, x, NULL, &o1, NULL));
  CHECK_OK(attn_sdpa(x, xk, xv, NULL, &o2, NULL));
  bool same = true;
  for (int64_t i = 0; i < attn_tensor_numel(o1); i++)
    same = same && attn_tensor_get_flat(o1, i) == attn_tensor_get_flat(o2, i);
  CHECK(same);

  BAD("causal_mask", attn_causal_mask(-1, 3, false, &out));
  BAD("causal_mask", attn_causal_mask(BIG, BIG, false, &out));
  BAD("causal_mask", attn_causal_mask(HUGE40, 2, true, &out));
  attn_tensor *len = mk1(2);
  float *lp = attn_tensor_data(len);
  lp[0] = 2, lp[1] = 6;
  BAD_IN("padding_mask", len, attn_padding_mask(len, 5, &out));
  lp[1] = -1;
  BAD_IN("padding_mask", len, attn_padding_mask(len, 5, &out));
  lp[1] = 1.5f;
  BAD_IN("padding_mask", len, attn_padding_mask(len, 5, &out));
  lp[1] = 1;
  BAD_IN("padding_mask", len, attn_padding_mask(len, -1, &out));
  BAD_IN("padding_mask", len, attn_padding_mask(len, BIG, &out));
  BAD_IN("padding_mask", q, attn_padding_mask(q, 5, &out));
  attn_tensor *tens[] = {q, k, v, k4, v6, q1, mask, mask_ok, qh, kh, k0, v0, x, xk, xv, o1, o2, len};
  for (size_t i = 0; i < sizeof tens / sizeof *tens; i++) attn_tensor_release(tens[i]);
}

int main(void) {
  attn_debug_counts before, after;
  attn_debug_counts_get(&before);
  test_creation();
  test_views();
  test_math();
  test_shape_ops();
  test_random();
  test_autograd();
  test_print_blas_budget();
  test_io();
  test_attention();
  attn_debug_counts_get(&after);
  /* failed calls leak nothing */
  CHECK(after.tensors == before.tensors);
  CHECK(after.storages == before.storages);
  CHECK(after.nodes == before.nodes);
  printf("bad-input catalogue (C API): %d failing calls tried\n", bad_calls);
  return check_summary();
}
