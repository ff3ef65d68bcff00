/* SPDX-License-Identifier: MIT */
/* Lua binding: elementwise math, operators, where/masked_fill, matmul. */
#include "binding.h"
#include "openers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Binary ops: tensor op tensor|number|table, either side a number          */

/* t op number, typed like torch's Python scalars: an integer keeps an
   int64 tensor int64 (exactly), a float (2.0) makes the result float32. */
static int binary_number(lua_State *L, attn_binary_op op, attn_tensor *t, int num, bool reversed) {
  attn_tensor **box;
  if (t->dtype != ATTN_FLOAT32 && lua_isinteger(L, num)) {
    box = attnL_newbox(L);
    return attnL_result(L, attn_binary_scalar_i64(op, t, (int64_t)lua_tointeger(L, num), reversed, box));
  }
  float s = (float)lua_tonumber(L, num);
  if (t->dtype != ATTN_FLOAT32 && !(t->dtype == ATTN_BOOL && op == ATTN_SUB)) { /* bool - x: the core refuses */
    attn_tensor **fb = attnL_newbox(L);
    if (attn_to_dtype(t, ATTN_FLOAT32, fb)) return attnL_error(L);
    attnL_account(L, fb);
    t = *fb;
  }
  box = attnL_newbox(L);
  return attnL_result(L, attn_binary_scalar(op, t, s, reversed, box));
}

static int binary(lua_State *L, attn_binary_op op) {
  const char *fn = attn_binary_op_name(op);
  attn_tensor **box;
  /* number op tensor (operators put the number first) */
  if (lua_type(L, 1) == LUA_TNUMBER && attnL_test(L, 2)) return binary_number(L, op, attnL_check(L, 2), 1, true);
  attn_tensor *a = attnL_totensor(L, 1, fn, "self");
  if (lua_type(L, 2) == LUA_TNUMBER) return binary_number(L, op, a, 2, false);
  attn_tensor *b = attnL_totensor(L, 2, fn, "other");
  box = attnL_newbox(L);
  return attnL_result(L, attn_binary(op, a, b, box));
}

static int binary_(lua_State *L, attn_binary_op op) {
  char fn[32];
  snprintf(fn, sizeof fn, "%s_", attn_binary_op_name(op));
  attn_tensor *a = attnL_check(L, 1);
  attn_status st;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    st = attn_binary_scalar_(op, a, (float)lua_tonumber(L, 2), false);
  } else {
    attn_tensor *b = attnL_totensor(L, 2, fn, "other");
    st = attn_binary_(op, a, b);
  }
  if (st) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

/* add/sub take torch's optional alpha: a + alpha * b */
static int add_sub(lua_State *L, attn_binary_op op) {
  if (lua_isnoneornil(L, 3)) return binary(L, op);
  const char *fn = attn_binary_op_name(op);
  attn_tensor *a = attnL_totensor(L, 1, fn, "self");
  attn_tensor *b = attnL_totensor(L, 2, fn, "other");
  float alpha = (float)luaL_checknumber(L, 3);
  attn_tensor **box = attnL_newbox(L);
  if (op == ATTN_ADD) return attnL_result(L, attn_add_scaled(a, b, alpha, box));
  /* a - alpha * b as two recorded ops, so grad_fn reads SubBackward0 like torch */
  if (attn_binary_scalar(ATTN_MUL, b, alpha, false, box)) return attnL_error(L);
  attn_tensor **res = attnL_newbox(L);
  return attnL_result(L, attn_binary(ATTN_SUB, a, *box, res));
}

/* add/sub take torch's optional alpha; the other ops are plain binary */
static int binary_entry(lua_State *L, attn_binary_op op) {
  return op == ATTN_ADD || op == ATTN_SUB ? add_sub(L, op) : binary(L, op);
}
/* a:add_(b [, alpha]) / a:sub_(b [, alpha]): a +-= alpha * b */
static int add_sub_(lua_State *L, attn_binary_op op) {
  if (lua_isnoneornil(L, 3)) return binary_(L, op);
  attn_tensor *a = attnL_check(L, 1);
  float alpha = (float)luaL_checknumber(L, 3);
  attn_status st;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    st = attn_binary_scalar_(op, a, alpha * (float)lua_tonumber(L, 2), false);
  } else {
    attn_tensor *b = attnL_totensor(L, 2, op == ATTN_ADD ? "add_" : "sub_", "other");
    attn_tensor **box = attnL_newbox(L);
    if ((st = attn_binary_scalar(ATTN_MUL, b, alpha, false, box)) == ATTN_OK) st = attn_binary_(op, a, *box);
  }
  if (st) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}
