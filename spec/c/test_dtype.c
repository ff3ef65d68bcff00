/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
/* The core's dtypes (int64 and bool beside float32): element sizes through
 * allocation, views and the memory budget; conversions and copies between
 * dtypes; torch's promotion in elementwise ops; exact int64 arithmetic and
 * reductions; bool comparisons and masks; int64 index tensors; float-only
 * kernels refusing other dtypes; printing and npy/safetensors round trips. */
#include "attn.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static attn_tensor *i64(int n, const int64_t *v) {
  int64_t s = n;
  attn_tensor *t = NULL;
  CHECK_OK(attn_from_data_i64(1, &s, v, &t));
  return t;
}
static attn_tensor *f32(int n, const float *v) {
  int64_t s = n;
  attn_tensor *t = NULL;
  CHECK_OK(attn_from_data(1, &s, v, &t));
  return t;
}
static attn_tensor *b8(int n, const bool *v) {
  int64_t s = n;
  attn_tensor *t = NULL;
  CHECK_OK(attn_from_data_bool(1, &s, v, &t));
  return t;
}
static bool has(const char *needle) { return strstr(attn_last_error(), needle) != NULL; }

static void test_storage_and_views(void) {
  int64_t shape[2] = {3, 5};
  attn_tensor *t = NULL, *v = NULL, *c = NULL;
  CHECK_OK(attn_empty_dtype(ATTN_INT64, 2, shape, &t));
  CHECK(t->dtype == ATTN_INT64 && t->storage->dtype == ATTN_INT64 && t->storage->numel == 15);
  for (int i = 0; i < 15; i++) attn_tensor_i64(t)[i] = (INT64_C(1) << 40) + i;
  CHECK_OK(attn_transpose(t, 0, 1, &v)); /* a view keeps the dtype and counts elements */
  CHECK(v->dtype == ATTN_INT64 && v->stride[0] == 1 && v->stride[1] == 5);
  CHECK(attn_tensor_get_flat_i64(v, 1) == (INT64_C(1) << 40) + 5);
  CHECK_OK(attn_contiguous(v, &c));
  CHECK(c->dtype == ATTN_INT64 && attn_tensor_i64(c)[1] == (INT64_C(1) << 40) + 5);
  attn_tensor_release(c);
  attn_tensor *s = NULL;
  CHECK_OK(attn_slice(t, 1, 1, 5, 2, &s));
  CHECK(s->dtype == ATTN_INT64 && s->offset == 1 && attn_tensor_get_flat_i64(s, 3) == (INT64_C(1) << 40) + 8);
  attn_tensor_release(s);
  attn_tensor_release(v);
  attn_tensor_release(t);
}

static void test_budget_counts_bytes(void) {
  attn_budget *b = NULL;
  CHECK_OK(attn_budget_new(1 << 20, &b));
  attn_budget *prev = attn_budget_set_current(b);
  int64_t n = 4096;
  attn_tensor *t = NULL;
  int64_t before = attn_budget_used(b);
  CHECK_OK(attn_empty_dtype(ATTN_INT64, 1, &n, &t));
  int64_t i64_bytes = attn_budget_used(b) - before;
  attn_tensor_release(t);
  CHECK(attn_budget_used(b) == before);
  CHECK_OK(attn_empty_dtype(ATTN_BOOL, 1, &n, &t));
  int64_t bool_bytes = attn_budget_used(b) - before;
  attn_tensor_release(t);
  CHECK(i64_bytes >= 8 * n && bool_bytes >= n && bool_bytes < 2 * n && i64_bytes > 4 * bool_bytes);
  n = 200000; /* 1.6 MB of int64 passes the 1 MB cap; the same count of bools fits */
  t = NULL;
  CHECK(attn_empty_dtype(ATTN_INT64, 1, &n, &t) == ATTN_ERR_NOMEM && t == NULL);
  CHECK_OK(attn_empty_dtype(ATTN_BOOL, 1, &n, &t));
  attn_tensor_release(t);
  attn_budget_set_current(prev);
  attn_budget_release(b);
}

