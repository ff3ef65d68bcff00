/* SPDX-License-Identifier: MIT */
/*
 * attn.h - the C core of attn: float32 N-d tensors with refcounted storage
 * and strided views, broadcasting math, reductions, matmul on OpenBLAS and a
 * PyTorch-compatible random number generator.
 *
 * Conventions
 *  - Every index and dim in this API is 0-based; dims must already be
 *    normalised (0 <= dim < ndim).  Negative dims and 1-based indices are a
 *    Lua-side convenience converted by the binding.
 *  - Functions that can fail return an attn_status.  On failure the output
 *    pointers are left untouched (NULL for fresh results), inputs are never
 *    half-modified, and attn_last_error() gives a message naming the
 *    function, the argument and the shapes, e.g.
 *    "matmul: cannot multiply [6,3] by [2,4]".  Nothing here aborts, exits
 *    or longjmps.
 *  - Ownership: a function that hands out an attn_tensor ** gives the caller
 *    one reference; release it with attn_tensor_release().  Inputs are
 *    borrowed for the duration of the call.
 *  - Dtypes (attn_dtype): float32 (the default of every creation function
 *    without a dtype argument), int64 and bool, as in torch.  Views keep
 *    their input's dtype; numel, offsets and strides count elements of the
 *    tensor's dtype.  Float kernels (matmul, softmax, the float math) take
 *    float32 only: elementwise math and reductions promote int64/bool
 *    inputs to float32 like torch, the others fail with "fn: expected a
 *    floating tensor, got int64".  Comparisons give bool.
 *  - Index tensors (gather, index_select, one_hot, embedding ids, ...) are
 *    int64 tensors of 0-based values; float32 tensors holding integral
 *    values are still accepted (exact up to 2^24).
 *  - Thread safety: distinct tensors may be used from distinct threads.
 *    Reference counts are atomic, so views of one storage may be released
 *    from several threads; writes to shared data need the caller's locking.
 */
#ifndef ATTN_H
#define ATTN_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "attn_version.h" /* ATTN_VERSION, generated from the VERSION file */
#include "attn_ops.h"     /* the op table: X-macro lists of the elementwise ops */

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_MAX_DIMS 8

typedef enum attn_status {
  ATTN_OK = 0,
  ATTN_ERR_ARG,    /* bad argument value (negative size, bad option...) */
  ATTN_ERR_SHAPE,  /* shapes do not fit together */
  ATTN_ERR_INDEX,  /* index out of range */
  ATTN_ERR_NOMEM,  /* allocation failed or size overflows */
  ATTN_ERR_IO,     /* file or library loading problem */
  ATTN_ERR_STATE,  /* operation not allowed in the object's state */
  ATTN_ERR_SCRIPT, /* a Lua script failed (attn_lua.h: syntax or run-time error) */
  ATTN_ERR_LIMIT   /* a time limit (attn_deadline_set_current) or a script's instruction or time
                      budget (attn_lua.h) ran out */
} attn_status;

