/* SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L
/* Lua binding: tensor creation, metadata, views, indexing and metamethods. */
#include "binding.h"
#include "openers.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Lifetime                                                                  */

static int t_gc(lua_State *L) {
  attn_tensor **box = attnL_checkbox(L, 1);
  attn_tensor_release(*box); /* NULL after a failed fill or a close; a running call keeps its pin */
  *box = NULL;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Dtypes: the objects attn.float32, attn.int64 and attn.bool (tables that
   print as "attn.int64", compare by identity and return themselves when
   called, so that both t.dtype and t:dtype() give one).                     */

static const char DTYPES_KEY[] = "attn.dtypes";
static const char DTYPE_MT[] = "attn.dtype";
static const char SHAPE_MT[] = "attn.Size";

void attnL_pushdtype(lua_State *L, attn_dtype dt) {
  lua_getfield(L, LUA_REGISTRYINDEX, DTYPES_KEY);
  lua_rawgeti(L, -1, (lua_Integer)dt + 1);
  lua_remove(L, -2);
}

static int dtype_of_object(lua_State *L, int arg) {
  arg = lua_absindex(L, arg);
  if (lua_type(L, arg) != LUA_TTABLE || !lua_getmetatable(L, arg)) return -1;
  luaL_getmetatable(L, DTYPE_MT);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  if (!same) return -1;
  lua_rawgeti(L, arg, 1);
  int id = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : -1;
  lua_pop(L, 1);
  return id;
}

attn_dtype attnL_checkdtype(lua_State *L, int arg, const char *fn) {
  arg = lua_absindex(L, arg);
  attn_dtype dt;
  if (lua_type(L, arg) == LUA_TSTRING) {
    if (attn_dtype_parse(lua_tostring(L, arg), &dt)) return dt;
    const char *name = lua_tostring(L, arg);
    attnL_raise(L,
                "%s: unknown dtype '%s' (expected \"float32\", \"int64\", \"bool\", or the storage dtypes "
                "\"float16\", \"bfloat16\", \"float64\")",
                fn, name);
  }
  attn_tensor *t = attnL_test(L, arg);
  if (t) return t->dtype;
  int id = dtype_of_object(L, arg);
  if (id >= 0 && id < ATTN_DTYPE_COUNT) return (attn_dtype)id;
  attnL_raise(L, "%s: expected a dtype (attn.float32, attn.int64, attn.bool or its name), got %s", fn,
              luaL_typename(L, arg));
  return ATTN_FLOAT32;
}

/* The options of the creation functions (zeros, ones, full, tensor,
   arange, linspace, eye, *_like; rand & co in random.c): torch's dtype and
   requires_grad (the others, device or layout, have no meaning here). */
static const char *const creation_keys[] = {"dtype", "requires_grad", NULL};

attn_dtype attnL_optdtype_field(lua_State *L, int arg, attn_dtype def, const char *fn) {
  if (lua_type(L, arg) != LUA_TTABLE || dtype_of_object(L, arg) >= 0) return def;
  attnL_checkoptions(L, arg, fn, creation_keys);
  lua_getfield(L, arg, "requires_grad");
  if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
    attnL_raise(L, "%s: requires_grad must be a boolean (got %s)", fn, luaL_typename(L, -1));
  lua_pop(L, 1);
  lua_getfield(L, arg, "dtype");
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return def;
  }
  attn_dtype dt = attnL_checkdtype(L, -1, fn);
  lua_pop(L, 1);
  return dt;
}

static int dtype_tostring(lua_State *L) {
  lua_rawgeti(L, 1, 2);
  lua_pushfstring(L, "attn.%s", lua_tostring(L, -1));
  return 1;
}

static int dtype_call(lua_State *L) {
  lua_settop(L, 1);
  return 1;
}

/* the shape table: callable, so t.shape and t:shape() both work */
static int shape_call(lua_State *L) {
  lua_settop(L, 1);
  return 1;
}

static void open_dtypes(lua_State *L, int module) {
  if (luaL_newmetatable(L, DTYPE_MT)) {
    lua_pushcfunction(L, dtype_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, dtype_call);
    lua_setfield(L, -2, "__call");
  }
  int mt = lua_gettop(L);
  lua_createtable(L, ATTN_DTYPE_COUNT, 0);
  for (int i = 0; i < ATTN_DTYPE_COUNT; i++) {
    lua_createtable(L, 2, 3);
    lua_pushinteger(L, i);
    lua_rawseti(L, -2, 1);
    lua_pushstring(L, attn_dtype_name((attn_dtype)i));
    lua_rawseti(L, -2, 2);
    lua_pushstring(L, attn_dtype_name((attn_dtype)i));
    lua_setfield(L, -2, "name");
    lua_pushboolean(L, i == ATTN_FLOAT32 || attn_dtype_is_storage((attn_dtype)i));
    lua_setfield(L, -2, "is_floating_point");
    lua_pushinteger(L, (lua_Integer)attn_dtype_size((attn_dtype)i));
    lua_setfield(L, -2, "itemsize");
    lua_pushvalue(L, mt);
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, module, attn_dtype_name((attn_dtype)i));
    lua_rawseti(L, -2, i + 1);
  }
  lua_rawgeti(L, -1, ATTN_INT64 + 1);
  lua_setfield(L, module, "long");
  lua_rawgeti(L, -1, ATTN_FLOAT32 + 1);
  lua_setfield(L, module, "float");
  lua_rawgeti(L, -1, ATTN_FLOAT16 + 1);
  lua_setfield(L, module, "half");
  lua_rawgeti(L, -1, ATTN_FLOAT64 + 1);
  lua_setfield(L, module, "double");
  lua_setfield(L, LUA_REGISTRYINDEX, DTYPES_KEY);
  lua_pop(L, 1);
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

/* The new tensor on top gets requires_grad = true when the options table
   at opt asks (torch.zeros(3, requires_grad=True)); returns 1. */
int attnL_creation_grad(lua_State *L, int opt) {
  if (opt <= 0 || lua_type(L, opt) != LUA_TTABLE) return 1;
  lua_getfield(L, opt, "requires_grad");
  int rg = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (rg && attn_requires_grad_(*attnL_checkbox(L, -1), true)) attnL_error(L);
  return 1;
}

/* Converts the tensor box on top to dt in place (a fresh result). */
static void convert_top(lua_State *L, attn_dtype dt) {
  attn_tensor **box = attnL_checkbox(L, -1);
  if ((*box)->dtype == dt) return;
  attn_tensor **nb = attnL_newbox(L);
  if (attn_to_dtype(*box, dt, nb)) attnL_error(L);
  attnL_account(L, nb);
  lua_remove(L, -2);
}

/* attn.tensor(data [, {dtype = ...}]): a fresh tensor from a nested table,
   a number or a tensor (always a copy, like torch.tensor).  Without a
   dtype it is inferred as torch 1.13 does: Lua integers (math.type 3)
   give int64, any Lua float (3.0) float32, Lua booleans alone bool
   (mixed with integers they count as 0/1), an empty table float32. */
static int l_tensor(lua_State *L) {
  luaL_checkany(L, 1);
  int has_dt = lua_type(L, 2) == LUA_TTABLE || lua_type(L, 2) == LUA_TSTRING;
  attn_dtype dt = lua_type(L, 2) == LUA_TSTRING ? attnL_checkdtype(L, 2, "tensor")
                                                : attnL_optdtype_field(L, 2, ATTN_FLOAT32, "tensor");
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_getfield(L, 2, "dtype");
    has_dt = !lua_isnil(L, -1);
    lua_pop(L, 1);
  }
  attn_tensor *src = attnL_test(L, 1);
  if (!src) {
    if (lua_type(L, 1) == LUA_TTABLE) {
      attnL_table_to_tensor(L, 1, has_dt ? (int)dt : ATTNL_INFER, "tensor", "data");
      return attnL_creation_grad(L, 2);
    }
    if (lua_type(L, 1) == LUA_TBOOLEAN) {
      attn_tensor **box = attnL_newbox(L);
      attnL_result(L, attn_scalar_dtype(ATTN_BOOL, lua_toboolean(L, 1), box));
      if (has_dt) convert_top(L, dt);
      return attnL_creation_grad(L, 2);
    }
    if (lua_type(L, 1) == LUA_TNUMBER && (!has_dt || dt == ATTN_INT64) && lua_isinteger(L, 1)) {
      attn_tensor **box = attnL_newbox(L);
      attnL_result(L, attn_full_i64(0, NULL, (int64_t)lua_tointeger(L, 1), box));
      return attnL_creation_grad(L, 2);
    }
    if (lua_type(L, 1) == LUA_TNUMBER && has_dt && attn_dtype_is_storage(dt)) {
      attn_tensor **box = attnL_newbox(L); /* a float64 keeps the Lua number exactly */
      attnL_result(L, attn_scalar_dtype(dt, lua_tonumber(L, 1), box));
      return attnL_creation_grad(L, 2);
    }
    attnL_totensor(L, 1, "tensor", "data");
    lua_pushvalue(L, 1); /* the conversion is already fresh */
    if (has_dt) convert_top(L, dt);
    return attnL_creation_grad(L, 2);
  }
  attn_tensor **box = attnL_newbox(L);
  attnL_result(L, attn_clone(src, box));
  if (has_dt) convert_top(L, dt);
  return attnL_creation_grad(L, 2);
}

