/* SPDX-License-Identifier: MIT */
/* Scatter and index ops (torch 1.13 semantics) and their backward:
 * scatter / scatter_add / scatter_reduce, index_add / index_copy /
 * index_fill, nonzero, masked_select, bucketize.
 *
 * Every op is out of place (a fresh copy of self is written into); the
 * in-place forms go through the core's in-place machinery.  Index values
 * are read through index_io.h.
 *
 * Shapes
 *   scatter*(self [S], dim, index [I], src [R]): same ndim; I[d] <= R[d]
 *     for every d and I[d] <= S[d] for d != dim; for each position p of
 *     index, out[p with p_dim = index[p]] (op)= src[p].
 *   index_*(self [A..., m, B...], dim, index [k], source [A..., k, B...]):
 *     out[a, index[j], b] (op)= source[a, j, b]. */
#include "ops/ops.h"
#include "index_io.h"

#include <math.h>

#define TRY(expr)                                                                                                      \
  do {                                                                                                                 \
    if ((st = (expr))) goto out;                                                                                       \
  } while (0)

static attn_status finish(attn_status st, attn_tensor *o, attn_tensor **out) {
  if (st) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* The scatter kernel                                                        */

typedef enum scatter_mode { MODE_SET, MODE_SUM, MODE_MEAN, MODE_AMAX, MODE_AMIN, MODE_PROD } scatter_mode;

static const char *mode_fn(scatter_mode m, bool reduce_api) {
  if (reduce_api) return "scatter_reduce";
  switch (m) {
  case MODE_SET: return "scatter";
  case MODE_SUM: return "scatter_add";
  default: return "scatter_reduce";
  }
}

static attn_status check_scatter(const char *fn, const attn_tensor *self, int dim, const attn_tensor *index,
                                 const attn_tensor *src) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF], sc[ATTN_SHAPE_BUF];
  attn_status st = attn__check_dim(fn, self, dim);
  if (st) return st;
  if (attn_tensor_numel(index) == 0) return ATTN_OK;
  if (index->ndim != self->ndim || (src && src->ndim != self->ndim))
    return attn_set_error(ATTN_ERR_SHAPE, "%s: self %s, index %s and src %s must have the same number of dims", fn,
                          ATTN_SHAPE(self, sa), ATTN_SHAPE(index, sb), src ? ATTN_SHAPE(src, sc) : "(a number)");
  for (int d = 0; d < self->ndim; d++) {
    /* (no dim numbers in messages: the binding's users count from 1) */
    if (d != dim && index->shape[d] > self->shape[d])
      return attn_set_error(ATTN_ERR_SHAPE, "%s: index %s is larger than self %s off the scatter dim", fn,
                            ATTN_SHAPE(index, sa), ATTN_SHAPE(self, sb));
    if (src && index->shape[d] > src->shape[d])
      return attn_set_error(ATTN_ERR_SHAPE, "%s: index %s is larger than src %s", fn, ATTN_SHAPE(index, sa),
                            ATTN_SHAPE(src, sb));
  }
  return attn__check_index(fn, index, self->shape[dim]);
}

/* out = copy of self; then for each index position the reduction.  src
   NULL: the number value instead.  counts (mean) and hits (include_self
   false) live in one scratch array of out's size. */
