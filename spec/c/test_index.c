/* SPDX-License-Identifier: MIT */
/* Indexing from C as a host writes it (attn_index_get / attn_index_put,
 * attn.h only): basic keys give views, index tensors and masks copies,
 * writes broadcast and bump the version, gradients flow through reads
 * and writes, and the errors name index_get/index_put, the entry and the
 * shapes.  Values are checked against per-element loops written here
 * (torch's rules: Python keys, 0-based). */
#include "attn.h"
#include "check.h"

#include <string.h>

/* X: [4, 6] of i * 0.5 - 3 (the Lua spec's X) */
static attn_tensor *make_x(void) {
  float d[24];
  for (int i = 0; i < 24; i++) d[i] = (float)i * 0.5f - 3.0f;
  attn_tensor *x = NULL;
  int64_t shape[2] = {4, 6};
  CHECK_OK(attn_from_data(2, shape, d, &x));
  return x;
}
static float xv(int64_t r, int64_t c) { return (float)(r * 6 + c) * 0.5f - 3.0f; }

static attn_tensor *ids(int n, const int64_t *v) {
  attn_tensor *t = NULL;
  int64_t shape[1] = {n};
  CHECK_OK(attn_from_data_i64(1, shape, v, &t));
  return t;
}

static bool has_shape(const attn_tensor *t, int nd, const int64_t *shape) {
  if (!t || t->ndim != nd) return false;
  for (int d = 0; d < nd; d++)
    if (t->shape[d] != shape[d]) return false;
  return true;
}

static bool says(const char *want) {
  const char *m = attn_last_error();
  bool ok = strstr(m, want) != NULL;
  if (!ok) fprintf(stderr, "message: %s\n  wanted: %s\n", m, want);
  return ok;
}

static void test_basic(void) {
  attn_tensor *x = make_x(), *r = NULL;
  /* x[1] */
  attn_index k1[] = {attn_idx_int(1)};
  CHECK_OK(attn_index_get(x, 1, k1, &r));
  CHECK(has_shape(r, 1, (int64_t[]){6}));
  CHECK(r && r->storage == x->storage); /* a view */
  for (int c = 0; c < 6 && r; c++) CHECK(attn_tensor_get_flat(r, c) == xv(1, c));
  attn_tensor_release(r);
  /* x[-1, 2] is a 0-d view */
  attn_index k2[] = {attn_idx_int(-1), attn_idx_int(2)};
  CHECK_OK(attn_index_get(x, 2, k2, &r));
  CHECK(r && r->ndim == 0 && attn_tensor_get_flat(r, 0) == xv(3, 2));
  attn_tensor_release(r);
  /* x[1:3, ::2] */
  attn_index k3[] = {attn_idx_slice(1, 3, 1), attn_idx_from(0, 2)};
  CHECK_OK(attn_index_get(x, 2, k3, &r));
  CHECK(has_shape(r, 2, (int64_t[]){2, 3}));
  for (int i = 0; i < 2 && r; i++)
    for (int j = 0; j < 3; j++) CHECK(attn_tensor_get(r, (int64_t[]){i, j}) == xv(1 + i, 2 * j));
  attn_tensor_release(r);
  /* x[-3:-1, 1::3], clamped ends x[-100:100] */
  attn_index k4[] = {attn_idx_slice(-3, -1, 1), attn_idx_from(1, 3)};
  CHECK_OK(attn_index_get(x, 2, k4, &r));
  CHECK(has_shape(r, 2, (int64_t[]){2, 2}));
  CHECK(r && attn_tensor_get(r, (int64_t[]){1, 1}) == xv(2, 4));
  attn_tensor_release(r);
  attn_index k5[] = {attn_idx_slice(-100, 100, 1), attn_idx_slice(4, 2, 1)};
  CHECK_OK(attn_index_get(x, 2, k5, &r));
  CHECK(has_shape(r, 2, (int64_t[]){4, 0}));
  attn_tensor_release(r);
  /* x[None, ..., None, 0] -> [1, 4, 1] */
  attn_index k6[] = {attn_idx_newaxis(), attn_idx_ellipsis(), attn_idx_newaxis(), attn_idx_int(0)};
  CHECK_OK(attn_index_get(x, 4, k6, &r));
  CHECK(has_shape(r, 3, (int64_t[]){1, 4, 1}));
  CHECK(r && attn_tensor_get(r, (int64_t[]){0, 3, 0}) == xv(3, 0));
  attn_tensor_release(r);
  /* x[..., 5] and an empty key */
  attn_index k7[] = {attn_idx_ellipsis(), attn_idx_int(5)};
  CHECK_OK(attn_index_get(x, 2, k7, &r));
  CHECK(has_shape(r, 1, (int64_t[]){4}));
  CHECK(r && attn_tensor_get_flat(r, 2) == xv(2, 5));
  attn_tensor_release(r);
  CHECK_OK(attn_index_get(x, 0, NULL, &r));
  CHECK(has_shape(r, 2, (int64_t[]){4, 6}));
  attn_tensor_release(r);
  attn_tensor_release(x);
}