typedef attn_status (*fill_fn)(int, const int64_t *, attn_tensor **);

static int make_filled(lua_State *L, const char *fn, fill_fn f) {
  int64_t shape[ATTN_MAX_DIMS];
  int nd = attnL_checkshape(L, 1, shape, 0, fn);
  int used = lua_type(L, 1) == LUA_TTABLE ? 1 : nd;
  attn_dtype dt = ATTN_FLOAT32;
  int opt = 0;
  if (lua_type(L, used + 1) == LUA_TTABLE) {
    dt = attnL_optdtype_field(L, used + 1, ATTN_FLOAT32, fn);
    opt = ++used;
  }
  if (lua_gettop(L) > used && !lua_isnil(L, used + 1))
    return attnL_raise(L, "%s: unexpected argument #%d (%s) after the shape", fn, used + 1, luaL_typename(L, used + 1));
  attn_tensor **box = attnL_newbox(L);
  attnL_result(L, f(nd, shape, box));
  convert_top(L, dt);
  return attnL_creation_grad(L, opt);
}

static int l_zeros(lua_State *L) { return make_filled(L, "zeros", attn_zeros); }
static int l_ones(lua_State *L) { return make_filled(L, "ones", attn_ones); }
/* zeroed: never leak old memory to scripts */
static attn_status zeroed_empty(int nd, const int64_t *shape, attn_tensor **out) {
  attn_status st = attn_empty(nd, shape, out);
  if (st == ATTN_OK) memset(attn_tensor_data(*out), 0, (size_t)attn_tensor_numel(*out) * sizeof(float));
  return st;
}
static int l_empty(lua_State *L) { return make_filled(L, "empty", zeroed_empty); }

/* attn.full(shape, value) with shape a table, or attn.full(2, 3, value) */
static int l_full(lua_State *L) {
  int64_t shape[ATTN_MAX_DIMS];
  int nd, value_arg;
  if (lua_type(L, 1) == LUA_TTABLE) {
    nd = attnL_checkshape(L, 1, shape, 0, "full");
    value_arg = 2;
  } else {
    value_arg = lua_gettop(L);
    if (value_arg < 1) return attnL_raise(L, "full: expected a shape and a fill value");
    nd = value_arg - 1;
    if (nd > ATTN_MAX_DIMS) return attnL_raise(L, "full: at most %d dims supported", ATTN_MAX_DIMS);
    for (int i = 0; i < nd; i++) {
      if (lua_isnil(L, i + 1)) return attnL_raise(L, "full: size %d is nil (every size must be an integer)", i + 1);
      shape[i] = attnL_checkint(L, i + 1, "full", "size");
      if (shape[i] < 0)
        return attnL_raise(L, "full: invalid size %I at position %d of the shape", (lua_Integer)shape[i], i + 1);
    }
  }
  /* torch 1.13 infers the dtype from the fill value: bool, int64 for a Lua
     integer (torch.full((2,), 3)), float32 for a Lua float */
  attn_dtype dt = lua_type(L, value_arg) == LUA_TBOOLEAN ? ATTN_BOOL
                  : lua_isinteger(L, value_arg)          ? ATTN_INT64
                                                         : ATTN_FLOAT32;
  dt = attnL_optdtype_field(L, value_arg + 1, dt, "full");
  double v;
  if (lua_type(L, value_arg) == LUA_TBOOLEAN)
    v = lua_toboolean(L, value_arg);
  else
    v = luaL_checknumber(L, value_arg);
  attn_tensor **box = attnL_newbox(L);
  if (dt == ATTN_INT64 && lua_isinteger(L, value_arg))
    attnL_result(L, attn_full_i64(nd, shape, (int64_t)lua_tointeger(L, value_arg), box));
  else
    attnL_result(L, attn_full_dtype(dt, nd, shape, v, box));
  return attnL_creation_grad(L, value_arg + 1);
}

/* zeros_like & co keep the input's dtype (torch) unless {dtype = } says */
static int like(lua_State *L, const char *fn, int kind) {
  attn_tensor *t = attnL_check(L, 1);
  int opt = kind == 2 ? 3 : 2;
  double v = kind;
  if (kind == 2) v = lua_type(L, 2) == LUA_TBOOLEAN ? lua_toboolean(L, 2) : luaL_checknumber(L, 2);
  attn_dtype dt = attnL_optdtype_field(L, opt, t->dtype, fn);
  attn_tensor **box = attnL_newbox(L);
  if (dt == ATTN_INT64 && kind == 2 && lua_isinteger(L, 2))
    attnL_result(L, attn_full_i64(t->ndim, t->shape, (int64_t)lua_tointeger(L, 2), box));
  else
    attnL_result(L, attn_full_dtype(dt, t->ndim, t->shape, v, box));
  return attnL_creation_grad(L, opt);
}
static int l_zeros_like(lua_State *L) { return like(L, "zeros_like", 0); }
static int l_ones_like(lua_State *L) { return like(L, "ones_like", 1); }
static int l_full_like(lua_State *L) { return like(L, "full_like", 2); }
static int l_empty_like(lua_State *L) { return like(L, "empty_like", 0); }

/* attn.arange(end) | arange(start, end [, step]): values, like torch */
/* With only integer (Lua integer subtype) arguments the result is int64,
   like torch.arange(5); any float argument (5.0) gives float32.  An
   options table {dtype = ...} may end the arguments. */
static int arange_body(lua_State *L, int top, int has_dt, attn_dtype dt);

static int l_arange(lua_State *L) {
  int top = lua_gettop(L);
  int has_dt = 0, rg = 0;
  attn_dtype dt = ATTN_FLOAT32;
  if (top >= 1 && lua_type(L, top) == LUA_TTABLE) {
    lua_getfield(L, top, "dtype");
    has_dt = !lua_isnil(L, -1);
    lua_pop(L, 1);
    dt = attnL_optdtype_field(L, top, ATTN_FLOAT32, "arange");
    lua_getfield(L, top, "requires_grad");
    rg = lua_toboolean(L, -1);
    lua_settop(L, --top);
  }
  arange_body(L, top, has_dt, dt);
  if (rg && attn_requires_grad_(*attnL_checkbox(L, -1), true)) attnL_error(L);
  return 1;
}

static int arange_body(lua_State *L, int top, int has_dt, attn_dtype dt) {
  double start = 0, end, step = 1;
  int ints = 1;
  for (int i = 1; i <= top && i <= 3; i++) ints = ints && lua_isinteger(L, i);
  if (lua_isnoneornil(L, 2)) {
    end = luaL_checknumber(L, 1);
  } else {
    start = luaL_checknumber(L, 1);
    end = luaL_checknumber(L, 2);
    step = luaL_optnumber(L, 3, 1);
  }
  int64_t s0 = 0, e0 = 0, st0 = 1;
  if (ints) {
    s0 = lua_isnoneornil(L, 2) ? 0 : (int64_t)lua_tointeger(L, 1);
    e0 = lua_isnoneornil(L, 2) ? (int64_t)lua_tointeger(L, 1) : (int64_t)lua_tointeger(L, 2);
    st0 = lua_isnoneornil(L, 3) ? 1 : (int64_t)lua_tointeger(L, 3);
  }
  attn_tensor **box = attnL_newbox(L);
  if (has_dt ? dt == ATTN_INT64 : ints) {
    if (ints) {
      return attnL_result(L, attn_arange_i64(s0, e0, st0, box));
    }
    attnL_result(L, attn_arange(start, end, step, box));
    convert_top(L, ATTN_INT64);
    return 1;
  }
  attnL_result(L, attn_arange(start, end, step, box));
  if (has_dt) convert_top(L, dt);
  return 1;
}

