/* SPDX-License-Identifier: MIT */
/* Fuzz target: the safetensors reader (src/core/io/io_safetensors.c).
 *
 * The input is a whole file, parsed from memory twice: header only
 * (attn_safetensors_info's path) and with the data.  Model:
 *  - a failure has a message naming the function;
 *  - the two parses agree (same names in the same order, same info);
 *  - a loaded file satisfies the format's invariants: unique non-empty
 *    names, byte lengths = shape product x dtype size, data ranges that
 *    tile the buffer in file order;
 *  - saving what was loaded and loading it back gives the same names,
 *    metadata and float bits (the writer's round trip);
 *  - nothing leaks. */
#include "fuzz_io.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  return 0;
}

static void round_trip(const attn_named_tensors *nt) {
  const char *path = fz_scratch("rt.safetensors");
  attn_status st = attn_safetensors_save(path, nt);
  FZ_CHECK(st == ATTN_OK, "saving a loaded file failed: %s", attn_last_error());
  attn_named_tensors *back = NULL;
  st = attn_safetensors_load(path, &back);
  FZ_CHECK(st == ATTN_OK, "reloading a saved file failed: %s", attn_last_error());
  FZ_CHECK(back->n == nt->n && back->nmeta == nt->nmeta, "%d tensors / %d metadata became %d / %d", nt->n, nt->nmeta,
           back->n, back->nmeta);
  for (int i = 0; i < nt->n; i++) {
    attn_tensor *t = attn_named_tensors_get(back, nt->names[i]);
    FZ_CHECK(t != NULL, "tensor '%s' lost", nt->names[i]);
    fz_check_same_tensor(nt->tensors[i], t, nt->names[i]);
  }
  for (int i = 0; i < nt->nmeta; i++) {
    const char *v = attn_named_tensors_meta(back, nt->meta_keys[i]);
    FZ_CHECK(v && strcmp(v, nt->meta_values[i]) == 0, "metadata '%s' changed", nt->meta_keys[i]);
  }
  attn_named_tensors_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_debug_counts before;
  fz_counts(&before);
  FILE *f = fz_memfile(data, size);
  if (!f) return 0;
  attn_named_tensors *info = NULL, *full = NULL;
  attn_status si = attn__safetensors_read(f, size, "fuzz", "mem", false, &info);
  if (si) {
    fz_check_io_error(si);
    FZ_CHECK(info == NULL, "output set on failure");
  }
  attn_status sf = attn__safetensors_read(f, size, "fuzz", "mem", true, &full);
  if (sf) {
    fz_check_io_error(sf);
    FZ_CHECK(full == NULL, "output set on failure");
  }
  fclose(f);
  /* Reading the data can only add out-of-memory failures. */
  FZ_CHECK(si == ATTN_OK || sf != ATTN_OK, "info failed but the load worked");
  FZ_CHECK(sf == ATTN_OK || si != ATTN_OK || sf == ATTN_ERR_NOMEM, "info worked but the load failed: %s",
           attn_last_error());
  if (si == ATTN_OK) {
    fz_check_named(info, false);
    /* data ranges in file order tile [0, size - 8 - header) */
    uint64_t pos = 0;
    for (int i = 0; i < info->n; i++) {
      FZ_CHECK(info->info[i].offset == pos, "tensor %d starts at %llu, not %llu", i,
               (unsigned long long)info->info[i].offset, (unsigned long long)pos);
      pos += info->info[i].nbytes;
    }
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--) hlen = hlen << 8 | data[k];
    FZ_CHECK(8 + hlen + pos == size, "data ranges end at %llu of %zu", (unsigned long long)(8 + hlen + pos), size);
  }
  if (sf == ATTN_OK) {
    fz_check_named(full, true);
    FZ_CHECK(full->n == info->n && full->nmeta == info->nmeta, "the two parses disagree");
    for (int i = 0; i < full->n; i++) {
      FZ_CHECK(strcmp(full->names[i], info->names[i]) == 0, "names differ at %d", i);
      FZ_CHECK(fz_same_info(&full->info[i], &info->info[i]), "info differs at %d", i);
    }
    round_trip(full);
  }
  attn_named_tensors_free(info);
  attn_named_tensors_free(full);
  fz_check_counts(&before);
  return 0;
}
