/* SPDX-License-Identifier: MIT */
/* Library functions of a sandbox that poll the instruction and time
 * budget (attn_lua.h).
 *
 * Lua's count hook only runs between VM instructions, so a single call of
 * a C library function is never interrupted: string.rep("", 2^50) loops
 * 2^50 times without allocating, ("a"):rep(1e5):find(".-b") takes O(n^2)
 * steps and ("a*"):rep(10) .. "b" O(n^10), table.move({}, 1, 2^40, 1)
 * and table.sort of a table whose __len says 2^31 loop in C.  A sandbox
 * gets the versions below instead: same arguments, results and error
 * messages for normal inputs, written here from the Lua 5.4 manual (§6.4
 * string manipulation and patterns, §6.6 table manipulation).  Each polls
 * attn__host_poll every few thousand steps, which counts them as
 * instructions (a step of table.* as one, 64 pattern-matching steps or
 * 64 KiB of string.rep output as one) and raises the limit error once the
 * budget is spent.
 *
 * Differences from stock Lua, all outside normal use:
 *  - table.sort is a heap sort: elements the order function calls equal
 *    may end in another order (the manual leaves that unspecified), and an
 *    inconsistent order function gives some permutation instead of
 *    "invalid order function for sorting".
 *  - string.rep of an empty result returns at once.
 *  - Plain string.find (no special characters, or plain = true) runs in
 *    linear time (memmem) instead of stock Lua's quadratic worst case.
 */
#define _GNU_SOURCE
#include "host.h"

#include <ctype.h>
#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <stdatomic.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Polling                                                                   */

#define POLL_STEPS 4096

typedef struct poller {
  lua_State *L;
  uint64_t steps;  /* since the last poll */
  unsigned weight; /* steps per counted instruction */
} poller;

/* The host's budget check (state.c's attn__host_poll), handed in by
   attn__host_sandbox_libs so that this file does not reach back up into
   the state that installs it.  One function for every state. */
static _Atomic(attn__host_poll_fn) host_poll;

static inline void poll_step(poller *pl, uint64_t n) {
  pl->steps += n;
  if (pl->steps >= POLL_STEPS) {
    uint64_t counted = pl->steps / pl->weight;
    pl->steps = 0;
    atomic_load_explicit(&host_poll, memory_order_relaxed)(pl->L, counted ? counted : 1);
  }
}

/* ------------------------------------------------------------------------ */
/* string.rep                                                                */

/* Stock Lua's limit on the size of a string.rep result. */
#define REP_MAX ((size_t)INT_MAX)

