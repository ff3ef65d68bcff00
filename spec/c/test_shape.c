/* SPDX-License-Identifier: MIT */
/* Shape operations against simple per-element reference implementations,
 * over random shapes and non-contiguous inputs (transposed, strided,
 * offset and broadcast views), plus views/sharing of split/chunk and the
 * error paths.  Every comparison is bit-exact: these ops only move values. */
#include "attn.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}
static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(rng() % (uint64_t)n) : 0; }
static float rndf(void) { return (float)((double)(rng() >> 11) / 9007199254740992.0 * 8.0 - 4.0); }

static void unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* t and (ndim, shape, data[]) hold the same values, bit for bit. */
static bool equals_data(const attn_tensor *t, int ndim, const int64_t *shape, const float *data) {
  if (t->ndim != ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (t->shape[d] != shape[d]) return false;
  int64_t n = attn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (!same_bits(attn_tensor_get_flat(t, i), data[i])) return false;
  return true;
}

static bool fresh_contiguous(const attn_tensor *t) {
  return attn_tensor_is_contiguous(t) && t->offset == 0 && t->refcount == 1;
}

/* A random trial's verdict (1 or 0): op returned a fresh contiguous result
   out equal to (ndim, shape, want); says why on stderr when not.  Releases
   out and frees want. */
static int trial_ok(const char *op, int trial, attn_status st, attn_tensor *out, int ndim, const int64_t *shape,
                    float *want) {
  bool good = st == ATTN_OK && equals_data(out, ndim, shape, want) && fresh_contiguous(out);
  if (!good) fprintf(stderr, "%s trial %d: %s\n", op, trial, st ? attn_last_error() : "mismatch");
  attn_tensor_release(out);
  free(want);
  return good;
}

/* A random tensor of the given shape, often a non-contiguous view: a
   transposed copy, a strided slice of a bigger tensor, or a broadcast. */
static attn_tensor *random_tensor(int ndim, const int64_t *shape) {
  int kind = (int)rnd(4);
  attn_tensor *t = NULL;
  if (kind == 1 && ndim >= 2) { /* transposed storage */
    int64_t s2[ATTN_MAX_DIMS];
    memcpy(s2, shape, sizeof(int64_t) * (size_t)ndim);
    int a = (int)rnd(ndim), b = (int)rnd(ndim);
    s2[a] = shape[b];
    s2[b] = shape[a];
    attn_tensor *base;
    if (attn_empty(ndim, s2, &base)) abort();
    for (int64_t i = 0; i < attn_tensor_numel(base); i++) attn_tensor_data(base)[i] = rndf();
    if (attn_transpose(base, a, b, &t)) abort();
    attn_tensor_release(base);
  } else if (kind == 2 && ndim >= 1) { /* every other element, offset by one */
    int64_t s2[ATTN_MAX_DIMS];
    memcpy(s2, shape, sizeof(int64_t) * (size_t)ndim);
    int d = (int)rnd(ndim);
    s2[d] = 2 * shape[d] + 1;
    attn_tensor *base;
    if (attn_empty(ndim, s2, &base)) abort();
    for (int64_t i = 0; i < attn_tensor_numel(base); i++) attn_tensor_data(base)[i] = rndf();
    if (attn_slice(base, d, 1, s2[d], 2, &t)) abort();
    attn_tensor_release(base);
  } else if (kind == 3 && ndim >= 1) { /* broadcast along one dim (stride 0) */
    int64_t s2[ATTN_MAX_DIMS];
    memcpy(s2, shape, sizeof(int64_t) * (size_t)ndim);
    int d = (int)rnd(ndim);
    s2[d] = 1;
    attn_tensor *base;
    if (attn_empty(ndim, s2, &base)) abort();
    for (int64_t i = 0; i < attn_tensor_numel(base); i++) attn_tensor_data(base)[i] = rndf();
    if (attn_expand(base, ndim, shape, &t)) abort();
    attn_tensor_release(base);
  } else {
    if (attn_empty(ndim, shape, &t)) abort();
    for (int64_t i = 0; i < attn_tensor_numel(t); i++) attn_tensor_data(t)[i] = rndf();
  }
  return t;
}

static void random_shape(int ndim, int64_t maxsize, int64_t *shape) {
  for (int d = 0; d < ndim; d++) shape[d] = rnd(maxsize + 1);
}

/* An index tensor of the shape with values in [0, limit); a transposed
   view half of the time. */
static attn_tensor *random_index(int ndim, const int64_t *shape, int64_t limit) {
  attn_tensor *t = random_tensor(ndim, shape);
  int64_t n = attn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    int64_t idx[ATTN_MAX_DIMS];
    unravel(i, ndim, shape, idx);
    attn_tensor_set(t, idx, (float)rnd(limit));
  }
  /* broadcast views alias elements: all aliases now hold the last value
     written, which is still a valid index */
  return t;
}

