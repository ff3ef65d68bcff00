/* SPDX-License-Identifier: MIT */
/* Issue 14, items 4-6: time limits reach into long C calls, sandbox
 * isolation, argument ranges.
 *
 *  - core: attn_deadline_set_current stops long kernels (GEMM row blocks,
 *    batched matmul, elementwise, reductions over expanded views, copies,
 *    fused attention on the thread pool) with ATTN_ERR_LIMIT, releasing
 *    what they made (live-object counters back to where they were);
 *  - the sandbox's own string/table functions (src/host/sandbox_lib.c)
 *    give the same transcript as stock Lua on spec/support/
 *    sandbox_lib_cases.lua (results and error messages);
 *  - hostile scripts under a 64 MB cap and a 1 s budget end with
 *    ATTN_ERR_LIMIT within the budget plus 1 s (plus 4 s under
 *    sanitizers, ATTN_SANITIZER set; not timed under valgrind), and the
 *    state runs the next call normally;
 *  - the string metatable is read-only in a sandbox; attn.data loads there
 *    without debug; attn.plot and bert.from_pretrained say what is
 *    missing;
 *  - attn_set_num_threads and attn.set_num_threads reject n outside
 *    [1, ATTN_MAX_THREADS] with a message naming the range. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#include "attn_lua.h"
#include "check.h"
#include "check_host.h"

static double now(void) { return attn_clock_now(); }

static const char *sanitizer(void) {
  const char *s = getenv("ATTN_SANITIZER");
  return s && *s ? s : NULL;
}

/* Seconds a stop may take beyond the budget (< 0: do not time). */
static double slack(void) {
  const char *s = sanitizer();
  if (!s) return 1.0;
  if (strcmp(s, "valgrind") == 0) return -1;
  return 5.0;
}

static lua_State *new_state(bool sandbox, int64_t mem, uint64_t instr, double secs) {
  return check_host_state(sandbox, mem, instr, secs);
}

static attn_status run(lua_State *L, const char *code) { return attn_lua_dostring(L, code, "=test", 0, 1); }

#define CHECK_TRUE(L, code)                                                                                            \
  do {                                                                                                                 \
    attn_status st_ = run(L, code);                                                                                    \
    bool ok_ = st_ == ATTN_OK && lua_toboolean(L, -1);                                                                 \
    if (!ok_) fprintf(stderr, "  in: %s\n  got: %s\n", code, luaL_tolstring(L, -1, NULL)), lua_pop(L, 1);              \
    CHECK(ok_);                                                                                                        \
    lua_pop(L, 1);                                                                                                     \
  } while (0)

#define CHECK_FAILS(L, code, st, msg)                                                                                  \
  do {                                                                                                                 \
    attn_status st_ = run(L, code);                                                                                    \
    const char *m_ = lua_tostring(L, -1);                                                                              \
    bool ok_ = st_ == (st) && m_ && strstr(m_, msg);                                                                   \
    if (!ok_) fprintf(stderr, "  in: %s\n  status %d, message: %s\n", code, (int)st_, m_ ? m_ : "(none)");             \
    CHECK(ok_);                                                                                                        \
    lua_pop(L, 1);                                                                                                     \
  } while (0)

static bool counts_equal(const attn_debug_counts *a, const attn_debug_counts *b) {
  return a->tensors == b->tensors && a->storages == b->storages && a->storage_bytes == b->storage_bytes &&
         a->nodes == b->nodes;
}

/* ------------------------------------------------------------------------ */
/* Core: kernels stop at the deadline                                        */

static attn_status randn(int ndim, const int64_t *shape, attn_tensor **out) {
  attn_status st = attn_empty(ndim, shape, out);
  if (st == ATTN_OK && (st = attn_normal_(*out, 0, 1, NULL))) attn_tensor_release(*out);
  return st;
}

static void expect_limit(attn_status st, const char *what, const char *msg) {
  bool ok = st == ATTN_ERR_LIMIT && strstr(attn_last_error(), msg) && strstr(attn_last_error(), "time limit reached");
  if (!ok) fprintf(stderr, "  %s: status %d, %s\n", what, (int)st, attn_last_error());
  CHECK(ok);
}

