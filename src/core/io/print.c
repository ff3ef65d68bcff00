/* SPDX-License-Identifier: MIT */
/* Tensor printing that reproduces torch 1.13's repr of a float32 tensor
   (torch/_tensor_str.py) character for character:

     tensor([[ 0.3374, -0.1778, -0.3035],
             [ 0.1794,  1.8951,  0.4954]])

   The steps mirror torch's:
    1. summarise when numel > threshold: every dim longer than 2*edgeitems
       shows only its first and last edgeitems entries ("..." between);
    2. a formatter is chosen from the elements that will be shown (torch runs
       _Formatter on get_summarized_data): int mode when every non-zero finite
       value is integral, sci mode when max/min of their absolute values
       (in double) exceeds 1000, max > 1e8, or (not int mode) min < 1e-4;
       the common width is the longest formatted non-zero finite value;
    3. rows wrap after floor((linewidth - indent) / (width + 2)) elements;
       2-d+ slices are joined by "," plus (dims - 1) newlines plus indent;
    4. suffixes (size=... for multi-d empties, then opts->suffix) go after
       ", " or on a new line when the last line would pass linewidth.
   Numbers are formatted by printf on the float's double value: glibc's
   %.Nf / %.Ne round the exact binary value half-even, as Python's
   format() does, and both print at least two exponent digits. */
#include "io/io.h"

#include <math.h>
#include <stdio.h>

#define PRINT_PREFIX "tensor("
#define PRINT_MAX_PRECISION 1000

void attn_print_opts_default(attn_print_opts *o) {
  if (!o) return;
  o->precision = 4;
  o->linewidth = 80;
  o->threshold = 1000;
  o->edgeitems = 3;
  o->suffix = NULL;
}

/* ------------------------------------------------------------------------ */
/* Growable string                                                           */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

static void sb_reserve(sbuf *b, size_t extra) {
  if (b->oom) return;
  if (extra > SIZE_MAX / 2 - b->n - 1) {
    b->oom = true;
    return;
  }
  size_t need = b->n + extra + 1;
  if (need <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = true;
    return;
  }
  b->p = p;
  b->cap = cap;
}

