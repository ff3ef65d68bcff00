/* SPDX-License-Identifier: MIT */
/* Tests of scaled-dot-product attention: the fused kernel (sdpa.c) against
 * the composed math path (sdpa_math.c) over random configurations, forward
 * and backward (shapes with L != S and E != Ev, batch and head dims,
 * non-contiguous q/k/v/dO, boolean and additive masks broadcast from many
 * shapes, causal in both alignments, fully masked rows, grouped-query
 * attention), plus the kernel's memory use, thread-count independence,
 * dropout, weights, mask gradients, the mask helpers and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "check.h"
#include "attention/attention.h"
#include "kernels/kernels.h"

/* ------------------------------------------------------------------------ */
/* Random numbers and tensors                                                */

#define RNG_SEED 0x2545F4914F6CDD1Dull
#include "rng.h"
static float rnd_normalf(void) { return (float)rnd_normal(); }

static attn_tensor *filled(int nd, const int64_t *shape, float (*gen)(void)) {
  attn_tensor *t = NULL;
  if (attn_empty(nd, shape, &t)) return NULL;
  float *p = attn_tensor_data(t);
  for (int64_t i = 0; i < attn_tensor_numel(t); i++) p[i] = gen();
  return t;
}

/* A random-normal tensor of the shape, stored in a random layout: dims
   permuted in memory, and sometimes every other element of the last dim
   (so neither rows nor columns are unit-stride). */
