/* SPDX-License-Identifier: MIT */
/* A tiny test harness for the C tests: CHECK records failures and goes on,
   check_summary() prints "N passed, N failed" and gives the exit code. */
#ifndef ATTN_CHECK_H
#define ATTN_CHECK_H
#include <math.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                                                    \
  do {                                                                                                                 \
    if (cond) {                                                                                                        \
      check_passed++;                                                                                                  \
    } else {                                                                                                           \
      check_failed++;                                                                                                  \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                                         \
    }                                                                                                                  \
  } while (0)

#define CHECK_OK(expr)                                                                                                 \
  do {                                                                                                                 \
    attn_status check_st_ = (expr);                                                                                    \
    if (check_st_ == ATTN_OK) {                                                                                        \
      check_passed++;                                                                                                  \
    } else {                                                                                                           \
      check_failed++;                                                                                                  \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, attn_last_error());                         \
    }                                                                                                                  \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                          \
  do {                                                                                                                 \
    double check_a_ = (a), check_b_ = (b);                                                                             \
    if (fabs(check_a_ - check_b_) <= (tol)) {                                                                          \
      check_passed++;                                                                                                  \
    } else {                                                                                                           \
      check_failed++;                                                                                                  \
      fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, #a, check_a_, check_b_);                \
    }                                                                                                                  \
  } while (0)

static inline int check_summary(void) {
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed ? 1 : 0;
}
#endif
