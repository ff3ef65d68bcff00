/* SPDX-License-Identifier: MIT */
/* NumPy .npy and .npz.
 *
 * .npy: "\x93NUMPY", major, minor, header length (2 bytes LE in 1.0, 4 in
 * 2.0 and 3.0), then a Python dict literal
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and a newline, then the raw array data.
 *
 * .npz: a ZIP archive of "<name>.npy" members, stored (np.savez) or
 * deflated (np.savez_compressed).  Reading goes by the central directory
 * (local headers are only checked against it), understands ZIP64 records
 * and extra fields (numpy writes ZIP64 local headers for every member) and
 * data descriptors (whose sizes the central directory repeats), and checks
 * each member's CRC-32.
 */
#define _XOPEN_SOURCE 700
#define _FILE_OFFSET_BITS 64

#include "io_internal.h"

#include <stdio.h>
#include <string.h>

#define NPY_MAX_HEADER (1u << 20)

/* ------------------------------------------------------------------------ */
/* .npy header                                                               */

typedef struct {
  const char *p, *end;
} pyparse;

static void py_ws(pyparse *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static bool py_char(pyparse *ps, char c) {
  py_ws(ps);
  if (ps->p < ps->end && *ps->p == c) {
    ps->p++;
    return true;
  }
  return false;
}

/* A quoted string without escapes: sets *s, *n (not NUL-terminated). */
static bool py_string(pyparse *ps, const char **s, size_t *n) {
  py_ws(ps);
  if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"')) return false;
  char q = *ps->p++;
  const char *start = ps->p;
  while (ps->p < ps->end && *ps->p != q) {
    if (*ps->p == '\\') return false;
    ps->p++;
  }
  if (ps->p >= ps->end) return false;
  *s = start;
  *n = (size_t)(ps->p - start);
  ps->p++;
  return true;
}

static bool py_word(pyparse *ps, const char *w) {
  py_ws(ps);
  size_t n = strlen(w);
  if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, w, n) == 0) {
    ps->p += n;
    return true;
  }
  return false;
}

/* A non-negative decimal integer (Python 2's 'L' suffix allowed); false on
   overflow past 2^62. */
static bool py_int(pyparse *ps, int64_t *v) {
  py_ws(ps);
  if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return false;
  int64_t x = 0;
  while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
    if (x > ((int64_t)1 << 62) / 10) return false;
    x = x * 10 + (*ps->p++ - '0');
  }
  if (ps->p < ps->end && *ps->p == 'L') ps->p++;
  *v = x;
  return true;
}

typedef struct {
  attn__io_dtype dt;
  char descr[8];
  bool fortran;
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
} npy_header;

static bool npy_dtype(const char *s, size_t n, attn__io_dtype *dt) {
  if (n < 3 || n > 4) return false;
  char order = s[0], kind = s[1];
  int size = 0;
  for (size_t i = 2; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    size = size * 10 + (s[i] - '0');
  }
  if (order != '<' && order != '>' && order != '|') return false;
  if (order == '|' && size != 1) return false;
  dt->size = size;
  dt->big_endian = order == '>';
  switch (kind) {
  case 'f':
    if (size == 2)
      dt->kind = ATTN__IO_F16;
    else if (size == 4)
      dt->kind = ATTN__IO_F32;
    else if (size == 8)
      dt->kind = ATTN__IO_F64;
    else
      return false;
    return true;
  case 'i':
  case 'u': {
    bool u = kind == 'u';
    if (size == 1)
      dt->kind = u ? ATTN__IO_U8 : ATTN__IO_I8;
    else if (size == 2)
      dt->kind = u ? ATTN__IO_U16 : ATTN__IO_I16;
    else if (size == 4)
      dt->kind = u ? ATTN__IO_U32 : ATTN__IO_I32;
    else if (size == 8)
      dt->kind = u ? ATTN__IO_U64 : ATTN__IO_I64;
    else
      return false;
    return true;
  }
  case 'b':
    if (size != 1) return false;
    dt->kind = ATTN__IO_BOOL;
    return true;
  default: return false;
  }
}

