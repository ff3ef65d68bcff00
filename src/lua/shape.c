/* SPDX-License-Identifier: MIT */
/* Lua binding: shape operations (tril/triu, cat/stack/vstack/hstack,
 * index_select/gather, split/chunk, repeat, flip).
 *
 * Dims and indices are 1-based here (negative dims count from the end).
 * Checks whose core message would carry a 0-based dim or list position
 * are repeated here first so that Lua users see Lua numbering. */
#include "binding.h"
#include "openers.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define PIECES_MT "attn.Pieces"

/* ------------------------------------------------------------------------ */
/* tril / triu                                                               */

/* t:tril(k?) / t:triu(k?): k is the diagonal offset (0 main, > 0 above). */
static int tri(lua_State *L, const char *fn, attn_status (*f)(const attn_tensor *, int64_t, attn_tensor **)) {
  attn_tensor *t = attnL_totensor(L, 1, fn, "input");
  int64_t k = lua_isnoneornil(L, 2) ? 0 : attnL_checkint(L, 2, fn, "diagonal");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, f(t, k, box));
}
static int l_tril(lua_State *L) { return tri(L, "tril", attn_tril); }
static int l_triu(lua_State *L) { return tri(L, "triu", attn_triu); }

/* ------------------------------------------------------------------------ */
/* cat / stack / vstack / hstack                                             */

static bool cat_skipped(const attn_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

/* The list must be non-empty and hold no 0-d tensor; returns the position of
   the first tensor that cat does not skip (-1: all are skipped [0]s). */
static int cat_reference(lua_State *L, const char *fn, int n, const attn_tensor **ts) {
  if (n == 0) attnL_raise(L, "%s: expected a non-empty list of tensors", fn);
  int ref = -1;
  for (int i = 0; i < n; i++) {
    if (ts[i]->ndim == 0) attnL_raise(L, "%s: tensors[%d] is 0-d and cannot be concatenated", fn, i + 1);
    if (ref < 0 && !cat_skipped(ts[i])) ref = i;
  }
  return ref;
}

/* attn_cat's shape rules, raised with 1-based positions and dims. */
static int cat_checked(lua_State *L, const char *fn, int n, const attn_tensor **ts, int ref, int dim) {
  char sa[128], sb[128];
  for (int i = 0; ref >= 0 && i < n; i++) {
    const attn_tensor *t = ts[i], *r = ts[ref];
    if (cat_skipped(t)) continue;
    if (t->ndim != r->ndim)
      attnL_raise(L,
                  "%s: tensors[%d] has shape %s but tensors[%d] has shape %s; tensors must have the same number "
                  "of dims",
                  fn, i + 1, attn_shape_str(t->ndim, t->shape, sa, sizeof sa), ref + 1,
                  attn_shape_str(r->ndim, r->shape, sb, sizeof sb));
    for (int d = 0; d < r->ndim; d++)
      if (d != dim && t->shape[d] != r->shape[d])
        attnL_raise(L, "%s: tensors[%d] has shape %s but tensors[%d] has shape %s; sizes must match except in dim %d",
                    fn, i + 1, attn_shape_str(t->ndim, t->shape, sa, sizeof sa), ref + 1,
                    attn_shape_str(r->ndim, r->shape, sb, sizeof sb), dim + 1);
  }
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_cat(n, (const attn_tensor *const *)ts, dim, box));
}

/* attn.cat({t1, t2, ...}, dim?): dim defaults to 1.  1-d tensors of shape
   [0] are skipped (torch's legacy rule); dim is taken relative to the
   first tensor that is not. */
static int l_cat(lua_State *L) {
  const attn_tensor **ts;
  lua_settop(L, 2); /* the list conversion pushes values */
  int n = attnL_checktensorlist(L, 1, &ts, "cat");
  int ref = cat_reference(L, "cat", n, ts);
  int dim = attnL_optdim(L, 2, ref >= 0 ? ts[ref]->ndim : 1, 0, "cat");
  return cat_checked(L, "cat", n, ts, ref, dim);
}

/* The tensor list at argument 1 of fn; an empty one raises. */
static int nonempty_list(lua_State *L, const attn_tensor ***ts, const char *fn) {
  int n = attnL_checktensorlist(L, 1, ts, fn);
  if (n == 0) attnL_raise(L, "%s: expected a non-empty list of tensors", fn);
  return n;
}

/* attn.stack({t1, t2, ...}, dim?): equal shapes, new dim (default 1; up to
   ndim + 1). */
