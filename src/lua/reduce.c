/* SPDX-License-Identifier: MIT */
/* Lua binding: reductions, cumsum, softmax/log_softmax.
 *
 * Every function is both attn.f(t, ...) and t:f(...).  Dims are 1-based
 * (negative dims count from the end); indices handed back are 1-based.
 *
 *   t:sum(dim?, keepdim?)   mean, prod, all, any, argmax, argmin alike.
 *       Without a dim the reduction covers every element and gives a 0-d
 *       tensor (keepdim = true then keeps every dim as size 1).
 *       argmax()/argmin() without a dim give the flat 1-based index.
 *   t:max(dim, keepdim?)    -> values, indices (two tensors, indices
 *       1-based); t:max() -> 0-d tensor; t:max(other) with a tensor is
 *       the elementwise maximum (torch's overload).  min alike.
 *   t:var(dim?, unbiased?, keepdim?)   std alike: torch's positional order.
 *       unbiased is true (default, correction 1) or false (correction 0),
 *       or a number taken as the correction itself.
 *   t:norm(p?, dim?, keepdim?)   p: a number (2 default; math.huge and
 *       -math.huge for the inf norms, 0 counts non-zeros) or "fro" (2).
 *   t:logsumexp(dim, keepdim?)
 *   t:cumsum(dim), t:softmax(dim), t:log_softmax(dim)
 */
#include "binding.h"
#include "openers.h"

#include <math.h>
#include <string.h>

/* Completes a reduction over everything: the 0-d result on top becomes
   [1, 1, ...] (ndim ones) when keepdim is set. */
static int all_result(lua_State *L, attn_status st, int ndim, int keepdim) {
  attnL_result(L, st);
  if (!keepdim || ndim == 0) return 1;
  int64_t ones[ATTN_MAX_DIMS];
  for (int i = 0; i < ndim; i++) ones[i] = 1;
  attn_tensor *scalar = *(attn_tensor **)lua_touserdata(L, -1);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_reshape(scalar, ndim, ones, box));
}

/* t:f(dim?, keepdim?) and the dim/keepdim part of var/std/norm: the dim
   is argument darg, keepdim argument karg. */
static int reduce_at(lua_State *L, attn_reduce_op op, const char *fn, const attn_tensor *t, int darg, int karg,
                     const attn_reduce_opts *opts) {
  bool arg = op == ATTN_ARGMAX || op == ATTN_ARGMIN;
  int keepdim = attnL_optbool(L, karg, 0);
  attn_tensor **box;
  if (lua_isnoneornil(L, darg)) {
    box = attnL_newbox(L);
    attn_status st = attn_reduce_all(op, t, opts, box);
    if (st == ATTN_OK && arg) attnL_to_one_based(*box);
    return all_result(L, st, t->ndim, keepdim);
  }
  int dim = attnL_checkdim(L, darg, t->ndim, 0, fn);
  box = attnL_newbox(L);
  attn_status st = attn_reduce_dim(op, t, dim, keepdim, opts, box);
  if (st == ATTN_OK && arg) attnL_to_one_based(*box);
  return attnL_result(L, st);
}

static int reduce_simple(lua_State *L, attn_reduce_op op, const char *fn) {
  attn_tensor *t = attnL_totensor(L, 1, fn, "input");
  return reduce_at(L, op, fn, t, 2, 3, NULL);
}

static int l_sum(lua_State *L) { return reduce_simple(L, ATTN_SUM, "sum"); }
static int l_mean(lua_State *L) { return reduce_simple(L, ATTN_MEAN, "mean"); }
static int l_prod(lua_State *L) { return reduce_simple(L, ATTN_PROD, "prod"); }
static int l_all(lua_State *L) { return reduce_simple(L, ATTN_ALL, "all"); }
static int l_any(lua_State *L) { return reduce_simple(L, ATTN_ANY, "any"); }
static int l_argmax(lua_State *L) { return reduce_simple(L, ATTN_ARGMAX, "argmax"); }
static int l_argmin(lua_State *L) { return reduce_simple(L, ATTN_ARGMIN, "argmin"); }

