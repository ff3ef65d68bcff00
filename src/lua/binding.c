/* SPDX-License-Identifier: MIT */
/* The binding's toolkit: tensor userdata, call scopes and pins, argument
 * conversion, registration helpers.  The module itself is put together by
 * module.c, which calls each file's opener (openers.h). */
#include "binding.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Userdata                                                                  */

/* The tensor metatable is also kept in the registry under this address
   (a light-userdata key: no string interning as with luaL_getmetatable),
   and carries the same address at [1]: a userdata is a tensor when its
   metatable's [1] is that light userdata, which Lua code cannot forge.
   This check is as strict as luaL_testudata's and skips the registry. */
static const char tensor_mt_key = 0;

static void push_tensor_mt(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    luaL_getmetatable(L, ATTN_TENSOR_MT);
  }
}

/* ------------------------------------------------------------------------ */
/* The state's context: call scopes, pins, grad mode, GC accounting          */

/* A scope is one running binding function, known by the address of its
   C frame.  The C stack grows down and a running function is always the
   deepest live frame, so a recorded scope whose frame lies below the
   current one has been unwound (by a Lua error longjmp-ing past it) and is
   dropped with its pins; live callers always lie above.  This makes the
   bookkeeping exact without a protected call or a to-be-closed slot per
   call. */
typedef struct {
  uintptr_t frame;
  int mark; /* pins[mark..] belong to this scope */
} call_scope;

/* tensor bytes between full collections at least (attnL_gc_debt) */
#define GC_FLOOR ((int64_t)16 << 20)
/* young_collect: tensor bytes between steps; the most a step may take
   before it counts as slow; the slow steps in a row that switch the steps
   off; the tensor bytes after which they are tried again */
#define YOUNG_STEP ((int64_t)2 << 20)
#define YOUNG_STEP_MAX_S 50e-6
#define YOUNG_SLOW_OFF 3
#define YOUNG_RETRY ((int64_t)64 << 20)

struct attnL_state {
  call_scope *scopes;
  int nscope, capscope;
  attn_tensor **pins;
  int npin, cappin;
  attn_generator **dead_gens; /* closed while a call may be using them */
  int ndead, capdead;
  bool grad_enabled;
  int64_t since_collect;      /* bytes of new tensors since the last full collection */
  int64_t collect_at;         /* since_collect that triggers the next one */
  int64_t used_after_collect; /* the budget's use after the last full collection */
  int64_t since_step;         /* bytes of new tensors since the last young collection */
  int slow_steps;             /* steps in a row that took longer than a young collection does */
};

typedef struct {
  attn_tensor *t; /* first: a box is also an attn_tensor ** */
  bool accounted;
} tensor_box;

typedef struct {
  attnL_state *S;
  lua_CFunction fn;
  const char *method; /* a method's name (t:name()), NULL for a function */
  const char *recv;   /* how the dot-call message names the receiver: "x", "g" */
  int nreq;           /* declared by core._declare: a trailing options table after nreq arguments is expanded */
} bound_fn;

static const char state_key = 0;

static void *state_realloc(lua_State *L, void *p, size_t osize, size_t nsize) {
  void *ud;
  lua_Alloc f = lua_getallocf(L, &ud);
  return f(ud, p, p ? osize : 0, nsize);
}

static void unpin_to(attnL_state *S, int mark) {
  while (S->npin > mark) attn_tensor_release(S->pins[--S->npin]);
}

/* Once no call of the state runs, what waited for the calls goes. */
static void drain_if_idle(attnL_state *S) {
  if (S->nscope == 0)
    while (S->ndead > 0) attn_generator_free(S->dead_gens[--S->ndead]);
}

/* Drops the scopes lying at or below frame (strictly below when
   inclusive is 0): they belong to calls that no longer run. */
static void drop_dead(attnL_state *S, uintptr_t frame, int inclusive) {
  while (S->nscope > 0) {
    call_scope *top = &S->scopes[S->nscope - 1];
    if (top->frame > frame || (!inclusive && top->frame == frame)) break;
    unpin_to(S, top->mark);
    S->nscope--;
  }
  drain_if_idle(S);
}

static int state_gc(lua_State *L) {
  attnL_state *S = lua_touserdata(L, 1);
  if (!S) return 0;
  unpin_to(S, 0);
  S->nscope = 0;
  while (S->ndead > 0) attn_generator_free(S->dead_gens[--S->ndead]);
  S->dead_gens = state_realloc(L, S->dead_gens, sizeof *S->dead_gens * (size_t)S->capdead, 0);
  S->capdead = 0;
  S->pins = state_realloc(L, S->pins, sizeof *S->pins * (size_t)S->cappin, 0);
  S->scopes = state_realloc(L, S->scopes, sizeof *S->scopes * (size_t)S->capscope, 0);
  S->cappin = S->capscope = 0;
  return 0;
}

attnL_state *attnL_state_of(lua_State *L) {
  attnL_state *S = NULL;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key) == LUA_TUSERDATA) S = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return S;
}

/* The state's context, made on first use (luaopen_attn_core). */
static attnL_state *state_get(lua_State *L) {
  attnL_state *S = attnL_state_of(L);
  if (S) return S;
  S = lua_newuserdatauv(L, sizeof *S, 0);
  memset(S, 0, sizeof *S);
  S->grad_enabled = true;
  S->collect_at = GC_FLOOR;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, state_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &state_key);
  return S;
}

/* Under a memory budget, garbage tensors must not be what fills it: when
   use is within 1/8 of the cap and has grown by 1/16 of it since the last
   full collection, collect first.  The growth condition keeps a live set
   that really is near the cap from paying a collection per call. */
static void collect_near_cap(lua_State *L, attnL_state *S) {
  attn_budget *b = attn_budget_current();
  if (!b) return;
  int64_t used = attn_budget_used(b), limit = attn_budget_limit(b);
  if (used < limit - limit / 8 || used < S->used_after_collect + limit / 16) return;
  lua_gc(L, LUA_GCCOLLECT);
  S->used_after_collect = attn_budget_used(b);
}

/* The check runs when the next binding call starts, not when a result is
   made: by then the script has rebound its variables (`c = a:matmul(b)`
   drops the previous c only after the call returns), so the collection
   frees the tensors just dropped.  Under a memory cap the pause also
   shrinks to half the room left, so garbage never crowds out the next
   allocation. */
static int64_t live_bytes(lua_State *L);

