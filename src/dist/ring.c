/* SPDX-License-Identifier: MIT */
/* Ring attention: scaled dot-product attention over a sequence split across
 * the ranks (dim -2), K/V blocks passed around the ring (see dist.h).
 *
 * Layout.  Not causal: rank r holds positions [r*Lc, (r+1)*Lc) of the
 * global sequence (Lc = local length).  Causal: the global sequence is cut
 * into 2P chunks of c = Lc/2 and rank r holds chunks r and 2P-1-r, in that
 * order ("zigzag").  With that order every rank does the same causal work:
 * at the step where it holds its own K/V it computes two causal c x c
 * diagonal blocks and one full c x c block; at every other step one full
 * 2c x c or c x 2c block (half of the pairs are entirely in the future and
 * skipped).  A contiguous split would give rank P-1 P times the work of
 * rank 0.
 *
 * Forward, P steps: at step s rank r holds the K/V of rank src = r - s
 * (mod P); it starts the non-blocking send of that block to r+1 and the
 * receive of the next one from r-1, runs the fused kernel on the block in
 * hand (attn_sdpa_block_forward) and folds the result into its output with
 * the log-sum-exp rule, then waits for the transfer.  Backward, P steps
 * again: K/V circulate the same way together with the dK/dV accumulators of
 * their owner; each rank adds its share (attn_sdpa_block_backward with the
 * final output and log-sum-exp) and passes them on; after P hops every
 * accumulator is back at its owner.  Memory per rank: the local q, k, v,
 * out, two K/V blocks in flight and the accumulators, O(L/P).
 */
#include "dist/dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN "ring_attention"
enum { TAG_K = 7101, TAG_V, TAG_DK, TAG_DV };

typedef struct {
  int64_t q0, nq, k0, nk;
  bool causal;
} task;

/* The block pairs rank r computes while holding the K/V of rank src. */
static int schedule(bool causal, int r, int src, int64_t Lc, task *t) {
  const int64_t c = Lc / 2;
  if (!causal) {
    t[0] = (task){0, Lc, 0, Lc, false};
    return 1;
  }
  if (src == r) {
    t[0] = (task){0, c, 0, c, true};  /* chunk r sees itself causally */
    t[1] = (task){c, c, 0, c, false}; /* chunk 2P-1-r sees all of chunk r */
    t[2] = (task){c, c, c, c, true};  /* and itself causally */
    return 3;
  }
  if (src < r) {
    t[0] = (task){0, 2 * c, 0, c, false}; /* both chunks see chunk src; chunk 2P-1-src is in the future */
    return 1;
  }
  t[0] = (task){c, c, 0, 2 * c, false}; /* only chunk 2P-1-r sees both chunks of src */
  return 1;
}

static attn_status rows(const attn_tensor *t, int64_t start, int64_t n, attn_tensor **out) {
  return attn_narrow(t, t->ndim - 2, start, n, out);
}

/* Leading (batch) element count of [..., L, X]. */
static int64_t lead(const attn_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim - 2; d++) n *= t->shape[d];
  return n;
}

/* Folds (ob [NB, n, X], lb [NB, n]) into rows q0.. of (acc [NB, L, X], lacc [NB, L]). */
static void merge(attn_tensor *acc, attn_tensor *lacc, int64_t q0, const attn_tensor *ob, const attn_tensor *lb) {
  const int64_t NB = lead(acc), L = acc->shape[acc->ndim - 2], X = acc->shape[acc->ndim - 1];
  const int64_t n = ob->shape[ob->ndim - 2];
  float *A = attn_tensor_data(acc), *LA = attn_tensor_data(lacc);
  const float *O = attn_tensor_data(ob), *LB = attn_tensor_data(lb);
  for (int64_t b = 0; b < NB; b++)
    for (int64_t i = 0; i < n; i++) {
      float *a = A + (b * L + q0 + i) * X, *la = LA + b * L + q0 + i;
      const float *o = O + (b * n + i) * X, lbv = LB[b * n + i];
      if (lbv == -INFINITY) continue;
      if (*la == -INFINITY) {
        memcpy(a, o, (size_t)X * sizeof(float));
        *la = lbv;
        continue;
      }
      const float m = *la > lbv ? *la : lbv;
      const float wa = expf(*la - m), wb = expf(lbv - m), s = wa + wb;
      for (int64_t x = 0; x < X; x++) a[x] = (a[x] * wa + o[x] * wb) / s;
      *la = m + logf(s);
    }
}

