/* SPDX-License-Identifier: MIT */
/* The one backward mechanism: every node names its backward by formula id
 * and the engine runs attn__formulas[id] (backward/formulas.c).
 *
 *  - every id but ATTN__F_NONE is listed and has a function in the table
 *    (the compiler checks the same: formulas.c's static_assert and switch);
 *  - the ops whose backward lives beside their forward (linalg, sort,
 *    scatter, index_add, masked_select, layer_norm, embedding, the fused
 *    attention, custom C nodes) record their id and torch's node name, and
 *    a backward through each gives every input a gradient of its shape;
 *  - a custom node's backward runs its callback once, with the gradient.
 */
#include <string.h>

#include "attention/attention.h"
#include "backward/backward.h"
#include "check.h"

static attn_tensor *randn_leaf(int ndim, const int64_t *shape) {
  attn_tensor *t = NULL;
  if (attn_zeros(ndim, shape, &t) || attn_normal_(t, 0.0, 1.0, NULL) || attn_requires_grad_(t, true)) {
    fprintf(stderr, "randn_leaf: %s\n", attn_last_error());
    attn_tensor_release(t);
    return NULL;
  }
  return t;
}

/* out's node has formula id and name; backward from out with a gradient of
   ones gives each of the n leaves a gradient of its shape. */
static void check_node(const char *what, attn_tensor *out, attn__formula id, const char *name, int n,
                       attn_tensor *const *leaves) {
  const attn_node *node = out && out->autograd ? out->autograd->grad_fn : NULL;
  if (!node) {
    check_failed++;
    fprintf(stderr, "%s: no grad_fn\n", what);
    return;
  }
  if (node->formula != id || strcmp(node->name, name) != 0) {
    check_failed++;
    fprintf(stderr, "%s: node %s with formula %d, expected %s with %d\n", what, node->name, (int)node->formula, name,
            (int)id);
  } else {
    check_passed++;
  }
  attn_tensor *g = NULL;
  CHECK_OK(attn_ones(out->ndim, out->shape, &g));
  CHECK_OK(attn_backward(out, g, false));
  attn_tensor_release(g);
  for (int i = 0; i < n; i++) {
    const attn_tensor *gr = attn_grad(leaves[i]);
    if (!gr || !attn_same_shape(gr, leaves[i])) {
      check_failed++;
      fprintf(stderr, "%s: input %d got %s\n", what, i, gr ? "a gradient of another shape" : "no gradient");
    } else {
      check_passed++;
    }
  }
}

static void release_all(int n, attn_tensor **ts) {
  for (int i = 0; i < n; i++) attn_tensor_release(ts[i]);
}

static void test_table_is_complete(void) {
  CHECK(attn__formulas[ATTN__F_NONE] == NULL);
  CHECK(!attn__formula_listed(ATTN__F_NONE));
  CHECK(!attn__formula_listed(ATTN__F_COUNT));
  int missing = 0;
  for (int f = ATTN__F_NONE + 1; f < ATTN__F_COUNT; f++)
    if (!attn__formulas[f] || !attn__formula_listed((attn__formula)f)) {
      fprintf(stderr, "attn__formulas: id %d has no backward function\n", f);
      missing++;
    }
  CHECK(missing == 0);
}

static void test_linalg(void) {
  attn_tensor *l[3], *o = NULL;
  l[0] = randn_leaf(2, (int64_t[]){3, 4});
  l[1] = randn_leaf(2, (int64_t[]){4, 5});
  CHECK_OK(attn_matmul(l[0], l[1], &o));
  check_node("matmul", o, ATTN__F_MATMUL, "MmBackward0", 2, l);
  attn_tensor_release(o);
  release_all(2, l);

  l[0] = randn_leaf(1, (int64_t[]){6});
  l[1] = randn_leaf(1, (int64_t[]){6});
  CHECK_OK(attn_dot(l[0], l[1], &o));
  check_node("dot", o, ATTN__F_DOT, "DotBackward0", 2, l);
  attn_tensor_release(o);
  release_all(2, l);

  l[0] = randn_leaf(1, (int64_t[]){3});
  l[1] = randn_leaf(1, (int64_t[]){4});
  CHECK_OK(attn_outer(l[0], l[1], &o));
  check_node("outer", o, ATTN__F_OUTER, "OuterBackward0", 2, l);
  attn_tensor_release(o);
  release_all(2, l);

  l[0] = randn_leaf(2, (int64_t[]){3, 4});
  l[1] = randn_leaf(2, (int64_t[]){5, 4});
  l[2] = randn_leaf(1, (int64_t[]){5});
  CHECK_OK(attn_linear(l[0], l[1], l[2], &o));
  check_node("linear", o, ATTN__F_LINEAR, "AddmmBackward0", 3, l);
  attn_tensor_release(o);
  release_all(3, l);
}

