/* SPDX-License-Identifier: MIT */
/* Helpers shared by the weight-file readers and writers (io*.c); not
   installed.  The entry points taking a FILE * and its size exist so the
   tests can feed in-memory files (fmemopen) to the parsers. */
#ifndef ATTN_IO_INTERNAL_H
#define ATTN_IO_INTERNAL_H

#include "io/io.h"

#include <stdio.h>
#include <zlib.h>

/* ------------------------------------------------------------------------ */
/* File dtypes                                                               */

typedef enum attn__io_kind {
  ATTN__IO_F32,
  ATTN__IO_F64,
  ATTN__IO_F16,
  ATTN__IO_BF16,
  ATTN__IO_BOOL,
  ATTN__IO_I8,
  ATTN__IO_U8,
  ATTN__IO_I16,
  ATTN__IO_U16,
  ATTN__IO_I32,
  ATTN__IO_U32,
  ATTN__IO_I64,
  ATTN__IO_U64
} attn__io_kind;

typedef struct attn__io_dtype {
  attn__io_kind kind;
  int size;        /* bytes per element */
  bool big_endian; /* only .npy files can be big-endian */
} attn__io_dtype;

bool attn__io_host_little_endian(void);
/* n elements of dt at src (unaligned bytes) -> float32.  F16/BF16 and the
   integers up to 16 bits are exact; F64 and wider integers round to nearest. */
void attn__io_convert(attn__io_dtype dt, const unsigned char *src, float *dst, size_t n);
float attn__io_half_to_float(uint16_t h);
float attn__io_bf16_to_float(uint16_t h);

/* Little-endian field access for the binary headers. */
static inline uint16_t attn__rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t attn__rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t attn__rd64(const unsigned char *p) {
  return (uint64_t)attn__rd32(p) | (uint64_t)attn__rd32(p + 4) << 32;
}
static inline void attn__wr16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static inline void attn__wr32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i);
}
static inline void attn__wr64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i);
}

/* ------------------------------------------------------------------------ */
/* Reading: a bounded byte source over a FILE, optionally inflating          */

typedef struct attn__src {
  FILE *f;
  const char *fn;    /* function name for messages */
  const char *label; /* "path" or "path[member]" for messages */
  uint64_t avail;    /* bytes the consumer may still take */
  /* raw deflate stream (npz members written by np.savez_compressed) */
  bool inflating;
  bool zinit;
  z_stream z;
  unsigned char *zin;
  uint64_t zleft; /* compressed bytes not yet read from f */
  /* CRC-32 of everything handed out (zip members) */
  bool crc_on;
  uLong crc;
} attn__src;

/* A source over the next `size` bytes of f (at its current position). */
void attn__src_stored(attn__src *s, FILE *f, uint64_t size, const char *fn, const char *label);
/* A source inflating csize raw-deflate bytes of f into exactly usize bytes. */
attn_status attn__src_deflated(attn__src *s, FILE *f, uint64_t csize, uint64_t usize, const char *fn,
                               const char *label);
/* Exactly n bytes or an error "<fn>: '<label>': file ends inside <what> ..." */
attn_status attn__src_read(attn__src *s, void *dst, size_t n, const char *what);
/* n elements of dt straight into dst (float32), converting in bounded chunks. */
attn_status attn__src_read_floats(attn__src *s, attn__io_dtype dt, float *dst, int64_t n, const char *what);
/* The tensor dtype a file dtype loads as: floats -> float32, BOOL -> bool,
   every integer -> int64 (exact). */
attn_dtype attn__io_load_dtype(attn__io_dtype dt);
/* n elements of dt into dst, elements of out (attn__io_load_dtype(dt)). */
attn_status attn__src_read_elems(attn__src *s, attn__io_dtype dt, void *dst, attn_dtype out, int64_t n,
                                 const char *what);
/* Checks that the source is used up (and, for deflate, that the stream ends
   there), and its CRC when expected_crc is given (crc_on). */
attn_status attn__src_finish(attn__src *s, uLong expected_crc);
void attn__src_close(attn__src *s);

/* Opens path for reading: a regular file; *size gets its length. */
attn_status attn__io_open_read(const char *fn, const char *path, FILE **f, uint64_t *size);

/* ------------------------------------------------------------------------ */
/* Writing: atomic replacement through a temporary file                     */

typedef struct attn__sink {
  FILE *f;
  char *tmp; /* "<path>.tmp.XXXXXX" */
  const char *path;
  const char *fn;
  uint64_t written;
  bool crc_on;
  uLong crc;
} attn__sink;

/* Creates the temporary beside path (mkstemp). */
attn_status attn__sink_open(attn__sink *k, const char *fn, const char *path);
attn_status attn__sink_write(attn__sink *k, const void *p, size_t n);
/* The elements of t in row-major order as little-endian float32. */
attn_status attn__sink_write_tensor(attn__sink *k, const attn_tensor *t);
attn_status attn__sink_seek(attn__sink *k, uint64_t pos);
/* fflush, fsync, close, rename over path, fsync the directory. */
attn_status attn__sink_commit(attn__sink *k);
/* Closes and removes the temporary (after a failure). */
void attn__sink_abort(attn__sink *k);

/* ------------------------------------------------------------------------ */
/* Named-tensor lists                                                        */

/* An empty list with room for n entries (names NULL). */
attn_status attn__nt_alloc(const char *fn, int n, bool with_info, attn_named_tensors **out);
/* Ends a reader: st OK hands nt out through *out, anything else frees nt
   (NULL is fine); returns st. */
attn_status attn__nt_finish(attn_status st, attn_named_tensors *nt, attn_named_tensors **out);
/* Checks names: non-empty, no duplicates.  what names the file kind. */
attn_status attn__nt_check_names(const char *fn, const char *label, int n, char *const *names);
/* A writer's first checks: nt and path given and nt's names valid
   (messages name fn and path). */
attn_status attn__nt_check_save(const char *fn, const char *path, const attn_named_tensors *nt);

/* ------------------------------------------------------------------------ */
/* Parsers on open streams (also used by the fuzz tests)                    */

attn_status attn__safetensors_read(FILE *f, uint64_t size, const char *fn, const char *label, bool load_data,
                                   attn_named_tensors **out);
/* Reads one .npy from a source (a whole file or a zip member). */
attn_status attn__npy_read(attn__src *s, attn_tensor **out, attn_weight_info *info);
attn_status attn__npz_read(FILE *f, uint64_t size, const char *fn, const char *label, attn_named_tensors **out);
/* npz writer; force_zip64 writes ZIP64 records even for small files (tests). */
attn_status attn__npz_save(const char *path, const attn_named_tensors *nt, bool force_zip64);
/* The .npy header numpy 1.24's np.save writes for a float32 C-order array
   of this shape (magic, version, length, dict, padding to 64 bytes).
   Returns its length; buf must hold ATTN__NPY_HEADER_MAX bytes. */
#define ATTN__NPY_HEADER_MAX 512
size_t attn__npy_header(attn_dtype dt, int ndim, const int64_t *shape, unsigned char *buf);

#endif
