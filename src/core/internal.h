/* SPDX-License-Identifier: MIT */
/* Helpers shared by the core's translation units; not installed. */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

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
/* A fresh tensor struct pointing at storage s (retained), refcount 1. */
attn_tensor *attn__tensor_new(attn_storage *s, int64_t offset, int ndim, const int64_t *shape, const int64_t *stride);
/* A view of t with new geometry (shares t's storage). */
attn_status attn__make_view(const attn_tensor *t, int64_t offset, int ndim, const int64_t *shape, const int64_t *stride,
                            attn_tensor **out);
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

/* Strides of t broadcast to (ndim, shape): 0 where t is broadcast. */
void attn__broadcast_strides(const attn_tensor *t, int ndim, const int64_t *shape, int64_t *stride);

/* Checks an index tensor: integral values in [0, limit). */
attn_status attn__check_index(const char *fn, const attn_tensor *index, int64_t limit);

/* Runs fn over the common shape of nt tensors given as base pointers and
   (broadcast) strides: coalesces dims, then calls fn once per innermost
   row with n elements, row pointers and the inner strides (long rows in
   pieces).  Polls the deadline every ATTN__POLL_WORK elements: false when
   it stopped there (the caller fails with attn__limit_error).  Jobs of
   2^18 elements or more run on the thread pool, in pieces of rows: fn may
   only read ctx, and must write nothing but its row of the outputs. */
typedef void (*attn__inner_fn)(int64_t n, float **p, const int64_t *s, void *ctx);
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

/* The float32 elementwise kernels as such: comparisons give float 0/1
   (backward formulas multiply by them).  Inputs must be float32. */
