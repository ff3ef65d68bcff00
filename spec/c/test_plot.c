/* SPDX-License-Identifier: MIT */
/* The plot room's C API (src/plot/attn_plot.h) driven directly, without
 * Lua: a small heatmap, a histogram and a line plot written into a
 * temporary directory and read back (sizes, cell colours, layout numbers),
 * SVG and PDF by extension, colour maps, and the error paths: each must
 * fail with a message naming the function and option, leave the layout
 * untouched and leave no file (nor temporary) behind.  Run it under
 * valgrind to see every error path free what it made.
 */
#define _XOPEN_SOURCE 700

#include <dirent.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cairo.h>

#include "attn.h"
#include "check.h"
#include "plot/attn_plot.h"
#include "scratch_dir.h"

/* Entries in tmpdir. */
static int count_files(void) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static int file_starts_with(const char *path, const char *magic) {
  char buf[16] = {0};
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t n = fread(buf, 1, strlen(magic), f);
  fclose(f);
  return n == strlen(magic) && memcmp(buf, magic, n) == 0;
}

static int error_has(const char *piece) {
  if (strstr(attn_last_error(), piece)) return 1;
  fprintf(stderr, "message \"%s\" lacks \"%s\"\n", attn_last_error(), piece);
  return 0;
}

/* The colour map at t in 0..255, as cairo's 8-bit PNG holds it. */
static void cmap255(const char *name, double t, int out[3]) {
  double rgb[3] = {0, 0, 0};
  CHECK_OK(attn_plot_colormap("test", name, t, rgb));
  for (int k = 0; k < 3; k++) out[k] = (int)floor(rgb[k] * 255 + 0.5);
}

static void check_pixel(const char *path, double x, double y, const int rgb[3], int tol) {
  attn_plot_pixel_stats ps;
  double xy[2] = {x, y};
  CHECK_OK(attn_plot_pixel_stats_read(path, xy, NULL, &ps));
  CHECK(ps.has_pixel);
  for (int k = 0; k < 3; k++)
    if (abs(ps.pixel[k] - rgb[k]) > tol) {
      CHECK(!"pixel colour");
      fprintf(stderr, "  (%g, %g): got (%d, %d, %d), expected (%d, %d, %d)\n", x, y, ps.pixel[0], ps.pixel[1],
              ps.pixel[2], rgb[0], rgb[1], rgb[2]);
      return;
    }
}

static void test_colormaps(void) {
  CHECK(attn_plot_colormap_count() == 5);
  CHECK(strcmp(attn_plot_colormap_name(0), "viridis") == 0);
  CHECK(strcmp(attn_plot_colormap_name(4), "coolwarm") == 0);
  CHECK(attn_plot_colormap_name(5) == NULL && attn_plot_colormap_name(-1) == NULL);
  double rgb[3];
  CHECK_OK(attn_plot_colormap("test", "gray", 0.25, rgb));
  CHECK_NEAR(rgb[0], 0.25, 1e-6);
  CHECK_OK(attn_plot_colormap("test", "viridis", NAN, rgb)); /* NaN is 0 */
  CHECK_NEAR(rgb[0], 0.267004, 1e-6);
  CHECK_OK(attn_plot_colormap("test", "hot", 7, rgb)); /* clamped to 1 */
  CHECK_NEAR(rgb[2], 1, 1e-6);
  CHECK(attn_plot_colormap("test", "jet", 0.5, rgb) == ATTN_ERR_ARG && error_has("test: unknown cmap 'jet'"));
}

