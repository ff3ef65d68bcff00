/* SPDX-License-Identifier: MIT */
/* matmul and friends on cblas_sgemm.
 *
 * Shapes (torch.matmul): a [..., m, k] x b [..., k, n] -> [..., m, n] with
 * the batch dims broadcast; a 1-d a is [1, k] and a 1-d b is [k, 1], the
 * added dim being dropped from the result.  Operands are handed to sgemm in
 * place whenever their strides are a (possibly transposed) BLAS layout, so
 * transposed views cost no copy.  A batch whose right operand is a plain
 * matrix is folded into one big GEMM ([B*m, k] x [k, n]).
 */
#include "ops/ops.h"
#include "kernels/kernels.h"

#include <stdio.h>

/* Up to this many multiply-adds (the notebooks' tiny products) a plain
   in-order kernel: any tile setup costs more than the work. */
#define SMALL_GEMM_FLOPS 512
/* Up to this many multiply-adds, and a B panel of at most MID_GEMM_PANEL
   floats (L2-sized), the kernel family's tiles beat sgemm's packing and
   call costs (measured on Zen 3: [512,64] x [64,16] at 86 GFLOP/s against
   sgemm's 50; at [800,128] x [128,512] both are at about 80). */
#define MID_GEMM_MACS ((int64_t)1 << 24)
#define MID_GEMM_PANEL ((int64_t)1 << 16)
/* copying B costs k * n, the product m * k * n: below this many rows of A
   sgemm's own packing wins (measured [16,512] x [512,64]^T: 40 vs 52) */
#define MID_GEMM_PACK_ROWS 64
/* ... unless the copy is small anyway (per-head attention scores q k^T):
   then sgemm's call and packing overhead is the larger cost */
#define SMALL_GEMM_PANEL 4096
/* Medium products of at least this many multiply-adds split their rows
   over the pool (a job costs about 1 us; this is about 3 us of work), and
   so do batches of products that add up to it. */
#define PAR_GEMM_MACS ((int64_t)1 << 16)

/* Whether a rows x cols matrix with strides (rs, cs) can go to sgemm, and
   how: row-major (trans false) or column-major (trans true), with its
   leading dimension. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans, int64_t *ld) {
  int64_t c1 = cols > 1 ? cols : 1, r1 = rows > 1 ? rows : 1;
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= c1)) {
    *trans = false;
    *ld = rows == 1 ? c1 : rs;
    if (*ld < c1) *ld = c1;
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= r1)) {
    *trans = true;
    *ld = cols == 1 ? r1 : cs;
    if (*ld < r1) *ld = r1;
    return true;
  }
  return false;
}

/* c[m,n] (row stride ldc) = a[m,k] (strides ars, acs) x b[k,n] (brs, bcs).
   The simple kernel: used for tiny products and as the test reference. */
static void gemm_naive(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs, const float *b,
                       int64_t brs, int64_t bcs, float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; p++) acc += a[i * ars + p * acs] * b[p * brs + j * bcs];
      c[i * ldc + j] = acc;
    }
}

/* c[m,n] (contiguous) = a[m,k] (strides ars, acs) x b[k,n] (row stride
   brs, unit column stride), for the small products of the notebooks and of
   per-head attention (BLAS's packing and call overhead dominate there):
   each row of c accumulates b's rows times a's elements, vectorised along
   the row, and every element is still summed over p in order from 0, so
   the results are gemm_naive's bit for bit. */
static void gemm_small_rows(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars, int64_t acs,
                            const float *restrict b, int64_t brs, float *restrict c) {
  for (int64_t i = 0; i < m; i++, c += n) {
    const float *ai = a + i * ars;
    for (int64_t j = 0; j < n; j++) c[j] = 0.0f;
    for (int64_t p = 0; p < k; p++) {
      const float x = ai[p * acs], *bp = b + p * brs;
      for (int64_t j = 0; j < n; j++) c[j] += x * bp[j];
    }
  }
}

typedef struct {
  const float *data;
  int64_t rs, cs; /* strides of the matrix dims */
} mat;

/* Rows [part * step, ...) of a medium product, on the pool. */
typedef struct {
  const attn__kernels *K;
  mat A, B;
  int64_t m, n, k, step, scratch_floats;
  float *c, *scratch;
} mid_job;

static void mid_range(int64_t begin, int64_t end, void *arg) {
  const mid_job *J = arg;
  for (int64_t part = begin; part < end; part++) {
    const int64_t i = part * J->step, mi = J->m - i < J->step ? J->m - i : J->step;
    J->K->gemm(mi, J->n, J->k, J->A.data + i * J->A.rs, J->A.rs, J->A.cs, J->B.data, J->B.rs, J->B.cs, J->c + i * J->n,
               J->scratch + part * J->scratch_floats);
  }
}

