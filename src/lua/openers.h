/* SPDX-License-Identifier: MIT */
/* The openers of attn.core: one per binding file, each adding its
 * functions to the module table and, where they are tensor methods, to the
 * methods table (attnL_register).  module.c calls them in the order of
 * ATTN_OPENERS; a new binding file adds one line to each list here. */
#ifndef ATTN_LUA_OPENERS_H
#define ATTN_LUA_OPENERS_H

#include <lua.h>

typedef void (*attnL_opener)(lua_State *L, int module, int methods);

void attnL_open_tensor(lua_State *L, int module, int methods);
void attnL_open_math(lua_State *L, int module, int methods);
void attnL_open_reduce(lua_State *L, int module, int methods);
void attnL_open_shape(lua_State *L, int module, int methods);
void attnL_open_random(lua_State *L, int module, int methods);
void attnL_open_io(lua_State *L, int module, int methods);
void attnL_open_autograd(lua_State *L, int module, int methods);
void attnL_open_attention(lua_State *L, int module, int methods);
/* sort/topk, scatter and index ops, nonzero, masked_select, bucketize (ops.c). */
void attnL_open_ops(lua_State *L, int module, int methods);
/* attn.plot's C part (cairo), as the table attn.core._plot. */
void attnL_open_plot(lua_State *L, int module, int methods);
/* attn.dist's C part (src/dist over MPI), as the table attn.core._dist. */
void attnL_open_dist(lua_State *L, int module, int methods);

#define ATTN_OPENERS                                                                                                   \
  attnL_open_tensor, attnL_open_math, attnL_open_reduce, attnL_open_shape, attnL_open_random, attnL_open_io,           \
      attnL_open_autograd, attnL_open_attention, attnL_open_ops, attnL_open_plot, attnL_open_dist

#endif