/* Message of the last failure in the calling thread ("" if none). */
const char *attn_last_error(void);
/* Records a message (printf format) for the calling thread; returns st. */
attn_status attn_set_error(attn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Formats a shape as "[6,3]" into buf (always NUL-terminated). */
const char *attn_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* Storage and tensors                                                       */

/* Element types, as torch's float32, int64 and bool, and the storage
   dtypes float16, bfloat16 and float64 (uint16_t bits, uint16_t bits,
   double): they hold values (creation, conversion, copy_, views, data
   movement, printing, save/load) but attn computes in float32 only, so the
   compute ops refuse them with a message saying to convert with :float(). */
typedef enum attn_dtype {
  ATTN_FLOAT32 = 0, /* float */
  ATTN_INT64,       /* int64_t */
  ATTN_BOOL,        /* bool (one byte, 0 or 1) */
  ATTN_FLOAT16,     /* IEEE half, as uint16_t bits (storage only) */
  ATTN_BFLOAT16,    /* bfloat16, as uint16_t bits (storage only) */
  ATTN_FLOAT64,     /* double (storage only) */
  ATTN_DTYPE_COUNT
} attn_dtype;

/* "float32", "int64", "bool", "float16", "bfloat16", "float64" ("?" for a
   bad value). */
const char *attn_dtype_name(attn_dtype dt);
/* Bytes of one element. */
size_t attn_dtype_size(attn_dtype dt);
/* Parses "float32"/"float"/"int64"/"long"/"bool"/"float16"/"half"/
   "bfloat16"/"float64"/"double" (optionally prefixed "torch." or
   "attn."); false if unknown. */
bool attn_dtype_parse(const char *name, attn_dtype *out);
/* torch's result type of a binary op on a and b (torch.promote_types):
   float64 if either is float64; else float32 if either is float32 or they
   are float16 and bfloat16; else the floating one of them; else int64 if
   either is int64; else bool. */
attn_dtype attn_promote_types(attn_dtype a, attn_dtype b);
static inline bool attn_dtype_is_float(attn_dtype dt) { return dt == ATTN_FLOAT32; }
/* float16, bfloat16, float64: dtypes attn stores but does not compute in. */
static inline bool attn_dtype_is_storage(attn_dtype dt) {
  return dt == ATTN_FLOAT16 || dt == ATTN_BFLOAT16 || dt == ATTN_FLOAT64;
}
/* Scalar conversions rounding exactly as torch 1.13 (round to nearest even,
   subnormals, overflow to inf, NaN kept). */
uint16_t attn_f32_to_f16(float f);
float attn_f16_to_f32(uint16_t h);
uint16_t attn_f32_to_bf16(float f);
float attn_bf16_to_f32(uint16_t h);

/* Called when the last reference to a wrapped buffer goes away. */
typedef void (*attn_release_fn)(void *ctx, float *data);

typedef struct attn_storage {
  void *data;              /* elements of dtype */
  int64_t numel;           /* capacity in elements */
  attn_dtype dtype;        /* of the elements; views share it */
  long refcount;           /* atomic; use the functions below */
  attn_release_fn release; /* NULL: data was allocated by attn */
  void *release_ctx;
  int gc_reported;            /* set by a binding once it told its GC */
  long version;               /* bumped by every in-place write (autograd checks) */
  long saved_refs;            /* references held by autograd's saved tensors */
  struct attn_budget *budget; /* charged for data (see attn_budget), or NULL */
} attn_storage;

struct attn_autograd; /* defined by the autograd layer */

typedef struct attn_tensor {
  attn_storage *storage;
  int64_t offset; /* in elements */
  int ndim;       /* 0 .. ATTN_MAX_DIMS; 0 is a scalar */
  int64_t shape[ATTN_MAX_DIMS];
  int64_t stride[ATTN_MAX_DIMS];  /* in elements; 0 for broadcast dims */
  long refcount;                  /* atomic */
  struct attn_autograd *autograd; /* NULL unless gradients are tracked */
  struct attn_budget *budget;     /* charged for this header, or NULL */
  attn_dtype dtype;               /* the storage's dtype */
} attn_tensor;

/* The first element, untyped. */
static inline void *attn_tensor_ptr(const attn_tensor *t) {
  return (char *)t->storage->data + (size_t)t->offset * attn_dtype_size(t->dtype);
}
/* Typed first element: only for tensors of that dtype. */
static inline float *attn_tensor_data(const attn_tensor *t) { return (float *)attn_tensor_ptr(t); }
static inline int64_t *attn_tensor_i64(const attn_tensor *t) { return (int64_t *)attn_tensor_ptr(t); }
static inline bool *attn_tensor_bool(const attn_tensor *t) { return (bool *)attn_tensor_ptr(t); }
int64_t attn_tensor_numel(const attn_tensor *t);
bool attn_tensor_is_contiguous(const attn_tensor *t);
bool attn_same_shape(const attn_tensor *a, const attn_tensor *b);

attn_tensor *attn_tensor_retain(attn_tensor *t);
void attn_tensor_release(attn_tensor *t); /* NULL is fine */

/* Live object counts of the whole process (for leak tests and tools). */
typedef struct attn_debug_counts {
  int64_t tensors;       /* attn_tensor structs alive */
  int64_t storages;      /* storages alive */
  int64_t storage_bytes; /* bytes held by storages attn allocated */
  int64_t nodes;         /* autograd graph nodes alive */
} attn_debug_counts;
void attn_debug_counts_get(attn_debug_counts *out);

/* Memory budgets: a byte count with a limit that tensor storage can be
   charged to, so that a sandboxed script cannot take the host's memory
   (attn_lua.h charges a state's Lua objects to the same budget).  While a
   thread has a current budget, every storage attn allocates in that thread
   is charged its size before the allocation (refused with ATTN_ERR_NOMEM
   when the limit would be passed) and credited when the storage is freed,
   from whatever thread.  Wrapped buffers (attn_wrap) are never charged.
   A budget is refcounted: each charged storage holds a reference, so a
   budget outlives the state that made it while its tensors live. */
typedef struct attn_budget attn_budget;
/* limit in bytes (> 0); the caller gets one reference. */
attn_status attn_budget_new(int64_t limit, attn_budget **out);
attn_budget *attn_budget_retain(attn_budget *b);
void attn_budget_release(attn_budget *b); /* NULL is fine */
/* Adds bytes if the total stays within the limit; false (nothing added)
   otherwise.  Thread-safe. */
bool attn_budget_charge(attn_budget *b, int64_t bytes);
void attn_budget_credit(attn_budget *b, int64_t bytes);
int64_t attn_budget_used(const attn_budget *b);
int64_t attn_budget_limit(const attn_budget *b);
/* Sets the calling thread's current budget (NULL: none; not retained, so
   it must stay alive while current) and returns the previous one. */
attn_budget *attn_budget_set_current(attn_budget *b);
attn_budget *attn_budget_current(void);

/* Time limits: a per-thread deadline on the monotonic clock
   (attn_clock_now) that long kernels poll between blocks of work: a row
   block of a large GEMM, each matrix of a batched matmul, a tile of the
   fused attention, every ~64k elements of elementwise ops, reductions,
   softmax, copies and random fills.  A kernel that finds the deadline
   passed stops and fails with ATTN_ERR_LIMIT ("fn: time limit reached"):
   a new result is released, inputs are untouched; an in-place op may
   have updated part of its destination.  Kernels running on attn's pool
   use the submitting thread's deadline.  A polled kernel stops within a
   few milliseconds of the deadline plus one block (a GEMM row block is
   sized to ~2^28 multiply-adds).  attn_lua.h installs a state's time
   budget here while the state runs. */
double attn_clock_now(void); /* seconds, CLOCK_MONOTONIC */
/* Sets the calling thread's deadline (an attn_clock_now() time; 0: none)
   and returns the previous one. */
double attn_deadline_set_current(double when);
double attn_deadline_current(void);
/* Whether the calling thread's deadline is set and has passed. */
bool attn_deadline_passed(void);

/* Element access by a full 0-based index (no bounds check), any dtype
   (converted to and from float; the double/int64 forms are exact). */
float attn_tensor_get(const attn_tensor *t, const int64_t *index);
void attn_tensor_set(attn_tensor *t, const int64_t *index, float v);
/* Value of the flat element i in row-major order (works for any strides). */
float attn_tensor_get_flat(const attn_tensor *t, int64_t i);
double attn_tensor_get_flat_f64(const attn_tensor *t, int64_t i);
int64_t attn_tensor_get_flat_i64(const attn_tensor *t, int64_t i);
void attn_tensor_set_flat_f64(attn_tensor *t, int64_t i, double v);
void attn_tensor_set_flat_i64(attn_tensor *t, int64_t i, int64_t v);

/* Creation.  Every shape entry must be >= 0 and numel must fit. */
attn_status attn_empty(int ndim, const int64_t *shape, attn_tensor **out);
attn_status attn_zeros(int ndim, const int64_t *shape, attn_tensor **out);
attn_status attn_ones(int ndim, const int64_t *shape, attn_tensor **out);
attn_status attn_full(int ndim, const int64_t *shape, float value, attn_tensor **out);
attn_status attn_scalar(float value, attn_tensor **out); /* 0-d */
/* The same with a dtype (value converted: int64 truncates, bool is != 0;
   empty_dtype is zero-filled). */
attn_status attn_empty_dtype(attn_dtype dt, int ndim, const int64_t *shape, attn_tensor **out);
attn_status attn_full_dtype(attn_dtype dt, int ndim, const int64_t *shape, double value, attn_tensor **out);
attn_status attn_full_i64(int ndim, const int64_t *shape, int64_t value, attn_tensor **out);
attn_status attn_scalar_dtype(attn_dtype dt, double value, attn_tensor **out);
/* Copies numel int64 / bool values laid out row-major. */
attn_status attn_from_data_i64(int ndim, const int64_t *shape, const int64_t *data, attn_tensor **out);
attn_status attn_from_data_bool(int ndim, const int64_t *shape, const bool *data, attn_tensor **out);
/* t converted to dt (torch's .to(dtype)): retains t when it already has dt,
   else a fresh tensor (float -> int64 truncates toward zero, -> bool is
   != 0).  The result never requires grad unless it is t itself. */
attn_status attn_to_dtype(const attn_tensor *t, attn_dtype dt, attn_tensor **out);
/* ATTN_OK when t is float32, else ATTN_ERR_ARG "fn: expected a floating
   tensor, got int64" (what names the argument, may be NULL). */
attn_status attn_check_float(const char *fn, const char *what, const attn_tensor *t);
/* Fails, naming fn and the argument (what, or "argument argno" when what is
   NULL), when t has a storage dtype: "add: argument 1 is float16, a storage
   dtype (attn computes in float32): convert it with x:float()". */
attn_status attn_check_compute(const char *fn, int argno, const char *what, const attn_tensor *t);
/* Copies n floats laid out row-major into a fresh tensor of the shape. */
attn_status attn_from_data(int ndim, const int64_t *shape, const float *data, attn_tensor **out);
/* Wraps a caller's buffer without copying.  release (may be NULL: the
   caller keeps ownership and must outlive every view) is called once the
   last view is gone.  strides may be NULL for row-major. */
attn_status attn_wrap(float *data, int ndim, const int64_t *shape, const int64_t *strides, attn_release_fn release,
                      void *ctx, attn_tensor **out);
/* [start, end) in steps of step, like torch.arange (float32). */
attn_status attn_arange(double start, double end, double step, attn_tensor **out);
/* The int64 arange (torch.arange with integer arguments). */
attn_status attn_arange_i64(int64_t start, int64_t end, int64_t step, attn_tensor **out);
attn_status attn_linspace(double start, double end, int64_t steps, attn_tensor **out);
attn_status attn_eye(int64_t n, int64_t m, attn_tensor **out);
/* indices (any shape, 0-based integral values) -> shape + [num_classes];
   num_classes < 0 means max(indices) + 1. */
attn_status attn_one_hot(const attn_tensor *indices, int64_t num_classes, attn_tensor **out);

/* Copies. */
attn_status attn_contiguous(const attn_tensor *t, attn_tensor **out); /* retains t if already */
attn_status attn_clone(const attn_tensor *t, attn_tensor **out);
/* dst[...] = src broadcast to dst's shape, converted to dst's dtype.  src
   may alias dst. */
attn_status attn_copy_(attn_tensor *dst, const attn_tensor *src);
attn_status attn_fill_(attn_tensor *t, float value);
attn_status attn_fill_f64_(attn_tensor *t, double value);  /* any dtype, exact for int64 up to 2^53 */
attn_status attn_fill_i64_(attn_tensor *t, int64_t value); /* any dtype, exact for int64 */

/* Views: share storage with the input. */
attn_status attn_transpose(const attn_tensor *t, int d0, int d1, attn_tensor **out);
attn_status attn_t(const attn_tensor *t, attn_tensor **out); /* <= 2-d */
attn_status attn_permute(const attn_tensor *t, const int *dims, attn_tensor **out);
/* shape may hold one -1 to be inferred.  view fails when the strides do
   not allow it; reshape copies in that case. */
attn_status attn_view(const attn_tensor *t, int ndim, const int64_t *shape, attn_tensor **out);
attn_status attn_reshape(const attn_tensor *t, int ndim, const int64_t *shape, attn_tensor **out);
attn_status attn_narrow(const attn_tensor *t, int dim, int64_t start, int64_t length, attn_tensor **out);
/* Python-style slice: start/end already clamped, step > 0. */
attn_status attn_slice(const attn_tensor *t, int dim, int64_t start, int64_t end, int64_t step, attn_tensor **out);
attn_status attn_select(const attn_tensor *t, int dim, int64_t index, attn_tensor **out);
attn_status attn_unsqueeze(const attn_tensor *t, int dim, attn_tensor **out);
/* dim < 0: drop every size-1 dim. */
attn_status attn_squeeze(const attn_tensor *t, int dim, attn_tensor **out);
/* shape entries of -1 keep the input's size. */
attn_status attn_expand(const attn_tensor *t, int ndim, const int64_t *shape, attn_tensor **out);
attn_status attn_flatten(const attn_tensor *t, int start_dim, int end_dim, attn_tensor **out);
/* A view with explicit geometry (offset and strides in floats) on t's
   storage; every reachable element must lie inside the storage. */
attn_status attn_as_strided(const attn_tensor *t, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset,
                            attn_tensor **out);
/* Shape both tensors broadcast to, or ATTN_ERR_SHAPE (message names op). */
attn_status attn_broadcast_shape(const char *op, const attn_tensor *a, const attn_tensor *b, int *ndim, int64_t *shape);

/* ------------------------------------------------------------------------ */
/* Indexing as torch's t[key] (Python's keys, 0-based)                       */

/* One entry of a key.  Make them with the attn_idx_* helpers:
     t[1, :, None, ..., ids]  ->  {attn_idx_int(1), attn_idx_all(),
                                   attn_idx_newaxis(), attn_idx_ellipsis(),
                                   attn_idx_tensor(ids)} */
typedef enum attn_index_kind {
  ATTN_INDEX_INT,      /* i: drops the dim; -1 is the last */
  ATTN_INDEX_SLICE,    /* start:stop:step, step > 0, clamped like Python */
  ATTN_INDEX_NEWAXIS,  /* None: a new dim of size 1 */
  ATTN_INDEX_ELLIPSIS, /* ...: the whole dims the other entries leave (one per key) */
  ATTN_INDEX_TENSOR    /* int64 ids on one dim (negative from the end; the
                          result takes the ids' shape there), or a bool mask
                          over as many dims as it has (one dim of the true
                          entries, in row-major order).  One per key. */
} attn_index_kind;

typedef struct attn_index {
  attn_index_kind kind;
  int64_t i;                 /* INT */
  int64_t start, stop, step; /* SLICE */
  bool has_start, has_stop;  /* SLICE: false for an open end (Python's :stop, start:) */
  const attn_tensor *tensor; /* TENSOR (borrowed for the call) */
} attn_index;

static inline attn_index attn_idx_int(int64_t i) {
  attn_index e = {ATTN_INDEX_INT, i, 0, 0, 1, false, false, NULL};
  return e;
}
/* start:stop:step with both ends given */
static inline attn_index attn_idx_slice(int64_t start, int64_t stop, int64_t step) {
  attn_index e = {ATTN_INDEX_SLICE, 0, start, stop, step, true, true, NULL};
  return e;
}
/* start: (to the end) */
static inline attn_index attn_idx_from(int64_t start, int64_t step) {
  attn_index e = {ATTN_INDEX_SLICE, 0, start, 0, step, true, false, NULL};
  return e;
}
static inline attn_index attn_idx_all(void) { /* : */
  attn_index e = {ATTN_INDEX_SLICE, 0, 0, 0, 1, false, false, NULL};
  return e;
}
static inline attn_index attn_idx_newaxis(void) {
  attn_index e = {ATTN_INDEX_NEWAXIS, 0, 0, 0, 1, false, false, NULL};
  return e;
}
static inline attn_index attn_idx_ellipsis(void) {
  attn_index e = {ATTN_INDEX_ELLIPSIS, 0, 0, 0, 1, false, false, NULL};
  return e;
}
static inline attn_index attn_idx_tensor(const attn_tensor *ids_or_mask) {
  attn_index e = {ATTN_INDEX_TENSOR, 0, 0, 0, 1, false, false, ids_or_mask};
  return e;
}

/* *out = t[key] (n entries; n == 0 gives t).  Without a tensor entry the
   result is a view of t (writes reach t); with one, a copy.  Autograd
   follows both.  Errors name index_get and the entry: an integer or id
   out of range (ATTN_ERR_INDEX), more entries than dims, a mask whose
   shape differs from the dims it covers (ATTN_ERR_SHAPE), two tensors,
   a float index tensor, a step <= 0 (ATTN_ERR_ARG). */
attn_status attn_index_get(const attn_tensor *t, int n, const attn_index *key, attn_tensor **out);
/* t[key] = value, in place (t's version is bumped): value broadcasts to
   the shape of t[key].  Without a tensor entry value is converted to t's
   dtype (torch's copy_); with one it must have t's dtype unless it is 0-d
   (torch's index_put).  Repeated ids: the last write wins.  Under
   autograd (t or value requires grad, grad mode on) the write is
   recorded on t as a whole, so gradients reach t's other elements and
   the value. */
attn_status attn_index_put(attn_tensor *t, int n, const attn_index *key, const attn_tensor *value);

/* ------------------------------------------------------------------------ */
/* Elementwise math (NumPy broadcasting)                                     */

/* The op enums come from the op table, attn_ops.h (one line per op). */
#define ATTN_OP_ENUM_(ID, ...) ATTN_##ID,
typedef enum attn_binary_op { ATTN_BINARY_OPS(ATTN_OP_ENUM_) ATTN_BINARY_OP_COUNT } attn_binary_op;
typedef enum attn_unary_op { ATTN_UNARY_OPS(ATTN_OP_ENUM_) ATTN_UNARY_OP_COUNT } attn_unary_op;
#undef ATTN_OP_ENUM_

/* An op's name as the op table spells it ("add", "abs", ...), for messages. */
const char *attn_binary_op_name(attn_binary_op op);
const char *attn_unary_op_name(attn_unary_op op);

attn_status attn_binary(attn_binary_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
/* a op= b; b must broadcast to a's shape.  b may alias a. */
attn_status attn_binary_(attn_binary_op op, attn_tensor *a, const attn_tensor *b);
/* a op s, or s op a when reversed. */
attn_status attn_binary_scalar(attn_binary_op op, const attn_tensor *a, float s, bool reversed, attn_tensor **out);
attn_status attn_binary_scalar_(attn_binary_op op, attn_tensor *a, float s, bool reversed);
attn_status attn_unary(attn_unary_op op, const attn_tensor *a, attn_tensor **out);
attn_status attn_unary_(attn_unary_op op, attn_tensor *a);
/* a op s with an exact int64 scalar: int64 tensors keep int64 for add, sub,
   mul, maximum, minimum, fmod and compare exactly (bool); others as
   attn_binary_scalar. */
attn_status attn_binary_scalar_i64(attn_binary_op op, const attn_tensor *a, int64_t s, bool reversed,
                                   attn_tensor **out);
/* torch.logical_and/or/xor/not: non-zero is true; bool results. */
typedef enum attn_logical_op { ATTN_LOGICAL_AND, ATTN_LOGICAL_OR, ATTN_LOGICAL_XOR } attn_logical_op;
attn_status attn_logical(attn_logical_op op, const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
attn_status attn_logical_not(const attn_tensor *a, attn_tensor **out);
/* bool results; integers are never nan or inf. */
attn_status attn_isnan(const attn_tensor *a, attn_tensor **out);
attn_status attn_isinf(const attn_tensor *a, attn_tensor **out);
attn_status attn_isfinite(const attn_tensor *a, attn_tensor **out);
/* Python's // and % (torch.floor_divide, torch.remainder): int64 results
   for integer inputs (exact; division by zero fails), float otherwise. */
attn_status attn_floor_divide(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
attn_status attn_remainder(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
/* NaN bounds mean "no bound". */
attn_status attn_clamp(const attn_tensor *a, float lo, float hi, attn_tensor **out);
attn_status attn_clamp_(attn_tensor *a, float lo, float hi);
/* cond != 0 ? a : b, all three broadcast together. */
attn_status attn_where(const attn_tensor *cond, const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
/* t where mask == 0, value where mask != 0; mask broadcasts to t. */
attn_status attn_masked_fill(const attn_tensor *t, const attn_tensor *mask, float value, attn_tensor **out);
attn_status attn_masked_fill_(attn_tensor *t, const attn_tensor *mask, float value);
/* a + alpha * b (broadcast) */
attn_status attn_add_scaled(const attn_tensor *a, const attn_tensor *b, float alpha, attn_tensor **out);

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */

typedef enum attn_reduce_op {
  ATTN_SUM,
  ATTN_MEAN,
  ATTN_PROD,
  ATTN_MAX,
  ATTN_MIN,
  ATTN_ARGMAX,
  ATTN_ARGMIN,
  ATTN_VAR,
  ATTN_STD,
  ATTN_NORM,
  ATTN_LOGSUMEXP,
  ATTN_ALL,
  ATTN_ANY,
  ATTN_REDUCE_OP_COUNT
} attn_reduce_op;

typedef struct attn_reduce_opts {
  double correction; /* var/std: 1 = unbiased (torch default) */
  double p;          /* norm order: 2 default; INFINITY allowed */
} attn_reduce_opts;

/* Reduces along dim (0-based); keepdim keeps a size-1 dim.  ARGMAX/ARGMIN
   give 0-based indices (first occurrence; NaN wins, like torch). */
attn_status attn_reduce_dim(attn_reduce_op op, const attn_tensor *t, int dim, bool keepdim,
                            const attn_reduce_opts *opts, attn_tensor **out);
/* Over all elements: a 0-d tensor (ARGMAX: flat index). */
attn_status attn_reduce_all(attn_reduce_op op, const attn_tensor *t, const attn_reduce_opts *opts, attn_tensor **out);
/* max/min along dim giving both values and 0-based indices. */
attn_status attn_max_dim(const attn_tensor *t, int dim, bool keepdim, bool is_min, attn_tensor **values,
                         attn_tensor **indices);
/* cumulative sum along dim */
attn_status attn_cumsum(const attn_tensor *t, int dim, attn_tensor **out);

/* ------------------------------------------------------------------------ */
/* Linear algebra (cblas_sgemm)                                              */

/* torch.matmul semantics: 1-d x 1-d dot, 2-d mm, batched with broadcasting
   of the batch dims, 1-d operands promoted and the added dim removed. */
attn_status attn_matmul(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
attn_status attn_mm(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
attn_status attn_bmm(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
attn_status attn_outer(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
attn_status attn_dot(const attn_tensor *a, const attn_tensor *b, attn_tensor **out);
/* torch.nn.functional.linear: x [..., in] @ w[out, in]^T (+ b[out]; b may
   be NULL), as one op with one graph node. */
attn_status attn_linear(const attn_tensor *x, const attn_tensor *w, const attn_tensor *b, attn_tensor **out);

/* ------------------------------------------------------------------------ */
/* Softmax                                                                   */

attn_status attn_softmax(const attn_tensor *t, int dim, attn_tensor **out);
attn_status attn_log_softmax(const attn_tensor *t, int dim, attn_tensor **out);
/* LayerNorm over the last k dims of x (torch.nn.functional.layer_norm):
   y = (x - mean) / sqrt(var + eps) * w + b, biased variance; w and b NULL
   or shaped like those k dims.  One fused pass forward and backward. */
attn_status attn_layer_norm(const attn_tensor *x, int k, const attn_tensor *w, const attn_tensor *b, float eps,
                            attn_tensor **out);

/* One Adam / AdamW update of a parameter in a single pass (the `attn.optim`
   step): p, grad, exp_avg, exp_avg_sq (and max_exp_avg_sq for amsgrad, else
   NULL) float32, contiguous, one shape.  Per element, each operation
   rounded in float and in this order (torch 1.13's single-tensor Adam):
     p = p * decay (when decoupled: AdamW)
     m = m * beta1 + grad * one_minus_beta1
     v = v * beta2 + (grad * one_minus_beta2) * grad
     mx = max(mx, v) (amsgrad; NaN propagates), then v' = mx, else v' = v
     p = p + (m * neg_step_size) / (sqrt(v') / bias_correction2_sqrt + eps)
   Runs no autograd: call it under no_grad. */
typedef struct {
  bool decoupled;
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, bias_correction2_sqrt, eps;
} attn_adam_coeffs;
attn_status attn_adam_update(attn_tensor *p, const attn_tensor *grad, attn_tensor *exp_avg, attn_tensor *exp_avg_sq,
                             attn_tensor *max_exp_avg_sq, const attn_adam_coeffs *c);
/* Whether attn_adam_update takes these tensors (all float32, contiguous,
   of p's shape; max_exp_avg_sq may be NULL): where not, a caller composes
   the step from tensor ops instead.  Sets no error. */
bool attn_adam_fusable(const attn_tensor *p, const attn_tensor *grad, const attn_tensor *exp_avg,
                       const attn_tensor *exp_avg_sq, const attn_tensor *max_exp_avg_sq);

/* ------------------------------------------------------------------------ */
/* Shape operations                                                          */

attn_status attn_tril(const attn_tensor *t, int64_t diagonal, attn_tensor **out);
attn_status attn_triu(const attn_tensor *t, int64_t diagonal, attn_tensor **out);
attn_status attn_cat(int n, const attn_tensor *const *ts, int dim, attn_tensor **out);
attn_status attn_stack(int n, const attn_tensor *const *ts, int dim, attn_tensor **out);
/* index: 1-d, values in [0, size(dim)) */
attn_status attn_index_select(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor **out);
/* out[i][j][k] = t[i][index[i][j][k]][k] for dim 1 (torch.gather) */
attn_status attn_gather(const attn_tensor *t, int dim, const attn_tensor *index, attn_tensor **out);
/* Class targets in one pass (the losses' check): every element of t (any
   dtype) a whole number in [lo, hi], or equal to `ignore` where has_ignore.
   *any_ignored: whether some element equals `ignore`; *first_bad: the flat
   index (row-major) of the first element that is neither, or -1. */
attn_status attn_check_class_targets(const attn_tensor *t, int64_t lo, int64_t hi, bool has_ignore, int64_t ignore,
                                     bool *any_ignored, int64_t *first_bad);
/* Views of consecutive pieces of size `size` (last may be smaller).
   *outs is a malloc'd array of *n tensors; free it with free() after
   releasing each tensor. */
attn_status attn_split(const attn_tensor *t, int64_t size, int dim, int *n, attn_tensor ***outs);
/* Pieces of the given sizes, which must add up to size(dim). */
attn_status attn_split_sizes(const attn_tensor *t, int nsizes, const int64_t *sizes, int dim, int *n,
                             attn_tensor ***outs);
attn_status attn_chunk(const attn_tensor *t, int64_t chunks, int dim, int *n, attn_tensor ***outs);
/* torch.Tensor.repeat: nreps >= ndim */
attn_status attn_repeat(const attn_tensor *t, int nreps, const int64_t *reps, attn_tensor **out);
attn_status attn_flip(const attn_tensor *t, int ndims, const int *dims, attn_tensor **out);
/* Sorting along dim (src/core/ops/sort.c).  Indices are 0-based int64 tensors;
   NaN counts as larger than every number; equal values keep input order.
   Any dtype is ordered as float32, values keep the input's dtype.  The
   values record a backward (the gradient goes to the indexed places). */
attn_status attn_sort(const attn_tensor *t, int dim, bool descending, attn_tensor **values, attn_tensor **indices);
/* the k (0..size) largest (or smallest) along dim, sorted */
attn_status attn_topk(const attn_tensor *t, int64_t k, int dim, bool largest, attn_tensor **values,
                      attn_tensor **indices);
/* the k-th smallest along dim, k in 1..size as in torch */
attn_status attn_kthvalue(const attn_tensor *t, int64_t k, int dim, bool keepdim, attn_tensor **values,
                          attn_tensor **indices);
/* Scatter and index ops (src/core/ops/scatter.c), torch's shapes: index has
   self's ndim, index.size(d) <= src.size(d), and <= self.size(d) for d !=
   dim; out[p with p_dim = index[p]] = src[p] (scatter), += (scatter_add),
   or reduced with reduce "sum", "prod", "mean", "amax", "amin"
   (include_self: self's value takes part).  Out of place; self and src
   float32; index int64 (or float32 holding integers). */
attn_status attn_scatter(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *src,
                         attn_tensor **out);
attn_status attn_scatter_value(const attn_tensor *self, int dim, const attn_tensor *index, float value,
                               attn_tensor **out);
attn_status attn_scatter_add(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *src,
                             attn_tensor **out);
attn_status attn_scatter_reduce(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *src,
                                const char *reduce, bool include_self, attn_tensor **out);
/* self [A..., m, B...], index [k], source [A..., k, B...]:
   out[a, index[j], b] += alpha * source[a, j, b] / = source / = value */
attn_status attn_index_add(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *source,
                           float alpha, attn_tensor **out);
attn_status attn_index_copy(const attn_tensor *self, int dim, const attn_tensor *index, const attn_tensor *source,
                            attn_tensor **out);
attn_status attn_index_fill(const attn_tensor *self, int dim, const attn_tensor *index, float value, attn_tensor **out);
/* [n, ndim] int64: 0-based positions of the non-zero elements (any dtype),
   row-major order */
attn_status attn_nonzero(const attn_tensor *t, attn_tensor **out);
/* t and mask broadcast together -> 1-d of t's values where mask != 0 */
attn_status attn_masked_select(const attn_tensor *t, const attn_tensor *mask, attn_tensor **out);
/* boundaries [N] ascending -> t's shape of int64 bucket numbers in [0, N]:
   first i with x <= b[i] (right: x < b[i]), else N */
attn_status attn_bucketize(const attn_tensor *t, const attn_tensor *boundaries, bool right, attn_tensor **out);
/* The in-place form of an op computed out of place as result (taken
   over, released): written into t, or, when autograd follows t or one of
   others (the op's other inputs), committed to the graph as torch's
   in-place ops are (refused on leaves that require grad). */
attn_status attn_inplace_result(const char *fn, attn_tensor *t, const attn_tensor *const *others, int nothers,
                                attn_tensor *result);

/* ------------------------------------------------------------------------ */
/* Random numbers: bit-exact with torch 1.13's CPU generator (mt19937)      */

typedef struct attn_generator attn_generator;

attn_status attn_generator_new(uint64_t seed, attn_generator **out);
void attn_generator_free(attn_generator *g);
/* The memory one generator takes (for hosts' and bindings' accounting). */
size_t attn_generator_bytes(void);
void attn_generator_seed(attn_generator *g, uint64_t seed);
uint64_t attn_generator_initial_seed(const attn_generator *g);
/* The process-wide default generator (torch.manual_seed's); guarded by a
   mutex inside the sampling functions. */
attn_generator *attn_default_generator(void);
/* Opaque state for get_state/set_state (torch's layout is not mirrored). */
size_t attn_generator_state_size(void);
void attn_generator_get_state(const attn_generator *g, void *buf);
attn_status attn_generator_set_state(attn_generator *g, const void *buf, size_t size);

/* In-place fills, each consuming the stream exactly as torch does for a
   float32 tensor of that shape (g NULL = default generator). */
attn_status attn_uniform_(attn_tensor *t, double from, double to, attn_generator *g);
attn_status attn_normal_(attn_tensor *t, double mean, double std, attn_generator *g);
/* uniform integers in [low, high) */
attn_status attn_random_int_(attn_tensor *t, int64_t low, int64_t high, attn_generator *g);
attn_status attn_bernoulli_(attn_tensor *t, double p, attn_generator *g);
/* t[i] = bernoulli(probs[i]); probs has t's shape */
attn_status attn_bernoulli_tensor(const attn_tensor *probs, attn_generator *g, attn_tensor **out);
attn_status attn_exponential_(attn_tensor *t, double lambda, attn_generator *g);
/* 0-based permutation of [0, n) as a float tensor */
attn_status attn_randperm(int64_t n, attn_generator *g, attn_tensor **out);
/* probs: 1-d or 2-d rows of non-negative weights; out: 0-based indices */
attn_status attn_multinomial(const attn_tensor *probs, int64_t num_samples, bool replacement, attn_generator *g,
                             attn_tensor **out);

/* ------------------------------------------------------------------------ */
/* Autograd                                                                  */
/*
 * Every differentiable op above records itself when gradient mode is on
 * (the default, per thread) and one of its inputs requires grad: the result
 * gets a grad_fn node that keeps what the backward pass needs.  Results of
 * non-differentiable ops (comparisons, argmax, random fills) never require
 * grad.  In-place ops on tensors that take part in a graph are recorded as
 * the out-of-place op followed by a rebase of the target's history; they
 * are refused on leaves that require grad and on views of such tensors.
 * Storage version counters catch tensors modified after being saved for
 * backward.
 */
bool attn_grad_enabled(void);
/* Sets gradient mode for the calling thread; returns the previous mode. */
bool attn_set_grad_enabled(bool enabled);
bool attn_requires_grad(const attn_tensor *t);
/* Turns gradient tracking on/off for a leaf (non-leaves cannot be turned off). */
attn_status attn_requires_grad_(attn_tensor *t, bool requires_grad);
bool attn_is_leaf(const attn_tensor *t);
/* The accumulated gradient (borrowed, NULL if none). */
attn_tensor *attn_grad(const attn_tensor *t);
/* Replaces the gradient with a detached alias of g (same storage; so that
   t.grad = t makes no reference cycle); NULL clears.  Shape must match. */
attn_status attn_set_grad(attn_tensor *t, attn_tensor *g);
/* "MmBackward0" etc. for results of recorded ops, NULL for leaves. */
const char *attn_grad_fn_name(const attn_tensor *t);
/* A C hook that backward calls right after it has accumulated a leaf's
   .grad (torch's post-accumulate-grad hook), in the thread running
   backward, with gradient mode off.  One per leaf (a new one replaces the
   old; fn NULL removes it); ctx is not owned, so whoever sets a hook must
   remove it before freeing ctx.  The hook may read and write the leaf's
   .grad data but must not release the leaf; a failure it returns ends
   backward with that status.  Used by attn.dist's gradient reducer. */
typedef attn_status (*attn_grad_hook_fn)(void *ctx, attn_tensor *leaf);
attn_status attn_set_grad_hook(attn_tensor *t, attn_grad_hook_fn fn, void *ctx);
/* The ctx of t's hook, or NULL when it has none. */
void *attn_grad_hook_ctx(const attn_tensor *t);
/* Records out = f(inputs) with a backward written in C outside the core
   (e.g. attn.dist's ring attention): fn(ctx, grad_out, grads) fills
   grads[i] (one reference each, shapes of inputs[i]) and runs with gradient
   mode off.  ctx is owned by the node from this call on (freed with
   ctx_free, which may be NULL, also on failure and when no input requires
   grad, in which case nothing is recorded). */
typedef attn_status (*attn_custom_backward_fn)(void *ctx, const attn_tensor *grad_out, attn_tensor **grads);
attn_status attn_custom_record(attn_tensor *out, const char *name, int n, const attn_tensor *const *inputs,
                               attn_custom_backward_fn fn, void *ctx, void (*ctx_free)(void *));
/* Keeps .grad on a non-leaf after backward. */
attn_status attn_retain_grad(attn_tensor *t);
/* A view sharing t's storage, cut from the graph. */
attn_status attn_detach(const attn_tensor *t, attn_tensor **out);
/* Runs the backward pass from t.  grad NULL means 1 (t must have one
   element).  Gradients accumulate into leaves' .grad.  Without
   retain_graph the saved tensors are freed as each node finishes. */
attn_status attn_backward(attn_tensor *t, const attn_tensor *grad, bool retain_graph);
/* Embedding lookup: weight [V, D], ids (any shape, 0-based) -> ids.shape + [D].
   Rows at padding_idx (>= 0) get no gradient. */
attn_status attn_embedding(const attn_tensor *weight, const attn_tensor *ids, int64_t padding_idx, attn_tensor **out);

/* ------------------------------------------------------------------------ */
/* Printing                                                                  */

typedef struct attn_print_opts {
  int precision;      /* digits after the point (torch default 4) */
  int linewidth;      /* 80 */
  int64_t threshold;  /* summarise above this many elements (1000) */
  int edgeitems;      /* 3 */
  const char *suffix; /* appended inside the parens, e.g. "requires_grad=True"; may be NULL */
} attn_print_opts;

void attn_print_opts_default(attn_print_opts *opts);
/* torch's repr: "tensor([[ 0.3374, -0.1778]])".  *out is malloc'd. */
attn_status attn_tensor_format(const attn_tensor *t, const attn_print_opts *opts, char **out);

/* ------------------------------------------------------------------------ */
/* BLAS                                                                      */

/* Loads OpenBLAS on first use.  On x86 CPUs that Debian's OpenBLAS 0.3.21
   does not know it would fall back to SSE3 "Prescott" kernels; unless the
   user set OPENBLAS_CORETYPE, attn picks the core from cpuid (SkylakeX
   with AVX-512, Haswell with AVX2) before OpenBLAS initialises.
   ATTN_BLAS_CORETYPE=off disables that. */
attn_status attn_blas_init(void);
typedef struct attn_blas_info {
  const char *library;         /* path or soname that was loaded */
  const char *core;            /* openblas_get_corename() */
  const char *config;          /* openblas_get_config() */
  const char *coretype_source; /* "user", "attn", or "openblas" */
  int num_threads;             /* attn's pool, which splits large products */
} attn_blas_info;
attn_status attn_blas_get_info(attn_blas_info *info);
/* Kernel families: the attention, softmax, LayerNorm, elementwise and
   reduction kernels exist once per instruction set ("avx512": x86-64-v4,
   AVX-512 F/DQ/CD/BW/VL; "avx2": x86-64-v3, AVX2 + FMA + BMI1/2 + F16C +
   LZCNT + MOVBE; "portable": plain C, every CPU).  The
   widest family the CPU (and OS) supports is chosen at first use; the
   environment variable ATTN_ISA=avx512|avx2|portable forces one.  A
   forced family the CPU lacks (or an unknown name) is not used: attn
   falls back to the widest supported one, says so once on stderr and in
   info.note.  Never runs an instruction the CPU lacks. */
typedef struct attn_isa_info {
  const char *active;    /* family in use */
  const char *best;      /* widest family this CPU supports */
  const char *available; /* supported families, widest first, e.g. "avx2,portable" */
  const char *requested; /* ATTN_ISA as found at start-up, or NULL */
  const char *note;      /* why active is not what was requested, or "" */
  const char *cpu;       /* CPU brand string (cpuid), or "" */
} attn_isa_info;
attn_status attn_isa_get_info(attn_isa_info *info);
/* Switches the process to a family (NULL or "auto": the widest); refuses
   (ATTN_ERR_ARG) a family the CPU lacks.  Kernels already running finish
   with the family they started with. */
attn_status attn_set_isa(const char *family);
/* attn's one thread pool: n in [1, ATTN_MAX_THREADS], else ATTN_ERR_ARG
   naming the range (nothing is changed).  OpenBLAS runs on one thread
   (attn sets openblas_set_num_threads(1), process-wide); attn_sgemm splits
   a large product into one call per pool thread instead. */
#define ATTN_MAX_THREADS 64
attn_status attn_set_num_threads(int n);
int attn_get_num_threads(void);
/* Row-major C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, over the
   pool's threads (each element computed as by one sgemm call). */
attn_status attn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                       int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* ------------------------------------------------------------------------ */
/* Weight files                                                              */
/*
 * safetensors, NumPy .npy and .npz (a ZIP of .npy members, as np.savez and
 * np.savez_compressed write them).  Tensors are float32 in memory; loaders
 * convert what the file holds:
 *   safetensors F32 F16 BF16 F64 I64 I32 I16 I8 U64 U32 U16 U8 BOOL
 *   .npy/.npz   f4 f8 f2 i8 i4 i2 i1 u8 u4 u2 u1 b1, little- or big-endian,
 *               C or Fortran order, format versions 1.0, 2.0 and 3.0
 * F16/BF16 and integers up to 16 bits convert exactly; F64 and wider
 * integers round to the nearest float32; BOOL gives 0/1.  A Fortran-order
 * array loads as a column-major (non-contiguous) view, like np.load.
 *
 * Loaders never trust the file: every size, offset, count and shape
 * product is checked against the file's length and for overflow before
 * anything is allocated or read, and data is read straight into the
 * tensors' storage (a file needs no second copy in memory).  A safetensors
 * file must be what the reference library accepts: header JSON with an
 * object per tensor, data ranges that tile the byte buffer exactly (no
 * gaps, overlaps or trailing bytes), unique names.
 *
 * Writers write float32 (non-contiguous tensors in row-major order) to a
 * temporary "<path>.tmp.XXXXXX" in the destination's directory, fsync it and
 * rename it over path, so path always holds either its old or its new
 * complete contents; on failure the temporary is removed.  A process killed
 * during a save leaves its temporary behind.
 *  - safetensors: tensors sorted by name (byte order), like the reference
 *    library's save_file for one dtype; __metadata__ first; the header is
 *    padded with spaces to a multiple of 8 bytes.
 *  - .npy: byte-identical to numpy 1.24's np.save of a float32 C array.
 *  - .npz: members "<name>.npy" stored (ZIP_STORED) in the order given,
 *    CRC-32 set, ZIP64 records only where sizes or offsets need them.
 */

/* What a file says about one tensor. */
typedef struct attn_weight_info {
  char dtype[8]; /* as in the file: "F16", "BF16", "<f4", "|b1", ... */
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  uint64_t offset; /* start of the raw data (file, or zip member) */
  uint64_t nbytes; /* length of the raw data */
} attn_weight_info;

/* A list of named tensors plus optional string metadata.  Names are unique. */
typedef struct attn_named_tensors {
  int n;
  char **names;           /* malloc'd strings */
  attn_tensor **tensors;  /* one reference each; NULL after attn_safetensors_info */
  attn_weight_info *info; /* filled by the loaders, NULL in lists built by the caller */
  int nmeta;
  char **meta_keys; /* safetensors __metadata__ */
  char **meta_values;
} attn_named_tensors;

attn_status attn_named_tensors_new(attn_named_tensors **out);
/* Frees the list, its strings and its references; NULL is fine. */
void attn_named_tensors_free(attn_named_tensors *nt);
/* Appends (name copied, t retained); a name already present is an error. */
attn_status attn_named_tensors_add(attn_named_tensors *nt, const char *name, attn_tensor *t);
/* Sets a metadata entry (replacing an earlier value of key). */
attn_status attn_named_tensors_set_meta(attn_named_tensors *nt, const char *key, const char *value);
/* Borrowed lookups; NULL when absent. */
attn_tensor *attn_named_tensors_get(const attn_named_tensors *nt, const char *name);
const char *attn_named_tensors_meta(const attn_named_tensors *nt, const char *key);

/* Tensors in the order of their data in the file. */
attn_status attn_safetensors_load(const char *path, attn_named_tensors **out);
/* Names, dtypes, shapes and metadata only (tensors[] all NULL); reads the
   header, not the data. */
attn_status attn_safetensors_info(const char *path, attn_named_tensors **out);
attn_status attn_safetensors_save(const char *path, const attn_named_tensors *nt);
/* info may be NULL. */
attn_status attn_npy_load(const char *path, attn_tensor **out, attn_weight_info *info);
attn_status attn_npy_save(const char *path, const attn_tensor *t);
/* Members in archive order; names lose their ".npy" suffix. */
attn_status attn_npz_load(const char *path, attn_named_tensors **out);
attn_status attn_npz_save(const char *path, const attn_named_tensors *nt);

/* torch's checkpoint container (torch.save, torch >= 1.6; io_torch.c): the
   zip archive around data.pkl.  The pickle is read and written by
   lua/attn/ptfile.lua; these read and write the records. */
typedef struct attn_pt_archive attn_pt_archive;
attn_status attn_pt_open(const char *path, attn_pt_archive **out);
void attn_pt_close(attn_pt_archive *a); /* NULL is fine */
/* The record "<prefix>/<name>" (e.g. "data.pkl") in a malloc'd buffer. */
attn_status attn_pt_read_record(attn_pt_archive *a, const char *name, char **buf, size_t *len);
/* Storage "<prefix>/data/<key>" of numel elements of torch.<storage_type>
   ("FloatStorage", ...) as a 1-D tensor: floats load as float32, integers
   as int64, bool as bool. */
attn_status attn_pt_storage(attn_pt_archive *a, const char *key, const char *storage_type, int64_t numel,
                            attn_tensor **out);
/* torch's storage name for a dtype ("FloatStorage"), NULL if none. */
const char *attn_pt_storage_name(attn_dtype dt);
typedef struct attn_pt_writer attn_pt_writer;
attn_status attn_pt_writer_open(const char *path, attn_pt_writer **out);
attn_status attn_pt_writer_add(attn_pt_writer *w, const char *name, const void *data, size_t n);
/* t's elements, row-major, in its own dtype (little-endian). */
attn_status attn_pt_writer_add_tensor(attn_pt_writer *w, const char *name, const attn_tensor *t);
/* commit and abort free the writer. */
attn_status attn_pt_writer_commit(attn_pt_writer *w);
void attn_pt_writer_abort(attn_pt_writer *w);

/* Atomic replacement of any file, as the writers above do it: bytes go to a
   temporary "<path>.tmp.XXXXXX" beside path; commit flushes, fsyncs and
   renames it over path; abort removes it.  commit and abort free the
   writer (a failed commit removes the temporary too); a failed write leaves
   it open for abort.  fn names the caller in messages. */
typedef struct attn_file_writer attn_file_writer;
attn_status attn_file_writer_open(const char *fn, const char *path, attn_file_writer **out);
attn_status attn_file_writer_write(attn_file_writer *w, const void *data, size_t n);
attn_status attn_file_writer_commit(attn_file_writer *w);
void attn_file_writer_abort(attn_file_writer *w); /* NULL is fine */

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/*
 * attn_sdpa is torch.nn.functional.scaled_dot_product_attention (torch 2.x):
 *   out = dropout(softmax(q @ k^T * scale + bias), dropout_p) @ v
 * Shapes: q [..., L, E], k [..., S, E], v [..., S, Ev] -> out [..., L, Ev];
 * q, k and v have the same number of dims (>= 2) and the same leading
 * dims, except that with enable_gqa the head dim (-3) of k and v may divide
 * q's: query head h then reads kv head h / (Hq / Hkv), as torch's
 * repeat_interleave of k and v does.
 * bias comes from one of
 *  - attn_mask, broadcastable to [..., L, S] (q's leading dims): with
 *    mask_is_bool a position takes part where the mask is non-zero and is
 *    -inf where it is 0; otherwise the mask is added to the scores;
 *  - is_causal: query i sees keys j <= i (torch's top-left alignment), or
 *    with causal_bottom_right j <= i + S - L, so that the last query sees
 *    the last key (incremental decoding with L < S).
 * Like torch, attn_mask and is_causal cannot be combined.
 * scale NaN or 0 means 1/sqrt(E).  A row whose keys are all masked gives a
 * zero output row and zero gradients (torch 2.5's _safe_softmax), not NaN.
 *
 * The fused kernel (online softmax over key blocks, FlashAttention-2
 * style) never forms the L x S matrix: it keeps the per-row log-sum-exp
 * for the backward pass, which recomputes the probabilities block by
 * block; extra memory is O(L) per head plus fixed-size tiles per thread.
 * It runs on attn's thread pool (attn_set_num_threads).  These cases go to
 * the composed reference (matmul, masking, softmax, matmul), which
 * materialises [..., L, S]:
 *  - weights != NULL: *weights gets the attention weights [..., L, S]
 *    (after dropout, as torch's math path returns them);
 *  - dropout_p > 0: drawn like torch's math path,
 *    `attn_weight = dropout(softmax(...), p)`: a [..., L, S] tensor filled
 *    by bernoulli_(1 - p) from generator (NULL: the default generator), then
 *    divided by 1 - p, multiplies the weights; p = 1 gives zero weights
 *    without drawing.  The same seed gives torch's mask bit for bit;
 *  - an attn_mask that requires grad (its gradient comes from the
 *    composed ops).
 * With gradient mode on, the fused result records one backward node
 * (ScaledDotProductFlashAttentionForCpuBackward0) giving the gradients of
 * q, k and v.
 */
typedef struct attn_sdpa_opts {
  const attn_tensor *attn_mask; /* NULL: none */
  bool mask_is_bool;            /* non-zero = take part (else additive) */
  bool is_causal;
  bool causal_bottom_right;  /* needs is_causal */
  double scale;              /* NaN or 0: 1/sqrt(E) */
  double dropout_p;          /* [0, 1] */
  attn_generator *generator; /* dropout's; NULL: default generator */
  bool enable_gqa;
} attn_sdpa_opts;

/* Zero options: no mask, not causal, default scale, no dropout. */
void attn_sdpa_opts_init(attn_sdpa_opts *opts);
/* opts may be NULL (defaults); weights may be NULL. */
attn_status attn_sdpa(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, const attn_sdpa_opts *opts,
                      attn_tensor **out, attn_tensor **weights);
/* Blocks of a longer attention (sequence parallelism: attn.dist's ring
   attention).  attn_sdpa_block_forward gives out [..., L, Ev] and lse
   [..., L], the log-sum-exp of each query's scaled scores over this
   block's visible keys (-inf, with a zero output row, where none is
   visible); results of several key blocks combine as
   lse = logaddexp(lse1, lse2), out = out1 * exp(lse1 - lse) + out2 * exp(lse2 - lse).
   attn_sdpa_block_backward takes the final out and lse (over all blocks,
   lse contiguous) and dout, and gives this block's contributions to dq,
   dk, dv (to be summed over blocks).  No mask, no dropout; is_causal is
   top-left within the block; no autograd recording (the caller records). */
attn_status attn_sdpa_block_forward(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, bool is_causal,
                                    double scale, attn_tensor **out, attn_tensor **lse);
attn_status attn_sdpa_block_backward(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                                     const attn_tensor *out, const attn_tensor *dout, const attn_tensor *lse,
                                     bool is_causal, double scale, attn_tensor **dq, attn_tensor **dk,
                                     attn_tensor **dv);
/* [L, S] of 1 where query i sees key j (j <= i, or j <= i + S - L with
   bottom_right), else 0: a mask for mask_is_bool. */
attn_status attn_causal_mask(int64_t L, int64_t S, bool bottom_right, attn_tensor **out);
/* lengths [B] (integral values in [0, S]) -> [B, 1, 1, S] of 1 where
   j < lengths[b], else 0: a key-padding mask for mask_is_bool that
   broadcasts over heads and queries. */
attn_status attn_padding_mask(const attn_tensor *lengths, int64_t S, attn_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
