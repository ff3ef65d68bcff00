/* SPDX-License-Identifier: MIT */
/* Shape operations: tril/triu, cat/stack, index_select/gather,
 * split/chunk (views), repeat and flip.
 *
 * Everything that moves values goes through copy_strided(), which collapses
 * the dims both sides lay out alike so that contiguous runs become a single
 * memcpy (rows of cat/stack/index_select/repeat), and only truly strided
 * data is copied element by element.  All checks run before anything is
 * allocated, so a failing call has no output and nothing to free.
 * Under autograd each result records its node last (grad_shape.c); split
 * and chunk pieces are recorded as slice views. */
#include "ops/ops.h"

#include <limits.h>
#include <math.h>

/* dst[i] = src[i] for every index i of shape (ndim dims).  dst and src are
   base pointers with their own strides; src strides may be negative (flip).
   The regions must not overlap. */
static void copy_strided_bytes(int ndim, const int64_t *shape_in, char *dst, const int64_t *dstride, const char *src,
                               const int64_t *sstride, size_t es);

static void copy_strided_f32(int ndim, const int64_t *shape_in, float *dst, const int64_t *dstride, const float *src,
                             const int64_t *sstride) {
  int64_t shape[ATTN_MAX_DIMS], st[2][ATTN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) {
    if (shape_in[d] == 0) return;
    shape[d] = shape_in[d];
    st[0][d] = dstride[d];
    st[1][d] = sstride[d];
  }
  if (ndim == 0) {
    dst[0] = src[0];
    return;
  }
  int nd = attn__coalesce(ndim, shape, 2, st);
  int64_t inner = shape[nd - 1], ds = st[0][nd - 1], ss = st[1][nd - 1];
  int64_t idx[ATTN_MAX_DIMS] = {0}, pos[2] = {0, 0};
  for (;;) {
    if (ds == 1 && ss == 1) {
      memcpy(dst + pos[0], src + pos[1], (size_t)inner * sizeof(float));
    } else {
      float *d = dst + pos[0];
      const float *s = src + pos[1];
      for (int64_t i = 0; i < inner; i++) d[i * ds] = s[i * ss];
    }
    if (!attn__next_row(nd, shape, 2, st, idx, pos)) break;
  }
}

/* The same for elements of es bytes (dst and src point at elements). */
static void copy_strided_bytes(int ndim, const int64_t *shape_in, char *dst, const int64_t *dstride, const char *src,
                               const int64_t *sstride, size_t es) {
  int64_t shape[ATTN_MAX_DIMS], st[2][ATTN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) {
    if (shape_in[d] == 0) return;
    shape[d] = shape_in[d];
    st[0][d] = dstride[d];
    st[1][d] = sstride[d];
  }
  if (ndim == 0) {
    memcpy(dst, src, es);
    return;
  }
  int nd = attn__coalesce(ndim, shape, 2, st);
  int64_t inner = shape[nd - 1], ds = st[0][nd - 1], ss = st[1][nd - 1];
  int64_t idx[ATTN_MAX_DIMS] = {0}, pos[2] = {0, 0};
  for (;;) {
    if (ds == 1 && ss == 1) {
      memcpy(dst + pos[0] * (int64_t)es, src + pos[1] * (int64_t)es, (size_t)inner * es);
    } else {
      for (int64_t i = 0; i < inner; i++)
        memcpy(dst + (pos[0] + i * ds) * (int64_t)es, src + (pos[1] + i * ss) * (int64_t)es, es);
    }
    if (!attn__next_row(nd, shape, 2, st, idx, pos)) break;
  }
}

/* dst and src: element pointers of tensors of dtype dt. */
static void copy_strided(attn_dtype dt, int ndim, const int64_t *shape, void *dst, const int64_t *dstride,
                         const void *src, const int64_t *sstride) {
  if (dt == ATTN_FLOAT32)
    copy_strided_f32(ndim, shape, dst, dstride, src, sstride);
  else
    copy_strided_bytes(ndim, shape, dst, dstride, src, sstride, attn_dtype_size(dt));
}

