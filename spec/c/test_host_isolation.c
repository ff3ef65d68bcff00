/* SPDX-License-Identifier: MIT */
/* Issue 27, section 2: a sandbox isolates everything process-wide.
 *
 * A trusted state and a sandboxed state run side by side in one thread.
 * Every function that sets (or observes) something shared by the whole
 * process is listed in `setters` below, either refused in the sandbox
 * with a message that says why, or made the sandbox's own; for each, the
 * sandboxed script runs and the trusted state's observable setting (the
 * kernel family of attn.info(), the thread count, its random stream, its
 * grad mode, the dist timeout) is compared before and after.
 *
 * So that the next such function cannot be forgotten, the test walks the
 * trusted state's attn.core and attn.dist tables and fails on any function
 * whose name looks like a process-wide setter (set_*, *seed*, *rng*,
 * *isa*, *thread*, debug_*, grad mode, *timeout*) or is an internal "_"
 * helper and is in neither the table nor the list of pure helpers the
 * sandbox keeps; and it checks that the sandbox's attn.core holds no other
 * "_" entry. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "attn_lua.h"
#include "check.h"
#include "check_host.h"

static lua_State *new_state(bool sandbox) {
  return sandbox ? check_host_state(true, 256 << 20, 0, 20) : check_host_state(false, 0, 0, 0);
}

/* Runs code; on success the first result as a string (a copy; "" for nil),
   on failure NULL and *err gets the message (a copy). */
static char *eval(lua_State *L, const char *code, char **err) {
  attn_status st = attn_lua_dostring(L, code, "=test", 0, 1);
  const char *s = luaL_tolstring(L, -1, NULL);
  char *copy = strdup(s ? s : "");
  lua_pop(L, 2);
  if (st != ATTN_OK) {
    if (err)
      *err = copy;
    else
      free(copy);
    return NULL;
  }
  if (err) *err = NULL;
  return copy;
}

/* What the trusted state shows of everything process-wide: compared
   before and after each sandboxed script. */
static const char *const observe_trusted =
    "local attn = require 'attn' "
    "local r = attn.rand(4):totable() "
    "return table.concat({attn.info().isa, attn.get_num_threads(), tostring(attn.is_grad_enabled()), "
    "  attn.dist.timeout(), attn.initial_seed(), r[1], r[2], r[3], r[4]}, ' ')";

/* Sets the trusted state to a known point (its stream re-seeded), so that
   two observations taken from it compare equal unless something changed. */
static const char *const reset_trusted = "local attn = require 'attn' attn.manual_seed(1234) return true";

/* REFUSED: raises, saying why; OWN: the sandbox's own setting; READ: only
   reads a process-wide setting (harmless), allowed. */
typedef enum { REFUSED, OWN, READ } kind;

typedef struct {
  const char *name; /* attn.core's (or attn.dist's, "dist.") function */
  kind how;
  const char *script; /* run in the sandbox */
  const char *want;   /* REFUSED: part of the error; OWN: the script's result */
} setter;

