/* SPDX-License-Identifier: MIT */
/* The tensor floor (1.2, src/core/tensor/): storage, tensor lifetime,
 * creation, iterators, raw (unrecorded) fills and copies, memory
 * budgets.  Not installed. */
#ifndef ATTN_CORE_TENSOR_H
#define ATTN_CORE_TENSOR_H

#include "base/base.h"

/* A fresh tensor struct pointing at storage s (retained), refcount 1. */
attn_tensor *attn__tensor_new(attn_storage *s, int64_t offset, int ndim, const int64_t *shape, const int64_t *stride);
/* Uninitialised contiguous tensor; fn names the caller for messages. */
attn_status attn__alloc(const char *fn, int ndim, const int64_t *shape, attn_tensor **out);
/* The same with a dtype. */
attn_status attn__alloc_dtype(const char *fn, attn_dtype dt, int ndim, const int64_t *shape, attn_tensor **out);
/* The element at storage position pos of s, converted (any dtype). */
double attn__load_f64(const attn_storage *s, int64_t pos);
int64_t attn__load_i64(const attn_storage *s, int64_t pos);
/* ATTN_OK when the number v can be written into a tensor of dtype dt (an
   int64 takes a finite v in [-2^63, 2^63), truncated toward zero like
   torch; float32 and bool take any v); else an error naming fn and v. */
attn_status attn__check_value(const char *fn, attn_dtype dt, double v);
attn_status attn__check_dim(const char *fn, const attn_tensor *t, int dim);

/* Iterates the flat row-major positions of a tensor: calls body with the
   storage offset of each element.  Dims are walked with an odometer. */
typedef struct attn__iter {
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  int64_t stride[ATTN_MAX_DIMS];
  int64_t idx[ATTN_MAX_DIMS];
  int64_t pos;
} attn__iter;

void attn__iter_init(attn__iter *it, const attn_tensor *t);
/* Advances to the next element; returns 0 when wrapped around. */
static inline int attn__iter_next(attn__iter *it) {
  for (int d = it->ndim - 1; d >= 0; d--) {
    if (++it->idx[d] < it->shape[d]) {
      it->pos += it->stride[d];
      return 1;
    }
    it->pos -= it->stride[d] * (it->shape[d] - 1);
    it->idx[d] = 0;
  }
  return 0;
}

/* Collapses a set of tensors sharing one shape (with their strides) into as
   few dims as possible: adjacent dims merge when every tensor's strides allow
   it.  Used by the elementwise kernels to get long inner loops. */
int attn__coalesce(int ndim, int64_t *shape, int ntensors, int64_t (*strides)[ATTN_MAX_DIMS]);

/* Steps the odometer idx over coalesced dims [0, nd - 1) to the next row
   (dim nd - 1 is the caller's inner loop), keeping pos[j] the row's
   element offset in each of the n tensors (strides as attn__coalesce
   left them); false after the last row.  Once a row, outside the inner
   loop. */
static inline bool attn__next_row(int nd, const int64_t *shape, int n, int64_t (*strides)[ATTN_MAX_DIMS], int64_t *idx,
                                  int64_t *pos) {
  for (int d = nd - 2; d >= 0; d--) {
    if (++idx[d] < shape[d]) {
      for (int j = 0; j < n; j++) pos[j] += strides[j][d];
      return true;
    }
    for (int j = 0; j < n; j++) pos[j] -= strides[j][d] * (shape[d] - 1);
    idx[d] = 0;
  }
  return false;
}

/* Strides of t broadcast to (ndim, shape): 0 where t is broadcast. */
void attn__broadcast_strides(const attn_tensor *t, int ndim, const int64_t *shape, int64_t *stride);

/* Checks an index tensor: integral values in [0, limit). */
attn_status attn__check_index(const char *fn, const attn_tensor *index, int64_t limit);

