/* SPDX-License-Identifier: MIT */
/* Lua binding: random numbers (torch 1.13's CPU generator, bit for bit).
 *
 * Every sampler takes an optional trailing attn.Generator; without one the
 * state's default generator (attn.manual_seed's) is used: the process-wide
 * one, except in a sandbox, which has its own (attnL_own_default_generator)
 * so that an untrusted script can neither set nor observe the stream of the
 * other states.  Indices (randperm, multinomial) are 1-based here; the core
 * is 0-based.
 */
#include "binding.h"
#include "openers.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define ATTN_GENERATOR_MT "attn.Generator"
#define TORCH_DEFAULT_SEED 67280421310721LL

typedef struct {
  attn_generator *g; /* NULL once collected */
} gen_box;

/* ------------------------------------------------------------------------ */
/* The state's default generator                                             */

/* Registry key of a state's own default generator (a Generator userdata). */
static const char state_gen_key = 0;

attn_generator *attnL_default_generator(lua_State *L) {
  attn_generator *g = NULL;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &state_gen_key) == LUA_TUSERDATA) g = ((gen_box *)lua_touserdata(L, -1))->g;
  lua_pop(L, 1);
  return g; /* NULL: the process-wide one */
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

/* The generator at the end of the arguments, if any; *top becomes the last
   argument before it (trailing nils ignored).  The generator stays on the stack, so it cannot be
   collected during the call. */
static attn_generator *opt_gen(lua_State *L, int *top) {
  *top = lua_gettop(L);
  while (*top > 0 && lua_isnil(L, *top)) (*top)--; /* trailing nils are absent arguments */
  gen_box *b = luaL_testudata(L, *top, ATTN_GENERATOR_MT);
  if (!b) return attnL_default_generator(L);
  if (!b->g) luaL_argerror(L, *top, "generator is closed");
  (*top)--;
  return b->g;
}

static int absent(lua_State *L, int arg, int top) { return arg > top || lua_isnil(L, arg); }

static double optnum(lua_State *L, int arg, int top, double def) {
  return absent(L, arg, top) ? def : luaL_checknumber(L, arg);
}

/* Raises for arguments past the last one a function reads. */
static void check_no_extra(lua_State *L, int first_unused, int top, const char *fn) {
  if (first_unused <= top)
    attnL_raise(L, "%s: unexpected argument #%d (%s); a generator must be an attn.Generator", fn, first_unused,
                luaL_typename(L, first_unused));
}

/* A shape starting at arg (varargs or a table) followed only by the
   optional generator. */
static int shape_args(lua_State *L, int arg, int top, int64_t *shape, const char *fn) {
  if (arg > top) return 0; /* no shape: a 0-d tensor */
  int nd = attnL_checkshape(L, arg, shape, 0, fn);
  check_no_extra(L, lua_type(L, arg) == LUA_TTABLE ? arg + 1 : arg + nd, top, fn);
  return nd;
}

/* A 64-bit seed from a Lua integer (negative values wrap like torch's). */
static uint64_t check_seed(lua_State *L, int arg, const char *fn) {
  return (uint64_t)attnL_checkint(L, arg, fn, "seed");
}

/* A non-deterministic 53-bit seed (exact as a Lua float too). */
static uint64_t os_seed(void) {
  uint64_t s = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (!f || fread(&s, sizeof s, 1, f) != 1) {
    /* no /dev/urandom: mix the clock and an address */
    s = (uint64_t)time(NULL) * UINT64_C(6364136223846793005) ^ (uint64_t)clock() ^ (uint64_t)(uintptr_t)&s;
  }
  if (f) fclose(f);
  return s & ((UINT64_C(1) << 53) - 1);
}

/* ------------------------------------------------------------------------ */
/* Seeds, generators, states                                                 */

static int l_manual_seed(lua_State *L) {
  attn_generator_seed(attnL_default_generator(L), check_seed(L, 1, "manual_seed"));
  return 0;
}

static int l_seed(lua_State *L) {
  uint64_t s = os_seed();
  attn_generator_seed(attnL_default_generator(L), s);
  lua_pushinteger(L, (lua_Integer)s);
  return 1;
}

/* Seeds are pushed as Lua integers: seeds >= 2^63 read back negative, so
   manual_seed(-1) round-trips. */
static int l_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)attn_generator_initial_seed(attnL_default_generator(L)));
  return 1;
}

