/* SPDX-License-Identifier: MIT */
/* The floor under everything in the core: the per-thread error message,
 * allocation helpers and shape arithmetic.  It calls nothing else in the
 * core, so budgets, deadlines, the thread pool and the kernels can use it
 * without reaching up into tensor.c. */
#define _DEFAULT_SOURCE /* madvise */
#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

static _Thread_local char attn__errbuf[512];

const char *attn_last_error(void) { return attn__errbuf; }

attn_status attn_set_error(attn_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(attn__errbuf, sizeof attn__errbuf, fmt, ap);
  va_end(ap);
  return st;
}

const char *attn_shape_str(int ndim, const int64_t *shape, char *buf, size_t size) {
  size_t n = 0;
  if (size == 0) return buf;
  buf[0] = '\0';
  n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "[");
  for (int i = 0; i < ndim && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, i ? ",%lld" : "%lld", (long long)shape[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

/* ------------------------------------------------------------------------ */
/* Memory and shapes                                                         */

void *attn__malloc(size_t n) { return malloc(n ? n : 1); }

/* Blocks this big are fresh mappings on every malloc (glibc maps anything
   over 32 MB, its largest mmap threshold) and were faulted in 4 KB at a
   time: for SDPA's 32 MB of kept scores at B = 4, L = 512 the faults and
   the page clearing took about 12% of forward + backward.  Transparent
   huge pages (where the system leaves them to madvise, as Debian does)
   fault 2 MB at a time. */
#define HUGE_ADVISE_BYTES ((size_t)32 << 20)

void attn__advise_huge(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (n < HUGE_ADVISE_BYTES) return;
  const uintptr_t huge = (uintptr_t)2 << 20;
  uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + n) & ~(huge - 1);
  if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* only advice: failure changes nothing */
#else
  (void)p, (void)n;
#endif
}

/* malloc + memset rather than calloc: glibc's calloc skips the per-thread
   cache, which made small headers (tensors, nodes) several times dearer. */
void *attn__calloc(size_t n, size_t size) {
  if (!n) n = 1;
  if (!size) size = 1;
  if (n > SIZE_MAX / size) return NULL;
  void *p = malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

int64_t attn__shape_numel(int ndim, const int64_t *shape) {
  /* The product of the non-zero sizes must fit too (torch checks the same):
     [2^62, 3, 0] is refused, so that no partial product of an accepted
     shape overflows, in whatever order a kernel multiplies (numel,
     contiguous strides, offsets). */
  int64_t n = 1;
  bool empty = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] == 0) {
      empty = true;
      continue;
    }
    if (shape[i] > ATTN_MAX_NUMEL / n) return -1;
    n *= shape[i];
  }
  return empty ? 0 : n;
}

void attn__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    stride[i] = s;
    s *= shape[i] > 1 ? shape[i] : 1;
  }
}