attn_status attn__binary_raw(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
attn_status attn__binary_scalar_raw(attn_binary_op op, const attn_tensor *a, float s, bool reversed, attn_tensor **out);

/* Naive reference kernels kept beside the optimised ones for the tests. */
attn_status attn__matmul_reference(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);

/* A tensor split around one dim for kernels that work along it (reductions,
   softmax, cumsum).  The other dims, coalesced together with the matching
   strides of a contiguous output, form an outer odometer over dims
   0..nd-2 and an innermost run of m "columns" (input stride vs, output
   stride vos); the split dim has n elements (input stride in_stride,
   output stride out_stride).  A 0-d tensor split at dim 0 is one element. */
typedef struct attn__dimsplit {
  int nd;
  int64_t shape[ATTN_MAX_DIMS];
  int64_t strides[2][ATTN_MAX_DIMS]; /* [0] input, [1] output */
  int64_t outer;                     /* product of shape[0..nd-2] */
  int64_t m, vs, vos;                /* innermost: shape[nd-1] and its strides */
  int64_t n, in_stride, out_stride;  /* the split dim */
} attn__dimsplit;
/* ostride: the output's strides for each of t's dims (ignored at dim). */
void attn__dimsplit_init(attn__dimsplit *s, const attn_tensor *t, int dim, const int64_t *ostride);
/* Advances the outer odometer idx (nd-1 entries) and the two offsets. */
static inline void attn__dimsplit_next(const attn__dimsplit *s, int64_t *idx, int64_t *ip, int64_t *op) {
  for (int d = s->nd - 2; d >= 0; d--) {
    if (++idx[d] < s->shape[d]) {
      *ip += s->strides[0][d];
      *op += s->strides[1][d];
      return;
    }
    *ip -= s->strides[0][d] * (s->shape[d] - 1);
    *op -= s->strides[1][d] * (s->shape[d] - 1);
    idx[d] = 0;
  }
}

/* Process-wide live object counters behind attn_debug_counts_get. */
extern int64_t attn__live_tensors, attn__live_storages, attn__live_storage_bytes, attn__live_nodes;
#define ATTN__COUNT(var, delta) __atomic_add_fetch(&(var), (delta), __ATOMIC_RELAXED)

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

#define ATTN_SHAPE(t, buf) attn_shape_str((t)->ndim, (t)->shape, (buf), sizeof(buf))

/* ------------------------------------------------------------------------ */
/* Autograd internals (graph.c: records and nodes; autograd.c: the engine)  */

typedef struct attn_node attn_node;
/* Computes the gradients of a node's inputs from the gradient of its output.
   grads[i] is only wanted when node->next[i].node is non-NULL; leave the
   others NULL.  Runs with gradient mode off. */
typedef attn_status (*attn__backward_fn)(attn_node *node, const attn_tensor *grad, attn_tensor **grads);

/* 7: the fused attention backward keeps q, k, v, out, lse, the mask and the
   forward's scores (short key sequences). */
#define ATTN_NODE_SAVED 7
#define ATTN_NODE_IARGS (2 * ATTN_MAX_DIMS + 4)

typedef struct attn__edge {
  attn_node *node; /* NULL: this input needs no gradient */
  int ndim;        /* the input's shape, for broadcasting */
  int64_t shape[ATTN_MAX_DIMS];
  attn_tensor *into; /* engine scratch, set while the node's backward runs: attn__grad_into */
} attn__edge;

struct attn_node {
  long refcount;
  const char *name;           /* "MmBackward0", ... */
  attn__backward_fn backward; /* NULL: look formula up (grad_*.c) */
  int formula;                /* attn__formula, when backward is NULL */
  bool is_view;               /* output shares its input's storage */
  bool released;              /* saved state freed after backward */
  int n_next;
  attn__edge *next;
  attn_tensor *saved[ATTN_NODE_SAVED]; /* detached aliases */
  long saved_version[ATTN_NODE_SAVED];
  int64_t iargs[ATTN_NODE_IARGS]; /* op parameters */
  double fargs[4];
  void *extra;                /* op data owned by the node, freed with free() */
  void (*extra_free)(void *); /* frees extra instead of free() when set */
  attn_tensor *leaf;          /* AccumulateGrad: the leaf (strong) */
  attn_tensor *retained;      /* non-leaf output that retains grad (weak) */
  /* engine scratch */
  unsigned long epoch;
  int deps;
  attn_tensor *grad_acc;
  bool grad_added;     /* a formula wrote this leaf's gradient into its .grad (attn__grad_give) */
  attn_budget *budget; /* charged for the node and its edges */
};

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

/* Whether an op over these inputs must be recorded. */
bool attn__ag_needed(int n, const attn_tensor *const *inputs);
/* Records out = op(inputs): a node named name with backward fn, edges to
   the inputs that require grad, and nsave saved inputs (detached aliases,
   version-checked).  On success out requires grad and *node (optional)
   points at the node for setting iargs/fargs/extra.  On failure out is
   untouched and the caller releases it. */
attn_status attn__ag_record(attn_tensor *out, const char *name, attn__backward_fn fn, int n,
                            const attn_tensor *const *inputs, int nsave, const attn_tensor *const *saved,
                            attn_node **node);
/* Backward formulas kept apart from their forward op, in grad_*.c (which
   call the ops, so the ops must not name them): a recorder (record.c)
   stores the id, the engine (autograd.c) looks the function up in the
   tables below.  Ops whose backward lives beside the forward (linalg,
   scatter, sort, embedding, sdpa, custom) pass the function itself. */
typedef enum attn__formula {
  ATTN__F_NONE,
  /* grad_elementwise.c */
  ATTN__F_BINARY,
  ATTN__F_BINARY_SCALAR,
  ATTN__F_ADD_SCALED,
  ATTN__F_UNARY,
  ATTN__F_CLAMP,
  ATTN__F_WHERE,
  ATTN__F_MASKED_FILL,
  /* grad_views.c */
  ATTN__F_VIEW,
  /* grad_reduce.c */
  ATTN__F_SUM,
  ATTN__F_PROD,
  ATTN__F_EXTREME,
  ATTN__F_VAR,
  ATTN__F_STD,
  ATTN__F_NORM,
  ATTN__F_LOGSUMEXP,
  ATTN__F_MAX_DIM,
  ATTN__F_CUMSUM,
  ATTN__F_SOFTMAX,
  /* grad_shape.c */
  ATTN__F_TRIANGLE,
  ATTN__F_CAT,
  ATTN__F_STACK,
  ATTN__F_INDEX_SELECT,
  ATTN__F_GATHER,
  ATTN__F_REPEAT,
  ATTN__F_FLIP,
  ATTN__F_COUNT
} attn__formula;
/* Each grad_*.c file's formulas by id (NULL where another file has it). */
extern const attn__backward_fn attn__formulas_elementwise[ATTN__F_COUNT];
extern const attn__backward_fn attn__formulas_views[ATTN__F_COUNT];
extern const attn__backward_fn attn__formulas_reduce[ATTN__F_COUNT];
extern const attn__backward_fn attn__formulas_shape[ATTN__F_COUNT];
/* attn__ag_record with the backward named by formula id. */
attn_status attn__ag_record_formula(attn_tensor *out, const char *name, attn__formula f, int n,
                                    const attn_tensor *const *inputs, int nsave, const attn_tensor *const *saved,
                                    attn_node **node);
/* Sum of grad over the dims that broadcasting added or expanded so that it
   has the given shape (returns a retained grad when nothing to do; reduce.c). */
attn_status attn__sum_to_shape(const attn_tensor *grad, int ndim, const int64_t *shape, attn_tensor **out);
/* In-place ops under autograd: whether target or any other input takes
   part in a graph, so the op must go through attn__ag_inplace_commit. */
bool attn__ag_inplace_needed(const attn_tensor *target, int n, const attn_tensor *const *others);
/* Refuses in-place writes autograd cannot follow (leaf that requires grad,
   views); call before computing result. */
attn_status attn__ag_inplace_check(const char *fn, const attn_tensor *target);
/* Finishes an in-place op computed out of place: copies result into
   target, moves result's history onto target, releases result. */
attn_status attn__ag_inplace_commit(attn_tensor *target, attn_tensor *result);
/* Recorders called by the ops after computing o (no-ops unless needed;
   record.c). */
attn_status attn__record_binary(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor *o);
attn_status attn__record_binary_scalar(attn_binary_op op, const attn_tensor *a, float s, bool reversed, attn_tensor *o);
attn_status attn__record_add_scaled(const attn_tensor *a, const attn_tensor *b, float alpha, attn_tensor *o);
attn_status attn__record_unary(attn_unary_op op, const attn_tensor *a, attn_tensor *o);
attn_status attn__record_clamp(const attn_tensor *a, float lo, float hi, attn_tensor *o);
attn_status attn__record_where(const attn_tensor *cond, const attn_tensor *a, const attn_tensor *b, attn_tensor *o);
attn_status attn__record_masked_fill(const attn_tensor *t, const attn_tensor *mask, attn_tensor *o);

typedef enum attn__view_kind {
  ATTN__VIEW_RESHAPE,
  ATTN__VIEW_TRANSPOSE,
  ATTN__VIEW_PERMUTE,
  ATTN__VIEW_EXPAND,
  ATTN__VIEW_IDENTITY,
  ATTN__VIEW_SLICE,
  ATTN__VIEW_SELECT
} attn__view_kind;
/* Records a view (or clone, kind IDENTITY) o of t with its parameters. */
attn_status attn__record_view(const attn_tensor *t, attn_tensor *o, const char *name, attn__view_kind kind, int niargs,
                              const int64_t *iargs);

/* Reductions, cumsum, softmax (grad_reduce.c).  dim < 0: over every
   element.  max_dim saves a private copy of indices. */
attn_status attn__record_reduce(attn_reduce_op op, const attn_tensor *t, int dim, bool keepdim,
                                const attn_reduce_opts *opts, attn_tensor *o);
attn_status attn__record_max_dim(const attn_tensor *t, int dim, bool keepdim, bool is_min, const attn_tensor *indices,
                                 attn_tensor *values);
attn_status attn__record_cumsum(const attn_tensor *t, int dim, attn_tensor *o);
attn_status attn__record_softmax(const attn_tensor *t, int dim, bool log_space, attn_tensor *o);
/* Shape ops (grad_shape.c). */
attn_status attn__record_triangle(const attn_tensor *t, int64_t k, bool lower, attn_tensor *o);
attn_status attn__record_cat(int n, const attn_tensor *const *ts, int dim, attn_tensor *o);
attn_status attn__record_stack(int n, const attn_tensor *const *ts, int dim, attn_tensor *o);
attn_status attn__record_index_select(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor *o);
attn_status attn__record_gather(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor *o);
attn_status attn__record_repeat(const attn_tensor *t, int nreps, const int64_t *reps, attn_tensor *o);
attn_status attn__record_flip(const attn_tensor *t, int ndims, const int *dims, attn_tensor *o);

/* sort.c's reference twin (insertion sort) for the tests: sorts v, idx
   gets the 0-based source positions. */
void attn__sort_pairs_reference(float *v, int64_t *idx, int64_t n, bool descending);

/* Frees t's autograd record (called when t's last reference goes, through
   the record's release pointer). */
void attn__autograd_release(attn_tensor *t);
/* graph.c's node helpers for the engine (autograd.c). */
struct attn_autograd *attn__ag_get(attn_tensor *t);
void attn__node_release(attn_node *n);
void attn__node_free_saved(attn_node *n);
attn_node *attn__edge_target(attn_tensor *t);
static inline void attn__bump_version(attn_tensor *t) { __atomic_add_fetch(&t->storage->version, 1, __ATOMIC_RELAXED); }

/* Backward formulas may add input i's gradient straight into the tensor
   attn__grad_into(node, i) returns instead of allocating it: a leaf's
   existing .grad (float32, contiguous, input i's shape, sharing no storage
   with g or the saved tensors) when this node gives that leaf its only
   gradient of this backward pass, or the sum of the gradients a non-leaf
   input got so far (when the engine alone holds it), NULL otherwise, and
   NULL for two inputs that are one node.  One pass of the leaf's
   size and one allocation fewer than a new gradient that the engine then
   adds; the same bits, as long as the formula computes each element as
   into + gradient, one rounding after the gradient's own.  The exception
   is linear's and matmul's products that go to sgemm: beta = 1 adds each
   of sgemm's blocks of the reduction into .grad in turn (the same bits
   while the batch rows fit one block, else the same sum in another
   order), and saves sgemm's pass that zeroes its output.  Formulas get
   the tensor to write with attn__grad_out (the .grad, or a new tensor of
   the input's shape) and hand it over with attn__grad_give. */
static inline attn_tensor *attn__grad_into(const attn_node *node, int i) { return node->next[i].into; }
static inline attn_status attn__grad_out(const attn_node *node, int i, const char *fn, attn_tensor **out) {
  attn_tensor *into = node->next[i].into;
  if (!into) return attn__alloc(fn, node->next[i].ndim, node->next[i].shape, out);
  *out = attn_tensor_retain(into);
  return ATTN_OK;
}
/* grads[i] = r, the formula's reference to attn__grad_out's tensor.  When
   that is the leaf's .grad (the engine then sums nothing), its version is
   bumped; so it is when ok is false (part of it may be written), and r is
   dropped. */
static inline void attn__grad_give(attn_node *node, int i, attn_tensor *r, bool ok, attn_tensor **grads) {
  if (r == node->next[i].into) attn__bump_version(r);
  if (ok)
    grads[i] = r;
  else
    attn_tensor_release(r);
}

/* ------------------------------------------------------------------------ */
/* Threads and attention internals (parallel.c, sdpa.c, sdpa_math.c)        */

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
/* The composed math path of attn_sdpa (sdpa_math.c; recorded core ops:
   matmul, mask, softmax, matmul, optional dropout); weights may be NULL.
   attn_sdpa takes it where the fused kernel does not apply; the tests
   compare the fused kernel with it. */
attn_status attn__sdpa_math(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                            const attn_sdpa_opts *opts, attn_tensor **out, attn_tensor **weights);
/* The fused kernel alone (no fallback to the math path; no dropout, no
   weights); records its own backward.  For the tests. */
attn_status attn__sdpa_fused(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                             const attn_sdpa_opts *opts, attn_tensor **out);
/* Debug counter of the bytes the fused kernel allocates besides its
   results (tiles, log-sum-exp, row dots): the peak of what was live at
   once since the last reset. */
/* Adds bytes (negative: frees) to the SDPA scratch counter (sdpa_scratch.c). */
void attn__sdpa_mem_add(int64_t bytes);
void attn__sdpa_mem_reset(void);
int64_t attn__sdpa_mem_peak(void);
/* The most bytes of scores the fused attention's forward keeps for its
   backward (sdpa.c keep_scores; 0: always recompute them).  Tests only. */
extern int64_t attn__sdpa_keep_scores_max;

/* The hot kernels exist once per instruction set: kernels.h. */

#endif
