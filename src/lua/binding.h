/* Shared helpers of the Lua binding (attn/core.so and the attn binary).
 *
 * Rules, after Lua's own libraries and LPeg:
 *  - luaL_check* raises, lua_to* never does.
 *  - A result userdata is pushed in a safe (NULL) state *before* the core
 *    call that fills it, so an error can never leak it; temporaries made
 *    from numbers or tables live in userdata on the stack for the same
 *    reason.
 *  - The core is 0-based; every index and dim is converted here.
 */
#ifndef ATTN_LUA_BINDING_H
#define ATTN_LUA_BINDING_H

#include <lauxlib.h>
#include <lua.h>

#include "attn.h"

#define ATTN_TENSOR_MT "attn.Tensor"

/* The tensor in a userdata at idx (raises if it is not a live tensor). */
attn_tensor *attnL_check(lua_State *L, int idx);
/* Like attnL_check but returns NULL for anything that is not a tensor. */
attn_tensor *attnL_test(lua_State *L, int idx);
/* Accepts a tensor, a number (0-d tensor) or a nested table of numbers;
   non-tensors are converted and replace the stack slot so that the
   temporary is owned by Lua.  fn/arg name the caller in messages. */
attn_tensor *attnL_totensor(lua_State *L, int idx, const char *fn, const char *arg);

/* Pushes an empty (NULL) tensor box; fill *box, then call attnL_account. */
attn_tensor **attnL_newbox(lua_State *L);
/* The tensor box at idx (open or closed); raises if it is not a tensor. */
attn_tensor **attnL_checkbox(lua_State *L, int idx);
/* Pushes t, taking over the caller's reference (t may not be NULL). */
void attnL_push(lua_State *L, attn_tensor *t);
/* Tells Lua's GC about the storage behind t the first time it is seen,
   so loops of temporaries stay bounded. */
void attnL_account(lua_State *L, const attn_tensor *t);
/* Raises the core's last error as a Lua error. */
int attnL_error(lua_State *L);
/* Completes a core call whose result went into the box on top of the
   stack: raises on failure, else accounts the result; returns 1. */
int attnL_result(lua_State *L, attn_status st);

/* A 1-based (or negative, from the end) dim argument converted to 0-based
   for a tensor of ndim dims; extra = 1 allows ndim itself (unsqueeze). */
int attnL_checkdim(lua_State *L, int arg, int ndim, int extra, const char *fn);
/* An optional dim: returns def (already 0-based) when the arg is absent. */
int attnL_optdim(lua_State *L, int arg, int ndim, int def, const char *fn);
/* An integer argument; raises for non-integral numbers. */
int64_t attnL_checkint(lua_State *L, int arg, const char *fn, const char *name);
/* A shape given as varargs (2, 3) or a table {2, 3} starting at arg;
   returns ndim.  Sizes must be >= 0 (allow_neg1 allows -1 entries). */
int attnL_checkshape(lua_State *L, int arg, int64_t *shape, int allow_neg1, const char *fn);
/* An index tensor given with 1-based values (tensor or table) converted
   to a fresh 0-based tensor pushed on the stack; values are checked to be
   integers in [1, limit] (limit < 0: no upper check). */
attn_tensor *attnL_checkindex(lua_State *L, int arg, int64_t limit, const char *fn, const char *name);
/* Optional boolean argument. */
int attnL_optbool(lua_State *L, int arg, int def);
/* A {t1, t2, ...} table of tensors (numbers and nested tables are
   converted); returns the count and a Lua-owned array.  Pushes two values
   (the array and a holder of converted temporaries) that must stay on the
   stack while the list is used. */
int attnL_checktensorlist(lua_State *L, int arg, const attn_tensor ***list, const char *fn);

/* Each binding file registers its functions both in the module table
   (attn.f(t, ...)) and, when methods is nonzero, in the tensor methods
   (t:f(...)). */
void attnL_register(lua_State *L, int module, int methods, const luaL_Reg *fns);

void attnL_open_tensor(lua_State *L, int module, int methods);
void attnL_open_math(lua_State *L, int module, int methods);
void attnL_open_reduce(lua_State *L, int module, int methods);
void attnL_open_shape(lua_State *L, int module, int methods);
void attnL_open_random(lua_State *L, int module, int methods);
void attnL_open_io(lua_State *L, int module, int methods);
void attnL_open_autograd(lua_State *L, int module, int methods);
void attnL_open_attention(lua_State *L, int module, int methods);
/* attn.plot's C part (cairo), as the table attn.core._plot. */
void attnL_open_plot(lua_State *L, int module, int methods);
/* attn.dist's C part (src/dist over MPI), as the table attn.core._dist. */
void attnL_open_dist(lua_State *L, int module, int methods);
/* t.grad, t.requires_grad, t.grad_fn, t.is_leaf: pushes the value and
   returns 1, or returns 0 for an unknown key. */
int attnL_property(lua_State *L, attn_tensor *t, const char *key);
/* t.grad = g, t.requires_grad = b: returns 0 for an unknown key. */
int attnL_set_property(lua_State *L, attn_tensor *t, const char *key, int value);

#endif
