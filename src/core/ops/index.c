/* SPDX-License-Identifier: MIT */
/* Indexing as torch's t[key] and t[key] = value (attn.h's attn_index_get
 * and attn_index_put), 0-based as in Python.
 *
 * A key is a list of entries: integers (select, dropping the dim), slices
 * (start:stop:step with open ends, clamped like Python's), new axes
 * (None), one ellipsis (the whole dims the other entries leave) and at
 * most one tensor: int64 ids on one dim (negative from the end; the
 * result takes the ids' shape there) or a bool mask over as many dims as
 * it has (the result has one dim of the true entries there).
 *
 * Reads without a tensor are views (select/slice/unsqueeze); with one, a
 * copy through index_select.  Both record themselves for autograd.
 * Writes: a key without a tensor copies the value into the view (copy_,
 * which converts); with a tensor the value must have t's dtype unless it
 * is 0-d (torch's index_put).  Under autograd (t or the value requires
 * grad) a write is computed on t as a whole, t = where(hit, value at its
 * position, t), committed with copy_: the core cannot rebase the history
 * of a view written in place. */
#include "ops/ops.h"

#include <stdio.h>
#include <string.h>

#define GET "index_get"
#define PUT "index_put"

/* A sub-op's error (its message starts "op: ") renamed as fn's; a
   refused allocation keeps its "not enough memory: " message (hosts and
   the binding read it). */
static attn_status renamed(attn_status st, const char *fn) {
  char msg[512];
  const char *m = attn_last_error(), *rest = strstr(m, ": ");
  if (st == ATTN_ERR_NOMEM && strncmp(m, "not enough memory: ", 19) == 0) return st;
  snprintf(msg, sizeof msg, "%s", rest ? rest + 2 : m);
  return attn_set_error(st, "%s: %s", fn, msg);
}

/* ------------------------------------------------------------------------ */
/* The key                                                                   */

typedef struct {
  int consumed;         /* dims of t the key's entries take */
  int ell;              /* dims the ellipsis stands for (0 without one) */
  int adv;              /* the tensor entry's position, or -1 */
  bool ints_only;       /* every entry an integer */
  const attn_tensor *k; /* the tensor entry */
} key_info;

static attn_status key_check(const char *fn, const attn_tensor *t, int n, const attn_index *key, key_info *ki) {
  if (n < 0 || (n > 0 && !key)) return attn_set_error(ATTN_ERR_ARG, "%s: a key of %d entries", fn, n);
  ki->consumed = 0;
  ki->ell = 0;
  ki->adv = -1;
  ki->ints_only = true;
  ki->k = NULL;
  int ellipses = 0, added = 0;
  for (int i = 0; i < n; i++) {
    const attn_index *e = &key[i];
    if (e->kind != ATTN_INDEX_INT) ki->ints_only = false;
    switch (e->kind) {
    case ATTN_INDEX_INT: ki->consumed++; break;
    case ATTN_INDEX_SLICE:
      if (e->step <= 0)
        return attn_set_error(ATTN_ERR_ARG, "%s: slice step must be positive (got %lld)", fn, (long long)e->step);
      ki->consumed++;
      break;
    case ATTN_INDEX_NEWAXIS: added++; break;
    case ATTN_INDEX_ELLIPSIS:
      if (++ellipses > 1) return attn_set_error(ATTN_ERR_ARG, "%s: a key holds at most one ellipsis", fn);
      break;
    case ATTN_INDEX_TENSOR: {
      const attn_tensor *k = e->tensor;
      if (!k) return attn_set_error(ATTN_ERR_ARG, "%s: entry %d is a tensor entry without a tensor", fn, i);
      if (ki->adv >= 0)
        return attn_set_error(ATTN_ERR_ARG,
                              "%s: at most one index tensor per key (index one dim at a time: t[ids][:, ids2])", fn);
      if (k->dtype != ATTN_INT64 && k->dtype != ATTN_BOOL)
        return attn_set_error(ATTN_ERR_ARG, "%s: an index tensor must be int64 ids or a bool mask (got %s)", fn,
                              attn_dtype_name(k->dtype));
      ki->adv = i;
      ki->k = k;
      ki->consumed += k->dtype == ATTN_BOOL ? k->ndim : 1;
      break;
    }
    default: return attn_set_error(ATTN_ERR_ARG, "%s: entry %d has an unknown kind %d", fn, i, (int)e->kind);
    }
  }
  if (ki->consumed > t->ndim)
    return attn_set_error(ATTN_ERR_INDEX, "%s: %d indices for a %d-d tensor", fn, ki->consumed, t->ndim);
  if (ellipses) ki->ell = t->ndim - ki->consumed;
  /* the result: t's dims less the integers', a mask's dims become one, an
     id tensor's one dim becomes the ids' dims, plus the new axes */
  int nd = t->ndim + added;
  for (int i = 0; i < n; i++) nd -= key[i].kind == ATTN_INDEX_INT;
  if (ki->k) nd += ki->k->dtype == ATTN_BOOL ? 1 - ki->k->ndim : ki->k->ndim - 1;
  if (nd > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "%s: the result would have more than %d dims", fn, ATTN_MAX_DIMS);
  return ATTN_OK;
}

