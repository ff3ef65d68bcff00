/* SPDX-License-Identifier: MIT */
/* Fuzz target: the .npz reader (src/core/io/io_npy.c, attn__npz_read): zip
 * central directory, ZIP64 records and extra fields, local headers, stored
 * and deflated members, CRC-32, and the .npy inside each member.
 *
 * Model: a failure has a message naming the function; a loaded archive
 * has unique non-empty names (".npy" dropped) and tensors matching their
 * info; saving it as a stored zip (plain and with forced ZIP64 records)
 * and loading it back gives the same names, order and float bits; nothing
 * leaks. */
#include "fuzz_io.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  return 0;
}

static void round_trip(const attn_named_tensors *nt, bool zip64) {
  const char *path = fz_scratch(zip64 ? "rt64.npz" : "rt.npz");
  attn_status st = attn__npz_save(path, nt, zip64);
  if (st != ATTN_OK) {
    /* the writer refuses what zip cannot hold */
    for (int i = 0; i < nt->n; i++)
      if (strlen(nt->names[i]) > 65535 - 4) return;
    FZ_CHECK(0, "saving a loaded archive failed: %s", attn_last_error());
  }
  attn_named_tensors *back = NULL;
  st = attn_npz_load(path, &back);
  FZ_CHECK(st == ATTN_OK, "reloading a saved archive failed: %s", attn_last_error());
  FZ_CHECK(back->n == nt->n, "%d tensors became %d", nt->n, back->n);
  for (int i = 0; i < nt->n; i++) {
    FZ_CHECK(strcmp(back->names[i], nt->names[i]) == 0, "name %d: '%s' became '%s'", i, nt->names[i], back->names[i]);
    fz_check_same_tensor(nt->tensors[i], back->tensors[i], nt->names[i]);
  }
  attn_named_tensors_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_debug_counts before;
  fz_counts(&before);
  FILE *f = fz_memfile(data, size);
  if (!f) return 0;
  attn_named_tensors *nt = NULL;
  attn_status st = attn__npz_read(f, size, "fuzz", "mem", &nt);
  fclose(f);
  if (st) {
    fz_check_io_error(st);
    FZ_CHECK(nt == NULL, "output set on failure");
  } else {
    fz_check_named(nt, true);
    round_trip(nt, size & 1);
    attn_named_tensors_free(nt);
  }
  fz_check_counts(&before);
  return 0;
}
