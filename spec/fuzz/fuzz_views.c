/* SPDX-License-Identifier: MIT */
/* Fuzz target: shape, stride and view arithmetic of the C core
 * (src/core/tensor/tensor.c, src/core/ops/shape_ops.c) with random arguments.
 *
 * The input is a program: a base tensor (shape from the bytes, values
 * 0, 1, 2, ... so every element says where it came from, optionally
 * requiring grad), then up to 48 steps, each picking an op (transpose, t,
 * permute, view, reshape, narrow, slice, select, unsqueeze, squeeze,
 * expand, flatten, as_strided, contiguous, clone, detach, split,
 * split_sizes, chunk, cat, stack, flip, repeat, tril, triu, index_select,
 * gather, fill_, copy_), an input from a pool of 4 tensors and arguments
 * (mostly plausible, sometimes edge values: negative, huge, out of range).
 * At the end a tensor that requires grad is summed and back-propagated.
 *
 * Reference model, checked after every call:
 *  - failure: the output is untouched and there is a message;
 *  - success: the result's shape is what the op's definition gives, every
 *    element a view can reach lies inside its storage, views share the
 *    input's storage, and each output element equals the input element
 *    that the op's index mapping names (all elements, or a sample of big
 *    results);
 *  - fill_/copy_: the written elements hold the value / the source as it
 *    was before the call (overlap included);
 *  - nothing leaks.
 * Storage is charged to a 16 MB budget, so huge shapes fail cleanly. */
#include "fuzz_common.h"

#include <limits.h>
#include <math.h>

#include "ops/ops.h"

/* ATTN_FUZZ_TRACE=1: print every call and its result (for turning a
   finding into a regression test). */
static bool trace;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  trace = getenv("ATTN_FUZZ_TRACE") != NULL;
  return 0;
}

static void show(const char *label, const attn_tensor *t) {
  char a[ATTN_SHAPE_BUF], b[ATTN_SHAPE_BUF];
  fprintf(stderr, "  %s shape %s stride %s offset %lld (storage %lld)\n", label,
          attn_shape_str(t->ndim, t->shape, a, sizeof a), attn_shape_str(t->ndim, t->stride, b, sizeof b),
          (long long)t->offset, (long long)t->storage->numel);
}

#define POOL 4
#define MAX_STEPS 48
#define FULL_CHECK (1 << 13) /* elements compared one by one; bigger results are sampled */

/* ------------------------------------------------------------------------ */
/* Checking helpers                                                          */

static void check_reach(const attn_tensor *t, const char *what) {
  FZ_CHECK(t->ndim >= 0 && t->ndim <= ATTN_MAX_DIMS, "%s: ndim %d", what, t->ndim);
  int64_t numel = attn__shape_numel(t->ndim, t->shape);
  FZ_CHECK(numel >= 0, "%s: invalid shape", what);
  if (numel == 0) return;
  int64_t lo = t->offset, hi = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    int64_t span = (t->shape[d] - 1) * t->stride[d];
    if (span < 0)
      lo += span;
    else
      hi += span;
  }
  FZ_CHECK(lo >= 0 && hi < t->storage->numel, "%s: reaches [%lld, %lld] of a storage of %lld", what, (long long)lo,
           (long long)hi, (long long)t->storage->numel);
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void check_shape(const attn_tensor *t, int ndim, const int64_t *shape, const char *what) {
  bool ok = t->ndim == ndim;
  for (int d = 0; ok && d < ndim; d++) ok = t->shape[d] == shape[d];
  if (!ok) {
    char a[ATTN_SHAPE_BUF], b[ATTN_SHAPE_BUF];
    FZ_CHECK(0, "%s: shape %s, expected %s", what, attn_shape_str(t->ndim, t->shape, a, sizeof a),
             attn_shape_str(ndim, shape, b, sizeof b));
  }
}

/* Output index -> input index (false: no input element, e.g. tril's zeros;
   *value then holds what the output must hold). */
typedef bool (*map_fn)(const int64_t *oi, int64_t *ii, float *value, const void *ctx);

/* Row-major index of flat position i in shape. */
static void unflatten(int64_t i, int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
}

