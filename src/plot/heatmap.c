/* SPDX-License-Identifier: MIT */
/* Heatmaps: a matrix as coloured cells with row and column labels, a colour
   bar and optional values in the cells. */
#include "plot_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A cell annotation format: literal text around one %[.N]f|e|g (N <= 9);
   "%%" is a literal percent.  Returns 0 for anything else. */
static int valid_format(const char *s) {
  int convs = 0;
  if (strlen(s) > 40) return 0;
  for (const char *p = s; *p; p++) {
    if (*p != '%') continue;
    p++;
    if (*p == '%') continue;
    if (*p == '.') {
      p++;
      if (*p < '0' || *p > '9') return 0;
      p++;
    }
    if (*p != 'f' && *p != 'e' && *p != 'g') return 0;
    convs++;
  }
  return convs == 1;
}

/* snprintf of one value with a checked format; a value that prints as
   zero loses its minus sign ("-0.00" -> "0.00"). */
static void format_cell(char *buf, size_t n, const char *fmt, double v) {
  snprintf(buf, n, fmt, v);
  char *minus = strchr(buf, '-');
  if (!minus) return;
  for (const char *p = minus + 1; *p && *p != 'e'; p++)
    if (*p >= '1' && *p <= '9') return;
  memmove(minus, minus + 1, strlen(minus));
}

/* Which tick labels to show so that neighbours, spacing apart, do not
   overlap: every k-th with k in 1, 2, 5, 10, 20, ... */
static int label_stride(double spacing, double need) {
  static const int mult[] = {1, 2, 5};
  for (int dec = 1; dec <= 100000; dec *= 10)
    for (int i = 0; i < 3; i++)
      if (spacing * mult[i] * dec >= need) return mult[i] * dec;
  return 1000000;
}

/* The first of every stride-th default number (index_base counting) that
   is a multiple of the stride: 5, 10, 15, ... for base 1. */
static int64_t first_numbered(int64_t stride, int base) {
  int64_t r = base % stride;
  if (r < 0) r += stride;
  return (stride - r) % stride;
}

/* Label i of a list, or its number in buf. */
static const char *label_at(const char *const *list, int64_t i, int base, char *buf, size_t n) {
  if (list) return list[i];
  snprintf(buf, n, "%lld", (long long)(i + base));
  return buf;
}

/* ------------------------------------------------------------------------ */
/* Colour bars (heatmaps and attention grids)                                */

double attn__plot_colorbar_room(cairo_t *m, double lo, double hi) {
  /* The ticks depend on the bar's height, not known yet: room for the
     widest labels any tick count would give. */
  ticklist ct;
  double ctw = 0;
  for (int target = 3; target <= 8; target++) {
    attn__plot_nice_ticks(lo, hi, target, &ct);
    ctw = fmax(ctw, attn__plot_max_tick_width(m, &ct, FS_TICK));
  }
  return CBAR_GAP + CBAR_W + TICK_LEN + 4 + ctw;
}

/* A linear gradient through the map's control points (exact, and vector
   in SVG/PDF), low values at the bottom, framed, with ticks. */