static void test_advanced(void) {
  attn_tensor *x = make_x(), *r = NULL;
  /* x[[2, 0, -2]] */
  attn_tensor *i1 = ids(3, (int64_t[]){2, 0, -2});
  attn_index k1[] = {attn_idx_tensor(i1)};
  CHECK_OK(attn_index_get(x, 1, k1, &r));
  CHECK(has_shape(r, 2, (int64_t[]){3, 6}));
  CHECK(r && r->storage != x->storage); /* a copy */
  const int rows[3] = {2, 0, 2};
  for (int i = 0; i < 3 && r; i++)
    for (int c = 0; c < 6; c++) CHECK(attn_tensor_get(r, (int64_t[]){i, c}) == xv(rows[i], c));
  attn_tensor_release(r);
  /* x[1:, ids2d] with ids [[5, 0], [1, 1]] -> [3, 2, 2] */
  attn_tensor *i2 = NULL;
  CHECK_OK(attn_from_data_i64(2, (int64_t[]){2, 2}, (int64_t[]){5, 0, 1, 1}, &i2));
  attn_index k2[] = {attn_idx_from(1, 1), attn_idx_tensor(i2)};
  CHECK_OK(attn_index_get(x, 2, k2, &r));
  CHECK(has_shape(r, 3, (int64_t[]){3, 2, 2}));
  CHECK(r && attn_tensor_get(r, (int64_t[]){2, 0, 0}) == xv(3, 5));
  CHECK(r && attn_tensor_get(r, (int64_t[]){0, 1, 1}) == xv(1, 1));
  attn_tensor_release(r);
  /* x[mask] over both dims: x > 1 */
  attn_tensor *m = NULL;
  CHECK_OK(attn_binary_scalar(ATTN_GT, x, 1.0f, false, &m));
  attn_index k3[] = {attn_idx_tensor(m)};
  CHECK_OK(attn_index_get(x, 1, k3, &r));
  int64_t want = 0;
  for (int i = 0; i < 24; i++) want += xv(0, i) > 1.0f;
  CHECK(has_shape(r, 1, &want));
  for (int64_t j = 0; j < want && r; j++) CHECK(attn_tensor_get_flat(r, j) == xv(0, 24 - want + j));
  attn_tensor_release(r);
  /* x[:, row mask] on the last dim, x[row mask] on the first */
  attn_tensor *cm = NULL, *rm = NULL;
  CHECK_OK(attn_from_data_bool(1, (int64_t[]){6}, (bool[]){true, false, false, true, true, false}, &cm));
  CHECK_OK(attn_from_data_bool(1, (int64_t[]){4}, (bool[]){false, true, false, true}, &rm));
  attn_index k4[] = {attn_idx_all(), attn_idx_tensor(cm)};
  CHECK_OK(attn_index_get(x, 2, k4, &r));
  CHECK(has_shape(r, 2, (int64_t[]){4, 3}));
  CHECK(r && attn_tensor_get(r, (int64_t[]){2, 2}) == xv(2, 4));
  attn_tensor_release(r);
  attn_index k5[] = {attn_idx_tensor(rm)};
  CHECK_OK(attn_index_get(x, 1, k5, &r));
  CHECK(has_shape(r, 2, (int64_t[]){2, 6}));
  CHECK(r && attn_tensor_get(r, (int64_t[]){1, 0}) == xv(3, 0));
  attn_tensor_release(r);
  attn_tensor_release(cm);
  attn_tensor_release(rm);
  attn_tensor_release(m);
  attn_tensor_release(i1);
  attn_tensor_release(i2);
  attn_tensor_release(x);
}

