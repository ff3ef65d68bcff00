/* SPDX-License-Identifier: MIT */
/* attn_tensor_format against torch 1.13's repr, character for character.
   The cases come from spec/fixtures/print_cases.txt and print_random.txt
   (written by scripts/fixtures/gen_print.py; the format is described there).
   Each case is also printed from a second, non-contiguous layout of the
   same values (dims stored in reverse order), which must not change the
   text.  Run from the source tree (ctest does). */
#include "attn.h"
#include "check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *fixture_files[] = {"spec/fixtures/print_cases.txt", "spec/fixtures/print_random.txt"};

/* ------------------------------------------------------------------------ */
/* Fixture reading                                                           */

typedef struct lines {
  char *buf;
  char **line;
  size_t n, pos;
} lines;

static int read_lines(const char *path, lines *ls) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n - 1 == 0) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) return -1;
  buf[n] = '\0';
  size_t nl = 1;
  for (size_t i = 0; i < n; i++) nl += buf[i] == '\n';
  ls->line = malloc(nl * sizeof *ls->line);
  if (!ls->line) {
    free(buf);
    return -1;
  }
  ls->buf = buf;
  ls->n = 0;
  ls->pos = 0;
  char *p = buf;
  while (*p) {
    ls->line[ls->n++] = p;
    char *e = strchr(p, '\n');
    if (!e) break;
    *e = '\0';
    p = e + 1;
  }
  return 0;
}

static char *next_line(lines *ls) { return ls->pos < ls->n ? ls->line[ls->pos++] : NULL; }

/* "key rest": returns rest when the line starts with key and a space. */
static char *field(char *line, const char *key) {
  size_t k = strlen(key);
  if (!line || strncmp(line, key, k) != 0 || line[k] != ' ') return NULL;
  return line + k + 1;
}

/* ------------------------------------------------------------------------ */
/* Building the tensor of a case                                             */

static attn_status apply_view(attn_tensor *t, char *spec, attn_tensor **out) {
  char op[32];
  int used = 0;
  long long a[ATTN_MAX_DIMS + 1] = {0};
  if (sscanf(spec, "%31s%n", op, &used) != 1) return attn_set_error(ATTN_ERR_ARG, "bad view");
  char *p = spec + used;
  int na = 0;
  while (na < ATTN_MAX_DIMS + 1) {
    char *e;
    long long v = strtoll(p, &e, 10);
    if (e == p) break;
    a[na++] = v;
    p = e;
  }
  if (!strcmp(op, "transpose") && na == 2) return attn_transpose(t, (int)a[0], (int)a[1], out);
  if (!strcmp(op, "permute") && na == t->ndim) {
    int dims[ATTN_MAX_DIMS];
    for (int i = 0; i < na; i++) dims[i] = (int)a[i];
    return attn_permute(t, dims, out);
  }
  if (!strcmp(op, "slice") && na == 4) return attn_slice(t, (int)a[0], a[1], a[2], a[3], out);
  if (!strcmp(op, "select") && na == 2) return attn_select(t, (int)a[0], a[1], out);
  if (!strcmp(op, "expand") && na >= 1 && na == a[0] + 1) {
    int64_t shape[ATTN_MAX_DIMS];
    for (int i = 0; i < a[0]; i++) shape[i] = a[i + 1];
    return attn_expand(t, (int)a[0], shape, out);
  }
  return attn_set_error(ATTN_ERR_ARG, "unknown view '%s'", spec);
}

/* The same values as t in a fresh storage whose dims are laid out in
   reverse order, seen through a permuted view: logically equal to t, but
   with non-row-major strides. */
static attn_status reversed_layout(const attn_tensor *t, attn_tensor **out) {
  int nd = t->ndim;
  int64_t rshape[ATTN_MAX_DIMS];
  int dims[ATTN_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    rshape[i] = t->shape[nd - 1 - i];
    dims[i] = nd - 1 - i;
  }
  attn_tensor *store = NULL, *view = NULL;
  attn_status st = attn_empty(nd, rshape, &store);
  if (st) return st;
  st = attn_permute(store, dims, &view);
  attn_tensor_release(store);
  if (st) return st;
  int64_t n = attn_tensor_numel(t), idx[ATTN_MAX_DIMS];
  for (int64_t i = 0; i < n; i++) {
    int64_t r = i;
    for (int d = nd - 1; d >= 0; d--) {
      idx[d] = r % t->shape[d];
      r /= t->shape[d];
    }
    attn_tensor_set(view, idx, attn_tensor_get(t, idx));
  }
  *out = view;
  return ATTN_OK;
}

