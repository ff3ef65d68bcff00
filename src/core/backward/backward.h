/* SPDX-License-Identifier: MIT */
/* The backward side of autograd (1.6, src/core/backward/): the formulas
 * kept apart from their forward op (grad_*.c, which call the ops), the one
 * table from formula id (attn__formula, autograd/autograd.h) to backward
 * function (formulas.c) and the engine that walks the graph and runs each
 * node's entry (autograd.c).  Not installed. */
#ifndef ATTN_CORE_BACKWARD_H
#define ATTN_CORE_BACKWARD_H

#include "ops/ops.h"

/* The one table from formula id to backward function (formulas.c): every
   id but ATTN__F_NONE has its function, which the compiler checks.  The
   engine runs attn__formulas[node->formula]. */
extern const attn__backward_fn attn__formulas[ATTN__F_COUNT];
/* Whether f has its line in formulas.c's list (for the tests). */
bool attn__formula_listed(attn__formula f);

/* The formulas written with the ops, by file (the others are exported by
   the room of their forward op: ops/ops.h, attention/attention.h,
   autograd/autograd.h). */
/* grad_elementwise.c */
attn_status attn__binary_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__binary_scalar_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__add_scaled_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__unary_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__clamp_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__where_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__masked_fill_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
/* grad_views.c */
attn_status attn__view_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
/* grad_reduce.c */
attn_status attn__sum_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__prod_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__extreme_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__var_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__std_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__norm_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__logsumexp_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__max_dim_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__cumsum_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__softmax_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
/* grad_shape.c */
attn_status attn__triangle_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__cat_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__stack_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__index_select_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__gather_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__repeat_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__flip_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);

#endif
