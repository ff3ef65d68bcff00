/* SPDX-License-Identifier: MIT */
/* Shared helpers of the Lua binding (attn/core.so and the attn binary).
 *
 * Rules, after Lua's own libraries and LPeg:
 *  - luaL_check* raises, lua_to* never does.
 *  - A result userdata is pushed in a safe (NULL) state *before* the core
 *    call that fills it, so an error can never leak it; temporaries made
 *    from numbers or tables live in userdata on the stack for the same
 *    reason.
 *  - The core is 0-based; every index and dim is converted here.
 *  - Borrowing: while a binding function holds a pointer it does not own,
 *    Lua code may run under it (an option table's __index, a finalizer
 *    started by any allocation, a __close) and free what it points to.
 *    So every function Lua can call goes through attnL_pushfn/attnL_register
 *    (a call scope), and attnL_check/attnL_test/attnL_totensor pin each
 *    tensor they hand out until that function returns or raises: closing
 *    or collecting a tensor mid-call only drops the Lua handle.  Other
 *    borrowed things (a generator's state, a string) stay in their stack
 *    slot for the whole call.  New code must still read options and
 *    convert arguments before the core call, and never keep a pointer
 *    into a tensor's data across Lua code that could resize or replace it.
 *  - Memory: each box tells Lua's collector the true size of what it holds
 *    (header and storage), so loops of small temporaries stay bounded too.
 */
#ifndef ATTN_LUA_BINDING_H
#define ATTN_LUA_BINDING_H

#include <lauxlib.h>
#include <lua.h>

#include "attn.h"

#define ATTN_TENSOR_MT "attn.Tensor"
/* Appended to a message about an index, id or dim of 0: the torch habit
   it most likely comes from, and what to write instead. */
#define ATTNL_ID_HINT(v) ((v) == 0 ? " (ids are 1-based; torch's 0-based ids need +1)" : "")
#define ATTNL_INDEX_HINT(v) ((v) == 0 ? " (indices are 1-based; torch's x[0] is x[1])" : "")
#define ATTNL_DIM_HINT(v) ((v) == 0 ? " (dims are 1-based; torch's dim=0 is 1, and -1 stays -1)" : "")

#include <stdbool.h>
#include <stdint.h>

/* The binding's context of one Lua state (registry): call scopes, pinned
   tensors, the state's grad mode and its GC accounting. */
typedef struct attnL_state attnL_state;
typedef struct {
  bool grad_enabled; /* the thread's mode before the call */
} attnL_saved;
#define ATTNL_FRAME() ((uintptr_t)__builtin_frame_address(0))
/* The state's context, or NULL before attn.core was opened in it. */
attnL_state *attnL_state_of(lua_State *L);
/* Pushes fn as a Lua function that runs inside a call scope (pins are
   released when it returns or raises; the state's grad mode is installed
   for the thread).  Every C function of the binding is pushed this way,
   except finalizers. */
void attnL_pushfn(lua_State *L, lua_CFunction fn);
/* The same by hand, for a metamethod's slow path: frame must be
   ATTNL_FRAME() of the function that calls both. */
void attnL_enter(lua_State *L, attnL_state *S, uintptr_t frame, attnL_saved *saved);
void attnL_leave(lua_State *L, attnL_state *S, uintptr_t frame, const attnL_saved *saved);
/* Frees a generator at once, or when the state's running calls are over
   (a finalizer called by hand while a call holds it). */
void attnL_free_generator(lua_State *L, attn_generator *g);
/* The state's default generator (random.c): a sandbox's own (given by
   attnL_own_default_generator), else NULL, the process-wide one.  Never
   raises. */
attn_generator *attnL_default_generator(lua_State *L);
void attnL_own_default_generator(lua_State *L);
/* Grad mode belongs to the state: set it through these. */
void attnL_set_grad_enabled(lua_State *L, bool enabled);
bool attnL_grad_enabled(lua_State *L);

/* The tensor in a userdata at idx (raises if it is not a live tensor). */
attn_tensor *attnL_check(lua_State *L, int idx);
/* Like attnL_check but returns NULL for anything that is not a tensor. */
attn_tensor *attnL_test(lua_State *L, int idx);
/* Accepts a tensor, a number (0-d tensor) or a nested table of numbers;
   non-tensors are converted and replace the stack slot so that the
   temporary is owned by Lua.  fn/arg name the caller in messages. */
attn_tensor *attnL_totensor(lua_State *L, int idx, const char *fn, const char *arg);

/* A nested table converted to a fresh tensor of dtype dt, pushed on the
   stack.  dt == ATTNL_INFER infers it as torch.tensor does: bool when
   every entry is a Lua boolean, int64 when the numbers are all Lua
   integers (booleans mixed in count as 0/1), float32 when any number is a
   Lua float or the table is empty.  Other dt < 0: float32, or bool for a
   table of booleans (the conversion of op arguments). */
#define ATTNL_INFER (-2)
attn_tensor *attnL_table_to_tensor(lua_State *L, int idx, int dt, const char *fn, const char *arg);

/* Pushes an empty (NULL) tensor box; fill *box, then call attnL_account. */
attn_tensor **attnL_newbox(lua_State *L);
/* The tensor box at idx (open or closed); raises if it is not a tensor. */
attn_tensor **attnL_checkbox(lua_State *L, int idx);
/* Pushes t, taking over the caller's reference (t may not be NULL). */
void attnL_push(lua_State *L, attn_tensor *t);
/* Adds 1 to every element of t, a fresh contiguous int64 or float32 index
   tensor from the core: core indices are 0-based, Lua's 1-based. */