/* Between full collections, every YOUNG_STEP bytes of new tensors, a
   basic step of Lua's collector.  In generational mode (the attn CLI's) a
   step is a young collection: it frees the tensors that died since the
   last one, typically the temporaries of the last few calls (a statement's
   result nothing kept, a graph's buffers after backward), for about a
   microsecond (traversing only the young objects and the old ones they
   touched), and their memory is reused while still in cache: relu forward
   and backward on [720, 512] went from 0.16-0.18 to 0.10 ms, LayerNorm's
   from 0.30-0.40 to 0.25 ms (1, 2, 4 and 8 MB between steps measured
   alike; the char GPT step a few percent faster).  In incremental
   mode a basic step is a slice of the whole cycle (0.2 ms with a 3 MB Lua
   heap), which frees nothing sooner: three steps in a row that take longer
   than a young collection would (50 us) switch the steps off until the next
   full collection or 64 MB of new tensors, whichever comes first; then one
   step tries again.  (The first two young collections after the libraries
   load are that slow too: they age the modules' objects.)
   Python frees such temporaries by reference counting; Lua needs the
   collector for any value a script can still name. */
static void young_collect(lua_State *L, attnL_state *S) {
  if (S->since_step < YOUNG_STEP) return;
  if (S->slow_steps >= YOUNG_SLOW_OFF) { /* off: try again after YOUNG_RETRY bytes */
    if (S->since_step < YOUNG_RETRY) return;
    S->slow_steps = YOUNG_SLOW_OFF - 1; /* one more slow step switches them off again */
  }
  S->since_step = 0;
  const double t0 = attn_clock_now();
  if (lua_gc(L, LUA_GCSTEP, 0) < 0) return; /* inside a finalizer */
  S->slow_steps = attn_clock_now() - t0 > YOUNG_STEP_MAX_S ? S->slow_steps + 1 : 0;
}

static void pace_collect(lua_State *L, attnL_state *S) {
  if (S->since_collect < S->collect_at) {
    young_collect(L, S);
    return;
  }
  if (lua_gc(L, LUA_GCCOLLECT) < 0) return;
  S->since_collect = S->since_step = 0;
  S->slow_steps = 0;
  int64_t live = live_bytes(L), at = live > GC_FLOOR ? live : GC_FLOOR;
  attn_budget *b = attn_budget_current();
  if (b) {
    int64_t room = (attn_budget_limit(b) - attn_budget_used(b)) / 2;
    if (at > room) at = room;
    if (at < ((int64_t)1 << 20)) at = (int64_t)1 << 20;
    S->used_after_collect = attn_budget_used(b);
  }
  S->collect_at = at;
}

void attnL_enter(lua_State *L, attnL_state *S, uintptr_t frame, attnL_saved *saved) {
  pace_collect(L, S);
  collect_near_cap(L, S);
  drop_dead(S, frame, 1);
  if (S->nscope == S->capscope) {
    int cap = S->capscope ? 2 * S->capscope : 32;
    call_scope *p = state_realloc(L, S->scopes, sizeof *p * (size_t)S->capscope, sizeof *p * (size_t)cap);
    if (!p) luaL_error(L, "not enough memory");
    S->scopes = p;
    S->capscope = cap;
  }
  S->scopes[S->nscope++] = (call_scope){frame, S->npin};
  saved->grad_enabled = attn_set_grad_enabled(S->grad_enabled); /* grad mode is the state's, not the thread's */
}

void attnL_leave(lua_State *L, attnL_state *S, uintptr_t frame, const attnL_saved *saved) {
  (void)L;
  drop_dead(S, frame, 0);
  if (S->nscope > 0 && S->scopes[S->nscope - 1].frame == frame) {
    unpin_to(S, S->scopes[S->nscope - 1].mark);
    S->nscope--;
  }
  drain_if_idle(S);
  attn_set_grad_enabled(saved->grad_enabled);
}

static int dot_call_error(lua_State *L, const bound_fn *b);
static void expand_options(lua_State *L, const bound_fn *b);

/* Every function of the binding runs through here (see attnL_pushfn). */
static int call_bound(lua_State *L) {
  const bound_fn *b = lua_touserdata(L, lua_upvalueindex(1));
  /* a method called with '.' (x.sum() for x:sum(), x.view(2, 3)): no self.
     Only the type is checked here (a full tensor check cost 38 ns per call,
     this one a few): another userdata as self fails in the function's own
     argument check. */
  if (b->method && lua_type(L, 1) != LUA_TUSERDATA) return dot_call_error(L, b);
  /* torch's keywords in a trailing options table (attn/signature.lua) */
  if (b->nreq && lua_type(L, -1) == LUA_TTABLE && lua_gettop(L) > b->nreq) expand_options(L, b);
  uintptr_t frame = ATTNL_FRAME();
  attnL_saved saved;
  attnL_enter(L, b->S, frame, &saved);
  int n = b->fn(L);
  attnL_leave(L, b->S, frame, &saved);
  return n;
}

/* plain: the function form of a method (attn.sum for x.sum), kept as the
   method's second upvalue for attnL_unwrap_method; 0: none. */
static void push_bound(lua_State *L, lua_CFunction fn, const char *method, const char *recv, int plain) {
  attnL_state *S = state_get(L);
  if (plain) plain = lua_absindex(L, plain);
  bound_fn *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->S = S;
  b->fn = fn;
  b->method = method;
  b->recv = recv;
  b->nreq = 0;
  if (plain) lua_pushvalue(L, plain);
  lua_pushcclosure(L, call_bound, plain ? 2 : 1);
}

static const char EXPANDERS_KEY[] = "attn.expanders";

/* The trailing table at the top as torch's keyword arguments: the
   declared expander (a Lua function of attn/signature.lua) gets the
   arguments and returns them positional.  It runs before the call scope
   opens, so no borrowed pointer is held.  A table with a metatable or
   whose first key is not a string (a list: sizes, dims, tensors) is an
   argument, not options. */
static void expand_options(lua_State *L, const bound_fn *b) {
  if (lua_getmetatable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushnil(L);
  if (!lua_next(L, -2)) return; /* {}: an empty list */
  bool named = lua_type(L, -2) == LUA_TSTRING;
  lua_pop(L, 2);
  if (!named) return;
  int n = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, EXPANDERS_KEY);
  lua_rawgetp(L, -1, b);
  lua_remove(L, -2);
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
}

/* core._declare(f, nreq, expander): f (a binding function) expands a
   trailing options table after nreq arguments with expander(...). */