static void test_put(void) {
  attn_tensor *x = make_x(), *v = NULL;
  long v0 = x->storage->version;
  /* x[1:3, 0] = [7, 8] (a float value into a view) */
  CHECK_OK(attn_from_data(1, (int64_t[]){2}, (float[]){7, 8}, &v));
  attn_index k1[] = {attn_idx_slice(1, 3, 1), attn_idx_int(0)};
  CHECK_OK(attn_index_put(x, 2, k1, v));
  CHECK(attn_tensor_get(x, (int64_t[]){1, 0}) == 7 && attn_tensor_get(x, (int64_t[]){2, 0}) == 8);
  CHECK(x->storage->version > v0);
  attn_tensor_release(v);
  /* x[[3, 0, 3]] = rows 1, 2, 3 (the last write to row 3 wins) */
  attn_tensor *i1 = ids(3, (int64_t[]){3, 0, -1});
  float rows[18];
  for (int i = 0; i < 18; i++) rows[i] = (float)(i / 6 + 1);
  CHECK_OK(attn_from_data(2, (int64_t[]){3, 6}, rows, &v));
  attn_index k2[] = {attn_idx_tensor(i1)};
  CHECK_OK(attn_index_put(x, 1, k2, v));
  CHECK(attn_tensor_get(x, (int64_t[]){0, 5}) == 2 && attn_tensor_get(x, (int64_t[]){3, 1}) == 3);
  CHECK(attn_tensor_get(x, (int64_t[]){1, 1}) == xv(1, 1));
  attn_tensor_release(v);
  /* x[x < -2] = 0 (a 0-d value fills) */
  attn_tensor *m = NULL, *z = NULL;
  CHECK_OK(attn_binary_scalar(ATTN_LT, x, -2.0f, false, &m));
  CHECK_OK(attn_full(0, NULL, 0.0f, &z));
  attn_index k3[] = {attn_idx_tensor(m)};
  CHECK_OK(attn_index_put(x, 1, k3, z));
  for (int i = 0; i < 24; i++) CHECK(attn_tensor_get_flat(x, i) >= -2.0f);
  /* x[:, col mask] = 9 goes through the general path */
  attn_tensor *cm = NULL, *nine = NULL;
  CHECK_OK(attn_from_data_bool(1, (int64_t[]){6}, (bool[]){false, true, false, false, false, true}, &cm));
  CHECK_OK(attn_full(0, NULL, 9.0f, &nine));
  attn_index k4[] = {attn_idx_all(), attn_idx_tensor(cm)};
  CHECK_OK(attn_index_put(x, 2, k4, nine));
  for (int r = 0; r < 4; r++)
    CHECK(attn_tensor_get(x, (int64_t[]){r, 1}) == 9 && attn_tensor_get(x, (int64_t[]){r, 5}) == 9);
  /* an int64 tensor through basic indexing converts (copy_) ... */
  attn_tensor *iv = ids(6, (int64_t[]){1, 2, 3, 4, 5, 6});
  attn_index k5[] = {attn_idx_int(0)};
  CHECK_OK(attn_index_put(x, 1, k5, iv));
  CHECK(attn_tensor_get(x, (int64_t[]){0, 5}) == 6);
  /* ... but not through an index tensor (torch's index_put) */
  attn_tensor *i0 = ids(1, (int64_t[]){0});
  attn_index k6[] = {attn_idx_tensor(i0)};
  CHECK(attn_index_put(x, 1, k6, iv) == ATTN_ERR_ARG);
  CHECK(says("index_put: index put requires the value's dtype to match the tensor's: got a int64 value for a "
             "float32 tensor"));
  attn_tensor_release(i0);
  attn_tensor_release(iv);
  attn_tensor_release(cm);
  attn_tensor_release(nine);
  attn_tensor_release(m);
  attn_tensor_release(z);
  attn_tensor_release(i1);
  attn_tensor_release(x);
}

