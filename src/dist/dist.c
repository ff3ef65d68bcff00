/* SPDX-License-Identifier: MIT */
/* attn.dist over MPI (see dist.h).  Built with or without MPI: without it
 * (ATTN_HAVE_MPI undefined) every process is a 1-rank world. */
#define _GNU_SOURCE /* on_exit, dladdr */
#include "dist/dist.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef ATTN_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>
#include <sched.h>
#endif

/* ------------------------------------------------------------------------ */
/* World state                                                               */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static attn_status init_status = ATTN_OK;
static char init_msg[512];
static bool use_mpi; /* MPI_Init ran (or the host had initialised MPI) */
static int world_rank = 0, world_size = 1, world_local_rank = 0;
static double timeout_s = 300.0;
static char backend_name[160] = "none";

#ifdef ATTN_HAVE_MPI
static MPI_Comm comm = MPI_COMM_NULL;
static bool we_initialised;
#endif

bool attn_dist_compiled(void) {
#ifdef ATTN_HAVE_MPI
  return true;
#else
  return false;
#endif
}

/* Formats "op (rank r of n): ..." into the thread's error. */
static attn_status fail(attn_status st, const char *op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static attn_status fail(attn_status st, const char *op, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return attn_set_error(st, "%s (rank %d of %d): %s", op, world_rank, world_size, msg);
}

static __attribute__((unused)) double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef ATTN_HAVE_MPI
/* The MPI datatype of a tensor's elements: the one place mapping attn
   dtypes to MPI. */
static MPI_Datatype mpi_dtype(const attn_tensor *t) {
  switch (t->dtype) {
  case ATTN_INT64: return MPI_INT64_T;
  case ATTN_BOOL: return MPI_C_BOOL;
  case ATTN_FLOAT16:
  case ATTN_BFLOAT16: return MPI_UINT16_T; /* storage dtypes: moved, never reduced */
  case ATTN_FLOAT64: return MPI_DOUBLE;
  default: return MPI_FLOAT;
  }
}

static MPI_Op mpi_op(attn_dist_op op) {
  switch (op) {
  case ATTN_DIST_MAX: return MPI_MAX;
  case ATTN_DIST_MIN: return MPI_MIN;
  default: return MPI_SUM; /* avg divides afterwards */
  }
}

static attn_status mpi_fail(int rc, const char *op) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
  return fail(ATTN_ERR_IO, op, "MPI failed: %s", s);
}

/* Ends the MPI job with the process: a clean exit finalises, a failing one
   (a Lua error ends the interpreter with status 1) aborts every rank, so
   the others fail at once instead of waiting in a collective for it. */
static void at_exit(int status, void *arg) {
  (void)arg;
  int fin = 0;
  if (!we_initialised || MPI_Finalized(&fin) != MPI_SUCCESS || fin) return;
  if (status != 0) {
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status);
  }
  MPI_Finalize();
}

/* Whether an MPI launcher started this process. */
static bool launched(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "MPI_LOCALNRANKS",
                                     "ATTN_DIST_FORCE_MPI",  NULL};
  for (int i = 0; vars[i]; i++)
    if (getenv(vars[i])) return true;
  return false;
}
#endif

static void do_init(void) {
  const char *t = getenv("ATTN_DIST_TIMEOUT");
  if (t && *t) {
    char *end;
    double v = strtod(t, &end);
    if (*end == 0 && v > 0 && isfinite(v)) timeout_s = v;
  }
#ifdef ATTN_HAVE_MPI
  int already = 0;
  MPI_Initialized(&already);
  if (!already && !launched()) return; /* a 1-rank world */
  if (!already) {
    /* attn/core.so is loaded by Lua with RTLD_LOCAL; MPI libraries that
       dlopen their own plugins need their symbols global. */
    Dl_info info;
    if (dladdr((void *)&MPI_Init_thread, &info) && info.dli_fname)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      snprintf(init_msg, sizeof init_msg, "init: MPI_Init_thread failed (code %d)", rc);
      init_status = ATTN_ERR_IO;
      return;
    }
    we_initialised = true;
    on_exit(at_exit, NULL);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm, &world_rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &world_size);
  MPI_Comm local = MPI_COMM_NULL;
  if (rc == MPI_SUCCESS) rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &local);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(local, &world_local_rank);
  if (local != MPI_COMM_NULL) MPI_Comm_free(&local);
  if (rc != MPI_SUCCESS) {
    snprintf(init_msg, sizeof init_msg, "init: setting up the MPI communicator failed (code %d)", rc);
    init_status = ATTN_ERR_IO;
    world_rank = 0, world_size = 1;
    return;
  }
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
    lib[len < (int)sizeof lib ? len : (int)sizeof lib - 1] = 0;
    char *nl = strpbrk(lib, ",\n");
    if (nl) *nl = 0;
    snprintf(backend_name, sizeof backend_name, "%.150s", lib);
  }
  use_mpi = true;
