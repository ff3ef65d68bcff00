/* SPDX-License-Identifier: MIT */
/* safetensors: 8-byte little-endian header length N, N bytes of JSON
 *   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
 *    "data_offsets": [begin, end]}, ...}
 * then the byte buffer; offsets are relative to the buffer's start.
 *
 * Reading follows the checks of the reference implementation
 * (huggingface/safetensors): the header is at most 100 MB of UTF-8 JSON
 * starting with '{' (trailing spaces allowed), every tensor's byte length
 * is shape product x dtype size, and the data ranges, sorted by offset,
 * tile the buffer exactly from 0 to its end.
 */
#define _XOPEN_SOURCE 700
#define _FILE_OFFSET_BITS 64

#include "io_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define ST_MAX_HEADER 100000000ull /* the reference library's limit */

typedef struct {
  const char *name;
  attn__io_dtype dt;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"F32", {ATTN__IO_F32, 4, false}},   {"F16", {ATTN__IO_F16, 2, false}}, {"BF16", {ATTN__IO_BF16, 2, false}},
    {"F64", {ATTN__IO_F64, 8, false}},   {"I64", {ATTN__IO_I64, 8, false}}, {"I32", {ATTN__IO_I32, 4, false}},
    {"I16", {ATTN__IO_I16, 2, false}},   {"I8", {ATTN__IO_I8, 1, false}},   {"U64", {ATTN__IO_U64, 8, false}},
    {"U32", {ATTN__IO_U32, 4, false}},   {"U16", {ATTN__IO_U16, 2, false}}, {"U8", {ATTN__IO_U8, 1, false}},
    {"BOOL", {ATTN__IO_BOOL, 1, false}},
};

static const st_dtype *st_find_dtype(const char *s) {
  for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
    if (strcmp(st_dtypes[i].name, s) == 0) return &st_dtypes[i];
  return NULL;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static bool valid_utf8(const unsigned char *s, size_t n, size_t *bad) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t len;
    unsigned min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, min = 0x80, c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, min = 0x800, c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, min = 0x10000, c &= 0x07;
    } else {
      *bad = i;
      return false;
    }
    if (n - i < len) {
      *bad = i;
      return false;
    }
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) {
        *bad = i;
        return false;
      }
      c = c << 6 | (s[i + k] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
      *bad = i;
      return false;
    }
    i += len;
  }
  return true;
}

/* A JSON number that is an integer in [0, 2^53]. */
static bool json_uint(const cJSON *j, uint64_t *v) {
  if (!cJSON_IsNumber(j)) return false;
  double d = j->valuedouble;
  if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return false;
  *v = (uint64_t)d;
  return true;
}

typedef struct {
  int index; /* position in the JSON object */
  uint64_t begin, end;
} st_range;

static int cmp_range(const void *a, const void *b) {
  const st_range *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return x->index - y->index;
}

/* Parses and validates the header; fills *out (names, info, metadata) in
   data order.  data_len: bytes after the header. */
