/* SPDX-License-Identifier: MIT */
/* Kernel families, one per instruction set (see attn_isa_info in attn.h).
 *
 * Each family is a translation unit compiled with its own flags
 * (kernels_avx512.c: -march=x86-64-v4; kernels_avx2.c: -march=x86-64-v3;
 * kernels_portable.c: the build's baseline) that fills one attn__kernels
 * table.  isa.c picks a table once (CPU detection, ATTN_ISA) with
 * pthread_once, so the choice is race-free and needs no ifunc resolvers
 * (which TSan builds cannot use).  Only the
 * chosen family's code ever runs, so a CPU never meets an instruction it
 * lacks.  Callers load the table once per operation: attn_set_isa may
 * switch it between operations.
 *
 * The kernels room's door (1.1, src/core/kernels/): the rooms above include
 * this header only.  It also carries the two contracts a caller fills for
 * the kernels: reduce_spec.h (reduce.c) and sdpa_plan.h (sdpa.c). */
#ifndef ATTN_KERNELS_H
#define ATTN_KERNELS_H

#include "base/base.h"
#include "reduce_spec.h"
#include "sdpa_plan.h"

/* tasks [begin, end) of a parallel loop; ctx is the caller's plan */
typedef void (*attn__range_fn)(int64_t begin, int64_t end, void *ctx);

/* Elementwise rows (elementwise.c): o [n] (stride os) = op(a [n], b [n]) */
typedef void (*attn__binary_row_fn)(int64_t n, float *restrict o, int64_t os, const float *a, int64_t as,
                                    const float *b, int64_t bs);
typedef void (*attn__unary_row_fn)(int64_t n, float *restrict o, int64_t os, const float *a, int64_t as);
/* o [n] = g [n] * op'(x [n]) (y [n] = op(x), read instead where cheaper);
   acc: o [n] = o [n] + that (one rounding more, as a separate add) */
typedef void (*attn__unary_grad_row_fn)(int64_t n, float *restrict o, int64_t os, const float *g, int64_t gs,
                                        const float *x, int64_t xs, const float *y, int64_t ys, bool acc);
typedef struct {
  float lo, hi; /* NaN: no bound */
} attn__clamp_ctx;