#endif
}

attn_status attn_dist_init(void) {
  pthread_once(&init_once, do_init);
  if (init_status) return attn_set_error(init_status, "%s", init_msg);
  return ATTN_OK;
}

#define ENSURE_INIT()                                                                                                  \
  do {                                                                                                                 \
    attn_status st_ = attn_dist_init();                                                                                \
    if (st_) return st_;                                                                                               \
  } while (0)

bool attn_dist_uses_mpi(void) { return attn_dist_init() == ATTN_OK && use_mpi; }
int attn_dist_rank(void) { return attn_dist_init() == ATTN_OK ? world_rank : 0; }
int attn_dist_size(void) { return attn_dist_init() == ATTN_OK ? world_size : 1; }
int attn_dist_local_rank(void) { return attn_dist_init() == ATTN_OK ? world_local_rank : 0; }
const char *attn_dist_backend(void) {
  attn_dist_init();
  return backend_name;
}

attn_status attn_dist_set_timeout(double seconds) {
  if (!(seconds > 0) || !isfinite(seconds))
    return attn_set_error(ATTN_ERR_ARG, "set_timeout: seconds must be a positive number, got %g", seconds);
  attn_dist_init();
  __atomic_store(&timeout_s, &seconds, __ATOMIC_RELAXED);
  return ATTN_OK;
}

double attn_dist_timeout(void) {
  attn_dist_init();
  double v;
  __atomic_load(&timeout_s, &v, __ATOMIC_RELAXED);
  return v;
}

/* ------------------------------------------------------------------------ */
/* Work                                                                      */

enum { W_BARRIER, W_ALLREDUCE, W_BROADCAST, W_ALLGATHER, W_REDUCE_SCATTER, W_SEND, W_RECV };
static const char *const work_names[] = {"barrier",        "allreduce", "broadcast", "allgather",
                                         "reduce_scatter", "send",      "recv"};

struct attn_dist_work {
  int kind;
  attn_dist_op op;
  attn_tensor *t;   /* the caller's tensor (retained); written back on completion when buf != t */
  attn_tensor *buf; /* contiguous data MPI works on (retained) */
  attn_tensor *out; /* allgather / reduce_scatter result (retained) */
  bool complete;    /* MPI is done with the buffers */
  bool finished;    /* post-processing ran; status is final */
  bool stuck;       /* timed out: MPI may still write the buffers, so they are never freed */
  int peer;         /* send / recv: the other rank; -1 for collectives */
  attn_status status;
  char msg[512];
#ifdef ATTN_HAVE_MPI
  MPI_Request req;
#endif
};

/* Set by the blocking forms around their start call (see BLOCKING). */
static _Thread_local bool tl_blocking;

static attn_status work_new(int kind, attn_dist_work **out) {
  attn_dist_work *w = calloc(1, sizeof *w);
  if (!w) return fail(ATTN_ERR_NOMEM, work_names[kind], "out of memory");
  w->kind = kind;
  w->peer = -1;
#ifdef ATTN_HAVE_MPI
  w->req = MPI_REQUEST_NULL;
#endif
  *out = w;
  return ATTN_OK;
}