/* Parses the header dict; on failure sets a message and returns the status. */
static attn_status npy_parse_header(const char *fn, const char *label, const char *txt, size_t len, npy_header *h) {
  pyparse ps = {txt, txt + len};
  bool have_descr = false, have_fortran = false, have_shape = false;
  char sb[ATTN_SHAPE_BUF];
  if (!py_char(&ps, '{')) goto syntax;
  for (;;) {
    if (py_char(&ps, '}')) break;
    const char *key;
    size_t klen;
    if (!py_string(&ps, &key, &klen) || !py_char(&ps, ':')) goto syntax;
    if (klen == 5 && memcmp(key, "descr", 5) == 0) {
      const char *s;
      size_t n;
      if (have_descr) goto dup;
      if (!py_string(&ps, &s, &n)) {
        return attn_set_error(ATTN_ERR_IO, "%s: '%s': unsupported dtype (structured or not a string descr)", fn, label);
      }
      if (!npy_dtype(s, n, &h->dt))
        return attn_set_error(ATTN_ERR_IO, "%s: '%s': unsupported dtype '%.*s'", fn, label, (int)(n < 32 ? n : 32), s);
      memcpy(h->descr, s, n);
      h->descr[n] = '\0';
      have_descr = true;
    } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) {
      if (have_fortran) goto dup;
      if (py_word(&ps, "True"))
        h->fortran = true;
      else if (py_word(&ps, "False"))
        h->fortran = false;
      else
        goto syntax;
      have_fortran = true;
    } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
      if (have_shape) goto dup;
      if (!py_char(&ps, '(')) goto syntax;
      h->ndim = 0;
      bool comma = false; /* a 1-tuple needs its trailing comma */
      while (!py_char(&ps, ')')) {
        int64_t v;
        if (h->ndim > 0 && !comma) goto syntax;
        if (!py_int(&ps, &v)) {
          py_ws(&ps);
          if (ps.p < ps.end && *ps.p == '-')
            return attn_set_error(ATTN_ERR_IO, "%s: '%s': negative size in the shape", fn, label);
          if (ps.p < ps.end && *ps.p >= '0' && *ps.p <= '9')
            return attn_set_error(ATTN_ERR_IO, "%s: '%s': a size in the shape is too large", fn, label);
          goto syntax;
        }
        if (h->ndim == ATTN_MAX_DIMS)
          return attn_set_error(ATTN_ERR_IO, "%s: '%s': more than %d dims are not supported", fn, label, ATTN_MAX_DIMS);
        h->shape[h->ndim++] = v;
        comma = py_char(&ps, ',');
      }
      if (h->ndim == 1 && !comma) goto syntax;
      have_shape = true;
    } else {
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': unexpected header key '%.*s'", fn, label,
                            (int)(klen < 32 ? klen : 32), key);
    }
    if (!py_char(&ps, ',')) {
      if (!py_char(&ps, '}')) goto syntax;
      break;
    }
  }
  py_ws(&ps);
  if (ps.p != ps.end) goto syntax;
  if (!have_descr || !have_fortran || !have_shape)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': header lacks %s", fn, label,
                          !have_descr     ? "'descr'"
                          : !have_fortran ? "'fortran_order'"
                                          : "'shape'");
  if (attn__shape_numel(h->ndim, h->shape) < 0)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': shape %s has too many elements", fn, label,
                          attn_shape_str(h->ndim, h->shape, sb, sizeof sb));
  return ATTN_OK;
syntax:
  return attn_set_error(ATTN_ERR_IO, "%s: '%s': malformed header dict near byte %zu", fn, label, (size_t)(ps.p - txt));
dup:
  return attn_set_error(ATTN_ERR_IO, "%s: '%s': repeated key in the header", fn, label);
}

