/* SPDX-License-Identifier: MIT */
/*
 * attn_lua.h - embedding attn in a C program.
 *
 * Lua 5.4 states with the attn package preloaded, tensors handed between C
 * and Lua without copies, protected calls that report errors as a status
 * and a message, and a sandbox for untrusted scripts.  Link libattn_lua
 * (`pkg-config --cflags --libs attn-lua`, or `find_package(attn)` and the
 * CMake target attn::attn_lua); it contains the Lua binding and the Lua
 * package, and links liblua5.4 and libattn.
 *
 * A minimal host:
 *
 *     lua_State *L;
 *     if (attn_lua_newstate(NULL, &L)) { fputs(attn_last_error(), stderr); ... }
 *     float buf[6] = {1, 2, 3, 4, 5, 6};
 *     attn_lua_push_buffer(L, buf, 2, (int64_t[]){2, 3}, NULL, NULL, NULL);
 *     if (attn_lua_dostring(L, "local x = ...; return x:softmax(-1)", "=host", 1, 1))
 *       fprintf(stderr, "%s\n", attn_last_error());        // one error string on the stack
 *     attn_tensor *p = attn_lua_to_tensor(L, -1);            // borrowed from the Lua value
 *     ... read p->shape, p->stride, attn_tensor_data(p) ...
 *     lua_pop(L, 1);
 *     attn_lua_close(L);
 *
 * Conventions (those of attn.h, plus):
 *  - Functions return an attn_status; on failure attn_last_error() (thread-
 *    local, at most 511 bytes) holds the message.  Nothing here raises a
 *    Lua error into the host or aborts: every step that can raise (even
 *    allocating a userdata) runs in protected mode.
 *  - Running code (attn_lua_call, attn_lua_dostring, attn_lua_dofile,
 *    attn_lua_call_global): on success the function and its arguments are
 *    replaced by nresults results (LUA_MULTRET allowed).  On failure they
 *    are replaced by exactly one value, the error message (a string; Lua
 *    errors carry a traceback), and the status tells what happened:
 *      ATTN_ERR_SCRIPT  syntax or run-time error (including tensor
 *                       allocations refused by the memory limit, whose
 *                       message says "memory limit")
 *      ATTN_ERR_NOMEM   Lua ran out of memory (its allocator was refused)
 *      ATTN_ERR_LIMIT   the instruction or time budget ran out
 *      ATTN_ERR_IO      attn_lua_dofile could not read the file
 *    Misuse (no function below the arguments, no room on the C stack) is
 *    ATTN_ERR_ARG and leaves the stack alone.
 *  - Tensors on the Lua side hold their own reference: handing a tensor to
 *    Lua never transfers the caller's reference, and a tensor taken from
 *    Lua is either borrowed (attn_lua_to_tensor) or retained for the
 *    caller (attn_lua_get_tensor).  Data is never copied unless a Lua
 *    number or table has to be converted.
 *
 * Threads: a lua_State and everything reachable from it must be used by one
 * thread at a time; independent states run concurrently in separate
 * threads (no global state here; attn's core is thread-safe for distinct
 * tensors).  Process-wide: attn's default random generator of states
 * without the sandbox (attn.manual_seed seeds it for every such state, as
 * torch's does for a process; pass an attn.Generator for independent
 * streams; a sandbox has its own, see below), the kernel family
 * (attn.set_isa), the thread count of attn's pool (OpenBLAS runs on one
 * thread), the live object counters of attn.debug_counts(), and attn.dist
 * (MPI and its timeout).  Grad mode belongs to each state.
 */
#ifndef ATTN_LUA_H
#define ATTN_LUA_H

#include <lua.h>

#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* States                                                                    */

