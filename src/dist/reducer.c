/* SPDX-License-Identifier: MIT */
/* The gradient reducer of nn.DistributedDataParallel (see dist.h).
 *
 * Ownership: the reducer retains its parameters; each parameter's grad hook
 * points at the reducer's entry for it without owning it, and
 * attn_dist_reducer_free removes the hooks before freeing, so no hook can
 * outlive its reducer and there is no reference cycle.  A reducer belongs
 * to the Lua state (and so the thread) that made it: its hooks run in the
 * thread running backward, and call no Lua. */
#include "dist/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct attn_dist_reducer attn_dist_reducer;

typedef struct {
  attn_dist_reducer *r;
  attn_tensor *p; /* retained */
  int bucket;
  int64_t offset; /* in the bucket, in elements */
  bool ready;     /* gradient copied into the bucket this pass */
} rparam;

typedef struct {
  attn_tensor *flat; /* contiguous [numel] */
  int pending;       /* parameters not yet ready this pass */
  int nparams;
  attn_dist_work *work; /* running allreduce, or NULL */
} rbucket;

struct attn_dist_reducer {
  int n, nb;
  rparam *params;
  rbucket *buckets;
  bool enabled;
  bool active; /* a pass has begun (some hook fired) */
  int started; /* buckets whose allreduce started this pass */
  int64_t overlapped;
};

static attn_status copy_grad_in(rparam *rp) {
  rbucket *b = &rp->r->buckets[rp->bucket];
  float *dst = attn_tensor_data(b->flat) + rp->offset;
  int64_t n = attn_tensor_numel(rp->p);
  attn_tensor *g = attn_grad(rp->p);
  if (!g) {
    memset(dst, 0, (size_t)n * sizeof(float));
    return ATTN_OK;
  }
  if (attn_tensor_is_contiguous(g)) {
    memcpy(dst, attn_tensor_data(g), (size_t)n * sizeof(float));
    return ATTN_OK;
  }
  attn_tensor *view;
  attn_status st = attn_wrap(dst, rp->p->ndim, rp->p->shape, NULL, NULL, NULL, &view);
  if (st) return st;
  bool prev = attn_set_grad_enabled(false);
  st = attn_copy_(view, g);
  attn_set_grad_enabled(prev);
  attn_tensor_release(view);
  return st;
}

static attn_status copy_grad_out(rparam *rp) {
  rbucket *b = &rp->r->buckets[rp->bucket];
  float *src = attn_tensor_data(b->flat) + rp->offset;
  int64_t n = attn_tensor_numel(rp->p);
  attn_tensor *g = attn_grad(rp->p);
  attn_status st;
  if (!g) {
    attn_tensor *ng;
    if ((st = attn_from_data(rp->p->ndim, rp->p->shape, src, &ng))) return st;
    st = attn_set_grad(rp->p, ng);
    attn_tensor_release(ng);
    return st;
  }
  if (attn_tensor_is_contiguous(g)) {
    memcpy(attn_tensor_data(g), src, (size_t)n * sizeof(float));
    g->storage->version++;
    return ATTN_OK;
  }
  attn_tensor *view;
  if ((st = attn_wrap(src, rp->p->ndim, rp->p->shape, NULL, NULL, NULL, &view))) return st;
  bool prev = attn_set_grad_enabled(false);
  st = attn_copy_(g, view);
  attn_set_grad_enabled(prev);
  attn_tensor_release(view);
  return st;
}

static attn_status start_bucket(attn_dist_reducer *r, int bi) {
  rbucket *b = &r->buckets[bi];
  r->started++;
  return attn_dist_iallreduce(b->flat, ATTN_DIST_AVG, &b->work);
}

/* Waits for every started bucket and writes the averages back.  The
   buckets' waits share one deadline, computed once here: a stalled peer
   fails the pass after the timeout, not after the timeout once per bucket
   (once it has run out, the buckets left are tested, not waited for). */
static attn_status complete(attn_dist_reducer *r) {
  attn_status st = ATTN_OK;
  char msg[512] = "";
  attn_dist_deadline dl = attn_dist_deadline_make();
  for (int bi = 0; bi < r->nb; bi++) {
    rbucket *b = &r->buckets[bi];
    if (!b->work) continue;
    attn_status s = attn_dist_wait_within(b->work, &dl);
    if (s && !st) {
      st = s;
      snprintf(msg, sizeof msg, "DistributedDataParallel: averaging the gradients (bucket %d of %d): %s", bi + 1, r->nb,
               attn_last_error());
    }
    attn_dist_work_free(b->work);
    b->work = NULL;
  }
  if (st) attn_set_error(st, "%s", msg);
  for (int i = 0; i < r->n && st == ATTN_OK; i++) st = copy_grad_out(&r->params[i]);
  for (int i = 0; i < r->n; i++) r->params[i].ready = false;
  for (int bi = 0; bi < r->nb; bi++) r->buckets[bi].pending = r->buckets[bi].nparams;
  r->started = 0;
  r->active = false;
  return st;
}

