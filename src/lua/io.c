/* SPDX-License-Identifier: MIT */
/* Lua binding: weight files (safetensors, .npy, .npz).
 *
 *   attn.save(x, path [, metadata])
 *       The format comes from path's extension:
 *         .safetensors  x = {name = tensor, ...}; metadata: {key = "value"}
 *         .npz          x = {name = tensor, ...}; members in name order
 *         .npy          x = a single tensor
 *         .pt .pth .bin .ckpt   torch.save's zip: lua/attn/ptfile.lua (over
 *                       the _pt_* functions below), chosen in attn/base.lua
 *       The file is replaced atomically (see attn.h, "Weight files").
 *   attn.load(path [, format]) -> {name = tensor, ...} [, metadata]
 *       .npy gives the tensor itself; safetensors files with __metadata__
 *       give the metadata table as a second value.  format ("safetensors",
 *       "npz", "npy") overrides the extension; without either the format
 *       is recognised from the file's first bytes.
 *   attn.safetensors_info(path) -> {name = {dtype=, shape=, offsets=, index=}}
 *       [, metadata]  Reads only the header: dtype as in the file ("BF16"),
 *       shape, data_offsets (byte range in the data buffer, as in the
 *       file) and index (1-based position of the data in the file).
 * Errors raise with the core's message, which names the path.
 */
#include "binding.h"
#include "openers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_NAMED_MT "attn.NamedTensors"

/* A userdata owning an attn_named_tensors until Lua collects it. */
static attn_named_tensors **push_holder(lua_State *L) {
  attn_named_tensors **h = lua_newuserdatauv(L, sizeof *h, 0);
  *h = NULL;
  luaL_setmetatable(L, ATTN_NAMED_MT);
  return h;
}

static int holder_gc(lua_State *L) {
  attn_named_tensors **h = luaL_checkudata(L, 1, ATTN_NAMED_MT);
  attn_named_tensors_free(*h);
  *h = NULL;
  return 0;
}

typedef enum { FMT_UNKNOWN, FMT_SAFETENSORS, FMT_NPZ, FMT_NPY } file_format;

static bool ends_with_ci(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  if (n < m) return false;
  for (size_t i = 0; i < m; i++) {
    char c = s[n - m + i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != suffix[i]) return false;
  }
  return true;
}

static file_format format_of_path(const char *path) {
  if (ends_with_ci(path, ".safetensors")) return FMT_SAFETENSORS;
  if (ends_with_ci(path, ".npz")) return FMT_NPZ;
  if (ends_with_ci(path, ".npy")) return FMT_NPY;
  return FMT_UNKNOWN;
}

static file_format format_of_name(lua_State *L, int arg) {
  static const char *const names[] = {"safetensors", "npz", "npy", NULL};
  static const file_format fmts[] = {FMT_SAFETENSORS, FMT_NPZ, FMT_NPY};
  return fmts[luaL_checkoption(L, arg, NULL, names)];
}

/* Recognises a file by its first bytes: .npy magic, a zip signature, or a
   safetensors header length followed by '{'. */
static file_format sniff(const char *path) {
  unsigned char b[9];
  FILE *f = fopen(path, "rb");
  if (!f) return FMT_UNKNOWN;
  size_t n = fread(b, 1, sizeof b, f);
  fclose(f);
  if (n >= 6 && memcmp(b, "\x93NUMPY", 6) == 0) return FMT_NPY;
  if (n >= 4 && (memcmp(b, "PK\x03\x04", 4) == 0 || memcmp(b, "PK\x05\x06", 4) == 0)) return FMT_NPZ;
  if (n == 9 && b[8] == '{') return FMT_SAFETENSORS;
  return FMT_UNKNOWN;
}

/* A string argument that must not hold NUL bytes (the core takes C strings). */
static const char *check_cstring(lua_State *L, int idx, const char *fn, const char *what) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  if (!s) attnL_raise(L, "%s: %s must be a string (got %s)", fn, what, luaL_typename(L, idx));
  if (strlen(s) != len) attnL_raise(L, "%s: %s contains a NUL byte", fn, what);
  return s;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* attn.save(x, path [, metadata]) */