attn_status attn__npy_read(attn__src *s, attn_tensor **out, attn_weight_info *info) {
  const char *fn = s->fn, *label = s->label;
  unsigned char pre[12];
  attn_status st = attn__src_read(s, pre, 8, "the .npy magic");
  if (st) return st;
  if (memcmp(pre, "\x93NUMPY", 6) != 0)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': not a .npy file (bad magic)", fn, label);
  int major = pre[6], minor = pre[7];
  uint64_t hlen;
  if (major == 1 && minor == 0) {
    if ((st = attn__src_read(s, pre + 8, 2, "the .npy header length"))) return st;
    hlen = attn__rd16(pre + 8);
  } else if ((major == 2 || major == 3) && minor == 0) {
    if ((st = attn__src_read(s, pre + 8, 4, "the .npy header length"))) return st;
    hlen = attn__rd32(pre + 8);
  } else {
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': unsupported .npy format version %d.%d", fn, label, major, minor);
  }
  if (hlen > NPY_MAX_HEADER)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': header length %llu exceeds the limit of %u bytes", fn, label,
                          (unsigned long long)hlen, NPY_MAX_HEADER);
  if (hlen > s->avail)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': header length %llu runs past the end (%llu bytes left)", fn, label,
                          (unsigned long long)hlen, (unsigned long long)s->avail);
  char *txt = malloc(hlen ? (size_t)hlen : 1);
  if (!txt) return attn_set_error(ATTN_ERR_NOMEM, "%s: '%s': out of memory", fn, label);
  npy_header h;
  memset(&h, 0, sizeof h);
  st = attn__src_read(s, txt, (size_t)hlen, "the .npy header");
  if (st == ATTN_OK) st = npy_parse_header(fn, label, txt, (size_t)hlen, &h);
  free(txt);
  if (st) return st;
  char sb[ATTN_SHAPE_BUF];
  int64_t numel = attn__shape_numel(h.ndim, h.shape);
  uint64_t nbytes = (uint64_t)numel * (uint64_t)h.dt.size; /* numel <= 2^56, size <= 8 */
  if (nbytes != s->avail)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': shape %s of '%s' needs %llu data bytes, the file has %llu", fn, label,
                          attn_shape_str(h.ndim, h.shape, sb, sizeof sb), h.descr, (unsigned long long)nbytes,
                          (unsigned long long)s->avail);
  uint64_t data_offset = 8 + (major == 1 ? 2 : 4) + hlen;
  attn_tensor *t = NULL;
  if (h.fortran && h.ndim > 1) {
    /* Column-major: read the data as is and view it with Fortran strides. */
    attn_tensor *flat = NULL;
    int64_t stride[ATTN_MAX_DIMS], acc = 1;
    for (int d = 0; d < h.ndim; d++) {
      stride[d] = acc;
      acc *= h.shape[d] > 1 ? h.shape[d] : 1;
    }
    st = attn__alloc_dtype(fn, attn__io_load_dtype(h.dt), 1, &numel, &flat);
    if (st) return st;
    st = attn__make_view(flat, 0, h.ndim, h.shape, stride, &t);
    attn_tensor_release(flat);
  } else {
    st = attn__alloc_dtype(fn, attn__io_load_dtype(h.dt), h.ndim, h.shape, &t);
  }
  if (st) return st;
  st = attn__src_read_elems(s, h.dt, t->storage->data, t->dtype, numel, "the array data");
  if (st) {
    attn_tensor_release(t);
    return st;
  }
  if (info) {
    memset(info, 0, sizeof *info);
    snprintf(info->dtype, sizeof info->dtype, "%s", h.descr);
    info->ndim = h.ndim;
    memcpy(info->shape, h.shape, sizeof h.shape);
    info->offset = data_offset;
    info->nbytes = nbytes;
  }
  *out = t;
  return ATTN_OK;
}

attn_status attn_npy_load(const char *path, attn_tensor **out, attn_weight_info *info) {
  const char *fn = "npy_load";
  FILE *f;
  uint64_t size;
  attn_status st = attn__io_open_read(fn, path, &f, &size);
  if (st) return st;
  attn__src s;
  attn__src_stored(&s, f, size, fn, path);
  attn_tensor *t = NULL;
  st = attn__npy_read(&s, &t, info);
  if (st == ATTN_OK) st = attn__src_finish(&s, 0);
  fclose(f);
  if (st) {
    attn_tensor_release(t);
    return st;
  }
  *out = t;
  return ATTN_OK;
}

/* numpy 1.24's _write_array_header: sorted dict, spare spaces so the first
   dim can grow to 21 digits in place, then spaces and '\n' up to a multiple
   of 64 bytes (always at least one space). */
size_t attn__npy_header(attn_dtype dt, int ndim, const int64_t *shape, unsigned char *buf) {
  char dict[ATTN__NPY_HEADER_MAX];
  const char *descr = dt == ATTN_INT64     ? "<i8"
                      : dt == ATTN_BOOL    ? "|b1"
                      : dt == ATTN_FLOAT16 ? "<f2"
                      : dt == ATTN_FLOAT64 ? "<f8"
                                           : "<f4";
  size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int d = 0; d < ndim; d++)
    n += (size_t)snprintf(dict + n, sizeof dict - n, d ? ", %lld" : "%lld", (long long)shape[d]);
  n += (size_t)snprintf(dict + n, sizeof dict - n, ndim == 1 ? ",), }" : "), }");
  if (ndim > 0) {
    char first[32];
    int digits = snprintf(first, sizeof first, "%lld", (long long)shape[0]);
    for (int i = digits; i < 21; i++) dict[n++] = ' ';
  }
  size_t hlen = n + 1;
  size_t pad = 64 - ((10 + hlen) % 64);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  attn__wr16(buf + 8, (uint16_t)(hlen + pad));
  memcpy(buf + 10, dict, n);
  memset(buf + 10 + n, ' ', pad);
  buf[10 + n + pad] = '\n';
  return 10 + n + pad + 1;
}

