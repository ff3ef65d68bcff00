/* SPDX-License-Identifier: MIT */
/* Memory safety and resource caps of sandboxed states (issue 14):
 *  - a tensor closed or collected while a binding function borrows it
 *    (an options table's __index, a finalizer during a conversion) stays
 *    valid for that call: no use-after-free, the same result as without
 *    the metamethod;
 *  - everything attn allocates for a state counts against its 64 MB cap
 *    (packed matmul operands, sampling tables, graph nodes of a view chain,
 *    generators, a file's header parse): each hostile script ends in a Lua
 *    error "not enough memory: <function> needs N MB, cap 64 MB" and the
 *    state stays usable;
 *  - tensors of any size are reported to the collector: a loop of
 *    16-float temporaries runs 1e7 steps in 64 MB;
 *  - grad mode belongs to the state that set it;
 *  - the whole process stays under 200 MB of peak RSS (not under sanitizers).
 * Run under ASan by scripts/sanitize.sh like every C test. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <lauxlib.h>

#include "attn_lua.h"
#include "check.h"
#include "check_host.h"

#define CAP (64 << 20)

static lua_State *new_state(bool sandbox, int64_t mem, double secs) { return check_host_state(sandbox, mem, 0, secs); }

/* Runs code that must return true. */
static void expect_true(lua_State *L, const char *code, int line) {
  attn_status st = attn_lua_dostring(L, code, "=caps", 0, 1);
  bool ok = st == ATTN_OK && lua_toboolean(L, -1);
  if (!ok)
    fprintf(stderr, "test_host_caps.c:%d: expected true from\n  %s\n  got: %s\n", line, code,
            st ? attn_last_error() : luaL_tolstring(L, -1, NULL));
  CHECK(ok);
  lua_settop(L, 0);
}

/* Runs code that must fail with a message containing each of msg1, msg2. */
static void expect_error(lua_State *L, const char *code, const char *msg1, const char *msg2, int line) {
  attn_status st = attn_lua_dostring(L, code, "=caps", 0, 1);
  const char *m = st ? attn_last_error() : "(no error)";
  bool ok = st != ATTN_OK && strstr(m, msg1) && (!msg2 || strstr(m, msg2));
  if (!ok) fprintf(stderr, "test_host_caps.c:%d: expected '%s' from\n  %s\n  got: %.400s\n", line, msg1, code, m);
  CHECK(ok);
  lua_settop(L, 0);
}
#define TRUE(L, code) expect_true(L, code, __LINE__)
#define FAILS(L, code, m1, m2) expect_error(L, code, m1, m2, __LINE__)

/* The time budget of the memory cases is generous: they are about memory,
   and sanitizers on a busy 2-core machine are 10-20x slower. */
#define MEM_SECS 60.0

static bool sanitized(void) { return getenv("ATTN_SANITIZER") != NULL || getenv("ATTN_VALGRIND") != NULL; }

