/* SPDX-License-Identifier: MIT */
/* Reproducers of fuzz findings that need the C API (the Lua ones are in
 * spec/fuzz_regress_spec.lua); built and run by ctest as fuzz/regress
 * (spec/fuzz/replay.cmake).  Each check failed before its fix. */
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "check.h"

/* fuzz_views: chunk of an empty dim gives `chunks` views, and view
   headers are not storage, so a sandboxed script could make 2^31 of them
   past its memory limit.  They are now charged to the thread's budget
   while they are made. */
static void test_chunk_headers_charged(void) {
  attn_budget *b = NULL;
  CHECK_OK(attn_budget_new(1 << 20, &b));
  attn_budget *prev = attn_budget_set_current(b);
  attn_tensor *t = NULL;
  CHECK_OK(attn_zeros(1, (const int64_t[]){0}, &t));
  int n = -1;
  attn_tensor **pieces = NULL;
  attn_status st = attn_chunk(t, (int64_t)1 << 30, 0, &n, &pieces);
  CHECK(st == ATTN_ERR_NOMEM && pieces == NULL && n == -1);
  CHECK(strstr(attn_last_error(), "chunk: memory limit") != NULL);
  /* what fits still works, and the charge is given back */
  int64_t used = attn_budget_used(b);
  CHECK_OK(attn_chunk(t, 100, 0, &n, &pieces));
  CHECK(n == 100);
  for (int i = 0; i < n; i++) {
    CHECK(pieces[i]->ndim == 1 && pieces[i]->shape[0] == 0);
    attn_tensor_release(pieces[i]);
  }
  free(pieces);
  CHECK(attn_budget_used(b) == used);
  attn_tensor_release(t);
  attn_budget_set_current(prev);
  attn_budget_release(b);
}

/* fuzz_views: the product of the non-zero sizes of a shape must fit (it
   overflowed in numel and the contiguous strides of [2^62, 3, 0]). */
static void test_empty_shape_limits(void) {
  attn_tensor *t = NULL, *o = NULL;
  CHECK(attn_empty(3, (const int64_t[]){(int64_t)1 << 62, 3, 0}, &t) == ATTN_ERR_NOMEM && t == NULL);
  CHECK_OK(attn_empty(2, (const int64_t[]){(int64_t)1 << 40, 0}, &t));
  CHECK(attn_tensor_numel(t) == 0);
  CHECK(attn_expand(t, 3, (const int64_t[]){(int64_t)1 << 20, (int64_t)1 << 40, 0}, &o) != ATTN_OK && o == NULL);
  CHECK(attn_view(t, 3, (const int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40, 0}, &o) != ATTN_OK && o == NULL);
  CHECK(attn_as_strided(t, 3, (const int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40, 0}, (const int64_t[]){0, 0, 0}, 0,
                        &o) != ATTN_OK &&
        o == NULL);
  attn_tensor_release(t);
}

/* fuzz_lua_api: attn_set_grad(t, t) kept t inside itself. */
static void test_set_grad_self(void) {
  attn_debug_counts c0, c1;
  attn_debug_counts_get(&c0);
  attn_tensor *t = NULL;
  CHECK_OK(attn_ones(1, (const int64_t[]){3}, &t));
  CHECK_OK(attn_set_grad(t, t));
  CHECK(attn_grad(t) != NULL && attn_grad(t)->storage == t->storage);
  attn_tensor_release(t);
  attn_debug_counts_get(&c1);
  CHECK(c1.tensors == c0.tensors && c1.storages == c0.storages);
}

int main(void) {
  test_chunk_headers_charged();
  test_empty_shape_limits();
  test_set_grad_self();
  return check_summary();
}
