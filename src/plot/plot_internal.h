/* SPDX-License-Identifier: MIT */
/* Shared by the drawing files of src/plot (not installed): a figure (a
 * cairo surface writing through an attn_file_writer), text, ticks and
 * cartesian axes.  Every function that can fail returns an attn_status
 * and has released the figure (cairo objects, temporary file) when it
 * does, so callers just return the status.  Names with external linkage
 * carry the internal prefix attn__plot_ (they end up in attn/core.so and
 * libattn_lua beside the embedding program's own symbols).
 */
#ifndef ATTN_PLOT_INTERNAL_H
#define ATTN_PLOT_INTERNAL_H

#include "attn_plot.h"

#include <cairo.h>

#define PLOT_PI 3.14159265358979323846
#define PLOT_COUNT(a) ((int)(sizeof(a) / sizeof(a)[0]))

/* Text sizes (pixels / points) and spacing. */
enum { FS_TICK = 11, FS_LABEL = 13, FS_TITLE = 15, FS_LEGEND = 11 };
#define PAD 10.0
#define TICK_LEN 4.0

/* ------------------------------------------------------------------------ */
/* Colour maps (colormap.c)                                                  */

typedef struct plot_cmap {
  const char *name;
  int n;
  const float (*rgb)[3];
  const float *x; /* NULL: control points evenly spaced on [0, 1] */
} plot_cmap;

#define PLOT_CMAP_NAMES "viridis, magma, hot, gray, coolwarm"
/* NULL when there is no such map. */
const plot_cmap *attn__plot_cmap_find(const char *name);
double attn__plot_cmap_x(const plot_cmap *c, int i);
/* Colour at t in [0, 1] (clamped, NaN is 0), linear between control points. */
void attn__plot_cmap_eval(const plot_cmap *c, double t, double rgb[3]);
/* The tab10 cycle (matplotlib's default line colours). */
extern const double attn__plot_cycle[10][3];

/* ------------------------------------------------------------------------ */
/* Figures (figure.c)                                                        */

typedef enum { FMT_PNG, FMT_SVG, FMT_PDF } plot_format;

typedef struct figure {
  cairo_surface_t *msurf; /* 1x1 scratch surface: text is measured before */
  cairo_t *m;             /* the figure's size is known */
  cairo_surface_t *surf;
  cairo_t *cr;
  attn_file_writer *out; /* the temporary, between begin and end */
  attn_status write_st;  /* first failure seen by the write callback */
  plot_format fmt;
  double w, h;
  const char *fn, *path;
} figure;

/* Checks the common options: path given, sizes NaN or in range. */
attn_status attn__plot_figure_check(const char *fn, const attn_plot_figure *opts);
/* Checks them again, and the path's format, and makes the figure's
   measuring context; nothing is written yet. */
attn_status attn__plot_figure_open(figure *f, const char *fn, const attn_plot_figure *opts);
/* Opens the temporary file and the w x h surface; paints it white. */
attn_status attn__plot_figure_begin(figure *f, double w, double h);
/* Encodes (PNG) or finishes (SVG/PDF) the surface and renames the
   temporary over the path; releases the figure either way. */
