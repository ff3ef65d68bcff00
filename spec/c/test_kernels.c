/* SPDX-License-Identifier: MIT */
/* The elementwise rows of every kernel family this CPU can run, against a
 * double-precision reference (libm's double functions, rounded once): the
 * unary forward rows (unary_rows) and their derivatives (unary_grad_rows),
 * contiguous and strided, on special values (0, -0, +-inf, NaN, denormals,
 * the ends of exp's range) and on a sweep of ordinary ones.  The x86
 * families compute exp, log, tanh and erf with libmvec (src/core/kernels/vmath.h),
 * the portable one with libm: both must stay within a few float ulp of the
 * exact result, or within an absolute 1e-7 of it near zero crossings.
 * LayerNorm rows (norm_kernels.h), forward and backward, against the
 * formulas in double.  The matrix product (gemm_kernels.h) against a double
 * reference over tile edges and operand layouts. */
#define _GNU_SOURCE /* M_PI */
#include "attn.h"
#include "check.h"
#include "kernels/kernels.h"

#include <float.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* f(x) and f'(x) in double */
static double ref_f(attn_unary_op op, double x) {
  switch (op) {
  case ATTN_EXP: return exp(x);
  case ATTN_LOG: return log(x);
  case ATTN_TANH: return tanh(x);
  case ATTN_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case ATTN_RELU: return x > 0 || x != x ? x : 0.0;
  case ATTN_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case ATTN_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case ATTN_SILU: return x / (1.0 + exp(-x));
  case ATTN_ERF: return erf(x);
  default: return NAN;
  }
}

static double ref_df(attn_unary_op op, double x) {
  switch (op) {
  case ATTN_EXP: return exp(x);
  case ATTN_LOG: return 1.0 / x;
  case ATTN_TANH: return 1.0 - tanh(x) * tanh(x);
  case ATTN_SIGMOID: {
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 - s);
  }
  case ATTN_RELU: return x > 0 || x != x ? 1.0 : 0.0;
  case ATTN_GELU: return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
  case ATTN_GELU_TANH: {
    const double k = sqrt(2.0 / M_PI), c = 0.044715, th = tanh(k * (x + c * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * c * x * x);
  }
  case ATTN_SILU: {
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
  }
  case ATTN_ERF: return 2.0 / sqrt(M_PI) * exp(-x * x);
  default: return NAN;
  }
}

/* close enough: same NaN-ness and infinities, else within rel ulps or abs */
static bool close_to(float got, double want, double rel, double abs_tol) {
  if (want != want) return got != got;
  if (isinf(want) || fabs(want) > FLT_MAX) return isinf(got) && (got > 0) == (want > 0);
  if (got != got || isinf(got)) return false;
  return fabs(got - want) <= abs_tol + rel * fabs(want);
}

#define N 4096

static float xs[N];
static int nx;

static void inputs(void) {
  const float special[] = {0.0f,   -0.0f,   INFINITY, -INFINITY, NAN,   1e-40f, -1e-40f, FLT_MIN,
                           1e-20f, -1e-20f, 1e-7f,    -1e-7f,    0.5f,  -0.5f,  1.0f,    -1.0f,
                           3.0f,   -3.0f,   9.0f,     -9.0f,     20.0f, -20.0f, 87.0f,   -87.0f,
                           88.7f,  -88.7f,  89.0f,    -104.0f,   1e30f, -1e30f, FLT_MAX, -FLT_MAX};
  nx = 0;
  for (size_t i = 0; i < sizeof special / sizeof *special; i++) xs[nx++] = special[i];
  /* an odd count, so the vector tails are exercised too */
  while (nx < N - 3) {
    float t = (float)(nx % 997) / 997.0f;
    xs[nx] = (t - 0.5f) * 24.0f * (nx % 3 == 0 ? 0.05f : 1.0f);
    nx++;
  }
}

static const attn_unary_op ops[] = {ATTN_EXP,  ATTN_LOG,       ATTN_TANH, ATTN_SIGMOID, ATTN_RELU,
                                    ATTN_GELU, ATTN_GELU_TANH, ATTN_SILU, ATTN_ERF};
static const char *op_names[] = {"exp", "log", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "erf"};