static int binary_entry_(lua_State *L, attn_binary_op op) {
  return op == ATTN_ADD || op == ATTN_SUB ? add_sub_(L, op) : binary_(L, op);
}

/* attn.NAME / t:NAME and t:NAME_ for every binary op of the op table */
#define BINARY_FNS(ID, NAME, ...)                                                                                      \
  static int lm_##NAME(lua_State *L) { return binary_entry(L, ATTN_##ID); }                                            \
  static int lm_##NAME##_(lua_State *L) { return binary_entry_(L, ATTN_##ID); }
ATTN_BINARY_OPS(BINARY_FNS)
#undef BINARY_FNS

/* Metamethods: Lua passes the operands in source order. */
static int mm_add(lua_State *L) { return binary(L, ATTN_ADD); }
static int mm_sub(lua_State *L) { return binary(L, ATTN_SUB); }
static int mm_unm(lua_State *L) {
  attn_tensor *a = attnL_check(L, 1);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_unary(ATTN_NEG, a, box));
}

/* ------------------------------------------------------------------------ */
/* Unary ops                                                                 */

static int unary(lua_State *L, attn_unary_op op) {
  attn_tensor *a = attnL_totensor(L, 1, attn_unary_op_name(op), "self");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_unary(op, a, box));
}

static int unary_(lua_State *L, attn_unary_op op) {
  attn_tensor *a = attnL_check(L, 1);
  if (attn_unary_(op, a)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

/* gelu(t [, approximate]) with approximate "none" (default) or "tanh" */
static attn_unary_op unary_kind(lua_State *L, attn_unary_op op) {
  static const char *const kinds[] = {"none", "tanh", NULL};
  if (op != ATTN_GELU) return op;
  return luaL_checkoption(L, 2, "none", kinds) ? ATTN_GELU_TANH : ATTN_GELU;
}

/* attn.NAME / t:NAME and t:NAME_ for every unary op of the op table (the
   ones whose sig is empty are reached through another op's option) */
#define UNARY_FNS(ID, NAME, ...)                                                                                       \
  static int lm_##NAME(lua_State *L) { return unary(L, unary_kind(L, ATTN_##ID)); }                                    \
  static int lm_##NAME##_(lua_State *L) { return unary_(L, unary_kind(L, ATTN_##ID)); }
ATTN_UNARY_OPS(UNARY_FNS)
#undef UNARY_FNS

/* clamp(t, min, max): nil for an open side */
static void clamp_bounds(lua_State *L, float *lo, float *hi) {
  *lo = lua_isnoneornil(L, 2) ? NAN : (float)luaL_checknumber(L, 2);
  *hi = lua_isnoneornil(L, 3) ? NAN : (float)luaL_checknumber(L, 3);
  if (*lo != *lo && *hi != *hi) attnL_raise(L, "clamp: at least one of min and max must be given");
}

static int lm_clamp(lua_State *L) {
  attn_tensor *a = attnL_totensor(L, 1, "clamp", "self");
  float lo, hi;
  clamp_bounds(L, &lo, &hi);
  attn_tensor **box = attnL_newbox(L);
  /* torch: integer bounds keep an int64/bool input integer, a float bound makes it float32 */
  bool float_bound = (lua_type(L, 2) == LUA_TNUMBER && !lua_isinteger(L, 2)) ||
                     (lua_type(L, 3) == LUA_TNUMBER && !lua_isinteger(L, 3));
  if (a->dtype != ATTN_FLOAT32 && float_bound) {
    attnL_result(L, attn_to_dtype(a, ATTN_FLOAT32, box));
    a = *box;
    box = attnL_newbox(L);
  }
  return attnL_result(L, attn_clamp(a, lo, hi, box));
}

static int lm_clamp_(lua_State *L) {
  attn_tensor *a = attnL_check(L, 1);
  float lo, hi;
  clamp_bounds(L, &lo, &hi);
  if (a->dtype != ATTN_FLOAT32 && ((lua_type(L, 2) == LUA_TNUMBER && !lua_isinteger(L, 2)) ||
                                   (lua_type(L, 3) == LUA_TNUMBER && !lua_isinteger(L, 3))))
    return attnL_raise(L,
                       "clamp_: result type float32 can't be cast to the destination's dtype %s (use integer "
                       "bounds, or clamp a float copy: x:float():clamp_(...))",
                       attn_dtype_name(a->dtype));
  if (attn_clamp_(a, lo, hi)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

/* A Lua integer beside an int64 tensor becomes an int64 0-d tensor (torch
   types Python scalars by the tensor); other numbers become float32. */
static attn_tensor *scalar_beside(lua_State *L, int arg, const attn_tensor *other, const char *fn, const char *name) {
  if (lua_isinteger(L, arg) && other && other->dtype != ATTN_FLOAT32) { /* bool + 2 is int64 too */
    attn_tensor **box = attnL_newbox(L);
    if (attn_full_i64(0, NULL, (int64_t)lua_tointeger(L, arg), box)) attnL_error(L);
    attnL_account(L, box);
    lua_replace(L, arg);
    return *box;
  }
  if (lua_type(L, arg) == LUA_TBOOLEAN && other && other->dtype == ATTN_BOOL) {
    attn_tensor **box = attnL_newbox(L);
    if (attn_scalar_dtype(ATTN_BOOL, lua_toboolean(L, arg), box)) attnL_error(L);
    attnL_account(L, box);
    lua_replace(L, arg);
    return *box;
  }
  return attnL_totensor(L, arg, fn, name);
}

/* attn.where(cond, a, b): numbers allowed for a and b */
static int lm_where(lua_State *L) {
  attn_tensor *c = attnL_totensor(L, 1, "where", "condition");
  attn_tensor *a = attnL_test(L, 2), *b = attnL_test(L, 3);
  a = a ? a : scalar_beside(L, 2, b, "where", "input");
  b = b ? b : scalar_beside(L, 3, a, "where", "other");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_where(c, a, b, box));
}

/* t:masked_fill(mask, value): value where mask is non-zero (true) */
static float fill_value(lua_State *L, int arg) {
  if (lua_type(L, arg) == LUA_TBOOLEAN) return lua_toboolean(L, arg) ? 1.0f : 0.0f;
  return (float)luaL_checknumber(L, arg);
}

/* An int64 tensor filled with a Lua integer: exact (a float value rounds
   beyond 2^24), through where with an int64 0-d value; pushes the result. */
static bool masked_fill_exact(lua_State *L, attn_tensor *t, attn_tensor *m) {
  if (t->dtype != ATTN_INT64 || !lua_isinteger(L, 3)) return false;
  int nd;
  int64_t shape[ATTN_MAX_DIMS];
  bool fits = attn_broadcast_shape("masked_fill", t, m, &nd, shape) == ATTN_OK && nd == t->ndim;
  for (int d = 0; fits && d < nd; d++) fits = shape[d] == t->shape[d];
  if (!fits) return false; /* the core names the mismatch */
  attn_tensor **s = attnL_newbox(L);
  attnL_result(L, attn_full_i64(0, NULL, (int64_t)lua_tointeger(L, 3), s));
  attn_tensor **box = attnL_newbox(L);
  attnL_result(L, attn_where(m, *s, t, box));
  return true;
}

static int lm_masked_fill(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "masked_fill", "self");
  attn_tensor *m = attnL_totensor(L, 2, "masked_fill", "mask");
  if (masked_fill_exact(L, t, m)) return 1;
  float v = fill_value(L, 3);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_masked_fill(t, m, v, box));
}

static int lm_masked_fill_(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  attn_tensor *m = attnL_totensor(L, 2, "masked_fill_", "mask");
  if (masked_fill_exact(L, t, m)) {
    if (attn_copy_(t, attnL_check(L, -1))) return attnL_error(L);
    lua_settop(L, 1);
    return 1;
  }
  float v = fill_value(L, 3);
  if (attn_masked_fill_(t, m, v)) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Logical ops, classification, integer division                             */

static int logical(lua_State *L, attn_logical_op op, const char *fn) {
  attn_tensor *a = attnL_totensor(L, 1, fn, "self");
  attn_tensor *b = attnL_totensor(L, 2, fn, "other");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_logical(op, a, b, box));
}
static int lm_logical_and(lua_State *L) { return logical(L, ATTN_LOGICAL_AND, "logical_and"); }
static int lm_logical_or(lua_State *L) { return logical(L, ATTN_LOGICAL_OR, "logical_or"); }
static int lm_logical_xor(lua_State *L) { return logical(L, ATTN_LOGICAL_XOR, "logical_xor"); }

typedef attn_status (*unary_any_fn)(const attn_tensor *, attn_tensor **);
static int unary_any(lua_State *L, const char *fn, unary_any_fn f) {
  attn_tensor *a = attnL_totensor(L, 1, fn, "self");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, f(a, box));
}
static int lm_logical_not(lua_State *L) { return unary_any(L, "logical_not", attn_logical_not); }
static int lm_isnan(lua_State *L) { return unary_any(L, "isnan", attn_isnan); }
static int lm_isinf(lua_State *L) { return unary_any(L, "isinf", attn_isinf); }
static int lm_isfinite(lua_State *L) { return unary_any(L, "isfinite", attn_isfinite); }

