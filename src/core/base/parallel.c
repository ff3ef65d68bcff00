/* SPDX-License-Identifier: MIT */
/* attn's thread pool: the one place attn creates threads (OpenBLAS keeps
 * its own).
 *
 * A small persistent pool of nthreads - 1 workers; the calling thread is
 * the last member.  The pool knows nothing of BLAS: attn_set_num_threads
 * (blas.c) and BLAS's loading tell it the count (attn__parallel_resize), so
 * both use as many threads; until then it takes the count OpenBLAS would
 * (OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else the online CPUs).  attn__parallel_for hands out chunks
 * of [0, n) from an atomic counter, so uneven work (causal attention) still
 * balances.  Kernels running on the pool must not call OpenBLAS: its own
 * threads would then compete with ours.
 *
 * Nesting and concurrency never block: a parallel_for from inside a worker
 * (or from the caller while it runs its share) runs serially, and so does
 * one issued by a second application thread while the pool is busy.
 *
 * Waking a sleeping thread through the kernel costs tens of microseconds,
 * as much as a whole elementwise pass over 100k floats, and a training
 * step issues hundreds of such jobs with a few microseconds of Lua between
 * them.  So an idle worker first spins (with a pause) on the job counter
 * for SPIN_NS before it sleeps on the condition variable, and the caller
 * spins likewise for the workers' last chunks: jobs that come in quick
 * succession cost an atomic store and a few cache misses.  Submitting
 * takes the lock only when a worker is asleep (sleepers), and finishing
 * only when the caller is (waiting).
 */
#define _GNU_SOURCE
#include "base/base.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker, or a caller waiting for its workers, spins
   before it sleeps: longer than the Lua between two ops of a step, short
   enough that an idle pool stops using a core within a millisecond. */
#define SPIN_NS 200000

typedef void (*range_fn)(int64_t begin, int64_t end, void *ctx);

