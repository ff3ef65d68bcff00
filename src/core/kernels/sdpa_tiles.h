/* SPDX-License-Identifier: MIT */
/* The fused attention's tile code (the scheme is described in sdpa.c),
 * written once and compiled by each kernel family's translation unit
 * (kernels_avx512.c, kernels_avx2.c, kernels_portable.c) with that
 * family's flags.  The includer first defines INLINE and
 *   tile_gemm(M, N, K, a, ars, acs, b, ldb, c, ldc, acc):
 *     c [M, N] (+)= a [M, K] @ b [K, N], M % 4 == 0, N % SDPA_PAD == 0,
 *     a's element (r, p) at a[r * ars + p * acs] (broadcast, any layout),
 *     b and c with row strides ldb, ldc;
 * and SDPA_VQ (16, 8 or 4): the softmax loops over query columns run on
 * vectors of that many floats, the rest is left to the compiler's
 * vectoriser at the family's width.  Defines the static task functions
 * sdpa_fwd_range, sdpa_kv_range, sdpa_q_range, sdpa_kvq_range and
 * sdpa_saved_range. */
#include "sdpa_plan.h"
#include "vmath.h"

#include <math.h>

/* The softmax exponentials are powers of 2: a score s goes in as
   (s - m) * log2(e), m the row maximum, and 2^x (vmath.h's exp2_neg and
   EXP2_POLY) needs no extended-precision argument reduction, so each
   costs a third fewer operations than e^x (the largest cost beside the
   tile products).  s - m comes first: it is exact near the maximum, and
   finite under a -FLT_MAX mask, where s * log2(e) would overflow.  A
   row's statistics are (m, log2 l). */
static const float log2e_f = 1.44269504088896341f;

/* NaN-sticky max (a NaN score poisons its row, as in softmax) */
INLINE float max_nan(float a, float v) { return (v > a || v != v) ? v : a; }

/* The same on vectors of SDPA_VQ floats (the includer's width), for the
   loops over query columns: GCC/Clang vector types, so one text serves
   every family and compiles to that family's instructions. */
typedef float vq __attribute__((vector_size(SDPA_VQ * sizeof(float))));
typedef int32_t vqi __attribute__((vector_size(SDPA_VQ * sizeof(float))));
INLINE vq vq_load(const float *p) {
  vq v;
  memcpy(&v, p, sizeof v);
  return v;
}
INLINE void vq_store(float *p, vq v) { memcpy(p, &v, sizeof v); }
INLINE vq vq_set(float x) { return (vq){0} + x; }
/* m ? a : b per lane (m from a vector compare: all ones or zero) */
INLINE vq vq_sel(vqi m, vq a, vq b) { return (vq)((m & (vqi)a) | (~m & (vqi)b)); }
INLINE vq max_nan_v(vq a, vq v) { return vq_sel((v > a) | (v != v), v, a); }
/* exp2_neg per lane */
typedef uint32_t vqu __attribute__((vector_size(SDPA_VQ * sizeof(float))));
INLINE vq exp2_neg_v(vq x) {
  const vq lo = vq_set(-127.0f), magic = vq_set(12583039.0f);
  const vq xc = vq_sel(x < lo, lo, x);
  const vq t = xc + magic, r = xc - (t - magic), p = EXP2_POLY(r);
  return p * (vq)((vqu)t << 23);
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
    if (cs == 1) {
      for (int64_t c = 0; c < ncols; c++) d[c] = alpha * s[c];
    } else if (cs == 0) { /* an expanded row (the dO of x:sum():backward()) */
      const float x = alpha * s[0];
      for (int64_t c = 0; c < ncols; c++) d[c] = x;
    } else {
      for (int64_t c = 0; c < ncols; c++) d[c] = alpha * s[c * cs];
    }
    for (int64_t c = ncols; c < ldd; c++) d[c] = 0.0f;
  }
  if (rows4 > rows) memset(dst + rows * ldd, 0, (size_t)((rows4 - rows) * ldd) * sizeof(float));
}

/* dst [ncols, ldd] = alpha * src [rows, ncols]^T (strides rs, cs), zero in
   columns rows..ldd-1.  Done once per task, so it may be plain. */