/*
 * Options of attn_lua_newstate (zero them with attn_lua_opts_init).
 *
 * sandbox: for untrusted scripts.  The state gets the base library without
 * dofile/loadfile (and with a load that only accepts text chunks),
 * coroutine, table, string, math, utf8, an os table holding only clock,
 * time and difftime, and a package library whose require only serves
 * package.preload (attn and its submodules): no io, no debug, no
 * package.loadlib, searchpath or path/cpath searchers, so no C module and
 * no file can be loaded.  attn's own file and process functions (attn.save,
 * attn.load, attn.safetensors_info, plotting) raise "not available in a
 * sandbox", and so does everything that would set or observe what the
 * whole process shares, saying why: attn.set_isa ("it changes the kernel
 * family of the whole process"), attn.set_num_threads, attn.debug_counts.
 * What a script needs is made the state's own instead, so a sandboxed
 * script can neither change nor observe another state's settings:
 *  - the default random generator: a sandbox has its own, seeded like a
 *    fresh process (torch's default seed 67280421310721), which
 *    attn.manual_seed, seed, initial_seed, get_rng_state, set_rng_state
 *    and every sampler without an explicit attn.Generator use (torch's
 *    semantics within the state; the trusted states' stream is untouched);
 *  - grad mode (attn.set_grad_enabled, no_grad, enable_grad): per state,
 *    kept across the state's calls, the thread's restored after each;
 *  - attn.dist: a 1-rank world without MPI (rank 0 of 1, collectives the
 *    identity with the usual argument checks, send/recv without a peer,
 *    ring attention the fused SDPA, DistributedDataParallel a thin
 *    wrapper, backend() "none (sandbox)"); nothing starts or touches MPI,
 *    and dist.set_timeout sets the state's own value.
 * spec/c/test_host_isolation.c lists every such function and fails on a
 * new one that looks process-wide until it is refused or made per state.
 * The metatables of attn's userdata are
 * protected (getmetatable gives a stand-in table holding only __name), so
 * their finalizers and methods stay in place; so is the string metatable
 * (getmetatable("") gives a stand-in holding __index = string).  Scripts
 * may still print to the host's stdout.
 *
 * memory_limit: bytes that the state's Lua objects and everything attn
 * allocates on its behalf may take together (0: no limit): tensor storage
 * and headers, autograd graph nodes, generators, kernel scratch made in
 * the calling thread (packed matmul operands, sampling tables, reduction
 * buffers) and the parse buffers of file loaders, each charged before it
 * is made.  Lua allocations beyond it fail with Lua's "not enough memory";
 * an attn allocation beyond it fails with a Lua error "not enough memory:
 * <function> needs N MB [for <shape>], cap M MB (K MB in use)", before
 * anything is allocated, and the state stays usable.  attn memory is
 * counted while the state runs through this API (attn_lua_call and the
 * functions built on it; code run with a bare lua_pcall is not counted)
 * and until it is freed, whichever thread frees it.  Host buffers handed
 * in with attn_lua_push_buffer are never counted; tensors pushed with
 * attn_lua_push_tensor were counted (or not) where they were made.
 * Kernel scratch made on the thread pool's workers (per-thread tiles of a
 * few KB each) is not counted.
 *
 * instruction_limit, time_limit: a budget of Lua VM instructions and of
 * wall-clock seconds for each outermost attn_lua_call (nested calls share
 * it); 0 means no limit.  The budget is checked every 1000 instructions
 * (fewer if instruction_limit is smaller); once spent, every further check
 * raises again, so a script cannot catch the error with pcall and go on,
 * and the call returns ATTN_ERR_LIMIT.  The time budget also reaches into
 * long C calls: while the state runs it is the thread's deadline
 * (attn_deadline_set_current in attn.h), which attn's kernels poll
 * between blocks of work (a kernel that stops raises "fn: time limit
 * reached"; the call still returns ATTN_ERR_LIMIT and the state is
 * exhausted as if the hook had fired).  In a sandbox, string.rep, find,
 * match, gmatch, gsub and table.concat, insert, move, remove and sort are
 * replaced by versions that poll the budget every few thousand steps
 * (counting them as instructions), with stock Lua's results and messages
 * (table.sort is a heap sort: the order of elements the order function
 * calls equal may differ), and load hands a long chunk (a string, or a
 * reader function's long pieces) to the parser in 64 KiB pieces, polling
 * the budget between them.  The next
 * call starts with a fresh budget.
 * Measured stops: see docs/reliability.md.  Lua's own parser, the
 * garbage collector and OpenBLAS inside one block are not polled.
 *
 * Lua runs finalizers (__gc) with hooks off, beyond the reach of any
 * limit, so a sandbox's setmetatable refuses metatables with a __gc field
 * (attn's own userdata have C finalizers that always end).  For the same
 * reason a sandbox skips a script's xpcall message handler once the budget
 * is spent.  The limits bind untrusted scripts only together with the
 * sandbox: without it a script could remove the hook (debug.sethook) or
 * run in a finalizer.
 */