static attn_status hook(void *ctx, attn_tensor *leaf) {
  rparam *rp = ctx;
  attn_dist_reducer *r = rp->r;
  (void)leaf;
  if (!r->enabled) return ATTN_OK;
  if (rp->ready) { /* a second gradient in one pass (unfinished earlier pass): sync that first */
    attn_status st = attn_dist_reducer_finish(r);
    if (st) return st;
  }
  r->active = true;
  attn_status st = copy_grad_in(rp);
  if (st) return st;
  rp->ready = true;
  if (--r->buckets[rp->bucket].pending == 0 && (st = start_bucket(r, rp->bucket))) return st;
  /* drive MPI's progress for the buckets in flight */
  for (int bi = 0; bi < r->nb; bi++)
    if (r->buckets[bi].work) attn_dist_test(r->buckets[bi].work);
  if (r->started == r->nb) {
    r->overlapped++;
    return complete(r);
  }
  return ATTN_OK;
}

attn_status attn_dist_reducer_new(int n, attn_tensor *const *params, int64_t bucket_bytes, attn_dist_reducer **out) {
  *out = NULL;
  attn_status st = attn_dist_init();
  if (st) return st;
  if (bucket_bytes <= 0) return attn_set_error(ATTN_ERR_ARG, "DistributedDataParallel: bucket size must be > 0");
  attn_dist_reducer *r = calloc(1, sizeof *r);
  if (!r) return attn_set_error(ATTN_ERR_NOMEM, "DistributedDataParallel: out of memory");
  r->enabled = true;
  r->params = calloc((size_t)(n ? n : 1), sizeof *r->params);
  r->buckets = calloc((size_t)(n ? n : 1), sizeof *r->buckets);
  if (!r->params || !r->buckets) {
    free(r->params), free(r->buckets), free(r);
    return attn_set_error(ATTN_ERR_NOMEM, "DistributedDataParallel: out of memory");
  }
  for (int i = 0; i < n; i++) {
    if (!attn_is_leaf(params[i])) {
      st = attn_set_error(ATTN_ERR_ARG, "DistributedDataParallel: parameter %d is not a leaf tensor", i + 1);
      goto fail;
    }
    r->params[i].r = r;
    r->params[i].p = attn_tensor_retain(params[i]);
    r->n = i + 1;
  }
  /* Buckets in reverse parameter order (gradients arrive last layer first). */
  const int64_t cap = bucket_bytes / (int64_t)sizeof(float);
  int64_t fill = 0;
  int cur = -1;
  for (int i = n - 1; i >= 0; i--) {
    int64_t numel = attn_tensor_numel(params[i]);
    if (cur < 0 || (fill > 0 && fill + numel > cap)) {
      cur = r->nb++;
      fill = 0;
    }
    r->params[i].bucket = cur;
    r->params[i].offset = fill;
    r->buckets[cur].nparams++;
    fill += numel;
  }
  for (int bi = 0; bi < r->nb; bi++) {
    int64_t total = 0;
    for (int i = 0; i < n; i++)
      if (r->params[i].bucket == bi) {
        int64_t e = r->params[i].offset + attn_tensor_numel(params[i]);
        if (e > total) total = e;
      }
    int64_t shape[1] = {total};
    if ((st = attn_zeros(1, shape, &r->buckets[bi].flat))) goto fail;
    r->buckets[bi].pending = r->buckets[bi].nparams;
  }
  if (attn_dist_size() > 1)
    for (int i = 0; i < n; i++)
      if ((st = attn_set_grad_hook(r->params[i].p, hook, &r->params[i]))) goto fail;
  *out = r;
  return ATTN_OK;
fail:
  attn_dist_reducer_free(r);
  return st;
}

void attn_dist_reducer_enable(attn_dist_reducer *r, bool on) { r->enabled = on; }

attn_status attn_dist_reducer_finish(attn_dist_reducer *r) {
  if (!r->active) return ATTN_OK;
  attn_status st = ATTN_OK;
  for (int i = 0; i < r->n && st == ATTN_OK; i++) {
    rparam *rp = &r->params[i];
    if (rp->ready) continue;
    if ((st = copy_grad_in(rp))) break;
    rp->ready = true;
    if (--r->buckets[rp->bucket].pending == 0) st = start_bucket(r, rp->bucket);
  }
  attn_status s = complete(r);
  return st ? st : s;
}

int attn_dist_reducer_buckets(const attn_dist_reducer *r) { return r->nb; }
bool attn_dist_reducer_pending(const attn_dist_reducer *r) { return r->active; }
int64_t attn_dist_reducer_overlapped(const attn_dist_reducer *r) { return r->overlapped; }

void attn_dist_reducer_free(attn_dist_reducer *r) {
  if (!r) return;
  for (int bi = 0; bi < r->nb; bi++) {
    attn_dist_work_free(r->buckets[bi].work);
    attn_tensor_release(r->buckets[bi].flat);
  }
  for (int i = 0; i < r->n; i++) {
    if (attn_grad_hook_ctx(r->params[i].p) == &r->params[i]) attn_set_grad_hook(r->params[i].p, NULL, NULL);
    attn_tensor_release(r->params[i].p);
  }
  free(r->params);
  free(r->buckets);
  free(r);
}
