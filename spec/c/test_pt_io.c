/* SPDX-License-Identifier: MIT */
/* torch .pt container (src/core/io/io_torch.c): the fixtures of
 * spec/fixtures/pt open and give their storages; the writer's file opens
 * again with 64-byte aligned records; and a fuzz loop feeds random
 * mutations and truncations of every fixture to attn_pt_open /
 * attn_pt_read_record / attn_pt_storage: none may crash, read out of
 * bounds or leak (try it under -DATTN_SANITIZE=ON).  ATTN_FUZZ_ITERS
 * overrides the mutation count per file.  Runs from the source directory.
 */
#define _XOPEN_SOURCE 700
#define _FILE_OFFSET_BITS 64

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "check.h"
#include "scratch_dir.h"

static void write_all(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, n, f);
  fclose(f);
}

/* Opens path and reads data.pkl and storages "0".."3" of a few types;
   returns whether the open succeeded. */
static bool exercise(const char *path) {
  attn_pt_archive *a = NULL;
  if (attn_pt_open(path, &a) != ATTN_OK) return false;
  char *buf = NULL;
  size_t len = 0;
  if (attn_pt_read_record(a, "data.pkl", &buf, &len) == ATTN_OK) free(buf);
  static const char *types[] = {"FloatStorage", "LongStorage", "BoolStorage", "HalfStorage"};
  for (int k = 0; k < 4; k++) {
    char key[8];
    snprintf(key, sizeof key, "%d", k);
    for (int i = 0; i < 4; i++) {
      attn_tensor *t = NULL;
      if (attn_pt_storage(a, key, types[i], 6, &t) == ATTN_OK) attn_tensor_release(t);
    }
  }
  attn_pt_close(a);
  return true;
}

int main(void) {
  if (!scratch_open("pt")) return 1;
  /* the views fixture: storage 0 is arange(12) as float32 */
  {
    attn_pt_archive *a = NULL;
    CHECK_OK(attn_pt_open("spec/fixtures/pt/views.pt", &a));
    attn_tensor *t = NULL;
    CHECK_OK(attn_pt_storage(a, "0", "FloatStorage", 12, &t));
    CHECK(attn_tensor_numel(t) == 12 && attn_tensor_data(t)[11] == 11.0f);
    attn_tensor_release(t);
    CHECK(attn_pt_storage(a, "0", "FloatStorage", 13, &t) != ATTN_OK); /* size mismatch */
    CHECK(strstr(attn_last_error(), "views.pt") != NULL);
    CHECK(attn_pt_storage(a, "0", "ComplexFloatStorage", 12, &t) != ATTN_OK);
    CHECK(attn_pt_storage(a, "../x", "FloatStorage", 12, &t) != ATTN_OK);
    attn_pt_close(a);
  }
  /* the writer: records aligned on 64 bytes, read back */
  {
    attn_pt_writer *w = NULL;
    CHECK_OK(attn_pt_writer_open(tpath("w.pt"), &w));
    CHECK_OK(attn_pt_writer_add(w, "archive/data.pkl", "\x80\x02N.", 4));
    int64_t shape[2] = {2, 3};
    attn_tensor *x = NULL;
    CHECK_OK(attn_empty_dtype(ATTN_INT64, 2, shape, &x));
    for (int i = 0; i < 6; i++) attn_tensor_i64(x)[i] = (int64_t)i * 1000000000000LL - 3;
    CHECK_OK(attn_pt_writer_add_tensor(w, "archive/data/0", x));
    CHECK_OK(attn_pt_writer_add(w, "archive/version", "3\n", 2));
    CHECK_OK(attn_pt_writer_commit(w));
    size_t n;
    unsigned char *b = read_all(tpath("w.pt"), &n);
    CHECK(b != NULL);
    /* every local header's data starts on a multiple of 64 */
    for (size_t p = 0; b && p + 30 <= n && memcmp(b + p, "PK\x03\x04", 4) == 0;) {
      size_t nl = (size_t)(b[p + 26] | b[p + 27] << 8), xl = (size_t)(b[p + 28] | b[p + 29] << 8);
      size_t sz = (size_t)(b[p + 18] | b[p + 19] << 8 | b[p + 20] << 16 | (size_t)b[p + 21] << 24);
      CHECK((p + 30 + nl + xl) % 64 == 0);
      p += 30 + nl + xl + sz;
    }
    free(b);
    attn_pt_archive *a = NULL;
    CHECK_OK(attn_pt_open(tpath("w.pt"), &a));
    attn_tensor *t = NULL;
    CHECK_OK(attn_pt_storage(a, "0", "LongStorage", 6, &t));
    for (int i = 0; i < 6; i++) CHECK(attn_tensor_i64(t)[i] == attn_tensor_i64(x)[i]);
    attn_tensor_release(t);
    attn_pt_close(a);
    attn_tensor_release(x);
  }
  /* fuzz */
  const char *env = getenv("ATTN_FUZZ_ITERS");
  int iters = env ? atoi(env) : 300;
  static const char *files[] = {"state_dict.pt", "views.pt", "checkpoint.pt", "deflated.pt", "evil.pt"};
  srand(29);
  int opened = 0;
  for (int fi = 0; fi < 5; fi++) {
    char src[256];
    snprintf(src, sizeof src, "spec/fixtures/pt/%s", files[fi]);
    size_t n;
    unsigned char *orig = read_all(src, &n);
    CHECK(orig != NULL);
    if (!orig) continue;
    unsigned char *m = malloc(n);
    for (int it = 0; it < iters; it++) {
      memcpy(m, orig, n);
      size_t len = n;
      int kind = rand() % 3;
      if (kind == 0) len = (size_t)rand() % n; /* truncation */
      int flips = 1 + rand() % 8;
      for (int j = 0; kind != 0 && j < flips; j++) {
        size_t at = n > 80 && rand() % 2 ? n - 1 - (size_t)rand() % 80 : (size_t)rand() % n; /* the directory */
        m[at] = kind == 1 ? (unsigned char)rand() : (unsigned char)(rand() % 2 ? 0xFF : 0);
      }
      write_all(tpath("fuzz.pt"), m, len);
      opened += exercise(tpath("fuzz.pt"));
    }
    free(m);
    free(orig);
  }
  printf("fuzz: %d of %d mutated files still opened\n", opened, 5 * iters);
  scratch_close();
  return check_summary();
}
