/* SPDX-License-Identifier: MIT */
/* Issue 27, item 1: no loop outruns the deadline.
 *
 * An expanded (stride-0) input of 2^40 elements costs no memory, so an op
 * whose work it sets (a count, a reduction, a search, a comparison) is
 * bound by nothing but the time budget.  spec/support/expanded_cases.lua
 * finds a case for every tensor method, attn.* and attn.F function (and
 * fails on a public function with neither a case nor a reason to be left
 * out); this test runs each case in a sandboxed state with a 1 s budget and
 * a 256 MB cap and checks that it
 *   - ends within 1.5 s (5 s more under sanitizers, ATTN_SANITIZER; not
 *     timed under valgrind): stopped by the budget (ATTN_ERR_LIMIT), or
 *     answered or refused at once (a view, the memory cap naming the op);
 *   - leaves the state usable (a small computation gives its answer) and
 *     within its cap;
 * and that the known offenders (nonzero, masked_select, x[mask],
 * masked_select in a coroutine) are stopped by the budget.
 * Prints a line per case and the worst stop. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "attn_lua.h"
#include "check.h"
#include "check_host.h"

#define DRIVER "spec/support/expanded_cases.lua"
#define BUDGET 1.0

static double slack(void) {
  const char *s = getenv("ATTN_SANITIZER");
  if (!s || !*s) return 0.5;
  if (strcmp(s, "valgrind") == 0) return -1;
  return 5.0;
}

static lua_State *new_state(double secs) {
  lua_State *L = check_host_state(true, (int64_t)256 << 20, 0, secs);
  /* the driver, loaded by the host (the sandbox cannot read files) */
  if (attn_lua_dofile(L, DRIVER, 0, 1) != ATTN_OK) {
    fprintf(stderr, "%s: %s\n", DRIVER, lua_tostring(L, -1));
    exit(1);
  }
  lua_setglobal(L, "EXPANDED");
  return L;
}

/* Runs EXPANDED.<fn>(arg) and leaves one result (or the message). */
static attn_status call(lua_State *L, const char *fn, const char *arg) {
  lua_getglobal(L, "EXPANDED");
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  if (arg) lua_pushstring(L, arg);
  return attn_lua_call(L, arg ? 1 : 0, 1);
}

static char *take_string(lua_State *L) {
  const char *s = lua_tostring(L, -1);
  char *copy = strdup(s ? s : "");
  lua_pop(L, 1);
  return copy;
}

static bool usable(lua_State *L) {
  attn_status st = attn_lua_dostring(L,
                                     "local attn = require 'attn' return attn.ones(2, 2):sum():item() == 4 "
                                     "and attn.tensor({true, false}):nonzero():numel() == 1",
                                     "=check", 0, 1);
  bool ok = st == ATTN_OK && lua_toboolean(L, -1);
  if (!ok) {
    fprintf(stderr, "  state not usable: %s\n", luaL_tolstring(L, -1, NULL));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  int64_t limit, used = attn_lua_memory_used(L, &limit);
  return ok && used <= limit;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *only = getenv("ATTN_EXPANDED_ONLY"); /* a substring of the cases to run (debugging) */
  /* the plan: probed on small twins, in a state without a time budget */
  lua_State *P = new_state(0);
  CHECK_OK(call(P, "missing", NULL));
  char *missing = take_string(P);
  if (*missing) fprintf(stderr, "public functions with no case in %s: %s\n", DRIVER, missing);
  CHECK(*missing == 0);
  free(missing);
  CHECK_OK(call(P, "plan", NULL));
  char *plan = take_string(P);
  CHECK_OK(call(P, "required", NULL));
  char *required = take_string(P);
  attn_lua_close(P);

  lua_State *S = new_state(BUDGET);
  int cases = 0, stopped = 0, prompt = 0;
  double worst = 0;
  for (char *save = NULL, *desc = strtok_r(plan, "\n", &save); desc; desc = strtok_r(NULL, "\n", &save)) {
    if (only && !strstr(desc, only)) continue;
    double t0 = attn_clock_now();
    attn_status st = call(S, "run", desc);
    double dt = attn_clock_now() - t0;
    const char *m = lua_tostring(S, -1);
    bool limit = st == ATTN_ERR_LIMIT && m && strstr(m, "time limit");
    char first[160] = "";
    if (st != ATTN_OK && m) {
      snprintf(first, sizeof first, "%s", m);
      first[strcspn(first, "\n")] = 0;
    }
    printf("%-6s %6.3f s  %s%s%s\n",
           limit           ? "limit"
           : st == ATTN_OK ? "ok"
                           : "error",
           dt, desc, *first ? "  " : "", limit ? "" : first);
    lua_pop(S, 1);
    cases++;
    if (limit)
      stopped++;
    else
      prompt++;
    /* a crash-free refusal is fine, but not one that blames the harness */
    CHECK(st == ATTN_OK || st == ATTN_ERR_LIMIT || st == ATTN_ERR_SCRIPT);
    if (slack() > 0) {
      if (dt > BUDGET + slack()) fprintf(stderr, "  %s took %.3f s\n", desc, dt);
      CHECK(dt <= BUDGET + slack());
    }
    if (dt - BUDGET > worst) worst = dt - BUDGET;
    if (strncmp(desc, "x|", 2) == 0) {
      for (char *r = required; *r;) {
        size_t n = strcspn(r, "\n");
        if (strlen(desc + 2) == n && strncmp(desc + 2, r, n) == 0 && !limit) {
          fprintf(stderr, "  %s must be stopped by the time budget\n", desc);
          CHECK(false);
        }
        r += n + (r[n] == '\n');
      }
    }
    CHECK(usable(S));
  }
  printf("expanded inputs: %d cases, %d stopped by the %.1f s budget, %d answered or refused at once; "
         "worst stop %.3f s after the budget\n",
         cases, stopped, BUDGET, prompt, worst);
  if (!only) CHECK(cases > 100);
  free(plan);
  free(required);
  attn_lua_close(S);
  return check_summary();
}