/* linspace(start, end, steps [, opts]) */
static int l_linspace(lua_State *L) {
  double a = luaL_checknumber(L, 1), b = luaL_checknumber(L, 2);
  int64_t n = attnL_checkint(L, 3, "linspace", "steps");
  attn_dtype dt = attnL_optdtype_field(L, 4, ATTN_FLOAT32, "linspace");
  attn_tensor **box = attnL_newbox(L);
  attnL_result(L, attn_linspace(a, b, n, box));
  convert_top(L, dt);
  return attnL_creation_grad(L, 4);
}

/* eye(n [, m] [, opts]) */
static int l_eye(lua_State *L) {
  int opt = lua_type(L, 2) == LUA_TTABLE ? 2 : 3;
  int64_t n = attnL_checkint(L, 1, "eye", "n");
  int64_t m = opt == 2 || lua_isnoneornil(L, 2) ? n : attnL_checkint(L, 2, "eye", "m");
  if (n < 0 || m < 0)
    return attnL_raise(L, "eye: sizes must be non-negative (got %I, %I)", (lua_Integer)n, (lua_Integer)m);
  attn_dtype dt = attnL_optdtype_field(L, opt, ATTN_FLOAT32, "eye");
  attn_tensor **box = attnL_newbox(L);
  attnL_result(L, attn_eye(n, m, box));
  convert_top(L, dt);
  return attnL_creation_grad(L, opt);
}

/* attn.one_hot(ids, num_classes): ids are 1-based class numbers */
static int l_one_hot(lua_State *L) {
  int64_t nc = lua_isnoneornil(L, 2) ? -1 : attnL_checkint(L, 2, "one_hot", "num_classes");
  if (lua_gettop(L) < 2) lua_settop(L, 2);
  if (nc == 0 || nc < -1) return attnL_raise(L, "one_hot: num_classes must be positive (got %I)", (lua_Integer)nc);
  attn_tensor *idx = attnL_checkindex(L, 1, nc, "one_hot", "indices");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_one_hot(idx, nc, box));
}

/* ------------------------------------------------------------------------ */
/* Metadata                                                                  */

static void push_shape(lua_State *L, int ndim, const int64_t *shape) {
  lua_createtable(L, ndim, 0);
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, (lua_Integer)shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

/* ------------------------------------------------------------------------ */
/* attn.Size: what t.shape, t:shape() and attn.shape(t) give (torch.Size).
   A fresh Lua list of the sizes on each access (changing it never changes
   the tensor), with a metatable: it prints as attn.Size([4, 5]), == compares
   by value with another shape or a plain list ({4, 5}), a negative index
   counts from the end, and 1-based positions past the last dim give nil
   like any Lua list (so ipairs stops there) while 0 and negatives past the
   first raise.  #, ipairs and table.unpack work as on any list. */

static void push_size(lua_State *L, int ndim, const int64_t *shape) {
  push_shape(L, ndim, shape);
  luaL_setmetatable(L, SHAPE_MT);
}

/* the shape's own sizes compared with the list at idx */
static bool size_equal(lua_State *L, int a, int b) {
  lua_Integer n = (lua_Integer)luaL_len(L, a);
  if (n != (lua_Integer)luaL_len(L, b)) return false;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, a, i);
    lua_geti(L, b, i);
    bool same = lua_type(L, -1) == LUA_TNUMBER && lua_type(L, -2) == LUA_TNUMBER && lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!same) return false;
  }
  return true;
}

static int size_eq(lua_State *L) {
  lua_pushboolean(L, lua_type(L, 1) == LUA_TTABLE && lua_type(L, 2) == LUA_TTABLE && size_equal(L, 1, 2));
  return 1;
}

/* s:equals(other): other a shape or a plain list of sizes */
static int size_equals(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (lua_type(L, 2) != LUA_TTABLE || attnL_test(L, 2))
    return attnL_raise(L, "Size:equals: expected a shape or a list of sizes such as {4, 5} (got %s)",
                       luaL_typename(L, 2));
  lua_pushboolean(L, size_equal(L, 1, 2));
  return 1;
}

/* s:numel(): the product of the sizes (torch.Size.numel) */
static int size_numel(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = (lua_Integer)luaL_len(L, 1), p = 1;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    p *= luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  lua_pushinteger(L, p);
  return 1;
}

/* pushes "attn.Size([4, 5])" for the shape at idx */
static void push_size_string(lua_State *L, int idx) {
  luaL_Buffer b;
  idx = lua_absindex(L, idx);
  lua_Integer n = (lua_Integer)luaL_len(L, idx);
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "attn.Size([");
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) luaL_addstring(&b, ", ");
    lua_geti(L, idx, i);
    luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, "])");
  luaL_pushresult(&b);
}

static int size_tostring(lua_State *L) {
  push_size_string(L, 1);
  return 1;
}

static bool is_size(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return false;
  luaL_getmetatable(L, SHAPE_MT);
  bool same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same;
}

/* "shape " .. x.shape, like Python's f"{x.shape}" */
static int size_concat(lua_State *L) {
  lua_settop(L, 2);
  for (int i = 1; i <= 2; i++) {
    if (is_size(L, i)) {
      push_size_string(L, i);
      lua_replace(L, i);
    } else if (!lua_isstring(L, i)) {
      return attnL_raise(L, "attempt to concatenate a %s value with an attn.Size", luaL_typename(L, i));
    }
  }
  lua_concat(L, 2);
  return 1;
}

/* s[k] for a key the list lacks: a negative position, 0, one past the end,
   or a method name */
static int size_index(lua_State *L) {
  int isint = 0;
  lua_Integer k = lua_tointegerx(L, 2, &isint);
  if (isint) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    if (k > n) return 0; /* nil, like any Lua list: ipairs stops here */
    if (k < 0 && k >= -n) {
      lua_rawgeti(L, 1, n + k + 1);
      return 1;
    }
    return attnL_raise(L, "Size: index %I out of range for a %I-d shape (expected 1..%I, or -%I..-1 from the end)%s", k,
                       n, n, n, ATTNL_INDEX_HINT(k));
  }
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *key = lua_tostring(L, 2);
    if (strncmp(key, "__", 2) != 0 && luaL_getmetafield(L, 1, key) != LUA_TNIL) return 1;
  }
  return 0;
}

/* attn.Size(4, 5) or attn.Size({4, 5}): a shape made by hand */
static int l_size_new(lua_State *L) {
  int64_t shape[ATTN_MAX_DIMS];
  int nd = attnL_checkshape(L, 1, shape, 0, "Size");
  int used = lua_type(L, 1) == LUA_TTABLE ? 1 : nd;
  if (lua_gettop(L) > used)
    return attnL_raise(L, "Size: unexpected argument #%d (%s) after the sizes", used + 1, luaL_typename(L, used + 1));
  push_size(L, nd, shape);
  return 1;
}

static int m_shape(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  push_size(L, t->ndim, t->shape);
  return 1;
}

/* t:size() -> the sizes as integers (local B, T, C = x:size());
   t:size(dim) -> one integer */
static int m_size(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (lua_isnoneornil(L, 2)) {
    luaL_checkstack(L, t->ndim, "size");
    for (int i = 0; i < t->ndim; i++) lua_pushinteger(L, (lua_Integer)t->shape[i]);
    return t->ndim;
  }
  int d = attnL_checkdim(L, 2, t->ndim, 0, "size");
  lua_pushinteger(L, t->ndim ? (lua_Integer)t->shape[d] : 1);
  return 1;
}

static int m_stride(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (lua_isnoneornil(L, 2)) {
    push_shape(L, t->ndim, t->stride);
    return 1;
  }
  int d = attnL_checkdim(L, 2, t->ndim, 0, "stride");
  lua_pushinteger(L, t->ndim ? (lua_Integer)t->stride[d] : 1);
  return 1;
}

static int m_dim(lua_State *L) {
  lua_pushinteger(L, attnL_check(L, 1)->ndim);
  return 1;
}

static int m_numel(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)attn_tensor_numel(attnL_check(L, 1)));
  return 1;
}

static int m_is_contiguous(lua_State *L) {
  lua_pushboolean(L, attn_tensor_is_contiguous(attnL_check(L, 1)));
  return 1;
}

