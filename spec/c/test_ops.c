/* SPDX-License-Identifier: MIT */
/* sort.c and scatter.c against simple references: sort/topk/kthvalue
 * against the insertion-sort twin (attn__sort_pairs_reference) on rows
 * with ties and NaN, read through non-contiguous views; scatter_reduce
 * (every mode, with and without self), index_add/copy/fill, nonzero,
 * masked_select and bucketize against per-element loops written here; the
 * error paths.  Comparisons are bit-exact except the sums and means (the
 * reference adds in the same order, so those are exact too). */
#include "attn.h"
#include "check.h"
#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}
static int64_t rnd(int64_t n) { return n > 0 ? (int64_t)(rng() % (uint64_t)n) : 0; }
/* small integers, -0 and a few NaN: many ties */
static float rnd_tied(void) {
  int64_t r = rnd(17);
  return r == 0 ? NAN : r == 1 ? -0.0f : (float)(rnd(7) - 3) * 0.5f; /* -0 ties with +0 */
}
static float rndf(void) { return (float)((double)(rng() >> 11) / 9007199254740992.0 * 4.0 - 2.0); }

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ------------------------------------------------------------------------ */
/* sort, topk, kthvalue                                                      */

static void test_sort(void) {
  for (int trial = 0; trial < 80; trial++) {
    /* short rows (merge of insertion runs, top-k pass) and long ones (radix) */
    int64_t R = 1 + rnd(5), N = trial < 60 ? 1 + rnd(40) : 256 + rnd(700);
    bool desc = trial & 1;
    /* t is [N, R] transposed to [R, N]: rows are strided */
    attn_tensor *base, *t;
    CHECK_OK(attn_empty(2, (int64_t[]){N, R}, &base));
    float *bp = attn_tensor_data(base);
    for (int64_t i = 0; i < N * R; i++) bp[i] = rnd_tied();
    CHECK_OK(attn_transpose(base, 0, 1, &t));
    attn_tensor *v = NULL, *ix = NULL, *tv = NULL, *ti = NULL, *kv = NULL, *ki = NULL;
    CHECK_OK(attn_sort(t, 1, desc, &v, &ix));
    int64_t k = rnd(N + 1), kth = 1 + rnd(N);
    CHECK_OK(attn_topk(t, k, 1, desc, &tv, &ti));
    CHECK_OK(attn_kthvalue(t, kth, 1, false, &kv, &ki));
    float *row = malloc((size_t)N * sizeof(float));
    int64_t *ridx = malloc((size_t)N * sizeof(int64_t));
    bool ok = true, ok_top = true, ok_kth = true;
    for (int64_t r = 0; r < R; r++) {
      for (int64_t i = 0; i < N; i++) row[i] = bp[i * R + r];
      attn__sort_pairs_reference(row, ridx, N, desc);
      for (int64_t i = 0; i < N; i++) {
        ok = ok && same_bits(attn_tensor_get(v, (int64_t[]){r, i}), row[i]) &&
             (int64_t)attn_tensor_get(ix, (int64_t[]){r, i}) == ridx[i];
        if (i < k)
          ok_top = ok_top && same_bits(attn_tensor_get(tv, (int64_t[]){r, i}), row[i]) &&
                   (int64_t)attn_tensor_get(ti, (int64_t[]){r, i}) == ridx[i];
      }
      /* kthvalue: the k-th smallest; with ties any index of an equal value
         is right (torch leaves it open), so check the value it names */
      float want_v;
      if (desc) { /* reference sorted descending: sort ascending again */
        for (int64_t i = 0; i < N; i++) row[i] = bp[i * R + r];
        attn__sort_pairs_reference(row, ridx, N, false);
      }
      want_v = row[kth - 1];
      float got_v = attn_tensor_get(kv, (int64_t[]){r});
      int64_t got_i = (int64_t)attn_tensor_get(ki, (int64_t[]){r});
      ok_kth = ok_kth && same_bits(got_v, want_v) && got_i >= 0 && got_i < N && same_bits(bp[got_i * R + r], want_v);
    }
    CHECK(ok);
    CHECK(ok_top);
    CHECK(ok_kth);
    CHECK(tv->shape[1] == k && kv->ndim == 1 && kv->shape[0] == R);
    free(row);
    free(ridx);
    attn_tensor *list[] = {base, t, v, ix, tv, ti, kv, ki};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) attn_tensor_release(list[i]);
  }
  /* errors: k out of range, bad dim */
  attn_tensor *t, *v = NULL, *ix = NULL;
  CHECK_OK(attn_zeros(2, (int64_t[]){2, 3}, &t));
  CHECK(attn_topk(t, 4, 1, true, &v, &ix) == ATTN_ERR_INDEX && v == NULL);
  CHECK(strstr(attn_last_error(), "topk: k = 4 out of range for a dim of size 3 of [2,3]") != NULL);
  CHECK(attn_kthvalue(t, 0, 1, false, &v, &ix) == ATTN_ERR_INDEX && v == NULL);
  CHECK(attn_sort(t, 2, false, &v, &ix) != ATTN_OK && v == NULL);
  attn_tensor_release(t);
}

