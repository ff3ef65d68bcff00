/* SPDX-License-Identifier: MIT */
/* Lua binding: sorting, scatter and index ops, nonzero, masked_select,
 * bucketize (src/core/ops/sort.c, src/core/ops/scatter.c).
 *
 * Every function is both attn.f(t, ...) and t:f(...).  Dims are 1-based
 * (negative from the end); index arguments hold 1-based values; indices
 * handed back are 1-based (bucketize's bucket numbers too: 1..N+1).
 *
 *   t:sort(dim = -1, descending = false) -> values, indices
 *   t:sort{dim =, descending =, stable =}     (torch's keywords)
 *   t:argsort(dim = -1, descending = false) / t:argsort{...} -> indices
 *   t:topk(k, dim = -1, largest = true, sorted = true) / t:topk(k, {...})
 *   t:kthvalue(k, dim = -1, keepdim = false) / t:kthvalue(k, {...})
 *   t:scatter(dim, index, src_or_number), t:scatter_add(dim, index, src),
 *   t:scatter_reduce(dim, index, src, reduce, {include_self = true})
 *   t:index_add(dim, index, source, {alpha = 1} or alpha),
 *   t:index_copy(dim, index, source), t:index_fill(dim, index, value),
 *   and the in-place forms scatter_, scatter_add_, scatter_reduce_,
 *   index_add_, index_copy_, index_fill_ (return t)
 *   t:nonzero() -> [n, ndim]; t:nonzero{as_tuple = true} -> ndim 1-d tensors
 *   t:masked_select(mask) -> 1-d
 *   attn.bucketize(t, boundaries, {right = false} or right)
 */
#include "binding.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* The one place index and mask tensors cross this binding: index
   arguments int64 (or float32 holding integers), masks bool (or any dtype:
   non-zero is set); index results int64. */

/* An index argument (tensor or table, 1-based values in 1..limit) as a
   0-based index tensor pinned for the call. */
static attn_tensor *index_arg(lua_State *L, int arg, int64_t limit, const char *fn, const char *name) {
  return attnL_checkindex(L, arg, limit, fn, name);
}
static attn_tensor *mask_arg(lua_State *L, int arg, const char *fn) { return attnL_totensor(L, arg, fn, "mask"); }

/* ------------------------------------------------------------------------ */
/* Options: positional values or one trailing table of torch's keywords.    */

/* The options table at arg (or 0 when arg is not a table); raises on keys
   that are not in known. */
static int opts_at(lua_State *L, int arg, const char *fn, const char *const *known) {
  if (lua_type(L, arg) != LUA_TTABLE || attnL_test(L, arg)) return 0;
  attnL_checkoptions(L, arg, fn, known);
  return arg;
}

/* ------------------------------------------------------------------------ */
/* sort, argsort, topk, kthvalue                                            */

static int push_pair(lua_State *L, attn_status st, attn_tensor **values, attn_tensor **indices, bool want_values) {
  if (st) return attnL_error(L);
  attnL_to_one_based(*indices);
  attnL_account(L, values);
  attnL_account(L, indices);
  if (!want_values) return 1; /* indices on top */
  return 2;
}

static int sort_like(lua_State *L, bool arg_only) {
  lua_settop(L, 3);
  const char *fn = arg_only ? "argsort" : "sort";
  static const char *const known[] = {"dim", "descending", "stable", NULL};
  attn_tensor *t = attnL_totensor(L, 1, fn, "input");
  int opts = opts_at(L, 2, fn, known);
  int dim, descending;
  if (opts) {
    int d = attnL_option_field(L, opts, "dim");
    dim = lua_isnil(L, d) ? t->ndim - 1 : attnL_checkdim(L, d, t->ndim, 0, fn);
    descending = attnL_option_bool(L, attnL_option_field(L, opts, "descending"), fn, "descending", 0);
    attnL_option_bool(L, attnL_option_field(L, opts, "stable"), fn, "stable", 0); /* always stable */
  } else {
    dim = lua_isnoneornil(L, 2) ? (t->ndim ? t->ndim - 1 : 0) : attnL_checkdim(L, 2, t->ndim, 0, fn);
    descending = attnL_option_bool(L, 3, fn, "descending", 0);
  }
  if (dim < 0) dim = 0;
  attn_tensor **values = attnL_newbox(L);
  attn_tensor **indices = attnL_newbox(L);
  return push_pair(L, attn_sort(t, dim, descending, values, indices), values, indices, !arg_only);
}
static int l_sort(lua_State *L) { return sort_like(L, false); }
static int l_argsort(lua_State *L) { return sort_like(L, true); }