static void test_core_deadline(void) {
  CHECK(attn_deadline_current() == 0);
  CHECK(!attn_deadline_passed());
  attn_tensor *a = NULL, *b = NULL, *big = NULL, *q = NULL, *one = NULL, *wide = NULL, *out = NULL;
  CHECK_OK(attn_ones(2, (int64_t[]){512, 512}, &a));
  CHECK_OK(attn_ones(3, (int64_t[]){64, 16, 16}, &b));
  CHECK_OK(attn_ones(4, (int64_t[]){1, 4, 512, 32}, &q));
  CHECK_OK(attn_ones(2, (int64_t[]){1, 1}, &one));
  CHECK_OK(attn_expand(one, 2, (int64_t[]){(int64_t)1 << 40, 1}, &big));
  CHECK_OK(attn_ones(1, (int64_t[]){1 << 20}, &wide));
  attn_debug_counts before, after;
  attn_debug_counts_get(&before);

  /* A deadline already passed: every polled kernel fails at once. */
  double prev = attn_deadline_set_current(attn_clock_now() - 1);
  CHECK(prev == 0);
  CHECK(attn_deadline_passed());
  out = NULL;
  expect_limit(attn_matmul(a, a, &out), "matmul", "matmul");
  CHECK(out == NULL);
  expect_limit(attn_bmm(b, b, &out), "bmm", "bmm");
  expect_limit(attn_binary(ATTN_ADD, wide, wide, &out), "add", "add");
  expect_limit(attn_unary(ATTN_EXP, wide, &out), "exp", "exp");
  expect_limit(attn_reduce_dim(ATTN_SUM, big, 0, false, NULL, &out), "sum", "sum");
  expect_limit(attn_reduce_dim(ATTN_ARGMAX, big, 0, false, NULL, &out), "argmax", "argmax");
  attn_tensor *t = NULL;
  CHECK_OK(attn_transpose(a, 0, 1, &t));
  expect_limit(attn_contiguous(t, &out), "contiguous", "clone");
  attn_tensor_release(t);
  expect_limit(attn_softmax(wide, 0, &out), "softmax", "softmax");
  expect_limit(attn_sdpa(q, q, q, NULL, &out, NULL), "sdpa", "scaled_dot_product_attention");
  CHECK(out == NULL);
  attn_deadline_set_current(0);
  attn_debug_counts_get(&after);
  CHECK(counts_equal(&before, &after));

  /* Without a deadline they run (and the thread's state was reset). */
  CHECK_OK(attn_matmul(a, a, &out));
  attn_tensor_release(out);

  /* A deadline in 0.2 s: a sum over 2^40 expanded elements (hours
     unpolled) stops soon after; on the pool, attention too. */
  for (int threads = 1; threads <= 2; threads++) {
    CHECK_OK(attn_set_num_threads(threads));
    double t0 = now();
    attn_deadline_set_current(t0 + 0.2);
    expect_limit(attn_reduce_dim(ATTN_SUM, big, 0, false, NULL, &out), "sum 2^40", "sum");
    double dt = now() - t0;
    if (slack() > 0) CHECK(dt < 0.2 + slack());
    attn_deadline_set_current(0);
  }
  attn_tensor *lq = NULL;
  CHECK_OK(randn(4, (int64_t[]){1, 8, 4096, 64}, &lq));
  CHECK_OK(attn_set_num_threads(2));
  double t0 = now();
  attn_deadline_set_current(t0 + 0.05);
  attn_status st = ATTN_OK;
  int calls = 0;
  while (st == ATTN_OK && now() - t0 < 30) {
    st = attn_sdpa(lq, lq, lq, NULL, &out, NULL);
    if (st == ATTN_OK) attn_tensor_release(out);
    calls++;
  }
  expect_limit(st, "sdpa [1,8,4096,64]", "scaled_dot_product_attention");
  double dt = now() - t0;
  printf("sdpa [1,8,4096,64], 2 threads: stopped %.3f s after a 0.05 s deadline (%d calls)\n", dt - 0.05, calls);
  if (slack() > 0) CHECK(dt < 0.05 + slack());
  attn_deadline_set_current(0);
  CHECK_OK(attn_set_num_threads(1));
  attn_tensor_release(lq);

  /* A GEMM above 2^32 multiply-adds goes in row blocks under a deadline:
     the same numbers up to rounding, and it stops. */
  attn_tensor *x = NULL, *y = NULL, *r1 = NULL, *r2 = NULL;
  CHECK_OK(randn(2, (int64_t[]){4096, 2048}, &x));
  CHECK_OK(randn(2, (int64_t[]){2048, 1024}, &y));
  CHECK_OK(attn_matmul(x, y, &r1));
  attn_deadline_set_current(attn_clock_now() + 1000);
  CHECK_OK(attn_matmul(x, y, &r2));
  attn_deadline_set_current(0);
  if (r1 && r2) {
    double worst = 0;
    const float *p1 = attn_tensor_data(r1), *p2 = attn_tensor_data(r2);
    for (int64_t i = 0; i < 4096 * 1024; i++) worst = fmax(worst, fabs((double)p1[i] - p2[i]));
    CHECK(worst < 1e-3);
  }
  t0 = now();
  attn_deadline_set_current(t0 + 0.01);
  expect_limit(attn_matmul(x, y, &out), "matmul 2^33", "time limit reached");
  attn_deadline_set_current(0);
  printf("matmul [4096,2048]x[2048,1024]: stopped %.3f s after a 0.01 s deadline\n", now() - t0 - 0.01);
  attn_tensor_release(x), attn_tensor_release(y), attn_tensor_release(r1), attn_tensor_release(r2);

  attn_tensor_release(a), attn_tensor_release(b), attn_tensor_release(q), attn_tensor_release(one);
  attn_tensor_release(big), attn_tensor_release(wide);
}

