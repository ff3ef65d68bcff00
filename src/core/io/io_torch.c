/* SPDX-License-Identifier: MIT */
/* torch's checkpoint container (torch.save, torch >= 1.6): a zip archive of
 * stored (uncompressed) records "<prefix>/data.pkl" (pickle protocol 2),
 * "<prefix>/data/<key>" (raw little-endian storages) and "<prefix>/version".
 * This file reads and writes the container and the storages; the pickle
 * itself is read and written by lua/attn/ptfile.lua (a restricted
 * unpickler that never runs code).
 *
 * Zip reading: the central directory (ZIP64 when the end record says so);
 * only stored records can be read (torch never compresses).  Writing: each
 * record's data starts on a 64-byte boundary (padding in the local header's
 * extra field, as torch does), CRC-32 set; records beyond 4 GiB are refused
 * (no ZIP64 writer: use safetensors for such files). */
#define _XOPEN_SOURCE 700
#define _FILE_OFFSET_BITS 64

#include "io/io_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The single table of torch storage names <-> file element types and the
   dtype a tensor of that dtype is saved as (ATTN_DTYPE_COUNT: cannot be
   saved from attn).  Loaded dtypes are attn__io_load_dtype's.  Extend here. */
static const struct {
  const char *name;
  attn__io_kind kind;
  int size;
  attn_dtype save_from;
} storage_types[] = {
    {"FloatStorage", ATTN__IO_F32, 4, ATTN_FLOAT32},     {"DoubleStorage", ATTN__IO_F64, 8, ATTN_FLOAT64},
    {"HalfStorage", ATTN__IO_F16, 2, ATTN_FLOAT16},      {"BFloat16Storage", ATTN__IO_BF16, 2, ATTN_BFLOAT16},
    {"LongStorage", ATTN__IO_I64, 8, ATTN_INT64},        {"IntStorage", ATTN__IO_I32, 4, ATTN_DTYPE_COUNT},
    {"ShortStorage", ATTN__IO_I16, 2, ATTN_DTYPE_COUNT}, {"CharStorage", ATTN__IO_I8, 1, ATTN_DTYPE_COUNT},
    {"ByteStorage", ATTN__IO_U8, 1, ATTN_DTYPE_COUNT},   {"BoolStorage", ATTN__IO_BOOL, 1, ATTN_BOOL},
};
#define NSTORAGE ((int)(sizeof storage_types / sizeof storage_types[0]))

const char *attn_pt_storage_name(attn_dtype dt) {
  for (int i = 0; i < NSTORAGE; i++)
    if (storage_types[i].save_from == dt) return storage_types[i].name;
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */

typedef struct pt_record {
  char *name;
  uint64_t csize, usize, local; /* local header offset */
  int method;
} pt_record;

struct attn_pt_archive {
  FILE *f;
  char *path;
  uint64_t size;
  int n;
  pt_record *rec;
  char *prefix; /* "archive/" */
  char *label;  /* scratch for messages */
};

static const char *FN = "load";

static attn_status rd_at(attn_pt_archive *a, uint64_t off, void *buf, size_t n, const char *what) {
  if (off > a->size || n > a->size - off)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': truncated torch file (%s lies past its end, %llu bytes)", FN, a->path,
                          what, (unsigned long long)a->size);
  if (fseeko(a->f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, n, a->f) != n)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': cannot read %s", FN, a->path, what);
  return ATTN_OK;
}

void attn_pt_close(attn_pt_archive *a) {
  if (!a) return;
  if (a->f) fclose(a->f);
  for (int i = 0; i < a->n; i++) free(a->rec[i].name);
  free(a->rec);
  free(a->prefix);
  free(a->path);
  free(a->label);
  free(a);
}

