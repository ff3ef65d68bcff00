/* SPDX-License-Identifier: MIT */
/* Tests of the host library (attn_lua.h): states and preloading, tensors
 * handed both ways without copies (borrow/retain rules, release callbacks),
 * protected calls and their statuses, the sandbox (every escape we know of,
 * each also tried without the sandbox to show that the test can fail), the
 * memory and instruction/time limits (each exhaustion), and 4 states
 * running attention and matmul in 4 threads at once. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "attn_lua.h"
#include "check.h"
#include "check_host.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static lua_State *new_state(bool sandbox, int64_t mem, uint64_t instr, double secs) {
  return check_host_state(sandbox, mem, instr, secs);
}

/* Runs code returning one value; the status, and the value (or message)
   left on the stack. */
static attn_status run(lua_State *L, const char *code) { return attn_lua_dostring(L, code, "=test", 0, 1); }

/* Runs code that must succeed and return true. */
#define CHECK_TRUE(L, code)                                                                                            \
  do {                                                                                                                 \
    attn_status st_ = run(L, code);                                                                                    \
    if (st_ != ATTN_OK || !lua_toboolean(L, -1))                                                                       \
      fprintf(stderr, "  in: %s\n  got: %s\n", code, st_ ? attn_last_error() : luaL_tolstring(L, -1, NULL)),           \
          lua_settop(L, lua_gettop(L) - (st_ ? 0 : 1));                                                                \
    CHECK(st_ == ATTN_OK && lua_toboolean(L, -1));                                                                     \
    lua_pop(L, 1);                                                                                                     \
  } while (0)

/* Runs code that must fail with status st and a message containing msg. */
#define CHECK_FAILS(L, code, st, msg)                                                                                  \
  do {                                                                                                                 \
    int top_ = lua_gettop(L);                                                                                          \
    attn_status st_ = run(L, code);                                                                                    \
    const char *m_ = lua_tostring(L, -1);                                                                              \
    if (st_ != (st) || !m_ || !strstr(m_, msg))                                                                        \
      fprintf(stderr, "  in: %s\n  status %d, message: %s\n", code, (int)st_, m_ ? m_ : "(none)");                     \
    CHECK(st_ == (st) && m_ && strstr(m_, msg));                                                                       \
    CHECK(lua_gettop(L) == top_ + 1);                                                                                  \
    CHECK(strstr(attn_last_error(), msg) != NULL || strlen(attn_last_error()) >= 500);                                 \
    lua_settop(L, top_);                                                                                               \
  } while (0)

/* ------------------------------------------------------------------------ */
/* States and preloading                                                     */

static void test_states(void) {
  lua_State *L = new_state(false, 0, 0, 0);
  CHECK_TRUE(L, "local attn = require 'attn'; return type(attn) == 'table' and rawget(_G, 'attn') == nil");
  CHECK_TRUE(L, "return package.loaded['attn.core'] ~= nil and io ~= nil and debug ~= nil");
  CHECK_TRUE(L, "return require('attn').matmul(require('attn').eye(2), {{1, 2}, {3, 4}}):sum():item() == 10");
  CHECK_TRUE(L, "return require('attn').nn.Linear ~= nil"); /* embedded submodules */
  int top = lua_gettop(L);
  CHECK_OK(attn_lua_require(L));
  CHECK(lua_gettop(L) == top + 1 && lua_type(L, -1) == LUA_TTABLE);
  lua_getfield(L, -1, "zeros");
  CHECK(lua_type(L, -1) == LUA_TFUNCTION);
  lua_pop(L, 2);
  attn_lua_close(L);

  /* A state the host made itself, attn added before the libraries. */
  L = luaL_newstate();
  CHECK_OK(attn_lua_preload(L));
  luaL_openlibs(L);
  CHECK_TRUE(L, "package.path, package.cpath = '', '' return require('attn').ones(3):sum():item() == 3");
  attn_lua_close(L); /* lua_close for a foreign state */

  attn_lua_opts bad;
  attn_lua_opts_init(&bad);
  bad.memory_limit = -1;
  lua_State *nope = NULL;
  CHECK(attn_lua_newstate(&bad, &nope) == ATTN_ERR_ARG && nope == NULL);
  /* A limit too small for the libraries fails cleanly. */
  bad.memory_limit = 4096;
  CHECK(attn_lua_newstate(&bad, &nope) == ATTN_ERR_NOMEM && nope == NULL);
}

/* ------------------------------------------------------------------------ */
/* Tensors both ways                                                         */

