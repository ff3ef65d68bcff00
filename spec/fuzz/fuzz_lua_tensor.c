/* SPDX-License-Identifier: MIT */
/* Fuzz target: tensors from nested Lua tables (src/lua/binding.c:
 * attnL_totensor, attnL_checkshape, attnL_checkindex, attnL_checktensorlist)
 * in a sandboxed state of the host library with a memory limit.
 *
 * The input builds a Lua value through the C API: numbers (small, edge
 * doubles, edge integers), booleans, strings, holes (nil), tables nested up
 * to 10 deep, lists of one shared child (big regular tensors from few
 * bytes), references back to an ancestor (cycles), extra non-list keys and
 * metatables.  Then one call converts it: attn.tensor(v) (most often),
 * attn.add(v, w), attn.stack / attn.cat of {v, w}, attn.zeros(v) (shape
 * table), t:view(v), attn.index_select(t, 1, v).
 *
 * Reference model for attn.tensor(v), computed here with raw table access:
 *  - success: v is a rectangular nested list whose shape follows the [1]
 *    chain (lengths as lua_rawlen gives them) and every element is the
 *    float of the number / 0 or 1 of the boolean at its place, bit for bit;
 *  - a plain rectangular list of numbers (no metatables, keys exactly 1..n,
 *    at most 8 deep) converts unless the memory limit is reached;
 *  - the state and the core leak nothing once the state is closed.
 * Every other call must just fail with a Lua error or succeed. */
#include "fuzz_lua.h"

#include <lauxlib.h>
#include <lua.h>
#include <math.h>

#include "attn_lua.h"

#define MEMORY_LIMIT (4 << 20)
#define MAX_DEPTH 10
#define WALK_LIMIT (1 << 18)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Building the value (runs in protected mode: Lua allocations may fail)    */

typedef struct {
  fz_bytes b;
  int anc[MAX_DEPTH + 1]; /* stack slots of the tables being built */
} builder;

static void gen(lua_State *L, builder *g, int depth);

static void gen_table(lua_State *L, builder *g, int depth) {
  fz_bytes *b = &g->b;
  uint8_t mode = fz_u8(b);
  int n;
  if (mode < 0xa0)
    n = mode % 5;
  else if (mode < 0xe0)
    n = 1 + (mode % 64);
  else
    n = fz_u16(b) % 2048;
  lua_createtable(L, n, 0);
  int t = lua_gettop(L);
  g->anc[depth] = t;
  if (mode >= 0x80 && n > 0) {
    /* n copies of one child: a regular block from a few bytes */
    gen(L, g, depth + 1);
    for (int i = 1; i <= n; i++) {
      lua_pushvalue(L, -1);
      lua_rawseti(L, t, i);
    }
    lua_pop(L, 1);
  } else {
    for (int i = 1; i <= n; i++) {
      gen(L, g, depth + 1);
      lua_rawseti(L, t, i);
    }
  }
  uint8_t extra = fz_u8(b);
  if (extra >= 0xf0) { /* a non-list key */
    lua_pushinteger(L, 1);
    lua_setfield(L, t, "x");
  } else if (extra >= 0xe8) { /* a key past the end or at 0 */
    lua_pushinteger(L, 7);
    lua_rawseti(L, t, extra & 1 ? 0 : n + 2);
  } else if (extra >= 0xe0) { /* a metatable with __index and __len */
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, t);
    lua_setfield(L, -2, "__index");
    lua_pushstring(L, "attn.Tensor");
    lua_setfield(L, -2, "__name");
    lua_setmetatable(L, t);
  }
}

static void gen(lua_State *L, builder *g, int depth) {
  fz_bytes *b = &g->b;
  luaL_checkstack(L, 4, "fuzz builder");
  uint8_t c = fz_u8(b);
  if (depth >= MAX_DEPTH && c >= 0x70) c = 0;
  if (c < 0x50) {
    lua_pushnumber(L, (lua_Number)((int)(c % 11) - 5));
  } else if (c < 0x60) {
    lua_pushnumber(L, fz_edge_f64(b));
  } else if (c < 0x68) {
    lua_pushinteger(L, (lua_Integer)fz_edge_i64(b));
  } else if (c < 0x6c) {
    lua_pushboolean(L, c & 1);
  } else if (c < 0x6e) {
    lua_pushstring(L, c & 1 ? "1" : "x");
  } else if (c < 0x70) {
    lua_pushnil(L); /* a hole */
  } else if (c < 0x74 && depth > 0) {
    lua_pushvalue(L, g->anc[fz_below(b, depth)]); /* a cycle or a shared ancestor */
  } else {
    gen_table(L, g, depth);
  }
}