static attn_status find_eocd(attn_pt_archive *a, uint64_t *cd_off, uint64_t *cd_len, uint64_t *count) {
  enum { TAIL = 22 + 65535 };
  uint64_t len = a->size < TAIL ? a->size : TAIL;
  if (a->size < 22)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': truncated torch file (%llu bytes, no zip directory)", FN, a->path,
                          (unsigned long long)a->size);
  unsigned char *b = malloc(len);
  if (!b) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
  attn_status st = rd_at(a, a->size - len, b, len, "the zip end record");
  int64_t at = -1;
  for (int64_t i = (int64_t)len - 22; st == ATTN_OK && i >= 0; i--)
    if (attn__rd32(b + i) == 0x06054b50u) {
      at = i;
      break;
    }
  if (st == ATTN_OK && at < 0)
    st = attn_set_error(ATTN_ERR_IO,
                        "%s: '%s': truncated or not a torch zip file (no zip end record; torch.save before 1.6 "
                        "wrote a legacy format attn cannot read)",
                        FN, a->path);
  if (st == ATTN_OK) {
    *count = attn__rd16(b + at + 10);
    *cd_len = attn__rd32(b + at + 12);
    *cd_off = attn__rd32(b + at + 16);
    if ((*count == 0xFFFF || *cd_len == 0xFFFFFFFFu || *cd_off == 0xFFFFFFFFu) && at >= 20 &&
        attn__rd32(b + at - 20) == 0x07064b50u) {
      unsigned char z[56];
      st = rd_at(a, attn__rd64(b + at - 20 + 8), z, sizeof z, "the zip64 end record");
      if (st == ATTN_OK && attn__rd32(z) != 0x06064b50u)
        st = attn_set_error(ATTN_ERR_IO, "%s: '%s': bad zip64 end record", FN, a->path);
      if (st == ATTN_OK) {
        *count = attn__rd64(z + 32);
        *cd_len = attn__rd64(z + 40);
        *cd_off = attn__rd64(z + 48);
      }
    }
  }
  free(b);
  return st;
}

static attn_status parse_cd(attn_pt_archive *a, const unsigned char *cd, uint64_t len, uint64_t count) {
  if (count > len / 46)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad zip directory (%llu records in %llu bytes)", FN, a->path,
                          (unsigned long long)count, (unsigned long long)len);
  a->rec = calloc(count ? count : 1, sizeof *a->rec);
  if (!a->rec) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
  uint64_t p = 0;
  for (uint64_t i = 0; i < count; i++) {
    if (len - p < 46 || attn__rd32(cd + p) != 0x02014b50u)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad zip directory record %llu", FN, a->path, (unsigned long long)i);
    pt_record *r = &a->rec[a->n];
    r->method = attn__rd16(cd + p + 10);
    r->csize = attn__rd32(cd + p + 20);
    r->usize = attn__rd32(cd + p + 24);
    r->local = attn__rd32(cd + p + 42);
    size_t nl = attn__rd16(cd + p + 28), xl = attn__rd16(cd + p + 30), cl = attn__rd16(cd + p + 32);
    if (len - p - 46 < nl + xl + cl)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad zip directory record %llu", FN, a->path, (unsigned long long)i);
    r->name = malloc(nl + 1);
    if (!r->name) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
    memcpy(r->name, cd + p + 46, nl);
    r->name[nl] = 0;
    a->n++;
    /* ZIP64 extra: the fields that are 0xFFFFFFFF, in this order */
    const unsigned char *x = cd + p + 46 + nl, *xe = x + xl;
    while (xe - x >= 4) {
      unsigned id = attn__rd16(x), sz = attn__rd16(x + 2);
      if ((size_t)(xe - x - 4) < sz) break;
      if (id == 1) {
        const unsigned char *q = x + 4, *qe = q + sz;
        if (r->usize == 0xFFFFFFFFu && qe - q >= 8) r->usize = attn__rd64(q), q += 8;
        if (r->csize == 0xFFFFFFFFu && qe - q >= 8) r->csize = attn__rd64(q), q += 8;
        if (r->local == 0xFFFFFFFFu && qe - q >= 8) r->local = attn__rd64(q);
      }
      x += 4 + sz;
    }
    p += 46 + nl + xl + cl;
  }
  return ATTN_OK;
}