/* acc [NB, L, X] rows r0.. += part [NB, n, X] */
static void add_rows(attn_tensor *acc, int64_t r0, const attn_tensor *part) {
  const int64_t NB = lead(acc), L = acc->shape[acc->ndim - 2], X = acc->shape[acc->ndim - 1];
  const int64_t n = part->shape[part->ndim - 2];
  float *A = attn_tensor_data(acc);
  const float *P = attn_tensor_data(part);
  for (int64_t b = 0; b < NB; b++)
    for (int64_t i = 0; i < n; i++) {
      float *a = A + (b * L + r0 + i) * X;
      const float *p = P + (b * n + i) * X;
      for (int64_t x = 0; x < X; x++) a[x] += p[x];
    }
}

/* Waits for and frees up to n works within dl (the budget of the whole
   forward or backward pass: its waits together last at most the timeout);
   returns the first failure. */
static attn_status wait_all(attn_dist_work **w, int n, attn_dist_deadline *dl) {
  attn_status st = ATTN_OK;
  char msg[512] = "";
  for (int i = 0; i < n; i++) {
    if (!w[i]) continue;
    attn_status s = attn_dist_wait_within(w[i], dl);
    if (s && !st) {
      st = s;
      snprintf(msg, sizeof msg, "%s", attn_last_error());
    }
    attn_dist_work_free(w[i]);
    w[i] = NULL;
  }
  if (st) attn_set_error(st, "%s", msg);
  return st;
}

static void free_all(attn_dist_work **w, int n) {
  for (int i = 0; i < n; i++) {
    attn_dist_work_free(w[i]);
    w[i] = NULL;
  }
}

static void swap(attn_tensor **a, attn_tensor **b) {
  attn_tensor *t = *a;
  *a = *b;
  *b = t;
}

typedef struct {
  attn_tensor *q, *k, *v, *out, *lse; /* contiguous; out is a detached alias */
  long version[3];                    /* of q, k, v's storage when saved */
  bool causal;
  double scale;
} ring_ctx;

static void ctx_free(void *p) {
  ring_ctx *c = p;
  if (!c) return;
  attn_tensor_release(c->q), attn_tensor_release(c->k), attn_tensor_release(c->v);
  attn_tensor_release(c->out), attn_tensor_release(c->lse);
  free(c);
}

static attn_status empty_like(const attn_tensor *t, attn_tensor **out) { return attn_empty(t->ndim, t->shape, out); }
static attn_status zeros_like(const attn_tensor *t, attn_tensor **out) { return attn_zeros(t->ndim, t->shape, out); }