/* Element i of a typed base pointer. */
static inline void *elem(void *base, attn_dtype dt, int64_t i) {
  return (char *)base + i * (int64_t)attn_dtype_size(dt);
}
static inline const void *celem(const void *base, attn_dtype dt, int64_t i) {
  return (const char *)base + i * (int64_t)attn_dtype_size(dt);
}

/* shape/stride of t without dim `dim` (the geometry of t.select(dim, i)). */
static void drop_dim(const attn_tensor *t, int dim, int64_t *shape, int64_t *stride) {
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (d == dim) continue;
    shape[n] = t->shape[d];
    stride[n++] = t->stride[d];
  }
}

/* Hands o out once its recording (st) succeeded; drops it otherwise. */
static attn_status finish(attn_status st, attn_tensor *o, attn_tensor **out) {
  if (st) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* tril / triu                                                               */

/* t: [..., r, c] -> out: [..., r, c]; each r x c matrix keeps the elements
   with col - row <= k (tril) or col - row >= k (triu), zeros elsewhere. */
static attn_status triangle(const char *fn, const attn_tensor *t, int64_t k, bool lower, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  if (t->ndim < 2)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: expects a tensor with at least 2 dims, got %s", fn, ATTN_SHAPE(t, sb));
  attn_tensor *o;
  attn_status st = attn__alloc_dtype(fn, t->dtype, t->ndim, t->shape, &o);
  if (st) return st;
  const int64_t diagonal = k; /* k is clamped below */
  char *p = attn_tensor_ptr(o);
  const int64_t es = (int64_t)attn_dtype_size(t->dtype);
  if (!attn__gather_contiguous(t, p)) {
    attn_tensor_release(o);
    return attn__limit_error(fn);
  }
  int64_t r = t->shape[t->ndim - 2], c = t->shape[t->ndim - 1];
  int64_t numel = attn_tensor_numel(t);
  if (numel > 0) {
    /* Beyond these bounds k changes nothing; clamping keeps i + k from overflowing. */
    if (k > c + 1) k = c + 1;
    if (k < -r - 1) k = -r - 1;
    int64_t nmat = numel / (r * c);
    for (int64_t m = 0; m < nmat; m++) {
      char *mat = p + m * r * c * es;
      for (int64_t i = 0; i < r; i++) {
        char *row = mat + i * c * es;
        /* zero columns [lo, hi) of this row */
        int64_t lo = lower ? i + k + 1 : 0, hi = lower ? c : i + k;
        if (lo < 0) lo = 0;
        if (hi > c) hi = c;
        if (hi > lo) memset(row + lo * es, 0, (size_t)((hi - lo) * es));
      }
    }
  }
  return finish(attn__record_triangle(t, diagonal, lower, o), o, out);
}

attn_status attn_tril(const attn_tensor *t, int64_t diagonal, attn_tensor **out) {
  return triangle("tril", t, diagonal, true, out);
}

attn_status attn_triu(const attn_tensor *t, int64_t diagonal, attn_tensor **out) {
  return triangle("triu", t, diagonal, false, out);
}

/* ------------------------------------------------------------------------ */
/* cat / stack                                                               */

/* torch's legacy rule: 1-d tensors of shape [0] are left out of cat. */
static bool cat_skipped(const attn_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

/* ts[i]: [A..., n_i, B...] (n_i at dim) -> out: [A..., sum n_i, B...].
   Inputs of shape [0] are skipped; if all are, out is [0]. */
/* Inputs of mixed dtypes are converted to their promoted dtype (torch). */
static attn_status promote_list(const char *fn, int n, const attn_tensor *const *ts, attn_dtype *dt,
                                attn_tensor ***conv) {
  *conv = NULL;
  *dt = n > 0 && ts[0] ? ts[0]->dtype : ATTN_FLOAT32;
  bool mixed = false;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) return ATTN_OK; /* reported by the caller */
    if (ts[i]->dtype != *dt) mixed = true;
    *dt = attn_promote_types(*dt, ts[i]->dtype);
  }
  if (!mixed) return ATTN_OK;
  attn_tensor **c = attn__calloc((size_t)n, sizeof *c);
  if (!c) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  for (int i = 0; i < n; i++) {
    attn_status st = attn_to_dtype(ts[i], *dt, &c[i]);
    if (st) {
      for (int j = 0; j < i; j++) attn_tensor_release(c[j]);
      free(c);
      return st;
    }
  }
  *conv = c;
  return ATTN_OK;
}