/* The view of t that the key's entries other than the tensor give
   (retained).  *adv_dim: the view's dim where the tensor entry starts. */
static attn_status key_view(const char *fn, const attn_tensor *t, int n, const attn_index *key, const key_info *ki,
                            attn_tensor **out, int *adv_dim) {
  attn_tensor *cur = attn_tensor_retain((attn_tensor *)t);
  attn_status st = ATTN_OK;
  int d = 0;  /* the view's dim */
  int od = 0; /* t's dim */
  *adv_dim = -1;
  for (int i = 0; i < n && !st; i++) {
    const attn_index *e = &key[i];
    attn_tensor *next = NULL;
    switch (e->kind) {
    case ATTN_INDEX_ELLIPSIS:
      d += ki->ell;
      od += ki->ell;
      continue;
    case ATTN_INDEX_TENSOR: {
      int k = e->tensor->dtype == ATTN_BOOL ? e->tensor->ndim : 1;
      *adv_dim = d;
      d += k;
      od += k;
      continue;
    }
    case ATTN_INDEX_NEWAXIS: st = attn_unsqueeze(cur, d++, &next); break;
    case ATTN_INDEX_INT: {
      int64_t size = cur->shape[d], i0 = e->i < 0 ? e->i + size : e->i;
      if (i0 < 0 || i0 >= size) {
        st = attn_set_error(ATTN_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld (expected %lld..%lld)",
                            fn, (long long)e->i, od, (long long)size, (long long)-size, (long long)size - 1);
        break;
      }
      st = attn_select(cur, d, i0, &next);
      od++;
      break;
    }
    case ATTN_INDEX_SLICE: {
      /* Python's clamping, written so that extreme bounds cannot overflow */
      int64_t size = cur->shape[d];
      int64_t s = 0, e0 = size;
      if (e->has_start)
        s = e->start < 0 ? (e->start < -size ? 0 : e->start + size) : (e->start > size ? size : e->start);
      if (e->has_stop) e0 = e->stop < 0 ? (e->stop < -size ? 0 : e->stop + size) : (e->stop > size ? size : e->stop);
      if (e0 < s) e0 = s;
      st = attn_slice(cur, d++, s, e0, e->step, &next);
      od++;
      break;
    }
    }
    if (st) break;
    attn_tensor_release(cur);
    cur = next;
  }
  if (st) {
    attn_tensor_release(cur);
    return renamed(st, fn);
  }
  *out = cur;
  return ATTN_OK;
}

/* The ids of an int64 index entry for a dim of size n: a contiguous int64
   tensor of values in [0, n) (negatives counted from the end), retained. */
static attn_status ids_for(const char *fn, const attn_tensor *k, int64_t n, int dim, attn_tensor **out) {
  int64_t total = attn_tensor_numel(k), work = 0;
  bool wrap = false;
  for (int64_t i = 0; i < total; i++) {
    if (attn__poll_work(&work, 1)) return attn__limit_error(fn);
    int64_t v = attn_tensor_get_flat_i64(k, i);
    if (v < -n || v >= n)
      return attn_set_error(ATTN_ERR_INDEX,
                            "%s: index %lld in the index tensor out of range for dim %d of size %lld "
                            "(expected %lld..%lld)",
                            fn, (long long)v, dim, (long long)n, (long long)-n, (long long)n - 1);
    wrap = wrap || v < 0;
  }
  if (!wrap && attn_tensor_is_contiguous(k)) {
    *out = attn_tensor_retain((attn_tensor *)k);
    return ATTN_OK;
  }
  attn_tensor *c;
  attn_status st = attn_empty_dtype(ATTN_INT64, k->ndim, k->shape, &c);
  if (st) return st;
  if ((st = attn_copy_(c, k))) {
    attn_tensor_release(c);
    return renamed(st, fn);
  }
  int64_t *p = attn_tensor_i64(c);
  for (int64_t i = 0; i < total; i++)
    if (p[i] < 0) p[i] += n;
  *out = c;
  return ATTN_OK;
}

