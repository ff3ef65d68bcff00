/* SPDX-License-Identifier: MIT */
/* Weight files in C: dtype conversions (every half and bfloat16 value),
 * round trips through safetensors / .npy / .npz (strided, 0-d, empty and
 * 8-d tensors, metadata, forced ZIP64 records), the error paths, atomic
 * replacement when a write fails half-way (RLIMIT_FSIZE), and a fuzz loop
 * that feeds thousands of random mutations of valid files to every parser
 * through fmemopen: none may crash, read out of bounds or leak (try it
 * under -DATTN_SANITIZE=ON).  ATTN_FUZZ_ITERS and ATTN_FUZZ_SEED override
 * the mutation count per file and the seed.
 * Runs from the source directory (ctest's WORKING_DIRECTORY) so it can
 * also fuzz the fixture files of spec/fixtures/io.
 */
#define _XOPEN_SOURCE 700
#define _FILE_OFFSET_BITS 64

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "attn.h"
#include "check.h"
#include "io/io_internal.h"
#include "scratch_dir.h"

/* Number of directory entries starting with prefix. */
static int count_prefix(const char *prefix) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  if (d) closedir(d);
  return n;
}

static bool same_tensor(const attn_tensor *a, const attn_tensor *b) {
  if (!a || !b || !attn_same_shape(a, b)) return false;
  int64_t n = attn_tensor_numel(a);
  for (int64_t i = 0; i < n; i++) {
    float x = attn_tensor_get_flat(a, i), y = attn_tensor_get_flat(b, i);
    if (memcmp(&x, &y, 4) != 0) return false; /* bit-exact, NaN payloads and -0 too */
  }
  return true;
}

static attn_tensor *seq(int ndim, const int64_t *shape, float scale) {
  attn_tensor *t = NULL;
  if (attn_empty(ndim, shape, &t)) return NULL;
  int64_t n = attn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) attn_tensor_data(t)[i] = (float)i * scale - 3.0f;
  return t;
}

/* ------------------------------------------------------------------------ */

static void test_conversions(void) {
  /* every half against a double-precision reference */
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    float got = attn__io_half_to_float((uint16_t)h);
    double ref;
    if (exp == 31)
      ref = man ? NAN : INFINITY;
    else if (exp == 0)
      ref = ldexp(man, -24);
    else
      ref = ldexp(1024 + man, exp - 25);
    if (sign) ref = -ref;
    if (isnan(ref) ? !isnan(got) : ((double)got != ref || !signbit(got) != !signbit(ref))) bad++;
  }
  CHECK(bad == 0);
  bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float got = attn__io_bf16_to_float((uint16_t)h);
    uint32_t bits;
    memcpy(&bits, &got, 4);
    if (bits != h << 16) bad++;
  }
  CHECK(bad == 0);

  /* integers, both byte orders */
  {
    unsigned char le[16] = {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0x20, 0};
    unsigned char be[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0, 0x20, 0, 0, 0, 0, 0, 1};
    float out[2];
    attn__io_convert((attn__io_dtype){ATTN__IO_I64, 8, false}, le, out, 2);
    CHECK(out[0] == -2.0f && out[1] == (float)(((int64_t)1 << 53) + 1));
    attn__io_convert((attn__io_dtype){ATTN__IO_I64, 8, true}, be, out, 2);
    CHECK(out[0] == -2.0f && out[1] == (float)(((int64_t)1 << 53) + 1));
    attn__io_convert((attn__io_dtype){ATTN__IO_U64, 8, false}, le, out, 1);
    CHECK(out[0] == 18446744073709551616.0f);
    attn__io_convert((attn__io_dtype){ATTN__IO_I32, 4, false}, le, out, 2);
    CHECK(out[0] == -2.0f && out[1] == -1.0f);
    attn__io_convert((attn__io_dtype){ATTN__IO_U32, 4, true}, be, out, 1);
    CHECK(out[0] == 4294967295.0f);
    attn__io_convert((attn__io_dtype){ATTN__IO_I16, 2, false}, le, out, 1);
    CHECK(out[0] == -2.0f);
    attn__io_convert((attn__io_dtype){ATTN__IO_U16, 2, true}, be + 8, out, 2);
    CHECK(out[0] == 32.0f && out[1] == 0.0f);
    attn__io_convert((attn__io_dtype){ATTN__IO_I8, 1, false}, le, out, 2);
    CHECK(out[0] == -2.0f && out[1] == -1.0f);
    attn__io_convert((attn__io_dtype){ATTN__IO_U8, 1, false}, le, out, 2);
    CHECK(out[0] == 254.0f && out[1] == 255.0f);
    attn__io_convert((attn__io_dtype){ATTN__IO_BOOL, 1, false}, le + 8, out, 2);
    CHECK(out[0] == 1.0f && out[1] == 0.0f);
  }
  {
    double d[3] = {0.1, 1e39, -1e-46};
    float out[3];
    attn__io_convert((attn__io_dtype){ATTN__IO_F64, 8, false}, (unsigned char *)d, out, 3);
    CHECK(out[0] == 0.1f && isinf(out[1]) && out[2] == 0.0f && signbit(out[2]));
  }
}