/* c [m, n] (contiguous) = A [m, k] @ B [k, n], or with acc c += A @ B (a
   gradient added straight into a leaf's .grad or a running sum,
   attn__grad_into).  Products that go to
   sgemm add through its beta = 1, which saves the pass that zeroes c
   (sgemm's beta = 0) and the pass that adds a new gradient; the smaller
   ones are computed into scratch and added, each element rounded on its
   own first, as the engine's separate add would. */
static attn_status gemm_one(mat A, mat B, int64_t m, int64_t n, int64_t k, float *c, bool reference, bool acc) {
  if (m == 0 || n == 0) return ATTN_OK;
  if (k == 0) {
    if (!acc) memset(c, 0, (size_t)(m * n) * sizeof(float));
    return ATTN_OK;
  }
  bool ta, tb;
  int64_t lda, ldb;
  if (reference) {
    gemm_naive(m, n, k, A.data, A.rs, A.cs, B.data, B.rs, B.cs, c, n);
    return ATTN_OK;
  }
  const attn__kernels *K = attn__kern();
  const int64_t np = (n + K->gemm_nr - 1) / K->gemm_nr * K->gemm_nr;
  const bool b_in_place = B.cs == 1 && n == np;
  const bool small = m * n * k <= SMALL_GEMM_FLOPS;
  /* Medium products go to the kernel family's own tiles (gemm_kernels.h)
     when B needs no copy, or when A has enough rows to repay B's copy. */
  const bool mid = !small && m * n * k <= MID_GEMM_MACS && k * np <= MID_GEMM_PANEL &&
                   (b_in_place || m >= MID_GEMM_PACK_ROWS || k * np <= SMALL_GEMM_PANEL);
  if (acc && (small || mid)) {
    const size_t bytes = (size_t)(m * n) * sizeof(float);
    float *t = attn__scratch_alloc(bytes);
    if (!t) return attn__nomem("matmul", (int64_t)bytes);
    attn_status st = gemm_one(A, B, m, n, k, t, false, false);
    if (!st)
      for (int64_t i = 0; i < m * n; i++) c[i] += t[i];
    attn__scratch_free(t, bytes);
    return st;
  }
  if (small) {
    if (B.cs == 1) {
      gemm_small_rows(m, n, k, A.data, A.rs, A.cs, B.data, B.rs, c);
    } else { /* B's rows gathered first (k * n <= SMALL_GEMM_FLOPS floats) */
      float bt[SMALL_GEMM_FLOPS];
      for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) bt[p * n + j] = B.data[p * B.rs + j * B.cs];
      gemm_small_rows(m, n, k, A.data, A.rs, A.cs, bt, n, c);
    }
    return ATTN_OK;
  }
  if (mid) {
    const size_t bytes = (size_t)(K->gemm_mr * K->gemm_nr + k * np) * sizeof(float);
    /* rows split over the pool: parts of whole register tiles, each with
       its own scratch (its own copy of B's panel) */
    const int nt = attn__parallel_threads();
    const int64_t tiles = (m + K->gemm_mr - 1) / K->gemm_mr;
    const int64_t per = nt > 1 && m * n * k >= PAR_GEMM_MACS ? (tiles + nt - 1) / nt : tiles; /* tiles a part */
    const int64_t parts = (tiles + per - 1) / per;
    float *scratch = attn__scratch_alloc(bytes * (size_t)parts);
    if (!scratch) return attn__nomem("matmul", (int64_t)(bytes * (size_t)parts));
    if (parts == 1) {
      K->gemm(m, n, k, A.data, A.rs, A.cs, B.data, B.rs, B.cs, c, scratch);
    } else {
      mid_job J = {.K = K,
                   .A = A,
                   .B = B,
                   .m = m,
                   .n = n,
                   .k = k,
                   .c = c,
                   .scratch = scratch,
                   .scratch_floats = (int64_t)(bytes / sizeof(float)),
                   .step = per * K->gemm_mr};
      attn__parallel_for(parts, mid_range, &J);
    }
    attn__scratch_free(scratch, bytes * (size_t)parts);
    return attn__cancelled() ? attn__limit_error("matmul") : ATTN_OK;
  }
  /* An operand BLAS cannot read in place (broadcast stride 0, gradients
     of sums, odd strides) is packed row-major first: a copy is O(rows *
     cols), the product O(m * n * k). */
  float *pa = NULL, *pb = NULL;
  if (!blas_layout(m, k, A.rs, A.cs, &ta, &lda)) {
    if (!(pa = attn__scratch_alloc((size_t)(m * k) * sizeof(float))))
      return attn__nomem("matmul", m * k * (int64_t)sizeof(float));
    for (int64_t i = 0; i < m; i++)
      for (int64_t p = 0; p < k; p++) pa[i * k + p] = A.data[i * A.rs + p * A.cs];
    A = (mat){pa, k, 1};
    ta = false, lda = k;
  }
  if (!blas_layout(k, n, B.rs, B.cs, &tb, &ldb)) {
    if (!(pb = attn__scratch_alloc((size_t)(k * n) * sizeof(float)))) {
      attn__scratch_free(pa, (size_t)(m * k) * sizeof(float));
      return attn__nomem("matmul", k * n * (int64_t)sizeof(float));
    }
    for (int64_t p = 0; p < k; p++)
      for (int64_t j = 0; j < n; j++) pb[p * n + j] = B.data[p * B.rs + j * B.cs];
    B = (mat){pb, n, 1};
    tb = false, ldb = n;
  }
  attn_status st = attn_sgemm(ta, tb, m, n, k, 1.0f, A.data, lda, B.data, ldb, acc ? 1.0f : 0.0f, c, n);
  if (pa) attn__scratch_free(pa, (size_t)(m * k) * sizeof(float));
  if (pb) attn__scratch_free(pb, (size_t)(k * n) * sizeof(float));
  return st;
}