/* Whether the mask's shape is that of dims [d, d + mask->ndim) of cur. */
static attn_status mask_check(const char *fn, const attn_tensor *t, const attn_tensor *cur, int d, const attn_tensor *m,
                              bool leading) {
  bool ok = true;
  for (int j = 0; ok && j < m->ndim; j++) ok = m->shape[j] == cur->shape[d + j];
  if (ok) return ATTN_OK;
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (leading)
    return attn_set_error(ATTN_ERR_SHAPE,
                          "%s: mask of shape %s does not match the leading dims of the tensor's shape %s", fn,
                          ATTN_SHAPE(m, sa), ATTN_SHAPE(t, sb));
  return attn_set_error(ATTN_ERR_SHAPE, "%s: mask of shape %s does not match the dims it covers (%d..%d) of %s", fn,
                        ATTN_SHAPE(m, sa), d, d + m->ndim - 1, ATTN_SHAPE(cur, sb));
}

/* Flat row-major positions of the mask's true entries ([n] int64).  An
   expanded mask has 2^40 elements in no memory: both passes poll. */
static attn_status mask_positions(const char *fn, const attn_tensor *m, attn_tensor **out) {
  int64_t total = attn_tensor_numel(m), n = 0, work = 0;
  for (int64_t i = 0; i < total; i++) {
    if (attn__poll_work(&work, 1)) return attn__limit_error(fn);
    n += attn_tensor_get_flat_i64(m, i) != 0;
  }
  attn_tensor *p;
  attn_status st = attn_empty_dtype(ATTN_INT64, 1, &n, &p);
  if (st) return st;
  int64_t *q = attn_tensor_i64(p);
  for (int64_t i = 0, j = 0; i < total; i++) {
    if (attn__poll_work(&work, 1)) {
      attn_tensor_release(p);
      return attn__limit_error(fn);
    }
    if (attn_tensor_get_flat_i64(m, i)) q[j++] = i;
  }
  *out = p;
  return ATTN_OK;
}

/* cur[..., tensor entry at dim d, ...] (the advanced part of a read). */
static attn_status read_adv(const char *fn, const attn_tensor *t, const attn_tensor *cur, int d, const attn_tensor *k,
                            bool leading, int tdim, attn_tensor **out) {
  attn_status st;
  attn_tensor *a = NULL, *b = NULL, *c = NULL;
  int64_t shape[ATTN_MAX_DIMS];
  int nd = 0;
  if (k->dtype == ATTN_BOOL) {
    /* merge the dims the mask covers into one, then pick the true ones */
    if ((st = mask_check(fn, t, cur, d, k, leading))) return st;
    int64_t p = 1;
    for (int j = 0; j < d; j++) shape[nd++] = cur->shape[j];
    for (int j = 0; j < k->ndim; j++) p *= cur->shape[d + j];
    shape[nd++] = p;
    for (int j = d + k->ndim; j < cur->ndim; j++) shape[nd++] = cur->shape[j];
    if ((st = mask_positions(fn, k, &a))) return st;
    if ((st = attn_reshape(cur, nd, shape, &b)) || (st = attn_index_select(b, d, a, out))) st = renamed(st, fn);
    attn_tensor_release(a);
    attn_tensor_release(b);
    return st;
  }
  if ((st = ids_for(fn, k, cur->shape[d], tdim, &a))) return st;
  int64_t n = attn_tensor_numel(a);
  for (int j = 0; j < d; j++) shape[nd++] = cur->shape[j];
  for (int j = 0; j < k->ndim; j++) shape[nd++] = k->shape[j];
  for (int j = d + 1; j < cur->ndim; j++) shape[nd++] = cur->shape[j];
  if ((st = attn_reshape(a, 1, &n, &b)) || (st = attn_index_select(cur, d, b, &c)) ||
      (st = attn_reshape(c, nd, shape, out)))
    st = renamed(st, fn);
  attn_tensor_release(a);
  attn_tensor_release(b);
  attn_tensor_release(c);
  return st;
}

