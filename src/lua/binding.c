/* The attn.core module: tensor userdata, argument conversion, registration. */
#include "binding.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Userdata                                                                  */

/* The tensor metatable is also kept in the registry under this address
   (a light-userdata key: no string interning as with luaL_getmetatable),
   and carries the same address at [1]: a userdata is a tensor when its
   metatable's [1] is that light userdata, which Lua code cannot forge.
   This check is as strict as luaL_testudata's and skips the registry. */
static const char tensor_mt_key = 0;

static void push_tensor_mt(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    luaL_getmetatable(L, ATTN_TENSOR_MT);
  }
}

attn_tensor **attnL_newbox(lua_State *L) {
  attn_tensor **box = lua_newuserdatauv(L, sizeof *box, 1);
  *box = NULL; /* safe before anything can fail */
  push_tensor_mt(L);
  lua_setmetatable(L, -2);
  return box;
}

/* The box at idx if it is a tensor userdata (open or closed), else NULL. */
static attn_tensor **test_box(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return NULL;
  lua_rawgeti(L, -1, 1);
  int same = lua_touserdata(L, -1) == &tensor_mt_key && lua_type(L, -1) == LUA_TLIGHTUSERDATA;
  lua_pop(L, 2);
  return same ? lua_touserdata(L, idx) : NULL;
}

attn_tensor **attnL_checkbox(lua_State *L, int idx) {
  attn_tensor **box = test_box(L, idx);
  return box ? box : luaL_checkudata(L, idx, ATTN_TENSOR_MT); /* raises with the usual message */
}

void attnL_account(lua_State *L, const attn_tensor *t) {
  attn_storage *s = t->storage;
  if (s->gc_reported || s->release_ctx) return;
  s->gc_reported = 1;
  int64_t kb = s->numel * (int64_t)sizeof(float) / 1024;
  /* Lua cannot see this memory; a GC step "as if kb were allocated" makes
     the collector keep pace with big temporaries. */
  if (kb > 0) lua_gc(L, LUA_GCSTEP, (int)(kb > 1 << 30 ? 1 << 30 : kb));
}

void attnL_push(lua_State *L, attn_tensor *t) {
  attn_tensor **box = attnL_newbox(L);
  *box = t;
  attnL_account(L, t);
}

int attnL_error(lua_State *L) { return luaL_error(L, "%s", attn_last_error()); }

int attnL_result(lua_State *L, attn_status st) {
  if (st) return attnL_error(L);
  attn_tensor **box = lua_touserdata(L, -1);
  attnL_account(L, *box);
  return 1;
}

attn_tensor *attnL_test(lua_State *L, int idx) {
  attn_tensor **box = test_box(L, idx);
  return box ? *box : NULL;
}

attn_tensor *attnL_check(lua_State *L, int idx) {
  attn_tensor **box = attnL_checkbox(L, idx);
  if (!*box) luaL_argerror(L, idx, "tensor is closed");
  return *box;
}

/* ------------------------------------------------------------------------ */
/* Nested tables -> tensors                                                  */

typedef struct {
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
} table_shape;