static int sb_rep(lua_State *L) {
  size_t l, lsep;
  const char *s = luaL_checklstring(L, 1, &l);
  lua_Integer n = luaL_checkinteger(L, 2);
  const char *sep = luaL_optlstring(L, 3, "", &lsep);
  if (n <= 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  if (l + lsep < l || l + lsep > REP_MAX / (lua_Unsigned)n) return luaL_error(L, "resulting string too large");
  size_t total = (size_t)n * l + (size_t)(n - 1) * lsep;
  if (total == 0) { /* nothing to copy, however many times */
    lua_pushliteral(L, "");
    return 1;
  }
  luaL_Buffer b;
  char *out = luaL_buffinitsize(L, &b, total);
  poller pl = {L, 0, 16};
  for (lua_Integer i = 0; i < n; i++) {
    if (l) memcpy(out, s, l), out += l;
    if (lsep && i + 1 < n) memcpy(out, sep, lsep), out += lsep;
    poll_step(&pl, 1 + (l + lsep) / 4096);
  }
  luaL_pushresultsize(&b, total);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Patterns (Lua 5.4 manual §6.4.1)                                          */

#define MAX_CAPTURES 32 /* LUA_MAXCAPTURES */
#define MAX_DEPTH 200   /* nesting of the matcher before "pattern too complex" */
#define CAP_OPEN (-1)
#define CAP_POS (-2)
#define ESC '%'

typedef struct matcher {
  const char *src, *src_end; /* the subject */
  const char *pat_end;
  lua_State *L;
  int depth;
  int level; /* captures so far */
  struct {
    const char *at;
    ptrdiff_t len; /* or CAP_OPEN, CAP_POS */
  } cap[MAX_CAPTURES];
  poller pl;
} matcher;

static const char *do_match(matcher *m, const char *s, const char *p);

/* c against class letter cl (%a, %d, ...; upper case: complement); any
   other character stands for itself. */
static bool class_match(int c, int cl) {
  bool r;
  switch (tolower(cl)) {
  case 'a': r = isalpha(c); break;
  case 'c': r = iscntrl(c); break;
  case 'd': r = isdigit(c); break;
  case 'g': r = isgraph(c); break;
  case 'l': r = islower(c); break;
  case 'p': r = ispunct(c); break;
  case 's': r = isspace(c); break;
  case 'u': r = isupper(c); break;
  case 'w': r = isalnum(c); break;
  case 'x': r = isxdigit(c); break;
  case 'z': r = c == 0; break; /* deprecated, still in Lua 5.4 */
  default: return cl == c;
  }
  return isupper(cl) ? !r : r;
}

/* c against the set [ ... ] from p (at '[') to close (at its ']'). */
static bool set_match(int c, const char *p, const char *close) {
  bool want = true;
  if (p[1] == '^') {
    want = false;
    p++;
  }
  while (++p < close) {
    if (*p == ESC) {
      p++;
      if (class_match(c, (unsigned char)*p)) return want;
    } else if (p[1] == '-' && p + 2 < close) {
      if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2]) return want;
      p += 2;
    } else if ((unsigned char)*p == c) {
      return want;
    }
  }
  return !want;
}

/* The end of the single-character class starting at p. */
static const char *item_end(matcher *m, const char *p) {
  char c = *p++;
  if (c == ESC) {
    if (p >= m->pat_end) luaL_error(m->L, "malformed pattern (ends with '%%')");
    return p + 1;
  }
  if (c == '[') {
    if (*p == '^') p++;
    /* the first character of a set is never its end: "[]]" is a set */
    do {
      if (p >= m->pat_end) luaL_error(m->L, "malformed pattern (missing ']')");
      c = *p++;
      if (c == ESC && p < m->pat_end) p++;
    } while (*p != ']');
    return p + 1;
  }
  return p;
}

/* Whether the subject character at s matches the class [p, ep). */
static bool one_match(matcher *m, const char *s, const char *p, const char *ep) {
  if (s >= m->src_end) return false;
  int c = (unsigned char)*s;
  switch (*p) {
  case '.': return true;
  case ESC: return class_match(c, (unsigned char)p[1]);
  case '[': return set_match(c, p, ep - 1);
  default: return (unsigned char)*p == c;
  }
}

static const char *balance(matcher *m, const char *s, const char *p) {
  if (p + 1 >= m->pat_end) luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
  if (s >= m->src_end || *s != p[0]) return NULL;
  char open = p[0], close = p[1];
  int depth = 1;
  while (++s < m->src_end) {
    poll_step(&m->pl, 1);
    if (*s == close) {
      if (--depth == 0) return s + 1;
    } else if (*s == open) {
      depth++;
    }
  }
  return NULL;
}

/* Greedy: as many repetitions as possible, then back off one by one. */
static const char *greedy(matcher *m, const char *s, const char *p, const char *ep) {
  ptrdiff_t n = 0;
  while (one_match(m, s + n, p, ep)) {
    n++;
    poll_step(&m->pl, 1);
  }
  for (; n >= 0; n--) {
    const char *r = do_match(m, s + n, ep + 1);
    if (r) return r;
  }
  return NULL;
}

/* Lazy: as few repetitions as possible. */
static const char *lazy(matcher *m, const char *s, const char *p, const char *ep) {
  for (;;) {
    const char *r = do_match(m, s, ep + 1);
    if (r) return r;
    if (!one_match(m, s, p, ep)) return NULL;
    s++;
  }
}

