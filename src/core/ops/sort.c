/* SPDX-License-Identifier: MIT */
/* Sorting along a dim: sort, topk, kthvalue (torch 1.13 semantics), with
 * their backward (the gradient of the values goes back to the positions
 * the indices name: a scatter-add into zeros of the input's shape).
 *
 * Order: NaN is larger than every number (torch: NaN last ascending,
 * first descending, and topk's largest).  Equal values keep their input
 * order in both directions (torch's stable sort).
 *
 * A tensor is seen as contiguous [outer, n, inner] blocks around dim (n the
 * sorted dim; a 0-d tensor is one element); each of the outer * inner
 * slices is sorted on its own in scratch, as 64-bit (key, position) words:
 * radix sort for long rows, merged insertion-sorted runs for short ones.
 * topk of a few values keeps them in a bounded insertion pass instead.
 * attn__sort_pairs_reference is the plain twin the tests compare with. */
#include "ops/ops.h"
#include "index_io.h"

#include <math.h>

typedef struct sort_pair {
  float v;
  int64_t i;
} sort_pair;
/* a full sort works in words inside the pairs' scratch: n pairs = 2n words */
_Static_assert(sizeof(sort_pair) == 2 * sizeof(uint64_t), "sort_pair is two words");

/* a before b ascending: smaller value, NaN last, then input order */
static int cmp_asc(const void *pa, const void *pb) {
  const sort_pair *a = pa, *b = pb;
  bool na = isnan(a->v), nb = isnan(b->v);
  if (na != nb) return na ? 1 : -1;
  if (!na && a->v != b->v) return a->v < b->v ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* descending: larger value, NaN first, then input order */
static int cmp_desc(const void *pa, const void *pb) {
  const sort_pair *a = pa, *b = pb;
  bool na = isnan(a->v), nb = isnan(b->v);
  if (na != nb) return na ? -1 : 1;
  if (!na && a->v != b->v) return a->v > b->v ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* Whether a goes strictly before b (equal values: neither). */
static inline bool before(const sort_pair *a, const sort_pair *b, bool descending) {
  bool na = isnan(a->v), nb = isnan(b->v);
  if (na || nb) return descending ? na && !nb : nb && !na;
  return descending ? a->v > b->v : a->v < b->v;
}

/* A row (shorter than 2^32) sorts as 64-bit words (key << 32 | position):
   key orders the floats as unsigned integers (NaN above +inf, -0 equal to
   +0; complemented for descending), the position breaks ties, so plain
   integer order is the stable order. */
static inline uint64_t sort_key(float v, bool descending) {
  uint32_t b;
  if (v == 0.0f) v = 0.0f; /* -0 == +0 */
  memcpy(&b, &v, sizeof b);
  uint32_t key = isnan(v) ? 0xFFFFFFFFu : (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return descending ? (uint32_t)~key : key;
}

/* Long rows: LSD radix sort on the key's 4 bytes (stable, so equal keys
   keep their positions' order); a pass whose byte is the same for every
   word is skipped. */
static void radix_words(uint64_t *p, uint64_t *tmp, int64_t n) {
  uint64_t *src = p, *dst = tmp;
  for (int pass = 0; pass < 4; pass++) {
    const int shift = 32 + 8 * pass;
    int64_t count[256] = {0};
    for (int64_t i = 0; i < n; i++) count[(src[i] >> shift) & 255]++;
    if (count[(src[0] >> shift) & 255] == n) continue;
    int64_t pos = 0;
    for (int b = 0; b < 256; b++) {
      int64_t c = count[b];
      count[b] = pos;
      pos += c;
    }
    for (int64_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 255]++] = src[i];
    uint64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != p) memcpy(p, src, (size_t)n * sizeof *p);
}

/* Sorts n words ascending (radix for long rows, else insertion-sorted runs
   of 16 merged bottom-up); tmp holds n words; the result is in p. */
static void sort_words(uint64_t *p, uint64_t *tmp, int64_t n) {
  if (n >= 256) {
    radix_words(p, tmp, n);
    return;
  }
  const int64_t run = 16;
  for (int64_t lo = 0; lo < n; lo += run) {
    int64_t hi = lo + run < n ? lo + run : n;
    for (int64_t i = lo + 1; i < hi; i++) {
      uint64_t x = p[i];
      int64_t j = i;
      for (; j > lo && x < p[j - 1]; j--) p[j] = p[j - 1];
      p[j] = x;
    }
  }
  uint64_t *src = p, *dst = tmp;
  for (int64_t w = run; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) dst[k++] = src[j] < src[i] ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    uint64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != p) memcpy(p, src, (size_t)n * sizeof *p);
}

/* The first k of n values in sorted (stable) order without sorting them
   all: best[0, k) kept sorted, each value compared with the last kept
   (k small: a value rarely gets in). */
static void top_pairs(const float *x, int64_t stride, int64_t n, int64_t k, sort_pair *best, bool descending) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++) {
    sort_pair e = {x[i * stride], i};
    if (m == k && !before(&e, &best[k - 1], descending)) continue;
    int64_t j = m < k ? m++ : k - 1;
    for (; j > 0 && before(&e, &best[j - 1], descending); j--) best[j] = best[j - 1];
    best[j] = e;
  }
}

