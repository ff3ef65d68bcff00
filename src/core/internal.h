/* Helpers shared by the core's translation units; not installed. */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include "attn.h"

#include <stdlib.h>
#include <string.h>

#define ATTN_SHAPE_BUF 128

/* Largest element count a tensor may have: the byte size must fit in a
   signed 64-bit value and in size_t. */
#define ATTN_MAX_NUMEL ((int64_t)1 << 56)

/* numel of a shape, or -1 when a size is negative or the product
   overflows ATTN_MAX_NUMEL. */
int64_t attn__shape_numel(int ndim, const int64_t *shape);
void attn__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
/* A fresh tensor struct pointing at storage s (retained), refcount 1. */
attn_tensor *attn__tensor_new(attn_storage *s, int64_t offset, int ndim, const int64_t *shape,
                              const int64_t *stride);
/* A view of t with new geometry (shares t's storage). */
attn_status attn__make_view(const attn_tensor *t, int64_t offset, int ndim, const int64_t *shape,
                            const int64_t *stride, attn_tensor **out);
/* Uninitialised contiguous tensor; fn names the caller for messages. */
attn_status attn__alloc(const char *fn, int ndim, const int64_t *shape, attn_tensor **out);
attn_status attn__check_dim(const char *fn, const attn_tensor *t, int dim);

/* Iterates the flat row-major positions of a tensor: calls body with the
   storage offset of each element.  Dims are walked with an odometer. */
typedef struct attn__iter {
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  int64_t stride[ATTN_MAX_DIMS];
  int64_t idx[ATTN_MAX_DIMS];
  int64_t pos;
} attn__iter;

void attn__iter_init(attn__iter *it, const attn_tensor *t);
/* Advances to the next element; returns 0 when wrapped around. */
static inline int attn__iter_next(attn__iter *it) {
  for (int d = it->ndim - 1; d >= 0; d--) {
    if (++it->idx[d] < it->shape[d]) {
      it->pos += it->stride[d];
      return 1;
    }
    it->pos -= it->stride[d] * (it->shape[d] - 1);
    it->idx[d] = 0;
  }
  return 0;
}

/* Collapses a set of tensors sharing one shape (with their strides) into as
   few dims as possible: adjacent dims merge when every tensor's strides allow
   it.  Used by the elementwise kernels to get long inner loops. */
int attn__coalesce(int ndim, int64_t *shape, int ntensors, int64_t (*strides)[ATTN_MAX_DIMS]);

/* Strides of t broadcast to (ndim, shape): 0 where t is broadcast. */
void attn__broadcast_strides(const attn_tensor *t, int ndim, const int64_t *shape, int64_t *stride);

/* Checks an index tensor: integral values in [0, limit). */
attn_status attn__check_index(const char *fn, const attn_tensor *index, int64_t limit);

/* Allocation that never aborts. */
void *attn__malloc(size_t n);
void *attn__calloc(size_t n, size_t size);

/* Copies src (any strides) into dst's contiguous buffer. */
void attn__gather_contiguous(const attn_tensor *src, float *dst);

#define ATTN_SHAPE(t, buf) attn_shape_str((t)->ndim, (t)->shape, (buf), sizeof(buf))

#endif
