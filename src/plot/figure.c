/* SPDX-License-Identifier: MIT */
/* Figures (a cairo surface writing through an attn_file_writer), text,
   ticks and cartesian axes: what heatmap.c and charts.c draw with. */
#include "plot_internal.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FONT_FAMILY "DejaVu Sans"

/* ------------------------------------------------------------------------ */
/* Figures                                                                   */

void attn__plot_figure_discard(figure *f) {
  if (f->cr) cairo_destroy(f->cr);
  /* Destroying a vector surface flushes it into the writer, which is then
     thrown away. */
  if (f->surf) cairo_surface_destroy(f->surf);
  if (f->m) cairo_destroy(f->m);
  if (f->msurf) cairo_surface_destroy(f->msurf);
  attn_file_writer_abort(f->out);
  f->cr = NULL;
  f->surf = NULL;
  f->m = NULL;
  f->msurf = NULL;
  f->out = NULL;
}

attn_status attn__plot_figure_fail(figure *f, attn_status st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap); /* first: fmt's arguments may live in the figure */
  va_end(ap);
  attn__plot_figure_discard(f);
  return attn_set_error(st, "%s", msg);
}

/* Discards the figure keeping the message already recorded. */
static attn_status figure_fail_recorded(figure *f, attn_status st) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s", attn_last_error());
  attn__plot_figure_discard(f);
  return attn_set_error(st, "%s", msg);
}

static cairo_status_t write_cb(void *closure, const unsigned char *data, unsigned int len) {
  figure *f = closure;
  if (f->write_st || !f->out) return CAIRO_STATUS_WRITE_ERROR;
  f->write_st = attn_file_writer_write(f->out, data, len);
  return f->write_st ? CAIRO_STATUS_WRITE_ERROR : CAIRO_STATUS_SUCCESS;
}

static int ends_with_ci(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  if (n < k) return 0;
  for (size_t i = 0; i < k; i++) {
    char c = s[n - k + i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != suffix[i]) return 0;
  }
  return 1;
}

/* A figure side: NaN (automatic) or within the limits. */
static attn_status check_size(const char *fn, const char *key, double v) {
  if (isnan(v) || (v >= ATTN_PLOT_MIN_SIZE && v <= ATTN_PLOT_MAX_SIZE)) return ATTN_OK;
  return attn_set_error(ATTN_ERR_ARG, "%s: option '%s' must be between %.0f and %.0f (got %g)", fn, key,
                        ATTN_PLOT_MIN_SIZE, ATTN_PLOT_MAX_SIZE, v);
}

attn_status attn__plot_figure_check(const char *fn, const attn_plot_figure *o) {
  if (!o->path || !*o->path)
    return attn_set_error(ATTN_ERR_ARG, "%s: option 'path' is required (a .png, .svg or .pdf file name)", fn);
  attn_status st = check_size(fn, "width", o->width);
  if (st == ATTN_OK) st = check_size(fn, "height", o->height);
  return st;
}

attn_status attn__plot_figure_open(figure *f, const char *fn, const attn_plot_figure *o) {
  memset(f, 0, sizeof *f);
  f->fn = fn;
  attn_status st = attn__plot_figure_check(fn, o);
  if (st != ATTN_OK) return st;
  const char *path = o->path;
  if (ends_with_ci(path, ".png"))
    f->fmt = FMT_PNG;
  else if (ends_with_ci(path, ".svg"))
    f->fmt = FMT_SVG;
  else if (ends_with_ci(path, ".pdf"))
    f->fmt = FMT_PDF;
  else
    return attn_set_error(ATTN_ERR_ARG, "%s: cannot tell the format of '%s': the path must end in .png, .svg or .pdf",
                          fn, path);
  f->path = path;
  f->msurf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  f->m = cairo_create(f->msurf);
  if (cairo_status(f->m) != CAIRO_STATUS_SUCCESS)
    return attn__plot_figure_fail(f, ATTN_ERR_NOMEM, "%s: cairo: %s", fn, cairo_status_to_string(cairo_status(f->m)));
  return ATTN_OK;
}