static const setter setters[] = {
    {"set_isa", REFUSED, "require('attn').set_isa('portable')",
     "attn.set_isa is not available in a sandbox: it changes the kernel family of the whole process"},
    {"set_num_threads", REFUSED, "require('attn').set_num_threads(1)",
     "attn.set_num_threads is not available in a sandbox: it changes the thread count of the whole process"},
    {"debug_counts", REFUSED, "return require('attn').debug_counts()",
     "attn.debug_counts is not available in a sandbox: it counts the live objects of the whole process"},
    {"save", REFUSED, "require('attn').save('/tmp/attn-sbx.safetensors', {})",
     "attn.save is not available in a sandbox: it writes files"},
    {"load", REFUSED, "require('attn').load('/etc/passwd')", "attn.load is not available in a sandbox: it reads files"},
    {"safetensors_info", REFUSED, "require('attn').safetensors_info('/etc/passwd')",
     "attn.safetensors_info is not available in a sandbox: it reads files"},
    /* the default generator is the sandbox's own: seeding, drawing and
       setting its state change nothing outside; it starts where a fresh
       process starts (torch's default seed), and within the state torch's
       semantics hold (manual_seed(s) then rand gives torch's numbers) */
    {"initial_seed", OWN, "return require('attn').initial_seed()", NULL /* filled in: the fresh state's seed */},
    {"manual_seed", OWN,
     "local attn = require 'attn' attn.manual_seed(7) local a = attn.rand(3):totable() attn.manual_seed(7) "
     "local b = attn.rand(3):totable() return a[1] == b[1] and a[3] == b[3] and attn.initial_seed() == 7",
     "true"},
    {"seed", OWN, "local attn = require 'attn' local s = attn.seed() return attn.initial_seed() == s", "true"},
    {"get_rng_state", OWN,
     "local attn = require 'attn' local s = attn.get_rng_state() local a = attn.randn(5):totable() "
     "attn.set_rng_state(s) local b = attn.randn(5):totable() return a[5] == b[5]",
     "true"},
    {"set_rng_state", OWN,
     "local attn = require 'attn' local g = attn.Generator(99) attn.set_rng_state(g:get_state()) "
     "return attn.rand(2):totable()[2] == attn.rand({2}, attn.Generator(99)):totable()[2]",
     "true"},
    /* every sampler that falls back on the default generator */
    {"(samplers)", OWN,
     "local attn = require 'attn' local F, nn = attn.F, attn.nn "
     "attn.rand(3) attn.randn(3) attn.randint(0, 9, {3}) attn.randperm(5) attn.rand_like(attn.ones(2)) "
     "attn.randn_like(attn.ones(2)) attn.ones(3):uniform_() attn.ones(3):normal_() attn.ones(3):bernoulli_(0.5) "
     "attn.ones(3):exponential_() attn.ones(3):random_(5) attn.ones(4):multinomial(2) attn.rand(3):bernoulli() "
     "F.dropout(attn.ones(8), 0.5) nn.Dropout(0.5)(attn.ones(8)) nn.Linear(3, 3) "
     "local q = attn.ones(1, 4, 8) attn.scaled_dot_product_attention(q, q, q, {dropout_p = 0.5}) "
     "attn.data.shuffle({1, 2, 3, 4}) attn.data.split({1, 2, 3, 4}, 0.5) attn.data.batches({1, 2, 3}, 2)() "
     "return true",
     "true"},
    /* grad mode is the state's: it persists across the sandbox's calls
       and never reaches the trusted state (checked by the observation) */
    {"set_grad_enabled", OWN, "require('attn').set_grad_enabled(false) return true", "true"},
    {"no_grad", OWN, "local attn = require 'attn' return attn.no_grad(function() return attn.is_grad_enabled() end)",
     "false"},
    {"enable_grad", OWN,
     "local attn = require 'attn' local r = attn.enable_grad(function() return attn.is_grad_enabled() end) "
     "return tostring(r) .. ' ' .. tostring(attn.is_grad_enabled())",
     "true false"},
    {"is_grad_enabled", OWN, "return require('attn').is_grad_enabled()", "false"}, /* still off from above */
    /* attn.dist: a 1-rank world without MPI, its timeout the state's own */
    {"dist.set_timeout", OWN,
     "local dist = require('attn').dist dist.set_timeout(0.5) dist.init({timeout = 0.25}) return dist.timeout()",
     "0.25"},
    {"dist.init", OWN,
     "local attn = require 'attn' local dist = attn.dist dist.init() local t = attn.tensor({1.0, 2.0}) "
     "dist.allreduce(t, 'avg') dist.broadcast(t, 0) dist.barrier() dist.allreduce(t, 'sum', {async = true}):wait() "
     "local g = dist.allgather(attn.ones(2, 3)) "
     "return table.concat({dist.rank(), dist.size(), dist.local_rank(), tostring(dist.uses_mpi()), "
     "tostring(dist.is_available()), dist.backend(), t:totable()[1], t:totable()[2], g:size(1)}, ' ')",
     "0 1 0 false false none (sandbox) 1.0 2.0 2"},
    {"dist.timeout", READ, "return require('attn').dist.timeout()", "0.25"}, /* the state's own, from above */
    {"dist._reducer", OWN,
     "local attn = require 'attn' attn.set_grad_enabled(true) local m = attn.nn.Linear(3, 2) "
     "local d = attn.nn.DistributedDataParallel(m, {bucket_mb = 1 / 1024}) d(attn.ones(2, 3)):sum():backward() "
     "return d:bucket_count() .. ' ' .. tostring(m.weight.grad ~= nil)",
     "1 true"},
    {"get_num_threads", READ, "return require('attn').get_num_threads() >= 1", "true"},
};