INLINE void pack_t(float *restrict dst, int64_t ldd, const float *restrict src, int64_t rows, int64_t rs, int64_t cs,
                   int64_t ncols, float alpha) {
  /* 8 source rows at a time: each destination row gets 32 contiguous
     bytes, not one float per cache line */
  int64_t r0 = 0;
  for (; r0 + 8 <= rows; r0 += 8)
    for (int64_t c = 0; c < ncols; c++)
      for (int r = 0; r < 8; r++) dst[c * ldd + r0 + r] = alpha * src[(r0 + r) * rs + c * cs];
  for (int64_t r = r0; r < rows; r++) {
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

/* The same for a transposed tile st [nk, ld] (row j: key j0 + j, column
   i: query i0 + i); only rows < nk and columns < nq are touched. */
INLINE void mask_tile_t(const plan *P, float *st, int64_t ld, int64_t nq, int64_t i0, int64_t j0, int64_t nk,
                        const float *mb) {
  if (P->mask_kind != MASK_NONE) {
    const int64_t rs = P->m.rs, cs = P->m.cs;
    const bool is_bool = P->mask_kind == MASK_BOOL;
    if (rs == 0) { /* one value per key (padding masks): whole rows */
      for (int64_t j = 0; j < nk; j++) {
        float val = mb[(j0 + j) * cs], *row = st + j * ld;
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
          for (int64_t j = 0; j < nk; j++) col[j * ld] = mr[j * cs] != 0.0f ? col[j * ld] : -INFINITY;
        else
          for (int64_t j = 0; j < nk; j++) col[j * ld] += mr[j * cs];
      }
    }
  }
  if (P->causal)
    for (int64_t j = 0; j < nk; j++) {
      int64_t hidden = j0 + j - P->causal_off - i0; /* queries i < hidden cannot see key j0 + j */
      if (hidden > nq) hidden = nq;
      for (int64_t i = 0; i < hidden; i++) st[j * ld + i] = -INFINITY;
    }
}

/* dst [n] = src [n] * scale, or added to dst with acc (a leaf's .grad):
   each element .grad + gradient, the gradient rounded on its own as in the
   engine's separate add (the empty asm keeps FMA contraction out). */
INLINE void put_row(float *restrict dst, const float *restrict src, int64_t n, float scale, bool acc) {
  if (!acc) {
    for (int64_t c = 0; c < n; c++) dst[c] = src[c] * scale;
    return;
  }
  float x[64];
  for (int64_t c0 = 0; c0 < n; c0 += 64) {
    const int64_t m = n - c0 < 64 ? n - c0 : 64;
    for (int64_t c = 0; c < m; c++) x[c] = src[c0 + c] * scale;
    __asm__ volatile("" : : "r"(x) : "memory");
    for (int64_t c = 0; c < m; c++) dst[c0 + c] += x[c];
  }
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

/* Per-thread tiles, one block each; carved from one aligned allocation. */
typedef struct {
  float *t[14];
  float *base;
  int64_t n;
} tiles;

static bool tiles_alloc(tiles *T, int count, const int64_t *sizes) {
  T->n = 0;
  for (int i = 0; i < count; i++) T->n += sdpa_round_up(sizes[i], SDPA_PAD); /* each tile 64-byte aligned */
  T->base = attn__sdpa_scratch_alloc(T->n);
  if (!T->base) return false;
  float *p = T->base;
  for (int i = 0; i < count; i++) {
    T->t[i] = p;
    p += sdpa_round_up(sizes[i], SDPA_PAD);
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
  sdpa_batch_at(P, b, &bp);
  const int64_t i0 = qb * BQ, nq = P->L - i0 < BQ ? P->L - i0 : BQ, nq4 = sdpa_round_up(nq, 4);
  /* columns of the query-wide tiles actually computed: short sequences
     (the notebooks' 6 to 16 tokens) do not pay for all BQ */
  const int nqw = (int)sdpa_round_up(nq, SDPA_PAD);
  const int64_t E = P->E, Ep = P->Ep, Ev = P->Ev, Evp = P->Evp;
  float *restrict qt = T->t[F_QT], *restrict kr = T->t[F_KR], *restrict vr = T->t[F_VR], *restrict st = T->t[F_ST],
                  *restrict oacc = T->t[F_O];
  float m[BQ], l[BQ], alpha[BQ];
  pack_t(qt, BQ, bp.q + i0 * P->q.rs, nq, P->q.rs, P->q.cs, E, P->scale);
  memset(oacc, 0, (size_t)(nq4 * Evp) * sizeof(float));
  for (int i = 0; i < BQ; i++) m[i] = -INFINITY, l[i] = 0.0f;
  const int64_t kend = sdpa_key_end(P, i0, nq);
  for (int64_t j0 = 0; j0 < kend; j0 += BK) {
    const int64_t nk = P->S - j0 < BK ? P->S - j0 : BK, nk4 = sdpa_round_up(nk, 4);
    /* unit-stride rows with no padding to add are read in place (a full
       key block for K, whose padded rows would lie past its end) */
    const float *ka = kr, *vb = vr;
    int64_t lda = Ep, ldv = Evp;
    if (P->k.cs == 1 && E == Ep && nk == BK)
      ka = bp.k + j0 * P->k.rs, lda = P->k.rs;
    else
      pack_rows(kr, Ep, nk4, bp.k + j0 * P->k.rs, nk, P->k.rs, P->k.cs, E, 1.0f);
    if (P->v.cs == 1 && Ev == Evp)
      vb = bp.v + j0 * P->v.rs, ldv = P->v.rs;
    else
      pack_rows(vr, Evp, nk, bp.v + j0 * P->v.rs, nk, P->v.rs, P->v.cs, Ev, 1.0f);
    /* sc [nk4, nqw] = k rows [nk4, E] @ qt [E, nqw]: the scores, in st or,
       kept for the backward, in this block's rows of the panel */
    float *sc = st;
    int64_t ldsc = BQ;
    if (P->scores) sc = sdpa_panel(P, b, i0) + j0 * nqw, ldsc = nqw;
    tile_gemm(nk4, nqw, E, ka, lda, 1, qt, BQ, sc, ldsc, false);
    mask_tile_t(P, sc, ldsc, nq, i0, j0, nk, bp.m);
    /* online softmax down the columns (query columns nq..nqw-1 are
       padding: computed, never read back) */
    for (int i = 0; i < nqw; i += SDPA_VQ) { /* SDPA_VQ queries at a time, held in registers */
      /* four running maxima: one would wait on its compare and blend every row */
      vq mx0 = vq_set(-INFINITY), mx1 = mx0, mx2 = mx0, mx3 = mx0, sum = vq_set(0.0f);
      int64_t j = 0;
      for (; j + 4 <= nk; j += 4) {
        mx0 = max_nan_v(mx0, vq_load(sc + j * ldsc + i));
        mx1 = max_nan_v(mx1, vq_load(sc + (j + 1) * ldsc + i));
        mx2 = max_nan_v(mx2, vq_load(sc + (j + 2) * ldsc + i));
        mx3 = max_nan_v(mx3, vq_load(sc + (j + 3) * ldsc + i));
      }
      for (; j < nk; j++) mx0 = max_nan_v(mx0, vq_load(sc + j * ldsc + i));
      const vq mx = max_nan_v(max_nan_v(mx0, mx1), max_nan_v(mx2, mx3));
      const vq mold = vq_load(m + i), mnew = max_nan_v(mold, mx);
      const vq mu = vq_sel(mnew == -INFINITY, vq_set(0.0f), mnew); /* nothing visible yet: every p is 0 */
      const vq al = exp2_neg_v((mold - mu) * log2e_f);
      for (int64_t j = 0; j < nk; j++) {
        vq e = exp2_neg_v((vq_load(sc + j * ldsc + i) - mu) * log2e_f);
        vq_store(st + j * BQ + i, e);
        sum += e;
      }
      vq_store(alpha + i, al);
      vq_store(m + i, mnew);
      vq_store(l + i, vq_load(l + i) * al + sum);
    }
    for (int64_t i = 0; i < nq4; i++)
      if (alpha[i] != 1.0f)
        for (int64_t c = 0; c < Evp; c++) oacc[i * Evp + c] *= alpha[i];
    /* o [nq4, Evp] += p [nq4, nk] (= st^T) @ v rows [nk, Evp] */
    tile_gemm(nq4, Evp, nk, st, 1, BQ, vb, ldv, oacc, Evp, true);
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
      lse[2 * r + 1] = log2f(l[r]);
    }
  }
}

/* tasks [begin, end) of (b, query block) */
static void sdpa_fwd_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t sizes[F_COUNT] = {P->E * BQ, BK * P->Ep, BK * P->Evp, BK * BQ, BQ * P->Evp};
  tiles T;
  if (!tiles_alloc(&T, F_COUNT, sizes)) {
    __atomic_store_n(&P->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t t = begin; t < end && !attn__cancelled(); t++) fwd_block(P, &T, t / P->nqb, t % P->nqb);
  attn__sdpa_scratch_free(T.base, T.n);
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                  */

enum { A_KT, A_VT, A_QS, A_DO, A_S, A_DP, A_DK, A_DV, A_KR, A_COUNT };

/* dK, dV of one block of keys of the kv batch kvb, summed over the query
   heads that read it and every query block that sees it.  Tiles: kt
   [E, BK], vt [Ev, BK] (the key block, transposed once); per query block
   qs [BQ, Ep] (q * scale) and dos [BQ, Evp] (dO) rows, s [BQ, BK]
   (scores, then P) and dp [BQ, BK] (dP, then dS); dk [BK, Ep], dv [BK, Evp]
   the sums.  With dqb (the task's dQ sums, [group][round_up(L, 4)][Ep], one
   per query head of this kv head) dQ += dS K rides along, K's rows in kr
   [BK, Ep]: no second pass recomputing P and dP. */
INLINE void kv_block(const plan *P, const tiles *T, int64_t kvb, int64_t kb, float *dqb) {
  const int64_t j0 = kb * BK, nk = P->S - j0 < BK ? P->S - j0 : BK, nk4 = sdpa_round_up(nk, 4);
  const int64_t nkw = sdpa_round_up(nk, SDPA_PAD); /* key columns computed (short sequences) */
  const int64_t E = P->E, Ep = P->Ep, Ev = P->Ev, Evp = P->Evp;
  float *restrict kt = T->t[A_KT], *restrict vt = T->t[A_VT], *restrict qs = T->t[A_QS], *restrict dos = T->t[A_DO],
                  *restrict s = T->t[A_S], *restrict dp = T->t[A_DP], *restrict dk = T->t[A_DK],
                  *restrict dv = T->t[A_DV];
  memset(dk, 0, (size_t)(nk4 * Ep) * sizeof(float));
  memset(dv, 0, (size_t)(nk4 * Evp) * sizeof(float));
  /* Query and dO rows are read in place where a block of them is whole
     unit-stride rows with nothing to pad, instead of being copied once per
     key block.  In-place query rows are unscaled: `scale` then goes into the
     exponent (sscale) and into dK at the end, except under an additive
     mask, which has to meet the scaled scores (and with a scale that would
     turn a masked -inf into NaN). */
  const bool q_direct = P->q.cs == 1 && E == Ep && P->mask_kind != MASK_ADD && P->scale > 0.0f && isfinite(P->scale);
  const bool do_direct = P->dout.cs == 1 && Ev == Evp;
  const float sscale = q_direct ? P->scale : 1.0f;
  for (int64_t g = 0; g < P->group; g++) {
    const int64_t b = sdpa_q_batch(P, kvb, g);
    batch_ptrs bp;
    sdpa_batch_at(P, b, &bp);
    if (g == 0) {
      pack_t(kt, BK, bp.k + j0 * P->k.rs, nk, P->k.rs, P->k.cs, E, 1.0f);
      pack_t(vt, BK, bp.v + j0 * P->v.rs, nk, P->v.rs, P->v.cs, Ev, 1.0f);
      if (dqb) pack_rows(T->t[A_KR], Ep, nk, bp.k + j0 * P->k.rs, nk, P->k.rs, P->k.cs, E, 1.0f);
    }
    int64_t qb0 = 0;
    if (P->causal) { /* the first query that sees key j0: i >= j0 - causal_off */
      int64_t imin = j0 - P->causal_off;
      if (imin >= P->L) continue;
      qb0 = imin > 0 ? imin / BQ : 0;
    }
    const float *lse = P->lse + 2 * b * P->L, *D = P->D + b * P->L;
    for (int64_t qb = qb0; qb < P->nqb; qb++) {
      const int64_t i0 = qb * BQ, nq = P->L - i0 < BQ ? P->L - i0 : BQ, nq4 = sdpa_round_up(nq, 4);
      const float *qa = qs, *da = dos;
      int64_t ldq = Ep, ldo = Evp;
      if (q_direct && nq == nq4)
        qa = bp.q + i0 * P->q.rs, ldq = P->q.rs;
      else
        pack_rows(qs, Ep, nq4, bp.q + i0 * P->q.rs, nq, P->q.rs, P->q.cs, E, P->scale / sscale);
      if (do_direct && nq == nq4)
        da = bp.dout + i0 * P->dout.rs, ldo = P->dout.rs;
      else
        pack_rows(dos, Evp, nq4, bp.dout + i0 * P->dout.rs, nq, P->dout.rs, P->dout.cs, Ev, 1.0f);
      /* s [nq4, BK] = q rows @ kt (times scale / sscale);  dp [nq4, BK] = dO rows @ vt */
      tile_gemm(nq4, nkw, E, qa, ldq, 1, kt, BK, s, BK, false);
      mask_tile(P, s, nq, i0, j0, nk, bp.m);
      tile_gemm(nq4, nkw, Ev, da, ldo, 1, vt, BK, dp, BK, false);
      for (int64_t r = 0; r < nq; r++) {
        const float mi = lse[2 * (i0 + r)], gi = lse[2 * (i0 + r) + 1], di = D[i0 + r];
        float *sr = s + r * BK, *dr = dp + r * BK;
        for (int64_t j = 0; j < nkw; j++) {
          float p = exp2_neg((sr[j] * sscale - mi) * log2e_f - gi);
          sr[j] = p;
          dr[j] = p * (dr[j] - di);
        }
      }
      /* dv [nk4, Evp] += p^T [nk4, nq] @ dO rows [nq, Evp];
         dk [nk4, Ep] += ds^T [nk4, nq] @ q rows [nq, Ep] (times scale / sscale) */
      tile_gemm(nk4, Evp, nq, s, 1, BK, da, ldo, dv, Evp, true);
      tile_gemm(nk4, Ep, nq, dp, 1, BK, qa, ldq, dk, Ep, true);
      /* dq [nq4, Ep] += ds [nq4, nk] @ kr [nk, Ep] (ds rows nq..nq4-1 are 0) */
      if (dqb)
        tile_gemm(nq4, Ep, nk, dp, BK, 1, T->t[A_KR], Ep, dqb + (g * sdpa_round_up(P->L, 4) + i0) * Ep, Ep, true);
    }
  }
  float *gk = P->dk + (kvb * P->S + j0) * E, *gv = P->dv + (kvb * P->S + j0) * Ev;
  for (int64_t j = 0; j < nk; j++) {
    put_row(gk + j * E, dk + j * Ep, E, sscale, P->acc_dk);
    put_row(gv + j * Ev, dv + j * Evp, Ev, 1.0f, P->acc_dv);
  }
}

enum { B_QT, B_DOT, B_KR, B_VR, B_ST, B_DPT, B_DQ, B_COUNT };

/* dQ of one block of queries of batch b.  Tiles: qt [E, BQ] (q * scale)
   and dot [Ev, BQ] (dO), transposed once; per key block kr [BK, Ep] and
   vr [BK, Evp] rows, st [BK, BQ] (scores, then P^T) and dpt [BK, BQ]
   (dP^T, then dS^T); dq [BQ, Ep] the sum. */
INLINE void q_block(const plan *P, const tiles *T, int64_t b, int64_t qb) {
  batch_ptrs bp;
  sdpa_batch_at(P, b, &bp);
  const int64_t i0 = qb * BQ, nq = P->L - i0 < BQ ? P->L - i0 : BQ, nq4 = sdpa_round_up(nq, 4);
  const int nqw = (int)sdpa_round_up(nq, SDPA_PAD); /* query columns computed (short sequences) */
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
  const int64_t kend = sdpa_key_end(P, i0, nq);
  for (int64_t j0 = 0; j0 < kend; j0 += BK) {
    const int64_t nk = P->S - j0 < BK ? P->S - j0 : BK, nk4 = sdpa_round_up(nk, 4);
    pack_rows(kr, Ep, nk4, bp.k + j0 * P->k.rs, nk, P->k.rs, P->k.cs, E, 1.0f);
    pack_rows(vr, Evp, nk4, bp.v + j0 * P->v.rs, nk, P->v.rs, P->v.cs, Ev, 1.0f);
    /* st [nk4, BQ] = kr @ qt;  dpt [nk4, BQ] = vr @ dot */
    tile_gemm(nk4, nqw, E, kr, Ep, 1, qt, BQ, st, BQ, false);
    mask_tile_t(P, st, BQ, nq, i0, j0, nk, bp.m);
    tile_gemm(nk4, nqw, Ev, vr, Evp, 1, dot, BQ, dpt, BQ, false);
    for (int i = 0; i < nqw; i += SDPA_VQ) {
      const vq mv = vq_load(mi + i), gv = vq_load(gi + i), dv = vq_load(di + i);
      for (int64_t j = 0; j < nk; j++) {
        vq p = exp2_neg_v((vq_load(st + j * BQ + i) - mv) * log2e_f - gv);
        vq_store(dpt + j * BQ + i, p * (vq_load(dpt + j * BQ + i) - dv));
      }
    }
    /* dq [nq4, Ep] += ds [nq4, nk] (= dpt^T) @ kr [nk, Ep] */
    tile_gemm(nq4, Ep, nk, dpt, 1, BQ, kr, Ep, dq, Ep, true);
  }
  float *g = P->dq + (b * P->L + i0) * E;
  for (int64_t r = 0; r < nq; r++) put_row(g + r * E, dq + r * Ep, E, P->scale, P->acc_dq);
}

static void sdpa_kv_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t sizes[A_COUNT] = {P->E * BK,  P->Ev * BK,  BQ * P->Ep, BQ * P->Evp, BQ * BK, BQ * BK,
                                  BK * P->Ep, BK * P->Evp, 0};
  tiles T;
  if (!tiles_alloc(&T, A_COUNT, sizes)) {
    __atomic_store_n(&P->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t t = begin; t < end && !attn__cancelled(); t++) kv_block(P, &T, t / P->nkb, t % P->nkb, NULL);
  attn__sdpa_scratch_free(T.base, T.n);
}

/* dK, dV and dQ in one pass: tasks [begin, end) are whole kv batches (every
   key block in order, so the dQ sums do not depend on the thread count);
   dQ of the group's query heads accumulates in a per-task buffer
   [group, round_up(L, 4), Ep] and is written scaled at the end. */
static void sdpa_kvq_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t Lp = sdpa_round_up(P->L, 4), ndq = P->group * Lp * P->Ep;
  const int64_t sizes[A_COUNT + 1] = {P->E * BK, P->Ev * BK, BQ * P->Ep,  BQ * P->Evp, BQ * BK,
                                      BQ * BK,   BK * P->Ep, BK * P->Evp, BK * P->Ep,  ndq};
  tiles T;
  if (!tiles_alloc(&T, A_COUNT + 1, sizes)) {
    __atomic_store_n(&P->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  float *dqb = T.t[A_COUNT];
  for (int64_t kvb = begin; kvb < end && !attn__cancelled(); kvb++) {
    memset(dqb, 0, (size_t)ndq * sizeof(float));
    for (int64_t kb = 0; kb < P->nkb && !attn__cancelled(); kb++) kv_block(P, &T, kvb, kb, dqb);
    for (int64_t g = 0; g < P->group; g++) {
      float *out = P->dq + sdpa_q_batch(P, kvb, g) * P->L * P->E;
      const float *acc = dqb + g * Lp * P->Ep;
      for (int64_t i = 0; i < P->L; i++) put_row(out + i * P->E, acc + i * P->Ep, P->E, P->scale, P->acc_dq);
    }
  }
  attn__sdpa_scratch_free(T.base, T.n);
}

/* dK, dV and dQ from the scores the forward kept (plan.scores): no
   product recomputes them, so a tile pair costs four products, not five.
   Tasks [begin, end) are whole kv batches, walked in a fixed order (so the
   sums do not depend on the thread count).  K and V rows are read in
   place or packed once per task ([S4, Ep], [S4, Evp], zero rows past S);
   per query head, the q and dO rows likewise ([L4, Ep], [L4, Evp]), dO^T
   [Ev, Lw] (zero columns past L) and the rows' (m, log2 l) and D.  Key
   blocks outside, query blocks inside; per pair: dpt [nk4, w] = V rows @
   dO^T (dP^T, keys along rows like the panel), then p = exp(s - lse) into
   pt and dS^T = p (dP^T - D) into dpt, both vectorised over queries;
   dV += pt @ dO rows, dK += dS^T @ q rows, dQ += dS @ K rows (dS^T read in
   place).  dK and dV sum in [S4, E(v)p] over the group's heads, dQ in the
   head's [L4, Ep]. */
enum { C_K, C_V, C_Q, C_DO, C_DOT, C_PT, C_DPT, C_DK, C_DV, C_DQ, C_M, C_G, C_D, C_COUNT };

INLINE void saved_kv_batch(const plan *P, const tiles *T, int64_t kvb) {
  const int64_t E = P->E, Ep = P->Ep, Ev = P->Ev, Evp = P->Evp, L = P->L, S = P->S, S4 = P->S4, Lw = P->Lw;
  const int64_t L4 = sdpa_round_up(L, 4);
  float *restrict k4 = T->t[C_K], *restrict v4 = T->t[C_V], *restrict q4 = T->t[C_Q], *restrict do4 = T->t[C_DO],
                  *restrict dot = T->t[C_DOT], *restrict pt = T->t[C_PT], *restrict dpt = T->t[C_DPT],
                  *restrict dk = T->t[C_DK], *restrict dv = T->t[C_DV], *restrict dq = T->t[C_DQ];
  float *restrict mi = T->t[C_M], *restrict gi = T->t[C_G], *restrict di = T->t[C_D];
  const bool want_q = P->dq != NULL, want_kv = P->dk != NULL;
  if (want_kv) {
    memset(dk, 0, (size_t)(S4 * Ep) * sizeof(float));
    memset(dv, 0, (size_t)(S4 * Evp) * sizeof(float));
  }
  const float *kr = k4, *va = v4;
  int64_t ldk = Ep, vrs = Evp, vcs = 1;
  for (int64_t g = 0; g < P->group; g++) {
    const int64_t b = sdpa_q_batch(P, kvb, g);
    batch_ptrs bp;
    sdpa_batch_at(P, b, &bp);
    /* rows read in place where their layout allows: k, q and dO rows as
       the right operand (unit-stride, nothing to pad), v rows as the left
       one (any strides; whole rows of 4) */
    if (g == 0) {
      if (P->k.cs == 1 && E == Ep)
        kr = bp.k, ldk = P->k.rs;
      else
        pack_rows(k4, Ep, S4, bp.k, S, P->k.rs, P->k.cs, E, 1.0f);
      if (S == S4)
        va = bp.v, vrs = P->v.rs, vcs = P->v.cs;
      else
        pack_rows(v4, Evp, S4, bp.v, S, P->v.rs, P->v.cs, Ev, 1.0f);
    }
    const float *qr = q4, *dor = do4;
    int64_t ldq = Ep, ldo = Evp;
    if (P->q.cs == 1 && E == Ep)
      qr = bp.q, ldq = P->q.rs;
    else
      pack_rows(q4, Ep, L4, bp.q, L, P->q.rs, P->q.cs, E, 1.0f);
    if (P->dout.cs == 1 && Ev == Evp)
      dor = bp.dout, ldo = P->dout.rs;
    else
      pack_rows(do4, Evp, L4, bp.dout, L, P->dout.rs, P->dout.cs, Ev, 1.0f);
    pack_t(dot, Lw, bp.dout, L, P->dout.rs, P->dout.cs, Ev, 1.0f);
    const float *lse = P->lse + 2 * b * L, *D = P->D + b * L;
    for (int64_t i = 0; i < Lw; i++) { /* padding columns: m = +inf makes their p 0 */
      mi[i] = i < L ? lse[2 * i] : INFINITY;
      gi[i] = i < L ? lse[2 * i + 1] : 0.0f;
      di[i] = i < L ? D[i] : 0.0f;
    }
    if (want_q) memset(dq, 0, (size_t)(L4 * Ep) * sizeof(float));
    /* key blocks outside, so a block's dK and dV sums stay in cache while
       the query blocks stream past */
    for (int64_t j0 = 0; j0 < S; j0 += BK) {
      if (attn__cancelled()) return; /* between key blocks: a kv batch can be long (large L or E) */
      const int64_t nk = S - j0 < BK ? S - j0 : BK, nk4 = sdpa_round_up(nk, 4);
      for (int64_t qb = 0; qb < P->nqb; qb++) {
        const int64_t i0 = qb * BQ, nq = L - i0 < BQ ? L - i0 : BQ, nq4 = sdpa_round_up(nq, 4);
        const int64_t w = sdpa_round_up(nq, SDPA_PAD);
        if (j0 >= sdpa_key_end(P, i0, nq)) continue; /* causal: the forward never got here */
        const float *sc = sdpa_panel(P, b, i0) + j0 * w;
        /* dpt [nk4, w] = v rows [nk4, Ev] @ dO^T [Ev, w] */
        tile_gemm(nk4, w, Ev, va + j0 * vrs, vrs, vcs, dot + i0, Lw, dpt, BQ, false);
        for (int64_t i = 0; i < w; i += SDPA_VQ) {
          const vq mv = vq_load(mi + i0 + i), gv = vq_load(gi + i0 + i), dvv = vq_load(di + i0 + i);
          for (int64_t j = 0; j < nk; j++) {
            vq p = exp2_neg_v((vq_load(sc + j * w + i) - mv) * log2e_f - gv);
            vq_store(pt + j * BQ + i, p);
            vq_store(dpt + j * BQ + i, p * (vq_load(dpt + j * BQ + i) - dvv));
          }
        }
        for (int64_t j = nk; j < nk4; j++) { /* rows past the keys: 0 */
          memset(pt + j * BQ, 0, (size_t)w * sizeof(float));
          memset(dpt + j * BQ, 0, (size_t)w * sizeof(float));
        }
        if (want_kv) {
          /* dv [nk4, Evp] += pt [nk4, nq] @ dO rows [nq, Evp];
             dk [nk4, Ep] += dS^T [nk4, nq] @ q rows [nq, Ep] */
          tile_gemm(nk4, Evp, nq, pt, BQ, 1, dor + i0 * ldo, ldo, dv + j0 * Evp, Evp, true);
          tile_gemm(nk4, Ep, nq, dpt, BQ, 1, qr + i0 * ldq, ldq, dk + j0 * Ep, Ep, true);
        }
        /* dq [nq4, Ep] += dS [nq4, nk] (dpt read transposed) @ k rows [nk, Ep] */
        if (want_q) tile_gemm(nq4, Ep, nk, dpt, 1, BQ, kr + j0 * ldk, ldk, dq + i0 * Ep, Ep, true);
      }
    }
    if (want_q) {
      float *out = P->dq + b * L * E;
      for (int64_t r = 0; r < L; r++) put_row(out + r * E, dq + r * Ep, E, P->scale, P->acc_dq);
    }
  }
  if (want_kv) {
    float *gk = P->dk + kvb * S * E, *gv = P->dv + kvb * S * Ev;
    for (int64_t j = 0; j < S; j++) {
      put_row(gk + j * E, dk + j * Ep, E, P->scale, P->acc_dk);
      put_row(gv + j * Ev, dv + j * Evp, Ev, 1.0f, P->acc_dv);
    }
  }
}

static void sdpa_saved_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t L4 = sdpa_round_up(P->L, 4);
  const int64_t sizes[C_COUNT] = {P->S4 * P->Ep, P->S4 * P->Evp, L4 * P->Ep,    L4 * P->Evp,    P->Ev * P->Lw,
                                  BK * BQ,       BK * BQ,        P->S4 * P->Ep, P->S4 * P->Evp, L4 * P->Ep,
                                  P->Lw,         P->Lw,          P->Lw};
  tiles T;
  if (!tiles_alloc(&T, C_COUNT, sizes)) {
    __atomic_store_n(&P->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t kvb = begin; kvb < end && !attn__cancelled(); kvb++) saved_kv_batch(P, &T, kvb);
  attn__sdpa_scratch_free(T.base, T.n);
}

static void sdpa_q_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t sizes[B_COUNT] = {P->E * BQ, P->Ev * BQ, BK * P->Ep, BK * P->Evp, BK * BQ, BK * BQ, BQ * P->Ep};
  tiles T;
  if (!tiles_alloc(&T, B_COUNT, sizes)) {
    __atomic_store_n(&P->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t t = begin; t < end && !attn__cancelled(); t++) q_block(P, &T, t / P->nqb, t % P->nqb);
  attn__sdpa_scratch_free(T.base, T.n);
}
