/* SPDX-License-Identifier: MIT */
/* Weight files, common parts: dtype conversion, bounded (optionally
   inflating) reads, atomic writes through a temporary file, and the
   named-tensor list. */
#define _XOPEN_SOURCE 700
#define _FILE_OFFSET_BITS 64

#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Dtype conversion                                                          */

bool attn__io_host_little_endian(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* IEEE half -> float: every half is exactly representable. */
float attn__io_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | man << 13); /* inf, NaN (payload kept) */
  if (exp != 0) return bits_to_float(sign | (exp + 112) << 23 | man << 13);
  /* zero or subnormal: man * 2^-24, exact in float */
  float v = (float)man * 0x1p-24f;
  return sign ? -v : v;
}

/* bfloat16 is the top half of a float32. */
float attn__io_bf16_to_float(uint16_t h) { return bits_to_float((uint32_t)h << 16); }

static inline uint64_t load_uint(const unsigned char *p, int size, bool big) {
  uint64_t v = 0;
  if (big)
    for (int i = 0; i < size; i++) v = v << 8 | p[i];
  else
    for (int i = size - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* src: n elements of dt, packed; dst: n floats. */
void attn__io_convert(attn__io_dtype dt, const unsigned char *src, float *dst, size_t n) {
  const int sz = dt.size;
  const bool big = dt.big_endian;
  switch (dt.kind) {
  case ATTN__IO_F32:
    for (size_t i = 0; i < n; i++) dst[i] = bits_to_float((uint32_t)load_uint(src + i * 4, 4, big));
    break;
  case ATTN__IO_F64:
    for (size_t i = 0; i < n; i++) {
      uint64_t u = load_uint(src + i * 8, 8, big);
      double d;
      memcpy(&d, &u, sizeof d);
      dst[i] = (float)d;
    }
    break;
  case ATTN__IO_F16:
    for (size_t i = 0; i < n; i++) dst[i] = attn__io_half_to_float((uint16_t)load_uint(src + i * 2, 2, big));
    break;
  case ATTN__IO_BF16:
    for (size_t i = 0; i < n; i++) dst[i] = attn__io_bf16_to_float((uint16_t)load_uint(src + i * 2, 2, big));
    break;
  case ATTN__IO_BOOL:
    for (size_t i = 0; i < n; i++) dst[i] = src[i] ? 1.0f : 0.0f;
    break;
  case ATTN__IO_I8:
    for (size_t i = 0; i < n; i++) dst[i] = (float)(int8_t)src[i];
    break;
  case ATTN__IO_U8:
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
    break;
  case ATTN__IO_I16:
    for (size_t i = 0; i < n; i++) dst[i] = (float)(int16_t)load_uint(src + i * 2, 2, big);
    break;
  case ATTN__IO_U16:
    for (size_t i = 0; i < n; i++) dst[i] = (float)(uint16_t)load_uint(src + i * 2, 2, big);
    break;
  case ATTN__IO_I32:
    for (size_t i = 0; i < n; i++) dst[i] = (float)(int32_t)load_uint(src + i * 4, 4, big);
    break;
  case ATTN__IO_U32:
    for (size_t i = 0; i < n; i++) dst[i] = (float)(uint32_t)load_uint(src + i * 4, 4, big);
    break;
  case ATTN__IO_I64:
    for (size_t i = 0; i < n; i++) dst[i] = (float)(int64_t)load_uint(src + i * 8, 8, big);
    break;
  case ATTN__IO_U64:
    for (size_t i = 0; i < n; i++) dst[i] = (float)load_uint(src + i * 8, 8, big);
    break;
  }
  (void)sz;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */

static const char *errstr(int err, char *buf, size_t size) {
  if (strerror_r(err, buf, size) != 0) snprintf(buf, size, "error %d", err);
  return buf;
}

attn_status attn__io_open_read(const char *fn, const char *path, FILE **out, uint64_t *size) {
  char eb[128];
  if (!path) return attn_set_error(ATTN_ERR_ARG, "%s: path is NULL", fn);
  FILE *f = fopen(path, "rb");
  if (!f) return attn_set_error(ATTN_ERR_IO, "%s: cannot open '%s': %s", fn, path, errstr(errno, eb, sizeof eb));
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    int e = errno;
    fclose(f);
    return attn_set_error(ATTN_ERR_IO, "%s: cannot stat '%s': %s", fn, path, errstr(e, eb, sizeof eb));
  }
  if (!S_ISREG(st.st_mode)) {
    fclose(f);
    return attn_set_error(ATTN_ERR_IO, "%s: '%s' is not a regular file", fn, path);
  }
  *out = f;
  *size = (uint64_t)st.st_size;
  return ATTN_OK;
}

void attn__src_stored(attn__src *s, FILE *f, uint64_t size, const char *fn, const char *label) {
  memset(s, 0, sizeof *s);
  s->f = f;
  s->avail = size;
  s->fn = fn;
  s->label = label;
  s->crc = crc32(0L, Z_NULL, 0);
}

#define ZCHUNK (64 * 1024)

attn_status attn__src_deflated(attn__src *s, FILE *f, uint64_t csize, uint64_t usize, const char *fn,
                               const char *label) {
  attn__src_stored(s, f, usize, fn, label);
  s->inflating = true;
  s->zleft = csize;
  s->zin = malloc(ZCHUNK);
  if (!s->zin) return attn_set_error(ATTN_ERR_NOMEM, "%s: '%s': out of memory", fn, label);
  if (inflateInit2(&s->z, -MAX_WBITS) != Z_OK) { /* raw deflate, as in zip */
    free(s->zin);
    s->zin = NULL;
    return attn_set_error(ATTN_ERR_NOMEM, "%s: '%s': cannot start zlib's inflate", fn, label);
  }
  s->zinit = true;
  return ATTN_OK;
}

void attn__src_close(attn__src *s) {
  if (s->zinit) inflateEnd(&s->z);
  s->zinit = false;
  free(s->zin);
  s->zin = NULL;
}

/* Fills dst with exactly n inflated bytes (n <= UINT_MAX). */
static attn_status inflate_some(attn__src *s, unsigned char *dst, size_t n, const char *what) {
  s->z.next_out = dst;
  s->z.avail_out = (uInt)n;
  while (s->z.avail_out > 0) {
    if (s->z.avail_in == 0 && s->zleft > 0) {
      size_t want = s->zleft < ZCHUNK ? (size_t)s->zleft : ZCHUNK;
      size_t got = fread(s->zin, 1, want, s->f);
      if (got != want)
        return attn_set_error(ATTN_ERR_IO, "%s: '%s': file ends inside the compressed data (%s)", s->fn, s->label,
                              what);
      s->zleft -= got;
      s->z.next_in = s->zin;
      s->z.avail_in = (uInt)got;
    }
    int ret = inflate(&s->z, Z_NO_FLUSH);
    if (ret == Z_STREAM_END && s->z.avail_out > 0)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': compressed data ends inside %s", s->fn, s->label, what);
    if (ret == Z_BUF_ERROR && s->z.avail_in == 0 && s->zleft == 0)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': compressed data is truncated (inside %s)", s->fn, s->label, what);
    if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR)
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': corrupt compressed data (%s)", s->fn, s->label,
                            s->z.msg ? s->z.msg : "zlib error");
  }
  return ATTN_OK;
}

