/* SPDX-License-Identifier: MIT */
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
 * their normalisation; p = exp((s - m) - log l) keeps it.  The kernels
 * compute every exponential as a power of 2 (sdpa_tiles.h), so the pair is
 * stored as (m, log2 l).  A row with no
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
 * depend on the number of threads.  When there are at least 8 kv heads x
 * batches to share out, one task per kv batch walks all its key blocks in
 * order and also sums dQ += dS K into a [L, E] buffer per query head: no
 * recomputation, still independent of the thread count.
 *
 * Short key sequences (S <= 512, keep_scores) are the exception: there the
 * forward keeps its masked scores, [..., L, S] rounded up, and the backward
 * reads them instead of recomputing Qs K^T (one pass per kv batch, four
 * tile products per tile pair instead of five).
 *
 * Extra memory otherwise: (m, log l) and D ([..., L, 2] and [..., L] floats) plus per-thread tiles of fixed
 * size (BQ, BK times E or Ev), whatever S is.
 *
 * Layout: a task transposes only what stays fixed during its loop (the
 * query block in the forward pass and the dQ pass, the key block in the
 * dK/dV pass); the streaming blocks are plain row copies.  So the forward
 * scores are kept transposed, st = K Qs^T [BK, BQ], and the online softmax
 * runs down its columns, vectorised over 64 queries.
 *
 * Tiles are products C[4k, 16n] (+)= A[4k, K] B[K, 16n] done by register-
 * blocked micro-kernels written per kernel family (kernels.h): AVX-512
 * 8 x 32 (32 zmm registers), AVX2 6 x 16 (16 ymm), portable 4 x 8 (4-float
 * vectors).  The tile code around them (sdpa_tiles.h) is compiled once per
 * family; this file holds the arguments, the autograd node and the entry
 * points, and calls the chosen family.  A may have any layout (its
 * elements are broadcast), so P^T and dS^T are read in place.  The kernels
 * run on attn's thread pool and never call OpenBLAS (its own threads
 * would fight ours).
 */
#include "attention/attention.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>

#define round_up sdpa_round_up

/* kv heads x batches from which the backward computes dQ in the dK/dV pass */
#define SDPA_ONE_PASS_MIN_KV 8

/* Short key sequences keep their scores (keep_scores below). */
#define SDPA_KEEP_MAX_S 512
int64_t attn__sdpa_keep_scores_max = (int64_t)64 << 20;

/* Kept scores pay only while the backward finds most of them in the
   last-level cache: up to three quarters of it (the rest holds the
   operands and gradients).  Measured on Zen 3 (32 MB L3), B x 8 heads, E =
   64, forward + backward at 1 thread, 4 interleaved runs each: 16 MB of
   scores (B = 2, L = 512; B = 8, L = 256; B = 32, L = 128) 8-12% faster
   kept, 24 MB (B = 3, L = 512) 69-73 ms kept against 78-97 recomputed,
   32 MB (B = 4, L = 512) 92-105 against 95-98.  The size is Linux's for
   the L3 that cpu 0 shares (sysfs): glibc's sysconf can give the whole
   package's (256 MB on that EPYC, 8 of them); 24 MB where it cannot be
   read. */
static int64_t keep_scores_cache_bytes(void) {
  static int64_t bytes; /* computed once; a race computes the same value */
  int64_t b = __atomic_load_n(&bytes, __ATOMIC_RELAXED);
  if (b) return b;
  b = (int64_t)24 << 20;
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  if (f) {
    long long kb = 0;
    char unit = 0;
    if (fscanf(f, "%lld%c", &kb, &unit) >= 1 && kb >= 1024) {
      if (unit == 'M') kb *= 1024;
      b = (int64_t)kb * 1024 / 4 * 3;
    }
    fclose(f);
  }
  __atomic_store_n(&bytes, b, __ATOMIC_RELAXED);
  return b;
}

/* D [b, i] = sum_c dO[b, i, c] * O[b, i, c] for batches [begin, end).
   Eight partial sums: one would wait on its add every element. */