static void work_drop(attn_dist_work *w) {
  if (!w) return;
  if (!w->stuck) {
    attn_tensor_release(w->t);
    attn_tensor_release(w->buf);
    attn_tensor_release(w->out);
  }
  free(w);
}

/* Runs once MPI is done: avg, copy back into a non-contiguous target. */
static void work_finish(attn_dist_work *w) {
  if (w->finished) return;
  w->finished = true;
  if (w->status) return;
  attn_tensor *res = w->kind == W_ALLGATHER || w->kind == W_REDUCE_SCATTER ? w->out : w->buf;
  bool prev = attn_set_grad_enabled(false);
  attn_status st = ATTN_OK;
  if (res && w->op == ATTN_DIST_AVG && world_size > 1 && res->dtype == ATTN_FLOAT32 &&
      (w->kind == W_ALLREDUCE || w->kind == W_REDUCE_SCATTER)) {
    float inv = 1.0f / (float)world_size, *d = attn_tensor_data(res);
    int64_t n = attn_tensor_numel(res);
    for (int64_t i = 0; i < n; i++) d[i] *= inv;
  }
  if (w->buf && w->t && w->buf != w->t && (w->kind == W_ALLREDUCE || w->kind == W_BROADCAST || w->kind == W_RECV))
    st = attn_copy_(w->t, w->buf);
  else if (w->t && (w->kind == W_ALLREDUCE || w->kind == W_BROADCAST || w->kind == W_RECV))
    w->t->storage->version++; /* written in place behind autograd's back */
  attn_set_grad_enabled(prev);
  if (st) {
    w->status = st;
    snprintf(w->msg, sizeof w->msg, "%s", attn_last_error());
  }
}

static attn_status work_result(attn_dist_work *w) {
  if (w->status) return attn_set_error(w->status, "%s", w->msg);
  return ATTN_OK;
}

/* Records the error in w; returns it. */
static __attribute__((unused)) attn_status work_error(attn_dist_work *w, attn_status st) {
  w->status = st;
  snprintf(w->msg, sizeof w->msg, "%s", attn_last_error());
  w->complete = w->finished = true;
  return st;
}

bool attn_dist_test(attn_dist_work *w) {
  if (!w) return true;
  if (w->complete) return true;
#ifdef ATTN_HAVE_MPI
  int flag = 0;
  int rc = MPI_Test(&w->req, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    work_error(w, mpi_fail(rc, work_names[w->kind]));
    return true;
  }
  if (flag) {
    w->complete = true;
    work_finish(w);
  }
  return flag != 0;
#else
  return true;
#endif
}

/* Set once a wait of this process timed out: a peer is gone or stopped. */
static int stalled_flag;

bool attn_dist_stalled(void) { return __atomic_load_n(&stalled_flag, __ATOMIC_RELAXED) != 0; }

/* "waiting for rank 1" (send, recv) or "waiting for the other ranks". */
static const char *waiting_for(int peer, char *buf, size_t n) {
  if (peer < 0) return "waiting for the other ranks";
  snprintf(buf, n, "waiting for rank %d", peer);
  return buf;
}

attn_dist_deadline attn_dist_deadline_make(void) {
  attn_dist_deadline d = {attn_dist_timeout(), 0.0};
  return d;
}