static int released;
static float *released_data;
static void on_release(void *ctx, float *data) {
  released += *(int *)ctx;
  released_data = data;
}

static void test_tensors(void) {
  lua_State *L = new_state(false, 0, 0, 0);
  attn_debug_counts before;
  attn_debug_counts_get(&before);

  /* A host buffer, kept by the host: writes go both ways. */
  float buf[6] = {1, 2, 3, 4, 5, 6};
  CHECK_OK(attn_lua_dostring(L, "return function(x) x[{1, 2}] = 42; return x:t(), x:sum():item() end", "=f", 0, 1));
  CHECK_OK(attn_lua_push_buffer(L, buf, 2, (int64_t[]){2, 3}, NULL, NULL, NULL));
  attn_tensor *x = attn_lua_to_tensor(L, -1);
  CHECK(x && attn_tensor_data(x) == buf && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 3);
  CHECK_OK(attn_lua_call(L, 1, 2));
  CHECK(buf[1] == 42); /* written by Lua into the host's memory */
  CHECK(lua_tonumber(L, -1) == 1 + 42 + 3 + 4 + 5 + 6);
  attn_tensor *xt = attn_lua_to_tensor(L, -2); /* borrowed view, no copy */
  CHECK(xt && attn_tensor_data(xt) == buf && xt->shape[0] == 3 && xt->shape[1] == 2 && xt->stride[0] == 1 &&
        xt->stride[1] == 3);
  buf[5] = -1; /* and the host's writes are seen from Lua */
  lua_pushvalue(L, -2);
  lua_setglobal(L, "xt");
  CHECK_TRUE(L, "return xt[{3, 2}] == -1");
  lua_pop(L, 2);
  lua_pushnil(L);
  lua_setglobal(L, "xt");
  lua_gc(L, LUA_GCCOLLECT); /* no view of buf is left after this */

  /* A buffer given to attn: released exactly once, after the last view. */
  float *owned = malloc(4 * sizeof *owned);
  for (int i = 0; i < 4; i++) owned[i] = (float)i;
  int one = 1;
  released = 0;
  CHECK_OK(attn_lua_push_buffer(L, owned, 1, (int64_t[]){4}, NULL, on_release, &one));
  lua_setglobal(L, "owned");
  CHECK_TRUE(L, "keep = owned:narrow(1, 2, 2); owned = nil; collectgarbage(); return keep:sum():item() == 3");
  CHECK(released == 0); /* the narrow view still holds it */
  CHECK_TRUE(L, "keep = nil; collectgarbage(); return true");
  CHECK(released == 1 && released_data == owned);
  free(owned);

  /* A failed push leaves the stack alone and never calls release. */
  int top = lua_gettop(L);
  float dummy[2];
  CHECK(attn_lua_push_buffer(L, dummy, 1, (int64_t[]){-2}, NULL, on_release, &one) == ATTN_ERR_ARG);
  CHECK(attn_lua_push_buffer(L, dummy, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, NULL, on_release, &one) != ATTN_OK);
  CHECK(attn_lua_push_tensor(L, NULL) == ATTN_ERR_ARG);
  CHECK(lua_gettop(L) == top && released == 1);

  /* push_tensor: Lua takes a reference of its own. */
  attn_tensor *t = NULL;
  CHECK_OK(attn_arange(0, 5, 1, &t));
  CHECK_OK(attn_lua_push_tensor(L, t));
  CHECK(t->refcount == 2 && attn_lua_to_tensor(L, -1) == t);
  lua_setglobal(L, "t");
  CHECK_TRUE(L, "t:mul_(2) return t:sum():item() == 20");
  CHECK(attn_tensor_data(t)[4] == 8);

  /* get_tensor: retained; numbers and tables are converted. */
  attn_tensor *g = NULL;
  CHECK_OK(run(L, "return t:view(5, 1)"));
  CHECK_OK(attn_lua_get_tensor(L, -1, &g));
  CHECK(g && g->refcount == 2 && g->storage == t->storage);
  lua_pop(L, 1);
  attn_tensor *n = NULL, *tb = NULL;
  lua_pushnumber(L, 2.5);
  CHECK_OK(attn_lua_get_tensor(L, -1, &n));
  CHECK(n && n->ndim == 0 && attn_tensor_data(n)[0] == 2.5f);
  lua_pop(L, 1);
  CHECK_OK(run(L, "return {{1, 2}, {3, 4}, {5, 6}}"));
  CHECK_OK(attn_lua_get_tensor(L, -1, &tb));
  CHECK(tb && tb->ndim == 2 && tb->shape[0] == 3 && attn_tensor_get_flat(tb, 5) == 6);
  lua_pop(L, 1);
  attn_tensor *bad = NULL;
  lua_pushliteral(L, "not a tensor");
  CHECK(attn_lua_get_tensor(L, -1, &bad) == ATTN_ERR_ARG && bad == NULL);
  CHECK(attn_lua_to_tensor(L, -1) == NULL);
  lua_pop(L, 1);
  CHECK_OK(run(L, "return {{1, 2}, {3}}"));
  CHECK(attn_lua_get_tensor(L, -1, &bad) == ATTN_ERR_ARG && bad == NULL && strstr(attn_last_error(), "rectangular"));
  lua_pop(L, 1);
  CHECK_OK(run(L, "local keep do local c <close> = require('attn').zeros(2) keep = c end return keep"));
  CHECK(attn_lua_to_tensor(L, -1) == NULL && attn_lua_get_tensor(L, -1, &bad) == ATTN_ERR_ARG);
  lua_pop(L, 1);
  /* A tensor made by a script outlives the state. */
  attn_tensor *made = NULL;
  CHECK_OK(run(L, "return require('attn').arange(1, 4):pow(2)"));
  CHECK_OK(attn_lua_get_tensor(L, -1, &made));
  attn_lua_close(L);
  CHECK(t->refcount == 1 && g->refcount == 1); /* Lua's references are gone */
  CHECK(attn_tensor_get_flat(made, 2) == 9 && attn_tensor_data(t)[1] == 2);
  attn_tensor_release(g);
  attn_tensor_release(t);
  attn_tensor_release(n);
  attn_tensor_release(tb);
  attn_tensor_release(made);
  attn_debug_counts after;
  attn_debug_counts_get(&after);
  CHECK(after.tensors == before.tensors && after.storages == before.storages);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

static int nested(lua_State *L) {
  /* A C function called from Lua that calls back into Lua through the API. */
  lua_pushvalue(L, 1);
  attn_status st = attn_lua_call(L, 0, 1);
  lua_pushboolean(L, st == ATTN_OK);
  lua_insert(L, -2);
  return 2;
}

static void test_errors(void) {
  lua_State *L = new_state(false, 0, 0, 0);
  CHECK_FAILS(L, "error('boom')", ATTN_ERR_SCRIPT, "test:1: boom");
  CHECK_FAILS(L, "local function f() error('deep') end f()", ATTN_ERR_SCRIPT, "stack traceback:");
  CHECK_FAILS(L, "return +", ATTN_ERR_SCRIPT, "unexpected symbol");
  CHECK_FAILS(L, "error({})", ATTN_ERR_SCRIPT, "(error object is a table value)");
  CHECK_FAILS(L, "error(setmetatable({}, {__tostring = function() return 'custom' end}))", ATTN_ERR_SCRIPT, "custom");
  CHECK_FAILS(L, "local attn = require 'attn' return attn.matmul(attn.zeros(6, 3), attn.zeros(2, 4))", ATTN_ERR_SCRIPT,
              "matmul: cannot multiply [6,3] by [2,4]");
  CHECK_FAILS(L, "return require 'attn.nope'", ATTN_ERR_SCRIPT, "module 'attn.nope' not found");

  int top = lua_gettop(L);
  CHECK(attn_lua_dofile(L, "/nonexistent/attn_host.lua", 0, 1) == ATTN_ERR_IO);
  CHECK(lua_gettop(L) == top + 1 && strstr(lua_tostring(L, -1), "nonexistent"));
  lua_settop(L, top);

  /* call_global */
  CHECK_OK(run(
      L,
      "function add(a, b) return a + b end; callable = setmetatable({}, {__call = function(_, a) return a * 2 end})"));
  lua_settop(L, top);
  lua_pushinteger(L, 2);
  lua_pushinteger(L, 3);
  CHECK_OK(attn_lua_call_global(L, "add", 2, 1));
  CHECK(lua_gettop(L) == top + 1 && lua_tointeger(L, -1) == 5);
  lua_settop(L, top);
  lua_pushinteger(L, 21);
  CHECK_OK(attn_lua_call_global(L, "callable", 1, 1));
  CHECK(lua_tointeger(L, -1) == 42);
  lua_settop(L, top);
  CHECK(attn_lua_call_global(L, "missing", 0, 1) == ATTN_ERR_SCRIPT &&
        strstr(lua_tostring(L, -1), "'missing' is not a function"));
  lua_settop(L, top);

  /* Results and MULTRET */
  CHECK_OK(attn_lua_dostring(L, "return 1, 2, 3", NULL, 0, LUA_MULTRET));
  CHECK(lua_gettop(L) == top + 3 && lua_tointeger(L, -1) == 3);
  lua_settop(L, top);
  CHECK_OK(attn_lua_dostring(L, "return 1, 2, 3", NULL, 0, 0));
  CHECK(lua_gettop(L) == top);
  lua_pushinteger(L, 7);
  lua_pushinteger(L, 8);
  CHECK_OK(attn_lua_dostring(L, "local a, b = ... return a * b", "=args", 2, 1));
  CHECK(lua_gettop(L) == top + 1 && lua_tointeger(L, -1) == 56);
  lua_settop(L, top);
  CHECK(attn_lua_dostring(L, "return (", "=bad", 0, 0) == ATTN_ERR_SCRIPT && lua_gettop(L) == top + 1);
  lua_settop(L, top);

  /* Misuse leaves the stack alone. */
  CHECK(attn_lua_call(L, 5, 0) == ATTN_ERR_ARG && lua_gettop(L) == top);
  CHECK(attn_lua_dostring(L, NULL, NULL, 0, 0) == ATTN_ERR_ARG && lua_gettop(L) == top);

  /* Nested calls through the API from C called by Lua. */
  lua_pushcfunction(L, nested);
  lua_setglobal(L, "nested");
  CHECK_TRUE(L, "local ok, v = nested(function() return 'inner' end) return ok and v == 'inner'");
  CHECK_TRUE(L, "local ok, msg = nested(function() error('inner failure') end) return not ok and msg:find('inner "
                "failure') ~= nil");
  attn_lua_close(L);
}

/* ------------------------------------------------------------------------ */
/* The sandbox                                                               */

/* Each escape: code returning true when the door is closed.  Run in a
   sandbox they must all hold; run without one, those marked open_outside
   must fail, proving that the check looks at something real. */
typedef struct escape {
  const char *code;
  bool open_outside;
} escape;

static const escape escapes[] = {
    {"return io == nil and package.loaded.io == nil", true},
    {"return debug == nil and package.loaded.debug == nil", true},
    {"return not pcall(require, 'io') and not pcall(require, 'debug')", true},
    {"return os.execute == nil and os.getenv == nil and os.remove == nil and os.exit == nil and os.tmpname == nil",
     true},
    {"return require('os') == os and os.rename == nil and os.setlocale == nil", true},
    {"return type(os.clock()) == 'number' and type(os.time()) == 'number' and os.difftime(2, 1) == 1", false},
    {"return dofile == nil and loadfile == nil", true},
    {"return package.loadlib == nil and package.searchpath == nil", true},
    {"return package.cpath == '' and package.path == '' and #package.searchers == 1", true},
    /* lfs is a C module Debian installs for lua5.4 (lua-filesystem) */
    {"package.cpath = '/usr/lib/x86_64-linux-gnu/lua/5.4/?.so;/usr/local/lib/lua/5.4/?.so' "
     "return not pcall(require, 'lfs')",
     false},
    /* binary chunks: string.dump works, loading one does not */
    {"local f = string.dump(function() return 1 end) local g, err = load(f) "
     "return g == nil and err:find('binary') ~= nil",
     true},
    {"local g, err = load(string.dump(function() return 1 end), 'x', 'b') return g == nil and err:find('binary') ~= "
     "nil",
     true},
    {"local g, err = load(string.dump(function() return 1 end), 'x', 'bt', {}) return g == nil", true},
    {"return load('return 1 + 1')() == 2 and load('return y', 'c', 't', {y = 5})() == 5", false},
    {"local parts = {'return 3'} local f = load(function() return table.remove(parts) end) return f() == 3", false},
    /* attn's own doors to files and to the process */
    {"local ok, e = pcall(require('attn').save, {x = require('attn').ones(1)}, '/tmp/attn_host_escape.safetensors') "
     "return not ok and e:find('not available in a sandbox') ~= nil",
     true},
    {"local ok, e = pcall(require('attn').load, '/etc/passwd') return not ok and e:find('not available') ~= nil", true},
    {"local ok, e = pcall(require('attn').safetensors_info, '/etc/passwd') return not ok and e:find('not available') "
     "~= nil",
     true},
    {"local ok, e = pcall(require('attn').set_num_threads, 4096) return not ok and e:find('not available') ~= nil",
     true},
    /* the pure helpers the package calls stay (test_host_isolation.c walks the list) */
    {"local core = require 'attn.core' local kept = {_methods = 1, _isatty = 1, _error = 1, _adam_update = 1, "
     "_check_class_targets = 1, _layer_norm = 1, _unwrap_method = 1, _ops = 1, _declare = 1, _custom_record = 1} for k "
     "in pairs(core) do if k:sub(1, 1) "
     "== '_' and "
     "not kept[k] "
     "then return false end end return core._isatty() == false and core._dist == nil and core._plot == nil",
     true},
    {"local m = require('attn').nn.Linear(2, 2) local ok, e = pcall(m.save, m, '/tmp/attn_host_escape.st') "
     "return not ok and e:find('not available') ~= nil",
     true},
    /* locked metatables: no way to drop or call a finalizer */
    {"local attn = require 'attn' local t = attn.zeros(3) local mt = getmetatable(t) "
     "return mt.__name == 'attn.Tensor' and mt.__gc == nil and mt.__index == nil",
     true},
    /* the unsandboxed run really hijacks the metatable: restore it after,
       or that state's tensors would never be finalised */
    {"local attn = require 'attn' local t = attn.zeros(3) local mt = getmetatable(t) "
     "local gc, ix = mt.__gc, mt.__index "
     "mt.__gc, mt.__index = nil, function() error('hijacked') end "
     "local ok, r = pcall(function() return t:add(1):sum():item() == 3 and "
     "getmetatable(attn.ones(1)).__index == mt.__index end) "
     "mt.__gc, mt.__index = gc, ix "
     "return ok and r",
     true},
    {"local attn = require 'attn' local g = attn.Generator(1) "
     "return getmetatable(g).__name == 'attn.Generator' and getmetatable(g).__gc == nil",
     true},
};

static void test_sandbox(void) {
  lua_State *S = new_state(true, 64 << 20, 0, 0);
  lua_State *U = new_state(false, 0, 0, 0);
  for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++) {
    CHECK_TRUE(S, escapes[i].code);
    /* the files the attn.save escapes aim at must not exist (outside the
       sandbox they are written: removed after each try) */
    CHECK(access("/tmp/attn_host_escape.safetensors", F_OK) != 0 && access("/tmp/attn_host_escape.st", F_OK) != 0);
    if (escapes[i].open_outside) {
      attn_status st = run(U, escapes[i].code);
      bool closed = st == ATTN_OK && lua_toboolean(U, -1);
      if (closed) fprintf(stderr, "  open outside the sandbox too? %s\n", escapes[i].code);
      CHECK(!closed);
      lua_pop(U, 1);
      remove("/tmp/attn_host_escape.safetensors");
      remove("/tmp/attn_host_escape.st");
    }
  }

  /* A Lua file on disk: require finds it outside the sandbox, never inside
     (the sandbox has no file searcher, whatever package.path says). */
  char dir[] = "/tmp/attn_host_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256], code[512];
  snprintf(path, sizeof path, "%s/evil.lua", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) {
    fputs("return 'loaded from disk'\n", f);
    fclose(f);
  }
  snprintf(code, sizeof code,
           "package.path = '%s/?.lua' local ok, v = pcall(require, 'evil') return ok and v == 'loaded from disk'", dir);
  CHECK_TRUE(U, code);
  snprintf(code, sizeof code,
           "package.path = '%s/?.lua' table.insert(package.searchers, function(n) return nil end) "
           "return not pcall(require, 'evil')",
           dir);
  CHECK_TRUE(S, code);
  remove(path);
  rmdir(dir);

  /* Pushing a tensor works whatever a script did to package.loaded. */
  lua_State *S2 = new_state(true, 16 << 20, 0, 0);
  CHECK_TRUE(S2, "package.loaded['attn.core'] = true return true");
  attn_tensor *host_t = NULL;
  CHECK_OK(attn_ones(1, (int64_t[]){3}, &host_t));
  CHECK_OK(attn_lua_push_tensor(S2, host_t));
  CHECK(attn_lua_to_tensor(S2, -1) == host_t);
  lua_setglobal(S2, "t");
  CHECK_TRUE(S2, "return t:sum():item() == 3");
  attn_lua_close(S2);
  CHECK(host_t->refcount == 1);
  attn_tensor_release(host_t);

  /* Scripts still get the whole of attn. */
  CHECK_TRUE(S, "local attn = require 'attn' local q = attn.randn(2, 4, 8) "
                "local o = attn.F.scaled_dot_product_attention(q, q, q, {is_causal = true}) "
                "return o:dim() == 3 and attn.nn.Linear(8, 2)(o):size(-1) == 2");
  attn_lua_close(S);
  attn_lua_close(U);
}