/* ------------------------------------------------------------------------ */
/* Reference implementations: one element at a time                         */

static float *ref_cat(int n, attn_tensor **ts, int dim, int64_t *oshape, int *ondim) {
  int ref = -1;
  for (int i = 0; i < n; i++)
    if (!(ts[i]->ndim == 1 && ts[i]->shape[0] == 0)) {
      ref = i;
      break;
    }
  if (ref < 0) {
    *ondim = 1;
    oshape[0] = 0;
    return malloc(1);
  }
  *ondim = ts[ref]->ndim;
  memcpy(oshape, ts[ref]->shape, sizeof(int64_t) * ATTN_MAX_DIMS);
  oshape[dim] = 0;
  for (int i = 0; i < n; i++)
    if (!(ts[i]->ndim == 1 && ts[i]->shape[0] == 0)) oshape[dim] += ts[i]->shape[dim];
  int64_t total = 1;
  for (int d = 0; d < *ondim; d++) total *= oshape[d];
  float *out = malloc(sizeof(float) * (size_t)(total ? total : 1));
  for (int64_t f = 0; f < total; f++) {
    int64_t idx[ATTN_MAX_DIMS];
    unravel(f, *ondim, oshape, idx);
    int i = 0;
    for (;; i++) {
      if (ts[i]->ndim == 1 && ts[i]->shape[0] == 0) continue;
      if (idx[dim] < ts[i]->shape[dim]) break;
      idx[dim] -= ts[i]->shape[dim];
    }
    out[f] = attn_tensor_get(ts[i], idx);
  }
  return out;
}

static float *ref_gather(const attn_tensor *t, int dim, const attn_tensor *index) {
  int64_t n = attn_tensor_numel(index);
  float *out = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t f = 0; f < n; f++) {
    int64_t idx[ATTN_MAX_DIMS];
    unravel(f, index->ndim, index->shape, idx);
    int64_t v = (int64_t)attn_tensor_get(index, idx);
    idx[dim] = v;
    out[f] = attn_tensor_get(t, idx);
  }
  return out;
}

static float *ref_index_select(const attn_tensor *t, int dim, const attn_tensor *index, int64_t *oshape) {
  memcpy(oshape, t->shape, sizeof(int64_t) * ATTN_MAX_DIMS);
  oshape[dim] = attn_tensor_numel(index);
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= oshape[d];
  float *out = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t f = 0; f < n; f++) {
    int64_t idx[ATTN_MAX_DIMS];
    unravel(f, t->ndim, oshape, idx);
    idx[dim] = (int64_t)attn_tensor_get_flat(index, idx[dim]);
    out[f] = attn_tensor_get(t, idx);
  }
  return out;
}

static float *ref_repeat(const attn_tensor *t, int nreps, const int64_t *reps, int64_t *oshape) {
  int lead = nreps - t->ndim;
  int64_t n = 1;
  for (int d = 0; d < nreps; d++) {
    oshape[d] = (d < lead ? 1 : t->shape[d - lead]) * reps[d];
    n *= oshape[d];
  }
  float *out = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t f = 0; f < n; f++) {
    int64_t idx[ATTN_MAX_DIMS], src[ATTN_MAX_DIMS];
    unravel(f, nreps, oshape, idx);
    for (int d = lead; d < nreps; d++) src[d - lead] = idx[d] % t->shape[d - lead];
    out[f] = attn_tensor_get(t, src);
  }
  return out;
}

static float *ref_stack(int n, attn_tensor **ts, int dim, int64_t *oshape) {
  const attn_tensor *r = ts[0];
  for (int d = 0, k = 0; d <= r->ndim; d++) oshape[d] = d == dim ? n : r->shape[k++];
  int64_t total = 1;
  for (int d = 0; d <= r->ndim; d++) total *= oshape[d];
  float *out = malloc(sizeof(float) * (size_t)(total ? total : 1));
  for (int64_t f = 0; f < total; f++) {
    int64_t idx[ATTN_MAX_DIMS + 1], src[ATTN_MAX_DIMS];
    unravel(f, r->ndim + 1, oshape, idx);
    for (int d = 0, k = 0; d <= r->ndim; d++)
      if (d != dim) src[k++] = idx[d];
    out[f] = attn_tensor_get(ts[idx[dim]], src);
  }
  return out;
}