attn_status attn_dist_wait_within(attn_dist_work *w, attn_dist_deadline *d) {
  if (!w) return attn_set_error(ATTN_ERR_ARG, "wait: no work");
  if (w->stuck)
    return fail(ATTN_ERR_STATE, work_names[w->kind], "an earlier wait timed out; the operation cannot complete");
  if (w->complete) {
    work_finish(w);
    return work_result(w);
  }
#ifdef ATTN_HAVE_MPI
  /* Poll MPI_Test (which drives the progress of non-blocking collectives):
     spin for the first 20 ms (yielding now and then), then sleep with a
     growing back-off up to 1 ms, until d's budget is spent.  The budget is
     checked after a test, so a wait whose budget is already spent still
     sees an operation that has completed. */
  const double start = now_s();
  long sleep_ns = 10000, spins = 0;
  for (;;) {
    if (attn_dist_test(w)) break;
    double el = now_s() - start;
    if (d->waited + el >= d->limit) {
      d->waited += el;
      w->stuck = true;
      __atomic_store_n(&stalled_flag, 1, __ATOMIC_RELAXED);
      char pb[48];
      return fail(ATTN_ERR_STATE, work_names[w->kind],
                  "timed out after %.1f s %s (did a rank die, stop or skip this call? the limit is %g s, set by "
                  "attn.dist.set_timeout / ATTN_DIST_TIMEOUT)",
                  d->waited, waiting_for(w->peer, pb, sizeof pb), d->limit);
    }
    if (el < 0.02) {
      if (++spins % 64 == 0) sched_yield(); /* let a rank sharing this core run */
    } else {
      double left = d->limit - d->waited - el; /* > 0: do not sleep past the deadline */
      long ns = left * 1e9 < (double)sleep_ns ? (long)(left * 1e9) + 1 : sleep_ns;
      struct timespec ts = {0, ns};
      nanosleep(&ts, NULL);
      if (sleep_ns < 1000000) sleep_ns *= 2;
    }
  }
  d->waited += now_s() - start;
#else
  (void)d;
#endif
  work_finish(w);
  return work_result(w);
}

attn_status attn_dist_wait(attn_dist_work *w) {
  attn_dist_deadline d = attn_dist_deadline_make();
  return attn_dist_wait_within(w, &d);
}

void attn_dist_work_free(attn_dist_work *w) {
  if (!w) return;
  if (!w->complete && !w->stuck) {
    /* MPI still owns the buffers: wait for it, unless a wait already timed
       out (a peer is gone): then give the buffers up to MPI rather than
       wait once more per pending operation. */
    if (!attn_dist_stalled())
      attn_dist_wait(w);
    else if (!attn_dist_test(w))
      w->stuck = true;
  }
  work_drop(w);
}

/* ------------------------------------------------------------------------ */
/* Starting operations                                                       */

static attn_status check_count(const char *op, const attn_tensor *t) {
  int64_t n = attn_tensor_numel(t);
  if (n > 0x7fffffff) {
    char sb[128];
    return fail(ATTN_ERR_ARG, op, "tensor %s has %lld elements; MPI counts stop at 2^31-1 (split it)",
                attn_shape_str(t->ndim, t->shape, sb, sizeof sb), (long long)n);
  }
  return ATTN_OK;
}

static attn_status check_peer(const char *op, const char *what, int peer) {
  if (peer < 0 || peer >= world_size)
    return fail(ATTN_ERR_ARG, op, "%s must be a rank in 0..%d, got %d", what, world_size - 1, peer);
  return ATTN_OK;
}

/* w->t = t, w->buf = t or a contiguous copy (copy_data: with t's values).
   A target that is written (allreduce, broadcast, recv) may not be an
   expanded view whose elements share memory. */
static attn_status stage(attn_dist_work *w, attn_tensor *t, bool copy_data) {
  if (w->kind == W_ALLREDUCE || w->kind == W_BROADCAST || w->kind == W_RECV)
    for (int d = 0; d < t->ndim; d++)
      if (t->stride[d] == 0 && t->shape[d] > 1) {
        char sb[128];
        return fail(ATTN_ERR_ARG, work_names[w->kind],
                    "the tensor %s is an expanded view whose elements share memory; clone it before writing in place",
                    attn_shape_str(t->ndim, t->shape, sb, sizeof sb));
      }
  w->t = attn_tensor_retain(t);
  if (attn_tensor_is_contiguous(t)) {
    w->buf = attn_tensor_retain(t);
    return ATTN_OK;
  }
  bool prev = attn_set_grad_enabled(false);
  attn_status st = copy_data ? attn_clone(t, &w->buf) : attn_empty_dtype(t->dtype, t->ndim, t->shape, &w->buf);
  attn_set_grad_enabled(prev);
  return st;
}

static attn_status start_done(attn_dist_work *w, attn_dist_work **out) {
  w->complete = true;
  *out = w;
  return ATTN_OK;
}