/* ------------------------------------------------------------------------ */
/* Exhaustion                                                                */

static void test_memory_limit(void) {
  const int64_t cap = 32 << 20;
  lua_State *S = new_state(true, cap, 0, 0);
  attn_debug_counts before;
  attn_debug_counts_get(&before);
  int64_t limit = 0;
  CHECK(attn_lua_memory_used(S, &limit) > 0 && limit == cap);
  /* 100 GB in one tensor, and other ways of asking for too much */
  CHECK_FAILS(S, "return require('attn').zeros(25000000000)", ATTN_ERR_SCRIPT,
              "not enough memory: zeros needs 95367 MB for [25000000000], cap 32 MB");
  CHECK_FAILS(S, "return require('attn').full({5000, 5000, 1000}, 1)", ATTN_ERR_SCRIPT, "not enough memory: ");
  CHECK_FAILS(S, "return require('attn').ones(4096, 4096):expand(64, 4096, 4096):contiguous()", ATTN_ERR_SCRIPT,
              "not enough memory: ");
  CHECK_FAILS(S, "return require('attn').eye(100000)", ATTN_ERR_SCRIPT, "not enough memory: ");
  CHECK_FAILS(S, "return require('attn').arange(1e10)", ATTN_ERR_SCRIPT, "not enough memory: ");
  CHECK_FAILS(S, "local a = require('attn').ones(3000, 1) return a:matmul(a:t())", ATTN_ERR_SCRIPT,
              "not enough memory: ");
  /* keeping tensors forever */
  CHECK_FAILS(S, "local attn, keep = require 'attn', {} while true do keep[#keep + 1] = attn.zeros(256, 1024) end",
              ATTN_ERR_SCRIPT, "not enough memory: ");
  CHECK(attn_lua_memory_used(S, NULL) <= cap);
  /* growing tables and strings forever */
  CHECK_FAILS(S, "local t = {} while true do t[#t + 1] = {i = #t} end", ATTN_ERR_NOMEM, "not enough memory");
  CHECK_FAILS(S, "local s = 'x' while true do s = s .. s end", ATTN_ERR_NOMEM, "not enough memory");
  CHECK_FAILS(S, "return string.rep('x', 1 << 30)", ATTN_ERR_NOMEM, "not enough memory");
  CHECK(attn_lua_memory_used(S, NULL) <= cap);
  /* the state survives and has its memory back */
  CHECK_TRUE(S, "return require('attn').ones(1000, 1000):sum():item() == 1e6");
  CHECK(attn_lua_memory_used(S, NULL) < cap / 4);
  /* a legitimate loop of big temporaries stays under the cap: the
     collector keeps pace with tensor storage */
  CHECK_TRUE(
      S, "local attn = require 'attn' local s = 0 for i = 1, 300 do "
         "local x = attn.full({1024, 1024}, 1.0) s = s + (x * 2):sum():item() end return s == 300 * 2 * 1024 * 1024");
  /* a global that keeps storage counts until it is dropped */
  CHECK_TRUE(S, "big = require('attn').zeros(4, 1024, 1024) return true");
  CHECK(attn_lua_memory_used(S, NULL) > 16 << 20);
  CHECK_TRUE(S, "big = nil collectgarbage() return true");
  CHECK(attn_lua_memory_used(S, NULL) < 4 << 20);
  attn_lua_close(S);
  attn_debug_counts after;
  attn_debug_counts_get(&after);
  CHECK(after.storages == before.storages && after.storage_bytes == before.storage_bytes);

  /* Host allocations between calls are not charged to a state. */
  S = new_state(true, 8 << 20, 0, 0);
  attn_tensor *host = NULL;
  CHECK_OK(attn_zeros(1, (int64_t[]){16 << 20}, &host)); /* 64 MB, more than the cap */
  CHECK_OK(attn_lua_push_tensor(S, host));
  lua_setglobal(S, "host");
  CHECK_TRUE(S, "return host:numel() == 16 * 1024 * 1024");
  CHECK_FAILS(S, "return host + 1", ATTN_ERR_SCRIPT, "not enough memory: ");
  attn_lua_close(S);
  attn_tensor_release(host);
}