typedef struct attn_lua_opts {
  bool sandbox;
  int64_t memory_limit;       /* bytes; 0 = none */
  uint64_t instruction_limit; /* per outermost call; 0 = none */
  double time_limit;          /* seconds per outermost call; 0 = none */
} attn_lua_opts;

/* No sandbox, no limits. */
void attn_lua_opts_init(attn_lua_opts *opts);

/* A new state: the standard libraries (or the sandbox's set) and attn in
   package.preload, so that `require "attn"` works and nothing is global.
   opts may be NULL.  Close it with attn_lua_close. */
attn_status attn_lua_newstate(const attn_lua_opts *opts, lua_State **out);

/* Closes a state made by attn_lua_newstate (or any other state: then it is
   lua_close).  Tensors the host still holds stay valid. */
void attn_lua_close(lua_State *L);

/* Adds attn to a state the host made: package.preload gets "attn.core"
   (the C module built into this library) and the Lua modules "attn",
   "attn.nn", ... (built in as well), so nothing is read from disk.  Call
   it before or after luaL_openlibs; nothing is made global and nothing is
   loaded until required. */
attn_status attn_lua_preload(lua_State *L);

/* Runs require "attn" and pushes the module table (on failure: the error
   message, as for attn_lua_call). */
attn_status attn_lua_require(lua_State *L);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */

/* Pushes t as a Lua tensor.  The Lua value takes a reference of its own
   (t is retained); the caller keeps and must still release its own.  Both
   sides see the same data: a write from Lua is visible in C and back.
   On failure nothing is pushed. */
attn_status attn_lua_push_tensor(lua_State *L, attn_tensor *t);

/* Wraps the host's buffer (attn_wrap: strides in floats, NULL for
   row-major) and pushes it as a Lua tensor, without copying.
   release == NULL: the host keeps ownership; the buffer must stay valid
   as long as any tensor or view made from it lives (in Lua: until the
   values are collected, e.g. after lua_gc(L, LUA_GCCOLLECT), or the state
   is closed).  release != NULL: ownership passes to attn, which calls
   release(ctx, data) once the last view is gone (at the latest when the
   state is closed, if Lua kept none elsewhere).  On failure nothing is
   pushed, release is not called and the host still owns the buffer. */
attn_status attn_lua_push_buffer(lua_State *L, float *data, int ndim, const int64_t *shape, const int64_t *strides,
                                 attn_release_fn release, void *ctx);

/* Borrows the tensor in the Lua value at idx: NULL if the value is not a
   tensor (or was closed).  Nothing is retained: the pointer is valid while
   the value stays reachable in L (on the stack, in a table) and is not
   closed (by a <close> variable going out of scope); call attn_tensor_retain to
   keep it longer.  Never raises. */
attn_tensor *attn_lua_to_tensor(lua_State *L, int idx);

/* *out gets a new reference (release it with attn_tensor_release) to the
   tensor at idx; a number becomes a 0-d tensor and a nested table of
   numbers a fresh tensor (the only cases that copy).  It stays valid
   after the Lua value is gone and after the state is closed.  Anything
   else is ATTN_ERR_ARG. */
attn_status attn_lua_get_tensor(lua_State *L, int idx, attn_tensor **out);

/* ------------------------------------------------------------------------ */
/* Running code                                                              */

/* lua_pcall with a traceback and the state's limits (see above): calls the
   function below the nargs values on top of the stack. */
attn_status attn_lua_call(lua_State *L, int nargs, int nresults);

/* Calls the global function name (looked up in protected mode) with the
   nargs values on top of the stack. */
attn_status attn_lua_call_global(lua_State *L, const char *name, int nargs, int nresults);

/* Loads code (text only) as chunk chunkname ("=name" or "@file" as in
   lua_load; NULL: the code itself) and calls it with the nargs values on
   top of the stack as `...`. */
attn_status attn_lua_dostring(lua_State *L, const char *code, const char *chunkname, int nargs, int nresults);

/* The same for a file chosen by the host (text only; not subject to the
   sandbox, which restricts what scripts can load). */
attn_status attn_lua_dofile(lua_State *L, const char *path, int nargs, int nresults);

/* The memory counted against the state's memory_limit (0 when it has
   none); limit may be NULL. */
int64_t attn_lua_memory_used(lua_State *L, int64_t *limit);

#ifdef __cplusplus
}
#endif
#endif