static const char *open_capture(matcher *m, const char *s, const char *p, ptrdiff_t what) {
  if (m->level >= MAX_CAPTURES) luaL_error(m->L, "too many captures");
  m->cap[m->level].at = s;
  m->cap[m->level].len = what;
  m->level++;
  const char *r = do_match(m, s, p);
  if (!r) m->level--;
  return r;
}

static const char *close_capture(matcher *m, const char *s, const char *p) {
  int l = m->level - 1;
  while (l >= 0 && m->cap[l].len != CAP_OPEN) l--;
  if (l < 0) luaL_error(m->L, "invalid pattern capture");
  m->cap[l].len = s - m->cap[l].at;
  const char *r = do_match(m, s, p);
  if (!r) m->cap[l].len = CAP_OPEN;
  return r;
}

/* %1 .. %9 in a pattern: the index of a closed capture. */
static int backref_index(matcher *m, int digit) {
  int l = digit - '1';
  if (l < 0 || l >= m->level || m->cap[l].len == CAP_OPEN) return luaL_error(m->L, "invalid capture index %%%d", l + 1);
  return l;
}

static const char *backref(matcher *m, const char *s, int digit) {
  int l = backref_index(m, digit);
  ptrdiff_t len = m->cap[l].len;
  if (len < 0 || m->src_end - s < len || memcmp(m->cap[l].at, s, (size_t)len) != 0) return NULL;
  poll_step(&m->pl, 1 + (uint64_t)len / 64);
  return s + len;
}

/* The end of the match of pattern p at subject position s, or NULL. */
static const char *do_match(matcher *m, const char *s, const char *p) {
  if (m->depth-- == 0) luaL_error(m->L, "pattern too complex");
  for (;;) {
    poll_step(&m->pl, 1);
    if (p == m->pat_end) break;
    if (*p == '(') {
      s = p[1] == ')' ? open_capture(m, s, p + 2, CAP_POS) : open_capture(m, s, p + 1, CAP_OPEN);
      break;
    }
    if (*p == ')') {
      s = close_capture(m, s, p + 1);
      break;
    }
    if (*p == '$' && p + 1 == m->pat_end) {
      if (s != m->src_end) s = NULL;
      break;
    }
    if (*p == ESC && p + 1 < m->pat_end && p[1] == 'b') {
      s = balance(m, s, p + 2);
      if (s) {
        p += 4;
        continue;
      }
      break;
    }
    if (*p == ESC && p + 1 < m->pat_end && p[1] == 'f') {
      p += 2;
      if (*p != '[') luaL_error(m->L, "missing '[' after '%%f' in pattern");
      const char *ep = item_end(m, p);
      int before = s == m->src ? 0 : (unsigned char)s[-1];
      int here = s < m->src_end ? (unsigned char)*s : 0;
      if (!set_match(before, p, ep - 1) && set_match(here, p, ep - 1)) {
        p = ep;
        continue;
      }
      s = NULL;
      break;
    }
    if (*p == ESC && p + 1 < m->pat_end && isdigit((unsigned char)p[1])) {
      s = backref(m, s, (unsigned char)p[1]);
      if (s) {
        p += 2;
        continue;
      }
      break;
    }
    const char *ep = item_end(m, p);
    char q = ep < m->pat_end ? *ep : '\0';
    if (!one_match(m, s, p, ep)) {
      if (q == '*' || q == '?' || q == '-') { /* zero repetitions are fine */
        p = ep + 1;
        continue;
      }
      s = NULL;
      break;
    }
    if (q == '?') {
      const char *r = do_match(m, s + 1, ep + 1);
      if (r) {
        s = r;
        break;
      }
      p = ep + 1;
      continue;
    }
    if (q == '+') {
      s = greedy(m, s + 1, p, ep);
      break;
    }
    if (q == '*') {
      s = greedy(m, s, p, ep);
      break;
    }
    if (q == '-') {
      s = lazy(m, s, p, ep);
      break;
    }
    s++;
    p = ep;
  }
  m->depth++;
  return s;
}