/* ------------------------------------------------------------------------ */
/* scatter_reduce and the index ops                                          */

static const char *const modes[] = {"sum", "mean", "amax", "amin", "prod"};

/* The reference: per-element loops over index in row-major order. */
static void scatter_reference(const char *mode, const float *self, int64_t S0, int64_t S1, const float *idx,
                              const float *src, int64_t I0, int64_t I1, int64_t src_s0, bool include_self, float *out) {
  int64_t n = S0 * S1;
  float *cnt = calloc((size_t)n, sizeof(float));
  memcpy(out, self, (size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) cnt[i] = include_self ? 1.0f : 0.0f;
  for (int64_t a = 0; a < I0; a++)
    for (int64_t b = 0; b < I1; b++) {
      int64_t q = a * S1 + (int64_t)idx[a * I1 + b]; /* dim 1 */
      float v = src[a * src_s0 + b];
      if (cnt[q] == 0.0f)
        out[q] = v;
      else if (!strcmp(mode, "sum") || !strcmp(mode, "mean"))
        out[q] += v;
      else if (!strcmp(mode, "prod"))
        out[q] *= v;
      else if (!strcmp(mode, "amax"))
        out[q] = (v > out[q] || isnan(v)) ? v : out[q];
      else
        out[q] = (v < out[q] || isnan(v)) ? v : out[q];
      cnt[q] += 1.0f;
    }
  if (!strcmp(mode, "mean"))
    for (int64_t i = 0; i < n; i++)
      if (cnt[i] > 0) out[i] /= cnt[i];
  free(cnt);
}

static void test_scatter(void) {
  for (int trial = 0; trial < 80; trial++) {
    int64_t S0 = 1 + rnd(4), S1 = 1 + rnd(6), I0 = 1 + rnd(S0), I1 = 1 + rnd(8);
    const char *mode = modes[trial % 5];
    bool include_self = (trial / 5) & 1;
    attn_tensor *self, *idx, *srcbase, *src, *out = NULL;
    CHECK_OK(attn_empty(2, (int64_t[]){S0, S1}, &self));
    CHECK_OK(attn_empty(2, (int64_t[]){I0, I1}, &idx));
    CHECK_OK(attn_empty(2, (int64_t[]){I0, I1 + 2}, &srcbase)); /* src: a narrowed (strided) view */
    CHECK_OK(attn_narrow(srcbase, 1, 1, I1, &src));
    for (int64_t i = 0; i < S0 * S1; i++) attn_tensor_data(self)[i] = rndf();
    for (int64_t i = 0; i < I0 * I1; i++) attn_tensor_data(idx)[i] = (float)rnd(S1);
    for (int64_t i = 0; i < I0 * (I1 + 2); i++) attn_tensor_data(srcbase)[i] = rndf();
    CHECK_OK(attn_scatter_reduce(self, 1, idx, src, mode, include_self, &out));
    float *want = malloc((size_t)(S0 * S1) * sizeof(float));
    scatter_reference(mode, attn_tensor_data(self), S0, S1, attn_tensor_data(idx), attn_tensor_data(src), I0, I1,
                      I1 + 2, include_self, want);
    bool ok = out != NULL;
    for (int64_t i = 0; ok && i < S0 * S1; i++) ok = same_bits(attn_tensor_data(out)[i], want[i]);
    CHECK(ok);
    if (!ok)
      fprintf(stderr, "  scatter_reduce %s include_self=%d [%lld,%lld]\n", mode, include_self, (long long)S0,
              (long long)S1);
    free(want);
    attn_tensor *list[] = {self, idx, srcbase, src, out};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) attn_tensor_release(list[i]);
  }
  /* index_add / index_copy / index_fill along dim 0 of [4, 3] */
  attn_tensor *self, *index, *source, *out = NULL;
  CHECK_OK(attn_empty(2, (int64_t[]){4, 3}, &self));
  CHECK_OK(attn_from_data(1, (int64_t[]){3}, (float[]){2, 0, 2}, &index));
  CHECK_OK(attn_empty(2, (int64_t[]){3, 3}, &source));
  for (int i = 0; i < 12; i++) attn_tensor_data(self)[i] = rndf();
  for (int i = 0; i < 9; i++) attn_tensor_data(source)[i] = rndf();
  const float *sp = attn_tensor_data(self), *src = attn_tensor_data(source);
  CHECK_OK(attn_index_add(self, 0, index, source, 0.5f, &out));
  {
    float want[12];
    memcpy(want, sp, sizeof want);
    const int rows[3] = {2, 0, 2};
    for (int j = 0; j < 3; j++)
      for (int b = 0; b < 3; b++) want[rows[j] * 3 + b] += 0.5f * src[j * 3 + b];
    bool ok = true;
    for (int i = 0; i < 12; i++) ok = ok && same_bits(attn_tensor_data(out)[i], want[i]);
    CHECK(ok);
  }
  attn_tensor_release(out);
  CHECK_OK(attn_index_fill(self, 1, index, -3.0f, &out)); /* columns 2 and 0 */
  CHECK(attn_tensor_data(out)[0] == -3.0f && attn_tensor_data(out)[2] == -3.0f && attn_tensor_data(out)[1] == sp[1]);
  attn_tensor_release(out);
  out = NULL;
  CHECK(attn_index_copy(self, 0, index, self, &out) == ATTN_ERR_SHAPE && out == NULL);
  CHECK(strstr(attn_last_error(), "index_copy: source [4,3] must be self [4,3] with size 3") != NULL);
  attn_tensor_release(self);
  attn_tensor_release(index);
  attn_tensor_release(source);
  /* scatter errors: bad index value and shape */
  attn_tensor *s, *i2;
  CHECK_OK(attn_zeros(2, (int64_t[]){2, 2}, &s));
  CHECK_OK(attn_from_data(2, (int64_t[]){1, 1}, (float[]){2}, &i2));
  CHECK(attn_scatter_value(s, 1, i2, 1.0f, &out) == ATTN_ERR_INDEX && out == NULL);
  CHECK(attn_scatter_reduce(s, 1, i2, s, "median", true, &out) == ATTN_ERR_ARG && out == NULL);
  attn_tensor_release(s);
  attn_tensor_release(i2);
}

