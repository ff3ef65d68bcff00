/* SPDX-License-Identifier: MIT */
/* The backward side of autograd (1.6, src/core/backward/): the formulas
 * kept apart from their forward op (grad_*.c, which call the ops) and the
 * engine that walks the graph (autograd.c) and looks them up by id
 * (attn__formula, autograd/autograd.h).  Not installed. */
#ifndef ATTN_CORE_BACKWARD_H
#define ATTN_CORE_BACKWARD_H

#include "ops/ops.h"

/* Each grad_*.c file's formulas by id (NULL where another file has it). */
extern const attn__backward_fn attn__formulas_elementwise[ATTN__F_COUNT];
extern const attn__backward_fn attn__formulas_views[ATTN__F_COUNT];
extern const attn__backward_fn attn__formulas_reduce[ATTN__F_COUNT];
extern const attn__backward_fn attn__formulas_shape[ATTN__F_COUNT];

#endif
