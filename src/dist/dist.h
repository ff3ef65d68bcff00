/* SPDX-License-Identifier: MIT */
/* attn.dist's C side: collectives over MPI on attn tensors.
 *
 * This room sits above the core (it includes attn.h, never the other way)
 * and below the Lua binding (src/lua/dist.c only converts arguments).  It
 * is built with MPI when CMake finds it (ATTN_HAVE_MPI) and without it
 * otherwise; in both cases the same API runs, and a process that was not
 * started by an MPI launcher (mpirun, mpiexec, srun with PMI) is a world of
 * one rank where every collective is the identity, so a script runs
 * unchanged on a laptop.
 *
 * Ranks are 0-based, as in MPI and torch.distributed.  Every function
 * returns an attn_status; messages start with the operation and the rank,
 * e.g. "allreduce (rank 1 of 4): ...".  MPI's error handler is
 * MPI_ERRORS_RETURN.  Waits are bounded by a timeout (attn_dist_set_timeout,
 * default 300 s, or ATTN_DIST_TIMEOUT in seconds): attn_dist_wait on an
 * async operation polls it and fails with an error at the deadline; the
 * blocking forms call MPI's blocking collectives (faster) under a watchdog
 * thread that prints the same message and aborts the job at the deadline,
 * since a started collective cannot be cancelled.  An operation made of
 * several waits (a DDP backward's gradient buckets, a ring attention pass)
 * waits through one attn_dist_deadline, so all its waits together last at
 * most the timeout, not the timeout once per wait.  Timeout messages give
 * the measured time waited ("allreduce (rank 0 of 2): timed out after
 * 4.0 s waiting for the other ranks ...").  Once a wait of this process
 * has timed out, freeing an unfinished operation no longer waits for it
 * (its buffers are leaked to MPI instead), so cleanup after a timeout
 * cannot add a timeout per pending operation.  A process that exits
 * with a non-zero status after MPI was initialised aborts the job
 * (MPI_Abort), so a rank whose script failed stops the others at once.
 *
 * Tensors: contiguous tensors are sent from and received into their own
 * storage; non-contiguous ones go through a contiguous copy that is
 * written back when the operation completes.  Async operations retain
 * their tensors until the work is waited for and freed.
 */
#ifndef ATTN_DIST_H
#define ATTN_DIST_H

#include "attn.h"

typedef enum attn_dist_op { ATTN_DIST_SUM, ATTN_DIST_AVG, ATTN_DIST_MAX, ATTN_DIST_MIN } attn_dist_op;

/* Whether attn was built with MPI. */
bool attn_dist_compiled(void);
/* Initialises once per process (thread-safe, idempotent; every other call
   does it lazily).  Without a launcher or without MPI: a 1-rank world. */
attn_status attn_dist_init(void);
/* Whether this process runs MPI (false in a 1-rank fallback world). */
bool attn_dist_uses_mpi(void);
int attn_dist_rank(void);
int attn_dist_size(void);
/* Rank among the processes of this host (0 in a 1-rank world). */
int attn_dist_local_rank(void);
/* Name of the MPI library ("Open MPI v4.1.4 ...") or "none". */
const char *attn_dist_backend(void);
/* Seconds a blocking wait may take before failing (> 0). */
attn_status attn_dist_set_timeout(double seconds);
double attn_dist_timeout(void);

/* Outstanding operation.  Retains its tensors until freed. */
typedef struct attn_dist_work attn_dist_work;
/* Waits for completion (bounded by the timeout); a second wait returns the
   first one's status. */
attn_status attn_dist_wait(attn_dist_work *w);

/* The wait budget of one operation made of several waits: every wait
   through it counts against one limit (the timeout when it was made), so
   they wait at most that long in all, and the one that runs out reports
   the total time waited.  Waits that follow one another with no work in
   between share, in effect, one deadline computed once. */
typedef struct attn_dist_deadline {
  double limit;  /* seconds of waiting allowed */
  double waited; /* seconds waited through it so far */
} attn_dist_deadline;
attn_dist_deadline attn_dist_deadline_make(void);
/* attn_dist_wait within d's remaining budget (adds the time waited to d). */
attn_status attn_dist_wait_within(attn_dist_work *w, attn_dist_deadline *d);
/* Whether a wait of this process has timed out (the world is stalled). */
bool attn_dist_stalled(void);
/* Whether it completed (drives MPI's progress); errors count as complete. */
bool attn_dist_test(attn_dist_work *w);
/* Frees w; an operation still running is waited for first (its buffers
   cannot be freed under MPI).  NULL is fine. */
