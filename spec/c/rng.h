/* SPDX-License-Identifier: MIT */
/* The random numbers of the C tests that draw their own inputs: xorshift64
   (Marsaglia's 13/7/17), so every run draws the same.  Define RNG_SEED (a
   non-zero uint64_t) before including this header to pick the stream. */
#ifndef ATTN_TEST_RNG_H
#define ATTN_TEST_RNG_H
#include <math.h>
#include <stdint.h>

#ifndef RNG_SEED
#define RNG_SEED 0x9E3779B97F4A7C15ull
#endif

static uint64_t rng_state = RNG_SEED;

static inline uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Uniform in [0, n). */
static inline int rnd_int(int n) { return (int)(rnd() % (uint64_t)n); }

/* Uniform in [0, 1), 53 bits. */
static inline double rnd_unif(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* Standard normal (Box-Muller). */
static inline double rnd_normal(void) {
  double u = rnd_unif(), v = rnd_unif();
  return sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}
#endif
