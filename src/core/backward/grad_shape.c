/* SPDX-License-Identifier: MIT */
/* Backward of the shape operations (torch 1.13's formulas): tril/triu,
 * cat/stack, index_select/gather, repeat and flip.  split/chunk pieces are
 * narrow views recorded by shape_ops.c through attn__record_view.
 * iargs hold the op parameters; the inputs' shapes are on the edges. */
#include "backward/backward.h"

#define TRY(expr)                                                                                                      \
  do {                                                                                                                 \
    if ((st = (expr))) goto out;                                                                                       \
  } while (0)

/* ------------------------------------------------------------------------ */
/* tril / triu: the same triangle of the gradient.  iargs: [0] k, [1] lower */

attn_status attn__triangle_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  return node->iargs[1] ? attn_tril(g, node->iargs[0], &grads[0]) : attn_triu(g, node->iargs[0], &grads[0]);
}

/* ------------------------------------------------------------------------ */
/* cat: input i gets g.narrow(dim, offset_i, n_i).  Inputs of shape [0]
   that cat skipped get an empty [0] gradient.  iargs: [0] dim */

static bool skipped(const attn__edge *e) { return e->ndim == 1 && e->shape[0] == 0; }

attn_status attn__cat_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  int dim = (int)node->iargs[0];
  int64_t at = 0;
  for (int i = 0; i < node->n_next; i++) {
    const attn__edge *e = &node->next[i];
    attn_status st = ATTN_OK;
    if (skipped(e)) {
      if (e->node) st = attn_zeros(1, e->shape, &grads[i]);
    } else {
      if (e->node) st = attn_narrow(g, dim, at, e->shape[dim], &grads[i]);
      at += e->shape[dim];
    }
    if (st) return st;
  }
  return ATTN_OK;
}

/* stack: input i gets g.select(dim, i).  iargs: [0] dim */
attn_status attn__stack_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  for (int i = 0; i < node->n_next; i++) {
    if (!node->next[i].node) continue;
    attn_status st = attn_select(g, (int)node->iargs[0], i, &grads[i]);
    if (st) return st;
  }
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* index_select / gather: scatter-adds of g into zeros of the input's shape */

/* x [A, m, B] (A, B: the dims before and after dim flattened), index [k],
   g [A, k, B]: gi[a, index[j], b] += g[a, j, b] (index_add).
   saved[0]: index; iargs: [0] dim */
attn_status attn__index_select_backward(attn_node *node, const attn_tensor *g_in, attn_tensor **grads) {
  const attn__edge *in = &node->next[0];
  const attn_tensor *index = node->saved[0];
  int dim = (int)node->iargs[0];
  attn_tensor *g = NULL, *r = NULL;
  attn_status st;
  TRY(attn_contiguous(g_in, &g));
  TRY(attn_zeros(in->ndim, in->shape, &r));
  int64_t A = 1, B = 1, m = in->shape[dim], k = attn_tensor_numel(index);
  for (int d = 0; d < dim; d++) A *= in->shape[d];
  for (int d = dim + 1; d < in->ndim; d++) B *= in->shape[d];
  const float *gp = attn_tensor_data(g);
  float *rp = attn_tensor_data(r);
  for (int64_t j = 0; j < k; j++) {
    int64_t v = attn_tensor_get_flat_i64(index, j);
    for (int64_t a = 0; a < A; a++) {
      float *dst = rp + (a * m + v) * B;
      const float *src = gp + (a * k + j) * B;
      for (int64_t b = 0; b < B; b++) dst[b] += src[b];
    }
  }
  grads[0] = r;
  r = NULL;
out:
  attn_tensor_release(g);
  attn_tensor_release(r);
  return st;
}

/* index and g share a shape; gi (x's shape, contiguous) at position p with
   p_dim replaced by index[p] += g[p] (scatter_add).
   saved[0]: index; iargs: [0] dim */
