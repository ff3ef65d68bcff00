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