attn_status attn__plot_figure_begin(figure *f, double w, double h) {
  if (!(w >= ATTN_PLOT_MIN_SIZE && h >= ATTN_PLOT_MIN_SIZE && w <= ATTN_PLOT_MAX_SIZE && h <= ATTN_PLOT_MAX_SIZE))
    return attn__plot_figure_fail(f, ATTN_ERR_ARG,
                                  "%s: a %.0f x %.0f figure is out of range (each side must be %.0f to %.0f)", f->fn, w,
                                  h, ATTN_PLOT_MIN_SIZE, ATTN_PLOT_MAX_SIZE);
  f->w = w;
  f->h = h;
  attn_status st = attn_file_writer_open(f->fn, f->path, &f->out);
  if (st != ATTN_OK) return figure_fail_recorded(f, st);
  switch (f->fmt) {
  case FMT_PNG: f->surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)ceil(w), (int)ceil(h)); break;
  case FMT_SVG: f->surf = cairo_svg_surface_create_for_stream(write_cb, f, w, h); break;
  case FMT_PDF: f->surf = cairo_pdf_surface_create_for_stream(write_cb, f, w, h); break;
  }
  f->cr = cairo_create(f->surf);
  if (cairo_status(f->cr) != CAIRO_STATUS_SUCCESS)
    return attn__plot_figure_fail(f, ATTN_ERR_NOMEM, "%s: cannot create a %.0f x %.0f surface: %s", f->fn, w, h,
                                  cairo_status_to_string(cairo_status(f->cr)));
  cairo_set_source_rgb(f->cr, 1, 1, 1);
  cairo_paint(f->cr);
  cairo_set_line_cap(f->cr, CAIRO_LINE_CAP_BUTT);
  cairo_set_line_join(f->cr, CAIRO_LINE_JOIN_ROUND);
  return ATTN_OK;
}

attn_status attn__plot_figure_end(figure *f) {
  cairo_status_t cs = cairo_status(f->cr);
  cairo_destroy(f->cr);
  f->cr = NULL;
  if (cs == CAIRO_STATUS_SUCCESS) {
    if (f->fmt == FMT_PNG) {
      cs = cairo_surface_write_to_png_stream(f->surf, write_cb, f);
    } else {
      cairo_surface_finish(f->surf);
      cs = cairo_surface_status(f->surf);
    }
  }
  if (f->write_st) return figure_fail_recorded(f, f->write_st);
  if (cs != CAIRO_STATUS_SUCCESS)
    return attn__plot_figure_fail(f, ATTN_ERR_IO, "%s: drawing '%s' failed: %s", f->fn, f->path,
                                  cairo_status_to_string(cs));
  cairo_surface_destroy(f->surf);
  f->surf = NULL;
  attn_file_writer *out = f->out;
  f->out = NULL; /* commit closes or removes the temporary either way */
  attn__plot_figure_discard(f);
  return attn_file_writer_commit(out);
}

double attn__plot_crisp(const figure *f, double v) { return f->fmt == FMT_PNG ? floor(v) + 0.5 : v; }

/* ------------------------------------------------------------------------ */
/* Text                                                                      */

