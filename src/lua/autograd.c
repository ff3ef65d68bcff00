/* SPDX-License-Identifier: MIT */
/* Lua binding: autograd (requires_grad, grad, backward, no_grad, detach). */
#include "binding.h"
#include "openers.h"

#include <string.h>

/* t:requires_grad_([flag = true]) -> t */
static int m_requires_grad_(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  int on = attnL_optbool(L, 2, 1);
  if (attn_requires_grad_(t, on)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

/* t:backward([gradient [, retain_graph]]) */
static int m_backward(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  const attn_tensor *g = NULL;
  if (!lua_isnoneornil(L, 2)) g = attnL_totensor(L, 2, "backward", "gradient");
  int retain = attnL_optbool(L, 3, 0);
  if (attn_backward(t, g, retain)) return attnL_error(L);
  return 0;
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
