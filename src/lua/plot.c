/* Lua binding: attn.plot, figures drawn with cairo.
 *
 * Registered as attn.core._plot and wrapped by lua/attn/plot.lua, which
 * documents the options and checks their names:
 *   _plot.heatmap(m, opts)      m: 2-d tensor or nested table [rows, cols]
 *                               (a 1-d one is a single row)
 *   _plot.histogram(v, opts)    v: tensor or list, flattened
 *   _plot.lines(series, opts)   series: list of {y =, x =, label =}
 *       -> path, layout   (layout: plot area, ranges, what was drawn)
 *   _plot.colormap(name, t) -> r, g, b in [0, 1]
 *   _plot.colormaps() -> list of names
 *   _plot.pixel_stats(path [, x, y [, w, h]]) -> {width, height, colors,
 *       nonwhite, pixels, lightest, darkest, pixel}   (reads a PNG back,
 *       for tests)
 * The format follows opts.path's extension (.png, .svg, .pdf).  Files go
 * through a temporary beside the path and are renamed over it once
 * complete (like attn.save), so a failed plot leaves no half file.
 * Sizes are pixels for PNG and points for SVG/PDF.
 *
 * Everything that can raise (argument and option checks, allocations of
 * Lua-owned buffers) happens before cairo objects exist or while they sit
 * in a figure userdata whose __gc releases them; error paths release them
 * explicitly before raising.
 */
#define _POSIX_C_SOURCE 200809L

#include "binding.h"
#include "openers.h"
#include "core/io_internal.h" /* attn__sink: atomic file replacement */

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIGURE_MT "attn.plot.Figure"
#define FONT_FAMILY "DejaVu Sans"
#define PI 3.14159265358979323846

/* Text sizes (pixels / points) and spacing. */
enum { FS_TICK = 11, FS_LABEL = 13, FS_TITLE = 15, FS_LEGEND = 11 };
#define PAD 10.0
#define TICK_LEN 4.0
#define MAX_SIZE 16384.0 /* cairo image surfaces stop at 32767 */
#define MIN_SIZE 32.0

/* luaL_error with C's printf formats (%g; lua_pushfstring has none). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int plot_error(lua_State *L, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  luaL_where(L, 1);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

/* ------------------------------------------------------------------------ */
/* Colour maps                                                               */

/* viridis and magma: every third entry (0, 3, ..., 255) of matplotlib's
   256-entry tables (_cm_listed.py; CC0, by Nathaniel Smith and Stefan van
   der Walt).  Linear interpolation between them stays within 0.25/255 of
   the full table.  coolwarm: matplotlib's 33 control points (Moreland's
   diverging map).  hot and gray: matplotlib's segment data, exact. */
static const float cm_viridis[][3] = {
  {0.267004f, 0.004874f, 0.329415f}, {0.271305f, 0.019942f, 0.347269f}, {0.274952f, 0.037752f, 0.364543f},
  {0.277941f, 0.056324f, 0.381191f}, {0.280267f, 0.073417f, 0.397163f}, {0.281924f, 0.089666f, 0.412415f},
  {0.282910f, 0.105393f, 0.426902f}, {0.283229f, 0.120777f, 0.440584f}, {0.282884f, 0.135920f, 0.453427f},
  {0.281887f, 0.150881f, 0.465405f}, {0.280255f, 0.165693f, 0.476498f}, {0.278012f, 0.180367f, 0.486697f},
  {0.275191f, 0.194905f, 0.496005f}, {0.271828f, 0.209303f, 0.504434f}, {0.267968f, 0.223549f, 0.512008f},
  {0.263663f, 0.237631f, 0.518762f}, {0.258965f, 0.251537f, 0.524736f}, {0.253935f, 0.265254f, 0.529983f},
  {0.248629f, 0.278775f, 0.534556f}, {0.243113f, 0.292092f, 0.538516f}, {0.237441f, 0.305202f, 0.541921f},
  {0.231674f, 0.318106f, 0.544834f}, {0.225863f, 0.330805f, 0.547314f}, {0.220057f, 0.343307f, 0.549413f},
  {0.214298f, 0.355619f, 0.551184f}, {0.208623f, 0.367752f, 0.552675f}, {0.203063f, 0.379716f, 0.553925f},
  {0.197636f, 0.391528f, 0.554969f}, {0.192357f, 0.403199f, 0.555836f}, {0.187231f, 0.414746f, 0.556547f},
  {0.182256f, 0.426184f, 0.557120f}, {0.177423f, 0.437527f, 0.557565f}, {0.172719f, 0.448791f, 0.557885f},
  {0.168126f, 0.459988f, 0.558082f}, {0.163625f, 0.471133f, 0.558148f}, {0.159194f, 0.482237f, 0.558073f},
  {0.154815f, 0.493313f, 0.557840f}, {0.150476f, 0.504369f, 0.557430f}, {0.146180f, 0.515413f, 0.556823f},
  {0.141935f, 0.526453f, 0.555991f}, {0.137770f, 0.537492f, 0.554906f}, {0.133743f, 0.548535f, 0.553541f},
  {0.129933f, 0.559582f, 0.551864f}, {0.126453f, 0.570633f, 0.549841f}, {0.123463f, 0.581687f, 0.547445f},
  {0.121148f, 0.592739f, 0.544641f}, {0.119738f, 0.603785f, 0.541400f}, {0.119483f, 0.614817f, 0.537692f},
  {0.120638f, 0.625828f, 0.533488f}, {0.123444f, 0.636809f, 0.528763f}, {0.128087f, 0.647749f, 0.523491f},
  {0.134692f, 0.658636f, 0.517649f}, {0.143303f, 0.669459f, 0.511215f}, {0.153894f, 0.680203f, 0.504172f},
  {0.166383f, 0.690856f, 0.496502f}, {0.180653f, 0.701402f, 0.488189f}, {0.196571f, 0.711827f, 0.479221f},
  {0.214000f, 0.722114f, 0.469588f}, {0.232815f, 0.732247f, 0.459277f}, {0.252899f, 0.742211f, 0.448284f},
  {0.274149f, 0.751988f, 0.436601f}, {0.296479f, 0.761561f, 0.424223f}, {0.319809f, 0.770914f, 0.411152f},
  {0.344074f, 0.780029f, 0.397381f}, {0.369214f, 0.788888f, 0.382914f}, {0.395174f, 0.797475f, 0.367757f},
  {0.421908f, 0.805774f, 0.351910f}, {0.449368f, 0.813768f, 0.335384f}, {0.477504f, 0.821444f, 0.318195f},
  {0.506271f, 0.828786f, 0.300362f}, {0.535621f, 0.835785f, 0.281908f}, {0.565498f, 0.842430f, 0.262877f},
  {0.595839f, 0.848717f, 0.243329f}, {0.626579f, 0.854645f, 0.223353f}, {0.657642f, 0.860219f, 0.203082f},
  {0.688944f, 0.865448f, 0.182725f}, {0.720391f, 0.870350f, 0.162603f}, {0.751884f, 0.874951f, 0.143228f},
  {0.783315f, 0.879285f, 0.125405f}, {0.814576f, 0.883393f, 0.110347f}, {0.845561f, 0.887322f, 0.099702f},
  {0.876168f, 0.891125f, 0.095250f}, {0.906311f, 0.894855f, 0.098125f}, {0.935904f, 0.898570f, 0.108131f},
  {0.964894f, 0.902323f, 0.123941f}, {0.993248f, 0.906157f, 0.143936f},
};
static const float cm_magma[][3] = {
  {0.001462f, 0.000466f, 0.013866f}, {0.004512f, 0.003490f, 0.029965f}, {0.009426f, 0.008022f, 0.052844f},
  {0.016156f, 0.013840f, 0.076603f}, {0.024792f, 0.020715f, 0.100676f}, {0.035520f, 0.028397f, 0.125209f},
  {0.048062f, 0.036607f, 0.150327f}, {0.060949f, 0.044794f, 0.176129f}, {0.074257f, 0.052017f, 0.202660f},
  {0.088155f, 0.058133f, 0.229922f}, {0.102815f, 0.063010f, 0.257854f}, {0.118405f, 0.066479f, 0.286321f},
  {0.135053f, 0.068391f, 0.315000f}, {0.152839f, 0.068637f, 0.343404f}, {0.171713f, 0.067305f, 0.370771f},
  {0.191460f, 0.064818f, 0.396152f}, {0.211718f, 0.061992f, 0.418647f}, {0.232077f, 0.059889f, 0.437695f},
  {0.252220f, 0.059415f, 0.453248f}, {0.271994f, 0.060994f, 0.465660f}, {0.291366f, 0.064553f, 0.475462f},
  {0.310382f, 0.069702f, 0.483186f}, {0.329114f, 0.075972f, 0.489287f}, {0.347636f, 0.082946f, 0.494121f},
  {0.366012f, 0.090314f, 0.497960f}, {0.384299f, 0.097855f, 0.501002f}, {0.402548f, 0.105420f, 0.503386f},
  {0.420791f, 0.112920f, 0.505215f}, {0.439062f, 0.120298f, 0.506555f}, {0.457386f, 0.127522f, 0.507448f},
  {0.475780f, 0.134577f, 0.507921f}, {0.494258f, 0.141462f, 0.507988f}, {0.512831f, 0.148179f, 0.507648f},
  {0.531507f, 0.154739f, 0.506895f}, {0.550287f, 0.161158f, 0.505719f}, {0.569172f, 0.167454f, 0.504105f},
  {0.588158f, 0.173652f, 0.502035f}, {0.607238f, 0.179779f, 0.499492f}, {0.626401f, 0.185867f, 0.496456f},
  {0.645633f, 0.191952f, 0.492910f}, {0.664915f, 0.198075f, 0.488836f}, {0.684224f, 0.204286f, 0.484219f},
  {0.703532f, 0.210638f, 0.479049f}, {0.722805f, 0.217194f, 0.473316f}, {0.742004f, 0.224025f, 0.467018f},
  {0.761077f, 0.231214f, 0.460162f}, {0.779968f, 0.238851f, 0.452765f}, {0.798608f, 0.247040f, 0.444848f},
  {0.816914f, 0.255895f, 0.436461f}, {0.834791f, 0.265540f, 0.427671f}, {0.852126f, 0.276106f, 0.418573f},
  {0.868793f, 0.287728f, 0.409303f}, {0.884651f, 0.300530f, 0.400047f}, {0.899552f, 0.314616f, 0.391037f},
  {0.913354f, 0.330052f, 0.382563f}, {0.925937f, 0.346844f, 0.374959f}, {0.937221f, 0.364929f, 0.368567f},
  {0.947180f, 0.384178f, 0.363701f}, {0.955849f, 0.404400f, 0.360619f}, {0.963310f, 0.425390f, 0.359469f},
  {0.969680f, 0.446936f, 0.360311f}, {0.975082f, 0.468861f, 0.363111f}, {0.979645f, 0.491014f, 0.367783f},
  {0.983485f, 0.513280f, 0.374198f}, {0.986700f, 0.535582f, 0.382210f}, {0.989363f, 0.557873f, 0.391671f},
  {0.991558f, 0.580107f, 0.402441f}, {0.993326f, 0.602275f, 0.414390f}, {0.994738f, 0.624350f, 0.427397f},
  {0.995810f, 0.646344f, 0.441361f}, {0.996580f, 0.668256f, 0.456192f}, {0.997077f, 0.690088f, 0.471811f},
  {0.997325f, 0.711848f, 0.488154f}, {0.997341f, 0.733545f, 0.505167f}, {0.997138f, 0.755190f, 0.522806f},
  {0.996727f, 0.776795f, 0.541039f}, {0.996162f, 0.798348f, 0.559820f}, {0.995424f, 0.819875f, 0.579140f},
  {0.994524f, 0.841387f, 0.598983f}, {0.993545f, 0.862859f, 0.619299f}, {0.992440f, 0.884330f, 0.640099f},
  {0.991332f, 0.905763f, 0.661309f}, {0.990175f, 0.927196f, 0.682926f}, {0.989077f, 0.948604f, 0.704863f},
  {0.988033f, 0.970012f, 0.727077f}, {0.987053f, 0.991438f, 0.749504f},
};
static const float cm_coolwarm[][3] = {
  {0.229806f, 0.298718f, 0.753683f}, {0.266234f, 0.353095f, 0.801467f}, {0.303869f, 0.406535f, 0.844959f},
  {0.342804f, 0.458758f, 0.883726f}, {0.383013f, 0.509419f, 0.917388f}, {0.424370f, 0.558148f, 0.945620f},
  {0.466667f, 0.604563f, 0.968155f}, {0.509635f, 0.648281f, 0.984788f}, {0.552953f, 0.688929f, 0.995376f},
  {0.596262f, 0.726149f, 0.999836f}, {0.639176f, 0.759600f, 0.998151f}, {0.681291f, 0.788965f, 0.990363f},
  {0.722193f, 0.813953f, 0.976575f}, {0.761465f, 0.834303f, 0.956945f}, {0.798692f, 0.849786f, 0.931689f},
  {0.833467f, 0.860208f, 0.901069f}, {0.865395f, 0.865410f, 0.865396f}, {0.897787f, 0.848937f, 0.820881f},
  {0.924128f, 0.827385f, 0.774508f}, {0.944469f, 0.800927f, 0.726736f}, {0.958853f, 0.769768f, 0.678008f},
  {0.967328f, 0.734133f, 0.628752f}, {0.969954f, 0.694267f, 0.579375f}, {0.966811f, 0.650421f, 0.530264f},
  {0.958003f, 0.602842f, 0.481776f}, {0.943661f, 0.551751f, 0.434244f}, {0.923945f, 0.497309f, 0.387970f},
  {0.899046f, 0.439559f, 0.343230f}, {0.869187f, 0.378313f, 0.300267f}, {0.834621f, 0.312874f, 0.259301f},
  {0.795632f, 0.241284f, 0.220526f}, {0.752535f, 0.157246f, 0.184115f}, {0.705673f, 0.015556f, 0.150233f},
};
static const float cm_hot_rgb[][3] = {{0.0416f, 0.0f, 0.0f}, {1.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 0.0f}, {1.0f, 1.0f, 1.0f}};
static const float cm_hot_x[] = {0.0f, 0.365079f, 0.746032f, 1.0f};
static const float cm_gray_rgb[][3] = {{0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}};