/* Internal helpers the sandbox keeps (pure tensor functions the package
   calls, the method table, the error function). */
static const char *const kept_internal[] = {"_methods",
                                            "_error",
                                            "_adam_update",
                                            "_check_class_targets",
                                            "_layer_norm",
                                            "_isatty",
                                            "_misuse" /* misuse checks: pure */,
                                            "_unwrap_method",
                                            "_ops" /* the op table: data, the state's own */,
                                            "_declare" /* marks the state's own binding functions */,
                                            "_custom_record" /* graph nodes with a Lua backward: the state's */,
                                            "_sdpa_observer" /* viz.capture's hook: a base.lua upvalue */,
                                            NULL};
/* Internal entries the sandbox removes, and why (for the walk). */
static const char *const removed_internal[] = {"_plot" /* writes files */,
                                               "_dist" /* starts MPI */,
                                               "_pt_open" /* reads files */,
                                               "_pt_writer" /* writes files */,
                                               "_pt_view" /* only for the .pt reader */,
                                               "_pt_storage_name" /* only for the .pt writer */,
                                               NULL};

static bool listed(const char *name) {
  for (size_t i = 0; i < sizeof setters / sizeof *setters; i++)
    if (strcmp(setters[i].name, name) == 0) return true;
  for (int i = 0; kept_internal[i]; i++)
    if (strcmp(kept_internal[i], name) == 0) return true;
  for (int i = 0; removed_internal[i]; i++)
    if (strcmp(removed_internal[i], name) == 0) return true;
  return false;
}

/* Whether a function name looks like it sets or reads process-wide state. */
static bool looks_process_wide(const char *k) {
  static const char *const prefixes[] = {"_", "set_", "get_", "init", "finalize", "debug", NULL};
  static const char *const parts[] = {"seed",    "rng",    "isa",    "thread", "grad_enabled", "no_grad", "enable_grad",
                                      "timeout", "signal", "getenv", "setenv", "blas",         NULL};
  for (int i = 0; prefixes[i]; i++)
    if (strncmp(k, prefixes[i], strlen(prefixes[i])) == 0) return true;
  for (int i = 0; parts[i]; i++)
    if (strstr(k, parts[i])) return true;
  return false;
}

/* Every key of the table that `code` returns in L, with prefix, checked
   against the lists. */