static float *ref_flip(const attn_tensor *t, int ndims, const int *dims) {
  int64_t n = attn_tensor_numel(t);
  float *out = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t f = 0; f < n; f++) {
    int64_t idx[ATTN_MAX_DIMS];
    unravel(f, t->ndim, t->shape, idx);
    for (int i = 0; i < ndims; i++) idx[dims[i]] = t->shape[dims[i]] - 1 - idx[dims[i]];
    out[f] = attn_tensor_get(t, idx);
  }
  return out;
}

static float *ref_tri(const attn_tensor *t, int64_t k, bool lower) {
  int64_t n = attn_tensor_numel(t);
  float *out = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t f = 0; f < n; f++) {
    int64_t idx[ATTN_MAX_DIMS];
    unravel(f, t->ndim, t->shape, idx);
    int64_t j_minus_i = idx[t->ndim - 1] - idx[t->ndim - 2];
    bool keep = lower ? j_minus_i <= k : j_minus_i >= k;
    out[f] = keep ? attn_tensor_get(t, idx) : 0.0f;
  }
  return out;
}

/* ------------------------------------------------------------------------ */
/* Random comparisons                                                        */

static void test_cat_random(void) {
  int ok = 0, trials = 400;
  for (int trial = 0; trial < trials; trial++) {
    int ndim = 1 + (int)rnd(4), n = 1 + (int)rnd(4), dim = (int)rnd(ndim);
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(ndim, 4, shape);
    attn_tensor *ts[5];
    for (int i = 0; i < n; i++) {
      int64_t s[ATTN_MAX_DIMS];
      memcpy(s, shape, sizeof s);
      s[dim] = rnd(5);
      if (rnd(8) == 0) { /* legacy: a 1-d [0] tensor anywhere is skipped */
        int64_t zero = 0;
        if (attn_empty(1, &zero, &ts[i])) abort();
      } else {
        ts[i] = random_tensor(ndim, s);
      }
    }
    int64_t oshape[ATTN_MAX_DIMS];
    int ondim;
    float *want = ref_cat(n, ts, dim, oshape, &ondim);
    attn_tensor *out = NULL;
    attn_status st = attn_cat(n, (const attn_tensor *const *)ts, dim, &out);
    ok += trial_ok("cat", trial, st, out, ondim, oshape, want);
    for (int i = 0; i < n; i++) attn_tensor_release(ts[i]);
  }
  CHECK(ok == trials);
}

static void test_stack_random(void) {
  int ok = 0, trials = 200;
  for (int trial = 0; trial < trials; trial++) {
    int ndim = (int)rnd(4), n = 1 + (int)rnd(4), dim = (int)rnd(ndim + 1);
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(ndim, 4, shape);
    attn_tensor *ts[5];
    for (int i = 0; i < n; i++) ts[i] = random_tensor(ndim, shape);
    int64_t oshape[ATTN_MAX_DIMS];
    float *want = ref_stack(n, ts, dim, oshape);
    attn_tensor *out = NULL;
    attn_status st = attn_stack(n, (const attn_tensor *const *)ts, dim, &out);
    ok += trial_ok("stack", trial, st, out, ndim + 1, oshape, want);
    for (int i = 0; i < n; i++) attn_tensor_release(ts[i]);
  }
  CHECK(ok == trials);
}

static void test_index_select_random(void) {
  int ok = 0, trials = 400;
  for (int trial = 0; trial < trials; trial++) {
    int ndim = 1 + (int)rnd(4), dim = (int)rnd(ndim);
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(ndim, 5, shape);
    if (shape[dim] == 0) shape[dim] = 1 + rnd(5);
    attn_tensor *t = random_tensor(ndim, shape);
    int64_t k = rnd(7);
    attn_tensor *index = random_index(1, &k, shape[dim]);
    int64_t oshape[ATTN_MAX_DIMS];
    float *want = ref_index_select(t, dim, index, oshape);
    attn_tensor *out = NULL;
    attn_status st = attn_index_select(t, dim, index, &out);
    ok += trial_ok("index_select", trial, st, out, ndim, oshape, want);
    attn_tensor_release(index);
    attn_tensor_release(t);
  }
  CHECK(ok == trials);
}

