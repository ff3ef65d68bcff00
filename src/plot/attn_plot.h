/* SPDX-License-Identifier: MIT */
/*
 * attn_plot.h - attn's figures: heatmaps, histograms and line plots drawn
 * with cairo into PNG, SVG or PDF files, as a plain C API.
 *
 * The room: src/plot sits on floor 2 beside src/dist, over the core.  It
 * includes attn.h (statuses, attn_set_error, the atomic file writer) and
 * cairo, nothing else of attn; the Lua binding (src/lua/plot.c) is its only
 * caller in the tree and does nothing but argument conversion.  Only the
 * targets that carry the binding link cairo; libattn never does.
 *
 * Why a C API and not Lua over a thin cairo binding: the drawing is some
 * 1,350 lines of geometry (nice ticks, text measurement, label layout and
 * rotation, legend placement) whose loops run over every cell, bin and
 * point, on 46 distinct cairo functions.  Lua over cairo would need all of
 * those bound as Lua functions, each a userdata lifetime, an error path
 * and a fuzz target, and would leave cairo surfaces and the temporary file
 * to Lua's collector: a failed figure would be released some time later
 * instead of at once.  As C, one call owns its cairo objects from start to
 * end and every error path destroys them and removes the temporary before
 * it returns; the same code is driven by C tests directly
 * (spec/c/test_plot.c) and by the binding, which stays a converter of
 * arguments like the rest of src/lua; and the inner loops touch no Lua
 * values.
 *
 * Conventions (those of attn.h):
 *  - Every function returns an attn_status; on failure attn_last_error()
 *    names the function and the option, e.g. "heatmap: unknown cmap 'jet'
 *    (known: ...)", the output structs are left untouched and no file is
 *    left behind: a figure is written to "<path>.tmp.XXXXXX" beside path
 *    and renamed over it once complete (attn_file_writer_open).
 *  - Data are plain C arrays of doubles that the caller owns and keeps
 *    alive for the call; nothing is retained after it returns.  There is
 *    no global state: the colour map tables are constant, and each call
 *    makes and destroys its own cairo surfaces.
 *  - Indices are 0-based.  Where a default label or x value counts rows,
 *    columns or points, it starts at fig.index_base (0 from the _init
 *    functions; the Lua binding sets 1).  Messages name array elements the
 *    C way ("series[0]", "edges[2]").
 *  - Sizes are pixels for PNG and points for SVG/PDF; coordinates in the
 *    layouts are from the figure's top-left corner.
 *  - Optional numbers are NaN when not given; the _init functions set every
 *    option to its default.
 */
#ifndef ATTN_PLOT_H
#define ATTN_PLOT_H

#include "attn.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Limits (checked by every drawing function). */
#define ATTN_PLOT_MIN_SIZE 32.0    /* a figure side */
#define ATTN_PLOT_MAX_SIZE 16384.0 /* (cairo image surfaces stop at 32767) */
#define ATTN_PLOT_MAX_SIDE 4096    /* heatmap rows or columns */
#define ATTN_PLOT_MAX_BINS 100000  /* histogram bins */
#define ATTN_PLOT_MAX_SERIES 1000  /* lines */

/* What every figure takes. */
typedef struct attn_plot_figure {
  const char *path;                    /* required: .png, .svg or .pdf (any case) */
  const char *title, *xlabel, *ylabel; /* NULL: none */
  double width, height;                /* NaN: automatic (640 x 480; heatmaps size themselves from their cells) */
  int index_base;                      /* first number of default labels / x values */
} attn_plot_figure;

typedef struct attn_plot_rect {
  double x, y, w, h;
} attn_plot_rect;

/* What was drawn where.  Every kind fills width, height and area; the
   other fields belong to the kinds named beside them (zero otherwise). */
