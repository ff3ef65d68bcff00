/* SPDX-License-Identifier: MIT */
/* Time limits for long kernels (attn.h): a per-thread deadline on the
 * monotonic clock that kernels poll between blocks of work.
 *
 * attn__cancelled() is the poll: a thread-local read when no deadline is
 * set, else one read of the coarse monotonic clock (a few nanoseconds
 * through the vDSO, resolution a few milliseconds).  Once it has seen the
 * deadline pass it stays true until the thread's deadline is set again,
 * so every later poll of a cancelled kernel is a thread-local read. */
#define _GNU_SOURCE
#include "base/base.h"

#include <time.h>

static _Thread_local double deadline; /* 0: none */
static _Thread_local bool expired;

#ifdef CLOCK_MONOTONIC_COARSE
#define COARSE_CLOCK CLOCK_MONOTONIC_COARSE
#else
#define COARSE_CLOCK CLOCK_MONOTONIC
#endif

static double read_clock(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double attn_clock_now(void) { return read_clock(CLOCK_MONOTONIC); }

double attn_deadline_set_current(double when) {
  double prev = deadline;
  deadline = when > 0 && when == when ? when : 0;
  expired = false;
  return prev;
}

double attn_deadline_current(void) { return deadline; }

bool attn__cancelled(void) {
  if (deadline == 0) return false;
  if (expired) return true;
  /* the coarse clock lags the fine one by at most a tick: a kernel stops
     at most that much later than the hook would */
  if (read_clock(COARSE_CLOCK) >= deadline) expired = true;
  return expired;
}

bool attn_deadline_passed(void) {
  if (deadline == 0) return false;
  if (!expired && attn_clock_now() >= deadline) expired = true;
  return expired;
}

attn_status attn__limit_error(const char *fn) { return attn_set_error(ATTN_ERR_LIMIT, "%s: time limit reached", fn); }
