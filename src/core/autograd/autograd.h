/* SPDX-License-Identifier: MIT */
/* The recording side of autograd (1.3, src/core/autograd/): nodes and
 * records (graph.c), the recorders the ops call (record.c), and the
 * helpers backward formulas write their gradients with.  The engine and
 * the formulas by id are the backward room's (backward/backward.h).
 * Not installed. */
#ifndef ATTN_CORE_AUTOGRAD_H
#define ATTN_CORE_AUTOGRAD_H

#include "tensor/tensor.h"

/* Computes the gradients of a node's inputs from the gradient of its output.
   grads[i] is only wanted when node->next[i].node is non-NULL; leave the
   others NULL.  Runs with gradient mode off. */
typedef attn_status (*attn__backward_fn)(attn_node *node, const attn_tensor *grad, attn_tensor **grads);

/* Every node names its backward by formula id.  The backward room holds
   the one table from id to function (attn__formulas, backward/formulas.c,
   checked complete when it compiles); the engine runs
   attn__formulas[node->formula].  The functions live in the backward
   room's grad_*.c files (formulas written with the ops, so the ops must
   not name them) or beside their forward op, exported as
   attn__<op>_backward through that room's door header. */
typedef enum attn__formula {
  ATTN__F_NONE, /* AccumulateGrad: a leaf's node runs no formula */
  /* backward/grad_elementwise.c */
  ATTN__F_BINARY,
  ATTN__F_BINARY_SCALAR,
  ATTN__F_ADD_SCALED,
  ATTN__F_UNARY,
  ATTN__F_CLAMP,
  ATTN__F_WHERE,
  ATTN__F_MASKED_FILL,
  /* backward/grad_views.c */
  ATTN__F_VIEW,
  /* backward/grad_reduce.c */
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
  /* backward/grad_shape.c */
  ATTN__F_TRIANGLE,
  ATTN__F_CAT,
  ATTN__F_STACK,
  ATTN__F_INDEX_SELECT,
  ATTN__F_GATHER,
  ATTN__F_REPEAT,
  ATTN__F_FLIP,
  /* ops/linalg.c */
  ATTN__F_MATMUL,
  ATTN__F_DOT,
  ATTN__F_OUTER,
  ATTN__F_LINEAR,
  /* ops/sort.c */
  ATTN__F_SORT,
  /* ops/scatter.c */
  ATTN__F_SCATTER,
  ATTN__F_INDEX_OP, /* index_add, index_copy, index_fill */
  ATTN__F_MASKED_SELECT,
  /* ops/norm.c, ops/embedding.c */
  ATTN__F_LAYER_NORM,
  ATTN__F_EMBEDDING,
  /* attention/sdpa.c: the fused kernel */
  ATTN__F_SDPA,
  /* autograd/graph.c: attn_custom_record's nodes (the caller's function) */
  ATTN__F_CUSTOM,
  ATTN__F_COUNT
} attn__formula;

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
  const char *name;      /* "MmBackward0", ... */
  attn__formula formula; /* its backward: attn__formulas[formula] */
  bool is_view;          /* output shares its input's storage */
  bool released;         /* saved state freed after backward */
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

/* Whether an op over these inputs must be recorded. */
bool attn__ag_needed(int n, const attn_tensor *const *inputs);
/* Records out = op(inputs): a node named name whose backward is formula
   f, edges to the inputs that require grad, and nsave saved inputs
   (detached aliases, version-checked).  On success out requires grad and
   *node (optional) points at the node for setting iargs/fargs/extra.  On
   failure out is untouched and the caller releases it. */
attn_status attn__ag_record(attn_tensor *out, const char *name, attn__formula f, int n,
                            const attn_tensor *const *inputs, int nsave, const attn_tensor *const *saved,
                            attn_node **node);
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

/* Frees t's autograd record (called when t's last reference goes, through
   the record's release pointer). */
void attn__autograd_release(attn_tensor *t);
/* graph.c's node helpers for the engine (autograd.c). */
struct attn_autograd *attn__ag_get(attn_tensor *t);
void attn__node_release(attn_node *n);
void attn__node_free_saved(attn_node *n);
attn_node *attn__edge_target(attn_tensor *t);
/* ATTN__F_CUSTOM: an attn_custom_record node's backward, which runs the
   caller's function kept in node->extra. */
attn_status attn__custom_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);

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

#endif