static attn_status st_parse(const char *fn, const char *label, const char *hdr, size_t hlen, uint64_t data_len,
                            attn_named_tensors **out) {
  char sb[ATTN_SHAPE_BUF];
  size_t bad;
  if (hlen == 0 || hdr[0] != '{')
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': header does not start with '{' (not a safetensors file?)", fn, label);
  if (memchr(hdr, '\0', hlen)) return attn_set_error(ATTN_ERR_IO, "%s: '%s': header contains a NUL byte", fn, label);
  if (!valid_utf8((const unsigned char *)hdr, hlen, &bad))
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': header is not valid UTF-8 (byte %zu)", fn, label, bad);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, hlen, &end, 0);
  if (!root) {
    size_t at = end && end >= hdr && end <= hdr + hlen ? (size_t)(end - hdr) : 0;
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': header is not valid JSON (near byte %zu of %zu)", fn, label, at,
                          hlen);
  }
  for (const char *p = end; p && p < hdr + hlen; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
      cJSON_Delete(root);
      return attn_set_error(ATTN_ERR_IO, "%s: '%s': unexpected bytes after the header JSON (at byte %zu)", fn, label,
                            (size_t)(p - hdr));
    }
  attn_status st = ATTN_OK;
  attn_named_tensors *nt = NULL;
  st_range *ranges = NULL;
  int n = 0, nmeta_objs = 0;
  const cJSON *meta = NULL;
  if (!cJSON_IsObject(root)) {
    st = attn_set_error(ATTN_ERR_IO, "%s: '%s': header is not a JSON object", fn, label);
    goto done;
  }
  for (const cJSON *c = root->child; c; c = c->next) {
    if (!c->string) {
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': header entry without a key", fn, label);
      goto done;
    }
    if (strcmp(c->string, "__metadata__") == 0) {
      meta = c;
      nmeta_objs++;
    } else {
      if (n == INT32_MAX) {
        st = attn_set_error(ATTN_ERR_IO, "%s: '%s': too many tensors", fn, label);
        goto done;
      }
      n++;
    }
  }
  if (nmeta_objs > 1) {
    st = attn_set_error(ATTN_ERR_IO, "%s: '%s': duplicate key '__metadata__'", fn, label);
    goto done;
  }
  st = attn__nt_alloc(fn, n, true, &nt);
  if (st) goto done;
  nt->n = 0; /* counts filled entries so a failure frees only those */
  ranges = malloc(sizeof *ranges * (size_t)(n ? n : 1));
  if (!ranges) {
    st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
    goto done;
  }
  int i = 0;
  for (const cJSON *c = root->child; c; c = c->next) {
    if (c == meta) continue;
    const char *name = c->string;
    if (!cJSON_IsObject(c)) {
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': entry '%s' is not an object", fn, label, name);
      goto done;
    }
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(c, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(c, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(c, "data_offsets");
    if (!cJSON_IsString(jd) || !cJSON_IsArray(js) || !cJSON_IsArray(jo)) {
      st = attn_set_error(ATTN_ERR_IO,
                          "%s: '%s': tensor '%s' needs a string 'dtype', an array 'shape' and an array "
                          "'data_offsets'",
                          fn, label, name);
      goto done;
    }
    const st_dtype *dt = st_find_dtype(jd->valuestring);
    if (!dt) {
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': tensor '%s' has unsupported dtype '%.16s'", fn, label, name,
                          jd->valuestring);
      goto done;
    }
    int ndim = cJSON_GetArraySize(js);
    if (ndim > ATTN_MAX_DIMS) {
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': tensor '%s' has %d dims, at most %d are supported", fn, label, name,
                          ndim, ATTN_MAX_DIMS);
      goto done;
    }
    attn_weight_info *info = &nt->info[i];
    info->ndim = ndim;
    int d = 0;
    for (const cJSON *e = js->child; e; e = e->next, d++) {
      uint64_t v;
      if (!json_uint(e, &v)) {
        st = attn_set_error(ATTN_ERR_IO, "%s: '%s': tensor '%s': shape entry %d is not a non-negative integer", fn,
                            label, name, d);
        goto done;
      }
      info->shape[d] = (int64_t)v;
    }
    int64_t numel = attn__shape_numel(ndim, info->shape);
    if (numel < 0) {
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': tensor '%s': shape %s has too many elements", fn, label, name,
                          attn_shape_str(ndim, info->shape, sb, sizeof sb));
      goto done;
    }
    uint64_t b, e;
    if (cJSON_GetArraySize(jo) != 2 || !json_uint(jo->child, &b) || !json_uint(jo->child->next, &e)) {
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': tensor '%s': data_offsets must be two non-negative integers", fn,
                          label, name);
      goto done;
    }
    uint64_t nbytes = (uint64_t)numel * (uint64_t)dt->dt.size; /* numel <= 2^56, size <= 8 */
    if (b > e || e - b != nbytes) {
      st =
          attn_set_error(ATTN_ERR_IO, "%s: '%s': tensor '%s': data_offsets [%llu, %llu] do not hold %s %s (%llu bytes)",
                         fn, label, name, (unsigned long long)b, (unsigned long long)e,
                         attn_shape_str(ndim, info->shape, sb, sizeof sb), dt->name, (unsigned long long)nbytes);
      goto done;
    }
    if (e > data_len) {
      st = attn_set_error(ATTN_ERR_IO,
                          "%s: '%s': tensor '%s': data_offsets [%llu, %llu] run past the end of the data (%llu "
                          "bytes)",
                          fn, label, name, (unsigned long long)b, (unsigned long long)e, (unsigned long long)data_len);
      goto done;
    }
    snprintf(info->dtype, sizeof info->dtype, "%s", dt->name);
    info->offset = b;
    info->nbytes = nbytes;
    nt->names[i] = strdup(name);
    if (!nt->names[i]) {
      st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
      goto done;
    }
    ranges[i] = (st_range){i, b, e};
    nt->n = ++i;
  }
  st = attn__nt_check_names(fn, label, n, nt->names);
  if (st) goto done;
  /* The data ranges, in offset order, must tile [0, data_len). */
  qsort(ranges, (size_t)n, sizeof *ranges, cmp_range);
  uint64_t pos = 0;
  for (int k = 0; k < n; k++) {
    const char *name = nt->names[ranges[k].index];
    if (ranges[k].begin != pos) {
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': tensor '%s': data starts at %llu, expected %llu (%s)", fn, label,
                          name, (unsigned long long)ranges[k].begin, (unsigned long long)pos,
                          ranges[k].begin < pos ? "overlaps the previous tensor" : "leaves a gap");
      goto done;
    }
    pos = ranges[k].end;
  }
  if (pos != data_len) {
    st = attn_set_error(ATTN_ERR_IO, "%s: '%s': %llu bytes after the last tensor's data", fn, label,
                        (unsigned long long)(data_len - pos));
    goto done;
  }
  /* Reorder the entries into data order. */
  {
    char **names = malloc(sizeof *names * (size_t)(n ? n : 1));
    attn_weight_info *infos = malloc(sizeof *infos * (size_t)(n ? n : 1));
    if (!names || !infos) {
      free(names);
      free(infos);
      st = attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
      goto done;
    }
    for (int k = 0; k < n; k++) {
      names[k] = nt->names[ranges[k].index];
      infos[k] = nt->info[ranges[k].index];
    }
    memcpy(nt->names, names, sizeof *names * (size_t)n);
    memcpy(nt->info, infos, sizeof *infos * (size_t)n);
    free(names);
    free(infos);
  }
  /* Metadata: an object of strings (null means none). */
  if (meta && !cJSON_IsNull(meta)) {
    if (!cJSON_IsObject(meta)) {
      st = attn_set_error(ATTN_ERR_IO, "%s: '%s': __metadata__ is not an object", fn, label);
      goto done;
    }
    for (const cJSON *c = meta->child; c; c = c->next) {
      if (!cJSON_IsString(c)) {
        st = attn_set_error(ATTN_ERR_IO, "%s: '%s': __metadata__ value '%s' is not a string", fn, label, c->string);
        goto done;
      }
      if (attn_named_tensors_meta(nt, c->string)) {
        st = attn_set_error(ATTN_ERR_IO, "%s: '%s': duplicate __metadata__ key '%s'", fn, label, c->string);
        goto done;
      }
      st = attn_named_tensors_set_meta(nt, c->string, c->valuestring);
      if (st) goto done;
    }
  }
