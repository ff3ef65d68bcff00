/* SPDX-License-Identifier: MIT */
/* attn_lua.h: protected calls with the state's limits, and tensors handed
 * between C and Lua.
 *
 * Everything that may raise (allocating a userdata, looking up a global,
 * loading a chunk) runs inside a C function called through lua_pcall,
 * because a Lua error outside protected mode aborts the process.  Those
 * helpers are pushed with lua_pushcfunction and their C arguments as light
 * userdata: neither allocates, so preparing a call cannot fail either. */
#include "host.h"

#include <lauxlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Protected calls                                                           */

/* The message (or the error object's __tostring) plus a traceback. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* The outermost call of a state starts its instruction and time budget and
   makes its memory budget the thread's current one. */
static void enter(host_ctx *c) {
  if (!c || c->depth++ > 0) return;
  attn__host_reset_limits(c);
  c->saved_current = attn_budget_set_current(c->budget);
  /* The time budget is also the thread's deadline, which long kernels
     poll (attn.h): a state without one keeps the host's. */
  c->saved_deadline = attn_deadline_current();
  if (c->time_limit > 0) attn_deadline_set_current(c->deadline);
  c->saved_grad = attn_grad_enabled();
}

static void leave(host_ctx *c) {
  if (!c || --c->depth > 0) return;
  attn_budget_set_current(c->saved_current);
  attn_deadline_set_current(c->saved_deadline);
  /* a call that raised left its state's grad mode on the thread */
  attn_set_grad_enabled(c->saved_grad);
}

/* A failure once the time budget is spent is the limit's doing: a kernel
   that stopped at the deadline ("sdpa: time limit reached") raises an
   ordinary Lua error before the hook has run.  The state is then
   exhausted, as if the hook had seen it. */
static void note_deadline(host_ctx *c) {
  if (c && !c->exhausted && c->time_limit > 0 && attn__host_now() >= c->deadline) c->exhausted = EXHAUSTED_TIME;
}

static attn_status status_of(host_ctx *c, int lst) {
  if (lst != LUA_OK && lst != LUA_ERRMEM) note_deadline(c);
  switch (lst) {
  case LUA_OK: return ATTN_OK;
  case LUA_ERRMEM: return ATTN_ERR_NOMEM;
  case LUA_ERRERR: /* the handler failed: only memory can make it */
    return c && c->exhausted ? ATTN_ERR_LIMIT : ATTN_ERR_NOMEM;
  default: return c && c->exhausted ? ATTN_ERR_LIMIT : ATTN_ERR_SCRIPT;
  }
}

static attn_status call_at(lua_State *L, int nargs, int nresults, const char *who) {
  int func = lua_gettop(L) - nargs;
  if (nargs < 0 || func < 1)
    return attn_set_error(ATTN_ERR_ARG, "%s: expected a function below %d arguments on the stack", who, nargs);
  if (!lua_checkstack(L, 3)) return attn_set_error(ATTN_ERR_ARG, "%s: no room on the Lua stack", who);
  host_ctx *c = attn__host_ctx(L);
  enter(c);
  lua_pushcfunction(L, msghandler);
  lua_insert(L, func);
  int lst = lua_pcall(L, nargs, nresults, func);
  lua_remove(L, func);
  attn_status st = status_of(c, lst);
  /* Lua's own allocation failure says only "not enough memory": under a
     cap, say which cap and how full it was, as attn's refusals do */
  char capmsg[160] = "";
  if (st == ATTN_ERR_NOMEM && c && c->budget) {
    const char *m = lua_tostring(L, -1);
    if (m && strcmp(m, "not enough memory") == 0)
      snprintf(capmsg, sizeof capmsg, "not enough memory: a Lua object did not fit, cap %lld MB (%lld MB in use)",
               (long long)(attn_budget_limit(c->budget) >> 20), (long long)(attn_budget_used(c->budget) >> 20));
    lua_gc(L, LUA_GCCOLLECT); /* what the failed script left is garbage now: make room for the next call */
  }
  leave(c);
  if (st != ATTN_OK) {
    const char *msg = capmsg[0] ? capmsg : lua_tostring(L, -1);
    attn_set_error(st, "%s", msg ? msg : "(error object is not a string)");
  }
  return st;
}

attn_status attn_lua_call(lua_State *L, int nargs, int nresults) {
  return call_at(L, nargs, nresults, "attn_lua_call");
}

/* Inserts the trampoline fn and its light-userdata argument below the
   nargs values on top of the stack. */
static int insert_trampoline(lua_State *L, int nargs, lua_CFunction fn, void *arg) {
  if (nargs < 0 || lua_gettop(L) < nargs || !lua_checkstack(L, 5)) return 0;
  lua_pushcfunction(L, fn);
  lua_insert(L, -nargs - 1);
  lua_pushlightuserdata(L, arg);
  lua_insert(L, -nargs - 1);
  return 1;
}