/* ------------------------------------------------------------------------ */
/* The sandbox's string and table functions against stock Lua                */

static char *transcript(lua_State *L) {
  if (attn_lua_dofile(L, "spec/support/sandbox_lib_cases.lua", 0, 1) != ATTN_OK) {
    fprintf(stderr, "sandbox_lib_cases.lua: %s\n", attn_last_error());
    lua_pop(L, 1);
    return NULL;
  }
  size_t n;
  const char *s = lua_tolstring(L, -1, &n);
  char *copy = malloc(n + 1);
  if (copy) memcpy(copy, s, n + 1);
  lua_pop(L, 1);
  return copy;
}

static void test_transcripts(void) {
  lua_State *U = new_state(false, 0, 0, 0);
  lua_State *S = new_state(true, 256 << 20, 0, 0);
  char *a = transcript(U), *b = transcript(S);
  CHECK(a && b);
  if (a && b) {
    int lines = 0, diffs = 0;
    char *sa, *sb;
    char *la = strtok_r(a, "\n", &sa), *lb = strtok_r(b, "\n", &sb);
    while (la || lb) {
      lines++;
      if (!la || !lb || strcmp(la, lb) != 0) {
        if (diffs++ < 20) fprintf(stderr, "  stock:   %s\n  sandbox: %s\n", la ? la : "(end)", lb ? lb : "(end)");
      }
      la = strtok_r(NULL, "\n", &sa);
      lb = strtok_r(NULL, "\n", &sb);
    }
    printf("sandbox string/table functions: %d transcript lines, %d differ from stock Lua\n", lines, diffs);
    CHECK(diffs == 0);
    CHECK(lines > 20000);
  }
  free(a);
  free(b);
  attn_lua_close(U);
  attn_lua_close(S);
}

/* ------------------------------------------------------------------------ */
/* Hostile scripts                                                           */

static const char *const hostile[] = {
    /* the reproducers */
    "local attn = require 'attn' local q = attn.randn(1, 8, 4096, 64) "
    "while true do attn.scaled_dot_product_attention(q, q, q) end",
    "local attn = require 'attn' local q = attn.randn(1, 8, 4096, 64) "
    "while true do pcall(attn.scaled_dot_product_attention, q, q, q) end",
    "local attn = require 'attn' local a = attn.randn(2048, 2048) while true do local c = a:matmul(a) end",
    "local attn = require 'attn' local a = attn.randn(64, 256, 256) while true do local c = a:matmul(a) end",
    "local attn = require 'attn' return attn.ones(1, 1):expand(2^40, 1):sum(1)",
    "local attn = require 'attn' return attn.ones(1, 3):expand(2^38, 3):max(1)",
    "local attn = require 'attn' local x = attn.ones(1, 1):expand(2^20, 2^20) while true do pcall(x.sum, x, 1) end",
    "return string.rep('a', 1e5):find('.-b')",
    "return string.rep('a', 1e5):match('(.-)b')",
    "return string.rep('a', 1e5):gsub('.-b', '')",
    "for x in string.rep('a', 1e5):gmatch('.-b') do end",
    "return string.rep('a', 3000):find(string.rep('a*', 12) .. 'b')",
    "return string.rep('(', 1e5):find('%b()')",
    "while true do local s = string.rep('x', 1 << 20, 'y') end",
    "return table.move({}, 1, 1 << 50, 2)",
    "return table.move({}, 1, 1 << 50, 1, {})",
    "return table.insert(setmetatable({}, {__len = function() return 1 << 50 end}), 1, 0)",
    "return table.remove(setmetatable({}, {__len = function() return 1 << 50 end}), 1)",
    "return table.sort(setmetatable({}, {__len = function() return (1 << 31) - 2 end, __index = rawlen, "
    "__newindex = rawequal}))",
    "return table.concat(setmetatable({}, {__index = function() return '' end}), '', 1, 1 << 50)",
    "while true do pcall(string.rep, '', 1 << 50) end",
    "while true do load(string.rep('x=1 ', 2e6)) end",
    "while true do local done = false "
    "load(function() if not done then done = true return string.rep('x=1 ', 2e6) end end) end",
};