void attn__plot_colorbar_draw(figure *f, const plot_cmap *cmap, double lo, double hi, double bx, double ay, double ah) {
  cairo_t *cr = f->cr;
  const double cbar_w = CBAR_W;
  ticklist ct;
  attn__plot_nice_ticks(lo, hi, (int)fmax(3, fmin(8, ah / 50)), &ct);
  if (f->fmt != FMT_PDF) {
    cairo_pattern_t *g = cairo_pattern_create_linear(0, ay + ah, 0, ay);
    for (int k = 0; k < cmap->n; k++)
      cairo_pattern_add_color_stop_rgb(g, attn__plot_cmap_x(cmap, k), cmap->rgb[k][0], cmap->rgb[k][1],
                                       cmap->rgb[k][2]);
    cairo_set_source(cr, g);
    cairo_rectangle(cr, bx, ay, cbar_w, ah);
    cairo_fill(cr);
    cairo_pattern_destroy(g);
  } else {
    /* cairo 1.16's PDF backend leaks every gradient it writes: strips of
       about one point each, overlapping to hide seams. */
    int strips = (int)ceil(ah);
    for (int k = 0; k < strips; k++) {
      double rgb[3], y1 = ay + ah - ah * k / strips, y0 = ay + ah - ah * (k + 1) / strips;
      attn__plot_cmap_eval(cmap, (k + 0.5) / strips, rgb);
      cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle(cr, bx, k + 1 < strips ? y0 - 0.3 : y0, cbar_w, y1 - y0 + (k + 1 < strips ? 0.3 : 0));
      cairo_fill(cr);
    }
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  double bx0 = attn__plot_crisp(f, bx), bx1 = attn__plot_crisp(f, bx + cbar_w);
  double fy0 = attn__plot_crisp(f, ay), fy1 = attn__plot_crisp(f, ay + ah);
  cairo_rectangle(cr, bx0, fy0, bx1 - bx0, fy1 - fy0);
  cairo_stroke(cr);
  for (int k = 0; k < ct.n; k++) {
    double y = ay + ah - (ct.t[k].v - lo) / (hi - lo) * ah;
    cairo_move_to(cr, bx1, attn__plot_crisp(f, y));
    cairo_line_to(cr, bx1 + TICK_LEN, attn__plot_crisp(f, y));
    cairo_stroke(cr);
    attn__plot_draw_tick_label(cr, &ct.t[k], bx1 + TICK_LEN + 3, y, FS_TICK, 0, 0.5);
  }
}

void attn_plot_heatmap_init(attn_plot_heatmap *h) {
  memset(h, 0, sizeof *h);
  h->fig.width = h->fig.height = NAN;
  h->colorbar = true;
  h->vmin = h->vmax = NAN;
}

attn_status attn__plot_check_labels(const char *fn, const char *key, const char *const *list, int64_t n) {
  if (list)
    for (int64_t i = 0; i < n; i++)
      if (!list[i])
        return attn_set_error(ATTN_ERR_ARG, "%s: option '%s': %s[%lld] is NULL", fn, key, key, (long long)i);
  return ATTN_OK;
}

attn_status attn__plot_check_limit(const char *fn, const char *key, double v) {
  if (isinf(v)) return attn_set_error(ATTN_ERR_ARG, "%s: option '%s' must be a finite number (got %f)", fn, key, v);
  return ATTN_OK;
}

void attn__plot_draw_cells(figure *f, const plot_cmap *cmap, const double *values, int64_t rows, int64_t cols,
                           double lo, double hi, double x, double y, double cw, double ch) {
  cairo_t *cr = f->cr;
  const int png = f->fmt == FMT_PNG;
  const double ov = png ? 0 : 0.3;
  cairo_save(cr);
  cairo_rectangle(cr, x, y, cw * (double)cols, ch * (double)rows);
  cairo_clip(cr);
  for (int64_t i = 0; i < rows; i++) {
    double y0 = y + (double)i * ch, y1 = y + (double)(i + 1) * ch;
    if (png) {
      y0 = round(y0);
      y1 = round(y1);
    }
    for (int64_t j = 0; j < cols; j++) {
      double val = values[i * cols + j];
      if (isnan(val)) continue;
      double x0 = x + (double)j * cw, x1 = x + (double)(j + 1) * cw;
      if (png) {
        x0 = round(x0);
        x1 = round(x1);
      }
      double rgb[3];
      attn__plot_cmap_eval(cmap, (val - lo) / (hi - lo), rgb);
      cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle(cr, x0, y0, x1 - x0 + ov, y1 - y0 + ov);
      cairo_fill(cr);
    }
  }
  cairo_restore(cr);
}

void attn__plot_fit_figure(cairo_t *m, const char *title, int widen_for_title, double *left, double *top, double *fw,
                           double *fh) {
  if (title && widen_for_title) { /* a title wider than the figure widens it */
    double tw = attn__plot_text_width(m, title, FS_TITLE, 1) + 2 * PAD;
    if (tw > *fw) {
      *left += (tw - *fw) / 2;
      *fw = ceil(tw);
    }
  }
  if (*fw < ATTN_PLOT_MIN_SIZE) {
    *left += (ATTN_PLOT_MIN_SIZE - *fw) / 2;
    *fw = ATTN_PLOT_MIN_SIZE;
  }
  if (*fh < ATTN_PLOT_MIN_SIZE) {
    *top += (ATTN_PLOT_MIN_SIZE - *fh) / 2;
    *fh = ATTN_PLOT_MIN_SIZE;
  }
}

attn_status attn__plot_heat_finish(figure *f, const plot_cmap *cmap, double lo, double hi, int colorbar,
                                   attn_plot_rect area, int64_t rows, int64_t cols, int rotated,
                                   attn_plot_layout *layout) {
  double bx = 0;
  if (colorbar) {
    bx = round(area.x + area.w + CBAR_GAP);
    attn__plot_colorbar_draw(f, cmap, lo, hi, bx, area.y, area.h);
  }
  double figw = f->w, figh = f->h;
  attn_status st = attn__plot_figure_end(f);
  if (st != ATTN_OK) return st;
  if (layout) {
    memset(layout, 0, sizeof *layout);
    layout->width = figw;
    layout->height = figh;
    layout->area = area;
    layout->rows = rows;
    layout->cols = cols;
    layout->vmin = lo;
    layout->vmax = hi;
    layout->rotated_col_labels = rotated;
    layout->has_colorbar = colorbar;
    if (colorbar) layout->colorbar = (attn_plot_rect){bx, area.y, CBAR_W, area.h};
  }
  return ATTN_OK;
}

attn_status attn_plot_heatmap_draw(const attn_plot_heatmap *h, attn_plot_layout *layout) {
  const char *fn = "heatmap";
  const attn_plot_figure *lb = &h->fig;
  int64_t rows = h->rows, cols = h->cols, n;
  if (rows <= 0 || cols <= 0)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: the matrix is empty ([%lld, %lld])", fn, (long long)rows,
                          (long long)cols);
  if (rows > ATTN_PLOT_MAX_SIDE || cols > ATTN_PLOT_MAX_SIDE)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: a [%lld, %lld] matrix is too large to draw (at most %d per side)", fn,
                          (long long)rows, (long long)cols, ATTN_PLOT_MAX_SIDE);
  if (!h->values) return attn_set_error(ATTN_ERR_ARG, "%s: values is NULL", fn);
  n = rows * cols;
  const double *v = h->values;
  attn_status st = attn__plot_check_labels(fn, "row_labels", h->row_labels, rows);
  if (st == ATTN_OK) st = attn__plot_check_labels(fn, "col_labels", h->col_labels, cols);
  if (st != ATTN_OK) return st;
  const char *cmap_name = h->cmap ? h->cmap : "viridis";
  const plot_cmap *cmap = attn__plot_cmap_find(cmap_name);
  if (!cmap) return attn_set_error(ATTN_ERR_ARG, "%s: unknown cmap '%s' (known: " PLOT_CMAP_NAMES ")", fn, cmap_name);
  const char *annot_fmt = h->annotate;
  if (annot_fmt && *annot_fmt && !valid_format(annot_fmt))
    return attn_set_error(ATTN_ERR_ARG,
                          "%s: option 'annotate' must be true or a format like \"%%.2f\" (one %%f, %%e or %%g "
                          "with at most 9 decimals), got \"%s\"",
                          fn, annot_fmt);
  st = attn__plot_check_limit(fn, "vmin", h->vmin);
  if (st == ATTN_OK) st = attn__plot_check_limit(fn, "vmax", h->vmax);
  if (st == ATTN_OK) st = attn__plot_figure_check(fn, lb);
  if (st != ATTN_OK) return st;
  double width = lb->width, height = lb->height;
  int base = lb->index_base;

  /* Colour limits: the finite data range unless given; NaN cells are left
     blank. */
  double lo = INFINITY, hi = -INFINITY;
  int all_int = 1;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(v[i])) continue;
    lo = fmin(lo, v[i]);
    hi = fmax(hi, v[i]);
    if (v[i] != nearbyint(v[i]) || fabs(v[i]) >= 1e6) all_int = 0;
  }
  int vmin_given = !isnan(h->vmin), vmax_given = !isnan(h->vmax);
  double vmin = h->vmin, vmax = h->vmax;
  if ((!vmin_given || !vmax_given) && lo > hi)
    return attn_set_error(ATTN_ERR_ARG, "%s: the matrix has no finite values (give vmin and vmax to draw it)", fn);
  if (!vmin_given) vmin = lo;
  if (!vmax_given) vmax = hi;
  if (vmin > vmax) return attn_set_error(ATTN_ERR_ARG, "%s: vmin (%g) is above vmax (%g)", fn, vmin, vmax);
  double cbar_lo = vmin, cbar_hi = vmax;
  if (cbar_lo == cbar_hi) { /* one value: centre it in a unit range */
    cbar_lo -= 0.5;
    cbar_hi += 0.5;
  }
  if (annot_fmt && !*annot_fmt) annot_fmt = all_int ? "%.0f" : "%.2f";

  figure fig, *f = &fig;
  st = attn__plot_figure_open(f, fn, lb);
  if (st != ATTN_OK) return st;
  cairo_t *m = f->m;
  int colorbar = h->colorbar;
  const char *const *rl = h->row_labels, *const *cl = h->col_labels;

  /* Left: ylabel, row labels; right: colour bar and its labels. */
  double lh_tick = attn__plot_line_height(m, FS_TICK), lh_label = attn__plot_line_height(m, FS_LABEL);
  double rw = 0;
  char buf[64];
  for (int64_t i = 0; i < rows; i++)
    rw = fmax(rw, attn__plot_text_width(m, label_at(rl, i, base, buf, sizeof buf), FS_TICK, 0));
  double left = PAD + (lb->ylabel ? lh_label + 6 : 0) + rw + TICK_LEN + 4;
  double right = PAD + (colorbar ? attn__plot_colorbar_room(m, cbar_lo, cbar_hi) : 4);
  double top = PAD + (lb->title ? attn__plot_line_height(m, FS_TITLE) + 8 : lh_tick / 2);
  /* Cells are square unless both sides are given. */
  double auto_cell = fmin(48, fmax(2, 480.0 / (double)(rows > cols ? rows : cols)));
  double aw = !isnan(width) ? width - left - right : auto_cell * (double)cols;
  double cw = aw / (double)cols;
  /* Column labels turn vertical when they do not fit across a cell. */
  double cwmax = 0;
  for (int64_t j = 0; j < cols; j++)
    cwmax = fmax(cwmax, attn__plot_text_width(m, label_at(cl, j, base, buf, sizeof buf), FS_TICK, 0));
  int rotate = cl && cwmax + 6 > cw;
  double col_label_h = rotate ? cwmax : lh_tick;
  double bottom = PAD + TICK_LEN + 3 + col_label_h + (lb->xlabel ? lh_label + 6 : 0);
  double ah = !isnan(height) ? height - top - bottom : cw * (double)rows;
  if (isnan(width) && !isnan(height)) { /* height alone: square cells from it */
    cw = ah / (double)rows;
    aw = cw * (double)cols;
  }
  double fw = !isnan(width) ? width : ceil(left + aw + right);
  double fh = !isnan(height) ? height : ceil(top + ah + bottom);
  /* A title wider than the figure widens an automatic figure. */
  attn__plot_fit_figure(m, lb->title, isnan(width), &left, &top, &fw, &fh);
  if (aw < 4 || ah < 4)
    return attn__plot_figure_fail(
        f, ATTN_ERR_ARG, "%s: a %.0f x %.0f figure leaves no room for the cells beside the labels", fn, fw, fh);
  st = attn__plot_figure_begin(f, fw, fh);
  if (st != ATTN_OK) return st;
  cairo_t *cr = f->cr;
  double ax = round(left), ay = round(top);
  aw = round(aw);
  ah = round(ah);
  cw = aw / (double)cols;
  double ch = ah / (double)rows;

  attn__plot_draw_cells(f, cmap, v, rows, cols, cbar_lo, cbar_hi, ax, ay, cw, ch);

  /* Annotations: black on light cells, white on dark ones; the font
     shrinks to fit the cells and annotations are dropped below 5 units. */
  if (annot_fmt) {
    double fs = fmin(FS_TICK, ch * 0.5), wmax = 0;
    for (int64_t k = 0; k < n; k++) {
      if (isnan(v[k])) continue;
      format_cell(buf, sizeof buf, annot_fmt, v[k]);
      wmax = fmax(wmax, attn__plot_text_width(cr, buf, fs, 0));
    }
    if (wmax > cw * 0.9) fs *= cw * 0.9 / wmax;
    if (fs >= 5)
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
          double val = v[i * cols + j], rgb[3];
          if (isnan(val)) continue;
          attn__plot_cmap_eval(cmap, (val - cbar_lo) / (cbar_hi - cbar_lo), rgb);
          double lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
          double c = lum > 0.5 ? 0 : 1;
          cairo_set_source_rgb(cr, c, c, c);
          format_cell(buf, sizeof buf, annot_fmt, val);
          attn__plot_draw_text(cr, buf, ax + ((double)j + 0.5) * cw, ay + ((double)i + 0.5) * ch, fs, 0, 0.5, 0.5, 0);
        }
  }

  /* Frame, ticks at cell centres, labels. */
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  double fx0 = attn__plot_crisp(f, ax), fy0 = attn__plot_crisp(f, ay), fx1 = attn__plot_crisp(f, ax + aw),
         fy1 = attn__plot_crisp(f, ay + ah);
  cairo_rectangle(cr, fx0, fy0, fx1 - fx0, fy1 - fy0);
  cairo_stroke(cr);
  int rstride = label_stride(ch, lh_tick * 1.1);
  int cstride = cl && !rotate ? 1 : label_stride(cw, rotate ? lh_tick * 1.1 : cwmax + 6);
  /* Given labels: every stride-th from the first; numbers: the multiples
     of the stride (5, 10, 15, ...). */
  for (int64_t i = rl ? 0 : first_numbered(rstride, base); i < rows; i += rstride) {
    double y = ay + ((double)i + 0.5) * ch;
    cairo_move_to(cr, fx0, attn__plot_crisp(f, y));
    cairo_line_to(cr, fx0 - TICK_LEN, attn__plot_crisp(f, y));
    cairo_stroke(cr);
    attn__plot_draw_text(cr, label_at(rl, i, base, buf, sizeof buf), fx0 - TICK_LEN - 3, y, FS_TICK, 0, 1, 0.5, 0);
  }
  for (int64_t j = cl ? 0 : first_numbered(cstride, base); j < cols; j += cstride) {
    double x = ax + ((double)j + 0.5) * cw;
    cairo_move_to(cr, attn__plot_crisp(f, x), fy1);
    cairo_line_to(cr, attn__plot_crisp(f, x), fy1 + TICK_LEN);
    cairo_stroke(cr);
    const char *s = label_at(cl, j, base, buf, sizeof buf);
    if (rotate)
      attn__plot_draw_text(cr, s, x, fy1 + TICK_LEN + 3, FS_TICK, 0, 1, 0.5, PLOT_PI / 2);
    else
      attn__plot_draw_text(cr, s, x, fy1 + TICK_LEN + 3, FS_TICK, 0, 0.5, 0, 0);
  }
  if (lb->xlabel)
    attn__plot_draw_text(cr, lb->xlabel, ax + aw / 2, fy1 + TICK_LEN + 3 + col_label_h + 6, FS_LABEL, 0, 0.5, 0, 0);
  if (lb->ylabel)
    attn__plot_draw_text(cr, lb->ylabel, fx0 - TICK_LEN - 3 - rw - 6, ay + ah / 2, FS_LABEL, 0, 0.5, 1, PLOT_PI / 2);
  if (lb->title) attn__plot_draw_text(cr, lb->title, ax + aw / 2, ay - 8, FS_TITLE, 1, 0.5, 1, 0);

  return attn__plot_heat_finish(f, cmap, cbar_lo, cbar_hi, colorbar, (attn_plot_rect){ax, ay, aw, ah}, rows, cols,
                                rotate, layout);
}
