/* Fused scaled-dot-product attention: forward and backward without the
 * L x S matrix (FlashAttention-2's scheme, on CPU tiles).
 *
 * Shapes: q [..., L, E], k [..., S, E], v [..., S, Ev] -> out [..., L, Ev];
 * the leading dims ("batch", the last of them the head dim -3) are walked
 * as one flat index b over q's leading shape; with GQA query head h reads
 * kv head h / group.
 *
 * Forward, one task per (b, block of BQ queries): the query block (scaled
 * by `scale`) stays in a tile; key/value blocks of BK rows stream past it.
 * For each key block, the scores S = Qs K^T get the mask, then the online
 * softmax: m' = max(m, rowmax S), P = exp(S - m'), l = l e^(m - m') +
 * rowsum P, O = O e^(m - m') + P V.  At the end out = O / l and the
 * log-sum-exp is kept for the backward pass as the pair (m, log l), not
 * as one float m + log l: when m is huge (a row under a finite -1e9 mask)
 * log l would round away and the recomputed probabilities would lose
 * their normalisation; p = exp((s - m) - log l) keeps it.  A row with no
 * visible key stores (+inf, 0): its output is 0 and every recomputed
 * probability is exp(-inf) = 0.  Causal key blocks past the diagonal are
 * never visited.
 *
 * Backward (dO = gradient of out): D = rowsum(dO * O) first, then two
 * passes that both recompute P = exp(Qs K^T + mask - lse) tile by tile:
 *  - per (kv batch, block of BK keys): dV += P^T dO, dP = dO V^T,
 *    dS = P * (dP - D), dK += dS^T Qs (Qs holds q * scale), summed over the
 *    query heads sharing the kv head and over all query blocks;
 *  - per (b, block of BQ queries): the same dS, dQ += dS K, times scale.
 * Splitting dQ from dK/dV costs two extra tile products per tile pair but
 * needs no atomics and no per-thread copies of dQ, and the result does not
 * depend on the number of threads.
 *
 * Extra memory: (m, log l) and D ([..., L, 2] and [..., L] floats) plus per-thread tiles of fixed
 * size (BQ, BK times E or Ev), whatever S is.
 *
 * Layout: a task transposes only what stays fixed during its loop (the
 * query block in the forward pass and the dQ pass, the key block in the
 * dK/dV pass); the streaming blocks are plain row copies.  So the forward
 * scores are kept transposed, st = K Qs^T [BK, BQ], and the online softmax
 * runs down its columns, vectorised over 64 queries.
 *
 * Tiles are products C[4k, 16n] (+)= A[4k, K] B[K, 16n] done by register-
 * blocked micro-kernels on 16-float GCC vectors (8 x 32 outputs with 32
 * vector registers, else 4 x 32), compiled for AVX-512, AVX2 and baseline
 * (ATTN_HOT).  A may have any layout (its elements are broadcast), so P^T
 * and dS^T are read in place.  The kernels run on attn's thread pool and
 * never call OpenBLAS (its own threads would fight ours).
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>

/* FMA contraction for the micro-kernels (ISO C mode turns it off), and
   selects on float compares that vectorise; attn never reads FP flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "fp-contract=fast")
#endif

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

#define BQ 64 /* queries per block */
#define BK 64 /* keys per block */
#define VW 16 /* floats per vector */

typedef float vf __attribute__((vector_size(VW * sizeof(float))));
/* unaligned vector loads and stores (tile rows need no alignment) */
#define VLD(v, p) memcpy(&(v), (p), sizeof(vf))
#define VST(p, v) memcpy((p), &(v), sizeof(vf))

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* ------------------------------------------------------------------------ */
/* Allocation counter (tests check the kernel's memory stays O(L))          */

static int64_t mem_cur, mem_peak;

