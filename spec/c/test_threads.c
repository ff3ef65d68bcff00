/* SPDX-License-Identifier: MIT */
/* Concurrency: several Lua states in several threads, each training at once.
 *
 * NTHREADS application threads each own an attn_lua state (with a memory
 * limit) and run the same script on their own seed: the fused SDPA forward
 * and backward (causal, big enough to run on attn's thread pool), SDPA with
 * dropout drawn from the state's own attn.Generator, and a few Adam steps of
 * an nn.MultiheadAttention (matmuls through OpenBLAS).  Each thread's
 * results must equal, bit for bit, those of the same job run alone first:
 * every kernel owns its outputs whatever the split of work, so neither the
 * pool being busy with another thread's job (the kernel then runs on the
 * calling thread) nor the thread count matters.
 *
 * attn_set_num_threads is process-wide (OpenBLAS's count and attn's pool)
 * and may be called from any thread at any time: a parallel_for running
 * meanwhile finishes with the workers it started with, the next one uses
 * the new count.  A further thread keeps changing the count (1..4) while
 * the jobs run, and the results must still be the same.
 *
 * The ctest run is a plain build; scripts/tsan.sh builds this test with
 * -DATTN_SANITIZE=thread and runs it under ThreadSanitizer (zero reports
 * wanted; OpenBLAS is not instrumented, so its own threads are invisible
 * to TSan).  NTHREADS and the number of Adam steps can be raised with
 * ATTN_TEST_THREADS and ATTN_TEST_STEPS. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#include "attn.h"
#include "attn_lua.h"
#include "check.h"

enum { MAX_THREADS = 16 };

/* Returns a function job(id, steps) -> flat tensor of everything computed. */
static const char *script =
    "local attn = require 'attn'\n"
    "local nn, init = attn.nn, require 'attn.nn_init'\n"
    "return function(id, steps)\n"
    "  local g = attn.Generator(1000 + id)\n"
    "  local parts = {}\n"
    "  -- fused SDPA forward + backward: [B, H, L, E] with L = 128, E = 32\n"
    "  local q = attn.randn(2, 4, 128, 32, g):requires_grad_(true)\n"
    "  local k = attn.randn(2, 4, 128, 32, g):requires_grad_(true)\n"
    "  local v = attn.randn(2, 4, 128, 32, g):requires_grad_(true)\n"
    "  local w = attn.randn(2, 4, 128, 32, g)\n"
    "  local o = attn.scaled_dot_product_attention(q, k, v, {is_causal = true})\n"
    "  assert(o.grad_fn == 'ScaledDotProductFlashAttentionForCpuBackward0', tostring(o.grad_fn))\n"
    "  local s = (o * w):sum()\n"
    "  s:backward()\n"
    "  for _, t in ipairs({o, q.grad, k.grad, v.grad}) do parts[#parts + 1] = t:detach():reshape(-1) end\n"
    "  -- SDPA with dropout from this state's generator: [B, L, E] = [2, 16, 8]\n"
    "  local qd = attn.randn(2, 16, 8, g):requires_grad_(true)\n"
    "  local od = attn.scaled_dot_product_attention(qd, qd, qd, {dropout_p = 0.25, generator = g})\n"
    "  od:sum():backward()\n"
    "  parts[#parts + 1] = od:detach():reshape(-1)\n"
    "  parts[#parts + 1] = qd.grad:reshape(-1)\n"
    "  -- MultiheadAttention trained with Adam: E = 32, 4 heads, [N, L, E] = [2, 24, 32]\n"
    "  local mha = nn.MultiheadAttention(32, 4, {batch_first = true})\n"
    "  -- the constructor drew from the shared default generator: start from this job's own weights\n"
    "  for _, p in ipairs(mha:parameters()) do init.uniform_(p, -0.3, 0.3, g) end\n"
    "  local opt = attn.optim.Adam(mha:parameters(), {lr = 1e-2})\n"
    "  local x, y = attn.randn(2, 24, 32, g), attn.randn(2, 24, 32, g)\n"
    "  local losses = {}\n"
    "  for s = 1, steps do\n"
    "    opt:zero_grad()\n"
    "    local out = mha(x, x, x, {need_weights = false})\n"
    "    local loss = ((out - y) ^ 2):mean()\n"
    "    loss:backward()\n"
    "    opt:step()\n"
    "    losses[s] = loss:item()\n"
    "  end\n"
    "  assert(losses[steps] < losses[1], 'Adam did not lower the loss')\n"
    "  parts[#parts + 1] = attn.tensor(losses)\n"
    "  for _, p in ipairs(mha:parameters()) do parts[#parts + 1] = p:detach():reshape(-1) end\n"
    "  return attn.cat(parts, 1)\n"
    "end\n";

typedef struct job {
  int id, steps;
  float *out; /* malloc'd copy of the script's result */
  int64_t n;
  char error[512];
} job;

/* Runs the script in a fresh state of its own; fills j->out or j->error. */
static void *run_job(void *arg) {
  job *j = arg;
  attn_lua_opts o;
  attn_lua_opts_init(&o);
  o.memory_limit = 256 << 20;
  lua_State *L;
  if (attn_lua_newstate(&o, &L)) {
    snprintf(j->error, sizeof j->error, "newstate: %s", attn_last_error());
    return NULL;
  }
  attn_status st = attn_lua_dostring(L, script, "=test_threads", 0, 1);
  if (st == ATTN_OK) {
    lua_pushinteger(L, j->id);
    lua_pushinteger(L, j->steps);
    st = attn_lua_call(L, 2, 1);
  }
  attn_tensor *t = NULL;
  if (st == ATTN_OK) st = attn_lua_get_tensor(L, -1, &t);
  if (st != ATTN_OK) {
    snprintf(j->error, sizeof j->error, "job %d: %s", j->id,
             lua_tostring(L, -1) ? lua_tostring(L, -1) : attn_last_error());
  } else {
    j->n = attn_tensor_numel(t);
    j->out = malloc((size_t)j->n * sizeof(float));
    if (j->out) memcpy(j->out, attn_tensor_data(t), (size_t)j->n * sizeof(float));
    attn_tensor_release(t);
  }
  attn_lua_close(L);
  return NULL;
}