static void table_shape_of(lua_State *L, int idx, table_shape *ts, const char *fn, const char *arg) {
  ts->ndim = 0;
  lua_pushvalue(L, idx);
  for (;;) {
    if (lua_type(L, -1) != LUA_TTABLE) break;
    if (ts->ndim == ATTN_MAX_DIMS)
      luaL_error(L, "%s: argument '%s' nests deeper than %d dims", fn, arg, ATTN_MAX_DIMS);
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    ts->shape[ts->ndim++] = n;
    if (n == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

/* Fills data (row-major) from the table at idx, checking it is rectangular. */
static void table_fill(lua_State *L, int idx, const table_shape *ts, int depth, float **data,
                       const char *fn, const char *arg) {
  luaL_checkstack(L, 2, "nested table");
  int64_t n = ts->shape[depth];
  if ((int64_t)lua_rawlen(L, idx) != n)
    luaL_error(L, "%s: argument '%s' is not rectangular: expected %d entries at depth %d, got %d", fn, arg,
               (int)n, depth + 1, (int)lua_rawlen(L, idx));
  for (int64_t i = 1; i <= n; i++) {
    int ty = lua_rawgeti(L, idx, (lua_Integer)i);
    if (depth + 1 < ts->ndim) {
      if (ty != LUA_TTABLE)
        luaL_error(L, "%s: argument '%s' is not rectangular: entry %d at depth %d is a %s, expected a table",
                   fn, arg, (int)i, depth + 1, luaL_typename(L, -1));
      table_fill(L, lua_gettop(L), ts, depth + 1, data, fn, arg);
    } else if (ty == LUA_TNUMBER) {
      *(*data)++ = (float)lua_tonumber(L, -1);
    } else if (ty == LUA_TBOOLEAN) {
      *(*data)++ = lua_toboolean(L, -1) ? 1.0f : 0.0f;
    } else {
      luaL_error(L, "%s: argument '%s' must hold numbers: entry %d at depth %d is a %s", fn, arg, (int)i,
                 depth + 1, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
  }
}

/* The nesting of a table whose shape holds a 0 (always the last dim: the
   [1] chain stops there): every entry above it must be a table of the
   right length.  Tables shared between entries are checked once per
   depth (seen: table -> depth), so that a few shared tables cannot make
   the check walk a huge empty list that no allocation bounds. */
static void table_check_empty(lua_State *L, int idx, const table_shape *ts, int depth, int seen, const char *fn,
                              const char *arg) {
  luaL_checkstack(L, 3, "nested table");
  lua_pushvalue(L, idx);
  int done = lua_rawget(L, seen) == LUA_TNUMBER && lua_tointeger(L, -1) == depth;
  lua_pop(L, 1);
  if (done) return;
  lua_pushvalue(L, idx);
  lua_pushinteger(L, depth);
  lua_rawset(L, seen);
  int64_t n = ts->shape[depth];
  if ((int64_t)lua_rawlen(L, idx) != n)
    luaL_error(L, "%s: argument '%s' is not rectangular: expected %d entries at depth %d, got %d", fn, arg,
               (int)n, depth + 1, (int)lua_rawlen(L, idx));
  for (int64_t i = 1; i <= n; i++) {
    if (lua_rawgeti(L, idx, (lua_Integer)i) != LUA_TTABLE)
      luaL_error(L, "%s: argument '%s' is not rectangular: entry %d at depth %d is a %s, expected a table", fn,
                 arg, (int)i, depth + 1, luaL_typename(L, -1));
    table_check_empty(L, lua_gettop(L), ts, depth + 1, seen, fn, arg);
    lua_pop(L, 1);
  }
}

/* Only plain lists convert: an object (a table with a metatable, such as a
   module) or a table whose keys are not 1..n is a mistake, not a [0]. */
static void check_plain_table(lua_State *L, int idx, const char *fn, const char *arg) {
  if (lua_getmetatable(L, idx)) {
    const char *name = lua_getfield(L, -1, "__name") == LUA_TSTRING ? lua_tostring(L, -1) : "an object";
    luaL_error(L, "%s: argument '%s' must be a tensor, number or table of numbers (got %s)", fn, arg, name);
  }
  if (lua_rawlen(L, idx) == 0) {
    lua_pushnil(L);
    if (lua_next(L, idx))
      luaL_error(L, "%s: argument '%s' must be a list of numbers (a table with keys 1..n), got a table with a %s key",
                 fn, arg, luaL_typename(L, -2));
  }
}

static attn_tensor *table_to_tensor(lua_State *L, int idx, const char *fn, const char *arg) {
  idx = lua_absindex(L, idx);
  check_plain_table(L, idx, fn, arg);
  table_shape ts;
  table_shape_of(L, idx, &ts, fn, arg);
  attn_tensor **box = attnL_newbox(L);
  if (attn_empty(ts.ndim, ts.shape, box)) attnL_error(L);
  float *p = attn_tensor_data(*box);
  if (attn_tensor_numel(*box) > 0) {
    table_fill(L, idx, &ts, 0, &p, fn, arg);
  } else { /* no numbers, but {{}, 5} is still not rectangular */
    lua_newtable(L);
    table_check_empty(L, idx, &ts, 0, lua_gettop(L), fn, arg);
    lua_pop(L, 1);
  }
  attnL_account(L, *box);
  return *box;
}

attn_tensor *attnL_totensor(lua_State *L, int idx, const char *fn, const char *arg) {
  idx = lua_absindex(L, idx);
  attn_tensor *t = attnL_test(L, idx);
  if (t) return t;
  int ty = lua_type(L, idx);
  if (ty == LUA_TNUMBER) {
    attn_tensor **box = attnL_newbox(L);
    if (attn_scalar((float)lua_tonumber(L, idx), box)) attnL_error(L);
    t = *box;
  } else if (ty == LUA_TTABLE) {
    t = table_to_tensor(L, idx, fn, arg);
  } else if (ty == LUA_TUSERDATA && test_box(L, idx)) {
    return attnL_check(L, idx); /* a closed tensor: raises */
  } else {
    luaL_error(L, "%s: argument '%s' must be a tensor, number or table (got %s)", fn, arg,
               luaL_typename(L, idx));
    return NULL;
  }
  lua_replace(L, idx);
  return t;
}

/* ------------------------------------------------------------------------ */
/* Integers, dims, shapes                                                    */

int64_t attnL_checkint(lua_State *L, int arg, const char *fn, const char *name) {
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, arg, &isnum);
  if (!isnum) {
    if (lua_type(L, arg) == LUA_TNUMBER)
      luaL_error(L, "%s: argument '%s' must be an integer (got %s)", fn, name, lua_tostring(L, arg));
    luaL_error(L, "%s: argument '%s' must be an integer (got %s)", fn, name, luaL_typename(L, arg));
  }
  return (int64_t)v;
}

int attnL_checkdim(lua_State *L, int arg, int ndim, int extra, const char *fn) {
  int64_t d = attnL_checkint(L, arg, fn, "dim");
  int64_t n = ndim + extra;
  if (n == 0) n = 1; /* a 0-d tensor accepts dim 1 / -1 like torch's 0 / -1 */
  if (d < -n || d > n || d == 0)
    luaL_error(L, "%s: dim %I out of range for a %d-d tensor (expected 1..%d or -%d..-1)", fn, (lua_Integer)d, ndim,
               (int)n, (int)n);
  return (int)(d < 0 ? d + n : d - 1);
}

int attnL_optdim(lua_State *L, int arg, int ndim, int def, const char *fn) {
  if (lua_isnoneornil(L, arg)) return def;
  return attnL_checkdim(L, arg, ndim, 0, fn);
}

int attnL_checkshape(lua_State *L, int arg, int64_t *shape, int allow_neg1, const char *fn) {
  int ndim = 0;
  if (lua_type(L, arg) == LUA_TTABLE) {
    int n = (int)lua_rawlen(L, arg);
    if (n > ATTN_MAX_DIMS) luaL_error(L, "%s: %d dims requested, at most %d supported", fn, n, ATTN_MAX_DIMS);
    for (int i = 1; i <= n; i++) {
      lua_rawgeti(L, arg, i);
      int isnum = 0;
      lua_Integer v = lua_tointegerx(L, -1, &isnum);
      if (!isnum) luaL_error(L, "%s: size %d of the shape must be an integer (got %s)", fn, i, luaL_typename(L, -1));
      lua_pop(L, 1);
      shape[ndim++] = v;
    }
  } else {
    int top = lua_gettop(L);
    /* the shape starts at arg: anything there but a number is a mistake
       (not an empty shape) */
    if (arg <= top && lua_type(L, arg) != LUA_TNUMBER)
      luaL_error(L, "%s: size 1 of the shape must be an integer (got %s)", fn, luaL_typename(L, arg));
    for (int i = arg; i <= top && lua_type(L, i) == LUA_TNUMBER; i++) {
      if (ndim == ATTN_MAX_DIMS) luaL_error(L, "%s: at most %d dims supported", fn, ATTN_MAX_DIMS);
      shape[ndim++] = attnL_checkint(L, i, fn, "size");
    }
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0 && !(allow_neg1 && shape[i] == -1))
      luaL_error(L, "%s: invalid size %I at position %d of the shape", fn, (lua_Integer)shape[i], i + 1);
  return ndim;
}

attn_tensor *attnL_checkindex(lua_State *L, int arg, int64_t limit, const char *fn, const char *name) {
  attn_tensor *src = attnL_totensor(L, arg, fn, name);
  attn_tensor **box = attnL_newbox(L);
  if (attn_empty(src->ndim, src->shape, box)) attnL_error(L);
  /* contiguous copy first, then one linear pass: convert and validate */
  if (attn_copy_(*box, src)) attnL_error(L);
  float *dst = attn_tensor_data(*box);
  int64_t n = attn_tensor_numel(src);
  for (int64_t i = 0; i < n; i++) {
    float v = dst[i];
    if (!(v == floorf(v)))
      luaL_error(L, "%s: argument '%s' must hold integer indices (found %f)", fn, name, (lua_Number)v);
    if (v < 1 || (limit >= 0 && v > (float)limit)) {
      /* an integer as such; huge values (and inf) as floats, never cast */
      if (fabsf(v) < 1e15f) lua_pushinteger(L, (lua_Integer)v);
      else lua_pushnumber(L, (lua_Number)v);
      const char *vs = lua_tostring(L, -1);
      if (limit >= 0)
        luaL_error(L, "%s: index %s in '%s' out of range (expected 1..%I)", fn, vs, name, (lua_Integer)limit);
      luaL_error(L, "%s: index %s in '%s' out of range (expected 1 or more)", fn, vs, name);
    }
    dst[i] = v - 1.0f;
  }
  attnL_account(L, *box);
  return *box;
}

int attnL_optbool(lua_State *L, int arg, int def) {
  if (lua_isnoneornil(L, arg)) return def;
  luaL_checktype(L, arg, LUA_TBOOLEAN);
  return lua_toboolean(L, arg);
}

int attnL_checktensorlist(lua_State *L, int arg, const attn_tensor ***list, const char *fn) {
  arg = lua_absindex(L, arg);
  luaL_checktype(L, arg, LUA_TTABLE);
  int n = (int)lua_rawlen(L, arg);
  const attn_tensor **arr = lua_newuserdatauv(L, sizeof *arr * (size_t)(n ? n : 1), 0);
  lua_newtable(L); /* keeps converted numbers/tables alive; the caller's table is not touched */
  int holder = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, arg, i);
    attn_tensor *t = attnL_test(L, -1);
    if (!t) {
      t = attnL_totensor(L, -1, fn, "tensors");
      lua_rawseti(L, holder, i);
    } else {
      lua_pop(L, 1);
    }
    arr[i - 1] = t;
  }
  *list = arr;
  return n;
}

/* ------------------------------------------------------------------------ */
/* Registration                                                              */

void attnL_register(lua_State *L, int module, int methods, const luaL_Reg *fns) {
  for (; fns->name; fns++) {
    lua_pushcfunction(L, fns->func);
    if (methods) {
      lua_pushvalue(L, -1);
      lua_setfield(L, methods, fns->name);
    }
    lua_setfield(L, module, fns->name);
  }
}

int luaopen_attn_core(lua_State *L) {
  lua_newtable(L); /* module */
  int module = lua_gettop(L);
  lua_newtable(L); /* methods */
  int methods = lua_gettop(L);
  luaL_newmetatable(L, ATTN_TENSOR_MT);
  lua_pushlightuserdata(L, (void *)&tensor_mt_key);
  lua_rawseti(L, -2, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
  attnL_open_tensor(L, module, methods);
  attnL_open_math(L, module, methods);
  attnL_open_reduce(L, module, methods);
  attnL_open_shape(L, module, methods);
  attnL_open_random(L, module, methods);
  attnL_open_io(L, module, methods);
  attnL_open_autograd(L, module, methods);
  attnL_open_attention(L, module, methods);
  attnL_open_plot(L, module, methods);
  attnL_open_dist(L, module, methods);
  /* The Lua side adds methods of its own through attn.core._methods. */
  lua_pushvalue(L, methods);
  lua_setfield(L, module, "_methods");
  lua_pop(L, 1); /* methods */
  return 1;
}