done:
  free(ranges);
  cJSON_Delete(root);
  return attn__nt_finish(st, nt, out);
}

attn_status attn__safetensors_read(FILE *f, uint64_t size, const char *fn, const char *label, bool load_data,
                                   attn_named_tensors **out) {
  unsigned char len8[8];
  if (size < 8)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': file is too short for a safetensors header (%llu bytes)", fn, label,
                          (unsigned long long)size);
  if (fseeko(f, 0, SEEK_SET) != 0 || fread(len8, 1, 8, f) != 8)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': cannot read the header length", fn, label);
  uint64_t hlen = attn__rd64(len8);
  if (hlen > size - 8)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': header length %llu runs past the end of the file (%llu bytes)", fn,
                          label, (unsigned long long)hlen, (unsigned long long)size);
  if (hlen > ST_MAX_HEADER)
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': header length %llu exceeds the limit of %llu bytes", fn, label,
                          (unsigned long long)hlen, ST_MAX_HEADER);
  /* The text and its parse tree count against the caller's budget for
     the length of the parse.  cJSON takes about 17 bytes per byte of a
     dense header (a 64-byte node per 2-4 characters); 24 is the bound
     charged, before anything is allocated. */
  int64_t parse_bytes = (int64_t)hlen * 25 + 4096;
  bool over;
  attn_budget *budget = attn__reserve(parse_bytes, &over);
  if (over) return attn__nomem(fn, parse_bytes);
  char *hdr = malloc((size_t)hlen + 1);
  if (!hdr) {
    attn__unreserve(budget, parse_bytes);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: '%s': out of memory for the header", fn, label);
  }
  if (fread(hdr, 1, (size_t)hlen, f) != hlen) {
    free(hdr);
    attn__unreserve(budget, parse_bytes);
    return attn_set_error(ATTN_ERR_IO, "%s: '%s': read failed inside the header", fn, label);
  }
  hdr[hlen] = '\0';
  attn_named_tensors *nt = NULL;
  uint64_t base = 8 + hlen;
  attn_status st = st_parse(fn, label, hdr, (size_t)hlen, size - base, &nt);
  free(hdr);
  attn__unreserve(budget, parse_bytes);
  if (st) return st;
  if (load_data) {
    for (int i = 0; i < nt->n; i++) {
      const attn_weight_info *info = &nt->info[i];
      const st_dtype *dt = st_find_dtype(info->dtype);
      attn_tensor *t = NULL;
      st = attn__alloc_dtype(fn, attn__io_load_dtype(dt->dt), info->ndim, info->shape, &t);
      if (st == ATTN_OK && fseeko(f, (off_t)(base + info->offset), SEEK_SET) != 0)
        st = attn_set_error(ATTN_ERR_IO, "%s: '%s': cannot seek to tensor '%s'", fn, label, nt->names[i]);
      if (st == ATTN_OK) {
        attn__src s;
        char what[300];
        snprintf(what, sizeof what, "the data of tensor '%.200s'", nt->names[i]);
        attn__src_stored(&s, f, info->nbytes, fn, label);
        st = attn__src_read_elems(&s, dt->dt, attn_tensor_ptr(t), t->dtype, attn_tensor_numel(t), what);
      }
      if (st) {
        attn_tensor_release(t);
        attn_named_tensors_free(nt);
        return st;
      }
      nt->tensors[i] = t;
    }
  }
  *out = nt;
  return ATTN_OK;
}

