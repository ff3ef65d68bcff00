/* SPDX-License-Identifier: MIT */
/* Lua binding: attn.plot, argument conversion for the plot room.
 *
 * Registered as attn.core._plot and wrapped by lua/attn/app/plot.lua, which
 * documents the options and checks their names:
 *   _plot.heatmap(m, opts)      m: 2-d tensor or nested table [rows, cols]
 *                               (a 1-d one is a single row)
 *   _plot.histogram(v, opts)    v: tensor or list, flattened
 *   _plot.lines(series, opts)   series: list of {y =, x =, label =}
 *   _plot.attention_grid(t, opts)  t: [layers, heads, queries, keys]
 *       -> path, layout   (layout: plot area, ranges, what was drawn)
 *   _plot.colormap(name, t) -> r, g, b in [0, 1]
 *   _plot.colormaps() -> list of names
 *   _plot.pixel_stats(path [, x, y [, w, h]]) -> {width, height, colors,
 *       nonwhite, pixels, lightest, darkest, pixel}   (reads a PNG back,
 *       for tests)
 *   _plot.png_diff(a, b) -> {width, height, mean_abs, differing}
 *       (two PNGs compared, for screenshot tests)
 *
 * The drawing is src/plot (attn_plot.h: checks, layout, cairo, the atomic
 * file write).  This file only reads Lua values into its structs, counts
 * from 1 where Lua does (default labels and x values, positions named in
 * messages), calls it and pushes the result.  Everything is converted
 * before the C call, which runs no Lua code and owns no Lua object: data
 * buffers are userdata and strings stay anchored on the stack, so an
 * error anywhere leaks nothing.
 */
#include "binding.h"
#include "openers.h"
#include "plot/attn_plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* luaL_error with C's printf formats (%g; lua_pushfstring has none). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int
plot_error(lua_State *L, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  attnL_where(L);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

/* opts[key] as a finite number, or NaN (the C side's "not given"); the
   binding's option family checks the type. */
static double opt_number(lua_State *L, int opts, const char *key, const char *fn) {
  int i = attnL_option_field(L, opts, key);
  double v = attnL_option_number(L, i, fn, key, NAN);
  if (!lua_isnil(L, i) && !isfinite(v)) plot_error(L, "%s: option '%s' must be a finite number (got %f)", fn, key, v);
  lua_pop(L, 1);
  return v;
}

/* The options table at arg and its required path. */
static const char *check_opts(lua_State *L, int arg, const char *fn) {
  luaL_checktype(L, arg, LUA_TTABLE);
  const char *path = attnL_option_string(L, attnL_option_field(L, arg, "path"), fn, "path", NULL);
  if (!path || !*path) plot_error(L, "%s: option 'path' is required (a .png, .svg or .pdf file name)", fn);
  return path;
}

/* What every figure takes besides the path, in two steps (the order in
   which option errors are reported). */
static void read_labels(lua_State *L, int opts, attn_plot_figure *fig, const char *fn) {
  fig->title = attnL_option_string(L, attnL_option_field(L, opts, "title"), fn, "title", NULL);
  fig->xlabel = attnL_option_string(L, attnL_option_field(L, opts, "xlabel"), fn, "xlabel", NULL);
  fig->ylabel = attnL_option_string(L, attnL_option_field(L, opts, "ylabel"), fn, "ylabel", NULL);
  fig->index_base = 1; /* default labels and x values count as Lua does */
}

static void read_size(lua_State *L, int opts, attn_plot_figure *fig, const char *fn) {
  fig->width = opt_number(L, opts, "width", fn);
  fig->height = opt_number(L, opts, "height", fn);
}

/* The elements of tensor t, row-major, as doubles in a Lua-owned buffer
   pushed on the stack. */
static double *tensor_values(lua_State *L, const attn_tensor *t, int64_t *n_out, const char *fn) {
  int64_t n = attn_tensor_numel(t);
  if ((uint64_t)n > SIZE_MAX / sizeof(double) / 2) plot_error(L, "%s: %lld values are too many", fn, (long long)n);
  double *v = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(double), 0);
  for (int64_t i = 0; i < n; i++) v[i] = attn_tensor_get_flat(t, i);
  *n_out = n;
  return v;
}

/* The values at idx, flattened, as doubles in a Lua-owned buffer pushed
   on the stack: a tensor (any strides), a flat list of numbers (kept in
   double precision) or a nested table (through a float32 tensor). */
