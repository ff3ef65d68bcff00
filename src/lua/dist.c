/* SPDX-License-Identifier: MIT */
/* Lua binding of attn.dist (src/dist/): argument conversion only; the Lua
 * API is lua/attn/dist.lua, over the table attn.core._dist.
 *
 * Safety: every tensor an async operation uses is retained by its work
 * (src/dist), so a handle may outlive the Lua values it was made from; the
 * work and reducer userdata are pushed empty (NULL) before the C call that
 * fills them, and their __gc/__close accept an empty box. */
#include "binding.h"
#include "openers.h"
#include "dist/dist.h"

#include <string.h>

#define WORK_MT "attn.DistWork"
#define REDUCER_MT "attn.DistReducer"

static int dist_error(lua_State *L) { return attnL_error(L); }

static attn_dist_op check_op(lua_State *L, int arg, const char *fn) {
  static const char *const names[] = {"sum", "avg", "max", "min", NULL};
  static const attn_dist_op ops[] = {ATTN_DIST_SUM, ATTN_DIST_AVG, ATTN_DIST_MAX, ATTN_DIST_MIN};
  const char *s = luaL_optstring(L, arg, "sum");
  for (int i = 0; names[i]; i++)
    if (strcmp(s, names[i]) == 0) return ops[i];
  attnL_raise(L, "%s: op must be \"sum\", \"avg\", \"max\" or \"min\", got \"%s\"", fn, s);
  return ATTN_DIST_SUM;
}

static int check_rank_arg(lua_State *L, int arg, const char *fn, const char *name) {
  int64_t v = attnL_checkint(L, arg, fn, name);
  if (v < 0 || v > 0x7fffffff) attnL_raise(L, "%s: %s must be a rank >= 0 (0-based), got %d", fn, name, (int)v);
  return (int)v;
}

/* ------------------------------------------------------------------------ */
/* Work handles                                                              */

static attn_dist_work **new_work_box(lua_State *L) {
  attn_dist_work **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, WORK_MT);
  return box;
}

static int work_gc(lua_State *L) {
  attn_dist_work **box = luaL_checkudata(L, 1, WORK_MT);
  attn_dist_work *w = *box;
  *box = NULL;
  attn_dist_work_free(w); /* waits for a running operation: MPI owns its buffers */
  return 0;
}

/* h:wait() -> the result tensor (allgather, reduce_scatter) or nothing */
static int work_wait(lua_State *L) {
  attn_dist_work **box = luaL_checkudata(L, 1, WORK_MT);
  if (!*box) return attnL_raise(L, "wait: the handle was already closed");
  if (attn_dist_wait(*box)) return dist_error(L);
  attn_tensor *out = attn_dist_work_output(*box);
  if (!out) return 0;
  attnL_push(L, attn_tensor_retain(out));
  return 1;
}

static int work_is_completed(lua_State *L) {
  attn_dist_work **box = luaL_checkudata(L, 1, WORK_MT);
  lua_pushboolean(L, !*box || attn_dist_test(*box));
  return 1;
}

/* Runs a started operation: async gives the handle on the stack top,
   otherwise waits and frees it; returns the Lua results. */