void attn_dist_work_free(attn_dist_work *w);

/* Collectives.  Each has a blocking form and an async form (out gets the
   work; on failure *out is NULL). */
attn_status attn_dist_barrier(void);
attn_status attn_dist_ibarrier(attn_dist_work **out);
/* t op= over all ranks, in place. */
attn_status attn_dist_allreduce(attn_tensor *t, attn_dist_op op);
attn_status attn_dist_iallreduce(attn_tensor *t, attn_dist_op op, attn_dist_work **out);
/* t = root's t, in place; every rank passes a tensor of the same shape. */
attn_status attn_dist_broadcast(attn_tensor *t, int root);
attn_status attn_dist_ibroadcast(attn_tensor *t, int root, attn_dist_work **out);
/* The ranks' tensors (same shape) concatenated along dim 0, in rank order. */
attn_status attn_dist_allgather(const attn_tensor *t, attn_tensor **out);
/* Reduce t over ranks, then rank r gets slice r of dim 0 (dim 0 divisible by
   the world size). */
attn_status attn_dist_reduce_scatter(const attn_tensor *t, attn_dist_op op, attn_tensor **out);
attn_status attn_dist_iallgather(const attn_tensor *t, attn_dist_work **out);
attn_status attn_dist_ireduce_scatter(const attn_tensor *t, attn_dist_op op, attn_dist_work **out);
/* The result of an allgather / reduce_scatter work once waited for
   (borrowed; NULL for the other kinds). */
attn_tensor *attn_dist_work_output(const attn_dist_work *w);
/* Point to point (tag >= 0); recv writes into t, whose shape must match. */
attn_status attn_dist_send(const attn_tensor *t, int dst, int tag);
attn_status attn_dist_recv(attn_tensor *t, int src, int tag);
attn_status attn_dist_isend(const attn_tensor *t, int dst, int tag, attn_dist_work **out);
attn_status attn_dist_irecv(attn_tensor *t, int src, int tag, attn_dist_work **out);

/* Ring attention (src/dist/ring.c): scaled dot-product attention of a
   sequence split over the ranks along dim -2.  q, k, v [..., Lc, E|Ev]
   hold this rank's part: positions [r*Lc, (r+1)*Lc) when not causal; when
   causal, chunks r and 2P-1-r of 2P chunks of Lc/2 (zigzag; Lc even),
   which balances the causal work.  out [..., Lc, Ev] holds the same
   positions.  scale NaN or 0: 1/sqrt(E).  Differentiable (a backward node
   that circulates dK/dV around the ring); every rank must call it with the
   same shapes. */
attn_status attn_dist_ring_attention(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, bool causal,
                                     double scale, attn_tensor **out);

/* Gradient reducer of nn.DistributedDataParallel.  Parameters are put into
   buckets of about bucket_bytes in reverse order (gradients arrive roughly
   last layer first); each parameter gets an autograd grad hook
   (attn_set_grad_hook) that, when backward has accumulated its gradient,
   marks it ready; a bucket whose parameters are all ready is copied into
   one flat buffer and its non-blocking allreduce starts at once, while
   backward goes on.  When every bucket has started (or at
   attn_dist_reducer_finish) the reducer waits, divides by the world size
   and writes the averages back into the .grad tensors.  All in C: no Lua
   runs during backward. */
typedef struct attn_dist_reducer attn_dist_reducer;
attn_status attn_dist_reducer_new(int n, attn_tensor *const *params, int64_t bucket_bytes, attn_dist_reducer **out);
/* Hooks off while disabled (no_sync: gradients accumulate locally). */
void attn_dist_reducer_enable(attn_dist_reducer *r, bool on);
/* Completes a pass: starts buckets not yet started (parameters that got no
   gradient count as zeros), waits for all and writes the averages back.
   A no-op when nothing is pending. */
attn_status attn_dist_reducer_finish(attn_dist_reducer *r);
int attn_dist_reducer_buckets(const attn_dist_reducer *r);
/* Whether a pass began (a hook fired) and is not complete yet. */
bool attn_dist_reducer_pending(const attn_dist_reducer *r);
/* Number of passes whose allreduces were all started from hooks. */
int64_t attn_dist_reducer_overlapped(const attn_dist_reducer *r);
/* Removes the hooks and frees the reducer (waits for pending work). */
void attn_dist_reducer_free(attn_dist_reducer *r);

#endif