/* A 2 x 3 heatmap: automatic size, 48-unit square cells, numbered labels. */
static void test_heatmap(void) {
  const double v[6] = {0, 1, 2, 3, 4, 5};
  attn_plot_heatmap h;
  attn_plot_heatmap_init(&h);
  h.fig.path = tpath("h.png");
  h.fig.title = "t";
  h.values = v;
  h.rows = 2;
  h.cols = 3;
  attn_plot_layout lay;
  CHECK_OK(attn_plot_heatmap_draw(&h, &lay));
  CHECK(lay.rows == 2 && lay.cols == 3);
  CHECK(lay.vmin == 0 && lay.vmax == 5);
  CHECK(lay.area.w == 144 && lay.area.h == 96); /* 3 x 48 by 2 x 48 */
  CHECK(lay.has_colorbar && lay.colorbar.h == 96 && lay.colorbar.w == 16);
  CHECK(lay.colorbar.x >= lay.area.x + lay.area.w);
  CHECK(!lay.rotated_col_labels);
  attn_plot_pixel_stats ps;
  CHECK_OK(attn_plot_pixel_stats_read(h.fig.path, NULL, NULL, &ps));
  CHECK(ps.width == lay.width && ps.height == lay.height);
  CHECK(ps.pixels == (int64_t)ps.width * ps.height && ps.colors > 20 && ps.has_extremes);
  /* row 0 at the top: cell (0, 0) is the minimum, (1, 2) the maximum */
  double cw = lay.area.w / 3, ch = lay.area.h / 2;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      int rgb[3];
      cmap255("viridis", v[i * 3 + j] / 5, rgb);
      check_pixel(h.fig.path, lay.area.x + (j + 0.5) * cw, lay.area.y + (i + 0.5) * ch, rgb, 1);
    }
  /* a region inside one cell is one flat colour */
  double xy[2] = {lay.area.x + 2, lay.area.y + 2}, wh[2] = {cw - 4, ch - 4};
  CHECK_OK(attn_plot_pixel_stats_read(h.fig.path, xy, wh, &ps));
  CHECK(ps.colors == 1 && ps.pixels == (int64_t)(cw - 4) * (int64_t)(ch - 4));

  /* given size, labels (too wide for a cell: vertical), annotations, SVG */
  const char *cols[3] = {"a first column, labelled at length", "second", "third"};
  h.col_labels = cols;
  h.annotate = "";
  h.cmap = "magma";
  h.fig.width = 400;
  h.fig.height = 300;
  h.fig.path = tpath("h.svg");
  CHECK_OK(attn_plot_heatmap_draw(&h, &lay));
  CHECK(lay.width == 400 && lay.height == 300 && lay.rotated_col_labels);
  CHECK(file_starts_with(h.fig.path, "<?xml"));
  h.fig.path = tpath("H.PDF");
  h.colorbar = false;
  CHECK_OK(attn_plot_heatmap_draw(&h, &lay));
  CHECK(!lay.has_colorbar && file_starts_with(h.fig.path, "%PDF-"));
}

/* An attention grid of 2 x 2 maps of 3 queries x 4 keys: cells, colours
   (a NaN entry blank), the automatic entry size, SVG/PDF (as images past
   4096 entries) and the error paths. */