/* ------------------------------------------------------------------------ */

typedef struct {
  const char *name;
  attn_tensor *t;
} sample;

static int make_samples(sample *s) {
  int n = 0;
  int64_t sh3[3] = {2, 3, 4}, sh2[2] = {5, 8}, e2[2] = {0, 3}, e3[3] = {2, 0, 4}, sh8[8] = {2, 2, 2, 2, 2, 1, 2, 2};
  attn_tensor *base = seq(3, sh3, 0.25f), *grid = seq(2, sh2, 1.0f);
  s[n++] = (sample){"contiguous", attn_tensor_retain(base)};
  attn_tensor *v = NULL;
  attn_transpose(base, 0, 2, &v);
  s[n++] = (sample){"transposed", v};
  attn_slice(grid, 1, 1, 8, 3, &v);
  s[n++] = (sample){"stepped", v};
  {
    int64_t one[2] = {3, 1}, ex[2] = {3, 5};
    attn_tensor *c = seq(2, one, 2.0f);
    attn_expand(c, 2, ex, &v);
    attn_tensor_release(c);
    s[n++] = (sample){"expanded", v};
  }
  attn_scalar(-0.0f, &v);
  s[n++] = (sample){"scalar", v};
  attn_zeros(2, e2, &v);
  s[n++] = (sample){"empty", v};
  attn_zeros(3, e3, &v);
  s[n++] = (sample){"empty3", v};
  s[n++] = (sample){"eight", seq(8, sh8, 0.5f)};
  {
    float sp[6] = {INFINITY, -INFINITY, NAN, 1e-45f, -0.0f, 3.4e38f};
    int64_t six = 6;
    attn_from_data(1, &six, sp, &v);
    uint32_t payload = 0x7fc12345; /* a NaN payload must survive */
    memcpy(&attn_tensor_data(v)[2], &payload, 4);
    s[n++] = (sample){"special", v};
  }
  s[n++] = (sample){"d\xc3\xa9j\xc3\xa0.vu/name", attn_tensor_retain(grid)};
  attn_tensor_release(base);
  attn_tensor_release(grid);
  return n;
}