static attn_tensor *random_layout(int nd, const int64_t *shape, int layout) {
  int perm[ATTN_MAX_DIMS], inv[ATTN_MAX_DIMS];
  for (int i = 0; i < nd; i++) perm[i] = i;
  if (layout >= 1)
    for (int i = nd - 1; i > 0; i--) {
      int j = rnd_int(i + 1), t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  int64_t bshape[ATTN_MAX_DIMS];
  for (int i = 0; i < nd; i++) bshape[i] = shape[perm[i]], inv[perm[i]] = i;
  bool stepped = layout == 2;
  if (stepped) bshape[nd - 1] *= 2;
  attn_tensor *base = filled(nd, bshape, rnd_normalf), *s = NULL, *v = NULL;
  if (stepped) {
    attn_slice(base, nd - 1, 0, bshape[nd - 1], 2, &s);
    attn_tensor_release(base);
    base = s;
  }
  attn_permute(base, inv, &v);
  attn_tensor_release(base);
  return v;
}

/* ------------------------------------------------------------------------ */
/* Comparison                                                                */

/* |a - b| <= atol + rtol |b| everywhere (NaN only against NaN). */
static bool close_to(const attn_tensor *a, const attn_tensor *b, double atol, double rtol, const char *what, int cfg) {
  if (!a || !b || !attn_same_shape(a, b)) {
    fprintf(stderr, "config %d: %s: missing or shape mismatch\n", cfg, what);
    return false;
  }
  int64_t n = attn_tensor_numel(a);
  for (int64_t i = 0; i < n; i++) {
    double x = attn_tensor_get_flat(a, i), y = attn_tensor_get_flat(b, i);
    bool ok = isnan(y) ? isnan(x) : fabs(x - y) <= atol + rtol * fabs(y);
    if (!ok) {
      fprintf(stderr, "config %d: %s: element %lld is %.9g, expected %.9g\n", cfg, what, (long long)i, x, y);
      return false;
    }
  }
  return true;
}

static bool all_finite(const attn_tensor *t) {
  for (int64_t i = 0; i < attn_tensor_numel(t); i++)
    if (!isfinite(attn_tensor_get_flat(t, i))) return false;
  return true;
}

/* ------------------------------------------------------------------------ */
/* Random configurations: fused vs reference                                 */

typedef struct {
  int nd;
  int64_t lead[ATTN_MAX_DIMS];
  int64_t L, S, E, Ev, hkv;
  attn_sdpa_opts o;
  attn_tensor *mask;
  char desc[256];
} config;

/* A mask for [lead..., L, S]: which broadcast shape, and its values. */
static attn_tensor *random_mask(config *c, bool is_bool) {
  int nd = c->nd, nb = nd - 2;
  int64_t full[ATTN_MAX_DIMS], shape[ATTN_MAX_DIMS];
  for (int d = 0; d < nb; d++) full[d] = c->lead[d];
  full[nb] = c->L;
  full[nb + 1] = c->S;
  int mnd = nd, kind = rnd_int(4);
  const char *kname;
  if (kind == 0 || nb == 0) { /* [L, S] */
    mnd = 2;
    shape[0] = c->L, shape[1] = c->S;
    kname = "[L,S]";
  } else if (kind == 1) { /* [1, ..., 1, L, S] */
    for (int d = 0; d < nb; d++) shape[d] = 1;
    shape[nb] = c->L, shape[nb + 1] = c->S;
    kname = "[1..,L,S]";
  } else if (kind == 2) { /* padding: [B, 1, ..., 1, S] */
    shape[0] = full[0];
    for (int d = 1; d < nb + 1; d++) shape[d] = 1;
    shape[nb + 1] = c->S;
    kname = "[B,1..,1,S]";
  } else { /* random dims kept or broadcast, fewer dims at random */
    mnd = 1 + rnd_int(nd);
    for (int i = 0; i < mnd; i++) shape[i] = rnd_int(2) ? full[nd - mnd + i] : 1;
    kname = "random";
  }
  attn_tensor *m = NULL;
  attn_empty(mnd, shape, &m);
  float *p = attn_tensor_data(m);
  int64_t n = attn_tensor_numel(m), rowlen = shape[mnd - 1];
  for (int64_t i = 0; i < n; i++) {
    if (is_bool)
      p[i] = rnd_int(10) < 7 ? 1.0f : 0.0f;
    else
      p[i] = rnd_int(10) == 0 ? -INFINITY : rnd_normalf();
  }
  /* fully masked rows, now and then */
  if (rnd_int(2))
    for (int64_t r = 0; r < n / rowlen; r++)
      if (rnd_int(4) == 0)
        for (int64_t j = 0; j < rowlen; j++) p[r * rowlen + j] = is_bool ? 0.0f : -INFINITY;
  snprintf(c->desc + strlen(c->desc), sizeof c->desc - strlen(c->desc), " mask=%s%s", is_bool ? "bool" : "add", kname);
  return m;
}

static void random_config(config *c, int cfg) {
  memset(c, 0, sizeof *c);
  attn_sdpa_opts_init(&c->o);
  int nb = rnd_int(4);
  c->nd = nb + 2;
  int big = rnd_int(3) == 0;
  do {
    for (int d = 0; d < nb; d++) c->lead[d] = 1 + rnd_int(3);
    c->L = 1 + rnd_int(big ? 200 : 70);
    c->S = 1 + rnd_int(big ? 200 : 70);
    c->E = 1 + rnd_int(rnd_int(2) ? 72 : 20);
    c->Ev = rnd_int(4) == 0 ? c->E : 1 + rnd_int(72);
  } while ((double)c->L * c->S * (c->E + c->Ev) * (nb ? c->lead[0] * 3 : 1) > 2.5e6);
  c->hkv = nb ? c->lead[nb - 1] : 1;
  if (nb && rnd_int(3) == 0) { /* grouped-query: a divisor of the query heads */
    c->lead[nb - 1] = 2 * (1 + rnd_int(3));
    c->hkv = rnd_int(2) ? 1 : 2;
    c->o.enable_gqa = true;
  }
  int mk = rnd_int(10);
  snprintf(c->desc, sizeof c->desc, "cfg %d: nd=%d L=%lld S=%lld E=%lld Ev=%lld hkv=%lld%s", cfg, c->nd,
           (long long)c->L, (long long)c->S, (long long)c->E, (long long)c->Ev, (long long)c->hkv,
           c->o.enable_gqa ? " gqa" : "");
  if (mk < 3) {
    c->o.is_causal = true;
    c->o.causal_bottom_right = mk == 2;
    strcat(c->desc, mk == 2 ? " causal-br" : " causal-tl");
  } else if (mk < 6) {
    c->mask = random_mask(c, true);
    c->o.attn_mask = c->mask;
    c->o.mask_is_bool = true;
  } else if (mk < 8) {
    c->mask = random_mask(c, false);
    c->o.attn_mask = c->mask;
  }
  int sc = rnd_int(4);
  c->o.scale = sc == 0 ? NAN : sc == 1 ? 0.0 : sc == 2 ? 0.37 : -0.8;
}

static void shape_of(const config *c, int64_t rows, int64_t cols, int64_t heads, int64_t *shape) {
  int nb = c->nd - 2;
  for (int d = 0; d < nb; d++) shape[d] = c->lead[d];
  if (nb) shape[nb - 1] = heads;
  shape[nb] = rows;
  shape[nb + 1] = cols;
}

/* Runs fn (fused or reference) with fresh grads; returns out and the grads. */
static attn_status run_one(bool fused, attn_tensor *q, attn_tensor *k, attn_tensor *v, const attn_sdpa_opts *o,
                           const attn_tensor *dout, attn_tensor **out, attn_tensor *grads[3]) {
  attn_tensor *in[3] = {q, k, v};
  for (int i = 0; i < 3; i++) attn_set_grad(in[i], NULL);
  attn_status st = fused ? attn__sdpa_fused(q, k, v, o, out) : attn__sdpa_math(q, k, v, o, out, NULL);
  if (st) return st;
  if ((st = attn_backward(*out, dout, false))) return st;
  for (int i = 0; i < 3; i++) grads[i] = attn_tensor_retain(attn_grad(in[i]));
  return ATTN_OK;
}

static int64_t work_total;

static void test_random_configs(int n) {
  int failures_before = check_failed;
  const int64_t keep_max = attn__sdpa_keep_scores_max;
  for (int cfg = 0; cfg < n; cfg++) {
    config c;
    random_config(&c, cfg);
    /* every other config recomputes the scores in the backward, where the
       shape would have the forward keep them */
    attn__sdpa_keep_scores_max = cfg % 2 ? 0 : keep_max;
    int64_t qs[ATTN_MAX_DIMS], ks[ATTN_MAX_DIMS], vs[ATTN_MAX_DIMS], os[ATTN_MAX_DIMS];
    int64_t hq = c.nd > 2 ? c.lead[c.nd - 3] : 1;
    shape_of(&c, c.L, c.E, hq, qs);
    shape_of(&c, c.S, c.E, c.hkv, ks);
    shape_of(&c, c.S, c.Ev, c.hkv, vs);
    shape_of(&c, c.L, c.Ev, hq, os);
    attn_tensor *q = random_layout(c.nd, qs, rnd_int(3)), *k = random_layout(c.nd, ks, rnd_int(3)),
                *v = random_layout(c.nd, vs, rnd_int(3)), *dout = random_layout(c.nd, os, rnd_int(3));
    CHECK_OK(attn_requires_grad_(q, true));
    CHECK_OK(attn_requires_grad_(k, true));
    CHECK_OK(attn_requires_grad_(v, true));
    attn_tensor *of = NULL, *orf = NULL, *gf[3] = {0}, *gr[3] = {0};
    attn_status s1 = run_one(true, q, k, v, &c.o, dout, &of, gf);
    attn_status s2 = run_one(false, q, k, v, &c.o, dout, &orf, gr);
    if (s1 || s2) fprintf(stderr, "%s: %s\n", c.desc, attn_last_error());
    CHECK(s1 == ATTN_OK && s2 == ATTN_OK);
    if (!s1 && !s2) {
      CHECK(close_to(of, orf, 1e-5, 1e-5, "out", cfg));
      CHECK(all_finite(of));
      const char *names[3] = {"dq", "dk", "dv"};
      for (int i = 0; i < 3; i++) {
        CHECK(close_to(gf[i], gr[i], 1e-4, 1e-4, names[i], cfg));
        CHECK(gf[i] && all_finite(gf[i]));
      }
      CHECK(strcmp(attn_grad_fn_name(of), "ScaledDotProductFlashAttentionForCpuBackward0") == 0);
    }
    if (check_failed != failures_before) {
      fprintf(stderr, "  in %s\n", c.desc);
      failures_before = check_failed;
    }
    work_total += c.L * c.S;
    attn_tensor_release(of), attn_tensor_release(orf);
    for (int i = 0; i < 3; i++) attn_tensor_release(gf[i]), attn_tensor_release(gr[i]);
    attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v), attn_tensor_release(dout);
    attn_tensor_release(c.mask);
  }
  attn__sdpa_keep_scores_max = keep_max;
}