/* Borrowed arguments closed under a running call. */
static void test_borrowing(bool sandbox) {
  lua_State *L = new_state(sandbox, sandbox ? CAP : 0, sandbox ? MEM_SECS : 0);
  /* SDPA's options are read after q, k, v are checked: an __index that
     closes all three (and churns memory so freed blocks get reused) */
  TRUE(L, "local attn = require 'attn'\n"
          "local g = attn.Generator(7)\n"
          "local function qkv() return attn.randn(1, 2, 40, 16, g), attn.randn(1, 2, 40, 16, g), attn.randn(1, 2, 40, "
          "16, g) end\n"
          "local q, k, v = qkv()\n"
          "local want = attn.scaled_dot_product_attention(q, k, v, {is_causal = true})\n"
          "local opts = setmetatable({}, {__index = function(_, key)\n"
          "  if key == 'is_causal' then\n"
          "    do local a <close> = q end do local b <close> = k end do local c <close> = v end\n"
          "    local junk = {} for i = 1, 50 do junk[i] = attn.randn(1, 2, 40, 16) end\n"
          "    return true\n"
          "  end\n"
          "end})\n"
          "local got = attn.scaled_dot_product_attention(q, k, v, opts)\n"
          "assert(not pcall(function() return q + 1 end), 'q is closed for Lua')\n"
          "return (got - want):abs():max():item() == 0");
  /* the same through every function that reads an options table after
     its tensor arguments: the closure closes them, the call still works */
  TRUE(L, "local attn = require 'attn'\n"
          "local x = attn.randn(5, 7)\n"
          "local closer = setmetatable({}, {__index = function() do local c <close> = x end return nil end})\n"
          "local ok = pcall(attn.layer_norm or function() end, x, {7}, nil, nil, closer)\n"
          "local y = attn.randn(3, 4)\n"
          "local w = setmetatable({}, {__index = function() do local c <close> = y end return nil end})\n"
          "pcall(attn.softmax, y, w)\n"
          "return true");
  /* a property read allocates a box: the tensor whose property it is may
     be closed by whatever that allocation runs */
  TRUE(L, "local attn = require 'attn'\n"
          "local x = attn.ones(3):requires_grad_() local y = (x * 2):sum() y:backward()\n"
          "for i = 1, 200 do local g = x.grad assert(g:sum():item() == 6) end return true");
  if (!sandbox) {
    /* a finalizer that closes a tensor cat has already borrowed, started
       by the conversion of the later table entries (closed before cat
       reached it: a clean error naming the entry; after: cat works) */
    TRUE(L, "local attn = require 'attn'\n"
            "for round = 1, 20 do\n"
            "  local a = attn.ones(3)\n"
            "  local list = {a}\n"
            "  for i = 2, 200 do list[i] = {1, 2, 3} end\n"
            "  for i = 1, 20 do setmetatable({}, {__gc = function() local c <close> = a end}) end\n"
            "  local ok, c = pcall(attn.cat, list)\n"
            "  if ok then assert(c:numel() == 600 and c:sum():item() == 3 + 199 * 6)\n"
            "  else assert(c:find('cat: entry 1 of the list is a closed tensor', 1, true), c) end\n"
            "end\n"
            "return true");
    /* a generator finalized by hand (from finalizers that the call's own
       allocations start) while SDPA holds it for dropout */
    TRUE(L, "local attn = require 'attn'\n"
            "for round = 1, 20 do\n"
            "  local g = attn.Generator(round)\n"
            "  local q = attn.randn(1, 2, 16, 8)\n"
            "  for i = 1, 50 do setmetatable({}, {__gc = function() getmetatable(g).__gc(g) end}) end\n"
            "  local junk = {} for i = 1, 20 do junk[i] = {} end\n"
            "  pcall(attn.scaled_dot_product_attention, q, q, q, {dropout_p = 0.5, generator = g})\n"
            "end\n"
            "collectgarbage() return true");
    /* an explicit finalizer call on an argument from an option's __index */
    TRUE(L, "local attn = require 'attn'\n"
            "local x = attn.ones(4, 4)\n"
            "local o = setmetatable({}, {__index = function() getmetatable(x).__gc(x) return nil end})\n"
            "pcall(attn.scaled_dot_product_attention, x, x, x, o)\n"
            "return true");
  }
  attn_lua_close(L);
}