static int finish(lua_State *L, attn_status st, attn_dist_work **box, int async) {
  if (st) return dist_error(L);
  if (async) return 1;
  st = attn_dist_wait(*box);
  attn_tensor *out = st ? NULL : attn_dist_work_output(*box);
  if (out) attn_tensor_retain(out);
  attn_dist_work *w = *box;
  *box = NULL;
  attn_dist_work_free(w);
  if (st) return dist_error(L);
  if (!out) return 0;
  attnL_push(L, out);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* World                                                                     */

static int l_init(lua_State *L) {
  if (attn_dist_init()) return dist_error(L);
  return 0;
}

#define INT_GETTER(name, expr)                                                                                         \
  static int name(lua_State *L) {                                                                                      \
    if (attn_dist_init()) return dist_error(L);                                                                        \
    lua_pushinteger(L, (expr));                                                                                        \
    return 1;                                                                                                          \
  }
INT_GETTER(l_rank, attn_dist_rank())
INT_GETTER(l_size, attn_dist_size())
INT_GETTER(l_local_rank, attn_dist_local_rank())

static int l_compiled(lua_State *L) {
  lua_pushboolean(L, attn_dist_compiled());
  return 1;
}

static int l_uses_mpi(lua_State *L) {
  lua_pushboolean(L, attn_dist_uses_mpi());
  return 1;
}

static int l_backend(lua_State *L) {
  lua_pushstring(L, attn_dist_backend());
  return 1;
}

static int l_set_timeout(lua_State *L) {
  if (attn_dist_set_timeout(luaL_checknumber(L, 1))) return dist_error(L);
  return 0;
}

static int l_timeout(lua_State *L) {
  lua_pushnumber(L, attn_dist_timeout());
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Collectives: (args..., async) */

/* The blocking forms call the blocking C functions (MPI's blocking
   collectives under the watchdog); async ones return a work handle. */
static int l_barrier(lua_State *L) {
  int async = lua_toboolean(L, 1);
  if (!async) return attn_dist_barrier() ? dist_error(L) : 0;
  attn_dist_work **box = new_work_box(L);
  return finish(L, attn_dist_ibarrier(box), box, async);
}

/* allreduce(t, op, async) */
static int l_allreduce(lua_State *L) {
  attn_dist_op op = check_op(L, 2, "allreduce");
  int async = lua_toboolean(L, 3);
  attn_dist_work **box = async ? new_work_box(L) : NULL;
  attn_tensor *t = attnL_check(L, 1); /* last: nothing allocates while t is borrowed */
  if (!async) return attn_dist_allreduce(t, op) ? dist_error(L) : 0;
  return finish(L, attn_dist_iallreduce(t, op, box), box, async);
}

/* broadcast(t, root, async) */
static int l_broadcast(lua_State *L) {
  int root = check_rank_arg(L, 2, "broadcast", "root");
  int async = lua_toboolean(L, 3);
  attn_dist_work **box = async ? new_work_box(L) : NULL;
  attn_tensor *t = attnL_check(L, 1);
  if (!async) return attn_dist_broadcast(t, root) ? dist_error(L) : 0;
  return finish(L, attn_dist_ibroadcast(t, root, box), box, async);
}

/* allgather(t, async) */
static int l_allgather(lua_State *L) {
  int async = lua_toboolean(L, 2);
  attn_tensor **res = async ? NULL : attnL_newbox(L);
  attn_dist_work **box = async ? new_work_box(L) : NULL;
  attn_tensor *t = attnL_check(L, 1);
  if (!async) return attnL_result(L, attn_dist_allgather(t, res));
  return finish(L, attn_dist_iallgather(t, box), box, async);
}

/* reduce_scatter(t, op, async) */
static int l_reduce_scatter(lua_State *L) {
  attn_dist_op op = check_op(L, 2, "reduce_scatter");
  int async = lua_toboolean(L, 3);
  attn_tensor **res = async ? NULL : attnL_newbox(L);
  attn_dist_work **box = async ? new_work_box(L) : NULL;
  attn_tensor *t = attnL_check(L, 1);
  if (!async) return attnL_result(L, attn_dist_reduce_scatter(t, op, res));
  return finish(L, attn_dist_ireduce_scatter(t, op, box), box, async);
}

/* send(t, dst, tag, async) and recv(t, src, tag, async) */
static int point_to_point(lua_State *L, bool send) {
  int peer = check_rank_arg(L, 2, send ? "send" : "recv", send ? "dst" : "src");
  int tag = (int)luaL_optinteger(L, 3, 0);
  int async = lua_toboolean(L, 4);
  attn_dist_work **box = async ? new_work_box(L) : NULL;
  attn_tensor *t = attnL_check(L, 1);
  if (!async) return (send ? attn_dist_send(t, peer, tag) : attn_dist_recv(t, peer, tag)) ? dist_error(L) : 0;
  return finish(L, send ? attn_dist_isend(t, peer, tag, box) : attn_dist_irecv(t, peer, tag, box), box, async);
}
static int l_send(lua_State *L) { return point_to_point(L, true); }
static int l_recv(lua_State *L) { return point_to_point(L, false); }

/* ring_attention(q, k, v, causal, scale) */
static int l_ring_attention(lua_State *L) {
  int causal = lua_toboolean(L, 4);
  double scale = luaL_optnumber(L, 5, 0.0);
  attn_tensor **box = attnL_newbox(L);
  attn_tensor *q = attnL_check(L, 1), *k = attnL_check(L, 2), *v = attnL_check(L, 3);
  return attnL_result(L, attn_dist_ring_attention(q, k, v, causal, scale, box));
}

/* ------------------------------------------------------------------------ */
/* Gradient reducer (nn.DistributedDataParallel) */

static attn_dist_reducer **check_reducer(lua_State *L) {
  attn_dist_reducer **box = luaL_checkudata(L, 1, REDUCER_MT);
  if (!*box) attnL_raise(L, "DistributedDataParallel: the reducer was closed");
  return box;
}

static int reducer_gc(lua_State *L) {
  attn_dist_reducer **box = luaL_checkudata(L, 1, REDUCER_MT);
  attn_dist_reducer *r = *box;
  *box = NULL;
  attn_dist_reducer_free(r);
  return 0;
}

/* reducer({params...}, bucket_bytes) */
static int l_reducer(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  attn_dist_reducer **box = lua_newuserdatauv(L, sizeof *box, 1); /* 3: safe (NULL) before anything can fail */
  *box = NULL;
  luaL_setmetatable(L, REDUCER_MT);
  lua_pushvalue(L, 1); /* keep the parameter table (and so the tensors' boxes) alive */
  lua_setiuservalue(L, 3, 1);
  int n = (int)lua_rawlen(L, 1);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    if (!attnL_test(L, -1)) return attnL_raise(L, "DistributedDataParallel: parameter %d is not a tensor", i + 1);
    lua_pop(L, 1);
  }
  const attn_tensor **list;
  attnL_checktensorlist(L, 1, &list, "DistributedDataParallel"); /* all tensors already: converts nothing */
  /* the reducer retains every parameter before anything else runs */
  if (attn_dist_reducer_new(n, (attn_tensor *const *)list, (int64_t)bytes, box)) return dist_error(L);
  lua_settop(L, 3);
  return 1;
}

static int reducer_enable(lua_State *L) {
  attn_dist_reducer **box = check_reducer(L);
  attn_dist_reducer_enable(*box, lua_toboolean(L, 2));
  return 0;
}

static int reducer_finish(lua_State *L) {
  attn_dist_reducer **box = check_reducer(L);
  if (attn_dist_reducer_finish(*box)) return dist_error(L);
  return 0;
}

static int reducer_pending(lua_State *L) {
  attn_dist_reducer **box = check_reducer(L);
  lua_pushboolean(L, attn_dist_reducer_pending(*box));
  return 1;
}

static int reducer_buckets(lua_State *L) {
  attn_dist_reducer **box = check_reducer(L);
  lua_pushinteger(L, attn_dist_reducer_buckets(*box));
  return 1;
}

static int reducer_overlapped(lua_State *L) {
  attn_dist_reducer **box = check_reducer(L);
  lua_pushinteger(L, (lua_Integer)attn_dist_reducer_overlapped(*box));
  return 1;
}

/* The metatable name_mt of a handle (work or reducer): methods under
   __index, gc as both __gc and __close. */
static void handle_metatable(lua_State *L, const char *name_mt, const luaL_Reg *methods, const char *what,
                             lua_CFunction gc) {
  if (luaL_newmetatable(L, name_mt)) {
    lua_newtable(L);
    attnL_setmethods(L, methods, what);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
}

void attnL_open_dist(lua_State *L, int module, int methods) {
  (void)methods;
  static const luaL_Reg work_methods[] = {{"wait", work_wait}, {"is_completed", work_is_completed}, {NULL, NULL}};
  static const luaL_Reg reducer_methods[] = {{"enable", reducer_enable},         {"finish", reducer_finish},
                                             {"buckets", reducer_buckets},       {"pending", reducer_pending},
                                             {"overlapped", reducer_overlapped}, {NULL, NULL}};
  static const luaL_Reg fns[] = {{"init", l_init},
                                 {"rank", l_rank},
                                 {"size", l_size},
                                 {"local_rank", l_local_rank},
                                 {"compiled", l_compiled},
                                 {"uses_mpi", l_uses_mpi},
                                 {"backend", l_backend},
                                 {"set_timeout", l_set_timeout},
                                 {"timeout", l_timeout},
                                 {"barrier", l_barrier},
                                 {"allreduce", l_allreduce},
                                 {"broadcast", l_broadcast},
                                 {"allgather", l_allgather},
                                 {"reduce_scatter", l_reduce_scatter},
                                 {"send", l_send},
                                 {"recv", l_recv},
                                 {"reducer", l_reducer},
                                 {"ring_attention", l_ring_attention},
                                 {NULL, NULL}};
  handle_metatable(L, WORK_MT, work_methods, "work", work_gc);
  handle_metatable(L, REDUCER_MT, reducer_methods, "reducer", reducer_gc);
  lua_newtable(L);
  attnL_setfuncs(L, fns);
  lua_setfield(L, module, "_dist"); /* wrapped by lua/attn/dist.lua */
}