static void rowdot_range(int64_t begin, int64_t end, void *ctx) {
  plan *P = ctx;
  const int64_t Ev = P->Ev, ocs = P->o.cs, dcs = P->dout.cs;
  for (int64_t b = begin; b < end; b++) {
    batch_ptrs bp;
    sdpa_batch_at(P, b, &bp);
    for (int64_t i = 0; i < P->L; i++) {
      const float *o = bp.o + i * P->o.rs, *d = bp.dout + i * P->dout.rs;
      float acc[8] = {0};
      int64_t c = 0;
      if (ocs == 1 && dcs == 1)
        for (; c + 8 <= Ev; c += 8)
          for (int u = 0; u < 8; u++) acc[u] += o[c + u] * d[c + u];
      else if (ocs == 1 && dcs == 0) /* an expanded dO row (x:sum():backward()) */
        for (; c + 8 <= Ev; c += 8)
          for (int u = 0; u < 8; u++) acc[u] += o[c + u] * d[0];
      for (; c < Ev; c++) acc[0] += o[c * ocs] * d[c * dcs];
      P->D[b * P->L + i] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
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

#define FN "scaled_dot_product_attention"

static void set_operand(operand *o, const attn_tensor *t, int nb, const int64_t *bstride) {
  o->p = attn_tensor_data(t);
  for (int d = 0; d < nb; d++) o->bs[d] = bstride ? bstride[d] : t->stride[d];
  o->rs = t->stride[t->ndim - 2];
  o->cs = t->stride[t->ndim - 1];
}

/* Checks the arguments (shared with the reference path); fills the plan's
   geometry when P is not NULL. */
static attn_status check_args(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, const attn_sdpa_opts *o,
                              plan *P) {
  char sq[ATTN_SHAPE_BUF], sk[ATTN_SHAPE_BUF], sv[ATTN_SHAPE_BUF];
  if (!q || !k || !v) return attn_set_error(ATTN_ERR_ARG, FN ": query, key and value are required");
  attn_status fst;
  if ((fst = attn_check_float(FN, "query", q)) || (fst = attn_check_float(FN, "key", k)) ||
      (fst = attn_check_float(FN, "value", v)))
    return fst;
  if (o->attn_mask && o->attn_mask->dtype != ATTN_FLOAT32)
    return attn_set_error(ATTN_ERR_ARG, FN ": attn_mask must be bool or float32, got %s",
                          attn_dtype_name(o->attn_mask->dtype));
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
    return attn_set_error(ATTN_ERR_SHAPE, FN ": key %s and value %s must have the same sequence length (dim -2)",
                          ATTN_SHAPE(k, sk), ATTN_SHAPE(v, sv));
  int64_t group = 1;
  for (int d = 0; d < nb; d++) {
    bool head = d == nb - 1;
    if (k->shape[d] != v->shape[d] || (q->shape[d] != k->shape[d] && !(head && o->enable_gqa)))
      return attn_set_error(ATTN_ERR_SHAPE, FN ": query %s, key %s and value %s must have the same leading dims%s",
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
  P->Ep = round_up(P->E, SDPA_PAD);
  P->Evp = round_up(P->Ev, SDPA_PAD);
  P->nqb = (L + BQ - 1) / BQ;
  P->nkb = (S + BK - 1) / BK;
  double sc = o->scale;
  if (isnan(sc) || sc == 0.0) sc = 1.0 / sqrt((double)P->E);
  P->scale = (float)sc;
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

/* Whether the forward keeps its masked scores (plan.scores) for the
   backward, which then needs four tile products per tile pair instead of
   five (a seventh of the work; forward + backward at B = 1, H = 8, L = S =
   128, E = 64: 1.66 -> 1.41 ms).  Only for short key sequences (S <= 512: at most 2 KB per
   query row and head, so long sequences keep the O(L) memory of the
   recomputing backward), with the kv batches to share among threads that
   the one-pass backward needs, under three quarters of the last-level
   cache (keep_scores_cache_bytes) and under attn__sdpa_keep_scores_max bytes
   (the tests set 0 to compare with the recomputing path).  Decided by the
   shapes and the cache size: the bits do not depend on the thread count. */
static void score_panels(plan *P) {
  P->Lw = round_up(P->L, SDPA_PAD);
  P->S4 = round_up(P->S, 4);
}

static bool keep_scores(plan *P) {
  if (P->S > SDPA_KEEP_MAX_S || P->L == 0 || P->S == 0 || P->nbkv < SDPA_ONE_PASS_MIN_KV) return false;
  score_panels(P);
  const double bytes = (double)P->nbq * (double)P->Lw * (double)P->S4 * sizeof(float);
  return bytes <= (double)attn__sdpa_keep_scores_max && bytes <= (double)keep_scores_cache_bytes();
}

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
/* The dK/dV pass into P->dk, P->dv (the tensors dk, dv): nothing to do
   without keys, zeros without queries. */
static void kv_pass(plan *P, const attn__kernels *K, attn_tensor *dk, attn_tensor *dv) {
  if (P->S == 0 || P->nbkv == 0) return;
  if (P->L == 0) { /* a leaf's .grad taken as dk/dv gets nothing added */
    if (!P->acc_dk) memset(P->dk, 0, (size_t)attn_tensor_numel(dk) * sizeof(float));
    if (!P->acc_dv) memset(P->dv, 0, (size_t)attn_tensor_numel(dv) * sizeof(float));
    return;
  }
  run(P, P->nbkv * P->nkb, K->sdpa_bwd_kv, 2 * work_flops(P));
}

attn_status attn__sdpa_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn_tensor *q = node->saved[0], *k = node->saved[1], *v = node->saved[2], *o = node->saved[3],
                    *lse = node->saved[4], *scores = node->saved[6];
  attn_sdpa_opts opts;
  opts_from_node(node, &opts);
  plan P;
  attn_status st = check_args(q, k, v, &opts, &P);
  if (st) return st;
  const attn__kernels *K = attn__kern(); /* one family for both passes */
  const int nb = P.nb;
  set_operand(&P.o, o, nb, NULL);
  set_operand(&P.dout, g, nb, NULL);
  P.lse = attn_tensor_data(lse);
  bool want_q = node->next[0].node, want_kv = node->next[1].node || node->next[2].node;
  attn_tensor *dq = NULL, *dk = NULL, *dv = NULL;
  float *D = NULL;
  int64_t nD = P.nbq * P.L;
  /* a leaf's .grad, where the engine offers it, gets the gradients added
     as they are written (attn__grad_into) */
  if ((want_q && (st = attn__grad_out(node, 0, FN, &dq))) ||
      (want_kv &&
       ((st = node->next[1].node ? attn__grad_out(node, 1, FN, &dk) : attn__alloc(FN, k->ndim, k->shape, &dk)) ||
        (st = node->next[2].node ? attn__grad_out(node, 2, FN, &dv) : attn__alloc(FN, v->ndim, v->shape, &dv)))))
    goto out;
  P.acc_dq = dq && dq == attn__grad_into(node, 0);
  P.acc_dk = dk && dk == attn__grad_into(node, 1);
  P.acc_dv = dv && dv == attn__grad_into(node, 2);
  if (!(D = attn__sdpa_scratch_alloc(nD))) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory in backward");
    goto out;
  }
  P.D = D;
  run(&P, P.nbq, rowdot_range, (double)nD * (double)P.Ev * 64);
  /* With enough kv heads x batches to share among threads, dQ rides along
     in the dK/dV pass (one task per kv batch; no second pass recomputing P
     and dP).  Decided by the shapes alone, so results never depend on the
     thread count. */
  const bool one_pass = want_q && want_kv && P.L > 0 && P.S > 0 && P.nbkv >= SDPA_ONE_PASS_MIN_KV;
  if (scores) { /* the forward kept its scores (keep_scores): one pass, dQ and dK/dV as wanted */
    score_panels(&P);
    P.scores = attn_tensor_data(scores);
    P.dq = dq ? attn_tensor_data(dq) : NULL;
    P.dk = dk ? attn_tensor_data(dk) : NULL;
    P.dv = dv ? attn_tensor_data(dv) : NULL;
    run(&P, P.nbkv, K->sdpa_bwd_saved, 2.0 * work_flops(&P));
  } else if (one_pass) {
    P.dk = attn_tensor_data(dk);
    P.dv = attn_tensor_data(dv);
    P.dq = attn_tensor_data(dq);
    run(&P, P.nbkv, K->sdpa_bwd_kvq, 2.5 * work_flops(&P));
  } else if (want_kv) {
    P.dk = attn_tensor_data(dk);
    P.dv = attn_tensor_data(dv);
    kv_pass(&P, K, dk, dv);
  }
  if (want_q && !one_pass && !scores && P.L > 0 && P.nbq > 0) {
    P.dq = attn_tensor_data(dq);
    run(&P, P.nbq * P.nqb, K->sdpa_bwd_q, 1.5 * work_flops(&P));
  }
  if (P.failed)
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory for the backward tiles");
  else if (attn__cancelled())
    st = attn__limit_error(FN); /* blocks were skipped */
out:
  attn__sdpa_scratch_free(D, nD);
  if (dq) attn__grad_give(node, 0, dq, !st, grads);
  if (dk && node->next[1].node)
    attn__grad_give(node, 1, dk, !st, grads);
  else
    attn_tensor_release(dk);
  if (dv && node->next[2].node)
    attn__grad_give(node, 2, dv, !st, grads);
  else
    attn_tensor_release(dv);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */

static attn_status fused(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, const attn_sdpa_opts *o,
                         attn_tensor **out) {
  plan P;
  attn_status st = check_args(q, k, v, o, &P);
  if (st) return st;
  const attn__kernels *K = attn__kern();
  const attn_tensor *in[3] = {q, k, v};
  const bool record = attn__ag_needed(3, in);
  int64_t oshape[ATTN_MAX_DIMS];
  memcpy(oshape, q->shape, sizeof oshape);
  oshape[q->ndim - 1] = P.Ev;
  attn_tensor *res = NULL, *lse_t = NULL, *sc_t = NULL;
  float *lse = NULL;
  const int64_t nlse = 2 * P.nbq * P.L;
  int64_t nsc = 0;
  if ((st = attn__alloc(FN, q->ndim, oshape, &res))) return st;
  if (record && keep_scores(&P)) {
    nsc = P.nbq * P.Lw * P.S4;
    if ((st = attn__alloc(FN, 1, &nsc, &sc_t))) goto fail;
    P.scores = attn_tensor_data(sc_t);
  }
  /* lse: a tensor the backward node keeps, or scratch */
  if (record) {
    int64_t lshape[ATTN_MAX_DIMS]; /* [..., L, 2]: (m, log l) per query */
    memcpy(lshape, q->shape, sizeof lshape);
    lshape[q->ndim - 1] = 2;
    if ((st = attn__alloc(FN, q->ndim, lshape, &lse_t))) goto fail;
    lse = attn_tensor_data(lse_t);
    attn__sdpa_mem_add((nlse + nsc) * (int64_t)sizeof(float));
  } else if (!(lse = attn__sdpa_scratch_alloc(nlse))) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory");
    goto fail;
  }
  P.out = attn_tensor_data(res);
  P.lse = lse;
  if (P.nbq > 0 && P.L > 0) run(&P, P.nbq * P.nqb, K->sdpa_fwd, work_flops(&P));
  if (record)
    attn__sdpa_mem_add(-(nlse + nsc) * (int64_t)sizeof(float));
  else
    attn__sdpa_scratch_free(lse, nlse);
  if (P.failed) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory for the attention tiles");
    goto fail;
  }
  if (attn__cancelled()) { /* blocks were skipped */
    st = attn__limit_error(FN);
    goto fail;
  }
  if (record) {
    const attn_tensor *saved[7] = {q, k, v, res, lse_t, o->attn_mask, sc_t};
    attn_node *node;
    st = attn__ag_record(res, "ScaledDotProductFlashAttentionForCpuBackward0", ATTN__F_SDPA, 3, in, 7, saved, &node);
    if (st) goto fail;
    node->iargs[0] = P.mask_kind;
    node->iargs[1] = o->is_causal;
    node->iargs[2] = o->causal_bottom_right;
    node->iargs[3] = o->enable_gqa;
    node->fargs[0] = P.scale;
    attn_tensor_release(lse_t);
    attn_tensor_release(sc_t);
  }
  *out = res;
  return ATTN_OK;
fail:
  attn_tensor_release(sc_t);
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
  if (opts->attn_mask && opts->attn_mask->dtype == ATTN_BOOL) {
    /* a bool mask is torch's: true = take part; the kernels read 1/0 floats */
    attn_tensor *fm;
    attn_status st = attn_to_dtype(opts->attn_mask, ATTN_FLOAT32, &fm);
    if (st) return st;
    attn_sdpa_opts o2 = *opts;
    o2.attn_mask = fm;
    o2.mask_is_bool = true;
    st = attn_sdpa(q, k, v, &o2, out, weights);
    attn_tensor_release(fm);
    return st;
  }
  attn_status st = check_args(q, k, v, opts, NULL);
  if (st) return st;
  const attn_tensor *m = opts->attn_mask;
  bool mask_grad = m && !opts->mask_is_bool && attn__ag_needed(1, &m);
  if (weights || opts->dropout_p > 0.0 || mask_grad) return attn__sdpa_math(q, k, v, opts, out, weights);
  return fused(q, k, v, opts, out);
}

/* ------------------------------------------------------------------------ */
/* Mask helpers                                                              */

/* lengths [B] -> [B, 1, 1, S]: 1 where j < lengths[b] */
attn_status attn_padding_mask(const attn_tensor *lengths, int64_t S, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  if (lengths->ndim != 1)
    return attn_set_error(ATTN_ERR_SHAPE, "padding_mask: lengths must be 1-d [B], got %s", ATTN_SHAPE(lengths, sb));
  if (S < 0) return attn_set_error(ATTN_ERR_ARG, "padding_mask: S must be >= 0, got %lld", (long long)S);
  int64_t B = lengths->shape[0], work = 0;
  for (int64_t b = 0; b < B; b++) {
    /* an expanded lengths tensor is checked in no memory: poll */
    if (attn__poll_work(&work, 1)) return attn__limit_error("padding_mask");
    double len = attn_tensor_get_flat_f64(lengths, b);
    if (!(len == floor(len)) || len < 0 || len > (double)S)
      return attn_set_error(ATTN_ERR_ARG, "padding_mask: lengths must be integers in [0, S = %lld], found %g",
                            (long long)S, (double)len);
  }
  int64_t shape[4] = {B, 1, 1, S};
  attn_tensor *t;
  attn_status st = attn__alloc("padding_mask", 4, shape, &t);
  if (st) return st;
  float *p = attn_tensor_data(t);
  for (int64_t b = 0; b < B; b++) {
    int64_t len = attn_tensor_get_flat_i64(lengths, b);
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
  if (!(pairs = attn__sdpa_scratch_alloc(2 * nrows))) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory");
    goto fail;
  }
  P.out = attn_tensor_data(res);
  P.lse = pairs;
  if (P.nbq > 0 && P.L > 0) run(&P, P.nbq * P.nqb, attn__kern()->sdpa_fwd, work_flops(&P));
  if (P.failed) {
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory for the attention tiles");
    goto fail;
  }
  if (attn__cancelled()) { /* blocks were skipped */
    st = attn__limit_error(FN);
    goto fail;
  }
  float *l = attn_tensor_data(lse_t);
  for (int64_t i = 0; i < nrows; i++) /* (m, log2 l) -> m + log l; no visible key: -inf */
    l[i] = pairs[2 * i] == INFINITY ? -INFINITY : pairs[2 * i] + pairs[2 * i + 1] * 0.693147180559945309f;
  attn__sdpa_scratch_free(pairs, 2 * nrows);
  *out = res;
  *lse_out = lse_t;
  return ATTN_OK;
fail:
  attn__sdpa_scratch_free(pairs, 2 * nrows);
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
  const attn__kernels *K = attn__kern(); /* one family for all passes */
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
  if (!(D = attn__sdpa_scratch_alloc(nrows ? nrows : 1)) ||
      !(pairs = attn__sdpa_scratch_alloc(2 * (nrows ? nrows : 1)))) {
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
  kv_pass(&P, K, dk, dv);
  if (P.L > 0 && P.nbq > 0) {
    P.dq = attn_tensor_data(dq);
    run(&P, P.nbq * P.nqb, K->sdpa_bwd_q, 1.5 * work_flops(&P));
  }
  if (P.failed)
    st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory for the backward tiles");
  else if (attn__cancelled())
    st = attn__limit_error(FN); /* blocks were skipped */
out:
  attn__sdpa_scratch_free(D, nrows ? nrows : 1);
  attn__sdpa_scratch_free(pairs, 2 * (nrows ? nrows : 1));
  if (st) {
    attn_tensor_release(dq), attn_tensor_release(dk), attn_tensor_release(dv);
    return st;
  }
  *dq_out = dq;
  *dk_out = dk;
  *dv_out = dv;
  return ATTN_OK;
}