static int m_item(lua_State *L) {
  char sb[64];
  attn_tensor *t = attnL_check(L, 1);
  if (attn_tensor_numel(t) != 1)
    return attnL_raise(L, "item: only a tensor with one element can be converted to a number, got %s",
                       attn_shape_str(t->ndim, t->shape, sb, sizeof sb));
  attnL_pushelem(L, t, t->offset); /* the one element: every index is 0 */
  return 1;
}

static void push_table(lua_State *L, const attn_tensor *t, int dim, int64_t pos) {
  luaL_checkstack(L, 3, "totable");
  lua_createtable(L, (int)t->shape[dim], 0);
  for (int64_t i = 0; i < t->shape[dim]; i++) {
    int64_t p = pos + i * t->stride[dim];
    if (dim == t->ndim - 1)
      attnL_pushelem(L, t, p);
    else
      push_table(L, t, dim + 1, p);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* Nested Lua tables (a number for a 0-d tensor).  The tables' size is
   checked first: an expanded tensor of 2^40 elements would otherwise grow
   Lua's heap until its allocator fails with a bare "not enough memory". */
static int m_totable(lua_State *L) {
  char sb[128];
  attn_tensor *t = attnL_check(L, 1);
  double n = (double)attn_tensor_numel(t), tables = 1;
  for (int d = 0; d + 1 < t->ndim; d++) tables *= (double)t->shape[d];
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > INT_MAX)
      return attnL_raise(L, "totable: dim %d of %s has more entries than a Lua table holds", d + 1,
                         attn_shape_str(t->ndim, t->shape, sb, sizeof sb));
  /* a value slot is 16 bytes, a table header 56 (Lua 5.4, 64-bit) */
  double need = 16.0 * n + 56.0 * tables;
  attn_budget *b = attn_budget_current();
  if (b) {
    int64_t used = attn_budget_used(b), limit = attn_budget_limit(b);
    if (need > (double)(limit - used))
      return attnL_raise(L,
                         "not enough memory: totable needs %.0f MB for %s as Lua tables, cap %.0f MB (%.2f MB in use)",
                         need / 1048576.0, attn_shape_str(t->ndim, t->shape, sb, sizeof sb), (double)limit / 1048576.0,
                         (double)used / 1048576.0);
  }
  if (t->ndim == 0)
    attnL_pushelem(L, t, t->offset);
  else
    push_table(L, t, 0, t->offset);
  return 1;
}

static int m_tostring(lua_State *L) {
  attn_tensor **box = luaL_checkudata(L, 1, ATTN_TENSOR_MT);
  if (!*box) {
    lua_pushliteral(L, "tensor(<closed>)");
    return 1;
  }
  attn_print_opts opts;
  attn_print_opts_default(&opts);
  /* torch's suffixes; a caller may pass its own */
  char suffix[96];
  const char *fn = attn_grad_fn_name(*box);
  if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING)
    return attnL_raise(L, "tostring: the suffix must be a string (got %s)", luaL_typename(L, 2));
  if (lua_type(L, 2) == LUA_TSTRING) {
    opts.suffix = lua_tostring(L, 2);
  } else if (fn) {
    snprintf(suffix, sizeof suffix, "grad_fn=<%s>", fn);
    opts.suffix = suffix;
  } else if (attn_requires_grad(*box)) {
    opts.suffix = "requires_grad=True";
  }
  char *s = NULL;
  if (attn_tensor_format(*box, &opts, &s)) return attnL_error(L);
  lua_pushstring(L, s);
  free(s);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Copies and views                                                          */

static int m_contiguous(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (attn_tensor_is_contiguous(t)) {
    lua_settop(L, 1);
    return 1;
  }
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_clone(t, box));
}

static int m_clone(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_clone(t, box));
}

/* t:copy_(src): src broadcasts to t; returns t */
static int m_copy_(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor *src = attnL_totensor(L, 2, "copy_", "src");
  if (attn_copy_(t, src)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

static int m_fill_(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->dtype != ATTN_FLOAT32) {
    double v = lua_type(L, 2) == LUA_TBOOLEAN ? lua_toboolean(L, 2) : luaL_checknumber(L, 2);
    attn_status st = lua_isinteger(L, 2) ? attn_fill_i64_(t, (int64_t)lua_tointeger(L, 2)) : attn_fill_f64_(t, v);
    if (st) return attnL_error(L);
    lua_settop(L, 1);
    return 1;
  }
  float v = (float)luaL_checknumber(L, 2);
  if (attn_fill_(t, v)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

static int m_zero_(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (attn_fill_(t, 0.0f)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

static int m_transpose(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  int d0 = attnL_checkdim(L, 2, t->ndim, 0, "transpose");
  int d1 = attnL_checkdim(L, 3, t->ndim, 0, "transpose");
  if (t->ndim == 0) {
    lua_settop(L, 1);
    return 1;
  }
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_transpose(t, d0, d1, box));
}

static int m_t(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_t(t, box));
}

/* dims as varargs or a table, 1-based/negative */
static int read_dims(lua_State *L, int arg, int ndim, int *dims, const char *fn) {
  int n = 0;
  if (lua_type(L, arg) == LUA_TTABLE) {
    int len = (int)lua_rawlen(L, arg);
    if (len > ATTN_MAX_DIMS) attnL_raise(L, "%s: too many dims", fn);
    for (int i = 1; i <= len; i++) {
      lua_rawgeti(L, arg, i);
      dims[n++] = attnL_checkdim(L, -1, ndim, 0, fn);
      lua_pop(L, 1);
    }
  } else {
    int top = lua_gettop(L);
    for (int i = arg; i <= top; i++) {
      if (n == ATTN_MAX_DIMS) attnL_raise(L, "%s: too many dims", fn);
      dims[n++] = attnL_checkdim(L, i, ndim, 0, fn);
    }
  }
  return n;
}

static int m_permute(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  int dims[ATTN_MAX_DIMS];
  int n = read_dims(L, 2, t->ndim, dims, "permute");
  if (n != t->ndim) return attnL_raise(L, "permute: expected %d dims for a %d-d tensor, got %d", t->ndim, t->ndim, n);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (dims[i] == dims[j]) return attnL_raise(L, "permute: dim %d appears twice", dims[i] + 1);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_permute(t, dims, box));
}

typedef attn_status (*reshape_fn)(const attn_tensor *, int, const int64_t *, attn_tensor **);

static int reshape_like(lua_State *L, const char *fn, reshape_fn f) {
  attn_tensor *t = attnL_check(L, 1);
  int64_t shape[ATTN_MAX_DIMS];
  int nd = attnL_checkshape(L, 2, shape, 1, fn);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, f(t, nd, shape, box));
}
static int m_view(lua_State *L) { return reshape_like(L, "view", attn_view); }
static int m_reshape(lua_State *L) { return reshape_like(L, "reshape", attn_reshape); }
static int m_expand(lua_State *L) { return reshape_like(L, "expand", attn_expand); }

static int as_other(lua_State *L, reshape_fn f) {
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor *o = attnL_check(L, 2);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, f(t, o->ndim, o->shape, box));
}
static int m_view_as(lua_State *L) { return as_other(L, attn_view); }
static int m_reshape_as(lua_State *L) { return as_other(L, attn_reshape); }
static int m_expand_as(lua_State *L) { return as_other(L, attn_expand); }

/* t:narrow(dim, start, length) with a 1-based start (negative from the end) */
static int m_narrow(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->ndim == 0) return attnL_raise(L, "narrow: cannot narrow a 0-d tensor");
  int d = attnL_checkdim(L, 2, t->ndim, 0, "narrow");
  int64_t start = attnL_checkint(L, 3, "narrow", "start");
  int64_t len = attnL_checkint(L, 4, "narrow", "length");
  int64_t size = t->shape[d];
  int64_t s0 = start < 0 ? start + size : start - 1;
  if (start == 0 || s0 < 0 || s0 > size)
    return attnL_raise(L, "narrow: start %I out of range for dim %d of size %I (expected 1..%I or negative)%s",
                       (lua_Integer)start, d + 1, (lua_Integer)size, (lua_Integer)size, ATTNL_INDEX_HINT(start));
  if (len < 0 || len > size - s0)
    return attnL_raise(L, "narrow: start %I + length %I exceeds dim %d of size %I", (lua_Integer)start,
                       (lua_Integer)len, d + 1, (lua_Integer)size);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_narrow(t, d, s0, len, box));
}