int attnL_declare(lua_State *L) {
  luaL_checktype(L, 3, LUA_TFUNCTION);
  lua_Integer nreq = luaL_checkinteger(L, 2);
  if (lua_tocfunction(L, 1) != call_bound || nreq < 0 || nreq > 16 || !lua_getupvalue(L, 1, 1))
    return luaL_error(L, "_declare: not a binding function or a bad count");
  bound_fn *b = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, LUA_REGISTRYINDEX, EXPANDERS_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, EXPANDERS_KEY);
  }
  lua_pushvalue(L, 3);
  lua_rawsetp(L, -2, b);
  b->nreq = (int)nreq;
  return 0;
}

int attnL_unwrap_method(lua_State *L) {
  lua_settop(L, 1);
  if (lua_tocfunction(L, 1) == call_bound && lua_getupvalue(L, 1, 2)) return 1;
  lua_settop(L, 1);
  return 1;
}

/* The running binding function's record (NULL when the running function
   is not one), with what (lua_getinfo's options besides "f") filled into
   *ar. */
static const bound_fn *running_bound(lua_State *L, const char *what, lua_Debug *ar) {
  if (!lua_getstack(L, 0, ar) || !lua_getinfo(L, what, ar)) return NULL;
  const bound_fn *b = NULL;
  if (lua_tocfunction(L, -1) == call_bound && lua_getupvalue(L, -1, 1)) {
    b = lua_touserdata(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return b;
}

/* The name of the running binding function when it is a method, else
   NULL (for messages raised where no name is passed). */
static const char *running_method(lua_State *L) {
  lua_Debug ar;
  const bound_fn *b = running_bound(L, "f", &ar);
  return b ? b->method : NULL;
}

void attnL_pushfn(lua_State *L, lua_CFunction fn) { push_bound(L, fn, NULL, NULL, 0); }

/* The method form of a function whose self is missing: x.matmul(y) for
   x:matmul(y) passes y as self and nothing after it, x.sum() nothing at
   all.  Called before the call scope opens: raises at the caller's line. */
static int dot_call_error(lua_State *L, const bound_fn *b) {
  return attnL_raise(L, "%s: call it as %s:%s(...) (with ':'); %s.%s(...) with '.' passes no %s", b->method, b->recv,
                     b->method, b->recv, b->method, b->recv);
}

/* The running binding function when it is a method called with '.' (or
   through a local), for a message about a missing argument: NULL
   otherwise.  Only on the error path (lua_getinfo's "n" decodes the
   caller's code). */
static const bound_fn *dot_called_method(lua_State *L) {
  lua_Debug ar;
  const bound_fn *b = running_bound(L, "nf", &ar);
  if (!b || !b->method || (ar.namewhat && strcmp(ar.namewhat, "method") == 0)) return NULL;
  return b;
}

/* Keeps t alive until the running binding function returns or raises,
   whatever Lua code runs meanwhile (a __close, a finalizer).  Outside a
   binding function (no live scope) there is nothing to pin for. */
static __attribute__((noinline)) void pin(lua_State *L, attn_tensor *t) {
  attnL_state *S = attnL_state_of(L);
  if (!S) return;
  drop_dead(S, ATTNL_FRAME(), 0);
  if (S->nscope == 0) return;
  if (S->npin == S->cappin) {
    int cap = S->cappin ? 2 * S->cappin : 64;
    attn_tensor **p = state_realloc(L, S->pins, sizeof *p * (size_t)S->cappin, sizeof *p * (size_t)cap);
    if (!p) luaL_error(L, "not enough memory");
    S->pins = p;
    S->cappin = cap;
  }
  S->pins[S->npin++] = attn_tensor_retain(t);
}

/* Generators are not refcounted: one closed (an explicit __gc call) while
   a binding function may hold it waits until no call of the state runs. */
void attnL_free_generator(lua_State *L, attn_generator *g) {
  attnL_state *S = attnL_state_of(L);
  if (!g) return;
  if (S) drop_dead(S, ATTNL_FRAME(), 0);
  if (!S || S->nscope == 0) {
    attn_generator_free(g);
    return;
  }
  if (S->ndead == S->capdead) {
    int cap = S->capdead ? 2 * S->capdead : 8;
    attn_generator **p = state_realloc(L, S->dead_gens, sizeof *p * (size_t)S->capdead, sizeof *p * (size_t)cap);
    if (!p) { /* cannot wait: leak it rather than free it under a call */
      return;
    }
    S->dead_gens = p;
    S->capdead = cap;
  }
  S->dead_gens[S->ndead++] = g;
}

void attnL_set_grad_enabled(lua_State *L, bool enabled) {
  attnL_state *S = attnL_state_of(L);
  if (S) S->grad_enabled = enabled;
  attn_set_grad_enabled(enabled);
}

bool attnL_grad_enabled(lua_State *L) {
  attnL_state *S = attnL_state_of(L);
  return S ? S->grad_enabled : attn_grad_enabled();
}

/* ------------------------------------------------------------------------ */
/* Userdata                                                                  */

void attnL_to_one_based(attn_tensor *t) {
  int64_t n = attn_tensor_numel(t);
  if (t->dtype == ATTN_INT64) {
    int64_t *p = attn_tensor_i64(t);
    for (int64_t i = 0; i < n; i++) p[i] += 1;
    return;
  }
  float *p = attn_tensor_data(t);
  for (int64_t i = 0; i < n; i++) p[i] += 1.0f;
}

attn_tensor **attnL_newbox(lua_State *L) {
  tensor_box *box = lua_newuserdatauv(L, sizeof *box, 1);
  box->t = NULL; /* safe before anything can fail */
  box->accounted = false;
  push_tensor_mt(L);
  lua_setmetatable(L, -2);
  return &box->t;
}

/* The box at idx if it is a tensor userdata (open or closed), else NULL. */
static attn_tensor **test_box(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return NULL;
  lua_rawgeti(L, -1, 1);
  int same = lua_touserdata(L, -1) == &tensor_mt_key && lua_type(L, -1) == LUA_TLIGHTUSERDATA;
  lua_pop(L, 2);
  return same ? lua_touserdata(L, idx) : NULL;
}

attn_tensor **attnL_checkbox(lua_State *L, int idx) {
  attn_tensor **box = test_box(L, idx);
  return box ? box : luaL_checkudata(L, idx, ATTN_TENSOR_MT); /* raises with the usual message */
}

/* Lua's collector cannot see tensor memory: each new box adds the true
   size of what it holds (its header, and the storage the first time any
   box sees it) as GC debt, "as if allocated", so the collector keeps pace
   with tensors of any size, down to loops of 16-float temporaries.  Debt
   only moves the next step closer; it never enters Lua's estimate of the
   heap, so nothing is taken back when a tensor dies (that would cancel
   the very pressure that collected it). */
void attnL_account(lua_State *L, attn_tensor **b) {
  tensor_box *box = (tensor_box *)b;
  attn_tensor *t = box->t;
  if (!t || box->accounted) return;
  box->accounted = true;
  attnL_state *S = attnL_state_of(L);
  if (!S) return;
  int64_t bytes = (int64_t)sizeof(attn_tensor) + 16;
  attn_storage *s = t->storage;
  if (!s->gc_reported && !s->release_ctx) { /* host buffers are the host's */
    s->gc_reported = 1;
    bytes += (int64_t)sizeof(attn_storage) + 64 + s->numel * (int64_t)attn_dtype_size(s->dtype);
  }
  attnL_gc_debt(L, S, bytes);
}

/* Pacing the collector for tensors.  Lua's collector paces itself by the
   Lua heap, in which a tensor is a 16-byte box: left alone it lets
   hundreds of MB of dead tensors pile up between cycles (a small GPT's
   training loop peaked 230 MB over its live set).  Telling it the debt
   (LUA_GCSTEP) speeds its steps but not the end of its cycle, so the binding
   paces tensors itself: once the bytes of tensors made since the last full
   collection reach what was live after it (tensor storage plus the Lua
   heap; at least GC_FLOOR), it runs a full collection.  Dead tensors then
   never exceed about the live set (a pause of 100%, where Lua's own is
   200%), and the work stays proportional to what was allocated: each
   collection traverses the live heap once per heap-sized allocation.  Lua
   objects keep Lua's own incremental collector with its default settings,
   which suit them.  Inside a finalizer lua_gc refuses (-1): the next call
   collects.  The check is pace_collect, at the start of each call. */
static int64_t live_bytes(lua_State *L) {
  attn_budget *b = attn_budget_current();
  if (b) return attn_budget_used(b); /* a capped state: its tensors and Lua objects */
  attn_debug_counts c;
  attn_debug_counts_get(&c); /* the process's tensors */
  return c.storage_bytes + (int64_t)lua_gc(L, LUA_GCCOUNT) * 1024;
}

void attnL_gc_debt(lua_State *L, attnL_state *S, int64_t bytes) {
  if (!S && !(S = attnL_state_of(L))) return;
  S->since_collect += bytes;
  S->since_step += bytes;
}

void attnL_push(lua_State *L, attn_tensor *t) {
  attn_tensor **box = attnL_newbox(L);
  *box = t;
  attnL_account(L, box);
}

/* Is this frame's chunk a module of the attn package?  Its source ends in
   "attn/NAME.lua" or, for the package's folders (lua/attn/nn, lua/attn/app),
   "attn/DIR/NAME.lua" (stock lua5.4: "@/usr/share/lua/5.4/attn/nn.lua"; the
   attn binary's embedded package: "@attn/app/bert.lua"). */
static bool package_frame(const lua_Debug *ar) {
  const char *src = ar->source;
  size_t n = strlen(src);
  if (n < 10 || strcmp(src + n - 4, ".lua") != 0) return false;
  const char *p = src + n - 4;
  for (int depth = 0; depth < 2; depth++) { /* NAME, then at most one DIR */
    while (p > src && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) p--;
    if (p - src >= 5 && strncmp(p - 5, "attn/", 5) == 0 && (p - 5 == src + 1 || (p - 5 > src && p[-6] == '/')))
      return true;
    if (p - src < 2 || p[-1] != '/') return false;
    p--;
  }
  return false;
}

void attnL_where(lua_State *L) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sl", &ar)) break;
    if (ar.currentline <= 0 || package_frame(&ar)) continue; /* C, or attn's own Lua */
    lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
    return;
  }
  luaL_where(L, 1);
}