static void check_family(const attn__kernels *k) {
  static float y[N], g[N], dx[N], ys[2 * N], dxs[2 * N], da[N], das[2 * N];
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
    attn_unary_op op = ops[o];
    int bad_f = 0, bad_df = 0, bad_strided = 0;
    /* forward, contiguous and with a stride of 2 on the output */
    k->unary_rows[op](nx, y, 1, xs, 1);
    k->unary_rows[op](nx, ys, 2, xs, 1);
    for (int i = 0; i < nx; i++) g[i] = 1.0f;
    /* the derivative rows read y where the op saves it (exp, tanh, sigmoid,
       relu): hand them the reference family's y */
    k->unary_grad_rows[op](nx, dx, 1, g, 1, xs, 1, y, 1, false);
    k->unary_grad_rows[op](nx, dxs, 2, g, 1, xs, 1, y, 1, false);
    /* accumulating (into a leaf's .grad) adds the same derivative after:
       bit for bit dx + d, contiguous and strided */
    for (int i = 0; i < nx; i++) da[i] = das[2 * i] = (float)(i % 7) - 3.0f;
    k->unary_grad_rows[op](nx, da, 1, g, 1, xs, 1, y, 1, true);
    k->unary_grad_rows[op](nx, das, 2, g, 1, xs, 1, y, 1, true);
    int bad_acc = 0;
    for (int i = 0; i < nx; i++) {
      const float want = ((float)(i % 7) - 3.0f) + dx[i], want_s = ((float)(i % 7) - 3.0f) + dxs[2 * i];
      if (memcmp(&da[i], &want, sizeof want) != 0 && !(da[i] != da[i] && want != want)) bad_acc++;
      if (memcmp(&das[2 * i], &want_s, sizeof want) != 0 && !(das[2 * i] != das[2 * i] && want_s != want_s)) bad_acc++;
    }
    if (bad_acc) fprintf(stderr, "%s %s: %d accumulated mismatches\n", k->name, op_names[o], bad_acc);
    CHECK(bad_acc == 0);
    /* 8 ulp in value, 16 in derivative, or 1e-7 absolute; the GELUs
       allow more: Phi (vmath.h's vm_phi_e, within 2.6e-7 of the true value)
       and tanh-GELU's float formula (torch's), which cancels in 1 + tanh
       near -1 and in 1 - tanh^2, cost a few ulp of 1 times |x|: 2.5e-7
       absolute in value, 5e-7 (exact) and 2e-6 (tanh) in derivative */
    const bool gelu = op == ATTN_GELU || op == ATTN_GELU_TANH;
    const double abs_f = gelu ? 2.5e-7 : 1e-7, abs_df = op == ATTN_GELU ? 5e-7 : op == ATTN_GELU_TANH ? 2e-6 : 1e-7;
    for (int i = 0; i < nx; i++) {
      const double x = xs[i];
      /* torch's tanh-GELU derivative is NaN once x^3 overflows (0 * inf): so is ours */
      if (op == ATTN_GELU_TANH && fabs(x) > 1e12) {
        CHECK(dx[i] != dx[i]);
        continue;
      }
      if (!close_to(y[i], ref_f(op, x), 8 * FLT_EPSILON, abs_f)) {
        if (bad_f++ < 3)
          fprintf(stderr, "  %s %s(%.9g) = %.9g, want %.9g\n", k->name, op_names[o], x, y[i], ref_f(op, x));
      }
      double want_d = ref_df(op, x);
      /* where the saved output overflowed, the derivative is taken at it */
      if (op == ATTN_EXP) want_d = y[i];
      if (op == ATTN_TANH) want_d = 1.0 - (double)y[i] * y[i];
      if (op == ATTN_SIGMOID) want_d = (double)y[i] * (1.0 - y[i]);
      if (!close_to(dx[i], want_d, 16 * FLT_EPSILON, abs_df)) {
        if (bad_df++ < 3) fprintf(stderr, "  %s d%s(%.9g) = %.9g, want %.9g\n", k->name, op_names[o], x, dx[i], want_d);
      }
      /* strided rows may take the scalar path: same tolerance, same NaNs */
      if (!close_to(ys[2 * i], ref_f(op, x), 8 * FLT_EPSILON, abs_f) ||
          !close_to(dxs[2 * i], want_d, 16 * FLT_EPSILON, abs_df))
        bad_strided++;
    }
    if (bad_f || bad_df || bad_strided)
      fprintf(stderr, "%s %s: %d forward, %d derivative, %d strided mismatches\n", k->name, op_names[o], bad_f, bad_df,
              bad_strided);
    CHECK(bad_f == 0);
    CHECK(bad_df == 0);
    CHECK(bad_strided == 0);
  }
  /* relu's derivative is a select: an infinite gradient gives 0 where y <= 0 */
  float gi[2] = {INFINITY, INFINITY}, yy[2] = {0.0f, 2.0f}, out[2];
  k->unary_grad_rows[ATTN_RELU](2, out, 1, gi, 1, yy, 1, yy, 1, false);
  CHECK(out[0] == 0.0f && isinf(out[1]));
}