static void matcher_init(matcher *m, lua_State *L, const char *s, size_t ls, const char *p, size_t lp) {
  m->L = L;
  m->src = s;
  m->src_end = s + ls;
  m->pat_end = p + lp;
  m->depth = MAX_DEPTH;
  m->level = 0;
  m->pl = (poller){L, 0, 64};
}

static void matcher_reset(matcher *m) {
  m->level = 0;
  m->depth = MAX_DEPTH;
}

/* Pushes capture i (0-based); with no captures, index 0 is the whole
   match [s, e). */
static void push_capture(matcher *m, int i, const char *s, const char *e) {
  if (i >= m->level) {
    if (i != 0) luaL_error(m->L, "invalid capture index %%%d", i + 1);
    lua_pushlstring(m->L, s, (size_t)(e - s));
    return;
  }
  ptrdiff_t len = m->cap[i].len;
  if (len == CAP_OPEN) luaL_error(m->L, "unfinished capture");
  if (len == CAP_POS)
    lua_pushinteger(m->L, (lua_Integer)(m->cap[i].at - m->src) + 1);
  else
    lua_pushlstring(m->L, m->cap[i].at, (size_t)len);
}

/* Pushes every capture (or the whole match when there is none and s is
   given); returns how many. */
static int push_captures(matcher *m, const char *s, const char *e) {
  int n = m->level == 0 && s ? 1 : m->level;
  luaL_checkstack(m->L, n, "too many captures");
  for (int i = 0; i < n; i++) push_capture(m, i, s, e);
  return n;
}

/* A relative string position (negative: from the end) as 1-based,
   at least 1. */
static size_t start_pos(lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos;
  if (pos == 0) return 1;
  if (pos < -(lua_Integer)len) return 1;
  return len + (size_t)pos + 1;
}

static bool has_specials(const char *p, size_t lp) {
  for (size_t i = 0; i < lp; i++)
    if (strchr("^$*+?.([%-", p[i]) && p[i] != '\0') return true;
  return false;
}

static int find_or_match(lua_State *L, bool find) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = start_pos(luaL_optinteger(L, 3, 1), ls) - 1;
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
    const char *at = memmem(s + init, ls - init, p, lp);
    if (!at) {
      luaL_pushfail(L);
      return 1;
    }
    lua_pushinteger(L, (lua_Integer)(at - s) + 1);
    lua_pushinteger(L, (lua_Integer)(at - s + lp));
    return 2;
  }
  matcher m;
  bool anchored = lp > 0 && *p == '^';
  if (anchored) p++, lp--;
  matcher_init(&m, L, s, ls, p, lp);
  const char *at = s + init;
  for (;;) {
    matcher_reset(&m);
    const char *e = do_match(&m, at, p);
    if (e) {
      if (!find) return push_captures(&m, at, e);
      lua_pushinteger(L, (lua_Integer)(at - s) + 1);
      lua_pushinteger(L, (lua_Integer)(e - s));
      return push_captures(&m, NULL, NULL) + 2;
    }
    if (anchored || at >= m.src_end) break;
    at++;
  }
  luaL_pushfail(L);
  return 1;
}

static int sb_find(lua_State *L) { return find_or_match(L, true); }
static int sb_match(lua_State *L) { return find_or_match(L, false); }

/* gmatch's iterator: upvalues subject, pattern and the position state. */
typedef struct gmatch_state {
  size_t next;    /* where the next search starts */
  ptrdiff_t last; /* end of the last match, -1 before the first */
} gmatch_state;