static void test_grad(void) {
  /* y = sum(w[1:3, ::2] * 2) + sum(w[[0, 0]]) : dw = 2 on the slice, 2 on row 0 */
  attn_tensor *w = make_x(), *a = NULL, *b = NULL, *sa = NULL, *sb = NULL, *y = NULL, *two = NULL;
  CHECK_OK(attn_requires_grad_(w, true));
  attn_index ka[] = {attn_idx_slice(1, 3, 1), attn_idx_from(0, 2)};
  CHECK_OK(attn_index_get(w, 2, ka, &a));
  CHECK_OK(attn_binary_scalar(ATTN_MUL, a, 2.0f, false, &two));
  attn_tensor *i00 = ids(2, (int64_t[]){0, 0});
  attn_index kb[] = {attn_idx_tensor(i00)};
  CHECK_OK(attn_index_get(w, 1, kb, &b));
  CHECK_OK(attn_reduce_all(ATTN_SUM, two, NULL, &sa));
  CHECK_OK(attn_reduce_all(ATTN_SUM, b, NULL, &sb));
  CHECK_OK(attn_binary(ATTN_ADD, sa, sb, &y));
  CHECK_OK(attn_backward(y, NULL, false));
  const attn_tensor *g = attn_grad(w);
  CHECK(g != NULL);
  for (int r = 0; r < 4 && g; r++)
    for (int c = 0; c < 6; c++) {
      float want = (r == 0 ? 2.0f : 0.0f) + (r >= 1 && r < 3 && c % 2 == 0 ? 2.0f : 0.0f);
      CHECK(attn_tensor_get(g, (int64_t[]){r, c}) == want);
    }
  /* a write under autograd: z = w * 1; z[[1]] = v; sum(z * 3): dw = 3 off row 1, dv = 3 */
  attn_tensor *w2 = make_x(), *z = NULL, *v = NULL, *z3 = NULL, *s = NULL;
  CHECK_OK(attn_requires_grad_(w2, true));
  CHECK_OK(attn_binary_scalar(ATTN_MUL, w2, 1.0f, false, &z));
  CHECK_OK(attn_full(1, (int64_t[]){6}, 1.0f, &v));
  CHECK_OK(attn_requires_grad_(v, true));
  attn_tensor *i1 = ids(1, (int64_t[]){1});
  attn_index kz[] = {attn_idx_tensor(i1)};
  CHECK_OK(attn_index_put(z, 1, kz, v));
  CHECK_OK(attn_binary_scalar(ATTN_MUL, z, 3.0f, false, &z3));
  CHECK_OK(attn_reduce_all(ATTN_SUM, z3, NULL, &s));
  CHECK_OK(attn_backward(s, NULL, false));
  const attn_tensor *g2 = attn_grad(w2), *gv = attn_grad(v);
  CHECK(g2 && gv);
  for (int r = 0; r < 4 && g2; r++) CHECK(attn_tensor_get(g2, (int64_t[]){r, 2}) == (r == 1 ? 0.0f : 3.0f));
  for (int c = 0; c < 6 && gv; c++) CHECK(attn_tensor_get_flat(gv, c) == 6.0f / 2.0f);
  attn_tensor *ts[] = {w, a, b, sa, sb, y, two, i00, w2, z, v, z3, s, i1};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) attn_tensor_release(ts[i]);
}