void attnL_to_one_based(attn_tensor *t);
/* Tells Lua's GC the true size of what the filled box holds (header, and
   storage the first time it is seen), so loops of temporaries of any size
   stay bounded. */
void attnL_account(lua_State *L, attn_tensor **box);
/* The same for other memory a userdata holds (a generator): bytes of GC
   debt for the state S (NULL: looked up). */
void attnL_gc_debt(lua_State *L, attnL_state *S, int64_t bytes);
/* Raises the core's last error as a Lua error, positioned at the user's
   line: the first Lua frame that is not a module of the attn package, so
   an error met inside attn.nn or attn.F points at the script that called
   them (attnL_where). */
int attnL_error(lua_State *L);
/* Pushes "file:line: " of that frame (luaL_where(L, 1) if there is none). */
void attnL_where(lua_State *L);
/* luaL_error with attnL_where's position. */
int attnL_raise(lua_State *L, const char *fmt, ...);
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
/* Pushes the element at storage position pos of t as a Lua value: a
   float for float32, an integer for int64, a boolean for bool. */
void attnL_pushelem(lua_State *L, const attn_tensor *t, int64_t pos);
/* A dtype argument: a dtype object (attn.int64), a name ("int64", "long",
   "float32", "float", "bool") or a tensor (its dtype).  Raises otherwise. */
attn_dtype attnL_checkdtype(lua_State *L, int arg, const char *fn);
/* The dtype field of an options table at arg (def when absent or not a table). */
attn_dtype attnL_optdtype_field(lua_State *L, int arg, attn_dtype def, const char *fn);
/* The creation functions' options {dtype =, requires_grad =}: after the
   new tensor is on top, sets its requires_grad when the table at opt asks
   (opt <= 0 or not a table: nothing); returns 1.  attnL_optdtype_field
   checks the keys. */
int attnL_creation_grad(lua_State *L, int opt);
/* Pushes the dtype object attn.<name>. */
void attnL_pushdtype(lua_State *L, attn_dtype dt);

/* Options tables (one trailing table of torch's keywords): raises at the
   user's line for a key of the table at idx that the NULL-ended list known
   lacks, naming every valid option and the nearest one ("did you mean");
   nothing when idx is not a table.  attnL_unknown_option raises that
   message for the key at stack index key. */
void attnL_checkoptions(lua_State *L, int idx, const char *fn, const char *const *known);
/* Whether the value at idx is torch's keywords: a plain table (not a
   tensor, no metatable) whose first key is a string.  An empty table or a
   list is an argument, not options (as for the declared expansion). */
bool attnL_is_options(lua_State *L, int idx);
int attnL_unknown_option(lua_State *L, const char *fn, int key, const char *const *known);
/* Option values, one family with one signature (L, idx, fn, key, def):
   idx is the stack index of the value (a positional argument, or
   attnL_option_field's push of opts[key]); nil or none gives def, a value of
   another type raises "fn: option 'key' must be a boolean (got string)".
   attnL_option_string's string stays on the stack for the call;
   attnL_option_choice takes one of the NULL-ended choices (NULL for def). */
int attnL_option_field(lua_State *L, int opts, const char *key); /* pushes opts[key] (nil for opts 0); its index */
bool attnL_option_bool(lua_State *L, int idx, const char *fn, const char *key, bool def);
double attnL_option_number(lua_State *L, int idx, const char *fn, const char *key, double def);
const char *attnL_option_string(lua_State *L, int idx, const char *fn, const char *key, const char *def);
const char *attnL_option_choice(lua_State *L, int idx, const char *fn, const char *key, const char *const *choices);

/* Optional boolean argument. */
int attnL_optbool(lua_State *L, int arg, int def);
/* A {t1, t2, ...} table of tensors (numbers and nested tables are
   converted); returns the count and a Lua-owned array.  Pushes two values
   (the array and a holder of converted temporaries) that must stay on the
   stack while the list is used. */
int attnL_checktensorlist(lua_State *L, int arg, const attn_tensor ***list, const char *fn);

/* Each binding file registers its functions both in the module table
   (attn.f(t, ...)) and, when methods is nonzero, in the tensor methods
   (t:f(...)), each through attnL_pushfn. */
void attnL_register(lua_State *L, int module, int methods, const luaL_Reg *fns);
/* luaL_setfuncs without upvalues, through attnL_pushfn. */
void attnL_setfuncs(lua_State *L, const luaL_Reg *fns);
/* core._unwrap_method(f): the function form of a tensor method (attn.sum
   for attn._methods.sum, which is a closure of its own), else f itself. */
int attnL_unwrap_method(lua_State *L);
/* core._declare(f, nreq, expander): f expands a trailing options table
   (torch's keywords) with expander (attn/signature.lua). */
int attnL_declare(lua_State *L);
/* The same for the methods of a userdata class (a generator's, recv "g"):
   a call without self (g.seed() for g:seed()) says to write ':'. */
void attnL_setmethods(lua_State *L, const luaL_Reg *fns, const char *recv);

/* Makes the state's context and the tensor metatable (registered, for
   the openers to fill); module.c calls it first. */
void attnL_init_core(lua_State *L);
/* t.grad, t.requires_grad, t.grad_fn, t.is_leaf: pushes the value and
   returns 1, or returns 0 for an unknown key. */
int attnL_property(lua_State *L, attn_tensor *t, const char *key);
/* t.grad = g, t.requires_grad = b: returns 0 for an unknown key. */
int attnL_set_property(lua_State *L, attn_tensor *t, const char *key, int value);

#endif
