/* SPDX-License-Identifier: MIT */
/* A scratch directory for the C tests that write files (define
   _XOPEN_SOURCE 700 before any include, for mkdtemp):
     scratch_open("io")  makes /tmp/attn_test_io_XXXXXX (false, with a
                         message, when it cannot)
     tpath("a.npy")      a path in it (eight rotating buffers, so one call
                         can take several)
     scratch_close()     removes it and all it holds. */
#ifndef ATTN_TEST_SCRATCH_DIR_H
#define ATTN_TEST_SCRATCH_DIR_H
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* The whole file at path (NULL if it cannot be opened or read whole;
   *n its length). */
static inline unsigned char *read_all(const char *path, size_t *n) {
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (len < 0) {
    fclose(f);
    return NULL;
  }
  unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
  if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *n = (size_t)len;
  return b;
}

static char tmpdir[256];

static const char *tpath(const char *name) {
  static char buf[8][512];
  static int k;
  char *b = buf[k++ % 8];
  snprintf(b, 512, "%s/%s", tmpdir, name);
  return b;
}

static bool scratch_open(const char *name) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_%s_XXXXXX", name);
  if (mkdtemp(tmpdir)) return true;
  perror("mkdtemp");
  return false;
}

static void scratch_close(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}
#endif
