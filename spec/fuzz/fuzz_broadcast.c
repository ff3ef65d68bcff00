/* SPDX-License-Identifier: MIT */
/* Fuzz target: broadcasting and strided elementwise kernels, and batched
 * matmul (src/core/ops/elementwise.c, tensor.c's copy/iteration helpers,
 * linalg.c).
 *
 * The input gives a common shape (up to 5 dims), then up to 16 steps, each
 * making operands of shapes that broadcast to it (leading dims dropped,
 * sizes set to 1; sometimes a random, incompatible shape) in one of several
 * layouts: fresh, transposed, expanded (stride 0), stepped slices, or
 * as_strided views into one shared arena so that operands alias each other
 * and the destination of in-place ops.  Values are small integers or edge
 * floats (NaN, inf, -0, huge, subnormal).  Ops: binary (all 15 ops), in
 * place and with a scalar, unary (all 23), where, masked_fill (and in
 * place), add_scaled, clamp, broadcast_shape, matmul (1-d .. 4-d operands).
 *
 * Reference model:
 *  - the result shape is NumPy's broadcast of the operands (the harness
 *    computes it on its own), and failures happen exactly when the shapes
 *    do not broadcast (or an in-place result would not fit / the
 *    destination has internal overlap);
 *  - every element equals the scalar definition applied to the operands'
 *    elements at the broadcast index, read before the call (so aliasing
 *    in-place ops must behave as if the inputs were copied first); NaN
 *    equals NaN;
 *  - unary ops on a strided operand equal the same op on a contiguous copy;
 *  - matmul of small integers is exact: it must equal the harness's triple
 *    loop, torch.matmul's shape rules included;
 *  - nothing leaks. */
#include "fuzz_common.h"

#include <math.h>

#include "ops/ops.h"

static bool trace;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  trace = getenv("ATTN_FUZZ_TRACE") != NULL;
  return 0;
}

#define MAXD 5
#define ARENA 96

/* ------------------------------------------------------------------------ */
/* Scalar definitions (attn.h / torch float semantics)                       */

static float ref_pow(float x, float y) {
  if (y == 2.0f) return x * x;
  if (y == 0.5f) return sqrtf(x);
  if (y == -0.5f) return 1.0f / sqrtf(x);
  if (y == 1.0f) return x;
  return powf(x, y);
}

static float ref_binary(attn_binary_op op, float x, float y) {
  switch (op) {
  case ATTN_ADD: return x + y;
  case ATTN_SUB: return x - y;
  case ATTN_MUL: return x * y;
  case ATTN_DIV: return x / y;
  case ATTN_POW: return ref_pow(x, y);
  case ATTN_EQ: return x == y;
  case ATTN_NE: return x != y;
  case ATTN_LT: return x < y;
  case ATTN_LE: return x <= y;
  case ATTN_GT: return x > y;
  case ATTN_GE: return x >= y;
  case ATTN_MAXIMUM: return (x != x || y != y) ? NAN : (x > y ? x : y);
  case ATTN_MINIMUM: return (x != x || y != y) ? NAN : (x < y ? x : y);
  case ATTN_ATAN2: return atan2f(x, y);
  case ATTN_FMOD: return fmodf(x, y);
  default: return NAN;
  }
}

/* Equal bits, or both NaN (payloads may differ between code paths). */
static bool same(float a, float b) { return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0; }

/* ------------------------------------------------------------------------ */
/* Operands                                                                  */

typedef struct {
  fz_bytes b;
  attn_tensor *arena; /* shared storage for aliasing operands */
} state;

static float gen_value(fz_bytes *b) {
  uint8_t c = fz_u8(b);
  if (c < 0xd0) return (float)((int)(c % 9) - 4);
  return (float)fz_edge_f64(b);
}

static void fill(fz_bytes *b, attn_tensor *t) {
  int64_t n = attn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    int64_t idx[ATTN_MAX_DIMS];
    int64_t k = i;
    for (int d = t->ndim - 1; d >= 0; d--) idx[d] = k % t->shape[d], k /= t->shape[d];
    attn_tensor_set(t, idx, gen_value(b));
  }
}