static int l_topk(lua_State *L) {
  lua_settop(L, 5);
  static const char *const known[] = {"dim", "largest", "sorted", NULL};
  attn_tensor *t = attnL_totensor(L, 1, "topk", "input");
  int64_t k = attnL_checkint(L, 2, "topk", "k");
  int opts = opts_at(L, 3, "topk", known);
  int dim, largest;
  int darg = opts ? attnL_option_field(L, opts, "dim") : 3;
  dim = lua_isnoneornil(L, darg) ? (t->ndim ? t->ndim - 1 : 0) : attnL_checkdim(L, darg, t->ndim, 0, "topk");
  largest = attnL_option_bool(L, opts ? attnL_option_field(L, opts, "largest") : 4, "topk", "largest", 1);
  /* results are always sorted (torch allows any order when sorted=false) */
  attnL_option_bool(L, opts ? attnL_option_field(L, opts, "sorted") : 5, "topk", "sorted", 1);
  attn_tensor **values = attnL_newbox(L);
  attn_tensor **indices = attnL_newbox(L);
  return push_pair(L, attn_topk(t, k, dim, largest, values, indices), values, indices, true);
}

static int l_kthvalue(lua_State *L) {
  lua_settop(L, 4);
  static const char *const known[] = {"dim", "keepdim", NULL};
  attn_tensor *t = attnL_totensor(L, 1, "kthvalue", "input");
  int64_t k = attnL_checkint(L, 2, "kthvalue", "k");
  int opts = opts_at(L, 3, "kthvalue", known);
  int darg = opts ? attnL_option_field(L, opts, "dim") : 3;
  int dim = lua_isnoneornil(L, darg) ? (t->ndim ? t->ndim - 1 : 0) : attnL_checkdim(L, darg, t->ndim, 0, "kthvalue");
  int keepdim = attnL_option_bool(L, opts ? attnL_option_field(L, opts, "keepdim") : 4, "kthvalue", "keepdim", 0);
  attn_tensor **values = attnL_newbox(L);
  attn_tensor **indices = attnL_newbox(L);
  return push_pair(L, attn_kthvalue(t, k, dim, keepdim, values, indices), values, indices, true);
}

/* ------------------------------------------------------------------------ */
/* scatter family and index_*                                               */

/* Finishes an op: out of place pushes the result; in place writes it back
   into t (argument 1) and returns t. */