static gen_box *check_gen(lua_State *L, int arg) {
  gen_box *b = luaL_checkudata(L, arg, ATTN_GENERATOR_MT);
  if (!b->g) luaL_argerror(L, arg, "generator is closed");
  return b;
}

static int new_generator(lua_State *L, uint64_t seed) {
  gen_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->g = NULL; /* safe for __gc before the core call */
  luaL_setmetatable(L, ATTN_GENERATOR_MT);
  if (attn_generator_new(seed, &b->g)) return attnL_error(L);
  attnL_gc_debt(L, NULL, (int64_t)attn_generator_bytes());
  return 1;
}

/* attn.Generator([seed]): torch.Generator().manual_seed(seed) */
static int l_generator(lua_State *L) {
  return new_generator(L, lua_isnoneornil(L, 1) ? (uint64_t)TORCH_DEFAULT_SEED : check_seed(L, 1, "Generator"));
}

/* Gives L a default generator of its own, seeded like a fresh process's
   (torch's default seed); a second call keeps the first.  Raises on
   failure (run it protected: the sandbox opener does). */
void attnL_own_default_generator(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &state_gen_key) == LUA_TUSERDATA) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  new_generator(L, (uint64_t)TORCH_DEFAULT_SEED);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &state_gen_key);
}

static int g_gc(lua_State *L) {
  gen_box *b = luaL_checkudata(L, 1, ATTN_GENERATOR_MT);
  attn_generator *g = b->g;
  b->g = NULL;
  attnL_free_generator(L, g);
  return 0;
}

static int g_tostring(lua_State *L) {
  gen_box *b = luaL_checkudata(L, 1, ATTN_GENERATOR_MT);
  if (!b->g) {
    lua_pushstring(L, "attn.Generator(closed)");
  } else {
    lua_pushfstring(L, "attn.Generator(initial_seed=%I)", (lua_Integer)attn_generator_initial_seed(b->g));
  }
  return 1;
}

/* g:manual_seed(n) -> g */
static int g_manual_seed(lua_State *L) {
  gen_box *b = check_gen(L, 1);
  attn_generator_seed(b->g, check_seed(L, 2, "manual_seed"));
  lua_settop(L, 1);
  return 1;
}

static int g_seed(lua_State *L) {
  gen_box *b = check_gen(L, 1);
  uint64_t s = os_seed();
  attn_generator_seed(b->g, s);
  lua_pushinteger(L, (lua_Integer)s);
  return 1;
}

static int g_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)attn_generator_initial_seed(check_gen(L, 1)->g));
  return 1;
}

static int push_state(lua_State *L, attn_generator *g) {
  luaL_Buffer buf;
  size_t n = attn_generator_state_size();
  char *p = luaL_buffinitsize(L, &buf, n);
  attn_generator_get_state(g, p);
  luaL_pushresultsize(&buf, n);
  return 1;
}

static int set_state(lua_State *L, attn_generator *g, int arg) {
  size_t n;
  luaL_checktype(L, arg, LUA_TSTRING); /* a number is never a state */
  const char *s = lua_tolstring(L, arg, &n);
  if (attn_generator_set_state(g, s, n)) return attnL_error(L);
  return 0;
}

static int g_get_state(lua_State *L) { return push_state(L, check_gen(L, 1)->g); }
static int g_set_state(lua_State *L) {
  set_state(L, check_gen(L, 1)->g, 2);
  lua_settop(L, 1);
  return 1;
}
static attn_generator *state_default(lua_State *L) {
  attn_generator *g = attnL_default_generator(L);
  return g ? g : attn_default_generator();
}
static int l_get_rng_state(lua_State *L) { return push_state(L, state_default(L)); }
static int l_set_rng_state(lua_State *L) { return set_state(L, state_default(L), 1); }

/* ------------------------------------------------------------------------ */
/* Factories                                                                 */

/* Completes a factory whose core calls report under their own names
   ("empty: ...", "random_: ..."): the message names the factory instead. */
static int factory_result(lua_State *L, attn_status st, const char *fn) {
  if (st) {
    const char *msg = attn_last_error();
    const char *rest = strstr(msg, ": ");
    return attnL_raise(L, "%s: %s", fn, rest ? rest + 2 : msg);
  }
  return attnL_result(L, st);
}

/* The factories' last argument may instead be torch's keywords
   {generator =, requires_grad =} and, where dt is not NULL, dtype = (at
   first_opt or later: a table before it is a shape): the table's slot then
   holds the generator (or nil) for opt_gen.  *rg: requires_grad; *dt: the
   dtype asked for (unchanged when none is). */