/* ------------------------------------------------------------------------ */
/* Specific cases                                                            */

static attn_tensor *randn(int nd, const int64_t *shape) { return filled(nd, shape, rnd_normalf); }

/* Fully masked rows: zero output rows, zero gradients, no NaN anywhere. */
static void test_fully_masked(void) {
  int64_t qs[3] = {2, 5, 8}, ks[3] = {2, 7, 8}, vs[3] = {2, 7, 3}, ms[2] = {5, 7}, os[3] = {2, 5, 3};
  attn_tensor *q = randn(3, qs), *k = randn(3, ks), *v = randn(3, vs), *m = NULL, *dout = randn(3, os);
  CHECK_OK(attn_ones(2, ms, &m));
  float *mp = attn_tensor_data(m);
  for (int j = 0; j < 7; j++) mp[1 * 7 + j] = 0.0f, mp[4 * 7 + j] = 0.0f; /* rows 1 and 4 see nothing */
  for (int pass = 0; pass < 2; pass++) {
    attn_sdpa_opts o;
    attn_sdpa_opts_init(&o);
    o.attn_mask = m;
    o.mask_is_bool = pass == 0;
    attn_tensor *add = NULL;
    if (pass == 1) { /* the same as an additive mask: 0 / -inf */
      CHECK_OK(attn_empty(2, ms, &add));
      for (int i = 0; i < 35; i++) attn_tensor_data(add)[i] = mp[i] != 0 ? 0.0f : -INFINITY;
      o.attn_mask = add;
    }
    for (int path = 0; path < 2; path++) {
      attn_tensor *in[3] = {q, k, v}, *out = NULL;
      for (int i = 0; i < 3; i++) attn_set_grad(in[i], NULL), attn_requires_grad_(in[i], true);
      CHECK_OK(path ? attn__sdpa_math(q, k, v, &o, &out, NULL) : attn_sdpa(q, k, v, &o, &out, NULL));
      if (!out) continue;
      CHECK_OK(attn_backward(out, dout, false));
      const float *p = attn_tensor_data(out);
      for (int b = 0; b < 2; b++)
        for (int c = 0; c < 3; c++) {
          CHECK(p[(b * 5 + 1) * 3 + c] == 0.0f);
          CHECK(p[(b * 5 + 4) * 3 + c] == 0.0f);
          CHECK(p[(b * 5 + 0) * 3 + c] != 0.0f);
        }
      const float *gq = attn_tensor_data(attn_grad(q));
      for (int b = 0; b < 2; b++)
        for (int c = 0; c < 8; c++) CHECK(gq[(b * 5 + 1) * 8 + c] == 0.0f);
      for (int i = 0; i < 3; i++) CHECK(all_finite(attn_grad(in[i])));
      attn_tensor_release(out);
    }
    attn_tensor_release(add);
  }
  /* bottom-right causal with L > S: the first L - S queries see nothing */
  {
    int64_t q2[2] = {6, 4}, k2[2] = {3, 4};
    attn_tensor *a = randn(2, q2), *b = randn(2, k2), *out = NULL;
    attn_sdpa_opts o;
    attn_sdpa_opts_init(&o);
    o.is_causal = o.causal_bottom_right = true;
    CHECK_OK(attn_sdpa(a, b, b, &o, &out, NULL));
    if (out) {
      for (int i = 0; i < 3 * 4; i++) CHECK(attn_tensor_data(out)[i] == 0.0f);
      for (int i = 3 * 4; i < 6 * 4; i++) CHECK(attn_tensor_data(out)[i] != 0.0f);
      /* the last query sees every key: plain attention over all of them */
      attn_tensor *full = NULL, *last = NULL, *ref_last = NULL, *ql = NULL;
      attn_sdpa_opts p;
      attn_sdpa_opts_init(&p);
      CHECK_OK(attn_narrow(a, 0, 5, 1, &ql));
      CHECK_OK(attn_sdpa(ql, b, b, &p, &full, NULL));
      CHECK_OK(attn_narrow(out, 0, 5, 1, &last));
      CHECK(close_to(last, full, 1e-6, 0, "bottom-right last row", -1));
      attn_tensor_release(full), attn_tensor_release(last), attn_tensor_release(ref_last), attn_tensor_release(ql);
    }
    attn_tensor_release(out), attn_tensor_release(a), attn_tensor_release(b);
  }
  /* S = 0: every row is empty */
  {
    int64_t q2[2] = {3, 4}, k2[2] = {0, 4}, v2[2] = {0, 2};
    attn_tensor *a = randn(2, q2), *b = NULL, *c = NULL, *out = NULL;
    attn_zeros(2, k2, &b), attn_zeros(2, v2, &c);
    CHECK_OK(attn_sdpa(a, b, c, NULL, &out, NULL));
    if (out) {
      CHECK(out->shape[0] == 3 && out->shape[1] == 2);
      for (int i = 0; i < 6; i++) CHECK(attn_tensor_data(out)[i] == 0.0f);
    }
    attn_tensor_release(out), attn_tensor_release(a), attn_tensor_release(b), attn_tensor_release(c);
  }
  attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v), attn_tensor_release(m);
  attn_tensor_release(dout);
}

