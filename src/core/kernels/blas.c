/* SPDX-License-Identifier: MIT */
/* OpenBLAS, loaded at run time.
 *
 * Why dlopen: OpenBLAS picks its kernels in a library constructor, reading
 * OPENBLAS_CORETYPE once.  Debian 12's 0.3.21 does not know recent Intel
 * models (Emerald Rapids, ...) and falls back to SSE3 "Prescott" kernels at
 * ~18% of peak.  If libattn linked OpenBLAS, its constructor would run
 * before any attn code, under `require "attn"` as in the attn binary.  By
 * loading it ourselves we can set the core type from cpuid first.  A
 * process that already has OpenBLAS loaded (a C host linking it) gets that
 * copy back from dlopen, and attn reports whatever core it runs.
 *
 * Threads: OpenBLAS runs on one thread, always, and a large product is
 * cut into parts that attn's own pool (parallel.c) runs, each part one
 * sgemm call.  Two pools on the same cores fight: OpenBLAS's idle threads
 * spin after every product while attn's elementwise jobs want the same
 * cores, which made whole training steps no faster on 2 threads than on 1.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ATTN_X86 1
#endif

#ifndef ATTN_OPENBLAS_PATH
#define ATTN_OPENBLAS_PATH "libopenblas.so.0"
#endif

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

/* Multiply-adds per OpenBLAS call when a deadline is set (attn_sgemm):
   about 0.1 s on one core.  Only larger products are split, because
   OpenBLAS rounds a row block's last bits differently from the same rows
   inside one big call. */
#define GEMM_BLOCK_MACS ((int64_t)1 << 32)
/* Products of at least this many multiply-adds are cut into one part per
   pool thread (about 5 us of arithmetic on one core, against about 1 us
   for a job); on one thread they stay one call, as fast as before.  Row
   parts start at multiples of GEMM_ROW_ALIGN rows, a multiple of every
   x86 sgemm kernel's row tile: on 0.3.21's Zen kernels parts at multiples
   of 48 rows give the bits one call gives (16, 32, 64 or 128 do not), so
   the thread count changes no result there.  Short, deep products (weight
   gradients: few rows of C, a long sum over the batch) are cut along k
   instead, into partial products in scratch added in order: like
   OpenBLAS's own threads, that rounds differently from one call. */
#define GEMM_PAR_MACS ((int64_t)1 << 18)
#define GEMM_ROW_ALIGN 96
/* k parts: at least GEMM_K_MIN terms each */
#define GEMM_K_MIN 256
#define GEMM_K_MAX_MN ((int64_t)1 << 20) /* floats of C: the scratch stays under 16 MB */

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc);

static struct {
  pthread_once_t once;
  attn_status status;
  char error[256];
  void *handle;
  const char *library;
  const char *coretype_source;
  sgemm_fn sgemm;
  char *(*get_corename)(void);
  char *(*get_config)(void);
  void (*set_num_threads)(int);
  int (*get_num_threads)(void);
} blas = {.once = PTHREAD_ONCE_INIT};

/* The OPENBLAS_CORETYPE that suits this CPU, or NULL to let OpenBLAS
   decide.  Only Intel CPUs are steered: that is where 0.3.21 misdetects
   unknown family-6 models; AMD models are matched by family. */
static const char *pick_coretype(void) {
#ifdef ATTN_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return NULL;
  unsigned max_leaf = a;
  char vendor[13];
  memcpy(vendor, &b, 4);
  memcpy(vendor + 4, &d, 4);
  memcpy(vendor + 8, &c, 4);
  vendor[12] = 0;
  if (strcmp(vendor, "GenuineIntel") != 0 || max_leaf < 7) return NULL;
  __cpuid(1, a, b, c, d);
  bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12);
  if (!osxsave || !avx) return NULL;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  bool ymm = (xcr0_lo & 0x6) == 0x6, zmm = (xcr0_lo & 0xe6) == 0xe6;
  __cpuid_count(7, 0, a, b, c, d);
  bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30),
       avx512vl = b & (1u << 31), avx512cd = b & (1u << 28);
  if (zmm && avx512f && avx512dq && avx512bw && avx512vl && avx512cd) return "SkylakeX";
  if (ymm && avx2 && fma) return "Haswell";
#endif
  return NULL;
}