static void walk(lua_State *L, const char *code, const char *prefix, int min_keys) {
  if (attn_lua_dostring(L, code, "=walk", 0, 1) != ATTN_OK) {
    fprintf(stderr, "walk: %s\n", lua_tostring(L, -1));
    CHECK(0);
    lua_pop(L, 1);
    return;
  }
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    if (lua_type(L, -2) == LUA_TSTRING && (lua_type(L, -1) == LUA_TFUNCTION || lua_type(L, -1) == LUA_TTABLE)) {
      const char *k = lua_tostring(L, -2);
      char name[128];
      snprintf(name, sizeof name, "%s%s", prefix, k);
      bool fn = lua_type(L, -1) == LUA_TFUNCTION;
      if ((fn || k[0] == '_') && looks_process_wide(k) && !listed(name)) {
        fprintf(stderr,
                "  %s looks process-wide but is not in test_host_isolation.c's setters: refuse it in "
                "the sandbox (src/host/state.c) or make it the state's own, and list it\n",
                name);
        CHECK(0);
      }
      n++;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  CHECK(n >= min_keys); /* the walk saw the table */
}

static void test_walk(lua_State *T, lua_State *S) {
  walk(T, "return require 'attn.core'", "", 100);
  walk(T, "return require('attn').dist", "dist.", 20);
  /* the package's own top level (attn.base adds Lua functions to core's) */
  walk(T,
       "local attn, core, t = require 'attn', require 'attn.core', {} "
       "for k, v in pairs(attn) do if core[k] == nil then t[k] = v end end return t",
       "", 5);
  /* the sandbox's attn.core keeps no other internal entry */
  char *err = NULL, *got = eval(S,
                                "for k in pairs(require 'attn.core') do if type(k) == 'string' and k:sub(1, 1) == '_' "
                                "then local ok = false for _, n in ipairs({'_methods', '_error', '_adam_update', "
                                "  '_check_class_targets', '_layer_norm', '_isatty', '_unwrap_method', '_ops', "
                                "'_declare', '_custom_record'}) do ok = ok or n == k end "
                                "  if not ok then error('the sandbox keeps ' .. k) end end end return true",
                                &err);
  if (!got) fprintf(stderr, "  %s\n", err);
  CHECK(got && strcmp(got, "true") == 0);
  free(got), free(err);
}

static void test_setters(lua_State *T, lua_State *S) {
  char *fresh_seed = eval(T, "return require('attn').initial_seed()", NULL); /* not seeded yet: the default */
  for (size_t i = 0; i < sizeof setters / sizeof *setters; i++) {
    const setter *s = &setters[i];
    free(eval(T, reset_trusted, NULL));
    char *before = eval(T, observe_trusted, NULL);
    free(eval(T, reset_trusted, NULL));
    char *err = NULL, *got = eval(S, s->script, &err);
    const char *want = s->want ? s->want : fresh_seed;
    bool ok = s->how == REFUSED ? !got && err && strstr(err, want) : got && strcmp(got, want) == 0;
    if (s->how == REFUSED) { /* through attn.core too, and the sandbox goes on */
      char *e2 = NULL, *g2 = eval(S, "return true", &e2);
      ok = ok && g2 && strcmp(g2, "true") == 0;
      free(g2), free(e2);
    }
    if (!ok)
      fprintf(stderr, "  %s: want %s '%s', got %s\n", s->name, s->how == REFUSED ? "an error with" : "", want,
              got ? got : err);
    CHECK(ok);
    char *after = eval(T, observe_trusted, NULL);
    bool same = before && after && strcmp(before, after) == 0;
    if (!same) fprintf(stderr, "  %s changed the trusted state: '%s' -> '%s'\n", s->name, before, after);
    CHECK(same);
    free(before), free(after), free(got), free(err);
  }
  free(fresh_seed);
}

/* The other direction: the trusted state's settings do not reach into the
   sandbox (its stream is its own, whatever the trusted state seeds). */
static void test_trusted_does_not_reach_in(lua_State *T) {
  lua_State *S1 = new_state(true), *S2 = new_state(true);
  char *a = eval(S1, "local attn = require 'attn' local r = attn.rand(3):totable() return r[1] .. r[2] .. r[3]", NULL);
  free(eval(T, "local attn = require 'attn' attn.manual_seed(5) attn.rand(100) return true", NULL));
  char *b = eval(S2, "local attn = require 'attn' local r = attn.rand(3):totable() return r[1] .. r[2] .. r[3]", NULL);
  /* two fresh sandboxes start at the same point: torch's default seed */
  CHECK(a && b && strcmp(a, b) == 0);
  char *c = eval(S1, "local attn = require 'attn' return attn.initial_seed() == 67280421310721", NULL);
  CHECK(c && strcmp(c, "true") == 0);
  free(a), free(b), free(c);
  attn_lua_close(S1);
  attn_lua_close(S2);
}

/* The pure helpers the sandbox keeps work there (they were removed with
   the other "_" entries once, which broke F.layer_norm, the losses' target
   check and Adam in a sandbox). */
static void test_kept_helpers(lua_State *S) {
  char *err = NULL, *got = eval(S,
                                "local attn = require 'attn' attn.set_grad_enabled(true) local F = attn.F "
                                "local x = attn.randn(2, 4) local y = F.layer_norm(x, {4}) "
                                "local l = F.cross_entropy(attn.randn(3, 5), attn.tensor({1, 2, 5})) "
                                "local m = attn.nn.Linear(4, 2) local opt = attn.optim.Adam(m:parameters()) "
                                "m(x):sum():backward() opt:step() "
                                "return y:size(2) == 4 and l:item() > 0",
                                &err);
  if (!got) fprintf(stderr, "  kept helpers: %s\n", err);
  CHECK(got && strcmp(got, "true") == 0);
  free(got), free(err);
}

int main(void) {
  lua_State *T = new_state(false), *S = new_state(true);
  test_walk(T, S);
  test_setters(T, S);
  test_trusted_does_not_reach_in(T);
  test_kept_helpers(S);
  attn_lua_close(S);
  attn_lua_close(T);
  return check_summary();
}