/* The kernel's own allocations (tiles, lse, D) stay O(L), whatever S is,
   far below the L x S matrix. */
static void test_memory(void) {
  int64_t tile_bound = 4 * 64 * 64 * 12 * (int64_t)sizeof(float); /* generous per-thread tiles at E = 64 */
  int nt = attn_get_num_threads();
  struct {
    int64_t L, S;
  } cases[] = {{4096, 4096}, {256, 256}, {256, 8192}};
  int64_t peaks[3];
  for (int c = 0; c < 3; c++) {
    int64_t L = cases[c].L, S = cases[c].S;
    int64_t qs[3] = {1, L, 64}, ks[3] = {1, S, 64}, os[3] = {1, L, 64};
    attn_tensor *q = randn(3, qs), *k = randn(3, ks), *v = randn(3, ks), *dout = randn(3, os), *out = NULL;
    attn_requires_grad_(q, true), attn_requires_grad_(k, true), attn_requires_grad_(v, true);
    attn__sdpa_mem_reset();
    int64_t before = attn__sdpa_mem_peak();
    attn_sdpa_opts o;
    attn_sdpa_opts_init(&o);
    o.is_causal = c == 0;
    CHECK_OK(attn_sdpa(q, k, v, &o, &out, NULL));
    if (out) CHECK_OK(attn_backward(out, dout, false));
    peaks[c] = attn__sdpa_mem_peak() - before;
    int64_t bound = 2 * L * (int64_t)sizeof(float) + nt * tile_bound;
    printf("sdpa memory: L=%lld S=%lld: kernel peak %lld bytes (bound %lld, L*S matrix %lld)\n", (long long)L,
           (long long)S, (long long)peaks[c], (long long)bound, (long long)(L * S * 4));
    CHECK(peaks[c] > 0);
    CHECK(peaks[c] <= bound);
    CHECK(peaks[c] * 16 < L * S * 4 || S < 1024);
    attn_tensor_release(out), attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v);
    attn_tensor_release(dout);
  }
  /* S grew 32x: the same tiles, so the same peak (up to how many threads
     happened to hold tiles at once) */
  CHECK(peaks[2] <= peaks[1] + nt * tile_bound);
}

