/* SPDX-License-Identifier: MIT */
/* SDPA scratch and its counter: the 64-byte aligned, budget-charged blocks
 * that the fused kernels (kernels_*.c, through sdpa_tiles.h) and sdpa.c
 * allocate, and the peak the tests read to check the memory stays O(L).
 * Below both, so that the kernels never call up into sdpa.c. */
#include "kernels/kernels.h"
#include "sdpa_plan.h"

#include <stdlib.h>

#define round_up sdpa_round_up

/* ------------------------------------------------------------------------ */
/* Allocation counter (tests check the kernel's memory stays O(L))          */

static int64_t mem_cur, mem_peak;

void attn__sdpa_mem_add(int64_t bytes) {
  int64_t c = __atomic_add_fetch(&mem_cur, bytes, __ATOMIC_RELAXED);
  int64_t p = __atomic_load_n(&mem_peak, __ATOMIC_RELAXED);
  while (c > p && !__atomic_compare_exchange_n(&mem_peak, &p, c, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

void attn__sdpa_mem_reset(void) {
  __atomic_store_n(&mem_peak, __atomic_load_n(&mem_cur, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

int64_t attn__sdpa_mem_peak(void) { return __atomic_load_n(&mem_peak, __ATOMIC_RELAXED); }

/* 64-byte aligned scratch, counted */
float *attn__sdpa_scratch_alloc(int64_t nfloats) {
  if (nfloats > ((int64_t)1 << 58)) return NULL; /* the byte count below would overflow */
  int64_t bytes = round_up((nfloats > 0 ? nfloats : 1) * (int64_t)sizeof(float), 64);
  if (bytes <= 0 || (uint64_t)bytes > SIZE_MAX) return NULL;
  /* counted against the thread's budget, if any (the caller's lse/D;
     workers have none): freed on the thread that made it */
  attn_budget *b = attn_budget_current();
  if (b && !attn_budget_charge(b, bytes)) return NULL;
  float *p = aligned_alloc(64, (size_t)bytes);
  if (p)
    attn__sdpa_mem_add(bytes);
  else if (b)
    attn_budget_credit(b, bytes);
  return p;
}

void attn__sdpa_scratch_free(float *p, int64_t nfloats) {
  if (!p) return;
  int64_t bytes = round_up((nfloats > 0 ? nfloats : 1) * (int64_t)sizeof(float), 64);
  attn__sdpa_mem_add(-bytes);
  free(p);
  attn_budget *b = attn_budget_current();
  if (b) attn_budget_credit(b, bytes);
}