int attnL_raise(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  attnL_where(L);
  const char *msg = lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  const bound_fn *b;
  if (strstr(msg, "got no value") && (b = dot_called_method(L)) != NULL) /* x.matmul(y): y became self */
    lua_pushfstring(L,
                    " (if you wrote %s.%s(...), call it as %s:%s(...) with ':'; with '.' the first argument is "
                    "taken as %s)",
                    b->recv, b->method, b->recv, b->method, b->recv);
  else
    lua_pushliteral(L, "");
  lua_concat(L, 3);
  return lua_error(L);
}

int attnL_error(lua_State *L) {
  const char *msg = attn_last_error();
  attn_budget *b = attn_budget_current();
  if (b && strncmp(msg, "not enough memory: ", 19) == 0) {
    /* the budget refused: collect the garbage now so that the state is
       usable at once (the message is copied first: finalizers may call
       attn and replace it) */
    lua_pushstring(L, msg);
    lua_gc(L, LUA_GCCOLLECT);
    attnL_state *S = attnL_state_of(L);
    if (S) S->used_after_collect = 0; /* what this call held is garbage only after the error: collect again */
    attnL_where(L);
    lua_insert(L, -2);
    lua_concat(L, 2);
    return lua_error(L);
  }
  return attnL_raise(L, "%s", msg);
}

int attnL_result(lua_State *L, attn_status st) {
  if (st) return attnL_error(L);
  attnL_account(L, lua_touserdata(L, -1));
  return 1;
}

attn_tensor *attnL_test(lua_State *L, int idx) {
  attn_tensor **box = test_box(L, idx);
  if (!box || !*box) return NULL;
  pin(L, *box);
  return *box;
}

attn_tensor *attnL_check(lua_State *L, int idx) {
  attn_tensor **box = attnL_checkbox(L, idx);
  if (!*box) {
    const char *m = running_method(L); /* a method closure is in no loaded table: luaL_argerror finds no name */
    if (m) attnL_raise(L, "bad argument #%d to '%s' (tensor is closed)", idx, m);
    luaL_argerror(L, idx, "tensor is closed");
  }
  pin(L, *box);
  return *box;
}

/* ------------------------------------------------------------------------ */
/* Nested tables -> tensors                                                  */

typedef struct {
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
} table_shape;