/* With a short key sequence and enough kv batches the forward keeps its
   scores and the backward needs no product to recompute them: the same
   output bits, gradients within rounding of the recomputing backward, and
   the kept bytes show in the kernel's memory counter. */
static void test_kept_scores(void) {
  const int64_t keep_max = attn__sdpa_keep_scores_max;
  struct {
    int64_t B, Hq, Hkv, L, S, E, Ev;
    bool causal;
  } cases[] = {{2, 4, 4, 130, 130, 32, 32, false},
               {2, 4, 4, 130, 97, 24, 40, true},
               {2, 8, 4, 70, 45, 24, 40, false},
               {1, 8, 8, 3, 512, 16, 16, true}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    int64_t qs[4] = {cases[c].B, cases[c].Hq, cases[c].L, cases[c].E},
            ks[4] = {cases[c].B, cases[c].Hkv, cases[c].S, cases[c].E},
            vs[4] = {cases[c].B, cases[c].Hkv, cases[c].S, cases[c].Ev},
            os[4] = {cases[c].B, cases[c].Hq, cases[c].L, cases[c].Ev};
    attn_tensor *q = randn(4, qs), *k = randn(4, ks), *v = randn(4, vs), *dout = randn(4, os);
    attn_requires_grad_(q, true), attn_requires_grad_(k, true), attn_requires_grad_(v, true);
    attn_sdpa_opts o;
    attn_sdpa_opts_init(&o);
    o.enable_gqa = cases[c].Hq != cases[c].Hkv;
    o.is_causal = cases[c].causal;
    attn_tensor *outs[2] = {0}, *grads[2][3] = {{0}};
    int64_t peaks[2];
    for (int keep = 0; keep < 2; keep++) {
      attn__sdpa_keep_scores_max = keep ? keep_max : 0;
      attn__sdpa_mem_reset();
      int64_t before = attn__sdpa_mem_peak();
      CHECK_OK(run_one(true, q, k, v, &o, dout, &outs[keep], grads[keep]));
      peaks[keep] = attn__sdpa_mem_peak() - before;
    }
    int64_t Lw = (cases[c].L + 15) / 16 * 16, S4 = (cases[c].S + 3) / 4 * 4;
    int64_t kept = cases[c].B * cases[c].Hq * Lw * S4 * (int64_t)sizeof(float);
    /* the path was taken: the forward counted the kept bytes */
    CHECK(peaks[1] >= kept && peaks[1] > peaks[0]);
    CHECK(close_to(outs[1], outs[0], 0, 0, "out, kept vs recomputed", (int)c));
    const char *names[3] = {"dq, kept vs recomputed", "dk, kept vs recomputed", "dv, kept vs recomputed"};
    for (int i = 0; i < 3; i++) CHECK(close_to(grads[1][i], grads[0][i], 2e-5, 2e-5, names[i], (int)c));
    /* only some inputs wanting a gradient (frozen q, or frozen k and v):
       the same gradients for the others */
    attn__sdpa_keep_scores_max = keep_max;
    for (int frozen = 0; frozen < 2; frozen++) {
      attn_tensor *in[3] = {q, k, v};
      for (int i = 0; i < 3; i++) {
        attn_set_grad(in[i], NULL);
        attn_requires_grad_(in[i], frozen == 0 ? i != 0 : i == 0);
      }
      attn_tensor *out = NULL;
      CHECK_OK(attn__sdpa_fused(q, k, v, &o, &out));
      if (out) CHECK_OK(attn_backward(out, dout, false));
      for (int i = 0; i < 3; i++) {
        const attn_tensor *gi = attn_grad(in[i]);
        if (attn_requires_grad(in[i]))
          CHECK(close_to(gi, grads[1][i], 0, 0, "grad with some inputs frozen", (int)c));
        else
          CHECK(gi == NULL);
        attn_requires_grad_(in[i], true);
      }
      attn_tensor_release(out);
    }
    for (int r = 0; r < 2; r++) {
      attn_tensor_release(outs[r]);
      for (int i = 0; i < 3; i++) attn_tensor_release(grads[r][i]);
    }
    attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v), attn_tensor_release(dout);
  }
  attn__sdpa_keep_scores_max = keep_max;
}

/* The result does not depend on the number of threads (the backward has
   no reductions across threads), and the pool survives resizing. */
/* kvh kv heads (x 2 batches): 2 takes the two-pass backward, 4 (8 kv
   batches) the one-pass one where dQ sums in the dK/dV tasks, or the one
   from the kept scores. */
