/* SPDX-License-Identifier: MIT */
/* What a reduction block computes (reduce.c builds it, the kernels of
 * reduce_kernels.h read it).  Not installed. */
#ifndef ATTN_REDUCE_SPEC_H
#define ATTN_REDUCE_SPEC_H

#include "base/base.h"

#include <math.h>

/* What a block computes; NORM is split by p so the loops stay branch-free. */
typedef enum {
  K_SUM,
  K_PROD,
  K_MAX,
  K_MIN,
  K_ARGMAX,
  K_ARGMIN,
  K_VAR,
  K_NORM2,
  K_NORM1,
  K_NORMINF,
  K_NORMNEGINF,
  K_NORM0,
  K_NORMP,
  K_LSE,
  K_ALL,
  K_ANY
} rkind;

typedef struct attn__rspec {
  attn_reduce_op op;
  rkind kind;
  double p;    /* norm order */
  double corr; /* var/std correction */
} rspec;

static inline bool kind_needs_elements(rkind k) { return k == K_MAX || k == K_MIN || k == K_ARGMAX || k == K_ARGMIN; }
static inline bool kind_is_arg(rkind k) { return k == K_ARGMAX || k == K_ARGMIN; }

/* Turns a raw accumulation over n elements into the reduction's value. */
static inline double finalize(const rspec *r, double raw, int64_t n) {
  switch (r->op) {
  case ATTN_MEAN: return raw / (double)n; /* n == 0: NaN like torch */
  case ATTN_VAR:
  case ATTN_STD: {
    if (n == 0) return NAN;
    double v = raw / fmax(0.0, (double)n - r->corr); /* 0/0 = NaN, x/0 = inf as in torch */
    return r->op == ATTN_STD ? sqrt(v) : v;
  }
  case ATTN_NORM:
    if (n == 0) return 0; /* torch.Tensor.norm of an empty dim is 0 for every p */
    if (r->kind == K_NORM2) return sqrt(raw);
    if (r->kind == K_NORMP) return pow(raw, 1.0 / r->p);
    return raw;
  default: return raw;
  }
}

#endif