static attn_status st_load(const char *fn, const char *path, bool load_data, attn_named_tensors **out) {
  FILE *f;
  uint64_t size;
  attn_status st = attn__io_open_read(fn, path, &f, &size);
  if (st) return st;
  st = attn__safetensors_read(f, size, fn, path, load_data, out);
  fclose(f);
  return st;
}

attn_status attn_safetensors_load(const char *path, attn_named_tensors **out) {
  return st_load("safetensors_load", path, true, out);
}

attn_status attn_safetensors_info(const char *path, attn_named_tensors **out) {
  return st_load("safetensors_info", path, false, out);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

typedef struct {
  const char *name;
  int index;
} name_index;

static int cmp_by_name(const void *a, const void *b) {
  return strcmp(((const name_index *)a)->name, ((const name_index *)b)->name);
}

/* A JSON integer written exactly (cJSON would print big values with %g). */
static cJSON *json_int(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
  return cJSON_CreateRaw(buf);
}

/* Builds the header: __metadata__ first, then the tensors in order[]. */
static attn_status st_header(const char *fn, const attn_named_tensors *nt, const int *order, char **out) {
  cJSON *root = cJSON_CreateObject();
  bool ok = root != NULL;
  if (ok && nt->nmeta > 0) {
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    ok = meta != NULL;
    for (int i = 0; ok && i < nt->nmeta; i++) {
      cJSON *v = cJSON_CreateString(nt->meta_values[i]);
      ok = v && cJSON_AddItemToObject(meta, nt->meta_keys[i], v);
      if (v && !ok) cJSON_Delete(v);
    }
  }
  uint64_t off = 0;
  for (int k = 0; ok && k < nt->n; k++) {
    const attn_tensor *t = nt->tensors[order[k]];
    cJSON *e = cJSON_CreateObject();
    ok = e && cJSON_AddItemToObject(root, nt->names[order[k]], e);
    if (e && !ok) {
      cJSON_Delete(e);
      break;
    }
    ok = cJSON_AddStringToObject(e, "dtype",
                                 t->dtype == ATTN_INT64      ? "I64"
                                 : t->dtype == ATTN_BOOL     ? "BOOL"
                                 : t->dtype == ATTN_FLOAT16  ? "F16"
                                 : t->dtype == ATTN_BFLOAT16 ? "BF16"
                                 : t->dtype == ATTN_FLOAT64  ? "F64"
                                                             : "F32") != NULL;
    cJSON *shape = ok ? cJSON_AddArrayToObject(e, "shape") : NULL;
    ok = shape != NULL;
    for (int d = 0; ok && d < t->ndim; d++) {
      cJSON *v = json_int((uint64_t)t->shape[d]);
      ok = v && cJSON_AddItemToArray(shape, v);
    }
    cJSON *offs = ok ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
    ok = offs != NULL;
    uint64_t nbytes = (uint64_t)attn_tensor_numel(t) * attn_dtype_size(t->dtype);
    cJSON *b = ok ? json_int(off) : NULL, *en = b ? json_int(off + nbytes) : NULL;
    ok = b && en && cJSON_AddItemToArray(offs, b) && cJSON_AddItemToArray(offs, en);
    off += nbytes;
  }
  char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!s) return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory building the header", fn);
  *out = s;
  return ATTN_OK;
}

