/* SPDX-License-Identifier: MIT */
/* Memory budgets (attn.h): a refcounted byte counter with a limit that
 * storage_new (tensor.c) charges while a thread has a current budget. */
#include "base/base.h"

struct attn_budget {
  int64_t used; /* atomic */
  int64_t limit;
  long refcount; /* atomic */
};

static _Thread_local attn_budget *current;

attn_status attn_budget_new(int64_t limit, attn_budget **out) {
  if (limit <= 0) return attn_set_error(ATTN_ERR_ARG, "budget_new: limit must be > 0 (got %lld)", (long long)limit);
  attn_budget *b = attn__calloc(1, sizeof *b);
  if (!b) return attn_set_error(ATTN_ERR_NOMEM, "budget_new: out of memory");
  b->limit = limit;
  b->refcount = 1;
  *out = b;
  return ATTN_OK;
}

attn_budget *attn_budget_retain(attn_budget *b) {
  if (b) __atomic_add_fetch(&b->refcount, 1, __ATOMIC_RELAXED);
  return b;
}

void attn_budget_release(attn_budget *b) {
  if (b && __atomic_sub_fetch(&b->refcount, 1, __ATOMIC_ACQ_REL) == 0) free(b);
}

bool attn_budget_charge(attn_budget *b, int64_t bytes) {
  if (bytes < 0) return false;
  int64_t used = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
  do {
    /* written as a subtraction so that a huge request cannot overflow */
    if (bytes > b->limit - used) return false;
  } while (!__atomic_compare_exchange_n(&b->used, &used, used + bytes, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return true;
}

void attn_budget_credit(attn_budget *b, int64_t bytes) { __atomic_sub_fetch(&b->used, bytes, __ATOMIC_RELAXED); }

int64_t attn_budget_used(const attn_budget *b) { return __atomic_load_n(&b->used, __ATOMIC_RELAXED); }

int64_t attn_budget_limit(const attn_budget *b) { return b->limit; }

attn_budget *attn_budget_set_current(attn_budget *b) {
  attn_budget *prev = current;
  current = b;
  return prev;
}

attn_budget *attn_budget_current(void) { return current; }