static void free_list(int n, attn_tensor **c) {
  if (!c) return;
  for (int i = 0; i < n; i++) attn_tensor_release(c[i]);
  free(c);
}

static attn_status cat_same(int n, const attn_tensor *const *ts, int dim, attn_tensor **out);
static attn_status stack_same(int n, const attn_tensor *const *ts, int dim, attn_tensor **out);

attn_status attn_cat(int n, const attn_tensor *const *ts, int dim, attn_tensor **out) {
  if (n <= 0 || !ts) return attn_set_error(ATTN_ERR_ARG, "cat: expected a non-empty list of tensors");
  attn_dtype dt;
  attn_tensor **c;
  attn_status st = promote_list("cat", n, ts, &dt, &c);
  if (st) return st;
  st = cat_same(n, c ? (const attn_tensor *const *)c : ts, dim, out);
  free_list(n, c);
  return st;
}

attn_status attn_stack(int n, const attn_tensor *const *ts, int dim, attn_tensor **out) {
  if (n <= 0 || !ts) return attn_set_error(ATTN_ERR_ARG, "stack: expected a non-empty list of tensors");
  attn_dtype dt;
  attn_tensor **c;
  attn_status st = promote_list("stack", n, ts, &dt, &c);
  if (st) return st;
  st = stack_same(n, c ? (const attn_tensor *const *)c : ts, dim, out);
  free_list(n, c);
  return st;
}

static attn_status cat_same(int n, const attn_tensor *const *ts, int dim, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  int ref = -1;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) return attn_set_error(ATTN_ERR_ARG, "cat: ts[%d] is NULL", i);
    if (ts[i]->ndim == 0) return attn_set_error(ATTN_ERR_SHAPE, "cat: ts[%d] is 0-d and cannot be concatenated", i);
    if (ref < 0 && !cat_skipped(ts[i])) ref = i;
  }
  if (ref < 0) {
    int64_t zero = 0;
    attn_tensor *o;
    attn_status st = attn__alloc_dtype("cat", ts[0]->dtype, 1, &zero, &o);
    if (st) return st;
    return finish(attn__record_cat(n, ts, 0, o), o, out);
  }
  const attn_tensor *r = ts[ref];
  if (dim < 0 || dim >= r->ndim)
    return attn_set_error(ATTN_ERR_INDEX, "cat: dim %d out of range for %d-d tensors (ts[%d] has shape %s)", dim,
                          r->ndim, ref, ATTN_SHAPE(r, sa));
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const attn_tensor *t = ts[i];
    if (cat_skipped(t)) continue;
    if (t->ndim != r->ndim)
      return attn_set_error(ATTN_ERR_SHAPE,
                            "cat: ts[%d] has shape %s but ts[%d] has shape %s; tensors must have the same "
                            "number of dims",
                            i, ATTN_SHAPE(t, sa), ref, ATTN_SHAPE(r, sb));
    for (int d = 0; d < r->ndim; d++)
      if (d != dim && t->shape[d] != r->shape[d])
        return attn_set_error(ATTN_ERR_SHAPE,
                              "cat: ts[%d] has shape %s but ts[%d] has shape %s; sizes must match except in "
                              "dim %d",
                              i, ATTN_SHAPE(t, sa), ref, ATTN_SHAPE(r, sb), dim);
    if (t->shape[dim] > ATTN_MAX_NUMEL - total)
      return attn_set_error(ATTN_ERR_NOMEM, "cat: result has too many elements");
    total += t->shape[dim];
  }
  int64_t shape[ATTN_MAX_DIMS];
  memcpy(shape, r->shape, sizeof shape);
  shape[dim] = total;
  attn_tensor *o;
  attn_status st = attn__alloc_dtype("cat", r->dtype, r->ndim, shape, &o);
  if (st) return st;
  /* Each input fills the slab out.narrow(dim, at, n_i). */
  void *base = attn_tensor_ptr(o);
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    const attn_tensor *t = ts[i];
    if (cat_skipped(t)) continue;
    copy_strided(o->dtype, t->ndim, t->shape, elem(base, o->dtype, at * o->stride[dim]), o->stride, attn_tensor_ptr(t),
                 t->stride);
    at += t->shape[dim];
  }
  return finish(attn__record_cat(n, ts, dim, o), o, out);
}