typedef struct cmap_def {
  const char *name;
  int n;
  const float (*rgb)[3];
  const float *x; /* NULL: control points evenly spaced on [0, 1] */
} cmap_def;

#define COUNT(a) ((int)(sizeof(a) / sizeof(a)[0]))
static const cmap_def cmaps[] = {
  {"viridis", COUNT(cm_viridis), cm_viridis, NULL},
  {"magma", COUNT(cm_magma), cm_magma, NULL},
  {"hot", COUNT(cm_hot_rgb), cm_hot_rgb, cm_hot_x},
  {"gray", COUNT(cm_gray_rgb), cm_gray_rgb, NULL},
  {"coolwarm", COUNT(cm_coolwarm), cm_coolwarm, NULL},
};
#define CMAP_NAMES "viridis, magma, hot, gray, coolwarm"

static const cmap_def *find_cmap(const char *name) {
  for (int i = 0; i < COUNT(cmaps); i++)
    if (strcmp(cmaps[i].name, name) == 0) return &cmaps[i];
  return NULL;
}

static double cmap_x(const cmap_def *c, int i) { return c->x ? c->x[i] : (double)i / (c->n - 1); }

/* Colour at t in [0, 1] (clamped), linear between control points. */
static void cmap_eval(const cmap_def *c, double t, double rgb[3]) {
  if (!(t > 0)) t = 0; /* also NaN */
  if (t > 1) t = 1;
  int i = 0;
  if (!c->x) {
    double f = t * (c->n - 1);
    i = (int)f;
    if (i > c->n - 2) i = c->n - 2;
  } else {
    while (i < c->n - 2 && c->x[i + 1] < t) i++;
  }
  double x0 = cmap_x(c, i), x1 = cmap_x(c, i + 1);
  double u = (t - x0) / (x1 - x0);
  for (int k = 0; k < 3; k++) rgb[k] = c->rgb[i][k] + (c->rgb[i + 1][k] - c->rgb[i][k]) * u;
}

/* The tab10 cycle (matplotlib's default line colours). */
static const double cycle[][3] = {
  {0x1f / 255.0, 0x77 / 255.0, 0xb4 / 255.0}, {0xff / 255.0, 0x7f / 255.0, 0x0e / 255.0},
  {0x2c / 255.0, 0xa0 / 255.0, 0x2c / 255.0}, {0xd6 / 255.0, 0x27 / 255.0, 0x28 / 255.0},
  {0x94 / 255.0, 0x67 / 255.0, 0xbd / 255.0}, {0x8c / 255.0, 0x56 / 255.0, 0x4b / 255.0},
  {0xe3 / 255.0, 0x77 / 255.0, 0xc2 / 255.0}, {0x7f / 255.0, 0x7f / 255.0, 0x7f / 255.0},
  {0xbc / 255.0, 0xbd / 255.0, 0x22 / 255.0}, {0x17 / 255.0, 0xbe / 255.0, 0xcf / 255.0},
};

/* ------------------------------------------------------------------------ */
/* Figures: a cairo surface writing through an attn__sink                    */

typedef enum { FMT_PNG, FMT_SVG, FMT_PDF } fig_format;

typedef struct figure {
  cairo_surface_t *msurf; /* 1x1 scratch surface: text is measured before */
  cairo_t *m;             /* the figure's size is known */
  cairo_surface_t *surf;
  cairo_t *cr;
  attn__sink sink;
  int sink_open;
  attn_status write_st; /* first failure seen by write_cb */
  fig_format fmt;
  double w, h;
  const char *fn, *path;
} figure;

static void figure_discard(figure *f) {
  if (f->cr) cairo_destroy(f->cr);
  /* Destroying a vector surface flushes it into the sink, which is then
     thrown away. */
  if (f->surf) cairo_surface_destroy(f->surf);
  if (f->m) cairo_destroy(f->m);
  if (f->msurf) cairo_surface_destroy(f->msurf);
  if (f->sink_open) attn__sink_abort(&f->sink);
  f->cr = NULL;
  f->surf = NULL;
  f->m = NULL;
  f->msurf = NULL;
  f->sink_open = 0;
}

static int figure_gc(lua_State *L) {
  figure *f = luaL_checkudata(L, 1, FIGURE_MT);
  figure_discard(f);
  return 0;
}