static void test_threads_kv(int64_t kvh) {
  int64_t qs[4] = {2, 2 * kvh, 300, 64}, ks[4] = {2, kvh, 257, 64}, vs[4] = {2, kvh, 257, 40},
          os[4] = {2, 2 * kvh, 300, 40};
  attn_tensor *q = randn(4, qs), *k = randn(4, ks), *v = randn(4, vs), *dout = randn(4, os);
  attn_requires_grad_(q, true), attn_requires_grad_(k, true), attn_requires_grad_(v, true);
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  o.enable_gqa = true;
  o.is_causal = true;
  int saved = attn_get_num_threads();
  attn_tensor *outs[3] = {0}, *grads[3][3] = {{0}};
  int threads[3] = {1, 2, 3};
  for (int t = 0; t < 3; t++) {
    CHECK_OK(attn_set_num_threads(threads[t]));
    CHECK(attn_get_num_threads() == threads[t]);
    CHECK_OK(run_one(true, q, k, v, &o, dout, &outs[t], grads[t]));
  }
  for (int t = 1; t < 3; t++) {
    CHECK(close_to(outs[t], outs[0], 0, 0, "out vs 1 thread", t));
    for (int i = 0; i < 3; i++) CHECK(close_to(grads[t][i], grads[0][i], 0, 0, "grad vs 1 thread", t));
  }
  CHECK_OK(attn_set_num_threads(saved));
  for (int t = 0; t < 3; t++) {
    attn_tensor_release(outs[t]);
    for (int i = 0; i < 3; i++) attn_tensor_release(grads[t][i]);
  }
  attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v), attn_tensor_release(dout);
}

static void test_threads(void) {
  const int64_t keep_max = attn__sdpa_keep_scores_max;
  test_threads_kv(2);
  test_threads_kv(4); /* the forward keeps its scores (S = 257) */
  attn__sdpa_keep_scores_max = 0;
  test_threads_kv(4); /* recomputed */
  attn__sdpa_keep_scores_max = keep_max;
}

/* out:sum():backward() style gradients: dO with every stride 0. */
static void test_expanded_grad(void) {
  int64_t qs[3] = {3, 70, 8}, ks[3] = {3, 90, 8}, vs[3] = {3, 90, 5}, os[3] = {3, 70, 5}, one[1] = {1};
  attn_tensor *q = randn(3, qs), *k = randn(3, ks), *v = randn(3, vs), *g1 = NULL, *g = NULL;
  attn_requires_grad_(q, true), attn_requires_grad_(k, true), attn_requires_grad_(v, true);
  CHECK_OK(attn_full(1, one, 0.5f, &g1));
  CHECK_OK(attn_expand(g1, 3, os, &g));
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  o.is_causal = true;
  attn_tensor *of = NULL, *orf = NULL, *gf[3] = {0}, *gr[3] = {0};
  CHECK_OK(run_one(true, q, k, v, &o, g, &of, gf));
  CHECK_OK(run_one(false, q, k, v, &o, g, &orf, gr));
  for (int i = 0; i < 3; i++) {
    CHECK(close_to(gf[i], gr[i], 1e-4, 1e-4, "expanded dO grad", i));
    attn_tensor_release(gf[i]), attn_tensor_release(gr[i]);
  }
  attn_tensor_release(of), attn_tensor_release(orf), attn_tensor_release(g), attn_tensor_release(g1);
  attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v);
}

/* Weights and dropout go through the reference path. */
static void test_weights_dropout(void) {
  int64_t qs[3] = {2, 6, 5}, ks[3] = {2, 9, 5}, vs[3] = {2, 9, 4};
  attn_tensor *q = randn(3, qs), *k = randn(3, ks), *v = randn(3, vs);
  attn_tensor *out = NULL, *w = NULL, *fused_out = NULL;
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  o.is_causal = true;
  CHECK_OK(attn_sdpa(q, k, v, &o, &out, &w));
  CHECK_OK(attn__sdpa_fused(q, k, v, &o, &fused_out));
  CHECK(close_to(out, fused_out, 1e-6, 1e-6, "weights path out", -1));
  if (w) {
    CHECK(w->ndim == 3 && w->shape[1] == 6 && w->shape[2] == 9);
    for (int b = 0; b < 2; b++)
      for (int i = 0; i < 6; i++) {
        double s = 0;
        for (int j = 0; j < 9; j++) {
          float x = attn_tensor_data(w)[(b * 6 + i) * 9 + j];
          s += x;
          if (j > i) CHECK(x == 0.0f);
        }
        CHECK_NEAR(s, 1.0, 1e-6);
      }
  }
  attn_tensor_release(out), attn_tensor_release(w), attn_tensor_release(fused_out);
  out = w = NULL;

  /* dropout: the same generator seed gives the same draw; the weights
     are softmax * bernoulli(1 - p) / (1 - p) */
  o.is_causal = false;
  o.dropout_p = 0.4;
  attn_generator *g = NULL;
  CHECK_OK(attn_generator_new(1234, &g));
  o.generator = g;
  attn_tensor *out2 = NULL, *w2 = NULL, *plain = NULL, *pw = NULL;
  CHECK_OK(attn_sdpa(q, k, v, &o, &out, &w));
  attn_generator_seed(g, 1234);
  CHECK_OK(attn_sdpa(q, k, v, &o, &out2, &w2));
  CHECK(close_to(out, out2, 0, 0, "dropout repeat", -1));
  attn_sdpa_opts np;
  attn_sdpa_opts_init(&np);
  CHECK_OK(attn_sdpa(q, k, v, &np, &plain, &pw));
  if (w && pw) {
    int zeros = 0;
    for (int64_t i = 0; i < attn_tensor_numel(w); i++) {
      float x = attn_tensor_data(w)[i], y = attn_tensor_data(pw)[i];
      if (x == 0.0f)
        zeros++;
      else
        CHECK(fabsf(x - y / 0.6f) <= 1e-6f * (1 + fabsf(x)));
    }
    CHECK(zeros > 20 && zeros < 80); /* of 108, p = 0.4 */
  }
  /* out = weights @ v */
  attn_tensor *wv = NULL;
  CHECK_OK(attn_matmul(w, v, &wv));
  CHECK(close_to(out, wv, 1e-6, 1e-6, "dropout out = w @ v", -1));
  attn_tensor_release(wv);
  /* p = 1: zero weights, zero output */
  attn_tensor *o1 = NULL;
  o.dropout_p = 1.0;
  CHECK_OK(attn_sdpa(q, k, v, &o, &o1, NULL));
  if (o1)
    for (int64_t i = 0; i < attn_tensor_numel(o1); i++) CHECK(attn_tensor_data(o1)[i] == 0.0f);
  attn_tensor_release(o1);
  attn_generator_free(g);
  attn_tensor_release(out), attn_tensor_release(w), attn_tensor_release(out2), attn_tensor_release(w2);
  attn_tensor_release(plain), attn_tensor_release(pw);
  attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v);
}

