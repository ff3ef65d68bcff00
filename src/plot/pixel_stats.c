/* SPDX-License-Identifier: MIT */
/* Reading a PNG back: pixel colours and counts, for the tests. */
#include "plot_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* r, g, b, a of a cairo pixel (premultiplied ARGB: undone). */
static void unpack(uint32_t p, int out[4]) {
  unsigned a = p >> 24, c[3] = {(p >> 16) & 255, (p >> 8) & 255, p & 255};
  for (int k = 0; k < 3; k++) out[k] = a ? (int)((c[k] * 255 + a / 2) / a) : 0;
  out[3] = (int)a;
}

static double luminance(uint32_t p) { return 0.299 * ((p >> 16) & 255) + 0.587 * ((p >> 8) & 255) + 0.114 * (p & 255); }

/* The PNG at path decoded by cairo into *out (ARGB32 or RGB24); fn names
   the caller in messages. */
static attn_status load_png(const char *fn, const char *path, cairo_surface_t **out) {
  *out = NULL;
  if (!path) return attn_set_error(ATTN_ERR_ARG, "%s: path is NULL", fn);
  /* cairo reports a non-PNG file as "out of memory": check the signature. */
  unsigned char sig[8];
  FILE *fp = fopen(path, "rb");
  if (!fp) return attn_set_error(ATTN_ERR_IO, "%s: cannot open '%s'", fn, path);
  size_t got = fread(sig, 1, sizeof sig, fp);
  fclose(fp);
  if (got != sizeof sig || memcmp(sig, "\x89PNG\r\n\x1a\n", 8) != 0)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s' is not a PNG file", fn, path);
  cairo_surface_t *s = cairo_image_surface_create_from_png(path);
  cairo_status_t cst = cairo_surface_status(s);
  if (cst != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(s);
    return attn_set_error(ATTN_ERR_IO, "%s: cannot read '%s': %s", fn, path, cairo_status_to_string(cst));
  }
  cairo_format_t fmt = cairo_image_surface_get_format(s);
  if (fmt != CAIRO_FORMAT_ARGB32 && fmt != CAIRO_FORMAT_RGB24) {
    cairo_surface_destroy(s);
    return attn_set_error(ATTN_ERR_IO, "%s: '%s' decodes to an unsupported pixel format", fn, path);
  }
  cairo_surface_flush(s);
  *out = s;
  return ATTN_OK;
}

attn_status attn_plot_pixel_stats_read(const char *path, const double *xy, const double *wh,
                                       attn_plot_pixel_stats *out) {
  const char *fn = "pixel_stats";
  double qx = xy ? xy[0] : 0, qy = xy ? xy[1] : 0;
  cairo_surface_t *s;
  attn_status st = load_png(fn, path, &s);
  if (st != ATTN_OK) return st;
  cairo_format_t fmt = cairo_image_surface_get_format(s);
  int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
  int stride = cairo_image_surface_get_stride(s);
  const unsigned char *data = cairo_image_surface_get_data(s);
  int has_px = xy && qx >= 0 && qy >= 0 && qx < w && qy < h;
  int x0 = 0, y0 = 0, x1 = w, y1 = h;
  if (wh) {
    x0 = (int)fmax(0, fmin(w, floor(qx)));
    y0 = (int)fmax(0, fmin(h, floor(qy)));
    x1 = (int)fmax(x0, fmin(w, floor(qx + wh[0])));
    y1 = (int)fmax(y0, fmin(h, floor(qy + wh[1])));
  }
  size_t n = (size_t)(x1 - x0) * (size_t)(y1 - y0);
  uint32_t *px = malloc(n * sizeof *px + 1);
  if (!px) {
    cairo_surface_destroy(s);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  }
#define PIXEL(x, y)                                                                                                    \
  (((const uint32_t *)(const void *)(data + (size_t)(y) * (size_t)stride))[x] |                                        \
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
  if (xy && !has_px) return attn_set_error(ATTN_ERR_INDEX, "%s: (%g, %g) is outside the %dx%d image", fn, qx, qy, w, h);

  memset(out, 0, sizeof *out);
  out->width = w;
  out->height = h;
  out->colors = colors;
  out->nonwhite = nonwhite;
  out->pixels = (int64_t)n;
  out->has_extremes = n > 0;
  if (n > 0) {
    unpack(light, out->lightest);
    unpack(dark, out->darkest);
  }
  out->has_pixel = has_px;
  if (has_px) unpack(q, out->pixel);
  return ATTN_OK;
}

/* The pixel at (x, y) of an ARGB32/RGB24 surface, as r, g, b, a. */
static void pixel_at(cairo_surface_t *s, int x, int y, int rgba[4]) {
  const unsigned char *data = cairo_image_surface_get_data(s);
  size_t stride = (size_t)cairo_image_surface_get_stride(s);
  uint32_t p = ((const uint32_t *)(const void *)(data + (size_t)y * stride))[x];
  if (cairo_image_surface_get_format(s) == CAIRO_FORMAT_RGB24) p |= 0xff000000u;
  unpack(p, rgba);
}

attn_status attn_plot_png_diff(const char *path_a, const char *path_b, attn_plot_png_diff_result *out) {
  const char *fn = "png_diff";
  cairo_surface_t *a, *b;
  attn_status st = load_png(fn, path_a, &a);
  if (st != ATTN_OK) return st;
  st = load_png(fn, path_b, &b);
  if (st != ATTN_OK) {
    cairo_surface_destroy(a);
    return st;
  }
  int w = cairo_image_surface_get_width(a), h = cairo_image_surface_get_height(a);
  int wb = cairo_image_surface_get_width(b), hb = cairo_image_surface_get_height(b);
  if (w != wb || h != hb) {
    cairo_surface_destroy(a);
    cairo_surface_destroy(b);
    return attn_set_error(ATTN_ERR_ARG, "%s: '%s' is %dx%d but '%s' is %dx%d (compare images of the same size)", fn,
                          path_a, w, h, path_b, wb, hb);
  }
  double sum = 0;
  int64_t differing = 0;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      int pa[4], pb[4], worst = 0;
      pixel_at(a, x, y, pa);
      pixel_at(b, x, y, pb);
      for (int k = 0; k < 4; k++) {
        int d = abs(pa[k] - pb[k]);
        sum += d;
        if (d > worst) worst = d;
      }
      differing += worst > 32;
    }
  cairo_surface_destroy(a);
  cairo_surface_destroy(b);
  double n = (double)w * (double)h;
  memset(out, 0, sizeof *out);
  out->width = w;
  out->height = h;
  out->mean_abs = n > 0 ? sum / (4 * n) : 0;
  out->differing = n > 0 ? (double)differing / n : 0;
  return ATTN_OK;
}