typedef attn_status (*binary_any_fn)(const attn_tensor *, const attn_tensor *, attn_tensor **);
static int binary_any(lua_State *L, const char *fn, binary_any_fn f) {
  attn_tensor *a = attnL_test(L, 1), *b = attnL_test(L, 2);
  a = a ? a : scalar_beside(L, 1, b, fn, "self");
  b = b ? b : scalar_beside(L, 2, a, fn, "other");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, f(a, b, box));
}
static int lm_floor_divide(lua_State *L) { return binary_any(L, "floor_divide", attn_floor_divide); }
static int lm_remainder(lua_State *L) { return binary_any(L, "remainder", attn_remainder); }

/* ------------------------------------------------------------------------ */
/* Products                                                                  */

typedef attn_status (*product_fn)(const attn_tensor *, const attn_tensor *, attn_tensor **);

static int product(lua_State *L, const char *fn, product_fn f) {
  attn_tensor *a = attnL_totensor(L, 1, fn, "self");
  attn_tensor *b = attnL_totensor(L, 2, fn, "other");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, f(a, b, box));
}
static int lm_matmul(lua_State *L) { return product(L, "matmul", attn_matmul); }
static int lm_mm(lua_State *L) { return product(L, "mm", attn_mm); }
static int lm_bmm(lua_State *L) { return product(L, "bmm", attn_bmm); }
static int lm_outer(lua_State *L) { return product(L, "outer", attn_outer); }
static int lm_dot(lua_State *L) { return product(L, "dot", attn_dot); }

