/* SPDX-License-Identifier: MIT */
/* C tests of the tensor core: lifetime, views, copies, errors and the
   elementwise/matmul kernels against simple references. */
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "check.h"
#include "ops/ops.h"

static int released;
static void on_release(void *ctx, float *data) {
  (void)data;
  released += *(int *)ctx;
}

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void fill_random(attn_tensor *t, unsigned *seed) {
  float *p = attn_tensor_data(t);
  for (int64_t i = 0; i < attn_tensor_numel(t); i++) p[i] = frand(seed);
}

static void test_lifetime(void) {
  int64_t shape[2] = {2, 3};
  attn_tensor *t = NULL, *v = NULL;
  CHECK_OK(attn_zeros(2, shape, &t));
  CHECK_OK(attn_transpose(t, 0, 1, &v));
  CHECK(v->storage == t->storage);
  attn_tensor_release(t); /* the view keeps the storage alive */
  CHECK(attn_tensor_data(v)[0] == 0.0f);
  attn_tensor_release(v);
  attn_tensor_release(NULL);

  float buf[6] = {1, 2, 3, 4, 5, 6};
  int one = 1;
  released = 0;
  CHECK_OK(attn_wrap(buf, 2, shape, NULL, on_release, &one, &t));
  CHECK_OK(attn_select(t, 0, 1, &v));
  CHECK(attn_tensor_data(v)[2] == 6.0f);
  attn_tensor_release(t);
  CHECK(released == 0);
  attn_tensor_release(v);
  CHECK(released == 1);
  /* borrowed buffer: no release callback, never freed by attn */
  CHECK_OK(attn_wrap(buf, 2, shape, NULL, NULL, NULL, &t));
  attn_tensor_release(t);
  CHECK(buf[0] == 1.0f);
}

static void test_errors(void) {
  int64_t bad[2] = {2, -1}, huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
  attn_tensor *t = NULL;
  CHECK(attn_zeros(2, bad, &t) == ATTN_ERR_ARG && t == NULL);
  CHECK(strstr(attn_last_error(), "negative size") != NULL);
  CHECK(attn_zeros(2, huge, &t) == ATTN_ERR_NOMEM && t == NULL);
  int64_t big[1] = {(int64_t)1 << 52};
  CHECK(attn_zeros(1, big, &t) == ATTN_ERR_NOMEM && t == NULL);
  int64_t s63[2] = {6, 3}, s24[2] = {2, 4};
  attn_tensor *a, *b, *c = NULL;
  attn_zeros(2, s63, &a);
  attn_zeros(2, s24, &b);
  CHECK(attn_matmul(a, b, &c) == ATTN_ERR_SHAPE && c == NULL);
  CHECK(strcmp(attn_last_error(), "matmul: cannot multiply [6,3] by [2,4]") == 0);
  CHECK(attn_binary(ATTN_ADD, a, b, &c) == ATTN_ERR_SHAPE);
  CHECK(attn_transpose(a, 0, 2, &c) == ATTN_ERR_INDEX);
  CHECK(attn_narrow(a, 0, 5, 2, &c) == ATTN_ERR_INDEX);
  CHECK(attn_select(a, 1, 3, &c) == ATTN_ERR_INDEX);
  CHECK(attn_as_strided(a, 2, s63, (int64_t[]){3, 1}, 1, &c) == ATTN_ERR_INDEX);
  CHECK(c == NULL);
  attn_tensor_release(a);
  attn_tensor_release(b);
}