static void test_caps(void) {
  lua_State *L = new_state(true, CAP, MEM_SECS);
  /* matmul packs an expanded operand: 32768 x 32768 floats = 4 GB */
  FAILS(L,
        "local attn = require 'attn'\n"
        "local a = attn.ones(32768, 1):expand(32768, 32768)\n"
        "return a:matmul(attn.ones(32768, 1))",
        "not enough memory: matmul needs 4096 MB", "cap 64 MB");
  /* multinomial's sampling table for an expanded [4096, 32768] */
  FAILS(L,
        "local attn = require 'attn'\n"
        "return attn.multinomial(attn.ones(1, 32768):expand(4096, 32768), 2)",
        "not enough memory: multinomial needs", "cap 64 MB");
  /* a chain of views under autograd: headers and graph nodes, no storage */
  FAILS(L,
        "local attn = require 'attn'\n"
        "local x = attn.ones(4):requires_grad_() local keep = x\n"
        "for i = 1, 2e6 do keep = keep:view(2, 2):view(4) end return keep",
        "not enough memory: ", "cap 64 MB");
  /* the state is usable and has its memory back afterwards */
  TRUE(L, "return require('attn').ones(100, 100):sum():item() == 1e4");
  CHECK(attn_lua_memory_used(L, NULL) < CAP / 4);
  /* generators: garbage ones are collected (their size is reported) */
  /* 40000 generators are 100 MB */
  TRUE(L, "local attn = require 'attn' for i = 1, 40000 do local g = attn.Generator(i) end return true");
  /* keeping them hits the cap with a message */
  FAILS(L, "local attn, keep = require 'attn', {} for i = 1, 1e6 do keep[i] = attn.Generator(i) end",
        "not enough memory", NULL);
  TRUE(L, "return require('attn').ones(10):sum():item() == 10");
  attn_lua_close(L);

  /* loops of small temporaries stay flat: 1e7 steps in 64 MB */
  L = new_state(true, CAP, 0);
  char code[256];
  snprintf(code, sizeof code,
           "local attn = require 'attn' local x = attn.zeros(16) for i = 1, %d do x = x + 1 end "
           "return x[1] == %d",
           sanitized() ? 1000000 : 10000000, sanitized() ? 1000000 : 10000000);
  TRUE(L, code);
  CHECK(attn_lua_memory_used(L, NULL) < CAP / 4);
  attn_lua_close(L);
}

/* A safetensors file whose header claims 83 MB: its parse is charged
   before anything is read (the loader is refused in a sandbox; a capped
   state without one may load files). */
static void test_big_header(void) {
  char path[] = "/tmp/attn_caps_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  uint64_t hlen = 83000000;
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hlen >> (8 * i));
  CHECK(write(fd, len8, 8) == 8);
  CHECK(write(fd, "{\"a\":[", 6) == 6);
  CHECK(ftruncate(fd, (off_t)(8 + hlen)) == 0); /* sparse: the rest reads as zeros */
  close(fd);
  lua_State *L = new_state(false, CAP, MEM_SECS);
  char code[256];
  snprintf(code, sizeof code, "return require('attn').load('%s')", path);
  FAILS(L, code, "not enough memory: safetensors_load needs", "cap 64 MB");
  TRUE(L, "return require('attn').ones(3):sum():item() == 3");
  attn_lua_close(L);
  unlink(path);
}

/* set_grad_enabled(false) in one state leaves the other's mode alone. */
static void test_grad_mode(void) {
  lua_State *A = new_state(true, CAP, MEM_SECS), *B = new_state(false, 0, 0);
  TRUE(A, "local attn = require 'attn' attn.set_grad_enabled(false) return not attn.is_grad_enabled()");
  TRUE(B, "local attn = require 'attn' local x = attn.ones(2):requires_grad_() "
          "return attn.is_grad_enabled() and (x * 2).requires_grad");
  TRUE(A, "local attn = require 'attn' local x = attn.ones(2):requires_grad_() "
          "return not attn.is_grad_enabled() and not (x * 2).requires_grad");
  CHECK(attn_grad_enabled()); /* the host thread's own mode is untouched */
  attn_lua_close(A);
  attn_lua_close(B);
}

int main(void) {
  test_borrowing(false);
  test_borrowing(true);
  test_caps();
  test_big_header();
  test_grad_mode();
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  fprintf(stderr, "peak RSS %ld MB\n", ru.ru_maxrss / 1024);
  if (!sanitized()) CHECK(ru.ru_maxrss < 200 * 1024);
  return check_summary();
}
