/* The one place where the ops of sort.c and scatter.c read index and mask
 * tensors and make index results.  Today every tensor is float32 and an
 * index is a float holding an integral 0-based value; when int64 and bool
 * tensors arrive, only these functions change.  Not installed. */
#ifndef ATTN_INDEX_IO_H
#define ATTN_INDEX_IO_H

#include "internal.h"

/* A fresh contiguous index tensor of the shape (values unset). */
static inline attn_status attn__index_new(const char *fn, int ndim, const int64_t *shape, attn_tensor **out) {
  return attn__alloc(fn, ndim, shape, out);
}
/* Element i (row-major) of an index tensor made by attn__index_new. */
static inline void attn__index_put(attn_tensor *t, int64_t i, int64_t v) { attn_tensor_data(t)[i] = (float)v; }
/* Element at storage position pos of an index tensor (any strides; the
   caller walks positions and has checked values with attn__check_index). */
static inline int64_t attn__index_at(const attn_tensor *t, int64_t pos) {
  return (int64_t)((const float *)t->storage->data)[pos];
}
/* Whether the mask element at storage position pos is set (non-zero). */
static inline bool attn__mask_at(const attn_tensor *m, int64_t pos) { return ((const float *)m->storage->data)[pos] != 0.0f; }

#endif