/* The reference twin: insertion sort, stable by construction. */
void attn__sort_pairs_reference(float *v, int64_t *idx, int64_t n, bool descending) {
  for (int64_t i = 0; i < n; i++) idx[i] = i;
  for (int64_t i = 1; i < n; i++) {
    float x = v[i];
    int64_t xi = idx[i], j = i - 1;
    for (; j >= 0; j--) {
      sort_pair a = {x, xi}, b = {v[j], idx[j]};
      if ((descending ? cmp_desc(&a, &b) : cmp_asc(&a, &b)) >= 0) break;
      v[j + 1] = v[j];
      idx[j + 1] = idx[j];
    }
    v[j + 1] = x;
    idx[j + 1] = xi;
  }
}

/* ------------------------------------------------------------------------ */
/* Backward: g (and the saved indices) have the output's shape; the input
   gets g scatter-added at the indices along dim.  saved[0]: indices;
   iargs: [0] dim, [1] 1 when dim was squeezed away (kthvalue). */
attn_status attn__sort_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn__edge *in = &node->next[0];
  if (in->ndim == 0) return attn_clone(g, &grads[0]);
  int dim = (int)node->iargs[0];
  attn_tensor *gu = NULL, *iu = NULL, *z = NULL;
  attn_status st;
  if (node->iargs[1]) {
    if ((st = attn_unsqueeze(g, dim, &gu)) || (st = attn_unsqueeze(node->saved[0], dim, &iu))) goto out;
  } else {
    gu = attn_tensor_retain((attn_tensor *)g);
    iu = attn_tensor_retain(node->saved[0]);
  }
  if ((st = attn_zeros(in->ndim, in->shape, &z))) goto out;
  st = attn_scatter_add(z, dim, iu, gu, &grads[0]);
out:
  attn_tensor_release(gu);
  attn_tensor_release(iu);
  attn_tensor_release(z);
  return st;
}

static attn_status record_sort(const char *name, const attn_tensor *t, int dim, bool squeezed,
                               const attn_tensor *indices, attn_tensor *values) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  /* a private copy: the caller owns the indices and may rewrite them */
  attn_tensor *copy;
  attn_status st = attn_clone(indices, &copy);
  if (st) return st;
  attn_node *node;
  st = attn__ag_record(values, name, ATTN__F_SORT, 1, &t, 1, (const attn_tensor *const *)&copy, &node);
  attn_tensor_release(copy);
  if (st == ATTN_OK) {
    node->iargs[0] = dim;
    node->iargs[1] = squeezed;
  }
  return st;
}

/* ------------------------------------------------------------------------ */
/* The shared driver: sorts every slice along dim and keeps the pairs
   [first, first + count) of each: values and indices of t's shape with
   size count at dim (0-d stays 0-d). */
