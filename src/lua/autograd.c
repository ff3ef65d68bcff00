/* SPDX-License-Identifier: MIT */
/* Lua binding: autograd (requires_grad, grad, backward, no_grad, detach). */
#include "binding.h"
#include "openers.h"

#include <stdlib.h>
#include <string.h>

/* t:requires_grad_([flag = true]) -> t */
static int m_requires_grad_(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  int on = attnL_optbool(L, 2, 1);
  if (attn_requires_grad_(t, on)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

/* The Lua thread running t:backward(), for the Lua backward functions of
   attn._custom_record (NULL outside backward).  A backward function may not
   start another backward: the engine's scratch belongs to the running one. */
static _Thread_local lua_State *backward_L;

/* Where a Lua backward function's error waits while the engine unwinds, so
   that t:backward() raises that same value. */
#define HOOK_ERROR_KEY "attn.backward_fn_error"

/* t:backward([gradient [, retain_graph]]) */
static int m_backward(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  const attn_tensor *g = NULL;
  if (!lua_isnoneornil(L, 2)) g = attnL_totensor(L, 2, "backward", "gradient");
  int retain = attnL_optbool(L, 3, 0);
  if (backward_L)
    return attnL_raise(L, "backward: cannot run backward inside a backward hook (the running backward is not "
                          "finished); compute what the hook needs from the gradients it receives");
  backward_L = L;
  attn_status st = attn_backward(t, g, retain);
  backward_L = NULL;
  if (st) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, HOOK_ERROR_KEY) != LUA_TNIL) {
      lua_pushnil(L);
      lua_setfield(L, LUA_REGISTRYINDEX, HOOK_ERROR_KEY);
      return lua_error(L); /* the Lua backward function's own error */
    }
    return attnL_error(L);
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Nodes whose backward is a Lua function (module hooks)                     */

typedef struct {
  lua_State *main; /* the state's main thread: its registry holds fn */
  int ref;         /* fn in the registry */
  int n;           /* number of inputs */
} lua_custom;

typedef struct {
  const lua_custom *c;
  const attn_tensor *g;
  attn_tensor **grads;
} lua_custom_call;

static void lua_custom_free(void *p) {
  lua_custom *c = p;
  if (c && c->main) luaL_unref(c->main, LUA_REGISTRYINDEX, c->ref);
  free(c);
}

/* Runs under lua_pcall: grads = fn(g), a list of n tensors. */
static int lua_custom_run(lua_State *L) {
  lua_custom_call *a = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, a->c->ref);
  attnL_push(L, attn_tensor_retain((attn_tensor *)a->g));
  lua_call(L, 1, 1);
  if (!lua_istable(L, -1))
    return luaL_error(L, "backward: a Lua backward function must return a list of %d tensors (got %s)", a->c->n,
                      luaL_typename(L, -1));
  for (int i = 0; i < a->c->n; i++) {
    lua_geti(L, -1, i + 1);
    attn_tensor *t = attnL_test(L, -1);
    if (!t)
      return luaL_error(L, "backward: a Lua backward function returned %s as gradient %d (a tensor expected)",
                        luaL_typename(L, -1), i + 1);
    a->grads[i] = attn_tensor_retain(t);
    lua_pop(L, 1);
  }
  return 0;
}

static attn_status lua_custom_backward(void *ctx, const attn_tensor *g, attn_tensor **grads) {
  lua_State *L = backward_L;
  if (!L) return attn_set_error(ATTN_ERR_STATE, "backward: a Lua backward function needs a backward started from Lua");
  if (!lua_checkstack(L, 8)) return attn_set_error(ATTN_ERR_NOMEM, "backward: out of Lua stack");
  lua_custom_call a = {ctx, g, grads};
  bool prev = attnL_grad_enabled(L);
  attnL_set_grad_enabled(L, false); /* hooks run without recording, like torch's */
  lua_pushcfunction(L, lua_custom_run);
  lua_pushlightuserdata(L, &a);
  int st = lua_pcall(L, 1, 0, 0);
  attnL_set_grad_enabled(L, prev);
  attn_set_grad_enabled(false); /* the engine's own mode */
  if (st != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    attn_status err = attn_set_error(ATTN_ERR_STATE, "%s", msg ? msg : "backward: a Lua backward function failed");
    lua_setfield(L, LUA_REGISTRYINDEX, HOOK_ERROR_KEY);
    return err;
  }
  return ATTN_OK;
}