static int finish_op(lua_State *L, attn_status st, attn_tensor **box, bool inplace, const char *fn,
                     const attn_tensor *const *others, int nothers) {
  if (!inplace) return attnL_result(L, st);
  if (st) { /* the core names the out-of-place op: name the one called */
    const char *msg = attn_last_error();
    size_t n = strlen(fn) - 1;
    if (strncmp(msg, fn, n) == 0 && msg[n] == ':') return attnL_raise(L, "%s%s", fn, msg + n);
    return attnL_error(L);
  }
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor *r = *box;
  *box = NULL;
  if (attn_inplace_result(fn, t, others, nothers, r)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

static int scatter_impl(lua_State *L, bool inplace, int kind) { /* kind 0 scatter, 1 add, 2 reduce */
  lua_settop(L, 6); /* argument slots stay put while temporaries are pushed */
  static const char *const names[3][2] = {
      {"scatter", "scatter_"}, {"scatter_add", "scatter_add_"}, {"scatter_reduce", "scatter_reduce_"}};
  const char *fn = names[kind][inplace];
  attn_tensor *t = inplace ? attnL_check(L, 1) : attnL_totensor(L, 1, fn, "self");
  int dim = attnL_checkdim(L, 2, t->ndim, 0, fn);
  int64_t limit = t->ndim ? t->shape[dim] : 1;
  attn_tensor *index = index_arg(L, 3, limit, fn, "index");
  bool by_value = kind == 0 && lua_type(L, 4) == LUA_TNUMBER;
  float value = by_value ? (float)lua_tonumber(L, 4) : 0.0f;
  attn_tensor *src = by_value ? NULL : attnL_totensor(L, 4, fn, "src");
  const char *reduce = NULL;
  int include_self = 1;
  if (kind == 2) {
    static const char *const known[] = {"include_self", NULL};
    reduce = luaL_checkstring(L, 5);
    if (attnL_is_options(L, 6)) {
      int opts = opts_at(L, 6, fn, known);
      include_self = attnL_option_bool(L, attnL_option_field(L, opts, "include_self"), fn, "include_self", 1);
    } else {
      include_self = attnL_option_bool(L, 6, fn, "include_self", 1);
    }
  }
  attn_tensor **box = attnL_newbox(L);
  attn_status st;
  if (kind == 0)
    st = by_value ? attn_scatter_value(t, dim, index, value, box) : attn_scatter(t, dim, index, src, box);
  else if (kind == 1)
    st = attn_scatter_add(t, dim, index, src, box);
  else
    st = attn_scatter_reduce(t, dim, index, src, reduce, include_self, box);
  const attn_tensor *others[1] = {src};
  return finish_op(L, st, box, inplace, fn, others, src ? 1 : 0);
}
static int l_scatter(lua_State *L) { return scatter_impl(L, false, 0); }
static int l_scatter_(lua_State *L) { return scatter_impl(L, true, 0); }
static int l_scatter_add(lua_State *L) { return scatter_impl(L, false, 1); }
static int l_scatter_add_(lua_State *L) { return scatter_impl(L, true, 1); }
static int l_scatter_reduce(lua_State *L) { return scatter_impl(L, false, 2); }
static int l_scatter_reduce_(lua_State *L) { return scatter_impl(L, true, 2); }

static int index_impl(lua_State *L, bool inplace, int kind) { /* kind 0 add, 1 copy, 2 fill */
  lua_settop(L, 5);                                           /* argument slots stay put while temporaries are pushed */
  static const char *const names[3][2] = {
      {"index_add", "index_add_"}, {"index_copy", "index_copy_"}, {"index_fill", "index_fill_"}};
  const char *fn = names[kind][inplace];
  attn_tensor *t = inplace ? attnL_check(L, 1) : attnL_totensor(L, 1, fn, "self");
  int dim = attnL_checkdim(L, 2, t->ndim, 0, fn);
  int64_t limit = t->ndim ? t->shape[dim] : 1;
  attn_tensor *index = index_arg(L, 3, limit, fn, "index");
  attn_tensor *src = NULL;
  float value = 0.0f, alpha = 1.0f;
  if (kind == 2) {
    value = (float)luaL_checknumber(L, 4);
  } else {
    src = attnL_totensor(L, 4, fn, "source");
    if (kind == 0) {
      static const char *const known[] = {"alpha", NULL};
      if (lua_type(L, 5) == LUA_TNUMBER) {
        alpha = (float)lua_tonumber(L, 5);
      } else {
        int opts = opts_at(L, 5, fn, known);
        if (!opts && !lua_isnoneornil(L, 5))
          return attnL_raise(L, "%s: argument 5 must be alpha or {alpha = ...} (got %s)", fn, luaL_typename(L, 5));
        int a = attnL_option_field(L, opts, "alpha");
        if (!lua_isnil(L, a)) alpha = (float)luaL_checknumber(L, a);
      }
    }
  }
  attn_tensor **box = attnL_newbox(L);
  attn_status st;
  if (kind == 0)
    st = attn_index_add(t, dim, index, src, alpha, box);
  else if (kind == 1)
    st = attn_index_copy(t, dim, index, src, box);
  else
    st = attn_index_fill(t, dim, index, value, box);
  const attn_tensor *others[1] = {src};
  return finish_op(L, st, box, inplace, fn, others, src ? 1 : 0);
}
static int l_index_add(lua_State *L) { return index_impl(L, false, 0); }
static int l_index_add_(lua_State *L) { return index_impl(L, true, 0); }
static int l_index_copy(lua_State *L) { return index_impl(L, false, 1); }
static int l_index_copy_(lua_State *L) { return index_impl(L, true, 1); }
static int l_index_fill(lua_State *L) { return index_impl(L, false, 2); }
static int l_index_fill_(lua_State *L) { return index_impl(L, true, 2); }

/* ------------------------------------------------------------------------ */
/* nonzero, masked_select, bucketize                                        */

static int l_nonzero(lua_State *L) {
  lua_settop(L, 2);
  static const char *const known[] = {"as_tuple", NULL};
  attn_tensor *t = attnL_totensor(L, 1, "nonzero", "input");
  int opts = opts_at(L, 2, "nonzero", known);
  if (!opts && !lua_isnoneornil(L, 2))
    return attnL_raise(L, "nonzero: argument 2 must be an options table {as_tuple = true} (got %s)",
                       luaL_typename(L, 2));
  int as_tuple = attnL_option_bool(L, attnL_option_field(L, opts, "as_tuple"), "nonzero", "as_tuple", 0);
  attn_tensor **box = attnL_newbox(L);
  if (attn_nonzero(t, box)) return attnL_error(L);
  attnL_to_one_based(*box);
  attnL_account(L, box);
  if (!as_tuple) return 1;
  /* one 1-d tensor per dim (columns of the [n, ndim] result); a 0-d input gives one [n] tensor of 1s like torch */
  int all = lua_gettop(L);
  int nd = t->ndim;
  if (nd == 0) {
    attn_tensor **col = attnL_newbox(L);
    int64_t n = (*attnL_checkbox(L, all))->shape[0];
    if (attn_full_i64(1, &n, 1, col)) return attnL_error(L); /* int64 ids, as every index */
    attnL_account(L, col);
    return 1;
  }
  luaL_checkstack(L, nd + 2, "nonzero");
  for (int d = 0; d < nd; d++) {
    attn_tensor *r = *attnL_checkbox(L, all);
    attn_tensor **col = attnL_newbox(L);
    attn_tensor *sel;
    if (attn_select(r, 1, d, &sel)) return attnL_error(L);
    attn_status st = attn_contiguous(sel, col);
    attn_tensor_release(sel);
    if (st) return attnL_error(L);
    attnL_account(L, col);
  }
  return nd;
}

static int l_masked_select(lua_State *L) {
  lua_settop(L, 2);
  attn_tensor *t = attnL_totensor(L, 1, "masked_select", "input");
  attn_tensor *m = mask_arg(L, 2, "masked_select");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_masked_select(t, m, box));
}

static int l_bucketize(lua_State *L) {
  lua_settop(L, 4);
  static const char *const known[] = {"right", "out_int32", NULL};
  attn_tensor *t = attnL_totensor(L, 1, "bucketize", "input");
  attn_tensor *b = attnL_totensor(L, 2, "bucketize", "boundaries");
  int right, out_int32;
  if (attnL_is_options(L, 3)) {
    int opts = opts_at(L, 3, "bucketize", known);
    right = attnL_option_bool(L, attnL_option_field(L, opts, "right"), "bucketize", "right", 0);
    out_int32 = attnL_option_bool(L, attnL_option_field(L, opts, "out_int32"), "bucketize", "out_int32", 0);
  } else { /* bucketize(t, b, right, out_int32): torch's keywords in attn's positional order */
    right = attnL_option_bool(L, 3, "bucketize", "right", 0);
    out_int32 = attnL_option_bool(L, 4, "bucketize", "out_int32", 0);
  }
  if (out_int32)
    return attnL_raise(L, "bucketize: out_int32 = true is not supported (attn has no int32 dtype; leave it out for "
                          "torch's default int64 result)");
  attn_tensor **box = attnL_newbox(L);
  if (attn_bucketize(t, b, right, box)) return attnL_error(L);
  attnL_to_one_based(*box);
  attnL_account(L, box);
  return 1;
}

/* core._adam_update(p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq|nil,
   decoupled, decay, beta1, 1 - beta1, beta2, 1 - beta2, neg_step_size,
   bias_correction2_sqrt, eps) -> true; false where the fused update does
   not apply (attn_adam_fusable), and optim.lua composes it from tensor ops
   instead */
static int l_adam_update(lua_State *L) {
  attn_tensor *t[5];
  for (int i = 0; i < 5; i++) t[i] = i == 4 && lua_isnoneornil(L, 5) ? NULL : attnL_check(L, i + 1);
  luaL_checktype(L, 6, LUA_TBOOLEAN);
  attn_adam_coeffs c = {0};
  c.decoupled = lua_toboolean(L, 6);
  float *f[] = {&c.decay,           &c.beta1,         &c.one_minus_beta1,       &c.beta2,
                &c.one_minus_beta2, &c.neg_step_size, &c.bias_correction2_sqrt, &c.eps};
  for (int i = 0; i < 8; i++) *f[i] = (float)luaL_checknumber(L, 7 + i);
  bool fused = attn_adam_fusable(t[0], t[1], t[2], t[3], t[4]);
  if (fused && attn_adam_update(t[0], t[1], t[2], t[3], t[4], &c)) return attnL_error(L);
  lua_pushboolean(L, fused);
  return 1;
}

/* core._check_class_targets(t, lo, hi, ignore|nil) -> any_ignored,
   first_bad (1-based flat index) or nil: the losses' one-pass check */
static int l_check_class_targets(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  lua_Integer lo = luaL_checkinteger(L, 2), hi = luaL_checkinteger(L, 3);
  bool has_ignore = !lua_isnoneornil(L, 4);
  lua_Integer ignore = has_ignore ? luaL_checkinteger(L, 4) : 0;
  bool any_ignored;
  int64_t first_bad;
  if (attn_check_class_targets(t, lo, hi, has_ignore, ignore, &any_ignored, &first_bad)) return attnL_error(L);
  lua_pushboolean(L, any_ignored);
  if (first_bad < 0)
    lua_pushnil(L);
  else
    lua_pushinteger(L, (lua_Integer)first_bad + 1);
  return 2;
}

void attnL_open_ops(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {{"sort", l_sort},
                                 {"argsort", l_argsort},
                                 {"topk", l_topk},
                                 {"kthvalue", l_kthvalue},
                                 {"scatter", l_scatter},
                                 {"scatter_", l_scatter_},
                                 {"scatter_add", l_scatter_add},
                                 {"scatter_add_", l_scatter_add_},
                                 {"scatter_reduce", l_scatter_reduce},
                                 {"scatter_reduce_", l_scatter_reduce_},
                                 {"index_add", l_index_add},
                                 {"index_add_", l_index_add_},
                                 {"index_copy", l_index_copy},
                                 {"index_copy_", l_index_copy_},
                                 {"index_fill", l_index_fill},
                                 {"index_fill_", l_index_fill_},
                                 {"nonzero", l_nonzero},
                                 {"masked_select", l_masked_select},
                                 {"bucketize", l_bucketize},
                                 {"_adam_update", l_adam_update},
                                 {"_check_class_targets", l_check_class_targets},
                                 {NULL, NULL}};
  attnL_register(L, module, methods, fns);
}