/* Batches [begin, end) of a batched product, on the pool. */
typedef struct {
  mat A, B;
  int64_t m, n, k;
  float *c;
  int nbatch;
  const int64_t *batch, *astr, *bstr;
  int failed; /* atomic */
} batch_job;

static void batch_range(int64_t begin, int64_t end, void *arg) {
  batch_job *J = arg;
  for (int64_t bi = begin; bi < end; bi++) {
    int64_t aoff = 0, boff = 0, rest = bi;
    for (int d = J->nbatch - 1; d >= 0; d--) {
      const int64_t i = rest % J->batch[d];
      rest /= J->batch[d];
      aoff += i * J->astr[d];
      boff += i * J->bstr[d];
    }
    mat Ai = {J->A.data + aoff, J->A.rs, J->A.cs}, Bi = {J->B.data + boff, J->B.rs, J->B.cs};
    if (gemm_one(Ai, Bi, J->m, J->n, J->k, J->c + bi * J->m * J->n, false, false))
      __atomic_store_n(&J->failed, 1, __ATOMIC_RELAXED);
  }
}

static attn_status matmul_impl(const char *fn, const attn_tensor *a_in, const attn_tensor *b_in, bool reference,
                               attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  attn_status fst;
  if ((fst = attn_check_float(fn, NULL, a_in)) || (fst = attn_check_float(fn, NULL, b_in))) return fst;
  if (a_in->ndim == 0 || b_in->ndim == 0)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: both arguments need at least 1 dimension, got %s and %s", fn,
                          ATTN_SHAPE(a_in, sa), ATTN_SHAPE(b_in, sb));
  /* Promote 1-d operands to matrices (views, no copy). */
  attn_tensor a = *a_in, b = *b_in;
  bool drop_m = false, drop_n = false;
  if (a.ndim == 1) {
    a.ndim = 2;
    a.shape[1] = a.shape[0];
    a.stride[1] = a.stride[0];
    a.shape[0] = 1;
    a.stride[0] = a.shape[1] * a.stride[1];
    drop_m = true;
  }
  if (b.ndim == 1) {
    b.ndim = 2;
    b.shape[1] = 1;
    b.stride[1] = 1;
    drop_n = true;
  }
  int64_t m = a.shape[a.ndim - 2], k = a.shape[a.ndim - 1];
  int64_t k2 = b.shape[b.ndim - 2], n = b.shape[b.ndim - 1];
  if (k != k2)
    return attn_set_error(ATTN_ERR_SHAPE, "%s: cannot multiply %s by %s", fn, ATTN_SHAPE(a_in, sa),
                          ATTN_SHAPE(b_in, sb));
  /* Broadcast batch dims. */
  attn_tensor ab = {.ndim = a.ndim - 2}, bb = {.ndim = b.ndim - 2};
  for (int i = 0; i < ab.ndim; i++) ab.shape[i] = a.shape[i], ab.stride[i] = a.stride[i];
  for (int i = 0; i < bb.ndim; i++) bb.shape[i] = b.shape[i], bb.stride[i] = b.stride[i];
  int nbatch;
  int64_t batch[ATTN_MAX_DIMS];
  if (attn_broadcast_shape(fn, &ab, &bb, &nbatch, batch))
    return attn_set_error(ATTN_ERR_SHAPE, "%s: batch dims of %s and %s cannot be broadcast together", fn,
                          ATTN_SHAPE(a_in, sa), ATTN_SHAPE(b_in, sb));
  int64_t oshape[ATTN_MAX_DIMS];
  int ond = 0;
  for (int i = 0; i < nbatch; i++) oshape[ond++] = batch[i];
  if (!drop_m) oshape[ond++] = m;
  if (!drop_n) oshape[ond++] = n;
  if (ond > ATTN_MAX_DIMS) return attn_set_error(ATTN_ERR_ARG, "%s: result has too many dims", fn);
  attn_tensor *o;
  attn_status st = attn__alloc(fn, ond, oshape, &o);
  if (st) return st;
  float *c = attn_tensor_data(o);
  int64_t nb = attn__shape_numel(nbatch, batch);

  mat A = {attn_tensor_data(&a), a.stride[a.ndim - 2], a.stride[a.ndim - 1]};
  mat B = {attn_tensor_data(&b), b.stride[b.ndim - 2], b.stride[b.ndim - 1]};

  /* Fold a's batch into its rows when b has no batch of its own and a's
     batch and row dims collapse into one stride. */
  if (nb > 1 && bb.ndim == 0 && !reference) {
    /* each batch dim of size > 1 must step by the rows below it times
       the row stride (size-1 dims are skipped without breaking the chain) */
    bool foldable = true;
    int64_t rows_below = m;
    for (int i = a.ndim - 3; i >= 0 && foldable && rows_below > 0; i--) {
      /* stride == A.rs * rows_below, without overflow for odd strides */
      foldable = a.shape[i] == 1 || (a.stride[i] % rows_below == 0 && a.stride[i] / rows_below == A.rs);
      rows_below *= a.shape[i];
    }
    if (foldable) {
      mat F = {A.data, A.rs, A.cs};
      st = gemm_one(F, B, nb * m, n, k, c, false, false);
      if (st)
        attn_tensor_release(o);
      else
        *out = o;
      return st;
    }
  }
  int64_t astr[ATTN_MAX_DIMS], bstr[ATTN_MAX_DIMS];
  attn__broadcast_strides(&ab, nbatch, batch, astr);
  attn__broadcast_strides(&bb, nbatch, batch, bstr);
  /* many small products (per-head attention): batches over the pool */
  if (!reference && nb > 1 && attn__parallel_threads() > 1 && nb * m * n * (k > 0 ? k : 1) >= PAR_GEMM_MACS) {
    batch_job J = {
        .A = A, .B = B, .m = m, .n = n, .k = k, .c = c, .nbatch = nbatch, .batch = batch, .astr = astr, .bstr = bstr};
    attn__parallel_for(nb, batch_range, &J);
    if (attn__cancelled()) {
      attn_tensor_release(o);
      return attn__limit_error(fn);
    }
    if (!__atomic_load_n(&J.failed, __ATOMIC_RELAXED)) {
      *out = o;
      return ATTN_OK;
    }
    /* a batch failed on a worker (out of memory): the loop below fails
       again here, where the message is this thread's */
  }
  int64_t idx[ATTN_MAX_DIMS] = {0};
  int64_t aoff = 0, boff = 0, work = 0;
  for (int64_t bi = 0; bi < nb; bi++) {
    if (attn__poll_work(&work, m * n * (k > 0 ? k : 1))) {
      attn_tensor_release(o);
      return attn__limit_error(fn);
    }
    mat Ai = {A.data + aoff, A.rs, A.cs}, Bi = {B.data + boff, B.rs, B.cs};
    st = gemm_one(Ai, Bi, m, n, k, c + bi * m * n, reference, false);
    if (st) {
      attn_tensor_release(o);
      return st;
    }
    for (int d = nbatch - 1; d >= 0; d--) {
      if (++idx[d] < batch[d]) {
        aoff += astr[d];
        boff += bstr[d];
        break;
      }
      aoff -= astr[d] * (batch[d] - 1);
      boff -= bstr[d] * (batch[d] - 1);
      idx[d] = 0;
    }
  }
  *out = o;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                  */

