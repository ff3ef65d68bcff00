/* SPDX-License-Identifier: MIT */
/* The Lua fuzz targets' state: sandboxed, with a memory and an instruction
   budget, as a host that runs untrusted scripts would make it. */
#ifndef ATTN_FUZZ_LUA_H
#define ATTN_FUZZ_LUA_H
#include "fuzz_common.h"

#include "attn_lua.h"

/* A sandboxed state with these limits, or NULL (attn_last_error says why). */
static inline lua_State *fz_sandbox(int64_t memory_limit, uint64_t instruction_limit) {
  attn_lua_opts o;
  attn_lua_opts_init(&o);
  o.sandbox = true;
  o.memory_limit = memory_limit;
  o.instruction_limit = instruction_limit;
  lua_State *L = NULL;
  return attn_lua_newstate(&o, &L) == ATTN_OK ? L : NULL;
}
#endif