attn_status attn__src_read(attn__src *s, void *dst, size_t n, const char *what) {
  if (n > s->avail)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': file ends inside %s (%llu bytes left, %llu needed)", s->fn, s->label,
                          what, (unsigned long long)s->avail, (unsigned long long)n);
  unsigned char *p = dst;
  size_t left = n;
  while (left > 0) {
    size_t k = left < ((size_t)1 << 30) ? left : ((size_t)1 << 30);
    if (s->inflating) {
      attn_status st = inflate_some(s, p, k, what);
      if (st) return st;
    } else if (fread(p, 1, k, s->f) != k) {
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': read failed inside %s%s", s->fn, s->label, what,
                            feof(s->f) ? " (file shrank while reading)" : "");
    }
    if (s->crc_on) s->crc = crc32(s->crc, p, (uInt)k);
    p += k;
    left -= k;
  }
  s->avail -= n;
  return ATTN_OK;
}

attn_status attn__src_read_floats(attn__src *s, attn__io_dtype dt, float *dst, int64_t n, const char *what) {
  if (n <= 0) return ATTN_OK;
  if (dt.kind == ATTN__IO_F32 && dt.big_endian == !attn__io_host_little_endian())
    return attn__src_read(s, dst, (size_t)n * 4, what); /* native: straight into the storage */
  /* Other dtypes go through a small buffer, so no second copy of the data. */
  enum { BUF = 64 * 1024 };
  unsigned char *buf = malloc(BUF);
  if (!buf) return attn_set_error(ATTN_ERR_NOMEM, "%s: '%s': out of memory", s->fn, s->label);
  int64_t per = BUF / dt.size;
  attn_status st = ATTN_OK;
  for (int64_t i = 0; i < n && st == ATTN_OK; i += per) {
    int64_t k = n - i < per ? n - i : per;
    st = attn__src_read(s, buf, (size_t)k * (size_t)dt.size, what);
    if (st == ATTN_OK) attn__io_convert(dt, buf, dst + i, (size_t)k);
  }
  free(buf);
  return st;
}