static void test_hostile(double budget) {
  lua_State *S = new_state(true, 64 << 20, 0, budget);
  double worst = 0;
  for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
    double t0 = now();
    attn_status st = run(S, hostile[i]);
    double dt = now() - t0;
    const char *m = lua_tostring(S, -1);
    bool ok = st == ATTN_ERR_LIMIT && m && strstr(m, "time limit");
    if (!ok) fprintf(stderr, "  script %zu: status %d: %s\n", i, (int)st, m ? m : "(none)");
    CHECK(ok);
    lua_pop(S, 1);
    printf("hostile %2zu: stopped %.3f s after the %.1f s budget\n", i, dt - budget, budget);
    if (dt - budget > worst) worst = dt - budget;
    if (slack() > 0) CHECK(dt < budget + slack());
    /* the state is usable for the next call */
    CHECK_TRUE(S, "local attn = require 'attn' return attn.ones(2, 2):sum():item() == 4 and "
                  "('abc'):find('b') == 2");
    int64_t limit, used = attn_lua_memory_used(S, &limit);
    CHECK(used <= limit);
  }
  printf("hostile scripts: worst stop %.3f s after the budget\n", worst);
  attn_lua_close(S);

  /* An instruction budget alone also binds the library loops. */
  S = new_state(true, 64 << 20, 10000000, 0);
  CHECK_FAILS(S, "return table.move({}, 1, 1 << 50, 2)", ATTN_ERR_LIMIT, "instruction limit");
  CHECK_FAILS(S, "return string.rep('a', 1e5):find('.-b')", ATTN_ERR_LIMIT, "instruction limit");
  CHECK_FAILS(S,
              "return table.sort(setmetatable({}, {__len = function() return (1 << 31) - 2 end, "
              "__index = rawlen, __newindex = rawequal}))",
              ATTN_ERR_LIMIT, "instruction limit");
  CHECK_TRUE(S, "return string.rep('', 1 << 50) == '' and ('x'):rep(3, ',') == 'x,x,x'");
  attn_lua_close(S);
}

/* ------------------------------------------------------------------------ */
/* Isolation                                                                 */