/* c (contiguous: attn__grad_into's leaf .grad or running sum) += a [m, k]
   @ b [k, n], both 2-d; c's numel is m * n. */
static attn_status gemm_into(const attn_tensor *a, const attn_tensor *b, attn_tensor *c) {
  mat A = {attn_tensor_data(a), a->stride[0], a->stride[1]}, B = {attn_tensor_data(b), b->stride[0], b->stride[1]};
  return gemm_one(A, B, a->shape[0], b->shape[1], a->shape[1], attn_tensor_data(c), false, true);
}

/* x as a matrix stack: a 1-d x becomes [1, k] (left) or [k, 1] (right). */
static attn_status promote(const attn_tensor *x, bool left, attn_tensor **out) {
  if (x->ndim != 1) return attn__make_view(x, x->offset, x->ndim, x->shape, x->stride, out);
  int64_t shape[2], stride[2];
  if (left) {
    shape[0] = 1, shape[1] = x->shape[0];
    stride[0] = x->shape[0] * x->stride[0], stride[1] = x->stride[0];
  } else {
    shape[0] = x->shape[0], shape[1] = 1;
    stride[0] = x->stride[0], stride[1] = 1;
  }
  return attn__make_view(x, x->offset, 2, shape, stride, out);
}

/* Shapes: a [..., m, k], b [..., k, n], g [..., m, n] (1-d operands were
   promoted and their dim dropped from g).
   ga = g @ b^T summed over a's broadcast batch dims, gb = a^T @ g. */