static void test_grid(void) {
  double v[2 * 2 * 3 * 4];
  for (int k = 0; k < 48; k++) v[k] = k;
  v[5] = NAN; /* map (0, 0), query 1, key 1 */
  attn_plot_grid g;
  attn_plot_grid_init(&g);
  g.fig.path = tpath("g.png");
  g.fig.title = "grid";
  g.values = v;
  g.rows = g.cols = 2;
  g.queries = 3;
  g.keys = 4;
  attn_plot_rect cells[4];
  attn_plot_layout lay;
  CHECK_OK(attn_plot_grid_draw(&g, cells, &lay));
  CHECK(lay.cell == 32 && lay.rows == 2 && lay.cols == 2); /* 160 / 4 keys */
  CHECK(lay.vmin == 0 && lay.vmax == 47 && lay.has_colorbar && !lay.query_labels && !lay.key_labels);
  CHECK(cells[0].w == 128 && cells[0].h == 96 && cells[1].y == cells[0].y && cells[2].x == cells[0].x);
  CHECK(cells[1].x >= cells[0].x + 128 && cells[2].y >= cells[0].y + 96);
  CHECK(lay.area.x == cells[0].x && lay.area.w == cells[3].x + 128 - cells[0].x);
  CHECK(lay.colorbar.y == lay.area.y && lay.colorbar.h == lay.area.h);
  attn_plot_pixel_stats ps;
  CHECK_OK(attn_plot_pixel_stats_read(g.fig.path, NULL, NULL, &ps));
  CHECK(ps.width == lay.width && ps.height == lay.height);
  for (int m = 0; m < 4; m++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) {
        int k = (m * 3 + i) * 4 + j, rgb[3] = {255, 255, 255};
        if (!isnan(v[k])) cmap255("viridis", v[k] / 47, rgb);
        check_pixel(g.fig.path, cells[m].x + (j + 0.5) * 32, cells[m].y + (i + 0.5) * 32, rgb, 1);
      }
  /* the automatic entry size */
  CHECK(attn_plot_grid_auto_cell(12, 12, 64, 64) == 2);
  CHECK(attn_plot_grid_auto_cell(2, 3, 5, 5) == 32);
  CHECK(attn_plot_grid_auto_cell(1, 1, 2, 2) == 32);
  CHECK(attn_plot_grid_auto_cell(1, 48, 512, 512) == 1);
  /* labels, given entry size, vector formats, no outputs asked */
  const char *q[3] = {"a", "b", "c"}, *kl[4] = {"w", "x", "y", "z"};
  g.query_labels = q;
  g.key_labels = kl;
  g.cell = 12;
  g.fig.path = tpath("g.svg");
  CHECK_OK(attn_plot_grid_draw(&g, NULL, &lay));
  CHECK(lay.cell == 12 && lay.query_labels && lay.key_labels && !lay.rotated_col_labels);
  CHECK(file_starts_with(g.fig.path, "<?xml"));
  g.fig.path = tpath("g.pdf");
  g.colorbar = false;
  CHECK_OK(attn_plot_grid_draw(&g, NULL, NULL));
  CHECK(file_starts_with(g.fig.path, "%PDF-"));
  /* 2 x 2 maps of 40 x 40: maps as images in SVG */
  static double big[2 * 2 * 40 * 40];
  for (int k = 0; k < 6400; k++) big[k] = (k * 37 % 101) / 100.0;
  attn_plot_grid_init(&g);
  g.fig.path = tpath("big.svg");
  g.values = big;
  g.rows = g.cols = 2;
  g.queries = g.keys = 40;
  CHECK_OK(attn_plot_grid_draw(&g, cells, &lay));
  CHECK(lay.cell == 4 && cells[3].w == 160);
  FILE *f = fopen(g.fig.path, "rb");
  static char text[1 << 20];
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = 0;
  int images = 0;
  for (const char *p = text; (p = strstr(p, "<image")); p++) images++;
  CHECK(images == 4);

  /* errors: a message, the outputs untouched, no file left */
  int files = count_files();
  attn_plot_layout sentinel;
  memset(&sentinel, 0x5a, sizeof sentinel);
#define GRID_FAILS(st, piece)                                                                                          \
  do {                                                                                                                 \
    lay = sentinel;                                                                                                    \
    CHECK(attn_plot_grid_draw(&g, NULL, &lay) == (st));                                                                \
    CHECK(error_has(piece));                                                                                           \
    CHECK(memcmp(&lay, &sentinel, sizeof lay) == 0);                                                                   \
    CHECK(count_files() == files);                                                                                     \
  } while (0)
  g.fig.path = tpath("e.png");
  g.cell = 0.05;
  GRID_FAILS(ATTN_ERR_ARG, "attention_grid: option 'cell' must be 0.1 to 64 (got 0.05)");
  g.cell = 64;
  g.rows = g.cols = 1;
  g.queries = 20;
  g.keys = 300; /* 300 x 64 across: past 16384 */
  GRID_FAILS(ATTN_ERR_ARG, "attention_grid: 1 x 1 maps of [20, 300] at cell = 64 make a");
  g.rows = g.cols = 2;
  g.queries = g.keys = 40;
  g.cell = NAN;
  g.cmap = "jet";
  GRID_FAILS(ATTN_ERR_ARG, "attention_grid: unknown cmap 'jet'");
  g.cmap = NULL;
  g.vmin = 2;
  g.vmax = 1;
  GRID_FAILS(ATTN_ERR_ARG, "vmin (2) is above vmax (1)");
  g.vmin = -INFINITY;
  GRID_FAILS(ATTN_ERR_ARG, "option 'vmin' must be a finite number");
  g.vmin = g.vmax = NAN;
  const char *two[2] = {"x", NULL};
  g.row_labels = two;
  GRID_FAILS(ATTN_ERR_ARG, "option 'row_labels': row_labels[1] is NULL");
  g.row_labels = NULL;
  g.keys = 0;
  GRID_FAILS(ATTN_ERR_SHAPE, "attention_grid: nothing to draw: 2 x 2 maps of [40, 0]");
  g.keys = 5000;
  GRID_FAILS(ATTN_ERR_SHAPE, "too large to draw");
  g.keys = 40;
  g.cols = 2049;
  GRID_FAILS(ATTN_ERR_SHAPE, "attention_grid: 2 x 2049 maps do not fit in a figure (at most 2048 a side)");
  g.cols = 2;
  g.keys = 40;
  g.fig.path = tpath("e.bmp");
  GRID_FAILS(ATTN_ERR_ARG, "must end in .png, .svg or .pdf");
  double nans[4] = {NAN, NAN, NAN, NAN};
  g.fig.path = tpath("e.png");
  g.values = nans;
  g.rows = g.cols = g.queries = 1;
  g.keys = 4;
  GRID_FAILS(ATTN_ERR_ARG, "no finite values");
#undef GRID_FAILS
}