/* Raises msg after releasing everything the figure holds. */
static int figure_fail(lua_State *L, figure *f, const char *msg) {
  lua_pushstring(L, msg); /* copy first: discarding may touch the error state */
  figure_discard(f);
  return lua_error(L);
}

static cairo_status_t write_cb(void *closure, const unsigned char *data, unsigned int len) {
  figure *f = closure;
  if (f->write_st || !f->sink_open) return CAIRO_STATUS_WRITE_ERROR;
  f->write_st = attn__sink_write(&f->sink, data, len);
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

/* Pushes a figure for opts.path (format from the extension) with its
   measuring context; nothing is written yet. */
static figure *figure_new(lua_State *L, const char *fn, const char *path) {
  fig_format fmt;
  if (ends_with_ci(path, ".png")) fmt = FMT_PNG;
  else if (ends_with_ci(path, ".svg")) fmt = FMT_SVG;
  else if (ends_with_ci(path, ".pdf")) fmt = FMT_PDF;
  else {
    plot_error(L, "%s: cannot tell the format of '%s': the path must end in .png, .svg or .pdf", fn, path);
    return NULL;
  }
  figure *f = lua_newuserdatauv(L, sizeof *f, 0);
  memset(f, 0, sizeof *f);
  luaL_setmetatable(L, FIGURE_MT);
  f->fmt = fmt;
  f->fn = fn;
  f->path = path;
  f->msurf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  f->m = cairo_create(f->msurf);
  if (cairo_status(f->m) != CAIRO_STATUS_SUCCESS) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: cairo: %s", fn, cairo_status_to_string(cairo_status(f->m)));
    figure_fail(L, f, msg);
  }
  return f;
}

/* Opens the temporary file and the w x h surface; paints it white. */
static void figure_begin(lua_State *L, figure *f, double w, double h) {
  char msg[200];
  if (!(w >= MIN_SIZE && h >= MIN_SIZE && w <= MAX_SIZE && h <= MAX_SIZE)) {
    snprintf(msg, sizeof msg, "%s: a %.0f x %.0f figure is out of range (each side must be %.0f to %.0f)", f->fn, w,
             h, MIN_SIZE, MAX_SIZE);
    figure_fail(L, f, msg);
  }
  f->w = w;
  f->h = h;
  if (attn__sink_open(&f->sink, f->fn, f->path) != ATTN_OK) figure_fail(L, f, attn_last_error());
  f->sink_open = 1;
  switch (f->fmt) {
  case FMT_PNG: f->surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)ceil(w), (int)ceil(h)); break;
  case FMT_SVG: f->surf = cairo_svg_surface_create_for_stream(write_cb, f, w, h); break;
  case FMT_PDF: f->surf = cairo_pdf_surface_create_for_stream(write_cb, f, w, h); break;
  }
  f->cr = cairo_create(f->surf);
  if (cairo_status(f->cr) != CAIRO_STATUS_SUCCESS) {
    snprintf(msg, sizeof msg, "%s: cannot create a %.0f x %.0f surface: %s", f->fn, w, h,
             cairo_status_to_string(cairo_status(f->cr)));
    figure_fail(L, f, msg);
  }
  cairo_set_source_rgb(f->cr, 1, 1, 1);
  cairo_paint(f->cr);
  cairo_set_line_cap(f->cr, CAIRO_LINE_CAP_BUTT);
  cairo_set_line_join(f->cr, CAIRO_LINE_JOIN_ROUND);
}

/* Encodes (PNG) or finishes (SVG/PDF) the surface and renames the
   temporary over the path; raises on any failure. */
static void figure_end(lua_State *L, figure *f) {
  char msg[200];
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
  if (f->write_st) figure_fail(L, f, attn_last_error());
  if (cs != CAIRO_STATUS_SUCCESS) {
    snprintf(msg, sizeof msg, "%s: drawing '%s' failed: %s", f->fn, f->path, cairo_status_to_string(cs));
    figure_fail(L, f, msg);
  }
  cairo_surface_destroy(f->surf);
  f->surf = NULL;
  f->sink_open = 0; /* commit closes or removes the temporary either way */
  if (attn__sink_commit(&f->sink) != ATTN_OK) figure_fail(L, f, attn_last_error());
  figure_discard(f);
}

/* A 1-unit line on pixel centres in PNGs, so axes are crisp. */
static double crisp(const figure *f, double v) { return f->fmt == FMT_PNG ? floor(v) + 0.5 : v; }

/* ------------------------------------------------------------------------ */
/* Text                                                                      */

