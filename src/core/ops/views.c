/* SPDX-License-Identifier: MIT */
/* Copies and views: the tensor ops that share or copy storage (clone,
 * copy_, fill_, transpose, view, narrow, expand, ...).  They record
 * themselves for autograd, so they sit on the ops floor above tensor.c
 * (storage, lifetime, creation), which knows nothing of the graph. */
#include "ops/ops.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Copies                                                                    */

/* Completes a view op: records it for autograd, or undoes it on failure
   (the caller's *out is NULL again, as it was before the call). */
static attn_status rec(attn_status st, const attn_tensor *t, attn_tensor **out, const char *name, attn__view_kind kind,
                       int n, const int64_t *iargs) {
  if (st) return st;
  attn_tensor *v = *out;
  if ((st = attn__record_view(t, v, name, kind, n, iargs))) {
    *out = NULL;
    attn_tensor_release(v);
  }
  return st;
}

attn_status attn_contiguous(const attn_tensor *t, attn_tensor **out) {
  if (attn_tensor_is_contiguous(t)) {
    *out = attn_tensor_retain((attn_tensor *)t);
    return ATTN_OK;
  }
  return attn_clone(t, out);
}

attn_status attn_clone(const attn_tensor *t, attn_tensor **out) {
  attn_status st = attn__clone_raw(t, out);
  return rec(st, t, out, "CloneBackward0", ATTN__VIEW_IDENTITY, 0, NULL);
}

attn_status attn_copy_(attn_tensor *dst, const attn_tensor *src) {
  attn_status st = attn__copy_check(dst, src);
  if (st) return st;
  if (src->dtype != dst->dtype) {
    /* torch's copy_ converts to the destination's dtype */
    attn_tensor *c;
    if ((st = attn_to_dtype(src, dst->dtype, &c))) return st;
    st = attn_copy_(dst, c);
    attn_tensor_release(c);
    return st;
  }
  if (attn__ag_inplace_needed(dst, 1, &src)) {
    /* dst's new history is src broadcast to its shape; its old history
       gets a zero gradient (where with an all-true condition) */
    attn_tensor *e = NULL, *r = NULL, *one = NULL, *w = NULL;
    if ((st = attn__ag_inplace_check("copy_", dst))) return st;
    if ((st = attn_expand(src, dst->ndim, dst->shape, &e))) return st;
    st = attn_clone(e, &r);
    attn_tensor_release(e);
    if (st == ATTN_OK && attn_requires_grad(dst) && (st = attn_scalar(1.0f, &one)) == ATTN_OK) {
      st = attn_where(one, r, dst, &w);
      attn_tensor_release(one);
      attn_tensor_release(r);
      r = w;
    }
    if (st) {
      attn_tensor_release(r);
      return st;
    }
    return attn__ag_inplace_commit(dst, r);
  }
  return attn__copy_raw(dst, src);
}

attn_status attn_fill_(attn_tensor *t, float value) {
  if (attn__ag_inplace_needed(t, 0, NULL)) {
    /* recorded as a masked_fill everywhere: the old values get zero gradient */
    attn_tensor *one, *r;
    attn_status st = attn__ag_inplace_check("fill_", t);
    if (st || (st = attn_scalar(1.0f, &one))) return st;
    st = attn_masked_fill(t, one, value, &r);
    attn_tensor_release(one);
    return st ? st : attn__ag_inplace_commit(t, r);
  }
  /* an int64 or bool target refuses what it cannot hold (nan, inf, beyond
     int64), as attn_fill_f64_ and torch do */
  attn_status st = attn__check_value("fill_", t->dtype, value);
  return st ? st : attn__fill_raw(t, value);
}

attn_status attn_fill_i64_(attn_tensor *t, int64_t value) {
  if (t->dtype == ATTN_FLOAT32) return attn_fill_(t, (float)value);
  return attn__fill_raw_i64(t, value);
}

