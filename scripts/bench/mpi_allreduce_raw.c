/* SPDX-License-Identifier: MIT */
/* Raw MPI_Allreduce timing on a float buffer (osu_allreduce style: warm-up,
 * then the best of 3 batches of reps calls, each rank's time maxed over
 * ranks), the baseline scripts/bench/dist.lua compares attn.dist.allreduce
 * with.  Built by dist.lua with mpicc.  Usage: mpi_allreduce_raw BYTES REPS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long bytes = argc > 1 ? atol(argv[1]) : 1 << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 20;
  int n = (int)(bytes / 4);
  float *buf = aligned_alloc(64, ((size_t)n * sizeof *buf + 63) / 64 * 64);
  for (int i = 0; i < n; i++) buf[i] = 1.0f;
  MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double best = 1e30;
  for (int b = 0; b < 3; b++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double dt = (MPI_Wtime() - t0) / reps, mx;
    MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (mx < best) best = mx;
  }
  if (rank == 0) printf("RESULT mode=raw ranks=%d bytes=%ld time=%.9f\n", size, bytes, best);
  free(buf);
  MPI_Finalize();
  return 0;
}
