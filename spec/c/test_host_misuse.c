/* SPDX-License-Identifier: MIT */
/* Issue 27 section 4 in a sandboxed host state with a memory cap:
 *
 *  - repeat_interleave past the cap names the cap like every other op
 *    ("not enough memory: <fn> needs N MB ..., cap M MB"), where it used to
 *    build its index as a Lua list and fail with a bare "not enough memory"
 *    from Lua's allocator; the state then runs the next call normally;
 *  - the misuse messages hold in the sandbox too: a method called with '.'
 *    (Lua module methods, C tensor methods), an unknown option, and
 *    requires_grad in a creation function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "attn_lua.h"
#include "check.h"
#include "check_host.h"

static lua_State *new_state(int64_t mem) { return check_host_state(true, mem, 0, 20); }

/* Runs code, which returns a string; checks that it holds every one of
   the NULL-ended parts and none of the refused ones. */
static void expect_message(lua_State *L, const char *code, const char *const *parts, const char *refused) {
  attn_status st = attn_lua_dostring(L, code, "=misuse", 0, 1);
  const char *m = lua_tostring(L, -1);
  bool ok = st == ATTN_OK && m != NULL;
  for (int i = 0; ok && parts[i]; i++) ok = strstr(m, parts[i]) != NULL;
  if (ok && refused) ok = strstr(m, refused) == NULL;
  if (!ok) fprintf(stderr, "  in: %s\n  status %d, got: %s\n", code, (int)st, m ? m : "(none)");
  CHECK(ok);
  lua_pop(L, 1);
}

static void test_repeat_interleave_cap(void) {
  lua_State *L = new_state((int64_t)64 << 20);
  /* 2^23 slices: a 64 MB int64 index (and a 32 MB result), past the cap;
     as a Lua list it was 128 MB of Lua table */
  static const char *const capped[] = {"not enough memory: ", " needs ", "cap 64 MB", "misuse:2: ", NULL};
  expect_message(L,
                 "local attn = require 'attn'\n"
                 "local ok, e = pcall(function() local r = attn.ones(2):repeat_interleave(1 << 22); return r end)\n"
                 "return ok and 'no error' or tostring(e)",
                 capped, NULL);
  static const char *const counts[] = {"not enough memory: ", "cap 64 MB", NULL};
  expect_message(L,
                 "local attn = require 'attn'\n"
                 "local ok, e = pcall(attn.repeat_interleave, attn.tensor({1 << 23}))\n"
                 "return ok and 'no error' or tostring(e)",
                 counts, NULL);
  /* the state is usable at once, and a small repeat_interleave is right */
  static const char *const fine[] = {"1 1 2 2 3 3", NULL};
  expect_message(L,
                 "local attn = require 'attn'\n"
                 "local r = attn.tensor({1, 2, 3}):repeat_interleave(2)\n"
                 "local out = {} for i = 1, r:numel() do out[i] = ('%d'):format(r[i]) end\n"
                 "return table.concat(out, ' ')",
                 fine, NULL);
  attn_lua_close(L);
}

static void test_misuse_in_sandbox(void) {
  lua_State *L = new_state((int64_t)64 << 20);
  static const char *const dot_module[] = {"misuse:3: parameters: call it as m:parameters(", "with ':'", NULL};
  expect_message(L,
                 "local attn = require 'attn'\n"
                 "local m = attn.nn.Linear(2, 2)\n"
                 "local ok, e = pcall(function() local r = m.parameters(); return r end)\n"
                 "return ok and 'no error' or tostring(e)",
                 dot_module, NULL);
  static const char *const dot_tensor[] = {"misuse:3: sum: call it as x:sum(", NULL};
  expect_message(L,
                 "local attn = require 'attn'\n"
                 "local x = attn.ones(2)\n"
                 "local ok, e = pcall(function() local r = x.sum(); return r end)\n"
                 "return ok and 'no error' or tostring(e)",
                 dot_tensor, NULL);
  static const char *const dot_c[] = {"misuse:3: ", "call it as x:matmul(...) with ':'", NULL};
  expect_message(L,
                 "local attn = require 'attn'\n"
                 "local x = attn.ones(2, 2)\n"
                 "local ok, e = pcall(function() local r = x.matmul(x); return r end)\n"
                 "return ok and 'no error' or tostring(e)",
                 dot_c, NULL);
  static const char *const option[] = {"unknown option 'learning_rate'", "valid options: ", "lr", NULL};
  expect_message(L,
                 "local attn = require 'attn'\n"
                 "local p = attn.zeros(2, {requires_grad = true})\n"
                 "local ok, e = pcall(attn.optim.Adam, {p}, {learning_rate = 1})\n"
                 "return ok and 'no error' or tostring(e)",
                 option, NULL);
  static const char *const grad[] = {"true false", NULL};
  expect_message(L,
                 "local attn = require 'attn'\n"
                 "return tostring(attn.zeros(2, {requires_grad = true}).requires_grad) .. ' ' ..\n"
                 "  tostring(attn.zeros(2).requires_grad)",
                 grad, NULL);
  attn_lua_close(L);
}

int main(void) {
  test_repeat_interleave_cap();
  test_misuse_in_sandbox();
  return check_summary();
}