/* attn.linear(x, w [, b]): x [..., in], w [out, in], b [out] or nil. */
static int lm_linear(lua_State *L) {
  attn_tensor *x = attnL_totensor(L, 1, "linear", "input");
  attn_tensor *w = attnL_totensor(L, 2, "linear", "weight");
  attn_tensor *b = lua_isnoneornil(L, 3) ? NULL : attnL_totensor(L, 3, "linear", "bias");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_linear(x, w, b, box));
}

static const luaL_Reg fns[] = {{"clamp", lm_clamp},
                               {"clamp_", lm_clamp_},
                               {"where", lm_where},
                               {"masked_fill", lm_masked_fill},
                               {"masked_fill_", lm_masked_fill_},
                               {"matmul", lm_matmul},
                               {"mm", lm_mm},
                               {"bmm", lm_bmm},
                               {"outer", lm_outer},
                               {"dot", lm_dot},
                               {"linear", lm_linear},
                               {"logical_and", lm_logical_and},
                               {"logical_or", lm_logical_or},
                               {"logical_xor", lm_logical_xor},
                               {"logical_not", lm_logical_not},
                               {"isnan", lm_isnan},
                               {"isinf", lm_isinf},
                               {"isfinite", lm_isfinite},
                               {"floor_divide", lm_floor_divide},
                               {"remainder", lm_remainder},
                               {NULL, NULL}};