/* ts[i]: S (all the same) -> out: S with n inserted at dim (0 <= dim <= ndim). */
static attn_status stack_same(int n, const attn_tensor *const *ts, int dim, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  for (int i = 0; i < n; i++)
    if (!ts[i]) return attn_set_error(ATTN_ERR_ARG, "stack: ts[%d] is NULL", i);
  const attn_tensor *r = ts[0];
  for (int i = 1; i < n; i++)
    if (!attn_same_shape(ts[i], r))
      return attn_set_error(ATTN_ERR_SHAPE, "stack: ts[%d] has shape %s but ts[0] has shape %s; all must be equal", i,
                            ATTN_SHAPE(ts[i], sa), ATTN_SHAPE(r, sb));
  if (dim < 0 || dim > r->ndim)
    return attn_set_error(ATTN_ERR_INDEX, "stack: dim %d out of range [0, %d] for %s tensors", dim, r->ndim,
                          ATTN_SHAPE(r, sa));
  if (r->ndim + 1 > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "stack: result would have more than %d dims", ATTN_MAX_DIMS);
  int64_t shape[ATTN_MAX_DIMS];
  for (int d = 0, k = 0; d <= r->ndim; d++) shape[d] = d == dim ? n : r->shape[k++];
  attn_tensor *o;
  attn_status st = attn__alloc_dtype("stack", r->dtype, r->ndim + 1, shape, &o);
  if (st) return st;
  /* ts[i] fills out.select(dim, i). */
  int64_t sel_shape[ATTN_MAX_DIMS], sel_stride[ATTN_MAX_DIMS];
  drop_dim(o, dim, sel_shape, sel_stride);
  void *base = attn_tensor_ptr(o);
  for (int i = 0; i < n; i++)
    copy_strided(o->dtype, r->ndim, r->shape, elem(base, o->dtype, i * o->stride[dim]), sel_stride,
                 attn_tensor_ptr(ts[i]), ts[i]->stride);
  return finish(attn__record_stack(n, ts, dim, o), o, out);
}

/* ------------------------------------------------------------------------ */
/* index_select / gather                                                     */

/* t: [A..., m, B...], index: [k] (0-d counts as [1]) -> out: [A..., k, B...]
   with out[a, j, b] = t[a, index[j], b]. */
