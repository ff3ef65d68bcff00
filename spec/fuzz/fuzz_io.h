/* SPDX-License-Identifier: MIT */
/* Shared by the weight-file targets (fuzz_safetensors.c, fuzz_npy.c,
 * fuzz_npz.c): in-memory files, the invariants every successful load must
 * satisfy, and a save/reload round trip through a scratch directory. */
#ifndef ATTN_FUZZ_IO_H
#define ATTN_FUZZ_IO_H

#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "io/io_internal.h"

/* The input as a read-only stream (fmemopen needs a buffer of size > 0). */
static inline FILE *fz_memfile(const uint8_t *data, size_t size) {
  static char empty[1];
  return fmemopen(size ? (void *)data : empty, size ? size : 1, "rb");
}

/* A failure from a parser called with fn "fuzz" must carry its message. */
static inline void fz_check_io_error(attn_status st) {
  FZ_CHECK(st != ATTN_OK, "not a failure");
  FZ_CHECK(strncmp(attn_last_error(), "fuzz: ", 6) == 0, "message does not name the function: '%s'", attn_last_error());
}

static inline int fz_dtype_size(const char *dtype) {
  static const struct {
    const char *name;
    int size;
  } sizes[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8}, {"I32", 4}, {"I16", 2},
               {"I8", 1},  {"U64", 8}, {"U32", 4},  {"U16", 2}, {"U8", 1},  {"BOOL", 1}};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    if (strcmp(sizes[i].name, dtype) == 0) return sizes[i].size;
  /* numpy descr: "<f4", "|b1", ... */
  if (strlen(dtype) == 3 && dtype[2] >= '1' && dtype[2] <= '8') return dtype[2] - '0';
  return -1;
}

/* Every element of t, read through its strides (ASan sees a bad view). */
static inline double fz_touch(const attn_tensor *t) {
  int64_t n = attn_tensor_numel(t);
  double acc = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = attn_tensor_get_flat(t, i);
    if (v == v) acc += v;
  }
  return acc;
}

/* What a loader promises about a tensor and its info. */
static inline void fz_check_loaded(const attn_tensor *t, const attn_weight_info *info) {
  FZ_CHECK(info->ndim >= 0 && info->ndim <= ATTN_MAX_DIMS, "ndim %d", info->ndim);
  FZ_CHECK(memchr(info->dtype, '\0', sizeof info->dtype) != NULL, "dtype not terminated");
  int size = fz_dtype_size(info->dtype);
  FZ_CHECK(size > 0, "unknown dtype '%s'", info->dtype);
  int64_t numel = 1;
  for (int d = 0; d < info->ndim; d++) {
    FZ_CHECK(info->shape[d] >= 0, "negative size");
    numel *= info->shape[d];
  }
  FZ_CHECK((uint64_t)numel * (uint64_t)size == info->nbytes, "nbytes %llu for %lld x %d",
           (unsigned long long)info->nbytes, (long long)numel, size);
  if (!t) return;
  FZ_CHECK(t->ndim == info->ndim, "tensor has %d dims, info %d", t->ndim, info->ndim);
  for (int d = 0; d < t->ndim; d++) FZ_CHECK(t->shape[d] == info->shape[d], "shape differs at %d", d);
  FZ_CHECK(t->offset >= 0 && t->storage->numel >= numel, "storage of %lld for %lld elements",
           (long long)t->storage->numel, (long long)numel);
  (void)fz_touch(t);
}

/* Same shape and the same float bits everywhere (NaN payloads included). */
static inline void fz_check_same_tensor(const attn_tensor *a, const attn_tensor *b, const char *what) {
  FZ_CHECK(attn_same_shape(a, b), "%s: shapes differ after the round trip", what);
  FZ_CHECK(a->dtype == b->dtype, "%s: dtype %s became %s", what, attn_dtype_name(a->dtype), attn_dtype_name(b->dtype));
  int64_t n = attn_tensor_numel(a);
  if (a->dtype != ATTN_FLOAT32) {
    for (int64_t i = 0; i < n; i++)
      FZ_CHECK(attn_tensor_get_flat_i64(a, i) == attn_tensor_get_flat_i64(b, i), "%s: element %lld: %lld became %lld",
               what, (long long)i, (long long)attn_tensor_get_flat_i64(a, i),
               (long long)attn_tensor_get_flat_i64(b, i));
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    float x = attn_tensor_get_flat(a, i), y = attn_tensor_get_flat(b, i);
    FZ_CHECK(memcmp(&x, &y, sizeof x) == 0, "%s: element %lld: %a became %a", what, (long long)i, x, y);
  }
}

static inline bool fz_same_info(const attn_weight_info *a, const attn_weight_info *b) {
  if (strcmp(a->dtype, b->dtype) || a->ndim != b->ndim || a->offset != b->offset || a->nbytes != b->nbytes)
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

static inline void fz_check_named(const attn_named_tensors *nt, bool with_tensors) {
  FZ_CHECK(nt != NULL && nt->n >= 0, "no list");
  for (int i = 0; i < nt->n; i++) {
    FZ_CHECK(nt->names[i] && nt->names[i][0], "tensor %d has no name", i);
    for (int j = 0; j < i; j++) FZ_CHECK(strcmp(nt->names[i], nt->names[j]) != 0, "duplicate '%s'", nt->names[i]);
    FZ_CHECK(with_tensors == (nt->tensors[i] != NULL), "tensor %d present: %d", i, nt->tensors[i] != NULL);
    if (nt->info) fz_check_loaded(nt->tensors[i], &nt->info[i]);
    FZ_CHECK(attn_named_tensors_get(nt, nt->names[i]) == nt->tensors[i], "lookup of '%s'", nt->names[i]);
  }
  for (int i = 0; i < nt->nmeta; i++) {
    FZ_CHECK(nt->meta_keys[i] && nt->meta_values[i], "metadata %d", i);
    FZ_CHECK(attn_named_tensors_meta(nt, nt->meta_keys[i]) == nt->meta_values[i], "duplicate metadata key");
  }
}

/* ------------------------------------------------------------------------ */
/* Scratch directory for round trips (removed at exit)                      */

static char fz_dir[256];

static inline void fz_rmdir(void) {
  if (!fz_dir[0]) return;
  DIR *d = opendir(fz_dir);
  if (d) {
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", fz_dir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(fz_dir);
}

/* path of a scratch file, creating the directory on first use (tmpfs if
   there is one: the writers fsync). */
static inline const char *fz_scratch(const char *name) {
  static char path[512];
  if (!fz_dir[0]) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(fz_dir, sizeof fz_dir, "%s/attn-fuzz-XXXXXX", base);
    if (!mkdtemp(fz_dir)) {
      perror("fuzz: mkdtemp");
      abort();
    }
    atexit(fz_rmdir);
  }
  snprintf(path, sizeof path, "%s/%s", fz_dir, name);
  return path;
}

#endif
