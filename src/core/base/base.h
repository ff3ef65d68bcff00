/* SPDX-License-Identifier: MIT */
/* The core's base floor (1.0, src/core/base/): error messages, shapes,
 * allocation that never aborts, deadlines (deadline.c), budgets
 * (budget.c) and the thread pool (parallel.c).  Every other room of
 * src/core stands on it.  Not installed. */
#ifndef ATTN_CORE_BASE_H
#define ATTN_CORE_BASE_H

#include "attn.h"

#include <stdlib.h>
#include <string.h>

#define ATTN_SHAPE_BUF 128

/* Largest element count a tensor may have: the byte size must fit in a
   signed 64-bit value and in size_t. */
#define ATTN_MAX_NUMEL ((int64_t)1 << 56)

/* numel of a shape, or -1 when a size is negative or the product
   overflows ATTN_MAX_NUMEL. */
int64_t attn__shape_numel(int ndim, const int64_t *shape);
void attn__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);

/* A row function over nt tensors' rows (attn__foreach in tensor/tensor.h;
   the kernel families' clamp rows). */
typedef void (*attn__inner_fn)(int64_t n, float **p, const int64_t *s, void *ctx);

/* Time limits (deadline.c): whether the calling thread's deadline
   (attn_deadline_set_current) has passed.  Cheap: long kernels call it
   between blocks of work (a row block, a tile, every ATTN__POLL_WORK
   elements) and then fail with attn__limit_error(fn) (ATTN_ERR_LIMIT,
   "fn: time limit reached"), releasing what they allocated.  Kernels on
   the pool (parallel.c) see the submitting thread's deadline. */
bool attn__cancelled(void);
attn_status attn__limit_error(const char *fn);
#define ATTN__POLL_WORK ((int64_t)1 << 16)
/* Adds n units of work to *acc and polls once ATTN__POLL_WORK have
   accumulated since the last poll. */
static inline bool attn__poll_work(int64_t *acc, int64_t n) {
  if ((*acc += n) < ATTN__POLL_WORK) return false;
  *acc = 0;
  return attn__cancelled();
}

/* Allocation that never aborts. */
void *attn__malloc(size_t n);
/* Asks for transparent huge pages for a fresh block of n bytes at p when it
   is big (base.c); call before touching it. */
void attn__advise_huge(void *p, size_t n);
void *attn__calloc(size_t n, size_t size);

#define ATTN_SHAPE(t, buf) attn_shape_str((t)->ndim, (t)->shape, (buf), sizeof(buf))

/* Threads (parallel.c) */

/* Runs fn over [0, n) split into ranges on attn's persistent thread pool
   (attn__parallel_threads() threads, the caller included), returning when all
   are done.  Serial when called from inside a worker, when another thread
   holds the pool, or with one thread.  fn must not fail: it reports
   through ctx. */
void attn__parallel_for(int64_t n, void (*fn)(int64_t begin, int64_t end, void *ctx), void *ctx);
/* Sets the pool's thread count (attn_set_num_threads and BLAS's loading
   call it, so the pool follows BLAS without knowing it). */
void attn__parallel_resize(int nthreads);
int attn__parallel_threads(void);

#endif