static int gmatch_next(lua_State *L) {
  size_t ls, lp;
  const char *s = lua_tolstring(L, lua_upvalueindex(1), &ls);
  const char *p = lua_tolstring(L, lua_upvalueindex(2), &lp);
  gmatch_state *g = lua_touserdata(L, lua_upvalueindex(3));
  matcher m;
  matcher_init(&m, L, s, ls, p, lp); /* '^' is no anchor here: the manual */
  for (const char *at = s + g->next; at <= m.src_end; at++) {
    matcher_reset(&m);
    const char *e = do_match(&m, at, p);
    if (e && e - s != g->last) {
      g->next = (size_t)(e - s);
      g->last = e - s;
      return push_captures(&m, at, e);
    }
  }
  g->next = ls + 1;
  return 0;
}

static int sb_gmatch(lua_State *L) {
  size_t ls;
  luaL_checklstring(L, 1, &ls);
  luaL_checkstring(L, 2);
  size_t init = start_pos(luaL_optinteger(L, 3, 1), ls) - 1;
  if (init > ls) init = ls + 1;
  lua_settop(L, 2);
  gmatch_state *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->next = init;
  g->last = -1;
  lua_pushcclosure(L, gmatch_next, 3);
  return 1;
}

/* Appends the replacement string (arg 3) for the match [s, e). */
static void add_template(matcher *m, luaL_Buffer *b, const char *s, const char *e) {
  lua_State *L = m->L;
  size_t l;
  const char *t = lua_tolstring(L, 3, &l);
  const char *end = t + l;
  while (t < end) {
    const char *esc = memchr(t, ESC, (size_t)(end - t));
    if (!esc) {
      luaL_addlstring(b, t, (size_t)(end - t));
      break;
    }
    luaL_addlstring(b, t, (size_t)(esc - t));
    t = esc + 1;
    if (t >= end || (*t != ESC && !isdigit((unsigned char)*t)))
      luaL_error(L, "invalid use of '%c' in replacement string", ESC);
    if (*t == ESC) {
      luaL_addchar(b, ESC);
    } else if (*t == '0') {
      luaL_addlstring(b, s, (size_t)(e - s));
    } else {
      push_capture(m, *t - '1', s, e);
      luaL_tolstring(L, -1, NULL);
      lua_remove(L, -2);
      luaL_addvalue(b);
    }
    t++;
  }
}

/* Appends the replacement of the match [s, e) by a table or function
   (arg 3), or the match itself when that gives false or nil. */
static void add_replacement(matcher *m, luaL_Buffer *b, const char *s, const char *e, int rtype) {
  lua_State *L = m->L;
  if (rtype == LUA_TFUNCTION) {
    lua_pushvalue(L, 3);
    int n = push_captures(m, s, e);
    lua_call(L, n, 1);
  } else {
    push_capture(m, 0, s, e);
    lua_gettable(L, 3);
  }
  if (!lua_toboolean(L, -1)) {
    lua_pop(L, 1);
    luaL_addlstring(b, s, (size_t)(e - s));
    return;
  }
  if (!lua_isstring(L, -1)) luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  luaL_addvalue(b);
}

static int sb_gsub(lua_State *L) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  int rtype = lua_type(L, 3);
  lua_Integer max_n = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
  luaL_argexpected(L, rtype == LUA_TNUMBER || rtype == LUA_TSTRING || rtype == LUA_TFUNCTION || rtype == LUA_TTABLE, 3,
                   "string/function/table");
  bool anchored = lp > 0 && *p == '^';
  if (anchored) p++, lp--;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  matcher m;
  matcher_init(&m, L, s, ls, p, lp);
  const char *at = s, *last = NULL;
  lua_Integer n = 0;
  while (n < max_n) {
    matcher_reset(&m);
    const char *e = do_match(&m, at, p);
    if (e && e != last) {
      n++;
      if (rtype == LUA_TFUNCTION || rtype == LUA_TTABLE)
        add_replacement(&m, &b, at, e, rtype);
      else
        add_template(&m, &b, at, e);
      at = last = e;
    } else if (at < m.src_end) {
      luaL_addchar(&b, *at++);
    } else {
      break;
    }
    if (anchored) break;
  }
  luaL_addlstring(&b, at, (size_t)(m.src_end - at));
  luaL_pushresult(&b);
  lua_pushinteger(L, n);
  return 2;
}