static attn_status sort_slices(const char *fn, const attn_tensor *t, int dim, bool descending, int64_t first,
                               int64_t count, attn_tensor **values, attn_tensor **indices) {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t shape[ATTN_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) {
    shape[d] = t->shape[d];
    if (d < dim)
      outer *= t->shape[d];
    else if (d > dim)
      inner *= t->shape[d];
  }
  if (t->ndim > 0) {
    n = t->shape[dim];
    shape[dim] = count;
  }
  if (n >= ((int64_t)1 << 32)) /* the word's 32 bits of position */
    return attn_set_error(ATTN_ERR_ARG, "%s: the sorted dim has %lld elements (at most 2^32 - 1)", fn, (long long)n);
  attn_tensor *x = NULL, *v = NULL, *ix = NULL;
  sort_pair *pairs = NULL;
  /* few values wanted from the front: top_pairs (count pairs); else a
     full sort of n words with an n-word second buffer, read back into
     the same memory as pairs (n pairs = 2n words) */
  bool partial = first == 0 && count <= 32 && count * 8 <= n;
  size_t pbytes = (size_t)(partial ? (count > 0 ? count : 1) : (n > 0 ? n : 1)) * sizeof *pairs;
  attn_status st;
  /* other dtypes are ordered as float32 (exact up to 2^24) and their
     values handed back in their own dtype */
  attn_tensor *tf = NULL;
  if ((st = attn_to_dtype(t, ATTN_FLOAT32, &tf))) return st;
  st = attn_contiguous(tf, &x);
  attn_tensor_release(tf);
  if (st) return st;
  if ((st = attn__alloc(fn, t->ndim, shape, &v)) || (st = attn__index_new(fn, t->ndim, shape, &ix))) goto fail;
  if (outer * inner * count > 0) {
    if (!(pairs = attn__scratch_alloc(pbytes))) {
      st = attn__nomem(fn, (int64_t)pbytes);
      goto fail;
    }
    const float *xp = attn_tensor_data(x);
    float *vp = attn_tensor_data(v);
    int64_t work = 0;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < inner; j++) {
        const float *src = xp + o * n * inner + j;
        if (partial) {
          top_pairs(src, inner, n, count, pairs, descending);
        } else {
          uint64_t *w = (uint64_t *)pairs, *wt = w + n; /* 2n words: the n pairs */
          for (int64_t i = 0; i < n; i++) w[i] = sort_key(src[i * inner], descending) << 32 | (uint64_t)i;
          sort_words(w, wt, n);
          /* back to pairs in place, from the end: pairs[i] covers words 2i and
             2i + 1, which only words already read (> i) share */
          for (int64_t i = first + count - 1; i >= first; i--) {
            int64_t at = (int64_t)(w[i] & 0xFFFFFFFFu);
            pairs[i] = (sort_pair){src[at * inner], at};
          }
        }
        int64_t base = o * count * inner + j;
        for (int64_t i = 0; i < count; i++) {
          vp[base + i * inner] = pairs[first + i].v;
          attn__index_put(ix, base + i * inner, pairs[first + i].i);
        }
        if (attn__poll_work(&work, n)) {
          st = attn__limit_error(fn);
          goto fail;
        }
      }
  }
  attn__scratch_free(pairs, pbytes);
  pairs = NULL;
  attn_tensor_release(x);
  x = NULL;
  if (t->dtype != ATTN_FLOAT32) {
    attn_tensor *vt;
    if ((st = attn_to_dtype(v, t->dtype, &vt))) goto fail;
    attn_tensor_release(v);
    v = vt;
  }
  *values = v;
  *indices = ix;
  return ATTN_OK;
fail:
  if (pairs) attn__scratch_free(pairs, pbytes);
  attn_tensor_release(x);
  attn_tensor_release(v);
  attn_tensor_release(ix);
  return st;
}

static attn_status check_sort_dim(const char *fn, const attn_tensor *t, int dim) {
  if (t->ndim == 0 && dim == 0) return ATTN_OK;
  if (attn_check_compute(fn, 1, NULL, t)) return ATTN_ERR_ARG;
  return attn__check_dim(fn, t, dim);
}