attn_dtype attn__io_load_dtype(attn__io_dtype dt) {
  switch (dt.kind) {
  case ATTN__IO_F32:
  case ATTN__IO_F64:
  case ATTN__IO_F16:
  case ATTN__IO_BF16: return ATTN_FLOAT32;
  case ATTN__IO_BOOL: return ATTN_BOOL;
  case ATTN__IO_U64: return ATTN_FLOAT32; /* no uint64 dtype: rounds, as before */
  default: return ATTN_INT64;
  }
}

/* Integer and bool file elements -> int64 / bool (exact; U64 above
   INT64_MAX wraps, as numpy's astype does). */
static void convert_ints(attn__io_dtype dt, const unsigned char *src, void *dst_, attn_dtype out, size_t n) {
  const bool big = dt.big_endian;
  for (size_t i = 0; i < n; i++) {
    const unsigned char *p = src + i * (size_t)dt.size;
    int64_t v;
    switch (dt.kind) {
    case ATTN__IO_BOOL: v = p[0] != 0; break;
    case ATTN__IO_I8: v = (int8_t)p[0]; break;
    case ATTN__IO_U8: v = p[0]; break;
    case ATTN__IO_I16: v = (int16_t)load_uint(p, 2, big); break;
    case ATTN__IO_U16: v = (uint16_t)load_uint(p, 2, big); break;
    case ATTN__IO_I32: v = (int32_t)load_uint(p, 4, big); break;
    case ATTN__IO_U32: v = (uint32_t)load_uint(p, 4, big); break;
    default: v = (int64_t)load_uint(p, 8, big); break; /* I64, U64 */
    }
    if (out == ATTN_BOOL)
      ((bool *)dst_)[i] = v != 0;
    else
      ((int64_t *)dst_)[i] = v;
  }
}

attn_status attn__src_read_elems(attn__src *s, attn__io_dtype dt, void *dst, attn_dtype out, int64_t n,
                                 const char *what) {
  if (out == ATTN_FLOAT32) return attn__src_read_floats(s, dt, dst, n, what);
  if (n <= 0) return ATTN_OK;
  if (out == ATTN_INT64 && dt.kind == ATTN__IO_I64 && dt.big_endian == !attn__io_host_little_endian())
    return attn__src_read(s, dst, (size_t)n * 8, what); /* native: straight into the storage */
  enum { BUF = 64 * 1024 };
  unsigned char *buf = malloc(BUF);
  if (!buf) return attn_set_error(ATTN_ERR_NOMEM, "%s: '%s': out of memory", s->fn, s->label);
  int64_t per = BUF / dt.size;
  const size_t es = attn_dtype_size(out);
  attn_status st = ATTN_OK;
  for (int64_t i = 0; i < n && st == ATTN_OK; i += per) {
    int64_t k = n - i < per ? n - i : per;
    st = attn__src_read(s, buf, (size_t)k * (size_t)dt.size, what);
    if (st == ATTN_OK) convert_ints(dt, buf, (char *)dst + (size_t)i * es, out, (size_t)k);
  }
  free(buf);
  return st;
}