static void test_round_trips(void) {
  sample s[16];
  int n = make_samples(s);
  /* .npy, each tensor; non-contiguous ones give the bytes of a contiguous copy */
  for (int i = 0; i < n; i++) {
    attn_tensor *back = NULL, *c = NULL;
    attn_weight_info info;
    CHECK_OK(attn_npy_save(tpath("t.npy"), s[i].t));
    CHECK_OK(attn_npy_load(tpath("t.npy"), &back, &info));
    CHECK(same_tensor(back, s[i].t));
    CHECK(back && attn_tensor_is_contiguous(back));
    CHECK(strcmp(info.dtype, "<f4") == 0 && info.ndim == s[i].t->ndim);
    CHECK(info.nbytes == (uint64_t)attn_tensor_numel(s[i].t) * 4 && info.offset % 64 == 0);
    attn_contiguous(s[i].t, &c);
    CHECK_OK(attn_npy_save(tpath("c.npy"), c));
    size_t n1, n2;
    unsigned char *b1 = read_all(tpath("t.npy"), &n1), *b2 = read_all(tpath("c.npy"), &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);
    attn_tensor_release(c);
    attn_tensor_release(back);
  }
  /* tables */
  attn_named_tensors *nt = NULL;
  CHECK_OK(attn_named_tensors_new(&nt));
  for (int i = 0; i < n; i++) CHECK_OK(attn_named_tensors_add(nt, s[i].name, s[i].t));
  CHECK(attn_named_tensors_add(nt, "scalar", s[0].t) == ATTN_ERR_ARG);
  CHECK(strstr(attn_last_error(), "duplicate tensor name 'scalar'") != NULL);
  CHECK(attn_named_tensors_add(nt, "", s[0].t) == ATTN_ERR_ARG);
  CHECK_OK(attn_named_tensors_set_meta(nt, "format", "pt"));
  CHECK_OK(attn_named_tensors_set_meta(nt, "note", "first"));
  CHECK_OK(attn_named_tensors_set_meta(nt, "note", "second \"quoted\"\n"));
  CHECK(nt->nmeta == 2 && strcmp(attn_named_tensors_meta(nt, "note"), "second \"quoted\"\n") == 0);
  CHECK(attn_named_tensors_get(nt, "stepped") == s[2].t && attn_named_tensors_get(nt, "nope") == NULL);

  for (int fmt = 0; fmt < 3; fmt++) {
    const char *path = tpath(fmt == 0 ? "all.safetensors" : "all.npz");
    attn_named_tensors *back = NULL;
    if (fmt == 0) {
      CHECK_OK(attn_safetensors_save(path, nt));
      CHECK_OK(attn_safetensors_load(path, &back));
    } else {
      CHECK_OK(attn__npz_save(path, nt, fmt == 2)); /* fmt 2: forced ZIP64 records */
      CHECK_OK(attn_npz_load(path, &back));
    }
    CHECK(back && back->n == n);
    for (int i = 0; back && i < n; i++) CHECK(same_tensor(attn_named_tensors_get(back, s[i].name), s[i].t));
    if (fmt == 0 && back) {
      CHECK(back->nmeta == 2 && strcmp(attn_named_tensors_meta(back, "format"), "pt") == 0);
      CHECK(strcmp(attn_named_tensors_meta(back, "note"), "second \"quoted\"\n") == 0);
      /* data order is name order; offsets tile the buffer */
      uint64_t pos = 0;
      for (int i = 0; i < back->n; i++) {
        CHECK(i == 0 || strcmp(back->names[i - 1], back->names[i]) < 0);
        CHECK(back->info[i].offset == pos && strcmp(back->info[i].dtype, "F32") == 0);
        pos += back->info[i].nbytes;
      }
      attn_named_tensors *info = NULL;
      CHECK_OK(attn_safetensors_info(path, &info));
      CHECK(info && info->n == n && info->tensors[0] == NULL && info->nmeta == 2);
      attn_named_tensors_free(info);
    }
    if (fmt == 1 && back) /* npz keeps the given order */
      for (int i = 0; i < n; i++) CHECK(strcmp(back->names[i], s[i].name) == 0);
    if (fmt == 2) {
      size_t len;
      unsigned char *b = read_all(path, &len);
      CHECK(b && len > 98 && attn__rd32(b + len - 22) == 0x06054b50 && attn__rd16(b + len - 22 + 10) == 0xffff);
      CHECK(b && attn__rd32(b + len - 42) == 0x07064b50 && attn__rd32(b + len - 98) == 0x06064b50);
      free(b);
      /* numpy and zipfile agree (when there is a python with numpy) */
      char cmd[1024];
      snprintf(cmd, sizeof cmd,
               "/usr/bin/python3 -c \""
               "import numpy as np, zipfile, sys; p = sys.argv[1]; z = zipfile.ZipFile(p); assert z.testzip() is None; "
               "assert all(i.file_size < 2**32 for i in z.infolist()); d = np.load(p); "
               "assert d['stepped'].tolist() == [[8 * r - 2, 8 * r + 1, 8 * r + 4] for r in range(5)]; "
               "assert d['eight'].shape == (2, 2, 2, 2, 2, 1, 2, 2)\" '%s'",
               path);
      if (system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0)
        CHECK(system(cmd) == 0);
      else
        printf("skipped: numpy reading a ZIP64 .npz (no /usr/bin/python3 with numpy)\n");
    }
    attn_named_tensors_free(back);
  }
  CHECK(count_prefix("all.") == 2); /* no temporaries */
  attn_named_tensors_free(nt);
  for (int i = 0; i < n; i++) attn_tensor_release(s[i].t);
}