attn_status attn__plot_figure_end(figure *f);
/* Releases everything the figure holds (removing the temporary). */
void attn__plot_figure_discard(figure *f);
/* Discards the figure and records a message (printf format); returns st. */
attn_status attn__plot_figure_fail(figure *f, attn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A 1-unit line on pixel centres in PNGs, so axes are crisp. */
double attn__plot_crisp(const figure *f, double v);

/* Text */
double attn__plot_text_width(cairo_t *cr, const char *s, double size, int bold);
/* Height of a line of text (ascent + descent). */
double attn__plot_line_height(cairo_t *cr, double size);
/* Draws s anchored at (x, y): ha 0 / 0.5 / 1 puts the anchor at the left,
   centre or right of the text, va 0 / 0.5 / 1 at the top, middle or
   bottom of its line box; angle turns the text counter-clockwise. */
void attn__plot_draw_text(cairo_t *cr, const char *s, double x, double y, double size, int bold, double ha, double va,
                          double angle);

/* ------------------------------------------------------------------------ */
/* Ticks (figure.c)                                                          */

#define MAX_TICKS 40

typedef struct tick {
  double v;   /* position in axis units (log10 of the value on log axes) */
  char s[40]; /* label; with has_exp set, the label is 10^exp */
  int has_exp, exp;
} tick;

typedef struct ticklist {
  int n, nminor;
  tick t[MAX_TICKS];
  double minor[4 * MAX_TICKS];
} ticklist;

/* "Nice" steps (1, 2, 2.5, 5 x 10^k) giving about target ticks in [lo, hi]. */
void attn__plot_nice_ticks(double lo, double hi, int target, ticklist *tl);
/* Ticks of a log10 axis spanning [lo, hi] in log units. */
void attn__plot_log_ticks(double lo, double hi, int target, ticklist *tl);
double attn__plot_tick_width(cairo_t *cr, const tick *t, double size);
void attn__plot_draw_tick_label(cairo_t *cr, const tick *t, double x, double y, double size, double ha, double va);
double attn__plot_max_tick_width(cairo_t *cr, const ticklist *tl, double size);

/* ------------------------------------------------------------------------ */
/* Colour bars: heatmaps and attention grids (heatmap.c)                     */

#define CBAR_GAP 14.0 /* from the cells */
#define CBAR_W 16.0
/* Room right of the cells for a bar over [lo, hi] with its labels. */
double attn__plot_colorbar_room(cairo_t *m, double lo, double hi);
/* Draws the bar at x, y (its top), h tall, low values at the bottom. */
void attn__plot_colorbar_draw(figure *f, const plot_cmap *cmap, double lo, double hi, double x, double y, double h);

/* What heatmaps and attention grids share (heatmap.c). */
/* NULL entries of a label list are refused, naming option key. */
attn_status attn__plot_check_labels(const char *fn, const char *key, const char *const *list, int64_t n);
/* vmin / vmax: NaN (not given) or finite. */
attn_status attn__plot_check_limit(const char *fn, const char *key, double v);
/* values [rows, cols] as cells cw x ch from x, y, coloured over [lo, hi]
   and clipped to them; NaN cells stay blank.  PNG edges are rounded to
   whole pixels (no seams); vector cells overlap their right/bottom
   neighbours slightly for the same reason. */
void attn__plot_draw_cells(figure *f, const plot_cmap *cmap, const double *values, int64_t rows, int64_t cols,
                           double lo, double hi, double x, double y, double cw, double ch);
/* The figure's size fw x fh grown to hold a title (when widen_for_title)
   and to the minimum size, the plot moved (left, top) to stay centred. */
void attn__plot_fit_figure(cairo_t *m, const char *title, int widen_for_title, double *left, double *top, double *fw,
                           double *fh);
/* The end of a heatmap-like figure: the colour bar right of area (when
   colorbar), the file written, and layout's common fields (when layout). */
attn_status attn__plot_heat_finish(figure *f, const plot_cmap *cmap, double lo, double hi, int colorbar,
                                   attn_plot_rect area, int64_t rows, int64_t cols, int rotated,
                                   attn_plot_layout *layout);

/* ------------------------------------------------------------------------ */
/* Cartesian axes: lines and histogram (figure.c)                            */

typedef struct axes {
  double x, y, w, h; /* plot area */
  double xlo, xhi;   /* view limits in axis units */
  double ylo, yhi;   /* (log10 of the values when ylog) */
  int ylog;
  ticklist xt, yt;
} axes;

double attn__plot_ax_px(const axes *a, double x);
double attn__plot_ax_py(const axes *a, double y);
/* Data limits lo..hi padded by frac of the span each side; a single value
   gets a unit-wide view. */
void attn__plot_pad_range(double *lo, double *hi, double frac);
/* Margins from the text around the plot: fills a->x, y, w, h and the ticks
   (the view limits must be set).  Fails (discarding f) if the labels leave
   no room. */
attn_status attn__plot_axes_layout(figure *f, axes *a, const attn_plot_figure *lb, double right_extra);
void attn__plot_axes_draw_grid(figure *f, const axes *a, int xgrid);
/* Frame, ticks, tick labels, axis labels and title. */
void attn__plot_axes_draw_frame(figure *f, const axes *a, const attn_plot_figure *lb);

#endif
