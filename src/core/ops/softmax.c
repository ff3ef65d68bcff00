/* SPDX-License-Identifier: MIT */
/* softmax and log_softmax along one dim.
 *
 * Same block layout as the reductions (see reduce.c): a block is [n, m],
 * n along dim (input stride rs, output stride ors), m the innermost other
 * dim.  Rows (rs == 1: softmax over the last contiguous dim, the attention
 * case) run three unit-stride passes per row; with unit-stride columns the
 * passes go row by row over m running maxima and sums instead.
 *
 * Numerics follow torch 1.13: subtract the row max, exp in float (exp_neg
 * below, vectorisable), sum (here in double), then scale by 1/sum, or for log_softmax x - max - log(sum).
 * The max propagates NaN, so a row holding NaN or +inf (inf - inf) and a
 * row of all -inf (-inf - -inf) give NaN, while single -inf entries give
 * probability 0 (log-probability -inf).
 *
 * Under autograd the node saves an alias of the output (grad_reduce.c).
 * The kernels are in softmax_kernels.h, compiled once per kernel family
 * (kernels.h); this file picks the family's and walks the blocks.
 */
#include "ops/ops.h"
#include "kernels/kernels.h"

#include <math.h>

/* Selects on float compares (the NaN-propagating max, clamps) only
   vectorise when GCC may assume FP operations do not trap; attn never reads
   the FP exception flags, so this changes no result. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* t [..., n, ...] -> out of the same shape */
/* Blocks of at least this many elements split their rows over the pool */
#define SOFTMAX_PAR_MIN ((int64_t)1 << 15)

typedef struct {
  const attn__kernels *K;
  const float *x;
  float *y;
  const attn__dimsplit *s;
  bool log_space;
  int64_t chunk; /* rows per task */
} softmax_job;

static void softmax_rows_range(int64_t begin, int64_t end, void *arg) {
  const softmax_job *J = arg;
  const attn__dimsplit *s = J->s;
  for (int64_t t = begin; t < end && !attn__cancelled(); t++) {
    const int64_t r0 = t * J->chunk, mr = s->m - r0 < J->chunk ? s->m - r0 : J->chunk;
    J->K->softmax_rows(J->x + r0 * s->vs, s->n, s->in_stride, mr, s->vs, J->y + r0 * s->vos, s->out_stride, s->vos,
                       J->log_space);
  }
}

static attn_status softmax_impl(const char *fn, const attn_tensor *t, int dim, bool log_space, attn_tensor **out) {
  attn_status fst = attn_check_float(fn, NULL, t);
  if (fst) return fst;
  if (t->ndim == 0 ? dim != 0 : (dim < 0 || dim >= t->ndim))
    return attn_set_error(ATTN_ERR_INDEX, "%s: dim %d out of range for a %d-d tensor", fn, dim, t->ndim);
  int64_t ostride[ATTN_MAX_DIMS];
  attn__contiguous_strides(t->ndim, t->shape, ostride);
  attn__dimsplit s;
  attn__dimsplit_init(&s, t, dim, ostride);
  void *buf = NULL;
  bool cols = s.in_stride != 1 && s.vs == 1 && s.m > 1 && s.n > 1 && s.outer > 0;
  if (cols) {
    buf = attn__scratch_alloc((size_t)s.m * (sizeof(double) + sizeof(float)));
    if (!buf) return attn__nomem(fn, s.m * (int64_t)(sizeof(double) + sizeof(float)));
  }
  const size_t buf_bytes = buf ? (size_t)s.m * (sizeof(double) + sizeof(float)) : 0;
  attn_tensor *res;
  attn_status st = attn__alloc(fn, t->ndim, t->shape, &res);
  if (st) {
    attn__scratch_free(buf, buf_bytes);
    return st;
  }
  const float *x = attn_tensor_data(t);
  float *y = attn_tensor_data(res);
  int64_t idx[ATTN_MAX_DIMS] = {0}, ip = 0, op = 0, work = 0;
  const attn__kernels *K = attn__kern();
  for (int64_t o = 0; o < s.outer; o++) {
    if (attn__poll_work(&work, s.n * s.m)) {
      attn__scratch_free(buf, buf_bytes);
      attn_tensor_release(res);
      return attn__limit_error(fn);
    }
    if (cols) {
      /* one scratch block: m doubles, then m floats */
      // cppcheck-suppress invalidPointerCast
      float *fbuf = (float *)((double *)buf + s.m);
      K->softmax_cols(x + ip, s.n, s.in_stride, s.m, y + op, s.out_stride, s.vos, log_space, fbuf, (double *)buf);
    } else if (s.n * s.m >= SOFTMAX_PAR_MIN && s.m > 1) {
      /* a big block: its rows in chunks on the thread pool (each row is
         computed alone, so the results do not depend on the split) */
      softmax_job J = {K, x + ip, y + op, &s, log_space, (s.m + 63) / 64};
      attn__parallel_for((s.m + J.chunk - 1) / J.chunk, softmax_rows_range, &J);
      if (attn__cancelled()) { /* past the deadline: rows were skipped */
        attn__scratch_free(buf, buf_bytes);
        attn_tensor_release(res);
        return attn__limit_error(fn);
      }
    } else {
      K->softmax_rows(x + ip, s.n, s.in_stride, s.m, s.vs, y + op, s.out_stride, s.vos, log_space);
    }
    attn__dimsplit_next(&s, idx, &ip, &op);
  }
  attn__scratch_free(buf, buf_bytes);
  /* the node saves an alias of the output: backward needs only y */
  if ((st = attn__record_softmax(t, dim, log_space, res))) {
    attn_tensor_release(res);
    return st;
  }
  *out = res;
  return ATTN_OK;
}

attn_status attn_softmax(const attn_tensor *t, int dim, attn_tensor **out) {
  return softmax_impl("softmax", t, dim, false, out);
}

attn_status attn_log_softmax(const attn_tensor *t, int dim, attn_tensor **out) {
  return softmax_impl("log_softmax", t, dim, true, out);
}
