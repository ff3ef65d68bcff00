/* SPDX-License-Identifier: MIT */
/* The recorders: what a forward op calls after computing its result to
 * put a node for it into the graph (no-ops unless some input requires
 * grad).  Each names its backward by formula id (internal.h), not by
 * function: the formulas (grad_*.c) call the ops, so the ops must not name
 * them.  Recorders sit on the graph floor with graph.c, below the ops; they
 * decide what a node saves and which parameters it keeps.
 */
#include "autograd/autograd.h"

/* ------------------------------------------------------------------------ */
/* Recorders of the formulas in grad_elementwise.c */

/* torch's node names and what each backward reads, from the op table
   (attn_ops.h); comparisons (kind COMPARE, node NONE) are not
   differentiable. */
#define NODE_OF_(ID, NAME, SIG, KIND, INTS, LO, HI, NODE, ...) #NODE,
#define KIND_OF_(ID, NAME, SIG, KIND, ...) ATTN_OP_KIND_##KIND,
static const char *binary_node_names[ATTN_BINARY_OP_COUNT] = {ATTN_BINARY_OPS(NODE_OF_)};
static const unsigned char binary_kinds[ATTN_BINARY_OP_COUNT] = {ATTN_BINARY_OPS(KIND_OF_)};
#undef NODE_OF_
#undef KIND_OF_

/* a table lookup, not a string compare: it runs on every recorded op */
static bool binary_differentiable(attn_binary_op op) { return binary_kinds[op] == ATTN_OP_KIND_ARITH; }

attn_status attn__record_binary(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor *o) {
  const attn_tensor *in[2] = {a, b};
  if (!binary_differentiable(op) || !attn__ag_needed(2, in)) return ATTN_OK;
  const attn_tensor *saved[3] = {NULL, NULL, NULL};
  if (op != ATTN_ADD && op != ATTN_SUB) {
    saved[0] = a;
    saved[1] = b;
  }
  if (op == ATTN_POW) saved[2] = o;
  attn_node *n;
  attn_status st = attn__ag_record(o, binary_node_names[op], ATTN__F_BINARY, 2, in, 3, saved, &n);
  if (st == ATTN_OK) n->iargs[0] = op;
  return st;
}

attn_status attn__record_binary_scalar(attn_binary_op op, const attn_tensor *a, float s, bool reversed,
                                       attn_tensor *o) {
  if (!binary_differentiable(op) || !attn__ag_needed(1, &a)) return ATTN_OK;
  /* save the input only where the formula reads it (like torch), so that
     x + 1 or 2 * x can be walked again after their backward */
  bool need_a = (op == ATTN_DIV && reversed) || (op == ATTN_POW && !reversed) || op == ATTN_MAXIMUM ||
                op == ATTN_MINIMUM || op == ATTN_ATAN2 || (op == ATTN_FMOD && reversed);
  const attn_tensor *saved[2] = {need_a ? a : NULL, op == ATTN_POW && reversed ? o : NULL};
  /* torch's names for the scalar overloads: t ^ s, fmod(t, s), s - t */
  const char *name = binary_node_names[op];
  if (op == ATTN_POW && !reversed) name = "PowBackward0";
  if (op == ATTN_FMOD && !reversed) name = "FmodBackward0";
  if (op == ATTN_SUB && reversed) name = "RsubBackward1";
  attn_node *n;
  attn_status st = attn__ag_record(o, name, ATTN__F_BINARY_SCALAR, 1, &a, 2, saved, &n);
  if (st == ATTN_OK) {
    n->iargs[0] = op;
    n->iargs[1] = reversed;
    n->fargs[0] = s;
  }
  return st;
}

attn_status attn__record_add_scaled(const attn_tensor *a, const attn_tensor *b, float alpha, attn_tensor *o) {
  const attn_tensor *in[2] = {a, b};
  if (!attn__ag_needed(2, in)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, "AddBackward0", ATTN__F_ADD_SCALED, 2, in, 0, NULL, &n);
  if (st == ATTN_OK) n->fargs[0] = alpha;
  return st;
}

#define READS_OF_(ID, NAME, SIG, READS, ...) ATTN_OP_READS_##READS,
#define NODE_OF_(ID, NAME, SIG, READS, INTS, LO, HI, NODE, ...) #NODE,
static const unsigned char unary_reads[ATTN_UNARY_OP_COUNT] = {ATTN_UNARY_OPS(READS_OF_)};
static const char *unary_node_names[ATTN_UNARY_OP_COUNT] = {ATTN_UNARY_OPS(NODE_OF_)};
#undef READS_OF_
#undef NODE_OF_