static void test_sort_and_scatter(void) {
  attn_tensor *l[2], *o = NULL, *idx = NULL, *mask = NULL;
  l[0] = randn_leaf(2, (int64_t[]){3, 5});
  CHECK_OK(attn_sort(l[0], 1, false, &o, &idx));
  check_node("sort", o, ATTN__F_SORT, "SortBackward0", 1, l);
  attn_tensor_release(o);
  attn_tensor_release(idx);
  release_all(1, l);

  l[0] = randn_leaf(2, (int64_t[]){3, 4});
  l[1] = randn_leaf(2, (int64_t[]){2, 4});
  CHECK_OK(attn_from_data_i64(2, (int64_t[]){2, 4}, (int64_t[]){0, 1, 2, 0, 2, 0, 1, 1}, &idx));
  CHECK_OK(attn_scatter(l[0], 0, idx, l[1], &o));
  check_node("scatter", o, ATTN__F_SCATTER, "ScatterBackward0", 2, l);
  attn_tensor_release(o);
  attn_tensor_release(idx);
  release_all(2, l);

  l[0] = randn_leaf(2, (int64_t[]){3, 4});
  l[1] = randn_leaf(2, (int64_t[]){2, 4});
  CHECK_OK(attn_from_data_i64(1, (int64_t[]){2}, (int64_t[]){2, 0}, &idx));
  CHECK_OK(attn_index_add(l[0], 0, idx, l[1], 0.5f, &o));
  check_node("index_add", o, ATTN__F_INDEX_OP, "IndexAddBackward0", 2, l);
  attn_tensor_release(o);
  attn_tensor_release(idx);
  release_all(2, l);

  l[0] = randn_leaf(2, (int64_t[]){2, 3});
  CHECK_OK(attn_from_data_bool(2, (int64_t[]){2, 3}, (bool[]){true, false, true, false, false, true}, &mask));
  CHECK_OK(attn_masked_select(l[0], mask, &o));
  check_node("masked_select", o, ATTN__F_MASKED_SELECT, "MaskedSelectBackward0", 1, l);
  attn_tensor_release(o);
  attn_tensor_release(mask);
  release_all(1, l);
}

static void test_norm_embedding_sdpa(void) {
  attn_tensor *l[3], *o = NULL, *ids = NULL;
  l[0] = randn_leaf(2, (int64_t[]){3, 6});
  l[1] = randn_leaf(1, (int64_t[]){6});
  l[2] = randn_leaf(1, (int64_t[]){6});
  CHECK_OK(attn_layer_norm(l[0], 1, l[1], l[2], 1e-5f, &o));
  check_node("layer_norm", o, ATTN__F_LAYER_NORM, "NativeLayerNormBackward0", 3, l);
  attn_tensor_release(o);
  release_all(3, l);

  l[0] = randn_leaf(2, (int64_t[]){5, 3});
  CHECK_OK(attn_from_data_i64(1, (int64_t[]){4}, (int64_t[]){4, 0, 4, 2}, &ids));
  CHECK_OK(attn_embedding(l[0], ids, -1, &o));
  check_node("embedding", o, ATTN__F_EMBEDDING, "EmbeddingBackward0", 1, l);
  attn_tensor_release(o);
  attn_tensor_release(ids);
  release_all(1, l);

  for (int i = 0; i < 3; i++) l[i] = randn_leaf(3, (int64_t[]){2, 4, 8});
  CHECK_OK(attn__sdpa_fused(l[0], l[1], l[2], NULL, &o));
  check_node("sdpa", o, ATTN__F_SDPA, "ScaledDotProductFlashAttentionForCpuBackward0", 3, l);
  attn_tensor_release(o);
  release_all(3, l);
}

static int custom_calls;

/* d(2x)/dx = 2 */
static attn_status twice_backward(void *ctx, const attn_tensor *g, attn_tensor **grads) {
  custom_calls++;
  CHECK(ctx == (void *)&custom_calls);
  return attn_binary_scalar(ATTN_MUL, g, 2.0f, false, &grads[0]);
}

static void test_custom(void) {
  attn_tensor *x = randn_leaf(1, (int64_t[]){4}), *o = NULL;
  CHECK_OK(attn_binary_scalar(ATTN_MUL, x, 2.0f, false, &o));
  attn_tensor *d = NULL;
  CHECK_OK(attn_detach(o, &d)); /* the custom node alone between d and x */
  attn_tensor_release(o);
  CHECK_OK(
      attn_custom_record(d, "TwiceBackward", 1, (const attn_tensor *const *)&x, twice_backward, &custom_calls, NULL));
  check_node("custom", d, ATTN__F_CUSTOM, "TwiceBackward", 1, &x);
  CHECK(custom_calls == 1);
  const attn_tensor *gx = attn_grad(x);
  if (gx && attn_tensor_is_contiguous(gx))
    for (int i = 0; i < 4; i++) CHECK_NEAR(attn_tensor_data(gx)[i], 2.0, 0.0);
  else
    CHECK(!"custom: x has no contiguous gradient to read");
  attn_tensor_release(d);
  attn_tensor_release(x);
}

int main(void) {
  test_table_is_complete();
  test_linalg();
  test_sort_and_scatter();
  test_norm_embedding_sdpa();
  test_custom();
  return check_summary();
}