/* Runs fn over the common shape of nt tensors given as base pointers and
   (broadcast) strides: coalesces dims, then calls fn once per innermost
   row with n elements (attn__inner_fn: base/base.h), row pointers and the inner strides (long rows in
   pieces).  Polls the deadline every ATTN__POLL_WORK elements: false when
   it stopped there (the caller fails with attn__limit_error).  Jobs of
   2^18 elements or more run on the thread pool, in pieces of rows: fn may
   only read ctx, and must write nothing but its row of the outputs. */
bool attn__foreach(int ndim, const int64_t *shape, int nt, float *const *base, const int64_t (*strides)[ATTN_MAX_DIMS],
                   attn__inner_fn fn, void *ctx);

/* Whether the memory two tensors can reach overlaps (conservative). */
bool attn__may_overlap(const attn_tensor *a, const attn_tensor *b);
/* Whether writing through t would hit one element twice (stride-0 dims). */
bool attn__has_internal_overlap(const attn_tensor *t);
/* fill_ without autograd: the loop of attn_fill_ (tensor.c). */
attn_status attn__fill_raw(attn_tensor *t, float value);
attn_status attn__fill_raw_i64(attn_tensor *t, int64_t value);
attn_status attn__fill_raw_f64(attn_tensor *t, double value);
/* clone and copy_ without autograd (tensor.c): the graph (graph.c) and the
   recorders use these, views.c wraps them with the checks and records. */
attn_status attn__clone_raw(const attn_tensor *t, attn_tensor **out);
attn_status attn__copy_raw(attn_tensor *dst, const attn_tensor *src);
attn_status attn__copy_check(const attn_tensor *dst, const attn_tensor *src);

/* Process-wide live object counters behind attn_debug_counts_get. */
extern int64_t attn__live_tensors, attn__live_storages, attn__live_storage_bytes, attn__live_nodes;
#define ATTN__COUNT(var, delta) __atomic_add_fetch(&(var), (delta), __ATOMIC_RELAXED)

/* Memory made on behalf of a state counts against its budget (the
   thread's current one, if any) before it is made.  attn__reserve charges
   bytes to it and returns the budget, retained, to pass to
   attn__unreserve later (from any thread); on refusal it returns NULL
   with *over set.  With no current budget both are free no-ops. */
attn_budget *attn__reserve(int64_t bytes, bool *over);
void attn__unreserve(attn_budget *b, int64_t bytes);
/* Scratch for the length of one call, counted like storage: pairs with
   attn__scratch_free (same size), NULL on refusal or failure. */
void *attn__scratch_alloc(size_t bytes);
void attn__scratch_free(void *p, size_t bytes);
/* The error for a failed allocation of bytes in fn: "not enough memory:
   fn needs N MB, cap M MB" when the budget refused it. */
attn_status attn__nomem(const char *fn, int64_t bytes);
/* The same when the budget is known to have refused; what (or NULL) says
   for what, e.g. a shape. */
attn_status attn__budget_refused(const char *fn, int64_t bytes, const char *what);

/* Copies src (any strides) into dst's contiguous buffer; false when the
   deadline stopped it (attn__cancelled). */
bool attn__gather_contiguous(const attn_tensor *src, void *dst);
bool attn__gather_contiguous_any(const attn_tensor *src, void *dst);

/* tensor.c frees a tensor's autograd record through its release pointer
   (without calling up into graph.c), so the record's layout is here; the
   autograd room (autograd/autograd.h) fills and reads it. */
typedef struct attn_node attn_node;
struct attn_autograd {
  bool requires_grad;
  bool retains_grad;
  attn_tensor *grad;
  attn_node *grad_fn;     /* strong; NULL for leaves */
  attn_node *accumulator; /* leaf's AccumulateGrad (weak) */
  attn_grad_hook_fn hook; /* attn_set_grad_hook (ctx not owned) */
  void *hook_ctx;
  /* frees this record (graph.c's attn__autograd_release): tensor.c calls it
     when the tensor's last reference goes, without calling up into graph.c */
  void (*release)(attn_tensor *t);
};

static inline void attn__bump_version(attn_tensor *t) { __atomic_add_fetch(&t->storage->version, 1, __ATOMIC_RELAXED); }

#endif