static void test_conversions(void) {
  float fv[5] = {1.9f, -1.9f, 0.0f, -0.0f, 3e9f};
  attn_tensor *f = f32(5, fv), *l = NULL, *b = NULL, *back = NULL;
  CHECK_OK(attn_to_dtype(f, ATTN_INT64, &l));
  CHECK(attn_tensor_i64(l)[0] == 1 && attn_tensor_i64(l)[1] == -1 && attn_tensor_i64(l)[4] == 3000000000LL);
  CHECK_OK(attn_to_dtype(f, ATTN_BOOL, &b));
  CHECK(attn_tensor_bool(b)[0] && !attn_tensor_bool(b)[2] && !attn_tensor_bool(b)[3]);
  CHECK_OK(attn_to_dtype(b, ATTN_FLOAT32, &back));
  CHECK(attn_tensor_data(back)[0] == 1.0f && attn_tensor_data(back)[2] == 0.0f);
  attn_tensor *same = NULL;
  CHECK_OK(attn_to_dtype(f, ATTN_FLOAT32, &same));
  CHECK(same == f); /* retained, like torch's .to() of the same dtype */
  attn_tensor_release(same);
  /* copy_ converts to the destination */
  CHECK_OK(attn_copy_(l, f));
  CHECK(attn_tensor_i64(l)[1] == -1);
  attn_dtype dt;
  CHECK(attn_dtype_parse("long", &dt) && dt == ATTN_INT64);
  CHECK(attn_dtype_parse("torch.bool", &dt) && dt == ATTN_BOOL);
  CHECK(!attn_dtype_parse("int32", &dt));
  CHECK(attn_promote_types(ATTN_INT64, ATTN_FLOAT32) == ATTN_FLOAT32);
  CHECK(attn_promote_types(ATTN_BOOL, ATTN_INT64) == ATTN_INT64);
  CHECK(attn_promote_types(ATTN_BOOL, ATTN_BOOL) == ATTN_BOOL);
  attn_tensor_release(f);
  attn_tensor_release(l);
  attn_tensor_release(b);
  attn_tensor_release(back);
}

static void test_promotion_and_int_math(void) {
  int64_t iv[3] = {(INT64_C(1) << 53) + 1, -7, 5};
  float fv[3] = {0.5f, 0.5f, 0.5f};
  attn_tensor *a = i64(3, iv), *f = f32(3, fv), *o = NULL;
  CHECK_OK(attn_binary(ATTN_ADD, a, f, &o));
  CHECK(o->dtype == ATTN_FLOAT32 && attn_tensor_data(o)[1] == -6.5f);
  attn_tensor_release(o);
  CHECK_OK(attn_binary(ATTN_ADD, a, a, &o)); /* exact beyond 2^53 */
  CHECK(o->dtype == ATTN_INT64 && attn_tensor_i64(o)[0] == (INT64_C(1) << 54) + 2);
  attn_tensor_release(o);
  CHECK_OK(attn_binary_scalar_i64(ATTN_ADD, a, 1, false, &o));
  CHECK(attn_tensor_i64(o)[0] == (INT64_C(1) << 53) + 2);
  attn_tensor_release(o);
  CHECK_OK(attn_binary(ATTN_DIV, a, a, &o)); /* true division gives float */
  CHECK(o->dtype == ATTN_FLOAT32 && attn_tensor_data(o)[1] == 1.0f);
  attn_tensor_release(o);
  int64_t dv[3] = {2, 2, -2};
  attn_tensor *d = i64(3, dv);
  CHECK_OK(attn_floor_divide(a, d, &o));
  CHECK(attn_tensor_i64(o)[1] == -4 && attn_tensor_i64(o)[2] == -3);
  attn_tensor_release(o);
  CHECK_OK(attn_remainder(a, d, &o));
  CHECK(attn_tensor_i64(o)[1] == 1 && attn_tensor_i64(o)[2] == -1);
  attn_tensor_release(o);
  attn_tensor *z = NULL;
  CHECK_OK(attn_full_i64(0, NULL, 0, &z));
  CHECK(attn_floor_divide(a, z, &o) == ATTN_ERR_ARG && has("floor_divide: integer division by zero"));
  attn_tensor_release(z);
  CHECK_OK(attn_unary(ATTN_EXP, d, &o)); /* float ops on integers promote */
  CHECK(o->dtype == ATTN_FLOAT32);
  attn_tensor_release(o);
  CHECK_OK(attn_unary(ATTN_NEG, a, &o));
  CHECK(o->dtype == ATTN_INT64 && attn_tensor_i64(o)[0] == -((INT64_C(1) << 53) + 1));
  attn_tensor_release(o);
  /* in place: an int64 target refuses a float result, like torch */
  CHECK(attn_binary_(ATTN_ADD, a, f) == ATTN_ERR_ARG && has("can't be cast"));
  attn_tensor_release(a);
  attn_tensor_release(f);
  attn_tensor_release(d);
}

