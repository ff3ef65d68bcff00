/* SPDX-License-Identifier: MIT */
/* Embedding lookup and its backward (a scatter-add of rows).
 * Shapes: weight [V, D], ids [...] (0-based) -> out [..., D]. */
#include "ops/ops.h"

/* Copies weight rows ids[i] into out rows i. */
static void gather_rows(const attn_tensor *w, const int64_t *ids, int64_t n, float *out) {
  const int64_t d = w->shape[1], rs = w->stride[0], cs = w->stride[1];
  const float *base = attn_tensor_data(w);
  for (int64_t i = 0; i < n; i++) {
    const float *row = base + ids[i] * rs;
    if (cs == 1)
      memcpy(out + i * d, row, (size_t)d * sizeof(float));
    else
      for (int64_t j = 0; j < d; j++) out[i * d + j] = row[j * cs];
  }
}

/* grad_w [V, D] += rows of g [n, D] at ids, skipping padding_idx */
attn_status attn__embedding_backward(attn_node *node, const attn_tensor *g_in, attn_tensor **grads) {
  const attn_tensor *ids = node->saved[0];
  const int64_t pad = node->iargs[0];
  const attn__edge *w = &node->next[0];
  attn_tensor *gw, *g;
  attn_status st = attn_zeros(w->ndim, w->shape, &gw);
  if (st) return st;
  if ((st = attn_contiguous(g_in, &g))) {
    attn_tensor_release(gw);
    return st;
  }
  const int64_t n = attn_tensor_numel(ids), d = w->shape[1];
  const int64_t *id = attn_tensor_i64(ids);
  const float *src = attn_tensor_data(g);
  float *dst = attn_tensor_data(gw);
  for (int64_t i = 0; i < n; i++) {
    const int64_t r = id[i];
    if (r == pad) continue;
    float *row = dst + r * d;
    const float *gr = src + i * d;
    for (int64_t j = 0; j < d; j++) row[j] += gr[j];
  }
  attn_tensor_release(g);
  grads[0] = gw;
  return ATTN_OK;
}

attn_status attn_embedding(const attn_tensor *weight, const attn_tensor *ids, int64_t padding_idx, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  if (weight->ndim != 2)
    return attn_set_error(ATTN_ERR_SHAPE, "embedding: weight must be 2-d [num_embeddings, dim], got %s",
                          ATTN_SHAPE(weight, sb));
  if (ids->ndim >= ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_SHAPE, "embedding: ids %s have too many dims", ATTN_SHAPE(ids, sb));
  if (padding_idx >= weight->shape[0])
    return attn_set_error(ATTN_ERR_INDEX, "embedding: padding_idx %lld out of range for %lld embeddings",
                          (long long)padding_idx, (long long)weight->shape[0]);
  attn_status st = attn_check_float("embedding", "weight", weight);
  if (st) return st;
  if ((st = attn__check_index("embedding", ids, weight->shape[0]))) return st;
  attn_tensor *idc, *ids64;
  /* int64 rows (float ids converted once they are known to be integers) */
  if ((st = attn_to_dtype(ids, ATTN_INT64, &ids64))) return st;
  st = attn_contiguous(ids64, &idc);
  attn_tensor_release(ids64);
  if (st) return st;
  int64_t shape[ATTN_MAX_DIMS];
  for (int i = 0; i < ids->ndim; i++) shape[i] = ids->shape[i];
  shape[ids->ndim] = weight->shape[1];
  attn_tensor *o;
  if ((st = attn__alloc("embedding", ids->ndim + 1, shape, &o))) {
    attn_tensor_release(idc);
    return st;
  }
  gather_rows(weight, attn_tensor_i64(idc), attn_tensor_numel(idc), attn_tensor_data(o));
  if (attn__ag_needed(1, &weight)) {
    attn_node *n;
    const attn_tensor *saved[1] = {idc};
    if ((st = attn__ag_record(o, "EmbeddingBackward0", ATTN__F_EMBEDDING, 1, &weight, 1, saved, &n))) {
      attn_tensor_release(o);
      attn_tensor_release(idc);
      return st;
    }
    n->iargs[0] = padding_idx;
  }
  attn_tensor_release(idc);
  *out = o;
  return ATTN_OK;
}