static void table_shape_of(lua_State *L, int idx, table_shape *ts, const char *fn, const char *arg) {
  ts->ndim = 0;
  lua_pushvalue(L, idx);
  for (;;) {
    if (lua_type(L, -1) != LUA_TTABLE) break;
    if (ts->ndim == ATTN_MAX_DIMS)
      attnL_raise(L, "%s: argument '%s' nests deeper than %d dims", fn, arg, ATTN_MAX_DIMS);
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    ts->shape[ts->ndim++] = n;
    if (n == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

/* Fills data (row-major) from the table at idx, checking it is rectangular. */
static void table_fill(lua_State *L, int idx, const table_shape *ts, int depth, attn_dtype dt, char **data,
                       const char *fn, const char *arg, int64_t *nbool) {
  luaL_checkstack(L, 2, "nested table");
  int64_t n = ts->shape[depth];
  if ((int64_t)lua_rawlen(L, idx) != n)
    attnL_raise(L, "%s: argument '%s' is not rectangular: expected %d entries at depth %d, got %d", fn, arg, (int)n,
                depth + 1, (int)lua_rawlen(L, idx));
  for (int64_t i = 1; i <= n; i++) {
    int ty = lua_rawgeti(L, idx, (lua_Integer)i);
    if (depth + 1 < ts->ndim) {
      if (ty != LUA_TTABLE)
        attnL_raise(L, "%s: argument '%s' is not rectangular: entry %d at depth %d is a %s, expected a table", fn, arg,
                    (int)i, depth + 1, luaL_typename(L, -1));
      table_fill(L, lua_gettop(L), ts, depth + 1, dt, data, fn, arg, nbool);
    } else if (ty == LUA_TNUMBER || ty == LUA_TBOOLEAN) {
      if (ty == LUA_TBOOLEAN) (*nbool)++;
      if (dt == ATTN_INT64) {
        int64_t v;
        if (ty == LUA_TBOOLEAN) {
          v = lua_toboolean(L, -1);
        } else if (lua_isinteger(L, -1)) {
          v = (int64_t)lua_tointeger(L, -1);
        } else {
          lua_Number x = lua_tonumber(L, -1);
          if (!(x >= -9.2233720368547758e18 && x < 9.2233720368547758e18))
            attnL_raise(L, "%s: argument '%s': value %f does not fit in int64", fn, arg, x);
          v = (int64_t)x; /* truncates like torch */
        }
        memcpy(*data, &v, sizeof v);
        *data += sizeof v;
      } else if (dt == ATTN_BOOL) {
        bool v = ty == LUA_TBOOLEAN ? lua_toboolean(L, -1) : lua_tonumber(L, -1) != 0;
        memcpy(*data, &v, sizeof v);
        *data += sizeof v;
      } else if (attn_dtype_is_storage(dt)) {
        /* torch: a Python number goes to half/bfloat16 through float */
        double x = ty == LUA_TBOOLEAN ? (lua_toboolean(L, -1) ? 1.0 : 0.0) : (double)lua_tonumber(L, -1);
        if (dt == ATTN_FLOAT64) {
          memcpy(*data, &x, sizeof x);
          *data += sizeof x;
        } else {
          uint16_t v = dt == ATTN_FLOAT16 ? attn_f32_to_f16((float)x) : attn_f32_to_bf16((float)x);
          memcpy(*data, &v, sizeof v);
          *data += sizeof v;
        }
      } else {
        float v = ty == LUA_TBOOLEAN ? (lua_toboolean(L, -1) ? 1.0f : 0.0f) : (float)lua_tonumber(L, -1);
        memcpy(*data, &v, sizeof v);
        *data += sizeof v;
      }
    } else {
      attnL_raise(L, "%s: argument '%s' must hold numbers: entry %d at depth %d is a %s", fn, arg, (int)i, depth + 1,
                  luaL_typename(L, -1));
    }
    lua_pop(L, 1);
  }
}

/* The nesting of a table whose shape holds a 0 (always the last dim: the
   [1] chain stops there): every entry above it must be a table of the
   right length.  Tables shared between entries are checked once per
   depth (seen: table -> depth), so that a few shared tables cannot make
   the check walk a huge empty list that no allocation bounds. */
static void table_check_empty(lua_State *L, int idx, const table_shape *ts, int depth, int seen, const char *fn,
                              const char *arg) {
  luaL_checkstack(L, 3, "nested table");
  lua_pushvalue(L, idx);
  int done = lua_rawget(L, seen) == LUA_TNUMBER && lua_tointeger(L, -1) == depth;
  lua_pop(L, 1);
  if (done) return;
  lua_pushvalue(L, idx);
  lua_pushinteger(L, depth);
  lua_rawset(L, seen);
  int64_t n = ts->shape[depth];
  if ((int64_t)lua_rawlen(L, idx) != n)
    attnL_raise(L, "%s: argument '%s' is not rectangular: expected %d entries at depth %d, got %d", fn, arg, (int)n,
                depth + 1, (int)lua_rawlen(L, idx));
  for (int64_t i = 1; i <= n; i++) {
    if (lua_rawgeti(L, idx, (lua_Integer)i) != LUA_TTABLE)
      attnL_raise(L, "%s: argument '%s' is not rectangular: entry %d at depth %d is a %s, expected a table", fn, arg,
                  (int)i, depth + 1, luaL_typename(L, -1));
    table_check_empty(L, lua_gettop(L), ts, depth + 1, seen, fn, arg);
    lua_pop(L, 1);
  }
}

/* Only plain lists convert: an object (a table with a metatable, such as a
   module) or a table whose keys are not 1..n is a mistake, not a [0]. */
static void check_plain_table(lua_State *L, int idx, const char *fn, const char *arg) {
  if (lua_getmetatable(L, idx)) {
    const char *name = lua_getfield(L, -1, "__name") == LUA_TSTRING ? lua_tostring(L, -1) : "an object";
    /* a shape is a plain list of its sizes: attn.tensor(x.shape), like torch.tensor(x.shape) */
    if (strcmp(name, "attn.Size") != 0)
      attnL_raise(L, "%s: argument '%s' must be a tensor, number or table of numbers (got %s)", fn, arg, name);
    lua_pop(L, 2);
  }
  if (lua_rawlen(L, idx) == 0) {
    lua_pushnil(L);
    if (lua_next(L, idx))
      attnL_raise(L, "%s: argument '%s' must be a list of numbers (a table with keys 1..n), got a table with a %s key",
                  fn, arg, luaL_typename(L, -2));
  }
}

/* What the leaves of a nested table hold (torch.tensor's inference): any
   Lua float makes float32, else any number makes int64, else booleans make
   bool.  Entries that are not where the shape says are left to table_fill,
   which raises; the walk visits at most the numel of the float32 tensor
   allocated before it. */
enum { LEAF_BOOL = 1, LEAF_INT = 2, LEAF_FLOAT = 4 };
static int table_leaf_kinds(lua_State *L, int idx, const table_shape *ts, int depth) {
  luaL_checkstack(L, 2, "nested table");
  int kinds = 0;
  int64_t n = (int64_t)lua_rawlen(L, idx);
  if (n > ts->shape[depth]) n = ts->shape[depth];
  for (int64_t i = 1; i <= n && !(kinds & LEAF_FLOAT); i++) {
    int ty = lua_rawgeti(L, idx, (lua_Integer)i);
    if (depth + 1 < ts->ndim) {
      if (ty == LUA_TTABLE) kinds |= table_leaf_kinds(L, lua_gettop(L), ts, depth + 1);
    } else if (ty == LUA_TBOOLEAN) {
      kinds |= LEAF_BOOL;
    } else if (ty == LUA_TNUMBER) {
      kinds |= lua_isinteger(L, -1) ? LEAF_INT : LEAF_FLOAT;
    }
    lua_pop(L, 1);
  }
  return kinds;
}

/* dt == ATTNL_INFER: torch.tensor's inference; other dt < 0: float32, or
   bool when every entry is a Lua boolean. */
static attn_tensor *table_to_tensor_dt(lua_State *L, int idx, int dt, const char *fn, const char *arg) {
  idx = lua_absindex(L, idx);
  check_plain_table(L, idx, fn, arg);
  table_shape ts;
  table_shape_of(L, idx, &ts, fn, arg);
  attn_tensor **box = attnL_newbox(L);
  if (attn_empty_dtype(dt < 0 ? ATTN_FLOAT32 : (attn_dtype)dt, ts.ndim, ts.shape, box)) attnL_error(L);
  if (dt == ATTNL_INFER && attn_tensor_numel(*box) > 0) {
    int kinds = table_leaf_kinds(L, idx, &ts, 0);
    dt = kinds & LEAF_FLOAT ? ATTN_FLOAT32 : kinds & LEAF_INT ? ATTN_INT64 : kinds ? ATTN_BOOL : ATTN_FLOAT32;
    if (dt != ATTN_FLOAT32) {
      attn_tensor_release(*box);
      *box = NULL;
      if (attn_empty_dtype((attn_dtype)dt, ts.ndim, ts.shape, box)) attnL_error(L);
    }
  }
  char *p = attn_tensor_ptr(*box);
  int64_t nbool = 0, numel = attn_tensor_numel(*box);
  if (numel > 0) {
    table_fill(L, idx, &ts, 0, (*box)->dtype, &p, fn, arg, &nbool);
    if (dt < 0 && nbool == numel) {
      /* a table of Lua booleans is a bool tensor, like torch.tensor([True, False]) */
      attn_tensor *b;
      if (attn_to_dtype(*box, ATTN_BOOL, &b)) attnL_error(L);
      attn_tensor_release(*box);
      *box = b;
    }
  } else { /* no numbers, but {{}, 5} is still not rectangular */
    lua_newtable(L);
    table_check_empty(L, idx, &ts, 0, lua_gettop(L), fn, arg);
    lua_pop(L, 1);
  }
  attnL_account(L, box);
  return *box;
}

static attn_tensor *table_to_tensor(lua_State *L, int idx, const char *fn, const char *arg) {
  return table_to_tensor_dt(L, idx, -1, fn, arg);
}

attn_tensor *attnL_table_to_tensor(lua_State *L, int idx, int dt, const char *fn, const char *arg) {
  return table_to_tensor_dt(L, idx, dt, fn, arg);
}

attn_tensor *attnL_totensor(lua_State *L, int idx, const char *fn, const char *arg) {
  idx = lua_absindex(L, idx);
  attn_tensor *t = attnL_test(L, idx);
  if (t) return t;
  int ty = lua_type(L, idx);
  if (ty == LUA_TNUMBER) {
    attn_tensor **box = attnL_newbox(L);
    if (attn_scalar((float)lua_tonumber(L, idx), box)) attnL_error(L);
    attnL_account(L, box);
    t = *box;
  } else if (ty == LUA_TTABLE) {
    t = table_to_tensor(L, idx, fn, arg);
  } else if (ty == LUA_TUSERDATA && test_box(L, idx)) {
    return attnL_check(L, idx); /* a closed tensor: raises */
  } else {
    attnL_raise(L, "%s: argument '%s' must be a tensor, number or table (got %s)", fn, arg, luaL_typename(L, idx));
    return NULL;
  }
  lua_replace(L, idx);
  pin(L, t); /* debug.getlocal can reach the slot */
  return t;
}

/* ------------------------------------------------------------------------ */
/* Integers, dims, shapes                                                    */

int64_t attnL_checkint(lua_State *L, int arg, const char *fn, const char *name) {
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, arg, &isnum);
  if (!isnum) {
    if (lua_type(L, arg) == LUA_TNUMBER)
      attnL_raise(L, "%s: argument '%s' must be an integer (got %s)", fn, name, lua_tostring(L, arg));
    attnL_raise(L, "%s: argument '%s' must be an integer (got %s)", fn, name, luaL_typename(L, arg));
  }
  return (int64_t)v;
}

int attnL_checkdim(lua_State *L, int arg, int ndim, int extra, const char *fn) {
  int64_t d = attnL_checkint(L, arg, fn, "dim");
  int64_t n = ndim + extra;
  if (n == 0) n = 1; /* a 0-d tensor accepts dim 1 / -1 like torch's 0 / -1 */
  if (d < -n || d > n || d == 0)
    attnL_raise(L, "%s: dim %I out of range for a %d-d tensor (expected 1..%d or -%d..-1)%s", fn, (lua_Integer)d, ndim,
                (int)n, (int)n, ATTNL_DIM_HINT(d));
  return (int)(d < 0 ? d + n : d - 1);
}

int attnL_optdim(lua_State *L, int arg, int ndim, int def, const char *fn) {
  if (lua_isnoneornil(L, arg)) return def;
  return attnL_checkdim(L, arg, ndim, 0, fn);
}

/* a nil size most often comes from a shape index past the last dim */
#define NIL_SIZE_HINT                                                                                                  \
  " (every size must be an integer; a nil often comes from a shape position past the last dim, e.g. x.shape[3] "       \
  "of a 2-d tensor)"

int attnL_checkshape(lua_State *L, int arg, int64_t *shape, int allow_neg1, const char *fn) {
  int ndim = 0;
  if (lua_type(L, arg) == LUA_TTABLE) {
    int n = (int)lua_rawlen(L, arg);
    if (n > ATTN_MAX_DIMS) attnL_raise(L, "%s: %d dims requested, at most %d supported", fn, n, ATTN_MAX_DIMS);
    for (int i = 1; i <= n; i++) {
      lua_rawgeti(L, arg, i);
      int isnum = 0;
      lua_Integer v = lua_tointegerx(L, -1, &isnum);
      if (lua_isnil(L, -1)) attnL_raise(L, "%s: size %d is nil%s", fn, i, NIL_SIZE_HINT);
      if (!isnum) attnL_raise(L, "%s: size %d of the shape must be an integer (got %s)", fn, i, luaL_typename(L, -1));
      lua_pop(L, 1);
      shape[ndim++] = v;
    }
  } else {
    int top = lua_gettop(L);
    /* the shape starts at arg and runs to the first value that is not a
       number (options, a generator, or a mistake the caller reports): a nil
       in it is a size gone missing (x:view(-1, nil) must not be a 1-d view),
       and anything but a number at arg is a mistake (not an empty shape) */
    for (int i = arg; i <= top; i++) {
      int ty = lua_type(L, i);
      if (ty == LUA_TNIL) attnL_raise(L, "%s: size %d is nil%s", fn, i - arg + 1, NIL_SIZE_HINT);
      if (ty != LUA_TNUMBER) {
        if (i == arg)
          attnL_raise(L, "%s: size %d of the shape must be an integer (got %s)", fn, i - arg + 1, luaL_typename(L, i));
        break; /* the caller names what follows the shape */
      }
      if (ndim == ATTN_MAX_DIMS) attnL_raise(L, "%s: at most %d dims supported", fn, ATTN_MAX_DIMS);
      int isnum = 0;
      lua_Integer v = lua_tointegerx(L, i, &isnum);
      if (!isnum)
        attnL_raise(L, "%s: size %d of the shape must be an integer (got %s)", fn, i - arg + 1, lua_tostring(L, i));
      shape[ndim++] = v;
    }
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0 && !(allow_neg1 && shape[i] == -1))
      attnL_raise(L, "%s: invalid size %I at position %d of the shape", fn, (lua_Integer)shape[i], i + 1);
  return ndim;
}

attn_tensor *attnL_checkindex(lua_State *L, int arg, int64_t limit, const char *fn, const char *name) {
  attn_tensor *src = attnL_totensor(L, arg, fn, name);
  if (src->dtype == ATTN_BOOL)
    attnL_raise(L, "%s: argument '%s' must hold integer indices, got a bool tensor", fn, name);
  attn_tensor **box = attnL_newbox(L);
  if (src->dtype == ATTN_INT64) {
    /* exact ids of any size: a contiguous int64 copy, checked and shifted */
    if (attn_empty_dtype(ATTN_INT64, src->ndim, src->shape, box) || attn_copy_(*box, src)) attnL_error(L);
    int64_t *d = attn_tensor_i64(*box);
    int64_t n = attn_tensor_numel(src);
    for (int64_t i = 0; i < n; i++) {
      if (d[i] < 1 || (limit >= 0 && d[i] > limit)) {
        if (limit >= 0)
          attnL_raise(L, "%s: index %I in '%s' out of range (expected 1..%I)%s", fn, (lua_Integer)d[i], name,
                      (lua_Integer)limit, ATTNL_ID_HINT(d[i]));
        attnL_raise(L, "%s: index %I in '%s' out of range (expected 1 or more)%s", fn, (lua_Integer)d[i], name,
                    ATTNL_ID_HINT(d[i]));
      }
      d[i] -= 1;
    }
    attnL_account(L, box);
    pin(L, *box);
    return *box;
  }
  if (attn_empty(src->ndim, src->shape, box)) attnL_error(L);
  /* contiguous copy first, then one linear pass: convert and validate */
  if (attn_copy_(*box, src)) attnL_error(L);
  float *dst = attn_tensor_data(*box);
  int64_t n = attn_tensor_numel(src);
  for (int64_t i = 0; i < n; i++) {
    float v = dst[i];
    if (!(v == floorf(v)))
      attnL_raise(L, "%s: argument '%s' must hold integer indices (found %f)", fn, name, (lua_Number)v);
    if (v < 1 || (limit >= 0 && v > (float)limit)) {
      /* an integer as such; huge values (and inf) as floats, never cast */
      if (fabsf(v) < 1e15f)
        lua_pushinteger(L, (lua_Integer)v);
      else
        lua_pushnumber(L, (lua_Number)v);
      const char *vs = lua_tostring(L, -1);
      if (limit >= 0)
        attnL_raise(L, "%s: index %s in '%s' out of range (expected 1..%I)%s", fn, vs, name, (lua_Integer)limit,
                    ATTNL_ID_HINT(v));
      attnL_raise(L, "%s: index %s in '%s' out of range (expected 1 or more)%s", fn, vs, name, ATTNL_ID_HINT(v));
    }
    dst[i] = v - 1.0f;
  }
  /* the core takes int64 ids */
  attn_tensor *i64;
  if (attn_to_dtype(*box, ATTN_INT64, &i64)) attnL_error(L);
  attn_tensor_release(*box);
  *box = i64;
  attnL_account(L, box);
  pin(L, *box);
  return *box;
}

void attnL_pushelem(lua_State *L, const attn_tensor *t, int64_t pos) {
  switch (t->dtype) {
  case ATTN_INT64: lua_pushinteger(L, (lua_Integer)((const int64_t *)t->storage->data)[pos]); break;
  case ATTN_BOOL: lua_pushboolean(L, ((const bool *)t->storage->data)[pos]); break;
  case ATTN_FLOAT16: lua_pushnumber(L, attn_f16_to_f32(((const uint16_t *)t->storage->data)[pos])); break;
  case ATTN_BFLOAT16: lua_pushnumber(L, attn_bf16_to_f32(((const uint16_t *)t->storage->data)[pos])); break;
  case ATTN_FLOAT64: lua_pushnumber(L, ((const double *)t->storage->data)[pos]); break;
  default: lua_pushnumber(L, ((const float *)t->storage->data)[pos]); break;
  }
}

int attnL_optbool(lua_State *L, int arg, int def) {
  if (lua_isnoneornil(L, arg)) return def;
  luaL_checktype(L, arg, LUA_TBOOLEAN);
  return lua_toboolean(L, arg);
}

int attnL_checktensorlist(lua_State *L, int arg, const attn_tensor ***list, const char *fn) {
  arg = lua_absindex(L, arg);
  luaL_checktype(L, arg, LUA_TTABLE);
  int n = (int)lua_rawlen(L, arg);
  const attn_tensor **arr = lua_newuserdatauv(L, sizeof *arr * (size_t)(n ? n : 1), 0);
  lua_newtable(L); /* keeps converted numbers/tables alive; the caller's table is not touched */
  int holder = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, arg, i);
    attn_tensor **box = test_box(L, -1);
    if (box && !*box) attnL_raise(L, "%s: entry %d of the list is a closed tensor", fn, i);
    attn_tensor *t = attnL_test(L, -1);
    if (!t) {
      t = attnL_totensor(L, -1, fn, "tensors");
      lua_rawseti(L, holder, i);
    } else {
      lua_pop(L, 1);
    }
    arr[i - 1] = t;
  }
  *list = arr;
  return n;
}