/* t:max(dim, keepdim?) -> values, indices; t:max() -> 0-d; t:max(other) */
static int max_min(lua_State *L, bool is_min) {
  const char *fn = is_min ? "min" : "max";
  attn_tensor *t = attnL_totensor(L, 1, fn, "input");
  if (attnL_test(L, 2)) {
    attn_tensor *other = attnL_check(L, 2);
    attn_tensor **box = attnL_newbox(L);
    return attnL_result(L, attn_binary(is_min ? ATTN_MINIMUM : ATTN_MAXIMUM, t, other, box));
  }
  if (lua_isnoneornil(L, 2)) return reduce_at(L, is_min ? ATTN_MIN : ATTN_MAX, fn, t, 2, 3, NULL);
  int dim = attnL_checkdim(L, 2, t->ndim, 0, fn);
  int keepdim = attnL_optbool(L, 3, 0);
  attn_tensor **values = attnL_newbox(L);
  attn_tensor **indices = attnL_newbox(L);
  if (attn_max_dim(t, dim, keepdim, is_min, values, indices)) return attnL_error(L);
  attnL_to_one_based(*indices);
  attnL_account(L, values);
  attnL_account(L, indices);
  return 2;
}
static int l_max(lua_State *L) { return max_min(L, false); }
static int l_min(lua_State *L) { return max_min(L, true); }

/* t:var(dim?, unbiased?, keepdim?) */
static int var_std(lua_State *L, attn_reduce_op op, const char *fn) {
  attn_tensor *t = attnL_totensor(L, 1, fn, "input");
  attn_reduce_opts opts = {1.0, 2.0};
  if (lua_type(L, 3) == LUA_TNUMBER)
    opts.correction = lua_tonumber(L, 3);
  else
    opts.correction = attnL_optbool(L, 3, 1) ? 1.0 : 0.0;
  return reduce_at(L, op, fn, t, 2, 4, &opts);
}
static int l_var(lua_State *L) { return var_std(L, ATTN_VAR, "var"); }
static int l_std(lua_State *L) { return var_std(L, ATTN_STD, "std"); }

/* t:norm(p?, dim?, keepdim?) */
static int l_norm(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "norm", "input");
  attn_reduce_opts opts = {1.0, 2.0};
  if (lua_type(L, 2) == LUA_TSTRING) {
    if (strcmp(lua_tostring(L, 2), "fro") != 0)
      return attnL_raise(L, "norm: p must be a number or \"fro\" (got \"%s\")", lua_tostring(L, 2));
  } else if (!lua_isnoneornil(L, 2)) {
    opts.p = luaL_checknumber(L, 2);
  }
  return reduce_at(L, ATTN_NORM, "norm", t, 3, 4, &opts);
}

/* t:logsumexp(dim, keepdim?): the dim is required, as in torch */
static int l_logsumexp(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "logsumexp", "input");
  attnL_checkdim(L, 2, t->ndim, 0, "logsumexp");
  return reduce_at(L, ATTN_LOGSUMEXP, "logsumexp", t, 2, 3, NULL);
}

/* t:f(dim) -> tensor of t's shape */
static int along(lua_State *L, const char *fn, attn_status (*f)(const attn_tensor *, int, attn_tensor **)) {
  attn_tensor *t = attnL_totensor(L, 1, fn, "input");
  int dim = attnL_checkdim(L, 2, t->ndim, 0, fn);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, f(t, dim, box));
}
static int l_cumsum(lua_State *L) { return along(L, "cumsum", attn_cumsum); }
static int l_softmax(lua_State *L) { return along(L, "softmax", attn_softmax); }
static int l_log_softmax(lua_State *L) { return along(L, "log_softmax", attn_log_softmax); }
/* core._layer_norm(x, k, weight|nil, bias|nil, eps): F.layer_norm's fused
   kernel, after F.layer_norm has checked and converted its arguments */
static int l_layer_norm(lua_State *L) {
  attn_tensor *x = attnL_check(L, 1);
  lua_Integer k = luaL_checkinteger(L, 2);
  attn_tensor *w = lua_isnoneornil(L, 3) ? NULL : attnL_check(L, 3);
  attn_tensor *b = lua_isnoneornil(L, 4) ? NULL : attnL_check(L, 4);
  float eps = (float)luaL_checknumber(L, 5);
  if (k < 1 || k > ATTN_MAX_DIMS)
    return luaL_argerror(L, 2, "layer_norm: the number of normalized dims is out of range");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_layer_norm(x, (int)k, w, b, eps, box));
}

void attnL_open_reduce(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {{"sum", l_sum},
                                 {"mean", l_mean},
                                 {"prod", l_prod},
                                 {"max", l_max},
                                 {"min", l_min},
                                 {"argmax", l_argmax},
                                 {"argmin", l_argmin},
                                 {"var", l_var},
                                 {"std", l_std},
                                 {"norm", l_norm},
                                 {"logsumexp", l_logsumexp},
                                 {"all", l_all},
                                 {"any", l_any},
                                 {"cumsum", l_cumsum},
                                 {"softmax", l_softmax},
                                 {"log_softmax", l_log_softmax},
                                 {"_layer_norm", l_layer_norm},
                                 {NULL, NULL}};
  attnL_register(L, module, methods, fns);
}
