/* SPDX-License-Identifier: MIT */
/* Shared by the fuzz targets (spec/fuzz/fuzz_*.c): a byte reader that
 * turns the fuzzer's input into choices, interesting edge values, the
 * process set-up and the checks that turn a wrong answer into a crash.
 *
 * Every target is a libFuzzer entry point (LLVMFuzzerTestOneInput).  Built
 * by spec/fuzz/CMakeLists.txt with clang -fsanitize=fuzzer,address,undefined
 * they fuzz; built with replay_main.c (any compiler) they replay files, which
 * is how the normal test suite runs the committed corpora.
 *
 * A target crashes (abort) only for a real defect: a sanitizer report, a
 * result that contradicts the target's reference model (FZ_CHECK), a leaked
 * tensor or storage (the live object counters must return to where they
 * were), or a failure without a message.  Errors reported through
 * attn_status / Lua errors are the expected outcome of most inputs.
 */
#ifndef ATTN_FUZZ_COMMON_H
#define ATTN_FUZZ_COMMON_H

/* setenv, fmemopen, mkdtemp under -std=c11: include this header first */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

/* ------------------------------------------------------------------------ */
/* Reading choices from the input                                           */

typedef struct fz_bytes {
  const uint8_t *p;
  size_t n;
} fz_bytes;

/* Past the end every read gives 0, so a short input is a valid program. */
static inline uint8_t fz_u8(fz_bytes *b) {
  if (b->n == 0) return 0;
  b->n--;
  return *b->p++;
}

static inline uint16_t fz_u16(fz_bytes *b) {
  uint16_t lo = fz_u8(b);
  return (uint16_t)(lo | (uint16_t)fz_u8(b) << 8);
}

static inline uint32_t fz_u32(fz_bytes *b) {
  uint32_t lo = fz_u16(b);
  return lo | (uint32_t)fz_u16(b) << 16;
}

static inline uint64_t fz_u64(fz_bytes *b) {
  uint64_t lo = fz_u32(b);
  return lo | (uint64_t)fz_u32(b) << 32;
}

/* An integer in [0, n) (n >= 1). */
static inline int fz_below(fz_bytes *b, int n) { return (int)(fz_u8(b) % (unsigned)n); }

static inline int fz_bool(fz_bytes *b) { return fz_u8(b) & 1; }

/* Edge values for integer arguments: sizes, dims, offsets, strides. */
static inline int64_t fz_edge_i64(fz_bytes *b) {
  static const int64_t edges[] = {0,
                                  1,
                                  2,
                                  3,
                                  -1,
                                  -2,
                                  4,
                                  5,
                                  7,
                                  8,
                                  9,
                                  16,
                                  255,
                                  256,
                                  65535,
                                  65536,
                                  INT32_MAX,
                                  (int64_t)INT32_MAX + 1,
                                  INT32_MIN,
                                  (int64_t)1 << 56,
                                  ((int64_t)1 << 56) + 1,
                                  ((int64_t)1 << 62),
                                  INT64_MAX,
                                  INT64_MIN,
                                  INT64_MAX - 1,
                                  INT64_MIN + 1,
                                  ((int64_t)1 << 32) + 1,
                                  -3};
  uint8_t c = fz_u8(b);
  if (c < 0xe0) return (int64_t)(c % 8) - (c >= 0xc0 ? 8 : 0); /* mostly small */
  if (c < 0xfc) return edges[(c - 0xe0) % (sizeof edges / sizeof *edges)];
  return (int64_t)fz_u64(b);
}

/* Edge values for float arguments. */
static inline double fz_edge_f64(fz_bytes *b) {
  static const double edges[] = {
      0.0,          -0.0,         1.0,           -1.0,   0.5,       2.0,        1e-45,     1e-30,
      3.4e38,       3.5e38,       1e300,         -1e300, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, 9007199254740993.0,
      4294967296.0, 2147483648.0, -2147483649.0, 1e20,   0.1,       0.999999,   1e-8};
  uint8_t c = fz_u8(b);
  if (c < 0x80) return (double)((int)(c % 16) - 4) * (c >= 0x40 ? 0.25 : 1.0);
  if (c < 0xf8) return edges[(c - 0x80) % (sizeof edges / sizeof *edges)];
  uint64_t u = fz_u64(b);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */

#define FZ_CHECK(cond, ...)                                                                                            \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "\n%s:%d: fuzz check failed: %s\n  ", __FILE__, __LINE__, #cond);                                \
      fprintf(stderr, __VA_ARGS__);                                                                                    \
      fprintf(stderr, "\n  last error: %s\n", attn_last_error());                                                      \
      abort();                                                                                                         \
    }                                                                                                                  \
  } while (0)

/* A failed call must say why, naming something. */
#define FZ_CHECK_FAILED_WELL(st, out)                                                                                  \
  do {                                                                                                                 \
    FZ_CHECK((out) == NULL, "status %d but the output was set", (int)(st));                                            \
    FZ_CHECK(attn_last_error()[0] != '\0', "status %d without a message", (int)(st));                                  \
  } while (0)

/* Live objects before an input; fz_check_counts compares after it. */
static inline void fz_counts(attn_debug_counts *c) { attn_debug_counts_get(c); }

static inline void fz_check_counts(const attn_debug_counts *before) {
  attn_debug_counts now;
  attn_debug_counts_get(&now);
  FZ_CHECK(now.tensors == before->tensors && now.storages == before->storages &&
               now.storage_bytes == before->storage_bytes && now.nodes == before->nodes,
           "leak: tensors %lld -> %lld, storages %lld -> %lld, bytes %lld -> %lld, nodes %lld -> %lld",
           (long long)before->tensors, (long long)now.tensors, (long long)before->storages, (long long)now.storages,
           (long long)before->storage_bytes, (long long)now.storage_bytes, (long long)before->nodes,
           (long long)now.nodes);
}

/* ------------------------------------------------------------------------ */
/* Process set-up                                                            */

/* One thread for OpenBLAS and attn's pool: the fuzzer wants determinism and
   the sanitizers see less of OpenBLAS's (uninstrumented) threads.  Must run
   before OpenBLAS is loaded, i.e. before the first matmul. */
static inline void fz_setup(void) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("OMP_NUM_THREADS", "1", 1);
  if (attn_set_num_threads(1) != ATTN_OK) fprintf(stderr, "fuzz: %s (matmul will fail)\n", attn_last_error());
}

#endif