/* t's dim where the tensor entry starts (for messages). */
static int adv_tdim(int n, const attn_index *key, const key_info *ki) {
  int od = 0;
  for (int i = 0; i < ki->adv && i < n; i++) {
    if (key[i].kind == ATTN_INDEX_INT || key[i].kind == ATTN_INDEX_SLICE) od++;
    if (key[i].kind == ATTN_INDEX_ELLIPSIS) od += ki->ell;
  }
  return od;
}

/* Whether the tensor entry is a mask on t's leading dims (nothing but
   whole dims before it). */
static bool adv_leading(int n, const attn_index *key, const key_info *ki) {
  for (int i = 0; i < ki->adv && i < n; i++)
    if (key[i].kind != ATTN_INDEX_ELLIPSIS || ki->ell > 0) return false;
  return true;
}

static attn_status get(const char *fn, const attn_tensor *t, int n, const attn_index *key, const key_info *ki,
                       attn_tensor **out) {
  attn_tensor *cur;
  int d;
  attn_status st = key_view(fn, t, n, key, ki, &cur, &d);
  if (st) return st;
  if (d < 0) {
    *out = cur;
    return ATTN_OK;
  }
  st = read_adv(fn, t, cur, d, ki->k, adv_leading(n, key, ki), adv_tdim(n, key, ki), out);
  attn_tensor_release(cur);
  return st;
}

attn_status attn_index_get(const attn_tensor *t, int n, const attn_index *key, attn_tensor **out) {
  if (!t || !out) return attn_set_error(ATTN_ERR_ARG, GET ": t and out must not be NULL");
  key_info ki;
  attn_status st = key_check(GET, t, n, key, &ki);
  return st ? st : get(GET, t, n, key, &ki, out);
}

/* ------------------------------------------------------------------------ */
/* Writes                                                                    */

static attn_status shape_mismatch(const char *fn, const attn_tensor *v, int nd, const int64_t *shape) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  return attn_set_error(ATTN_ERR_SHAPE,
                        "%s: shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape "
                        "%s (give one value per selected element, or a single value for all)",
                        fn, ATTN_SHAPE(v, sa), attn_shape_str(nd, shape, sb, sizeof sb));
}

/* The value of a write through an index tensor in t's dtype (retained):
   torch's index_put casts a 0-d value and refuses any other dtype. */
static attn_status put_value(const char *fn, const attn_tensor *v, attn_dtype dt, bool cast, attn_tensor **out) {
  if (v->dtype == dt) {
    *out = attn_tensor_retain((attn_tensor *)v);
    return ATTN_OK;
  }
  if (v->ndim > 0 && !cast)
    return attn_set_error(ATTN_ERR_ARG,
                          "%s: index put requires the value's dtype to match the tensor's: got a %s value for a %s "
                          "tensor (convert it with value:to(\"%s\"))",
                          fn, attn_dtype_name(v->dtype), attn_dtype_name(dt), attn_dtype_name(dt));
  attn_status st = attn_to_dtype(v, dt, out);
  return st ? renamed(st, fn) : ATTN_OK;
}

/* Commits t = where(hit, vals, t) where vals[r] = value row inv[r] of ve
   along dim (ve already broadcast).  hit: bool [m] viewed along dim of
   a tensor of dst's ndim. */
static attn_status put_where(const char *fn, attn_tensor *dst, const attn_tensor *ve, int dim, const attn_tensor *inv,
                             const attn_tensor *hit, int hnd, const int64_t *hshape, const int64_t *fshape) {
  attn_tensor *full = NULL, *fs = NULL, *hs = NULL, *w = NULL;
  attn_status st;
  if ((st = attn_index_select(ve, dim, inv, &full)) || (st = attn_reshape(full, dst->ndim, fshape, &fs)) ||
      (st = attn_reshape(hit, hnd, hshape, &hs)) || (st = attn_where(hs, fs, dst, &w)) || (st = attn_copy_(dst, w)))
    st = renamed(st, fn);
  attn_tensor_release(full);
  attn_tensor_release(fs);
  attn_tensor_release(hs);
  attn_tensor_release(w);
  return st;
}