static double *values_at(lua_State *L, int idx, int64_t *n_out, const char *fn, const char *arg) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TTABLE) {
    lua_rawgeti(L, idx, 1);
    int flat = lua_type(L, -1) != LUA_TTABLE;
    lua_pop(L, 1);
    if (flat) {
      lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
      if ((lua_Unsigned)n > SIZE_MAX / sizeof(double) / 2) plot_error(L, "%s: '%s' is too long", fn, arg);
      double *v = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(double), 0);
      for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        v[i - 1] = lua_tonumber(L, -1);
        if (lua_type(L, -1) != LUA_TNUMBER)
          plot_error(L, "%s: '%s' must hold numbers: entry %d is a %s", fn, arg, (int)i, luaL_typename(L, -1));
        lua_pop(L, 1);
      }
      *n_out = (int64_t)n;
      return v;
    }
  }
  attn_tensor *t = attnL_totensor(L, idx, fn, arg);
  return tensor_values(L, t, n_out, fn);
}

static void set_number(lua_State *L, const char *key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}

static void push_rect(lua_State *L, const attn_plot_rect *r) {
  lua_createtable(L, 0, 4);
  set_number(L, "x", r->x);
  set_number(L, "y", r->y);
  set_number(L, "w", r->w);
  set_number(L, "h", r->h);
}

/* Pushes path and the layout table with what every kind has. */
static void push_layout(lua_State *L, const char *path, const attn_plot_layout *lay) {
  lua_pushstring(L, path);
  push_rect(L, &lay->area);
  set_number(L, "width", lay->width);
  set_number(L, "height", lay->height);
}

static void set_view(lua_State *L, const attn_plot_layout *lay) {
  set_number(L, "xmin", lay->xmin);
  set_number(L, "xmax", lay->xmax);
  set_number(L, "ymin", lay->ymin);
  set_number(L, "ymax", lay->ymax);
}

/* ------------------------------------------------------------------------ */
/* heatmap                                                                   */

/* opts[key]: NULL, or a list of exactly n strings (a pointer array in a
   userdata on the stack; the strings are anchored in the list, which
   stays there too). */
static const char *const *read_label_list(lua_State *L, int opts, const char *key, int64_t n, const char *fn,
                                          const char *what) {
  int ty = lua_getfield(L, opts, key);
  if (ty == LUA_TNIL) {
    lua_pop(L, 1);
    return NULL;
  }
  if (ty != LUA_TTABLE)
    plot_error(L, "%s: option '%s' must be a list of strings (got %s)", fn, key, luaL_typename(L, -1));
  int t = lua_gettop(L);
  lua_Integer len = (lua_Integer)lua_rawlen(L, t);
  if (len != n) plot_error(L, "%s: option '%s' has %d labels for %d %s", fn, key, (int)len, (int)n, what);
  const char **s = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(char *), 0);
  for (lua_Integer i = 1; i <= len; i++) {
    if (lua_rawgeti(L, t, i) != LUA_TSTRING)
      plot_error(L, "%s: option '%s': label %d must be a string (got %s)", fn, key, (int)i, luaL_typename(L, -1));
    s[i - 1] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return s;
}

