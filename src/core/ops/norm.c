/* SPDX-License-Identifier: MIT */
/* LayerNorm as one op (torch.nn.functional.layer_norm), forward and
 * backward each one pass over the rows (norm_kernels.h, per kernel
 * family), instead of the eight elementwise and reduction ops (and their
 * eight backward nodes and temporaries) it takes composed.
 *
 * Shapes: x [..., n] viewed as [rows, n], n the product of the last k
 * dims; w, b of those k dims (or NULL); y like x; the node saves x, w and
 * the row statistics mean, rstd [rows]. */
#include "ops/ops.h"
#include "kernels/kernels.h"

#include <string.h>

#define TRY(expr)                                                                                                      \
  do {                                                                                                                 \
    if ((st = (expr))) goto out;                                                                                       \
  } while (0)
#define REL(t) attn_tensor_release(t)

/* rows per kernel call between polls of the deadline */
static int64_t rows_per_poll(int64_t n) {
  int64_t r = ATTN__POLL_WORK / (n > 0 ? n : 1);
  return r > 0 ? r : 1;
}

static attn_status check_param(const attn_tensor *x, int k, const attn_tensor *p, const char *what) {
  if (!p) return ATTN_OK;
  attn_status st = attn_check_float("layer_norm", what, p);
  if (st) return st;
  bool ok = p->ndim == k;
  for (int i = 0; ok && i < k; i++) ok = p->shape[i] == x->shape[x->ndim - k + i];
  if (ok) return ATTN_OK;
  char sp[ATTN_SHAPE_BUF], sn[ATTN_SHAPE_BUF];
  attn_shape_str(k, x->shape + x->ndim - k, sn, sizeof sn);
  return attn_set_error(ATTN_ERR_SHAPE, "layer_norm: %s %s does not match normalized_shape %s", what, ATTN_SHAPE(p, sp),
                        sn);
}

/* Forward jobs of at least this many elements split their rows over the
   thread pool, in at least LN_PAR_BLOCKS blocks (so that 2 threads get
   even shares) */
#define LN_PAR_MIN ((int64_t)1 << 15)
#define LN_PAR_BLOCKS 8

/* Backward jobs of at least LN_PAR_MIN elements split the rows into at
   most LN_BWD_TASKS tasks (a count fixed by the shape, never by the
   threads), each with its own dw, db partial sums and scratch: the tasks
   run on the thread pool and the partials are added in task order, so the
   result has the same bits on any number of threads. */
#define LN_BWD_TASKS 64

typedef struct {
  const attn__kernels *K;
  const float *g, *x, *w, *mean, *rstd;
  float *dx, *dw, *db, *scratch; /* dw, db, scratch: [tasks, n] (dw, db may be NULL) */
  bool dx_acc;
  int64_t rows, n, per_task, step;
} ln_bwd_job;

static void ln_bwd_range(int64_t begin, int64_t end, void *arg) {
  const ln_bwd_job *J = arg;
  for (int64_t t = begin; t < end; t++) {
    const int64_t r0 = t * J->per_task, r1 = J->rows < r0 + J->per_task ? J->rows : r0 + J->per_task;
    float *dw = J->dw ? J->dw + t * J->n : NULL, *db = J->db ? J->db + t * J->n : NULL;
    for (int64_t r = r0; r < r1 && !attn__cancelled(); r += J->step) {
      const int64_t m = r1 - r < J->step ? r1 - r : J->step;
      J->K->layer_norm_bwd_rows(J->g + r * J->n, J->x + r * J->n, m, J->n, J->w, J->mean + r, J->rstd + r,
                                J->dx ? J->dx + r * J->n : NULL, J->dx_acc, dw, db, J->scratch + t * J->n);
    }
  }
}

/* dx, dw, db from g (node: inputs x, w?, b? in that order; saved x, w,
   mean, rstd; iargs k, has_w, has_b). */