static int l_stack(lua_State *L) {
  char sa[128], sb[128];
  const attn_tensor **ts;
  lua_settop(L, 2);
  int n = nonempty_list(L, &ts, "stack");
  for (int i = 1; i < n; i++)
    if (!attn_same_shape(ts[i], ts[0]))
      return attnL_raise(L, "stack: tensors[%d] has shape %s but tensors[1] has shape %s; all must be equal", i + 1,
                         attn_shape_str(ts[i]->ndim, ts[i]->shape, sa, sizeof sa),
                         attn_shape_str(ts[0]->ndim, ts[0]->shape, sb, sizeof sb));
  int dim = lua_isnoneornil(L, 2) ? 0 : attnL_checkdim(L, 2, ts[0]->ndim, 1, "stack");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_stack(n, (const attn_tensor *const *)ts, dim, box));
}

/* Replaces ts[i] by views with at least `atleast` dims (1 or 2), adding
   leading size-1 dims like torch.atleast_1d/2d; the views are kept in a
   table pushed on the stack. */
static void promote(lua_State *L, int n, const attn_tensor **ts, int atleast) {
  lua_createtable(L, n, 0);
  int holder = lua_gettop(L);
  for (int i = 0; i < n; i++) {
    const attn_tensor *t = ts[i];
    while (t->ndim < atleast) {
      attn_tensor **box = attnL_newbox(L);
      if (attn_unsqueeze(t, 0, box)) attnL_error(L);
      t = *box;
      lua_rawseti(L, holder, (lua_Integer)lua_rawlen(L, holder) + 1);
    }
    ts[i] = t;
  }
}

/* attn.vstack(list): rows; 1-d inputs [n] become [1, n] (torch.vstack). */
static int l_vstack(lua_State *L) {
  const attn_tensor **ts;
  lua_settop(L, 1);
  int n = nonempty_list(L, &ts, "vstack");
  promote(L, n, ts, 2);
  return cat_checked(L, "vstack", n, ts, cat_reference(L, "vstack", n, ts), 0);
}

/* attn.hstack(list): 1-d inputs are joined along dim 1, others along dim 2
   (torch.hstack; 0-d inputs count as [1]). */
static int l_hstack(lua_State *L) {
  const attn_tensor **ts;
  lua_settop(L, 1);
  int n = nonempty_list(L, &ts, "hstack");
  promote(L, n, ts, 1);
  /* every input has >= 1 dim, and a first input with >= 2 makes every
     other non-skipped one need as many: dim is always valid */
  int dim = ts[0]->ndim == 1 ? 0 : 1;
  return cat_checked(L, "hstack", n, ts, cat_reference(L, "hstack", n, ts), dim);
}

/* ------------------------------------------------------------------------ */
/* index_select / gather                                                     */

/* t:index_select(dim, index): index is a 1-d tensor or table of 1-based
   positions along dim. */
static int l_index_select(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "index_select", "input");
  if (t->ndim == 0) return attnL_raise(L, "index_select: cannot index a 0-d tensor");
  int dim = attnL_checkdim(L, 2, t->ndim, 0, "index_select");
  attn_tensor *idx = attnL_checkindex(L, 3, t->shape[dim], "index_select", "index");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_index_select(t, dim, idx, box));
}

/* t:gather(dim, index): out[i][j] = t[i][index[i][j]] for dim 2 (torch.gather
   with 1-based index values). */
static int l_gather(lua_State *L) {
  char sa[128], sb[128];
  attn_tensor *t = attnL_totensor(L, 1, "gather", "input");
  if (t->ndim == 0) return attnL_raise(L, "gather: cannot gather from a 0-d tensor");
  int dim = attnL_checkdim(L, 2, t->ndim, 0, "gather");
  const attn_tensor *raw = attnL_totensor(L, 3, "gather", "index");
  if (attn_tensor_numel(raw) > 0 && raw->ndim == t->ndim)
    for (int d = 0; d < t->ndim; d++)
      if (d != dim && raw->shape[d] > t->shape[d])
        return attnL_raise(L,
                           "gather: index %s does not fit the input %s: size %d > %d at dim %d (only dim %d may be "
                           "larger)",
                           attn_shape_str(raw->ndim, raw->shape, sa, sizeof sa),
                           attn_shape_str(t->ndim, t->shape, sb, sizeof sb), (int)raw->shape[d], (int)t->shape[d],
                           d + 1, dim + 1);
  attn_tensor *idx = attnL_checkindex(L, 3, t->shape[dim], "gather", "index");
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_gather(t, dim, idx, box));
}

/* ------------------------------------------------------------------------ */
/* split / chunk                                                             */

/* Owns the core's array of pieces until each one is in a Lua box, so an
   error (out of memory) in between cannot leak them. */
typedef struct {
  int n;
  attn_tensor **outs;
} pieces;