static void test_instruction_limit(void) {
  lua_State *S = new_state(true, 16 << 20, 5000000, 0);
  double t0 = now();
  CHECK_FAILS(S, "while true do end", ATTN_ERR_LIMIT, "instruction limit of 5000000 reached");
  CHECK_FAILS(S, "local function f() return f() end f()", ATTN_ERR_LIMIT, "instruction limit");
  /* catching the error does not help: it is raised again at once */
  CHECK_FAILS(S, "while true do pcall(function() while true do end end) end", ATTN_ERR_LIMIT, "instruction limit");
  CHECK_FAILS(S, "local function f() while true do pcall(f) end end f()", ATTN_ERR_LIMIT, "instruction limit");
  CHECK_FAILS(S, "while true do xpcall(function() error('x') end, function() while true do end end) end",
              ATTN_ERR_LIMIT, "instruction limit");
  CHECK_FAILS(S, "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
              ATTN_ERR_LIMIT, "instruction limit");
  CHECK_FAILS(S, "local co = coroutine.wrap(function() while true do coroutine.yield() end end) while true do co() end",
              ATTN_ERR_LIMIT, "instruction limit");
  CHECK_FAILS(S, "while true do pcall(function() local t = {} while true do t[#t + 1] = {} end end) end",
              ATTN_ERR_LIMIT, "instruction limit");
#if !defined(__SANITIZE_THREAD__)
  /* Not under TSan: the sandbox's string.rep is instrumented C that raises
     (longjmp) out of its own frame through uninstrumented Lua, which TSan's
     shadow stack does not follow; 65536 such errors overflow it (a CHECK
     failure in TSan's stack depot, not a race). */
  CHECK_FAILS(S, "while true do pcall(string.rep, 'x', 1 << 30) end", ATTN_ERR_LIMIT, "instruction limit");
#endif
  /* a speed bound: not under valgrind (scripts/valgrind.sh), ~30x slower */
  const char *san = getenv("ATTN_SANITIZER");
  if (!san || strcmp(san, "valgrind") != 0) CHECK(now() - t0 < 30);
  /* each call gets a fresh budget */
  CHECK_TRUE(S, "local n = 0 for i = 1, 100000 do n = n + i end return n == 5000050000");
  /* and a coroutine that hit the limit before runs normally now */
  CHECK_TRUE(S, "co = coroutine.create(function() for i = 1, 3 do coroutine.yield(i) end end) return true");
  CHECK_TRUE(S, "local _, v = coroutine.resume(co) return v == 1");
  attn_lua_close(S);

  /* A wall-clock limit alone, with attn work in the loop. */
  S = new_state(true, 0, 0, 0.3);
  t0 = now();
  CHECK_FAILS(S, "local attn = require 'attn' while true do local x = attn.ones(64, 64):matmul(attn.ones(64, 64)) end",
              ATTN_ERR_LIMIT, "time limit"); /* the hook's message, or matmul's (polled) */
  double dt = now() - t0;
  CHECK(dt >= 0.3 && dt < 5);
  CHECK_TRUE(S, "return true");
  attn_lua_close(S);

  /* Finalizers run with hooks off, so a sandbox allows none. */
  S = new_state(true, 16 << 20, 1000000, 0);
  CHECK_FAILS(S, "setmetatable({}, {__gc = function() while true do end end})", ATTN_ERR_SCRIPT,
              "__gc metamethods are not allowed in a sandbox");
  CHECK_TRUE(S, "local mt = {} local t = setmetatable({}, mt) mt.__gc = function() while true do end end "
                "t = nil collectgarbage() return getmetatable(setmetatable({}, {__index = {}})) ~= nil");
  /* xpcall still works with a handler, in and out of coroutines */
  CHECK_TRUE(S, "local ok, m = xpcall(function(a) error(a .. '!') end, function(m) return 'handled ' .. m end, 'x') "
                "return not ok and m:find('handled') ~= nil and m:find('x!') ~= nil");
  CHECK_TRUE(
      S, "local co = coroutine.wrap(function() return xpcall(function() coroutine.yield(1) return 2 end, print) end) "
         "local a = co() local ok, b = co() return a == 1 and ok and b == 2");
  t0 = now();
  attn_lua_close(S);
  CHECK(now() - t0 < 5);

  /* Without limits there is no hook: a long loop just runs. */
  lua_State *U = new_state(false, 0, 0, 0);
  CHECK_TRUE(U, "local n = 0 for i = 1, 20000000 do n = n + 1 end return n == 20000000");
  attn_lua_close(U);
}