static void test_histogram(void) {
  const double v[7] = {1, 2, 2, 3, 3, 3, NAN};
  attn_plot_histogram h;
  attn_plot_histogram_init(&h);
  h.fig.path = tpath("hist.png");
  h.values = v;
  h.n = 7;
  h.bins = 3;
  double counts[3], edges[4];
  attn_plot_layout lay;
  CHECK_OK(attn_plot_histogram_draw(&h, counts, edges, &lay));
  CHECK(counts[0] == 1 && counts[1] == 2 && counts[2] == 3);
  CHECK(edges[0] == 1 && edges[3] == 3);
  CHECK_NEAR(edges[1], 5.0 / 3, 1e-12);
  CHECK_NEAR(lay.xmin, 0.9, 1e-12); /* 5% of the span each side */
  CHECK_NEAR(lay.xmax, 3.1, 1e-12);
  CHECK(lay.ymin == 0);
  CHECK_NEAR(lay.ymax, 3.15, 1e-12);
  CHECK(lay.width == 640 && lay.height == 480);
  /* the tallest bar's middle is matplotlib's first colour */
  double x = lay.area.x + (2.75 - lay.xmin) / (lay.xmax - lay.xmin) * lay.area.w;
  double y = lay.area.y + lay.area.h - 1.5 / lay.ymax * lay.area.h;
  check_pixel(h.fig.path, x, y, (const int[3]){31, 119, 180}, 1);

  /* given edges and density */
  const double e[3] = {0, 2.5, 4};
  h.edges = e;
  h.bins = 2;
  h.density = true;
  CHECK_OK(attn_plot_histogram_draw(&h, counts, edges, &lay));
  CHECK_NEAR(counts[0] * 2.5 + counts[1] * 1.5, 1, 1e-12);
  CHECK_NEAR(counts[0], 3.0 / 6 / 2.5, 1e-12);
}

