#define _POSIX_C_SOURCE 200809L
/* Lua binding: tensor creation, metadata, views, indexing and metamethods. */
#include "binding.h"
#include "openers.h"

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
/* Creation                                                                  */

/* attn.tensor(data): a fresh tensor from a nested table, a number or a
   tensor (always a copy, like torch.tensor). */
static int l_tensor(lua_State *L) {
  luaL_checkany(L, 1);
  attn_tensor *src = attnL_test(L, 1);
  if (!src) {
    attn_tensor *t = attnL_totensor(L, 1, "tensor", "data");
    lua_pushvalue(L, 1); /* the conversion is already fresh */
    (void)t;
    return 1;
  }
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_clone(src, box));
}

typedef attn_status (*fill_fn)(int, const int64_t *, attn_tensor **);

static int make_filled(lua_State *L, const char *fn, fill_fn f) {
  int64_t shape[ATTN_MAX_DIMS];
  int nd = attnL_checkshape(L, 1, shape, 0, fn);
  int used = lua_type(L, 1) == LUA_TTABLE ? 1 : nd;
  if (lua_gettop(L) > used && !lua_isnil(L, used + 1))
    return luaL_error(L, "%s: unexpected argument #%d (%s) after the shape", fn, used + 1, luaL_typename(L, used + 1));
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, f(nd, shape, box));
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
    if (value_arg < 1) return luaL_error(L, "full: expected a shape and a fill value");
    nd = value_arg - 1;
    if (nd > ATTN_MAX_DIMS) return luaL_error(L, "full: at most %d dims supported", ATTN_MAX_DIMS);
    for (int i = 0; i < nd; i++) {
      shape[i] = attnL_checkint(L, i + 1, "full", "size");
      if (shape[i] < 0)
        return luaL_error(L, "full: invalid size %I at position %d of the shape", (lua_Integer)shape[i], i + 1);
    }
  }
  float v = (float)luaL_checknumber(L, value_arg);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_full(nd, shape, v, box));
}

static int like(lua_State *L, const char *fn, int kind) {
  attn_tensor *t = attnL_check(L, 1);
  float v = kind == 2 ? (float)luaL_checknumber(L, 2) : (float)kind;
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_full(t->ndim, t->shape, v, box));
}
static int l_zeros_like(lua_State *L) { return like(L, "zeros_like", 0); }
static int l_ones_like(lua_State *L) { return like(L, "ones_like", 1); }
static int l_full_like(lua_State *L) { return like(L, "full_like", 2); }
static int l_empty_like(lua_State *L) { return like(L, "empty_like", 0); }

/* attn.arange(end) | arange(start, end [, step]): values, like torch */
static int l_arange(lua_State *L) {
  double start = 0, end, step = 1;
  if (lua_isnoneornil(L, 2)) {
    end = luaL_checknumber(L, 1);
  } else {
    start = luaL_checknumber(L, 1);
    end = luaL_checknumber(L, 2);
    step = luaL_optnumber(L, 3, 1);
  }
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_arange(start, end, step, box));
}

static int l_linspace(lua_State *L) {
  double a = luaL_checknumber(L, 1), b = luaL_checknumber(L, 2);
  int64_t n = attnL_checkint(L, 3, "linspace", "steps");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_linspace(a, b, n, box));
}

static int l_eye(lua_State *L) {
  int64_t n = attnL_checkint(L, 1, "eye", "n");
  int64_t m = lua_isnoneornil(L, 2) ? n : attnL_checkint(L, 2, "eye", "m");
  if (n < 0 || m < 0)
    return luaL_error(L, "eye: sizes must be non-negative (got %I, %I)", (lua_Integer)n, (lua_Integer)m);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_eye(n, m, box));
}