attn_status attn__gather_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn__edge *in = &node->next[0];
  const attn_tensor *index = node->saved[0];
  int dim = (int)node->iargs[0];
  attn_tensor *r;
  attn_status st = attn_zeros(in->ndim, in->shape, &r);
  if (st) return st;
  int nd = index->ndim;
  if (attn_tensor_numel(index) > 0) {
    int64_t rstride[ATTN_MAX_DIMS];
    memcpy(rstride, r->stride, sizeof rstride);
    const int64_t dstride = rstride[dim];
    rstride[dim] = 0;
    const attn_storage *ist = index->storage;
    const float *gb = g->storage->data;
    float *rp = attn_tensor_data(r);
    int64_t idx[ATTN_MAX_DIMS] = {0}, ipos = index->offset, gpos = g->offset, rpos = 0;
    const int64_t inner = index->shape[nd - 1], is = index->stride[nd - 1], gs = g->stride[nd - 1],
                  rs = rstride[nd - 1];
    for (;;) {
      for (int64_t i = 0; i < inner; i++)
        rp[rpos + i * rs + attn__load_i64(ist, ipos + i * is) * dstride] += gb[gpos + i * gs];
      int k = nd - 2;
      for (; k >= 0; k--) {
        if (++idx[k] < index->shape[k]) {
          ipos += index->stride[k];
          gpos += g->stride[k];
          rpos += rstride[k];
          break;
        }
        ipos -= index->stride[k] * (index->shape[k] - 1);
        gpos -= g->stride[k] * (index->shape[k] - 1);
        rpos -= rstride[k] * (index->shape[k] - 1);
        idx[k] = 0;
      }
      if (k < 0) break;
    }
  }
  grads[0] = r;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* repeat: the input, padded on the left with 1s to p [nreps dims], was
   tiled reps times; g [p_d * reps_d] is summed over the tiles back into p
   (double accumulators), which has the input's row-major layout.
   iargs: [0] nreps, [1..nreps] reps (kept for inspection; the shapes
   say it all) */

attn_status attn__repeat_backward(attn_node *node, const attn_tensor *g_in, attn_tensor **grads) {
  const attn__edge *in = &node->next[0];
  const int nreps = (int)node->iargs[0];
  if (nreps == 0) { /* a 0-d input repeated by an empty list: itself */
    grads[0] = attn_tensor_retain((attn_tensor *)g_in);
    return ATTN_OK;
  }
  const int lead = nreps - in->ndim;
  int64_t p[ATTN_MAX_DIMS], ps[ATTN_MAX_DIMS];
  for (int d = 0; d < nreps; d++) p[d] = d < lead ? 1 : in->shape[d - lead];
  attn__contiguous_strides(nreps, p, ps);
  attn_tensor *g = NULL, *r = NULL;
  double *acc = NULL;
  size_t acc_bytes = 0;
  attn_status st;
  TRY(attn_contiguous(g_in, &g));
  TRY(attn__alloc("repeat backward", in->ndim, in->shape, &r));
  const int64_t n = attn_tensor_numel(r), gn = attn_tensor_numel(g);
  acc_bytes = (size_t)(n ? n : 1) * sizeof *acc;
  acc = attn__scratch_alloc(acc_bytes);
  if (!acc) {
    st = attn__nomem("repeat backward", (int64_t)acc_bytes);
    goto out;
  }
  memset(acc, 0, acc_bytes);
  if (gn > 0) {
    /* odometer over g: tile[d] = i_d mod p_d, pos = the element of p */
    const float *gp = attn_tensor_data(g);
    int64_t idx[ATTN_MAX_DIMS] = {0}, tile[ATTN_MAX_DIMS] = {0}, pos = 0;
    const int64_t inner = g->shape[nreps - 1], pin = p[nreps - 1];
    for (int64_t at = 0; at < gn; at += inner) {
      const float *row = gp + at;
      for (int64_t i = 0, t = 0; i < inner; i++) {
        acc[pos + t] += row[i];
        if (++t == pin) t = 0;
      }
      int k = nreps - 2;
      for (; k >= 0; k--) {
        pos -= tile[k] * ps[k];
        if (++tile[k] == p[k]) tile[k] = 0;
        pos += tile[k] * ps[k];
        if (++idx[k] < g->shape[k]) break;
        idx[k] = 0;
      }
      if (k < 0) break;
    }
  }
  float *rp = attn_tensor_data(r);
  for (int64_t i = 0; i < n; i++) rp[i] = (float)acc[i];
  grads[0] = r;
  r = NULL;
out:
  attn__scratch_free(acc, acc_bytes);
  attn_tensor_release(g);
  attn_tensor_release(r);
  return st;
}

/* ------------------------------------------------------------------------ */
/* flip: the gradient flipped back.  iargs: [0] ndims, [1..] dims */

attn_status attn__flip_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  int dims[ATTN_MAX_DIMS];
  int nd = (int)node->iargs[0];
  for (int i = 0; i < nd; i++) dims[i] = (int)node->iargs[1 + i];
  return attn_flip(g, nd, dims, &grads[0]);
}