static void test_comparisons_and_masks(void) {
  float fv[4] = {-1, 2, 0, 5};
  attn_tensor *f = f32(4, fv), *m = NULL, *o = NULL;
  CHECK_OK(attn_binary_scalar(ATTN_GT, f, 0.0f, false, &m));
  CHECK(m->dtype == ATTN_BOOL && !attn_tensor_bool(m)[0] && attn_tensor_bool(m)[1] && attn_tensor_bool(m)[3]);
  CHECK_OK(attn_masked_fill(f, m, -9.0f, &o));
  CHECK(o->dtype == ATTN_FLOAT32 && attn_tensor_data(o)[1] == -9.0f && attn_tensor_data(o)[0] == -1.0f);
  attn_tensor_release(o);
  int64_t iv[4] = {10, 20, 30, 40}, jv[4] = {-1, -2, -3, -4};
  attn_tensor *a = i64(4, iv), *b = i64(4, jv);
  CHECK_OK(attn_where(m, a, b, &o)); /* int64 values stay int64 */
  CHECK(o->dtype == ATTN_INT64 && attn_tensor_i64(o)[0] == -1 && attn_tensor_i64(o)[1] == 20);
  attn_tensor_release(o);
  CHECK_OK(attn_reduce_all(ATTN_SUM, m, NULL, &o)); /* sum of bool counts */
  CHECK(o->dtype == ATTN_INT64 && attn_tensor_i64(o)[0] == 2);
  attn_tensor_release(o);
  CHECK_OK(attn_reduce_all(ATTN_ANY, m, NULL, &o));
  CHECK(o->dtype == ATTN_BOOL && attn_tensor_bool(o)[0]);
  attn_tensor_release(o);
  CHECK_OK(attn_reduce_dim(ATTN_ARGMAX, f, 0, false, NULL, &o));
  CHECK(o->dtype == ATTN_INT64 && attn_tensor_i64(o)[0] == 3);
  attn_tensor_release(o);
  bool bv[4] = {true, false, true, false};
  attn_tensor *bb = b8(4, bv);
  CHECK_OK(attn_logical(ATTN_LOGICAL_XOR, bb, m, &o));
  CHECK(o->dtype == ATTN_BOOL && attn_tensor_bool(o)[0] && attn_tensor_bool(o)[1] && attn_tensor_bool(o)[3]);
  attn_tensor_release(o);
  CHECK(attn_binary(ATTN_SUB, bb, bb, &o) == ATTN_ERR_ARG && has("sub"));
  attn_tensor_release(bb);
  attn_tensor_release(a);
  attn_tensor_release(b);
  attn_tensor_release(m);
  attn_tensor_release(f);
}

static void test_index_tensors(void) {
  int64_t shape[2] = {4, 2};
  float wv[8] = {0, 1, 10, 11, 20, 21, 30, 31};
  attn_tensor *w = NULL, *o = NULL;
  CHECK_OK(attn_from_data(2, shape, wv, &w));
  int64_t idv[3] = {3, 0, 3};
  attn_tensor *ids = i64(3, idv);
  CHECK_OK(attn_index_select(w, 0, ids, &o));
  CHECK(attn_tensor_data(o)[0] == 30 && attn_tensor_data(o)[3] == 1);
  attn_tensor_release(o);
  CHECK_OK(attn_embedding(w, ids, -1, &o));
  CHECK(o->ndim == 2 && attn_tensor_data(o)[5] == 31);
  attn_tensor_release(o);
  float fid[2] = {2, 1}; /* float ids still work */
  attn_tensor *fids = f32(2, fid);
  CHECK_OK(attn_index_select(w, 0, fids, &o));
  CHECK(attn_tensor_data(o)[0] == 20);
  attn_tensor_release(o);
  int64_t bad[1] = {4};
  attn_tensor *b = i64(1, bad);
  o = NULL;
  CHECK(attn_index_select(w, 0, b, &o) == ATTN_ERR_INDEX && o == NULL && has("index 4 out of range"));
  attn_tensor_release(b);
  bool mv[2] = {true, false};
  attn_tensor *bm = b8(2, mv);
  CHECK(attn_index_select(w, 0, bm, &o) == ATTN_ERR_ARG && has("int64"));
  attn_tensor_release(bm);
  /* int64 sources move too */
  attn_tensor *li = NULL;
  CHECK_OK(attn_to_dtype(w, ATTN_INT64, &li));
  CHECK_OK(attn_index_select(li, 0, ids, &o));
  CHECK(o->dtype == ATTN_INT64 && attn_tensor_i64(o)[0] == 30);
  attn_tensor_release(o);
  attn_tensor_release(li);
  attn_tensor_release(fids);
  attn_tensor_release(ids);
  attn_tensor_release(w);
}