/* LayerNorm rows of a family against the formulas in double: rows of
   widths around the vector and block sizes, a large mean against a small
   spread, forward (y, mean, rstd) and backward (dx, dw, db). */
static void check_layer_norm(const attn__kernels *k) {
  enum { R = 3, NMAX = 531 };
  static float x[R * NMAX], y[R * NMAX], g[R * NMAX], dx[R * NMAX], w[NMAX], b[NMAX], dw[NMAX], db[NMAX], scratch[NMAX];
  float mean[R], rstd[R];
  const int64_t widths[] = {1, 7, 8, 33, 256, 257, 531};
  int bad = 0;
  for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
    const int64_t n = widths[wi];
    for (int64_t i = 0; i < R * n; i++) {
      x[i] = (float)((i * 37 % 101) - 50) / 25.0f + (i / n == 2 ? 1000.0f : 0.0f);
      g[i] = (float)((i * 53 % 97) - 48) / 30.0f;
    }
    for (int64_t i = 0; i < n; i++) w[i] = 0.5f + (float)(i % 5) / 4.0f, b[i] = (float)(i % 3) - 1.0f;
    memset(dw, 0, sizeof dw);
    memset(db, 0, sizeof db);
    const float eps = 1e-5f;
    k->layer_norm_rows(x, R, n, w, b, eps, y, mean, rstd);
    k->layer_norm_bwd_rows(g, x, R, n, w, mean, rstd, dx, false, dw, db, scratch);
    /* added into a leaf's .grad: the same dx, one rounding after; without
       dw and db, and without w (gy = g) */
    static float da[R * NMAX], dn[R * NMAX];
    for (int64_t i = 0; i < R * n; i++) da[i] = (float)(i % 5) - 2.0f;
    k->layer_norm_bwd_rows(g, x, R, n, w, mean, rstd, da, true, NULL, NULL, scratch);
    for (int64_t i = 0; i < R * n; i++) {
      const float want = ((float)(i % 5) - 2.0f) + dx[i];
      if (memcmp(&da[i], &want, sizeof want) != 0 && bad++ < 5)
        fprintf(stderr, "  dx acc n=%d i=%d %.9g vs %.9g\n", (int)n, (int)i, da[i], want);
    }
    k->layer_norm_bwd_rows(g, x, R, n, NULL, mean, rstd, dn, false, NULL, NULL, scratch);
    for (int64_t i = 0; i < R * n; i++) da[i] = 1.0f;
    k->layer_norm_bwd_rows(g, x, R, n, NULL, mean, rstd, da, true, NULL, NULL, scratch);
    for (int64_t i = 0; i < R * n; i++) {
      const float want = 1.0f + dn[i];
      if (memcmp(&da[i], &want, sizeof want) != 0 && bad++ < 5)
        fprintf(stderr, "  dx acc (no w) n=%d i=%d %.9g vs %.9g\n", (int)n, (int)i, da[i], want);
    }
    double rdw[NMAX] = {0}, rdb[NMAX] = {0};
    for (int r = 0; r < R; r++) {
      const float *xr = x + r * n, *gr = g + r * n;
      double m = 0, v = 0;
      for (int64_t i = 0; i < n; i++) m += xr[i];
      m /= n;
      for (int64_t i = 0; i < n; i++) v += (xr[i] - m) * (xr[i] - m);
      v /= n;
      const double rs = 1.0 / sqrt(v + eps);
      /* row 2 sits at 1000: x - mean in float is good to ulp(1000) = 6e-5 */
      const double tol = r == 2 ? 2e-4 : 1e-5;
      double mg = 0, mgx = 0;
      for (int64_t i = 0; i < n; i++) {
        const double xh = (xr[i] - m) * rs, gy = (double)gr[i] * w[i];
        mg += gy, mgx += gy * xh;
        rdw[i] += gr[i] * xh, rdb[i] += gr[i];
        if (!close_to(y[r * n + i], xh * w[i] + b[i], 1e-5, tol) && bad++ < 5)
          fprintf(stderr, "  y n=%d r=%d i=%d %g vs %g\n", (int)n, r, (int)i, y[r * n + i], xh * w[i] + b[i]);
      }
      mg /= n, mgx /= n;
      for (int64_t i = 0; i < n; i++) {
        const double xh = (xr[i] - m) * rs, gy = (double)gr[i] * w[i];
        if (!close_to(dx[r * n + i], rs * (gy - mg - xh * mgx), 1e-4, tol * rs) && bad++ < 5)
          fprintf(stderr, "  dx n=%d r=%d i=%d %g vs %g\n", (int)n, r, (int)i, dx[r * n + i],
                  rs * (gy - mg - xh * mgx));
      }
      /* the row sums are float vectors folded into double per block: the
         mean is good to a few float ulp of the row's magnitude, not of
         the mean itself */
      if ((!close_to(mean[r], m, 1e-6, 1e-6 * (r == 2 ? 1000 : 2)) || !close_to(rstd[r], rs, 1e-3, 0)) && bad++ < 5)
        fprintf(stderr, "  mean/rstd n=%d r=%d: %g %g vs %g %g\n", (int)n, r, mean[r], rstd[r], m, rs);
    }
    for (int64_t i = 0; i < n; i++)
      if (!close_to(dw[i], rdw[i], 1e-4, 1e-4) || !close_to(db[i], rdb[i], 1e-5, 1e-5)) bad++;
  }
  if (bad) fprintf(stderr, "%s layer_norm: %d mismatches\n", k->name, bad);
  CHECK(bad == 0);
}