typedef struct attn_plot_layout {
  double width, height; /* the figure */
  attn_plot_rect area;  /* the cells / the plot area inside the axes */
  /* heatmap */
  int64_t rows, cols;
  double vmin, vmax; /* the colour range used */
  bool rotated_col_labels;
  bool has_colorbar;
  attn_plot_rect colorbar;
  /* histogram and lines: the view, in data units (lines with logy: values, not log10) */
  double xmin, xmax, ymin, ymax;
  /* lines */
  bool has_legend;
  attn_plot_rect legend;
  /* attention grid (also rows, cols, vmin, vmax, colorbar, area: the
     cells' bounding box, rotated_col_labels: the key labels) */
  double cell;                   /* the side of one map entry */
  bool query_labels, key_labels; /* whether the tokens were drawn */
} attn_plot_layout;

/* ------------------------------------------------------------------------ */
/* Heatmap: a rows x cols matrix, row 0 at the top.                          */

typedef struct attn_plot_heatmap {
  attn_plot_figure fig;
  const double *values;          /* rows x cols, row-major; NaN cells stay blank */
  int64_t rows, cols;            /* 1 .. ATTN_PLOT_MAX_SIDE each */
  const char *const *row_labels; /* NULL (numbers) or rows strings */
  const char *const *col_labels; /* NULL or cols strings; turn vertical when they do not fit */
  const char *cmap;              /* NULL: "viridis"; see attn_plot_colormap_name */
  bool colorbar;                 /* default true */
  const char *annotate;          /* NULL: no values in the cells; "": "%.0f" for integral data, else
                                    "%.2f"; or a format with one %f, %e or %g (at most 9 decimals) */
  double vmin, vmax;             /* NaN: the finite data range; values beyond are clamped */
} attn_plot_heatmap;

void attn_plot_heatmap_init(attn_plot_heatmap *h);
/* Writes h->fig.path; layout may be NULL. */
attn_status attn_plot_heatmap_draw(const attn_plot_heatmap *h, attn_plot_layout *layout);

/* ------------------------------------------------------------------------ */
/* Attention grid: rows x cols small heatmaps (layers x heads), each a
   queries x keys map (row 0 of a map, the first query, at its top), on
   one colour scale with one colour bar.  Row labels go left of each row,
   column labels above the first row; the query labels left of the first
   column's maps and the key labels below the last row's maps, when a
   map entry is large enough to hold them (a 6-unit font at least; key
   labels turn vertical when they do not fit across an entry).         */

#define ATTN_PLOT_GRID_CELL_MIN 0.1 /* cell: the side of a map entry, in this range */
#define ATTN_PLOT_GRID_CELL_MAX 64.0
#define ATTN_PLOT_GRID_MAX_MAPS 2048 /* per row or column (with their 8-unit gaps, no more fit) */

typedef struct attn_plot_grid {
  attn_plot_figure fig;            /* width and height are not used: the size follows from cell */
  const double *values;            /* [rows, cols, queries, keys], row-major; NaN entries stay blank */
  int64_t rows, cols;              /* maps per column and per row, >= 1 */
  int64_t queries, keys;           /* 1 .. ATTN_PLOT_MAX_SIDE each */
  const char *const *row_labels;   /* NULL ("layer <n>") or rows strings */
  const char *const *col_labels;   /* NULL ("head <n>") or cols strings */
  const char *const *query_labels; /* NULL (none) or queries strings */
  const char *const *key_labels;   /* NULL (none) or keys strings */
  const char *cmap;                /* NULL: "viridis" */
  bool colorbar;                   /* default true */
  double vmin, vmax;               /* NaN: min(0, data minimum) and the data maximum */
  double cell;                     /* side of one entry, ATTN_PLOT_GRID_CELL_MIN .. _MAX; NaN: automatic,
                                      see attn_plot_grid_auto_cell */
} attn_plot_grid;

void attn_plot_grid_init(attn_plot_grid *g);
/* The automatic entry size: the longer side of a map about 160 units,
   less when there are many maps (a row of maps, and a column, share
   1920 units), in whole units from 1 to 32.  A 12 x 12 grid of 64 x 64
   maps gets 2 (maps of 128 units, 1,624 across with the gaps); 2 x 3
   maps of 5 tokens get 32. */
double attn_plot_grid_auto_cell(int64_t rows, int64_t cols, int64_t queries, int64_t keys);
/* Writes g->fig.path.  cells: NULL or room for rows * cols rectangles,
   the maps' places in row-major order; layout may be NULL. */
