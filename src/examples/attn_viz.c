/* SPDX-License-Identifier: MIT */
/* attn_viz: a small host program that embeds attn (attn_lua.h).
 *
 *   attn_viz SCRIPT.lua
 *
 * The host owns a sentence, an embedding for each of its words and an
 * output buffer for the attention weights.  It opens a sandboxed Lua state
 * (no io/os/debug, 64 MB, 10^8 instructions, 10 s), runs the user's script,
 * which returns a function f(x, weights, tokens), and calls it with its own
 * buffers handed over without copies: x [L, D] and weights [L, L], which
 * the script fills in place.  The script's result (the context vectors) is
 * taken back as a tensor that outlives the state.  The host then draws the
 * weights as a text heatmap.  Any failure of the script is reported with
 * its status and message, and the program exits with status 1.
 * src/examples/viz_dot.lua is such a script.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>

#include "attn_lua.h"

enum { L = 6, D = 16 };
static const char *const tokens[L] = {"Life", "is", "short", "eat", "dessert", "first"};

static const char *status_name(attn_status st) {
  switch (st) {
  case ATTN_ERR_SCRIPT: return "script error";
  case ATTN_ERR_LIMIT: return "limit reached";
  case ATTN_ERR_NOMEM: return "out of memory";
  case ATTN_ERR_IO: return "cannot read the script";
  default: return "error";
  }
}

/* Pushes the words as a Lua list.  Building a table allocates, which can
   raise, so it runs through lua_pcall like any Lua code of the host. */
static int push_tokens(lua_State *Ls) {
  lua_createtable(Ls, L, 0);
  for (int i = 0; i < L; i++) {
    lua_pushstring(Ls, tokens[i]);
    lua_rawseti(Ls, -2, i + 1);
  }
  return 1;
}

static int fail(lua_State *Ls, attn_status st) {
  fprintf(stderr, "attn_viz: %s: %s\n", status_name(st), attn_last_error());
  attn_lua_close(Ls);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: attn_viz SCRIPT.lua\n");
    return 2;
  }
  /* The host's own data: deterministic embeddings and an output buffer. */
  static float x[L][D], weights[L][L];
  for (int i = 0; i < L; i++)
    for (int j = 0; j < D; j++) x[i][j] = sinf(0.7f * (float)((i + 1) * (j + 1))) + 0.1f * (float)j;

  attn_lua_opts opts;
  attn_lua_opts_init(&opts);
  opts.sandbox = true;
  opts.memory_limit = 64 << 20;
  opts.instruction_limit = 100000000;
  opts.time_limit = 10;
  lua_State *Ls;
  if (attn_lua_newstate(&opts, &Ls) != ATTN_OK) {
    fprintf(stderr, "attn_viz: %s\n", attn_last_error());
    return 1;
  }

  /* The script's chunk returns the function to call. */
  attn_status st = attn_lua_dofile(Ls, argv[1], 0, 1);
  if (st != ATTN_OK) return fail(Ls, st);
  if (lua_type(Ls, -1) != LUA_TFUNCTION) {
    fprintf(stderr, "attn_viz: %s must return a function f(x, weights, tokens)\n", argv[1]);
    attn_lua_close(Ls);
    return 1;
  }
  /* Hand the buffers over without copying.  No release callback: the host
     keeps ownership, and both arrays outlive the state. */
  if ((st = attn_lua_push_buffer(Ls, &x[0][0], 2, (int64_t[]){L, D}, NULL, NULL, NULL)) != ATTN_OK ||
      (st = attn_lua_push_buffer(Ls, &weights[0][0], 2, (int64_t[]){L, L}, NULL, NULL, NULL)) != ATTN_OK)
    return fail(Ls, st);
  lua_pushcfunction(Ls, push_tokens);
  if (lua_pcall(Ls, 0, 1, 0) != LUA_OK) {
    fprintf(stderr, "attn_viz: %s\n", lua_tostring(Ls, -1));
    attn_lua_close(Ls);
    return 1;
  }
  if ((st = attn_lua_call(Ls, 3, 1)) != ATTN_OK) return fail(Ls, st);

  /* The result: retained, so it stays ours after the state is gone. */
  attn_tensor *ctx = NULL;
  if ((st = attn_lua_get_tensor(Ls, -1, &ctx)) != ATTN_OK) return fail(Ls, st);
  lua_pop(Ls, 1);
  int64_t used, limit;
  used = attn_lua_memory_used(Ls, &limit);
  attn_lua_close(Ls);

  /* Draw the weights the script wrote into the host's buffer. */
  static const char shades[] = " .:-=+*#%@";
  printf("attention weights (row: query, column: key)\n%8s", "");
  for (int j = 0; j < L; j++) printf(" %8.8s", tokens[j]);
  printf("\n");
  double worst = 0;
  int best_i = 0, best_j = 1;
  for (int i = 0; i < L; i++) {
    printf("%8.8s", tokens[i]);
    double sum = 0;
    for (int j = 0; j < L; j++) {
      float w = weights[i][j];
      int shade = (int)(w * 9.999f);
      shade = shade < 0 ? 0 : shade > 9 ? 9 : shade;
      printf(" %c%.6f", shades[shade], w);
      sum += w;
      if (j != i && w > weights[best_i][best_j]) best_i = i, best_j = j;
    }
    printf("\n");
    worst = fmax(worst, fabs(sum - 1));
  }
  printf("rows sum to 1 within %.1e\n", worst);
  printf("most attended: '%s' by '%s' (%.4f)\n", tokens[best_j], tokens[best_i], weights[best_i][best_j]);

  /* The context vectors: shape and strides are visible from C. */
  printf("context: %d-d [", ctx->ndim);
  for (int d = 0; d < ctx->ndim; d++) printf(d ? ",%lld" : "%lld", (long long)ctx->shape[d]);
  printf("], row 1:");
  for (int64_t j = 0; ctx->ndim == 2 && j < ctx->shape[1]; j++)
    printf(" %.6f", attn_tensor_data(ctx)[j * ctx->stride[1]]);
  printf("\nscript memory at the end: %lld of %lld bytes\n", (long long)used, (long long)limit);
  attn_tensor_release(ctx);
  return worst < 1e-5 ? 0 : 1;
}