/* t:slice(dim, first, last [, step]): 1-based inclusive bounds, negatives
   count from the end, clamped like Python slices. */
static int m_slice(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->ndim == 0) return attnL_raise(L, "slice: cannot slice a 0-d tensor");
  int d = attnL_checkdim(L, 2, t->ndim, 0, "slice");
  int64_t size = t->shape[d];
  int64_t first = lua_isnoneornil(L, 3) ? 1 : attnL_checkint(L, 3, "slice", "first");
  int64_t last = lua_isnoneornil(L, 4) ? size : attnL_checkint(L, 4, "slice", "last");
  int64_t step = lua_isnoneornil(L, 5) ? 1 : attnL_checkint(L, 5, "slice", "step");
  if (step <= 0) return attnL_raise(L, "slice: step must be positive (got %I)", (lua_Integer)step);
  /* clamp before shifting, so that mininteger bounds cannot overflow */
  if (first < -size) first = -size;
  if (last < -size - 1) last = -size - 1;
  int64_t s0 = first < 0 ? first + size : first - 1;
  int64_t e0 = last < 0 ? last + size + 1 : last;
  if (s0 < 0) s0 = 0;
  if (e0 > size) e0 = size;
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_slice(t, d, s0, e0, step, box));
}

/* 1-based index (negative from the end) -> 0-based, with a Lua message */
static int64_t check_index(lua_State *L, int arg, int64_t size, int dim, const char *fn) {
  int64_t i = attnL_checkint(L, arg, fn, "index");
  int64_t i0 = i < 0 ? i + size : i - 1;
  if (i == 0 || i0 < 0 || i0 >= size)
    attnL_raise(L, "%s: index %I out of range for dim %d of size %I (expected 1..%I or -%I..-1)%s", fn, (lua_Integer)i,
                dim + 1, (lua_Integer)size, (lua_Integer)size, (lua_Integer)size, ATTNL_INDEX_HINT(i));
  return i0;
}

static int m_select(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->ndim == 0) return attnL_raise(L, "select: cannot select from a 0-d tensor");
  int d = attnL_checkdim(L, 2, t->ndim, 0, "select");
  int64_t i = check_index(L, 3, t->shape[d], d, "select");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_select(t, d, i, box));
}

static int m_unsqueeze(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  int d = attnL_checkdim(L, 2, t->ndim, 1, "unsqueeze");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_unsqueeze(t, d, box));
}

static int m_squeeze(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  int d = -1;
  if (!lua_isnoneornil(L, 2) && t->ndim > 0) d = attnL_checkdim(L, 2, t->ndim, 0, "squeeze");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_squeeze(t, d, box));
}

static int m_flatten(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  int s = t->ndim ? attnL_optdim(L, 2, t->ndim, 0, "flatten") : 0;
  int e = t->ndim ? attnL_optdim(L, 3, t->ndim, t->ndim - 1, "flatten") : 0;
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_flatten(t, s, e, box));
}

/* ------------------------------------------------------------------------ */
/* Indexing, as torch users write it (1-based, negatives from the end):
     t[i]                     select along dim 1 (a Lua value for a 1-d t)
     t[{i, j}]                one index per leading dim (t[i, j])
     t[{{}, -1}]              {} keeps a whole dim
     t[{{2, 4}, {}}]          {first, last} inclusive, {first, last, step}
     t[{{2}}]                 {i} keeps the dim (t[1:2])
     t[ids], t[{{}, ids}]     an int64 (or integral float) tensor on one
                              dim: torch's advanced indexing (the result
                              takes the index's shape there)
     t[mask], t[{{}, mask}]   a bool mask over as many dims as it has: the
                              selected entries in one dim
   and assignment through each of them, broadcasting the value.  The key
   becomes the core's (attn_index_get/attn_index_put, 0-based, Python's
   slices), which holds the rules: here only the conversion, with the
   1-based messages of out-of-range integers and ids. */

typedef struct {
  int n;
  attn_index e[ATTN_MAX_DIMS];
  int slot[ATTN_MAX_DIMS]; /* the stack slot of a tensor entry's tensor */
  bool ints_only;          /* every entry an integer: an element reads as a Lua value */
} ix_key;

static int64_t ix_int(lua_State *L, int idx, const char *fn, const char *what) {
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum)
    attnL_raise(L, "%s: %s must be an integer (got %s)", fn, what,
                lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
  return (int64_t)v;
}

/* 1-based index (negative from the end) -> 0-based, with a Lua message */
static int64_t ix_check(lua_State *L, int64_t i, int64_t size, int dim, const char *fn) {
  int64_t i0 = i < 0 ? i + size : i - 1;
  if (i == 0 || i0 < 0 || i0 >= size)
    attnL_raise(L, "%s: index %I out of range for dim %d of size %I (expected 1..%I or -%I..-1)%s", fn, (lua_Integer)i,
                dim + 1, (lua_Integer)size, (lua_Integer)size, (lua_Integer)size, ATTNL_INDEX_HINT(i));
  return i0;
}

/* {first, last, step} (1-based, inclusive, negatives from the end) ->
   Python's start:stop:step (an open stop for last = -1). */
static attn_index ix_range(int64_t first, int64_t last, int64_t step) {
  attn_index e = attn_idx_all();
  e.step = step;
  e.has_start = true;
  e.start = first > 0 ? first - 1 : first; /* 0 is before the first: clamped to it */
  if (last != -1) {
    e.has_stop = true;
    e.stop = last >= 0 ? last : last + 1;
  }
  return e;
}

/* The 0-based int64 ids of the index tensor at slot for a dim of size n
   (pushed).  A float or int64 tensor of 0s and 1s holding a 0 is a mask
   in the wrong dtype (torch's x[m] with m a 0/1 float mask fails too):
   say so, not only that id 0 is out of range.  Any 0 is an error anyway,
   so the look stops at the first other value, or after 2^20 (an expanded
   index may hold 2^40 elements). */
static const attn_tensor *ix_ids(lua_State *L, int slot, int64_t n, const char *fn) {
  const attn_tensor *it = attnL_test(L, slot);
  if (it) {
    int64_t total = attn_tensor_numel(it);
    if (total > ((int64_t)1 << 20)) total = (int64_t)1 << 20;
    bool zero = false, only01 = total > 0;
    for (int64_t i = 0; only01 && i < total; i++) {
      double v = attn_tensor_get_flat_f64(it, i);
      only01 = v == 0 || v == 1;
      zero = zero || v == 0;
    }
    if (only01 && zero)
      attnL_raise(L,
                  "%s: the %s index tensor holds 0s and 1s and is read as 1-based ids (0 is out of range): "
                  "a mask must be a bool tensor, write t[mask:bool()] (or t[mask:eq(1)])",
                  fn, attn_dtype_name(it->dtype));
  }
  return attnL_checkindex(L, slot, n, fn, "index");
}

/* Parses the key at kidx into the core's (the entries' tensors stay on the
   stack for the call). */
