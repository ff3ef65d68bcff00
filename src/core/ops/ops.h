/* SPDX-License-Identifier: MIT */
/* The forward ops (1.4, src/core/ops/): what the ops share with the rooms
 * above them and the tests (their entry points are attn.h's).  The ops
 * record themselves through autograd/autograd.h.  Not installed. */
#ifndef ATTN_CORE_OPS_H
#define ATTN_CORE_OPS_H

#include "autograd/autograd.h"

/* A view of t with new geometry (shares t's storage). */
attn_status attn__make_view(const attn_tensor *t, int64_t offset, int ndim, const int64_t *shape, const int64_t *stride,
                            attn_tensor **out);

/* The float32 elementwise kernels as such: comparisons give float 0/1
   (backward formulas multiply by them).  Inputs must be float32. */
attn_status attn__binary_raw(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
attn_status attn__binary_scalar_raw(attn_binary_op op, const attn_tensor *a, float s, bool reversed, attn_tensor **out);

/* Naive reference kernels kept beside the optimised ones for the tests. */
attn_status attn__matmul_reference(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);

/* A tensor split around one dim for kernels that work along it (reductions,
   softmax, cumsum).  The other dims, coalesced together with the matching
   strides of a contiguous output, form an outer odometer over dims
   0..nd-2 and an innermost run of m "columns" (input stride vs, output
   stride vos); the split dim has n elements (input stride in_stride,
   output stride out_stride).  A 0-d tensor split at dim 0 is one element. */
typedef struct attn__dimsplit {
  int nd;
  int64_t shape[ATTN_MAX_DIMS];
  int64_t strides[2][ATTN_MAX_DIMS]; /* [0] input, [1] output */
  int64_t outer;                     /* product of shape[0..nd-2] */
  int64_t m, vs, vos;                /* innermost: shape[nd-1] and its strides */
  int64_t n, in_stride, out_stride;  /* the split dim */
} attn__dimsplit;
/* ostride: the output's strides for each of t's dims (ignored at dim). */
void attn__dimsplit_init(attn__dimsplit *s, const attn_tensor *t, int dim, const int64_t *ostride);
/* Advances the outer odometer idx (nd-1 entries) and the two offsets. */
static inline void attn__dimsplit_next(const attn__dimsplit *s, int64_t *idx, int64_t *ip, int64_t *op) {
  for (int d = s->nd - 2; d >= 0; d--) {
    if (++idx[d] < s->shape[d]) {
      *ip += s->strides[0][d];
      *op += s->strides[1][d];
      return;
    }
    *ip -= s->strides[0][d] * (s->shape[d] - 1);
    *op -= s->strides[1][d] * (s->shape[d] - 1);
    idx[d] = 0;
  }
}

/* Sum of grad over the dims that broadcasting added or expanded so that it
   has the given shape (returns a retained grad when nothing to do; reduce.c). */
attn_status attn__sum_to_shape(const attn_tensor *grad, int ndim, const int64_t *shape, attn_tensor **out);

/* sort.c's reference twin (insertion sort) for the tests: sorts v, idx
   gets the 0-based source positions. */
void attn__sort_pairs_reference(float *v, int64_t *idx, int64_t n, bool descending);

/* The backward functions written beside their forward op, for the
   backward room's table (attn__formulas: the ops record the id, never the
   function). */
/* linalg.c */
attn_status attn__matmul_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__dot_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__outer_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__linear_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
/* sort.c */
attn_status attn__sort_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
/* scatter.c */
attn_status attn__scatter_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__index_op_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__masked_select_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
/* norm.c, embedding.c */
attn_status attn__layer_norm_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);
attn_status attn__embedding_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);

#endif