attn_status attn_fill_f64_(attn_tensor *t, double value) {
  if (t->dtype == ATTN_FLOAT32) return attn_fill_(t, (float)value);
  attn_status st = attn__check_value("fill_", t->dtype, value);
  return st ? st : attn__fill_raw_f64(t, value);
}

/* ------------------------------------------------------------------------ */
/* Views                                                                     */

attn_status attn__make_view(const attn_tensor *t, int64_t offset, int ndim, const int64_t *shape, const int64_t *stride,
                            attn_tensor **out) {
  attn_tensor *v = attn__tensor_new(t->storage, offset, ndim, shape, stride);
  if (!v) return attn__nomem("view", (int64_t)sizeof(attn_tensor));
  *out = v;
  return ATTN_OK;
}

attn_status attn_as_strided(const attn_tensor *t, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                            attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF];
  if (ndim < 0 || ndim > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "as_strided: %d dims, at most %d supported", ndim, ATTN_MAX_DIMS);
  int64_t numel = attn__shape_numel(ndim, shape);
  if (numel < 0)
    return attn_set_error(ATTN_ERR_ARG, "as_strided: invalid shape %s", attn_shape_str(ndim, shape, sa, sizeof sa));
  if (offset < 0) return attn_set_error(ATTN_ERR_INDEX, "as_strided: negative offset %lld", (long long)offset);
  int64_t last = offset;
  for (int i = 0; i < ndim && numel; i++) {
    if (stride[i] < 0) return attn_set_error(ATTN_ERR_ARG, "as_strided: negative stride");
    if (shape[i] > 1 && stride[i] > (ATTN_MAX_NUMEL - last) / (shape[i] - 1))
      return attn_set_error(ATTN_ERR_INDEX, "as_strided: view %s reaches past the storage",
                            attn_shape_str(ndim, shape, sa, sizeof sa));
    last += (shape[i] - 1) * stride[i];
  }
  if (attn__ag_needed(1, &t))
    return attn_set_error(ATTN_ERR_STATE, "as_strided: not differentiable; use select/narrow/view instead");
  if (numel && last >= t->storage->numel)
    return attn_set_error(ATTN_ERR_INDEX, "as_strided: view %s reaches element %lld of a storage of %lld",
                          attn_shape_str(ndim, shape, sa, sizeof sa), (long long)last, (long long)t->storage->numel);
  return attn__make_view(t, offset, ndim, shape, stride, out);
}

attn_status attn_transpose(const attn_tensor *t, int d0, int d1, attn_tensor **out) {
  attn_status st;
  if ((st = attn__check_dim("transpose", t, d0)) || (st = attn__check_dim("transpose", t, d1))) return st;
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(stride, t->stride, sizeof stride);
  shape[d0] = t->shape[d1];
  shape[d1] = t->shape[d0];
  stride[d0] = t->stride[d1];
  stride[d1] = t->stride[d0];
  const int64_t args[2] = {d0, d1};
  return rec(attn__make_view(t, t->offset, t->ndim, shape, stride, out), t, out, "TransposeBackward0",
             ATTN__VIEW_TRANSPOSE, 2, args);
}

attn_status attn_t(const attn_tensor *t, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  if (t->ndim > 2)
    return attn_set_error(ATTN_ERR_SHAPE, "t: expects a tensor with <= 2 dims, got %s (use transpose)",
                          ATTN_SHAPE(t, sb));
  if (t->ndim < 2)
    return rec(attn__make_view(t, t->offset, t->ndim, t->shape, t->stride, out), t, out, "TBackward0",
               ATTN__VIEW_RESHAPE, 0, NULL);
  /* transpose(0, 1) recorded under torch's name for t() */
  const int64_t shape[2] = {t->shape[1], t->shape[0]}, stride[2] = {t->stride[1], t->stride[0]};
  const int64_t args[2] = {0, 1};
  return rec(attn__make_view(t, t->offset, 2, shape, stride, out), t, out, "TBackward0", ATTN__VIEW_TRANSPOSE, 2, args);
}

