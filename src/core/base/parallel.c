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
 */
#define _GNU_SOURCE
#include "base/base.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef void (*range_fn)(int64_t begin, int64_t end, void *ctx);

static struct {
  pthread_mutex_t busy; /* held by the thread running a job on the pool */
  pthread_mutex_t lock; /* guards everything below */
  pthread_cond_t wake, done;
  pthread_t *threads;
  int nworkers; /* started workers */
  bool stop;
  unsigned long generation; /* bumped for each job */
  int active;               /* workers still inside the current job */
  /* the current job */
  range_fn fn;
  void *ctx;
  int64_t n, chunk;
  int64_t next;    /* atomic: first index not handed out */
  double deadline; /* the submitting thread's (deadline.c) */
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

static void *worker_main(void *arg) {
  unsigned long seen = (unsigned long)(uintptr_t)arg;
  in_pool = true;
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    while (!pool.stop && pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.lock);
    if (pool.stop) break;
    seen = pool.generation;
    range_fn fn = pool.fn;
    void *ctx = pool.ctx;
    int64_t n = pool.n, chunk = pool.chunk;
    double deadline = pool.deadline;
    pthread_mutex_unlock(&pool.lock);
    attn_deadline_set_current(deadline);
    run_chunks(fn, ctx, n, chunk);
    attn_deadline_set_current(0);
    pthread_mutex_lock(&pool.lock);
    if (--pool.active == 0) pthread_cond_signal(&pool.done);
  }
  pthread_mutex_unlock(&pool.lock);
  return NULL;
}

/* Stops and joins every worker; the caller holds pool.busy. */
static void stop_workers(void) {
  if (!pool.nworkers) return;
  pthread_mutex_lock(&pool.lock);
  pool.stop = true;
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < pool.nworkers; i++) pthread_join(pool.threads[i], NULL);
  free(pool.threads);
  pool.threads = NULL;
  pool.nworkers = 0;
  pool.stop = false;
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
    if (pthread_create(&pool.threads[i], NULL, worker_main, (void *)(uintptr_t)pool.generation) != 0) break;
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
  pthread_mutex_lock(&pool.lock);
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.chunk = chunk;
  pool.deadline = attn_deadline_current();
  __atomic_store_n(&pool.next, 0, __ATOMIC_RELAXED);
  pool.active = pool.nworkers;
  pool.generation++;
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);

  in_pool = true;
  run_chunks(fn, ctx, n, chunk);
  in_pool = false;

  pthread_mutex_lock(&pool.lock);
  while (pool.active > 0) pthread_cond_wait(&pool.done, &pool.lock);
  pthread_mutex_unlock(&pool.lock);
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