/* An operand of shape (nd, shape) in a layout chosen by the bytes. */
static attn_tensor *gen_operand(state *s, int nd, const int64_t *shape) {
  fz_bytes *b = &s->b;
  attn_tensor *t = NULL, *tmp = NULL;
  int layout = fz_below(b, 5);
  int64_t numel = attn__shape_numel(nd, shape);
  if (numel < 0 || numel > 4096) layout = 0;
  switch (layout) {
  case 1: /* transposed: made as the reversed shape, then permuted back */
    if (nd >= 2) {
      int64_t rs[ATTN_MAX_DIMS];
      int perm[ATTN_MAX_DIMS];
      for (int d = 0; d < nd; d++) rs[d] = shape[nd - 1 - d], perm[d] = nd - 1 - d;
      if (attn_empty(nd, rs, &tmp) == ATTN_OK && attn_permute(tmp, perm, &t) == ATTN_OK) fill(b, t);
      attn_tensor_release(tmp);
      if (t) return t;
    }
    break;
  case 2: { /* expanded: size-1 storage along dims chosen by the bytes */
    int64_t small[ATTN_MAX_DIMS];
    for (int d = 0; d < nd; d++) small[d] = fz_bool(b) ? 1 : shape[d];
    if (attn_empty(nd, small, &tmp) == ATTN_OK) {
      fill(b, tmp);
      attn_expand(tmp, nd, shape, &t);
    }
    attn_tensor_release(tmp);
    if (t) return t;
    break;
  }
  case 3: /* every other element of a twice as long last dim */
    if (nd >= 1) {
      int64_t big[ATTN_MAX_DIMS];
      memcpy(big, shape, sizeof(int64_t) * (size_t)nd);
      big[nd - 1] = 2 * shape[nd - 1];
      if (attn_empty(nd, big, &tmp) == ATTN_OK && attn_slice(tmp, nd - 1, 1, big[nd - 1], 2, &t) == ATTN_OK) fill(b, t);
      attn_tensor_release(tmp);
      if (t) return t;
    }
    break;
  case 4: { /* a window on the shared arena: operands may alias */
    int64_t stride[ATTN_MAX_DIMS];
    for (int d = 0; d < nd; d++) stride[d] = fz_below(b, 4);
    int64_t offset = fz_below(b, 16);
    if (attn_as_strided(s->arena, nd, shape, stride, offset, &t) == ATTN_OK) return t; /* values stay */
    break;
  }
  default: break;
  }
  if (attn_empty(nd, shape, &t) != ATTN_OK) return NULL;
  fill(b, t);
  return t;
}

/* A shape broadcasting to (nd, shape): leading dims dropped, sizes set to 1;
   sometimes random sizes instead. */
static int gen_shape(fz_bytes *b, int nd, const int64_t *shape, int64_t *out) {
  uint8_t mode = fz_u8(b);
  if (mode >= 0xf0) {
    int n = fz_below(b, MAXD + 1);
    for (int d = 0; d < n; d++) out[d] = fz_below(b, 5);
    return n;
  }
  int drop = nd ? fz_below(b, nd + 1) : 0;
  int n = nd - drop;
  for (int d = 0; d < n; d++) out[d] = fz_u8(b) < 0x50 ? 1 : shape[drop + d];
  return n;
}

/* NumPy's broadcast of two shapes; false if they do not broadcast. */
static bool broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *n, int64_t *out) {
  *n = na > nb ? na : nb;
  for (int d = 0; d < *n; d++) {
    int da = d - (*n - na), db = d - (*n - nb);
    int64_t x = da >= 0 ? a[da] : 1, y = db >= 0 ? b[db] : 1;
    if (x != y && x != 1 && y != 1) return false;
    out[d] = x == 1 ? y : x;
  }
  return true;
}

/* Element of t at the broadcast index idx of an n-d result. */
static float at(const attn_tensor *t, int n, const int64_t *idx) {
  int64_t ti[ATTN_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) {
    int64_t i = idx[d + n - t->ndim];
    ti[d] = t->shape[d] == 1 ? 0 : i;
  }
  return attn_tensor_get(t, ti);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Whether two elements of t share memory (in-place results are then
   undefined, as in torch; the library only refuses stride-0 dims). */
static bool self_overlaps(const attn_tensor *t) {
  int64_t n = attn_tensor_numel(t);
  if (n < 2) return false;
  int64_t *pos = malloc(sizeof *pos * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    int64_t k = i, p = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) p += (k % t->shape[d]) * t->stride[d], k /= t->shape[d];
    pos[i] = p;
  }
  qsort(pos, (size_t)n, sizeof *pos, cmp_i64);
  bool dup = false;
  for (int64_t i = 1; i < n && !dup; i++) dup = pos[i] == pos[i - 1];
  free(pos);
  return dup;
}