static int pieces_gc(lua_State *L) {
  pieces *p = luaL_checkudata(L, 1, PIECES_MT);
  if (p->outs) {
    for (int i = 0; i < p->n; i++) attn_tensor_release(p->outs[i]);
    free(p->outs);
    p->outs = NULL;
  }
  return 0;
}

static pieces *new_pieces(lua_State *L) {
  pieces *p = lua_newuserdatauv(L, sizeof *p, 0);
  p->n = 0;
  p->outs = NULL;
  luaL_setmetatable(L, PIECES_MT);
  return p;
}

/* Completes a split/chunk call: the views as multiple return values, like
   torch's tuple (local q, k, v = x:chunk(3, -1); {x:split(n)} for a list). */
static int push_pieces(lua_State *L, pieces *p, attn_status st, const char *fn) {
  if (st) return attnL_error(L);
  if (!lua_checkstack(L, p->n + LUA_MINSTACK))
    return attnL_raise(L, "%s: %d pieces are more than Lua can return at once; use larger pieces or x:narrow", fn,
                       p->n);
  for (int i = 0; i < p->n; i++) {
    attn_tensor **box = attnL_newbox(L);
    *box = p->outs[i];
    p->outs[i] = NULL;
    attnL_account(L, box);
  }
  free(p->outs);
  p->outs = NULL;
  return p->n;
}

/* t:split(size, dim?) -> pieces of `size` (the last may be smaller);
   t:split({s1, s2, ...}, dim?) -> pieces of those sizes.  Views of t. */
static int l_split(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "split", "input");
  if (t->ndim == 0) return attnL_raise(L, "split: cannot split a 0-d tensor");
  int dim = attnL_optdim(L, 3, t->ndim, 0, "split");
  int64_t m = t->shape[dim];
  if (lua_type(L, 2) == LUA_TTABLE) {
    int ns = (int)lua_rawlen(L, 2);
    int64_t *sizes = lua_newuserdatauv(L, sizeof *sizes * (size_t)(ns ? ns : 1), 0);
    int64_t sum = 0;
    for (int i = 0; i < ns; i++) {
      lua_rawgeti(L, 2, i + 1);
      sizes[i] = attnL_checkint(L, -1, "split", "sizes");
      lua_pop(L, 1);
      if (sizes[i] < 0) return attnL_raise(L, "split: size %d at position %d is negative", (int)sizes[i], i + 1);
      if (sum <= m) sum += sizes[i] <= m ? sizes[i] : m + 1;
    }
    if (sum != m) {
      char sb[128];
      attn_shape_str(ns, sizes, sb, sizeof sb);
      for (char *c = sb; *c; c++) *c = *c == '[' ? '{' : *c == ']' ? '}' : *c; /* a Lua table */
      return attnL_raise(L, "split: sizes %s must add up to %d, the size of dim %d", sb, (int)m, dim + 1);
    }
    pieces *p = new_pieces(L);
    return push_pieces(L, p, attn_split_sizes(t, ns, sizes, dim, &p->n, &p->outs), "split");
  }
  int64_t size = attnL_checkint(L, 2, "split", "size");
  if (size < 0) return attnL_raise(L, "split: split size must be non-negative (got %d)", (int)size);
  if (size == 0 && m > 0)
    return attnL_raise(L, "split: split size can only be 0 if dim %d is empty (it has size %d)", dim + 1, (int)m);
  pieces *p = new_pieces(L);
  return push_pieces(L, p, attn_split(t, size, dim, &p->n, &p->outs), "split");
}

/* t:chunk(n, dim?) -> at most n views of ceil(size / n) (torch.chunk). */
static int l_chunk(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "chunk", "input");
  if (t->ndim == 0) return attnL_raise(L, "chunk: cannot chunk a 0-d tensor");
  int64_t chunks = attnL_checkint(L, 2, "chunk", "chunks");
  int dim = attnL_optdim(L, 3, t->ndim, 0, "chunk");
  pieces *p = new_pieces(L);
  return push_pieces(L, p, attn_chunk(t, chunks, dim, &p->n, &p->outs), "chunk");
}

/* t:unbind(dim?) -> the size(dim) slices along dim, each without that dim,
   as multiple return values (torch.unbind's tuple). */
static int l_unbind(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "unbind", "input");
  if (t->ndim == 0) return attnL_raise(L, "unbind: cannot unbind a 0-d tensor");
  int dim = attnL_optdim(L, 2, t->ndim, 0, "unbind");
  int64_t n = t->shape[dim];
  if (n > INT_MAX - LUA_MINSTACK || !lua_checkstack(L, (int)n + LUA_MINSTACK))
    return attnL_raise(L,
                       "unbind: %I slices are more than Lua can return at once; use x:select(dim, i) or "
                       "x:split(size, dim)",
                       (lua_Integer)n);
  for (int64_t i = 0; i < n; i++) {
    attn_tensor **box = attnL_newbox(L);
    if (attn_select(t, dim, i, box)) return attnL_error(L);
    attnL_account(L, box);
  }
  return (int)n;
}