/* attn.core._plot.heatmap(m, opts) */
static int l_heatmap(lua_State *L) {
  const char *fn = "heatmap";
  attn_tensor *t = attnL_totensor(L, 1, fn, "m");
  attn_plot_heatmap h;
  attn_plot_heatmap_init(&h);
  h.fig.path = check_opts(L, 2, fn);
  if (t->ndim == 2) {
    h.rows = t->shape[0];
    h.cols = t->shape[1];
  } else if (t->ndim == 1) {
    h.rows = 1;
    h.cols = t->shape[0];
  } else {
    return plot_error(L, "%s: the matrix must be 2-d (got %d dims)", fn, t->ndim);
  }
  attn_plot_layout lay;
  /* A shape the C side refuses: let it say so before converting anything. */
  if (h.rows == 0 || h.cols == 0 || h.rows > ATTN_PLOT_MAX_SIDE || h.cols > ATTN_PLOT_MAX_SIDE) {
    attn_plot_heatmap_draw(&h, &lay);
    return attnL_error(L);
  }
  int64_t n;
  h.values = tensor_values(L, t, &n, fn);
  h.row_labels = read_label_list(L, 2, "row_labels", h.rows, fn, "rows");
  h.col_labels = read_label_list(L, 2, "col_labels", h.cols, fn, "columns");
  h.cmap = attnL_option_string(L, attnL_option_field(L, 2, "cmap"), fn, "cmap", "viridis");
  read_labels(L, 2, &h.fig, fn);
  h.colorbar = attnL_option_bool(L, attnL_option_field(L, 2, "colorbar"), fn, "colorbar", true);
  /* annotate: true (automatic format), false, or a format string */
  int ty = lua_getfield(L, 2, "annotate");
  if (ty == LUA_TSTRING) {
    h.annotate = lua_tostring(L, -1); /* stays on the stack */
  } else if (ty == LUA_TBOOLEAN || ty == LUA_TNIL) {
    if (lua_toboolean(L, -1)) h.annotate = "";
    lua_pop(L, 1);
  } else {
    return plot_error(L, "%s: option 'annotate' must be a boolean or a format string (got %s)", fn,
                      luaL_typename(L, -1));
  }
  h.vmin = opt_number(L, 2, "vmin", fn);
  h.vmax = opt_number(L, 2, "vmax", fn);
  read_size(L, 2, &h.fig, fn);
  if (attn_plot_heatmap_draw(&h, &lay) != ATTN_OK) return attnL_error(L);

  push_layout(L, h.fig.path, &lay);
  set_number(L, "rows", (double)lay.rows);
  set_number(L, "cols", (double)lay.cols);
  set_number(L, "vmin", lay.vmin);
  set_number(L, "vmax", lay.vmax);
  lua_pushboolean(L, lay.rotated_col_labels);
  lua_setfield(L, -2, "rotated_col_labels");
  if (lay.has_colorbar) {
    push_rect(L, &lay.colorbar);
    lua_setfield(L, -2, "colorbar");
  }
  return 2;
}

/* ------------------------------------------------------------------------ */
/* attention_grid                                                            */

/* attn.core._plot.attention_grid(t, opts): t is [rows, cols, queries, keys]
   (app/plot.lua selects and stacks the layers and heads); opts row_labels,
   col_labels, tokens (queries), source_tokens (keys) are lists of strings
   or nil. */