/* An additive mask that requires grad gets its gradient (reference path):
   checked against central differences of sum(out * G). */
static void test_mask_grad(void) {
  int64_t qs[2] = {3, 4}, ks[2] = {5, 4}, vs[2] = {5, 2}, ms[2] = {3, 5}, os[2] = {3, 2};
  attn_tensor *q = randn(2, qs), *k = randn(2, ks), *v = randn(2, vs), *m = randn(2, ms), *G = randn(2, os);
  CHECK_OK(attn_requires_grad_(m, true));
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  o.attn_mask = m;
  attn_tensor *out = NULL;
  CHECK_OK(attn_sdpa(q, k, v, &o, &out, NULL));
  if (!out) return;
  CHECK(strcmp(attn_grad_fn_name(out), "ScaledDotProductFlashAttentionForCpuBackward0") != 0);
  CHECK_OK(attn_backward(out, G, false));
  attn_tensor *gm = attn_grad(m);
  CHECK(gm != NULL);
  bool prev = attn_set_grad_enabled(false);
  float *mp = attn_tensor_data(m);
  for (int i = 0; i < 15 && gm; i++) {
    double f[2];
    for (int s = 0; s < 2; s++) {
      float keepv = mp[i];
      mp[i] = keepv + (s ? -1e-2f : 1e-2f);
      attn_tensor *o2 = NULL;
      attn_sdpa(q, k, v, &o, &o2, NULL);
      double acc = 0;
      for (int j = 0; j < 6; j++) acc += (double)attn_tensor_data(o2)[j] * attn_tensor_data(G)[j];
      f[s] = acc;
      attn_tensor_release(o2);
      mp[i] = keepv;
    }
    CHECK_NEAR(attn_tensor_data(gm)[i], (f[0] - f[1]) / 2e-2, 2e-3);
  }
  attn_set_grad_enabled(prev);
  attn_tensor_release(out), attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v);
  attn_tensor_release(m), attn_tensor_release(G);
}

/* No graph under no-grad; a tiny hand-checked case. */
static void test_small_exact(void) {
  /* one query, two keys with scores 0 and ln 3 (scale 1): weights 1/4, 3/4 */
  float qd[2] = {1, 0}, kd[4] = {0, 5, (float)log(3.0), 7}, vd[4] = {1, 10, 3, 30};
  int64_t qs[2] = {1, 2}, ks[2] = {2, 2};
  attn_tensor *q = NULL, *k = NULL, *v = NULL, *out = NULL;
  attn_from_data(2, qs, qd, &q), attn_from_data(2, ks, kd, &k), attn_from_data(2, ks, vd, &v);
  attn_requires_grad_(q, true);
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  o.scale = 1.0;
  bool prev = attn_set_grad_enabled(false);
  CHECK_OK(attn_sdpa(q, k, v, &o, &out, NULL));
  attn_set_grad_enabled(prev);
  if (out) {
    CHECK(!attn_requires_grad(out));
    CHECK_NEAR(attn_tensor_data(out)[0], 0.25 * 1 + 0.75 * 3, 1e-6);
    CHECK_NEAR(attn_tensor_data(out)[1], 0.25 * 10 + 0.75 * 30, 1e-5);
  }
  attn_tensor_release(out), attn_tensor_release(q), attn_tensor_release(k), attn_tensor_release(v);
}