attn_status attn_npy_save(const char *path, const attn_tensor *t) {
  const char *fn = "npy_save";
  if (!t) return attn_set_error(ATTN_ERR_ARG, "%s: tensor is NULL", fn);
  if (t->dtype == ATTN_BFLOAT16)
    return attn_set_error(ATTN_ERR_ARG,
                          "%s: '%s': numpy has no bfloat16: save it as .safetensors (BF16) or convert it with "
                          "x:float()",
                          fn, path ? path : "?");
  unsigned char hdr[ATTN__NPY_HEADER_MAX];
  size_t hlen = attn__npy_header(t->dtype, t->ndim, t->shape, hdr);
  attn__sink k;
  attn_status st = attn__sink_open(&k, fn, path);
  if (st) return st;
  st = attn__sink_write(&k, hdr, hlen);
  if (st == ATTN_OK) st = attn__sink_write_tensor(&k, t);
  if (st) {
    attn__sink_abort(&k);
    return st;
  }
  return attn__sink_commit(&k);
}

/* ------------------------------------------------------------------------ */
/* .npz reading                                                              */

#define ZIP_LOCAL_SIG 0x04034b50u
#define ZIP_CENTRAL_SIG 0x02014b50u
#define ZIP_EOCD_SIG 0x06054b50u
#define ZIP64_EOCD_SIG 0x06064b50u
#define ZIP64_LOCATOR_SIG 0x07064b50u
#define ZIP_EOCD_LEN 22
#define ZIP64_EOCD_LEN 56
#define ZIP64_LOCATOR_LEN 20
#define ZIP_CENTRAL_LEN 46
#define ZIP_LOCAL_LEN 30

typedef struct {
  char *name; /* member name, NUL-terminated */
  size_t name_len;
  uint16_t flags, method;
  uint32_t crc;
  uint64_t csize, usize, local_off;
} zip_entry;

static attn_status read_at(FILE *f, uint64_t off, void *buf, size_t n, const char *fn, const char *label,
                           const char *what) {
  if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, n, f) != n)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': cannot read %s", fn, label, what);
  return ATTN_OK;
}

/* Finds the end records; sets the central directory's place and size. */
static attn_status zip_find_cd(FILE *f, uint64_t size, const char *fn, const char *label, uint64_t *cd_off,
                               uint64_t *cd_size, uint64_t *count) {
  if (size < ZIP_EOCD_LEN)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': too short to be a zip archive (%llu bytes)", fn, label,
                          (unsigned long long)size);
  size_t tail = size < ZIP_EOCD_LEN + 65535 ? (size_t)size : ZIP_EOCD_LEN + 65535;
  unsigned char *buf = malloc(tail);
  if (!buf) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  uint64_t tail_off = size - tail;
  attn_status st = read_at(f, tail_off, buf, tail, fn, label, "the end of the archive");
  if (st) {
    free(buf);
    return st;
  }
  /* The last signature whose comment length reaches exactly the end. */
  long pos = -1;
  for (long i = (long)tail - ZIP_EOCD_LEN; i >= 0; i--)
    if (attn__rd32(buf + i) == ZIP_EOCD_SIG && (size_t)i + ZIP_EOCD_LEN + attn__rd16(buf + i + 20) == tail) {
      pos = i;
      break;
    }
  if (pos < 0) {
    free(buf);
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': not a zip archive (no end of central directory record)", fn, label);
  }
  const unsigned char *e = buf + pos;
  uint64_t eocd = tail_off + (uint64_t)pos;
  uint32_t disk = attn__rd16(e + 4), cd_disk = attn__rd16(e + 6);
  uint64_t n_disk = attn__rd16(e + 8), n_total = attn__rd16(e + 10);
  uint64_t csz = attn__rd32(e + 12), coff = attn__rd32(e + 16);
  free(buf);
  uint64_t limit = eocd; /* the central directory ends before this */
  unsigned char loc[ZIP64_LOCATOR_LEN];
  if (eocd >= ZIP64_LOCATOR_LEN &&
      read_at(f, eocd - ZIP64_LOCATOR_LEN, loc, sizeof loc, fn, label, "the zip64 locator") == ATTN_OK &&
      attn__rd32(loc) == ZIP64_LOCATOR_SIG) {
    uint64_t z = attn__rd64(loc + 8);
    if (attn__rd32(loc + 4) != 0 || attn__rd32(loc + 16) > 1)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': multi-disk zip archives are not supported", fn, label);
    if (z > eocd - ZIP64_LOCATOR_LEN || eocd - ZIP64_LOCATOR_LEN - z < ZIP64_EOCD_LEN)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': zip64 end record offset %llu is out of place", fn, label,
                            (unsigned long long)z);
    unsigned char r[ZIP64_EOCD_LEN];
    if ((st = read_at(f, z, r, sizeof r, fn, label, "the zip64 end record"))) return st;
    if (attn__rd32(r) != ZIP64_EOCD_SIG || attn__rd64(r + 4) < ZIP64_EOCD_LEN - 12)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad zip64 end of central directory record", fn, label);
    disk = attn__rd32(r + 16);
    cd_disk = attn__rd32(r + 20);
    n_disk = attn__rd64(r + 24);
    n_total = attn__rd64(r + 32);
    csz = attn__rd64(r + 40);
    coff = attn__rd64(r + 48);
    limit = z;
  }
  if (disk != 0 || cd_disk != 0 || n_disk != n_total)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': multi-disk zip archives are not supported", fn, label);
  if (coff > limit || csz > limit - coff)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': central directory (offset %llu, %llu bytes) lies outside the archive",
                          fn, label, (unsigned long long)coff, (unsigned long long)csz);
  if (n_total > csz / ZIP_CENTRAL_LEN || n_total > INT32_MAX)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': %llu entries cannot fit a %llu-byte central directory", fn, label,
                          (unsigned long long)n_total, (unsigned long long)csz);
  *cd_off = coff;
  *cd_size = csz;
  *count = n_total;
  return ATTN_OK;
}