/* ------------------------------------------------------------------------ */

static void test_errors(void) {
  attn_tensor *t = NULL;
  attn_named_tensors *nt = NULL;
  CHECK(attn_npy_load(tpath("missing.npy"), &t, NULL) == ATTN_ERR_IO && t == NULL);
  CHECK(strstr(attn_last_error(), "npy_load: cannot open '") && strstr(attn_last_error(), "missing.npy"));
  CHECK(attn_safetensors_load(tpath("missing.safetensors"), &nt) == ATTN_ERR_IO && nt == NULL);
  CHECK(attn_npz_load(tmpdir, &nt) == ATTN_ERR_IO && strstr(attn_last_error(), "not a regular file"));
  CHECK(attn_npy_load(NULL, &t, NULL) == ATTN_ERR_ARG);
  CHECK(attn_npy_save(tpath("x.npy"), NULL) == ATTN_ERR_ARG);
  CHECK(attn_safetensors_save(tpath("x.safetensors"), NULL) == ATTN_ERR_ARG);
  int64_t two = 2;
  attn_tensor *a = seq(1, &two, 1.0f);
  CHECK(attn_npy_save(tpath("no/dir/x.npy"), a) == ATTN_ERR_IO);
  CHECK(strstr(attn_last_error(), "npy_save: cannot create a temporary file beside") != NULL);
  CHECK(attn_npy_save("", a) == ATTN_ERR_ARG);
  /* hand-built lists are checked too */
  char *names[2] = {"w", "w"};
  attn_tensor *ts[2] = {a, a};
  attn_named_tensors dup = {2, names, ts, NULL, 0, NULL, NULL};
  CHECK(attn_safetensors_save(tpath("d.safetensors"), &dup) == ATTN_ERR_ARG);
  CHECK(strstr(attn_last_error(), "duplicate tensor name 'w'") != NULL);
  CHECK(attn_npz_save(tpath("d.npz"), &dup) == ATTN_ERR_ARG);
  char *meta_name[1] = {"__metadata__"};
  attn_named_tensors bad = {1, meta_name, ts, NULL, 0, NULL, NULL};
  CHECK(attn_safetensors_save(tpath("d.safetensors"), &bad) == ATTN_ERR_ARG);
  attn_tensor *nul[1] = {NULL};
  attn_named_tensors holes = {1, names, nul, NULL, 0, NULL, NULL};
  CHECK(attn_npz_save(tpath("d.npz"), &holes) == ATTN_ERR_ARG);
  CHECK(count_prefix("d.") == 0);
  attn_tensor_release(a);
}

/* A write that fails half-way (file size limit) keeps the old file and
   removes the temporary. */
static void test_failed_write_is_atomic(void) {
  int64_t small = 10, big = 1 << 20;
  attn_tensor *a = seq(1, &small, 1.0f), *b = seq(1, &big, 1.0f);
  attn_named_tensors *nt = NULL;
  attn_named_tensors_new(&nt);
  attn_named_tensors_add(nt, "w", b);
  const char *paths[3] = {tpath("keep.npy"), tpath("keep.npz"), tpath("keep.safetensors")};
  for (int k = 0; k < 3; k++) {
    if (k == 0)
      CHECK_OK(attn_npy_save(paths[k], a));
    else {
      attn_named_tensors *one = NULL;
      attn_named_tensors_new(&one);
      attn_named_tensors_add(one, "w", a);
      CHECK_OK(k == 1 ? attn_npz_save(paths[k], one) : attn_safetensors_save(paths[k], one));
      attn_named_tensors_free(one);
    }
    size_t n0;
    unsigned char *before = read_all(paths[k], &n0);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* get EFBIG instead of the signal */
    setrlimit(RLIMIT_FSIZE, &lim);
    attn_status st = k == 0   ? attn_npy_save(paths[k], b)
                     : k == 1 ? attn_npz_save(paths[k], nt)
                              : attn_safetensors_save(paths[k], nt);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(st == ATTN_ERR_IO);
    CHECK(strstr(attn_last_error(), "failed: File too large") != NULL);
    size_t n1;
    unsigned char *after = read_all(paths[k], &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
  }
  CHECK(count_prefix("keep.") == 3); /* the three files, no temporaries */
  attn_named_tensors_free(nt);
  attn_tensor_release(a);
  attn_tensor_release(b);
}

/* ------------------------------------------------------------------------ */
/* Fuzzing                                                                   */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}
static size_t rnd_below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