/* build(bytes lightuserdata) -> value, w */
static int build(lua_State *L) {
  builder *g = lua_touserdata(L, 1);
  gen(L, g, 0);
  gen(L, g, 0);
  return 2;
}

/* ------------------------------------------------------------------------ */
/* Reference model (raw access only: never raises)                          */

typedef struct {
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  bool plain; /* only plain lists (no metatables, no other keys) */
  bool huge;  /* more elements than the model walks */
  float *data;
  int64_t n, cap;
} expect;

static bool only_list_keys(lua_State *L, int idx, int64_t n) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n) {
      lua_pop(L, 1);
      return false;
    }
  }
  return true;
}

/* false: not a rectangular nested list of numbers and booleans */
static bool walk(lua_State *L, int idx, int depth, expect *e) {
  if (!lua_checkstack(L, 4)) return false;
  int64_t n = (int64_t)lua_rawlen(L, idx);
  if (n != e->shape[depth]) return false;
  if (lua_getmetatable(L, idx)) {
    lua_pop(L, 1);
    e->plain = false;
  }
  if (!only_list_keys(L, idx, n)) e->plain = false;
  for (int64_t i = 1; i <= n; i++) {
    int ty = lua_rawgeti(L, idx, (lua_Integer)i);
    bool ok = true;
    if (depth + 1 < e->ndim) {
      ok = ty == LUA_TTABLE && walk(L, lua_gettop(L), depth + 1, e);
    } else if (ty == LUA_TNUMBER || ty == LUA_TBOOLEAN) {
      float v = ty == LUA_TNUMBER ? (float)lua_tonumber(L, -1) : (lua_toboolean(L, -1) ? 1.0f : 0.0f);
      if (e->n < e->cap) e->data[e->n] = v;
      e->n++;
    } else {
      ok = false;
    }
    lua_pop(L, 1);
    if (!ok) return false;
  }
  return true;
}