/* attn.one_hot(ids, num_classes): ids are 1-based class numbers */
static int l_one_hot(lua_State *L) {
  int64_t nc = lua_isnoneornil(L, 2) ? -1 : attnL_checkint(L, 2, "one_hot", "num_classes");
  if (lua_gettop(L) < 2) lua_settop(L, 2);
  if (nc == 0 || nc < -1) return luaL_error(L, "one_hot: num_classes must be positive (got %I)", (lua_Integer)nc);
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

static int m_shape(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  push_shape(L, t->ndim, t->shape);
  return 1;
}

/* t:size() -> shape table; t:size(dim) -> number */
static int m_size(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (lua_isnoneornil(L, 2)) {
    push_shape(L, t->ndim, t->shape);
    return 1;
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
    return luaL_error(L, "item: only a tensor with one element can be converted to a number, got %s",
                      attn_shape_str(t->ndim, t->shape, sb, sizeof sb));
  lua_pushnumber(L, attn_tensor_get_flat(t, 0));
  return 1;
}

static void push_table(lua_State *L, const attn_tensor *t, int dim, int64_t pos) {
  luaL_checkstack(L, 3, "totable");
  const float *base = t->storage->data;
  lua_createtable(L, (int)t->shape[dim], 0);
  for (int64_t i = 0; i < t->shape[dim]; i++) {
    int64_t p = pos + i * t->stride[dim];
    if (dim == t->ndim - 1)
      lua_pushnumber(L, base[p]);
    else
      push_table(L, t, dim + 1, p);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* Nested Lua tables (a number for a 0-d tensor). */
static int m_totable(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->ndim == 0)
    lua_pushnumber(L, attn_tensor_data(t)[0]);
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
    return luaL_error(L, "tostring: the suffix must be a string (got %s)", luaL_typename(L, 2));
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
    if (len > ATTN_MAX_DIMS) luaL_error(L, "%s: too many dims", fn);
    for (int i = 1; i <= len; i++) {
      lua_rawgeti(L, arg, i);
      dims[n++] = attnL_checkdim(L, -1, ndim, 0, fn);
      lua_pop(L, 1);
    }
  } else {
    int top = lua_gettop(L);
    for (int i = arg; i <= top; i++) {
      if (n == ATTN_MAX_DIMS) luaL_error(L, "%s: too many dims", fn);
      dims[n++] = attnL_checkdim(L, i, ndim, 0, fn);
    }
  }
  return n;
}

static int m_permute(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  int dims[ATTN_MAX_DIMS];
  int n = read_dims(L, 2, t->ndim, dims, "permute");
  if (n != t->ndim)
    return luaL_error(L, "permute: expected %d dims for a %d-d tensor, got %d", t->ndim, t->ndim, n);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (dims[i] == dims[j]) return luaL_error(L, "permute: dim %d appears twice", dims[i] + 1);
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
  if (t->ndim == 0) return luaL_error(L, "narrow: cannot narrow a 0-d tensor");
  int d = attnL_checkdim(L, 2, t->ndim, 0, "narrow");
  int64_t start = attnL_checkint(L, 3, "narrow", "start");
  int64_t len = attnL_checkint(L, 4, "narrow", "length");
  int64_t size = t->shape[d];
  int64_t s0 = start < 0 ? start + size : start - 1;
  if (start == 0 || s0 < 0 || s0 > size)
    return luaL_error(L, "narrow: start %I out of range for dim %d of size %I (expected 1..%I or negative)",
                      (lua_Integer)start, d + 1, (lua_Integer)size, (lua_Integer)size);
  if (len < 0 || len > size - s0)
    return luaL_error(L, "narrow: start %I + length %I exceeds dim %d of size %I", (lua_Integer)start,
                      (lua_Integer)len, d + 1, (lua_Integer)size);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_narrow(t, d, s0, len, box));
}

/* t:slice(dim, first, last [, step]): 1-based inclusive bounds, negatives
   count from the end, clamped like Python slices. */
static int m_slice(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->ndim == 0) return luaL_error(L, "slice: cannot slice a 0-d tensor");
  int d = attnL_checkdim(L, 2, t->ndim, 0, "slice");
  int64_t size = t->shape[d];
  int64_t first = lua_isnoneornil(L, 3) ? 1 : attnL_checkint(L, 3, "slice", "first");
  int64_t last = lua_isnoneornil(L, 4) ? size : attnL_checkint(L, 4, "slice", "last");
  int64_t step = lua_isnoneornil(L, 5) ? 1 : attnL_checkint(L, 5, "slice", "step");
  if (step <= 0) return luaL_error(L, "slice: step must be positive (got %I)", (lua_Integer)step);
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
    luaL_error(L, "%s: index %I out of range for dim %d of size %I (expected 1..%I or -%I..-1)", fn, (lua_Integer)i,
               dim + 1, (lua_Integer)size, (lua_Integer)size, (lua_Integer)size);
  return i0;
}

static int m_select(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->ndim == 0) return luaL_error(L, "select: cannot select from a 0-d tensor");
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
/* Indexing: t[i] (sub-tensor, or a number for 1-d), t[{i, j, ...}]          */

/* Pushes the view selected by the integer (or table of integers) key. */
static int index_view(lua_State *L, int tidx, int kidx, const char *fn) {
  attn_tensor *t = attnL_check(L, tidx);
  int n;
  int64_t idx[ATTN_MAX_DIMS];
  if (lua_type(L, kidx) == LUA_TNUMBER) {
    if (t->ndim == 0) luaL_error(L, "%s: cannot index a 0-d tensor (use t:item())", fn);
    idx[0] = check_index(L, kidx, t->shape[0], 0, fn);
    n = 1;
  } else {
    n = (int)lua_rawlen(L, kidx);
    if (n > t->ndim)
      luaL_error(L, "%s: %d indices for a %d-d tensor", fn, n, t->ndim);
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, kidx, i + 1);
      idx[i] = check_index(L, lua_gettop(L), t->shape[i], i, fn);
      lua_pop(L, 1);
    }
  }
  if (attn_grad_enabled() && attn_requires_grad(t)) {
    /* as_strided is not differentiable: select dim 1 once per index, so
       autograd records SelectBackward0 like torch's t[i][j] */
    if (n == 0) {
      lua_pushvalue(L, tidx);
      return 1;
    }
    const attn_tensor *cur = t;
    for (int i = 0; i < n; i++) {
      attn_tensor **box = attnL_newbox(L);
      attnL_result(L, attn_select(cur, 0, idx[i], box));
      cur = *box;
    }
    return 1;
  }
  int64_t offset = t->offset;
  for (int i = 0; i < n; i++) offset += idx[i] * t->stride[i];
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_as_strided(t, t->ndim - n, t->shape + n, t->stride + n, offset, box));
}