static void ix_parse(lua_State *L, const attn_tensor *t, int kidx, ix_key *k, const char *fn) {
  int ty = lua_type(L, kidx);
  k->n = 1;
  k->ints_only = ty == LUA_TNUMBER;
  k->slot[0] = kidx;
  if (ty == LUA_TNUMBER) {
    if (t->ndim == 0) attnL_raise(L, "%s: cannot index a 0-d tensor (use t:item())", fn);
    k->e[0] = attn_idx_int(ix_check(L, ix_int(L, kidx, fn, "an index"), t->shape[0], 0, fn));
    return;
  }
  attn_tensor *kt = attnL_test(L, kidx);
  if (kt) {
    if (kt->dtype == ATTN_BOOL) {
      k->e[0] = attn_idx_tensor(kt);
      return;
    }
    if (t->ndim == 0) attnL_raise(L, "%s: 1 indices for a 0-d tensor", fn);
    k->e[0] = attn_idx_tensor(ix_ids(L, kidx, t->shape[0], fn));
    return;
  }
  if (ty != LUA_TTABLE)
    attnL_raise(L,
                "%s: tensors are indexed by integers, tables of indices and ranges, index tensors, bool masks "
                "or method names (got %s)",
                fn, luaL_typename(L, kidx));
  int n = (int)lua_rawlen(L, kidx);
  if (n > t->ndim) attnL_raise(L, "%s: %d indices for a %d-d tensor", fn, n, t->ndim);
  k->n = n;
  k->ints_only = true;
  int64_t first[ATTN_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    attn_index *e = &k->e[i];
    int ety = lua_rawgeti(L, kidx, i + 1);
    int top = lua_gettop(L);
    if (ety == LUA_TNUMBER) {
      *e = attn_idx_int(0);
      first[i] = ix_int(L, top, fn, "an index");
    } else if (ety == LUA_TTABLE && !attnL_test(L, top)) {
      int len = (int)lua_rawlen(L, top);
      if (len > 3)
        attnL_raise(L,
                    "%s: range %d has %d entries; a range is {}, {i}, {first, last} or {first, last, step} "
                    "(index a list of ids with a tensor: attn.tensor(ids, {dtype = \"int64\"}))",
                    fn, i + 1, len);
      int64_t b[3] = {1, -1, 1};
      for (int j = 0; j < len; j++) {
        lua_rawgeti(L, top, j + 1);
        b[j] = ix_int(L, -1, fn, j < 2 ? "a range bound" : "a range step");
        lua_pop(L, 1);
      }
      if (len == 1) b[1] = b[0];
      if (b[2] <= 0) attnL_raise(L, "%s: range step must be positive (got %I)", fn, (lua_Integer)b[2]);
      *e = ix_range(b[0], b[1], b[2]);
    } else if (attnL_test(L, top)) {
      *e = attn_idx_tensor(attnL_test(L, top));
      k->slot[i] = top;
      continue; /* the index stays in its stack slot for the whole call */
    } else {
      attnL_raise(L, "%s: entry %d of the key is a %s (expected an integer, a range table or an index tensor)", fn,
                  i + 1, luaL_typename(L, top));
    }
    k->ints_only = k->ints_only && e->kind == ATTN_INDEX_INT;
    lua_pop(L, 1);
  }
  /* 1-based integers and ids to 0-based, each for the dim of t it indexes
     (a mask takes as many as it has; past the last, the core says so) */
  int i = 0, d = 0;
  for (; i < n && d < t->ndim; i++) {
    attn_index *e = &k->e[i];
    if (e->kind == ATTN_INDEX_INT) {
      e->i = ix_check(L, first[i], t->shape[d], d, fn);
    } else if (e->kind == ATTN_INDEX_TENSOR) {
      const attn_tensor *it = attnL_check(L, k->slot[i]);
      if (it->dtype == ATTN_BOOL) {
        e->tensor = it;
        d += it->ndim;
        k->ints_only = false;
        continue;
      }
      e->tensor = ix_ids(L, k->slot[i], t->shape[d], fn);
      k->ints_only = false;
    }
    d++;
  }
  if (i < n) attnL_raise(L, "%s: %d indices for a %d-d tensor", fn, d + n - i, t->ndim);
}

/* An error of the core's indexing named as the Lua operation (fn). */
static int ix_error(lua_State *L, const char *fn) {
  const char *msg = attn_last_error(), *rest = strstr(msg, ": ");
  if (strncmp(msg, "not enough memory: ", 19) == 0) return attnL_error(L);
  return attnL_raise(L, "%s: %s", fn, rest ? rest + 2 : msg);
}

/* Reads t[key] (pushed): a tensor, or a Lua value for an element read with
   integers only. */
static void ix_read(lua_State *L, int tidx, int kidx, const char *fn) {
  attn_tensor *t = attnL_check(L, tidx);
  ix_key k;
  ix_parse(L, t, kidx, &k, fn);
  attn_tensor **box = attnL_newbox(L);
  if (attn_index_get(t, k.n, k.e, box)) ix_error(L, fn);
  attnL_account(L, box);
  /* an element is a Lua value (a number even when t requires grad: keep a
     dim, t[{i, {j}}], for a differentiable element) */
  if ((*box)->ndim == 0 && k.ints_only) attnL_pushelem(L, *box, (*box)->offset);
}

/* The value of t[key] = value as a tensor (pushed, or the tensor in its own
   slot): a number or a boolean becomes a 0-d tensor of t's dtype (int64
   keeps Lua integers exact, truncates floats toward zero like torch and
   refuses nan, inf and values beyond int64; bool takes any nonzero as
   true), a Lua table a tensor of t's dtype. */
static attn_tensor *ix_value(lua_State *L, int vidx, attn_dtype dt, const char *fn) {
  int ty = lua_type(L, vidx);
  if (ty == LUA_TNUMBER || ty == LUA_TBOOLEAN) {
    attn_tensor **b = attnL_newbox(L);
    attn_status st =
        dt == ATTN_INT64 && lua_isinteger(L, vidx)
            ? attn_full_i64(0, NULL, (int64_t)lua_tointeger(L, vidx), b)
            : attn_full_dtype(dt, 0, NULL, ty == LUA_TBOOLEAN ? lua_toboolean(L, vidx) : lua_tonumber(L, vidx), b);
    if (st) ix_error(L, fn);
    attnL_account(L, b);
    return *b;
  }
  if (ty == LUA_TTABLE && !attnL_test(L, vidx)) return attnL_table_to_tensor(L, vidx, (int)dt, fn, "value");
  return attnL_totensor(L, vidx, fn, "value");
}

/* t[key] = value */
static void ix_write(lua_State *L, int tidx, int kidx, int vidx, const char *fn) {
  attn_tensor *t = attnL_check(L, tidx);
  if (lua_type(L, kidx) == LUA_TNUMBER && t->ndim == 0) attnL_raise(L, "%s: cannot index a 0-d tensor", fn);
  ix_key k;
  ix_parse(L, t, kidx, &k, fn);
  attn_tensor *v = ix_value(L, vidx, t->dtype, fn);
  if (attn_index_put(t, k.n, k.e, v)) ix_error(L, fn);
}

/* t.dtype, t.shape, t.ndim, t.T, t.mT: pushes the value and returns 1, or 0. */
static int tensor_property(lua_State *L, attn_tensor *t, const char *key) {
  if (strcmp(key, "dtype") == 0) {
    attnL_pushdtype(L, t->dtype);
    return 1;
  }
  if (strcmp(key, "shape") == 0) {
    push_size(L, t->ndim, t->shape);
    return 1;
  }
  if (strcmp(key, "ndim") == 0) {
    lua_pushinteger(L, t->ndim);
    return 1;
  }
  if (strcmp(key, "T") == 0) {
    /* torch: all dims reversed (t() for <= 2 dims) */
    int dims[ATTN_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) dims[i] = t->ndim - 1 - i;
    attn_tensor **box = attnL_newbox(L);
    attnL_result(L, t->ndim <= 2 ? attn_t(t, box) : attn_permute(t, dims, box));
    return 1;
  }
  if (strcmp(key, "mT") == 0) {
    if (t->ndim < 2) attnL_raise(L, "mT: expected a tensor with at least 2 dims, got %d", t->ndim);
    attn_tensor **box = attnL_newbox(L);
    attnL_result(L, attn_transpose(t, t->ndim - 2, t->ndim - 1, box));
    return 1;
  }
  return 0;
}

static int index_slow(lua_State *L, int ty) {
  if (ty == LUA_TSTRING) {
    attn_tensor *t = attnL_check(L, 1);
    if (tensor_property(L, t, lua_tostring(L, 2))) return 1;
    if (attnL_property(L, t, lua_tostring(L, 2))) return 1;
    lua_pushnil(L);
    return 1;
  }
  if (ty == LUA_TNUMBER || ty == LUA_TTABLE || ty == LUA_TUSERDATA) {
    ix_read(L, 1, 2, "index");
    return 1;
  }
  return attnL_raise(L,
                     "index: tensors are indexed by integers, tables of indices and ranges, index tensors, bool "
                     "masks or method names (got %s)",
                     luaL_typename(L, 2));
}

/* Method lookups (the common case) stay a raw get; properties and
   indexing run in a call scope like any binding function. */
static int t_index(lua_State *L) {
  int ty = lua_type(L, 2);
  if (ty == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1; /* a method */
    lua_pop(L, 1);
  }
  attnL_state *S = lua_touserdata(L, lua_upvalueindex(2));
  uintptr_t frame = ATTNL_FRAME();
  attnL_saved saved;
  attnL_enter(L, S, frame, &saved);
  int n = index_slow(L, ty);
  attnL_leave(L, S, frame, &saved);
  return n;
}