/* Fills e for the value at idx; false if it is not convertible. */
static bool reference(lua_State *L, int idx, expect *e) {
  memset(e, 0, sizeof *e);
  e->plain = true;
  int ty = lua_type(L, idx);
  if (ty == LUA_TNUMBER || ty == LUA_TBOOLEAN) {
    /* a number is a 0-d float32 tensor; a boolean a 0-d bool one, as
       torch.tensor(True) (its element reads back as 1 or 0) */
    e->cap = 1;
    e->data = malloc(sizeof(float));
    e->data[0] = ty == LUA_TNUMBER ? (float)lua_tonumber(L, idx) : (lua_toboolean(L, idx) ? 1.0f : 0.0f);
    e->n = 1;
    return true;
  }
  if (ty != LUA_TTABLE) return false;
  /* shape: follow [1] */
  lua_pushvalue(L, idx);
  while (lua_type(L, -1) == LUA_TTABLE) {
    if (e->ndim == ATTN_MAX_DIMS) {
      lua_pop(L, 1);
      e->plain = false; /* too deep: must fail */
      return false;
    }
    int64_t n = (int64_t)lua_rawlen(L, -1);
    e->shape[e->ndim++] = n;
    if (n == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  int64_t numel = 1;
  for (int d = 0; d < e->ndim; d++) numel = numel > (1 << 24) ? numel : numel * e->shape[d];
  if (numel > WALK_LIMIT) { /* too big to walk here (shared children); only sizes are checked */
    e->huge = true;
    return false;
  }
  e->cap = numel;
  e->data = malloc(sizeof(float) * (size_t)(e->cap ? e->cap : 1));
  if (e->ndim > 0 && e->shape[0] == 0) {
    /* an empty top-level list: plain only without any key */
    lua_pushnil(L);
    if (lua_next(L, idx)) lua_pop(L, 2), e->plain = false;
    if (lua_getmetatable(L, idx)) lua_pop(L, 1), e->plain = false;
    return true;
  }
  return walk(L, idx, 0, e);
}

/* ------------------------------------------------------------------------ */

static const char *const calls = "local sel, v, w = ...\n"
                                 "local attn = require 'attn'\n"
                                 "if sel == 0 then return attn.tensor(v)\n"
                                 "elseif sel == 1 then return attn.add(v, w)\n"
                                 "elseif sel == 2 then return attn.stack({v, w})\n"
                                 "elseif sel == 3 then return attn.cat({v, w}, 1)\n"
                                 "elseif sel == 4 then return attn.zeros(v)\n"
                                 "elseif sel == 5 then return attn.arange(24):view(v)\n"
                                 "else return attn.index_select(attn.arange(6), 1, v) end\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_debug_counts before;
  fz_counts(&before);
  lua_State *L = fz_sandbox(MEMORY_LIMIT, 1000000);
  if (!L) return 0;
  builder g = {.b = {data, size}};
  uint8_t c = fz_u8(&g.b);
  int sel = c < 0xa0 ? 0 : c % 7;
  lua_pushcfunction(L, build);
  lua_pushlightuserdata(L, &g);
  attn_status st = attn_lua_call(L, 1, 2);
  if (st != ATTN_OK) { /* the value alone took the memory */
    FZ_CHECK(st == ATTN_ERR_NOMEM || st == ATTN_ERR_SCRIPT, "building the value: %d", st);
    attn_lua_close(L);
    fz_check_counts(&before);
    return 0;
  }
  int v = lua_gettop(L) - 1, w = v + 1;
  expect e;
  bool convertible = sel == 0 && reference(L, v, &e);
  bool plain = sel == 0 && e.plain;
  lua_pushinteger(L, sel);
  lua_pushvalue(L, v);
  lua_pushvalue(L, w);
  st = attn_lua_dostring(L, calls, "=fuzz_lua_tensor", 3, 1);
  if (st == ATTN_OK && sel == 0) {
    attn_tensor *t = attn_lua_to_tensor(L, -1);
    FZ_CHECK(t != NULL, "attn.tensor returned a %s", luaL_typename(L, -1));
    if (e.huge) {
      FZ_CHECK(attn_tensor_numel(t) <= MEMORY_LIMIT / 4, "attn.tensor passed the memory limit");
      goto done;
    }
    FZ_CHECK(convertible, "attn.tensor accepted a value that is not a rectangular list of numbers");
    FZ_CHECK(t->ndim == e.ndim, "attn.tensor: %d dims, expected %d", t->ndim, e.ndim);
    for (int d = 0; d < e.ndim; d++)
      FZ_CHECK(t->shape[d] == e.shape[d], "attn.tensor: size %lld at dim %d, expected %lld", (long long)t->shape[d], d,
               (long long)e.shape[d]);
    int64_t n = attn_tensor_numel(t);
    FZ_CHECK(n == e.n, "attn.tensor: %lld elements, the table has %lld", (long long)n, (long long)e.n);
    for (int64_t i = 0; i < n && i < e.cap; i++) {
      float got = attn_tensor_get_flat(t, i);
      FZ_CHECK(memcmp(&got, &e.data[i], sizeof got) == 0, "attn.tensor: element %lld is %a, expected %a", (long long)i,
               got, e.data[i]);
    }
  } else if (st != ATTN_OK) {
    FZ_CHECK(st == ATTN_ERR_SCRIPT || st == ATTN_ERR_NOMEM || st == ATTN_ERR_LIMIT, "status %d", st);
    const char *msg = lua_tostring(L, -1);
    FZ_CHECK(msg != NULL, "error without a message");
    if (sel == 0 && convertible && plain && e.ndim <= ATTN_MAX_DIMS)
      FZ_CHECK(st == ATTN_ERR_NOMEM || strstr(msg, "memory") != NULL,
               "attn.tensor refused a plain rectangular list: %s", msg);
  }
done:
  if (sel == 0) free(e.data);
  attn_lua_close(L);
  fz_check_counts(&before);
  return 0;
}