/* Calls the function now at `slot` (below the arguments) and returns
   everything it returned. */
static int finish_call(lua_State *L, int slot) {
  int nargs = lua_gettop(L) - slot;
  lua_call(L, nargs, LUA_MULTRET);
  return lua_gettop(L) - slot + 1;
}

static int call_global_t(lua_State *L) {
  const char *name = lua_touserdata(L, 1);
  lua_remove(L, 1);
  if (lua_getglobal(L, name) != LUA_TFUNCTION) {
    if (luaL_getmetafield(L, -1, "__call") == LUA_TNIL)
      return luaL_error(L, "global '%s' is not a function (a %s value)", name, luaL_typename(L, -1));
    lua_pop(L, 1); /* callable through __call: the value itself is called */
  }
  lua_insert(L, 1);
  return finish_call(L, 1);
}

attn_status attn_lua_call_global(lua_State *L, const char *name, int nargs, int nresults) {
  if (!name || !insert_trampoline(L, nargs, call_global_t, (void *)name))
    return attn_set_error(ATTN_ERR_ARG, "attn_lua_call_global: bad arguments or no room on the Lua stack");
  return call_at(L, nargs + 1, nresults, "attn_lua_call_global");
}

/* What a chunk is loaded from. */
typedef struct chunk_src {
  const char *code, *chunkname, *path;
  size_t size;
  int load_status; /* a failed load: LUA_ERRSYNTAX, LUA_ERRFILE or LUA_ERRMEM */
} chunk_src;

static int run_chunk_t(lua_State *L) {
  chunk_src *src = lua_touserdata(L, 1);
  lua_remove(L, 1);
  int st = src->path ? luaL_loadfilex(L, src->path, "t")
                     : luaL_loadbufferx(L, src->code, src->size, src->chunkname ? src->chunkname : src->code, "t");
  if (st != LUA_OK) {
    /* Not raised: a load error needs no traceback.  It is returned as the
       only result and the caller turns it into a failure. */
    src->load_status = st;
    return 1; /* the message on top */
  }
  lua_insert(L, 1);
  return finish_call(L, 1);
}

static attn_status run_chunk(lua_State *L, chunk_src *src, int nargs, int nresults, const char *who) {
  int base = lua_gettop(L) - nargs; /* results start at base + 1 */
  if (!insert_trampoline(L, nargs, run_chunk_t, src))
    return attn_set_error(ATTN_ERR_ARG, "%s: bad arguments or no room on the Lua stack", who);
  attn_status st = call_at(L, nargs + 1, nresults == LUA_MULTRET ? LUA_MULTRET : (nresults > 1 ? nresults : 1), who);
  if (st == ATTN_OK && src->load_status != LUA_OK) {
    lua_settop(L, base + 1); /* the message */
    st = src->load_status == LUA_ERRFILE  ? ATTN_ERR_IO
         : src->load_status == LUA_ERRMEM ? ATTN_ERR_NOMEM
                                          : ATTN_ERR_SCRIPT;
    const char *msg = lua_tostring(L, -1);
    attn_set_error(st, "%s", msg ? msg : "cannot load the chunk");
  } else if (st == ATTN_OK && nresults != LUA_MULTRET) {
    lua_settop(L, base + nresults);
  }
  return st;
}

attn_status attn_lua_dostring(lua_State *L, const char *code, const char *chunkname, int nargs, int nresults) {
  if (!code) return attn_set_error(ATTN_ERR_ARG, "attn_lua_dostring: code is NULL");
  chunk_src src = {code, chunkname, NULL, strlen(code), LUA_OK};
  return run_chunk(L, &src, nargs, nresults, "attn_lua_dostring");
}

attn_status attn_lua_dofile(lua_State *L, const char *path, int nargs, int nresults) {
  if (!path) return attn_set_error(ATTN_ERR_ARG, "attn_lua_dofile: path is NULL");
  chunk_src src = {NULL, NULL, path, 0, LUA_OK};
  return run_chunk(L, &src, nargs, nresults, "attn_lua_dofile");
}

static int require_t(lua_State *L) {
  lua_settop(L, 0);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "attn");
  lua_call(L, 1, 1);
  return 1;
}

attn_status attn_lua_require(lua_State *L) {
  if (!lua_checkstack(L, 3)) return attn_set_error(ATTN_ERR_ARG, "attn_lua_require: no room on the Lua stack");
  lua_pushcfunction(L, require_t);
  return call_at(L, 0, 1, "attn_lua_require");
}

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */

static int push_tensor_t(lua_State *L) {
  attn_tensor *t = lua_touserdata(L, 1);
  attn__host_ensure_core(L);
  attnL_push(L, attn_tensor_retain(t)); /* the box owns the new reference */
  return 1;
}

/* Runs fn(arg) in protected mode (no limits: host work) and keeps its one
   result; on failure nothing is left on the stack. */
static attn_status protected_push(lua_State *L, lua_CFunction fn, void *arg, const char *who) {
  if (!lua_checkstack(L, 4)) return attn_set_error(ATTN_ERR_NOMEM, "%s: no room on the Lua stack", who);
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, arg);
  int lst = lua_pcall(L, 1, 1, 0);
  if (lst != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    attn_status st =
        attn_set_error(lst == LUA_ERRMEM ? ATTN_ERR_NOMEM : ATTN_ERR_ARG, "%s: %s", who, msg ? msg : "error");
    lua_pop(L, 1);
    return st;
  }
  return ATTN_OK;
}

attn_status attn_lua_push_tensor(lua_State *L, attn_tensor *t) {
  if (!t) return attn_set_error(ATTN_ERR_ARG, "attn_lua_push_tensor: tensor is NULL");
  return protected_push(L, push_tensor_t, t, "attn_lua_push_tensor");
}

typedef struct wrap_args {
  float *data;
  int ndim;
  const int64_t *shape, *strides;
  attn_release_fn release;
  void *ctx;
  attn_status st;
} wrap_args;

static int push_buffer_t(lua_State *L) {
  wrap_args *a = lua_touserdata(L, 1);
  attn__host_ensure_core(L);
  /* The box exists before the buffer is wrapped: once attn_wrap succeeded
     nothing can fail any more, so the release callback never runs for a
     push that failed. */
  attn_tensor **box = attnL_newbox(L);
  a->st = attn_wrap(a->data, a->ndim, a->shape, a->strides, a->release, a->ctx, box);
  if (a->st != ATTN_OK) return attnL_error(L);
  return 1;
}

attn_status attn_lua_push_buffer(lua_State *L, float *data, int ndim, const int64_t *shape, const int64_t *strides,
                                 attn_release_fn release, void *ctx) {
  wrap_args a = {data, ndim, shape, strides, release, ctx, ATTN_OK};
  attn_status st = protected_push(L, push_buffer_t, &a, "attn_lua_push_buffer");
  return st != ATTN_OK && a.st != ATTN_OK ? a.st : st;
}

attn_tensor *attn_lua_to_tensor(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return NULL;
  /* luaL_testudata without the chance of raising: compare with the
     registry's metatable directly. */
  lua_getfield(L, LUA_REGISTRYINDEX, ATTN_TENSOR_MT); /* a plain table: no metamethods */
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  if (!same) return NULL;
  attn_tensor **box = lua_touserdata(L, idx);
  return *box;
}

typedef struct get_args {
  int idx;
  attn_tensor *out;
} get_args;

static int get_tensor_t(lua_State *L) {
  get_args *a = lua_touserdata(L, 1);
  attn__host_ensure_core(L);
  lua_pushvalue(L, 2);
  attn_tensor *t = attnL_totensor(L, -1, "attn_lua_get_tensor", "value");
  a->out = attn_tensor_retain(t);
  return 0;
}

attn_status attn_lua_get_tensor(lua_State *L, int idx, attn_tensor **out) {
  attn_tensor *t = attn_lua_to_tensor(L, idx);
  if (t) {
    *out = attn_tensor_retain(t);
    return ATTN_OK;
  }
  int ty = lua_type(L, idx);
  if (ty != LUA_TNUMBER && ty != LUA_TTABLE)
    return attn_set_error(ATTN_ERR_ARG, "attn_lua_get_tensor: expected a tensor, number or table at index %d (got %s)",
                          idx, ty == LUA_TUSERDATA ? "a userdata that is not a live tensor" : lua_typename(L, ty));
  if (!lua_checkstack(L, 4)) return attn_set_error(ATTN_ERR_NOMEM, "attn_lua_get_tensor: no room on the Lua stack");
  idx = lua_absindex(L, idx);
  get_args a = {idx, NULL};
  lua_pushcfunction(L, get_tensor_t);
  lua_pushlightuserdata(L, &a);
  lua_pushvalue(L, idx);
  int lst = lua_pcall(L, 2, 0, 0);
  if (lst != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    attn_status st = attn_set_error(lst == LUA_ERRMEM ? ATTN_ERR_NOMEM : ATTN_ERR_ARG, "%s", msg ? msg : "error");
    lua_pop(L, 1);
    return st;
  }
  *out = a.out;
  return ATTN_OK;
}