static void test_views(void) {
  unsigned seed = 1;
  int64_t shape[3] = {2, 3, 4};
  attn_tensor *t, *p, *r, *c;
  attn_empty(3, shape, &t);
  fill_random(t, &seed);
  int perm[3] = {2, 0, 1};
  CHECK_OK(attn_permute(t, perm, &p));
  CHECK(p->shape[0] == 4 && p->shape[1] == 2 && p->shape[2] == 3);
  CHECK(!attn_tensor_is_contiguous(p));
  int64_t flat[1] = {24};
  CHECK(attn_view(p, 1, flat, &r) == ATTN_ERR_SHAPE);
  CHECK_OK(attn_reshape(p, 1, flat, &r));
  CHECK_OK(attn_clone(p, &c));
  int ok = 1;
  for (int64_t i = 0; i < 24; i++) ok &= attn_tensor_get_flat(r, i) == attn_tensor_data(c)[i];
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 2; j++)
      for (int64_t k = 0; k < 3; k++)
        ok &= attn_tensor_get(p, (int64_t[]){i, j, k}) == attn_tensor_get(t, (int64_t[]){j, k, i});
  CHECK(ok);
  attn_tensor_release(r);
  attn_tensor_release(c);
  /* viewing merged dims of a transposed-inner tensor keeps sharing */
  int64_t s2[2] = {6, 4};
  CHECK_OK(attn_view(t, 2, s2, &r));
  CHECK(r->storage == t->storage && r->stride[0] == 4);
  attn_tensor_release(r);
  attn_tensor_release(p);
  attn_tensor_release(t);
}

/* Elementwise add over random broadcast shapes and strides vs a direct
   per-element loop. */
static void test_broadcast_random(void) {
  unsigned seed = 7;
  int bad = 0;
  for (int trial = 0; trial < 200; trial++) {
    int nd = 1 + (int)(frand(&seed) * 2 + 1) % 4;
    int64_t sa[4], sb[4], so[4];
    for (int d = 0; d < nd; d++) {
      int64_t n = 1 + (int64_t)((frand(&seed) + 0.5f) * 4);
      so[d] = n;
      sa[d] = frand(&seed) > 0.2f ? 1 : n;
      sb[d] = frand(&seed) > 0.2f ? 1 : n;
    }
    attn_tensor *a, *b, *at, *o;
    attn_empty(nd, sa, &a);
    attn_empty(nd, sb, &b);
    fill_random(a, &seed);
    fill_random(b, &seed);
    /* a non-contiguous view of a: transpose its first and last dims twice */
    attn_transpose(a, 0, nd - 1, &at);
    attn_tensor *a2;
    attn_contiguous(at, &a2);
    attn_tensor *back;
    attn_transpose(a2, 0, nd - 1, &back);
    if (attn_binary(ATTN_SUB, back, b, &o) != ATTN_OK) {
      bad++;
    } else {
      int64_t idx[4] = {0};
      for (int64_t i = 0; i < attn_tensor_numel(o); i++) {
        int64_t r = i, ia[4], ib[4];
        for (int d = nd - 1; d >= 0; d--) {
          idx[d] = r % o->shape[d];
          r /= o->shape[d];
          ia[d] = sa[d] == 1 ? 0 : idx[d];
          ib[d] = sb[d] == 1 ? 0 : idx[d];
        }
        float want = attn_tensor_get(a, ia) - attn_tensor_get(b, ib);
        if (attn_tensor_get_flat(o, i) != want) bad++;
      }
      attn_tensor_release(o);
    }
    (void)so;
    attn_tensor_release(back);
    attn_tensor_release(a2);
    attn_tensor_release(at);
    attn_tensor_release(a);
    attn_tensor_release(b);
  }
  CHECK(bad == 0);
}

/* matmul (BLAS and folded paths) against the naive reference over random
   shapes, with transposed operands and broadcast batches. */