/* The general write: the positions the key selects in t (the key read
   from arange(numel) shaped like t), the value broadcast to them, and
   t = where(hit, value at its position, t).  Differentiable in t and the
   value (where and copy_ record themselves). */
static attn_status put_positions(const char *fn, attn_tensor *t, int n, const attn_index *key, const key_info *ki,
                                 const attn_tensor *value) {
  int64_t total = attn_tensor_numel(t), work = 0;
  attn_tensor *pos = NULL, *posv = NULL, *P = NULL, *v = NULL, *ve = NULL, *vf = NULL, *inv = NULL, *hit = NULL;
  attn_status st;
  if ((st = attn_arange_i64(0, total, 1, &pos)) || (st = attn_reshape(pos, t->ndim, t->shape, &posv))) {
    st = renamed(st, fn);
    goto out;
  }
  if ((st = get(fn, posv, n, key, ki, &P))) goto out;
  if ((st = put_value(fn, value, t->dtype, ki->adv < 0, &v))) goto out;
  if (attn_expand(v, P->ndim, P->shape, &ve)) {
    st = shape_mismatch(fn, v, P->ndim, P->shape);
    goto out;
  }
  int64_t m = attn_tensor_numel(P);
  if ((st = attn_reshape(ve, 1, &m, &vf)) || (st = attn_empty_dtype(ATTN_INT64, 1, &total, &inv)) ||
      (st = attn_full_dtype(ATTN_BOOL, 1, &total, 0, &hit))) {
    st = renamed(st, fn);
    goto out;
  }
  int64_t *ip = attn_tensor_i64(inv);
  bool *hp = attn_tensor_bool(hit);
  memset(ip, 0, (size_t)total * sizeof *ip);
  for (int64_t j = 0; j < m; j++) {
    if (attn__poll_work(&work, 1)) {
      st = attn__limit_error(fn);
      goto out;
    }
    int64_t q = attn_tensor_get_flat_i64(P, j);
    ip[q] = j;
    hp[q] = true;
  }
  if (m > 0) st = put_where(fn, t, vf, 0, inv, hit, t->ndim, t->shape, t->shape);
out:
  attn_tensor_release(pos);
  attn_tensor_release(posv);
  attn_tensor_release(P);
  attn_tensor_release(v);
  attn_tensor_release(ve);
  attn_tensor_release(vf);
  attn_tensor_release(inv);
  attn_tensor_release(hit);
  return st;
}

/* t[mask] = value for a mask over t's leading dims: a 0-d float value
   fills; else the value broadcasts to [number of true entries, t's dims
   after the mask's...] and row j goes to the j-th true entry. */
static attn_status put_mask(const char *fn, attn_tensor *t, const attn_tensor *mask, const attn_tensor *value) {
  attn_status st = mask_check(fn, t, t, 0, mask, true);
  if (st) return st;
  int64_t mshape[ATTN_MAX_DIMS], rshape[ATTN_MAX_DIMS], work = 0;
  for (int d = 0; d < t->ndim; d++) mshape[d] = d < mask->ndim ? mask->shape[d] : 1;
  attn_tensor *mb = NULL, *v = NULL, *ve = NULL, *inv = NULL;
  if ((st = attn_reshape(mask, t->ndim, mshape, &mb))) return renamed(st, fn);
  if (value->ndim == 0 && t->dtype == ATTN_FLOAT32) {
    st = attn_masked_fill_(t, mb, (float)attn_tensor_get_flat_f64(value, 0));
    attn_tensor_release(mb);
    return st ? renamed(st, fn) : ATTN_OK;
  }
  int64_t npos = 0, total = attn_tensor_numel(mask);
  int rnd = 0;
  if ((st = put_value(fn, value, t->dtype, false, &v))) goto out;
  for (int64_t i = 0; i < total; i++) {
    if (attn__poll_work(&work, 1)) {
      st = attn__limit_error(fn);
      goto out;
    }
    npos += attn_tensor_get_flat_i64(mask, i) != 0;
  }
  rshape[rnd++] = npos;
  for (int d = mask->ndim; d < t->ndim; d++) rshape[rnd++] = t->shape[d];
  if (attn_expand(v, rnd, rshape, &ve)) {
    st = shape_mismatch(fn, v, rnd, rshape);
    goto out;
  }
  if (npos == 0) goto out;
  /* one row of the value per true entry: inv[p] = its row (0 elsewhere) */
  if ((st = attn_empty_dtype(ATTN_INT64, 1, &total, &inv))) goto out;
  int64_t *ip = attn_tensor_i64(inv);
  for (int64_t i = 0, j = 0; i < total; i++) {
    if (attn__poll_work(&work, 1)) {
      st = attn__limit_error(fn);
      goto out;
    }
    ip[i] = attn_tensor_get_flat_i64(mask, i) ? j++ : 0;
  }
  st = put_where(fn, t, ve, 0, inv, mb, t->ndim, mshape, t->shape);
out:
  attn_tensor_release(mb);
  attn_tensor_release(v);
  attn_tensor_release(ve);
  attn_tensor_release(inv);
  return st;
}