/* Parses the central directory cd[0..len) into n entries. */
static attn_status zip_parse_cd(const unsigned char *cd, uint64_t len, int n, uint64_t cd_off, const char *fn,
                                const char *label, zip_entry *es) {
  uint64_t p = 0;
  for (int i = 0; i < n; i++) {
    zip_entry *z = &es[i];
    if (len - p < ZIP_CENTRAL_LEN || attn__rd32(cd + p) != ZIP_CENTRAL_SIG)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad central directory entry %d", fn, label, i);
    const unsigned char *h = cd + p;
    z->flags = attn__rd16(h + 8);
    z->method = attn__rd16(h + 10);
    z->crc = attn__rd32(h + 16);
    z->csize = attn__rd32(h + 20);
    z->usize = attn__rd32(h + 24);
    size_t nlen = attn__rd16(h + 28), xlen = attn__rd16(h + 30), clen = attn__rd16(h + 32);
    uint32_t disk = attn__rd16(h + 34);
    z->local_off = attn__rd32(h + 42);
    if (len - p - ZIP_CENTRAL_LEN < (uint64_t)nlen + xlen + clen)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': central directory entry %d runs past its end", fn, label, i);
    const unsigned char *name = h + ZIP_CENTRAL_LEN, *x = name + nlen, *xend = x + xlen;
    /* ZIP64 extra field: the 8-byte values of the fields set to all ones. */
    while (xend - x >= 4) {
      uint16_t id = attn__rd16(x), sz = attn__rd16(x + 2);
      const unsigned char *d = x + 4;
      if ((size_t)(xend - d) < sz)
        return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad extra field in entry %d", fn, label, i);
      if (id == 0x0001) {
        const unsigned char *q = d, *qe = d + sz;
        uint64_t *fields[3] = {&z->usize, &z->csize, &z->local_off};
        for (int k = 0; k < 3; k++)
          if (*fields[k] == 0xffffffffu) {
            if (qe - q < 8)
              return attn_set_error(ATTN_ERR_IO, "%s: '%s': zip64 extra field of entry %d is too short", fn, label, i);
            *fields[k] = attn__rd64(q);
            q += 8;
          }
        if (disk == 0xffff && qe - q >= 4) disk = attn__rd32(q);
      }
      x = d + sz;
    }
    if (memchr(name, '\0', nlen))
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': entry %d has a NUL byte in its name", fn, label, i);
    z->name = malloc(nlen + 1);
    if (!z->name) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
    memcpy(z->name, name, nlen);
    z->name[nlen] = '\0';
    z->name_len = nlen;
    if (disk != 0) return attn_set_error(ATTN_ERR_IO, "%s: '%s': multi-disk zip archives are not supported", fn, label);
    if (z->flags & 1) return attn_set_error(ATTN_ERR_IO, "%s: '%s': member '%s' is encrypted", fn, label, z->name);
    if (z->method != 0 && z->method != 8)
      return attn_set_error(ATTN_ERR_IO,
                            "%s: '%s': member '%s' uses compression method %d (only stored and "
                            "deflated are supported)",
                            fn, label, z->name, z->method);
    if (z->local_off > cd_off || cd_off - z->local_off < ZIP_LOCAL_LEN)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': member '%s' has its local header at %llu, outside the data", fn,
                            label, z->name, (unsigned long long)z->local_off);
    p += ZIP_CENTRAL_LEN + nlen + xlen + clen;
  }
  return ATTN_OK;
}

