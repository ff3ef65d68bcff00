/* SPDX-License-Identifier: MIT */
/* The fused attention's problem description (sdpa.c fills it) and what
 * every kernel family's tile code (sdpa_tiles.h, included by
 * kernels_*.c) shares with it.  Not installed. */
#ifndef ATTN_SDPA_PLAN_H
#define ATTN_SDPA_PLAN_H

#include "base/base.h"

#define BQ 64 /* queries per block */
#define BK 64 /* keys per block */
#define SDPA_PAD                                                                                                       \
  16 /* tile rows are padded to this many floats (64 bytes): every family's micro-kernels take N % 16 == 0 */

static inline int64_t sdpa_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

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
  int64_t L, S, E, Ev, Ep, Evp;  /* Ep, Evp: E, Ev rounded up to SDPA_PAD */
  int64_t nqb, nkb;              /* query / key blocks */
  float scale;
  int mask_kind;
  bool causal;
  int64_t causal_off; /* query i sees key j iff j <= i + causal_off */
  operand q, k, v, m, o, dout;
  float *out, *lse, *D;        /* [nbq, L, Ev], [nbq, L, 2] (m, log l), [nbq, L] contiguous */
  float *dq, *dk, *dv;         /* contiguous, shapes of q, k, v */
  bool acc_dq, acc_dk, acc_dv; /* add to them (a leaf's .grad) instead of writing */
  /* The forward's masked scores, kept for the backward (short key
     sequences, sdpa.c): per batch b and query block (i0, width w =
     round_up(min(BQ, L - i0), SDPA_PAD)) a panel [S4, w] of keys x queries
     at scores + (b * Lw + i0) * S4; Lw = round_up(L, SDPA_PAD), S4 =
     round_up(S, 4).  NULL: recomputed. */
  float *scores;
  int64_t Lw, S4;
  int failed; /* a worker could not get its tiles */
} plan;

/* idx of the flat index b over shape (nb dims) */
static inline void sdpa_unflatten(int nb, const int64_t *shape, int64_t b, int64_t *idx) {
  for (int d = nb - 1; d >= 0; d--) {
    idx[d] = shape[d] ? b % shape[d] : 0;
    b = shape[d] ? b / shape[d] : 0;
  }
}

static inline int64_t sdpa_offset_of(int nb, const int64_t *idx, const int64_t *bs) {
  int64_t o = 0;
  for (int d = 0; d < nb; d++) o += idx[d] * bs[d];
  return o;
}

/* q's flat batch of the g-th query head reading kv batch kvb: the head is
   the last leading dim and query head h reads kv head h / group, so kv
   batch kvb serves q batches kvb * group .. kvb * group + group - 1. */
static inline int64_t sdpa_q_batch(const plan *P, int64_t kvb, int64_t g) { return kvb * P->group + g; }

/* Base pointers of q's batch b: q, mask, dout, o; k and v of its kv head. */
typedef struct {
  const float *q, *k, *v, *m, *o, *dout;
} batch_ptrs;

static inline void sdpa_batch_at(const plan *P, int64_t b, batch_ptrs *bp) {
  int64_t idx[ATTN_MAX_DIMS];
  sdpa_unflatten(P->nb, P->bshape, b, idx);
  bp->q = P->q.p + sdpa_offset_of(P->nb, idx, P->q.bs);
  bp->m = P->m.p ? P->m.p + sdpa_offset_of(P->nb, idx, P->m.bs) : NULL;
  bp->o = P->o.p ? P->o.p + sdpa_offset_of(P->nb, idx, P->o.bs) : NULL;
  bp->dout = P->dout.p ? P->dout.p + sdpa_offset_of(P->nb, idx, P->dout.bs) : NULL;
  if (P->nb) idx[P->nb - 1] /= P->group;
  bp->k = P->k.p + sdpa_offset_of(P->nb, idx, P->k.bs);
  bp->v = P->v.p + sdpa_offset_of(P->nb, idx, P->v.bs);
}

/* Key range [0, kend) some query in [i0, i0 + nq) can see. */
static inline int64_t sdpa_key_end(const plan *P, int64_t i0, int64_t nq) {
  if (!P->causal) return P->S;
  int64_t e = i0 + nq - 1 + P->causal_off + 1;
  return e < 0 ? 0 : e > P->S ? P->S : e;
}

/* Where batch b's query block at i0 keeps its scores (plan.scores). */
static inline float *sdpa_panel(const plan *P, int64_t b, int64_t i0) { return P->scores + (b * P->Lw + i0) * P->S4; }

/* 64-byte aligned scratch counted by the kernel's memory counter (sdpa.c),
   NULL when out of memory; free with the same count. */
float *attn__sdpa_scratch_alloc(int64_t nfloats);
void attn__sdpa_scratch_free(float *p, int64_t nfloats);

#endif