static int t_newindex(lua_State *L) {
  int ty = lua_type(L, 2);
  if (ty == LUA_TSTRING && attnL_set_property(L, attnL_check(L, 1), lua_tostring(L, 2), 3)) return 0;
  if (ty != LUA_TNUMBER && ty != LUA_TTABLE && !(ty == LUA_TUSERDATA && attnL_test(L, 2)))
    return attnL_raise(L,
                       "newindex: cannot set field '%s' on a tensor (assign t[i] = value, t.grad or "
                       "t.requires_grad)",
                       ty == LUA_TSTRING ? lua_tostring(L, 2) : luaL_typename(L, 2));
  ix_write(L, 1, 2, 3, "newindex");
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Dtype methods                                                             */

static int to_dtype(lua_State *L, attn_tensor *t, attn_dtype dt) {
  if (t->dtype == dt) {
    lua_settop(L, 1);
    return 1;
  }
  if (attn_dtype_is_storage(dt) && attn_requires_grad(t) && attnL_grad_enabled(L))
    return attnL_raise(L,
                       "to: x requires grad and %s is a storage dtype (attn differentiates in float32 only): "
                       "convert x:detach() to store it, or keep computing in float32",
                       attn_dtype_name(dt));
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_to_dtype(t, dt, box));
}

static int m_long(lua_State *L) { return to_dtype(L, attnL_check(L, 1), ATTN_INT64); }
static int m_bool(lua_State *L) { return to_dtype(L, attnL_check(L, 1), ATTN_BOOL); }
static int m_float(lua_State *L) { return to_dtype(L, attnL_check(L, 1), ATTN_FLOAT32); }
static int m_half(lua_State *L) { return to_dtype(L, attnL_check(L, 1), ATTN_FLOAT16); }
static int m_bfloat16(lua_State *L) { return to_dtype(L, attnL_check(L, 1), ATTN_BFLOAT16); }
static int m_double(lua_State *L) { return to_dtype(L, attnL_check(L, 1), ATTN_FLOAT64); }

/* Whether the value at arg names a device: a string "cpu", "cpu:N",
   "cuda", "cuda:N", "mps", ... or a device object ({type = "cpu"}, see
   attn.device).  A device other than the CPU raises: attn runs on the CPU. */
static bool device_arg(lua_State *L, int arg, const char *fn) {
  const char *name = NULL;
  if (lua_type(L, arg) == LUA_TSTRING) {
    name = lua_tostring(L, arg);
  } else if (lua_type(L, arg) == LUA_TTABLE && dtype_of_object(L, arg) < 0 && lua_getmetatable(L, arg)) {
    lua_pop(L, 1);
    if (lua_getfield(L, arg, "type") == LUA_TSTRING) name = lua_tostring(L, -1);
    lua_pop(L, 1);
    if (!name) return false;
  }
  if (!name) return false;
  static const char *const devices[] = {"cpu", "cuda", "mps", "xpu", "meta", "xla", "vulkan", "hip", NULL};
  for (int i = 0; devices[i]; i++) {
    size_t n = strlen(devices[i]);
    if (strncmp(name, devices[i], n) == 0 && (name[n] == 0 || name[n] == ':')) {
      if (i == 0) return true;
      attnL_raise(L,
                  "%s: device '%s' is not available: attn runs on the CPU only (write x:to(\"cpu\") or leave the "
                  "device out)",
                  fn, name);
    }
  }
  return false;
}

/* t:to(dtype | "float16" | device | other_tensor [, dtype] [, non_blocking, copy])
   and t:to({dtype =, device =, copy =, non_blocking =}): torch's forms.  A
   dtype equal to t's (or only a device) returns t itself unless copy. */
static int m_to(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  luaL_checkany(L, 2);
  int top = lua_gettop(L), copy = 0, have_dt = 0, nbool = 0;
  attn_dtype dt = t->dtype;
  for (int i = 2; i <= top; i++) {
    int ty = lua_type(L, i);
    if (ty == LUA_TBOOLEAN) {
      /* torch's positional non_blocking, copy */
      if (nbool++ == 1) copy = lua_toboolean(L, i);
    } else if (ty == LUA_TNIL) {
      continue;
    } else if (device_arg(L, i, "to")) {
      continue;
    } else if (ty == LUA_TTABLE && !attnL_test(L, i) && dtype_of_object(L, i) < 0) {
      static const char *const known[] = {"dtype", "device", "copy", "non_blocking", "memory_format", NULL};
      attnL_checkoptions(L, i, "to", known);
      int f = attnL_option_field(L, i, "dtype");
      if (!lua_isnil(L, f)) {
        dt = attnL_checkdtype(L, f, "to");
        have_dt = 1;
      }
      f = attnL_option_field(L, i, "device");
      if (!lua_isnil(L, f) && !device_arg(L, f, "to"))
        attnL_raise(L, "to: option 'device' must be \"cpu\" or attn.device(\"cpu\")");
      copy = attnL_option_bool(L, attnL_option_field(L, i, "copy"), "to", "copy", copy);
      attnL_option_bool(L, attnL_option_field(L, i, "non_blocking"), "to", "non_blocking", 0);
    } else if (!have_dt) {
      dt = attnL_checkdtype(L, i, "to");
      have_dt = 1;
    } else {
      attnL_raise(L, "to: unexpected argument %d (%s): give one dtype, device or tensor", i - 1, luaL_typename(L, i));
    }
  }
  if (copy && t->dtype == dt) {
    attn_tensor **box = attnL_newbox(L);
    return attnL_result(L, attn_clone(t, box));
  }
  lua_settop(L, 1);
  return to_dtype(L, t, dt);
}

/* t:cpu() -> t (attn runs on the CPU: torch returns self too); t:cuda() raises. */
static int m_cpu(lua_State *L) {
  attnL_check(L, 1);
  lua_settop(L, 1);
  return 1;
}
static int m_cuda(lua_State *L) {
  attnL_check(L, 1);
  return attnL_raise(L, "cuda: device 'cuda' is not available: attn runs on the CPU only (write x:cpu() or leave "
                        "it out)");
}

/* torch's legacy type names, by dtype */
static const char *const type_names[ATTN_DTYPE_COUNT] = {"torch.FloatTensor",    "torch.LongTensor",
                                                         "torch.BoolTensor",     "torch.HalfTensor",
                                                         "torch.BFloat16Tensor", "torch.DoubleTensor"};

/* t:type() -> "torch.FloatTensor" (torch's name); t:type(dtype | name) ->
   t in that dtype ("float64", attn.half, "torch.HalfTensor", ...). */
static int m_type(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (lua_isnoneornil(L, 2)) {
    lua_pushstring(L, type_names[t->dtype]);
    return 1;
  }
  attn_dtype dt = ATTN_DTYPE_COUNT;
  if (lua_type(L, 2) == LUA_TSTRING)
    for (int i = 0; i < ATTN_DTYPE_COUNT; i++)
      if (strcmp(lua_tostring(L, 2), type_names[i]) == 0) dt = (attn_dtype)i;
  if (dt == ATTN_DTYPE_COUNT) dt = attnL_checkdtype(L, 2, "type");
  lua_settop(L, 1);
  return to_dtype(L, t, dt);
}

static int m_type_as(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor *o = attnL_check(L, 2);
  lua_settop(L, 1);
  return to_dtype(L, t, o->dtype);
}

static int m_is_floating_point(lua_State *L) {
  attn_dtype dt = attnL_check(L, 1)->dtype;
  lua_pushboolean(L, dt == ATTN_FLOAT32 || attn_dtype_is_storage(dt));
  return 1;
}

static int m_element_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)attn_dtype_size(attnL_check(L, 1)->dtype));
  return 1;
}

/* Lua's < and <= cannot give tensors (their results become booleans), so
   they raise and say what to write instead. */
static int t_lt(lua_State *L) {
  return attnL_raise(L, "'<' and '>' on tensors cannot give a tensor in Lua: write x:lt(y) for x < y and x:gt(y) "
                        "for x > y (e.g. x:gt(0))");
}
static int t_le(lua_State *L) {
  return attnL_raise(L, "'<=' and '>=' on tensors cannot give a tensor in Lua: write x:le(y) for x <= y and "
                        "x:ge(y) for x >= y (e.g. x:ge(0))");
}

static int t_len(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->ndim == 0) return attnL_raise(L, "len: a 0-d tensor has no length");
  lua_pushinteger(L, (lua_Integer)t->shape[0]);
  return 1;
}

static int t_concat(lua_State *L) {
  return attnL_raise(L, "'..' is not defined for tensors: use t:matmul(u) (or attn.matmul) for matrix "
                        "products and attn.cat for concatenation");
}