static attn_generator *factory_opts(lua_State *L, int *top, int first_opt, const char *fn, int *rg, attn_dtype *dt) {
  static const char *const keys[] = {"generator", "requires_grad", NULL};
  static const char *const dtype_keys[] = {"dtype", "generator", "requires_grad", NULL};
  *rg = 0;
  int n = lua_gettop(L);
  while (n > 0 && lua_isnil(L, n)) n--;
  if (n >= first_opt && lua_type(L, n) == LUA_TTABLE && lua_rawlen(L, n) == 0) {
    attnL_checkoptions(L, n, fn, dt ? dtype_keys : keys);
    if (dt) {
      lua_getfield(L, n, "dtype");
      if (!lua_isnil(L, -1)) *dt = attnL_checkdtype(L, -1, fn);
      lua_pop(L, 1);
    }
    lua_getfield(L, n, "requires_grad");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
      attnL_raise(L, "%s: requires_grad must be a boolean (got %s)", fn, luaL_typename(L, -1));
    *rg = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, n, "generator");
    lua_replace(L, n);
    lua_settop(L, lua_isnil(L, n) ? n - 1 : n); /* no generator: no argument (a nil there is a missing size) */
  }
  return opt_gen(L, top);
}

/* A factory's result with requires_grad set when asked. */
static int factory_done(lua_State *L, attn_status st, const char *fn, int rg) {
  factory_result(L, st, fn);
  if (rg && attn_requires_grad_(*attnL_checkbox(L, -1), true)) attnL_error(L);
  return 1;
}

/* attn.rand(shape...[, gen | opts]) / attn.randn(shape...[, gen | opts]) */
static int fresh_fill(lua_State *L, const char *fn, int normal) {
  int top, rg;
  attn_generator *g = factory_opts(L, &top, 2, fn, &rg, NULL);
  int64_t shape[ATTN_MAX_DIMS];
  int nd = shape_args(L, 1, top, shape, fn);
  attn_tensor **box = attnL_newbox(L);
  attn_status st = attn_empty(nd, shape, box);
  if (!st) st = normal ? attn_normal_(*box, 0, 1, g) : attn_uniform_(*box, 0, 1, g);
  return factory_done(L, st, fn, rg);
}
static int l_rand(lua_State *L) { return fresh_fill(L, "rand", 0); }
static int l_randn(lua_State *L) { return fresh_fill(L, "randn", 1); }

/* rand_like/randn_like: torch's empty_like keeps the layout of a dense
   tensor (a transposed one stays transposed) and the fill then follows
   memory order, so build the same layout: a contiguous block in t's memory
   order, permuted back to t's dims. */
static int like_fill(lua_State *L, const char *fn, int normal) {
  int top, rg;
  attn_generator *g = factory_opts(L, &top, 2, fn, &rg, NULL);
  attn_tensor *t = attnL_check(L, 1);
  check_no_extra(L, 2, top, fn);
  if (t->dtype != ATTN_FLOAT32) /* torch draws in t's dtype and refuses integers and bools */
    return attnL_raise(L, "%s: expected a floating tensor, got %s (write %s(x:float()), or attn.%s(x:shape()))", fn,
                       attn_dtype_name(t->dtype), fn, normal ? "randn" : "rand");
  int nd = t->ndim, order[ATTN_MAX_DIMS], inv[ATTN_MAX_DIMS];
  for (int i = 0; i < nd; i++) order[i] = i;
  /* dims by decreasing stride (stable), as the fill visits them */
  for (int i = 1; i < nd; i++)
    for (int k = i; k > 0 && t->stride[order[k - 1]] < t->stride[order[k]]; k--) {
      int tmp = order[k];
      order[k] = order[k - 1];
      order[k - 1] = tmp;
    }
  /* dense: the sorted strides are exactly those of a contiguous block */
  int dense = 1;
  int64_t expect = 1;
  for (int i = nd - 1; i >= 0; i--) {
    int d = order[i];
    if (t->shape[d] == 1) continue;
    if (t->stride[d] != expect) dense = 0;
    expect *= t->shape[d];
  }
  if (!dense || attn_tensor_is_contiguous(t))
    for (int i = 0; i < nd; i++) order[i] = i;
  int64_t mshape[ATTN_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    mshape[i] = t->shape[order[i]];
    inv[order[i]] = i;
  }
  attn_tensor **block = attnL_newbox(L);
  attn_status st = attn_empty(nd, mshape, block);
  if (st) return factory_result(L, st, fn);
  attn_tensor **box = attnL_newbox(L);
  st = attn_permute(*block, inv, box);
  if (!st) st = normal ? attn_normal_(*box, 0, 1, g) : attn_uniform_(*box, 0, 1, g);
  attnL_result(L, st);
  if (rg && attn_requires_grad_(*box, true)) attnL_error(L);
  return 1;
}
static int l_rand_like(lua_State *L) { return like_fill(L, "rand_like", 0); }
static int l_randn_like(lua_State *L) { return like_fill(L, "randn_like", 1); }