static void check_map(const attn_tensor *in, const attn_tensor *out, map_fn f, const void *ctx, const char *what) {
  int64_t numel = attn_tensor_numel(out);
  if (numel == 0) return;
  int64_t count = numel <= FULL_CHECK ? numel : 512, oi[ATTN_MAX_DIMS], ii[ATTN_MAX_DIMS];
  for (int64_t k = 0; k < count; k++) {
    int64_t flat = numel <= FULL_CHECK ? k : (int64_t)(((uint64_t)k * 0x9e3779b97f4a7c15ull) % (uint64_t)numel);
    unflatten(flat, out->ndim, out->shape, oi);
    float want;
    if (f(oi, ii, &want, ctx)) {
      for (int d = 0; d < in->ndim; d++)
        FZ_CHECK(ii[d] >= 0 && ii[d] < in->shape[d], "%s: mapped index %lld out of dim %d of size %lld", what,
                 (long long)ii[d], d, (long long)in->shape[d]);
      want = attn_tensor_get(in, ii);
    }
    float got = attn_tensor_get(out, oi);
    FZ_CHECK(same_bits(got, want), "%s: output element %lld is %g, expected %g", what, (long long)flat, got, want);
  }
}

/* Ops that keep the row-major order of the elements. */
static void check_flat(const attn_tensor *in, const attn_tensor *out, const char *what) {
  int64_t n = attn_tensor_numel(in);
  FZ_CHECK(attn_tensor_numel(out) == n, "%s: %lld elements became %lld", what, (long long)n,
           (long long)attn_tensor_numel(out));
  int64_t count = n <= FULL_CHECK ? n : 512;
  for (int64_t k = 0; k < count; k++) {
    int64_t i = n <= FULL_CHECK ? k : (int64_t)(((uint64_t)k * 0x9e3779b97f4a7c15ull) % (uint64_t)n);
    float a = attn_tensor_get_flat(in, i), b = attn_tensor_get_flat(out, i);
    FZ_CHECK(same_bits(a, b), "%s: element %lld is %g, expected %g", what, (long long)i, b, a);
  }
}

/* ------------------------------------------------------------------------ */
/* Index mappings                                                            */

typedef struct {
  int ndim;    /* input dims */
  int dim, d1; /* the op's dims */
  int perm[ATTN_MAX_DIMS];
  int64_t start, step;
  int64_t k; /* tril/triu diagonal */
  bool lower;
  const attn_tensor *index; /* index_select / gather: 0-based values */
  int lead;                 /* expand / repeat: dims added in front */
  int64_t in_shape[ATTN_MAX_DIMS];
  int64_t stride[ATTN_MAX_DIMS], offset; /* as_strided geometry */
  const attn_tensor *base;
  bool flip[ATTN_MAX_DIMS];
} mapctx;

static bool map_transpose(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  if (c->ndim == 0) return true;
  memcpy(ii, oi, sizeof(int64_t) * (size_t)c->ndim);
  ii[c->dim] = oi[c->d1];
  ii[c->d1] = oi[c->dim];
  return true;
}

static bool map_permute(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  for (int k = 0; k < c->ndim; k++) ii[c->perm[k]] = oi[k];
  return true;
}

/* narrow and slice: ii[dim] = start + oi[dim] * step */
static bool map_slice(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  memcpy(ii, oi, sizeof(int64_t) * (size_t)c->ndim);
  ii[c->dim] = c->start + oi[c->dim] * c->step;
  return true;
}

static bool map_select(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  for (int d = 0, o = 0; d < c->ndim; d++) ii[d] = d == c->dim ? c->start : oi[o++];
  return true;
}

/* expand: leading new dims dropped, size-1 dims read at 0 */
static bool map_expand(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  for (int d = 0; d < c->ndim; d++) ii[d] = c->in_shape[d] == 1 ? 0 : oi[d + c->lead];
  return true;
}

/* repeat: out[i] = t[i mod padded shape] */
static bool map_repeat(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  for (int d = 0; d < c->ndim; d++) ii[d] = oi[d + c->lead] % c->in_shape[d];
  return true;
}

static bool map_flip(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  for (int d = 0; d < c->ndim; d++) ii[d] = c->flip[d] ? c->in_shape[d] - 1 - oi[d] : oi[d];
  return true;
}

/* tril/triu on the last two dims */
static bool map_triangle(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  memcpy(ii, oi, sizeof(int64_t) * (size_t)c->ndim);
  int64_t i = oi[c->ndim - 2], j = oi[c->ndim - 1];
  /* j - i compared without overflow: both are small indices */
  bool keep = c->lower ? (j - i <= c->k) : (j - i >= c->k);
  if (!keep) *v = 0.0f;
  return keep;
}

static bool map_index_select(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  memcpy(ii, oi, sizeof(int64_t) * (size_t)c->ndim);
  ii[c->dim] = (int64_t)attn_tensor_get_flat(c->index, oi[c->dim]);
  return true;
}

static bool map_gather(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  memcpy(ii, oi, sizeof(int64_t) * (size_t)c->ndim);
  ii[c->dim] = (int64_t)attn_tensor_get(c->index, oi);
  return true;
}

/* as_strided: storage[offset + sum oi * stride], compared through a 1-d
   view of the whole storage */