attn_status attn__layer_norm_backward(attn_node *node, const attn_tensor *g_in, attn_tensor **grads) {
  const attn_tensor *x = node->saved[0], *w = node->saved[1], *mean = node->saved[2], *rstd = node->saved[3];
  const bool has_w = node->iargs[1], has_b = node->iargs[2];
  const int iw = 1, ib = has_w ? 2 : 1;
  const bool want_x = node->next[0].node, want_w = has_w && node->next[iw].node, want_b = has_b && node->next[ib].node;
  const int64_t rows = attn_tensor_numel(mean), n = rows ? attn_tensor_numel(x) / rows : 0;
  attn_tensor *g = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  const int64_t step = rows_per_poll(n);
  /* one task, or up to LN_BWD_TASKS of at least `step` rows each */
  int64_t tasks = rows * n >= LN_PAR_MIN ? (rows + step - 1) / step : 1;
  if (tasks > LN_BWD_TASKS) tasks = LN_BWD_TASKS;
  const int64_t per_task = (rows + tasks - 1) / tasks;
  /* scratch [tasks, n], then the partials dw, db [tasks, n] each when split */
  const int64_t nn = n > 0 ? n : 1, parts = tasks > 1 ? (int64_t)want_w + want_b : 0;
  const size_t scratch_bytes = (size_t)(tasks * nn * (1 + parts)) * sizeof(float);
  float *scratch = NULL;
  attn_status st;
  TRY(attn_contiguous(g_in, &g));
  /* dx straight into x's .grad where the engine allows (attn__grad_into) */
  if (want_x) TRY(attn__grad_out(node, 0, "layer_norm backward", &dx));
  const bool dx_acc = dx && dx == attn__grad_into(node, 0);
  if (want_w) TRY(attn_zeros(w->ndim, w->shape, &dw));
  if (want_b)
    TRY(attn_zeros(w ? w->ndim : (int)node->iargs[0], w ? w->shape : x->shape + x->ndim - node->iargs[0], &db));
  if (!(scratch = attn__scratch_alloc(scratch_bytes))) {
    st = attn__nomem("layer_norm backward", (int64_t)scratch_bytes);
    goto out;
  }
  {
    float *dwp = dw ? attn_tensor_data(dw) : NULL, *dbp = db ? attn_tensor_data(db) : NULL;
    float *pw = dwp, *pb = dbp; /* where the tasks sum: the results, or the partials */
    if (tasks > 1) {
      float *p = scratch + tasks * nn;
      if (dwp) pw = p, p += tasks * nn;
      if (dbp) pb = p;
      if (parts) memset(scratch + tasks * nn, 0, (size_t)(tasks * nn * parts) * sizeof(float));
    }
    ln_bwd_job J = {attn__kern(),
                    attn_tensor_data(g),
                    attn_tensor_data(x),
                    w ? attn_tensor_data(w) : NULL,
                    attn_tensor_data(mean),
                    attn_tensor_data(rstd),
                    dx ? attn_tensor_data(dx) : NULL,
                    pw,
                    pb,
                    scratch,
                    dx_acc,
                    rows,
                    n,
                    per_task,
                    step};
    if (tasks > 1)
      attn__parallel_for(tasks, ln_bwd_range, &J);
    else
      ln_bwd_range(0, 1, &J);
    if (attn__cancelled()) {
      if (dx_acc) attn__bump_version(dx); /* rows already added */
      st = attn__limit_error("layer_norm backward");
      goto out;
    }
    if (tasks > 1) /* the partials, in task order */
      for (int64_t t = 0; t < tasks; t++)
        for (int64_t i = 0; i < n; i++) {
          if (dwp) dwp[i] += pw[t * nn + i];
          if (dbp) dbp[i] += pb[t * nn + i];
        }
  }
  if (dx) attn__grad_give(node, 0, dx, true, grads), dx = NULL;
  if (has_w) grads[iw] = dw, dw = NULL;
  if (has_b) grads[ib] = db, db = NULL;
out:
  if (scratch) attn__scratch_free(scratch, scratch_bytes);
  REL(g), REL(dx), REL(dw), REL(db);
  return st;
}