attn_status attn_safetensors_save(const char *path, const attn_named_tensors *nt) {
  const char *fn = "safetensors_save";
  attn_status st = attn__nt_check_save(fn, path, nt);
  if (st) return st;
  for (int i = 0; i < nt->n; i++) {
    if (!nt->tensors[i]) return attn_set_error(ATTN_ERR_ARG, "%s: '%s': tensor '%s' is NULL", fn, path, nt->names[i]);
    if (strcmp(nt->names[i], "__metadata__") == 0)
      return attn_set_error(ATTN_ERR_ARG, "%s: '%s': '__metadata__' cannot be a tensor name", fn, path);
  }
  for (int i = 0; i < nt->nmeta; i++)
    for (int j = 0; j < i; j++)
      if (strcmp(nt->meta_keys[i], nt->meta_keys[j]) == 0)
        return attn_set_error(ATTN_ERR_ARG, "%s: '%s': duplicate metadata key '%s'", fn, path, nt->meta_keys[i]);
  /* Sorted by name (strcmp: byte order, as Rust's String ordering). */
  int *order = malloc(sizeof *order * (size_t)(nt->n ? nt->n : 1));
  name_index *byname = malloc(sizeof *byname * (size_t)(nt->n ? nt->n : 1));
  if (!order || !byname) {
    free(order);
    free(byname);
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory", fn);
  }
  for (int i = 0; i < nt->n; i++) byname[i] = (name_index){nt->names[i], i};
  qsort(byname, (size_t)nt->n, sizeof *byname, cmp_by_name);
  for (int i = 0; i < nt->n; i++) order[i] = byname[i].index;
  free(byname);
  char *hdr = NULL;
  st = st_header(fn, nt, order, &hdr);
  if (st) {
    free(order);
    return st;
  }
  size_t hlen = strlen(hdr);
  size_t pad = (8 - hlen % 8) % 8; /* buffer starts 8-byte aligned */
  unsigned char len8[8];
  attn__wr64(len8, (uint64_t)(hlen + pad));
  attn__sink k;
  st = attn__sink_open(&k, fn, path);
  if (st == ATTN_OK) st = attn__sink_write(&k, len8, 8);
  if (st == ATTN_OK) st = attn__sink_write(&k, hdr, hlen);
  if (st == ATTN_OK) st = attn__sink_write(&k, "       ", pad);
  for (int i = 0; st == ATTN_OK && i < nt->n; i++) st = attn__sink_write_tensor(&k, nt->tensors[order[i]]);
  free(hdr);
  free(order);
  if (st) {
    if (k.tmp) attn__sink_abort(&k);
    return st;
  }
  return attn__sink_commit(&k);
}