/* Reports the first difference between two strings. */
static void show_diff(const char *name, const char *what, const char *want, const char *got) {
  size_t i = 0;
  while (want[i] && want[i] == got[i]) i++;
  fprintf(stderr, "case %s (%s): differs at byte %zu\n--- expected\n%s\n--- got\n%s\n---\n", name, what, i, want, got);
}

static void check_format(const char *name, const char *what, const attn_tensor *t, const attn_print_opts *o,
                         const char *want) {
  char *got = NULL;
  attn_status st = attn_tensor_format(t, o, &got);
  CHECK(st == ATTN_OK);
  if (st != ATTN_OK) {
    fprintf(stderr, "case %s (%s): %s\n", name, what, attn_last_error());
    return;
  }
  int same = strcmp(want, got) == 0;
  CHECK(same);
  if (!same) show_diff(name, what, want, got);
  free(got);
}

/* Parses and checks one case; returns 0 at the end of the file, -1 on a
   malformed record. */
static int run_case(lines *ls, int *ncases) {
  char *line;
  do {
    line = next_line(ls);
  } while (line && (line[0] == '#' || line[0] == '\0'));
  if (!line) return 0;
  char *name = field(line, "case");
  char *opts_s = field(next_line(ls), "opts");
  char *shape_s = field(next_line(ls), "shape");
  char *data_s = field(next_line(ls), "data");
  if (!name || !opts_s || !shape_s || !data_s) return -1;

  attn_print_opts o;
  attn_print_opts_default(&o);
  long long thr;
  if (sscanf(opts_s, "%d %d %lld %d", &o.precision, &o.linewidth, &thr, &o.edgeitems) != 4) return -1;
  o.threshold = thr;

  char *p = shape_s, *e;
  int ndim = (int)strtol(p, &e, 10);
  if (e == p || ndim < 0 || ndim > ATTN_MAX_DIMS) return -1;
  int64_t shape[ATTN_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    p = e;
    shape[i] = strtoll(p, &e, 10);
    if (e == p) return -1;
  }
  p = data_s;
  long long n = strtoll(p, &e, 10);
  if (e == p || n < 0) return -1;
  float *data = malloc((size_t)(n ? n : 1) * sizeof *data);
  if (!data) return -1;
  for (long long i = 0; i < n; i++) {
    p = e;
    data[i] = strtof(p, &e); /* '%.9g' text, "nan", "inf", "-0" round-trip */
    if (e == p) {
      free(data);
      return -1;
    }
  }
  attn_tensor *t = NULL;
  CHECK_OK(attn_from_data(ndim, shape, data, &t));
  free(data);
  if (!t) return -1;

  char *suffix = NULL;
  while ((line = next_line(ls))) {
    char *v = field(line, "view");
    if (!v) break;
    attn_tensor *w = NULL;
    attn_status st = apply_view(t, v, &w);
    CHECK(st == ATTN_OK);
    attn_tensor_release(t);
    if (st) {
      fprintf(stderr, "case %s: view '%s': %s\n", name, v, attn_last_error());
      return -1;
    }
    t = w;
  }
  suffix = field(line, "suffix");
  char *expect_s = field(next_line(ls), "expect");
  if (!suffix || !expect_s) {
    attn_tensor_release(t);
    return -1;
  }
  o.suffix = strcmp(suffix, "-") ? suffix : NULL;
  int nlines = atoi(expect_s);
  size_t len = 0, start = ls->pos;
  for (int i = 0; i < nlines; i++) {
    char *l = next_line(ls);
    if (!l) {
      attn_tensor_release(t);
      return -1;
    }
    len += strlen(l) + 1;
  }
  char *want = malloc(len + 1);
  want[0] = '\0';
  for (int i = 0; i < nlines; i++) {
    if (i) strcat(want, "\n");
    strcat(want, ls->line[start + i]);
  }

  check_format(name, "as stored", t, &o, want);
  if (t->ndim >= 2) {
    attn_tensor *r = NULL;
    CHECK_OK(reversed_layout(t, &r));
    if (r) check_format(name, "reversed layout", r, &o, want);
    attn_tensor_release(r);
  }
  free(want);
  attn_tensor_release(t);
  (*ncases)++;
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Direct checks                                                             */

static void check_simple(void) {
  attn_print_opts o;
  memset(&o, 0x5a, sizeof o);
  attn_print_opts_default(&o);
  CHECK(o.precision == 4 && o.linewidth == 80 && o.threshold == 1000 && o.edgeitems == 3 && o.suffix == NULL);

  const float v[6] = {0.3374f, -0.1778f, -0.3035f, 0.1794f, 1.8951f, 0.4954f};
  int64_t shape[2] = {2, 3};
  attn_tensor *t = NULL;
  CHECK_OK(attn_from_data(2, shape, v, &t));
  const char *want = "tensor([[ 0.3374, -0.1778, -0.3035],\n        [ 0.1794,  1.8951,  0.4954]])";
  check_format("simple", "NULL opts", t, NULL, want);
  check_format("simple", "default opts", t, &o, want);

  /* An empty suffix adds nothing; a suffix is added after ", ". */
  o.suffix = "";
  check_format("simple", "empty suffix", t, &o, want);
  o.suffix = "requires_grad=True";
  check_format("simple", "suffix", t, &o,
               "tensor([[ 0.3374, -0.1778, -0.3035],\n        [ 0.1794,  1.8951,  0.4954]], "
               "requires_grad=True)");
  o.suffix = NULL;

  /* A transposed view prints its logical layout. */
  attn_tensor *tt = NULL;
  CHECK_OK(attn_transpose(t, 0, 1, &tt));
  if (tt)
    check_format("simple", "transposed", tt, NULL,
                 "tensor([[ 0.3374,  0.1794],\n        [-0.1778,  1.8951],\n        [-0.3035,  0.4954]])");
  attn_tensor_release(tt);

  /* Bad options fail and leave *out alone. */
  char *sentinel = (char *)"untouched", *out = sentinel;
  o.precision = -1;
  CHECK(attn_tensor_format(t, &o, &out) == ATTN_ERR_ARG && out == sentinel);
  CHECK(strstr(attn_last_error(), "precision") != NULL);
  attn_print_opts_default(&o);
  o.edgeitems = 0;
  CHECK(attn_tensor_format(t, &o, &out) == ATTN_ERR_ARG && out == sentinel);
  CHECK(strstr(attn_last_error(), "edgeitems") != NULL);
  CHECK(attn_tensor_format(NULL, NULL, &out) == ATTN_ERR_ARG && out == sentinel);
  CHECK(attn_tensor_format(t, NULL, NULL) == ATTN_ERR_ARG);
  attn_tensor_release(t);

  /* 0-d and empty. */
  attn_tensor *s = NULL;
  CHECK_OK(attn_scalar(0.3374f, &s));
  if (s) check_format("scalar", "0-d", s, NULL, "tensor(0.3374)");
  attn_tensor_release(s);
  int64_t eshape[2] = {0, 3};
  attn_tensor *em = NULL;
  CHECK_OK(attn_zeros(2, eshape, &em));
  if (em) check_format("empty", "0x3", em, NULL, "tensor([], size=(0, 3))");
  attn_tensor_release(em);

  /* Huge threshold: summarisation off even for a large tensor. */
  int64_t big[1] = {2000};
  attn_tensor *b = NULL;
  CHECK_OK(attn_zeros(1, big, &b));
  if (b) {
    attn_print_opts_default(&o);
    char *txt = NULL;
    CHECK_OK(attn_tensor_format(b, &o, &txt));
    CHECK(txt && strstr(txt, "...") != NULL);
    free(txt);
    o.threshold = INT64_MAX;
    txt = NULL;
    CHECK_OK(attn_tensor_format(b, &o, &txt));
    CHECK(txt && strstr(txt, "...") == NULL);
    /* 2000 "0." entries, 26 per 80-column line (width 1 + 2 for ", "). */
    size_t zeros = 0;
    for (const char *q = txt; q && (q = strstr(q, "0.")); q += 2) zeros++;
    CHECK(zeros == 2000);
    free(txt);
  }
  attn_tensor_release(b);
}

int main(void) {
  check_simple();
  int total = 0;
  for (size_t f = 0; f < sizeof fixture_files / sizeof *fixture_files; f++) {
    lines ls;
    int ok = read_lines(fixture_files[f], &ls) == 0;
    CHECK(ok);
    if (!ok) continue;
    int ncases = 0, r;
    while ((r = run_case(&ls, &ncases)) == 1) {}
    CHECK(r == 0);
    if (r < 0) fprintf(stderr, "%s: malformed record near line %zu\n", fixture_files[f], ls.pos);
    CHECK(ncases > 50);
    printf("%s: %d cases\n", fixture_files[f], ncases);
    total += ncases;
    free(ls.line);
    free(ls.buf);
  }
  printf("%d fixture cases\n", total);
  return check_summary();
}
