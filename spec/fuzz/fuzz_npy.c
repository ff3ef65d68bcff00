/* SPDX-License-Identifier: MIT */
/* Fuzz target: the .npy reader (src/core/io/io_npy.c, attn__npy_read).
 *
 * The input is a whole .npy file read from memory as attn_npy_load reads
 * a file.  Model: a failure has a message naming the function; a loaded
 * array has the shape and byte count of its header, every element is
 * reachable through its strides (Fortran order gives a column-major view),
 * the data was used up exactly; saving it (always row-major float32) and
 * loading it back gives the same float bits; nothing leaks. */
#include "fuzz_io.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  attn_debug_counts before;
  fz_counts(&before);
  FILE *f = fz_memfile(data, size);
  if (!f) return 0;
  attn__src s;
  attn__src_stored(&s, f, size, "fuzz", "mem");
  attn_tensor *t = NULL;
  attn_weight_info info;
  memset(&info, 0, sizeof info);
  attn_status st = attn__npy_read(&s, &t, &info);
  if (st == ATTN_OK) {
    st = attn__src_finish(&s, 0);
    if (st) {
      attn_tensor_release(t);
      t = NULL;
    }
  }
  fclose(f);
  if (st) {
    fz_check_io_error(st);
    FZ_CHECK(t == NULL, "output set on failure");
  } else {
    fz_check_loaded(t, &info);
    FZ_CHECK(info.offset + info.nbytes == size, "data at %llu + %llu bytes in a file of %zu",
             (unsigned long long)info.offset, (unsigned long long)info.nbytes, size);
    const char *path = fz_scratch("rt.npy");
    st = attn_npy_save(path, t);
    FZ_CHECK(st == ATTN_OK, "saving a loaded array failed: %s", attn_last_error());
    attn_tensor *back = NULL;
    attn_weight_info binfo;
    st = attn_npy_load(path, &back, &binfo);
    FZ_CHECK(st == ATTN_OK, "reloading a saved array failed: %s", attn_last_error());
    const char *want = t->dtype == ATTN_INT64 ? "<i8" : t->dtype == ATTN_BOOL ? "|b1" : "<f4";
    FZ_CHECK(strcmp(binfo.dtype, want) == 0 && attn_tensor_is_contiguous(back), "saved as %s", binfo.dtype);
    fz_check_same_tensor(t, back, "npy");
    attn_tensor_release(back);
    attn_tensor_release(t);
  }
  fz_check_counts(&before);
  return 0;
}