/* cur[..., ids at dim adv, ...] = value: row r of cur takes row j of the
   value (broadcast to the selected shape) where ids[j] = r (the last such
   j). */
static attn_status put_ids(const char *fn, attn_tensor *cur, int adv, int tdim, const attn_tensor *k,
                           const attn_tensor *value) {
  attn_tensor *idx = NULL, *v = NULL, *ve = NULL, *inv = NULL, *hit = NULL;
  int64_t m = cur->shape[adv], sshape[ATTN_MAX_DIMS], hshape[ATTN_MAX_DIMS], work = 0;
  attn_status st = ids_for(fn, k, m, tdim, &idx);
  if (st) return st;
  int64_t n = attn_tensor_numel(idx);
  for (int d = 0; d < cur->ndim; d++) sshape[d] = d == adv ? n : cur->shape[d];
  if ((st = put_value(fn, value, cur->dtype, false, &v))) goto out;
  if (attn_expand(v, cur->ndim, sshape, &ve)) {
    st = shape_mismatch(fn, v, cur->ndim, sshape);
    goto out;
  }
  if ((st = attn_empty_dtype(ATTN_INT64, 1, &m, &inv)) || (st = attn_full_dtype(ATTN_BOOL, 1, &m, 0, &hit))) goto out;
  int64_t *ip = attn_tensor_i64(inv);
  bool *hp = attn_tensor_bool(hit);
  const int64_t *ids = attn_tensor_i64(idx);
  memset(ip, 0, (size_t)m * sizeof *ip);
  for (int64_t j = 0; j < n; j++) {
    if (attn__poll_work(&work, 1)) {
      st = attn__limit_error(fn);
      goto out;
    }
    ip[ids[j]] = j;
    hp[ids[j]] = true;
  }
  if (n == 0) goto out;
  for (int d = 0; d < cur->ndim; d++) hshape[d] = d == adv ? m : 1;
  st = put_where(fn, cur, ve, adv, inv, hit, cur->ndim, hshape, cur->shape);
out:
  attn_tensor_release(idx);
  attn_tensor_release(v);
  attn_tensor_release(ve);
  attn_tensor_release(inv);
  attn_tensor_release(hit);
  return st;
}

attn_status attn_index_put(attn_tensor *t, int n, const attn_index *key, const attn_tensor *value) {
  if (!t || !value) return attn_set_error(ATTN_ERR_ARG, PUT ": t and value must not be NULL");
  key_info ki;
  attn_status st = key_check(PUT, t, n, key, &ki);
  if (st) return st;
  if (attn_grad_enabled() && (attn_requires_grad(t) || attn_requires_grad(value)))
    return put_positions(PUT, t, n, key, &ki, value);
  if (ki.k && ki.k->dtype == ATTN_BOOL) {
    if (n == 1) return put_mask(PUT, t, ki.k, value);
    return put_positions(PUT, t, n, key, &ki, value);
  }
  attn_tensor *cur;
  int adv;
  if ((st = key_view(PUT, t, n, key, &ki, &cur, &adv))) return st;
  if (adv < 0) {
    if ((st = attn_copy_(cur, value))) st = renamed(st, PUT);
  } else {
    st = put_ids(PUT, cur, adv, adv_tdim(n, key, &ki), ki.k, value);
  }
  attn_tensor_release(cur);
  return st;
}