static int l_save(lua_State *L) {
  const char *fn = "save";
  const char *path = check_cstring(L, 2, fn, "path");
  file_format fmt = format_of_path(path);
  if (fmt == FMT_UNKNOWN)
    return attnL_raise(L, "%s: cannot tell the format of '%s' from its extension (use .safetensors, .npz, .npy or .pt)",
                       fn, path);
  if (fmt == FMT_NPY) {
    attn_tensor *t = attnL_test(L, 1);
    if (!t) {
      if (lua_type(L, 1) == LUA_TTABLE)
        return attnL_raise(L, "%s: '%s': a .npy file holds one tensor; pass the tensor, not a table", fn, path);
      return attnL_raise(L, "%s: '%s': expected a tensor (got %s)", fn, path, luaL_typename(L, 1));
    }
    t = attnL_check(L, 1); /* raises for a closed tensor */
    if (!lua_isnoneornil(L, 3)) return attnL_raise(L, "%s: '%s': only safetensors files take metadata", fn, path);
    if (attn_npy_save(path, t)) return attnL_error(L);
    return 0;
  }
  if (attnL_test(L, 1) || luaL_testudata(L, 1, ATTN_TENSOR_MT))
    return attnL_raise(L, "%s: '%s': a single tensor can only be saved to .npy; pass {name = tensor}", fn, path);
  if (lua_type(L, 1) != LUA_TTABLE)
    return attnL_raise(L, "%s: '%s': expected a table {name = tensor} (got %s)", fn, path, luaL_typename(L, 1));
  if (fmt == FMT_NPZ && !lua_isnoneornil(L, 3))
    return attnL_raise(L, "%s: '%s': only safetensors files take metadata", fn, path);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  /* names, sorted so that the npz member order does not depend on hashing */
  int n = 0;
  for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      return attnL_raise(L, "%s: '%s': table keys must be tensor names (found a %s key)", fn, path,
                         luaL_typename(L, -2));
    lua_pushvalue(L, -2);
    const char *name = check_cstring(L, -1, fn, "a tensor name");
    lua_pop(L, 1);
    if (!attnL_test(L, -1)) {
      if (luaL_testudata(L, -1, ATTN_TENSOR_MT))
        return attnL_raise(L, "%s: '%s': tensor '%s' is closed", fn, path, name);
      return attnL_raise(L, "%s: '%s': value of '%s' is a %s, expected a tensor", fn, path, name, luaL_typename(L, -1));
    }
    if (n == INT32_MAX) return attnL_raise(L, "%s: too many tensors", fn);
    n++;
  }
  const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n ? n : 1), 0); /* 4 */
  int i = 0;
  for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) names[i++] = lua_tostring(L, -2); /* strings owned by the table */
  qsort(names, (size_t)n, sizeof *names, cmp_cstr);
  attn_named_tensors **h = push_holder(L); /* 5 */
  if (attn_named_tensors_new(h)) return attnL_error(L);
  for (i = 0; i < n; i++) {
    lua_getfield(L, 1, names[i]);
    attn_tensor *t = attnL_check(L, -1);
    if (attn_named_tensors_add(*h, names[i], t)) return attnL_error(L);
    lua_pop(L, 1);
  }
  if (lua_istable(L, 3)) {
    for (lua_pushnil(L); lua_next(L, 3); lua_pop(L, 1)) {
      if (lua_type(L, -2) != LUA_TSTRING)
        return attnL_raise(L, "%s: '%s': metadata keys must be strings (found a %s key)", fn, path,
                           luaL_typename(L, -2));
      if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
        return attnL_raise(L, "%s: '%s': metadata value of '%s' must be a string (got %s)", fn, path,
                           lua_tostring(L, -2), luaL_typename(L, -1));
      lua_pushvalue(L, -2);
      const char *key = check_cstring(L, -1, fn, "a metadata key");
      lua_pushvalue(L, -2); /* a copy, so numbers convert without confusing lua_next */
      const char *value = check_cstring(L, -1, fn, "a metadata value");
      if (attn_named_tensors_set_meta(*h, key, value)) return attnL_error(L);
      lua_pop(L, 2);
    }
  }
  attn_status st = fmt == FMT_NPZ ? attn_npz_save(path, *h) : attn_safetensors_save(path, *h);
  if (st) return attnL_error(L);
  return 0;
}

/* Pushes {key = value} of the list's metadata. */
static void push_meta(lua_State *L, const attn_named_tensors *nt) {
  lua_createtable(L, 0, nt->nmeta);
  for (int i = 0; i < nt->nmeta; i++) {
    lua_pushstring(L, nt->meta_values[i]);
    lua_setfield(L, -2, nt->meta_keys[i]);
  }
}