static int index_slow(lua_State *L, int ty) {
  if (ty == LUA_TSTRING) {
    attn_tensor *t = attnL_check(L, 1);
    if (attnL_property(L, t, lua_tostring(L, 2))) return 1;
    lua_pushnil(L);
    return 1;
  }
  if (ty == LUA_TNUMBER || ty == LUA_TTABLE) {
    index_view(L, 1, 2, "index");
    attn_tensor *v = attnL_check(L, -1);
    if (v->ndim == 0) lua_pushnumber(L, attn_tensor_data(v)[0]);
    return 1;
  }
  return luaL_error(L, "index: tensors are indexed by integers or method names (got %s)", luaL_typename(L, 2));
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
  if (ty != LUA_TNUMBER && ty != LUA_TTABLE)
    return luaL_error(L, "newindex: cannot set field '%s' on a tensor (assign t[i] = value, t.grad or "
                         "t.requires_grad)",
                      ty == LUA_TSTRING ? lua_tostring(L, 2) : luaL_typename(L, 2));
  index_view(L, 1, 2, "newindex");
  attn_tensor *v = attnL_check(L, -1);
  attn_tensor *src = attnL_totensor(L, 3, "newindex", "value");
  if (attn_copy_(v, src)) {
    const char *msg = attn_last_error(), *rest = strstr(msg, ": "); /* "copy_: ...": name t[k] = v instead */
    return luaL_error(L, "newindex: %s", rest ? rest + 2 : msg);
  }
  return 0;
}

static int t_len(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  if (t->ndim == 0) return luaL_error(L, "len: a 0-d tensor has no length");
  lua_pushinteger(L, (lua_Integer)t->shape[0]);
  return 1;
}

static int t_concat(lua_State *L) {
  return luaL_error(L, "'..' is not defined for tensors: use t:matmul(u) (or attn.matmul) for matrix "
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
    return luaL_error(L, "set_num_threads: n must be in [1, %d] (got %I)", ATTN_MAX_THREADS, (lua_Integer)n);
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

static const luaL_Reg module_fns[] = {
    {"tensor", l_tensor},         {"zeros", l_zeros},
    {"ones", l_ones},             {"empty", l_empty},
    {"full", l_full},             {"zeros_like", l_zeros_like},
    {"ones_like", l_ones_like},   {"full_like", l_full_like},
    {"empty_like", l_empty_like}, {"arange", l_arange},
    {"linspace", l_linspace},     {"eye", l_eye},
    {"one_hot", l_one_hot},       {"info", l_info},
    {"set_num_threads", l_set_num_threads}, {"set_isa", l_set_isa},
    {"get_num_threads", l_get_num_threads},
    {"is_tensor", l_is_tensor},   {"now", l_now},
    {"debug_counts", l_debug_counts},
    {"_isatty", l_isatty},
    {NULL, NULL}};

static const luaL_Reg methods[] = {
    {"shape", m_shape},         {"size", m_size},
    {"stride", m_stride},       {"dim", m_dim},
    {"numel", m_numel},         {"is_contiguous", m_is_contiguous},
    {"item", m_item},           {"totable", m_totable},
    {"tostring", m_tostring},   {"contiguous", m_contiguous},
    {"clone", m_clone},         {"copy_", m_copy_},
    {"fill_", m_fill_},         {"zero_", m_zero_},
    {"transpose", m_transpose}, {"t", m_t},
    {"permute", m_permute},     {"view", m_view},
    {"reshape", m_reshape},     {"expand", m_expand},
    {"view_as", m_view_as},     {"reshape_as", m_reshape_as},
    {"expand_as", m_expand_as}, {"narrow", m_narrow},
    {"slice", m_slice},         {"select", m_select},
    {"unsqueeze", m_unsqueeze}, {"squeeze", m_squeeze},
    {"flatten", m_flatten},     {NULL, NULL}};

void attnL_open_tensor(lua_State *L, int module, int methods_idx) {
  attnL_register(L, module, 0, module_fns);
  attnL_register(L, module, methods_idx, methods);
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
  lua_pop(L, 1);
}