/* The factory's int64 result on top in dtype dt (torch draws the same
   integers whatever the dtype), requires_grad set when asked. */
static int int_factory_done(lua_State *L, attn_status st, const char *fn, int rg, attn_dtype dt) {
  factory_result(L, st, fn);
  if (dt != ATTN_INT64) {
    attn_tensor **nb = attnL_newbox(L);
    attnL_result(L, attn_to_dtype(*attnL_checkbox(L, -2), dt, nb));
    lua_remove(L, -2);
  }
  if (rg && attn_requires_grad_(*attnL_checkbox(L, -1), true)) attnL_error(L);
  return 1;
}

/* attn.randint(low, high, shape...[, gen | opts]) or randint(high,
   {shape}[, gen | opts]): integer values in [low, high) */
static int l_randint(lua_State *L) {
  int top, rg;
  attn_dtype dt = ATTN_INT64; /* torch.randint gives int64 */
  attn_generator *g = factory_opts(L, &top, 3, "randint", &rg, &dt);
  int64_t low = 0, high, shape[ATTN_MAX_DIMS];
  int nd;
  if (lua_type(L, 2) == LUA_TTABLE) {
    high = attnL_checkint(L, 1, "randint", "high");
    nd = shape_args(L, 2, top, shape, "randint");
  } else {
    low = attnL_checkint(L, 1, "randint", "low");
    high = attnL_checkint(L, 2, "randint", "high");
    nd = shape_args(L, 3, top, shape, "randint");
  }
  attn_tensor **box = attnL_newbox(L);
  attn_status st = attn_empty_dtype(ATTN_INT64, nd, shape, box);
  if (!st) st = attn_random_int_(*box, low, high, g);
  return int_factory_done(L, st, "randint", rg, dt);
}

/* attn.randperm(n[, gen | opts]): a random permutation of 1..n */
static int l_randperm(lua_State *L) {
  int top, rg;
  attn_dtype dt = ATTN_INT64;
  attn_generator *g = factory_opts(L, &top, 2, "randperm", &rg, &dt);
  int64_t n = attnL_checkint(L, 1, "randperm", "n");
  check_no_extra(L, 2, top, "randperm");
  attn_tensor **box = attnL_newbox(L);
  attn_status st = attn_randperm(n, g, box);
  if (!st) attnL_to_one_based(*box);
  return int_factory_done(L, st, "randperm", rg, dt);
}

/* attn.multinomial(probs, n[, replacement = false][, gen]): 1-based
   category numbers, shape [n] or [rows, n] */
static int l_multinomial(lua_State *L) {
  int top;
  attn_generator *g = opt_gen(L, &top);
  attn_tensor *p = attnL_totensor(L, 1, "multinomial", "probs");
  int64_t n = attnL_checkint(L, 2, "multinomial", "num_samples");
  int repl = 0;
  if (!absent(L, 3, top)) {
    luaL_checktype(L, 3, LUA_TBOOLEAN);
    repl = lua_toboolean(L, 3);
  }
  check_no_extra(L, 4, top, "multinomial");
  attn_tensor **box = attnL_newbox(L);
  attn_status st = attn_multinomial(p, n, repl, g, box);
  if (!st) attnL_to_one_based(*box);
  return attnL_result(L, st);
}

/* attn.bernoulli(probs[, gen]): 1 with probability probs[i], else 0 */
static int l_bernoulli(lua_State *L) {
  int top;
  attn_generator *g = opt_gen(L, &top);
  attn_tensor *p = attnL_totensor(L, 1, "bernoulli", "probs");
  check_no_extra(L, 2, top, "bernoulli");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_bernoulli_tensor(p, g, box));
}

/* ------------------------------------------------------------------------ */
/* In-place samplers: each returns the tensor                                */

static int done_inplace(lua_State *L, attn_status st) {
  if (st) return attnL_error(L);
  lua_settop(L, 1);
  return 1;
}