/* ------------------------------------------------------------------------ */
/* Options tables                                                            */

/* Edit distance of two short keys, for "did you mean" (0..255 chars). */
static size_t key_distance(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  if (na > 64 || nb > 64) return (size_t)-1;
  size_t prev[65], cur[65];
  for (size_t j = 0; j <= nb; j++) prev[j] = j;
  for (size_t i = 1; i <= na; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
      size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, sizeof cur);
  }
  return prev[nb];
}

int attnL_unknown_option(lua_State *L, const char *fn, int key, const char *const *known) {
  key = lua_absindex(L, key);
  const char *k = lua_type(L, key) == LUA_TSTRING ? lua_tostring(L, key) : NULL;
  const char *best = NULL;
  size_t bd = (size_t)-1;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (const char *const *p = known; *p; p++) {
    if (p != known) luaL_addstring(&b, ", ");
    luaL_addstring(&b, *p);
    size_t d = k ? key_distance(k, *p) : (size_t)-1;
    if (d < bd) bd = d, best = *p;
  }
  luaL_pushresult(&b);
  size_t nk = k ? strlen(k) : 0, lim = nk / 3 > 1 ? nk / 3 : 1;
  const char *near = best && (bd <= lim || strstr(best, k) || strstr(k, best)) ? best : NULL;
  const char *shown = luaL_tolstring(L, key, NULL);
  if (near)
    return attnL_raise(L, "%s: unknown option '%s' (did you mean '%s'?); valid options: %s", fn, shown, near,
                       lua_tostring(L, -2));
  return attnL_raise(L, "%s: unknown option '%s'; valid options: %s", fn, shown, lua_tostring(L, -2));
}