typedef struct {
  const attn__kernels *K;
  const float *x, *w, *b;
  float *y, *mean, *rstd;
  int64_t rows, n, step;
  float eps;
} ln_job;

/* row blocks [begin, end) of `step` rows */
static void ln_rows_range(int64_t begin, int64_t end, void *arg) {
  const ln_job *J = arg;
  for (int64_t t = begin; t < end && !attn__cancelled(); t++) {
    const int64_t r = t * J->step, m = J->rows - r < J->step ? J->rows - r : J->step;
    J->K->layer_norm_rows(J->x + r * J->n, m, J->n, J->w, J->b, J->eps, J->y + r * J->n, J->mean + r, J->rstd + r);
  }
}

attn_status attn_layer_norm(const attn_tensor *x, int k, const attn_tensor *w, const attn_tensor *b, float eps,
                            attn_tensor **out) {
  attn_status st = attn_check_float("layer_norm", "input", x);
  if (st) return st;
  if (k < 1 || k > x->ndim)
    return attn_set_error(ATTN_ERR_ARG, "layer_norm: normalizes %d dims of a %d-d input", k, x->ndim);
  if ((st = check_param(x, k, w, "weight")) || (st = check_param(x, k, b, "bias"))) return st;
  int64_t n = 1;
  for (int i = x->ndim - k; i < x->ndim; i++) n *= x->shape[i];
  const int64_t rows = n ? attn_tensor_numel(x) / n : 0;
  attn_tensor *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
  TRY(attn_contiguous(x, &xc));
  if (w) TRY(attn_contiguous(w, &wc));
  if (b) TRY(attn_contiguous(b, &bc));
  TRY(attn__alloc("layer_norm", x->ndim, x->shape, &y));
  TRY(attn__alloc("layer_norm", 1, &rows, &mean));
  TRY(attn__alloc("layer_norm", 1, &rows, &rstd));
  {
    const attn__kernels *K = attn__kern();
    const float *xp = attn_tensor_data(xc), *wp = wc ? attn_tensor_data(wc) : NULL;
    const float *bp = bc ? attn_tensor_data(bc) : NULL;
    float *yp = attn_tensor_data(y), *mp = attn_tensor_data(mean), *rp = attn_tensor_data(rstd);
    int64_t step = rows_per_poll(n);
    const bool par = rows * n >= LN_PAR_MIN && rows > 1;
    if (par && (rows + step - 1) / step < LN_PAR_BLOCKS) {
      const int64_t blocks = rows < LN_PAR_BLOCKS ? rows : LN_PAR_BLOCKS;
      step = (rows + blocks - 1) / blocks;
    }
    ln_job J = {K, xp, wp, bp, yp, mp, rp, rows, n, step, eps};
    if (par) /* each row alone: the split changes no result */
      attn__parallel_for((rows + step - 1) / step, ln_rows_range, &J);
    else
      ln_rows_range(0, (rows + step - 1) / step, &J);
    if (attn__cancelled()) { /* past the deadline: row blocks were skipped */
      st = attn__limit_error("layer_norm");
      goto out;
    }
  }
  {
    const attn_tensor *in[3] = {x, NULL, NULL};
    int nin = 1;
    if (w) in[nin++] = w;
    if (b) in[nin++] = b;
    if (attn__ag_needed(nin, in)) {
      const attn_tensor *saved[4] = {xc, wc, mean, rstd};
      attn_node *node;
      TRY(attn__ag_record(y, "NativeLayerNormBackward0", ATTN__F_LAYER_NORM, nin, in, 4, saved, &node));
      node->iargs[0] = k;
      node->iargs[1] = w != NULL;
      node->iargs[2] = b != NULL;
    }
  }
  *out = y, y = NULL;
out:
  REL(xc), REL(wc), REL(bc), REL(y), REL(mean), REL(rstd);
  return st;
}