/* ------------------------------------------------------------------------ */
/* nonzero, masked_select, bucketize                                         */

static void test_select(void) {
  attn_tensor *t, *nz, *m, *sel, *b, *bk;
  float data[6] = {0, 1.5f, 0, -2, 0, 3};
  CHECK_OK(attn_from_data(2, (int64_t[]){2, 3}, data, &t));
  CHECK_OK(attn_nonzero(t, &nz));
  CHECK(nz->shape[0] == 3 && nz->shape[1] == 2);
  const float want_nz[6] = {0, 1, 1, 0, 1, 2};
  bool ok = true;
  for (int i = 0; i < 6; i++) ok = ok && attn_tensor_get_flat_i64(nz, i) == (int64_t)want_nz[i];
  CHECK(ok);
  CHECK_OK(attn_from_data(1, (int64_t[]){3}, (float[]){1, 0, 1}, &m)); /* broadcast over rows */
  CHECK_OK(attn_masked_select(t, m, &sel));
  CHECK(sel->ndim == 1 && sel->shape[0] == 4);
  const float want_sel[4] = {0, 0, -2, 3};
  ok = true;
  for (int i = 0; i < 4; i++) ok = ok && attn_tensor_data(sel)[i] == want_sel[i];
  CHECK(ok);
  CHECK_OK(attn_from_data(1, (int64_t[]){3}, (float[]){0, 1.5f, 3}, &b));
  CHECK_OK(attn_bucketize(t, b, false, &bk));
  const float want_l[6] = {0, 1, 0, 0, 0, 2}, want_r[6] = {1, 2, 1, 0, 1, 3};
  ok = true;
  for (int i = 0; i < 6; i++) ok = ok && attn_tensor_get_flat_i64(bk, i) == (int64_t)want_l[i];
  CHECK(ok);
  attn_tensor_release(bk);
  CHECK_OK(attn_bucketize(t, b, true, &bk));
  ok = true;
  for (int i = 0; i < 6; i++) ok = ok && attn_tensor_get_flat_i64(bk, i) == (int64_t)want_r[i];
  CHECK(ok);
  attn_tensor *list[] = {t, nz, m, sel, b, bk};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) attn_tensor_release(list[i]);
}

int main(void) {
  test_sort();
  test_scatter();
  test_select();
  attn_debug_counts c;
  attn_debug_counts_get(&c);
  CHECK(c.tensors == 0 && c.storages == 0);
  return check_summary();
}