attn_status attn_index_select(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  attn_status st = attn__check_dim("index_select", t, dim);
  if (st) return st;
  if (index->ndim > 1)
    return attn_set_error(ATTN_ERR_SHAPE, "index_select: index must be 1-d, got shape %s", ATTN_SHAPE(index, sb));
  if ((st = attn__check_index("index_select", index, t->shape[dim]))) return st;
  int64_t k = attn_tensor_numel(index);
  int64_t shape[ATTN_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = k;
  attn_tensor *o;
  if ((st = attn__alloc_dtype("index_select", t->dtype, t->ndim, shape, &o))) return st;
  void *dst = attn_tensor_ptr(o);
  const void *src = attn_tensor_ptr(t);
  const size_t es = attn_dtype_size(t->dtype);
  if (t->ndim == 1) {
    for (int64_t j = 0; j < k; j++)
      memcpy(elem(dst, t->dtype, j), celem(src, t->dtype, attn_tensor_get_flat_i64(index, j) * t->stride[0]), es);
  } else if (attn_tensor_numel(o) > 0) {
    /* Row j of the output is t.select(dim, index[j]): one (coalesced) copy each. */
    int64_t sel_shape[ATTN_MAX_DIMS], src_stride[ATTN_MAX_DIMS], dst_stride[ATTN_MAX_DIMS];
    drop_dim(t, dim, sel_shape, src_stride);
    drop_dim(o, dim, sel_shape, dst_stride);
    for (int64_t j = 0; j < k; j++) {
      int64_t v = attn_tensor_get_flat_i64(index, j);
      copy_strided(t->dtype, t->ndim - 1, sel_shape, elem(dst, t->dtype, j * o->stride[dim]), dst_stride,
                   celem(src, t->dtype, v * t->stride[dim]), src_stride);
    }
  }
  return finish(attn__record_index_select(t, dim, index, o), o, out);
}

/* t: [s_0..s_n], index: [i_0..i_n] with i_d <= s_d for d != dim
   -> out: [i_0..i_n], out[p] = t[p with p_dim replaced by index[p]].
   An empty index gives an empty result without further checks (torch). */
/* gather for float32 index tensors (legacy) and non-float sources: checks
   the index, then reads element by element. */
static attn_status gather_any(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  attn_status st;
  if (index->ndim != t->ndim)
    return attn_set_error(ATTN_ERR_SHAPE, "gather: index %s must have as many dims as the input %s",
                          ATTN_SHAPE(index, sa), ATTN_SHAPE(t, sb));
  for (int d = 0; d < t->ndim; d++)
    if (d != dim && index->shape[d] > t->shape[d])
      return attn_set_error(ATTN_ERR_SHAPE,
                            "gather: index %s does not fit the input %s: size %lld > %lld at dim %d (only dim "
                            "%d may be larger)",
                            ATTN_SHAPE(index, sa), ATTN_SHAPE(t, sb), (long long)index->shape[d],
                            (long long)t->shape[d], d, dim);
  if ((st = attn__check_index("gather", index, t->shape[dim]))) return st;
  attn_tensor *o;
  if ((st = attn__alloc_dtype("gather", t->dtype, index->ndim, index->shape, &o))) return st;
  const size_t es = attn_dtype_size(t->dtype);
  char *dst = attn_tensor_ptr(o);
  attn__iter it;
  attn__iter_init(&it, index);
  int64_t i = 0;
  do {
    int64_t tpos = t->offset;
    for (int d = 0; d < t->ndim; d++)
      tpos += (d == dim ? attn__load_i64(index->storage, it.pos) : it.idx[d]) * t->stride[d];
    memcpy(dst + i * (int64_t)es, (const char *)t->storage->data + tpos * (int64_t)es, es);
    if ((++i & 0xffff) == 0 && attn__cancelled()) {
      attn_tensor_release(o);
      return attn__limit_error("gather");
    }
  } while (attn__iter_next(&it));
  return finish(attn__record_gather(t, dim, index, o), o, out);
}

attn_status attn_gather(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  attn_status st = attn__check_dim("gather", t, dim);
  if (st) return st;
  int64_t n = attn_tensor_numel(index);
  if (n == 0) {
    attn_tensor *o;
    if ((st = attn__alloc_dtype("gather", t->dtype, index->ndim, index->shape, &o))) return st;
    return finish(attn__record_gather(t, dim, index, o), o, out);
  }
  if (index->dtype != ATTN_INT64 || t->dtype != ATTN_FLOAT32) return gather_any(t, dim, index, out);
  if (index->ndim != t->ndim)
    return attn_set_error(ATTN_ERR_SHAPE, "gather: index %s must have as many dims as the input %s",
                          ATTN_SHAPE(index, sa), ATTN_SHAPE(t, sb));
  for (int d = 0; d < t->ndim; d++)
    if (d != dim && index->shape[d] > t->shape[d])
      return attn_set_error(ATTN_ERR_SHAPE,
                            "gather: index %s does not fit the input %s: size %lld > %lld at dim %d (only dim "
                            "%d may be larger)",
                            ATTN_SHAPE(index, sa), ATTN_SHAPE(t, sb), (long long)index->shape[d],
                            (long long)t->shape[d], d, dim);
  attn_tensor *o;
  if ((st = attn__alloc("gather", index->ndim, index->shape, &o))) return st;
  /* Walk index in row-major order; tpos follows the same position in t
     except along dim, which the index value supplies.  Index values are
     checked on the way (as attn__check_index would, in one pass instead of
     a second, slower one); a bad one drops the unfinished output. */
  int nd = t->ndim;
  int64_t tstride[ATTN_MAX_DIMS];
  memcpy(tstride, t->stride, sizeof tstride);
  int64_t dstride = tstride[dim];
  tstride[dim] = 0;
  const int64_t *ib = index->storage->data;
  const float *tb = t->storage->data;
  float *dst = attn_tensor_data(o);
  int64_t idx[ATTN_MAX_DIMS] = {0}, ipos = index->offset, tpos = t->offset;
  int64_t inner = index->shape[nd - 1], is = index->stride[nd - 1], ts = tstride[nd - 1];
  const int64_t limit = t->shape[dim];
  for (;;) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t v = ib[ipos + i * is];
      if (v < 0 || v >= limit) {
        attn_tensor_release(o);
        return attn_set_error(ATTN_ERR_INDEX, "gather: index %lld out of range [0, %lld)", (long long)v,
                              (long long)limit);
      }
      *dst++ = tb[tpos + i * ts + v * dstride];
    }
    int k = nd - 2;
    for (; k >= 0; k--) {
      if (++idx[k] < index->shape[k]) {
        ipos += index->stride[k];
        tpos += tstride[k];
        break;
      }
      ipos -= index->stride[k] * (index->shape[k] - 1);
      tpos -= tstride[k] * (index->shape[k] - 1);
      idx[k] = 0;
    }
    if (k < 0) break;
  }
  return finish(attn__record_gather(t, dim, index, o), o, out);
}