attn_status attn_pt_open(const char *path, attn_pt_archive **out) {
  *out = NULL;
  attn_pt_archive *a = calloc(1, sizeof *a);
  if (!a) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
  attn_status st = attn__io_open_read(FN, path, &a->f, &a->size);
  if (st == ATTN_OK) {
    a->path = strdup(path);
    if (!a->path) st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
  }
  unsigned char magic[4];
  if (st == ATTN_OK && a->size >= 4 && rd_at(a, 0, magic, 4, "the magic") == ATTN_OK &&
      memcmp(magic, "PK\x03\x04", 4) != 0) {
    /* the legacy format starts with a pickled magic number (protocol 2) */
    if (magic[0] == 0x80 && magic[1] == 0x02)
      st = attn_set_error(ATTN_ERR_IO,
                          "%s: '%s': a legacy (pre-1.6, non-zip) torch file; attn reads only the zip format: "
                          "re-save it with torch.save(obj, path) in torch >= 1.6",
                          FN, path);
    else
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': not a torch zip file (it starts with %02x %02x %02x %02x)", FN, path,
                          magic[0], magic[1], magic[2], magic[3]);
  }
  uint64_t cd_off = 0, cd_len = 0, count = 0;
  if (st == ATTN_OK) st = find_eocd(a, &cd_off, &cd_len, &count);
  if (st == ATTN_OK && (cd_off > a->size || cd_len > a->size - cd_off))
    st = attn_set_error(ATTN_ERR_IO, "%s: '%s': truncated torch file (the zip directory lies past its end)", FN, path);
  unsigned char *cd = NULL;
  if (st == ATTN_OK) {
    cd = malloc(cd_len ? cd_len : 1);
    if (!cd) st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
  }
  if (st == ATTN_OK) st = rd_at(a, cd_off, cd, cd_len, "the zip directory");
  if (st == ATTN_OK) st = parse_cd(a, cd, cd_len, count);
  free(cd);
  /* the prefix: the record "<prefix>data.pkl" */
  for (int i = 0; st == ATTN_OK && i < a->n && !a->prefix; i++) {
    const char *nm = a->rec[i].name, *sl = strrchr(nm, '/');
    if (sl && strcmp(sl + 1, "data.pkl") == 0 && strchr(nm, '/') == sl) {
      a->prefix = strndup(nm, (size_t)(sl - nm + 1));
      if (!a->prefix) st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
    }
  }
  if (st == ATTN_OK && !a->prefix)
    st = attn_set_error(ATTN_ERR_IO, "%s: '%s': a zip file without <name>/data.pkl, so not written by torch.save", FN,
                        path);
  if (st != ATTN_OK) {
    attn_pt_close(a);
    return st;
  }
  *out = a;
  return ATTN_OK;
}

/* The record prefix+name, positioned at its data; *size its length. */
static attn_status seek_record(attn_pt_archive *a, const char *name, uint64_t *size) {
  size_t pl = strlen(a->prefix);
  const pt_record *r = NULL;
  for (int i = 0; i < a->n && !r; i++)
    if (strncmp(a->rec[i].name, a->prefix, pl) == 0 && strcmp(a->rec[i].name + pl, name) == 0) r = &a->rec[i];
  if (!r)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': no record '%s%s' in the torch file", FN, a->path, a->prefix, name);
  if (r->method != 0)
    return attn_set_error(ATTN_ERR_IO,
                          "%s: '%s': record '%s' is compressed (zip method %d); torch.save stores records "
                          "uncompressed and attn reads only those",
                          FN, a->path, r->name, r->method);
  unsigned char h[30];
  attn_status st = rd_at(a, r->local, h, sizeof h, "a zip local header");
  if (st) return st;
  if (attn__rd32(h) != 0x04034b50u)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad zip local header for '%s'", FN, a->path, r->name);
  uint64_t data = r->local + 30 + attn__rd16(h + 26) + attn__rd16(h + 28);
  if (data > a->size || r->usize > a->size - data)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': truncated torch file (record '%s' ends past the end of the file)", FN,
                          a->path, r->name);
  if (fseeko(a->f, (off_t)data, SEEK_SET) != 0)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': cannot seek to '%s'", FN, a->path, r->name);
  *size = r->usize;
  return ATTN_OK;
}

attn_status attn_pt_read_record(attn_pt_archive *a, const char *name, char **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  uint64_t size;
  attn_status st = seek_record(a, name, &size);
  if (st) return st;
  if (size > ((uint64_t)1 << 31))
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': record '%s' is too large (%llu bytes)", FN, a->path, name,
                          (unsigned long long)size);
  char *b = malloc((size_t)size + 1);
  if (!b) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
  if (fread(b, 1, (size_t)size, a->f) != size) {
    free(b);
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': cannot read record '%s'", FN, a->path, name);
  }
  b[size] = 0;
  *buf = b;
  *len = (size_t)size;
  return ATTN_OK;
}