static void test_gather_random(void) {
  int ok = 0, trials = 400;
  for (int trial = 0; trial < trials; trial++) {
    int ndim = 1 + (int)rnd(4), dim = (int)rnd(ndim);
    int64_t shape[ATTN_MAX_DIMS], ishape[ATTN_MAX_DIMS];
    random_shape(ndim, 5, shape);
    if (shape[dim] == 0) shape[dim] = 1 + rnd(5);
    for (int d = 0; d < ndim; d++) ishape[d] = d == dim ? rnd(7) : rnd(shape[d] + 1);
    attn_tensor *t = random_tensor(ndim, shape);
    attn_tensor *index = random_index(ndim, ishape, shape[dim]);
    float *want = ref_gather(t, dim, index);
    attn_tensor *out = NULL;
    attn_status st = attn_gather(t, dim, index, &out);
    ok += trial_ok("gather", trial, st, out, ndim, ishape, want);
    attn_tensor_release(index);
    attn_tensor_release(t);
  }
  CHECK(ok == trials);
}

static void test_repeat_random(void) {
  int ok = 0, trials = 400;
  for (int trial = 0; trial < trials; trial++) {
    int ndim = (int)rnd(4), nreps = ndim + (int)rnd(3);
    int64_t shape[ATTN_MAX_DIMS], reps[ATTN_MAX_DIMS];
    random_shape(ndim, 4, shape);
    for (int d = 0; d < nreps; d++) reps[d] = rnd(4);
    if (rnd(4) == 0)
      for (int d = 0; d < nreps; d++) reps[d] = 1 + rnd(3); /* mostly non-empty results */
    attn_tensor *t = random_tensor(ndim, shape);
    int64_t oshape[ATTN_MAX_DIMS];
    float *want = ref_repeat(t, nreps, reps, oshape);
    attn_tensor *out = NULL;
    attn_status st = attn_repeat(t, nreps, reps, &out);
    ok += trial_ok("repeat", trial, st, out, nreps, oshape, want);
    attn_tensor_release(t);
  }
  CHECK(ok == trials);
}

static void test_flip_random(void) {
  int ok = 0, trials = 300;
  for (int trial = 0; trial < trials; trial++) {
    int ndim = (int)rnd(5);
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(ndim, 4, shape);
    attn_tensor *t = random_tensor(ndim, shape);
    int dims[ATTN_MAX_DIMS], ndims = 0;
    for (int d = 0; d < ndim; d++)
      if (rnd(2)) dims[ndims++] = d;
    for (int i = ndims - 1; i > 0; i--) { /* any order */
      int j = (int)rnd(i + 1), tmp = dims[i];
      dims[i] = dims[j];
      dims[j] = tmp;
    }
    float *want = ref_flip(t, ndims, dims);
    attn_tensor *out = NULL;
    attn_status st = attn_flip(t, ndims, dims, &out);
    ok += trial_ok("flip", trial, st, out, ndim, shape, want);
    attn_tensor_release(t);
  }
  CHECK(ok == trials);
}

static void test_tri_random(void) {
  int ok = 0, trials = 300;
  for (int trial = 0; trial < trials; trial++) {
    int ndim = 2 + (int)rnd(3);
    int64_t shape[ATTN_MAX_DIMS];
    random_shape(ndim, 5, shape);
    attn_tensor *t = random_tensor(ndim, shape);
    int64_t k = rnd(13) - 6;
    if (rnd(20) == 0) k = rnd(2) ? INT64_MAX : INT64_MIN; /* clamped, no overflow */
    bool lower = rnd(2);
    float *want = ref_tri(t, k, lower);
    attn_tensor *out = NULL;
    attn_status st = lower ? attn_tril(t, k, &out) : attn_triu(t, k, &out);
    ok += trial_ok("tri", trial, st, out, ndim, shape, want);
    attn_tensor_release(t);
  }
  CHECK(ok == trials);
}

/* ------------------------------------------------------------------------ */
/* Fixed cases                                                               */

static attn_tensor *arange_shape(int ndim, const int64_t *shape) {
  attn_tensor *t;
  if (attn_empty(ndim, shape, &t)) abort();
  for (int64_t i = 0; i < attn_tensor_numel(t); i++) attn_tensor_data(t)[i] = (float)i;
  return t;
}