static attn_status ring_backward(void *p, const attn_tensor *g, attn_tensor **grads) {
  ring_ctx *c = p;
  const int P = attn_dist_size(), r = attn_dist_rank(), next = (r + 1) % P, prev = (r + P - 1) % P;
  const int64_t Lc = c->q->shape[c->q->ndim - 2];
  attn_tensor *dout = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *dk_in = NULL, *dv_in = NULL;
  /* K/V in hand (the saved blocks at step 0, never written) and two
     receive buffers used in turn, so a block is never overwritten while
     it is computed on or sent */
  attn_tensor *kcur = c->k, *vcur = c->v, *kbuf[2] = {0}, *vbuf[2] = {0}, *knext = NULL, *vnext = NULL;
  attn_dist_work *w[4] = {0}, *wd[4] = {0};
  attn_dist_deadline dl = attn_dist_deadline_make();
  attn_status st;
  if (c->q->storage->version != c->version[0] || c->k->storage->version != c->version[1] ||
      c->v->storage->version != c->version[2]) {
    st = attn_set_error(ATTN_ERR_STATE,
                        FN " backward (rank %d of %d): q, k or v was modified in place after the "
                           "forward; clone it before modifying",
                        r, P);
    goto done;
  }
  if ((st = attn_contiguous(g, &dout)) || (st = zeros_like(c->q, &dq)) || (st = zeros_like(c->k, &dk)) ||
      (st = zeros_like(c->v, &dv)))
    goto done;
  if (P > 1 && ((st = empty_like(c->k, &kbuf[0])) || (st = empty_like(c->v, &vbuf[0])) ||
                (st = empty_like(c->k, &dk_in)) || (st = empty_like(c->v, &dv_in))))
    goto done;
  if (P > 2 && ((st = empty_like(c->k, &kbuf[1])) || (st = empty_like(c->v, &vbuf[1])))) goto done;
  /* The dK/dV accumulators travel one step behind K/V: at step s this
     rank computes its share for block src into partials while the
     accumulator of block src is still arriving (sent by the previous rank
     at the end of its step s-1), then waits for it, adds the partials and
     sends it on without waiting; after the last step one more hop brings
     every accumulator home. */
  for (int s = 0; s < P; s++) {
    const int src = (r - s + P) % P;
    knext = kbuf[s % 2], vnext = vbuf[s % 2];
    if (s < P - 1) {
      if ((st = attn_dist_irecv(knext, prev, TAG_K, &w[0])) || (st = attn_dist_irecv(vnext, prev, TAG_V, &w[1])) ||
          (st = attn_dist_isend(kcur, next, TAG_K, &w[2])) || (st = attn_dist_isend(vcur, next, TAG_V, &w[3])))
        goto done;
    }
    task t[3];
    attn_tensor *pk[3] = {0}, *pv[3] = {0};
    int nt = schedule(c->causal, r, src, Lc, t);
    for (int i = 0; i < nt && !st; i++) {
      attn_tensor *qv = NULL, *kv = NULL, *vv = NULL, *ov = NULL, *gv = NULL, *lv = NULL, *lc = NULL, *pq = NULL;
      if (!(st = rows(c->q, t[i].q0, t[i].nq, &qv)) && !(st = rows(kcur, t[i].k0, t[i].nk, &kv)) &&
          !(st = rows(vcur, t[i].k0, t[i].nk, &vv)) && !(st = rows(c->out, t[i].q0, t[i].nq, &ov)) &&
          !(st = rows(dout, t[i].q0, t[i].nq, &gv)) &&
          !(st = attn_narrow(c->lse, c->lse->ndim - 1, t[i].q0, t[i].nq, &lv)) && !(st = attn_contiguous(lv, &lc)) &&
          !(st = attn_sdpa_block_backward(qv, kv, vv, ov, gv, lc, t[i].causal, c->scale, &pq, &pk[i], &pv[i])))
        add_rows(dq, t[i].q0, pq);
      attn_tensor *all[] = {qv, kv, vv, ov, gv, lv, lc, pq};
      for (size_t j = 0; j < sizeof all / sizeof *all; j++) attn_tensor_release(all[j]);
    }
    if (!st && s > 0) { /* the accumulators of block src, from the previous rank */
      st = wait_all(wd, 4, &dl);
      if (!st) {
        swap(&dk, &dk_in);
        swap(&dv, &dv_in);
      }
    }
    for (int i = 0; i < nt && !st; i++) {
      add_rows(dk, t[i].k0, pk[i]);
      add_rows(dv, t[i].k0, pv[i]);
    }
    for (int i = 0; i < 3; i++) attn_tensor_release(pk[i]), attn_tensor_release(pv[i]);
    if (st) goto done;
    if (P > 1 &&
        ((st = attn_dist_irecv(dk_in, prev, TAG_DK, &wd[0])) || (st = attn_dist_irecv(dv_in, prev, TAG_DV, &wd[1])) ||
         (st = attn_dist_isend(dk, next, TAG_DK, &wd[2])) || (st = attn_dist_isend(dv, next, TAG_DV, &wd[3]))))
      goto done;
    if ((st = wait_all(w, 4, &dl))) goto done;
    kcur = knext, vcur = vnext;
  }
  if (P > 1) { /* the last hop: this rank's own accumulators come home */
    if ((st = wait_all(wd, 4, &dl))) goto done;
    swap(&dk, &dk_in);
    swap(&dv, &dv_in);
  }
  grads[0] = dq, grads[1] = dk, grads[2] = dv;
  dq = dk = dv = NULL;
done:
  free_all(w, 4);
  free_all(wd, 4);
  attn_tensor *all[] = {dout, dq, dk, dv, dk_in, dv_in, kbuf[0], kbuf[1], vbuf[0], vbuf[1]};
  for (size_t j = 0; j < sizeof all / sizeof *all; j++) attn_tensor_release(all[j]);
  return st;
}