attn_status attn__src_finish(attn__src *s, uLong expected_crc) {
  if (s->avail != 0)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': %llu unexpected bytes after the data", s->fn, s->label,
                          (unsigned long long)s->avail);
  if (s->inflating) {
    /* The deflate stream must end exactly here. */
    unsigned char extra;
    for (;;) {
      if (s->z.avail_in == 0 && s->zleft > 0) {
        size_t want = s->zleft < ZCHUNK ? (size_t)s->zleft : ZCHUNK;
        size_t got = fread(s->zin, 1, want, s->f);
        if (got != want)
          return attn_set_error(ATTN_ERR_IO, "%s: '%s': file ends inside the compressed data", s->fn, s->label);
        s->zleft -= got;
        s->z.next_in = s->zin;
        s->z.avail_in = (uInt)got;
      }
      s->z.next_out = &extra;
      s->z.avail_out = 1;
      int ret = inflate(&s->z, Z_NO_FLUSH);
      if (s->z.avail_out == 0)
        return attn_set_error(ATTN_ERR_IO, "%s: '%s': compressed data holds more bytes than declared", s->fn, s->label);
      if (ret == Z_STREAM_END) break;
      if (ret == Z_BUF_ERROR && s->z.avail_in == 0 && s->zleft == 0)
        return attn_set_error(ATTN_ERR_IO, "%s: '%s': compressed data is truncated", s->fn, s->label);
      if (ret != Z_OK && ret != Z_BUF_ERROR)
        return attn_set_error(ATTN_ERR_IO, "%s: '%s': corrupt compressed data (%s)", s->fn, s->label,
                              s->z.msg ? s->z.msg : "zlib error");
    }
  }
  if (s->crc_on && s->crc != expected_crc)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': CRC-32 mismatch (stored %08lx, data %08lx)", s->fn, s->label,
                          (unsigned long)expected_crc, (unsigned long)s->crc);
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

/* The permission bits a fresh file would get: 0666 minus the umask (read
   from /proc so the process-wide umask is never changed). */
static mode_t new_file_mode(void) {
  mode_t mask = 022;
  FILE *f = fopen("/proc/self/status", "r");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      unsigned m;
      if (sscanf(line, "Umask: %o", &m) == 1) {
        mask = (mode_t)m;
        break;
      }
    }
    fclose(f);
  }
  return 0666 & ~mask;
}