/* ------------------------------------------------------------------------ */
/* split / chunk: views                                                      */

/* count views t.narrow(dim, start_i, len_i): len_i = sizes[i], or when sizes
   is NULL min(uniform, size(dim) - start_i).  All or nothing.  Under
   autograd each piece is recorded as a slice view named like torch's
   multi-output node (SplitBackward0, SplitWithSizesBackward0), so the
   in-place rules for views apply to it. */
static attn_status make_pieces(const char *fn, const char *node_name, const attn_tensor *t, int dim, int64_t count,
                               const int64_t *sizes, int64_t uniform, int *n, attn_tensor ***outs) {
  if (count > INT_MAX) return attn_set_error(ATTN_ERR_ARG, "%s: %lld pieces are too many", fn, (long long)count);
  /* Pieces are headers, which budgets do not count; but chunk of an empty
     dim gives `chunks` of them, so a script could take any memory.  The
     headers are charged to the thread's budget while they are made. */
  attn_budget *budget = attn_budget_current();
  int64_t header_bytes = count * (int64_t)(sizeof(attn_tensor) + sizeof(attn_tensor *));
  if (budget && !attn_budget_charge(budget, header_bytes))
    return attn_set_error(ATTN_ERR_NOMEM, "%s: memory limit of %lld bytes reached making %lld pieces", fn,
                          (long long)attn_budget_limit(budget), (long long)count);
  attn_tensor **arr = attn__malloc((size_t)count * sizeof *arr);
  if (!arr) {
    if (budget) attn_budget_credit(budget, header_bytes);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  }
  int64_t m = t->shape[dim], start = 0;
  for (int64_t i = 0; i < count; i++) {
    int64_t len = sizes ? sizes[i] : (uniform < m - start ? uniform : m - start);
    bool prev = attn_set_grad_enabled(false); /* recorded below under torch's name */
    attn_status st = attn_narrow(t, dim, start, len, &arr[i]);
    attn_set_grad_enabled(prev);
    if (st == ATTN_OK) {
      const int64_t args[4] = {dim, start, start + len, 1};
      if ((st = attn__record_view(t, arr[i], node_name, ATTN__VIEW_SLICE, 4, args))) attn_tensor_release(arr[i]);
    }
    if (st) {
      while (i > 0) attn_tensor_release(arr[--i]);
      free(arr);
      if (budget) attn_budget_credit(budget, header_bytes);
      return st; /* attn_narrow named the problem */
    }
    start += len;
  }
  if (budget) attn_budget_credit(budget, header_bytes);
  *n = (int)count;
  *outs = arr;
  return ATTN_OK;
}