attn_status attn_dist_ring_attention(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, bool causal,
                                     double scale, attn_tensor **out) {
  *out = NULL;
  attn_status st = attn_dist_init();
  if (st) return st;
  const int P = attn_dist_size(), r = attn_dist_rank(), next = (r + 1) % P, prev = (r + P - 1) % P;
  char sq[128], sk[128], sv[128];
  if (q->ndim < 2 || k->ndim != q->ndim || v->ndim != q->ndim)
    return attn_set_error(ATTN_ERR_SHAPE,
                          FN " (rank %d of %d): query %s, key %s and value %s must have the same "
                             "number of dims, at least 2",
                          r, P, attn_shape_str(q->ndim, q->shape, sq, sizeof sq),
                          attn_shape_str(k->ndim, k->shape, sk, sizeof sk),
                          attn_shape_str(v->ndim, v->shape, sv, sizeof sv));
  const int nd = q->ndim;
  bool same = k->shape[nd - 2] == q->shape[nd - 2] && v->shape[nd - 2] == q->shape[nd - 2];
  for (int d = 0; same && d < nd - 2; d++) same = k->shape[d] == q->shape[d] && v->shape[d] == q->shape[d];
  if (!same)
    return attn_set_error(ATTN_ERR_SHAPE,
                          FN " (rank %d of %d): query %s, key %s and value %s must have the same "
                             "leading dims and local sequence length (dim -2)",
                          r, P, attn_shape_str(q->ndim, q->shape, sq, sizeof sq),
                          attn_shape_str(k->ndim, k->shape, sk, sizeof sk),
                          attn_shape_str(v->ndim, v->shape, sv, sizeof sv));
  const int64_t Lc = q->shape[nd - 2];
  if (causal && Lc % 2 != 0)
    return attn_set_error(ATTN_ERR_SHAPE,
                          FN " (rank %d of %d): causal ring attention needs an even local length "
                             "(two zigzag chunks per rank), got %lld in query %s",
                          r, P, (long long)Lc, attn_shape_str(q->ndim, q->shape, sq, sizeof sq));
  if (!(isnan(scale) || scale == 0.0 || isfinite(scale)))
    return attn_set_error(ATTN_ERR_ARG, FN ": scale must be finite, got %g", scale);
  if (isnan(scale) || scale == 0.0) scale = 1.0 / sqrt((double)q->shape[nd - 1]);

  const attn_tensor *in[3] = {q, k, v};
  const bool record = attn_grad_enabled() && (attn_requires_grad(q) || attn_requires_grad(k) || attn_requires_grad(v));
  bool prev_mode = attn_set_grad_enabled(false);
  attn_tensor *qc = NULL, *kc = NULL, *vc = NULL, *acc = NULL, *lacc = NULL, *kcur = NULL, *vcur = NULL;
  attn_tensor *kbuf[2] = {0}, *vbuf[2] = {0}, *knext = NULL, *vnext = NULL, *alias = NULL;
  attn_dist_work *w[4] = {0};
  attn_dist_deadline dl = attn_dist_deadline_make();
  int64_t oshape[ATTN_MAX_DIMS];
  memcpy(oshape, q->shape, sizeof oshape);
  oshape[nd - 1] = v->shape[nd - 1];
  if ((st = attn_contiguous(q, &qc)) || (st = attn_contiguous(k, &kc)) || (st = attn_contiguous(v, &vc)) ||
      (st = attn_zeros(nd, oshape, &acc)) || (st = attn_full(nd - 1, q->shape, -INFINITY, &lacc)))
    goto done;
  /* the contiguous inputs may be the caller's tensors: work on detached aliases */
  {
    attn_tensor *a;
    if ((st = attn_detach(qc, &a))) goto done;
    attn_tensor_release(qc), qc = a;
    if ((st = attn_detach(kc, &a))) goto done;
    attn_tensor_release(kc), kc = a;
    if ((st = attn_detach(vc, &a))) goto done;
    attn_tensor_release(vc), vc = a;
  }
  /* K/V in hand: this rank's own (saved for backward, never written) at
     step 0, then the two receive buffers in turn */
  kcur = kc, vcur = vc;
  if (P > 1 && ((st = empty_like(kc, &kbuf[0])) || (st = empty_like(vc, &vbuf[0])))) goto done;
  if (P > 2 && ((st = empty_like(kc, &kbuf[1])) || (st = empty_like(vc, &vbuf[1])))) goto done;
  for (int s = 0; s < P; s++) {
    const int src = (r - s + P) % P;
    knext = kbuf[s % 2], vnext = vbuf[s % 2];
    if (s < P - 1) { /* the next block travels while this one is computed */
      if ((st = attn_dist_irecv(knext, prev, TAG_K, &w[0])) || (st = attn_dist_irecv(vnext, prev, TAG_V, &w[1])) ||
          (st = attn_dist_isend(kcur, next, TAG_K, &w[2])) || (st = attn_dist_isend(vcur, next, TAG_V, &w[3])))
        goto done;
    }
    task t[3];
    int nt = schedule(causal, r, src, Lc, t);
    for (int i = 0; i < nt && !st; i++) {
      attn_tensor *qv = NULL, *kv = NULL, *vv = NULL, *ob = NULL, *lb = NULL;
      if (!(st = rows(qc, t[i].q0, t[i].nq, &qv)) && !(st = rows(kcur, t[i].k0, t[i].nk, &kv)) &&
          !(st = rows(vcur, t[i].k0, t[i].nk, &vv)) &&
          !(st = attn_sdpa_block_forward(qv, kv, vv, t[i].causal, scale, &ob, &lb)))
        merge(acc, lacc, t[i].q0, ob, lb);
      attn_tensor_release(qv), attn_tensor_release(kv), attn_tensor_release(vv);
      attn_tensor_release(ob), attn_tensor_release(lb);
    }
    if (st) goto done;
    if ((st = wait_all(w, 4, &dl))) goto done;
    kcur = knext, vcur = vnext;
  }
  attn_set_grad_enabled(prev_mode);
  if (record) {
    ring_ctx *c = calloc(1, sizeof *c);
    if (!c || (st = attn_detach(acc, &alias))) {
      free(c);
      if (!st) st = attn_set_error(ATTN_ERR_NOMEM, FN ": out of memory");
      goto done;
    }
    c->q = attn_tensor_retain(qc), c->k = attn_tensor_retain(kc), c->v = attn_tensor_retain(vc);
    c->out = alias, alias = NULL;
    c->lse = attn_tensor_retain(lacc);
    c->version[0] = qc->storage->version, c->version[1] = kc->storage->version, c->version[2] = vc->storage->version;
    c->causal = causal;
    c->scale = scale;
    if ((st = attn_custom_record(acc, "RingAttentionBackward0", 3, in, ring_backward, c, ctx_free))) goto done;
  }
  *out = acc;
  acc = NULL;
done:
  attn_set_grad_enabled(prev_mode);
  free_all(w, 4);
  attn_tensor *all[] = {qc, kc, vc, acc, lacc, kbuf[0], kbuf[1], vbuf[0], vbuf[1], alias};
  for (size_t j = 0; j < sizeof all / sizeof *all; j++) attn_tensor_release(all[j]);
  return st;
}