#ifdef ATTN_HAVE_MPI
/* Hands a started request to w, or records rc's failure. */
static attn_status started(attn_dist_work *w, int rc, attn_dist_work **out) {
  if (rc != MPI_SUCCESS) {
    attn_status st = mpi_fail(rc, work_names[w->kind]);
    w->complete = w->finished = true;
    work_drop(w);
    return st;
  }
  *out = w;
  return ATTN_OK;
}

/* Blocking forms call MPI's blocking collectives (its tuned algorithms are
   faster than the non-blocking schedules for small and mid-size buffers)
   under a watchdog: a process-wide thread that, when a blocking call has
   run past the timeout, prints "op (rank r of n): timed out ..." and
   aborts the job (a started collective cannot be cancelled, so there is
   nothing to return to).  Async forms time out in attn_dist_wait instead,
   with an error. */
typedef struct wd_slot {
  double start, deadline;
  int peer;
  const char *op;
  struct wd_slot *prev, *next;
} wd_slot;

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv;
static pthread_once_t wd_once = PTHREAD_ONCE_INIT;
static bool wd_ok;
static wd_slot *wd_head;

static void *wd_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&wd_mu);
  for (;;) {
    if (!wd_head) {
      pthread_cond_wait(&wd_cv, &wd_mu);
      continue;
    }
    wd_slot *first = wd_head;
    for (wd_slot *x = wd_head; x; x = x->next)
      if (x->deadline < first->deadline) first = x;
    double now = now_s();
    if (now >= first->deadline) {
      char pb[48];
      fprintf(stderr,
              "%s (rank %d of %d): timed out after %.1f s %s (did a rank die, stop or skip this call? the limit is "
              "%g s, set by attn.dist.set_timeout / ATTN_DIST_TIMEOUT); aborting the job\n",
              first->op, world_rank, world_size, now - first->start, waiting_for(first->peer, pb, sizeof pb),
              first->deadline - first->start);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
      _exit(1);
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double wait = first->deadline - now;
    if (wait > 1.0) wait = 1.0;
    long ns = ts.tv_nsec + (long)(wait * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&wd_cv, &wd_mu, &ts);
  }
  return NULL;
}

static void wd_start(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&wd_cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_attr_t ta;
  pthread_attr_init(&ta);
  pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  wd_ok = pthread_create(&th, &ta, wd_main, NULL) == 0;
  pthread_attr_destroy(&ta);
}

static void wd_enter(wd_slot *slot, const char *op, int peer) {
  pthread_once(&wd_once, wd_start);
  if (!wd_ok) return;
  slot->op = op;
  slot->peer = peer;
  slot->start = now_s();
  slot->deadline = slot->start + attn_dist_timeout();
  pthread_mutex_lock(&wd_mu);
  slot->prev = NULL;
  slot->next = wd_head;
  if (wd_head) wd_head->prev = slot;
  wd_head = slot;
  pthread_cond_signal(&wd_cv);
  pthread_mutex_unlock(&wd_mu);
}

static void wd_leave(wd_slot *slot) {
  if (!wd_ok) return;
  pthread_mutex_lock(&wd_mu);
  if (slot->prev)
    slot->prev->next = slot->next;
  else
    wd_head = slot->next;
  if (slot->next) slot->next->prev = slot->prev;
  pthread_mutex_unlock(&wd_mu);
}

/* A blocking MPI call that ran (rc): the work is complete. */
static attn_status ran(attn_dist_work *w, int rc, attn_dist_work **out) {
  if (rc != MPI_SUCCESS) return started(w, rc, out);
  w->complete = true;
  *out = w;
  return ATTN_OK;
}

#define BLOCKING(w, call, out)                                                                                         \
  do {                                                                                                                 \
    wd_slot slot_;                                                                                                     \
    wd_enter(&slot_, work_names[(w)->kind], (w)->peer);                                                                \
    int rc_ = (call);                                                                                                  \
    wd_leave(&slot_);                                                                                                  \
    return ran((w), rc_, (out));                                                                                       \
  } while (0)
#endif