/* Which of input x and output y each derivative reads. */
static bool unary_needs_x(attn_unary_op op) { return unary_reads[op] == ATTN_OP_READS_IN; }
static bool unary_needs_y(attn_unary_op op) { return unary_reads[op] == ATTN_OP_READS_OUT; }

attn_status attn__record_unary(attn_unary_op op, const attn_tensor *a, attn_tensor *o) {
  if (!attn__ag_needed(1, &a)) return ATTN_OK;
  const attn_tensor *saved[2] = {unary_needs_x(op) ? a : NULL, unary_needs_y(op) ? o : NULL};
  attn_node *n;
  attn_status st = attn__ag_record(o, unary_node_names[op], ATTN__F_UNARY, 1, &a, 2, saved, &n);
  if (st == ATTN_OK) n->iargs[0] = op;
  return st;
}

attn_status attn__record_clamp(const attn_tensor *a, float lo, float hi, attn_tensor *o) {
  if (!attn__ag_needed(1, &a)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, "ClampBackward1", ATTN__F_CLAMP, 1, &a, 1, &a, &n);
  if (st == ATTN_OK) {
    n->fargs[0] = lo;
    n->fargs[1] = hi;
  }
  return st;
}

attn_status attn__record_where(const attn_tensor *cond, const attn_tensor *a, const attn_tensor *b, attn_tensor *o) {
  const attn_tensor *in[2] = {a, b};
  if (!attn__ag_needed(2, in)) return ATTN_OK;
  return attn__ag_record(o, "WhereBackward0", ATTN__F_WHERE, 2, in, 1, &cond, NULL);
}

attn_status attn__record_masked_fill(const attn_tensor *t, const attn_tensor *mask, attn_tensor *o) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  return attn__ag_record(o, "MaskedFillBackward0", ATTN__F_MASKED_FILL, 1, &t, 1, &mask, NULL);
}

/* ------------------------------------------------------------------------ */
/* Recorders of the formulas in grad_views.c */

attn_status attn__record_view(const attn_tensor *t, attn_tensor *o, const char *name, attn__view_kind kind, int niargs,
                              const int64_t *iargs) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, name, ATTN__F_VIEW, 1, &t, 0, NULL, &n);
  if (st) return st;
  n->is_view = kind != ATTN__VIEW_IDENTITY;
  n->iargs[0] = kind;
  for (int i = 0; i < niargs && i + 1 < ATTN_NODE_IARGS; i++) n->iargs[1 + i] = iargs[i];
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Recorders of the formulas in grad_reduce.c */

static bool reduce_differentiable(attn_reduce_op op) {
  return op != ATTN_ARGMAX && op != ATTN_ARGMIN && op != ATTN_ALL && op != ATTN_ANY && (int)op >= 0 &&
         op < ATTN_REDUCE_OP_COUNT;
}

attn_status attn__record_reduce(attn_reduce_op op, const attn_tensor *t, int dim, bool keepdim,
                                const attn_reduce_opts *opts, attn_tensor *o) {
  if (!reduce_differentiable(op) || !attn__ag_needed(1, &t)) return ATTN_OK;
  bool all = dim < 0;
  const char *name = NULL;
  attn__formula fn = ATTN__F_NONE;
  const attn_tensor *saved[2] = {NULL, NULL};
  switch (op) {
  case ATTN_SUM:
    name = all ? "SumBackward0" : "SumBackward1";
    fn = ATTN__F_SUM;
    break;
  case ATTN_MEAN:
    name = all ? "MeanBackward0" : "MeanBackward1";
    fn = ATTN__F_SUM;
    break;
  case ATTN_PROD:
    name = all ? "ProdBackward0" : "ProdBackward1";
    fn = ATTN__F_PROD;
    break;
  case ATTN_MAX:
    name = all ? "MaxBackward1" : "AmaxBackward0";
    fn = ATTN__F_EXTREME;
    break;
  case ATTN_MIN:
    name = all ? "MinBackward1" : "AminBackward0";
    fn = ATTN__F_EXTREME;
    break;
  case ATTN_VAR:
    name = "VarBackward0";
    fn = ATTN__F_VAR;
    break;
  case ATTN_STD:
    name = "StdBackward0";
    fn = ATTN__F_STD;
    break;
  case ATTN_NORM:
    name = "NormBackward1";
    fn = ATTN__F_NORM;
    break;
  case ATTN_LOGSUMEXP:
    name = "LogsumexpBackward0";
    fn = ATTN__F_LOGSUMEXP;
    break;
  default: return ATTN_OK;
  }
  if (op != ATTN_SUM && op != ATTN_MEAN) {
    saved[0] = t;
    if (op != ATTN_VAR) saved[1] = o;
  }
  attn_node *n;
  attn_status st = attn__ag_record(o, name, fn, 1, &t, 2, saved, &n);
  if (st) return st;
  n->iargs[0] = op;
  n->iargs[1] = all ? -1 : dim;
  n->iargs[2] = keepdim;
  n->fargs[0] = opts ? opts->correction : 1.0;
  n->fargs[1] = opts ? opts->p : 2.0;
  return ATTN_OK;
}