/* t:uniform_([from = 0][, to = 1][, gen]) */
static int m_uniform_(lua_State *L) {
  int top;
  attn_generator *g = opt_gen(L, &top);
  attn_tensor *t = attnL_check(L, 1);
  double a = optnum(L, 2, top, 0), b = optnum(L, 3, top, 1);
  check_no_extra(L, 4, top, "uniform_");
  return done_inplace(L, attn_uniform_(t, a, b, g));
}

/* t:normal_([mean = 0][, std = 1][, gen]) */
static int m_normal_(lua_State *L) {
  int top;
  attn_generator *g = opt_gen(L, &top);
  attn_tensor *t = attnL_check(L, 1);
  double mean = optnum(L, 2, top, 0), std = optnum(L, 3, top, 1);
  check_no_extra(L, 4, top, "normal_");
  return done_inplace(L, attn_normal_(t, mean, std, g));
}

/* t:bernoulli_([p = 0.5][, gen]) */
static int m_bernoulli_(lua_State *L) {
  int top;
  attn_generator *g = opt_gen(L, &top);
  attn_tensor *t = attnL_check(L, 1);
  double p = optnum(L, 2, top, 0.5);
  check_no_extra(L, 3, top, "bernoulli_");
  return done_inplace(L, attn_bernoulli_(t, p, g));
}

/* t:exponential_([lambda = 1][, gen]) */
static int m_exponential_(lua_State *L) {
  int top;
  attn_generator *g = opt_gen(L, &top);
  attn_tensor *t = attnL_check(L, 1);
  double lambda = optnum(L, 2, top, 1);
  check_no_extra(L, 3, top, "exponential_");
  return done_inplace(L, attn_exponential_(t, lambda, g));
}

/* t:random_([gen]) -> [0, 2^24]; t:random_(high) -> [0, high);
   t:random_(low, high) -> [low, high).  Like torch: values, not indices. */
static int m_random_(lua_State *L) {
  int top;
  attn_generator *g = opt_gen(L, &top);
  attn_tensor *t = attnL_check(L, 1);
  int64_t low = 0, high = ((int64_t)1 << 24) + 1;
  if (!absent(L, 3, top)) { /* random_(nil, to) is torch's random_(to = to) */
    if (!absent(L, 2, top)) low = attnL_checkint(L, 2, "random_", "low");
    high = attnL_checkint(L, 3, "random_", "high");
  } else if (!absent(L, 2, top)) {
    high = attnL_checkint(L, 2, "random_", "high");
  }
  check_no_extra(L, 4, top, "random_");
  return done_inplace(L, attn_random_int_(t, low, high, g));
}

/* ------------------------------------------------------------------------ */
/* Registration                                                              */

static const luaL_Reg module_fns[] = {{"manual_seed", l_manual_seed},
                                      {"seed", l_seed},
                                      {"initial_seed", l_initial_seed},
                                      {"Generator", l_generator},
                                      {"get_rng_state", l_get_rng_state},
                                      {"set_rng_state", l_set_rng_state},
                                      {"rand", l_rand},
                                      {"randn", l_randn},
                                      {"rand_like", l_rand_like},
                                      {"randn_like", l_randn_like},
                                      {"randint", l_randint},
                                      {"randperm", l_randperm},
                                      {NULL, NULL}};

/* also tensor methods: t:multinomial(n), t:bernoulli(), t:uniform_() ... */
static const luaL_Reg tensor_fns[] = {
    {"multinomial", l_multinomial}, {"bernoulli", l_bernoulli},       {"uniform_", m_uniform_}, {"normal_", m_normal_},
    {"bernoulli_", m_bernoulli_},   {"exponential_", m_exponential_}, {"random_", m_random_},   {NULL, NULL}};

static const luaL_Reg generator_methods[] = {{"manual_seed", g_manual_seed},   {"seed", g_seed},
                                             {"initial_seed", g_initial_seed}, {"get_state", g_get_state},
                                             {"set_state", g_set_state},       {NULL, NULL}};

void attnL_open_random(lua_State *L, int module, int methods) {
  attnL_register(L, module, 0, module_fns);
  attnL_register(L, module, methods, tensor_fns);
  luaL_newmetatable(L, ATTN_GENERATOR_MT);
  lua_pushcfunction(L, g_gc);
  lua_setfield(L, -2, "__gc");
  attnL_pushfn(L, g_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_newtable(L);
  attnL_setmethods(L, generator_methods, "g");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}
