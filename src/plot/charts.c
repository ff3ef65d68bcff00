/* SPDX-License-Identifier: MIT */
/* Histograms and line plots: data on cartesian axes (figure.c). */
#include "plot_internal.h"

#include <math.h>
#include <string.h>

static void fill_view(attn_plot_layout *lay, const figure *f, const axes *a) {
  memset(lay, 0, sizeof *lay);
  lay->width = f->w;
  lay->height = f->h;
  lay->area = (attn_plot_rect){a->x, a->y, a->w, a->h};
}

/* ------------------------------------------------------------------------ */
/* Histogram                                                                 */

void attn_plot_histogram_init(attn_plot_histogram *h) {
  memset(h, 0, sizeof *h);
  h->fig.width = h->fig.height = NAN;
  h->bins = 10;
  h->range[0] = h->range[1] = NAN;
}

attn_status attn_plot_histogram_draw(const attn_plot_histogram *h, double *counts, double *edges,
                                     attn_plot_layout *layout) {
  const char *fn = "histogram";
  const attn_plot_figure *lb = &h->fig;
  int64_t n = h->n, nb = h->bins;
  const double *v = h->values;
  if (n <= 0) return attn_set_error(ATTN_ERR_ARG, "%s: no values", fn);
  if (!v) return attn_set_error(ATTN_ERR_ARG, "%s: values is NULL", fn);
  if (h->edges) {
    if (nb < 1 || nb > ATTN_PLOT_MAX_BINS)
      return attn_set_error(ATTN_ERR_ARG, "%s: option 'bins' as edges needs 2 to %d of them (got %lld)", fn,
                            ATTN_PLOT_MAX_BINS + 1, (long long)nb + 1);
    for (int64_t i = 0; i <= nb; i++) {
      double e = h->edges[i];
      if (!isfinite(e))
        return attn_set_error(ATTN_ERR_ARG, "%s: bin edge edges[%lld] must be a finite number", fn, (long long)i);
      if (i > 0 && !(e > h->edges[i - 1]))
        return attn_set_error(ATTN_ERR_ARG, "%s: bin edges must increase (edges[%lld] is %g after %g)", fn,
                              (long long)i, e, h->edges[i - 1]);
    }
  } else if (nb < 1 || nb > ATTN_PLOT_MAX_BINS) {
    return attn_set_error(ATTN_ERR_ARG, "%s: option 'bins' must be 1 to %d (got %g)", fn, ATTN_PLOT_MAX_BINS,
                          (double)nb);
  }
  double rlo = h->range[0], rhi = h->range[1];
  int range_given = !isnan(rlo) || !isnan(rhi);
  if (range_given) {
    if (!isfinite(rlo) || !isfinite(rhi))
      return attn_set_error(ATTN_ERR_ARG, "%s: option 'range' must be {low, high} with finite numbers", fn);
    if (rlo > rhi) return attn_set_error(ATTN_ERR_ARG, "%s: option 'range' is reversed ({%g, %g})", fn, rlo, rhi);
    if (h->edges) return attn_set_error(ATTN_ERR_ARG, "%s: give either 'range' or a list of bin edges, not both", fn);
  }
  attn_status st = attn__plot_figure_check(fn, lb);
  if (st != ATTN_OK) return st;
  if (!counts || !edges) return attn_set_error(ATTN_ERR_ARG, "%s: counts and edges_out are required", fn);

  if (h->edges) {
    memcpy(edges, h->edges, (size_t)(nb + 1) * sizeof *edges);
  } else {
    double lo = rlo, hi = rhi;
    if (!range_given) {
      lo = INFINITY;
      hi = -INFINITY;
      for (int64_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
          lo = fmin(lo, v[i]);
          hi = fmax(hi, v[i]);
        }
      if (lo > hi) return attn_set_error(ATTN_ERR_ARG, "%s: no finite values", fn);
    }
    if (lo == hi) { /* numpy widens an empty range to a unit one */
      lo -= 0.5;
      hi += 0.5;
    }
    for (int64_t i = 0; i <= nb; i++) edges[i] = lo + (hi - lo) * (double)i / (double)nb;
    edges[nb] = hi;
  }
  memset(counts, 0, (size_t)nb * sizeof *counts);
  double total = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = v[i];
    if (!isfinite(x)) continue;
    finite++;
    if (x < edges[0] || x > edges[nb]) continue;
    int64_t a = 0, b = nb; /* last edge <= x: edges[a] <= x < edges[b] */
    while (b - a > 1) {
      int64_t mid = a + (b - a) / 2;
      if (edges[mid] <= x)
        a = mid;
      else
        b = mid;
    }
    counts[a] += 1;
    total += 1;
  }
  if (finite == 0) return attn_set_error(ATTN_ERR_ARG, "%s: no finite values", fn);
  if (h->density && total > 0)
    for (int64_t i = 0; i < nb; i++) counts[i] /= total * (edges[i + 1] - edges[i]);
  double cmax = 0;
  for (int64_t i = 0; i < nb; i++) cmax = fmax(cmax, counts[i]);

  figure fig, *f = &fig;
  st = attn__plot_figure_open(f, fn, lb);
  if (st != ATTN_OK) return st;
  f->w = !isnan(lb->width) ? lb->width : 640;
  f->h = !isnan(lb->height) ? lb->height : 480;
  axes a = {0};
  a.xlo = edges[0];
  a.xhi = edges[nb];
  attn__plot_pad_range(&a.xlo, &a.xhi, 0.05);
  a.ylo = 0;
  a.yhi = cmax > 0 ? cmax * 1.05 : 1;
  st = attn__plot_axes_layout(f, &a, lb, 0);
  if (st == ATTN_OK) st = attn__plot_figure_begin(f, f->w, f->h);
  if (st != ATTN_OK) return st;
  cairo_t *cr = f->cr;
  attn__plot_axes_draw_grid(f, &a, 0);
  cairo_save(cr);
  cairo_rectangle(cr, a.x, a.y, a.w, a.h);
  cairo_clip(cr);
  double y0 = attn__plot_ax_py(&a, 0);
  for (int64_t i = 0; i < nb; i++) {
    if (counts[i] <= 0) continue;
    double x0 = attn__plot_ax_px(&a, edges[i]), x1 = attn__plot_ax_px(&a, edges[i + 1]),
           y1 = attn__plot_ax_py(&a, counts[i]);
    cairo_rectangle(cr, x0, y1, x1 - x0, y0 - y1);
    cairo_set_source_rgb(cr, attn__plot_cycle[0][0], attn__plot_cycle[0][1], attn__plot_cycle[0][2]);
    if (x1 - x0 > 4) { /* thin white edges keep neighbouring bars apart */
      cairo_fill_preserve(cr);
      cairo_set_source_rgb(cr, 1, 1, 1);
      cairo_set_line_width(cr, 0.8);
      cairo_stroke(cr);
    } else {
      cairo_fill(cr);
    }
  }
  cairo_restore(cr);
  attn__plot_axes_draw_frame(f, &a, lb);
  attn_plot_layout lay;
  fill_view(&lay, f, &a);
  lay.xmin = a.xlo;
  lay.xmax = a.xhi;
  lay.ymin = a.ylo;
  lay.ymax = a.yhi;
  st = attn__plot_figure_end(f);
  if (st != ATTN_OK) return st;
  if (layout) *layout = lay;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Lines                                                                     */