static void test_lines(void) {
  const double y0[4] = {1, 2, NAN, 4}, y1[4] = {4, 3, 2, 1}, x1[4] = {10, 20, 30, 40};
  attn_plot_series s[2] = {{NULL, y0, 4, "a"}, {NULL, y1, 4, NULL}};
  attn_plot_lines l;
  attn_plot_lines_init(&l);
  l.fig.path = tpath("lines.png");
  l.series = s;
  l.nseries = 2;
  attn_plot_layout lay;
  CHECK_OK(attn_plot_lines_draw(&l, &lay));
  /* default x: 0, 1, 2, 3 (index_base 0), padded by 5% */
  CHECK_NEAR(lay.xmin, -0.15, 1e-12);
  CHECK_NEAR(lay.xmax, 3.15, 1e-12);
  CHECK_NEAR(lay.ymin, 0.85, 1e-12);
  CHECK_NEAR(lay.ymax, 4.15, 1e-12);
  CHECK(lay.has_legend && lay.legend.w > 20 && lay.legend.h > 10);
  l.fig.index_base = 1;
  CHECK_OK(attn_plot_lines_draw(&l, &lay));
  CHECK_NEAR(lay.xmin, 0.85, 1e-12);
  s[0].label = NULL;
  s[1].x = x1;
  l.logy = true;
  l.fig.path = tpath("lines.pdf");
  CHECK_OK(attn_plot_lines_draw(&l, &lay));
  CHECK(!lay.has_legend && file_starts_with(l.fig.path, "%PDF-"));
  CHECK_NEAR(lay.xmin, 1 - 0.05 * 39, 1e-12); /* x from 1 to 40 */
  CHECK_NEAR(log10(lay.ymin), -0.05 * log10(4), 1e-12);
}

/* Each failure: the status, a message naming the function, the layout
   untouched, no new file in tmpdir. */