static attn_status scatter_into(scatter_mode mode, const attn_tensor *self, int dim, const attn_tensor *index,
                                const attn_tensor *src, float value, bool include_self, attn_tensor **out) {
  const char *fn = mode_fn(mode, mode > MODE_SUM);
  attn_tensor *o;
  attn_status st = attn_clone(self, &o);
  if (st) return st;
  int64_t n = attn_tensor_numel(index);
  if (n == 0) {
    *out = o;
    return ATTN_OK;
  }
  int nd = index->ndim;
  float *op = attn_tensor_data(o);
  float *cnt = NULL;
  size_t cbytes = (size_t)attn_tensor_numel(o) * sizeof(float);
  bool need_cnt = mode == MODE_MEAN || (!include_self && mode != MODE_SET);
  if (need_cnt) {
    if (!(cnt = attn__scratch_alloc(cbytes))) {
      attn_tensor_release(o);
      return attn__nomem(fn, (int64_t)cbytes);
    }
    float c0 = include_self ? 1.0f : 0.0f;
    for (int64_t i = 0; i < attn_tensor_numel(o); i++) cnt[i] = c0;
  }
  int64_t idx[ATTN_MAX_DIMS] = {0}, ipos = index->offset, spos = src ? src->offset : 0, opos = 0, work = 0;
  const float *sb = src ? (const float *)src->storage->data : NULL;
  for (int64_t e = 0; e < n; e++) {
    int64_t q = opos + attn__index_at(index, ipos) * o->stride[dim];
    float v = src ? sb[spos] : value;
    if (cnt && cnt[q] == 0.0f) { /* first value where self does not take part */
      op[q] = v;
    } else {
      switch (mode) {
      case MODE_SET: op[q] = v; break;
      case MODE_SUM:
      case MODE_MEAN: op[q] += v; break;
      case MODE_PROD: op[q] *= v; break;
      case MODE_AMAX:
        if (v > op[q] || isnan(v)) op[q] = v;
        break;
      case MODE_AMIN:
        if (v < op[q] || isnan(v)) op[q] = v;
        break;
      }
    }
    if (cnt) cnt[q] += 1.0f;
    /* odometer over index's shape; opos skips dim (the index supplies it) */
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < index->shape[d]) {
        ipos += index->stride[d];
        if (src) spos += src->stride[d];
        if (d != dim) opos += o->stride[d];
        break;
      }
      ipos -= index->stride[d] * (index->shape[d] - 1);
      if (src) spos -= src->stride[d] * (index->shape[d] - 1);
      if (d != dim) opos -= o->stride[d] * (index->shape[d] - 1);
      idx[d] = 0;
    }
    if (attn__poll_work(&work, 1)) {
      if (cnt) attn__scratch_free(cnt, cbytes);
      attn_tensor_release(o);
      return attn__limit_error(fn);
    }
  }
  if (mode == MODE_MEAN)
    for (int64_t i = 0; i < attn_tensor_numel(o); i++)
      if (cnt[i] > 0.0f) op[i] /= cnt[i];
  if (cnt) attn__scratch_free(cnt, cbytes);
  *out = o;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* scatter backward (torch 1.13's formulas, FunctionsManual.cpp)             */

/* (a == b) as 0/1 float32 (comparisons give bool) */
static attn_status eq_float(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  attn_tensor *e;
  attn_status st = attn_binary(ATTN_EQ, a, b, &e);
  if (st) return st;
  st = attn_to_dtype(e, ATTN_FLOAT32, out);
  attn_tensor_release(e);
  return st;
}

/* saved: [0] index, [1] self, [2] src, [3] result (what the mode needs);
   iargs: [0] dim, [1] mode, [2] include_self, [3] src is a tensor */
attn_status attn__scatter_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  int dim = (int)node->iargs[0];
  scatter_mode mode = (scatter_mode)node->iargs[1];
  bool include_self = node->iargs[2];
  const attn_tensor *index = node->saved[0];
  attn_tensor *gs = NULL, *gsrc = NULL, *n = NULL, *ones = NULL, *t1 = NULL, *t2 = NULL, *t3 = NULL;
  attn_status st = ATTN_OK;
  if (mode == MODE_SET) {
    if (node->next[0].node) TRY(attn_scatter_value(g, dim, index, 0.0f, &gs));
    if (node->iargs[3] && node->next[1].node) TRY(attn_gather(g, dim, index, &gsrc));
  } else if (mode == MODE_SUM) {
    if (node->next[0].node) {
      if (include_self)
        gs = attn_tensor_retain((attn_tensor *)g);
      else
        TRY(attn_scatter_value(g, dim, index, 0.0f, &gs));
    }
    if (node->next[1].node) TRY(attn_gather(g, dim, index, &gsrc));
  } else if (mode == MODE_MEAN) {
    /* n = include_self + hits, 1 where 0; grad_self = g / n, grad_src = gather(g / n) */
    const attn_tensor *src = node->saved[2];
    TRY(include_self ? attn_ones(g->ndim, g->shape, &t1) : attn_zeros(g->ndim, g->shape, &t1));
    TRY(attn_ones(src->ndim, src->shape, &ones));
    TRY(attn_scatter_add(t1, dim, index, ones, &n));
    {
      float *np = attn_tensor_data(n);
      for (int64_t i = 0; i < attn_tensor_numel(n); i++)
        if (np[i] == 0.0f) np[i] = 1.0f;
    }
    TRY(attn_binary(ATTN_DIV, g, n, &t2));
    if (node->next[0].node) {
      if (include_self)
        gs = attn_tensor_retain(t2);
      else
        TRY(attn_scatter_value(t2, dim, index, 0.0f, &gs));
    }
    if (node->next[1].node) TRY(attn_gather(t2, dim, index, &gsrc));
  } else { /* AMAX, AMIN: the gradient is shared equally by every element equal to the result */
    const attn_tensor *self = node->saved[1], *src = node->saved[2], *res = node->saved[3];
    attn_tensor *value = NULL, *self_is = NULL, *src_is = NULL, *nd = NULL, *gd = NULL;
    if ((st = attn_gather(res, dim, index, &value)) || (st = eq_float(self, res, &self_is)) ||
        (st = eq_float(src, value, &src_is)) || (st = attn_scatter_add(self_is, dim, index, src_is, &nd)) ||
        (st = attn_binary(ATTN_DIV, g, nd, &gd)))
      goto mm_out;
    if (node->next[0].node) {
      if ((st = attn_binary(ATTN_MUL, self_is, gd, &t1))) goto mm_out;
      if (include_self) {
        gs = t1;
        t1 = NULL;
      } else if ((st = attn_scatter_value(t1, dim, index, 0.0f, &gs))) {
        goto mm_out;
      }
    }
    if (node->next[1].node) {
      if ((st = attn_gather(gd, dim, index, &t3))) goto mm_out;
      st = attn_binary(ATTN_MUL, src_is, t3, &gsrc);
    }
  mm_out:
    attn_tensor_release(value);
    attn_tensor_release(self_is);
    attn_tensor_release(src_is);
    attn_tensor_release(nd);
    attn_tensor_release(gd);
    if (st) goto out;
  }
  if (gsrc && node->iargs[3]) {
    /* gather gives index's shape; src may be larger: pad with zeros */
    const attn__edge *se = &node->next[1];
    bool same = gsrc->ndim == se->ndim;
    for (int d = 0; same && d < se->ndim; d++) same = gsrc->shape[d] == se->shape[d];
    if (!same) {
      attn_tensor *full = NULL, *view = NULL;
      if ((st = attn_zeros(se->ndim, se->shape, &full))) goto out;
      view = full;
      attn_tensor_retain(view);
      for (int d = 0; d < se->ndim && !st; d++) {
        attn_tensor *nv;
        if ((st = attn_narrow(view, d, 0, gsrc->shape[d], &nv)) == ATTN_OK) {
          attn_tensor_release(view);
          view = nv;
        }
      }
      if (!st) st = attn_copy_(view, gsrc);
      attn_tensor_release(view);
      if (st) {
        attn_tensor_release(full);
        goto out;
      }
      attn_tensor_release(gsrc);
      gsrc = full;
    }
  }
  grads[0] = gs;
  gs = NULL;
  if (node->n_next > 1) {
    grads[1] = gsrc;
    gsrc = NULL;
  }
out:
  attn_tensor_release(gs);
  attn_tensor_release(gsrc);
  attn_tensor_release(n);
  attn_tensor_release(ones);
  attn_tensor_release(t1);
  attn_tensor_release(t2);
  attn_tensor_release(t3);
  return st;
}