/* attn.load(path [, format]) */
static int l_load(lua_State *L) {
  const char *fn = "load";
  const char *path = check_cstring(L, 1, fn, "path");
  file_format fmt = lua_isnoneornil(L, 2) ? format_of_path(path) : format_of_name(L, 2);
  if (fmt == FMT_UNKNOWN) fmt = sniff(path);
  if (fmt == FMT_UNKNOWN) {
    FILE *f = fopen(path, "rb");
    if (!f) return attnL_raise(L, "%s: cannot open '%s'", fn, path);
    fclose(f);
    return attnL_raise(L, "%s: cannot tell the format of '%s' (not safetensors, .npz or .npy)", fn, path);
  }
  if (fmt == FMT_NPY) {
    attn_tensor **box = attnL_newbox(L);
    return attnL_result(L, attn_npy_load(path, box, NULL));
  }
  attn_named_tensors **h = push_holder(L);
  attn_status st = fmt == FMT_NPZ ? attn_npz_load(path, h) : attn_safetensors_load(path, h);
  if (st) return attnL_error(L);
  const attn_named_tensors *nt = *h;
  lua_createtable(L, 0, nt->n);
  for (int i = 0; i < nt->n; i++) {
    attnL_push(L, attn_tensor_retain(nt->tensors[i]));
    lua_setfield(L, -2, nt->names[i]);
  }
  if (nt->nmeta == 0) return 1;
  push_meta(L, nt);
  return 2;
}

/* attn.safetensors_info(path) */
static int l_safetensors_info(lua_State *L) {
  const char *path = check_cstring(L, 1, "safetensors_info", "path");
  attn_named_tensors **h = push_holder(L);
  if (attn_safetensors_info(path, h)) return attnL_error(L);
  const attn_named_tensors *nt = *h;
  lua_createtable(L, 0, nt->n);
  for (int i = 0; i < nt->n; i++) {
    const attn_weight_info *info = &nt->info[i];
    lua_createtable(L, 0, 4);
    lua_pushstring(L, info->dtype);
    lua_setfield(L, -2, "dtype");
    lua_createtable(L, info->ndim, 0);
    for (int d = 0; d < info->ndim; d++) {
      lua_pushinteger(L, (lua_Integer)info->shape[d]);
      lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "shape");
    lua_createtable(L, 2, 0);
    lua_pushinteger(L, (lua_Integer)info->offset);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, (lua_Integer)(info->offset + info->nbytes));
    lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, "offsets");
    lua_pushinteger(L, i + 1);
    lua_setfield(L, -2, "index");
    lua_setfield(L, -2, nt->names[i]);
  }
  if (nt->nmeta == 0) {
    lua_pushnil(L);
    return 2;
  }
  push_meta(L, nt);
  return 2;
}

/* ---- torch checkpoints: the container; lua/attn/ptfile.lua does the pickle */
#define ATTN_PT_MT "attn.PtArchive"
#define ATTN_PTW_MT "attn.PtWriter"

static attn_pt_archive **check_archive(lua_State *L) {
  attn_pt_archive **h = luaL_checkudata(L, 1, ATTN_PT_MT);
  if (!*h) attnL_raise(L, "load: the torch file is closed");
  return h;
}

static int pt_gc(lua_State *L) {
  attn_pt_archive **h = luaL_checkudata(L, 1, ATTN_PT_MT);
  attn_pt_close(*h);
  *h = NULL;
  return 0;
}

/* core._pt_open(path) -> archive */
static int l_pt_open(lua_State *L) {
  const char *path = check_cstring(L, 1, "load", "path");
  attn_pt_archive **h = lua_newuserdatauv(L, sizeof *h, 0);
  *h = NULL;
  luaL_setmetatable(L, ATTN_PT_MT);
  if (attn_pt_open(path, h)) return attnL_error(L);
  return 1;
}

/* archive:record(name) -> string */
static int pt_record(lua_State *L) {
  attn_pt_archive **h = check_archive(L);
  const char *name = luaL_checkstring(L, 2);
  char *buf;
  size_t len;
  if (attn_pt_read_record(*h, name, &buf, &len)) return attnL_error(L);
  lua_pushlstring(L, buf, len); /* may raise (memory): buf leaks only then */
  free(buf);
  return 1;
}

/* archive:storage(key, storage_type, numel) -> 1-D tensor */
static int pt_storage(lua_State *L) {
  attn_pt_archive **h = check_archive(L);
  const char *key = luaL_checkstring(L, 2), *type = luaL_checkstring(L, 3);
  lua_Integer numel = luaL_checkinteger(L, 4);
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_pt_storage(*h, key, type, (int64_t)numel, box));
}