/* attn._custom_record(data, inputs, fn [, name]) -> a tensor with data's
   values (sharing its storage) recorded as the output of a node over the
   tensors of the list inputs, whose backward is fn(grad) -> {grad_1, ...}
   (one tensor per input, shaped like it), run without grad recording.
   Without an input that requires grad: an alias of data outside the graph.
   For attn.nn's backward hooks; not a public API. */
static int l_custom_record(lua_State *L) {
  attn_tensor *data = attnL_check(L, 1);
  const attn_tensor **inputs;
  luaL_checktype(L, 3, LUA_TFUNCTION);
  const char *name = luaL_optstring(L, 4, "BackwardHookFunctionBackward");
  lua_settop(L, 4);
  int n = attnL_checktensorlist(L, 2, &inputs, "_custom_record");
  lua_custom *c = calloc(1, sizeof *c);
  if (!c) return luaL_error(L, "not enough memory");
  lua_pushvalue(L, 3);
  c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  c->main = lua_tothread(L, -1);
  lua_pop(L, 1);
  c->n = n;
  attn_tensor **box = attnL_newbox(L);
  attn_status st = attn_detach(data, box);
  if (st) {
    lua_custom_free(c);
    return attnL_error(L);
  }
  /* the node owns c from here on, also on failure */
  if (attn_custom_record(*box, name, n, inputs, lua_custom_backward, c, lua_custom_free)) return attnL_error(L);
  attnL_account(L, box);
  return 1;
}

static int m_detach(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_detach(t, box));
}

/* t:detach_(): cuts t itself from the graph (a leaf that needs no grad) */
static int m_detach_(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor *d;
  if (attn_detach(t, &d)) return attnL_error(L);
  /* swap the records: t keeps its storage but loses its history */
  struct attn_autograd *ag = t->autograd;
  t->autograd = d->autograd;
  d->autograd = ag;
  attn_tensor_release(d);
  lua_settop(L, 1);
  return 1;
}

static int m_retain_grad(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (attn_retain_grad(t)) return attnL_error(L);
  return 0;
}

/* Properties read through t.name (see t_index in tensor.c). */
int attnL_property(lua_State *L, attn_tensor *t, const char *key) {
  if (strcmp(key, "grad") == 0) {
    attn_tensor *g = attn_grad(t);
    if (g)
      attnL_push(L, attn_tensor_retain(g));
    else
      lua_pushnil(L);
    return 1;
  }
  if (strcmp(key, "requires_grad") == 0) {
    lua_pushboolean(L, attn_requires_grad(t));
    return 1;
  }
  if (strcmp(key, "grad_fn") == 0) {
    const char *name = attn_grad_fn_name(t);
    if (name)
      lua_pushstring(L, name);
    else
      lua_pushnil(L);
    return 1;
  }
  if (strcmp(key, "is_leaf") == 0) {
    lua_pushboolean(L, attn_is_leaf(t));
    return 1;
  }
  if (strcmp(key, "data") == 0) { /* torch's x.data: x:detach(), same storage, out of the graph */
    attn_tensor **box = attnL_newbox(L);
    attnL_result(L, attn_detach(t, box));
    return 1;
  }
  return 0;
}