/* Reads member z as a tensor; label is "path[member]". */
static attn_status zip_read_member(FILE *f, const zip_entry *z, uint64_t cd_off, const char *fn, const char *label,
                                   attn_tensor **out, attn_weight_info *info) {
  unsigned char lh[ZIP_LOCAL_LEN];
  attn_status st = read_at(f, z->local_off, lh, sizeof lh, fn, label, "the local header");
  if (st) return st;
  if (attn__rd32(lh) != ZIP_LOCAL_SIG)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad local header signature", fn, label);
  uint64_t nlen = attn__rd16(lh + 26), xlen = attn__rd16(lh + 28);
  uint64_t start = z->local_off + ZIP_LOCAL_LEN + nlen + xlen;
  if (start > cd_off || z->csize > cd_off - start)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': data (%llu bytes at %llu) overlaps the central directory", fn, label,
                          (unsigned long long)z->csize, (unsigned long long)start);
  if (nlen != z->name_len) return attn_set_error(ATTN_ERR_IO, "%s: '%s': local and central names differ", fn, label);
  char *lname = malloc(nlen ? (size_t)nlen : 1);
  if (!lname) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  st = read_at(f, z->local_off + ZIP_LOCAL_LEN, lname, (size_t)nlen, fn, label, "the local name");
  bool same = st == ATTN_OK && memcmp(lname, z->name, (size_t)nlen) == 0;
  free(lname);
  if (st) return st;
  if (!same) return attn_set_error(ATTN_ERR_IO, "%s: '%s': local and central names differ", fn, label);
  attn__src s;
  if (z->method == 0) {
    if (z->csize != z->usize)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': stored member has compressed size %llu but size %llu", fn, label,
                            (unsigned long long)z->csize, (unsigned long long)z->usize);
    attn__src_stored(&s, f, z->usize, fn, label);
  } else {
    /* deflate expands at most ~1032:1; a bigger claim is a lie */
    if (z->usize / 1032 > z->csize + 1)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': size %llu is impossible for %llu deflated bytes", fn, label,
                            (unsigned long long)z->usize, (unsigned long long)z->csize);
    st = attn__src_deflated(&s, f, z->csize, z->usize, fn, label);
    if (st) return st;
  }
  s.crc_on = true;
  if (fseeko(f, (off_t)start, SEEK_SET) != 0) {
    attn__src_close(&s);
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': cannot seek to the data", fn, label);
  }
  attn_tensor *t = NULL;
  st = attn__npy_read(&s, &t, info);
  if (st == ATTN_OK) st = attn__src_finish(&s, z->crc);
  attn__src_close(&s);
  if (st) {
    attn_tensor_release(t);
    return st;
  }
  *out = t;
  return ATTN_OK;
}

attn_status attn__npz_read(FILE *f, uint64_t size, const char *fn, const char *label, attn_named_tensors **out) {
  uint64_t cd_off = 0, cd_size = 0, count = 0;
  attn_status st = zip_find_cd(f, size, fn, label, &cd_off, &cd_size, &count);
  if (st) return st;
  int n = (int)count;
  unsigned char *cd = malloc(cd_size ? (size_t)cd_size : 1);
  zip_entry *es = attn__calloc((size_t)n, sizeof *es);
  attn_named_tensors *nt = NULL;
  if (!cd || !es) {
    st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
    goto done;
  }
  if ((st = read_at(f, cd_off, cd, (size_t)cd_size, fn, label, "the central directory"))) goto done;
  if ((st = zip_parse_cd(cd, cd_size, n, cd_off, fn, label, es))) goto done;
  if ((st = attn__nt_alloc(fn, n, true, &nt))) goto done;
  for (int i = 0; i < n; i++) {
    size_t len = es[i].name_len;
    if (len >= 4 && memcmp(es[i].name + len - 4, ".npy", 4) == 0) len -= 4; /* like np.load's keys */
    nt->names[i] = malloc(len + 1);
    if (!nt->names[i]) {
      st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
      goto done;
    }
    memcpy(nt->names[i], es[i].name, len);
    nt->names[i][len] = '\0';
  }
  if ((st = attn__nt_check_names(fn, label, n, nt->names))) goto done;
  for (int i = 0; i < n; i++) {
    char member[512];
    snprintf(member, sizeof member, "%.300s[%.200s]", label, es[i].name);
    if ((st = zip_read_member(f, &es[i], cd_off, fn, member, &nt->tensors[i], &nt->info[i]))) goto done;
  }
done:
  for (int i = 0; es && i < n; i++) free(es[i].name);
  free(es);
  free(cd);
  return attn__nt_finish(st, nt, out);
}

