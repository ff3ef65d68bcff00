/* SPDX-License-Identifier: MIT */
/* Internals shared by the files of the host library (src/host/). */
#ifndef ATTN_HOST_H
#define ATTN_HOST_H

#include "attn_lua.h"
#include "lua/binding.h"

enum { EXHAUSTED_INSTRUCTIONS = 1, EXHAUSTED_TIME };

/* One per state made by attn_lua_newstate: the allocator's userdata. */
typedef struct host_ctx {
  attn_budget *budget; /* NULL: no memory limit */
  bool sandbox;
  uint64_t instruction_limit; /* 0: none */
  double time_limit;          /* seconds; 0: none */
  int hook_every;             /* count of the instruction hook */
  /* the running call's budget (reset by the outermost attn_lua_call) */
  uint64_t count;
  double deadline;
  int exhausted;              /* EXHAUSTED_* once the budget is spent */
  bool refused;               /* the memory limit refused a block since the last hook */
  int depth;                  /* nesting of attn_lua_call */
  attn_budget *saved_current; /* the thread's budget before the outermost call */
  double saved_deadline;      /* the thread's deadline (attn.h) before it */
  bool saved_grad;            /* the thread's grad mode before it (a script's is its state's) */
} host_ctx;

/* The context of a state made by attn_lua_newstate, else NULL. */
host_ctx *attn__host_ctx(lua_State *L);
double attn__host_now(void);
void attn__host_reset_limits(host_ctx *c);
/* For C functions that loop where the count hook cannot run (the
   sandbox's library replacements, sandbox_lib.c): counts steps as
   instructions and raises the limit error, as the hook does, once the
   instruction or time budget is spent. */
void attn__host_poll(lua_State *L, uint64_t steps);
/* Replaces the sandbox's unbounded library functions (string.rep,
   find, match, gmatch, gsub, table.concat, insert, move, remove, sort)
   with versions that call poll (attn__host_poll) every few thousand
   steps; locks the string metatable. */
typedef void (*attn__host_poll_fn)(lua_State *L, uint64_t steps);
void attn__host_sandbox_libs(lua_State *L, attn__host_poll_fn poll);
/* Loads attn.core (sandboxed if the state is) unless its metatables
   exist; may raise, so only call it in protected mode. */
void attn__host_ensure_core(lua_State *L);

#endif