static void test_errors(void) {
  attn_tensor *x = make_x(), *r = NULL;
  attn_index k1[] = {attn_idx_int(4)};
  CHECK(attn_index_get(x, 1, k1, &r) == ATTN_ERR_INDEX && r == NULL);
  CHECK(says("index_get: index 4 out of range for dim 0 of size 4 (expected -4..3)"));
  attn_index k2[] = {attn_idx_int(0), attn_idx_int(0), attn_idx_int(0)};
  CHECK(attn_index_get(x, 3, k2, &r) == ATTN_ERR_INDEX);
  CHECK(says("index_get: 3 indices for a 2-d tensor"));
  attn_index k3[] = {attn_idx_slice(0, 2, 0)};
  CHECK(attn_index_get(x, 1, k3, &r) == ATTN_ERR_ARG);
  CHECK(says("index_get: slice step must be positive (got 0)"));
  attn_index k4[] = {attn_idx_ellipsis(), attn_idx_ellipsis()};
  CHECK(attn_index_get(x, 2, k4, &r) == ATTN_ERR_ARG);
  CHECK(says("at most one ellipsis"));
  attn_tensor *i9 = ids(2, (int64_t[]){0, 6}), *m = NULL, *f = NULL;
  attn_index k5[] = {attn_idx_all(), attn_idx_tensor(i9)};
  CHECK(attn_index_get(x, 2, k5, &r) == ATTN_ERR_INDEX);
  CHECK(says("index_get: index 6 in the index tensor out of range for dim 1 of size 6 (expected -6..5)"));
  attn_index k6[] = {attn_idx_tensor(i9), attn_idx_tensor(i9)};
  CHECK(attn_index_get(x, 2, k6, &r) == ATTN_ERR_ARG);
  CHECK(says("index_get: at most one index tensor per key"));
  CHECK_OK(attn_from_data_bool(1, (int64_t[]){2}, (bool[]){true, false}, &m));
  attn_index k7[] = {attn_idx_tensor(m)};
  CHECK(attn_index_get(x, 1, k7, &r) == ATTN_ERR_SHAPE);
  CHECK(says("index_get: mask of shape [2] does not match the leading dims of the tensor's shape [4,6]"));
  CHECK_OK(attn_full(1, (int64_t[]){2}, 1.0f, &f));
  attn_index k8[] = {attn_idx_tensor(f)};
  CHECK(attn_index_get(x, 1, k8, &r) == ATTN_ERR_ARG);
  CHECK(says("index_get: an index tensor must be int64 ids or a bool mask (got float32)"));
  /* a value that does not broadcast; x is unchanged */
  attn_tensor *v = NULL;
  CHECK_OK(attn_full(1, (int64_t[]){5}, 1.0f, &v));
  attn_index k9[] = {attn_idx_int(0)};
  CHECK(attn_index_put(x, 1, k9, v) != ATTN_OK);
  CHECK(says("index_put: "));
  attn_tensor *i0 = ids(2, (int64_t[]){0, 1});
  attn_index k10[] = {attn_idx_tensor(i0)};
  CHECK(attn_index_put(x, 1, k10, v) == ATTN_ERR_SHAPE);
  CHECK(says("index_put: shape mismatch: value tensor of shape [5] cannot be broadcast to indexing result of "
             "shape [2,6]"));
  for (int i = 0; i < 24; i++) CHECK(attn_tensor_get_flat(x, i) == xv(0, i));
  attn_tensor *ts[] = {x, i9, m, f, v, i0};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) attn_tensor_release(ts[i]);
}

int main(void) {
  test_basic();
  test_advanced();
  test_put();
  test_grad();
  test_errors();
  attn_debug_counts c;
  attn_debug_counts_get(&c);
  CHECK(c.tensors == 0); /* every result released */
  return check_summary();
}