attn_status attn_pt_storage(attn_pt_archive *a, const char *key, const char *storage_type, int64_t numel,
                            attn_tensor **out) {
  *out = NULL;
  int k = -1;
  for (int i = 0; i < NSTORAGE && k < 0; i++)
    if (strcmp(storage_types[i].name, storage_type) == 0) k = i;
  if (k < 0)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': storage type torch.%s is not supported", FN, a->path, storage_type);
  if (numel < 0 || numel > INT64_MAX / 8)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad storage size %lld", FN, a->path, (long long)numel);
  if (strchr(key, '/') || !*key) return attn_set_error(ATTN_ERR_IO, "%s: '%s': bad storage key '%s'", FN, a->path, key);
  size_t kl = strlen(key);
  char *name = malloc(kl + 6);
  if (!name) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
  memcpy(name, "data/", 5);
  memcpy(name + 5, key, kl + 1);
  uint64_t size;
  attn_status st = seek_record(a, name, &size);
  attn__io_dtype dt = {storage_types[k].kind, storage_types[k].size, false};
  if (st == ATTN_OK && size != (uint64_t)numel * (uint64_t)dt.size)
    st = attn_set_error(ATTN_ERR_IO, "%s: '%s': record '%s%s' holds %llu bytes, the pickle says %lld x %d", FN, a->path,
                        a->prefix, name, (unsigned long long)size, (long long)numel, dt.size);
  attn_tensor *t = NULL;
  if (st == ATTN_OK) st = attn_empty_dtype(attn__io_load_dtype(dt), 1, &numel, &t);
  if (st == ATTN_OK) {
    free(a->label);
    size_t ll = strlen(a->path) + strlen(a->prefix) + strlen(name) + 3;
    a->label = malloc(ll);
    if (!a->label)
      st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", FN);
    else
      snprintf(a->label, ll, "%s[%s%s]", a->path, a->prefix, name);
  }
  if (st == ATTN_OK) {
    attn__src s;
    attn__src_stored(&s, a->f, size, FN, a->label);
    /* in blocks of 4 Mi elements, polling the deadline between them */
    const int64_t block = (int64_t)1 << 22;
    const size_t es = attn_dtype_size(t->dtype);
    for (int64_t i = 0; i < numel && st == ATTN_OK; i += block) {
      if (i > 0 && attn__cancelled()) st = attn__limit_error(FN);
      int64_t k = numel - i < block ? numel - i : block;
      if (st == ATTN_OK)
        st = attn__src_read_elems(&s, dt, (char *)attn_tensor_ptr(t) + (size_t)i * es, t->dtype, k, "a storage");
    }
    attn__src_close(&s);
  }
  free(name);
  if (st != ATTN_OK) {
    attn_tensor_release(t);
    return st;
  }
  *out = t;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

typedef struct pt_wrec {
  char *name;
  uint32_t crc, size, local;
} pt_wrec;

struct attn_pt_writer {
  attn__sink k;
  char *path; /* the sink borrows it */
  int n, cap;
  pt_wrec *rec;
};

static const char *SFN = "save";

attn_status attn_pt_writer_open(const char *path, attn_pt_writer **out) {
  *out = NULL;
  attn_pt_writer *w = calloc(1, sizeof *w);
  if (!w) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", SFN);
  w->path = path ? strdup(path) : NULL;
  if (path && !w->path) {
    free(w);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", SFN);
  }
  attn_status st = attn__sink_open(&w->k, SFN, w->path);
  if (st) {
    free(w->path);
    free(w);
    return st;
  }
  *out = w;
  return ATTN_OK;
}

static void free_writer(attn_pt_writer *w) {
  for (int i = 0; i < w->n; i++) free(w->rec[i].name);
  free(w->rec);
  free(w->path);
  free(w);
}

void attn_pt_writer_abort(attn_pt_writer *w) {
  if (!w) return;
  attn__sink_abort(&w->k);
  free_writer(w);
}

static attn_status too_big(attn_pt_writer *w) {
  return attn_set_error(ATTN_ERR_ARG, "%s: '%s': over 4 GiB; attn writes .pt files up to 4 GiB (use .safetensors)", SFN,
                        w->k.path);
}

/* Local header (data 64-byte aligned) for a record of size bytes, crc. */
static attn_status begin_record(attn_pt_writer *w, const char *name, uint64_t size, uLong crc) {
  size_t nl = strlen(name);
  if (nl > 0xFFFF) return attn_set_error(ATTN_ERR_ARG, "%s: record name too long", SFN);
  if (w->k.written + 30 + nl + 68 + size >= 0xFFFFFFFFu) return too_big(w);
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 16;
    pt_wrec *r = realloc(w->rec, (size_t)cap * sizeof *r);
    if (!r) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", SFN);
    w->rec = r;
    w->cap = cap;
  }
  pt_wrec *r = &w->rec[w->n];
  r->name = strdup(name);
  if (!r->name) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", SFN);
  r->crc = (uint32_t)crc;
  r->size = (uint32_t)size;
  r->local = (uint32_t)w->k.written;
  w->n++;
  size_t pad = (64 - (w->k.written + 30 + nl + 4) % 64) % 64;
  unsigned char h[30 + 4 + 64];
  memset(h, 0, sizeof h);
  attn__wr32(h, 0x04034b50u);
  attn__wr16(h + 4, 20);
  attn__wr32(h + 14, r->crc);
  attn__wr32(h + 18, r->size);
  attn__wr32(h + 22, r->size);
  attn__wr16(h + 26, (uint16_t)nl);
  attn__wr16(h + 28, (uint16_t)(4 + pad));
  attn_status st = attn__sink_write(&w->k, h, 30);
  if (!st) st = attn__sink_write(&w->k, name, nl);
  unsigned char x[4 + 64];
  memset(x, 'Z', sizeof x);
  attn__wr16(x, 0x4246); /* "FB", torch's padding field */
  attn__wr16(x + 2, (uint16_t)pad);
  if (!st) st = attn__sink_write(&w->k, x, 4 + pad);
  return st;
}