static void test_float_only(void) {
  int64_t shape[2] = {2, 2};
  attn_tensor *a = NULL, *o = NULL;
  CHECK_OK(attn_full_dtype(ATTN_INT64, 2, shape, 3, &a));
  CHECK(attn_softmax(a, 1, &o) == ATTN_ERR_ARG && has("softmax: expected a floating tensor, got int64") && !o);
  CHECK(attn_matmul(a, a, &o) == ATTN_ERR_ARG && has("matmul: expected a floating tensor, got int64"));
  CHECK(attn_uniform_(a, 0, 1, NULL) == ATTN_ERR_ARG && has("uniform_"));
  CHECK(attn_requires_grad_(a, true) == ATTN_ERR_ARG && has("only floating point tensors"));
  CHECK(!attn_requires_grad(a));
  CHECK_OK(attn_random_int_(a, 0, 10, NULL)); /* randint fills int64 */
  attn_tensor_release(a);
}

static void test_print_and_io(void) {
  int64_t iv[3] = {1, -20, 300};
  bool bv[2] = {true, false};
  attn_tensor *a = i64(3, iv), *b = b8(2, bv);
  char *s = NULL;
  CHECK_OK(attn_tensor_format(a, NULL, &s));
  CHECK(s && strcmp(s, "tensor([  1, -20, 300])") == 0);
  free(s);
  CHECK_OK(attn_tensor_format(b, NULL, &s));
  CHECK(s && strcmp(s, "tensor([ True, False])") == 0);
  free(s);
  char dir[] = "/tmp/attn_dtype_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/a.npy", dir);
  CHECK_OK(attn_npy_save(path, a));
  attn_tensor *back = NULL;
  attn_weight_info info;
  CHECK_OK(attn_npy_load(path, &back, &info));
  CHECK(back && back->dtype == ATTN_INT64 && strcmp(info.dtype, "<i8") == 0 && attn_tensor_i64(back)[1] == -20);
  attn_tensor_release(back);
  unlink(path);
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  attn_named_tensors *nt = NULL, *got = NULL;
  CHECK_OK(attn_named_tensors_new(&nt));
  CHECK_OK(attn_named_tensors_add(nt, "ids", a));
  CHECK_OK(attn_named_tensors_add(nt, "mask", b));
  CHECK_OK(attn_safetensors_save(path, nt));
  CHECK_OK(attn_safetensors_load(path, &got));
  attn_tensor *gi = got ? attn_named_tensors_get(got, "ids") : NULL,
              *gm = got ? attn_named_tensors_get(got, "mask") : NULL;
  CHECK(gi && gi->dtype == ATTN_INT64 && attn_tensor_i64(gi)[2] == 300);
  CHECK(gm && gm->dtype == ATTN_BOOL && attn_tensor_bool(gm)[0] && !attn_tensor_bool(gm)[1]);
  attn_named_tensors_free(got);
  attn_named_tensors_free(nt);
  unlink(path);
  rmdir(dir);
  attn_tensor_release(a);
  attn_tensor_release(b);
}

int main(void) {
  test_storage_and_views();
  test_budget_counts_bytes();
  test_conversions();
  test_promotion_and_int_math();
  test_comparisons_and_masks();
  test_index_tensors();
  test_float_only();
  test_print_and_io();
  attn_debug_counts c;
  attn_debug_counts_get(&c);
  CHECK(c.tensors == 0 && c.storages == 0);
  return check_summary();
}