static void test_fixed(void) {
  /* tril / triu of a 3x4 matrix of 0..11 with k = 1 and -1 */
  int64_t s34[2] = {3, 4};
  attn_tensor *m = arange_shape(2, s34), *o = NULL;
  CHECK_OK(attn_tril(m, 1, &o));
  const float tril1[12] = {0, 1, 0, 0, 4, 5, 6, 0, 8, 9, 10, 11};
  CHECK(o && equals_data(o, 2, s34, tril1));
  attn_tensor_release(o);
  CHECK_OK(attn_triu(m, -1, &o));
  const float triu_1[12] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11};
  CHECK(o && equals_data(o, 2, s34, triu_1));
  attn_tensor_release(o);

  /* cat along dim 1 with a skipped [0] in the middle */
  int64_t s32[2] = {3, 2}, zero = 0;
  attn_tensor *b = arange_shape(2, s32), *e;
  CHECK_OK(attn_empty(1, &zero, &e));
  const attn_tensor *list[3] = {m, e, b};
  CHECK_OK(attn_cat(3, list, 1, &o));
  int64_t s36[2] = {3, 6};
  const float cat1[18] = {0, 1, 2, 3, 0, 1, 4, 5, 6, 7, 2, 3, 8, 9, 10, 11, 4, 5};
  CHECK(o && equals_data(o, 2, s36, cat1));
  attn_tensor_release(o);
  /* only skipped tensors: [0] */
  const attn_tensor *empties[2] = {e, e};
  o = NULL;
  CHECK_OK(attn_cat(2, empties, 0, &o));
  CHECK(o && o->ndim == 1 && o->shape[0] == 0);
  attn_tensor_release(o);

  /* repeat [3] by (2, 2) -> [2, 6] */
  int64_t three = 3, reps[2] = {2, 2}, s26[2] = {2, 6};
  attn_tensor *v = arange_shape(1, &three);
  CHECK_OK(attn_repeat(v, 2, reps, &o));
  const float rep[12] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2};
  CHECK(o && equals_data(o, 2, s26, rep));
  attn_tensor_release(o);
  /* 0-d with no reps: a copy */
  attn_tensor *sc;
  CHECK_OK(attn_scalar(7.0f, &sc));
  CHECK_OK(attn_repeat(sc, 0, NULL, &o));
  CHECK(o && o->ndim == 0 && attn_tensor_data(o)[0] == 7.0f && o->storage != sc->storage);
  attn_tensor_release(o);
  attn_tensor_release(sc);

  /* gather dim 1 */
  int64_t s22[2] = {2, 2};
  const float gi[4] = {3, 0, 1, 1};
  attn_tensor *gidx;
  CHECK_OK(attn_from_data(2, s22, gi, &gidx));
  CHECK_OK(attn_gather(m, 1, gidx, &o));
  const float g[4] = {3, 0, 5, 5};
  CHECK(o && equals_data(o, 2, s22, g));
  attn_tensor_release(o);
  attn_tensor_release(gidx);

  attn_tensor_release(v);
  attn_tensor_release(e);
  attn_tensor_release(b);
  attn_tensor_release(m);
}

/* ------------------------------------------------------------------------ */
/* split / chunk                                                             */

static void free_pieces(int n, attn_tensor **outs) {
  for (int i = 0; i < n; i++) attn_tensor_release(outs[i]);
  free(outs);
}

static void check_pieces(const char *what, const attn_tensor *t, int dim, int n, attn_tensor **outs, int want_n,
                         const int64_t *want_sizes) {
  bool ok = n == want_n;
  int64_t at = 0;
  for (int i = 0; ok && i < n; i++) {
    const attn_tensor *p = outs[i];
    ok = p->storage == t->storage && p->ndim == t->ndim && p->shape[dim] == want_sizes[i];
    for (int d = 0; ok && d < t->ndim; d++) ok = d == dim || p->shape[d] == t->shape[d];
    /* same values as the matching part of t */
    int64_t pn = attn_tensor_numel(p);
    for (int64_t f = 0; ok && f < pn; f++) {
      int64_t idx[ATTN_MAX_DIMS];
      unravel(f, p->ndim, p->shape, idx);
      float a = attn_tensor_get(p, idx);
      idx[dim] += at;
      ok = same_bits(a, attn_tensor_get(t, idx));
    }
    at += want_sizes[i];
  }
  if (!ok) fprintf(stderr, "%s: wrong pieces\n", what);
  CHECK(ok);
}