/* ------------------------------------------------------------------------ */
/* table.*                                                                   */

enum { NEED_READ = 1, NEED_WRITE = 2, NEED_LEN = 4 };

/* A table, or a value whose metatable has what the access needs. */
static void check_table(lua_State *L, int arg, int need) {
  if (lua_type(L, arg) == LUA_TTABLE) return;
  if (lua_getmetatable(L, arg)) {
    static const char *const fields[] = {"__index", "__newindex", "__len"};
    bool ok = true;
    for (int i = 0; i < 3; i++) {
      if (!(need & (1 << i))) continue;
      if (lua_getfield(L, -1, fields[i]) == LUA_TNIL) ok = false;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (ok) return;
  }
  luaL_checktype(L, arg, LUA_TTABLE);
}

static lua_Integer table_len(lua_State *L, int arg, int need) {
  check_table(L, arg, need | NEED_LEN);
  return luaL_len(L, arg);
}

static int sb_insert(lua_State *L) {
  lua_Integer e = table_len(L, 1, NEED_READ | NEED_WRITE);
  e = (lua_Integer)((lua_Unsigned)e + 1); /* the first empty slot */
  lua_Integer pos;
  switch (lua_gettop(L)) {
  case 2: pos = e; break;
  case 3: {
    pos = luaL_checkinteger(L, 2);
    luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2, "position out of bounds");
    poller pl = {L, 0, 1};
    for (lua_Integer i = e; i > pos; i--) {
      lua_geti(L, 1, i - 1);
      lua_seti(L, 1, i);
      poll_step(&pl, 1);
    }
    break;
  }
  default: return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, pos);
  return 0;
}

static int sb_remove(lua_State *L) {
  lua_Integer size = table_len(L, 1, NEED_READ | NEED_WRITE);
  lua_Integer pos = luaL_optinteger(L, 2, size);
  if (pos != size) /* argument 1 in the message, as Lua 5.4.4 says */
    luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, 1, "position out of bounds");
  lua_geti(L, 1, pos);
  poller pl = {L, 0, 1};
  for (; pos < size; pos++) {
    lua_geti(L, 1, pos + 1);
    lua_seti(L, 1, pos);
    poll_step(&pl, 1);
  }
  lua_pushnil(L);
  lua_seti(L, 1, pos);
  return 1;
}

static int sb_move(lua_State *L) {
  lua_Integer f = luaL_checkinteger(L, 2);
  lua_Integer e = luaL_checkinteger(L, 3);
  lua_Integer t = luaL_checkinteger(L, 4);
  int dest = lua_isnoneornil(L, 5) ? 1 : 5;
  check_table(L, 1, NEED_READ);
  check_table(L, dest, NEED_WRITE);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
    lua_Integer n = e - f + 1;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
    poller pl = {L, 0, 1};
    if (t > e || t <= f || (dest != 1 && !lua_compare(L, 1, dest, LUA_OPEQ))) {
      for (lua_Integer i = 0; i < n; i++) {
        lua_geti(L, 1, f + i);
        lua_seti(L, dest, t + i);
        poll_step(&pl, 1);
      }
    } else {
      for (lua_Integer i = n - 1; i >= 0; i--) {
        lua_geti(L, 1, f + i);
        lua_seti(L, dest, t + i);
        poll_step(&pl, 1);
      }
    }
  }
  lua_pushvalue(L, dest);
  return 1;
}

static int sb_concat(lua_State *L) {
  lua_Integer last = table_len(L, 1, NEED_READ);
  size_t lsep;
  const char *sep = luaL_optlstring(L, 2, "", &lsep);
  lua_Integer i = luaL_optinteger(L, 3, 1);
  last = luaL_optinteger(L, 4, last);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  poller pl = {L, 0, 1};
  for (; i <= last; i++) {
    lua_geti(L, 1, i);
    if (!lua_isstring(L, -1))
      return luaL_error(L, "invalid value (%s) at index %I in table for 'concat'", luaL_typename(L, -1),
                        (LUAI_UACINT)i);
    luaL_addvalue(&b);
    if (i == last) break; /* also keeps i from overflowing at maxinteger */
    luaL_addlstring(&b, sep, lsep);
    poll_step(&pl, 1);
  }
  luaL_pushresult(&b);
  return 1;
}

