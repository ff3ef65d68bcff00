/* SPDX-License-Identifier: MIT */
/* The one place where the ops of sort.c and scatter.c read index and mask
 * tensors and make index results: indices come out int64 (torch's), and
 * index/mask inputs of any dtype are read (int64 or float32 holding
 * integers for indices, checked by attn__check_index; bool, int64 or
 * float32 for masks: non-zero is set).  The float kernels themselves take
 * float32 data (attn__float_only).  Not installed. */
#ifndef ATTN_INDEX_IO_H
#define ATTN_INDEX_IO_H

#include "ops/ops.h"

/* A fresh contiguous int64 index tensor of the shape (values unset). */
static inline attn_status attn__index_new(const char *fn, int ndim, const int64_t *shape, attn_tensor **out) {
  return attn__alloc_dtype(fn, ATTN_INT64, ndim, shape, out);
}
/* Element i (row-major) of an index tensor made by attn__index_new. */
static inline void attn__index_put(attn_tensor *t, int64_t i, int64_t v) { attn_tensor_i64(t)[i] = v; }
/* Element at storage position pos of an index tensor (any strides and
   dtype; the caller walks positions and has checked the values). */
static inline int64_t attn__index_at(const attn_tensor *t, int64_t pos) { return attn__load_i64(t->storage, pos); }
/* Whether the mask element at storage position pos is set (non-zero). */
static inline bool attn__mask_at(const attn_tensor *m, int64_t pos) { return attn__load_f64(m->storage, pos) != 0.0; }
/* The float kernels' inputs: float32 only, else an error naming the dtype. */
static inline attn_status attn__float_only(const char *fn, const char *arg, const attn_tensor *t) {
  if (t->dtype == ATTN_FLOAT32) return ATTN_OK;
  if (attn_dtype_is_storage(t->dtype)) return attn_check_compute(fn, 1, arg, t);
  return attn_set_error(ATTN_ERR_ARG, "%s: %s must be a float32 tensor, got %s (convert it with :float())", fn, arg,
                        attn_dtype_name(t->dtype));
}

#endif
