/* SPDX-License-Identifier: MIT */
/* Attention grids: layers x heads of small heatmaps (queries x keys) on one
   colour scale, with layer and head labels, the tokens along the outer
   maps and one colour bar. */
#include "plot_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define GRID_GAP 8.0       /* between maps */
#define GRID_MAP_SIDE 160  /* the automatic size of a map's longer side */
#define GRID_ROW_SPAN 1920 /* ... shrunk so that a row (column) of maps fits */
#define GRID_AUTO_MAX 32.0 /* the automatic entry size's bounds */
#define TOKEN_MIN_FS 6.0   /* token labels smaller than this are left out */
/* SVG and PDF draw the maps of grids with more entries than this as
   images (of at most GRID_IMAGE_SIDE pixels a side, some entries'
   worth each), fewer as one rectangle per entry. */
#define GRID_VECTOR_ENTRIES 4096
#define GRID_IMAGE_SIDE 1024.0

void attn_plot_grid_init(attn_plot_grid *g) {
  memset(g, 0, sizeof *g);
  g->fig.width = g->fig.height = NAN;
  g->colorbar = true;
  g->vmin = g->vmax = NAN;
  g->cell = NAN;
}

double attn_plot_grid_auto_cell(int64_t rows, int64_t cols, int64_t queries, int64_t keys) {
  int64_t n = rows > cols ? rows : cols, side = queries > keys ? queries : keys;
  if (n < 1) n = 1;
  if (side < 1) side = 1;
  double map = fmin(GRID_MAP_SIDE, (double)GRID_ROW_SPAN / (double)n);
  return fmax(1, fmin(GRID_AUTO_MAX, floor(map / (double)side)));
}

/* Label i of a list, or prefix and its number in buf. */
static const char *label_at(const char *const *list, const char *prefix, int64_t i, int base, char *buf, size_t n) {
  if (list) return list[i];
  snprintf(buf, n, "%s %lld", prefix, (long long)(i + base));
  return buf;
}

static double max_width(cairo_t *m, const char *const *list, const char *prefix, int64_t n, int base, double fs) {
  char buf[64];
  double w = 0;
  for (int64_t i = 0; i < n; i++)
    w = fmax(w, attn__plot_text_width(m, label_at(list, prefix, i, base, buf, sizeof buf), fs, 0));
  return w;
}

/* A map as an image of k x k pixels per entry (NaN transparent), drawn
   scaled to cell per entry with the nearest-pixel filter: for SVG and PDF
   grids of many entries, where one rectangle per entry would make files
   of some 200 bytes per entry. */
static attn_status draw_map_image(figure *f, const plot_cmap *cmap, const double *mv, int64_t nq, int64_t nk,
                                  double vmin, double vmax, double mx, double my, double cell) {
  int64_t side = nq > nk ? nq : nk;
  int k = (int)fmax(1, fmin(ceil(cell), floor(GRID_IMAGE_SIDE / (double)side)));
  cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)nk * k, (int)nq * k);
  if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(img);
    return attn__plot_figure_fail(f, ATTN_ERR_NOMEM, "%s: cannot make a %lld x %lld image for a map", f->fn,
                                  (long long)nk * k, (long long)nq * k);
  }
  cairo_surface_flush(img);
  unsigned char *data = cairo_image_surface_get_data(img);
  int stride = cairo_image_surface_get_stride(img);
  for (int64_t i = 0; i < nq; i++)
    for (int64_t j = 0; j < nk; j++) {
      double val = mv[i * nk + j], rgb[3];
      uint32_t px = 0; /* transparent */
      if (!isnan(val)) {
        attn__plot_cmap_eval(cmap, (val - vmin) / (vmax - vmin), rgb);
        px = 0xff000000u | (uint32_t)lround(rgb[0] * 255) << 16 | (uint32_t)lround(rgb[1] * 255) << 8 |
             (uint32_t)lround(rgb[2] * 255);
      }
      for (int a = 0; a < k; a++) {
        uint32_t *row = (uint32_t *)(data + (size_t)(i * k + a) * (size_t)stride) + j * k;
        for (int b = 0; b < k; b++) row[b] = px;
      }
    }
  cairo_surface_mark_dirty(img);
  cairo_t *cr = f->cr;
  cairo_save(cr);
  cairo_translate(cr, mx, my);
  cairo_scale(cr, cell / k, cell / k);
  cairo_set_source_surface(cr, img, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_rectangle(cr, 0, 0, (double)(nk * k), (double)(nq * k));
  cairo_fill(cr);
  cairo_restore(cr);
  cairo_surface_destroy(img);
  return ATTN_OK;
}