static uLong crc_of(const void *p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const unsigned char *b = p;
  while (n > 0) {
    size_t m = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
    c = crc32(c, b, (uInt)m);
    b += m;
    n -= m;
  }
  return c;
}

attn_status attn_pt_writer_add(attn_pt_writer *w, const char *name, const void *data, size_t n) {
  attn_status st = begin_record(w, name, n, crc_of(data, n));
  if (!st) st = attn__sink_write(&w->k, data, n);
  return st;
}

attn_status attn_pt_writer_add_tensor(attn_pt_writer *w, const char *name, const attn_tensor *t) {
  if (!attn_pt_storage_name(t->dtype))
    return attn_set_error(ATTN_ERR_ARG, "%s: '%s': cannot save a %s tensor to a .pt file", SFN, w->k.path,
                          attn_dtype_name(t->dtype));
  if (!attn__io_host_little_endian())
    return attn_set_error(ATTN_ERR_ARG, "%s: '%s': .pt files are written on little-endian hosts only", SFN, w->k.path);
  attn_tensor *c = NULL;
  attn_status st = attn_contiguous(t, &c);
  if (st) return st;
  size_t n = (size_t)attn_tensor_numel(c) * attn_dtype_size(c->dtype);
  const void *p = attn_tensor_ptr(c);
  st = attn_pt_writer_add(w, name, p, n);
  attn_tensor_release(c);
  return st;
}

attn_status attn_pt_writer_commit(attn_pt_writer *w) {
  attn_status st = ATTN_OK;
  uint64_t cd = w->k.written;
  for (int i = 0; i < w->n && !st; i++) {
    const pt_wrec *r = &w->rec[i];
    size_t nl = strlen(r->name);
    unsigned char h[46];
    memset(h, 0, sizeof h);
    attn__wr32(h, 0x02014b50u);
    attn__wr16(h + 4, 20);
    attn__wr16(h + 6, 20);
    attn__wr32(h + 16, r->crc);
    attn__wr32(h + 20, r->size);
    attn__wr32(h + 24, r->size);
    attn__wr16(h + 28, (uint16_t)nl);
    attn__wr32(h + 42, r->local);
    st = attn__sink_write(&w->k, h, sizeof h);
    if (!st) st = attn__sink_write(&w->k, r->name, nl);
  }
  uint64_t cdlen = w->k.written - cd;
  if (!st && (w->k.written >= 0xFFFFFFFFu || w->n >= 0xFFFF)) st = too_big(w);
  if (!st) {
    unsigned char e[22];
    memset(e, 0, sizeof e);
    attn__wr32(e, 0x06054b50u);
    attn__wr16(e + 8, (uint16_t)w->n);
    attn__wr16(e + 10, (uint16_t)w->n);
    attn__wr32(e + 12, (uint32_t)cdlen);
    attn__wr32(e + 16, (uint32_t)cd);
    st = attn__sink_write(&w->k, e, sizeof e);
  }
  if (!st)
    st = attn__sink_commit(&w->k);
  else
    attn__sink_abort(&w->k);
  free_writer(w);
  return st;
}