/* table.sort as a heap sort on the table itself (through lua_geti and
   lua_seti, so metamethods apply as with stock Lua). */
typedef struct sorter {
  lua_State *L;
  bool has_cmp; /* the order function is at index 2 */
  poller pl;
} sorter;

/* Whether the value at index a sorts before the one at index b. */
static bool sort_less(sorter *st, int a, int b) {
  lua_State *L = st->L;
  poll_step(&st->pl, 1);
  if (!st->has_cmp) return lua_compare(L, a, b, LUA_OPLT);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, a < 0 ? a - 1 : a);
  lua_pushvalue(L, b < 0 ? b - 2 : b);
  lua_call(L, 2, 1);
  bool r = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return r;
}

/* Moves the value v (on top of the stack, popped) down from slot i of the
   heap [1, n] to where it belongs. */
static void sift_down(sorter *st, lua_Integer i, lua_Integer n) {
  lua_State *L = st->L;
  int v = lua_gettop(L);
  for (;;) {
    lua_Integer child = 2 * i;
    if (child > n) break;
    lua_geti(L, 1, child);
    if (child < n) {
      lua_geti(L, 1, child + 1);
      if (sort_less(st, -2, -1)) {
        child++;
        lua_remove(L, -2);
      } else {
        lua_pop(L, 1);
      }
    }
    if (!sort_less(st, v, -1)) {
      lua_pop(L, 1);
      break;
    }
    lua_seti(L, 1, i); /* the bigger child moves up */
    i = child;
  }
  lua_seti(L, 1, i);
}

static int sb_sort(lua_State *L) {
  lua_Integer n = table_len(L, 1, NEED_READ | NEED_WRITE);
  if (n > 1) {
    luaL_argcheck(L, n < INT_MAX, 1, "array too big");
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    sorter st = {L, !lua_isnil(L, 2), {L, 0, 1}};
    luaL_checkstack(L, 8, "sort");
    for (lua_Integer i = n / 2; i >= 1; i--) {
      lua_geti(L, 1, i);
      sift_down(&st, i, n);
    }
    for (lua_Integer end = n; end > 1; end--) {
      lua_geti(L, 1, end); /* the last leaf goes to the root's place */
      lua_geti(L, 1, 1);
      lua_seti(L, 1, end); /* the biggest to its final slot */
      sift_down(&st, 1, end - 1);
    }
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Installation                                                              */

void attn__host_sandbox_libs(lua_State *L, attn__host_poll_fn poll) {
  atomic_store_explicit(&host_poll, poll, memory_order_relaxed);
  static const luaL_Reg string_fns[] = {{"rep", sb_rep},       {"find", sb_find}, {"match", sb_match},
                                        {"gmatch", sb_gmatch}, {"gsub", sb_gsub}, {NULL, NULL}};
  static const luaL_Reg table_fns[] = {{"insert", sb_insert}, {"remove", sb_remove}, {"move", sb_move},
                                       {"concat", sb_concat}, {"sort", sb_sort},     {NULL, NULL}};
  lua_getglobal(L, LUA_STRLIBNAME);
  luaL_setfuncs(L, string_fns, 0);
  lua_pop(L, 1);
  lua_getglobal(L, LUA_TABLIBNAME);
  luaL_setfuncs(L, table_fns, 0);
  lua_pop(L, 1);
  /* Strings share one metatable: a script that could change it would
     change every string method of the state (attn's own Lua code
     included).  getmetatable("") gives a stand-in holding __index (the
     string table), so `getmetatable("").__index.upper` still works. */
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    lua_createtable(L, 0, 1);
    lua_getfield(L, -2, "__index");
    lua_setfield(L, -2, "__index");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}