static int l_attention_grid(lua_State *L) {
  const char *fn = "attention_grid";
  attn_tensor *t = attnL_totensor(L, 1, fn, "maps");
  attn_plot_grid g;
  attn_plot_grid_init(&g);
  g.fig.path = check_opts(L, 2, fn);
  if (t->ndim != 4)
    return plot_error(L, "%s: the maps must be [layers, heads, queries, keys] (got %d dims)", fn, t->ndim);
  g.rows = t->shape[0];
  g.cols = t->shape[1];
  g.queries = t->shape[2];
  g.keys = t->shape[3];
  attn_plot_layout lay;
  /* A shape the C side refuses: let it say so before converting anything. */
  if (g.rows == 0 || g.cols == 0 || g.queries == 0 || g.keys == 0 || g.queries > ATTN_PLOT_MAX_SIDE ||
      g.keys > ATTN_PLOT_MAX_SIDE || g.rows > ATTN_PLOT_GRID_MAX_MAPS || g.cols > ATTN_PLOT_GRID_MAX_MAPS) {
    attn_plot_grid_draw(&g, NULL, &lay);
    return attnL_error(L);
  }
  int64_t n;
  g.values = tensor_values(L, t, &n, fn);
  g.row_labels = read_label_list(L, 2, "row_labels", g.rows, fn, "layers");
  g.col_labels = read_label_list(L, 2, "col_labels", g.cols, fn, "heads");
  g.query_labels = read_label_list(L, 2, "tokens", g.queries, fn, "queries");
  g.key_labels = read_label_list(L, 2, "source_tokens", g.keys, fn, "keys");
  g.cmap = attnL_option_string(L, attnL_option_field(L, 2, "cmap"), fn, "cmap", "viridis");
  read_labels(L, 2, &g.fig, fn);
  g.colorbar = attnL_option_bool(L, attnL_option_field(L, 2, "colorbar"), fn, "colorbar", true);
  g.vmin = opt_number(L, 2, "vmin", fn);
  g.vmax = opt_number(L, 2, "vmax", fn);
  g.cell = opt_number(L, 2, "cell", fn);
  attn_plot_rect *cells = lua_newuserdatauv(L, (size_t)(g.rows * g.cols) * sizeof *cells, 0);
  if (attn_plot_grid_draw(&g, cells, &lay) != ATTN_OK) return attnL_error(L);

  push_layout(L, g.fig.path, &lay);
  set_number(L, "rows", (double)lay.rows);
  set_number(L, "cols", (double)lay.cols);
  set_number(L, "vmin", lay.vmin);
  set_number(L, "vmax", lay.vmax);
  set_number(L, "cell", lay.cell);
  lua_pushboolean(L, lay.query_labels);
  lua_setfield(L, -2, "query_labels");
  lua_pushboolean(L, lay.key_labels);
  lua_setfield(L, -2, "key_labels");
  lua_pushboolean(L, lay.rotated_col_labels);
  lua_setfield(L, -2, "rotated_key_labels");
  if (lay.has_colorbar) {
    push_rect(L, &lay.colorbar);
    lua_setfield(L, -2, "colorbar");
  }
  lua_createtable(L, (int)(g.rows * g.cols), 0);
  for (int64_t k = 0; k < g.rows * g.cols; k++) {
    push_rect(L, &cells[k]);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  lua_setfield(L, -2, "cells");
  return 2;
}

/* ------------------------------------------------------------------------ */
/* histogram                                                                 */

/* attn.core._plot.histogram(values, opts) */
static int l_histogram(lua_State *L) {
  const char *fn = "histogram";
  attn_plot_histogram h;
  attn_plot_histogram_init(&h);
  h.fig.path = check_opts(L, 2, fn);
  h.values = values_at(L, 1, &h.n, fn, "values");
  attn_plot_layout lay;
  if (h.n == 0) { /* refused by the C side before any option */
    attn_plot_histogram_draw(&h, NULL, NULL, &lay);
    return attnL_error(L);
  }

  int ty = lua_getfield(L, 2, "bins");
  if (ty == LUA_TNUMBER) {
    double b = lua_tonumber(L, -1);
    if (!lua_isinteger(L, -1) && b != floor(b))
      return plot_error(L, "%s: option 'bins' must be a whole number (got %g)", fn, b);
    if (!lua_isinteger(L, -1) && !(b > -0x1p63 && b < 0x1p63)) /* no int64: the C side's message */
      return plot_error(L, "%s: option 'bins' must be 1 to %d (got %g)", fn, ATTN_PLOT_MAX_BINS, b);
    h.bins = lua_isinteger(L, -1) ? (int64_t)lua_tointeger(L, -1) : (int64_t)b;
  } else if (ty == LUA_TTABLE) {
    int bt = lua_gettop(L);
    lua_Integer ne = (lua_Integer)lua_rawlen(L, bt);
    if (ne < 2 || ne > ATTN_PLOT_MAX_BINS + 1)
      return plot_error(L, "%s: option 'bins' as edges needs 2 to %d of them (got %d)", fn, ATTN_PLOT_MAX_BINS + 1,
                        (int)ne);
    double *edges = lua_newuserdatauv(L, (size_t)ne * sizeof(double), 0);
    for (lua_Integer i = 1; i <= ne; i++) {
      lua_rawgeti(L, bt, i);
      double e = lua_tonumber(L, -1);
      int isnum = lua_type(L, -1) == LUA_TNUMBER;
      lua_pop(L, 1);
      if (!isnum || !isfinite(e)) return plot_error(L, "%s: bin edge %d must be a finite number", fn, (int)i);
      if (i > 1 && !(e > edges[i - 2]))
        return plot_error(L, "%s: bin edges must increase (edge %d is %g after %g)", fn, (int)i, e, edges[i - 2]);
      edges[i - 1] = e;
    }
    h.edges = edges;
    h.bins = (int64_t)ne - 1;
  } else if (ty != LUA_TNIL) {
    return plot_error(L, "%s: option 'bins' must be a count or a list of edges (got %s)", fn, luaL_typename(L, -1));
  }
  /* the bins value (and the edges buffer) stay on the stack */
  ty = lua_getfield(L, 2, "range");
  if (ty == LUA_TTABLE) {
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    int isnum1 = lua_type(L, -2) == LUA_TNUMBER, isnum2 = lua_type(L, -1) == LUA_TNUMBER;
    h.range[0] = lua_tonumber(L, -2);
    h.range[1] = lua_tonumber(L, -1);
    lua_pop(L, 2);
    if (!isnum1 || !isnum2 || !isfinite(h.range[0]) || !isfinite(h.range[1]) || lua_rawlen(L, -1) != 2)
      return plot_error(L, "%s: option 'range' must be {low, high} with finite numbers", fn);
  } else if (ty != LUA_TNIL) {
    return plot_error(L, "%s: option 'range' must be a table {low, high} (got %s)", fn, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  h.density = attnL_option_bool(L, attnL_option_field(L, 2, "density"), fn, "density", false);
  read_labels(L, 2, &h.fig, fn);
  read_size(L, 2, &h.fig, fn);

  /* Results: the counts and edges the C side fills (bins is checked there
     before they are touched; a refused count gets no buffers). */
  double *counts = NULL, *edges = NULL;
  if (h.bins >= 1 && h.bins <= ATTN_PLOT_MAX_BINS) {
    counts = lua_newuserdatauv(L, (size_t)h.bins * sizeof(double), 0);
    edges = lua_newuserdatauv(L, (size_t)(h.bins + 1) * sizeof(double), 0);
  }
  if (attn_plot_histogram_draw(&h, counts, edges, &lay) != ATTN_OK) return attnL_error(L);

  push_layout(L, h.fig.path, &lay);
  set_view(L, &lay);
  lua_createtable(L, (int)h.bins, 0);
  for (int64_t i = 0; i < h.bins; i++) {
    if (h.density)
      lua_pushnumber(L, counts[i]);
    else
      lua_pushinteger(L, (lua_Integer)counts[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "counts");
  lua_createtable(L, (int)h.bins + 1, 0);
  for (int64_t i = 0; i <= h.bins; i++) {
    lua_pushnumber(L, edges[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "edges");
  return 2;
}

/* ------------------------------------------------------------------------ */
/* lines                                                                     */

/* attn.core._plot.lines(series, opts) */
static int l_lines(lua_State *L) {
  const char *fn = "lines";
  luaL_checktype(L, 1, LUA_TTABLE);
  attn_plot_lines l;
  attn_plot_lines_init(&l);
  l.fig.path = check_opts(L, 2, fn);
  read_labels(L, 2, &l.fig, fn);
  l.logy = attnL_option_bool(L, attnL_option_field(L, 2, "logy"), fn, "logy", false);
  read_size(L, 2, &l.fig, fn);
  lua_Integer ns = (lua_Integer)lua_rawlen(L, 1);
  l.nseries = (int64_t)ns;
  attn_plot_layout lay;
  if (ns == 0 || ns > ATTN_PLOT_MAX_SERIES) { /* refused by the C side by the count */
    attn_plot_lines_draw(&l, &lay);
    return attnL_error(L);
  }
  attn_plot_series *s = lua_newuserdatauv(L, (size_t)ns * sizeof *s, 0);
  memset(s, 0, (size_t)ns * sizeof *s);
  lua_createtable(L, (int)ns * 3, 0); /* holder: buffers and labels */
  int holder = lua_gettop(L);
  for (lua_Integer k = 1; k <= ns; k++) {
    attn_plot_series *sk = &s[k - 1];
    if (lua_rawgeti(L, 1, k) != LUA_TTABLE)
      return plot_error(L, "%s: series %d must be a table {y = ..., x = ..., label = ...} (got %s)", fn, (int)k,
                        luaL_typename(L, -1));
    int st = lua_gettop(L);
    if (lua_getfield(L, st, "y") == LUA_TNIL) return plot_error(L, "%s: series %d has no 'y'", fn, (int)k);
    char argname[32];
    snprintf(argname, sizeof argname, "series[%d].y", (int)k);
    sk->y = values_at(L, -1, &sk->n, fn, argname);
    if (sk->n == 0) return plot_error(L, "%s: series %d is empty", fn, (int)k);
    lua_rawseti(L, holder, 3 * k - 2); /* the buffer */
    lua_pop(L, 1);                     /* y */
    if (lua_getfield(L, st, "x") != LUA_TNIL) {
      int64_t nx;
      snprintf(argname, sizeof argname, "series[%d].x", (int)k);
      sk->x = values_at(L, -1, &nx, fn, argname);
      if (nx != sk->n)
        return plot_error(L, "%s: series %d has %d x values for %d y values", fn, (int)k, (int)nx, (int)sk->n);
      lua_rawseti(L, holder, 3 * k - 1);
    }
    lua_pop(L, 1); /* x */
    int lt = lua_getfield(L, st, "label");
    if (lt == LUA_TSTRING) {
      sk->label = lua_tostring(L, -1);
      lua_rawseti(L, holder, 3 * k); /* anchors the string */
    } else if (lt == LUA_TNIL) {
      lua_pop(L, 1);
    } else {
      return plot_error(L, "%s: series %d: 'label' must be a string (got %s)", fn, (int)k, luaL_typename(L, -1));
    }
    lua_pop(L, 1); /* series table */
  }
  l.series = s;
  if (attn_plot_lines_draw(&l, &lay) != ATTN_OK) return attnL_error(L);

  push_layout(L, l.fig.path, &lay);
  set_view(L, &lay);
  if (lay.has_legend) {
    push_rect(L, &lay.legend);
    lua_setfield(L, -2, "legend");
  }
  return 2;
}

/* ------------------------------------------------------------------------ */
/* Helpers for users and tests                                               */

/* attn.core._plot.colormap(name, t) -> r, g, b */
static int l_colormap(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  double t = luaL_checknumber(L, 2), rgb[3];
  if (attn_plot_colormap("colormap", name, t, rgb) != ATTN_OK) return attnL_error(L);
  for (int k = 0; k < 3; k++) lua_pushnumber(L, rgb[k]);
  return 3;
}

static int l_colormaps(lua_State *L) {
  int n = attn_plot_colormap_count();
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, attn_plot_colormap_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static void push_rgba(lua_State *L, const int c[4]) {
  lua_createtable(L, 4, 0);
  for (int k = 0; k < 4; k++) {
    lua_pushinteger(L, c[k]);
    lua_rawseti(L, -2, k + 1);
  }
}

/* attn.core._plot.pixel_stats(path [, x, y [, w, h]]): reads a PNG back.
   Coordinates are from the top-left corner, as in the layouts; with w, h
   the statistics cover that region (clipped to the image), else the whole
   image.  -> {width, height, colors (distinct), nonwhite (pixels), pixels
   (in the region), lightest, darkest (by luminance), pixel (at x, y)} */
static int l_pixel_stats(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  double xy[2] = {0, 0}, wh[2] = {0, 0};
  int want_px = !lua_isnoneornil(L, 2);
  if (want_px) {
    xy[0] = luaL_checknumber(L, 2);
    xy[1] = luaL_checknumber(L, 3);
  }
  int region = !lua_isnoneornil(L, 4);
  if (region) {
    wh[0] = luaL_checknumber(L, 4);
    wh[1] = luaL_checknumber(L, 5);
  }
  attn_plot_pixel_stats ps;
  if (attn_plot_pixel_stats_read(path, want_px ? xy : NULL, region ? wh : NULL, &ps) != ATTN_OK) return attnL_error(L);
  lua_createtable(L, 0, 8);
  set_number(L, "width", ps.width);
  set_number(L, "height", ps.height);
  lua_pushinteger(L, ps.colors);
  lua_setfield(L, -2, "colors");
  lua_pushinteger(L, ps.nonwhite);
  lua_setfield(L, -2, "nonwhite");
  lua_pushinteger(L, ps.pixels);
  lua_setfield(L, -2, "pixels");
  if (ps.has_extremes) {
    push_rgba(L, ps.lightest);
    lua_setfield(L, -2, "lightest");
    push_rgba(L, ps.darkest);
    lua_setfield(L, -2, "darkest");
  }
  if (ps.has_pixel) {
    push_rgba(L, ps.pixel);
    lua_setfield(L, -2, "pixel");
  }
  return 1;
}

/* attn.core._plot.png_diff(a, b): two PNGs of the same size compared.
   -> {width, height, mean_abs (0..255 per channel), differing (the
   fraction of pixels with a channel more than 32 apart)} */
static int l_png_diff(lua_State *L) {
  const char *a = luaL_checkstring(L, 1), *b = luaL_checkstring(L, 2);
  attn_plot_png_diff_result r;
  if (attn_plot_png_diff(a, b, &r) != ATTN_OK) return attnL_error(L);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, r.width);
  lua_setfield(L, -2, "width");
  lua_pushinteger(L, r.height);
  lua_setfield(L, -2, "height");
  set_number(L, "mean_abs", r.mean_abs);
  set_number(L, "differing", r.differing);
  return 1;
}

void attnL_open_plot(lua_State *L, int module, int methods) {
  (void)methods;
  static const luaL_Reg fns[] = {
      {"heatmap", l_heatmap},   {"histogram", l_histogram},           {"lines", l_lines},
      {"colormap", l_colormap}, {"colormaps", l_colormaps},           {"pixel_stats", l_pixel_stats},
      {"png_diff", l_png_diff}, {"attention_grid", l_attention_grid}, {NULL, NULL}};
  lua_newtable(L);
  attnL_setfuncs(L, fns);
  lua_setfield(L, module, "_plot"); /* wrapped by lua/attn/app/plot.lua */
}