attn_status attn__matmul_backward(attn_node *node, const attn_tensor *g_in, attn_tensor **grads) {
  const attn_tensor *a_in = node->saved[0], *b_in = node->saved[1];
  attn_tensor *a = NULL, *b = NULL, *g = NULL, *t = NULL, *r = NULL, *s = NULL;
  attn_status st;
  if ((st = promote(a_in, true, &a)) || (st = promote(b_in, false, &b))) goto out;
  /* g with the dropped dims put back */
  {
    int64_t shape[ATTN_MAX_DIMS];
    int nd = 0;
    int bnd = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
    for (int i = 0; i < bnd; i++) shape[nd++] = g_in->shape[i];
    shape[nd++] = a->shape[a->ndim - 2];
    shape[nd++] = b->shape[b->ndim - 1];
    if ((st = attn_reshape(g_in, nd, shape, &g))) goto out;
  }
  if (node->next[0].node) {
    if ((st = attn_transpose(b, b->ndim - 2, b->ndim - 1, &t)) || (st = attn_matmul(g, t, &r)) ||
        (st = attn__sum_to_shape(r, a->ndim, a->shape, &s)) ||
        (st = attn_reshape(s, a_in->ndim, a_in->shape, &grads[0])))
      goto out;
    attn_tensor_release(t), attn_tensor_release(r), attn_tensor_release(s);
    t = r = s = NULL;
  }
  if (node->next[1].node && b->ndim == 2 && a->ndim >= 2) {
    /* a [..., m, k] @ b [k, n] (a Linear, batched or not): gb = a^T @ g
       with the batch folded into the rows, one [k, B*m] @ [B*m, n] GEMM
       instead of B of them and a sum over B.  When b is the transpose of
       a contiguous [n, k] matrix (x @ W^T: b = W^T), gb is computed as
       (g^T @ a)^T, so that W's gradient comes out contiguous like W and
       its accumulation into W.grad runs at unit stride. */
    int64_t ash[2] = {attn_tensor_numel(a) / a->shape[a->ndim - 1], a->shape[a->ndim - 1]};
    int64_t gsh[2] = {ash[0], g->shape[g->ndim - 1]};
    const bool bt = b->stride[0] == 1 && b->stride[1] == b->shape[0] && b->shape[1] > 1;
    attn_tensor *a2 = NULL, *g2 = NULL, *gbt = NULL;
    if ((st = attn_reshape(a, 2, ash, &a2)) == ATTN_OK && (st = attn_reshape(g, 2, gsh, &g2)) == ATTN_OK) {
      if (bt) {
        if ((st = attn_transpose(g2, 0, 1, &t)) == ATTN_OK && (st = attn_matmul(t, a2, &gbt)) == ATTN_OK &&
            (st = attn_transpose(gbt, 0, 1, &r)) == ATTN_OK)
          st = attn_reshape(r, b_in->ndim, b_in->shape, &grads[1]);
      } else if ((st = attn_transpose(a2, 0, 1, &t)) == ATTN_OK) {
        attn_tensor *into = attn__grad_into(node, 1);
        if (into) { /* b's .grad [k, n] (or [k]) += a2^T @ g2 */
          st = gemm_into(t, g2, into);
          attn__grad_give(node, 1, attn_tensor_retain(into), !st, grads);
        } else if ((st = attn_matmul(t, g2, &r)) == ATTN_OK) {
          st = attn_reshape(r, b_in->ndim, b_in->shape, &grads[1]);
        }
      }
    }
    attn_tensor_release(a2), attn_tensor_release(g2), attn_tensor_release(gbt);
    goto out;
  }
  if (node->next[1].node) {
    if ((st = attn_transpose(a, a->ndim - 2, a->ndim - 1, &t)) || (st = attn_matmul(t, g, &r)) ||
        (st = attn__sum_to_shape(r, b->ndim, b->shape, &s)) ||
        (st = attn_reshape(s, b_in->ndim, b_in->shape, &grads[1])))
      goto out;
  }
out:
  attn_tensor_release(a), attn_tensor_release(b), attn_tensor_release(g);
  attn_tensor_release(t), attn_tensor_release(r), attn_tensor_release(s);
  return st;
}