/* ------------------------------------------------------------------------ */
/* repeat / flip                                                             */

/* Integers given as varargs from arg on, or as one table at arg. */
static int check_int_list(lua_State *L, int arg, int64_t *v, const char *fn, const char *what) {
  int n = 0;
  if (lua_type(L, arg) == LUA_TTABLE) {
    int len = (int)lua_rawlen(L, arg);
    if (len > ATTN_MAX_DIMS) attnL_raise(L, "%s: %d %s given, at most %d supported", fn, len, what, ATTN_MAX_DIMS);
    for (int i = 1; i <= len; i++) {
      lua_rawgeti(L, arg, i);
      if (lua_isnil(L, -1)) attnL_raise(L, "%s: entry %d of the %s is nil (expected an integer)", fn, i, what);
      v[n++] = attnL_checkint(L, -1, fn, what);
      lua_pop(L, 1);
    }
  } else {
    int top = lua_gettop(L);
    if (top - arg + 1 > ATTN_MAX_DIMS)
      attnL_raise(L, "%s: %d %s given, at most %d supported", fn, top - arg + 1, what, ATTN_MAX_DIMS);
    for (int i = arg; i <= top; i++) {
      if (lua_isnil(L, i)) attnL_raise(L, "%s: entry %d of the %s is nil (expected an integer)", fn, i - arg + 1, what);
      v[n++] = attnL_checkint(L, i, fn, what);
    }
  }
  return n;
}

/* t:rep(r1, r2, ...) or t:rep({r1, ...}): torch.Tensor.repeat, tiling t
   r_i times along dim i (extra leading counts add dims).  Lua's `repeat`
   is a reserved word, so t:repeat(...) does not parse; the same function
   is registered as "repeat" too, for attn["repeat"](t, 2, 3) and
   t["repeat"](t, 2, 3). */
static int l_repeat(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "repeat", "input");
  int64_t reps[ATTN_MAX_DIMS];
  int n = check_int_list(L, 2, reps, "repeat", "repeat counts");
  for (int i = 0; i < n; i++)
    if (reps[i] < 0) return attnL_raise(L, "repeat: repeat count %d at position %d is negative", (int)reps[i], i + 1);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_repeat(t, n, reps, box));
}

/* t:flip(d1, d2, ...) or t:flip({d1, ...}): reverses the order along the
   given (1-based or negative) dims; a fresh tensor. */
static int l_flip(lua_State *L) {
  attn_tensor *t = attnL_totensor(L, 1, "flip", "input");
  int dims[ATTN_MAX_DIMS], n = 0;
  bool seen[ATTN_MAX_DIMS + 1] = {false};
  int table = lua_type(L, 2) == LUA_TTABLE;
  int count = table ? (int)lua_rawlen(L, 2) : lua_gettop(L) - 1;
  if (count > ATTN_MAX_DIMS) return attnL_raise(L, "flip: %d dims given, at most %d supported", count, ATTN_MAX_DIMS);
  for (int i = 0; i < count; i++) {
    int arg = i + 2;
    if (table) {
      lua_rawgeti(L, 2, i + 1);
      arg = lua_gettop(L);
    }
    int d = attnL_checkdim(L, arg, t->ndim, 0, "flip");
    if (table) lua_pop(L, 1);
    if (seen[d]) return attnL_raise(L, "flip: dim %d appears more than once", d + 1);
    seen[d] = true;
    dims[n++] = d;
  }
  if (t->ndim == 0) n = 0; /* dim 1 of a 0-d tensor: nothing to reverse */
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_flip(t, n, dims, box));
}

/* ------------------------------------------------------------------------ */

static const luaL_Reg module_fns[] = {
    {"cat", l_cat}, {"stack", l_stack}, {"vstack", l_vstack}, {"hstack", l_hstack}, {NULL, NULL}};

static const luaL_Reg methods[] = {{"tril", l_tril},     {"triu", l_triu},     {"index_select", l_index_select},
                                   {"gather", l_gather}, {"split", l_split},   {"chunk", l_chunk},
                                   {"unbind", l_unbind}, {"repeat", l_repeat}, {"rep", l_repeat},
                                   {"flip", l_flip},     {NULL, NULL}};

void attnL_open_shape(lua_State *L, int module, int methods_idx) {
  luaL_newmetatable(L, PIECES_MT);
  lua_pushcfunction(L, pieces_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  attnL_register(L, module, 0, module_fns);
  attnL_register(L, module, methods_idx, methods);
}