static void test_split_chunk(void) {
  int64_t s[3] = {2, 7, 3};
  attn_tensor *base = arange_shape(3, s), *t;
  CHECK_OK(attn_transpose(base, 0, 2, &t)); /* [3,7,2], non-contiguous */
  int n = -1;
  attn_tensor **outs = NULL;

  CHECK_OK(attn_split(t, 3, 1, &n, &outs));
  const int64_t w1[3] = {3, 3, 1};
  check_pieces("split 3", t, 1, n, outs, 3, w1);
  /* views: writing into a piece changes t */
  int64_t idx[3] = {1, 0, 1}, tidx[3] = {1, 6, 1};
  attn_tensor_set(outs[2], idx, -123.0f);
  CHECK(attn_tensor_get(t, tidx) == -123.0f);
  free_pieces(n, outs);

  CHECK_OK(attn_split(t, 7, 1, &n, &outs));
  const int64_t w2[1] = {7};
  check_pieces("split 7", t, 1, n, outs, 1, w2);
  free_pieces(n, outs);

  CHECK_OK(attn_split(t, 100, 0, &n, &outs));
  const int64_t w3[1] = {3};
  check_pieces("split 100", t, 0, n, outs, 1, w3);
  free_pieces(n, outs);

  const int64_t sizes[3] = {2, 0, 5};
  CHECK_OK(attn_split_sizes(t, 3, sizes, 1, &n, &outs));
  check_pieces("split_sizes", t, 1, n, outs, 3, sizes);
  free_pieces(n, outs);

  CHECK_OK(attn_chunk(t, 3, 1, &n, &outs)); /* 7 -> 3, 3, 1 */
  check_pieces("chunk 3", t, 1, n, outs, 3, w1);
  free_pieces(n, outs);

  CHECK_OK(attn_chunk(t, 4, 1, &n, &outs)); /* ceil(7/4) = 2 -> 2, 2, 2, 1 */
  const int64_t w4[4] = {2, 2, 2, 1};
  check_pieces("chunk 4", t, 1, n, outs, 4, w4);
  free_pieces(n, outs);

  int64_t six = 6;
  attn_tensor *v6 = arange_shape(1, &six);
  CHECK_OK(attn_chunk(v6, 4, 0, &n, &outs)); /* ceil(6/4) = 2 -> only 3 chunks */
  const int64_t w5[3] = {2, 2, 2};
  check_pieces("chunk 6/4", v6, 0, n, outs, 3, w5);
  free_pieces(n, outs);

  CHECK_OK(attn_chunk(t, 10, 2, &n, &outs)); /* more chunks than elements */
  const int64_t w6[2] = {1, 1};
  check_pieces("chunk 10", t, 2, n, outs, 2, w6);
  free_pieces(n, outs);

  /* empty dim: split gives one empty piece, chunk gives `chunks` of them */
  int64_t zs[2] = {0, 2};
  attn_tensor *z;
  CHECK_OK(attn_empty(2, zs, &z));
  const int64_t w7[3] = {0, 0, 0};
  CHECK_OK(attn_split(z, 2, 0, &n, &outs));
  check_pieces("split empty", z, 0, n, outs, 1, w7);
  free_pieces(n, outs);
  CHECK_OK(attn_split(z, 0, 0, &n, &outs));
  check_pieces("split 0 of empty", z, 0, n, outs, 1, w7);
  free_pieces(n, outs);
  CHECK_OK(attn_chunk(z, 3, 0, &n, &outs));
  check_pieces("chunk empty", z, 0, n, outs, 3, w7);
  free_pieces(n, outs);
  CHECK_OK(attn_split_sizes(z, 0, NULL, 0, &n, &outs));
  CHECK(n == 0);
  free_pieces(n, outs);

  attn_tensor_release(z);
  attn_tensor_release(v6);
  attn_tensor_release(t);
  attn_tensor_release(base);
}

/* ------------------------------------------------------------------------ */
/* Errors: status, message, untouched outputs                                */

#define SENTINEL ((attn_tensor *)(uintptr_t)0x5eed)

static bool has(const char *s) { return strstr(attn_last_error(), s) != NULL; }

static void check_err(attn_status got, attn_status want, attn_tensor *out, const char *needle) {
  CHECK(got == want);
  CHECK(out == SENTINEL);
  if (!has(needle)) fprintf(stderr, "message \"%s\" lacks \"%s\"\n", attn_last_error(), needle);
  CHECK(has(needle));
}

