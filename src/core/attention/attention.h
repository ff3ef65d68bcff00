/* SPDX-License-Identifier: MIT */
/* Scaled dot-product attention (1.5, src/core/attention/): the fused
 * kernel's driver (sdpa.c; tiles in the kernels room) and the composed
 * math path (sdpa_math.c).  attn_sdpa itself is attn.h's.  Not
 * installed. */
#ifndef ATTN_CORE_ATTENTION_H
#define ATTN_CORE_ATTENTION_H

#include "ops/ops.h"

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
/* The most bytes of scores the fused attention's forward keeps for its
   backward (sdpa.c keep_scores; 0: always recompute them).  Tests only. */
extern int64_t attn__sdpa_keep_scores_max;
/* The fused kernel's backward (sdpa.c), for the backward room's table
   (attn__formulas; attn_sdpa records the id ATTN__F_SDPA). */
attn_status attn__sdpa_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads);

#endif
