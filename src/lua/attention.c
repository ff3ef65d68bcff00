/* SPDX-License-Identifier: MIT */
/* Lua binding: scaled-dot-product attention and its mask helpers.
 *
 *   attn.scaled_dot_product_attention(q, k, v [, opts]) -> out [, weights]
 *     the options may also come positionally: q, k, v, attn_mask, dropout_p,
 *     is_causal, scale, enable_gqa (torch 2.x's order), attn_mask_kind,
 *     causal_alignment, generator, need_weights (attn's)
 *     opts (all optional):
 *       attn_mask        tensor broadcastable to [..., L, S]: a bool tensor
 *                        means what it means in torch (true = take part);
 *                        a float mask needs attn_mask_kind
 *       attn_mask_kind   "bool" (non-zero = take part) or "additive" (added
 *                        to the scores); required with a float attn_mask:
 *                        a mask of 0s and 1s is never guessed, since both
 *                        readings are plausible
 *       is_causal        boolean
 *       causal_alignment "top_left" (torch: query i sees keys j <= i) or
 *                        "bottom_right" (the last query sees the last key)
 *       scale            number (default 1/sqrt(E); 0 also means the default)
 *       dropout_p        number in [0, 1] (draws like torch's math path)
 *       generator        attn.Generator for dropout (default generator)
 *       enable_gqa       boolean: k/v heads may divide q's heads
 *       need_weights     boolean: also return the weights [..., L, S]
 *   attn.causal_mask(L [, S] [, bottom_right or {bottom_right = bool}]) -> [L, S] of 0/1
 *   attn.padding_mask(lengths, S) -> [B, 1, 1, S] of 0/1
 * Unknown option names raise, so typos do not pass silently.
 */
#include "binding.h"
#include "openers.h"

#include <math.h>
#include <string.h>

#define FN "scaled_dot_product_attention"
#define ATTN_GENERATOR_MT "attn.Generator"

/* The layout of random.c's generator userdata. */
typedef struct {
  attn_generator *g;
} gen_box;

static const char *const sdpa_keys[] = {"attn_mask", "attn_mask_kind", "is_causal",  "causal_alignment", "scale",
                                        "dropout_p", "generator",      "enable_gqa", "need_weights",     NULL};

/* Raises for keys of the options table that are not options. */
static void check_keys(lua_State *L, int t) { attnL_checkoptions(L, t, FN, sdpa_keys); }

/* The positional order after q, k, v: torch 2.x's, then attn's own. */
static const char *const sdpa_order[] = {
    "attn_mask",      "dropout_p",        "is_causal", "scale",        "enable_gqa",
    "attn_mask_kind", "causal_alignment", "generator", "need_weights", NULL};

/* attn.scaled_dot_product_attention(q, k, v [, opts]) or with the options
   positional in sdpa_order (the declared signature expands a trailing
   options table into that order, attn/signature.lua) */