/* OpenBLAS on one thread: it starts a thread for every count it is given,
   and those spin on the cores attn's pool needs. */
static void blas_one_thread(void) {
  if (blas.set_num_threads && blas.get_num_threads && blas.get_num_threads() != 1) blas.set_num_threads(1);
}

static void blas_load(void) {
  const char *user = getenv("OPENBLAS_CORETYPE");
  const char *mode = getenv("ATTN_BLAS_CORETYPE");
  bool set_by_us = false;
  blas.coretype_source = "openblas";
  if (user && *user) {
    blas.coretype_source = "user";
  } else if (!(mode && strcmp(mode, "off") == 0)) {
    const char *core = (mode && *mode && strcmp(mode, "auto") != 0) ? mode : pick_coretype();
    /* If OpenBLAS is already in the process, setting the variable is
       pointless: it initialised long ago. */
    void *already = dlopen(ATTN_OPENBLAS_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (!already) already = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (already) {
      dlclose(already);
    } else if (core) {
      setenv("OPENBLAS_CORETYPE", core, 1);
      set_by_us = true;
      blas.coretype_source = "attn";
    }
  }
  /* OpenBLAS starts its worker threads in the same constructor, and they
     spin for a while before they sleep: with OPENBLAS_NUM_THREADS=1 it
     starts none.  attn's pool takes its count first, from the user's
     OPENBLAS_NUM_THREADS (or OMP_NUM_THREADS, or the CPUs). */
  attn__parallel_threads();
  const char *user_n = getenv("OPENBLAS_NUM_THREADS");
  char *user_threads = user_n ? strdup(user_n) : NULL;
  bool threads_set = !user_n || user_threads; /* else the user's value could not be kept: leave it */
  if (threads_set) setenv("OPENBLAS_NUM_THREADS", "1", 1);
  const char *candidates[] = {getenv("ATTN_OPENBLAS"), ATTN_OPENBLAS_PATH, "libopenblas.so.0", "libopenblas.so",
                              "libopenblasp.so.0"};
  for (size_t i = 0; i < sizeof candidates / sizeof *candidates && !blas.handle; i++) {
    if (!candidates[i] || !*candidates[i]) continue;
    blas.handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (blas.handle) blas.library = candidates[i];
  }
  /* The variable was only for OpenBLAS's constructor; leave the user's
     environment (and child processes) as it was. */
  if (set_by_us) unsetenv("OPENBLAS_CORETYPE");
  if (user_threads)
    setenv("OPENBLAS_NUM_THREADS", user_threads, 1);
  else if (threads_set)
    unsetenv("OPENBLAS_NUM_THREADS");
  free(user_threads);
  if (!blas.handle) {
    snprintf(blas.error, sizeof blas.error, "blas: cannot load OpenBLAS (%s): %s", ATTN_OPENBLAS_PATH, dlerror());
    blas.status = ATTN_ERR_IO;
    return;
  }
  *(void **)&blas.sgemm = dlsym(blas.handle, "cblas_sgemm");
  *(void **)&blas.get_corename = dlsym(blas.handle, "openblas_get_corename");
  *(void **)&blas.get_config = dlsym(blas.handle, "openblas_get_config");
  *(void **)&blas.set_num_threads = dlsym(blas.handle, "openblas_set_num_threads");
  *(void **)&blas.get_num_threads = dlsym(blas.handle, "openblas_get_num_threads");
  if (!blas.sgemm) {
    snprintf(blas.error, sizeof blas.error, "blas: %s has no cblas_sgemm", blas.library);
    blas.status = ATTN_ERR_IO;
  }
  /* attn's pool takes the count OpenBLAS chose (OPENBLAS_NUM_THREADS, ...);
     OpenBLAS itself then runs on the calling thread only */
  blas_one_thread(); /* an OpenBLAS that was in the process already may run more */
}

attn_status attn_blas_init(void) {
  pthread_once(&blas.once, blas_load);
  if (blas.status) return attn_set_error(blas.status, "%s", blas.error);
  return ATTN_OK;
}

attn_status attn_blas_get_info(attn_blas_info *info) {
  attn_status st = attn_blas_init();
  if (st) return st;
  info->library = blas.library;
  info->core = blas.get_corename ? blas.get_corename() : "unknown";
  info->config = blas.get_config ? blas.get_config() : "unknown";
  info->coretype_source = blas.coretype_source;
  info->num_threads = attn__parallel_threads(); /* OpenBLAS itself runs on one */
  return ATTN_OK;
}

attn_status attn_set_num_threads(int n) {
  if (n < 1 || n > ATTN_MAX_THREADS)
    return attn_set_error(ATTN_ERR_ARG, "set_num_threads: n must be in [1, %d] (got %d)", ATTN_MAX_THREADS, n);
  attn_status st = attn_blas_init();
  if (st) return st;
  blas_one_thread(); /* a host may have raised it */
  attn__parallel_resize(n);
  return ATTN_OK;
}

int attn_get_num_threads(void) { return attn__parallel_threads(); }

/* One sgemm call per part: a run of C's rows, or a slice of k whose
   partial product goes to its own scratch block. */
typedef struct {
  int ta, tb;
  int64_t m, n, k, lda, ldb, ldc, step;
  float alpha, beta;
  const float *a, *b;
  float *c;
  float *partials; /* k parts: [parts, m, n] */
} sgemm_job;

static void sgemm_rows(int64_t begin, int64_t end, void *arg) {
  const sgemm_job *J = arg;
  for (int64_t part = begin; part < end; part++) {
    const int64_t i = part * J->step, mi = J->m - i < J->step ? J->m - i : J->step;
    const float *ai = J->ta == TRANS ? J->a + i : J->a + i * J->lda;
    blas.sgemm(ROW_MAJOR, J->ta, J->tb, (int)mi, (int)J->n, (int)J->k, J->alpha, ai, (int)J->lda, J->b, (int)J->ldb,
               J->beta, J->c + i * J->ldc, (int)J->ldc);
  }
}

static void sgemm_kparts(int64_t begin, int64_t end, void *arg) {
  const sgemm_job *J = arg;
  for (int64_t part = begin; part < end; part++) {
    const int64_t p = part * J->step, kp = J->k - p < J->step ? J->k - p : J->step;
    const float *ap = J->ta == TRANS ? J->a + p * J->lda : J->a + p;
    const float *bp = J->tb == TRANS ? J->b + p : J->b + p * J->ldb;
    blas.sgemm(ROW_MAJOR, J->ta, J->tb, (int)J->m, (int)J->n, (int)kp, 1.0f, ap, (int)J->lda, bp, (int)J->ldb, 0.0f,
               J->partials + part * J->m * J->n, (int)J->n);
  }
}

/* c = alpha * (sum of the partials, in order) + beta * c, rows [begin, end) */
static void sgemm_ksum(int64_t begin, int64_t end, void *arg) {
  const sgemm_job *J = arg;
  const int64_t parts = (J->k + J->step - 1) / J->step, mn = J->m * J->n;
  for (int64_t i = begin; i < end; i++) {
    float *ci = J->c + i * J->ldc;
    const float *p0 = J->partials + i * J->n;
    for (int64_t j = 0; j < J->n; j++) {
      float sum = p0[j];
      for (int64_t q = 1; q < parts; q++) sum += p0[q * mn + j];
      ci[j] = J->beta == 0.0f ? J->alpha * sum : J->alpha * sum + J->beta * ci[j];
    }
  }
}

/* c [m, n] = alpha op(a) op(b) + beta c in parts on the pool (see
   GEMM_PAR_MACS); false when it is better made as one call (or the k
   parts' scratch could not be had). */
static bool sgemm_par(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  const int nt = attn__parallel_threads();
  const int64_t macs = m * n * (k > 0 ? k : 1);
  sgemm_job J = {.ta = ta,
                 .tb = tb,
                 .m = m,
                 .n = n,
                 .k = k,
                 .lda = lda,
                 .ldb = ldb,
                 .ldc = ldc,
                 .alpha = alpha,
                 .beta = beta,
                 .a = a,
                 .b = b,
                 .c = c};
  if (nt <= 1 || macs < GEMM_PAR_MACS) return false;
  if (m >= 2 * GEMM_ROW_ALIGN) {
    const int64_t blocks = (m + GEMM_ROW_ALIGN - 1) / GEMM_ROW_ALIGN;
    J.step = (blocks + nt - 1) / nt * GEMM_ROW_ALIGN;
    attn__parallel_for((m + J.step - 1) / J.step, sgemm_rows, &J);
    return true;
  }
  if (k < 2 * GEMM_K_MIN || m * n > GEMM_K_MAX_MN) return false;
  int64_t parts = k / GEMM_K_MIN < nt ? k / GEMM_K_MIN : nt;
  J.step = (k + parts - 1) / parts;
  parts = (k + J.step - 1) / J.step;
  const int64_t bytes = parts * m * n * (int64_t)sizeof(float);
  attn_budget *bud = attn_budget_current();
  if (bud && !attn_budget_charge(bud, bytes)) return false;
  if (!(J.partials = malloc((size_t)bytes))) {
    if (bud) attn_budget_credit(bud, bytes);
    return false;
  }
  attn__parallel_for(parts, sgemm_kparts, &J);
  if (!attn__cancelled()) attn__parallel_for(m, sgemm_ksum, &J); /* else parts were skipped: attn_sgemm fails */
  free(J.partials);
  if (bud) attn_budget_credit(bud, bytes);
  return true;
}

static void sgemm_any(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (!sgemm_par(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    blas.sgemm(ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

attn_status attn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                       int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  attn_status st = attn_blas_init();
  if (st) return st;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX)
    return attn_set_error(ATTN_ERR_ARG, "sgemm: sizes exceed the 32-bit BLAS interface (%lld x %lld x %lld)",
                          (long long)m, (long long)n, (long long)k);
  /* what BLAS's xerbla would only print: row-major op(A) is [m, k], stored
     [m, k] (lda >= k) or transposed [k, m] (lda >= m); likewise B and C */
  if (m < 0 || n < 0 || k < 0)
    return attn_set_error(ATTN_ERR_ARG, "sgemm: negative size (%lld x %lld x %lld)", (long long)m, (long long)n,
                          (long long)k);
  int64_t acols = trans_a ? m : k, bcols = trans_b ? k : n;
  if (lda < (acols > 1 ? acols : 1) || ldb < (bcols > 1 ? bcols : 1) || ldc < (n > 1 ? n : 1))
    return attn_set_error(ATTN_ERR_ARG,
                          "sgemm: leading dimensions lda %lld, ldb %lld, ldc %lld too small for "
                          "%lld x %lld x %lld%s%s",
                          (long long)lda, (long long)ldb, (long long)ldc, (long long)m, (long long)n, (long long)k,
                          trans_a ? " (A transposed)" : "", trans_b ? " (B transposed)" : "");
  if (m == 0 || n == 0) return ATTN_OK;
  int ta = trans_a ? TRANS : NO_TRANS, tb = trans_b ? TRANS : NO_TRANS;
  int64_t kk = k > 0 ? k : 1;
  if (attn_deadline_current() == 0 || (double)m * (double)n * (double)kk <= (double)GEMM_BLOCK_MACS) {
    if (attn__cancelled()) return attn__limit_error("sgemm");
    sgemm_any(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return attn__cancelled() ? attn__limit_error("sgemm") : ATTN_OK;
  }
  /* Under a deadline (attn_deadline_set_current) a large product goes in
     blocks of about GEMM_BLOCK_MACS multiply-adds, polled in between:
     OpenBLAS cannot be stopped inside a call.  Rows of C (and of op(A))
     first; when a single row is that big, columns too.  Each element of C
     is computed by exactly one call, as it would be by one big call. */
  int64_t rb = GEMM_BLOCK_MACS / (n * kk);
  if (rb < 1) rb = 1;
  if (rb > m) rb = m;
  int64_t cb = rb > 1 ? n : GEMM_BLOCK_MACS / kk;
  if (cb < 1) cb = 1;
  if (cb > n) cb = n;
  for (int64_t i = 0; i < m; i += rb) {
    int64_t mi = m - i < rb ? m - i : rb;
    const float *ai = trans_a ? a + i : a + i * lda;
    for (int64_t j = 0; j < n; j += cb) {
      if (attn__cancelled()) return attn__limit_error("sgemm");
      int64_t nj = n - j < cb ? n - j : cb;
      const float *bj = trans_b ? b + j * ldb : b + j;
      sgemm_any(ta, tb, mi, nj, k, alpha, ai, lda, bj, ldb, beta, c + i * ldc + j, ldc);
    }
  }
  return ATTN_OK;
}