/* t.grad = g | nil, t.requires_grad = flag; returns 0 for other keys */
int attnL_set_property(lua_State *L, attn_tensor *t, const char *key, int value) {
  if (strcmp(key, "grad") == 0) {
    attn_tensor *g = lua_isnil(L, value) ? NULL : attnL_totensor(L, value, "grad", "value");
    if (attn_set_grad(t, g)) attnL_error(L);
    return 1;
  }
  if (strcmp(key, "requires_grad") == 0) {
    luaL_checktype(L, value, LUA_TBOOLEAN);
    if (attn_requires_grad_(t, lua_toboolean(L, value))) attnL_error(L);
    return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Gradient mode                                                             */

static int l_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, attnL_grad_enabled(L));
  return 1;
}

static int l_set_grad_enabled(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  bool prev = attnL_grad_enabled(L);
  attnL_set_grad_enabled(L, lua_toboolean(L, 1));
  lua_pushboolean(L, prev);
  return 1;
}

/* A to-be-closed guard restoring the previous mode:
     local g <close> = attn.no_grad()  */
#define GRAD_GUARD_MT "attn.GradModeGuard"

static int guard_close(lua_State *L) {
  int *prev = luaL_checkudata(L, 1, GRAD_GUARD_MT);
  if (*prev >= 0) attnL_set_grad_enabled(L, *prev != 0);
  *prev = -1;
  return 0;
}

static int grad_mode_call(lua_State *L, int enabled) {
  if (lua_isnoneornil(L, 1)) {
    int *prev = lua_newuserdatauv(L, sizeof *prev, 0);
    *prev = -1;
    luaL_setmetatable(L, GRAD_GUARD_MT);
    *prev = attnL_grad_enabled(L);
    attnL_set_grad_enabled(L, enabled);
    return 1;
  }
  /* attn.no_grad(fn, ...): runs fn with the mode set, restores it even if
     fn raises, and returns fn's results */
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 1;
  bool prev = attnL_grad_enabled(L);
  attnL_set_grad_enabled(L, enabled);
  int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
  attnL_set_grad_enabled(L, prev);
  if (st != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

static int l_no_grad(lua_State *L) { return grad_mode_call(L, 0); }
static int l_enable_grad(lua_State *L) { return grad_mode_call(L, 1); }

/* attn.embedding(weight, ids [, padding_idx]): 1-based ids and padding_idx */
static int l_embedding(lua_State *L) {
  attn_tensor *w = attnL_check(L, 1);
  if (w->ndim != 2) {
    char sb[64];
    return attnL_raise(L, "embedding: weight must be 2-d [num_embeddings, dim], got %s",
                       attn_shape_str(w->ndim, w->shape, sb, sizeof sb));
  }
  int64_t pad = -1;
  if (!lua_isnoneornil(L, 3)) {
    int64_t p = attnL_checkint(L, 3, "embedding", "padding_idx");
    int64_t v = w->shape[0];
    if (p == 0 || p < -v || p > v)
      return attnL_raise(L, "embedding: padding_idx %d out of range (expected 1..%d or negative)", (int)p, (int)v);
    pad = p < 0 ? p + v : p - 1;
  }
  lua_settop(L, 2);
  attn_tensor *ids = attnL_checkindex(L, 2, w->shape[0], "embedding", "ids");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_embedding(w, ids, pad, box));
}

static const luaL_Reg methods[] = {{"requires_grad_", m_requires_grad_},
                                   {"backward", m_backward},
                                   {"detach", m_detach},
                                   {"detach_", m_detach_},
                                   {"retain_grad", m_retain_grad},
                                   {NULL, NULL}};

static const luaL_Reg module_fns[] = {{"no_grad", l_no_grad},
                                      {"enable_grad", l_enable_grad},
                                      {"is_grad_enabled", l_is_grad_enabled},
                                      {"set_grad_enabled", l_set_grad_enabled},
                                      {"embedding", l_embedding},
                                      {"_custom_record", l_custom_record},
                                      {NULL, NULL}};

void attnL_open_autograd(lua_State *L, int module, int methods_idx) {
  attnL_register(L, module, methods_idx, methods);
  attnL_register(L, module, 0, module_fns);
  if (luaL_newmetatable(L, GRAD_GUARD_MT)) {
    lua_pushcfunction(L, guard_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, guard_close);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
}