attn_status attn__sink_open(attn__sink *k, const char *fn, const char *path) {
  char eb[128];
  memset(k, 0, sizeof *k);
  k->fn = fn;
  k->path = path;
  k->crc = crc32(0L, Z_NULL, 0);
  if (!path || !*path) return attn_set_error(ATTN_ERR_ARG, "%s: path is empty", fn);
  size_t len = strlen(path);
  k->tmp = malloc(len + sizeof ".tmp.XXXXXX");
  if (!k->tmp) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  memcpy(k->tmp, path, len);
  memcpy(k->tmp + len, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
  int fd = mkstemp(k->tmp);
  if (fd < 0) {
    int e = errno;
    free(k->tmp);
    k->tmp = NULL;
    return attn_set_error(ATTN_ERR_IO, "%s: cannot create a temporary file beside '%s': %s", fn, path,
                          errstr(e, eb, sizeof eb));
  }
  /* mkstemp makes 0600; give the file the mode it replaces, or a new file's. */
  struct stat st;
  mode_t mode = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (st.st_mode & 07777) : new_file_mode();
  (void)fchmod(fd, mode);
  k->f = fdopen(fd, "wb");
  if (!k->f) {
    int e = errno;
    close(fd);
    unlink(k->tmp);
    free(k->tmp);
    k->tmp = NULL;
    return attn_set_error(ATTN_ERR_IO, "%s: cannot open a temporary file beside '%s': %s", fn, path,
                          errstr(e, eb, sizeof eb));
  }
  return ATTN_OK;
}

static attn_status write_failed(attn__sink *k, int e) {
  char eb[128];
  return attn_set_error(ATTN_ERR_IO, "%s: writing '%s' failed: %s", k->fn, k->path,
                        e ? errstr(e, eb, sizeof eb) : "short write");
}

attn_status attn__sink_write(attn__sink *k, const void *p, size_t n) {
  if (n == 0) return ATTN_OK;
  errno = 0;
  if (fwrite(p, 1, n, k->f) != n) return write_failed(k, errno);
  if (k->crc_on) {
    const unsigned char *b = p;
    for (size_t left = n; left > 0;) {
      size_t c = left < ((size_t)1 << 30) ? left : ((size_t)1 << 30);
      k->crc = crc32(k->crc, b, (uInt)c);
      b += c;
      left -= c;
    }
  }
  k->written += n;
  return ATTN_OK;
}

attn_status attn__sink_write_tensor(attn__sink *k, const attn_tensor *t) {
  int64_t n = attn_tensor_numel(t);
  if (n == 0) return ATTN_OK;
  bool le = attn__io_host_little_endian();
  const size_t es = attn_dtype_size(t->dtype);
  if (t->dtype != ATTN_FLOAT32) {
    /* int64 / bool: row-major little-endian bytes through a small buffer */
    if ((le || es == 1) && attn_tensor_is_contiguous(t)) return attn__sink_write(k, attn_tensor_ptr(t), (size_t)n * es);
    enum { EBUF = 8192 };
    unsigned char *eb = malloc(EBUF * 8);
    if (!eb) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", k->fn);
    attn__iter it;
    attn__iter_init(&it, t);
    const char *ebase = t->storage->data;
    attn_status est = ATTN_OK;
    int64_t edone = 0;
    while (edone < n && est == ATTN_OK) {
      int64_t c = n - edone < EBUF ? n - edone : EBUF;
      for (int64_t i = 0; i < c; i++) {
        const char *src = ebase + (size_t)it.pos * es;
        if (es == 8) {
          uint64_t u;
          memcpy(&u, src, 8);
          for (int b = 0; b < 8; b++) eb[i * 8 + b] = (unsigned char)(u >> (8 * b));
        } else {
          eb[i] = (unsigned char)(*(const bool *)src ? 1 : 0);
        }
        attn__iter_next(&it);
      }
      est = attn__sink_write(k, eb, (size_t)c * es);
      edone += c;
    }
    free(eb);
    return est;
  }
  if (le && attn_tensor_is_contiguous(t)) return attn__sink_write(k, attn_tensor_data(t), (size_t)n * 4);
  /* Strided (or big-endian host): row-major order through a small buffer. */
  enum { BUF = 16384 };
  uint32_t *buf = malloc(BUF * sizeof *buf);
  if (!buf) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", k->fn);
  attn__iter it;
  attn__iter_init(&it, t);
  const float *base = t->storage->data;
  attn_status st = ATTN_OK;
  int64_t done = 0;
  while (done < n && st == ATTN_OK) {
    int64_t c = n - done < BUF ? n - done : BUF;
    for (int64_t i = 0; i < c; i++) {
      uint32_t u;
      memcpy(&u, &base[it.pos], 4);
      if (!le) {
        unsigned char b[4];
        attn__wr32(b, u);
        memcpy(&u, b, 4);
      }
      buf[i] = u;
      attn__iter_next(&it);
    }
    st = attn__sink_write(k, buf, (size_t)c * 4);
    done += c;
  }
  free(buf);
  return st;
}

attn_status attn__sink_seek(attn__sink *k, uint64_t pos) {
  errno = 0;
  if (fflush(k->f) != 0 || fseeko(k->f, (off_t)pos, SEEK_SET) != 0) return write_failed(k, errno);
  return ATTN_OK;
}

/* fsync the directory holding path so the rename itself is durable. */
static void sync_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir;
  if (!slash) {
    dir = strdup(".");
  } else {
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    dir = malloc(n + 1);
    if (dir) {
      memcpy(dir, path, n);
      dir[n] = '\0';
    }
  }
  if (!dir) return;
  int fd = open(dir, O_RDONLY);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(dir);
}