/* The family's matrix product (gemm_kernels.h) against a double
   reference: row counts around the tile height, column counts around the
   tile width, A row-major and transposed, B row-major (read in place or
   copied), transposed, strided and expanded (stride 0). */
static void check_gemm(const attn__kernels *k) {
  enum { MMAX = 37, NMAX = 70, KMAX = 67 };
  static float a[MMAX * KMAX], b[KMAX * NMAX * 2], c[MMAX * NMAX], scratch[8 * 32 + KMAX * (NMAX + 32)];
  const int64_t ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17, 37}, ns[] = {1, 5, 8, 15, 16, 17, 31, 32, 33, 64, 70},
                ks[] = {1, 3, 16, 67};
  int bad = 0, cases = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (int layout = 0; layout < 8; layout++) {
          const int64_t m = ms[mi], n = ns[ni], kk = ks[ki];
          const bool at = layout & 1; /* A transposed: strides (1, m) */
          const int bl = layout >> 1; /* B: 0 row-major, 1 transposed, 2 every other column, 3 expanded rows */
          for (int64_t i = 0; i < m * kk; i++) a[i] = (float)((i * 37 % 101) - 50) / 25.0f;
          for (int64_t i = 0; i < 2 * kk * n; i++) b[i] = (float)((i * 53 % 97) - 48) / 30.0f;
          const int64_t ars = at ? 1 : kk, acs = at ? m : 1;
          int64_t brs, bcs;
          switch (bl) {
          case 0: brs = n, bcs = 1; break;
          case 1: brs = 1, bcs = kk; break;
          case 2: brs = 2 * n, bcs = 2; break;
          default: brs = 0, bcs = 1; break;
          }
          for (int64_t i = 0; i < m * n; i++) c[i] = NAN;
          k->gemm(m, n, kk, a, ars, acs, b, brs, bcs, c, scratch);
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
              double r = 0, mag = 0;
              for (int64_t p = 0; p < kk; p++) {
                const double t = (double)a[i * ars + p * acs] * b[p * brs + j * bcs];
                r += t, mag += fabs(t);
              }
              if (!(fabs(c[i * n + j] - r) <= 1e-6 * mag + 1e-30) && bad++ < 5)
                fprintf(stderr, "  gemm m=%d n=%d k=%d layout %d: c[%d,%d] = %g vs %g\n", (int)m, (int)n, (int)kk,
                        layout, (int)i, (int)j, c[i * n + j], r);
            }
          cases++;
        }
  if (bad) fprintf(stderr, "%s gemm: %d mismatches in %d cases\n", k->name, bad, cases);
  CHECK(bad == 0);
}

int main(void) {
  inputs();
  attn_isa_info info;
  CHECK_OK(attn_isa_get_info(&info));
  const attn__kernels *fams[3] = {&attn__kernels_portable, NULL, NULL};
#if defined(__x86_64__)
  if (strstr(info.available, "avx2")) fams[1] = &attn__kernels_avx2;
  if (strstr(info.available, "avx512")) fams[2] = &attn__kernels_avx512;
#endif
  for (int f = 0; f < 3; f++) {
    if (!fams[f]) continue;
    printf("family %s\n", fams[f]->name);
    check_family(fams[f]);
    check_layer_norm(fams[f]);
    check_gemm(fams[f]);
  }
  return check_summary();
}
