/* SPDX-License-Identifier: MIT */
/* Backward of views and copies: the gradient is routed back to the input's
 * layout (reshaped, transposed, permuted back, or written into the slice a
 * narrow/select took, over zeros; an expand sums over what it broadcast). */
#include "internal.h"

static attn_status view_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn__edge *in = &node->next[0];
  attn_tensor *z = NULL, *v = NULL;
  attn_status st = ATTN_OK;
  switch ((attn__view_kind)node->iargs[0]) {
  case ATTN__VIEW_RESHAPE: return attn_reshape(g, in->ndim, in->shape, &grads[0]);
  case ATTN__VIEW_TRANSPOSE: return attn_transpose(g, (int)node->iargs[1], (int)node->iargs[2], &grads[0]);
  case ATTN__VIEW_PERMUTE: {
    int inv[ATTN_MAX_DIMS];
    for (int i = 0; i < in->ndim; i++) inv[node->iargs[1 + i]] = i;
    return attn_permute(g, inv, &grads[0]);
  }
  case ATTN__VIEW_EXPAND: return attn__sum_to_shape(g, in->ndim, in->shape, &grads[0]);
  case ATTN__VIEW_IDENTITY: grads[0] = attn_tensor_retain((attn_tensor *)g); return ATTN_OK;
  case ATTN__VIEW_SLICE: /* iargs: dim, start, end, step */
    if ((st = attn_zeros(in->ndim, in->shape, &z))) return st;
    st = attn_slice(z, (int)node->iargs[1], node->iargs[2], node->iargs[3], node->iargs[4], &v);
    break;
  case ATTN__VIEW_SELECT: /* iargs: dim, index */
    if ((st = attn_zeros(in->ndim, in->shape, &z))) return st;
    st = attn_select(z, (int)node->iargs[1], node->iargs[2], &v);
    break;
  default: return attn_set_error(ATTN_ERR_STATE, "backward: unknown view kind in %s", node->name);
  }
  if (st == ATTN_OK) st = attn_copy_(v, g);
  attn_tensor_release(v);
  if (st) {
    attn_tensor_release(z);
    return st;
  }
  grads[0] = z;
  return ATTN_OK;
}

/* This file's formulas by id: forward ops record the id (record.c) and
   the engine (autograd.c) looks the function up here. */
const attn__backward_fn attn__formulas_views[ATTN__F_COUNT] = {
    [ATTN__F_VIEW] = view_backward,
};