/* t [..., n, ...] -> values, indices [..., n, ...] sorted along dim */
attn_status attn_sort(const attn_tensor *t, int dim, bool descending, attn_tensor **values, attn_tensor **indices) {
  attn_status st = check_sort_dim("sort", t, dim);
  if (st) return st;
  int64_t n = t->ndim ? t->shape[dim] : 1;
  attn_tensor *v, *ix;
  if ((st = sort_slices("sort", t, dim, descending, 0, n, &v, &ix))) return st;
  if ((st = record_sort("SortBackward0", t, dim, false, ix, v))) {
    attn_tensor_release(v);
    attn_tensor_release(ix);
    return st;
  }
  *values = v;
  *indices = ix;
  return ATTN_OK;
}

/* t [..., n, ...] -> values, indices [..., k, ...]: the k largest (or
   smallest) along dim, in sorted order (0 <= k <= n). */
attn_status attn_topk(const attn_tensor *t, int64_t k, int dim, bool largest, attn_tensor **values,
                      attn_tensor **indices) {
  char sb[ATTN_SHAPE_BUF];
  attn_status st = check_sort_dim("topk", t, dim);
  if (st) return st;
  if (t->dtype == ATTN_BOOL) /* torch refuses bool too */
    return attn_set_error(ATTN_ERR_ARG, "topk: not supported for bool tensors (convert with :long() first)");
  int64_t n = t->ndim ? t->shape[dim] : 1;
  if (k < 0 || k > n || (t->ndim == 0 && k != 1))
    return attn_set_error(ATTN_ERR_INDEX, "topk: k = %lld out of range for a dim of size %lld of %s (expected %s)",
                          (long long)k, (long long)n, ATTN_SHAPE(t, sb), t->ndim ? "0..size" : "1");
  attn_tensor *v, *ix;
  if ((st = sort_slices("topk", t, dim, largest, 0, k, &v, &ix))) return st;
  if ((st = record_sort("TopkBackward0", t, dim, false, ix, v))) {
    attn_tensor_release(v);
    attn_tensor_release(ix);
    return st;
  }
  *values = v;
  *indices = ix;
  return ATTN_OK;
}

/* t [..., n, ...] -> the k-th smallest along dim (k 1-based as in torch,
   1 <= k <= n) and its index: [..., 1, ...] with keepdim, else dim removed. */
attn_status attn_kthvalue(const attn_tensor *t, int64_t k, int dim, bool keepdim, attn_tensor **values,
                          attn_tensor **indices) {
  char sb[ATTN_SHAPE_BUF];
  attn_status st = check_sort_dim("kthvalue", t, dim);
  if (st) return st;
  if (t->dtype == ATTN_BOOL) /* torch refuses bool too */
    return attn_set_error(ATTN_ERR_ARG, "kthvalue: not supported for bool tensors (convert with :long() first)");
  int64_t n = t->ndim ? t->shape[dim] : 1;
  if (k < 1 || k > n)
    return attn_set_error(ATTN_ERR_INDEX,
                          "kthvalue: k = %lld out of range for a dim of size %lld of %s (expected 1..%lld)",
                          (long long)k, (long long)n, ATTN_SHAPE(t, sb), (long long)n);
  attn_tensor *v = NULL, *ix = NULL, *vs = NULL, *is = NULL;
  if ((st = sort_slices("kthvalue", t, dim, false, k - 1, 1, &v, &ix))) return st;
  bool squeeze = !keepdim && t->ndim > 0;
  if (squeeze) {
    if ((st = attn_squeeze(v, dim, &vs)) || (st = attn_squeeze(ix, dim, &is))) goto fail;
    attn_tensor_release(v);
    attn_tensor_release(ix);
    v = vs;
    ix = is;
    vs = is = NULL;
  }
  if ((st = record_sort("KthvalueBackward0", t, dim, squeeze, ix, v))) goto fail;
  *values = v;
  *indices = ix;
  return ATTN_OK;
fail:
  attn_tensor_release(v);
  attn_tensor_release(ix);
  attn_tensor_release(vs);
  attn_tensor_release(is);
  return st;
}