attn_status attn__sink_commit(attn__sink *k) {
  char eb[128];
  errno = 0;
  if (fflush(k->f) != 0 || fsync(fileno(k->f)) != 0) {
    attn_status st = write_failed(k, errno);
    attn__sink_abort(k);
    return st;
  }
  FILE *f = k->f;
  k->f = NULL;
  if (fclose(f) != 0) {
    attn_status st = write_failed(k, errno);
    attn__sink_abort(k);
    return st;
  }
  if (rename(k->tmp, k->path) != 0) {
    int e = errno;
    attn_status st =
        attn_set_error(ATTN_ERR_IO, "%s: cannot replace '%s': %s", k->fn, k->path, errstr(e, eb, sizeof eb));
    attn__sink_abort(k);
    return st;
  }
  free(k->tmp);
  k->tmp = NULL;
  sync_dir(k->path);
  return ATTN_OK;
}

void attn__sink_abort(attn__sink *k) {
  if (k->f) fclose(k->f);
  k->f = NULL;
  if (k->tmp) unlink(k->tmp);
  free(k->tmp);
  k->tmp = NULL;
}

/* The public face of the sink (attn.h): for writers outside the core. */
struct attn_file_writer {
  attn__sink k;
};

attn_status attn_file_writer_open(const char *fn, const char *path, attn_file_writer **out) {
  attn_file_writer *w = malloc(sizeof *w);
  if (!w) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  attn_status st = attn__sink_open(&w->k, fn, path);
  if (st != ATTN_OK) {
    free(w);
    return st;
  }
  *out = w;
  return ATTN_OK;
}

attn_status attn_file_writer_write(attn_file_writer *w, const void *data, size_t n) {
  return attn__sink_write(&w->k, data, n);
}

attn_status attn_file_writer_commit(attn_file_writer *w) {
  attn_status st = attn__sink_commit(&w->k);
  free(w);
  return st;
}

void attn_file_writer_abort(attn_file_writer *w) {
  if (!w) return;
  attn__sink_abort(&w->k);
  free(w);
}

/* ------------------------------------------------------------------------ */
/* Named-tensor lists                                                        */

attn_status attn__nt_finish(attn_status st, attn_named_tensors *nt, attn_named_tensors **out) {
  if (st) {
    attn_named_tensors_free(nt);
    return st;
  }
  *out = nt;
  return ATTN_OK;
}

attn_status attn__nt_alloc(const char *fn, int n, bool with_info, attn_named_tensors **out) {
  attn_named_tensors *nt = attn__calloc(1, sizeof *nt);
  if (!nt) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  nt->names = attn__calloc((size_t)n, sizeof *nt->names);
  nt->tensors = attn__calloc((size_t)n, sizeof *nt->tensors);
  nt->info = with_info ? attn__calloc((size_t)n, sizeof *nt->info) : NULL;
  if (!nt->names || !nt->tensors || (with_info && !nt->info)) {
    attn_named_tensors_free(nt);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory for %d tensors", fn, n);
  }
  nt->n = n;
  *out = nt;
  return ATTN_OK;
}

attn_status attn_named_tensors_new(attn_named_tensors **out) {
  return attn__nt_alloc("named_tensors_new", 0, false, out);
}

void attn_named_tensors_free(attn_named_tensors *nt) {
  if (!nt) return;
  for (int i = 0; i < nt->n; i++) {
    if (nt->names) free(nt->names[i]);
    if (nt->tensors) attn_tensor_release(nt->tensors[i]);
  }
  for (int i = 0; i < nt->nmeta; i++) {
    free(nt->meta_keys[i]);
    free(nt->meta_values[i]);
  }
  free(nt->names);
  free(nt->tensors);
  free(nt->info);
  free(nt->meta_keys);
  free(nt->meta_values);
  free(nt);
}

attn_tensor *attn_named_tensors_get(const attn_named_tensors *nt, const char *name) {
  for (int i = 0; nt && name && i < nt->n; i++)
    if (strcmp(nt->names[i], name) == 0) return nt->tensors[i];
  return NULL;
}

const char *attn_named_tensors_meta(const attn_named_tensors *nt, const char *key) {
  for (int i = 0; nt && key && i < nt->nmeta; i++)
    if (strcmp(nt->meta_keys[i], key) == 0) return nt->meta_values[i];
  return NULL;
}