static attn_status abandon(attn_dist_work *w, attn_status st) {
  work_drop(w);
  return st;
}

attn_status attn_dist_ibarrier(attn_dist_work **out) {
  *out = NULL;
  ENSURE_INIT();
  attn_dist_work *w = NULL;
  attn_status st = work_new(W_BARRIER, &w);
  if (st) return st;
#ifdef ATTN_HAVE_MPI
  if (use_mpi) {
    if (tl_blocking) BLOCKING(w, MPI_Barrier(comm), out);
    return started(w, MPI_Ibarrier(comm, &w->req), out);
  }
#endif
  return start_done(w, out);
}

attn_status attn_dist_iallreduce(attn_tensor *t, attn_dist_op op, attn_dist_work **out) {
  *out = NULL;
  ENSURE_INIT();
  attn_status st;
  if ((st = check_count("allreduce", t))) return st;
  if ((st = attn_check_compute("allreduce", 1, "tensor", t))) return st;
  if (t->dtype == ATTN_BOOL)
    return attn_set_error(ATTN_ERR_ARG, "allreduce: bool tensors cannot be reduced (convert with :long())");
  if (op == ATTN_DIST_AVG && t->dtype != ATTN_FLOAT32)
    return attn_set_error(ATTN_ERR_ARG, "allreduce: avg needs a floating tensor, got %s", attn_dtype_name(t->dtype));
  attn_dist_work *w = NULL;
  if ((st = work_new(W_ALLREDUCE, &w))) return st;
  w->op = op;
  if ((st = stage(w, t, true))) return abandon(w, st);
#ifdef ATTN_HAVE_MPI
  if (use_mpi && world_size > 1) {
    if (tl_blocking)
      BLOCKING(w,
               MPI_Allreduce(MPI_IN_PLACE, attn_tensor_data(w->buf), (int)attn_tensor_numel(w->buf), mpi_dtype(t),
                             mpi_op(op), comm),
               out);
    return started(w,
                   MPI_Iallreduce(MPI_IN_PLACE, attn_tensor_data(w->buf), (int)attn_tensor_numel(w->buf), mpi_dtype(t),
                                  mpi_op(op), comm, &w->req),
                   out);
  }
#endif
  return start_done(w, out);
}

attn_status attn_dist_ibroadcast(attn_tensor *t, int root, attn_dist_work **out) {
  *out = NULL;
  ENSURE_INIT();
  attn_status st;
  if ((st = check_peer("broadcast", "root", root)) || (st = check_count("broadcast", t))) return st;
  attn_dist_work *w = NULL;
  if ((st = work_new(W_BROADCAST, &w))) return st;
  if ((st = stage(w, t, root == world_rank))) return abandon(w, st);
#ifdef ATTN_HAVE_MPI
  if (use_mpi && world_size > 1) {
    if (tl_blocking)
      BLOCKING(w, MPI_Bcast(attn_tensor_data(w->buf), (int)attn_tensor_numel(w->buf), mpi_dtype(t), root, comm), out);
    return started(
        w, MPI_Ibcast(attn_tensor_data(w->buf), (int)attn_tensor_numel(w->buf), mpi_dtype(t), root, comm, &w->req),
        out);
  }
#endif
  return start_done(w, out);
}