static bool map_as_strided(const int64_t *oi, int64_t *ii, float *v, const void *p) {
  const mapctx *c = p;
  int64_t pos = c->offset;
  for (int d = 0; d < c->ndim; d++) pos += oi[d] * c->stride[d];
  ii[0] = pos;
  return true;
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

/* A dim: usually valid for ndim dims (plus `extra`), sometimes anything. */
static int arg_dim(fz_bytes *b, int ndim, int extra) {
  uint8_t c = fz_u8(b);
  int n = ndim + extra;
  if (c < 0xf0 && n > 0) return c % n;
  int64_t v = fz_edge_i64(b);
  return v < INT_MIN ? INT_MIN : v > INT_MAX ? INT_MAX : (int)v;
}

/* A size: small, or an edge value. */
static int64_t arg_size(fz_bytes *b, int64_t plausible) {
  uint8_t c = fz_u8(b);
  if (c < 0xe0) return plausible > 0 ? c % (plausible + 1) : c % 3;
  return fz_edge_i64(b);
}

/* A shape with the same numel as t (random factorisation, maybe a -1), or
   random sizes. */
static int arg_shape(fz_bytes *b, const attn_tensor *t, int64_t *shape, bool allow_neg1) {
  int64_t numel = attn_tensor_numel(t);
  uint8_t mode = fz_u8(b);
  int ndim = fz_below(b, ATTN_MAX_DIMS + 1);
  if (mode < 0xc0) {
    int64_t left = numel;
    for (int d = 0; d < ndim; d++) {
      if (d == ndim - 1) {
        shape[d] = left;
        break;
      }
      /* a divisor of what is left */
      int64_t cand = 1 + fz_below(b, 8);
      shape[d] = left == 0 ? fz_below(b, 3) : (left % cand == 0 ? cand : 1);
      if (left != 0) left /= shape[d];
    }
    if (ndim == 0 && numel != 1) ndim = 1, shape[0] = numel;
    if (allow_neg1 && ndim > 0 && fz_bool(b)) shape[fz_below(b, ndim)] = -1;
  } else {
    for (int d = 0; d < ndim; d++) shape[d] = arg_size(b, 6);
  }
  return ndim;
}

/* ------------------------------------------------------------------------ */
/* The program                                                               */

typedef struct {
  attn_tensor *pool[POOL];
  attn_tensor *base; /* stands in for empty pool slots */
  fz_bytes b;
} state;

static void put(state *s, int slot, attn_tensor *t) {
  attn_tensor_release(s->pool[slot]);
  s->pool[slot] = t;
}

/* A call's outcome: checks what every call must satisfy. */
static bool ok(attn_status st, attn_tensor *out, const char *what) {
  if (trace) {
    fprintf(stderr, "%s: %s\n", what, st ? attn_last_error() : "ok");
    if (!st) show("->", out);
  }
  if (st) {
    FZ_CHECK_FAILED_WELL(st, out);
    return false;
  }
  FZ_CHECK(out != NULL, "%s: success without a result", what);
  check_reach(out, what);
  return true;
}

static void expect_view(const attn_tensor *in, const attn_tensor *out, const char *what) {
  FZ_CHECK(in->storage == out->storage, "%s: not a view", what);
}

/* One step; returns false when the input is used up. */
static bool step(state *s) {
  fz_bytes *b = &s->b;
  if (b->n == 0) return false;
  int op = fz_below(b, 30);
  int slot = fz_below(b, POOL), dst = fz_below(b, POOL);
  attn_tensor *t = s->pool[slot] ? s->pool[slot] : s->base;
  attn_tensor *o = NULL;
  attn_status st;
  if (trace) fprintf(stderr, "step: op %d on slot %d into %d\n", op, slot, dst), show("input", t);
  mapctx c;
  memset(&c, 0, sizeof c);
  c.ndim = t->ndim;
  memcpy(c.in_shape, t->shape, sizeof c.in_shape);
  int64_t shape[ATTN_MAX_DIMS + 2];
  switch (op) {
  case 0: /* transpose */
    c.dim = arg_dim(b, t->ndim, 0), c.d1 = arg_dim(b, t->ndim, 0);
    if ((st = attn_transpose(t, c.dim, c.d1, &o), ok(st, o, "transpose"))) {
      expect_view(t, o, "transpose");
      check_map(t, o, map_transpose, &c, "transpose");
    }
    break;
  case 1: /* t */
    if ((st = attn_t(t, &o), ok(st, o, "t"))) {
      FZ_CHECK(t->ndim <= 2, "t accepted %d dims", t->ndim);
      c.dim = 0, c.d1 = t->ndim == 2 ? 1 : 0;
      check_map(t, o, map_transpose, &c, "t");
    }
    break;
  case 2: { /* permute: a permutation from the bytes, or junk */
    for (int d = 0; d < t->ndim; d++) c.perm[d] = d;
    if (fz_u8(b) < 0xe0) {
      for (int d = t->ndim - 1; d > 0; d--) {
        int j = fz_below(b, d + 1), x = c.perm[d];
        c.perm[d] = c.perm[j], c.perm[j] = x;
      }
    } else {
      for (int d = 0; d < t->ndim; d++) c.perm[d] = arg_dim(b, t->ndim, 0);
    }
    if ((st = attn_permute(t, c.perm, &o), ok(st, o, "permute"))) {
      expect_view(t, o, "permute");
      check_map(t, o, map_permute, &c, "permute");
    }
    break;
  }
  case 3:
  case 4: { /* view, reshape */
    int nd = arg_shape(b, t, shape, true);
    st = op == 3 ? attn_view(t, nd, shape, &o) : attn_reshape(t, nd, shape, &o);
    if (ok(st, o, "view/reshape")) {
      if (op == 3) expect_view(t, o, "view");
      FZ_CHECK(o->ndim == nd, "view: %d dims, asked %d", o->ndim, nd);
      for (int d = 0; d < nd; d++) FZ_CHECK(shape[d] == -1 || o->shape[d] == shape[d], "view: size %d", d);
      check_flat(t, o, "view/reshape");
    } else if (op == 4) {
      /* reshape fails only for impossible shapes */
      FZ_CHECK(st != ATTN_ERR_SHAPE || attn_last_error()[0], "reshape");
    }
    break;
  }
  case 5: { /* narrow */
    c.dim = arg_dim(b, t->ndim, 0);
    int64_t size = c.dim >= 0 && c.dim < t->ndim ? t->shape[c.dim] : 4;
    c.start = arg_size(b, size);
    int64_t len = arg_size(b, size);
    c.step = 1;
    if ((st = attn_narrow(t, c.dim, c.start, len, &o), ok(st, o, "narrow"))) {
      expect_view(t, o, "narrow");
      memcpy(shape, t->shape, sizeof shape);
      shape[c.dim] = len;
      check_shape(o, t->ndim, shape, "narrow");
      check_map(t, o, map_slice, &c, "narrow");
    }
    break;
  }
  case 6: { /* slice: clamps start and end (step > 0) */
    c.dim = arg_dim(b, t->ndim, 0);
    int64_t size = c.dim >= 0 && c.dim < t->ndim ? t->shape[c.dim] : 4;
    int64_t start = arg_size(b, size), end = arg_size(b, size);
    c.step = fz_u8(b) < 0xe0 ? 1 + fz_below(b, 4) : fz_edge_i64(b);
    if ((st = attn_slice(t, c.dim, start, end, c.step, &o), ok(st, o, "slice"))) {
      expect_view(t, o, "slice");
      FZ_CHECK(c.step > 0, "slice accepted step %lld", (long long)c.step);
      int64_t s0 = start < 0 ? 0 : start, e0 = end > size ? size : end;
      if (e0 < s0) e0 = s0;
      memcpy(shape, t->shape, sizeof shape);
      /* ceil((e0 - s0) / step) without overflow */
      shape[c.dim] = e0 == s0 ? 0 : 1 + (e0 - s0 - 1) / c.step;
      check_shape(o, t->ndim, shape, "slice");
      c.start = s0;
      check_map(t, o, map_slice, &c, "slice");
    }
    break;
  }
  case 7: { /* select */
    c.dim = arg_dim(b, t->ndim, 0);
    int64_t size = c.dim >= 0 && c.dim < t->ndim ? t->shape[c.dim] : 4;
    c.start = fz_u8(b) < 0xe0 ? (size > 0 ? fz_below(b, (int)(size < 255 ? size : 255)) : 0) : fz_edge_i64(b);
    if ((st = attn_select(t, c.dim, c.start, &o), ok(st, o, "select"))) {
      expect_view(t, o, "select");
      FZ_CHECK(o->ndim == t->ndim - 1, "select: %d dims", o->ndim);
      check_map(t, o, map_select, &c, "select");
    }
    break;
  }
  case 8: { /* unsqueeze */
    int d = arg_dim(b, t->ndim, 1);
    if ((st = attn_unsqueeze(t, d, &o), ok(st, o, "unsqueeze"))) {
      expect_view(t, o, "unsqueeze");
      FZ_CHECK(o->ndim == t->ndim + 1 && o->shape[d] == 1, "unsqueeze: shape");
      check_flat(t, o, "unsqueeze");
    }
    break;
  }
  case 9: { /* squeeze: dim < 0 drops every size-1 dim */
    int d = fz_bool(b) ? -1 : arg_dim(b, t->ndim, 0);
    if ((st = attn_squeeze(t, d, &o), ok(st, o, "squeeze"))) {
      expect_view(t, o, "squeeze");
      int n = 0;
      for (int i = 0; i < t->ndim; i++)
        if (!(t->shape[i] == 1 && (d < 0 || d == i))) shape[n++] = t->shape[i];
      check_shape(o, n, shape, "squeeze");
      check_flat(t, o, "squeeze");
    }
    break;
  }
  case 10: { /* expand */
    int nd = t->ndim + fz_below(b, 3);
    if (nd > ATTN_MAX_DIMS || fz_u8(b) >= 0xf0) nd = fz_below(b, ATTN_MAX_DIMS + 2);
    int lead = nd - t->ndim;
    for (int d = 0; d < nd; d++) {
      int td = d - lead;
      uint8_t k = fz_u8(b);
      if (td >= 0 && k < 0x60)
        shape[d] = t->shape[td];
      else if (td >= 0 && k < 0xa0)
        shape[d] = -1;
      else
        shape[d] = arg_size(b, 5);
    }
    if ((st = attn_expand(t, nd, shape, &o), ok(st, o, "expand"))) {
      expect_view(t, o, "expand");
      FZ_CHECK(nd >= t->ndim, "expand to fewer dims");
      for (int d = 0; d < nd; d++) {
        int td = d - lead;
        int64_t want = td >= 0 && shape[d] == -1 ? t->shape[td] : shape[d];
        FZ_CHECK(o->shape[d] == want, "expand: size %d is %lld, asked %lld", d, (long long)o->shape[d],
                 (long long)shape[d]);
        FZ_CHECK(td < 0 || t->shape[td] == 1 || t->shape[td] == want, "expand: size %d of the input is not 1", d);
      }
      c.lead = lead;
      check_map(t, o, map_expand, &c, "expand");
    }
    break;
  }
  case 11: { /* flatten */
    int s0 = arg_dim(b, t->ndim, 0), e0 = arg_dim(b, t->ndim, 0);
    if ((st = attn_flatten(t, s0, e0, &o), ok(st, o, "flatten"))) {
      if (t->ndim > 0) FZ_CHECK(o->ndim == t->ndim - (e0 - s0), "flatten: %d dims", o->ndim);
      check_flat(t, o, "flatten");
    }
    break;
  }
  case 12: { /* as_strided on t's storage */
    int nd = fz_below(b, 5);
    for (int d = 0; d < nd; d++) {
      shape[d] = arg_size(b, 4);
      c.stride[d] = fz_u8(b) < 0xd0 ? fz_below(b, 7) : fz_edge_i64(b);
    }
    c.offset = fz_u8(b) < 0xd0 ? fz_below(b, 8) : fz_edge_i64(b);
    c.ndim = nd;
    if ((st = attn_as_strided(t, nd, shape, c.stride, c.offset, &o), ok(st, o, "as_strided"))) {
      expect_view(t, o, "as_strided");
      check_shape(o, nd, shape, "as_strided");
      /* compare against the storage seen as one long vector */
      attn_tensor *flat = NULL;
      int64_t n = t->storage->numel;
      if (attn__make_view(t, 0, 1, &n, (const int64_t[]){1}, &flat) == ATTN_OK) {
        check_map(flat, o, map_as_strided, &c, "as_strided");
        attn_tensor_release(flat);
      }
    }
    break;
  }
  case 13: /* contiguous */
    if ((st = attn_contiguous(t, &o), ok(st, o, "contiguous"))) {
      FZ_CHECK(attn_tensor_is_contiguous(o), "contiguous: result is not");
      check_flat(t, o, "contiguous");
    }
    break;
  case 14: /* clone */
    if ((st = attn_clone(t, &o), ok(st, o, "clone"))) {
      FZ_CHECK(o->storage != t->storage && attn_tensor_is_contiguous(o), "clone shares storage");
      check_flat(t, o, "clone");
    }
    break;
  case 15: /* detach */
    if ((st = attn_detach(t, &o), ok(st, o, "detach"))) {
      expect_view(t, o, "detach");
      FZ_CHECK(!attn_requires_grad(o), "detach: still requires grad");
      check_flat(t, o, "detach");
    }
    break;
  case 16:
  case 17:
  case 18: { /* split, split_sizes, chunk: pieces narrow along dim */
    int n = 0;
    attn_tensor **pieces = NULL;
    c.dim = arg_dim(b, t->ndim, 0);
    int64_t size = c.dim >= 0 && c.dim < t->ndim ? t->shape[c.dim] : 3;
    int64_t sizes[8];
    int nsizes = 0;
    if (op == 16) {
      st = attn_split(t, fz_u8(b) < 0xe0 ? fz_below(b, 5) : fz_edge_i64(b), c.dim, &n, &pieces);
    } else if (op == 17) {
      nsizes = fz_below(b, 8);
      int64_t left = size;
      for (int i = 0; i < nsizes; i++) {
        sizes[i] = fz_u8(b) < 0xe0 ? (i == nsizes - 1 ? left : (left > 0 ? fz_below(b, (int)(left % 200) + 1) : 0))
                                   : fz_edge_i64(b);
        if (sizes[i] >= 0 && sizes[i] <= left) left -= sizes[i];
      }
      st = attn_split_sizes(t, nsizes, sizes, c.dim, &n, &pieces);
    } else {
      st = attn_chunk(t, fz_u8(b) < 0xe0 ? fz_below(b, 6) : fz_edge_i64(b), c.dim, &n, &pieces);
    }
    if (st) {
      FZ_CHECK(pieces == NULL && attn_last_error()[0], "split failed badly");
      break;
    }
    FZ_CHECK(n >= 1 || size == 0, "split: %d pieces", n);
    c.start = 0, c.step = 1;
    for (int i = 0; i < n; i++) {
      check_reach(pieces[i], "split piece");
      expect_view(t, pieces[i], "split");
      FZ_CHECK(pieces[i]->ndim == t->ndim, "split piece dims");
      if (op == 17) FZ_CHECK(pieces[i]->shape[c.dim] == sizes[i], "split_sizes: piece %d", i);
      check_map(t, pieces[i], map_slice, &c, "split");
      c.start += pieces[i]->shape[c.dim];
    }
    FZ_CHECK(c.start == size, "split: pieces cover %lld of %lld", (long long)c.start, (long long)size);
    for (int i = 0; i < n; i++)
      if (i == 0)
        put(s, dst, pieces[i]);
      else
        attn_tensor_release(pieces[i]);
    free(pieces);
    if (n == 0) put(s, dst, NULL);
    return true;
  }
  case 19:
  case 20: { /* cat, stack of 1..3 pool tensors */
    const attn_tensor *ts[3];
    int n = 1 + fz_below(b, 3);
    for (int i = 0; i < n; i++) {
      ts[i] = s->pool[fz_below(b, POOL)];
      if (!ts[i]) ts[i] = t;
    }
    int d = arg_dim(b, t->ndim, op == 20);
    st = op == 19 ? attn_cat(n, ts, d, &o) : attn_stack(n, ts, d, &o);
    if (ok(st, o, op == 19 ? "cat" : "stack")) {
      /* each input is a narrow (cat) or a select (stack) of the result;
         cat leaves out 1-d inputs of size 0 (torch's legacy rule), all of
         them giving [0] */
      bool all_skipped = op == 19;
      for (int i = 0; i < n; i++) all_skipped &= ts[i]->ndim == 1 && ts[i]->shape[0] == 0;
      if (all_skipped) {
        check_shape(o, 1, (const int64_t[]){0}, "cat of empty tensors");
        break;
      }
      int64_t at = 0;
      for (int i = 0; i < n; i++) {
        attn_tensor *part = NULL;
        if (op == 19) {
          if (ts[i]->ndim == 1 && ts[i]->shape[0] == 0) continue;
          FZ_CHECK(attn_narrow(o, d, at, ts[i]->shape[d], &part) == ATTN_OK, "cat: result too small");
          at += ts[i]->shape[d];
        } else {
          FZ_CHECK(attn_select(o, d, i, &part) == ATTN_OK, "stack: result too small");
        }
        check_flat(ts[i], part, op == 19 ? "cat" : "stack");
        attn_tensor_release(part);
      }
      if (op == 19)
        FZ_CHECK(at == o->shape[d], "cat: parts cover %lld of %lld", (long long)at, (long long)o->shape[d]);
      else
        FZ_CHECK(o->shape[d] == n, "stack: %lld slices", (long long)o->shape[d]);
    }
    break;
  }
  case 21: { /* flip */
    int nd = fz_below(b, 4), dims[4];
    for (int i = 0; i < nd; i++) dims[i] = arg_dim(b, t->ndim, 0);
    if ((st = attn_flip(t, nd, dims, &o), ok(st, o, "flip"))) {
      for (int i = 0; i < nd; i++) c.flip[dims[i]] = true;
      check_shape(o, t->ndim, t->shape, "flip");
      check_map(t, o, map_flip, &c, "flip");
    }
    break;
  }
  case 22: { /* repeat */
    int nr = t->ndim + fz_below(b, 3);
    if (fz_u8(b) >= 0xf0) nr = fz_below(b, ATTN_MAX_DIMS + 2);
    int64_t reps[ATTN_MAX_DIMS + 2];
    for (int i = 0; i < nr; i++) reps[i] = arg_size(b, 3);
    if ((st = attn_repeat(t, nr, reps, &o), ok(st, o, "repeat"))) {
      c.lead = nr - t->ndim;
      for (int d = 0; d < nr; d++) {
        int td = d - c.lead;
        FZ_CHECK(o->shape[d] == (td < 0 ? 1 : t->shape[td]) * reps[d], "repeat: size %d", d);
      }
      check_map(t, o, map_repeat, &c, "repeat");
    }
    break;
  }
  case 23:
  case 24: { /* tril, triu */
    c.k = fz_u8(b) < 0xe0 ? fz_below(b, 7) - 3 : fz_edge_i64(b);
    c.lower = op == 23;
    if ((st = (op == 23 ? attn_tril : attn_triu)(t, c.k, &o), ok(st, o, "tril/triu"))) {
      FZ_CHECK(t->ndim >= 2, "tril/triu accepted %d dims", t->ndim);
      check_shape(o, t->ndim, t->shape, "tril/triu");
      /* clamp k so that j - i (|.| < sizes) compares the same way */
      if (c.k > INT32_MAX) c.k = INT32_MAX;
      if (c.k < INT32_MIN) c.k = INT32_MIN;
      check_map(t, o, map_triangle, &c, "tril/triu");
    }
    break;
  }
  case 25:
  case 26: { /* index_select (1-d index), gather (index with t's dims) */
    c.dim = arg_dim(b, t->ndim, 0);
    int64_t size = c.dim >= 0 && c.dim < t->ndim ? t->shape[c.dim] : 3;
    int ind = op == 25 ? 1 : t->ndim;
    int64_t ishape[ATTN_MAX_DIMS];
    for (int d = 0; d < ind; d++)
      ishape[d] = op == 25
                      ? fz_below(b, 6)
                      : (fz_u8(b) < 0xf0 ? fz_below(b, (int)(t->shape[d] < 5 ? t->shape[d] + 1 : 6)) : fz_below(b, 7));
    attn_tensor *index = NULL;
    if (attn_empty(ind, ishape, &index) != ATTN_OK) break;
    int64_t ni = attn_tensor_numel(index);
    for (int64_t i = 0; i < ni; i++) {
      uint8_t k = fz_u8(b);
      float v = k < 0xe0 ? (float)(size > 0 ? k % size : k % 3) : (float)fz_edge_f64(b);
      attn_tensor_data(index)[i] = v;
    }
    c.index = index;
    st = op == 25 ? attn_index_select(t, c.dim, index, &o) : attn_gather(t, c.dim, index, &o);
    if (ok(st, o, "index_select/gather")) {
      for (int64_t i = 0; i < ni; i++) {
        float v = attn_tensor_data(index)[i];
        FZ_CHECK(v >= 0 && v < size && v == floorf(v), "index %g accepted for a dim of %lld", v, (long long)size);
      }
      if (op == 25) {
        memcpy(shape, t->shape, sizeof shape);
        shape[c.dim] = ni;
        check_shape(o, t->ndim, shape, "index_select");
        check_map(t, o, map_index_select, &c, "index_select");
      } else {
        check_shape(o, ind, ishape, "gather");
        check_map(t, o, map_gather, &c, "gather");
      }
    }
    attn_tensor_release(index);
    break;
  }
  case 27: { /* fill_ a pool tensor (often a view of others) */
    float v = (float)fz_edge_f64(b);
    attn_tensor *target = s->pool[slot] ? s->pool[slot] : t;
    st = attn_fill_(target, v);
    if (st == ATTN_OK) {
      int64_t n = attn_tensor_numel(target);
      /* the value in the target's dtype, as torch stores it: int64
         truncates toward zero (an integer has no -0: + 0.0f makes
         truncf(-0.3) read back as 0), bool takes any nonzero as true */
      float want = target->dtype == ATTN_INT64 ? truncf(v) + 0.0f : target->dtype == ATTN_BOOL ? (float)(v != 0) : v;
      for (int64_t i = 0; i < n && i < FULL_CHECK; i++)
        FZ_CHECK(same_bits(attn_tensor_get_flat(target, i), want), "fill_: element %lld is %g, want %g (dtype %d)",
                 (long long)i, (double)attn_tensor_get_flat(target, i), (double)want, (int)target->dtype);
    } else {
      FZ_CHECK(attn_last_error()[0], "fill_ failed without a message");
    }
    return true;
  }
  case 28: { /* copy_ between pool tensors (they may overlap) */
    attn_tensor *target = s->pool[slot] ? s->pool[slot] : t;
    const attn_tensor *src = s->pool[dst] ? s->pool[dst] : t;
    int64_t n = attn_tensor_numel(target);
    float *want = NULL;
    attn_tensor *e = NULL;
    /* the source broadcast to the target, as it was before the call */
    bool fits = attn_expand(src, target->ndim, target->shape, &e) == ATTN_OK;
    if (fits && n <= FULL_CHECK) {
      want = malloc(sizeof *want * (size_t)(n ? n : 1));
      for (int64_t i = 0; i < n; i++) want[i] = attn_tensor_get_flat(e, i);
    }
    attn_tensor_release(e);
    st = attn_copy_(target, src);
    if (st == ATTN_OK) {
      FZ_CHECK(fits, "copy_ accepted a source that does not broadcast to the target");
      if (want && !attn__has_internal_overlap(target))
        for (int64_t i = 0; i < n; i++)
          FZ_CHECK(same_bits(attn_tensor_get_flat(target, i), want[i]), "copy_: element %lld is %g, expected %g",
                   (long long)i, attn_tensor_get_flat(target, i), want[i]);
    } else {
      FZ_CHECK(attn_last_error()[0], "copy_ failed without a message");
    }
    free(want);
    return true;
  }
  default: { /* one_hot of a pool tensor's values */
    int64_t classes = fz_u8(b) < 0xe0 ? fz_below(b, 6) - 1 : fz_edge_i64(b);
    if ((st = attn_one_hot(t, classes, &o), ok(st, o, "one_hot"))) {
      FZ_CHECK(o->ndim == t->ndim + 1, "one_hot: dims");
      int64_t n = attn_tensor_numel(t), k = o->shape[t->ndim];
      for (int64_t i = 0; i < n && (i + 1) * k <= FULL_CHECK; i++) {
        float v = attn_tensor_get_flat(t, i);
        FZ_CHECK(v >= 0 && v < k, "one_hot: index %g for %lld classes", v, (long long)k);
        for (int64_t j = 0; j < k; j++)
          FZ_CHECK(attn_tensor_get_flat(o, i * k + j) == (j == (int64_t)v ? 1.0f : 0.0f), "one_hot: row %lld",
                   (long long)i);
      }
    }
    break;
  }
  }
  if (o) put(s, dst, o);
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_debug_counts before;
  fz_counts(&before);
  attn_budget *budget = NULL;
  if (attn_budget_new((int64_t)16 << 20, &budget) != ATTN_OK) return 0;
  attn_budget *prev = attn_budget_set_current(budget);
  state s;
  memset(&s, 0, sizeof s);
  s.b = (fz_bytes){data, size};
  /* the base: values 0, 1, 2, ... */
  int64_t shape[ATTN_MAX_DIMS + 2];
  int nd = fz_below(&s.b, 5);
  int64_t numel = 1;
  for (int d = 0; d < nd; d++) {
    shape[d] = fz_below(&s.b, 6);
    numel *= shape[d];
  }
  bool grad = fz_u8(&s.b) >= 0xc0;
  attn_tensor *base = NULL;
  if (attn_empty(nd, shape, &base) != ATTN_OK) FZ_CHECK(0, "cannot make the base");
  for (int64_t i = 0; i < numel; i++) attn_tensor_data(base)[i] = (float)i;
  if (grad) FZ_CHECK(attn_requires_grad_(base, true) == ATTN_OK, "requires_grad_");
  s.base = base;
  s.pool[0] = attn_tensor_retain(base);
  for (int i = 0; i < MAX_STEPS && step(&s); i++) {}
  /* back-propagate from a pool tensor that requires grad */
  for (int i = 0; i < POOL; i++) {
    attn_tensor *t = s.pool[i];
    if (!t || !attn_requires_grad(t) || attn_tensor_numel(t) > FULL_CHECK) continue;
    attn_tensor *sum = NULL;
    if (attn_reduce_all(ATTN_SUM, t, NULL, &sum) != ATTN_OK) continue;
    attn_status st = attn_backward(sum, NULL, false);
    FZ_CHECK(st == ATTN_OK || attn_last_error()[0], "backward failed without a message");
    attn_tensor_release(sum);
    if (st == ATTN_OK && attn_grad(base)) check_shape(attn_grad(base), base->ndim, base->shape, "grad");
    break;
  }
  for (int i = 0; i < POOL; i++) attn_tensor_release(s.pool[i]);
  attn_tensor_release(base);
  attn_budget_set_current(prev);
  attn_budget_release(budget);
  fz_check_counts(&before);
  return 0;
}