typedef enum { P_SAFETENSORS, P_NPY, P_NPZ } parser;

/* Parses buf with p; returns 1 if it loaded, 0 on a clean error. */
static int parse(parser p, const unsigned char *buf, size_t len, int *bad_results) {
  static unsigned char none[1];
  /* fmemopen wants a size > 0; an empty file is a 1-byte stream with len 0 */
  FILE *f = fmemopen(len ? (void *)buf : none, len ? len : 1, "rb");
  if (!f) return 0;
  int ok = 0;
  if (p == P_SAFETENSORS) {
    attn_named_tensors *nt = NULL;
    if (attn__safetensors_read(f, len, "fuzz", "mem", true, &nt) == ATTN_OK) {
      ok = 1;
      for (int i = 0; i < nt->n; i++)
        if (!nt->tensors[i] || attn_tensor_numel(nt->tensors[i]) * 4 > (int64_t)len * 4) (*bad_results)++;
      attn_named_tensors_free(nt);
    } else if (strncmp(attn_last_error(), "fuzz: ", 6) != 0) {
      (*bad_results)++;
    }
  } else if (p == P_NPY) {
    attn__src s;
    attn__src_stored(&s, f, len, "fuzz", "mem");
    attn_tensor *t = NULL;
    if (attn__npy_read(&s, &t, NULL) == ATTN_OK && attn__src_finish(&s, 0) == ATTN_OK) {
      ok = 1;
      if (attn_tensor_numel(t) > (int64_t)len) (*bad_results)++;
    } else if (strncmp(attn_last_error(), "fuzz: ", 6) != 0) {
      (*bad_results)++;
    }
    attn_tensor_release(t);
  } else {
    attn_named_tensors *nt = NULL;
    if (attn__npz_read(f, len, "fuzz", "mem", &nt) == ATTN_OK) {
      ok = 1;
      for (int i = 0; i < nt->n; i++)
        if (!nt->tensors[i]) (*bad_results)++;
      attn_named_tensors_free(nt);
    } else if (strncmp(attn_last_error(), "fuzz: ", 6) != 0) {
      (*bad_results)++;
    }
  }
  fclose(f);
  return ok;
}

static void mutate(unsigned char *b, size_t *len, size_t cap) {
  static const uint64_t interesting[] = {0,
                                         1,
                                         0x7f,
                                         0x80,
                                         0xff,
                                         0xffff,
                                         0x7fffffff,
                                         0xffffffff,
                                         0x100000000ull,
                                         0x7fffffffffffffffull,
                                         0xffffffffffffffffull,
                                         8,
                                         64,
                                         128};
  int steps = 1 + (int)rnd_below(4);
  for (int s = 0; s<steps && * len> 0; s++) {
    size_t at = rnd_below(*len);
    switch (rnd_below(7)) {
    case 0: /* flip bits */ b[at] ^= (unsigned char)(1u << rnd_below(8)); break;
    case 1: /* random byte */ b[at] = (unsigned char)rnd(); break;
    case 2: { /* interesting little-endian value of 1, 2, 4 or 8 bytes */
      uint64_t v = interesting[rnd_below(sizeof interesting / sizeof *interesting)];
      size_t w = (size_t)1 << rnd_below(4);
      for (size_t i = 0; i < w && at + i < *len; i++) b[at + i] = (unsigned char)(v >> 8 * i);
      break;
    }
    case 3: /* truncate */ *len = at; break;
    case 4: { /* duplicate a chunk (grows) */
      size_t n = 1 + rnd_below(16);
      if (*len + n <= cap && at + n <= *len) {
        memmove(b + at + n, b + at, *len - at);
        *len += n;
      }
      break;
    }
    case 5: { /* delete a chunk */
      size_t n = 1 + rnd_below(16);
      if (at + n <= *len) {
        memmove(b + at, b + at + n, *len - at - n);
        *len -= n;
      }
      break;
    }
    default: /* ASCII digits and JSON/dict punctuation */
      b[at] = (unsigned char)"0123456789-,:{}[]()'\"eE. "[rnd_below(26)];
      break;
    }
  }
}