/* core._pt_view(storage, offset, size, stride) -> view (0-based offset) */
static int l_pt_view(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  lua_Integer off = luaL_checkinteger(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  int64_t shape[ATTN_MAX_DIMS], stride[ATTN_MAX_DIMS];
  lua_Integer nd = luaL_len(L, 3);
  if (nd > ATTN_MAX_DIMS || luaL_len(L, 4) != nd)
    return attnL_raise(L, "load: a tensor with %d sizes and %d strides", (int)nd, (int)luaL_len(L, 4));
  for (int i = 0; i < (int)nd; i++) {
    lua_geti(L, 3, i + 1);
    lua_geti(L, 4, i + 1);
    int ok1, ok2;
    shape[i] = (int64_t)lua_tointegerx(L, -2, &ok1);
    stride[i] = (int64_t)lua_tointegerx(L, -1, &ok2);
    lua_pop(L, 2);
    if (!ok1 || !ok2) return attnL_raise(L, "load: tensor sizes and strides must be integers");
  }
  attn_tensor **box = attnL_newbox(L);
  return attnL_result(L, attn_as_strided(t, (int)nd, shape, stride, (int64_t)off, box));
}

/* core._pt_storage_name(t) -> "FloatStorage" | nil */
static int l_pt_storage_name(lua_State *L) {
  attn_tensor *t = attnL_check(L, 1);
  const char *s = attn_pt_storage_name(t->dtype);
  if (s)
    lua_pushstring(L, s);
  else
    lua_pushnil(L);
  return 1;
}

static attn_pt_writer **check_writer(lua_State *L) {
  attn_pt_writer **h = luaL_checkudata(L, 1, ATTN_PTW_MT);
  if (!*h) attnL_raise(L, "save: the .pt writer is closed");
  return h;
}

static int ptw_gc(lua_State *L) {
  attn_pt_writer **h = luaL_checkudata(L, 1, ATTN_PTW_MT);
  attn_pt_writer_abort(*h);
  *h = NULL;
  return 0;
}

/* core._pt_writer(path) -> writer */
static int l_pt_writer(lua_State *L) {
  const char *path = check_cstring(L, 1, "save", "path");
  attn_pt_writer **h = lua_newuserdatauv(L, sizeof *h, 0);
  *h = NULL;
  luaL_setmetatable(L, ATTN_PTW_MT);
  if (attn_pt_writer_open(path, h)) return attnL_error(L);
  return 1;
}

/* writer:add(name, bytes | tensor) */
static int ptw_add(lua_State *L) {
  attn_pt_writer **h = check_writer(L);
  const char *name = luaL_checkstring(L, 2);
  attn_status st;
  if (lua_type(L, 3) == LUA_TSTRING) {
    size_t len;
    const char *data = lua_tolstring(L, 3, &len);
    st = attn_pt_writer_add(*h, name, data, len);
  } else {
    st = attn_pt_writer_add_tensor(*h, name, attnL_check(L, 3));
  }
  if (st) return attnL_error(L);
  return 0;
}

/* writer:commit() */
static int ptw_commit(lua_State *L) {
  attn_pt_writer **h = check_writer(L);
  attn_pt_writer *w = *h;
  *h = NULL;
  if (attn_pt_writer_commit(w)) return attnL_error(L);
  return 0;
}

static void open_pt(lua_State *L) {
  static const luaL_Reg am[] = {{"record", pt_record}, {"storage", pt_storage}, {"close", pt_gc}, {NULL, NULL}};
  static const luaL_Reg wm[] = {{"add", ptw_add}, {"commit", ptw_commit}, {"abort", ptw_gc}, {NULL, NULL}};
  luaL_newmetatable(L, ATTN_PT_MT);
  lua_pushcfunction(L, pt_gc);
  lua_setfield(L, -2, "__gc");
  luaL_newlib(L, am);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_newmetatable(L, ATTN_PTW_MT);
  lua_pushcfunction(L, ptw_gc);
  lua_setfield(L, -2, "__gc");
  luaL_newlib(L, wm);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

void attnL_open_io(lua_State *L, int module, int methods) {
  (void)methods; /* module functions only */
  luaL_newmetatable(L, ATTN_NAMED_MT);
  lua_pushcfunction(L, holder_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  open_pt(L);
  static const luaL_Reg fns[] = {
      {"save", l_save},
      {"load", l_load},
      {"safetensors_info", l_safetensors_info},
      {"_pt_open", l_pt_open},
      {"_pt_view", l_pt_view},
      {"_pt_storage_name", l_pt_storage_name},
      {"_pt_writer", l_pt_writer},
      {NULL, NULL},
  };
  attnL_register(L, module, 0, fns);
}