static attn_status record_matmul(const char *name, const attn_tensor *a, const attn_tensor *b, attn_tensor *o) {
  const attn_tensor *in[2] = {a, b};
  if (!attn__ag_needed(2, in)) return ATTN_OK;
  return attn__ag_record(o, name, ATTN__F_MATMUL, 2, in, 2, in, NULL);
}

/* torch's grad_fn names, so printed results read like the notebooks. */
static const char *matmul_name(const attn_tensor *a, const attn_tensor *b) {
  if (a->ndim == 2 && b->ndim == 2) return "MmBackward0";
  if (a->ndim == 2 && b->ndim == 1) return "MvBackward0";
  if (a->ndim == 1 && b->ndim == 2) return "SqueezeBackward4";
  return "UnsafeViewBackward0";
}

static attn_status matmul_recorded(const char *fn, const char *name, const attn_tensor *a, const attn_tensor *b,
                                   attn_tensor **out) {
  attn_tensor *o;
  attn_status st = matmul_impl(fn, a, b, false, &o);
  if (st) return st;
  if ((st = record_matmul(name, a, b, o))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_matmul(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  if (a->ndim == 1 && b->ndim == 1) return attn_dot(a, b, out);
  return matmul_recorded("matmul", a->ndim && b->ndim ? matmul_name(a, b) : "", a, b, out);
}

attn_status attn__matmul_reference(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  return matmul_impl("matmul", a, b, true, out);
}

attn_status attn_mm(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (a->ndim != 2 || b->ndim != 2)
    return attn_set_error(ATTN_ERR_SHAPE, "mm: expects two matrices, got %s and %s", ATTN_SHAPE(a, sa),
                          ATTN_SHAPE(b, sb));
  return matmul_recorded("mm", "MmBackward0", a, b, out);
}

attn_status attn_bmm(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (a->ndim != 3 || b->ndim != 3 || a->shape[0] != b->shape[0])
    return attn_set_error(ATTN_ERR_SHAPE, "bmm: expects two 3-d tensors with the same batch size, got %s and %s",
                          ATTN_SHAPE(a, sa), ATTN_SHAPE(b, sb));
  return matmul_recorded("bmm", "BmmBackward0", a, b, out);
}

/* dot: a [n], b [n] -> []; ga = g * b, gb = g * a */
attn_status attn__dot_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_status st = ATTN_OK;
  if (node->next[0].node && (st = attn_binary(ATTN_MUL, g, node->saved[1], &grads[0]))) return st;
  if (node->next[1].node) st = attn_binary(ATTN_MUL, g, node->saved[0], &grads[1]);
  return st;
}

/* outer: a [m], b [n] -> [m, n]; ga = g @ b, gb = g^T @ a */
attn_status attn__outer_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  attn_status st = ATTN_OK;
  if (node->next[0].node && (st = attn_matmul(g, node->saved[1], &grads[0]))) return st;
  if (node->next[1].node) {
    attn_tensor *gt;
    if ((st = attn_t(g, &gt))) return st;
    st = attn_matmul(gt, node->saved[0], &grads[1]);
    attn_tensor_release(gt);
  }
  return st;
}