static struct {
  pthread_mutex_t busy; /* held by the thread running a job on the pool */
  pthread_mutex_t lock; /* guards everything below */
  pthread_cond_t wake, done;
  pthread_t *threads;
  int nworkers;             /* started workers */
  bool stop;                /* atomic */
  unsigned long generation; /* atomic: bumped for each job, after its fields */
  int active;               /* atomic: workers still inside the current job */
  int sleepers;             /* atomic: workers asleep on wake (or about to be) */
  bool waiting;             /* atomic: the caller asleep on done (or about to be) */
  /* the current job */
  range_fn fn;
  void *ctx;
  int64_t n, chunk;
  int64_t next;        /* atomic: first index not handed out */
  double deadline;     /* the submitting thread's (deadline.c) */
  attn_budget *budget; /* and its budget (budget.c): scratch in a job counts there */
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER,
          .lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static _Thread_local bool in_pool;
static int pool_threads; /* atomic; 0 until attn__parallel_resize or the first job */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Takes chunks until the job runs out, or the deadline passes: then the
   rest is skipped and the kernel, polling after attn__parallel_for, fails
   (the deadline is still passed when it looks). */
static void run_chunks(range_fn fn, void *ctx, int64_t n, int64_t chunk) {
  for (;;) {
    if (attn__cancelled()) break;
    int64_t b = __atomic_fetch_add(&pool.next, chunk, __ATOMIC_RELAXED);
    if (b >= n) break;
    fn(b, b + chunk < n ? b + chunk : n, ctx);
  }
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Spins for at most SPIN_NS until *gen differs from seen or the pool
   stops (a worker waiting for a job), or, with gen NULL, until *count is 0
   (the caller waiting for its workers); true if that happened. */
static bool spin_until(const unsigned long *gen, unsigned long seen, const int *count) {
  double start = 0;
  for (unsigned i = 1;; i++) {
    if (gen ? __atomic_load_n(gen, __ATOMIC_ACQUIRE) != seen || __atomic_load_n(&pool.stop, __ATOMIC_ACQUIRE)
            : __atomic_load_n(count, __ATOMIC_ACQUIRE) == 0)
      return true;
    cpu_relax();
    if ((i & 63) == 0) { /* the clock is read now and then: a vDSO call costs as much as 64 pauses */
      double t = now_ns();
      if (start == 0)
        start = t;
      else if (t - start > SPIN_NS)
        return false;
    }
  }
}

static void *worker_main(void *arg) {
  unsigned long seen = (unsigned long)(uintptr_t)arg;
  in_pool = true;
  for (;;) {
    if (!spin_until(&pool.generation, seen, NULL)) {
      /* sleepers is raised before generation is read again, and the
         caller bumps generation before it reads sleepers (both seq_cst):
         either this worker sees the new job or the caller sees it asleep
         and broadcasts under the lock */
      pthread_mutex_lock(&pool.lock);
      __atomic_add_fetch(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
      while (!__atomic_load_n(&pool.stop, __ATOMIC_SEQ_CST) &&
             __atomic_load_n(&pool.generation, __ATOMIC_SEQ_CST) == seen)
        pthread_cond_wait(&pool.wake, &pool.lock);
      __atomic_sub_fetch(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
      pthread_mutex_unlock(&pool.lock);
    }
    if (__atomic_load_n(&pool.stop, __ATOMIC_ACQUIRE)) break;
    seen = __atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE);
    /* the job's fields were written before generation was bumped, and
       stay until every worker has left it (active) */
    range_fn fn = pool.fn;
    void *ctx = pool.ctx;
    int64_t n = pool.n, chunk = pool.chunk;
    double deadline = pool.deadline;
    attn_budget *budget = pool.budget;
    attn_deadline_set_current(deadline);
    attn_budget_set_current(budget);
    run_chunks(fn, ctx, n, chunk);
    attn_budget_set_current(NULL);
    attn_deadline_set_current(0);
    if (__atomic_sub_fetch(&pool.active, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&pool.waiting, __ATOMIC_SEQ_CST)) {
      pthread_mutex_lock(&pool.lock);
      pthread_cond_signal(&pool.done);
      pthread_mutex_unlock(&pool.lock);
    }
  }
  return NULL;
}

/* Stops and joins every worker; the caller holds pool.busy. */
static void stop_workers(void) {
  if (!pool.nworkers) return;
  pthread_mutex_lock(&pool.lock);
  __atomic_store_n(&pool.stop, true, __ATOMIC_SEQ_CST);
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < pool.nworkers; i++) pthread_join(pool.threads[i], NULL);
  free(pool.threads);
  pool.threads = NULL;
  pool.nworkers = 0;
  __atomic_store_n(&pool.stop, false, __ATOMIC_SEQ_CST);
}

/* A forked child has none of the parent's workers: start afresh. */
static void atfork_child(void) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  pool.busy = m;
  pool.lock = m;
  pool.wake = c;
  pool.done = c;
  pool.threads = NULL; /* the parent's array is leaked in the child */
  pool.nworkers = 0;
  pool.stop = false;
  pool.active = 0;
  pool.sleepers = 0;
  pool.waiting = false;
  in_pool = false;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

/* Brings the pool to want workers; the caller holds pool.busy.  Falls back
   to fewer workers if threads cannot be created. */
static void ensure_workers(int want) {
  if (want == pool.nworkers) return;
  stop_workers();
  if (want <= 0) return;
  pthread_once(&atfork_once, register_atfork);
  pool.threads = attn__calloc((size_t)want, sizeof *pool.threads);
  if (!pool.threads) return;
  for (int i = 0; i < want; i++) {
    if (pthread_create(&pool.threads[i], NULL, worker_main,
                       (void *)(uintptr_t)__atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE)) != 0)
      break;
    pool.nworkers++;
  }
}

static int env_threads(const char *name) {
  const char *v = getenv(name);
  long n = v && *v ? strtol(v, NULL, 10) : 0;
  return n > 0 ? (int)(n < ATTN_MAX_THREADS ? n : ATTN_MAX_THREADS) : 0;
}

int attn__parallel_threads(void) {
  int n = __atomic_load_n(&pool_threads, __ATOMIC_RELAXED);
  if (n > 0) return n;
  n = env_threads("OPENBLAS_NUM_THREADS");
  if (!n) n = env_threads("OMP_NUM_THREADS");
  if (!n) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c < 1 ? 1 : c > ATTN_MAX_THREADS ? ATTN_MAX_THREADS : (int)c;
  }
  int unset = 0; /* a resize that came first wins */
  __atomic_compare_exchange_n(&pool_threads, &unset, n, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return __atomic_load_n(&pool_threads, __ATOMIC_RELAXED);
}

void attn__parallel_resize(int nthreads) {
  if (nthreads < 1) nthreads = 1;
  __atomic_store_n(&pool_threads, nthreads, __ATOMIC_RELAXED);
  if (in_pool) return; /* from inside a job: the next job resizes */
  pthread_mutex_lock(&pool.busy);
  if (pool.nworkers != nthreads - 1) stop_workers(); /* restarted lazily at the size wanted then */
  pthread_mutex_unlock(&pool.busy);
}

void attn__parallel_for(int64_t n, range_fn fn, void *ctx) {
  if (n <= 0) return;
  int nt = n > 1 && !in_pool ? attn__parallel_threads() : 1;
  if (nt <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
    fn(0, n, ctx);
    return;
  }
  ensure_workers(nt - 1);
  if (pool.nworkers == 0) {
    pthread_mutex_unlock(&pool.busy);
    fn(0, n, ctx);
    return;
  }
  int64_t parts = (int64_t)(pool.nworkers + 1) * 8;
  int64_t chunk = n / parts > 1 ? n / parts : 1;
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.chunk = chunk;
  pool.deadline = attn_deadline_current();
  pool.budget = attn_budget_current();
  __atomic_store_n(&pool.next, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&pool.active, pool.nworkers, __ATOMIC_RELAXED);
  __atomic_add_fetch(&pool.generation, 1, __ATOMIC_SEQ_CST); /* publishes the fields above */
  if (__atomic_load_n(&pool.sleepers, __ATOMIC_SEQ_CST) > 0) {
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
  }

  in_pool = true;
  run_chunks(fn, ctx, n, chunk);
  in_pool = false;

  if (!spin_until(NULL, 0, &pool.active)) {
    pthread_mutex_lock(&pool.lock);
    __atomic_store_n(&pool.waiting, true, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&pool.active, __ATOMIC_SEQ_CST) > 0) pthread_cond_wait(&pool.done, &pool.lock);
    __atomic_store_n(&pool.waiting, false, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&pool.lock);
  }
  pthread_mutex_unlock(&pool.busy);
}

/* Joins the idle workers when the library is unloaded (dlclose of the Lua
   module) or the process exits, so no thread is left running code that is
   about to disappear. */
__attribute__((destructor)) static void pool_shutdown(void) {
  if (pthread_mutex_trylock(&pool.busy) != 0) return;
  stop_workers();
  pthread_mutex_unlock(&pool.busy);
}