static const char *scatter_node_name(scatter_mode mode, bool reduce_api, bool has_src) {
  if (reduce_api) return "ScatterReduceBackward0";
  switch (mode) {
  case MODE_SET: return has_src ? "ScatterBackward0" : "ScatterBackward1";
  case MODE_SUM: return "ScatterAddBackward0";
  default: return "ScatterReduceBackward0";
  }
}

static attn_status scatter_op(scatter_mode mode, bool reduce_api, const attn_tensor *self, int dim,
                              const attn_tensor *index, const attn_tensor *src, float value, bool include_self,
                              attn_tensor **out) {
  const char *fn = mode_fn(mode, reduce_api);
  attn_status st = check_scatter(fn, self, dim, index, src);
  if (!st) st = attn__float_only(fn, "self", self);
  if (!st && src) st = attn__float_only(fn, "src", src);
  if (st) return st;
  attn_tensor *o = NULL;
  if ((st = scatter_into(mode, self, dim, index, src, value, include_self, &o))) return st;
  const attn_tensor *ins[2] = {self, src};
  int nin = src ? 2 : 1;
  if (attn__ag_needed(nin, ins)) {
    if (mode == MODE_PROD)
      return finish(attn_set_error(ATTN_ERR_ARG, "scatter_reduce: reduce \"prod\" has no gradient here; "
                                                 "use it without autograd (attn.no_grad)"),
                    o, out);
    const attn_tensor *saved[4] = {index, self, src, o};
    int nsave = (mode == MODE_AMAX || mode == MODE_AMIN) ? 4 : (mode == MODE_MEAN ? 3 : 1);
    attn_node *node;
    /* saving o itself would make a cycle: keep a detached alias instead */
    attn_tensor *res = NULL;
    if (nsave == 4) {
      if ((st = attn_detach(o, &res))) return finish(st, o, out);
      saved[3] = res;
    }
    st = attn__ag_record(o, scatter_node_name(mode, reduce_api, src != NULL), ATTN__F_SCATTER, nin, ins, nsave, saved,
                         &node);
    attn_tensor_release(res);
    if (st) return finish(st, o, out);
    node->iargs[0] = dim;
    node->iargs[1] = mode;
    node->iargs[2] = include_self;
    node->iargs[3] = src != NULL;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_scatter(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *src,
                         attn_tensor **out) {
  return scatter_op(MODE_SET, false, self, dim, index, src, 0.0f, true, out);
}
attn_status attn_scatter_value(const attn_tensor *self, int dim, const attn_tensor *index, float value,
                               attn_tensor **out) {
  return scatter_op(MODE_SET, false, self, dim, index, NULL, value, true, out);
}
attn_status attn_scatter_add(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *src,
                             attn_tensor **out) {
  return scatter_op(MODE_SUM, false, self, dim, index, src, 0.0f, true, out);
}

attn_status attn_scatter_reduce(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *src,
                                const char *reduce, bool include_self, attn_tensor **out) {
  static const struct {
    const char *name;
    scatter_mode mode;
  } modes[] = {{"sum", MODE_SUM}, {"mean", MODE_MEAN}, {"amax", MODE_AMAX}, {"amin", MODE_AMIN}, {"prod", MODE_PROD}};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (strcmp(reduce, modes[i].name) == 0) {
      return scatter_op(modes[i].mode, true, self, dim, index, src, 0.0f, include_self, out);
    }
  return attn_set_error(ATTN_ERR_ARG,
                        "scatter_reduce: reduce must be \"sum\", \"prod\", \"mean\", \"amax\" or "
                        "\"amin\" (got \"%s\")",
                        reduce);
}

/* ------------------------------------------------------------------------ */
/* index_add / index_copy / index_fill                                      */

typedef enum index_mode { IDX_ADD, IDX_COPY, IDX_FILL } index_mode;
static const char *const index_fn[] = {"index_add", "index_copy", "index_fill"};

static attn_status check_index_op(index_mode mode, const attn_tensor *self, int dim, const attn_tensor *index,
                                  const attn_tensor *src) {
  const char *fn = index_fn[mode];
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  attn_status st = self->ndim == 0 && dim == 0 ? ATTN_OK : attn__check_dim(fn, self, dim);
  if (st) return st;
  if (index->ndim > 1)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: index must be 1-d, got %s", fn, ATTN_SHAPE(index, sa));
  int64_t k = attn_tensor_numel(index);
  if (src) {
    bool ok = src->ndim == self->ndim || (self->ndim == 0 && src->ndim <= 1);
    for (int d = 0; ok && d < self->ndim; d++) ok = src->shape[d] == (d == dim ? k : self->shape[d]);
    if (self->ndim == 0 && ok) ok = attn_tensor_numel(src) == k;
    if (!ok)
      return attn_set_error(ATTN_ERR_SHAPE,
                            "%s: source %s must be self %s with size %lld (the index's length) along the indexed dim",
                            fn, ATTN_SHAPE(src, sa), ATTN_SHAPE(self, sb), (long long)k);
  }
  return attn__check_index(fn, index, self->ndim ? self->shape[dim] : 1);
}

/* out = copy of self; out[a, index[j], b] (op)= alpha * src[a, j, b] (or value) */
static attn_status index_into(index_mode mode, const attn_tensor *self, int dim, const attn_tensor *index,
                              const attn_tensor *src, float alpha, attn_tensor **out) {
  attn_tensor *o = NULL, *s = NULL;
  attn_status st;
  if ((st = attn_clone(self, &o))) return st;
  if (src && (st = attn_contiguous(src, &s))) return finish(st, o, out);
  int64_t A = 1, B = 1, m = self->ndim ? self->shape[dim] : 1, k = attn_tensor_numel(index);
  for (int d = 0; d < dim && d < self->ndim; d++) A *= self->shape[d];
  for (int d = dim + 1; d < self->ndim; d++) B *= self->shape[d];
  float *op = attn_tensor_data(o);
  const float *sp = s ? attn_tensor_data(s) : NULL;
  attn__iter it;
  attn__iter_init(&it, index);
  int64_t work = 0;
  for (int64_t j = 0; j < k; j++, attn__iter_next(&it)) {
    int64_t v = attn__index_at(index, it.pos);
    for (int64_t a = 0; a < A; a++) {
      float *dst = op + (a * m + v) * B;
      const float *from = sp ? sp + (a * k + j) * B : NULL;
      switch (mode) {
      case IDX_ADD:
        for (int64_t b = 0; b < B; b++) dst[b] += alpha * from[b];
        break;
      case IDX_COPY:
        for (int64_t b = 0; b < B; b++) dst[b] = from[b];
        break;
      case IDX_FILL:
        for (int64_t b = 0; b < B; b++) dst[b] = alpha;
        break;
      }
    }
    if (attn__poll_work(&work, A * B)) {
      attn_tensor_release(s);
      return finish(attn__limit_error(index_fn[mode]), o, out);
    }
  }
  attn_tensor_release(s);
  *out = o;
  return ATTN_OK;
}

/* saved[0]: index; iargs: [0] dim, [1] mode; fargs[0]: alpha.
   index_add: grad_self = g, grad_src = alpha * g.index_select(dim, index);
   index_copy: grad_self = g.index_fill(dim, index, 0), grad_src = g.index_select;
   index_fill: grad_self = g.index_fill(dim, index, 0). */
attn_status attn__index_op_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  int dim = (int)node->iargs[0];
  index_mode mode = (index_mode)node->iargs[1];
  const attn_tensor *index = node->saved[0];
  attn_tensor *t = NULL, *gv = NULL;
  attn_status st = ATTN_OK;
  if (node->next[0].node) {
    if (mode == IDX_ADD)
      grads[0] = attn_tensor_retain((attn_tensor *)g);
    else
      TRY(attn_index_fill(g, dim, index, 0.0f, &grads[0]));
  }
  if (node->n_next > 1 && node->next[1].node) {
    if (g->ndim == 0)
      TRY(attn_reshape(g, 1, (int64_t[]){1}, &gv));
    else
      gv = attn_tensor_retain((attn_tensor *)g);
    TRY(attn_index_select(gv, g->ndim ? dim : 0, index, &t));
    if (mode == IDX_ADD && node->fargs[0] != 1.0) {
      attn_tensor *u;
      TRY(attn_binary_scalar(ATTN_MUL, t, (float)node->fargs[0], false, &u));
      attn_tensor_release(t);
      t = u;
    }
    const attn__edge *se = &node->next[1];
    TRY(attn_reshape(t, se->ndim, se->shape, &grads[1]));
  }
out:
  attn_tensor_release(t);
  attn_tensor_release(gv);
  return st;
}

static attn_status index_op(index_mode mode, const attn_tensor *self, int dim, const attn_tensor *index,
                            const attn_tensor *src, float alpha, attn_tensor **out) {
  attn_status st = check_index_op(mode, self, dim, index, src);
  if (!st) st = attn__float_only(index_fn[mode], "self", self);
  if (!st && src) st = attn__float_only(index_fn[mode], "source", src);
  if (st) return st;
  attn_tensor *o;
  if ((st = index_into(mode, self, dim, index, src, alpha, &o))) return st;
  const attn_tensor *ins[2] = {self, src};
  int nin = src ? 2 : 1;
  if (attn__ag_needed(nin, ins)) {
    static const char *const names[] = {"IndexAddBackward0", "IndexCopyBackward0", "IndexFillBackward0"};
    attn_node *node;
    if ((st = attn__ag_record(o, names[mode], ATTN__F_INDEX_OP, nin, ins, 1, &index, &node))) return finish(st, o, out);
    node->iargs[0] = dim;
    node->iargs[1] = mode;
    node->fargs[0] = alpha;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_index_add(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *source,
                           float alpha, attn_tensor **out) {
  return index_op(IDX_ADD, self, dim, index, source, alpha, out);
}
attn_status attn_index_copy(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *source,
                            attn_tensor **out) {
  return index_op(IDX_COPY, self, dim, index, source, 1.0f, out);
}
attn_status attn_index_fill(const attn_tensor *self, int dim, const attn_tensor *index, float value,
                            attn_tensor **out) {
  return index_op(IDX_FILL, self, dim, index, NULL, value, out);
}

/* ------------------------------------------------------------------------ */
/* In place: computed out of place, then written back (or committed to the
   graph when autograd follows the target). */

attn_status attn_inplace_result(const char *fn, attn_tensor *t, const attn_tensor *const *others, int nothers,
                                attn_tensor *result) {
  char sb[ATTN_SHAPE_BUF];
  if (attn__has_internal_overlap(t)) {
    attn_tensor_release(result);
    return attn_set_error(ATTN_ERR_ARG,
                          "%s: the destination %s is an expanded view whose elements share memory; "
                          "clone it before writing in place",
                          fn, ATTN_SHAPE(t, sb));
  }
  if (attn__ag_inplace_needed(t, nothers, others)) {
    attn_status st = attn__ag_inplace_check(fn, t);
    if (st) {
      attn_tensor_release(result);
      return st;
    }
    return attn__ag_inplace_commit(t, result);
  }
  attn_status st = attn_copy_(t, result);
  attn_tensor_release(result);
  return st;
}

/* ------------------------------------------------------------------------ */
/* nonzero, masked_select, bucketize (no gradient, except masked_select)   */

/* t [S] -> [n, ndim]: the 0-based positions of the non-zero elements in
   row-major order. */
attn_status attn_nonzero(const attn_tensor *t, attn_tensor **out) {
  if (attn_check_compute("nonzero", 1, "input", t)) return ATTN_ERR_ARG;
  int64_t count = 0, total = attn_tensor_numel(t), work = 0;
  attn__iter it;
  if (total > 0) {
    attn__iter_init(&it, t);
    do {
      count += attn__mask_at(t, it.pos);
      /* an expanded mask counts 2^40 elements in no memory: poll */
      if (attn__poll_work(&work, 1)) return attn__limit_error("nonzero");
    } while (attn__iter_next(&it));
    work = 0;
  }
  attn_tensor *o;
  attn_status st = attn__index_new("nonzero", 2, (int64_t[]){count, t->ndim}, &o);
  if (st) return st;
  if (count > 0) {
    int64_t k = 0;
    attn__iter_init(&it, t);
    do {
      if (attn__mask_at(t, it.pos)) {
        for (int d = 0; d < t->ndim; d++) attn__index_put(o, k * t->ndim + d, it.idx[d]);
        k++;
      }
      if (attn__poll_work(&work, 1)) return finish(attn__limit_error("nonzero"), o, out);
    } while (attn__iter_next(&it));
  }
  *out = o;
  return ATTN_OK;
}

/* g [n] goes back to the broadcast shape's selected positions, then sums
   to self's shape.  saved[0]: mask; iargs[0..]: broadcast ndim and shape */
attn_status attn__masked_select_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  int nd = (int)node->iargs[0];
  const int64_t *shape = &node->iargs[1];
  attn_tensor *z = NULL, *m = NULL, *gc = NULL;
  attn_status st;
  TRY(attn_zeros(nd, shape, &z));
  TRY(attn_expand(node->saved[0], nd, shape, &m));
  TRY(attn_contiguous(g, &gc));
  {
    float *zp = attn_tensor_data(z);
    const float *gp = attn_tensor_data(gc);
    int64_t k = 0, i = 0;
    if (attn_tensor_numel(z) > 0) {
      attn__iter it;
      attn__iter_init(&it, m);
      do {
        if (attn__mask_at(m, it.pos)) zp[i] = gp[k++];
        i++;
        if ((i & 0xffff) == 0 && attn__cancelled()) {
          st = attn__limit_error("masked_select backward");
          goto out;
        }
      } while (attn__iter_next(&it));
    }
  }
  st = attn__sum_to_shape(z, node->next[0].ndim, node->next[0].shape, &grads[0]);
out:
  attn_tensor_release(z);
  attn_tensor_release(m);
  attn_tensor_release(gc);
  return st;
}

/* t and mask broadcast together; -> 1-d of t's values where mask is set */
attn_status attn_masked_select(const attn_tensor *t, const attn_tensor *mask, attn_tensor **out) {
  if (attn_check_compute("masked_select", 1, "input", t) || attn_check_compute("masked_select", 2, "mask", mask))
    return ATTN_ERR_ARG;
  int nd;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st = attn_broadcast_shape("masked_select", t, mask, &nd, shape);
  if (st) return st;
  attn_tensor *te = NULL, *me = NULL, *o = NULL;
  TRY(attn_expand(t, nd, shape, &te));
  TRY(attn_expand(mask, nd, shape, &me));
  int64_t count = 0, total = attn__shape_numel(nd, shape), work = 0;
  attn__iter it, jt;
  if (total > 0) {
    attn__iter_init(&it, me);
    do {
      count += attn__mask_at(me, it.pos);
      /* an expanded mask counts 2^40 elements in no memory: poll */
      if (attn__poll_work(&work, 1)) {
        st = attn__limit_error("masked_select");
        goto out;
      }
    } while (attn__iter_next(&it));
  }
  TRY(attn__alloc_dtype("masked_select", t->dtype, 1, &count, &o)); /* any dtype, kept (torch) */
  if (count > 0) {
    const size_t es = attn_dtype_size(t->dtype);
    char *op = attn_tensor_ptr(o);
    const char *tb = (const char *)te->storage->data;
    int64_t k = 0;
    attn__iter_init(&it, me);
    attn__iter_init(&jt, te);
    do {
      if (attn__mask_at(me, it.pos)) memcpy(op + es * (size_t)k++, tb + es * (size_t)jt.pos, es);
      attn__iter_next(&jt);
      if (attn__poll_work(&work, 1)) {
        st = attn__limit_error("masked_select");
        goto out;
      }
    } while (attn__iter_next(&it));
  }
  if (attn__ag_needed(1, &t)) {
    attn_node *node;
    TRY(attn__ag_record(o, "MaskedSelectBackward0", ATTN__F_MASKED_SELECT, 1, &t, 1, &mask, &node));
    node->iargs[0] = nd;
    for (int d = 0; d < nd; d++) node->iargs[1 + d] = shape[d];
  }
out:
  attn_tensor_release(te);
  attn_tensor_release(me);
  if (st) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

/* t [S], boundaries [N] ascending -> [S] of 0-based bucket numbers in
   [0, N]: the first i with x <= boundaries[i] (right: x < boundaries[i]),
   N when there is none (torch.bucketize). */
attn_status attn_bucketize(const attn_tensor *t, const attn_tensor *boundaries, bool right, attn_tensor **out) {
  if (attn_check_compute("bucketize", 1, "input", t) || attn_check_compute("bucketize", 2, "boundaries", boundaries))
    return ATTN_ERR_ARG;
  char sb[ATTN_SHAPE_BUF];
  if (boundaries->ndim != 1)
    return attn_set_error(ATTN_ERR_SHAPE, "bucketize: boundaries must be 1-d, got %s", ATTN_SHAPE(boundaries, sb));
  attn_tensor *b = NULL, *bf = NULL, *tf = NULL, *o = NULL;
  attn_status st;
  /* compared as float32, whatever the dtypes */
  if ((st = attn_to_dtype(boundaries, ATTN_FLOAT32, &bf))) return st;
  st = attn_contiguous(bf, &b);
  attn_tensor_release(bf);
  if (st) return st;
  if ((st = attn_to_dtype(t, ATTN_FLOAT32, &tf))) {
    attn_tensor_release(b);
    return st;
  }
  t = tf;
  if ((st = attn__index_new("bucketize", t->ndim, t->shape, &o))) {
    attn_tensor_release(b);
    attn_tensor_release(tf);
    return st;
  }
  const float *bp = attn_tensor_data(b);
  int64_t N = b->shape[0], k = 0, work = 0;
  if (attn_tensor_numel(t) > 0) {
    attn__iter it;
    attn__iter_init(&it, t);
    const float *tb = (const float *)t->storage->data;
    do {
      float x = tb[it.pos];
      int64_t lo = 0, hi = N;
      while (lo < hi) { /* first boundary that x is below (or at, unless right) */
        int64_t mid = lo + (hi - lo) / 2;
        bool go_right = right ? !(x < bp[mid]) : !(x <= bp[mid]);
        if (go_right)
          lo = mid + 1;
        else
          hi = mid;
      }
      attn__index_put(o, k++, lo);
      if (attn__poll_work(&work, 1)) {
        attn_tensor_release(b);
        attn_tensor_release(tf);
        return finish(attn__limit_error("bucketize"), o, out);
      }
    } while (attn__iter_next(&it));
  }
  attn_tensor_release(b);
  attn_tensor_release(tf);
  *out = o;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Class targets                                                             */

attn_status attn_check_class_targets(const attn_tensor *t, int64_t lo, int64_t hi, bool has_ignore, int64_t ignore,
                                     bool *any_ignored, int64_t *first_bad) {
  if (!t || !any_ignored || !first_bad) return attn_set_error(ATTN_ERR_ARG, "check_class_targets: NULL argument");
  *any_ignored = false;
  *first_bad = -1;
  const int64_t n = attn_tensor_numel(t);
  if (t->dtype == ATTN_INT64 && attn_tensor_is_contiguous(t)) { /* the usual target: one tight loop */
    const int64_t *v = attn_tensor_i64(t);
    bool ign = false;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
      if ((i & 0xffff) == 0 && i && attn__cancelled()) return attn__limit_error("check_class_targets");
      const bool is_ignored = has_ignore && v[i] == ignore;
      ign |= is_ignored;
      if (bad < 0 && !is_ignored && (v[i] < lo || v[i] > hi)) bad = i;
    }
    *any_ignored = ign, *first_bad = bad;
    return ATTN_OK;
  }
  for (int64_t i = 0; i < n; i++) { /* floats must hold whole numbers */
    /* an expanded target is checked in no memory: poll */
    if ((i & 0xffff) == 0 && i && attn__cancelled()) return attn__limit_error("check_class_targets");
    const double x = attn_tensor_get_flat_f64(t, i);
    const bool is_ignored = has_ignore && x == (double)ignore;
    *any_ignored |= is_ignored;
    if (*first_bad < 0 && !is_ignored && !(x >= (double)lo && x <= (double)hi && x == floor(x))) *first_bad = i;
  }
  return ATTN_OK;
}