attn_status attn_dot(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  attn_status fst;
  if ((fst = attn_check_float("dot", NULL, a)) || (fst = attn_check_float("dot", NULL, b))) return fst;
  if (a->ndim != 1 || b->ndim != 1 || a->shape[0] != b->shape[0])
    return attn_set_error(ATTN_ERR_SHAPE, "dot: expects two 1-d tensors of the same size, got %s and %s",
                          ATTN_SHAPE(a, sa), ATTN_SHAPE(b, sb));
  attn_tensor *o;
  attn_status st = attn__alloc("dot", 0, NULL, &o);
  if (st) return st;
  const float *x = attn_tensor_data(a), *y = attn_tensor_data(b);
  int64_t n = a->shape[0], sx = a->stride[0], sy = b->stride[0];
  double acc = 0.0;
  for (int64_t i0 = 0; i0 < n; i0 += ATTN__POLL_WORK) {
    if (attn__cancelled()) {
      attn_tensor_release(o);
      return attn__limit_error("dot");
    }
    int64_t i1 = n - i0 < ATTN__POLL_WORK ? n : i0 + ATTN__POLL_WORK;
    for (int64_t i = i0; i < i1; i++) acc += (double)x[i * sx] * (double)y[i * sy];
  }
  attn_tensor_data(o)[0] = (float)acc;
  const attn_tensor *in[2] = {a, b};
  if (attn__ag_needed(2, in) && (st = attn__ag_record(o, "DotBackward0", ATTN__F_DOT, 2, in, 2, in, NULL))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

attn_status attn_outer(const attn_tensor *a, const attn_tensor *b, attn_tensor **out) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  if (a->dtype != ATTN_FLOAT32 || b->dtype != ATTN_FLOAT32) {
    if (a->ndim != 1 || b->ndim != 1)
      return attn_set_error(ATTN_ERR_SHAPE, "outer: expects two 1-d tensors, got %s and %s", ATTN_SHAPE(a, sa),
                            ATTN_SHAPE(b, sb));
    /* torch.outer is a broadcast multiply: integers stay int64, bools bool, a float operand promotes */
    if (attn_promote_types(a->dtype, b->dtype) != ATTN_FLOAT32) {
      int64_t col[2] = {a->shape[0], 1}, row[2] = {1, b->shape[0]};
      attn_tensor *ca = NULL, *rb = NULL;
      attn_status st = attn_reshape(a, 2, col, &ca);
      if (!st && !(st = attn_reshape(b, 2, row, &rb))) st = attn_binary(ATTN_MUL, ca, rb, out);
      attn_tensor_release(ca);
      attn_tensor_release(rb);
      return st;
    }
    attn_tensor *fa = NULL, *fb = NULL;
    attn_status st = attn_to_dtype(a, ATTN_FLOAT32, &fa);
    if (!st && !(st = attn_to_dtype(b, ATTN_FLOAT32, &fb))) st = attn_outer(fa, fb, out);
    attn_tensor_release(fa);
    attn_tensor_release(fb);
    return st;
  }
  if (a->ndim != 1 || b->ndim != 1)
    return attn_set_error(ATTN_ERR_SHAPE, "outer: expects two 1-d tensors, got %s and %s", ATTN_SHAPE(a, sa),
                          ATTN_SHAPE(b, sb));
  int64_t shape[2] = {a->shape[0], b->shape[0]};
  attn_tensor *o;
  attn_status st = attn__alloc("outer", 2, shape, &o);
  if (st) return st;
  float *c = attn_tensor_data(o);
  const float *x = attn_tensor_data(a), *y = attn_tensor_data(b);
  for (int64_t i = 0; i < shape[0]; i++)
    for (int64_t j = 0; j < shape[1]; j++) c[i * shape[1] + j] = x[i * a->stride[0]] * y[j * b->stride[0]];
  const attn_tensor *in[2] = {a, b};
  if (attn__ag_needed(2, in) && (st = attn__ag_record(o, "OuterBackward0", ATTN__F_OUTER, 2, in, 2, in, NULL))) {
    attn_tensor_release(o);
    return st;
  }
  *out = o;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* linear: y[..., out] = x[..., in] @ w[out, in]^T (+ b[out]) as one op with
   one graph node, so nn.Linear costs one output tensor instead of three
   (the transposed view, the product and the sum). Same arithmetic as
   matmul(x, w^T) followed by + b. */

/* Shapes: x [..., in] (saved[0]), w [out, in] (saved[1]), g [..., out].
   gx = g @ w, gw = g2^T @ x2 with g2 [M, out], x2 [M, in] (M = batch
   rows), gb = g summed to b's shape. */
attn_status attn__linear_backward(attn_node *node, const attn_tensor *g, attn_tensor **grads) {
  const attn_tensor *x = node->saved[0], *w = node->saved[1];
  attn_tensor *g2 = NULL, *x2 = NULL, *gt = NULL;
  attn_status st = ATTN_OK;
  const int64_t nout = w->shape[0], nin = w->shape[1];
  int64_t rows = 1; /* x's leading dims: exact even when nout or nin is 0 */
  for (int i = 0; i < x->ndim - 1; i++) rows *= x->shape[i];
  const int64_t gs[2] = {rows, nout}, xs[2] = {rows, nin};
  if ((node->next[0].node || node->next[1].node) && (st = attn_reshape(g, 2, gs, &g2))) goto out;
  if (node->next[0].node) {
    attn_tensor *into = attn__grad_into(node, 0);
    if (into) { /* x's .grad [rows, in] += g2 @ w */
      st = gemm_into(g2, w, into);
      attn__grad_give(node, 0, attn_tensor_retain(into), !st, grads);
    } else {
      st = attn_matmul(g, w, &grads[0]);
    }
    if (st) goto out;
  }
  if (node->next[1].node) {
    attn_tensor *into = attn__grad_into(node, 1);
    if ((st = attn_reshape(x, 2, xs, &x2)) || (st = attn_transpose(g2, 0, 1, &gt))) goto out;
    if (into) { /* w's .grad [out, in] += g2^T @ x2: sgemm's beta = 1 where it runs */
      st = gemm_into(gt, x2, into);
      attn__grad_give(node, 1, attn_tensor_retain(into), !st, grads);
    } else {
      st = attn_matmul(gt, x2, &grads[1]);
    }
    if (st) goto out;
  }
  if (node->n_next > 2 && node->next[2].node)
    st = attn__sum_to_shape(g, node->next[2].ndim, node->next[2].shape, &grads[2]);
out:
  attn_tensor_release(g2), attn_tensor_release(x2), attn_tensor_release(gt);
  return st;
}

attn_status attn_linear(const attn_tensor *x, const attn_tensor *w, const attn_tensor *b, attn_tensor **out) {
  char sx[ATTN_SHAPE_BUF], sw[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  attn_status fst;
  if ((fst = attn_check_float("linear", "input", x)) || (fst = attn_check_float("linear", "weight", w)) ||
      (b && (fst = attn_check_float("linear", "bias", b))))
    return fst;
  if (w->ndim != 2)
    return attn_set_error(ATTN_ERR_SHAPE, "linear: weight must be 2-d [out, in], got %s", ATTN_SHAPE(w, sw));
  if (x->ndim == 0 || x->shape[x->ndim - 1] != w->shape[1])
    return attn_set_error(ATTN_ERR_SHAPE, "linear: input %s does not end in weight's in_features %lld (weight %s)",
                          ATTN_SHAPE(x, sx), (long long)w->shape[1], ATTN_SHAPE(w, sw));
  if (b && !(b->ndim == 1 && b->shape[0] == w->shape[0]))
    return attn_set_error(ATTN_ERR_SHAPE, "linear: bias %s does not match weight %s (expected [%lld])",
                          ATTN_SHAPE(b, sb), ATTN_SHAPE(w, sw), (long long)w->shape[0]);
  attn_tensor wt = *w; /* w^T as a stack view: matmul_impl only reads shape, strides and data */
  wt.shape[0] = w->shape[1], wt.shape[1] = w->shape[0];
  wt.stride[0] = w->stride[1], wt.stride[1] = w->stride[0];
  attn_tensor *o;
  attn_status st = matmul_impl("linear", x, &wt, false, &o);
  if (st) return st;
  if (b) {
    /* o is fresh and contiguous: [rows, out] */
    int64_t nout = w->shape[0], rows = nout ? attn_tensor_numel(o) / nout : 0;
    const float *bd = attn_tensor_data(b);
    int64_t bs = b->stride[0];
    float *od = attn_tensor_data(o);
    for (int64_t r = 0; r < rows; r++, od += nout)
      for (int64_t j = 0; j < nout; j++) od[j] += bd[j * bs];
  }
  const attn_tensor *in[3] = {x, w, b};
  int n = b ? 3 : 2;
  if (attn__ag_needed(n, in)) {
    /* torch 1.13's names: addmm for 2-d input with bias, mm without;
       higher ranks go through a view of the 2-d product. */
    const char *name = x->ndim == 2   ? (b ? "AddmmBackward0" : "MmBackward0")
                       : x->ndim == 1 ? (b ? "AddBackward0" : "SqueezeBackward4")
                                      : (b ? "ViewBackward0" : "UnsafeViewBackward0");
    if ((st = attn__ag_record(o, name, ATTN__F_LINEAR, n, in, 2, in, NULL))) {
      attn_tensor_release(o);
      return st;
    }
  }
  *out = o;
  return ATTN_OK;
}