static void test_matmul_random(void) {
  unsigned seed = 3;
  int bad = 0, cases = 0;
  for (int trial = 0; trial < 120; trial++) {
    int64_t m = 1 + (int64_t)((frand(&seed) + 0.5f) * 40), k = 1 + (int64_t)((frand(&seed) + 0.5f) * 40),
            n = 1 + (int64_t)((frand(&seed) + 0.5f) * 40), batch = 1 + trial % 3;
    int64_t sa[3] = {batch, m, k}, sb_t[2] = {n, k};
    attn_tensor *a, *bt, *b, *o, *ref;
    attn_empty(3, sa, &a);
    attn_empty(2, sb_t, &bt);
    fill_random(a, &seed);
    fill_random(bt, &seed);
    attn_t(bt, &b); /* b = [k, n], column-major view */
    if (attn_matmul(a, b, &o) || attn__matmul_reference(a, b, &ref)) {
      bad++;
    } else {
      for (int64_t i = 0; i < attn_tensor_numel(o); i++)
        if (fabsf(attn_tensor_data(o)[i] - attn_tensor_data(ref)[i]) > 1e-4f) bad++;
      attn_tensor_release(o);
      attn_tensor_release(ref);
    }
    cases++;
    /* also a batched right operand broadcast against a 1-batch left one */
    int64_t sb3[3] = {batch, k, n};
    attn_tensor *b3, *a1;
    attn_empty(3, sb3, &b3);
    fill_random(b3, &seed);
    attn_narrow(a, 0, 0, 1, &a1);
    if (attn_matmul(a1, b3, &o) || attn__matmul_reference(a1, b3, &ref)) {
      bad++;
    } else {
      CHECK(o->shape[0] == batch);
      for (int64_t i = 0; i < attn_tensor_numel(o); i++)
        if (fabsf(attn_tensor_data(o)[i] - attn_tensor_data(ref)[i]) > 1e-4f) bad++;
      attn_tensor_release(o);
      attn_tensor_release(ref);
    }
    cases++;
    attn_tensor_release(a1);
    attn_tensor_release(b3);
    attn_tensor_release(a);
    attn_tensor_release(bt);
    attn_tensor_release(b);
  }
  CHECK(bad == 0);
  CHECK(cases == 240);
}

/* Operands BLAS cannot read in place (a stride-0 expand, like the gradient
   of a sum) are packed first; the result must equal the reference. */
static void test_matmul_packed(void) {
  unsigned seed = 11;
  int64_t sa[2] = {40, 50}, sv[2] = {50, 1}, se[2] = {50, 30};
  attn_tensor *a, *v, *e, *o, *ref, *at, *ate;
  attn_empty(2, sa, &a);
  attn_empty(2, sv, &v);
  fill_random(a, &seed);
  fill_random(v, &seed);
  CHECK_OK(attn_expand(v, 2, se, &e));
  CHECK(e->stride[1] == 0);
  CHECK_OK(attn_matmul(a, e, &o));
  CHECK_OK(attn__matmul_reference(a, e, &ref));
  int bad = 0;
  for (int64_t i = 0; i < attn_tensor_numel(o); i++)
    if (fabsf(attn_tensor_data(o)[i] - attn_tensor_data(ref)[i]) > 1e-4f) bad++;
  CHECK(bad == 0);
  attn_tensor_release(o);
  attn_tensor_release(ref);
  /* and as the left operand: [30, 50] expanded rows times a^T */
  int64_t sr[2] = {1, 50}, ser[2] = {30, 50};
  attn_tensor *r, *er;
  attn_empty(2, sr, &r);
  fill_random(r, &seed);
  CHECK_OK(attn_expand(r, 2, ser, &er));
  CHECK_OK(attn_t(a, &at));
  CHECK_OK(attn_contiguous(at, &ate));
  CHECK_OK(attn_matmul(er, ate, &o));
  CHECK_OK(attn__matmul_reference(er, ate, &ref));
  bad = 0;
  for (int64_t i = 0; i < attn_tensor_numel(o); i++)
    if (fabsf(attn_tensor_data(o)[i] - attn_tensor_data(ref)[i]) > 1e-4f) bad++;
  CHECK(bad == 0);
  attn_tensor_release(o), attn_tensor_release(ref), attn_tensor_release(r), attn_tensor_release(er);
  attn_tensor_release(at), attn_tensor_release(ate), attn_tensor_release(a), attn_tensor_release(v);
  attn_tensor_release(e);
}

static void test_blas(void) {
  attn_blas_info info;
  CHECK_OK(attn_blas_get_info(&info));
  CHECK(info.core && *info.core);
  CHECK(attn_set_num_threads(0) == ATTN_ERR_ARG);
}

int main(void) {
  test_lifetime();
  test_errors();
  test_views();
  test_broadcast_random();
  test_matmul_random();
  test_matmul_packed();
  test_blas();
  return check_summary();
}