attn_status attn_npz_load(const char *path, attn_named_tensors **out) {
  const char *fn = "npz_load";
  FILE *f;
  uint64_t size;
  attn_status st = attn__io_open_read(fn, path, &f, &size);
  if (st) return st;
  st = attn__npz_read(f, size, fn, path, out);
  fclose(f);
  return st;
}

/* ------------------------------------------------------------------------ */
/* .npz writing                                                              */

#define ZIP_DOS_DATE 0x0021 /* 1980-01-01: a fixed date keeps saves reproducible */

typedef struct {
  uint64_t off, usize;
  uint32_t crc;
  bool utf8;
} zip_written;

attn_status attn__npz_save(const char *path, const attn_named_tensors *nt, bool force_zip64) {
  const char *fn = "npz_save";
  attn_status st = attn__nt_check_save(fn, path, nt);
  if (st) return st;
  for (int i = 0; i < nt->n; i++) {
    if (!nt->tensors[i]) return attn_set_error(ATTN_ERR_ARG, "%s: '%s': tensor '%s' is NULL", fn, path, nt->names[i]);
    if (strlen(nt->names[i]) > 65535 - 4)
      return attn_set_error(ATTN_ERR_ARG, "%s: '%s': tensor name of %zu bytes is too long for zip", fn, path,
                            strlen(nt->names[i]));
    if (nt->tensors[i]->dtype == ATTN_BFLOAT16)
      return attn_set_error(ATTN_ERR_ARG,
                            "%s: '%s': tensor '%s': numpy has no bfloat16: save it as .safetensors (BF16) or "
                            "convert it with x:float()",
                            fn, path, nt->names[i]);
  }
  zip_written *w = attn__calloc((size_t)nt->n, sizeof *w);
  if (!w) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  attn__sink k;
  st = attn__sink_open(&k, fn, path);
  if (st) {
    free(w);
    return st;
  }
  unsigned char hdr[ATTN__NPY_HEADER_MAX], h[64];
  for (int i = 0; st == ATTN_OK && i < nt->n; i++) {
    const attn_tensor *t = nt->tensors[i];
    const char *name = nt->names[i];
    size_t nlen = strlen(name) + 4;
    size_t hlen = attn__npy_header(t->dtype, t->ndim, t->shape, hdr);
    uint64_t usize = hlen + (uint64_t)attn_tensor_numel(t) * attn_dtype_size(t->dtype);
    bool z64 = force_zip64 || usize >= 0xffffffffu;
    w[i].off = k.written;
    w[i].usize = usize;
    for (const char *c = name; *c; c++)
      if ((unsigned char)*c >= 0x80) w[i].utf8 = true;
    /* local header; the CRC is patched in once the data is written */
    attn__wr32(h, ZIP_LOCAL_SIG);
    attn__wr16(h + 4, z64 ? 45 : 20);
    attn__wr16(h + 6, w[i].utf8 ? 0x800 : 0);
    attn__wr16(h + 8, 0); /* stored */
    attn__wr16(h + 10, 0);
    attn__wr16(h + 12, ZIP_DOS_DATE);
    attn__wr32(h + 14, 0);
    attn__wr32(h + 18, z64 ? 0xffffffffu : (uint32_t)usize);
    attn__wr32(h + 22, z64 ? 0xffffffffu : (uint32_t)usize);
    attn__wr16(h + 26, (uint16_t)nlen);
    attn__wr16(h + 28, z64 ? 20 : 0);
    st = attn__sink_write(&k, h, ZIP_LOCAL_LEN);
    if (st == ATTN_OK) st = attn__sink_write(&k, name, nlen - 4);
    if (st == ATTN_OK) st = attn__sink_write(&k, ".npy", 4);
    if (st == ATTN_OK && z64) {
      attn__wr16(h, 1);
      attn__wr16(h + 2, 16);
      attn__wr64(h + 4, usize);
      attn__wr64(h + 12, usize);
      st = attn__sink_write(&k, h, 20);
    }
    if (st) break;
    k.crc_on = true;
    k.crc = crc32(0L, Z_NULL, 0);
    st = attn__sink_write(&k, hdr, hlen);
    if (st == ATTN_OK) st = attn__sink_write_tensor(&k, t);
    k.crc_on = false;
    w[i].crc = (uint32_t)k.crc;
    uint64_t end = k.written;
    if (st == ATTN_OK) st = attn__sink_seek(&k, w[i].off + 14);
    attn__wr32(h, w[i].crc);
    if (st == ATTN_OK) st = attn__sink_write(&k, h, 4);
    if (st == ATTN_OK) st = attn__sink_seek(&k, end);
    k.written = end;
  }
  /* central directory */
  uint64_t cd_off = k.written;
  for (int i = 0; st == ATTN_OK && i < nt->n; i++) {
    size_t nlen = strlen(nt->names[i]) + 4;
    bool big_size = force_zip64 || w[i].usize >= 0xffffffffu, big_off = force_zip64 || w[i].off >= 0xffffffffu;
    uint16_t xlen = (uint16_t)((big_size ? 16 : 0) + (big_off ? 8 : 0));
    attn__wr32(h, ZIP_CENTRAL_SIG);
    attn__wr16(h + 4, (3 << 8) | (xlen ? 45 : 20)); /* made by: Unix */
    attn__wr16(h + 6, xlen ? 45 : 20);
    attn__wr16(h + 8, w[i].utf8 ? 0x800 : 0);
    attn__wr16(h + 10, 0);
    attn__wr16(h + 12, 0);
    attn__wr16(h + 14, ZIP_DOS_DATE);
    attn__wr32(h + 16, w[i].crc);
    attn__wr32(h + 20, big_size ? 0xffffffffu : (uint32_t)w[i].usize);
    attn__wr32(h + 24, big_size ? 0xffffffffu : (uint32_t)w[i].usize);
    attn__wr16(h + 28, (uint16_t)nlen);
    attn__wr16(h + 30, xlen ? (uint16_t)(xlen + 4) : 0);
    attn__wr16(h + 32, 0);
    attn__wr16(h + 34, 0);
    attn__wr16(h + 36, 0);
    attn__wr32(h + 38, 0100644u << 16); /* regular file, rw-r--r-- */
    attn__wr32(h + 42, big_off ? 0xffffffffu : (uint32_t)w[i].off);
    st = attn__sink_write(&k, h, ZIP_CENTRAL_LEN);
    if (st == ATTN_OK) st = attn__sink_write(&k, nt->names[i], nlen - 4);
    if (st == ATTN_OK) st = attn__sink_write(&k, ".npy", 4);
    if (st == ATTN_OK && xlen) {
      unsigned char *q = h;
      attn__wr16(q, 1);
      attn__wr16(q + 2, xlen);
      q += 4;
      if (big_size) {
        attn__wr64(q, w[i].usize);
        attn__wr64(q + 8, w[i].usize);
        q += 16;
      }
      if (big_off) {
        attn__wr64(q, w[i].off);
        q += 8;
      }
      st = attn__sink_write(&k, h, (size_t)(q - h));
    }
  }
  uint64_t cd_size = k.written - cd_off;
  bool z64 = force_zip64 || nt->n >= 0xffff || cd_off >= 0xffffffffu || cd_size >= 0xffffffffu;
  if (st == ATTN_OK && z64) {
    uint64_t rec = k.written;
    unsigned char r[ZIP64_EOCD_LEN + ZIP64_LOCATOR_LEN];
    attn__wr32(r, ZIP64_EOCD_SIG);
    attn__wr64(r + 4, ZIP64_EOCD_LEN - 12);
    attn__wr16(r + 12, (3 << 8) | 45);
    attn__wr16(r + 14, 45);
    attn__wr32(r + 16, 0);
    attn__wr32(r + 20, 0);
    attn__wr64(r + 24, (uint64_t)nt->n);
    attn__wr64(r + 32, (uint64_t)nt->n);
    attn__wr64(r + 40, cd_size);
    attn__wr64(r + 48, cd_off);
    unsigned char *l = r + ZIP64_EOCD_LEN;
    attn__wr32(l, ZIP64_LOCATOR_SIG);
    attn__wr32(l + 4, 0);
    attn__wr64(l + 8, rec);
    attn__wr32(l + 16, 1);
    st = attn__sink_write(&k, r, sizeof r);
  }
  if (st == ATTN_OK) {
    unsigned char e[ZIP_EOCD_LEN];
    uint16_t cnt = z64 ? 0xffff : (uint16_t)nt->n;
    attn__wr32(e, ZIP_EOCD_SIG);
    attn__wr16(e + 4, 0);
    attn__wr16(e + 6, 0);
    attn__wr16(e + 8, cnt);
    attn__wr16(e + 10, cnt);
    attn__wr32(e + 12, z64 ? 0xffffffffu : (uint32_t)cd_size);
    attn__wr32(e + 16, z64 ? 0xffffffffu : (uint32_t)cd_off);
    attn__wr16(e + 20, 0);
    st = attn__sink_write(&k, e, sizeof e);
  }
  free(w);
  if (st) {
    attn__sink_abort(&k);
    return st;
  }
  return attn__sink_commit(&k);
}

attn_status attn_npz_save(const char *path, const attn_named_tensors *nt) { return attn__npz_save(path, nt, false); }