/* ------------------------------------------------------------------------ */
/* Threads: 4 states in 4 threads                                            */

enum { NTHREADS = 4, ITERS = 25, SEQ = 32, DIM = 16 };

typedef struct job {
  int id;
  float q[SEQ * DIM], out[SEQ * DIM];
  double sdpa_sum, mm_sum;
  int ok;
  char error[256];
} job;

static const char *thread_script = "local attn = require 'attn'\n"
                                   "return function(q, out, id)\n"
                                   "  local k = (q * 0.5):flip({1})\n"
                                   "  local o = attn.scaled_dot_product_attention(q:unsqueeze(1), k:unsqueeze(1), "
                                   "q:unsqueeze(1), {is_causal = true})\n"
                                   "  out:copy_(o:squeeze(1))\n"
                                   "  local mm = q:matmul(k:t()):softmax(-1):matmul(q)\n"
                                   "  local ok, e = pcall(attn.matmul, attn.zeros(id, 3), attn.zeros(2, 4))\n"
                                   "  assert(not ok and e:find('[' .. id .. ',3]', 1, true), e)\n"
                                   "  return o:sum():item(), mm:sum():item()\n"
                                   "end\n";

static void fill_job(job *j) {
  for (int i = 0; i < SEQ * DIM; i++) j->q[i] = (float)((i * (j->id + 3)) % 17) / 17.0f - 0.5f;
}