attn_status attn_plot_grid_draw(const attn_plot_grid *g, attn_plot_rect *cells, attn_plot_layout *layout);

/* ------------------------------------------------------------------------ */
/* Histogram: numpy.histogram's binning (as plt.hist).  Every bin is [a, b)
   except the last, [a, b]; values outside the edges, NaN and +-inf are not
   counted.                                                                  */

typedef struct attn_plot_histogram {
  attn_plot_figure fig;
  const double *values;
  int64_t n;
  int64_t bins;        /* number of bins, 1 .. ATTN_PLOT_MAX_BINS (default 10) */
  const double *edges; /* NULL: bins equal bins over range; else bins + 1 increasing finite edges */
  double range[2];     /* NaN: the finite data range; not with edges */
  bool density;        /* counts / (total * bin width) */
} attn_plot_histogram;

void attn_plot_histogram_init(attn_plot_histogram *h);
/* counts gets h->bins values, edges_out h->bins + 1 (both required);
   layout may be NULL. */
attn_status attn_plot_histogram_draw(const attn_plot_histogram *h, double *counts, double *edges_out,
                                     attn_plot_layout *layout);

/* ------------------------------------------------------------------------ */
/* Lines: one or more series in matplotlib's default colour cycle; labelled
   ones get a legend in the corner that hides the fewest points.  NaN points
   (and non-positive ones with logy) break the line.                         */

typedef struct attn_plot_series {
  const double *x; /* NULL: fig.index_base, fig.index_base + 1, ... */
  const double *y;
  int64_t n;         /* >= 1 */
  const char *label; /* NULL: not in the legend */
} attn_plot_series;

typedef struct attn_plot_lines {
  attn_plot_figure fig;
  const attn_plot_series *series;
  int64_t nseries; /* 1 .. ATTN_PLOT_MAX_SERIES */
  bool logy;       /* y on a log10 scale */
} attn_plot_lines;

void attn_plot_lines_init(attn_plot_lines *l);
attn_status attn_plot_lines_draw(const attn_plot_lines *l, attn_plot_layout *layout);

/* ------------------------------------------------------------------------ */
/* Colour maps and reading pixels back                                       */

/* The colour maps, i = 0 .. count - 1 (NULL beyond). */
int attn_plot_colormap_count(void);
const char *attn_plot_colormap_name(int i);
/* The colour of map name at t in [0, 1] (clamped; NaN is 0), r, g, b in
   [0, 1].  fn names the caller in the message for an unknown name. */
attn_status attn_plot_colormap(const char *fn, const char *name, double t, double rgb[3]);

/* Statistics of a PNG's pixels (for tests).  Colours are r, g, b, a in
   0..255, alpha undone. */
typedef struct attn_plot_pixel_stats {
  int width, height;
  int64_t pixels; /* in the region */
  int64_t colors; /* distinct */
  int64_t nonwhite;
  bool has_extremes;           /* pixels > 0 */
  int lightest[4], darkest[4]; /* by luminance */
  bool has_pixel;
  int pixel[4]; /* at xy */
} attn_plot_pixel_stats;

/* xy: NULL, or a point whose pixel is reported (it must be inside the
   image); wh: NULL (the whole image) or the size of a region starting at
   xy (or at 0, 0), clipped to the image. */
attn_status attn_plot_pixel_stats_read(const char *path, const double *xy, const double *wh,
                                       attn_plot_pixel_stats *out);

/* How far two PNGs of the same size are apart (for screenshot tests):
   mean_abs is the mean absolute difference over all pixels and the r, g,
   b, a channels (0..255, alpha undone); differing is the fraction of
   pixels whose largest channel difference exceeds 32. */
typedef struct attn_plot_png_diff_result {
  int width, height;
  double mean_abs;
  double differing;
} attn_plot_png_diff_result;

/* Reads both files with cairo; images of different sizes are an error
   (ATTN_ERR_ARG), as is a file that is not a PNG (ATTN_ERR_IO). */
attn_status attn_plot_png_diff(const char *path_a, const char *path_b, attn_plot_png_diff_result *out);

#ifdef __cplusplus
}
#endif

#endif