static void test_errors(void) {
  const double v[4] = {1, 2, 3, 4};
  attn_plot_layout lay, sentinel;
  memset(&sentinel, 0x5a, sizeof sentinel);
  int files = count_files();
#define FAILS(st, piece, call)                                                                                         \
  do {                                                                                                                 \
    lay = sentinel;                                                                                                    \
    CHECK((call) == (st));                                                                                             \
    CHECK(error_has(piece));                                                                                           \
    CHECK(memcmp(&lay, &sentinel, sizeof lay) == 0);                                                                   \
    CHECK(count_files() == files);                                                                                     \
  } while (0)

  attn_plot_heatmap h;
  attn_plot_heatmap_init(&h);
  h.fig.path = tpath("e.png");
  h.values = v;
  h.rows = 2;
  h.cols = 2;
  h.cmap = "jet";
  FAILS(ATTN_ERR_ARG, "heatmap: unknown cmap 'jet'", attn_plot_heatmap_draw(&h, &lay));
  h.cmap = NULL;
  h.annotate = "%s";
  FAILS(ATTN_ERR_ARG, "option 'annotate'", attn_plot_heatmap_draw(&h, &lay));
  h.annotate = NULL;
  h.vmin = 3;
  h.vmax = 1;
  FAILS(ATTN_ERR_ARG, "vmin (3) is above vmax (1)", attn_plot_heatmap_draw(&h, &lay));
  h.vmin = h.vmax = NAN;
  h.rows = 0;
  FAILS(ATTN_ERR_SHAPE, "heatmap: the matrix is empty ([0, 2])", attn_plot_heatmap_draw(&h, &lay));
  h.rows = 5000;
  FAILS(ATTN_ERR_SHAPE, "too large", attn_plot_heatmap_draw(&h, &lay));
  h.rows = 2;
  h.fig.width = 10;
  FAILS(ATTN_ERR_ARG, "option 'width' must be between 32 and 16384 (got 10)", attn_plot_heatmap_draw(&h, &lay));
  /* found once the figure and its measuring context exist */
  h.fig.width = h.fig.height = 40;
  FAILS(ATTN_ERR_ARG, "leaves no room for the cells", attn_plot_heatmap_draw(&h, &lay));
  h.fig.width = h.fig.height = NAN;
  h.fig.path = tpath("e.jpg");
  FAILS(ATTN_ERR_ARG, "cannot tell the format of", attn_plot_heatmap_draw(&h, &lay));
  h.fig.path = NULL;
  FAILS(ATTN_ERR_ARG, "option 'path' is required", attn_plot_heatmap_draw(&h, &lay));
  /* file system failures: no directory; a directory where the file goes
     (the temporary is written, then the rename fails and removes it) */
  h.fig.path = tpath("missing/e.png");
  FAILS(ATTN_ERR_IO, "missing/e.png", attn_plot_heatmap_draw(&h, &lay));
  CHECK(mkdir(tpath("dir.svg"), 0755) == 0);
  files = count_files();
  h.fig.path = tpath("dir.svg");
  FAILS(ATTN_ERR_IO, "cannot replace", attn_plot_heatmap_draw(&h, &lay));
  const double nan2[2] = {NAN, NAN};
  h.fig.path = tpath("e.png");
  h.values = nan2;
  h.rows = 1;
  FAILS(ATTN_ERR_ARG, "no finite values", attn_plot_heatmap_draw(&h, &lay));

  attn_plot_histogram g;
  attn_plot_histogram_init(&g);
  g.fig.path = tpath("e.png");
  g.values = v;
  g.n = 4;
  double counts[3], edges[4];
  const double bad_edges[4] = {0, 2, 2, 3};
  g.edges = bad_edges;
  g.bins = 3;
  FAILS(ATTN_ERR_ARG, "histogram: bin edges must increase (edges[2] is 2 after 2)",
        attn_plot_histogram_draw(&g, counts, edges, &lay));
  g.edges = NULL;
  g.bins = 0;
  FAILS(ATTN_ERR_ARG, "option 'bins' must be 1 to 100000 (got 0)", attn_plot_histogram_draw(&g, counts, edges, &lay));
  g.bins = 3;
  g.range[0] = 2;
  g.range[1] = 1;
  FAILS(ATTN_ERR_ARG, "option 'range' is reversed", attn_plot_histogram_draw(&g, counts, edges, &lay));
  g.range[0] = g.range[1] = NAN;
  FAILS(ATTN_ERR_ARG, "counts and edges_out are required", attn_plot_histogram_draw(&g, NULL, edges, &lay));
  g.fig.height = 40;
  FAILS(ATTN_ERR_ARG, "leaves no room for the plot", attn_plot_histogram_draw(&g, counts, edges, &lay));

  attn_plot_series s[2] = {{NULL, v, 4, NULL}, {NULL, v, 0, NULL}};
  attn_plot_lines l;
  attn_plot_lines_init(&l);
  l.fig.path = tpath("e.svg");
  l.series = s;
  l.nseries = 2;
  FAILS(ATTN_ERR_ARG, "lines: series[1] is empty", attn_plot_lines_draw(&l, &lay));
  l.nseries = 0;
  FAILS(ATTN_ERR_ARG, "lines: no series", attn_plot_lines_draw(&l, &lay));
  const double neg[2] = {-1, 0};
  s[0].y = neg;
  s[0].n = 2;
  l.nseries = 1;
  l.logy = true;
  FAILS(ATTN_ERR_ARG, "no finite positive points", attn_plot_lines_draw(&l, &lay));

  /* the disk fills up while cairo streams the SVG out (RLIMIT_FSIZE):
     the write callback's failure ends the figure, the old file stays */
  static double big[400];
  for (int i = 0; i < 400; i++) big[i] = i;
  h.values = big;
  h.rows = h.cols = 20;
  h.annotate = "";
  h.fig.path = tpath("h.svg");
  struct stat before, after;
  CHECK(stat(h.fig.path, &before) == 0);
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 16 * 1024;
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of the signal */
  setrlimit(RLIMIT_FSIZE, &lim);
  lay = sentinel;
  attn_status st = attn_plot_heatmap_draw(&h, &lay);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  CHECK(st == ATTN_ERR_IO && error_has("heatmap: writing") && error_has("File too large"));
  CHECK(memcmp(&lay, &sentinel, sizeof lay) == 0 && count_files() == files);
  CHECK(stat(h.fig.path, &after) == 0 && after.st_size == before.st_size && after.st_mtime == before.st_mtime);

  attn_plot_pixel_stats ps;
  CHECK(attn_plot_pixel_stats_read(tpath("h.svg"), NULL, NULL, &ps) == ATTN_ERR_IO && error_has("not a PNG"));
  double far[2] = {1e6, 0};
  CHECK(attn_plot_pixel_stats_read(tpath("h.png"), far, NULL, &ps) == ATTN_ERR_INDEX && error_has("outside"));
#undef FAILS
}