attn_status attn_permute(const attn_tensor *t, const int *dims, attn_tensor **out) {
  int seen[ATTN_MAX_DIMS] = {0};
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) {
    int d = dims[i];
    if (d < 0 || d >= t->ndim)
      return attn_set_error(ATTN_ERR_INDEX, "permute: dim %d out of range for a %d-d tensor", d, t->ndim);
    if (seen[d]++) return attn_set_error(ATTN_ERR_ARG, "permute: dim %d repeated", d);
    shape[i] = t->shape[d];
    stride[i] = t->stride[d];
  }
  int64_t args[ATTN_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) args[i] = dims[i];
  return rec(attn__make_view(t, t->offset, t->ndim, shape, stride, out), t, out, "PermuteBackward0", ATTN__VIEW_PERMUTE,
             t->ndim, args);
}

/* Resolves a requested shape (with at most one -1) against numel. */
static attn_status infer_shape(const char *fn, const attn_tensor *t, int ndim, const int64_t *req, int64_t *shape) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (ndim < 0 || ndim > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "%s: %d dims requested, at most %d supported", fn, ndim, ATTN_MAX_DIMS);
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ndim; i++) {
    shape[i] = req[i];
    if (req[i] == -1) {
      if (infer >= 0) return attn_set_error(ATTN_ERR_ARG, "%s: only one dimension can be inferred", fn);
      infer = i;
    } else if (req[i] < 0) {
      return attn_set_error(ATTN_ERR_ARG, "%s: invalid size %lld in shape %s", fn, (long long)req[i],
                            attn_shape_str(ndim, req, sa, sizeof sa));
    } else {
      if (req[i] != 0 && known > ATTN_MAX_NUMEL / req[i])
        return attn_set_error(ATTN_ERR_SHAPE, "%s: shape %s is invalid for input of size %lld", fn,
                              attn_shape_str(ndim, req, sa, sizeof sa), (long long)attn_tensor_numel(t));
      known *= req[i];
    }
  }
  int64_t numel = attn_tensor_numel(t);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return attn_set_error(ATTN_ERR_SHAPE, "%s: shape %s is invalid for input of size %lld", fn,
                            attn_shape_str(ndim, req, sa, sizeof sa), (long long)numel);
    shape[infer] = numel / known;
  } else if (known != numel) {
    return attn_set_error(ATTN_ERR_SHAPE, "%s: shape %s is invalid for input of size %lld (input %s)", fn,
                          attn_shape_str(ndim, req, sa, sizeof sa), (long long)numel, ATTN_SHAPE(t, sb));
  }
  /* an empty input takes any sizes beside its 0; they must still fit */
  if (attn__shape_numel(ndim, shape) < 0)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: shape %s has too many elements", fn,
                          attn_shape_str(ndim, shape, sa, sizeof sa));
  return ATTN_OK;
}

/* Strides for viewing t as shape without copying, following torch's
   computeStride: groups of input dims that are contiguous among
   themselves map onto groups of output dims.  Returns false if impossible. */