static void test_isolation(void) {
  lua_State *S = new_state(true, 64 << 20, 0, 10);
  lua_State *U = new_state(false, 0, 0, 0);
  /* the string metatable: scripts get a stand-in */
  const char *mt_attack =
      "local mt = getmetatable('') pcall(function() mt.__index = {upper = function() return 'pwned' end} end) "
      "pcall(function() mt.__len = function() return 0 end end) "
      "local ok, v = pcall(function() return ('abc'):upper() end) return ok and v == 'ABC' and #'abc' == 3";
  CHECK_TRUE(S, "return getmetatable('').__index == string and getmetatable('') ~= nil");
  CHECK_TRUE(S, mt_attack);
  CHECK_TRUE(S, "pcall(setmetatable, getmetatable(''), nil) return ('x'):rep(2) == 'xx'");
  /* (the same attack works in a state without the sandbox) */
  CHECK(run(U, mt_attack) == ATTN_OK && !lua_toboolean(U, -1));
  lua_pop(U, 1);
  /* every module of the package loads in a sandbox */
  CHECK_TRUE(S, "for _, m in ipairs({'attn', 'attn.nn', 'attn.data', 'attn.text', 'attn.bert', 'attn.plot', "
                "'attn.seq2seq', 'attn.attention', 'attn.optim', 'attn.functional', 'attn.nn_init', "
                "'attn.gradcheck', 'attn.app.unicode_data', 'attn.app.json', 'attn.nn.module', "
                "'attn.attention.positional'}) do local ok, e = pcall(require, m) "
                "if not ok then error(m .. ': ' .. tostring(e)) end end return true");
  /* attn.data needs no debug library; its errors still name the caller's line (core._error) */
  CHECK_TRUE(S, "local data = require 'attn.data' return type(data) == 'table' and debug == nil");
  CHECK_TRUE(S, "local data = require 'attn.data' local ok, e = pcall(data.Vocab, 42) "
                "return not ok and e:find('^test:1: Vocab: ') ~= nil");
  CHECK_FAILS(S, "return require('attn.data').read_lines('/etc/passwd')", ATTN_ERR_SCRIPT,
              "read_lines: reading files is not available in a sandbox (no io library)");
  CHECK_FAILS(S, "return require('attn.data').default_words_path()", ATTN_ERR_SCRIPT,
              "default_words_path: reading files is not available in a sandbox");
  CHECK_FAILS(S, "return require('attn.data').progress(10)", ATTN_ERR_SCRIPT, "progress: no io library here");
  CHECK_FAILS(S, "return require('attn.data').progress(10, {out = {}})", ATTN_ERR_SCRIPT,
              "progress: out must be an open file");
  /* attn.plot and the BERT loader name what is missing */
  CHECK_FAILS(S, "local attn = require 'attn' return attn.plot.heatmap(attn.ones(2, 2), {path = '/tmp/x.png'})",
              ATTN_ERR_SCRIPT, "heatmap: attn.plot is not available in a sandbox");
  CHECK_FAILS(S, "local attn = require 'attn' return attn.plot.colormaps()", ATTN_ERR_SCRIPT,
              "attn.plot is not available in a sandbox");
  CHECK_FAILS(S, "local attn = require 'attn' return attn.bert.from_pretrained('/tmp')", ATTN_ERR_SCRIPT,
              "bert.from_pretrained: reading files is not available in a sandbox (no io library)");
  CHECK_TRUE(S, "local attn = require 'attn' local c = attn.bert.config({vocab_size = 10, hidden_size = 8, "
                "num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 16, "
                "max_position_embeddings = 8}) return c ~= nil");
  /* load reads a long chunk in polled pieces: same results and names */
  CHECK_TRUE(S, "local f = assert(load(string.rep('x=1 ', 100000) .. 'return x', '=big')) "
                "local g, e = load(string.rep('x=1 ', 100000) .. ' +') "
                "local h = assert(load(string.rep(' ', 70000) .. 'return ...', nil, 't', {})) "
                "return f() == 1 and not g and e:find('^%[string \"x=1 x=1') ~= nil and h(7) == 7");
  CHECK_TRUE(S, "local parts = {'return ', '1', ' + ', '2'} local i = 0 "
                "local f = assert(load(function() i = i + 1 return parts[i] end, '=parts')) "
                "local g, e = load(function() return {} end) "
                "local h, e2 = load(function() error('boom') end) "
                "local big, k = string.rep('x=1 ', 50000) .. 'return x', 0 "
                "local f2 = assert(load(function() k = k + 1 if k == 1 then return big end end)) "
                "return f() == 3 and not g and e:find('reader function must return a string') ~= nil "
                "and not h and e2:find('boom') ~= nil and f2() == 1");
  attn_lua_close(S);
  attn_lua_close(U);
}

/* ------------------------------------------------------------------------ */
/* Argument ranges                                                           */

static void test_threads_range(void) {
  int before = attn_get_num_threads();
  const int bad[] = {0, -1, ATTN_MAX_THREADS + 1, 1000, INT_MAX, INT_MIN};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    attn_status st = attn_set_num_threads(bad[i]);
    char want[64];
    snprintf(want, sizeof want, "[1, %d]", ATTN_MAX_THREADS);
    CHECK(st == ATTN_ERR_ARG && strstr(attn_last_error(), want));
    CHECK(attn_get_num_threads() == before);
  }
  CHECK_OK(attn_set_num_threads(ATTN_MAX_THREADS));
  CHECK(attn_get_num_threads() == ATTN_MAX_THREADS);
  CHECK_OK(attn_set_num_threads(before));
  lua_State *U = new_state(false, 0, 0, 0);
  CHECK_FAILS(U, "return require('attn').set_num_threads(2^31)", ATTN_ERR_SCRIPT,
              "set_num_threads: n must be in [1, 64] (got 2147483648)");
  CHECK_FAILS(U, "return require('attn').set_num_threads(1000)", ATTN_ERR_SCRIPT,
              "set_num_threads: n must be in [1, 64] (got 1000)");
  CHECK_FAILS(U, "return require('attn').set_num_threads(0)", ATTN_ERR_SCRIPT, "[1, 64] (got 0)");
  CHECK_TRUE(U, "local attn = require 'attn' local n = attn.get_num_threads() attn.set_num_threads(64) "
                "local ok = attn.get_num_threads() == 64 attn.set_num_threads(n) return ok");
  attn_lua_close(U);
}

int main(void) {
  test_core_deadline();
  test_threads_range();
  test_isolation();
  test_transcripts();
  if (!getenv("ATTN_LIMITS_SKIP_HOSTILE")) test_hostile(1.0);
  return check_summary();
}