/* t: [A..., m, B...] -> max(ceil(m / size), 1) views [A..., size, B...]
   (the last one holds the rest). */
attn_status attn_split(const attn_tensor *t, int64_t size, int dim, int *n, attn_tensor ***outs) {
  attn_status st = attn__check_dim("split", t, dim);
  if (st) return st;
  int64_t m = t->shape[dim];
  if (size < 0)
    return attn_set_error(ATTN_ERR_ARG, "split: split size must be non-negative (got %lld)", (long long)size);
  if (size == 0 && m > 0)
    return attn_set_error(ATTN_ERR_ARG, "split: split size can only be 0 if the dim is empty (dim %d has size %lld)",
                          dim, (long long)m);
  int64_t count = size ? m / size + (m % size != 0) : 1;
  if (count == 0) count = 1;
  return make_pieces("split", "SplitBackward0", t, dim, count, NULL, size, n, outs);
}

/* t: [A..., m, B...] -> views [A..., sizes[i], B...], sum(sizes) == m. */
attn_status attn_split_sizes(const attn_tensor *t, int nsizes, const int64_t *sizes, int dim, int *n,
                             attn_tensor ***outs) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  attn_status st = attn__check_dim("split_sizes", t, dim);
  if (st) return st;
  if (nsizes < 0 || (nsizes > 0 && !sizes))
    return attn_set_error(ATTN_ERR_ARG, "split_sizes: invalid list of %d sizes", nsizes);
  int64_t m = t->shape[dim], sum = 0;
  for (int i = 0; i < nsizes; i++)
    if (sizes[i] < 0)
      return attn_set_error(ATTN_ERR_ARG, "split_sizes: sizes[%d] = %lld is negative", i, (long long)sizes[i]);
  for (int i = 0; i < nsizes && sum <= m; i++)
    sum += sizes[i] < m + 1 ? sizes[i] : m + 1; /* saturate: never overflows, any size > m fails */
  if (sum != m) {
    /* sizes shown as a list; attn_shape_str truncates very long ones */
    return attn_set_error(ATTN_ERR_SHAPE, "split_sizes: sizes %s must add up to %lld, the size of dim %d of %s",
                          attn_shape_str(nsizes, sizes, sa, sizeof sa), (long long)m, dim, ATTN_SHAPE(t, sb));
  }
  return make_pieces("split_sizes", "SplitWithSizesBackward0", t, dim, nsizes, sizes, 0, n, outs);
}

/* t: [A..., m, B...] -> views of ceil(m / chunks) along dim (fewer than
   chunks pieces when they run out; m == 0 gives chunks empty pieces). */
attn_status attn_chunk(const attn_tensor *t, int64_t chunks, int dim, int *n, attn_tensor ***outs) {
  attn_status st = attn__check_dim("chunk", t, dim);
  if (st) return st;
  if (chunks <= 0)
    return attn_set_error(ATTN_ERR_ARG, "chunk: number of chunks must be positive (got %lld)", (long long)chunks);
  int64_t m = t->shape[dim];
  int64_t size = m / chunks + (m % chunks != 0);
  int64_t count = size ? m / size + (m % size != 0) : chunks;
  return make_pieces("chunk", "SplitBackward0", t, dim, count, NULL, size, n, outs);
}

/* ------------------------------------------------------------------------ */
/* repeat / flip                                                             */

/* t: [s_0..s_k] padded on the left with 1s to nreps dims p_d
   -> out: [p_d * reps_d], out[i] = t[i mod p]. */