attn_status attn_named_tensors_add(attn_named_tensors *nt, const char *name, attn_tensor *t) {
  const char *fn = "named_tensors_add";
  if (!nt || !name || !t) return attn_set_error(ATTN_ERR_ARG, "%s: list, name and tensor must not be NULL", fn);
  if (!*name) return attn_set_error(ATTN_ERR_ARG, "%s: empty tensor name", fn);
  for (int i = 0; i < nt->n; i++)
    if (strcmp(nt->names[i], name) == 0)
      return attn_set_error(ATTN_ERR_ARG, "%s: duplicate tensor name '%s'", fn, name);
  if (nt->n == INT32_MAX) return attn_set_error(ATTN_ERR_NOMEM, "%s: too many tensors", fn);
  char *copy = strdup(name);
  char **names = copy ? realloc(nt->names, sizeof *names * (size_t)(nt->n + 1)) : NULL;
  if (names) nt->names = names;
  attn_tensor **ts = names ? realloc(nt->tensors, sizeof *ts * (size_t)(nt->n + 1)) : NULL;
  if (ts) nt->tensors = ts;
  attn_weight_info *info = NULL;
  if (ts && nt->info) {
    info = realloc(nt->info, sizeof *info * (size_t)(nt->n + 1));
    if (info) nt->info = info;
  }
  if (!copy || !names || !ts || (nt->info && !info)) {
    free(copy);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  }
  if (nt->info) memset(&nt->info[nt->n], 0, sizeof *nt->info);
  nt->names[nt->n] = copy;
  nt->tensors[nt->n] = attn_tensor_retain(t);
  nt->n++;
  return ATTN_OK;
}

attn_status attn_named_tensors_set_meta(attn_named_tensors *nt, const char *key, const char *value) {
  const char *fn = "named_tensors_set_meta";
  if (!nt || !key || !value) return attn_set_error(ATTN_ERR_ARG, "%s: list, key and value must not be NULL", fn);
  char *v = strdup(value);
  if (!v) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  for (int i = 0; i < nt->nmeta; i++)
    if (strcmp(nt->meta_keys[i], key) == 0) {
      free(nt->meta_values[i]);
      nt->meta_values[i] = v;
      return ATTN_OK;
    }
  char *k = strdup(key);
  char **keys = k ? realloc(nt->meta_keys, sizeof *keys * (size_t)(nt->nmeta + 1)) : NULL;
  if (keys) nt->meta_keys = keys;
  char **vals = keys ? realloc(nt->meta_values, sizeof *vals * (size_t)(nt->nmeta + 1)) : NULL;
  if (vals) nt->meta_values = vals;
  if (!k || !keys || !vals) {
    free(k);
    free(v);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  }
  nt->meta_keys[nt->nmeta] = k;
  nt->meta_values[nt->nmeta] = v;
  nt->nmeta++;
  return ATTN_OK;
}

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

attn_status attn__nt_check_save(const char *fn, const char *path, const attn_named_tensors *nt) {
  if (!nt) return attn_set_error(ATTN_ERR_ARG, "%s: tensor list is NULL", fn);
  if (!path) return attn_set_error(ATTN_ERR_ARG, "%s: path is NULL", fn);
  return attn__nt_check_names(fn, path, nt->n, nt->names);
}

attn_status attn__nt_check_names(const char *fn, const char *label, int n, char *const *names) {
  if (n <= 0) return ATTN_OK;
  for (int i = 0; i < n; i++) {
    if (!names[i]) return attn_set_error(ATTN_ERR_ARG, "%s: '%s': tensor %d has no name", fn, label, i);
    if (!*names[i]) return attn_set_error(ATTN_ERR_ARG, "%s: '%s': tensor %d has an empty name", fn, label, i);
  }
  /* Sorted copy: duplicates are neighbours (n log n for big checkpoints). */
  char **sorted = malloc(sizeof *sorted * (size_t)n);
  if (!sorted) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  memcpy(sorted, names, sizeof *sorted * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
  attn_status st = ATTN_OK;
  for (int i = 1; i < n; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0) {
      st = attn_set_error(ATTN_ERR_ARG, "%s: '%s': duplicate tensor name '%s'", fn, label, sorted[i]);
      break;
    }
  free(sorted);
  return st;
}