static void fuzz_file(parser p, const unsigned char *orig, size_t len, long iters, int *loaded, int *failed,
                      int *bad_results) {
  size_t cap = len + 256;
  unsigned char *b = malloc(cap);
  /* the original must load */
  CHECK(parse(p, orig, len, bad_results) == 1);
  for (long it = 0; it < iters; it++) {
    memcpy(b, orig, len);
    size_t n = len;
    mutate(b, &n, cap);
    parser q = rnd_below(16) == 0 ? (parser)rnd_below(3) : p; /* sometimes the wrong parser */
    if (parse(q, b, n, bad_results))
      (*loaded)++;
    else
      (*failed)++;
  }
  free(b);
}

static void test_fuzz(void) {
  long iters = 3000;
  if (getenv("ATTN_FUZZ_ITERS")) iters = strtol(getenv("ATTN_FUZZ_ITERS"), NULL, 10);
  if (getenv("ATTN_FUZZ_SEED")) rng_state = (strtoull(getenv("ATTN_FUZZ_SEED"), NULL, 10) + 1) * 0x9e3779b97f4a7c15ull;
  /* files written by attn ... */
  sample s[16];
  int n = make_samples(s);
  attn_named_tensors *nt = NULL;
  attn_named_tensors_new(&nt);
  for (int i = 0; i < 4; i++) attn_named_tensors_add(nt, s[i + 2].name, s[i + 2].t);
  attn_named_tensors_set_meta(nt, "format", "pt");
  attn_safetensors_save(tpath("f.safetensors"), nt);
  attn_npz_save(tpath("f.npz"), nt);
  attn__npz_save(tpath("f64.npz"), nt, true);
  attn_npy_save(tpath("f.npy"), s[1].t);
  attn_named_tensors_free(nt);
  for (int i = 0; i < n; i++) attn_tensor_release(s[i].t);
  /* ... and by numpy / by hand (the spec fixtures) */
  struct {
    const char *path;
    parser p;
  } files[] = {
      {NULL, P_SAFETENSORS},
      {NULL, P_NPZ},
      {NULL, P_NPZ},
      {NULL, P_NPY},
      {"spec/fixtures/io/mixed.safetensors", P_SAFETENSORS},
      {"spec/fixtures/io/bf16.safetensors", P_SAFETENSORS},
      {"spec/fixtures/io/compressed.npz", P_NPZ},
      {"spec/fixtures/io/descriptor.npz", P_NPZ},
      {"spec/fixtures/io/stored.npz", P_NPZ},
      {"spec/fixtures/io/f8_fortran.npy", P_NPY},
      {"spec/fixtures/io/f2.npy", P_NPY},
      {"spec/fixtures/io/v3.npy", P_NPY},
  };
  files[0].path = tpath("f.safetensors");
  files[1].path = tpath("f.npz");
  files[2].path = tpath("f64.npz");
  files[3].path = tpath("f.npy");
  int loaded = 0, failed = 0, bad = 0, nfiles = 0;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    size_t len;
    unsigned char *b = read_all(files[i].path, &len);
    if (!b) {
      fprintf(stderr, "fuzz: cannot read %s (run from the source directory)\n", files[i].path);
      check_failed++;
      continue;
    }
    fuzz_file(files[i].p, b, len, iters, &loaded, &failed, &bad);
    nfiles++;
    free(b);
  }
  printf("fuzz: %d files x %ld mutations: %d loaded, %d rejected, %d bad results\n", nfiles, iters, loaded, failed,
         bad);
  CHECK(bad == 0);
  CHECK(failed > loaded); /* most mutations must be caught */
  CHECK(loaded + failed == nfiles * iters);
}

/* ------------------------------------------------------------------------ */

int main(void) {
  if (!scratch_open("io")) return 1;
  test_conversions();
  test_round_trips();
  test_errors();
  test_failed_write_is_atomic();
  test_fuzz();
  scratch_close();
  return check_summary();
}