static void sb_put(sbuf *b, const char *s, size_t len) {
  sb_reserve(b, len);
  if (b->oom) return;
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_rep(sbuf *b, char c, int64_t count) {
  if (count <= 0) return;
  sb_reserve(b, (size_t)count);
  if (b->oom) return;
  memset(b->p + b->n, c, (size_t)count);
  b->n += (size_t)count;
  b->p[b->n] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Walking the shown elements                                                */

typedef struct printer {
  const attn_tensor *t;
  const attn_storage *data; /* positions include t->offset */
  bool ints;                /* int64 or bool: torch's non-floating formatter */
  int precision, linewidth, edge;
  bool summarize;
  /* formatter (torch's _Formatter) */
  bool int_mode, sci_mode;
  int max_width;
  struct print_stats {
    int64_t count;
    double min, max;
    bool integral;
  } st;
  char *num; /* scratch for one number, precision + 64 bytes */
  size_t num_size;
  sbuf out;
} printer;

/* Whether a dim of size n shows only its first and last edgeitems. */
static bool edged(const printer *pr, int64_t n) { return pr->summarize && n > 2 * (int64_t)pr->edge; }

typedef void (*visit_fn)(printer *pr, double v);

/* The element at storage position pos (floats exactly; int64 as double is
   only used for int64 through int_text, which reads the integer). */
static double at(const printer *pr, int64_t pos) { return attn__load_f64(pr->data, pos); }

/* Calls fn on every element that will be printed, in row-major order
   (exactly the elements of torch's get_summarized_data). */
static void visit(printer *pr, int d, int64_t pos, visit_fn fn) {
  const attn_tensor *t = pr->t;
  if (d == t->ndim) {
    fn(pr, pr->ints ? (double)pos : at(pr, pos));
    return;
  }
  int64_t n = t->shape[d], s = t->stride[d];
  if (edged(pr, n)) {
    for (int64_t i = 0; i < pr->edge; i++) visit(pr, d + 1, pos + i * s, fn);
    for (int64_t i = n - pr->edge; i < n; i++) visit(pr, d + 1, pos + i * s, fn);
  } else {
    for (int64_t i = 0; i < n; i++) visit(pr, d + 1, pos + i * s, fn);
  }
}

/* ------------------------------------------------------------------------ */
/* Number formatting                                                         */

/* Python's format() of a double in the formatter's mode, without padding.
   Returns the length; the text is in pr->num. */
static int format_raw(printer *pr, double v) {
  int len;
  if (isnan(v))
    len = snprintf(pr->num, pr->num_size, "nan"); /* Python drops NaN's sign */
  else if (isinf(v))
    len = snprintf(pr->num, pr->num_size, v < 0 ? "-inf" : "inf");
  else if (pr->sci_mode)
    len = snprintf(pr->num, pr->num_size, "%.*e", pr->precision, v);
  else if (pr->int_mode)
    len = snprintf(pr->num, pr->num_size, "%.0f.", v);
  else
    len = snprintf(pr->num, pr->num_size, "%.*f", pr->precision, v);
  /* Cannot trigger for a float (see num_size); keeps reads in bounds. */
  if (len < 0) len = 0;
  if ((size_t)len >= pr->num_size) len = (int)pr->num_size - 1;
  return len;
}

/* str() of an int64 or bool element at storage position pos. */
static int int_text(printer *pr, int64_t pos) {
  int len;
  if (pr->data->dtype == ATTN_BOOL)
    len = snprintf(pr->num, pr->num_size, "%s", ((const bool *)pr->data->data)[pos] ? "True" : "False");
  else
    len = snprintf(pr->num, pr->num_size, "%lld", (long long)((const int64_t *)pr->data->data)[pos]);
  if (len < 0) len = 0;
  if ((size_t)len >= pr->num_size) len = (int)pr->num_size - 1;
  return len;
}

/* _Formatter.format: right-aligned to the common width. */
static void put_elem(printer *pr, int64_t pos) {
  int len = pr->ints ? int_text(pr, pos) : format_raw(pr, at(pr, pos));
  sb_rep(&pr->out, ' ', (int64_t)pr->max_width - len);
  sb_put(&pr->out, pr->num, (size_t)len);
}

/* ------------------------------------------------------------------------ */
/* Formatter construction                                                    */

/* Non-zero finite values only; torch compares their absolute values as
   doubles and tests integrality with ceil on the float. */
static void stats_fn(printer *pr, double dv) {
  float v = (float)dv;
  struct print_stats *st = &pr->st;
  if (!isfinite(v) || v == 0.0f) return;
  double a = fabs((double)v);
  if (st->count == 0 || a < st->min) st->min = a;
  if (st->count == 0 || a > st->max) st->max = a;
  st->count++;
  if (v != ceilf(v)) st->integral = false;
}

static void width_fn(printer *pr, double dv) {
  float v = (float)dv;
  if (!isfinite(v) || v == 0.0f) return;
  int len = format_raw(pr, (double)v);
  if (len > pr->max_width) pr->max_width = len;
}

/* non-floating: the width of the longest str(value) (v is a position) */
static void int_width_fn(printer *pr, double v) {
  int len = int_text(pr, (int64_t)v);
  if (len > pr->max_width) pr->max_width = len;
}

static void build_formatter(printer *pr) {
  if (pr->ints) {
    pr->max_width = 1;
    visit(pr, 0, pr->t->offset, int_width_fn);
    return;
  }
  pr->st.count = 0;
  pr->st.integral = true;
  pr->int_mode = true;
  pr->sci_mode = false;
  pr->max_width = 1;
  visit(pr, 0, pr->t->offset, stats_fn);
  const struct print_stats *st = &pr->st;
  if (st->count == 0) return; /* only zeros, NaN and inf: torch keeps width 1 */
  pr->int_mode = st->integral;
  bool wide = st->max / st->min > 1000.0 || st->max > 1.0e8;
  pr->sci_mode = pr->int_mode ? wide : (wide || st->min < 1.0e-4);
  visit(pr, 0, pr->t->offset, width_fn);
}

/* ------------------------------------------------------------------------ */
/* Layout                                                                    */

/* One row: elements separated by ", ", wrapped every `per_line` items onto a
   new line indented by indent + 1 (the " ..." marker counts as an item). */
static void emit_vector(printer *pr, int d, int64_t pos, int64_t indent) {
  int64_t n = pr->t->shape[d], s = pr->t->stride[d];
  int64_t elem_len = (int64_t)pr->max_width + 2;
  int64_t room = (int64_t)pr->linewidth - indent;
  int64_t per_line = room > 0 ? room / elem_len : 0;
  if (per_line < 1) per_line = 1;

  int64_t item = 0;
#define NEXT_ITEM()                                                                                                    \
  do {                                                                                                                 \
    if (item > 0) {                                                                                                    \
      if (item % per_line == 0) {                                                                                      \
        sb_str(&pr->out, ",\n");                                                                                       \
        sb_rep(&pr->out, ' ', indent + 1);                                                                             \
      } else {                                                                                                         \
        sb_str(&pr->out, ", ");                                                                                        \
      }                                                                                                                \
    }                                                                                                                  \
    item++;                                                                                                            \
  } while (0)

  sb_str(&pr->out, "[");
  if (edged(pr, n)) {
    for (int64_t i = 0; i < pr->edge; i++) {
      NEXT_ITEM();
      put_elem(pr, pos + i * s);
    }
    NEXT_ITEM();
    sb_str(&pr->out, " ...");
    for (int64_t i = n - pr->edge; i < n; i++) {
      NEXT_ITEM();
      put_elem(pr, pos + i * s);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      NEXT_ITEM();
      put_elem(pr, pos + i * s);
    }
  }
  sb_str(&pr->out, "]");
#undef NEXT_ITEM
}

/* Slices of a k-d block (k >= 2) are joined by "," + (k-1) newlines +
   indent + 1 spaces, so 3-d+ tensors get blank lines between blocks. */
static void emit(printer *pr, int d, int64_t pos, int64_t indent) {
  const attn_tensor *t = pr->t;
  int left = t->ndim - d;
  if (left == 0) {
    put_elem(pr, pos);
    return;
  }
  if (left == 1) {
    emit_vector(pr, d, pos, indent);
    return;
  }
  int64_t n = t->shape[d], s = t->stride[d];
  bool first = true;
#define SEP()                                                                                                          \
  do {                                                                                                                 \
    if (!first) {                                                                                                      \
      sb_str(&pr->out, ",");                                                                                           \
      sb_rep(&pr->out, '\n', left - 1);                                                                                \
      sb_rep(&pr->out, ' ', indent + 1);                                                                               \
    }                                                                                                                  \
    first = false;                                                                                                     \
  } while (0)
  sb_str(&pr->out, "[");
  if (edged(pr, n)) {
    for (int64_t i = 0; i < pr->edge; i++) {
      SEP();
      emit(pr, d + 1, pos + i * s, indent + 1);
    }
    SEP();
    sb_str(&pr->out, "...");
    for (int64_t i = n - pr->edge; i < n; i++) {
      SEP();
      emit(pr, d + 1, pos + i * s, indent + 1);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      SEP();
      emit(pr, d + 1, pos + i * s, indent + 1);
    }
  }
  sb_str(&pr->out, "]");
#undef SEP
}

/* torch's _add_suffixes.  Its "last line length" is len - rfind("\n") + 1,
   i.e. two more than the real length; kept as is to wrap where torch does. */
static void add_suffix(printer *pr, int64_t *last_line_len, const char *suffix, int64_t indent) {
  int64_t len = (int64_t)strlen(suffix);
  if (*last_line_len + len + 2 > pr->linewidth) {
    sb_str(&pr->out, ",\n");
    sb_rep(&pr->out, ' ', indent);
    sb_str(&pr->out, suffix);
    *last_line_len = indent + len;
  } else {
    sb_str(&pr->out, ", ");
    sb_str(&pr->out, suffix);
    *last_line_len += len + 2;
  }
}

/* ------------------------------------------------------------------------ */

attn_status attn_tensor_format(const attn_tensor *t, const attn_print_opts *opts, char **out) {
  if (!t || !out) return attn_set_error(ATTN_ERR_ARG, "format: tensor and output must not be NULL");
  attn_print_opts def;
  if (!opts) {
    attn_print_opts_default(&def);
    opts = &def;
  }
  if (opts->precision < 0 || opts->precision > PRINT_MAX_PRECISION)
    return attn_set_error(ATTN_ERR_ARG, "format: precision %d out of range [0, %d]", opts->precision,
                          PRINT_MAX_PRECISION);
  /* torch's get_summarized_data fails for edgeitems 0 on 2-d+ tensors. */
  if (opts->edgeitems < 1)
    return attn_set_error(ATTN_ERR_ARG, "format: edgeitems must be >= 1 (got %d)", opts->edgeitems);
  if (t->ndim < 0 || t->ndim > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "format: tensor has %d dims", t->ndim);

  printer prv;
  memset(&prv, 0, sizeof prv);
  printer *pr = &prv;
  pr->t = t;
  pr->data = t->storage;
  pr->ints = t->dtype == ATTN_INT64 || t->dtype == ATTN_BOOL; /* float16 & co print as floats (torch) */
  pr->precision = opts->precision;
  pr->linewidth = opts->linewidth;
  pr->edge = opts->edgeitems;
  /* A float has at most 39 integer digits; sign, point, exponent fit in 64. */
  pr->num_size = (size_t)opts->precision + 64;
  pr->num = malloc(pr->num_size);
  if (!pr->num) return attn_set_error(ATTN_ERR_NOMEM, "format: out of memory");

  const int64_t indent = (int64_t)strlen(PRINT_PREFIX);
  int64_t numel = attn_tensor_numel(t);
  sb_str(&pr->out, PRINT_PREFIX);
  if (numel == 0) {
    sb_str(&pr->out, "[]");
  } else {
    pr->summarize = numel > opts->threshold;
    build_formatter(pr);
    emit(pr, 0, t->offset, indent);
  }

  /* Suffixes: torch computes the last line over "tensor(" + data. */
  const char *nl = pr->out.oom ? NULL : strrchr(pr->out.p, '\n');
  int64_t last_line_len = (int64_t)pr->out.n - (nl ? (int64_t)(nl - pr->out.p) : -1) + 1;
  if (numel == 0 && t->ndim != 1) {
    /* str(tuple(shape)): "(2, 0, 3)"; a 1-tuple never occurs here. */
    sbuf size = {0};
    sb_str(&size, "size=(");
    for (int i = 0; i < t->ndim; i++) {
      char num[32];
      snprintf(num, sizeof num, i ? ", %lld" : "%lld", (long long)t->shape[i]);
      sb_str(&size, num);
    }
    sb_str(&size, ")");
    if (size.oom)
      pr->out.oom = true;
    else
      add_suffix(pr, &last_line_len, size.p, indent);
    free(size.p);
  }
  if ((numel == 0 && t->dtype != ATTN_FLOAT32) || attn_dtype_is_storage(t->dtype)) {
    /* torch names the dtype of an empty non-default tensor, and of any float16, bfloat16, float64 one */
    char dts[32];
    snprintf(dts, sizeof dts, "dtype=attn.%s", attn_dtype_name(t->dtype));
    add_suffix(pr, &last_line_len, dts, indent);
  }
  if (opts->suffix && opts->suffix[0]) add_suffix(pr, &last_line_len, opts->suffix, indent);
  sb_str(&pr->out, ")");

  free(pr->num);
  if (pr->out.oom) {
    free(pr->out.p);
    char sb[ATTN_SHAPE_BUF];
    return attn_set_error(ATTN_ERR_NOMEM, "format: out of memory printing a %s tensor", ATTN_SHAPE(t, sb));
  }
  *out = pr->out.p;
  return ATTN_OK;
}