void attn_plot_lines_init(attn_plot_lines *l) {
  memset(l, 0, sizeof *l);
  l->fig.width = l->fig.height = NAN;
}

static double sx(const attn_plot_series *s, int64_t i, int base) { return s->x ? s->x[i] : (double)(base + i); }

/* Whether point i is drawn (finite; positive on a log axis). */
static int usable(const attn_plot_series *s, int64_t i, int base, int ylog) {
  double x = sx(s, i, base), y = s->y[i];
  return isfinite(x) && isfinite(y) && (!ylog || y > 0);
}

/* Legend box size for the labelled series. */
static void legend_size(cairo_t *m, const attn_plot_series *s, int64_t ns, double *w, double *h, int *count) {
  double tw = 0;
  int c = 0;
  for (int64_t i = 0; i < ns; i++)
    if (s[i].label) {
      tw = fmax(tw, attn__plot_text_width(m, s[i].label, FS_LEGEND, 0));
      c++;
    }
  double lh = attn__plot_line_height(m, FS_LEGEND) + 3;
  *w = 8 + 24 + 6 + tw + 8;
  *h = 6 + lh * c + 3;
  *count = c;
}

attn_status attn_plot_lines_draw(const attn_plot_lines *l, attn_plot_layout *layout) {
  const char *fn = "lines";
  const attn_plot_figure *lb = &l->fig;
  int64_t ns = l->nseries;
  const attn_plot_series *s = l->series;
  int ylog = l->logy, base = lb->index_base;
  if (ns <= 0) return attn_set_error(ATTN_ERR_ARG, "%s: no series", fn);
  if (ns > ATTN_PLOT_MAX_SERIES)
    return attn_set_error(ATTN_ERR_ARG, "%s: %lld series are too many (at most %d)", fn, (long long)ns,
                          ATTN_PLOT_MAX_SERIES);
  if (!s) return attn_set_error(ATTN_ERR_ARG, "%s: series is NULL", fn);
  for (int64_t k = 0; k < ns; k++) {
    if (s[k].n <= 0) return attn_set_error(ATTN_ERR_ARG, "%s: series[%lld] is empty", fn, (long long)k);
    if (!s[k].y) return attn_set_error(ATTN_ERR_ARG, "%s: series[%lld].y is NULL", fn, (long long)k);
  }
  attn_status st = attn__plot_figure_check(fn, lb);
  if (st != ATTN_OK) return st;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (int64_t k = 0; k < ns; k++)
    for (int64_t i = 0; i < s[k].n; i++) {
      if (!usable(&s[k], i, base, ylog)) continue;
      double x = sx(&s[k], i, base), y = s[k].y[i];
      xlo = fmin(xlo, x);
      xhi = fmax(xhi, x);
      y = ylog ? log10(y) : y;
      ylo = fmin(ylo, y);
      yhi = fmax(yhi, y);
    }
  if (xlo > xhi)
    return attn_set_error(
        ATTN_ERR_ARG, ylog ? "%s: no finite positive points to plot on a log scale" : "%s: no finite points to plot",
        fn);

  figure fig, *f = &fig;
  st = attn__plot_figure_open(f, fn, lb);
  if (st != ATTN_OK) return st;
  f->w = !isnan(lb->width) ? lb->width : 640;
  f->h = !isnan(lb->height) ? lb->height : 480;
  axes a = {0};
  a.ylog = ylog;
  a.xlo = xlo;
  a.xhi = xhi;
  a.ylo = ylo;
  a.yhi = yhi;
  attn__plot_pad_range(&a.xlo, &a.xhi, 0.05);
  attn__plot_pad_range(&a.ylo, &a.yhi, 0.05);
  st = attn__plot_axes_layout(f, &a, lb, 0);
  if (st == ATTN_OK) st = attn__plot_figure_begin(f, f->w, f->h);
  if (st != ATTN_OK) return st;
  cairo_t *cr = f->cr;
  attn__plot_axes_draw_grid(f, &a, 1);

  cairo_save(cr);
  cairo_rectangle(cr, a.x, a.y, a.w, a.h);
  cairo_clip(cr);
  cairo_set_line_width(cr, 2);
  for (int64_t k = 0; k < ns; k++) {
    const attn_plot_series *sk = &s[k];
    const double *c = attn__plot_cycle[k % PLOT_COUNT(attn__plot_cycle)];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    /* NaN (or non-positive on log axes) points break the line; a point
       with no neighbour is drawn as a dot. */
    int64_t run = 0;
    double px = 0, py = 0;
    for (int64_t i = 0; i <= sk->n; i++) {
      if (i < sk->n && usable(sk, i, base, ylog)) {
        double y = sk->y[i];
        double dx = attn__plot_ax_px(&a, sx(sk, i, base)), dy = attn__plot_ax_py(&a, ylog ? log10(y) : y);
        if (run == 0)
          cairo_move_to(cr, dx, dy);
        else
          cairo_line_to(cr, dx, dy);
        px = dx;
        py = dy;
        run++;
      } else {
        if (run == 1) {
          cairo_new_path(cr);
          cairo_arc(cr, px, py, 2.5, 0, 2 * PLOT_PI);
          cairo_fill(cr);
        } else if (run > 1) {
          cairo_stroke(cr);
        }
        run = 0;
      }
    }
  }
  cairo_restore(cr);
  attn__plot_axes_draw_frame(f, &a, lb);

  /* Legend in the corner covering the fewest points (matplotlib's "best",
     corners only), upper right first. */
  double lw, lh;
  int nl;
  legend_size(cr, s, ns, &lw, &lh, &nl);
  attn_plot_layout lay;
  fill_view(&lay, f, &a);
  if (nl > 0) {
    const double inset = 8;
    double cx[4] = {a.x + a.w - inset - lw, a.x + inset, a.x + inset, a.x + a.w - inset - lw};
    double cy[4] = {a.y + inset, a.y + inset, a.y + a.h - inset - lh, a.y + a.h - inset - lh};
    int best = 0;
    int64_t best_hits = -1;
    for (int c = 0; c < 4; c++) {
      int64_t hits = 0;
      for (int64_t k = 0; k < ns; k++)
        for (int64_t i = 0; i < s[k].n; i++) {
          if (!usable(&s[k], i, base, ylog)) continue;
          double y = s[k].y[i];
          double dx = attn__plot_ax_px(&a, sx(&s[k], i, base)), dy = attn__plot_ax_py(&a, ylog ? log10(y) : y);
          if (dx >= cx[c] && dx <= cx[c] + lw && dy >= cy[c] && dy <= cy[c] + lh) hits++;
        }
      if (best_hits < 0 || hits < best_hits) {
        best = c;
        best_hits = hits;
      }
    }
    double lx = round(cx[best]), ly = round(cy[best]);
    lay.has_legend = true;
    lay.legend = (attn_plot_rect){lx, ly, round(lw), round(lh)};
    cairo_rectangle(cr, attn__plot_crisp(f, lx), attn__plot_crisp(f, ly), round(lw), round(lh));
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    double rowh = attn__plot_line_height(cr, FS_LEGEND) + 3, yy = ly + 6;
    for (int64_t k = 0; k < ns; k++) {
      if (!s[k].label) continue;
      const double *c = attn__plot_cycle[k % PLOT_COUNT(attn__plot_cycle)];
      cairo_set_source_rgb(cr, c[0], c[1], c[2]);
      cairo_set_line_width(cr, 2);
      cairo_move_to(cr, lx + 8, yy + rowh / 2 - 1);
      cairo_line_to(cr, lx + 32, yy + rowh / 2 - 1);
      cairo_stroke(cr);
      cairo_set_source_rgb(cr, 0, 0, 0);
      attn__plot_draw_text(cr, s[k].label, lx + 38, yy + rowh / 2 - 1, FS_LEGEND, 0, 0, 0.5, 0);
      yy += rowh;
    }
  }
  lay.xmin = a.xlo;
  lay.xmax = a.xhi;
  lay.ymin = ylog ? pow(10, a.ylo) : a.ylo;
  lay.ymax = ylog ? pow(10, a.yhi) : a.yhi;
  st = attn__plot_figure_end(f);
  if (st != ATTN_OK) return st;
  if (layout) *layout = lay;
  return ATTN_OK;
}