attn_status attn__record_max_dim(const attn_tensor *t, int dim, bool keepdim, bool is_min, const attn_tensor *indices,
                                 attn_tensor *values) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_tensor *idx;
  attn_status st = attn__clone_raw(indices, &idx);
  if (st) return st;
  const attn_tensor *saved[1] = {idx};
  attn_node *n;
  st = attn__ag_record(values, is_min ? "MinBackward0" : "MaxBackward0", ATTN__F_MAX_DIM, 1, &t, 1, saved, &n);
  attn_tensor_release(idx); /* the node keeps an alias */
  if (st) return st;
  n->iargs[0] = is_min ? ATTN_MIN : ATTN_MAX;
  n->iargs[1] = dim;
  n->iargs[2] = keepdim;
  return ATTN_OK;
}

attn_status attn__record_cumsum(const attn_tensor *t, int dim, attn_tensor *o) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, "CumsumBackward0", ATTN__F_CUMSUM, 1, &t, 0, NULL, &n);
  if (st == ATTN_OK) n->iargs[1] = dim;
  return st;
}

attn_status attn__record_softmax(const attn_tensor *t, int dim, bool log_space, attn_tensor *o) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_node *n;
  const attn_tensor *saved[1] = {o};
  attn_status st =
      attn__ag_record(o, log_space ? "LogSoftmaxBackward0" : "SoftmaxBackward0", ATTN__F_SOFTMAX, 1, &t, 1, saved, &n);
  if (st) return st;
  n->iargs[0] = log_space;
  n->iargs[1] = dim;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Recorders of the formulas in grad_shape.c */

attn_status attn__record_triangle(const attn_tensor *t, int64_t k, bool lower, attn_tensor *o) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, lower ? "TrilBackward0" : "TriuBackward0", ATTN__F_TRIANGLE, 1, &t, 0, NULL, &n);
  if (st) return st;
  n->iargs[0] = k;
  n->iargs[1] = lower;
  return ATTN_OK;
}

attn_status attn__record_cat(int n, const attn_tensor *const *ts, int dim, attn_tensor *o) {
  if (!attn__ag_needed(n, ts)) return ATTN_OK;
  attn_node *node;
  attn_status st = attn__ag_record(o, "CatBackward0", ATTN__F_CAT, n, ts, 0, NULL, &node);
  if (st == ATTN_OK) node->iargs[0] = dim;
  return st;
}

attn_status attn__record_stack(int n, const attn_tensor *const *ts, int dim, attn_tensor *o) {
  if (!attn__ag_needed(n, ts)) return ATTN_OK;
  attn_node *node;
  attn_status st = attn__ag_record(o, "StackBackward0", ATTN__F_STACK, n, ts, 0, NULL, &node);
  if (st == ATTN_OK) node->iargs[0] = dim;
  return st;
}

attn_status attn__record_index_select(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor *o) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, "IndexSelectBackward0", ATTN__F_INDEX_SELECT, 1, &t, 1, &index, &n);
  if (st == ATTN_OK) n->iargs[0] = dim;
  return st;
}

attn_status attn__record_gather(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor *o) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, "GatherBackward0", ATTN__F_GATHER, 1, &t, 1, &index, &n);
  if (st == ATTN_OK) n->iargs[0] = dim;
  return st;
}

attn_status attn__record_repeat(const attn_tensor *t, int nreps, const int64_t *reps, attn_tensor *o) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, "RepeatBackward0", ATTN__F_REPEAT, 1, &t, 0, NULL, &n);
  if (st) return st;
  n->iargs[0] = nreps;
  for (int d = 0; d < nreps; d++) n->iargs[1 + d] = reps[d];
  return ATTN_OK;
}

attn_status attn__record_flip(const attn_tensor *t, int ndims, const int *dims, attn_tensor *o) {
  if (!attn__ag_needed(1, &t)) return ATTN_OK;
  attn_node *n;
  attn_status st = attn__ag_record(o, "FlipBackward0", ATTN__F_FLIP, 1, &t, 0, NULL, &n);
  if (st) return st;
  n->iargs[0] = ndims;
  for (int i = 0; i < ndims; i++) n->iargs[1 + i] = dims[i];
  return ATTN_OK;
}