typedef struct attn__kernels {
  const char *name; /* "avx512", "avx2", "portable" */
  /* Fused attention (sdpa_tiles.h): ctx is sdpa_plan.h's plan.
     fwd: tasks (batch, query block); bwd_kv: (kv batch, key block);
     bwd_q: (batch, query block); bwd_kvq: dK, dV and dQ, tasks kv batches;
     bwd_saved: the same from the forward's kept scores. */
  attn__range_fn sdpa_fwd, sdpa_bwd_kv, sdpa_bwd_q, sdpa_bwd_kvq, sdpa_bwd_saved;
  /* softmax / log_softmax of a block x [n, m] -> y [n, m] (softmax.c):
     rows: m rows of n elements (row stride vs, element stride rs);
     cols: n rows of m unit-stride elements, scratch mx [m], sum [m]. */
  void (*softmax_rows)(const float *x, int64_t n, int64_t rs, int64_t m, int64_t vs, float *y, int64_t ors, int64_t vos,
                       bool log_space);
  void (*softmax_cols)(const float *x, int64_t n, int64_t rs, int64_t m, float *y, int64_t ors, int64_t vos,
                       bool log_space, float *mx, double *sum);
  /* softmax / log_softmax backward of unit-stride rows g, y [rows, n] -> r */
  void (*softmax_bwd_rows)(const float *g, const float *y, float *r, int64_t rows, int64_t n, bool log_space, bool acc);
  /* LayerNorm (norm.c, norm_kernels.h): x [rows, n] -> y, mean, rstd [rows];
     backward g, x -> dx [rows, n] (written, or added to with dx_acc), dw,
     db [n] accumulated, scratch [n] */
  void (*layer_norm_rows)(const float *x, int64_t rows, int64_t n, const float *w, const float *b, float eps,
                          float *restrict y, float *mean, float *rstd);
  void (*layer_norm_bwd_rows)(const float *g, const float *x, int64_t rows, int64_t n, const float *w,
                              const float *mean, const float *rstd, float *dx, bool dx_acc, float *dw, float *db,
                              float *restrict scratch);
  /* reductions of a block x [n, m] (reduce.c, reduce_spec.h): rows -> vals,
     idxs [m] at stride os; cols (unit-stride rows) -> raw acc, acc2 [m] */
  void (*reduce_rows)(const struct attn__rspec *r, const float *x, int64_t n, int64_t rs, int64_t m, int64_t vs,
                      float *vals, float *idxs, int64_t os);
  void (*reduce_cols)(const struct attn__rspec *r, const float *x, int64_t n, int64_t rs, int64_t m, double *acc,
                      double *acc2);
  /* cumsum of a block x [n, m] -> y [n, m]; cols: scratch acc [m] */
  void (*cumsum_rows)(const float *x, int64_t n, int64_t rs, int64_t m, int64_t vs, float *y, int64_t ors, int64_t vos);
  void (*cumsum_cols)(const float *x, int64_t n, int64_t rs, int64_t m, float *y, int64_t ors, int64_t vos,
                      double *acc);
  /* elementwise: rows per attn_binary_op / attn_unary_op; clamp over
     attn__foreach's rows with an attn__clamp_ctx */
  const attn__binary_row_fn *binary_rows;
  const attn__unary_row_fn *unary_rows;
  const attn__unary_grad_row_fn *unary_grad_rows;
  attn__inner_fn clamp_inner;
  /* small and medium products (gemm_kernels.h): c [m, n] (contiguous) =
     a [m, k] (strides ars, acs) @ b [k, n] (strides brs, bcs), k >= 1,
     scratch of gemm_mr * gemm_nr + k * round_up(n, gemm_nr) floats */
  void (*gemm)(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b, int64_t brs,
               int64_t bcs, float *restrict c, float *restrict scratch);
  int gemm_mr, gemm_nr;
} attn__kernels;

/* A family unit's table of its static kernels (same names in every unit). */
#define ATTN__KERNEL_TABLE(family)                                                                                     \
  {                                                                                                                    \
    .name = family, .sdpa_fwd = sdpa_fwd_range, .sdpa_bwd_kv = sdpa_kv_range, .sdpa_bwd_q = sdpa_q_range,              \
    .sdpa_bwd_kvq = sdpa_kvq_range, .sdpa_bwd_saved = sdpa_saved_range, .softmax_rows = softmax_rows,                  \
    .softmax_cols = softmax_cols, .reduce_rows = block_rows, .reduce_cols = block_cols, .cumsum_rows = cumsum_rows,    \
    .cumsum_cols = cumsum_cols, .binary_rows = binary_rows, .unary_rows = unary_rows,                                  \
    .unary_grad_rows = unary_grad_rows, .softmax_bwd_rows = softmax_bwd_rows, .layer_norm_rows = layer_norm_rows,      \
    .layer_norm_bwd_rows = layer_norm_bwd_rows, .clamp_inner = clamp_inner, .gemm = gemm_small, .gemm_mr = GEMM_MR,    \
    .gemm_nr = GEMM_NR,                                                                                                \
  }

extern const attn__kernels attn__kernels_portable;
#if defined(__x86_64__)
extern const attn__kernels attn__kernels_avx2, attn__kernels_avx512;
#endif

/* The family in use (chosen at first call). */
const attn__kernels *attn__kern(void);

/* Debug counter of the bytes the fused attention allocates besides its
   results (tiles, log-sum-exp, row dots): the peak of what was live at
   once since the last reset.  Adds bytes (negative: frees) to it
   (sdpa_scratch.c). */
void attn__sdpa_mem_add(int64_t bytes);
void attn__sdpa_mem_reset(void);
int64_t attn__sdpa_mem_peak(void);

#endif
