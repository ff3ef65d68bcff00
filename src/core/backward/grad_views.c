/* SPDX-License-Identifier: MIT */
/* Backward of views and copies: the gradient is routed back to the input's
 * layout (reshaped, transposed, permuted back, or written into the slice a
 * narrow/select took, over zeros; an expand sums over what it broadcast). */
#include "backward/backward.h"

attn_status attn__view_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
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
  case ATTN__VIEW_SELECT: /* iargs: dim, index */ {
    /* Where the input's gradient already has a sum to add to (the other
       chunks of a split, a .grad), g goes into its slice of that sum: no
       full-size zeros and no full-size add per piece. */
    attn_tensor *into = attn__grad_into(node, 0);
    if (into)
      z = attn_tensor_retain(into);
    else if ((st = attn_zeros(in->ndim, in->shape, &z)))
      return st;
    st = node->iargs[0] == ATTN__VIEW_SLICE
             ? attn_slice(z, (int)node->iargs[1], node->iargs[2], node->iargs[3], node->iargs[4], &v)
             : attn_select(z, (int)node->iargs[1], node->iargs[2], &v);
    if (st == ATTN_OK) st = into ? attn_binary_(ATTN_ADD, v, g) : attn_copy_(v, g);
    attn_tensor_release(v);
    if (into)
      attn__grad_give(node, 0, z, st == ATTN_OK, grads);
    else if (st == ATTN_OK)
      grads[0] = z;
    else
      attn_tensor_release(z);
    return st;
  }
  default: return attn_set_error(ATTN_ERR_STATE, "backward: unknown view kind in %s", node->name);
  }
}