/* One state per job, used by the calling thread only. */
static void *run_job(void *arg) {
  job *j = arg;
  lua_State *L = new_state(true, 64 << 20, 0, 0);
  j->ok = 1;
  for (int it = 0; it < ITERS && j->ok; it++) {
    attn_status st = attn_lua_dostring(L, thread_script, "=thread", 0, 1);
    if (st == ATTN_OK) st = attn_lua_push_buffer(L, j->q, 2, (int64_t[]){SEQ, DIM}, NULL, NULL, NULL);
    if (st == ATTN_OK) st = attn_lua_push_buffer(L, j->out, 2, (int64_t[]){SEQ, DIM}, NULL, NULL, NULL);
    if (st == ATTN_OK) {
      lua_pushinteger(L, j->id + 5);
      st = attn_lua_call(L, 3, 2);
    }
    if (st != ATTN_OK) {
      snprintf(j->error, sizeof j->error, "%s", attn_last_error());
      j->ok = 0;
      break;
    }
    double s = lua_tonumber(L, -2), m = lua_tonumber(L, -1);
    lua_pop(L, 2);
    if (it > 0 && (s != j->sdpa_sum || m != j->mm_sum)) {
      snprintf(j->error, sizeof j->error, "iteration %d gave %g/%g after %g/%g", it, s, m, j->sdpa_sum, j->mm_sum);
      j->ok = 0;
    }
    j->sdpa_sum = s;
    j->mm_sum = m;
  }
  attn_lua_close(L);
  return NULL;
}

