/* SPDX-License-Identifier: MIT */
/* A main() for the fuzz targets without libFuzzer: runs the target once on
 * every file named on the command line (directories are walked, one level
 * deep, in name order) and prints how many it ran.  The normal test suite
 * builds each target with this file to replay its committed corpus
 * (spec/fuzz/replay.cmake), so every crash input ever committed stays a
 * regression test under any compiler; the target's own checks abort on a
 * wrong result. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (n == cap) buf = realloc(buf, cap *= 2);
    size_t got = fread(buf + n, 1, cap - n, f);
    if (got == 0) break;
    n += got;
  }
  fclose(f);
  /* an exact-size copy, as libFuzzer hands it over (ASan sees overreads) */
  uint8_t *exact = malloc(n ? n : 1);
  memcpy(exact, buf, n);
  free(buf);
  if (getenv("ATTN_REPLAY_VERBOSE")) fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  long runs = 0;
  int bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      bad = 1;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad |= run_file(argv[i]);
      runs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) continue;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') {
        names = realloc(names, sizeof *names * (n + 1));
        names[n++] = strdup(e->d_name);
      }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_names);
    for (size_t k = 0; k < n; k++) {
      size_t len = strlen(argv[i]) + strlen(names[k]) + 2;
      char *p = malloc(len);
      snprintf(p, len, "%s/%s", argv[i], names[k]);
      bad |= run_file(p);
      runs++;
      free(p);
      free(names[k]);
    }
    free(names);
  }
  printf("replay: %ld inputs, no crash\n", runs);
  return bad;
}