static bool view_strides(const attn_tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
  int64_t numel = attn_tensor_numel(t);
  if (numel == 0) {
    attn__contiguous_strides(ndim, shape, stride);
    return true;
  }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = t->ndim ? t->stride[t->ndim - 1] : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int td = t->ndim - 1; td >= 0; td--) {
    tensor_numel *= t->shape[td];
    if (td == 0 || (t->shape[td - 1] != 1 && t->stride[td - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        stride[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (td > 0) {
        chunk_base_stride = t->stride[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return false;
  return true;
}

attn_status attn_view(const attn_tensor *t, int ndim, const int64_t *req, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  attn_status st = infer_shape("view", t, ndim, req, shape);
  if (st) return st;
  if (!view_strides(t, ndim, shape, stride))
    return attn_set_error(ATTN_ERR_SHAPE,
                          "view: cannot view a non-contiguous %s tensor as %s (use reshape or contiguous)",
                          ATTN_SHAPE(t, sb), attn_shape_str(ndim, shape, sa, sizeof sa));
  return rec(attn__make_view(t, t->offset, ndim, shape, stride, out), t, out, "ViewBackward0", ATTN__VIEW_RESHAPE, 0,
             NULL);
}

attn_status attn_reshape(const attn_tensor *t, int ndim, const int64_t *req, attn_tensor **out) {
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  attn_status st = infer_shape("reshape", t, ndim, req, shape);
  if (st) return st;
  if (view_strides(t, ndim, shape, stride))
    return rec(attn__make_view(t, t->offset, ndim, shape, stride, out), t, out, "ViewBackward0", ATTN__VIEW_RESHAPE, 0,
               NULL);
  attn_tensor *c;
  st = attn_clone(t, &c);
  if (st) return st;
  attn__contiguous_strides(ndim, shape, stride);
  st = rec(attn__make_view(c, c->offset, ndim, shape, stride, out), c, out, "UnsafeViewBackward0", ATTN__VIEW_RESHAPE,
           0, NULL);
  attn_tensor_release(c);
  return st;
}

attn_status attn_narrow(const attn_tensor *t, int dim, int64_t start, int64_t length, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  attn_status st = attn__check_dim("narrow", t, dim);
  if (st) return st;
  if (start < 0 || length < 0 || start > t->shape[dim] || length > t->shape[dim] - start)
    return attn_set_error(ATTN_ERR_INDEX, "narrow: start %lld + length %lld exceeds dim %d of size %lld (tensor %s)",
                          (long long)start, (long long)length, dim, (long long)t->shape[dim], ATTN_SHAPE(t, sb));
  int64_t shape[ATTN_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = length;
  const int64_t args[4] = {dim, start, start + length, 1};
  return rec(attn__make_view(t, t->offset + (length ? start * t->stride[dim] : 0), t->ndim, shape, t->stride, out), t,
             out, "SliceBackward0", ATTN__VIEW_SLICE, 4, args);
}

attn_status attn_slice(const attn_tensor *t, int dim, int64_t start, int64_t end, int64_t step, attn_tensor **out) {
  attn_status st = attn__check_dim("slice", t, dim);
  if (st) return st;
  if (step <= 0) return attn_set_error(ATTN_ERR_ARG, "slice: step must be positive (got %lld)", (long long)step);
  if (start < 0) start = 0;
  if (end > t->shape[dim]) end = t->shape[dim];
  if (end < start) end = start;
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(stride, t->stride, sizeof stride);
  /* written so that a huge step cannot overflow; one element needs no stride */
  shape[dim] = end > start ? (end - start - 1) / step + 1 : 0;
  stride[dim] = shape[dim] > 1 ? t->stride[dim] * step : t->stride[dim];
  const int64_t args[4] = {dim, start, end, step};
  return rec(attn__make_view(t, t->offset + (shape[dim] ? start * t->stride[dim] : 0), t->ndim, shape, stride, out), t,
             out, "SliceBackward0", ATTN__VIEW_SLICE, 4, args);
}

attn_status attn_select(const attn_tensor *t, int dim, int64_t index, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  attn_status st = attn__check_dim("select", t, dim);
  if (st) return st;
  if (index < 0 || index >= t->shape[dim])
    return attn_set_error(ATTN_ERR_INDEX, "select: index %lld out of range for dim %d of size %lld (tensor %s)",
                          (long long)index, dim, (long long)t->shape[dim], ATTN_SHAPE(t, sb));
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (i == dim) continue;
    shape[n] = t->shape[i];
    stride[n++] = t->stride[i];
  }
  const int64_t args[2] = {dim, index};
  return rec(attn__make_view(t, t->offset + index * t->stride[dim], n, shape, stride, out), t, out, "SelectBackward0",
             ATTN__VIEW_SELECT, 2, args);
}

attn_status attn_unsqueeze(const attn_tensor *t, int dim, attn_tensor **out) {
  if (dim < 0 || dim > t->ndim)
    return attn_set_error(ATTN_ERR_INDEX, "unsqueeze: dim %d out of range for a %d-d tensor", dim, t->ndim);
  if (t->ndim >= ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "unsqueeze: tensor already has %d dims", ATTN_MAX_DIMS);
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  int n = 0;
  for (int i = 0; i <= t->ndim; i++) {
    if (i == dim) {
      shape[n] = 1;
      stride[n++] = i < t->ndim ? t->shape[i] * t->stride[i] : 1;
    }
    if (i < t->ndim) {
      shape[n] = t->shape[i];
      stride[n++] = t->stride[i];
    }
  }
  return rec(attn__make_view(t, t->offset, n, shape, stride, out), t, out, "UnsqueezeBackward0", ATTN__VIEW_RESHAPE, 0,
             NULL);
}

attn_status attn_squeeze(const attn_tensor *t, int dim, attn_tensor **out) {
  if (dim >= t->ndim) return attn__check_dim("squeeze", t, dim);
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++) {
    bool drop = t->shape[i] == 1 && (dim < 0 || dim == i);
    if (drop) continue;
    shape[n] = t->shape[i];
    stride[n++] = t->stride[i];
  }
  return rec(attn__make_view(t, t->offset, n, shape, stride, out), t, out,
             dim < 0 ? "SqueezeBackward0" : "SqueezeBackward1", ATTN__VIEW_RESHAPE, 0, NULL);
}

attn_status attn_expand(const attn_tensor *t, int ndim, const int64_t *req, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (ndim < t->ndim || ndim > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_SHAPE, "expand: cannot expand %s to %d dims", ATTN_SHAPE(t, sb), ndim);
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  int off = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int td = d - off;
    int64_t want = req[d];
    if (td < 0) {
      if (want < 0)
        return attn_set_error(ATTN_ERR_ARG, "expand: -1 not allowed for new leading dim %d of %s", d,
                              attn_shape_str(ndim, req, sa, sizeof sa));
      shape[d] = want;
      stride[d] = 0;
    } else if (want == -1 || want == t->shape[td]) {
      shape[d] = t->shape[td];
      stride[d] = t->stride[td];
    } else if (t->shape[td] == 1 && want >= 0) {
      shape[d] = want;
      stride[d] = 0;
    } else {
      return attn_set_error(ATTN_ERR_SHAPE, "expand: cannot expand %s to %s (size %lld at dim %d is not 1)",
                            ATTN_SHAPE(t, sb), attn_shape_str(ndim, req, sa, sizeof sa), (long long)t->shape[td], d);
    }
  }
  if (attn__shape_numel(ndim, shape) < 0)
    return attn_set_error(ATTN_ERR_NOMEM, "expand: shape %s has too many elements",
                          attn_shape_str(ndim, shape, sa, sizeof sa));
  return rec(attn__make_view(t, t->offset, ndim, shape, stride, out), t, out, "ExpandBackward0", ATTN__VIEW_EXPAND, 0,
             NULL);
}

attn_status attn_flatten(const attn_tensor *t, int start, int end, attn_tensor **out) {
  if (t->ndim == 0) {
    int64_t one = 1;
    return attn_reshape(t, 1, &one, out);
  }
  attn_status st;
  if ((st = attn__check_dim("flatten", t, start)) || (st = attn__check_dim("flatten", t, end))) return st;
  if (start > end) return attn_set_error(ATTN_ERR_ARG, "flatten: start dim %d comes after end dim %d", start, end);
  int64_t shape[ATTN_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < start; i++) shape[n++] = t->shape[i];
  int64_t m = 1;
  for (int i = start; i <= end; i++) m *= t->shape[i];
  shape[n++] = m;
  for (int i = end + 1; i < t->ndim; i++) shape[n++] = t->shape[i];
  return attn_reshape(t, n, shape, out);
}