/* ------------------------------------------------------------------------ */
/* The op table (attn_ops.h): registration and attn.core._ops               */

typedef struct table_op {
  const char *name, *name_; /* static: the bound methods keep them */
  lua_CFunction fn, fn_;
  const char *sig, *kind, *ints, *reads, *node, *torch, *doc;
  double lo, hi;
} table_op;

#define UNARY_ROW(ID, NAME, SIG, READS, INTS, LO, HI, NODE, TORCH, DOC)                                                \
  {#NAME, #NAME "_", lm_##NAME, lm_##NAME##_, SIG, "unary", #INTS, #READS, #NODE, TORCH, DOC, LO, HI},
#define BINARY_ROW(ID, NAME, SIG, KIND, INTS, LO, HI, NODE, TORCH, DOC)                                                \
  {#NAME, #NAME "_", lm_##NAME, lm_##NAME##_, SIG, #KIND, #INTS, "", #NODE, TORCH, DOC, LO, HI},
static const table_op unary_ops[] = {ATTN_UNARY_OPS(UNARY_ROW)};
static const table_op binary_ops[] = {ATTN_BINARY_OPS(BINARY_ROW)};
#undef UNARY_ROW
#undef BINARY_ROW

static void set_string(lua_State *L, const char *key, const char *v) {
  lua_pushstring(L, v);
  lua_setfield(L, -2, key);
}

/* Registers the ops of one list and appends their records to the array on
   top of the stack. */
static void open_table_ops(lua_State *L, int module, int methods, const table_op *ops, size_t n, bool unary) {
  for (size_t i = 0; i < n; i++) {
    const table_op *o = &ops[i];
    bool callable = !unary || o->sig[0]; /* gelu_tanh is gelu's option */
    if (callable) {
      const luaL_Reg r[] = {{o->name, o->fn}, {o->name_, o->fn_}, {NULL, NULL}};
      attnL_register(L, module, methods, r);
    }
    lua_createtable(L, 0, 12);
    set_string(L, "name", o->name);
    set_string(L, "kind", o->kind);
    set_string(L, "ints", o->ints);
    set_string(L, "torch", o->torch);
    set_string(L, "doc", o->doc);
    if (o->reads[0]) set_string(L, "reads", o->reads);
    if (strcmp(o->node, "NONE") != 0) set_string(L, "node", o->node);
    set_string(L, "sig", o->sig);
    lua_pushboolean(L, callable);
    lua_setfield(L, -2, "callable");
    lua_pushnumber(L, o->lo);
    lua_setfield(L, -2, "lo");
    lua_pushnumber(L, o->hi);
    lua_setfield(L, -2, "hi");
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  }
}

void attnL_open_math(lua_State *L, int module, int methods) {
  attnL_register(L, module, methods, fns);
  /* attn.core._ops: one record per op of the op table, in its order */
  lua_newtable(L);
  open_table_ops(L, module, methods, unary_ops, sizeof unary_ops / sizeof *unary_ops, true);
  open_table_ops(L, module, methods, binary_ops, sizeof binary_ops / sizeof *binary_ops, false);
  lua_setfield(L, module, "_ops");
  luaL_getmetatable(L, ATTN_TENSOR_MT);
  attnL_pushfn(L, mm_add);
  lua_setfield(L, -2, "__add");
  attnL_pushfn(L, mm_sub);
  lua_setfield(L, -2, "__sub");
  attnL_pushfn(L, lm_mul);
  lua_setfield(L, -2, "__mul");
  attnL_pushfn(L, lm_div);
  lua_setfield(L, -2, "__div");
  attnL_pushfn(L, lm_pow);
  lua_setfield(L, -2, "__pow");
  attnL_pushfn(L, mm_unm);
  lua_setfield(L, -2, "__unm");
  attnL_pushfn(L, lm_floor_divide); /* a // b */
  lua_setfield(L, -2, "__idiv");
  attnL_pushfn(L, lm_remainder); /* a % b */
  lua_setfield(L, -2, "__mod");
  lua_pop(L, 1);
}