static void test_errors(void) {
  int64_t s23[2] = {2, 3}, s24[2] = {2, 4}, s3[1] = {3}, s232[3] = {2, 3, 2};
  attn_tensor *a = arange_shape(2, s23), *b = arange_shape(2, s24), *v = arange_shape(1, s3),
              *c = arange_shape(3, s232), *sc, *o = SENTINEL;
  CHECK_OK(attn_scalar(1.0f, &sc));

  /* cat */
  const attn_tensor *ab[2] = {a, b}, *av[2] = {a, v}, *asc[2] = {a, sc};
  check_err(attn_cat(0, ab, 0, &o), ATTN_ERR_ARG, o, "non-empty");
  check_err(attn_cat(2, ab, 0, &o), ATTN_ERR_SHAPE, o, "ts[1] has shape [2,4] but ts[0] has shape [2,3]");
  CHECK(has("except in dim 0"));
  check_err(attn_cat(2, av, 0, &o), ATTN_ERR_SHAPE, o, "same number of dims");
  check_err(attn_cat(2, asc, 0, &o), ATTN_ERR_SHAPE, o, "ts[1] is 0-d");
  check_err(attn_cat(2, ab, 2, &o), ATTN_ERR_INDEX, o, "dim 2 out of range");

  /* stack */
  check_err(attn_stack(0, ab, 0, &o), ATTN_ERR_ARG, o, "non-empty");
  check_err(attn_stack(2, ab, 0, &o), ATTN_ERR_SHAPE, o, "ts[1] has shape [2,4] but ts[0] has shape [2,3]");
  const attn_tensor *aa[2] = {a, a};
  check_err(attn_stack(2, aa, 3, &o), ATTN_ERR_INDEX, o, "dim 3 out of range");

  /* index_select */
  int64_t two = 2;
  const float bad_idx[2] = {0, 3}, frac_idx[2] = {0, 1.5f};
  attn_tensor *i1, *i2, *i3;
  CHECK_OK(attn_from_data(1, &two, bad_idx, &i1));
  CHECK_OK(attn_from_data(1, &two, frac_idx, &i2));
  check_err(attn_index_select(a, 1, i1, &o), ATTN_ERR_INDEX, o, "index 3 out of range [0, 3)");
  check_err(attn_index_select(a, 1, i2, &o), ATTN_ERR_ARG, o, "not an integer");
  check_err(attn_index_select(a, 2, i1, &o), ATTN_ERR_INDEX, o, "dim 2 out of range");
  check_err(attn_index_select(a, 0, a, &o), ATTN_ERR_SHAPE, o, "index must be 1-d, got shape [2,3]");

  /* gather */
  int64_t s33[2] = {3, 3};
  CHECK_OK(attn_zeros(2, s33, &i3));
  check_err(attn_gather(a, 1, i3, &o), ATTN_ERR_SHAPE, o, "index [3,3] does not fit the input [2,3]");
  CHECK(has("at dim 0"));
  check_err(attn_gather(a, 1, i1, &o), ATTN_ERR_SHAPE, o, "as many dims");
  attn_tensor *i4;
  const float g4[4] = {0, 1, 2, 3};
  int64_t s22[2] = {2, 2};
  CHECK_OK(attn_from_data(2, s22, g4, &i4));
  check_err(attn_gather(a, 1, i4, &o), ATTN_ERR_INDEX, o, "index 3 out of range [0, 3)");
  CHECK(attn_gather(a, 0, i4, &o) == ATTN_ERR_INDEX);
  CHECK(o == SENTINEL);
  /* values are checked while copying: the half-filled output must go */
  const float g5[4] = {0, 1, 2, 0.5f}, g6[4] = {0, 1, 2, NAN};
  attn_tensor *i5, *i6;
  CHECK_OK(attn_from_data(2, s22, g5, &i5));
  CHECK_OK(attn_from_data(2, s22, g6, &i6));
  check_err(attn_gather(a, 1, i5, &o), ATTN_ERR_ARG, o, "gather: index 0.5 is not an integer");
  check_err(attn_gather(a, 1, i6, &o), ATTN_ERR_ARG, o, "is not an integer");
  attn_tensor_release(i5);
  attn_tensor_release(i6);

  /* split / chunk: outputs untouched */
  int n = -7;
  attn_tensor **outs = (attn_tensor **)SENTINEL;
  CHECK(attn_split(a, 0, 1, &n, &outs) == ATTN_ERR_ARG && n == -7 && outs == (attn_tensor **)SENTINEL);
  CHECK(has("split size can only be 0"));
  CHECK(attn_split(a, -1, 1, &n, &outs) == ATTN_ERR_ARG && n == -7);
  CHECK(attn_split(a, 1, 2, &n, &outs) == ATTN_ERR_INDEX && n == -7);
  CHECK(attn_split(sc, 1, 0, &n, &outs) == ATTN_ERR_INDEX && n == -7);
  const int64_t bad_sizes[2] = {1, 1}, neg_sizes[2] = {4, -1};
  CHECK(attn_split_sizes(a, 2, bad_sizes, 1, &n, &outs) == ATTN_ERR_SHAPE && n == -7);
  CHECK(has("sizes [1,1] must add up to 3"));
  CHECK(attn_split_sizes(a, 2, neg_sizes, 1, &n, &outs) == ATTN_ERR_ARG && n == -7);
  CHECK(attn_chunk(a, 0, 1, &n, &outs) == ATTN_ERR_ARG && n == -7);
  CHECK(has("must be positive"));
  CHECK(outs == (attn_tensor **)SENTINEL);

  /* repeat */
  int64_t reps1[1] = {2}, reps_neg[2] = {2, -1}, reps_big[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
  check_err(attn_repeat(a, 1, reps1, &o), ATTN_ERR_ARG, o, "need at least 2");
  check_err(attn_repeat(a, 2, reps_neg, &o), ATTN_ERR_ARG, o, "negative repeat count -1");
  check_err(attn_repeat(a, 2, reps_big, &o), ATTN_ERR_NOMEM, o, "too many elements");
  int64_t reps9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  check_err(attn_repeat(a, 9, reps9, &o), ATTN_ERR_ARG, o, "at most 8");

  /* flip */
  int dup[2] = {1, 1}, oob[1] = {2};
  check_err(attn_flip(a, 2, dup, &o), ATTN_ERR_ARG, o, "dim 1 appears more than once");
  check_err(attn_flip(a, 1, oob, &o), ATTN_ERR_INDEX, o, "dim 2 out of range");

  /* tril */
  check_err(attn_tril(v, 0, &o), ATTN_ERR_SHAPE, o, "at least 2 dims, got [3]");
  check_err(attn_triu(sc, 0, &o), ATTN_ERR_SHAPE, o, "triu:");

  attn_tensor *parts[4] = {a, b, v, c};
  for (int i = 0; i < 4; i++) attn_tensor_release(parts[i]);
  attn_tensor_release(sc);
  attn_tensor_release(i1);
  attn_tensor_release(i2);
  attn_tensor_release(i3);
  attn_tensor_release(i4);
}

/* Large-ish contiguous inputs: the memcpy paths over long rows. */
static void test_large(void) {
  int64_t s[2] = {257, 1031}, s2[2] = {3, 1031};
  attn_tensor *x, *y;
  if (attn_empty(2, s, &x) || attn_empty(2, s2, &y)) abort();
  for (int64_t i = 0; i < attn_tensor_numel(x); i++) attn_tensor_data(x)[i] = rndf();
  for (int64_t i = 0; i < attn_tensor_numel(y); i++) attn_tensor_data(y)[i] = rndf();
  attn_tensor *ts[2] = {x, y}, *o = NULL;
  int64_t os[ATTN_MAX_DIMS];
  int ond;
  float *want = ref_cat(2, ts, 0, os, &ond);
  CHECK_OK(attn_cat(2, (const attn_tensor *const *)ts, 0, &o));
  CHECK(o && equals_data(o, ond, os, want));
  attn_tensor_release(o);
  free(want);
  int64_t k = 500;
  attn_tensor *idx = random_index(1, &k, 257);
  want = ref_index_select(x, 0, idx, os);
  CHECK_OK(attn_index_select(x, 0, idx, &o));
  CHECK(o && equals_data(o, 2, os, want));
  attn_tensor_release(o);
  free(want);
  int64_t reps[3] = {2, 3, 2};
  want = ref_repeat(y, 3, reps, os);
  CHECK_OK(attn_repeat(y, 3, reps, &o));
  CHECK(o && equals_data(o, 3, os, want));
  attn_tensor_release(o);
  free(want);
  attn_tensor_release(idx);
  attn_tensor_release(x);
  attn_tensor_release(y);
}

int main(void) {
  test_cat_random();
  test_stack_random();
  test_index_select_random();
  test_gather_random();
  test_repeat_random();
  test_flip_random();
  test_tri_random();
  test_fixed();
  test_split_chunk();
  test_errors();
  test_large();
  return check_summary();
}