/* A private contiguous copy of t's elements (its state before a call). */
static attn_tensor *snapshot(const attn_tensor *t) {
  attn_tensor *c = NULL;
  bool prev = attn_set_grad_enabled(false);
  if (attn_clone(t, &c) != ATTN_OK) c = NULL;
  attn_set_grad_enabled(prev);
  return c;
}

static void check_shape(const attn_tensor *t, int n, const int64_t *shape, const char *what) {
  bool ok = t->ndim == n;
  for (int d = 0; ok && d < n; d++) ok = t->shape[d] == shape[d];
  char x[ATTN_SHAPE_BUF], y[ATTN_SHAPE_BUF];
  FZ_CHECK(ok, "%s: result %s, expected %s", what, attn_shape_str(t->ndim, t->shape, x, sizeof x),
           attn_shape_str(n, shape, y, sizeof y));
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */

typedef float (*elem_fn)(const float *v, const void *ctx);

/* out[idx] == fn(inputs at idx) for every idx of the n-d shape. */
static void check_elems(const attn_tensor *out, int n, const int64_t *shape, int nin, attn_tensor *const *in,
                        elem_fn fn, const void *ctx, const char *what) {
  int64_t numel = attn__shape_numel(n, shape), idx[ATTN_MAX_DIMS] = {0};
  for (int64_t i = 0; i < numel; i++) {
    int64_t k = i;
    for (int d = n - 1; d >= 0; d--) idx[d] = k % shape[d], k /= shape[d];
    float v[3];
    for (int j = 0; j < nin; j++) v[j] = at(in[j], n, idx);
    float want = fn(v, ctx), got = attn_tensor_get(out, idx);
    FZ_CHECK(same(got, want), "%s: element %lld is %a, expected %a (inputs %a %a %a)", what, (long long)i, got, want,
             v[0], nin > 1 ? v[1] : 0.0f, nin > 2 ? v[2] : 0.0f);
  }
}

typedef struct {
  attn_binary_op op;
  float s, alpha, lo, hi;
  bool reversed;
} opctx;

static float e_binary(const float *v, const void *p) { return ref_binary(((const opctx *)p)->op, v[0], v[1]); }
static float e_scalar(const float *v, const void *p) {
  const opctx *c = p;
  return c->reversed ? ref_binary(c->op, c->s, v[0]) : ref_binary(c->op, v[0], c->s);
}
static float e_where(const float *v, const void *p) { return v[0] != 0 ? v[1] : v[2]; }
static float e_masked(const float *v, const void *p) { return v[1] != 0 ? ((const opctx *)p)->s : v[0]; }
static float e_clamp(const float *v, const void *p) {
  const opctx *c = p;
  float x = v[0];
  if (c->lo == c->lo && x < c->lo) x = c->lo;
  if (c->hi == c->hi && x > c->hi) x = c->hi;
  return x;
}

/* add_scaled: a + alpha * b, with or without a fused multiply-add */
static void check_add_scaled(const attn_tensor *o, int n, const int64_t *shape, attn_tensor *a, attn_tensor *b,
                             float alpha) {
  int64_t numel = attn__shape_numel(n, shape), idx[ATTN_MAX_DIMS];
  for (int64_t i = 0; i < numel; i++) {
    int64_t k = i;
    for (int d = n - 1; d >= 0; d--) idx[d] = k % shape[d], k /= shape[d];
    float x = at(a, n, idx), y = at(b, n, idx), got = attn_tensor_get(o, idx);
    float p = alpha * y;
    FZ_CHECK(same(got, x + p) || same(got, fmaf(alpha, y, x)), "add_scaled: element %lld is %a", (long long)i, got);
  }
}

static void step_binary(state *s, int nd, const int64_t *shape, int kind) {
  fz_bytes *b = &s->b;
  int64_t sa[ATTN_MAX_DIMS], sb[ATTN_MAX_DIMS], sc[ATTN_MAX_DIMS], so[ATTN_MAX_DIMS], tmp[ATTN_MAX_DIMS];
  int na = gen_shape(b, nd, shape, sa), nb = gen_shape(b, nd, shape, sb), nc = gen_shape(b, nd, shape, sc), no = 0;
  attn_tensor *x = gen_operand(s, na, sa), *y = gen_operand(s, nb, sb), *z = NULL, *o = NULL;
  if (!x || !y) goto done;
  opctx c = {.op = (attn_binary_op)fz_below(b, ATTN_BINARY_OP_COUNT),
             .s = gen_value(b),
             .alpha = gen_value(b),
             .lo = gen_value(b),
             .hi = gen_value(b),
             .reversed = fz_bool(b)};
  if (fz_u8(b) >= 0xf0) c.lo = NAN;
  if (fz_u8(b) >= 0xf0) c.hi = NAN;
  bool fits = broadcast(na, sa, nb, sb, &no, so);
  attn_status st;
  switch (kind) {
  case 0: { /* binary */
    attn_tensor *in[2] = {snapshot(x), snapshot(y)};
    st = attn_binary(c.op, x, y, &o);
    if (trace) fprintf(stderr, "binary %s: %s\n", attn_binary_op_name(c.op), st ? attn_last_error() : "ok");
    FZ_CHECK((st == ATTN_OK) == fits, "binary %s: status %d, shapes broadcast: %d", attn_binary_op_name(c.op), st,
             fits);
    if (st == ATTN_OK) {
      check_shape(o, no, so, "binary");
      check_elems(o, no, so, 2, in, e_binary, &c, attn_binary_op_name(c.op));
    } else {
      FZ_CHECK_FAILED_WELL(st, o);
    }
    attn_tensor_release(in[0]);
    attn_tensor_release(in[1]);
    break;
  }
  case 1: { /* binary_: x op= y, y may alias x */
    attn_tensor *in[2] = {snapshot(x), snapshot(y)};
    bool fits_in_place = fits && no == na;
    for (int d = 0; fits_in_place && d < na; d++) fits_in_place = so[d] == sa[d];
    bool overlap = attn__has_internal_overlap(x);
    st = attn_binary_(c.op, x, y);
    if (trace) fprintf(stderr, "binary_ %s: %s\n", attn_binary_op_name(c.op), st ? attn_last_error() : "ok");
    FZ_CHECK((st == ATTN_OK) == (fits_in_place && !overlap), "binary_ %s: status %d, fits %d, overlap %d",
             attn_binary_op_name(c.op), st, fits_in_place, overlap);
    if (st == ATTN_OK && !self_overlaps(x))
      check_elems(x, na, sa, 2, in, e_binary, &c, "binary_");
    else
      FZ_CHECK(attn_last_error()[0], "no message");
    attn_tensor_release(in[0]);
    attn_tensor_release(in[1]);
    break;
  }
  case 2: { /* binary_scalar, and in place */
    attn_tensor *in[1] = {snapshot(x)};
    bool inplace = fz_bool(b);
    if (inplace) {
      bool overlap = attn__has_internal_overlap(x);
      st = attn_binary_scalar_(c.op, x, c.s, c.reversed);
      FZ_CHECK((st == ATTN_OK) == !overlap, "binary_scalar_: status %d, overlap %d", st, overlap);
      if (st == ATTN_OK && !self_overlaps(x)) check_elems(x, na, sa, 1, in, e_scalar, &c, "binary_scalar_");
    } else {
      st = attn_binary_scalar(c.op, x, c.s, c.reversed, &o);
      FZ_CHECK(st == ATTN_OK, "binary_scalar failed");
      check_shape(o, na, sa, "binary_scalar");
      check_elems(o, na, sa, 1, in, e_scalar, &c, "binary_scalar");
    }
    attn_tensor_release(in[0]);
    break;
  }
  case 3: { /* where(cond = x, y, z) */
    z = gen_operand(s, nc, sc);
    if (!z) break;
    attn_tensor *in[3] = {snapshot(x), snapshot(y), snapshot(z)};
    int64_t s3[ATTN_MAX_DIMS];
    int n3 = 0;
    bool ok3 = fits && broadcast(no, so, nc, sc, &n3, s3);
    st = attn_where(x, y, z, &o);
    FZ_CHECK((st == ATTN_OK) == ok3, "where: status %d, shapes broadcast: %d", st, ok3);
    if (st == ATTN_OK) {
      check_shape(o, n3, s3, "where");
      check_elems(o, n3, s3, 3, in, e_where, NULL, "where");
    } else {
      FZ_CHECK_FAILED_WELL(st, o);
    }
    for (int i = 0; i < 3; i++) attn_tensor_release(in[i]);
    break;
  }
  case 4: { /* masked_fill(x, mask = y, s), out of place or in place */
    attn_tensor *in[2] = {snapshot(x), snapshot(y)};
    bool to_x = fits && no == na;
    for (int d = 0; to_x && d < na; d++) to_x = so[d] == sa[d];
    if (fz_bool(b)) {
      bool overlap = attn__has_internal_overlap(x);
      st = attn_masked_fill_(x, y, c.s);
      FZ_CHECK((st == ATTN_OK) == (to_x && !overlap), "masked_fill_: status %d, fits %d, overlap %d", st, to_x,
               overlap);
      if (st == ATTN_OK && !self_overlaps(x)) check_elems(x, na, sa, 2, in, e_masked, &c, "masked_fill_");
    } else {
      st = attn_masked_fill(x, y, c.s, &o);
      FZ_CHECK((st == ATTN_OK) == to_x, "masked_fill: status %d, mask broadcasts to the input: %d", st, to_x);
      if (st == ATTN_OK) {
        check_shape(o, na, sa, "masked_fill");
        check_elems(o, na, sa, 2, in, e_masked, &c, "masked_fill");
      } else {
        FZ_CHECK_FAILED_WELL(st, o);
      }
    }
    attn_tensor_release(in[0]);
    attn_tensor_release(in[1]);
    break;
  }
  case 5: { /* add_scaled */
    attn_tensor *in[2] = {snapshot(x), snapshot(y)};
    st = attn_add_scaled(x, y, c.alpha, &o);
    FZ_CHECK((st == ATTN_OK) == fits, "add_scaled: status %d, shapes broadcast: %d", st, fits);
    if (st == ATTN_OK) {
      check_shape(o, no, so, "add_scaled");
      check_add_scaled(o, no, so, in[0], in[1], c.alpha);
    } else {
      FZ_CHECK_FAILED_WELL(st, o);
    }
    attn_tensor_release(in[0]);
    attn_tensor_release(in[1]);
    break;
  }
  case 6: { /* clamp, and in place */
    attn_tensor *in[1] = {snapshot(x)};
    if (fz_bool(b)) {
      bool overlap = attn__has_internal_overlap(x);
      st = attn_clamp_(x, c.lo, c.hi);
      FZ_CHECK((st == ATTN_OK) == !overlap, "clamp_: status %d, overlap %d", st, overlap);
      if (st == ATTN_OK && !self_overlaps(x)) check_elems(x, na, sa, 1, in, e_clamp, &c, "clamp_");
    } else {
      st = attn_clamp(x, c.lo, c.hi, &o);
      FZ_CHECK(st == ATTN_OK, "clamp failed");
      check_shape(o, na, sa, "clamp");
      check_elems(o, na, sa, 1, in, e_clamp, &c, "clamp");
    }
    attn_tensor_release(in[0]);
    break;
  }
  case 7: { /* broadcast_shape */
    int n = -1;
    st = attn_broadcast_shape("fuzz", x, y, &n, tmp);
    FZ_CHECK((st == ATTN_OK) == fits, "broadcast_shape: status %d, expected %d", st, fits);
    if (st == ATTN_OK) {
      FZ_CHECK(n == no, "broadcast_shape: %d dims", n);
      for (int d = 0; d < n; d++) FZ_CHECK(tmp[d] == so[d], "broadcast_shape: size %d", d);
    } else {
      FZ_CHECK(strncmp(attn_last_error(), "fuzz: ", 6) == 0, "message '%s'", attn_last_error());
    }
    break;
  }
  default: { /* unary: strided == contiguous */
    attn_unary_op u = (attn_unary_op)fz_below(b, ATTN_UNARY_OP_COUNT);
    attn_tensor *cx = snapshot(x), *oc = NULL;
    if (!cx) break;
    if (fz_bool(b)) {
      bool overlap = attn__has_internal_overlap(x);
      st = attn_unary_(u, x);
      FZ_CHECK((st == ATTN_OK) == !overlap, "unary_ %s: status %d, overlap %d", attn_unary_op_name(u), st, overlap);
      if (st == ATTN_OK && !self_overlaps(x)) {
        FZ_CHECK(attn_unary_(u, cx) == ATTN_OK, "unary_ on a contiguous tensor failed");
        int64_t n = attn_tensor_numel(x);
        for (int64_t i = 0; i < n; i++)
          FZ_CHECK(same(attn_tensor_get_flat(x, i), attn_tensor_get_flat(cx, i)), "unary_ %s: element %lld",
                   attn_unary_op_name(u), (long long)i);
      }
    } else {
      st = attn_unary(u, x, &o);
      FZ_CHECK(st == ATTN_OK, "unary %s failed", attn_unary_op_name(u));
      FZ_CHECK(attn_unary(u, cx, &oc) == ATTN_OK, "unary on a contiguous tensor failed");
      check_shape(o, na, sa, "unary");
      int64_t n = attn_tensor_numel(o);
      for (int64_t i = 0; i < n; i++)
        FZ_CHECK(same(attn_tensor_get_flat(o, i), attn_tensor_get_flat(oc, i)), "unary %s: element %lld: %a vs %a",
                 attn_unary_op_name(u), (long long)i, attn_tensor_get_flat(o, i), attn_tensor_get_flat(oc, i));
    }
    attn_tensor_release(cx);
    attn_tensor_release(oc);
    break;
  }
  }
done:
  attn_tensor_release(x);
  attn_tensor_release(y);
  attn_tensor_release(z);
  attn_tensor_release(o);
}

static bool small_int(float v) { return fabsf(v) <= 16 && v == floorf(v); }

/* torch.matmul's shape rules, computed here; false if they fail. */
static bool matmul_shape(const attn_tensor *a, const attn_tensor *b, int *n, int64_t *out) {
  if (a->ndim == 0 || b->ndim == 0) return false;
  int64_t ka = a->shape[a->ndim - 1], kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
  if (ka != kb) return false;
  int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
  int64_t batch[ATTN_MAX_DIMS];
  int nbatch;
  if (!broadcast(ba, a->shape, bb, b->shape, &nbatch, batch)) return false;
  *n = 0;
  for (int d = 0; d < nbatch; d++) out[(*n)++] = batch[d];
  if (a->ndim >= 2) out[(*n)++] = a->shape[a->ndim - 2];
  if (b->ndim >= 2) out[(*n)++] = b->shape[b->ndim - 1];
  return true;
}

static void step_matmul(state *s) {
  fz_bytes *b = &s->b;
  int64_t sa[ATTN_MAX_DIMS], sb[ATTN_MAX_DIMS], so[ATTN_MAX_DIMS];
  int na = fz_below(b, 5), nb = fz_below(b, 5), no = 0;
  int64_t k = fz_below(b, 5);
  for (int d = 0; d < na; d++) sa[d] = fz_below(b, 4);
  for (int d = 0; d < nb; d++) sb[d] = fz_below(b, 4);
  if (fz_u8(b) < 0xe0) { /* mostly a matching inner size */
    if (na) sa[na - 1] = k;
    if (nb) sb[nb >= 2 ? nb - 2 : 0] = k;
  }
  attn_tensor *x = gen_operand(s, na, sa), *y = gen_operand(s, nb, sb), *o = NULL;
  if (!x || !y) goto done;
  /* small integers: every sum is exact in float, whatever the order */
  bool exact = true;
  for (int64_t i = 0; i < attn_tensor_numel(x) && exact; i++) exact = small_int(attn_tensor_get_flat(x, i));
  for (int64_t i = 0; i < attn_tensor_numel(y) && exact; i++) exact = small_int(attn_tensor_get_flat(y, i));
  bool fits = matmul_shape(x, y, &no, so);
  attn_status st = attn_matmul(x, y, &o);
  if (trace) {
    char a1[ATTN_SHAPE_BUF], a2[ATTN_SHAPE_BUF], b1[ATTN_SHAPE_BUF], b2[ATTN_SHAPE_BUF];
    fprintf(stderr, "matmul %s stride %s offset %lld x %s stride %s offset %lld: %s\n",
            attn_shape_str(x->ndim, x->shape, a1, sizeof a1), attn_shape_str(x->ndim, x->stride, a2, sizeof a2),
            (long long)x->offset, attn_shape_str(y->ndim, y->shape, b1, sizeof b1),
            attn_shape_str(y->ndim, y->stride, b2, sizeof b2), (long long)y->offset, st ? attn_last_error() : "ok");
    for (int64_t i = 0; i < attn_tensor_numel(x); i++) fprintf(stderr, " %g", attn_tensor_get_flat(x, i));
    fprintf(stderr, " |");
    for (int64_t i = 0; i < attn_tensor_numel(y); i++) fprintf(stderr, " %g", attn_tensor_get_flat(y, i));
    fprintf(stderr, "\n");
  }
  if (!fits) {
    FZ_CHECK(st != ATTN_OK, "matmul accepted shapes torch refuses");
    FZ_CHECK_FAILED_WELL(st, o);
    goto done;
  }
  if (st != ATTN_OK) {
    /* OpenBLAS may be missing; anything else is a wrong refusal */
    FZ_CHECK(st == ATTN_ERR_IO || st == ATTN_ERR_NOMEM, "matmul refused valid shapes");
    goto done;
  }
  check_shape(o, no, so, "matmul");
  if (!exact) goto done;
  /* triple loop over the broadcast batch */
  int64_t ka = x->shape[x->ndim - 1];
  int64_t numel = attn__shape_numel(no, so), idx[ATTN_MAX_DIMS];
  for (int64_t i = 0; i < numel; i++) {
    int64_t r = i;
    for (int d = no - 1; d >= 0; d--) idx[d] = r % so[d], r /= so[d];
    /* row of x and column of y for this output element */
    int64_t xi[ATTN_MAX_DIMS], yi[ATTN_MAX_DIMS];
    int nbatch = no - (x->ndim >= 2) - (y->ndim >= 2);
    for (int d = 0; d < x->ndim - 2; d++) {
      int64_t bi = idx[d + nbatch - (x->ndim - 2)];
      xi[d] = x->shape[d] == 1 ? 0 : bi;
    }
    for (int d = 0; d < y->ndim - 2; d++) {
      int64_t bi = idx[d + nbatch - (y->ndim - 2)];
      yi[d] = y->shape[d] == 1 ? 0 : bi;
    }
    int64_t row = x->ndim >= 2 ? idx[nbatch] : 0, col = y->ndim >= 2 ? idx[no - 1] : 0;
    double acc = 0;
    for (int64_t kk = 0; kk < ka; kk++) {
      if (x->ndim >= 2)
        xi[x->ndim - 2] = row, xi[x->ndim - 1] = kk;
      else
        xi[0] = kk;
      if (y->ndim >= 2)
        yi[y->ndim - 2] = kk, yi[y->ndim - 1] = col;
      else
        yi[0] = kk;
      acc += (double)attn_tensor_get(x, xi) * (double)attn_tensor_get(y, yi);
    }
    float got = attn_tensor_get(o, idx);
    FZ_CHECK(got == (float)acc, "matmul: element %lld is %g, expected %g", (long long)i, got, acc);
  }
done:
  attn_tensor_release(x);
  attn_tensor_release(y);
  attn_tensor_release(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_debug_counts before;
  fz_counts(&before);
  attn_budget *budget = NULL;
  if (attn_budget_new((int64_t)16 << 20, &budget) != ATTN_OK) return 0;
  attn_budget *prev = attn_budget_set_current(budget);
  state s = {.b = {data, size}};
  int64_t arena_n = ARENA;
  if (attn_empty(1, &arena_n, &s.arena) != ATTN_OK) FZ_CHECK(0, "arena");
  for (int64_t i = 0; i < arena_n; i++) attn_tensor_data(s.arena)[i] = (float)((i * 7) % 9 - 4);
  int nd = fz_below(&s.b, MAXD + 1);
  int64_t shape[ATTN_MAX_DIMS];
  for (int d = 0; d < nd; d++) shape[d] = fz_u8(&s.b) < 0xf0 ? 1 + fz_below(&s.b, 4) : 0;
  for (int i = 0; i < 16 && s.b.n > 0; i++) {
    int kind = fz_below(&s.b, 10);
    if (kind == 9)
      step_matmul(&s);
    else
      step_binary(&s, nd, shape, kind);
  }
  attn_tensor_release(s.arena);
  attn_budget_set_current(prev);
  attn_budget_release(budget);
  fz_check_counts(&before);
  return 0;
}