static int l_sdpa(lua_State *L) {
  /* the positional form repacked first: it allocates, and no tensor is borrowed yet */
  int top = lua_gettop(L);
  bool empty = false; /* {}: no options */
  if (top == 4 && lua_type(L, 4) == LUA_TTABLE) {
    lua_pushnil(L);
    empty = !lua_next(L, 4);
    if (!empty) lua_pop(L, 2);
  }
  if (top > 4 || (top == 4 && !lua_isnil(L, 4) && !empty && !attnL_is_options(L, 4))) { /* positional: one table */
    int most = 3 + (int)(sizeof sdpa_order / sizeof *sdpa_order) - 1;
    if (top > most) return attnL_raise(L, FN ": at most %d arguments (got %d)", most, top);
    lua_createtable(L, 0, top - 3);
    for (int i = 4; i <= top; i++) {
      lua_pushvalue(L, i);
      lua_setfield(L, -2, sdpa_order[i - 4]);
    }
    lua_replace(L, 4);
    lua_settop(L, 4);
  }
  attn_tensor *q = attnL_totensor(L, 1, FN, "query");
  attn_tensor *k = attnL_totensor(L, 2, FN, "key");
  attn_tensor *v = attnL_totensor(L, 3, FN, "value");
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  bool need_weights = false;
  if (!lua_isnoneornil(L, 4)) {
    luaL_checktype(L, 4, LUA_TTABLE);
    lua_settop(L, 4);
    check_keys(L, 4);
    /* slot 5: the mask (converted if given as a table or number) */
    lua_getfield(L, 4, "attn_mask");
    static const char *const kinds[] = {"bool", "additive", NULL}, *const aligns[] = {"top_left", "bottom_right", NULL};
    const char *kind = attnL_option_choice(L, attnL_option_field(L, 4, "attn_mask_kind"), FN, "attn_mask_kind", kinds);
    if (!lua_isnil(L, 5)) {
      o.attn_mask = attnL_totensor(L, 5, FN, "attn_mask");
      if (o.attn_mask->dtype == ATTN_BOOL) {
        /* torch's meaning of a bool mask: true = take part */
        if (kind && kind[0] != 'b')
          return attnL_raise(L, FN ": attn_mask is a bool tensor (true = take part); attn_mask_kind \"additive\" "
                                   "needs a float mask");
        kind = "bool";
      }
      if (!kind)
        return attnL_raise(L, FN ": say how to read attn_mask: attn_mask_kind = \"bool\" (non-zero = take part) "
                                 "or \"additive\" (added to the scores)");
      o.mask_is_bool = kind[0] == 'b';
    } else if (kind) {
      return attnL_raise(L, FN ": attn_mask_kind given without attn_mask");
    }
    o.is_causal = attnL_option_bool(L, attnL_option_field(L, 4, "is_causal"), FN, "is_causal", false);
    const char *align =
        attnL_option_choice(L, attnL_option_field(L, 4, "causal_alignment"), FN, "causal_alignment", aligns);
    o.causal_bottom_right = align && align[0] == 'b';
    o.scale = attnL_option_number(L, attnL_option_field(L, 4, "scale"), FN, "scale", NAN);
    o.dropout_p = attnL_option_number(L, attnL_option_field(L, 4, "dropout_p"), FN, "dropout_p", 0.0);
    o.enable_gqa = attnL_option_bool(L, attnL_option_field(L, 4, "enable_gqa"), FN, "enable_gqa", false);
    need_weights = attnL_option_bool(L, attnL_option_field(L, 4, "need_weights"), FN, "need_weights", false);
    lua_settop(L, 5); /* the options' values were literals, numbers and booleans */
    /* slot 6: the generator, kept on the stack for the call */
    if (lua_getfield(L, 4, "generator") != LUA_TNIL) {
      gen_box *b = luaL_testudata(L, 6, ATTN_GENERATOR_MT);
      if (!b) return attnL_raise(L, FN ": option 'generator' must be an attn.Generator (got %s)", luaL_typename(L, 6));
      if (!b->g) return attnL_raise(L, FN ": option 'generator': generator is closed");
      o.generator = b->g;
    }
  }
  if (!o.generator) o.generator = attnL_default_generator(L); /* a sandbox's own */
  attn_tensor **out = attnL_newbox(L);
  attn_tensor **w = need_weights ? attnL_newbox(L) : NULL;
  if (attn_sdpa(q, k, v, &o, out, w)) return attnL_error(L);
  attnL_account(L, out);
  if (w) attnL_account(L, w);
  return need_weights ? 2 : 1;
}

/* attn.causal_mask(L [, S] [, bottom_right]) or with {bottom_right = bool}
   after L or S */
static int l_causal_mask(lua_State *L) {
  int64_t n = attnL_checkint(L, 1, "causal_mask", "L");
  int64_t s = n;
  int opts = 2;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    s = attnL_checkint(L, 2, "causal_mask", "S");
    opts = 3;
  } else if (lua_isnil(L, 2) && lua_gettop(L) >= 3) {
    opts = 3; /* causal_mask(L, nil, ...): the default S */
  }
  bool br = false;
  if (opts == 3 && !attnL_is_options(L, 3)) {
    br = attnL_option_bool(L, 3, "causal_mask", "bottom_right", false); /* torch's positional order */
  } else if (!lua_isnoneornil(L, opts)) {
    luaL_checktype(L, opts, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, opts)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "bottom_right") != 0)
        return attnL_raise(L, "causal_mask: unknown option '%s' (expected bottom_right)", luaL_tolstring(L, -1, NULL));
    }
    lua_getfield(L, opts, "bottom_right");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
      return attnL_raise(L, "causal_mask: option 'bottom_right' must be a boolean (got %s)", luaL_typename(L, -1));
    br = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_causal_mask(n, s, br, box));
}

/* attn.padding_mask(lengths, S) */
static int l_padding_mask(lua_State *L) {
  attn_tensor *len = attnL_totensor(L, 1, "padding_mask", "lengths");
  int64_t s = attnL_checkint(L, 2, "padding_mask", "S");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_padding_mask(len, s, box));
}

void attnL_open_attention(lua_State *L, int module, int methods) {
  (void)methods; /* module functions only */
  static const luaL_Reg fns[] = {{"scaled_dot_product_attention", l_sdpa},
                                 {"causal_mask", l_causal_mask},
                                 {"padding_mask", l_padding_mask},
                                 {NULL, NULL}};
  attnL_register(L, module, 0, fns);
}