/* ------------------------------------------------------------------------ */
/* Library information and threads                                          */

static int l_info(lua_State *L) {
  attn_blas_info bi;
  lua_newtable(L);
  lua_pushliteral(L, ATTN_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushstring(L, LUA_RELEASE);
  lua_setfield(L, -2, "lua");
  if (attn_blas_get_info(&bi) == ATTN_OK) {
    lua_pushstring(L, bi.library);
    lua_setfield(L, -2, "blas");
    lua_pushstring(L, bi.core);
    lua_setfield(L, -2, "blas_core");
    lua_pushstring(L, bi.config);
    lua_setfield(L, -2, "blas_config");
    lua_pushstring(L, bi.coretype_source);
    lua_setfield(L, -2, "blas_coretype_source");
    lua_pushinteger(L, bi.num_threads);
    lua_setfield(L, -2, "num_threads");
  } else {
    lua_pushstring(L, attn_last_error());
    lua_setfield(L, -2, "blas_error");
  }
  attn_isa_info ii;
  if (attn_isa_get_info(&ii) == ATTN_OK) {
    lua_pushstring(L, ii.active);
    lua_setfield(L, -2, "isa");
    lua_pushstring(L, ii.best);
    lua_setfield(L, -2, "isa_best");
    lua_pushstring(L, ii.available);
    lua_setfield(L, -2, "isa_available");
    if (ii.requested) {
      lua_pushstring(L, ii.requested);
      lua_setfield(L, -2, "isa_requested");
    }
    if (*ii.note) {
      lua_pushstring(L, ii.note);
      lua_setfield(L, -2, "isa_note");
    }
    lua_pushstring(L, ii.cpu);
    lua_setfield(L, -2, "cpu");
  }
  return 1;
}

/* attn.set_isa(family): "avx512", "avx2", "portable" or "auto" (nil);
   errors for a family this CPU lacks.  Process-wide. */
static int l_set_isa(lua_State *L) {
  const char *name = luaL_optstring(L, 1, NULL);
  if (attn_set_isa(name)) return attnL_error(L);
  return 0;
}

static int l_set_num_threads(lua_State *L) {
  int64_t n = attnL_checkint(L, 1, "set_num_threads", "n");
  if (n < 1 || n > ATTN_MAX_THREADS)
    return attnL_raise(L, "set_num_threads: n must be in [1, %d] (got %I)", ATTN_MAX_THREADS, (lua_Integer)n);
  if (attn_set_num_threads((int)n)) return attnL_error(L);
  return 0;
}

static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, attn_get_num_threads());
  return 1;
}

/* attn.now(): monotonic wall-clock seconds, for timing (os.clock counts
   CPU time of every thread, which misleads with threaded BLAS). */
static int l_now(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

/* attn.core._isatty(file): whether a Lua file handle (io.stderr, ...) is a
   terminal, so attn.data's progress bar can stay quiet in logs and pipes.
   A closed handle is not a terminal. */
static int l_isatty(lua_State *L) {
  luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
  lua_pushboolean(L, s->closef != NULL && s->f != NULL && isatty(fileno(s->f)));
  return 1;
}

/* attn.debug_counts(): live tensors, storages, storage bytes and graph
   nodes of the process, for leak checks that do not depend on RSS. */
static int l_debug_counts(lua_State *L) {
  attn_debug_counts c;
  attn_debug_counts_get(&c);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, c.tensors);
  lua_setfield(L, -2, "tensors");
  lua_pushinteger(L, c.storages);
  lua_setfield(L, -2, "storages");
  lua_pushinteger(L, c.storage_bytes);
  lua_setfield(L, -2, "storage_bytes");
  lua_pushinteger(L, c.nodes);
  lua_setfield(L, -2, "nodes");
  return 1;
}

static int l_is_tensor(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, ATTN_TENSOR_MT) != NULL);
  return 1;
}

static const luaL_Reg module_fns[] = {{"tensor", l_tensor},
                                      {"zeros", l_zeros},
                                      {"ones", l_ones},
                                      {"empty", l_empty},
                                      {"full", l_full},
                                      {"zeros_like", l_zeros_like},
                                      {"ones_like", l_ones_like},
                                      {"full_like", l_full_like},
                                      {"empty_like", l_empty_like},
                                      {"arange", l_arange},
                                      {"linspace", l_linspace},
                                      {"eye", l_eye},
                                      {"one_hot", l_one_hot},
                                      {"info", l_info},
                                      {"shape", m_shape},
                                      {"Size", l_size_new},
                                      {"set_num_threads", l_set_num_threads},
                                      {"set_isa", l_set_isa},
                                      {"get_num_threads", l_get_num_threads},
                                      {"is_tensor", l_is_tensor},
                                      {"now", l_now},
                                      {"debug_counts", l_debug_counts},
                                      {"_isatty", l_isatty},
                                      {NULL, NULL}};

static const luaL_Reg methods[] = {{"size", m_size},
                                   {"long", m_long},
                                   {"bool", m_bool},
                                   {"float", m_float},
                                   {"half", m_half},
                                   {"bfloat16", m_bfloat16},
                                   {"double", m_double},
                                   {"to", m_to},
                                   {"type_as", m_type_as},
                                   {"is_floating_point", m_is_floating_point},
                                   {"element_size", m_element_size},
                                   {"stride", m_stride},
                                   {"dim", m_dim},
                                   {"numel", m_numel},
                                   {"is_contiguous", m_is_contiguous},
                                   {"item", m_item},
                                   {"totable", m_totable},
                                   {"tolist", m_totable}, /* torch's name */
                                   {"tostring", m_tostring},
                                   {"contiguous", m_contiguous},
                                   {"clone", m_clone},
                                   {"copy_", m_copy_},
                                   {"fill_", m_fill_},
                                   {"zero_", m_zero_},
                                   {"transpose", m_transpose},
                                   {"t", m_t},
                                   {"permute", m_permute},
                                   {"view", m_view},
                                   {"reshape", m_reshape},
                                   {"expand", m_expand},
                                   {"view_as", m_view_as},
                                   {"reshape_as", m_reshape_as},
                                   {"expand_as", m_expand_as},
                                   {"narrow", m_narrow},
                                   {"slice", m_slice},
                                   {"select", m_select},
                                   {"unsqueeze", m_unsqueeze},
                                   {"squeeze", m_squeeze},
                                   {"flatten", m_flatten},
                                   {NULL, NULL}};

/* Methods only (attn.cuda is the device table, attn.type would shadow Lua's type). */
static const luaL_Reg method_only[] = {{"cpu", m_cpu}, {"cuda", m_cuda}, {"type", m_type}, {NULL, NULL}};

void attnL_open_tensor(lua_State *L, int module, int methods_idx) {
  attnL_register(L, module, 0, module_fns);
  attnL_register(L, module, methods_idx, methods);
  lua_newtable(L);
  attnL_register(L, lua_gettop(L), methods_idx, method_only);
  lua_pop(L, 1);
  open_dtypes(L, module); /* after the methods: attn.bool, attn.float, attn.long are dtypes */
  luaL_newmetatable(L, SHAPE_MT);
  static const luaL_Reg size_mt[] = {
      {"__call", shape_call},  {"__eq", size_eq},       {"__tostring", size_tostring}, {"__concat", size_concat},
      {"__index", size_index}, {"equals", size_equals}, {"numel", size_numel},         {NULL, NULL}};
  attnL_setfuncs(L, size_mt);
  lua_pop(L, 1);
  luaL_getmetatable(L, ATTN_TENSOR_MT);
  lua_pushcfunction(L, t_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, t_gc);
  lua_setfield(L, -2, "__close");
  lua_pushvalue(L, methods_idx);
  lua_pushlightuserdata(L, attnL_state_of(L));
  lua_pushcclosure(L, t_index, 2);
  lua_setfield(L, -2, "__index");
  attnL_pushfn(L, t_newindex);
  lua_setfield(L, -2, "__newindex");
  attnL_pushfn(L, m_tostring);
  lua_setfield(L, -2, "__tostring");
  attnL_pushfn(L, t_len);
  lua_setfield(L, -2, "__len");
  attnL_pushfn(L, t_concat);
  lua_setfield(L, -2, "__concat");
  attnL_pushfn(L, t_lt);
  lua_setfield(L, -2, "__lt");
  attnL_pushfn(L, t_le);
  lua_setfield(L, -2, "__le");
  lua_pop(L, 1);
}