attn_status attn_plot_grid_draw(const attn_plot_grid *g, attn_plot_rect *cells, attn_plot_layout *layout) {
  const char *fn = "attention_grid";
  const attn_plot_figure *lb = &g->fig;
  int64_t rows = g->rows, cols = g->cols, nq = g->queries, nk = g->keys;
  if (rows <= 0 || cols <= 0 || nq <= 0 || nk <= 0)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: nothing to draw: %lld x %lld maps of [%lld, %lld] (queries, keys)", fn,
                          (long long)rows, (long long)cols, (long long)nq, (long long)nk);
  if (nq > ATTN_PLOT_MAX_SIDE || nk > ATTN_PLOT_MAX_SIDE)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: [%lld, %lld] maps are too large to draw (at most %d per side)", fn,
                          (long long)nq, (long long)nk, ATTN_PLOT_MAX_SIDE);
  /* Maps are 8 units apart: more than a figure holds are refused before
     their count is multiplied. */
  if (rows > ATTN_PLOT_GRID_MAX_MAPS || cols > ATTN_PLOT_GRID_MAX_MAPS)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: %lld x %lld maps do not fit in a figure (at most %d a side)", fn,
                          (long long)rows, (long long)cols, ATTN_PLOT_GRID_MAX_MAPS);
  if (!g->values) return attn_set_error(ATTN_ERR_ARG, "%s: values is NULL", fn);
  attn_status st = attn__plot_check_labels(fn, "row_labels", g->row_labels, rows);
  if (st == ATTN_OK) st = attn__plot_check_labels(fn, "col_labels", g->col_labels, cols);
  if (st == ATTN_OK) st = attn__plot_check_labels(fn, "query_labels", g->query_labels, nq);
  if (st == ATTN_OK) st = attn__plot_check_labels(fn, "key_labels", g->key_labels, nk);
  if (st == ATTN_OK) st = attn__plot_check_limit(fn, "vmin", g->vmin);
  if (st == ATTN_OK) st = attn__plot_check_limit(fn, "vmax", g->vmax);
  if (st != ATTN_OK) return st;
  const char *cmap_name = g->cmap ? g->cmap : "viridis";
  const plot_cmap *cmap = attn__plot_cmap_find(cmap_name);
  if (!cmap) return attn_set_error(ATTN_ERR_ARG, "%s: unknown cmap '%s' (known: " PLOT_CMAP_NAMES ")", fn, cmap_name);
  double cell = g->cell;
  if (!isnan(cell) && !(cell >= ATTN_PLOT_GRID_CELL_MIN && cell <= ATTN_PLOT_GRID_CELL_MAX))
    return attn_set_error(ATTN_ERR_ARG, "%s: option 'cell' must be %g to %g (got %g)", fn, ATTN_PLOT_GRID_CELL_MIN,
                          ATTN_PLOT_GRID_CELL_MAX, cell);
  if (isnan(cell)) cell = attn_plot_grid_auto_cell(rows, cols, nq, nk);
  st = attn__plot_figure_check(fn, lb);
  if (st != ATTN_OK) return st;
  int base = lb->index_base;
  const double *v = g->values;
  int64_t n = rows * cols * nq * nk;

  /* Colour limits: 0 (or the data's minimum, below 0) to the maximum. */
  double lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(v[i])) continue;
    lo = fmin(lo, v[i]);
    hi = fmax(hi, v[i]);
  }
  int vmin_given = !isnan(g->vmin), vmax_given = !isnan(g->vmax);
  if ((!vmin_given || !vmax_given) && lo > hi)
    return attn_set_error(ATTN_ERR_ARG, "%s: the maps have no finite values (give vmin and vmax to draw them)", fn);
  double vmin = vmin_given ? g->vmin : fmin(0, lo), vmax = vmax_given ? g->vmax : hi;
  if (vmin > vmax) return attn_set_error(ATTN_ERR_ARG, "%s: vmin (%g) is above vmax (%g)", fn, vmin, vmax);
  if (vmin == vmax) { /* one value: centre it in a unit range */
    vmin -= 0.5;
    vmax += 0.5;
  }

  figure fig, *f = &fig;
  st = attn__plot_figure_open(f, fn, lb);
  if (st != ATTN_OK) return st;
  cairo_t *m = f->m;
  const char *const *rl = g->row_labels, *const *cl = g->col_labels;
  const char *const *ql = g->query_labels, *const *kl = g->key_labels;
  double mw = cell * (double)nk, mh = cell * (double)nq; /* a map */
  double gw = mw * (double)cols + GRID_GAP * (double)(cols - 1), gh = mh * (double)rows + GRID_GAP * (double)(rows - 1);

  /* Token labels: as large as an entry allows, up to the tick size. */
  double tfs = fmin(FS_TICK, cell * 0.85);
  int show_q = ql && tfs >= TOKEN_MIN_FS, show_k = kl && tfs >= TOKEN_MIN_FS;
  double qw = show_q ? max_width(m, ql, "", nq, base, tfs) : 0;
  double kw = show_k ? max_width(m, kl, "", nk, base, tfs) : 0;
  double lh_t = attn__plot_line_height(m, tfs), lh_label = attn__plot_line_height(m, FS_LABEL);
  int rotate = show_k && kw + 4 > cell;
  /* Head labels shrink to fit their maps (down to the token minimum). */
  double hfs = FS_LABEL, hw = max_width(m, cl, "head", cols, base, FS_LABEL);
  if (hw + 4 > mw + GRID_GAP) hfs = fmax(TOKEN_MIN_FS, FS_LABEL * (mw + GRID_GAP) / (hw + 4));
  double lh_head = attn__plot_line_height(m, hfs);
  double rw = max_width(m, rl, "layer", rows, base, FS_LABEL);

  double left = PAD + (lb->ylabel ? lh_label + 6 : 0) + rw + 8 + (show_q ? qw + 4 : 0);
  double top = PAD + (lb->title ? attn__plot_line_height(m, FS_TITLE) + 8 : 0) + lh_head + 4;
  double bottom = PAD + (show_k ? (rotate ? kw : lh_t) + 4 : 0) + (lb->xlabel ? lh_label + 6 : 0);
  double right = PAD + (g->colorbar ? attn__plot_colorbar_room(m, vmin, vmax) : 0);
  double fw = ceil(left + gw + right), fh = ceil(top + gh + bottom);
  attn__plot_fit_figure(m, lb->title, 1, &left, &top, &fw, &fh);
  if (fw > ATTN_PLOT_MAX_SIZE || fh > ATTN_PLOT_MAX_SIZE) {
    /* The largest entry that would fit with these margins. */
    double fit = fmin((ATTN_PLOT_MAX_SIZE - (fw - gw) - GRID_GAP * (double)(cols - 1)) / (double)(cols * nk),
                      (ATTN_PLOT_MAX_SIZE - (fh - gh) - GRID_GAP * (double)(rows - 1)) / (double)(rows * nq));
    return attn__plot_figure_fail(f, ATTN_ERR_ARG,
                                  "%s: %lld x %lld maps of [%lld, %lld] at cell = %g make a %.0f x %.0f figure, above "
                                  "%.0f a side: give a smaller cell (about %.2g or less)",
                                  fn, (long long)rows, (long long)cols, (long long)nq, (long long)nk, cell, fw, fh,
                                  ATTN_PLOT_MAX_SIZE, fit);
  }
  st = attn__plot_figure_begin(f, fw, fh);
  if (st != ATTN_OK) return st;
  cairo_t *cr = f->cr;
  int png = f->fmt == FMT_PNG;
  double ax = round(left), ay = round(top);
  char buf[64];

  /* The maps, each framed. */
  int as_images = !png && n > GRID_VECTOR_ENTRIES;
  cairo_set_line_width(cr, 1);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      double mx = ax + (double)c * (mw + GRID_GAP), my = ay + (double)r * (mh + GRID_GAP);
      if (png) {
        mx = round(mx);
        my = round(my);
      }
      if (cells) cells[r * cols + c] = (attn_plot_rect){mx, my, mw, mh};
      const double *mv = v + (r * cols + c) * nq * nk;
      if (as_images) {
        st = draw_map_image(f, cmap, mv, nq, nk, vmin, vmax, mx, my, cell);
        if (st != ATTN_OK) return st;
      } else {
        attn__plot_draw_cells(f, cmap, mv, nq, nk, vmin, vmax, mx, my, cell, cell);
      }
      cairo_set_source_rgb(cr, 0, 0, 0);
      double fx0 = attn__plot_crisp(f, mx), fy0 = attn__plot_crisp(f, my), fx1 = attn__plot_crisp(f, mx + mw),
             fy1 = attn__plot_crisp(f, my + mh);
      cairo_rectangle(cr, fx0, fy0, fx1 - fx0, fy1 - fy0);
      cairo_stroke(cr);
    }

  /* Labels: heads above the first row, layers left of each row, queries
     left of the first column's maps, keys below the last row's. */
  cairo_set_source_rgb(cr, 0, 0, 0);
  for (int64_t c = 0; c < cols; c++) {
    double x = ax + (double)c * (mw + GRID_GAP) + mw / 2;
    attn__plot_draw_text(cr, label_at(cl, "head", c, base, buf, sizeof buf), x, ay - 4, hfs, 0, 0.5, 1, 0);
  }
  double rx = ax - (show_q ? qw + 4 : 0) - 8;
  for (int64_t r = 0; r < rows; r++) {
    double my = ay + (double)r * (mh + GRID_GAP);
    attn__plot_draw_text(cr, label_at(rl, "layer", r, base, buf, sizeof buf), rx, my + mh / 2, FS_LABEL, 0, 1, 0.5, 0);
    if (show_q)
      for (int64_t i = 0; i < nq; i++)
        attn__plot_draw_text(cr, ql[i], ax - 3, my + ((double)i + 0.5) * cell, tfs, 0, 1, 0.5, 0);
  }
  double ky = ay + gh + 3;
  if (show_k)
    for (int64_t c = 0; c < cols; c++) {
      double mx = ax + (double)c * (mw + GRID_GAP);
      for (int64_t j = 0; j < nk; j++) {
        double x = mx + ((double)j + 0.5) * cell;
        if (rotate)
          attn__plot_draw_text(cr, kl[j], x, ky, tfs, 0, 1, 0.5, PLOT_PI / 2);
        else
          attn__plot_draw_text(cr, kl[j], x, ky, tfs, 0, 0.5, 0, 0);
      }
    }
  if (lb->xlabel)
    attn__plot_draw_text(cr, lb->xlabel, ax + gw / 2, ky + (show_k ? (rotate ? kw : lh_t) + 4 : 0) + 3, FS_LABEL, 0,
                         0.5, 0, 0);
  if (lb->ylabel) attn__plot_draw_text(cr, lb->ylabel, rx - rw - 6, ay + gh / 2, FS_LABEL, 0, 0.5, 1, PLOT_PI / 2);
  if (lb->title) attn__plot_draw_text(cr, lb->title, ax + gw / 2, ay - lh_head - 4 - 8, FS_TITLE, 1, 0.5, 1, 0);

  st = attn__plot_heat_finish(f, cmap, vmin, vmax, g->colorbar, (attn_plot_rect){ax, ay, gw, gh}, rows, cols, rotate,
                              layout);
  if (st == ATTN_OK && layout) {
    layout->cell = cell;
    layout->query_labels = show_q;
    layout->key_labels = show_k;
  }
  return st;
}