static void mem_add(int64_t bytes) {
  int64_t c = __atomic_add_fetch(&mem_cur, bytes, __ATOMIC_RELAXED);
  int64_t p = __atomic_load_n(&mem_peak, __ATOMIC_RELAXED);
  while (c > p && !__atomic_compare_exchange_n(&mem_peak, &p, c, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

void attn__sdpa_mem_reset(void) {
  __atomic_store_n(&mem_peak, __atomic_load_n(&mem_cur, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

int64_t attn__sdpa_mem_peak(void) { return __atomic_load_n(&mem_peak, __ATOMIC_RELAXED); }

/* 64-byte aligned scratch, counted */
static float *scratch_alloc(int64_t nfloats) {
  if (nfloats > ((int64_t)1 << 58)) return NULL; /* the byte count below would overflow */
  int64_t bytes = round_up((nfloats > 0 ? nfloats : 1) * (int64_t)sizeof(float), 64);
  if (bytes <= 0 || (uint64_t)bytes > SIZE_MAX) return NULL;
  float *p = aligned_alloc(64, (size_t)bytes);
  if (p) mem_add(bytes);
  return p;
}

static void scratch_free(float *p, int64_t nfloats) {
  if (!p) return;
  int64_t bytes = round_up((nfloats > 0 ? nfloats : 1) * (int64_t)sizeof(float), 64);
  mem_add(-bytes);
  free(p);
}

/* ------------------------------------------------------------------------ */
/* Micro-kernels                                                             */

/* c [4, 32] (row stride ldc) = (acc ? c : 0) + a [4, K] @ b [K, 32] (row
   stride ldb), where a's element (r, p) is a[r * ars + p * acs]: any
   layout of a works (it is only broadcast), so P^T and dS^T need no
   transposed copy.  Eight vector accumulators; each b row is loaded once
   for four rows of a. */
INLINE void mk4x32(int64_t K, const float *restrict a, int64_t ars, int64_t acs, const float *restrict b,
                   int64_t ldb, float *restrict c, int64_t ldc, bool acc) {
  vf c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  const float *a0 = a, *a1 = a + ars, *a2 = a + 2 * ars, *a3 = a + 3 * ars;
  for (int64_t p = 0; p < K; p++) {
    vf b0, b1;
    VLD(b0, b + p * ldb);
    VLD(b1, b + p * ldb + VW);
    float x0 = a0[p * acs], x1 = a1[p * acs], x2 = a2[p * acs], x3 = a3[p * acs];
    c00 += x0 * b0;
    c01 += x0 * b1;
    c10 += x1 * b0;
    c11 += x1 * b1;
    c20 += x2 * b0;
    c21 += x2 * b1;
    c30 += x3 * b0;
    c31 += x3 * b1;
  }
  if (acc) {
    vf t;
    VLD(t, c), c00 += t;
    VLD(t, c + VW), c01 += t;
    VLD(t, c + ldc), c10 += t;
    VLD(t, c + ldc + VW), c11 += t;
    VLD(t, c + 2 * ldc), c20 += t;
    VLD(t, c + 2 * ldc + VW), c21 += t;
    VLD(t, c + 3 * ldc), c30 += t;
    VLD(t, c + 3 * ldc + VW), c31 += t;
  }
  VST(c, c00);
  VST(c + VW, c01);
  VST(c + ldc, c10);
  VST(c + ldc + VW, c11);
  VST(c + 2 * ldc, c20);
  VST(c + 2 * ldc + VW, c21);
  VST(c + 3 * ldc, c30);
  VST(c + 3 * ldc + VW, c31);
}

/* c [8, 32] (+)= a [8, K] @ b [K, 32]: sixteen accumulators, for CPUs with
   32 vector registers (AVX-512); each b row feeds eight rows of a. */
INLINE void mk8x32(int64_t K, const float *restrict a, int64_t ars, int64_t acs, const float *restrict b,
                   int64_t ldb, float *restrict c, int64_t ldc, bool acc) {
  vf c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  vf c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0}, c60 = {0}, c61 = {0}, c70 = {0}, c71 = {0};
  const float *a0 = a, *a1 = a + ars, *a2 = a + 2 * ars, *a3 = a + 3 * ars;
  const float *a4 = a + 4 * ars, *a5 = a + 5 * ars, *a6 = a + 6 * ars, *a7 = a + 7 * ars;
  for (int64_t p = 0; p < K; p++) {
    vf b0, b1;
    VLD(b0, b + p * ldb);
    VLD(b1, b + p * ldb + VW);
    float x;
    x = a0[p * acs], c00 += x * b0, c01 += x * b1;
    x = a1[p * acs], c10 += x * b0, c11 += x * b1;
    x = a2[p * acs], c20 += x * b0, c21 += x * b1;
    x = a3[p * acs], c30 += x * b0, c31 += x * b1;
    x = a4[p * acs], c40 += x * b0, c41 += x * b1;
    x = a5[p * acs], c50 += x * b0, c51 += x * b1;
    x = a6[p * acs], c60 += x * b0, c61 += x * b1;
    x = a7[p * acs], c70 += x * b0, c71 += x * b1;
  }
#define MK_OUT(r, h, x)                       \
  do {                                        \
    float *cp_ = c + (r) * ldc + (h) * VW;    \
    if (acc) {                                \
      vf t_;                                  \
      VLD(t_, cp_);                           \
      x += t_;                                \
    }                                         \
    VST(cp_, x);                              \
  } while (0)
  MK_OUT(0, 0, c00);
  MK_OUT(0, 1, c01);
  MK_OUT(1, 0, c10);
  MK_OUT(1, 1, c11);
  MK_OUT(2, 0, c20);
  MK_OUT(2, 1, c21);
  MK_OUT(3, 0, c30);
  MK_OUT(3, 1, c31);
  MK_OUT(4, 0, c40);
  MK_OUT(4, 1, c41);
  MK_OUT(5, 0, c50);
  MK_OUT(5, 1, c51);
  MK_OUT(6, 0, c60);
  MK_OUT(6, 1, c61);
  MK_OUT(7, 0, c70);
  MK_OUT(7, 1, c71);
#undef MK_OUT
}

/* c [4, 16] (+)= a [4, K] @ b [K, 16]: the column remainder. */
INLINE void mk4x16(int64_t K, const float *restrict a, int64_t ars, int64_t acs, const float *restrict b,
                   int64_t ldb, float *restrict c, int64_t ldc, bool acc) {
  vf c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
  const float *a0 = a, *a1 = a + ars, *a2 = a + 2 * ars, *a3 = a + 3 * ars;
  for (int64_t p = 0; p < K; p++) {
    vf b0;
    VLD(b0, b + p * ldb);
    c0 += a0[p * acs] * b0;
    c1 += a1[p * acs] * b0;
    c2 += a2[p * acs] * b0;
    c3 += a3[p * acs] * b0;
  }
  if (acc) {
    vf t;
    VLD(t, c), c0 += t;
    VLD(t, c + ldc), c1 += t;
    VLD(t, c + 2 * ldc), c2 += t;
    VLD(t, c + 3 * ldc), c3 += t;
  }
  VST(c, c0);
  VST(c + ldc, c1);
  VST(c + 2 * ldc, c2);
  VST(c + 3 * ldc, c3);
}

/* c [M, N] (+)= a [M, K] @ b [K, N]; M a multiple of 4, N of 16; a's
   element (r, p) at a[r * ars + p * acs], b and c with row strides ldb,
   ldc.  wide: use the 8-row kernel (32 vector registers). */
INLINE void tile_gemm(bool wide, int64_t M, int64_t N, int64_t K, const float *a, int64_t ars, int64_t acs,
                      const float *b, int64_t ldb, float *c, int64_t ldc, bool acc) {
  int64_t i = 0;
  if (wide)
    for (; i + 8 <= M; i += 8) {
      int64_t j = 0;
      for (; j + 2 * VW <= N; j += 2 * VW) mk8x32(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
      if (j < N) {
        mk4x16(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
        mk4x16(K, a + (i + 4) * ars, ars, acs, b + j, ldb, c + (i + 4) * ldc + j, ldc, acc);
      }
    }
  for (; i < M; i += 4) {
    int64_t j = 0;
    for (; j + 2 * VW <= N; j += 2 * VW) mk4x32(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
    if (j < N) mk4x16(K, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, acc);
  }
}

/* e^x for x <= 0 (also -inf, NaN), branch-free so loops over it vectorise:
   x = k ln2 + r with |r| <= ln2/2, e^r by the Cephes expf polynomial, 2^k
   put into the exponent bits.  Below -87 the result is 0. */
INLINE float exp_neg(float x) {
  const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  const float round_magic = 12582912.0f; /* 1.5 * 2^23 */
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.0f ? 88.0f : xc;
  float k = (xc * log2e + round_magic) - round_magic;
  float r = (xc - k * ln2_hi) - k * ln2_lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  int32_t ki = (int32_t)(k == k ? k : 0.0f);
  uint32_t bits = (uint32_t)(ki + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  float e = p * scale;
  return x < -87.0f ? 0.0f : e;
}

/* NaN-sticky max (a NaN score poisons its row, as in softmax) */
INLINE float max_nan(float a, float v) { return (v > a || v != v) ? v : a; }

/* ------------------------------------------------------------------------ */
/* Problem geometry                                                          */

enum { MASK_NONE, MASK_BOOL, MASK_ADD };

/* A strided [batch..., rows, cols] operand; bs are the strides of the
   leading dims over q's leading shape (0 where broadcast).  For k and v
   they are those of their own head dim, divided into by group. */
typedef struct {
  const float *p;
  int64_t bs[ATTN_MAX_DIMS];
  int64_t rs, cs;
} operand;

typedef struct {
  int nb;                        /* leading dims */
  int64_t bshape[ATTN_MAX_DIMS]; /* q's leading dims */
  int64_t nbq, nbkv;             /* flat batch sizes of q and of k/v */
  int64_t group;                 /* query heads per kv head */
  int64_t L, S, E, Ev, Ep, Evp;  /* Ep, Evp: E, Ev rounded up to 16 */
  int64_t nqb, nkb;              /* query / key blocks */
  float scale;
  int mask_kind;
  bool causal;
  int64_t causal_off;            /* query i sees key j iff j <= i + causal_off */
  operand q, k, v, m, o, dout;
  float *out, *lse, *D;          /* [nbq, L, Ev], [nbq, L, 2] (m, log l), [nbq, L] contiguous */
  float *dq, *dk, *dv;           /* contiguous, shapes of q, k, v */
  bool wide;                     /* 32 vector registers: 8-row micro-kernel */
  int failed;                    /* a worker could not get its tiles */
} plan;

/* idx of the flat index b over shape (nb dims) */
static void unflatten(int nb, const int64_t *shape, int64_t b, int64_t *idx) {
  for (int d = nb - 1; d >= 0; d--) {
    idx[d] = shape[d] ? b % shape[d] : 0;
    b = shape[d] ? b / shape[d] : 0;
  }
}

static int64_t offset_of(int nb, const int64_t *idx, const int64_t *bs) {
  int64_t o = 0;
  for (int d = 0; d < nb; d++) o += idx[d] * bs[d];
  return o;
}

/* Base pointers of q's batch b: q, mask, dout, o; k and v of its kv head. */
typedef struct {
  const float *q, *k, *v, *m, *o, *dout;
} batch_ptrs;

static void batch_at(const plan *P, int64_t b, batch_ptrs *bp) {
  int64_t idx[ATTN_MAX_DIMS];
  unflatten(P->nb, P->bshape, b, idx);
  bp->q = P->q.p + offset_of(P->nb, idx, P->q.bs);
  bp->m = P->m.p ? P->m.p + offset_of(P->nb, idx, P->m.bs) : NULL;
  bp->o = P->o.p ? P->o.p + offset_of(P->nb, idx, P->o.bs) : NULL;
  bp->dout = P->dout.p ? P->dout.p + offset_of(P->nb, idx, P->dout.bs) : NULL;
  if (P->nb) idx[P->nb - 1] /= P->group;
  bp->k = P->k.p + offset_of(P->nb, idx, P->k.bs);
  bp->v = P->v.p + offset_of(P->nb, idx, P->v.bs);
}

/* ------------------------------------------------------------------------ */
/* Packing and masking                                                       */

/* dst [rows4, ldd] = alpha * src [rows, ncols] (strides rs, cs); zero in
   columns ncols..ldd-1 and rows rows..rows4-1. */
INLINE void pack_rows(float *restrict dst, int64_t ldd, int64_t rows4, const float *restrict src, int64_t rows,
                      int64_t rs, int64_t cs, int64_t ncols, float alpha) {
  for (int64_t r = 0; r < rows; r++) {
    float *d = dst + r * ldd;
    const float *s = src + r * rs;
    if (cs == 1)
      for (int64_t c = 0; c < ncols; c++) d[c] = alpha * s[c];
    else
      for (int64_t c = 0; c < ncols; c++) d[c] = alpha * s[c * cs];
    for (int64_t c = ncols; c < ldd; c++) d[c] = 0.0f;
  }
  if (rows4 > rows) memset(dst + rows * ldd, 0, (size_t)((rows4 - rows) * ldd) * sizeof(float));
}

/* dst [ncols, ldd] = alpha * src [rows, ncols]^T (strides rs, cs), zero in
   columns rows..ldd-1.  Done once per task, so it may be plain. */
INLINE void pack_t(float *restrict dst, int64_t ldd, const float *restrict src, int64_t rows, int64_t rs, int64_t cs,
                   int64_t ncols, float alpha) {
  for (int64_t r = 0; r < rows; r++) {
    const float *s = src + r * rs;
    for (int64_t c = 0; c < ncols; c++) dst[c * ldd + r] = alpha * s[c * cs];
  }
  for (int64_t c = 0; c < ncols; c++)
    for (int64_t r = rows; r < ldd; r++) dst[c * ldd + r] = 0.0f;
}

/* The bias of a score tile s [nq, BK] (row r: query i0 + r, column j: key
   j0 + j): the attention mask (mb: its [L, S] matrix for this batch), the
   causal limit, and -inf in the columns nk..BK-1 past the keys. */
INLINE void mask_tile(const plan *P, float *s, int64_t nq, int64_t i0, int64_t j0, int64_t nk, const float *mb) {
  for (int64_t r = 0; r < nq; r++) {
    float *row = s + r * BK;
    if (P->mask_kind != MASK_NONE) {
      const float *mr = mb + (i0 + r) * P->m.rs + j0 * P->m.cs;
      int64_t cs = P->m.cs;
      if (P->mask_kind == MASK_BOOL) {
        if (cs == 1)
          for (int64_t j = 0; j < nk; j++) row[j] = mr[j] != 0.0f ? row[j] : -INFINITY;
        else
          for (int64_t j = 0; j < nk; j++) row[j] = mr[j * cs] != 0.0f ? row[j] : -INFINITY;
      } else {
        if (cs == 1)
          for (int64_t j = 0; j < nk; j++) row[j] += mr[j];
        else
          for (int64_t j = 0; j < nk; j++) row[j] += mr[j * cs];
      }
    }
    int64_t first_hidden = nk;
    if (P->causal) {
      int64_t lim = i0 + r + P->causal_off - j0 + 1; /* columns < lim are visible */
      if (lim < first_hidden) first_hidden = lim < 0 ? 0 : lim;
    }
    for (int64_t j = first_hidden; j < BK; j++) row[j] = -INFINITY;
  }
}

/* The same for a transposed tile st [nk, BQ] (row j: key j0 + j, column
   i: query i0 + i); only rows < nk and columns < nq are touched. */
INLINE void mask_tile_t(const plan *P, float *st, int64_t nq, int64_t i0, int64_t j0, int64_t nk, const float *mb) {
  if (P->mask_kind != MASK_NONE) {
    const int64_t rs = P->m.rs, cs = P->m.cs;
    const bool is_bool = P->mask_kind == MASK_BOOL;
    if (rs == 0) { /* one value per key (padding masks): whole rows */
      for (int64_t j = 0; j < nk; j++) {
        float val = mb[(j0 + j) * cs], *row = st + j * BQ;
        if (is_bool) {
          if (val == 0.0f)
            for (int64_t i = 0; i < nq; i++) row[i] = -INFINITY;
        } else {
          for (int64_t i = 0; i < nq; i++) row[i] += val;
        }
      }
    } else {
      for (int64_t i = 0; i < nq; i++) {
        const float *mr = mb + (i0 + i) * rs + j0 * cs;
        float *col = st + i;
        if (is_bool)
          for (int64_t j = 0; j < nk; j++) col[j * BQ] = mr[j * cs] != 0.0f ? col[j * BQ] : -INFINITY;
        else
          for (int64_t j = 0; j < nk; j++) col[j * BQ] += mr[j * cs];
      }
    }
  }
  if (P->causal)
    for (int64_t j = 0; j < nk; j++) {
      int64_t hidden = j0 + j - P->causal_off - i0; /* queries i < hidden cannot see key j0 + j */
      if (hidden > nq) hidden = nq;
      for (int64_t i = 0; i < hidden; i++) st[j * BQ + i] = -INFINITY;
    }
}

/* Key range [0, kend) some query in [i0, i0 + nq) can see. */
static int64_t key_end(const plan *P, int64_t i0, int64_t nq) {
  if (!P->causal) return P->S;
  int64_t e = i0 + nq - 1 + P->causal_off + 1;
  return e < 0 ? 0 : e > P->S ? P->S : e;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

/* Per-thread tiles, one block each; carved from one aligned allocation. */
typedef struct {
  float *t[12];
  float *base;
  int64_t n;
} tiles;

static bool tiles_alloc(tiles *T, int count, const int64_t *sizes) {
  T->n = 0;
  for (int i = 0; i < count; i++) T->n += round_up(sizes[i], VW); /* each tile 64-byte aligned */
  T->base = scratch_alloc(T->n);
  if (!T->base) return false;
  float *p = T->base;
  for (int i = 0; i < count; i++) {
    T->t[i] = p;
    p += round_up(sizes[i], VW);
  }
  return true;
}

enum { F_QT, F_KR, F_VR, F_ST, F_O, F_COUNT };

/* One block of queries of batch b -> out [nq, Ev], lse [nq].  Tiles:
   qt [E, BQ] (q * scale, transposed once), kr [BK, Ep] and vr [BK, Evp]
   (the key block's rows), st [BK, BQ] (scores, then probabilities, keys
   along rows so the softmax runs down columns, vectorised over queries),
   o [BQ, Evp] the running output. */
INLINE void fwd_block(const plan *P, const tiles *T, int64_t b, int64_t qb) {
  batch_ptrs bp;
  batch_at(P, b, &bp);
  const int64_t i0 = qb * BQ, nq = P->L - i0 < BQ ? P->L - i0 : BQ, nq4 = round_up(nq, 4);
  /* columns of the query-wide tiles actually computed: short sequences
     (the notebooks' 6 to 16 tokens) do not pay for all BQ */
  const int nqw = (int)round_up(nq, VW);
  const int64_t E = P->E, Ep = P->Ep, Ev = P->Ev, Evp = P->Evp;
  float *restrict qt = T->t[F_QT], *restrict kr = T->t[F_KR], *restrict vr = T->t[F_VR], *restrict st = T->t[F_ST],
                  *restrict oacc = T->t[F_O];
  float m[BQ], l[BQ], mx[BQ], mu[BQ], alpha[BQ], sum[BQ];
  pack_t(qt, BQ, bp.q + i0 * P->q.rs, nq, P->q.rs, P->q.cs, E, P->scale);
  memset(oacc, 0, (size_t)(nq4 * Evp) * sizeof(float));
  for (int i = 0; i < BQ; i++) m[i] = -INFINITY, l[i] = 0.0f;
  const int64_t kend = key_end(P, i0, nq);
  for (int64_t j0 = 0; j0 < kend; j0 += BK) {
    const int64_t nk = P->S - j0 < BK ? P->S - j0 : BK, nk4 = round_up(nk, 4);
    pack_rows(kr, Ep, nk4, bp.k + j0 * P->k.rs, nk, P->k.rs, P->k.cs, E, 1.0f);
    pack_rows(vr, Evp, nk, bp.v + j0 * P->v.rs, nk, P->v.rs, P->v.cs, Ev, 1.0f);
    /* st [nk4, nqw] = kr [nk4, E] @ qt [E, nqw] (row stride BQ) */
    tile_gemm(P->wide, nk4, nqw, E, kr, Ep, 1, qt, BQ, st, BQ, false);
    mask_tile_t(P, st, nq, i0, j0, nk, bp.m);
    /* online softmax down the columns (query columns nq..nqw-1 are
       padding: computed, never read back) */
    for (int i = 0; i < nqw; i++) mx[i] = -INFINITY, sum[i] = 0.0f;
    for (int64_t j = 0; j < nk; j++)
      for (int i = 0; i < nqw; i++) mx[i] = max_nan(mx[i], st[j * BQ + i]);
    for (int i = 0; i < nqw; i++) {
      float mnew = max_nan(m[i], mx[i]);
      mu[i] = mnew == -INFINITY ? 0.0f : mnew; /* nothing visible yet: every p is 0 */
      alpha[i] = exp_neg(m[i] - mu[i]);
      m[i] = mnew;
    }
    for (int64_t j = 0; j < nk; j++)
      for (int i = 0; i < nqw; i++) {
        float e = exp_neg(st[j * BQ + i] - mu[i]);
        st[j * BQ + i] = e;
        sum[i] += e;
      }
    for (int i = 0; i < nqw; i++) l[i] = l[i] * alpha[i] + sum[i];
    for (int64_t i = 0; i < nq4; i++)
      if (alpha[i] != 1.0f)
        for (int64_t c = 0; c < Evp; c++) oacc[i * Evp + c] *= alpha[i];
    /* o [nq4, Evp] += p [nq4, nk] (= st^T) @ vr [nk, Evp] */
    tile_gemm(P->wide, nq4, Evp, nk, st, 1, BQ, vr, Evp, oacc, Evp, true);
  }
  float *out = P->out + (b * P->L + i0) * Ev, *lse = P->lse + 2 * (b * P->L + i0);
  for (int64_t r = 0; r < nq; r++) {
    float *o = out + r * Ev;
    const float *a = oacc + r * Evp;
    if (l[r] == 0.0f) { /* every key masked: zeros, like torch 2.5's _safe_softmax */
      for (int64_t c = 0; c < Ev; c++) o[c] = 0.0f;
      lse[2 * r] = INFINITY;
      lse[2 * r + 1] = 0.0f;
    } else {
      float inv = 1.0f / l[r];
      for (int64_t c = 0; c < Ev; c++) o[c] = a[c] * inv;
      lse[2 * r] = m[r];
      lse[2 * r + 1] = logf(l[r]);
    }
  }
}

/* tasks [begin, end) of (b, query block) */
ATTN_HOT static void fwd_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t sizes[F_COUNT] = {P->E * BQ, BK * P->Ep, BK * P->Evp, BK * BQ, BQ * P->Evp};
  tiles T;
  if (!tiles_alloc(&T, F_COUNT, sizes)) {
    __atomic_store_n(&P->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t t = begin; t < end && !attn__cancelled(); t++) fwd_block(P, &T, t / P->nqb, t % P->nqb);
  scratch_free(T.base, T.n);
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                  */

enum { A_KT, A_VT, A_QS, A_DO, A_S, A_DP, A_DK, A_DV, A_COUNT };

/* dK, dV of one block of keys of the kv batch kvb, summed over the query
   heads that read it and every query block that sees it.  Tiles: kt
   [E, BK], vt [Ev, BK] (the key block, transposed once); per query block
   qs [BQ, Ep] (q * scale) and dos [BQ, Evp] (dO) rows, s [BQ, BK]
   (scores, then P) and dp [BQ, BK] (dP, then dS); dk [BK, Ep], dv [BK, Evp]
   the sums. */
INLINE void kv_block(const plan *P, const tiles *T, int64_t kvb, int64_t kb) {
  const int64_t j0 = kb * BK, nk = P->S - j0 < BK ? P->S - j0 : BK, nk4 = round_up(nk, 4);
  const int64_t nkw = round_up(nk, VW); /* key columns computed (short sequences) */
  const int64_t E = P->E, Ep = P->Ep, Ev = P->Ev, Evp = P->Evp;
  float *restrict kt = T->t[A_KT], *restrict vt = T->t[A_VT], *restrict qs = T->t[A_QS], *restrict dos = T->t[A_DO],
                  *restrict s = T->t[A_S], *restrict dp = T->t[A_DP], *restrict dk = T->t[A_DK],
                  *restrict dv = T->t[A_DV];
  memset(dk, 0, (size_t)(nk4 * Ep) * sizeof(float));
  memset(dv, 0, (size_t)(nk4 * Evp) * sizeof(float));
  /* the q batches of this kv batch: its index with the head multiplied
     out by group */
  int64_t kvshape[ATTN_MAX_DIMS], idx[ATTN_MAX_DIMS], cstride[ATTN_MAX_DIMS];
  memcpy(kvshape, P->bshape, sizeof kvshape);
  if (P->nb) kvshape[P->nb - 1] /= P->group;
  unflatten(P->nb, kvshape, kvb, idx);
  attn__contiguous_strides(P->nb, P->bshape, cstride);
  for (int64_t g = 0; g < P->group; g++) {
    int64_t qidx[ATTN_MAX_DIMS];
    memcpy(qidx, idx, sizeof qidx);
    if (P->nb) qidx[P->nb - 1] = idx[P->nb - 1] * P->group + g;
    const int64_t b = offset_of(P->nb, qidx, cstride);
    batch_ptrs bp;
    batch_at(P, b, &bp);
    if (g == 0) {
      pack_t(kt, BK, bp.k + j0 * P->k.rs, nk, P->k.rs, P->k.cs, E, 1.0f);
      pack_t(vt, BK, bp.v + j0 * P->v.rs, nk, P->v.rs, P->v.cs, Ev, 1.0f);
    }
    int64_t qb0 = 0;
    if (P->causal) { /* the first query that sees key j0: i >= j0 - causal_off */
      int64_t imin = j0 - P->causal_off;
      if (imin >= P->L) continue;
      qb0 = imin > 0 ? imin / BQ : 0;
    }
    const float *lse = P->lse + 2 * b * P->L, *D = P->D + b * P->L;
    for (int64_t qb = qb0; qb < P->nqb; qb++) {
      const int64_t i0 = qb * BQ, nq = P->L - i0 < BQ ? P->L - i0 : BQ, nq4 = round_up(nq, 4);
      pack_rows(qs, Ep, nq4, bp.q + i0 * P->q.rs, nq, P->q.rs, P->q.cs, E, P->scale);
      pack_rows(dos, Evp, nq4, bp.dout + i0 * P->dout.rs, nq, P->dout.rs, P->dout.cs, Ev, 1.0f);
      /* s [nq4, BK] = qs @ kt;  dp [nq4, BK] = dos @ vt */
      tile_gemm(P->wide, nq4, nkw, E, qs, Ep, 1, kt, BK, s, BK, false);
      mask_tile(P, s, nq, i0, j0, nk, bp.m);
      tile_gemm(P->wide, nq4, nkw, Ev, dos, Evp, 1, vt, BK, dp, BK, false);
      for (int64_t r = 0; r < nq; r++) {
        const float mi = lse[2 * (i0 + r)], gi = lse[2 * (i0 + r) + 1], di = D[i0 + r];
        float *sr = s + r * BK, *dr = dp + r * BK;
        for (int64_t j = 0; j < nkw; j++) {
          float p = exp_neg((sr[j] - mi) - gi);
          sr[j] = p;
          dr[j] = p * (dr[j] - di);
        }
      }
      /* dv [nk4, Evp] += p^T [nk4, nq] @ dos [nq, Evp];
         dk [nk4, Ep] += ds^T [nk4, nq] @ qs [nq, Ep] */
      tile_gemm(P->wide, nk4, Evp, nq, s, 1, BK, dos, Evp, dv, Evp, true);
      tile_gemm(P->wide, nk4, Ep, nq, dp, 1, BK, qs, Ep, dk, Ep, true);
    }
  }
  float *gk = P->dk + (kvb * P->S + j0) * E, *gv = P->dv + (kvb * P->S + j0) * Ev;
  for (int64_t j = 0; j < nk; j++) {
    memcpy(gk + j * E, dk + j * Ep, (size_t)E * sizeof(float));
    memcpy(gv + j * Ev, dv + j * Evp, (size_t)Ev * sizeof(float));
  }
}

enum { B_QT, B_DOT, B_KR, B_VR, B_ST, B_DPT, B_DQ, B_COUNT };

/* dQ of one block of queries of batch b.  Tiles: qt [E, BQ] (q * scale)
   and dot [Ev, BQ] (dO), transposed once; per key block kr [BK, Ep] and
   vr [BK, Evp] rows, st [BK, BQ] (scores, then P^T) and dpt [BK, BQ]
   (dP^T, then dS^T); dq [BQ, Ep] the sum. */
INLINE void q_block(const plan *P, const tiles *T, int64_t b, int64_t qb) {
  batch_ptrs bp;
  batch_at(P, b, &bp);
  const int64_t i0 = qb * BQ, nq = P->L - i0 < BQ ? P->L - i0 : BQ, nq4 = round_up(nq, 4);
  const int nqw = (int)round_up(nq, VW); /* query columns computed (short sequences) */
  const int64_t E = P->E, Ep = P->Ep, Ev = P->Ev, Evp = P->Evp;
  float *restrict qt = T->t[B_QT], *restrict dot = T->t[B_DOT], *restrict kr = T->t[B_KR], *restrict vr = T->t[B_VR],
                  *restrict st = T->t[B_ST], *restrict dpt = T->t[B_DPT], *restrict dq = T->t[B_DQ];
  float mi[BQ], gi[BQ], di[BQ];
  pack_t(qt, BQ, bp.q + i0 * P->q.rs, nq, P->q.rs, P->q.cs, E, P->scale);
  pack_t(dot, BQ, bp.dout + i0 * P->dout.rs, nq, P->dout.rs, P->dout.cs, Ev, 1.0f);
  for (int i = 0; i < BQ; i++) { /* padding columns: m = +inf makes their p 0 */
    mi[i] = i < nq ? P->lse[2 * (b * P->L + i0 + i)] : INFINITY;
    gi[i] = i < nq ? P->lse[2 * (b * P->L + i0 + i) + 1] : 0.0f;
    di[i] = i < nq ? P->D[b * P->L + i0 + i] : 0.0f;
  }
  memset(dq, 0, (size_t)(nq4 * Ep) * sizeof(float));
  const int64_t kend = key_end(P, i0, nq);
  for (int64_t j0 = 0; j0 < kend; j0 += BK) {
    const int64_t nk = P->S - j0 < BK ? P->S - j0 : BK, nk4 = round_up(nk, 4);
    pack_rows(kr, Ep, nk4, bp.k + j0 * P->k.rs, nk, P->k.rs, P->k.cs, E, 1.0f);
    pack_rows(vr, Evp, nk4, bp.v + j0 * P->v.rs, nk, P->v.rs, P->v.cs, Ev, 1.0f);
    /* st [nk4, BQ] = kr @ qt;  dpt [nk4, BQ] = vr @ dot */
    tile_gemm(P->wide, nk4, nqw, E, kr, Ep, 1, qt, BQ, st, BQ, false);
    mask_tile_t(P, st, nq, i0, j0, nk, bp.m);
    tile_gemm(P->wide, nk4, nqw, Ev, vr, Evp, 1, dot, BQ, dpt, BQ, false);
    for (int64_t j = 0; j < nk; j++)
      for (int i = 0; i < nqw; i++) {
        float p = exp_neg((st[j * BQ + i] - mi[i]) - gi[i]);
        dpt[j * BQ + i] = p * (dpt[j * BQ + i] - di[i]);
      }
    /* dq [nq4, Ep] += ds [nq4, nk] (= dpt^T) @ kr [nk, Ep] */
    tile_gemm(P->wide, nq4, Ep, nk, dpt, 1, BQ, kr, Ep, dq, Ep, true);
  }
  float *g = P->dq + (b * P->L + i0) * E;
  for (int64_t r = 0; r < nq; r++)
    for (int64_t c = 0; c < E; c++) g[r * E + c] = dq[r * Ep + c] * P->scale;
}

ATTN_HOT static void kv_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t sizes[A_COUNT] = {P->E * BK,   P->Ev * BK, BQ * P->Ep,  BQ * P->Evp,
                                  BQ * BK,     BQ * BK,    BK * P->Ep,  BK * P->Evp};
  tiles T;
  if (!tiles_alloc(&T, A_COUNT, sizes)) {
    __atomic_store_n(&P->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t t = begin; t < end && !attn__cancelled(); t++) kv_block(P, &T, t / P->nkb, t % P->nkb);
  scratch_free(T.base, T.n);
}

ATTN_HOT static void q_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t sizes[B_COUNT] = {P->E * BQ, P->Ev * BQ, BK * P->Ep, BK * P->Evp, BK * BQ, BK * BQ, BQ * P->Ep};
  tiles T;
  if (!tiles_alloc(&T, B_COUNT, sizes)) {
    __atomic_store_n(&P->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t t = begin; t < end && !attn__cancelled(); t++) q_block(P, &T, t / P->nqb, t % P->nqb);
  scratch_free(T.base, T.n);
}

/* D [b, i] = sum_c dO[b, i, c] * O[b, i, c] for batches [begin, end) */
static void rowdot_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  for (int64_t b = begin; b < end; b++) {
    batch_ptrs bp;
    batch_at(P, b, &bp);
    for (int64_t i = 0; i < P->L; i++) {
      const float *o = bp.o + i * P->o.rs, *d = bp.dout + i * P->dout.rs;
      float acc = 0.0f;
      for (int64_t c = 0; c < P->Ev; c++) acc += o[c * P->o.cs] * d[c * P->dout.cs];
      P->D[b * P->L + i] = acc;
    }
  }
}

/* Runs fn over n tasks; small problems stay on the calling thread. */
static void run(plan *P, int64_t n, void (*fn)(int64_t, int64_t, void *), double flops) {
  if (flops < 4e6)
    fn(0, n, P);
  else
    attn__parallel_for(n, fn, P);
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

/* Whether the CPU has 32 vector registers for the 8-row micro-kernel
   (AVX-512; with AVX2's 16 its accumulators would spill). */
static bool wide_registers(void) {
#if defined(__GNUC__) && defined(__x86_64__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

#define FN "scaled_dot_product_attention"

static void set_operand(operand *o, const attn_tensor *t, int nb, const int64_t *bstride) {
  o->p = attn_tensor_data(t);
  for (int d = 0; d < nb; d++) o->bs[d] = bstride ? bstride[d] : t->stride[d];
  o->rs = t->stride[t->ndim - 2];
  o->cs = t->stride[t->ndim - 1];
}

/* Checks the arguments (shared with the reference path); fills the plan's
   geometry when P is not NULL. */
static attn_status check_args(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                              const attn_sdpa_opts *o, plan *P) {
  char sq[ATTN_SHAPE_BUF], sk[ATTN_SHAPE_BUF], sv[ATTN_SHAPE_BUF];
  if (!q || !k || !v) return attn_set_error(ATTN_ERR_ARG, FN ": query, key and value are required");
  if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2 || q->ndim != k->ndim || q->ndim != v->ndim)
    return attn_set_error(ATTN_ERR_SHAPE,
                          FN ": query %s, key %s and value %s must have the same number of dims, at least 2 "
                          "([..., L, E], [..., S, E], [..., S, Ev])",
                          ATTN_SHAPE(q, sq), ATTN_SHAPE(k, sk), ATTN_SHAPE(v, sv));
  const int nd = q->ndim, nb = nd - 2;
  if (q->shape[nd - 1] != k->shape[nd - 1])
    return attn_set_error(ATTN_ERR_SHAPE, FN ": query %s and key %s must have the same embedding size (last dim)",
                          ATTN_SHAPE(q, sq), ATTN_SHAPE(k, sk));
  if (k->shape[nd - 2] != v->shape[nd - 2])
    return attn_set_error(ATTN_ERR_SHAPE,
                          FN ": key %s and value %s must have the same sequence length (dim -2)",
                          ATTN_SHAPE(k, sk), ATTN_SHAPE(v, sv));
  int64_t group = 1;
  for (int d = 0; d < nb; d++) {
    bool head = d == nb - 1;
    if (k->shape[d] != v->shape[d] || (q->shape[d] != k->shape[d] && !(head && o->enable_gqa)))
      return attn_set_error(ATTN_ERR_SHAPE,
                            FN ": query %s, key %s and value %s must have the same leading dims%s",
                            ATTN_SHAPE(q, sq), ATTN_SHAPE(k, sk), ATTN_SHAPE(v, sv),
                            head && !o->enable_gqa && k->shape[d] == v->shape[d] && k->shape[d] &&
                                    q->shape[d] % k->shape[d] == 0
                                ? " (set enable_gqa for grouped-query attention)"
                                : "");
    if (head && q->shape[d] != k->shape[d]) {
      if (k->shape[d] == 0 || q->shape[d] % k->shape[d] != 0)
        return attn_set_error(ATTN_ERR_SHAPE,
                              FN ": with enable_gqa the number of query heads (dim -3 of query %s) must be a "
                              "multiple of the number of key/value heads (dim -3 of key %s)",
                              ATTN_SHAPE(q, sq), ATTN_SHAPE(k, sk));
      group = q->shape[d] / k->shape[d];
    }
  }
  const int64_t L = q->shape[nd - 2], S = k->shape[nd - 2];
  if (o->is_causal && o->attn_mask)
    return attn_set_error(ATTN_ERR_ARG,
                          FN ": an explicit attn_mask cannot be combined with is_causal (as in torch); fold the "
                          "causal mask into attn_mask (causal_mask)");
  if (o->causal_bottom_right && !o->is_causal)
    return attn_set_error(ATTN_ERR_ARG, FN ": causal_bottom_right needs is_causal");
  if (!(o->dropout_p >= 0.0 && o->dropout_p <= 1.0))
    return attn_set_error(ATTN_ERR_ARG, FN ": dropout_p must be in [0, 1], got %g", o->dropout_p);
  if (!isnan(o->scale) && !isfinite(o->scale))
    return attn_set_error(ATTN_ERR_ARG, FN ": scale must be finite, got %g", o->scale);
  int64_t full[ATTN_MAX_DIMS];
  for (int d = 0; d < nb; d++) full[d] = q->shape[d];
  full[nb] = L;
  full[nb + 1] = S;
  const attn_tensor *m = o->attn_mask;
  if (m) {
    bool ok = m->ndim <= nd;
    for (int i = 1; ok && i <= m->ndim; i++) {
      int64_t ms = m->shape[m->ndim - i];
      ok = ms == 1 || ms == full[nd - i];
    }
    if (!ok) {
      char sm[ATTN_SHAPE_BUF];
      return attn_set_error(ATTN_ERR_SHAPE,
                            FN ": attn_mask %s cannot be broadcast to the attention shape %s ([..., L, S] for "
                            "query %s and key %s)",
                            ATTN_SHAPE(m, sm), attn_shape_str(nd, full, sv, sizeof sv), ATTN_SHAPE(q, sq),
                            ATTN_SHAPE(k, sk));
    }
  }
  if (!P) return ATTN_OK;

  memset(P, 0, sizeof *P);
  P->nb = nb;
  memcpy(P->bshape, q->shape, sizeof(int64_t) * (size_t)nb);
  P->nbq = attn__shape_numel(nb, P->bshape);
  P->group = group;
  P->nbkv = P->nbq / group;
  P->L = L;
  P->S = S;
  P->E = q->shape[nd - 1];
  P->Ev = v->shape[nd - 1];
  P->Ep = round_up(P->E, VW);
  P->Evp = round_up(P->Ev, VW);
  P->nqb = (L + BQ - 1) / BQ;
  P->nkb = (S + BK - 1) / BK;
  double sc = o->scale;
  if (isnan(sc) || sc == 0.0) sc = 1.0 / sqrt((double)P->E);
  P->scale = (float)sc;
  P->wide = wide_registers();
  P->causal = o->is_causal;
  P->causal_off = o->causal_bottom_right ? S - L : 0;
  set_operand(&P->q, q, nb, NULL);
  set_operand(&P->k, k, nb, NULL);
  set_operand(&P->v, v, nb, NULL);
  if (m) {
    int64_t ms[ATTN_MAX_DIMS];
    attn__broadcast_strides(m, nd, full, ms);
    P->m.p = attn_tensor_data(m);
    memcpy(P->m.bs, ms, sizeof(int64_t) * (size_t)nb);
    P->m.rs = ms[nb];
    P->m.cs = ms[nb + 1];
    P->mask_kind = o->mask_is_bool ? MASK_BOOL : MASK_ADD;
  }
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Autograd                                                                  */

static double work_flops(const plan *P) {
  return 2.0 * (double)P->nbq * (double)P->L * (double)P->S * (double)(P->E + P->Ev);
}

static void opts_from_node(const attn_node *node, attn_sdpa_opts *o) {
  attn_sdpa_opts_init(o);
  o->attn_mask = node->saved[5];
  o->mask_is_bool = node->iargs[0] == MASK_BOOL;
  o->is_causal = node->iargs[1];
  o->causal_bottom_right = node->iargs[2];
  o->enable_gqa = node->iargs[3];
  o->scale = node->fargs[0];
}

/* grads of q, k, v from dO [..., L, Ev] */
static attn_status sdpa_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn_tensor *q = node->saved[0], *k = node->saved[1], *v = node->saved[2], *o = node->saved[3],
                    *lse = node->saved[4];
  attn_sdpa_opts opts;
  opts_from_node(node, &opts);
  plan P;
  attn_status st = check_args(q, k, v, &opts, &P);
  if (st) return st;
  const int nb = P.nb;
  set_operand(&P.o, o, nb, NULL);
  set_operand(&P.dout, g, nb, NULL);
  P.lse = attn_tensor_data(lse);
  bool want_q = node->next[0].node, want_kv = node->next[1].node || node->next[2].node;
  attn_tensor *dq = NULL, *dk = NULL, *dv = NULL;
  float *D = NULL;
  int64_t nD = P.nbq * P.L;
  if ((want_q && (st = attn__alloc(FN, q->ndim, q->shape, &dq))) ||
      (want_kv && ((st = attn__alloc(FN, k->ndim, k->shape, &dk)) || (st = attn__alloc(FN, v->ndim, v->shape, &dv)))))
    goto out;
  if (!(D = scratch_alloc(nD))) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory in backward");
    goto out;
  }
  P.D = D;
  run(&P, P.nbq, rowdot_range, (double)nD * (double)P.Ev * 64);
  if (want_kv) {
    P.dk = attn_tensor_data(dk);
    P.dv = attn_tensor_data(dv);
    if (P.S == 0 || P.nbkv == 0) {
    } else if (P.L == 0) {
      memset(P.dk, 0, (size_t)attn_tensor_numel(dk) * sizeof(float));
      memset(P.dv, 0, (size_t)attn_tensor_numel(dv) * sizeof(float));
    } else {
      run(&P, P.nbkv * P.nkb, kv_range, 2 * work_flops(&P));
    }
  }
  if (want_q && P.L > 0 && P.nbq > 0) {
    P.dq = attn_tensor_data(dq);
    run(&P, P.nbq * P.nqb, q_range, 1.5 * work_flops(&P));
  }
  if (P.failed) st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory for the backward tiles");
  else if (attn__cancelled()) st = attn__limit_error(FN); /* blocks were skipped */
out:
  scratch_free(D, nD);
  if (st) {
    attn_tensor_release(dq), attn_tensor_release(dk), attn_tensor_release(dv);
    return st;
  }
  grads[0] = dq;
  if (node->next[1].node) grads[1] = dk;
  else attn_tensor_release(dk);
  if (node->next[2].node) grads[2] = dv;
  else attn_tensor_release(dv);
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */

void attn_sdpa_opts_init(attn_sdpa_opts *opts) {
  memset(opts, 0, sizeof *opts);
  opts->scale = NAN;
}

static attn_status fused(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, const attn_sdpa_opts *o,
                         attn_tensor **out) {
  plan P;
  attn_status st = check_args(q, k, v, o, &P);
  if (st) return st;
  const attn_tensor *in[3] = {q, k, v};
  const bool record = attn__ag_needed(3, in);
  int64_t oshape[ATTN_MAX_DIMS];
  memcpy(oshape, q->shape, sizeof oshape);
  oshape[q->ndim - 1] = P.Ev;
  attn_tensor *res = NULL, *lse_t = NULL;
  float *lse = NULL;
  const int64_t nlse = 2 * P.nbq * P.L;
  if ((st = attn__alloc(FN, q->ndim, oshape, &res))) return st;
  /* lse: a tensor the backward node keeps, or scratch */
  if (record) {
    int64_t lshape[ATTN_MAX_DIMS]; /* [..., L, 2]: (m, log l) per query */
    memcpy(lshape, q->shape, sizeof lshape);
    lshape[q->ndim - 1] = 2;
    if ((st = attn__alloc(FN, q->ndim, lshape, &lse_t))) goto fail;
    lse = attn_tensor_data(lse_t);
    mem_add(nlse * (int64_t)sizeof(float));
  } else if (!(lse = scratch_alloc(nlse))) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory");
    goto fail;
  }
  P.out = attn_tensor_data(res);
  P.lse = lse;
  if (P.nbq > 0 && P.L > 0) run(&P, P.nbq * P.nqb, fwd_range, work_flops(&P));
  if (record) mem_add(-nlse * (int64_t)sizeof(float));
  else scratch_free(lse, nlse);
  if (P.failed) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory for the attention tiles");
    goto fail;
  }
  if (attn__cancelled()) { /* blocks were skipped */
    st = attn__limit_error(FN);
    goto fail;
  }
  if (record) {
    const attn_tensor *saved[6] = {q, k, v, res, lse_t, o->attn_mask};
    attn_node *node;
    st = attn__ag_record(res, "ScaledDotProductFlashAttentionForCpuBackward0", sdpa_backward, 3, in, 6, saved,
                         &node);
    if (st) goto fail;
    node->iargs[0] = P.mask_kind;
    node->iargs[1] = o->is_causal;
    node->iargs[2] = o->causal_bottom_right;
    node->iargs[3] = o->enable_gqa;
    node->fargs[0] = P.scale;
    attn_tensor_release(lse_t);
  }
  *out = res;
  return ATTN_OK;
fail:
  attn_tensor_release(lse_t);
  attn_tensor_release(res);
  return st;
}

attn_status attn__sdpa_fused(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                             const attn_sdpa_opts *opts, attn_tensor **out) {
  attn_sdpa_opts d;
  if (!opts) attn_sdpa_opts_init(&d), opts = &d;
  return fused(q, k, v, opts, out);
}

attn_status attn_sdpa(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, const attn_sdpa_opts *opts,
                      attn_tensor **out, attn_tensor **weights) {
  attn_sdpa_opts d;
  if (!opts) attn_sdpa_opts_init(&d), opts = &d;
  attn_status st = check_args(q, k, v, opts, NULL);
  if (st) return st;
  const attn_tensor *m = opts->attn_mask;
  bool mask_grad = m && !opts->mask_is_bool && attn__ag_needed(1, &m);
  if (weights || opts->dropout_p > 0.0 || mask_grad) return attn__sdpa_reference(q, k, v, opts, out, weights);
  return fused(q, k, v, opts, out);
}

/* ------------------------------------------------------------------------ */
/* Mask helpers                                                              */

/* [L, S]: 1 where j <= i (+ S - L with bottom_right) */
attn_status attn_causal_mask(int64_t L, int64_t S, bool bottom_right, attn_tensor **out) {
  if (L < 0 || S < 0)
    return attn_set_error(ATTN_ERR_ARG, "causal_mask: sizes must be >= 0, got L=%lld S=%lld", (long long)L,
                          (long long)S);
  int64_t shape[2] = {L, S};
  attn_tensor *t;
  attn_status st = attn__alloc("causal_mask", 2, shape, &t);
  if (st) return st;
  float *p = attn_tensor_data(t);
  int64_t off = bottom_right ? S - L : 0;
  for (int64_t i = 0; i < L; i++)
    for (int64_t j = 0; j < S; j++) p[i * S + j] = j <= i + off ? 1.0f : 0.0f;
  *out = t;
  return ATTN_OK;
}

/* lengths [B] -> [B, 1, 1, S]: 1 where j < lengths[b] */
attn_status attn_padding_mask(const attn_tensor *lengths, int64_t S, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  if (lengths->ndim != 1)
    return attn_set_error(ATTN_ERR_SHAPE, "padding_mask: lengths must be 1-d [B], got %s", ATTN_SHAPE(lengths, sb));
  if (S < 0) return attn_set_error(ATTN_ERR_ARG, "padding_mask: S must be >= 0, got %lld", (long long)S);
  int64_t B = lengths->shape[0];
  for (int64_t b = 0; b < B; b++) {
    float len = attn_tensor_get_flat(lengths, b);
    if (!(len == floorf(len)) || len < 0 || len > (float)S)
      return attn_set_error(ATTN_ERR_ARG, "padding_mask: lengths must be integers in [0, S = %lld], found %g",
                            (long long)S, (double)len);
  }
  int64_t shape[4] = {B, 1, 1, S};
  attn_tensor *t;
  attn_status st = attn__alloc("padding_mask", 4, shape, &t);
  if (st) return st;
  float *p = attn_tensor_data(t);
  for (int64_t b = 0; b < B; b++) {
    int64_t len = (int64_t)attn_tensor_get_flat(lengths, b);
    for (int64_t j = 0; j < S; j++) p[b * S + j] = j < len ? 1.0f : 0.0f;
  }
  *out = t;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Block entry points (sequence parallelism)                                 */
/*
 * The fused kernel on one (query block, key block) pair, for attention
 * split over processes (attn.dist's ring attention): the forward gives the
 * block's output and per-query log-sum-exp, so that blocks combine with
 * the log-sum-exp rule; the backward takes the final output and
 * log-sum-exp over all blocks and gives this block's share of dq, dk, dv.
 * Added beside the entry points above without changing them.
 */

#undef FN
#define FN "sdpa_block_forward"

attn_status attn_sdpa_block_forward(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, bool is_causal,
                                    double scale, attn_tensor **out, attn_tensor **lse_out) {
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  o.is_causal = is_causal;
  o.scale = scale;
  plan P;
  attn_status st = check_args(q, k, v, &o, &P);
  if (st) return st;
  int64_t oshape[ATTN_MAX_DIMS], lshape[ATTN_MAX_DIMS];
  memcpy(oshape, q->shape, sizeof oshape);
  oshape[q->ndim - 1] = P.Ev;
  memcpy(lshape, q->shape, sizeof lshape);
  attn_tensor *res = NULL, *lse_t = NULL;
  const int64_t nrows = P.nbq * P.L;
  float *pairs = NULL;
  if ((st = attn__alloc(FN, q->ndim, oshape, &res)) || (st = attn__alloc(FN, q->ndim - 1, lshape, &lse_t))) goto fail;
  if (!(pairs = scratch_alloc(2 * nrows))) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory");
    goto fail;
  }
  P.out = attn_tensor_data(res);
  P.lse = pairs;
  if (P.nbq > 0 && P.L > 0) run(&P, P.nbq * P.nqb, fwd_range, work_flops(&P));
  if (P.failed) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory for the attention tiles");
    goto fail;
  }
  float *l = attn_tensor_data(lse_t);
  for (int64_t i = 0; i < nrows; i++) /* (m, log l) -> m + log l; no visible key: -inf */
    l[i] = pairs[2 * i] == INFINITY ? -INFINITY : pairs[2 * i] + pairs[2 * i + 1];
  scratch_free(pairs, 2 * nrows);
  *out = res;
  *lse_out = lse_t;
  return ATTN_OK;
fail:
  scratch_free(pairs, 2 * nrows);
  attn_tensor_release(res);
  attn_tensor_release(lse_t);
  return st;
}

#undef FN
#define FN "sdpa_block_backward"

attn_status attn_sdpa_block_backward(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                                     const attn_tensor *out, const attn_tensor *dout, const attn_tensor *lse,
                                     bool is_causal, double scale, attn_tensor **dq_out, attn_tensor **dk_out,
                                     attn_tensor **dv_out) {
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  o.is_causal = is_causal;
  o.scale = scale;
  plan P;
  attn_status st = check_args(q, k, v, &o, &P);
  if (st) return st;
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  const int nd = q->ndim;
  bool ok = out->ndim == nd && dout->ndim == nd && lse->ndim == nd - 1 && attn_same_shape(out, dout) &&
            attn_tensor_is_contiguous(lse) && out->shape[nd - 1] == P.Ev;
  for (int d = 0; ok && d < nd - 1; d++) ok = out->shape[d] == q->shape[d] && lse->shape[d] == q->shape[d];
  if (!ok)
    return attn_set_error(ATTN_ERR_SHAPE, FN ": out %s / dout and lse %s (contiguous) must match query %s",
                          ATTN_SHAPE(out, sa), ATTN_SHAPE(lse, sb), ATTN_SHAPE(q, sa));
  const int nb = P.nb;
  const int64_t nrows = P.nbq * P.L;
  set_operand(&P.o, out, nb, NULL);
  set_operand(&P.dout, dout, nb, NULL);
  attn_tensor *dq = NULL, *dk = NULL, *dv = NULL;
  float *D = NULL, *pairs = NULL;
  if ((st = attn__alloc(FN, q->ndim, q->shape, &dq)) || (st = attn__alloc(FN, k->ndim, k->shape, &dk)) ||
      (st = attn__alloc(FN, v->ndim, v->shape, &dv)))
    goto out;
  if (!(D = scratch_alloc(nrows ? nrows : 1)) || !(pairs = scratch_alloc(2 * (nrows ? nrows : 1)))) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory");
    goto out;
  }
  const float *l = attn_tensor_data(lse);
  for (int64_t i = 0; i < nrows; i++) { /* lse -> (m, 0); -inf (no visible key) -> (+inf, 0): p = 0 */
    pairs[2 * i] = l[i] == -INFINITY ? INFINITY : l[i];
    pairs[2 * i + 1] = 0.0f;
  }
  P.lse = pairs;
  P.D = D;
  run(&P, P.nbq, rowdot_range, (double)nrows * (double)P.Ev * 64);
  P.dk = attn_tensor_data(dk);
  P.dv = attn_tensor_data(dv);
  if (P.S == 0 || P.nbkv == 0) {
  } else if (P.L == 0) {
    memset(P.dk, 0, (size_t)attn_tensor_numel(dk) * sizeof(float));
    memset(P.dv, 0, (size_t)attn_tensor_numel(dv) * sizeof(float));
  } else {
    run(&P, P.nbkv * P.nkb, kv_range, 2 * work_flops(&P));
  }
  if (P.L > 0 && P.nbq > 0) {
    P.dq = attn_tensor_data(dq);
    run(&P, P.nbq * P.nqb, q_range, 1.5 * work_flops(&P));
  }
  if (P.failed) st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory for the backward tiles");
out:
  scratch_free(D, nrows ? nrows : 1);
  scratch_free(pairs, 2 * (nrows ? nrows : 1));
  if (st) {
    attn_tensor_release(dq), attn_tensor_release(dk), attn_tensor_release(dv);
    return st;
  }
  *dq_out = dq;
  *dk_out = dk;
  *dv_out = dv;
  return ATTN_OK;
}
