/* SPDX-License-Identifier: MIT */
/* Fuzz target: the whole Lua API, driven by spec/fuzz/lua_api.lua (embedded
 * at build time by embed_driver.cmake as attn_fuzz_driver).
 *
 * Each input gets a fresh sandboxed state of the host library (the setting
 * in which attn runs untrusted scripts): no io/os/debug, a 16 MB memory
 * limit over Lua objects and tensor storage, and a budget of 2 million
 * instructions.  The driver reads the input as a program of API calls with
 * random arguments under pcall (see lua_api.lua).
 *
 * Lua errors, the memory limit and the instruction budget are normal
 * outcomes.  Findings: sanitizer reports (memory errors, undefined
 * behaviour, leaks), an abort, a run that fails in another way than those,
 * and tensors, storages or autograd nodes still alive after the state is
 * closed (the core's live counters must return to where they were). */
#include "fuzz_lua.h"

#include <lauxlib.h>
#include <lua.h>

#include "attn_lua.h"

extern const char attn_fuzz_driver[];
extern const size_t attn_fuzz_driver_size;

/* ATTN_FUZZ_TRACE=1: the driver prints each step and its outcome.
   ATTN_FUZZ_LUA=<code>: runs that code instead of the driver, in the same
   kind of state with the same checks (to confirm a reduced reproducer). */
static bool trace;
static const char *code;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  trace = getenv("ATTN_FUZZ_TRACE") != NULL;
  code = getenv("ATTN_FUZZ_LUA");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_debug_counts before;
  fz_counts(&before);
  lua_State *L = fz_sandbox(16 << 20, 2000000);
  FZ_CHECK(L != NULL, "cannot make a state: %s", attn_last_error());
  lua_pushlstring(L, (const char *)data, size);
  lua_pushboolean(L, trace);
  attn_status st = attn_lua_dostring(L, code ? code : attn_fuzz_driver, "=lua_api.lua", 2, 0);
  if (st != ATTN_OK) {
    const char *msg = lua_tostring(L, -1);
    FZ_CHECK(msg != NULL, "failure without a message");
    /* the driver catches everything but the limits (and memory errors
       raised outside its pcalls) */
    FZ_CHECK(st == ATTN_ERR_LIMIT || st == ATTN_ERR_NOMEM || st == ATTN_ERR_SCRIPT, "status %d: %s", st, msg);
    if (trace) fprintf(stderr, "driver error: %s\n", msg);
  }
  attn_lua_close(L);
  attn_set_grad_enabled(true); /* a script may leave the thread's mode off */
  fz_check_counts(&before);
  return 0;
}