static void test_mask_helpers(void) {
  attn_tensor *c = NULL;
  CHECK_OK(attn_causal_mask(3, 5, false, &c));
  if (c) {
    const float want[15] = {1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0};
    for (int i = 0; i < 15; i++) CHECK(attn_tensor_data(c)[i] == want[i]);
  }
  attn_tensor_release(c);
  CHECK_OK(attn_causal_mask(3, 5, true, &c));
  if (c) {
    const float want[15] = {1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1};
    for (int i = 0; i < 15; i++) CHECK(attn_tensor_data(c)[i] == want[i]);
  }
  attn_tensor_release(c);
  float ld[3] = {2, 0, 4};
  int64_t n = 3;
  attn_tensor *len = NULL, *p = NULL;
  attn_from_data(1, &n, ld, &len);
  CHECK_OK(attn_padding_mask(len, 4, &p));
  if (p) {
    CHECK(p->ndim == 4 && p->shape[0] == 3 && p->shape[1] == 1 && p->shape[2] == 1 && p->shape[3] == 4);
    const float want[12] = {1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    for (int i = 0; i < 12; i++) CHECK(attn_tensor_data(p)[i] == want[i]);
  }
  attn_tensor_release(p);
  CHECK(attn_padding_mask(len, 3, &p) == ATTN_ERR_ARG);
  CHECK(strstr(attn_last_error(), "found 4") != NULL);
  attn_tensor_release(len);
}

static void test_errors(void) {
  int64_t a[3] = {2, 5, 8}, b[3] = {2, 7, 6}, c[3] = {2, 6, 8}, d[3] = {3, 7, 8}, e[3] = {2, 7, 3}, f[3] = {4, 5, 8},
          g[3] = {3, 7, 3}, ms[2] = {4, 7}, two[2] = {5, 8};
  attn_tensor *q = randn(3, a), *kbadE = randn(3, b), *kbadS = randn(3, c), *kbadB = randn(3, d), *v = randn(3, e),
              *k = NULL, *q4 = randn(3, f), *v3 = randn(3, g), *m = randn(2, ms), *q2 = randn(2, two), *out = NULL;
  int64_t ks[3] = {2, 7, 8};
  k = randn(3, ks);
  CHECK(attn_sdpa(q, kbadE, v, NULL, &out, NULL) == ATTN_ERR_SHAPE);
  CHECK(strstr(attn_last_error(), "query [2,5,8] and key [2,7,6]") != NULL);
  CHECK(attn_sdpa(q, kbadS, v, NULL, &out, NULL) == ATTN_ERR_SHAPE);
  CHECK(strstr(attn_last_error(), "key [2,6,8] and value [2,7,3]") != NULL);
  CHECK(attn_sdpa(q, kbadB, v, NULL, &out, NULL) == ATTN_ERR_SHAPE);
  CHECK(strstr(attn_last_error(), "leading dims") != NULL);
  CHECK(attn_sdpa(q2, k, v, NULL, &out, NULL) == ATTN_ERR_SHAPE);
  CHECK(strstr(attn_last_error(), "same number of dims") != NULL);
  /* 4 query heads, 2 kv heads: only with enable_gqa; 3 kv heads never */
  CHECK(attn_sdpa(q4, k, v, NULL, &out, NULL) == ATTN_ERR_SHAPE);
  CHECK(strstr(attn_last_error(), "enable_gqa") != NULL);
  attn_sdpa_opts o;
  attn_sdpa_opts_init(&o);
  o.enable_gqa = true;
  CHECK_OK(attn_sdpa(q4, k, v, &o, &out, NULL));
  attn_tensor_release(out);
  out = NULL;
  CHECK(attn_sdpa(q4, kbadB, v3, &o, &out, NULL) == ATTN_ERR_SHAPE);
  CHECK(strstr(attn_last_error(), "multiple") != NULL);
  attn_sdpa_opts_init(&o);
  o.attn_mask = m;
  CHECK(attn_sdpa(q, k, v, &o, &out, NULL) == ATTN_ERR_SHAPE);
  CHECK(strstr(attn_last_error(), "attn_mask [4,7] cannot be broadcast to the attention shape [2,5,7]") != NULL);
  o.attn_mask = NULL;
  o.dropout_p = 1.5;
  CHECK(attn_sdpa(q, k, v, &o, &out, NULL) == ATTN_ERR_ARG);
  o.dropout_p = 0;
  o.causal_bottom_right = true;
  CHECK(attn_sdpa(q, k, v, &o, &out, NULL) == ATTN_ERR_ARG);
  o.is_causal = true;
  o.attn_mask = k;
  CHECK(attn_sdpa(q, k, v, &o, &out, NULL) == ATTN_ERR_ARG);
  CHECK(strstr(attn_last_error(), "is_causal") != NULL);
  CHECK(out == NULL);
  attn_tensor *ts[] = {q, kbadE, kbadS, kbadB, v, k, q4, v3, m, q2};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) attn_tensor_release(ts[i]);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 400;
  test_small_exact();
  test_mask_helpers();
  test_errors();
  test_fully_masked();
  test_weights_dropout();
  test_mask_grad();
  test_expanded_grad();
  test_random_configs(n);
  test_kept_scores();
  test_threads();
  test_memory();
  return check_summary();
}