static attn_status iallgather(const attn_tensor *t, attn_dist_work **out) {
  *out = NULL;
  ENSURE_INIT();
  attn_status st;
  char sb[128];
  if (t->ndim < 1)
    return fail(ATTN_ERR_SHAPE, "allgather", "needs a tensor of at least 1 dim (gathered along dim 1), got %s",
                attn_shape_str(t->ndim, t->shape, sb, sizeof sb));
  if ((st = check_count("allgather", t))) return st;
  int64_t shape[ATTN_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  if (t->shape[0] > INT64_MAX / world_size || attn_tensor_numel(t) > 0x7fffffff / world_size)
    return fail(ATTN_ERR_ARG, "allgather", "the gathered tensor is too large for MPI counts");
  shape[0] *= world_size;
  attn_dist_work *w = NULL;
  if ((st = work_new(W_ALLGATHER, &w))) return st;
  if ((st = stage(w, (attn_tensor *)t, true)) || (st = attn_empty_dtype(t->dtype, t->ndim, shape, &w->out)))
    return abandon(w, st);
#ifdef ATTN_HAVE_MPI
  if (use_mpi && world_size > 1) {
    int n = (int)attn_tensor_numel(w->buf);
    if (tl_blocking)
      BLOCKING(
          w, MPI_Allgather(attn_tensor_data(w->buf), n, mpi_dtype(t), attn_tensor_data(w->out), n, mpi_dtype(t), comm),
          out);
    return started(w,
                   MPI_Iallgather(attn_tensor_data(w->buf), n, mpi_dtype(t), attn_tensor_data(w->out), n, mpi_dtype(t),
                                  comm, &w->req),
                   out);
  }
#endif
  memcpy(attn_tensor_ptr(w->out), attn_tensor_ptr(w->buf),
         (size_t)attn_tensor_numel(w->buf) * attn_dtype_size(w->buf->dtype));
  return start_done(w, out);
}

static attn_status ireduce_scatter(const attn_tensor *t, attn_dist_op op, attn_dist_work **out) {
  *out = NULL;
  ENSURE_INIT();
  attn_status st;
  char sb[128];
  if (t->ndim < 1 || t->shape[0] % world_size != 0)
    return fail(ATTN_ERR_SHAPE, "reduce_scatter",
                "dim 1 of the tensor %s must be divisible by the world size %d (each rank gets one slice)",
                attn_shape_str(t->ndim, t->shape, sb, sizeof sb), world_size);
  if ((st = check_count("reduce_scatter", t))) return st;
  if ((st = attn_check_compute("reduce_scatter", 1, "tensor", t))) return st;
  int64_t shape[ATTN_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[0] /= world_size;
  attn_dist_work *w = NULL;
  if ((st = work_new(W_REDUCE_SCATTER, &w))) return st;
  w->op = op;
  if ((st = stage(w, (attn_tensor *)t, true)) || (st = attn_empty_dtype(t->dtype, t->ndim, shape, &w->out)))
    return abandon(w, st);
#ifdef ATTN_HAVE_MPI
  if (use_mpi && world_size > 1) {
    if (tl_blocking)
      BLOCKING(w,
               MPI_Reduce_scatter_block(attn_tensor_data(w->buf), attn_tensor_data(w->out),
                                        (int)attn_tensor_numel(w->out), mpi_dtype(t), mpi_op(op), comm),
               out);
    return started(w,
                   MPI_Ireduce_scatter_block(attn_tensor_data(w->buf), attn_tensor_data(w->out),
                                             (int)attn_tensor_numel(w->out), mpi_dtype(t), mpi_op(op), comm, &w->req),
                   out);
  }
#endif
  memcpy(attn_tensor_ptr(w->out), attn_tensor_ptr(w->buf),
         (size_t)attn_tensor_numel(w->buf) * attn_dtype_size(w->buf->dtype));
  return start_done(w, out);
}

attn_status attn_dist_isend(const attn_tensor *t, int dst, int tag, attn_dist_work **out) {
  *out = NULL;
  ENSURE_INIT();
  attn_status st;
  if ((st = check_peer("send", "dst", dst)) || (st = check_count("send", t))) return st;
  if (tag < 0) return fail(ATTN_ERR_ARG, "send", "tag must be >= 0, got %d", tag);
  attn_dist_work *w = NULL;
  if ((st = work_new(W_SEND, &w))) return st;
  w->peer = dst;
  if ((st = stage(w, (attn_tensor *)t, true))) return abandon(w, st);
#ifdef ATTN_HAVE_MPI
  if (use_mpi) {
    if (tl_blocking)
      BLOCKING(w, MPI_Send(attn_tensor_data(w->buf), (int)attn_tensor_numel(w->buf), mpi_dtype(t), dst, tag, comm),
               out);
    return started(
        w, MPI_Isend(attn_tensor_data(w->buf), (int)attn_tensor_numel(w->buf), mpi_dtype(t), dst, tag, comm, &w->req),
        out);
  }
#endif
  return abandon(w, fail(ATTN_ERR_STATE, "send", "a 1-rank world has no peer to send to (start with mpirun)"));
}

attn_status attn_dist_irecv(attn_tensor *t, int src, int tag, attn_dist_work **out) {
  *out = NULL;
  ENSURE_INIT();
  attn_status st;
  if ((st = check_peer("recv", "src", src)) || (st = check_count("recv", t))) return st;
  if (tag < 0) return fail(ATTN_ERR_ARG, "recv", "tag must be >= 0, got %d", tag);
  attn_dist_work *w = NULL;
  if ((st = work_new(W_RECV, &w))) return st;
  w->peer = src;
  if ((st = stage(w, t, false))) return abandon(w, st);
#ifdef ATTN_HAVE_MPI
  if (use_mpi) {
    if (tl_blocking)
      BLOCKING(w,
               MPI_Recv(attn_tensor_data(w->buf), (int)attn_tensor_numel(w->buf), mpi_dtype(t), src, tag, comm,
                        MPI_STATUS_IGNORE),
               out);
    return started(
        w, MPI_Irecv(attn_tensor_data(w->buf), (int)attn_tensor_numel(w->buf), mpi_dtype(t), src, tag, comm, &w->req),
        out);
  }
#endif
  return abandon(w, fail(ATTN_ERR_STATE, "recv", "a 1-rank world has no peer to receive from (start with mpirun)"));
}

/* Blocking forms: run (tl_blocking set by the caller), finish, free. */
static attn_status run_work(attn_status st, attn_dist_work *w, attn_tensor **result) {
  tl_blocking = false;
  if (st) return st;
  st = attn_dist_wait(w);
  if (st == ATTN_OK && result) *result = attn_tensor_retain(w->out);
  attn_dist_work_free(w);
  return st;
}

attn_status attn_dist_barrier(void) {
  attn_dist_work *w = NULL;
  attn_status st = (tl_blocking = true, attn_dist_ibarrier(&w));
  return run_work(st, w, NULL);
}

attn_status attn_dist_allreduce(attn_tensor *t, attn_dist_op op) {
  attn_dist_work *w = NULL;
  attn_status st = (tl_blocking = true, attn_dist_iallreduce(t, op, &w));
  return run_work(st, w, NULL);
}

attn_status attn_dist_broadcast(attn_tensor *t, int root) {
  attn_dist_work *w = NULL;
  attn_status st = (tl_blocking = true, attn_dist_ibroadcast(t, root, &w));
  return run_work(st, w, NULL);
}

attn_status attn_dist_allgather(const attn_tensor *t, attn_tensor **out) {
  attn_dist_work *w = NULL;
  attn_status st = (tl_blocking = true, iallgather(t, &w));
  return run_work(st, w, out);
}

attn_status attn_dist_reduce_scatter(const attn_tensor *t, attn_dist_op op, attn_tensor **out) {
  attn_dist_work *w = NULL;
  attn_status st = (tl_blocking = true, ireduce_scatter(t, op, &w));
  return run_work(st, w, out);
}

attn_status attn_dist_iallgather(const attn_tensor *t, attn_dist_work **out) { return iallgather(t, out); }
attn_status attn_dist_ireduce_scatter(const attn_tensor *t, attn_dist_op op, attn_dist_work **out) {
  return ireduce_scatter(t, op, out);
}

attn_tensor *attn_dist_work_output(const attn_dist_work *w) { return w ? w->out : NULL; }

attn_status attn_dist_send(const attn_tensor *t, int dst, int tag) {
  attn_dist_work *w = NULL;
  attn_status st = (tl_blocking = true, attn_dist_isend(t, dst, tag, &w));
  return run_work(st, w, NULL);
}

attn_status attn_dist_recv(attn_tensor *t, int src, int tag) {
  attn_dist_work *w = NULL;
  attn_status st = (tl_blocking = true, attn_dist_irecv(t, src, tag, &w));
  return run_work(st, w, NULL);
}
