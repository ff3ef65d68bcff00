/* SPDX-License-Identifier: MIT */
/* The host tests' (test_host*.c) state maker: a state with these options,
 * or the test ends at once with attn_lua_newstate's message. */
#ifndef ATTN_CHECK_HOST_H
#define ATTN_CHECK_HOST_H

#include <stdio.h>
#include <stdlib.h>

#include "attn_lua.h"

static inline lua_State *check_host_state(bool sandbox, int64_t mem, uint64_t instr, double secs) {
  attn_lua_opts o;
  attn_lua_opts_init(&o);
  o.sandbox = sandbox;
  o.memory_limit = mem;
  o.instruction_limit = instr;
  o.time_limit = secs;
  lua_State *L = NULL;
  if (attn_lua_newstate(&o, &L) != ATTN_OK) {
    fprintf(stderr, "attn_lua_newstate: %s\n", attn_last_error());
    exit(1);
  }
  return L;
}

#endif