static void set_font(cairo_t *cr, double size, int bold) {
  cairo_select_font_face(cr, FONT_FAMILY, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double attn__plot_text_width(cairo_t *cr, const char *s, double size, int bold) {
  cairo_text_extents_t te;
  set_font(cr, size, bold);
  cairo_text_extents(cr, s, &te);
  return te.x_advance;
}

/* Height of a line of text (ascent + descent). */
double attn__plot_line_height(cairo_t *cr, double size) {
  cairo_font_extents_t fe;
  set_font(cr, size, 0);
  cairo_font_extents(cr, &fe);
  return fe.ascent + fe.descent;
}

/* Draws s anchored at (x, y): ha 0 / 0.5 / 1 puts the anchor at the left,
   centre or right of the text, va 0 / 0.5 / 1 at the top, middle or
   bottom of its line box; angle turns the text counter-clockwise. */
void attn__plot_draw_text(cairo_t *cr, const char *s, double x, double y, double size, int bold, double ha, double va,
                          double angle) {
  cairo_text_extents_t te;
  cairo_font_extents_t fe;
  set_font(cr, size, bold);
  cairo_text_extents(cr, s, &te);
  cairo_font_extents(cr, &fe);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  if (angle != 0) cairo_rotate(cr, -angle);
  cairo_move_to(cr, -ha * te.x_advance, -va * (fe.ascent + fe.descent) + fe.ascent);
  cairo_show_text(cr, s);
  cairo_restore(cr);
}

/* ------------------------------------------------------------------------ */
/* Ticks                                                                     */

/* Decimals needed to print multiples of step exactly (0.25 -> 2). */
static int step_decimals(double step) {
  for (int d = 0; d <= 9; d++) {
    double s = step * pow(10, d);
    if (fabs(s - nearbyint(s)) < 1e-6 * s) return d;
  }
  return 9;
}

static void format_value(char *buf, size_t n, double v, double step) {
  if (fabs(v) < step * 1e-9) v = 0; /* no "-0" */
  double a = fmax(fabs(v), step);
  if (a >= 1e6 || step < 1e-4)
    snprintf(buf, n, "%.4g", v);
  else
    snprintf(buf, n, "%.*f", step_decimals(step), v);
}

/* "Nice" steps (1, 2, 2.5, 5 x 10^k) giving about target ticks in [lo, hi]. */
void attn__plot_nice_ticks(double lo, double hi, int target, ticklist *tl) {
  tl->n = 0;
  tl->nminor = 0;
  double span = hi - lo;
  if (!(span > 0) || !isfinite(span)) return;
  if (target < 2) target = 2;
  double raw = span / target;
  double mag = pow(10, floor(log10(raw)));
  double r = raw / mag;
  double step = (r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10) * mag;
  double first = ceil(lo / step - 1e-9) * step;
  for (int i = 0; tl->n < MAX_TICKS; i++) {
    double v = first + i * step;
    if (v > hi + step * 1e-9) break;
    tick *t = &tl->t[tl->n++];
    t->v = v;
    t->has_exp = 0;
    format_value(t->s, sizeof t->s, v, step);
  }
}

/* Ticks of a log10 axis spanning [lo, hi] in log units: decades labelled
   10^k (every k-th when there are many) with minor ticks at 2..9 x 10^k;
   less than two decades in view falls back to plain nice values. */
void attn__plot_log_ticks(double lo, double hi, int target, ticklist *tl) {
  tl->n = 0;
  tl->nminor = 0;
  int k0 = (int)ceil(lo - 1e-9), k1 = (int)floor(hi + 1e-9);
  if (k1 - k0 + 1 < 2) {
    ticklist lin;
    attn__plot_nice_ticks(pow(10, lo), pow(10, hi), target, &lin);
    for (int i = 0; i < lin.n; i++) {
      if (!(lin.t[i].v > 0)) continue;
      tl->t[tl->n] = lin.t[i];
      tl->t[tl->n].v = log10(lin.t[i].v);
      tl->n++;
    }
    return;
  }
  int every = (k1 - k0) / (target > 1 ? target : 1) + 1;
  for (int k = k0; k <= k1 && tl->n < MAX_TICKS; k++) {
    if ((k - k0) % every) continue;
    tick *t = &tl->t[tl->n++];
    t->v = k;
    t->has_exp = 1;
    t->exp = k;
    snprintf(t->s, sizeof t->s, "10");
  }
  if (every == 1) {
    for (int k = k0 - 1; k <= k1; k++)
      for (int d = 2; d <= 9 && tl->nminor < 4 * MAX_TICKS; d++) {
        double v = k + log10(d);
        if (v >= lo && v <= hi) tl->minor[tl->nminor++] = v;
      }
  } else { /* unlabelled decades */
    for (int k = k0; k <= k1 && tl->nminor < 4 * MAX_TICKS; k++)
      if ((k - k0) % every) tl->minor[tl->nminor++] = k;
  }
}

/* Tick label width, and drawing (10^k gets a raised exponent). */
double attn__plot_tick_width(cairo_t *cr, const tick *t, double size) {
  double w = attn__plot_text_width(cr, t->s, size, 0);
  if (t->has_exp) {
    char e[16];
    snprintf(e, sizeof e, "%d", t->exp);
    w += attn__plot_text_width(cr, e, size * 0.7, 0);
  }
  return w;
}

void attn__plot_draw_tick_label(cairo_t *cr, const tick *t, double x, double y, double size, double ha, double va) {
  if (!t->has_exp) {
    attn__plot_draw_text(cr, t->s, x, y, size, 0, ha, va, 0);
    return;
  }
  char e[16];
  snprintf(e, sizeof e, "%d", t->exp);
  double wb = attn__plot_text_width(cr, t->s, size, 0), we = attn__plot_text_width(cr, e, size * 0.7, 0);
  double left = x - ha * (wb + we);
  attn__plot_draw_text(cr, t->s, left, y, size, 0, 0, va, 0);
  attn__plot_draw_text(cr, e, left + wb, y - size * 0.4, size * 0.7, 0, 0, va, 0);
}

double attn__plot_max_tick_width(cairo_t *cr, const ticklist *tl, double size) {
  double w = 0;
  for (int i = 0; i < tl->n; i++) w = fmax(w, attn__plot_tick_width(cr, &tl->t[i], size));
  return w;
}

/* ------------------------------------------------------------------------ */
/* Cartesian axes (lines, histogram)                                         */

double attn__plot_ax_px(const axes *a, double x) { return a->x + (x - a->xlo) / (a->xhi - a->xlo) * a->w; }
double attn__plot_ax_py(const axes *a, double y) { return a->y + a->h - (y - a->ylo) / (a->yhi - a->ylo) * a->h; }

/* Data limits lo..hi padded by 5% each side (matplotlib's margins); a
   single value gets a unit-wide view. */
void attn__plot_pad_range(double *lo, double *hi, double frac) {
  if (*hi > *lo) {
    double d = (*hi - *lo) * frac;
    *lo -= d;
    *hi += d;
  } else {
    double d = *lo == 0 ? 1 : fabs(*lo) * 0.1;
    *lo -= d;
    *hi += d;
  }
}

/* Margins from the text around the plot: fills a->x, y, w, h and the ticks
   (the view limits must be set).  Fails if the labels leave no room. */
attn_status attn__plot_axes_layout(figure *f, axes *a, const attn_plot_figure *lb, double right_extra) {
  cairo_t *m = f->m;
  double lh_tick = attn__plot_line_height(m, FS_TICK), lh_label = attn__plot_line_height(m, FS_LABEL);
  double top = PAD + (lb->title ? attn__plot_line_height(m, FS_TITLE) + 6 : lh_tick / 2);
  double bottom = PAD + TICK_LEN + 3 + lh_tick + (lb->xlabel ? lh_label + 4 : 0);
  double h = f->h - top - bottom;
  int ytarget = (int)fmax(2, fmin(10, h / 60));
  if (a->ylog)
    attn__plot_log_ticks(a->ylo, a->yhi, ytarget, &a->yt);
  else
    attn__plot_nice_ticks(a->ylo, a->yhi, ytarget, &a->yt);
  double left = PAD + (lb->ylabel ? lh_label + 6 : 0) + attn__plot_max_tick_width(m, &a->yt, FS_TICK) + TICK_LEN + 4;
  double right = PAD + 14 + right_extra;
  double w = f->w - left - right;
  int xtarget = (int)fmax(2, fmin(10, w / 80));
  attn__plot_nice_ticks(a->xlo, a->xhi, xtarget, &a->xt);
  /* Wide x labels: fewer ticks until they do not touch. */
  while (a->xt.n > 2 && attn__plot_max_tick_width(m, &a->xt, FS_TICK) + 8 > w / a->xt.n && xtarget > 2)
    attn__plot_nice_ticks(a->xlo, a->xhi, --xtarget, &a->xt);
  if (w < 40 || h < 40)
    return attn__plot_figure_fail(
        f, ATTN_ERR_ARG, "%s: a %.0f x %.0f figure leaves no room for the plot beside its labels", f->fn, f->w, f->h);
  a->x = round(left);
  a->y = round(top);
  a->w = round(w);
  a->h = round(h);
  return ATTN_OK;
}

void attn__plot_axes_draw_grid(figure *f, const axes *a, int xgrid) {
  cairo_t *cr = f->cr;
  cairo_save(cr);
  cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
  cairo_set_line_width(cr, 1);
  for (int i = 0; i < a->yt.n; i++) {
    double y = attn__plot_crisp(f, attn__plot_ax_py(a, a->yt.t[i].v));
    cairo_move_to(cr, a->x, y);
    cairo_line_to(cr, a->x + a->w, y);
  }
  if (xgrid)
    for (int i = 0; i < a->xt.n; i++) {
      double x = attn__plot_crisp(f, attn__plot_ax_px(a, a->xt.t[i].v));
      cairo_move_to(cr, x, a->y);
      cairo_line_to(cr, x, a->y + a->h);
    }
  cairo_stroke(cr);
  cairo_restore(cr);
}

/* Frame, ticks, tick labels, axis labels and title. */
void attn__plot_axes_draw_frame(figure *f, const axes *a, const attn_plot_figure *lb) {
  cairo_t *cr = f->cr;
  double x0 = attn__plot_crisp(f, a->x), y0 = attn__plot_crisp(f, a->y), x1 = attn__plot_crisp(f, a->x + a->w),
         y1 = attn__plot_crisp(f, a->y + a->h);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
  cairo_stroke(cr);
  for (int i = 0; i < a->xt.n; i++) {
    double x = attn__plot_crisp(f, attn__plot_ax_px(a, a->xt.t[i].v));
    cairo_move_to(cr, x, y1);
    cairo_line_to(cr, x, y1 + TICK_LEN);
  }
  for (int i = 0; i < a->yt.n; i++) {
    double y = attn__plot_crisp(f, attn__plot_ax_py(a, a->yt.t[i].v));
    cairo_move_to(cr, x0, y);
    cairo_line_to(cr, x0 - TICK_LEN, y);
  }
  for (int i = 0; i < a->yt.nminor; i++) {
    double y = attn__plot_crisp(f, attn__plot_ax_py(a, a->yt.minor[i]));
    cairo_move_to(cr, x0, y);
    cairo_line_to(cr, x0 - TICK_LEN / 2, y);
  }
  cairo_stroke(cr);
  for (int i = 0; i < a->xt.n; i++)
    attn__plot_draw_tick_label(cr, &a->xt.t[i], attn__plot_ax_px(a, a->xt.t[i].v), y1 + TICK_LEN + 3, FS_TICK, 0.5, 0);
  double ywmax = 0;
  for (int i = 0; i < a->yt.n; i++) {
    attn__plot_draw_tick_label(cr, &a->yt.t[i], x0 - TICK_LEN - 3, attn__plot_ax_py(a, a->yt.t[i].v), FS_TICK, 1, 0.5);
    ywmax = fmax(ywmax, attn__plot_tick_width(cr, &a->yt.t[i], FS_TICK));
  }
  double lh_tick = attn__plot_line_height(cr, FS_TICK);
  if (lb->xlabel)
    attn__plot_draw_text(cr, lb->xlabel, a->x + a->w / 2, y1 + TICK_LEN + 3 + lh_tick + 4, FS_LABEL, 0, 0.5, 0, 0);
  if (lb->ylabel)
    attn__plot_draw_text(cr, lb->ylabel, x0 - TICK_LEN - 3 - ywmax - 6, a->y + a->h / 2, FS_LABEL, 0, 0.5, 1,
                         PLOT_PI / 2);
  if (lb->title) attn__plot_draw_text(cr, lb->title, a->x + a->w / 2, a->y - 6, FS_TITLE, 1, 0.5, 1, 0);
}
