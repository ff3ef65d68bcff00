/* SPDX-License-Identifier: MIT */
/* The one table from formula id to backward function (attn__formulas,
 * backward/backward.h).  Every recorded node names its backward by id
 * (attn__formula, autograd/autograd.h) and the engine (autograd.c) runs
 * attn__formulas[node->formula]: one load per node.  The functions live
 * in this room's grad_*.c files (the formulas written with the ops) or
 * beside their forward op, exported as attn__<op>_backward through that
 * room's door header; this room sits above them all, so it may name each.
 *
 * Adding a backward: an id in attn__formula and one X(...) line below.
 * The compiler checks the list is complete: it lists as many entries as
 * there are ids (less ATTN__F_NONE), no id twice (attn__formula_listed's
 * switch would have two equal case labels) and only ids of the enum, so
 * every id has its function.  spec/c/test_formulas.c walks the ids too. */
#include "attention/attention.h"
#include "backward/backward.h"

#include <assert.h>

#define FORMULAS(X)                                                                                                    \
  /* grad_elementwise.c */                                                                                             \
  X(ATTN__F_BINARY, attn__binary_backward)                                                                             \
  X(ATTN__F_BINARY_SCALAR, attn__binary_scalar_backward)                                                               \
  X(ATTN__F_ADD_SCALED, attn__add_scaled_backward)                                                                     \
  X(ATTN__F_UNARY, attn__unary_backward)                                                                               \
  X(ATTN__F_CLAMP, attn__clamp_backward)                                                                               \
  X(ATTN__F_WHERE, attn__where_backward)                                                                               \
  X(ATTN__F_MASKED_FILL, attn__masked_fill_backward)                                                                   \
  /* grad_views.c */                                                                                                   \
  X(ATTN__F_VIEW, attn__view_backward)                                                                                 \
  /* grad_reduce.c */                                                                                                  \
  X(ATTN__F_SUM, attn__sum_backward)                                                                                   \
  X(ATTN__F_PROD, attn__prod_backward)                                                                                 \
  X(ATTN__F_EXTREME, attn__extreme_backward)                                                                           \
  X(ATTN__F_VAR, attn__var_backward)                                                                                   \
  X(ATTN__F_STD, attn__std_backward)                                                                                   \
  X(ATTN__F_NORM, attn__norm_backward)                                                                                 \
  X(ATTN__F_LOGSUMEXP, attn__logsumexp_backward)                                                                       \
  X(ATTN__F_MAX_DIM, attn__max_dim_backward)                                                                           \
  X(ATTN__F_CUMSUM, attn__cumsum_backward)                                                                             \
  X(ATTN__F_SOFTMAX, attn__softmax_backward)                                                                           \
  /* grad_shape.c */                                                                                                   \
  X(ATTN__F_TRIANGLE, attn__triangle_backward)                                                                         \
  X(ATTN__F_CAT, attn__cat_backward)                                                                                   \
  X(ATTN__F_STACK, attn__stack_backward)                                                                               \
  X(ATTN__F_INDEX_SELECT, attn__index_select_backward)                                                                 \
  X(ATTN__F_GATHER, attn__gather_backward)                                                                             \
  X(ATTN__F_REPEAT, attn__repeat_backward)                                                                             \
  X(ATTN__F_FLIP, attn__flip_backward)                                                                                 \
  /* beside their forward op (ops/, attention/, autograd/) */                                                          \
  X(ATTN__F_MATMUL, attn__matmul_backward)                                                                             \
  X(ATTN__F_DOT, attn__dot_backward)                                                                                   \
  X(ATTN__F_OUTER, attn__outer_backward)                                                                               \
  X(ATTN__F_LINEAR, attn__linear_backward)                                                                             \
  X(ATTN__F_SORT, attn__sort_backward)                                                                                 \
  X(ATTN__F_SCATTER, attn__scatter_backward)                                                                           \
  X(ATTN__F_INDEX_OP, attn__index_op_backward)                                                                         \
  X(ATTN__F_MASKED_SELECT, attn__masked_select_backward)                                                               \
  X(ATTN__F_LAYER_NORM, attn__layer_norm_backward)                                                                     \
  X(ATTN__F_EMBEDDING, attn__embedding_backward)                                                                       \
  X(ATTN__F_SDPA, attn__sdpa_backward)                                                                                 \
  X(ATTN__F_CUSTOM, attn__custom_backward)

#define ENTRY(id, fn) [id] = fn,
const attn__backward_fn attn__formulas[ATTN__F_COUNT] = {FORMULAS(ENTRY)};

#define ONE(id, fn) +1
static_assert(0 FORMULAS(ONE) == ATTN__F_COUNT - 1,
              "attn__formulas: list every attn__formula but ATTN__F_NONE once, with its backward function");

/* Whether f is in the list above: the tests walk every id through it.
   Its switch also makes the compiler refuse an id listed twice. */
#define CASE(id, fn) case id:
bool attn__formula_listed(attn__formula f) {
  switch (f) {
    FORMULAS(CASE)
    return true;
  default: return false;
  }
}