static void set_font(cairo_t *cr, double size, int bold) {
  cairo_select_font_face(cr, FONT_FAMILY, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

static double text_width(cairo_t *cr, const char *s, double size, int bold) {
  cairo_text_extents_t te;
  set_font(cr, size, bold);
  cairo_text_extents(cr, s, &te);
  return te.x_advance;
}

/* Height of a line of text (ascent + descent). */
static double line_height(cairo_t *cr, double size) {
  cairo_font_extents_t fe;
  set_font(cr, size, 0);
  cairo_font_extents(cr, &fe);
  return fe.ascent + fe.descent;
}

/* Draws s anchored at (x, y): ha 0 / 0.5 / 1 puts the anchor at the left,
   centre or right of the text, va 0 / 0.5 / 1 at the top, middle or
   bottom of its line box; angle turns the text counter-clockwise. */
static void draw_text(cairo_t *cr, const char *s, double x, double y, double size, int bold, double ha, double va,
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

#define MAX_TICKS 40

typedef struct tick {
  double v;      /* position in axis units (log10 of the value on log axes) */
  char s[40];    /* label; with exp set, the label is 10^exp */
  int has_exp, exp;
} tick;

typedef struct ticklist {
  int n, nminor;
  tick t[MAX_TICKS];
  double minor[4 * MAX_TICKS];
} ticklist;

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
  if (a >= 1e6 || step < 1e-4) snprintf(buf, n, "%.4g", v);
  else snprintf(buf, n, "%.*f", step_decimals(step), v);
}

/* "Nice" steps (1, 2, 2.5, 5 x 10^k) giving about target ticks in [lo, hi]. */
static void nice_ticks(double lo, double hi, int target, ticklist *tl) {
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
static void log_ticks(double lo, double hi, int target, ticklist *tl) {
  tl->n = 0;
  tl->nminor = 0;
  int k0 = (int)ceil(lo - 1e-9), k1 = (int)floor(hi + 1e-9);
  if (k1 - k0 + 1 < 2) {
    ticklist lin;
    nice_ticks(pow(10, lo), pow(10, hi), target, &lin);
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
static double tick_width(cairo_t *cr, const tick *t, double size) {
  double w = text_width(cr, t->s, size, 0);
  if (t->has_exp) {
    char e[16];
    snprintf(e, sizeof e, "%d", t->exp);
    w += text_width(cr, e, size * 0.7, 0);
  }
  return w;
}

static void draw_tick_label(cairo_t *cr, const tick *t, double x, double y, double size, double ha, double va) {
  if (!t->has_exp) {
    draw_text(cr, t->s, x, y, size, 0, ha, va, 0);
    return;
  }
  char e[16];
  snprintf(e, sizeof e, "%d", t->exp);
  double wb = text_width(cr, t->s, size, 0), we = text_width(cr, e, size * 0.7, 0);
  double left = x - ha * (wb + we);
  draw_text(cr, t->s, left, y, size, 0, 0, va, 0);
  draw_text(cr, e, left + wb, y - size * 0.4, size * 0.7, 0, 0, va, 0);
}

static double max_tick_width(cairo_t *cr, const ticklist *tl, double size) {
  double w = 0;
  for (int i = 0; i < tl->n; i++) w = fmax(w, tick_width(cr, &tl->t[i], size));
  return w;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */


/* opts[key] as a string, or def when absent.  The value stays on the
   stack so the pointer lives as long as the call. */
static const char *opt_string(lua_State *L, int opts, const char *key, const char *def, const char *fn) {
  int ty = lua_getfield(L, opts, key);
  if (ty == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  if (ty != LUA_TSTRING) plot_error(L, "%s: option '%s' must be a string (got %s)", fn, key, luaL_typename(L, -1));
  return lua_tostring(L, -1);
}

static double opt_number(lua_State *L, int opts, const char *key, double def, int *given, const char *fn) {
  int ty = lua_getfield(L, opts, key);
  double v = def;
  if (given) *given = ty != LUA_TNIL;
  if (ty == LUA_TNUMBER) {
    v = lua_tonumber(L, -1);
    if (!isfinite(v)) plot_error(L, "%s: option '%s' must be a finite number (got %f)", fn, key, v);
  } else if (ty != LUA_TNIL) {
    plot_error(L, "%s: option '%s' must be a number (got %s)", fn, key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

static int opt_bool(lua_State *L, int opts, const char *key, int def, const char *fn) {
  int ty = lua_getfield(L, opts, key);
  int v = def;
  if (ty == LUA_TBOOLEAN) v = lua_toboolean(L, -1);
  else if (ty != LUA_TNIL)
    plot_error(L, "%s: option '%s' must be a boolean (got %s)", fn, key, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

/* A figure side from opts (width / height), or 0 for "not given". */
static double opt_size(lua_State *L, int opts, const char *key, const char *fn) {
  int given;
  double v = opt_number(L, opts, key, 0, &given, fn);
  if (given && !(v >= MIN_SIZE && v <= MAX_SIZE))
    plot_error(L, "%s: option '%s' must be between %.0f and %.0f (got %g)", fn, key, MIN_SIZE, MAX_SIZE, v);
  return given ? v : 0;
}

/* The options table at arg and its required path. */
static const char *check_opts(lua_State *L, int arg, const char *fn) {
  luaL_checktype(L, arg, LUA_TTABLE);
  const char *path = opt_string(L, arg, "path", NULL, fn);
  if (!path || !*path) plot_error(L, "%s: option 'path' is required (a .png, .svg or .pdf file name)", fn);
  return path;
}

/* The elements of the tensor at idx, row-major, as doubles in a Lua-owned
   buffer pushed on the stack. */
static double *tensor_values(lua_State *L, const attn_tensor *t, int64_t *n_out, const char *fn) {
  int64_t n = attn_tensor_numel(t);
  if ((uint64_t)n > SIZE_MAX / sizeof(double) / 2)
    plot_error(L, "%s: %lld values are too many", fn, (long long)n);
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

/* Common layout results returned to Lua. */
static void push_area(lua_State *L, const figure *f, double x, double y, double w, double h) {
  lua_newtable(L);
  lua_pushnumber(L, x);
  lua_setfield(L, -2, "x");
  lua_pushnumber(L, y);
  lua_setfield(L, -2, "y");
  lua_pushnumber(L, w);
  lua_setfield(L, -2, "w");
  lua_pushnumber(L, h);
  lua_setfield(L, -2, "h");
  lua_pushnumber(L, f->w);
  lua_setfield(L, -2, "width");
  lua_pushnumber(L, f->h);
  lua_setfield(L, -2, "height");
}

static void set_number(lua_State *L, const char *key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}

/* ------------------------------------------------------------------------ */
/* Cartesian axes (lines, histogram)                                         */

typedef struct axes {
  double x, y, w, h;  /* plot area */
  double xlo, xhi;    /* view limits in axis units */
  double ylo, yhi;    /* (log10 of the values when ylog) */
  int ylog;
  ticklist xt, yt;
} axes;

static double ax_px(const axes *a, double x) { return a->x + (x - a->xlo) / (a->xhi - a->xlo) * a->w; }
static double ax_py(const axes *a, double y) { return a->y + a->h - (y - a->ylo) / (a->yhi - a->ylo) * a->h; }

/* Data limits lo..hi padded by 5% each side (matplotlib's margins); a
   single value gets a unit-wide view. */
static void pad_range(double *lo, double *hi, double frac) {
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

typedef struct labels {
  const char *title, *xlabel, *ylabel;
} labels;

/* Margins from the text around the plot: fills a->x, y, w, h and the ticks
   (the view limits must be set).  Raises if the labels leave no room. */
static void axes_layout(lua_State *L, figure *f, axes *a, const labels *lb, double right_extra) {
  cairo_t *m = f->m;
  double lh_tick = line_height(m, FS_TICK), lh_label = line_height(m, FS_LABEL);
  double top = PAD + (lb->title ? line_height(m, FS_TITLE) + 6 : lh_tick / 2);
  double bottom = PAD + TICK_LEN + 3 + lh_tick + (lb->xlabel ? lh_label + 4 : 0);
  double h = f->h - top - bottom;
  int ytarget = (int)fmax(2, fmin(10, h / 60));
  if (a->ylog) log_ticks(a->ylo, a->yhi, ytarget, &a->yt);
  else nice_ticks(a->ylo, a->yhi, ytarget, &a->yt);
  double left = PAD + (lb->ylabel ? lh_label + 6 : 0) + max_tick_width(m, &a->yt, FS_TICK) + TICK_LEN + 4;
  double right = PAD + 14 + right_extra;
  double w = f->w - left - right;
  int xtarget = (int)fmax(2, fmin(10, w / 80));
  nice_ticks(a->xlo, a->xhi, xtarget, &a->xt);
  /* Wide x labels: fewer ticks until they do not touch. */
  while (a->xt.n > 2 && max_tick_width(m, &a->xt, FS_TICK) + 8 > w / a->xt.n && xtarget > 2)
    nice_ticks(a->xlo, a->xhi, --xtarget, &a->xt);
  if (w < 40 || h < 40) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: a %.0f x %.0f figure leaves no room for the plot beside its labels", f->fn,
             f->w, f->h);
    figure_fail(L, f, msg);
  }
  a->x = round(left);
  a->y = round(top);
  a->w = round(w);
  a->h = round(h);
}

static void axes_draw_grid(figure *f, const axes *a, int xgrid) {
  cairo_t *cr = f->cr;
  cairo_save(cr);
  cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
  cairo_set_line_width(cr, 1);
  for (int i = 0; i < a->yt.n; i++) {
    double y = crisp(f, ax_py(a, a->yt.t[i].v));
    cairo_move_to(cr, a->x, y);
    cairo_line_to(cr, a->x + a->w, y);
  }
  if (xgrid)
    for (int i = 0; i < a->xt.n; i++) {
      double x = crisp(f, ax_px(a, a->xt.t[i].v));
      cairo_move_to(cr, x, a->y);
      cairo_line_to(cr, x, a->y + a->h);
    }
  cairo_stroke(cr);
  cairo_restore(cr);
}

/* Frame, ticks, tick labels, axis labels and title. */
static void axes_draw_frame(figure *f, const axes *a, const labels *lb) {
  cairo_t *cr = f->cr;
  double x0 = crisp(f, a->x), y0 = crisp(f, a->y), x1 = crisp(f, a->x + a->w), y1 = crisp(f, a->y + a->h);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
  cairo_stroke(cr);
  for (int i = 0; i < a->xt.n; i++) {
    double x = crisp(f, ax_px(a, a->xt.t[i].v));
    cairo_move_to(cr, x, y1);
    cairo_line_to(cr, x, y1 + TICK_LEN);
  }
  for (int i = 0; i < a->yt.n; i++) {
    double y = crisp(f, ax_py(a, a->yt.t[i].v));
    cairo_move_to(cr, x0, y);
    cairo_line_to(cr, x0 - TICK_LEN, y);
  }
  for (int i = 0; i < a->yt.nminor; i++) {
    double y = crisp(f, ax_py(a, a->yt.minor[i]));
    cairo_move_to(cr, x0, y);
    cairo_line_to(cr, x0 - TICK_LEN / 2, y);
  }
  cairo_stroke(cr);
  for (int i = 0; i < a->xt.n; i++)
    draw_tick_label(cr, &a->xt.t[i], ax_px(a, a->xt.t[i].v), y1 + TICK_LEN + 3, FS_TICK, 0.5, 0);
  double ywmax = 0;
  for (int i = 0; i < a->yt.n; i++) {
    draw_tick_label(cr, &a->yt.t[i], x0 - TICK_LEN - 3, ax_py(a, a->yt.t[i].v), FS_TICK, 1, 0.5);
    ywmax = fmax(ywmax, tick_width(cr, &a->yt.t[i], FS_TICK));
  }
  double lh_tick = line_height(cr, FS_TICK);
  if (lb->xlabel) draw_text(cr, lb->xlabel, a->x + a->w / 2, y1 + TICK_LEN + 3 + lh_tick + 4, FS_LABEL, 0, 0.5, 0, 0);
  if (lb->ylabel)
    draw_text(cr, lb->ylabel, x0 - TICK_LEN - 3 - ywmax - 6, a->y + a->h / 2, FS_LABEL, 0, 0.5, 1, PI / 2);
  if (lb->title) draw_text(cr, lb->title, a->x + a->w / 2, a->y - 6, FS_TITLE, 1, 0.5, 1, 0);
}

static void read_labels(lua_State *L, int opts, labels *lb, const char *fn) {
  lb->title = opt_string(L, opts, "title", NULL, fn);
  lb->xlabel = opt_string(L, opts, "xlabel", NULL, fn);
  lb->ylabel = opt_string(L, opts, "ylabel", NULL, fn);
}

/* ------------------------------------------------------------------------ */
/* heatmap                                                                   */

typedef struct label_list {
  int n;
  const char **s; /* Lua strings kept alive by the options table */
} label_list;

/* opts[key]: a list of exactly n strings, or none (n = 0). */
static void read_label_list(lua_State *L, int opts, const char *key, int64_t n, label_list *out, const char *fn,
                            const char *what) {
  out->n = 0;
  out->s = NULL;
  int ty = lua_getfield(L, opts, key);
  if (ty == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (ty != LUA_TTABLE) plot_error(L, "%s: option '%s' must be a list of strings (got %s)", fn, key, luaL_typename(L, -1));
  int t = lua_gettop(L);
  lua_Integer len = (lua_Integer)lua_rawlen(L, t);
  if (len != n)
    plot_error(L, "%s: option '%s' has %d labels for %d %s", fn, key, (int)len, (int)n, what);
  out->s = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(char *), 0);
  for (lua_Integer i = 1; i <= len; i++) {
    if (lua_rawgeti(L, t, i) != LUA_TSTRING)
      plot_error(L, "%s: option '%s': label %d must be a string (got %s)", fn, key, (int)i, luaL_typename(L, -1));
    out->s[i - 1] = lua_tostring(L, -1); /* anchored in the list */
    lua_pop(L, 1);
  }
  out->n = (int)n;
  /* the list and the pointer array stay on the stack */
}

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

/* attn.core._plot.heatmap(m, opts) */
static int l_heatmap(lua_State *L) {
  const char *fn = "heatmap";
  attn_tensor *t = attnL_totensor(L, 1, fn, "m");
  const char *path = check_opts(L, 2, fn);
  int64_t rows, cols;
  if (t->ndim == 2) {
    rows = t->shape[0];
    cols = t->shape[1];
  } else if (t->ndim == 1) {
    rows = 1;
    cols = t->shape[0];
  } else {
    return plot_error(L, "%s: the matrix must be 2-d (got %d dims)", fn, t->ndim);
  }
  if (rows == 0 || cols == 0) return plot_error(L, "%s: the matrix is empty ([%d, %d])", fn, (int)rows, (int)cols);
  if (rows > 4096 || cols > 4096)
    return plot_error(L, "%s: a [%d, %d] matrix is too large to draw (at most 4096 per side)", fn, (int)rows, (int)cols);
  int64_t n;
  const double *v = tensor_values(L, t, &n, fn);

  label_list rl, cl;
  read_label_list(L, 2, "row_labels", rows, &rl, fn, "rows");
  read_label_list(L, 2, "col_labels", cols, &cl, fn, "columns");
  const char *cmap_name = opt_string(L, 2, "cmap", "viridis", fn);
  const cmap_def *cmap = find_cmap(cmap_name);
  if (!cmap) return plot_error(L, "%s: unknown cmap '%s' (known: " CMAP_NAMES ")", fn, cmap_name);
  labels lb;
  read_labels(L, 2, &lb, fn);
  int colorbar = opt_bool(L, 2, "colorbar", 1, fn);
  /* annotate: true (automatic format), false, or a format string */
  const char *annot_fmt = NULL;
  int ty = lua_getfield(L, 2, "annotate");
  if (ty == LUA_TSTRING) {
    annot_fmt = lua_tostring(L, -1); /* stays on the stack */
    if (!valid_format(annot_fmt))
      return plot_error(L, "%s: option 'annotate' must be true or a format like \"%%.2f\" (one %%f, %%e or %%g "
                           "with at most 9 decimals), got \"%s\"", fn, annot_fmt);
  } else if (ty == LUA_TBOOLEAN) {
    if (lua_toboolean(L, -1)) annot_fmt = "";
    lua_pop(L, 1);
  } else if (ty == LUA_TNIL) {
    lua_pop(L, 1);
  } else {
    return plot_error(L, "%s: option 'annotate' must be a boolean or a format string (got %s)", fn,
                      luaL_typename(L, -1));
  }
  int vmin_given, vmax_given;
  double vmin = opt_number(L, 2, "vmin", 0, &vmin_given, fn);
  double vmax = opt_number(L, 2, "vmax", 0, &vmax_given, fn);
  double width = opt_size(L, 2, "width", fn), height = opt_size(L, 2, "height", fn);

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
  if (!vmin_given || !vmax_given) {
    if (lo > hi) return plot_error(L, "%s: the matrix has no finite values (give vmin and vmax to draw it)", fn);
  }
  if (!vmin_given) vmin = lo;
  if (!vmax_given) vmax = hi;
  if (vmin > vmax) return plot_error(L, "%s: vmin (%g) is above vmax (%g)", fn, vmin, vmax);
  double cbar_lo = vmin, cbar_hi = vmax;
  if (cbar_lo == cbar_hi) { /* one value: centre it in a unit range */
    cbar_lo -= 0.5;
    cbar_hi += 0.5;
  }
  if (annot_fmt && !*annot_fmt) annot_fmt = all_int ? "%.0f" : "%.2f";

  figure *f = figure_new(L, fn, path);
  cairo_t *m = f->m;

  /* Left: ylabel, row labels; right: colour bar and its labels. */
  double lh_tick = line_height(m, FS_TICK), lh_label = line_height(m, FS_LABEL);
  double rw = 0;
  char buf[64];
  for (int64_t i = 0; i < rows; i++) {
    if (rl.n) rw = fmax(rw, text_width(m, rl.s[i], FS_TICK, 0));
    else {
      snprintf(buf, sizeof buf, "%d", (int)(i + 1));
      rw = fmax(rw, text_width(m, buf, FS_TICK, 0));
    }
  }
  double left = PAD + (lb.ylabel ? lh_label + 6 : 0) + rw + TICK_LEN + 4;
  /* The colour bar's ticks depend on its height, not known yet: room for
     the widest labels any tick count would give. */
  ticklist ct;
  double ctw = 0;
  for (int target = 3; target <= 8; target++) {
    nice_ticks(cbar_lo, cbar_hi, target, &ct);
    ctw = fmax(ctw, max_tick_width(m, &ct, FS_TICK));
  }
  const double cbar_gap = 14, cbar_w = 16;
  double right = PAD + (colorbar ? cbar_gap + cbar_w + TICK_LEN + 4 + ctw : 4);
  double top = PAD + (lb.title ? line_height(m, FS_TITLE) + 8 : lh_tick / 2);
  /* Cells are square unless both sides are given. */
  double auto_cell = fmin(48, fmax(2, 480.0 / (double)(rows > cols ? rows : cols)));
  double aw = width > 0 ? width - left - right : auto_cell * (double)cols;
  double cw = aw / (double)cols;
  /* Column labels turn vertical when they do not fit across a cell. */
  double cwmax = 0;
  for (int64_t j = 0; j < cols; j++) {
    if (cl.n) cwmax = fmax(cwmax, text_width(m, cl.s[j], FS_TICK, 0));
    else {
      snprintf(buf, sizeof buf, "%d", (int)(j + 1));
      cwmax = fmax(cwmax, text_width(m, buf, FS_TICK, 0));
    }
  }
  int rotate = cl.n && cwmax + 6 > cw;
  double col_label_h = rotate ? cwmax : lh_tick;
  double bottom = PAD + TICK_LEN + 3 + col_label_h + (lb.xlabel ? lh_label + 6 : 0);
  double ah = height > 0 ? height - top - bottom : cw * (double)rows;
  if (width <= 0 && height > 0) { /* height alone: square cells from it */
    cw = ah / (double)rows;
    aw = cw * (double)cols;
  }
  double fw = width > 0 ? width : ceil(left + aw + right);
  double fh = height > 0 ? height : ceil(top + ah + bottom);
  /* A title wider than the figure widens an automatic figure. */
  if (lb.title && width <= 0) {
    double tw = text_width(m, lb.title, FS_TITLE, 1) + 2 * PAD;
    if (tw > fw) {
      left += (tw - fw) / 2;
      fw = ceil(tw);
    }
  }
  if (fw < MIN_SIZE) {
    left += (MIN_SIZE - fw) / 2;
    fw = MIN_SIZE;
  }
  if (fh < MIN_SIZE) {
    top += (MIN_SIZE - fh) / 2;
    fh = MIN_SIZE;
  }
  if (aw < 4 || ah < 4) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: a %.0f x %.0f figure leaves no room for the cells beside the labels", fn, fw, fh);
    return figure_fail(L, f, msg);
  }
  figure_begin(L, f, fw, fh);
  cairo_t *cr = f->cr;
  double ax = round(left), ay = round(top);
  aw = round(aw);
  ah = round(ah);
  cw = aw / (double)cols;
  double ch = ah / (double)rows;

  /* Cells.  PNG edges are rounded to whole pixels (no seams); vector cells
     overlap their right/bottom neighbours slightly for the same reason. */
  double ov = f->fmt == FMT_PNG ? 0 : 0.3;
  cairo_save(cr);
  cairo_rectangle(cr, ax, ay, aw, ah);
  cairo_clip(cr);
  for (int64_t i = 0; i < rows; i++) {
    double y0 = ay + (double)i * ch, y1 = ay + (double)(i + 1) * ch;
    if (f->fmt == FMT_PNG) {
      y0 = round(y0);
      y1 = round(y1);
    }
    for (int64_t j = 0; j < cols; j++) {
      double val = v[i * cols + j];
      if (isnan(val)) continue;
      double x0 = ax + (double)j * cw, x1 = ax + (double)(j + 1) * cw;
      if (f->fmt == FMT_PNG) {
        x0 = round(x0);
        x1 = round(x1);
      }
      double rgb[3];
      cmap_eval(cmap, (val - cbar_lo) / (cbar_hi - cbar_lo), rgb);
      cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle(cr, x0, y0, x1 - x0 + ov, y1 - y0 + ov);
      cairo_fill(cr);
    }
  }
  cairo_restore(cr);

  /* Annotations: black on light cells, white on dark ones; the font
     shrinks to fit the cells and annotations are dropped below 5 units. */
  if (annot_fmt) {
    double fs = fmin(FS_TICK, ch * 0.5), wmax = 0;
    for (int64_t k = 0; k < n; k++) {
      if (isnan(v[k])) continue;
      format_cell(buf, sizeof buf, annot_fmt, v[k]);
      wmax = fmax(wmax, text_width(cr, buf, fs, 0));
    }
    if (wmax > cw * 0.9) fs *= cw * 0.9 / wmax;
    if (fs >= 5)
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
          double val = v[i * cols + j], rgb[3];
          if (isnan(val)) continue;
          cmap_eval(cmap, (val - cbar_lo) / (cbar_hi - cbar_lo), rgb);
          double lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
          double c = lum > 0.5 ? 0 : 1;
          cairo_set_source_rgb(cr, c, c, c);
          format_cell(buf, sizeof buf, annot_fmt, val);
          draw_text(cr, buf, ax + ((double)j + 0.5) * cw, ay + ((double)i + 0.5) * ch, fs, 0, 0.5, 0.5, 0);
        }
  }

  /* Frame, ticks at cell centres, labels. */
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  double fx0 = crisp(f, ax), fy0 = crisp(f, ay), fx1 = crisp(f, ax + aw), fy1 = crisp(f, ay + ah);
  cairo_rectangle(cr, fx0, fy0, fx1 - fx0, fy1 - fy0);
  cairo_stroke(cr);
  int rstride = label_stride(ch, lh_tick * 1.1);
  int cstride = cl.n && !rotate ? 1 : label_stride(cw, rotate ? lh_tick * 1.1 : cwmax + 6);
  /* Given labels: every stride-th from the first; numbers: the multiples
     of the stride (5, 10, 15, ...). */
  for (int64_t i = rl.n || rstride == 1 ? 0 : rstride - 1; i < rows; i += rstride) {
    double y = ay + ((double)i + 0.5) * ch;
    cairo_move_to(cr, fx0, crisp(f, y));
    cairo_line_to(cr, fx0 - TICK_LEN, crisp(f, y));
    cairo_stroke(cr);
    const char *s = rl.n ? rl.s[i] : (snprintf(buf, sizeof buf, "%d", (int)(i + 1)), buf);
    draw_text(cr, s, fx0 - TICK_LEN - 3, y, FS_TICK, 0, 1, 0.5, 0);
  }
  for (int64_t j = cl.n || cstride == 1 ? 0 : cstride - 1; j < cols; j += cstride) {
    double x = ax + ((double)j + 0.5) * cw;
    cairo_move_to(cr, crisp(f, x), fy1);
    cairo_line_to(cr, crisp(f, x), fy1 + TICK_LEN);
    cairo_stroke(cr);
    const char *s = cl.n ? cl.s[j] : (snprintf(buf, sizeof buf, "%d", (int)(j + 1)), buf);
    if (rotate) draw_text(cr, s, x, fy1 + TICK_LEN + 3, FS_TICK, 0, 1, 0.5, PI / 2);
    else draw_text(cr, s, x, fy1 + TICK_LEN + 3, FS_TICK, 0, 0.5, 0, 0);
  }
  if (lb.xlabel) draw_text(cr, lb.xlabel, ax + aw / 2, fy1 + TICK_LEN + 3 + col_label_h + 6, FS_LABEL, 0, 0.5, 0, 0);
  if (lb.ylabel) draw_text(cr, lb.ylabel, fx0 - TICK_LEN - 3 - rw - 6, ay + ah / 2, FS_LABEL, 0, 0.5, 1, PI / 2);
  if (lb.title) draw_text(cr, lb.title, ax + aw / 2, ay - 8, FS_TITLE, 1, 0.5, 1, 0);

  /* Colour bar: a linear gradient through the map's control points (exact,
     and vector in SVG/PDF), low values at the bottom. */
  double bx = 0;
  if (colorbar) {
    nice_ticks(cbar_lo, cbar_hi, (int)fmax(3, fmin(8, ah / 50)), &ct);
    bx = round(ax + aw + cbar_gap);
    if (f->fmt != FMT_PDF) {
      cairo_pattern_t *g = cairo_pattern_create_linear(0, ay + ah, 0, ay);
      for (int k = 0; k < cmap->n; k++)
        cairo_pattern_add_color_stop_rgb(g, cmap_x(cmap, k), cmap->rgb[k][0], cmap->rgb[k][1], cmap->rgb[k][2]);
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
        cmap_eval(cmap, (k + 0.5) / strips, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle(cr, bx, k + 1 < strips ? y0 - 0.3 : y0, cbar_w, y1 - y0 + (k + 1 < strips ? 0.3 : 0));
        cairo_fill(cr);
      }
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    double bx0 = crisp(f, bx), bx1 = crisp(f, bx + cbar_w);
    cairo_rectangle(cr, bx0, fy0, bx1 - bx0, fy1 - fy0);
    cairo_stroke(cr);
    for (int k = 0; k < ct.n; k++) {
      double y = ay + ah - (ct.t[k].v - cbar_lo) / (cbar_hi - cbar_lo) * ah;
      cairo_move_to(cr, bx1, crisp(f, y));
      cairo_line_to(cr, bx1 + TICK_LEN, crisp(f, y));
      cairo_stroke(cr);
      draw_tick_label(cr, &ct.t[k], bx1 + TICK_LEN + 3, y, FS_TICK, 0, 0.5);
    }
  }

  figure_end(L, f);
  lua_pushstring(L, path);
  push_area(L, f, ax, ay, aw, ah);
  set_number(L, "rows", (double)rows);
  set_number(L, "cols", (double)cols);
  set_number(L, "vmin", cbar_lo);
  set_number(L, "vmax", cbar_hi);
  lua_pushboolean(L, rotate);
  lua_setfield(L, -2, "rotated_col_labels");
  if (colorbar) {
    lua_newtable(L);
    set_number(L, "x", bx);
    set_number(L, "y", ay);
    set_number(L, "w", cbar_w);
    set_number(L, "h", ah);
    lua_setfield(L, -2, "colorbar");
  }
  return 2;
}

/* ------------------------------------------------------------------------ */
/* histogram                                                                 */

/* attn.core._plot.histogram(values, opts): numpy.histogram's binning (as
   plt.hist): bins is a count over range (default: the data's finite
   range) or a list of increasing edges; every bin is [a, b) except the
   last, [a, b]; values outside are not counted, nor are NaN or +-inf. */
static int l_histogram(lua_State *L) {
  const char *fn = "histogram";
  const char *path = check_opts(L, 2, fn);
  int64_t n;
  const double *v = values_at(L, 1, &n, fn, "values");
  if (n == 0) return plot_error(L, "%s: no values", fn);

  int64_t nb = 10;
  double *edges = NULL;
  int ty = lua_getfield(L, 2, "bins");
  int bins_list = 0;
  if (ty == LUA_TNUMBER) {
    if (!lua_isinteger(L, -1) && lua_tonumber(L, -1) != floor(lua_tonumber(L, -1)))
      return plot_error(L, "%s: option 'bins' must be a whole number (got %g)", fn, lua_tonumber(L, -1));
    double b = lua_tonumber(L, -1);
    if (!(b >= 1 && b <= 100000)) return plot_error(L, "%s: option 'bins' must be 1 to 100000 (got %g)", fn, b);
    nb = (int64_t)b;
  } else if (ty == LUA_TTABLE) {
    int bt = lua_gettop(L);
    lua_Integer ne = (lua_Integer)lua_rawlen(L, bt);
    if (ne < 2 || ne > 100001)
      return plot_error(L, "%s: option 'bins' as edges needs 2 to 100001 of them (got %d)", fn, (int)ne);
    nb = (int64_t)ne - 1;
    bins_list = 1;
    edges = lua_newuserdatauv(L, (size_t)ne * sizeof(double), 0);
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
  } else if (ty != LUA_TNIL) {
    return plot_error(L, "%s: option 'bins' must be a count or a list of edges (got %s)", fn, luaL_typename(L, -1));
  }
  /* the bins value (and the edges buffer) stay on the stack */
  double rlo = 0, rhi = 0;
  int range_given = 0;
  ty = lua_getfield(L, 2, "range");
  if (ty == LUA_TTABLE) {
    range_given = 1;
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    int isnum1 = lua_type(L, -2) == LUA_TNUMBER, isnum2 = lua_type(L, -1) == LUA_TNUMBER;
    rlo = lua_tonumber(L, -2);
    rhi = lua_tonumber(L, -1);
    lua_pop(L, 2);
    if (!isnum1 || !isnum2 || !isfinite(rlo) || !isfinite(rhi) || lua_rawlen(L, -1) != 2)
      return plot_error(L, "%s: option 'range' must be {low, high} with finite numbers", fn);
    if (rlo > rhi) return plot_error(L, "%s: option 'range' is reversed ({%g, %g})", fn, rlo, rhi);
    if (bins_list) return plot_error(L, "%s: give either 'range' or a list of bin edges, not both", fn);
  } else if (ty != LUA_TNIL) {
    return plot_error(L, "%s: option 'range' must be a table {low, high} (got %s)", fn, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  int density = opt_bool(L, 2, "density", 0, fn);
  labels lb;
  read_labels(L, 2, &lb, fn);
  double width = opt_size(L, 2, "width", fn), height = opt_size(L, 2, "height", fn);

  if (!bins_list) {
    double lo = rlo, hi = rhi;
    if (!range_given) {
      lo = INFINITY;
      hi = -INFINITY;
      for (int64_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
          lo = fmin(lo, v[i]);
          hi = fmax(hi, v[i]);
        }
      if (lo > hi) return plot_error(L, "%s: no finite values", fn);
    }
    if (lo == hi) { /* numpy widens an empty range to a unit one */
      lo -= 0.5;
      hi += 0.5;
    }
    edges = lua_newuserdatauv(L, (size_t)(nb + 1) * sizeof(double), 0);
    for (int64_t i = 0; i <= nb; i++) edges[i] = lo + (hi - lo) * (double)i / (double)nb;
    edges[nb] = hi;
  }
  double *counts = lua_newuserdatauv(L, (size_t)nb * sizeof(double), 0);
  memset(counts, 0, (size_t)nb * sizeof(double));
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
      if (edges[mid] <= x) a = mid;
      else b = mid;
    }
    counts[a] += 1;
    total += 1;
  }
  if (finite == 0) return plot_error(L, "%s: no finite values", fn);
  if (density && total > 0)
    for (int64_t i = 0; i < nb; i++) counts[i] /= total * (edges[i + 1] - edges[i]);
  double cmax = 0;
  for (int64_t i = 0; i < nb; i++) cmax = fmax(cmax, counts[i]);

  figure *f = figure_new(L, fn, path);
  f->w = width > 0 ? width : 640;
  f->h = height > 0 ? height : 480;
  axes a = {0};
  a.xlo = edges[0];
  a.xhi = edges[nb];
  pad_range(&a.xlo, &a.xhi, 0.05);
  a.ylo = 0;
  a.yhi = cmax > 0 ? cmax * 1.05 : 1;
  axes_layout(L, f, &a, &lb, 0);
  figure_begin(L, f, f->w, f->h);
  cairo_t *cr = f->cr;
  axes_draw_grid(f, &a, 0);
  cairo_save(cr);
  cairo_rectangle(cr, a.x, a.y, a.w, a.h);
  cairo_clip(cr);
  double y0 = ax_py(&a, 0);
  for (int64_t i = 0; i < nb; i++) {
    if (counts[i] <= 0) continue;
    double x0 = ax_px(&a, edges[i]), x1 = ax_px(&a, edges[i + 1]), y1 = ax_py(&a, counts[i]);
    cairo_rectangle(cr, x0, y1, x1 - x0, y0 - y1);
    cairo_set_source_rgb(cr, cycle[0][0], cycle[0][1], cycle[0][2]);
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
  axes_draw_frame(f, &a, &lb);
  figure_end(L, f);

  lua_pushstring(L, path);
  push_area(L, f, a.x, a.y, a.w, a.h);
  set_number(L, "xmin", a.xlo);
  set_number(L, "xmax", a.xhi);
  set_number(L, "ymin", a.ylo);
  set_number(L, "ymax", a.yhi);
  lua_createtable(L, (int)nb, 0);
  for (int64_t i = 0; i < nb; i++) {
    if (density) lua_pushnumber(L, counts[i]);
    else lua_pushinteger(L, (lua_Integer)counts[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "counts");
  lua_createtable(L, (int)nb + 1, 0);
  for (int64_t i = 0; i <= nb; i++) {
    lua_pushnumber(L, edges[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "edges");
  return 2;
}

/* ------------------------------------------------------------------------ */
/* lines                                                                     */

typedef struct series {
  const double *x, *y;
  int64_t n;
  const char *label;
} series;

/* Legend box size for the labelled series. */
static void legend_size(cairo_t *m, const series *s, int ns, double *w, double *h, int *count) {
  double tw = 0;
  int c = 0;
  for (int i = 0; i < ns; i++)
    if (s[i].label) {
      tw = fmax(tw, text_width(m, s[i].label, FS_LEGEND, 0));
      c++;
    }
  double lh = line_height(m, FS_LEGEND) + 3;
  *w = 8 + 24 + 6 + tw + 8;
  *h = 6 + lh * c + 3;
  *count = c;
}

/* attn.core._plot.lines(series, opts) */
static int l_lines(lua_State *L) {
  const char *fn = "lines";
  luaL_checktype(L, 1, LUA_TTABLE);
  const char *path = check_opts(L, 2, fn);
  labels lb;
  read_labels(L, 2, &lb, fn);
  int ylog = opt_bool(L, 2, "logy", 0, fn);
  double width = opt_size(L, 2, "width", fn), height = opt_size(L, 2, "height", fn);
  lua_Integer ns = (lua_Integer)lua_rawlen(L, 1);
  if (ns == 0) return plot_error(L, "%s: no series", fn);
  if (ns > 1000) return plot_error(L, "%s: %d series are too many (at most 1000)", fn, (int)ns);
  series *s = lua_newuserdatauv(L, (size_t)ns * sizeof *s, 0);
  lua_createtable(L, (int)ns * 3, 0); /* holder: buffers and labels */
  int holder = lua_gettop(L);
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (lua_Integer k = 1; k <= ns; k++) {
    series *sk = &s[k - 1];
    if (lua_rawgeti(L, 1, k) != LUA_TTABLE)
      return plot_error(L, "%s: series %d must be a table {y = ..., x = ..., label = ...} (got %s)", fn, (int)k,
                        luaL_typename(L, -1));
    int st = lua_gettop(L);
    if (lua_getfield(L, st, "y") == LUA_TNIL) return plot_error(L, "%s: series %d has no 'y'", fn, (int)k);
    char argname[32];
    snprintf(argname, sizeof argname, "series[%d].y", (int)k);
    int64_t ny, nx;
    const double *yv = values_at(L, -1, &ny, fn, argname);
    if (ny == 0) return plot_error(L, "%s: series %d is empty", fn, (int)k);
    lua_rawseti(L, holder, 3 * k - 2); /* the buffer */
    lua_pop(L, 1);                     /* y */
    const double *xv;
    if (lua_getfield(L, st, "x") != LUA_TNIL) {
      snprintf(argname, sizeof argname, "series[%d].x", (int)k);
      xv = values_at(L, -1, &nx, fn, argname);
      if (nx != ny)
        return plot_error(L, "%s: series %d has %d x values for %d y values", fn, (int)k, (int)nx, (int)ny);
    } else {
      double *b = lua_newuserdatauv(L, (size_t)ny * sizeof(double), 0);
      for (int64_t i = 0; i < ny; i++) b[i] = (double)(i + 1); /* Lua counts from 1 */
      xv = b;
    }
    lua_rawseti(L, holder, 3 * k - 1);
    lua_pop(L, 1); /* x */
    int lt = lua_getfield(L, st, "label");
    sk->label = NULL;
    if (lt == LUA_TSTRING) {
      sk->label = lua_tostring(L, -1);
      lua_rawseti(L, holder, 3 * k); /* anchors the string */
    } else if (lt == LUA_TNIL) {
      lua_pop(L, 1);
    } else {
      return plot_error(L, "%s: series %d: 'label' must be a string (got %s)", fn, (int)k, luaL_typename(L, -1));
    }
    lua_pop(L, 1); /* series table */
    sk->x = xv;
    sk->y = yv;
    sk->n = ny;
    for (int64_t i = 0; i < ny; i++) {
      double x = sk->x[i], y = sk->y[i];
      if (!isfinite(x) || !isfinite(y) || (ylog && !(y > 0))) continue;
      xlo = fmin(xlo, x);
      xhi = fmax(xhi, x);
      y = ylog ? log10(y) : y;
      ylo = fmin(ylo, y);
      yhi = fmax(yhi, y);
    }
  }
  if (xlo > xhi)
    return plot_error(L, ylog ? "%s: no finite positive points to plot on a log scale" : "%s: no finite points to plot",
                      fn);

  figure *f = figure_new(L, fn, path);
  f->w = width > 0 ? width : 640;
  f->h = height > 0 ? height : 480;
  axes a = {0};
  a.ylog = ylog;
  a.xlo = xlo;
  a.xhi = xhi;
  a.ylo = ylo;
  a.yhi = yhi;
  pad_range(&a.xlo, &a.xhi, 0.05);
  pad_range(&a.ylo, &a.yhi, 0.05);
  axes_layout(L, f, &a, &lb, 0);
  figure_begin(L, f, f->w, f->h);
  cairo_t *cr = f->cr;
  axes_draw_grid(f, &a, 1);

  cairo_save(cr);
  cairo_rectangle(cr, a.x, a.y, a.w, a.h);
  cairo_clip(cr);
  cairo_set_line_width(cr, 2);
  for (lua_Integer k = 0; k < ns; k++) {
    const series *sk = &s[k];
    const double *c = cycle[k % COUNT(cycle)];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    /* NaN (or non-positive on log axes) points break the line; a point
       with no neighbour is drawn as a dot. */
    int64_t run = 0;
    double px = 0, py = 0;
    for (int64_t i = 0; i <= sk->n; i++) {
      int ok = 0;
      double x = 0, y = 0;
      if (i < sk->n) {
        x = sk->x[i];
        y = sk->y[i];
        ok = isfinite(x) && isfinite(y) && (!ylog || y > 0);
      }
      if (ok) {
        double dx = ax_px(&a, x), dy = ax_py(&a, ylog ? log10(y) : y);
        if (run == 0) cairo_move_to(cr, dx, dy);
        else cairo_line_to(cr, dx, dy);
        px = dx;
        py = dy;
        run++;
      } else {
        if (run == 1) {
          cairo_new_path(cr);
          cairo_arc(cr, px, py, 2.5, 0, 2 * PI);
          cairo_fill(cr);
        } else if (run > 1) {
          cairo_stroke(cr);
        }
        run = 0;
      }
    }
  }
  cairo_restore(cr);
  axes_draw_frame(f, &a, &lb);

  /* Legend in the corner covering the fewest points (matplotlib's "best",
     corners only), upper right first. */
  double lw, lh;
  int nl;
  legend_size(cr, s, (int)ns, &lw, &lh, &nl);
  double legend[4] = {0, 0, 0, 0};
  if (nl > 0) {
    const double inset = 8;
    double cx[4] = {a.x + a.w - inset - lw, a.x + inset, a.x + inset, a.x + a.w - inset - lw};
    double cy[4] = {a.y + inset, a.y + inset, a.y + a.h - inset - lh, a.y + a.h - inset - lh};
    int best = 0;
    int64_t best_hits = -1;
    for (int c = 0; c < 4; c++) {
      int64_t hits = 0;
      for (lua_Integer k = 0; k < ns; k++)
        for (int64_t i = 0; i < s[k].n; i++) {
          double x = s[k].x[i], y = s[k].y[i];
          if (!isfinite(x) || !isfinite(y) || (ylog && !(y > 0))) continue;
          double dx = ax_px(&a, x), dy = ax_py(&a, ylog ? log10(y) : y);
          if (dx >= cx[c] && dx <= cx[c] + lw && dy >= cy[c] && dy <= cy[c] + lh) hits++;
        }
      if (best_hits < 0 || hits < best_hits) {
        best = c;
        best_hits = hits;
      }
    }
    double lx = round(cx[best]), ly = round(cy[best]);
    legend[0] = lx;
    legend[1] = ly;
    legend[2] = round(lw);
    legend[3] = round(lh);
    cairo_rectangle(cr, crisp(f, lx), crisp(f, ly), round(lw), round(lh));
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    double rowh = line_height(cr, FS_LEGEND) + 3, yy = ly + 6;
    for (lua_Integer k = 0; k < ns; k++) {
      if (!s[k].label) continue;
      const double *c = cycle[k % COUNT(cycle)];
      cairo_set_source_rgb(cr, c[0], c[1], c[2]);
      cairo_set_line_width(cr, 2);
      cairo_move_to(cr, lx + 8, yy + rowh / 2 - 1);
      cairo_line_to(cr, lx + 32, yy + rowh / 2 - 1);
      cairo_stroke(cr);
      cairo_set_source_rgb(cr, 0, 0, 0);
      draw_text(cr, s[k].label, lx + 38, yy + rowh / 2 - 1, FS_LEGEND, 0, 0, 0.5, 0);
      yy += rowh;
    }
  }
  figure_end(L, f);

  lua_pushstring(L, path);
  push_area(L, f, a.x, a.y, a.w, a.h);
  set_number(L, "xmin", a.xlo);
  set_number(L, "xmax", a.xhi);
  set_number(L, "ymin", ylog ? pow(10, a.ylo) : a.ylo);
  set_number(L, "ymax", ylog ? pow(10, a.yhi) : a.yhi);
  if (nl > 0) {
    lua_createtable(L, 0, 4);
    set_number(L, "x", legend[0]);
    set_number(L, "y", legend[1]);
    set_number(L, "w", legend[2]);
    set_number(L, "h", legend[3]);
    lua_setfield(L, -2, "legend");
  }
  return 2;
}

/* ------------------------------------------------------------------------ */
/* Helpers for users and tests                                               */

/* attn.core._plot.colormap(name, t) -> r, g, b */
static int l_colormap(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  double t = luaL_checknumber(L, 2);
  const cmap_def *c = find_cmap(name);
  if (!c) return plot_error(L, "colormap: unknown cmap '%s' (known: " CMAP_NAMES ")", name);
  double rgb[3];
  cmap_eval(c, t, rgb);
  for (int k = 0; k < 3; k++) lua_pushnumber(L, rgb[k]);
  return 3;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Pushes {r, g, b, a} of a cairo pixel (premultiplied ARGB: undone). */
static void push_pixel(lua_State *L, uint32_t p) {
  unsigned a = p >> 24, c[3] = {(p >> 16) & 255, (p >> 8) & 255, p & 255};
  lua_createtable(L, 4, 0);
  for (int k = 0; k < 3; k++) {
    lua_pushinteger(L, a ? (lua_Integer)((c[k] * 255 + a / 2) / a) : 0);
    lua_rawseti(L, -2, k + 1);
  }
  lua_pushinteger(L, a);
  lua_rawseti(L, -2, 4);
}

static double luminance(uint32_t p) {
  return 0.299 * ((p >> 16) & 255) + 0.587 * ((p >> 8) & 255) + 0.114 * (p & 255);
}

/* attn.core._plot.pixel_stats(path [, x, y [, w, h]]): reads a PNG back.
   Coordinates are from the top-left corner, as in the layouts; with w, h
   the statistics cover that region (clipped to the image), else the whole
   image.  -> {width, height, colors (distinct), nonwhite (pixels), pixels
   (in the region), lightest, darkest (by luminance), pixel (at x, y)} */
static int l_pixel_stats(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int want_px = !lua_isnoneornil(L, 2);
  double qx = want_px ? luaL_checknumber(L, 2) : 0, qy = want_px ? luaL_checknumber(L, 3) : 0;
  int region = !lua_isnoneornil(L, 4);
  double rw = region ? luaL_checknumber(L, 4) : 0, rh = region ? luaL_checknumber(L, 5) : 0;
  /* cairo reports a non-PNG file as "out of memory": check the signature. */
  unsigned char sig[8];
  FILE *fp = fopen(path, "rb");
  if (!fp) return plot_error(L, "pixel_stats: cannot open '%s'", path);
  size_t got = fread(sig, 1, sizeof sig, fp);
  fclose(fp);
  if (got != sizeof sig || memcmp(sig, "\x89PNG\r\n\x1a\n", 8) != 0)
    return plot_error(L, "pixel_stats: '%s' is not a PNG file", path);
  cairo_surface_t *s = cairo_image_surface_create_from_png(path);
  cairo_status_t st = cairo_surface_status(s);
  if (st != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(s);
    return plot_error(L, "pixel_stats: cannot read '%s': %s", path, cairo_status_to_string(st));
  }
  cairo_format_t fmt = cairo_image_surface_get_format(s);
  if (fmt != CAIRO_FORMAT_ARGB32 && fmt != CAIRO_FORMAT_RGB24) {
    cairo_surface_destroy(s);
    return plot_error(L, "pixel_stats: '%s' decodes to an unsupported pixel format", path);
  }
  cairo_surface_flush(s);
  int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
  int stride = cairo_image_surface_get_stride(s);
  const unsigned char *data = cairo_image_surface_get_data(s);
  int has_px = want_px && qx >= 0 && qy >= 0 && qx < w && qy < h;
  int x0 = 0, y0 = 0, x1 = w, y1 = h;
  if (region) {
    x0 = (int)fmax(0, fmin(w, floor(qx)));
    y0 = (int)fmax(0, fmin(h, floor(qy)));
    x1 = (int)fmax(x0, fmin(w, floor(qx + rw)));
    y1 = (int)fmax(y0, fmin(h, floor(qy + rh)));
  }
  size_t n = (size_t)(x1 - x0) * (size_t)(y1 - y0);
  uint32_t *px = malloc(n * sizeof *px + 1);
  if (!px) {
    cairo_surface_destroy(s);
    return plot_error(L, "pixel_stats: out of memory");
  }
#define PIXEL(x, y) \
  (((const uint32_t *)(const void *)(data + (size_t)(y) * (size_t)stride))[x] | \
   (fmt == CAIRO_FORMAT_RGB24 ? 0xff000000u : 0))
  uint32_t q = has_px ? PIXEL((int)qx, (int)qy) : 0;
  int64_t nonwhite = 0;
  uint32_t light = 0, dark = 0;
  size_t k = 0;
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++) {
      uint32_t p = PIXEL(x, y);
      if (k == 0 || luminance(p) > luminance(light)) light = p;
      if (k == 0 || luminance(p) < luminance(dark)) dark = p;
      px[k++] = p;
      if (p != 0xffffffffu) nonwhite++;
    }
#undef PIXEL
  qsort(px, n, sizeof *px, cmp_u32);
  int64_t colors = n > 0 ? 1 : 0;
  for (size_t i = 1; i < n; i++) colors += px[i] != px[i - 1];
  free(px);
  cairo_surface_destroy(s);
  if (want_px && !has_px) return plot_error(L, "pixel_stats: (%g, %g) is outside the %dx%d image", qx, qy, w, h);

  lua_createtable(L, 0, 8);
  set_number(L, "width", w);
  set_number(L, "height", h);
  lua_pushinteger(L, colors);
  lua_setfield(L, -2, "colors");
  lua_pushinteger(L, nonwhite);
  lua_setfield(L, -2, "nonwhite");
  lua_pushinteger(L, (lua_Integer)n);
  lua_setfield(L, -2, "pixels");
  if (n > 0) {
    push_pixel(L, light);
    lua_setfield(L, -2, "lightest");
    push_pixel(L, dark);
    lua_setfield(L, -2, "darkest");
  }
  if (has_px) {
    push_pixel(L, q);
    lua_setfield(L, -2, "pixel");
  }
  return 1;
}

static int l_colormaps(lua_State *L) {
  lua_createtable(L, COUNT(cmaps), 0);
  for (int i = 0; i < COUNT(cmaps); i++) {
    lua_pushstring(L, cmaps[i].name);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

void attnL_open_plot(lua_State *L, int module, int methods) {
  (void)methods;
  static const luaL_Reg fns[] = {{"heatmap", l_heatmap},         {"histogram", l_histogram},
                                 {"lines", l_lines},             {"colormap", l_colormap},
                                 {"colormaps", l_colormaps},     {"pixel_stats", l_pixel_stats},
                                 {NULL, NULL}};
  if (luaL_newmetatable(L, FIGURE_MT)) {
    lua_pushcfunction(L, figure_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_newtable(L);
  attnL_setfuncs(L, fns);
  lua_setfield(L, module, "_plot"); /* wrapped by lua/attn/plot.lua */
}