static void test_threads(void) {
  static job serial[NTHREADS], threaded[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    serial[i].id = threaded[i].id = i;
    fill_job(&serial[i]);
    fill_job(&threaded[i]);
    run_job(&serial[i]); /* the reference, one at a time */
  }
  pthread_t th[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) CHECK(pthread_create(&th[i], NULL, run_job, &threaded[i]) == 0);
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < NTHREADS; i++) {
    if (!serial[i].ok || !threaded[i].ok) fprintf(stderr, "  job %d: %s%s\n", i, serial[i].error, threaded[i].error);
    CHECK(serial[i].ok && threaded[i].ok);
    CHECK_NEAR(threaded[i].sdpa_sum, serial[i].sdpa_sum, 1e-4 * (1 + fabs(serial[i].sdpa_sum)));
    CHECK_NEAR(threaded[i].mm_sum, serial[i].mm_sum, 1e-4 * (1 + fabs(serial[i].mm_sum)));
    double worst = 0;
    for (int k = 0; k < SEQ * DIM; k++) worst = fmax(worst, fabs(threaded[i].out[k] - serial[i].out[k]));
    CHECK(worst < 1e-5);
    /* the jobs differ, so equal results would mean crossed wires */
    if (i > 0) CHECK(serial[i].sdpa_sum != serial[i - 1].sdpa_sum);
  }
}

int main(void) {
  test_states();
  test_tensors();
  test_errors();
  test_sandbox();
  test_memory_limit();
  test_instruction_limit();
  test_threads();
  return check_summary();
}