/* Keeps changing the process-wide thread count until told to stop. */
static atomic_bool toggling;
static atomic_int toggles;

static void *toggle_threads(void *arg) {
  (void)arg;
  for (int i = 0; atomic_load(&toggling); i++) {
    if (attn_set_num_threads(1 + i % 4) == ATTN_OK) atomic_fetch_add(&toggles, 1);
    nanosleep(&(struct timespec){0, 2000000}, NULL); /* 2 ms */
  }
  return NULL;
}

static int env_int(const char *name, int def, int lo, int hi) {
  const char *s = getenv(name);
  int v = s && *s ? atoi(s) : def;
  return v < lo ? lo : v > hi ? hi : v;
}

/* Runs jobs[0..n) in n threads at once (plus the toggler if asked). */
static void run_concurrently(job *jobs, int n, bool toggle) {
  pthread_t th[MAX_THREADS], tg;
  bool started[MAX_THREADS] = {0};
  atomic_store(&toggling, toggle);
  if (toggle) CHECK(pthread_create(&tg, NULL, toggle_threads, NULL) == 0);
  for (int i = 0; i < n; i++) {
    started[i] = pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0;
    CHECK(started[i]);
  }
  for (int i = 0; i < n; i++)
    if (started[i]) pthread_join(th[i], NULL);
  if (toggle) {
    atomic_store(&toggling, false);
    pthread_join(tg, NULL);
  }
}

/* Every job's output equals its serial reference bit for bit. */
static void compare(const char *what, const job *ref, const job *got, int n) {
  for (int i = 0; i < n; i++) {
    if (got[i].error[0]) fprintf(stderr, "%s: %s\n", what, got[i].error);
    CHECK(got[i].out != NULL && got[i].n == ref[i].n);
    if (!got[i].out || got[i].n != ref[i].n) continue;
    int64_t differ = 0, first = -1;
    for (int64_t k = 0; k < ref[i].n; k++)
      if (memcmp(&got[i].out[k], &ref[i].out[k], sizeof(float)) != 0 && differ++ == 0) first = k;
    if (differ)
      fprintf(stderr, "%s: job %d differs from its serial run in %lld of %lld values (first at %lld: %.9g vs %.9g)\n",
              what, i, (long long)differ, (long long)ref[i].n, (long long)first, got[i].out[first], ref[i].out[first]);
    CHECK(differ == 0);
  }
}

static void free_jobs(job *jobs, int n) {
  for (int i = 0; i < n; i++) {
    free(jobs[i].out);
    jobs[i].out = NULL;
  }
}

int main(void) {
  const int n = env_int("ATTN_TEST_THREADS", 4, 2, MAX_THREADS);
  const int steps = env_int("ATTN_TEST_STEPS", 4, 2, 1000);
  /* 4 for q, k, v grads and o of [2, 4, 128, 32]; dropout output and grad
     [2, 16, 8]; the losses; MHA's parameters (in_proj 3E x E + 3E, out_proj
     E x E + E with E = 32). */
  const int64_t expect_n = 4 * 2 * 4 * 128 * 32 + 2 * 2 * 16 * 8 + steps + (3 * 32 * 32 + 3 * 32 + 32 * 32 + 32);
  const int before = attn_get_num_threads();
  job ref[MAX_THREADS] = {0}, got[MAX_THREADS] = {0};
  for (int i = 0; i < n; i++) ref[i].id = got[i].id = i, ref[i].steps = got[i].steps = steps;

  /* The references: one job at a time, the pool (3 workers) all theirs. */
  CHECK_OK(attn_set_num_threads(4));
  CHECK(attn_get_num_threads() == 4);
  for (int i = 0; i < n; i++) {
    run_job(&ref[i]);
    if (ref[i].error[0]) fprintf(stderr, "serial: %s\n", ref[i].error);
    CHECK(ref[i].out != NULL && ref[i].n == expect_n);
    if (!ref[i].out) return check_summary();
    bool finite = true;
    for (int64_t k = 0; k < ref[i].n; k++) finite = finite && isfinite(ref[i].out[k]);
    CHECK(finite);
  }
  /* distinct seeds, distinct results: equal outputs would mean crossed wires */
  for (int i = 1; i < n; i++) CHECK(memcmp(ref[i].out, ref[0].out, (size_t)ref[0].n * sizeof(float)) != 0);

  /* All at once, sharing the pool: whoever finds it busy runs serially. */
  run_concurrently(got, n, false);
  compare("concurrent", ref, got, n);
  free_jobs(got, n);

  /* All at once while another thread keeps changing the thread count. */
  atomic_store(&toggles, 0);
  run_concurrently(got, n, true);
  compare("concurrent with set_num_threads", ref, got, n);
  CHECK(atomic_load(&toggles) > 0);
  free_jobs(got, n);

  /* The count is checked whatever the thread. */
  CHECK(attn_set_num_threads(0) == ATTN_ERR_ARG);
  CHECK(strstr(attn_last_error(), "set_num_threads") != NULL);
  CHECK_OK(attn_set_num_threads(before));
  CHECK(attn_get_num_threads() == before);
  free_jobs(ref, n);
  return check_summary();
}