/* attn_plot_png_diff, the screenshot comparison of the HTML views' spec:
   PNGs with pixels set exactly are compared, so the mean absolute channel
   difference and the share of pixels more than 32 apart are known in
   advance; then its errors. */
/* A w x h opaque PNG at path, every pixel fill (0xRRGGBB), then the pixels
   of the list (x, y, colour) set; n the list's length. */
static void write_exact_png(const char *path, int w, int h, uint32_t fill, const uint32_t (*set)[3], int n) {
  cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
  cairo_surface_flush(s);
  unsigned char *data = cairo_image_surface_get_data(s);
  int stride = cairo_image_surface_get_stride(s);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) ((uint32_t *)(void *)(data + (size_t)y * (size_t)stride))[x] = fill;
  for (int i = 0; i < n; i++) ((uint32_t *)(void *)(data + (size_t)set[i][1] * (size_t)stride))[set[i][0]] = set[i][2];
  cairo_surface_mark_dirty(s);
  CHECK(cairo_surface_write_to_png(s, path) == CAIRO_STATUS_SUCCESS);
  cairo_surface_destroy(s);
}

static void test_png_diff_values(void) {
  const char *a = tpath("d_a.png"), *b = tpath("d_b.png");
  write_exact_png(a, 10, 4, 0xffffff, NULL, 0);
  /* 40 pixels: one 40 lower in red (over 32), one 32 lower in all three
     channels (not over), one black (255 in three channels) */
  static const uint32_t set[][3] = {{0, 0, 0xd7ffff}, {5, 2, 0xdfdfdf}, {9, 3, 0x000000}};
  write_exact_png(b, 10, 4, 0xffffff, set, 3);
  attn_plot_png_diff_result r;
  CHECK_OK(attn_plot_png_diff(a, a, &r));
  CHECK(r.width == 10 && r.height == 4 && r.mean_abs == 0 && r.differing == 0);
  CHECK_OK(attn_plot_png_diff(a, b, &r));
  CHECK(r.width == 10 && r.height == 4);
  /* channel differences: 40 + 3 * 32 + 3 * 255 over 40 pixels x 4 channels */
  CHECK(fabs(r.mean_abs - (40.0 + 96.0 + 765.0) / 160.0) < 1e-12);
  CHECK(fabs(r.differing - 2.0 / 40.0) < 1e-12);
  attn_plot_png_diff_result back;
  CHECK_OK(attn_plot_png_diff(b, a, &back));
  CHECK(back.mean_abs == r.mean_abs && back.differing == r.differing);
}

static void test_png_diff_errors(void) {
  const char *a = tpath("d_a.png"), *c = tpath("d_c.png"), *t = tpath("d_t.txt");
  write_exact_png(c, 11, 4, 0xffffff, NULL, 0);
  attn_plot_png_diff_result r = {0};
  CHECK(attn_plot_png_diff(a, c, &r) == ATTN_ERR_ARG && error_has("png_diff") && error_has("is 10x4 but") &&
        error_has("is 11x4"));
  FILE *f = fopen(t, "wb");
  CHECK(f != NULL);
  if (f) {
    fputs("not a png", f);
    fclose(f);
  }
  CHECK(attn_plot_png_diff(a, t, &r) == ATTN_ERR_IO && error_has("is not a PNG file"));
  CHECK(attn_plot_png_diff(tpath("d_missing.png"), a, &r) == ATTN_ERR_IO && error_has("cannot open"));
  CHECK(attn_plot_png_diff(NULL, a, &r) == ATTN_ERR_ARG && error_has("path is NULL"));
  CHECK(r.width == 0 && r.mean_abs == 0); /* untouched by the failures */
}

int main(void) {
  if (!scratch_open("plot")) return 1;
  test_colormaps();
  test_heatmap();
  test_grid();
  test_histogram();
  test_lines();
  test_errors();
  test_png_diff_values();
  test_png_diff_errors();
  scratch_close();
  /* cairo's font face cache (with the fontconfig patterns it holds) is
     released, so that a leak checker sees only what the calls left */
  cairo_debug_reset_static_data();
  return check_summary();
}