void attnL_checkoptions(lua_State *L, int idx, const char *fn, const char *const *known) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) return;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    bool ok = false;
    if (lua_type(L, -1) == LUA_TSTRING)
      for (const char *const *p = known; *p && !ok; p++) ok = strcmp(*p, lua_tostring(L, -1)) == 0;
    if (!ok) attnL_unknown_option(L, fn, -1, known);
  }
}

bool attnL_is_options(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) return false;
  if (lua_getmetatable(L, idx)) {
    lua_pop(L, 1);
    return false;
  }
  lua_pushnil(L);
  if (!lua_next(L, idx)) return false;
  bool named = lua_type(L, -2) == LUA_TSTRING;
  lua_pop(L, 2);
  return named;
}

int attnL_option_field(lua_State *L, int opts, const char *key) {
  luaL_checkstack(L, 1, "too many options");
  if (opts && lua_type(L, opts) == LUA_TTABLE)
    lua_getfield(L, opts, key);
  else
    lua_pushnil(L);
  return lua_gettop(L);
}

/* nil/none: false; a value of type ty: true; else raises */
static bool opt_present(lua_State *L, int idx, const char *fn, const char *key, int ty, const char *what) {
  if (lua_isnoneornil(L, idx)) return false;
  if (lua_type(L, idx) != ty)
    attnL_raise(L, "%s: option '%s' must be %s (got %s)", fn, key, what, luaL_typename(L, idx));
  return true;
}