attn_status attn_repeat(const attn_tensor *t, int nreps, const int64_t *reps, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (nreps < t->ndim)
    return attn_set_error(ATTN_ERR_ARG, "repeat: %d repeat counts given for a %d-d tensor %s (need at least %d)", nreps,
                          t->ndim, ATTN_SHAPE(t, sb), t->ndim);
  if (nreps > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "repeat: %d repeat counts given, at most %d dims are supported", nreps,
                          ATTN_MAX_DIMS);
  if (nreps > 0 && !reps) return attn_set_error(ATTN_ERR_ARG, "repeat: reps is NULL");
  int lead = nreps - t->ndim;
  int64_t pad[ATTN_MAX_DIMS], pstride[ATTN_MAX_DIMS], shape[ATTN_MAX_DIMS];
  for (int d = 0; d < nreps; d++) {
    pad[d] = d < lead ? 1 : t->shape[d - lead];
    pstride[d] = d < lead ? 0 : t->stride[d - lead];
    if (reps[d] < 0)
      return attn_set_error(ATTN_ERR_ARG, "repeat: negative repeat count %lld in %s", (long long)reps[d],
                            attn_shape_str(nreps, reps, sa, sizeof sa));
    if (pad[d] > 0 && reps[d] > ATTN_MAX_NUMEL / pad[d])
      return attn_set_error(ATTN_ERR_NOMEM, "repeat: repeating %s by %s gives too many elements", ATTN_SHAPE(t, sb),
                            attn_shape_str(nreps, reps, sa, sizeof sa));
    shape[d] = pad[d] * reps[d];
  }
  attn_tensor *o;
  attn_status st = attn__alloc_dtype("repeat", t->dtype, nreps, shape, &o);
  if (st) return st;
  if (attn_tensor_numel(o) == 0) return finish(attn__record_repeat(t, nreps, reps, o), o, out);
  char *p = attn_tensor_ptr(o);
  const int64_t es = (int64_t)attn_dtype_size(t->dtype);
  const int64_t *os = o->stride;
  /* 1. t goes to the first tile, out[0:p_0, ..., 0:p_n]. */
  copy_strided(t->dtype, nreps, pad, p, os, attn_tensor_ptr(t), pstride);
  /* 2. From the last dim up: dims after d are complete, so for each
     position of the first tile in dims < d the span [p_d, full...] is one
     contiguous block; copy it reps_d - 1 times right after itself. */
  for (int d = nreps - 1; d >= 0; d--) {
    if (reps[d] <= 1) continue;
    int64_t block = pad[d] * os[d];
    int64_t idx[ATTN_MAX_DIMS] = {0}, pos = 0;
    for (;;) {
      char *b = p + pos * es;
      for (int64_t r = 1; r < reps[d]; r++) memcpy(b + r * block * es, b, (size_t)(block * es));
      int k = d - 1;
      for (; k >= 0; k--) {
        if (++idx[k] < pad[k]) {
          pos += os[k];
          break;
        }
        pos -= os[k] * (pad[k] - 1);
        idx[k] = 0;
      }
      if (k < 0) break;
    }
  }
  return finish(attn__record_repeat(t, nreps, reps, o), o, out);
}

/* t: S -> out: S, out[i] = t[i with i_d -> S_d - 1 - i_d for each d in dims].
   Read through a reversed geometry (negative strides) in one copy. */
attn_status attn_flip(const attn_tensor *t, int ndims, const int *dims, attn_tensor **out) {
  if (ndims < 0 || (ndims > 0 && !dims)) return attn_set_error(ATTN_ERR_ARG, "flip: invalid list of %d dims", ndims);
  bool seen[ATTN_MAX_DIMS] = {false};
  int64_t offset = t->offset, stride[ATTN_MAX_DIMS];
  memcpy(stride, t->stride, sizeof stride);
  for (int i = 0; i < ndims; i++) {
    attn_status st = attn__check_dim("flip", t, dims[i]);
    if (st) return st;
    int d = dims[i];
    if (seen[d]) return attn_set_error(ATTN_ERR_ARG, "flip: dim %d appears more than once", d);
    seen[d] = true;
    if (t->shape[d] > 0) offset += (t->shape[d] - 1) * t->stride[d];
    stride[d] = -t->stride[d];
  }
  attn_tensor *o;
  attn_status st = attn__alloc_dtype("flip", t->dtype, t->ndim, t->shape, &o);
  if (st) return st;
  if (attn_tensor_numel(t) > 0)
    copy_strided(t->dtype, t->ndim, t->shape, attn_tensor_ptr(o), o->stride, celem(t->storage->data, t->dtype, offset),
                 stride);
  return finish(attn__record_flip(t, ndims, dims, o), o, out);
}