bool attnL_option_bool(lua_State *L, int idx, const char *fn, const char *key, bool def) {
  return opt_present(L, idx, fn, key, LUA_TBOOLEAN, "a boolean") ? lua_toboolean(L, idx) : def;
}

double attnL_option_number(lua_State *L, int idx, const char *fn, const char *key, double def) {
  return opt_present(L, idx, fn, key, LUA_TNUMBER, "a number") ? lua_tonumber(L, idx) : def;
}

const char *attnL_option_string(lua_State *L, int idx, const char *fn, const char *key, const char *def) {
  return opt_present(L, idx, fn, key, LUA_TSTRING, "a string") ? lua_tostring(L, idx) : def;
}

const char *attnL_option_choice(lua_State *L, int idx, const char *fn, const char *key, const char *const *choices) {
  luaL_Buffer b;
  if (!lua_isnoneornil(L, idx)) {
    const char *v = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
    for (const char *const *p = choices; v && *p; p++)
      if (strcmp(v, *p) == 0) return *p;
    luaL_buffinit(L, &b);
    for (const char *const *p = choices; *p; p++) {
      if (p != choices) luaL_addstring(&b, p[1] ? ", " : " or ");
      lua_pushfstring(L, "\"%s\"", *p);
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    if (v) attnL_raise(L, "%s: option '%s' must be %s (got \"%s\")", fn, key, lua_tostring(L, -1), v);
    attnL_raise(L, "%s: option '%s' must be %s (got %s)", fn, key, lua_tostring(L, -1), luaL_typename(L, idx));
  }
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Registration                                                              */

void attnL_setfuncs(lua_State *L, const luaL_Reg *fns) {
  for (; fns->name; fns++) {
    attnL_pushfn(L, fns->func);
    lua_setfield(L, -2, fns->name);
  }
}

void attnL_setmethods(lua_State *L, const luaL_Reg *fns, const char *recv) {
  for (; fns->name; fns++) {
    push_bound(L, fns->func, fns->name, recv, 0);
    lua_setfield(L, -2, fns->name);
  }
}

/* The method is a closure of its own, which knows it is one: t.name(...)
   without self is told apart from attn.name(...). */
void attnL_register(lua_State *L, int module, int methods, const luaL_Reg *fns) {
  for (; fns->name; fns++) {
    attnL_pushfn(L, fns->func);
    if (methods) {
      push_bound(L, fns->func, fns->name, "x", -1);
      lua_setfield(L, methods, fns->name);
    }
    lua_setfield(L, module, fns->name);
  }
}

void attnL_init_core(lua_State *L) {
  (void)state_get(L);
  luaL_newmetatable(L, ATTN_TENSOR_MT);
  lua_pushlightuserdata(L, (void *)&tensor_mt_key);
  lua_rawseti(L, -2, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
}
