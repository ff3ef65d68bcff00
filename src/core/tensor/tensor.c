/* SPDX-License-Identifier: MIT */
/* Storage, tensor lifetime and creation (copies and views: views.c). */
#include "tensor/tensor.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

int64_t attn__live_tensors, attn__live_storages, attn__live_storage_bytes, attn__live_nodes;

void attn_debug_counts_get(attn_debug_counts *out) {
  out->tensors = __atomic_load_n(&attn__live_tensors, __ATOMIC_RELAXED);
  out->storages = __atomic_load_n(&attn__live_storages, __ATOMIC_RELAXED);
  out->storage_bytes = __atomic_load_n(&attn__live_storage_bytes, __ATOMIC_RELAXED);
  out->nodes = __atomic_load_n(&attn__live_nodes, __ATOMIC_RELAXED);
}

attn_budget *attn__reserve(int64_t bytes, bool *over) {
  *over = false;
  attn_budget *b = attn_budget_current();
  if (!b) return NULL;
  if (!attn_budget_charge(b, bytes)) {
    *over = true;
    return NULL;
  }
  return attn_budget_retain(b);
}

void attn__unreserve(attn_budget *b, int64_t bytes) {
  if (!b) return;
  attn_budget_credit(b, bytes);
  attn_budget_release(b);
}

/* The budget current at allocation is current at the free too: scratch
   lives within one call of the thread that made it. */
void *attn__scratch_alloc(size_t bytes) {
  attn_budget *b = attn_budget_current();
  if (b && (bytes > INT64_MAX || !attn_budget_charge(b, (int64_t)bytes))) return NULL;
  void *p = malloc(bytes ? bytes : 1);
  if (!p && b) attn_budget_credit(b, (int64_t)bytes);
  return p;
}

void attn__scratch_free(void *p, size_t bytes) {
  if (!p) return;
  free(p);
  attn_budget *b = attn_budget_current();
  if (b) attn_budget_credit(b, (int64_t)bytes);
}

/* "12 MB", or "0.25 MB" below 10 MB (small sandbox caps). */
static const char *mb_str(int64_t bytes, char *buf, size_t size) {
  double mb = (double)bytes / (1 << 20);
  if (mb >= 10)
    snprintf(buf, size, "%.0f MB", mb);
  else
    snprintf(buf, size, "%.2g MB", mb);
  return buf;
}

attn_status attn__budget_refused(const char *fn, int64_t bytes, const char *what) {
  attn_budget *b = attn_budget_current();
  char nb[32], cb[32], ub[32];
  return attn_set_error(ATTN_ERR_NOMEM, "not enough memory: %s needs %s%s%s, cap %s (%s in use)", fn,
                        mb_str(bytes, nb, sizeof nb), what ? " for " : "", what ? what : "",
                        mb_str(b ? attn_budget_limit(b) : 0, cb, sizeof cb),
                        mb_str(b ? attn_budget_used(b) : 0, ub, sizeof ub));
}

attn_status attn__nomem(const char *fn, int64_t bytes) {
  attn_budget *b = attn_budget_current();
  if (b && bytes > attn_budget_limit(b) - attn_budget_used(b)) return attn__budget_refused(fn, bytes, NULL);
  return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory allocating %lld bytes", fn, (long long)bytes);
}

/* ------------------------------------------------------------------------ */
/* Per-thread caches of tensor headers and small storage blocks. A tiny op
   allocates and frees a few of each per call, and Lua's collector frees
   them in bursts that overflow malloc's own thread cache; a short free
   list per thread makes the pair cost a few instructions. A thread's
   cache is freed when it exits. Sanitizer builds skip the caches so that
   use-after-free stays visible. */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ATTN_NO_CACHE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define ATTN_NO_CACHE 1
#endif
#endif

#define CACHE_MAX 2048          /* items per kind: more than one GC sweep frees in a burst */
#define SMALL_STORAGE_BYTES 256 /* data bytes of the one cached storage size */

typedef struct cache_item {
  struct cache_item *next;
} cache_item;

typedef struct {
  cache_item *head[2]; /* 0: tensor headers, 1: small storage blocks */
  int n[2];
  bool registered;
} thread_cache;

#ifndef ATTN_NO_CACHE
static _Thread_local thread_cache tcache;
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;
static bool tcache_key_ok;

static void tcache_drain(void *arg) {
  thread_cache *c = arg;
  for (int k = 0; k < 2; k++) {
    while (c->head[k]) {
      cache_item *it = c->head[k];
      c->head[k] = it->next;
      free(it);
    }
    c->n[k] = 0;
  }
}

static void tcache_key_init(void) { tcache_key_ok = pthread_key_create(&tcache_key, tcache_drain) == 0; }
#endif

static void *cache_get(int kind, size_t size) {
#ifndef ATTN_NO_CACHE
  cache_item *it = tcache.head[kind];
  if (it) {
    tcache.head[kind] = it->next;
    tcache.n[kind]--;
    return it;
  }
#else
  (void)kind;
#endif
  return malloc(size);
}

static void cache_put(int kind, void *p) {
#ifndef ATTN_NO_CACHE
  if (tcache.n[kind] < CACHE_MAX) {
    if (!tcache.registered) {
      /* the exit hook needs a non-NULL value per thread */
      pthread_once(&tcache_once, tcache_key_init);
      if (!tcache_key_ok || pthread_setspecific(tcache_key, &tcache) != 0) {
        free(p);
        return;
      }
      tcache.registered = true;
    }
    cache_item *it = p;
    it->next = tcache.head[kind];
    tcache.head[kind] = it;
    tcache.n[kind]++;
    return;
  }
#else
  (void)kind;
#endif
  free(p);
}

/* *over is set when the thread's budget (attn_budget_set_current) refused
   the bytes; nothing is allocated then. */
static attn_storage *storage_new(int64_t numel, attn_dtype dt, bool *over) {
  /* 64-byte alignment keeps AVX-512 loads on one cache line. */
  size_t bytes = (size_t)(numel ? numel : 1) * attn_dtype_size(dt);
  bytes = (bytes + 63) & ~(size_t)63;
  attn_budget *budget = attn_budget_current();
  *over = false;
  if (budget && !attn_budget_charge(budget, (int64_t)(bytes + sizeof(attn_storage)))) {
    *over = true;
    return NULL;
  }
  /* One block: the header, then the data at the next 64-byte boundary.
     One malloc (served from the thread cache for small tensors) instead of
     a calloc and an aligned_alloc, which dominated tiny ops. */
  attn_storage *s = NULL;
  if (bytes <= SMALL_STORAGE_BYTES)
    s = cache_get(1, sizeof *s + 64 + SMALL_STORAGE_BYTES);
  else if (bytes <= SIZE_MAX - sizeof *s - 64 && (s = malloc(sizeof *s + 64 + bytes)))
    attn__advise_huge(s, sizeof *s + 64 + bytes);
  if (!s) {
    if (budget) attn_budget_credit(budget, (int64_t)(bytes + sizeof(attn_storage)));
    return NULL;
  }
  memset(s, 0, sizeof *s);
  s->data = (void *)(((uintptr_t)(s + 1) + 63) & ~(uintptr_t)63);
  s->numel = numel;
  s->dtype = dt;
  s->refcount = 1;
  s->budget = attn_budget_retain(budget);
  ATTN__COUNT(attn__live_storages, 1);
  ATTN__COUNT(attn__live_storage_bytes, (int64_t)bytes);
  return s;
}

static void storage_release(attn_storage *s) {
  if (!s) return;
  if (__atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  bool small = false;
  if (s->release) {
    s->release(s->release_ctx, (float *)s->data);
  } else if (!s->release_ctx) {
    size_t bytes = ((size_t)(s->numel ? s->numel : 1) * attn_dtype_size(s->dtype) + 63) & ~(size_t)63;
    ATTN__COUNT(attn__live_storage_bytes, -(int64_t)bytes);
    /* the data lives in the same block as s (storage_new) */
    if (bytes <= SMALL_STORAGE_BYTES) small = true;
    if (s->budget) {
      attn_budget_credit(s->budget, (int64_t)(bytes + sizeof(attn_storage)));
      attn_budget_release(s->budget);
    }
  }
  ATTN__COUNT(attn__live_storages, -1);
  if (small)
    cache_put(1, s);
  else
    free(s);
}

attn_tensor *attn__tensor_new(attn_storage *s, int64_t offset, int ndim, const int64_t *shape, const int64_t *stride) {
  bool over;
  attn_budget *b = attn__reserve((int64_t)sizeof(attn_tensor), &over);
  if (over) return NULL;
  attn_tensor *t = cache_get(0, sizeof *t);
  if (!t) {
    attn__unreserve(b, (int64_t)sizeof(attn_tensor));
    return NULL;
  }
  memset(t, 0, sizeof *t);
  t->budget = b;
  ATTN__COUNT(attn__live_tensors, 1);
  __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED);
  t->storage = s;
  t->dtype = s->dtype;
  t->offset = offset;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->stride[i] = stride[i];
  }
  t->refcount = 1;
  return t;
}

attn_status attn__alloc(const char *fn, int ndim, const int64_t *shape, attn_tensor **out) {
  return attn__alloc_dtype(fn, ATTN_FLOAT32, ndim, shape, out);
}

attn_status attn__alloc_dtype(const char *fn, attn_dtype dt, int ndim, const int64_t *shape, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  if (ndim < 0 || ndim > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "%s: %d dims requested, at most %d are supported", fn, ndim, ATTN_MAX_DIMS);
  int64_t numel = attn__shape_numel(ndim, shape);
  if (numel < 0) {
    for (int i = 0; i < ndim; i++)
      if (shape[i] < 0)
        return attn_set_error(ATTN_ERR_ARG, "%s: negative size in shape %s", fn,
                              attn_shape_str(ndim, shape, sb, sizeof sb));
    return attn_set_error(ATTN_ERR_NOMEM, "%s: shape %s has too many elements", fn,
                          attn_shape_str(ndim, shape, sb, sizeof sb));
  }
  /* Past the thread's deadline (attn.h) every kernel that would allocate
     a result fails here, before touching memory. */
  if (attn__cancelled()) return attn__limit_error(fn);
  bool over;
  if ((unsigned)dt >= ATTN_DTYPE_COUNT) return attn_set_error(ATTN_ERR_ARG, "%s: invalid dtype %d", fn, (int)dt);
  int64_t esize = (int64_t)attn_dtype_size(dt);
  attn_storage *s = storage_new(numel, dt, &over);
  if (over) {
    return attn__budget_refused(fn, numel * esize, attn_shape_str(ndim, shape, sb, sizeof sb));
  }
  if (!s)
    return attn_set_error(ATTN_ERR_NOMEM, "%s: out of memory allocating %s (%lld bytes)", fn,
                          attn_shape_str(ndim, shape, sb, sizeof sb), (long long)(numel * esize));
  int64_t stride[ATTN_MAX_DIMS];
  attn__contiguous_strides(ndim, shape, stride);
  attn_tensor *t = attn__tensor_new(s, 0, ndim, shape, stride);
  storage_release(s); /* the tensor holds the only reference now */
  if (!t) return attn__nomem(fn, (int64_t)sizeof(attn_tensor));
  *out = t;
  return ATTN_OK;
}

attn_tensor *attn_tensor_retain(attn_tensor *t) {
  if (t) __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
  return t;
}

void attn_tensor_release(attn_tensor *t) {
  if (!t) return;
  if (__atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (t->autograd) t->autograd->release(t);
  storage_release(t->storage);
  attn__unreserve(t->budget, (int64_t)sizeof(attn_tensor));
  ATTN__COUNT(attn__live_tensors, -1);
  cache_put(0, t);
}

int64_t attn_tensor_numel(const attn_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

bool attn_tensor_is_contiguous(const attn_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 1) continue;
    if (t->shape[i] == 0) return true;
    if (t->stride[i] != s) return false;
    s *= t->shape[i];
  }
  return true;
}

bool attn_same_shape(const attn_tensor *a, const attn_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* ------------------------------------------------------------------------ */
/* Dtypes                                                                    */

static const char *const dtype_names[ATTN_DTYPE_COUNT] = {"float32", "int64", "bool", "float16", "bfloat16", "float64"};
static const size_t dtype_sizes[ATTN_DTYPE_COUNT] = {sizeof(float),    sizeof(int64_t),  sizeof(bool),
                                                     sizeof(uint16_t), sizeof(uint16_t), sizeof(double)};

const char *attn_dtype_name(attn_dtype dt) { return (unsigned)dt < ATTN_DTYPE_COUNT ? dtype_names[dt] : "?"; }
size_t attn_dtype_size(attn_dtype dt) { return (unsigned)dt < ATTN_DTYPE_COUNT ? dtype_sizes[dt] : sizeof(float); }

bool attn_dtype_parse(const char *name, attn_dtype *out) {
  static const struct {
    const char *name;
    attn_dtype dt;
  } names[] = {
      {"float32", ATTN_FLOAT32}, {"float", ATTN_FLOAT32},   {"int64", ATTN_INT64},  {"long", ATTN_INT64},
      {"bool", ATTN_BOOL},       {"float16", ATTN_FLOAT16}, {"half", ATTN_FLOAT16}, {"bfloat16", ATTN_BFLOAT16},
      {"float64", ATTN_FLOAT64}, {"double", ATTN_FLOAT64},
  };
  if (!name) return false;
  if (strncmp(name, "torch.", 6) == 0)
    name += 6;
  else if (strncmp(name, "attn.", 5) == 0)
    name += 5;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i].name) == 0) {
      *out = names[i].dt;
      return true;
    }
  return false;
}

attn_dtype attn_promote_types(attn_dtype a, attn_dtype b) {
  if (a == ATTN_FLOAT64 || b == ATTN_FLOAT64) return ATTN_FLOAT64;
  if (a == ATTN_FLOAT32 || b == ATTN_FLOAT32) return ATTN_FLOAT32;
  if (attn_dtype_is_storage(a) && attn_dtype_is_storage(b)) return a == b ? a : ATTN_FLOAT32; /* f16 with bf16 */
  if (attn_dtype_is_storage(a)) return a;
  if (attn_dtype_is_storage(b)) return b;
  if (a == ATTN_INT64 || b == ATTN_INT64) return ATTN_INT64;
  return ATTN_BOOL;
}

attn_status attn_check_compute(const char *fn, int argno, const char *what, const attn_tensor *t) {
  if (!t || !attn_dtype_is_storage(t->dtype)) return ATTN_OK;
  const char *name = attn_dtype_name(t->dtype);
  if (what)
    return attn_set_error(ATTN_ERR_ARG,
                          "%s: argument '%s' is %s, a storage dtype (attn computes in float32): convert it with "
                          "x:float()",
                          fn, what, name);
  return attn_set_error(ATTN_ERR_ARG,
                        "%s: argument %d is %s, a storage dtype (attn computes in float32): convert it with x:float()",
                        fn, argno, name);
}

attn_status attn_check_float(const char *fn, const char *what, const attn_tensor *t) {
  if (t->dtype == ATTN_FLOAT32) return ATTN_OK;
  if (attn_dtype_is_storage(t->dtype)) return attn_check_compute(fn, 1, what ? what : "input", t);
  if (what)
    return attn_set_error(ATTN_ERR_ARG, "%s: expected a floating tensor for '%s', got %s", fn, what,
                          attn_dtype_name(t->dtype));
  return attn_set_error(ATTN_ERR_ARG, "%s: expected a floating tensor, got %s", fn, attn_dtype_name(t->dtype));
}

/* ------------------------------------------------------------------------ */
/* float16 and bfloat16: torch 1.13's c10::Half and c10::BFloat16 rounding.  */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t attn_f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN: c10 keeps the sign only */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and inf): inf */
  if (a < 0x38800000u) {
    /* below the smallest normal half 2^-14: a subnormal half (or 0), m * 2^-24 */
    if (a < 0x33000000u) return sign; /* < 2^-25: rounds to 0 (2^-25 itself is a tie to even 0) */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24: value = m * 2^(e-150), half unit 2^-24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  /* normal: rebias the exponent and round the 13 dropped bits to even */
  uint32_t h = ((a - 0x38000000u) >> 13), rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is right */
  return (uint16_t)(sign | h);
}

float attn_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return bits_f32(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-08f; /* m * 2^-24, exact */
    return sign ? -v : v;
  }
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t attn_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if (f != f) return 0x7fc0u; /* torch: every NaN is 0x7FC0 */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float attn_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* The element at storage position pos, converted. */
static inline double load_f64(const attn_storage *s, int64_t pos) {
  switch (s->dtype) {
  case ATTN_INT64: return (double)((const int64_t *)s->data)[pos];
  case ATTN_BOOL: return ((const bool *)s->data)[pos] ? 1.0 : 0.0;
  case ATTN_FLOAT16: return (double)attn_f16_to_f32(((const uint16_t *)s->data)[pos]);
  case ATTN_BFLOAT16: return (double)attn_bf16_to_f32(((const uint16_t *)s->data)[pos]);
  case ATTN_FLOAT64: return ((const double *)s->data)[pos];
  default: return (double)((const float *)s->data)[pos];
  }
}
/* The element as torch's float32 (float64 rounded once, the others exact). */
static inline float load_f32(const attn_storage *s, int64_t pos) {
  switch (s->dtype) {
  case ATTN_INT64: return (float)((const int64_t *)s->data)[pos];
  case ATTN_BOOL: return ((const bool *)s->data)[pos] ? 1.0f : 0.0f;
  case ATTN_FLOAT16: return attn_f16_to_f32(((const uint16_t *)s->data)[pos]);
  case ATTN_BFLOAT16: return attn_bf16_to_f32(((const uint16_t *)s->data)[pos]);
  case ATTN_FLOAT64: return (float)((const double *)s->data)[pos];
  default: return ((const float *)s->data)[pos];
  }
}
static inline int64_t sat_i64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}
static inline int64_t load_i64(const attn_storage *s, int64_t pos) {
  switch (s->dtype) {
  case ATTN_INT64: return ((const int64_t *)s->data)[pos];
  case ATTN_BOOL: return ((const bool *)s->data)[pos];
  case ATTN_FLOAT64: return sat_i64(((const double *)s->data)[pos]);
  case ATTN_FLOAT16:
  case ATTN_BFLOAT16: return sat_i64((double)load_f32(s, pos));
  default: {
    float f = ((const float *)s->data)[pos];
    /* saturate like a checked cast; NaN gives 0 */
    if (!(f == f)) return 0;
    if (f >= 9.2233720368547758e18f) return INT64_MAX;
    if (f <= -9.2233720368547758e18f) return INT64_MIN;
    return (int64_t)f;
  }
  }
}
static inline void store_f64(attn_storage *s, int64_t pos, double v) {
  switch (s->dtype) {
  case ATTN_INT64:
    ((int64_t *)s->data)[pos] = !(v == v)                     ? 0
                                : v >= 9.2233720368547758e18  ? INT64_MAX
                                : v <= -9.2233720368547758e18 ? INT64_MIN
                                                              : (int64_t)v;
    break;
  case ATTN_BOOL: ((bool *)s->data)[pos] = v != 0; break;
  /* torch casts a double to half or bfloat16 through float (rounds twice) */
  case ATTN_FLOAT16: ((uint16_t *)s->data)[pos] = attn_f32_to_f16((float)v); break;
  case ATTN_BFLOAT16: ((uint16_t *)s->data)[pos] = attn_f32_to_bf16((float)v); break;
  case ATTN_FLOAT64: ((double *)s->data)[pos] = v; break;
  default: ((float *)s->data)[pos] = (float)v; break;
  }
}
static inline void store_i64(attn_storage *s, int64_t pos, int64_t v) {
  switch (s->dtype) {
  case ATTN_INT64: ((int64_t *)s->data)[pos] = v; break;
  case ATTN_BOOL: ((bool *)s->data)[pos] = v != 0; break;
  case ATTN_FLOAT16: ((uint16_t *)s->data)[pos] = attn_f32_to_f16((float)v); break;
  case ATTN_BFLOAT16: ((uint16_t *)s->data)[pos] = attn_f32_to_bf16((float)v); break;
  case ATTN_FLOAT64: ((double *)s->data)[pos] = (double)v; break;
  default: ((float *)s->data)[pos] = (float)v; break;
  }
}

double attn__load_f64(const attn_storage *s, int64_t pos) { return load_f64(s, pos); }
int64_t attn__load_i64(const attn_storage *s, int64_t pos) { return load_i64(s, pos); }

static int64_t flat_pos(const attn_tensor *t, int64_t i) {
  int64_t pos = t->offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t n = t->shape[d];
    pos += (i % n) * t->stride[d];
    i /= n;
  }
  return pos;
}

float attn_tensor_get(const attn_tensor *t, const int64_t *index) {
  int64_t pos = t->offset;
  for (int i = 0; i < t->ndim; i++) pos += index[i] * t->stride[i];
  return (float)load_f64(t->storage, pos);
}

void attn_tensor_set(attn_tensor *t, const int64_t *index, float v) {
  int64_t pos = t->offset;
  for (int i = 0; i < t->ndim; i++) pos += index[i] * t->stride[i];
  store_f64(t->storage, pos, v);
}

float attn_tensor_get_flat(const attn_tensor *t, int64_t i) { return (float)load_f64(t->storage, flat_pos(t, i)); }
double attn_tensor_get_flat_f64(const attn_tensor *t, int64_t i) { return load_f64(t->storage, flat_pos(t, i)); }
int64_t attn_tensor_get_flat_i64(const attn_tensor *t, int64_t i) { return load_i64(t->storage, flat_pos(t, i)); }
void attn_tensor_set_flat_f64(attn_tensor *t, int64_t i, double v) { store_f64(t->storage, flat_pos(t, i), v); }
void attn_tensor_set_flat_i64(attn_tensor *t, int64_t i, int64_t v) { store_i64(t->storage, flat_pos(t, i), v); }

/* ------------------------------------------------------------------------ */
/* Iteration helpers                                                         */

void attn__iter_init(attn__iter *it, const attn_tensor *t) {
  it->ndim = t->ndim;
  for (int i = 0; i < t->ndim; i++) {
    it->shape[i] = t->shape[i];
    it->stride[i] = t->stride[i];
    it->idx[i] = 0;
  }
  it->pos = t->offset;
}

int attn__coalesce(int ndim, int64_t *shape, int ntensors, int64_t (*strides)[ATTN_MAX_DIMS]) {
  if (ndim == 0) return 0;
  /* Drop size-1 dims first; they never affect addressing. */
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1) continue;
    shape[n] = shape[d];
    for (int k = 0; k < ntensors; k++) strides[k][n] = strides[k][d];
    n++;
  }
  if (n == 0) {
    shape[0] = 1;
    for (int k = 0; k < ntensors; k++) strides[k][0] = 0;
    return 1;
  }
  int out = 0;
  for (int d = 1; d < n; d++) {
    bool merge = true;
    for (int k = 0; k < ntensors && merge; k++)
      if (strides[k][out] != strides[k][d] * shape[d]) merge = false;
    if (merge) {
      shape[out] *= shape[d];
      for (int k = 0; k < ntensors; k++) strides[k][out] = strides[k][d];
    } else {
      out++;
      shape[out] = shape[d];
      for (int k = 0; k < ntensors; k++) strides[k][out] = strides[k][d];
    }
  }
  return out + 1;
}

void attn__broadcast_strides(const attn_tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
  int off = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int td = d - off;
    if (td < 0 || t->shape[td] == 1)
      stride[d] = 0;
    else
      stride[d] = t->stride[td];
    (void)shape;
  }
}

/* src's shape and strides, coalesced, for the two gathers below; the
   number of dims left. */
static int gather_dims(const attn_tensor *src, int64_t shape[ATTN_MAX_DIMS], int64_t strides[1][ATTN_MAX_DIMS]) {
  for (int i = 0; i < src->ndim; i++) {
    shape[i] = src->shape[i];
    strides[0][i] = src->stride[i];
  }
  return attn__coalesce(src->ndim, shape, 1, strides);
}

bool attn__gather_contiguous(const attn_tensor *src, void *dst_) {
  int64_t shape[ATTN_MAX_DIMS], strides[1][ATTN_MAX_DIMS];
  if (attn_tensor_numel(src) == 0) return true;
  if (src->dtype != ATTN_FLOAT32) return attn__gather_contiguous_any(src, dst_);
  float *dst = dst_;
  const float *base = attn_tensor_data(src);
  int nd = gather_dims(src, shape, strides);
  if (src->ndim == 0) {
    dst[0] = base[0];
    return true;
  }
  int64_t inner = shape[nd - 1], is = strides[0][nd - 1];
  int64_t idx[ATTN_MAX_DIMS] = {0};
  int64_t pos = 0, work = 0;
  for (;;) {
    if (attn__poll_work(&work, inner)) return false;
    const float *p = base + pos;
    if (is == 1)
      memcpy(dst, p, (size_t)inner * sizeof(float));
    else
      for (int64_t i = 0; i < inner; i++) dst[i] = p[i * is];
    dst += inner;
    if (!attn__next_row(nd, shape, 1, strides, idx, &pos)) break;
  }
  return true;
}

/* The same for any dtype: elements of attn_dtype_size bytes. */
bool attn__gather_contiguous_any(const attn_tensor *src, void *dst_) {
  int64_t shape[ATTN_MAX_DIMS], strides[1][ATTN_MAX_DIMS];
  if (attn_tensor_numel(src) == 0) return true;
  const size_t es = attn_dtype_size(src->dtype);
  char *dst = dst_;
  const char *base = attn_tensor_ptr(src);
  if (src->ndim == 0) {
    memcpy(dst, base, es);
    return true;
  }
  int nd = gather_dims(src, shape, strides);
  int64_t inner = shape[nd - 1], is = strides[0][nd - 1];
  int64_t idx[ATTN_MAX_DIMS] = {0};
  int64_t pos = 0, work = 0;
  for (;;) {
    if (attn__poll_work(&work, inner)) return false;
    const char *p = base + (size_t)pos * es;
    if (is == 1)
      memcpy(dst, p, (size_t)inner * es);
    else if (es == 8)
      for (int64_t i = 0; i < inner; i++) memcpy(dst + i * 8, p + i * is * 8, 8);
    else
      for (int64_t i = 0; i < inner; i++) memcpy(dst + (size_t)i * es, p + (size_t)(i * is) * es, es);
    dst += (size_t)inner * es;
    if (!attn__next_row(nd, shape, 1, strides, idx, &pos)) break;
  }
  return true;
}

attn_status attn__check_dim(const char *fn, const attn_tensor *t, int dim) {
  if (dim < 0 || dim >= t->ndim)
    return attn_set_error(ATTN_ERR_INDEX, "%s: dim %d out of range for a %d-d tensor", fn, dim, t->ndim);
  return ATTN_OK;
}

attn_status attn__check_index(const char *fn, const attn_tensor *index, int64_t limit) {
  if (attn_tensor_numel(index) == 0) return ATTN_OK;
  attn__iter it;
  attn__iter_init(&it, index);
  int64_t work = 0; /* an expanded index is checked in no memory: poll */
  if (index->dtype == ATTN_INT64) {
    const int64_t *base = index->storage->data;
    do {
      if (attn__poll_work(&work, 1)) return attn__limit_error(fn);
      int64_t v = base[it.pos];
      if (v < 0 || v >= limit)
        return attn_set_error(ATTN_ERR_INDEX, "%s: index %lld out of range [0, %lld)", fn, (long long)v,
                              (long long)limit);
    } while (attn__iter_next(&it));
    return ATTN_OK;
  }
  if (index->dtype != ATTN_FLOAT32)
    return attn_set_error(ATTN_ERR_ARG, "%s: index tensor must be int64 (or float32 holding integers), got %s", fn,
                          attn_dtype_name(index->dtype));
  const float *base = index->storage->data;
  do {
    if (attn__poll_work(&work, 1)) return attn__limit_error(fn);
    float v = base[it.pos];
    if (!(v == floorf(v))) return attn_set_error(ATTN_ERR_ARG, "%s: index %g is not an integer", fn, (double)v);
    if (v < 0 || v >= (float)limit)
      return attn_set_error(ATTN_ERR_INDEX, "%s: index %g out of range [0, %lld)", fn, (double)v, (long long)limit);
  } while (attn__iter_next(&it));
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

attn_status attn_empty(int ndim, const int64_t *shape, attn_tensor **out) {
  return attn__alloc("empty", ndim, shape, out);
}

/* A filled tensor; fn names the caller in messages. */
static attn_status full_named(const char *fn, int ndim, const int64_t *shape, float value, attn_tensor **out) {
  attn_tensor *t;
  attn_status st = attn__alloc(fn, ndim, shape, &t);
  if (st) return st;
  float *p = attn_tensor_data(t);
  int64_t n = attn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) p[i] = value;
  *out = t;
  return ATTN_OK;
}

attn_status attn_full(int ndim, const int64_t *shape, float value, attn_tensor **out) {
  return full_named("full", ndim, shape, value, out);
}

attn_status attn_zeros(int ndim, const int64_t *shape, attn_tensor **out) {
  return full_named("zeros", ndim, shape, 0.0f, out);
}

attn_status attn_ones(int ndim, const int64_t *shape, attn_tensor **out) {
  return full_named("ones", ndim, shape, 1.0f, out);
}

attn_status attn_scalar(float value, attn_tensor **out) { return attn_full(0, NULL, value, out); }

attn_status attn_empty_dtype(attn_dtype dt, int ndim, const int64_t *shape, attn_tensor **out) {
  attn_tensor *t;
  attn_status st = attn__alloc_dtype("empty", dt, ndim, shape, &t);
  if (st) return st;
  memset(attn_tensor_ptr(t), 0, (size_t)attn_tensor_numel(t) * attn_dtype_size(dt));
  *out = t;
  return ATTN_OK;
}

attn_status attn_full_i64(int ndim, const int64_t *shape, int64_t value, attn_tensor **out) {
  attn_tensor *t;
  attn_status st = attn__alloc_dtype("full", ATTN_INT64, ndim, shape, &t);
  if (st) return st;
  int64_t *p = attn_tensor_i64(t);
  int64_t n = attn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) p[i] = value;
  *out = t;
  return ATTN_OK;
}

attn_status attn__check_value(const char *fn, attn_dtype dt, double v) {
  if (dt != ATTN_INT64 || (v >= -9.2233720368547758e18 && v < 9.2233720368547758e18)) return ATTN_OK;
  char vs[32];
  if (v != v)
    snprintf(vs, sizeof vs, "nan");
  else
    snprintf(vs, sizeof vs, "%g", v);
  return attn_set_error(ATTN_ERR_ARG,
                        "%s: value %s does not fit in int64 (an int64 tensor holds the integers from "
                        "math.mininteger to math.maxinteger; nan and inf have no int64 value: use a float32 tensor)",
                        fn, vs);
}

attn_status attn_full_dtype(attn_dtype dt, int ndim, const int64_t *shape, double value, attn_tensor **out) {
  if (dt == ATTN_FLOAT32) return full_named("full", ndim, shape, (float)value, out);
  if (dt == ATTN_INT64) {
    attn_status st = attn__check_value("full", dt, value);
    if (st) return st;
    return attn_full_i64(ndim, shape, (int64_t)value, out);
  }
  attn_tensor *t;
  attn_status st = attn__alloc_dtype("full", dt, ndim, shape, &t);
  if (st) return st;
  if (dt == ATTN_BOOL)
    memset(attn_tensor_ptr(t), value != 0, (size_t)attn_tensor_numel(t));
  else
    (void)attn__fill_raw_f64(t, value); /* float16, bfloat16, float64: rounded as torch */
  *out = t;
  return ATTN_OK;
}

attn_status attn_scalar_dtype(attn_dtype dt, double value, attn_tensor **out) {
  return attn_full_dtype(dt, 0, NULL, value, out);
}

attn_status attn_from_data_i64(int ndim, const int64_t *shape, const int64_t *data, attn_tensor **out) {
  attn_tensor *t;
  attn_status st = attn__alloc_dtype("tensor", ATTN_INT64, ndim, shape, &t);
  if (st) return st;
  if (attn_tensor_numel(t) > 0) {
    if (!data) {
      attn_tensor_release(t);
      return attn_set_error(ATTN_ERR_ARG, "tensor: data is NULL");
    }
    memcpy(attn_tensor_ptr(t), data, (size_t)attn_tensor_numel(t) * sizeof(int64_t));
  }
  *out = t;
  return ATTN_OK;
}

attn_status attn_from_data_bool(int ndim, const int64_t *shape, const bool *data, attn_tensor **out) {
  attn_tensor *t;
  attn_status st = attn__alloc_dtype("tensor", ATTN_BOOL, ndim, shape, &t);
  if (st) return st;
  int64_t n = attn_tensor_numel(t);
  if (n > 0 && !data) {
    attn_tensor_release(t);
    return attn_set_error(ATTN_ERR_ARG, "tensor: data is NULL");
  }
  bool *p = attn_tensor_bool(t);
  for (int64_t i = 0; i < n; i++) p[i] = data[i] ? true : false;
  *out = t;
  return ATTN_OK;
}

attn_status attn_to_dtype(const attn_tensor *t, attn_dtype dt, attn_tensor **out) {
  if ((unsigned)dt >= ATTN_DTYPE_COUNT) return attn_set_error(ATTN_ERR_ARG, "to: invalid dtype %d", (int)dt);
  if (t->dtype == dt) {
    *out = attn_tensor_retain((attn_tensor *)t);
    return ATTN_OK;
  }
  attn_tensor *o;
  attn_status st = attn__alloc_dtype("to", dt, t->ndim, t->shape, &o);
  if (st) return st;
  int64_t n = attn_tensor_numel(t);
  if (n > 0 && attn_tensor_is_contiguous(t) && (t->dtype == ATTN_FLOAT32 || dt == ATTN_FLOAT32) &&
      (attn_dtype_is_storage(t->dtype) || attn_dtype_is_storage(dt))) {
    /* contiguous float32 <-> float16/bfloat16/float64: tight loops, same rounding */
    int64_t work = 0;
    for (int64_t b = 0; b < n; b += 0x10000) {
      if (attn__poll_work(&work, 0x10000)) goto cancelled;
      int64_t e = b + 0x10000 < n ? b + 0x10000 : n;
      if (dt == ATTN_FLOAT32) {
        float *p = attn_tensor_data(o);
        const void *src = attn_tensor_ptr(t);
        if (t->dtype == ATTN_FLOAT16)
          for (int64_t i = b; i < e; i++) p[i] = attn_f16_to_f32(((const uint16_t *)src)[i]);
        else if (t->dtype == ATTN_BFLOAT16)
          for (int64_t i = b; i < e; i++) p[i] = attn_bf16_to_f32(((const uint16_t *)src)[i]);
        else
          for (int64_t i = b; i < e; i++) p[i] = (float)((const double *)src)[i];
      } else {
        const float *src = attn_tensor_data(t);
        void *p = attn_tensor_ptr(o);
        if (dt == ATTN_FLOAT16)
          for (int64_t i = b; i < e; i++) ((uint16_t *)p)[i] = attn_f32_to_f16(src[i]);
        else if (dt == ATTN_BFLOAT16)
          for (int64_t i = b; i < e; i++) ((uint16_t *)p)[i] = attn_f32_to_bf16(src[i]);
        else
          for (int64_t i = b; i < e; i++) ((double *)p)[i] = (double)src[i];
      }
    }
  } else if (n > 0) {
    attn__iter it;
    attn__iter_init(&it, t);
    const attn_storage *s = t->storage;
    int64_t i = 0, work = 0;
    if (dt == ATTN_FLOAT32) {
      float *p = attn_tensor_data(o);
      do {
        if ((i & 0xffff) == 0 && attn__poll_work(&work, 0x10000)) goto cancelled;
        p[i++] = load_f32(s, it.pos);
      } while (attn__iter_next(&it));
    } else if (dt == ATTN_FLOAT16 || dt == ATTN_BFLOAT16) {
      /* torch: every source goes through float (int64 and float64 round there first) */
      uint16_t *p = (uint16_t *)attn_tensor_ptr(o);
      bool half = dt == ATTN_FLOAT16;
      do {
        if ((i & 0xffff) == 0 && attn__poll_work(&work, 0x10000)) goto cancelled;
        float f = load_f32(s, it.pos);
        p[i++] = half ? attn_f32_to_f16(f) : attn_f32_to_bf16(f);
      } while (attn__iter_next(&it));
    } else if (dt == ATTN_FLOAT64) {
      double *p = (double *)attn_tensor_ptr(o);
      do {
        if ((i & 0xffff) == 0 && attn__poll_work(&work, 0x10000)) goto cancelled;
        p[i++] = load_f64(s, it.pos);
      } while (attn__iter_next(&it));
    } else if (dt == ATTN_INT64) {
      int64_t *p = attn_tensor_i64(o);
      do {
        if ((i & 0xffff) == 0 && attn__poll_work(&work, 0x10000)) goto cancelled;
        p[i++] = load_i64(s, it.pos);
      } while (attn__iter_next(&it));
    } else {
      bool *p = attn_tensor_bool(o);
      do {
        if ((i & 0xffff) == 0 && attn__poll_work(&work, 0x10000)) goto cancelled;
        p[i++] = load_f64(s, it.pos) != 0;
      } while (attn__iter_next(&it));
    }
  }
  *out = o;
  return ATTN_OK;
cancelled:
  attn_tensor_release(o);
  return attn__limit_error("to");
}

attn_status attn_from_data(int ndim, const int64_t *shape, const float *data, attn_tensor **out) {
  attn_tensor *t;
  attn_status st = attn__alloc("tensor", ndim, shape, &t);
  if (st) return st;
  if (!data && attn_tensor_numel(t) > 0) {
    attn_tensor_release(t);
    return attn_set_error(ATTN_ERR_ARG, "tensor: data is NULL");
  }
  if (data) memcpy(attn_tensor_data(t), data, (size_t)attn_tensor_numel(t) * sizeof(float));
  *out = t;
  return ATTN_OK;
}

attn_status attn_wrap(float *data, int ndim, const int64_t *shape, const int64_t *strides, attn_release_fn release,
                      void *ctx, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  if (!data) return attn_set_error(ATTN_ERR_ARG, "wrap: data is NULL");
  if (ndim < 0 || ndim > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "wrap: %d dims, at most %d supported", ndim, ATTN_MAX_DIMS);
  int64_t numel = attn__shape_numel(ndim, shape);
  if (numel < 0)
    return attn_set_error(ATTN_ERR_ARG, "wrap: invalid shape %s", attn_shape_str(ndim, shape, sb, sizeof sb));
  int64_t st[ATTN_MAX_DIMS];
  int64_t extent = numel ? 1 : 0;
  if (strides) {
    for (int i = 0; i < ndim; i++) {
      if (strides[i] < 0) return attn_set_error(ATTN_ERR_ARG, "wrap: negative stride");
      st[i] = strides[i];
      if (numel) extent += (shape[i] - 1) * strides[i];
    }
  } else {
    attn__contiguous_strides(ndim, shape, st);
    extent = numel;
  }
  attn_storage *s = attn__calloc(1, sizeof *s);
  if (!s) return attn_set_error(ATTN_ERR_NOMEM, "wrap: out of memory");
  s->data = data;
  s->numel = extent;
  s->refcount = 1;
  s->release = release;
  /* A non-NULL ctx with no release marks "borrowed": never freed by us. */
  s->release_ctx = release ? ctx : (void *)s;
  attn_tensor *t = attn__tensor_new(s, 0, ndim, shape, st);
  if (!t) {
    free(s);
    return attn_set_error(ATTN_ERR_NOMEM, "wrap: out of memory");
  }
  ATTN__COUNT(attn__live_storages, 1);
  storage_release(s);
  *out = t;
  return ATTN_OK;
}

attn_status attn_arange(double start, double end, double step, attn_tensor **out) {
  if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(end))
    return attn_set_error(ATTN_ERR_ARG, "arange: need finite start, end and a non-zero step (got %g, %g, %g)", start,
                          end, step);
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return attn_set_error(ATTN_ERR_ARG,
                          "arange: upper bound and step sign are inconsistent (start %g, end %g, step %g)", start, end,
                          step);
  double n = ceil((end - start) / step);
  if (!(n <= (double)ATTN_MAX_NUMEL))
    return attn_set_error(ATTN_ERR_NOMEM,
                          "arange: start %g, end %g and step %g give %g elements, more than a tensor holds (at most "
                          "2^56): narrow the range or take a larger step",
                          start, end, step, n);
  int64_t shape[1] = {(int64_t)n};
  attn_tensor *t;
  attn_status st = attn__alloc("arange", 1, shape, &t);
  if (st) return st;
  float *p = attn_tensor_data(t);
  for (int64_t i = 0; i < shape[0]; i++) p[i] = (float)(start + (double)i * step);
  *out = t;
  return ATTN_OK;
}

attn_status attn_arange_i64(int64_t start, int64_t end, int64_t step, attn_tensor **out) {
  if (step == 0) return attn_set_error(ATTN_ERR_ARG, "arange: step must be non-zero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return attn_set_error(ATTN_ERR_ARG,
                          "arange: upper bound and step sign are inconsistent (start %lld, end %lld, step %lld)",
                          (long long)start, (long long)end, (long long)step);
  /* the count in unsigned arithmetic: end - start and start + i * step
     may overflow int64 (arange(math.mininteger, math.maxinteger)), their
     true values never overflow uint64 */
  uint64_t span = step > 0 ? (uint64_t)end - (uint64_t)start : (uint64_t)start - (uint64_t)end;
  uint64_t ustep = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
  /* step == 0 was refused above, so ustep >= 1 */
  // cppcheck-suppress zerodivcond
  uint64_t un = span / ustep + (span % ustep != 0);
  if (un > (uint64_t)ATTN_MAX_NUMEL)
    return attn_set_error(ATTN_ERR_NOMEM,
                          "arange: start %lld, end %lld and step %lld give %llu elements, more than a tensor holds "
                          "(at most 2^56): narrow the range or take a larger step",
                          (long long)start, (long long)end, (long long)step, (unsigned long long)un);
  int64_t n = (int64_t)un;
  int64_t shape[1] = {n};
  attn_tensor *t;
  attn_status st = attn__alloc_dtype("arange", ATTN_INT64, 1, shape, &t);
  if (st) return st;
  int64_t *p = attn_tensor_i64(t);
  /* wraps mod 2^64 on the way; each element itself lies in [start, end) */
  for (int64_t i = 0; i < n; i++) p[i] = (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step);
  *out = t;
  return ATTN_OK;
}

attn_status attn_linspace(double start, double end, int64_t steps, attn_tensor **out) {
  if (steps < 0)
    return attn_set_error(ATTN_ERR_ARG, "linspace: number of steps must be non-negative (got %lld)", (long long)steps);
  int64_t shape[1] = {steps};
  attn_tensor *t;
  attn_status st = attn__alloc("linspace", 1, shape, &t);
  if (st) return st;
  float *p = attn_tensor_data(t);
  if (steps == 1) p[0] = (float)start;
  if (steps > 1) {
    /* torch fills the first half from start and the second from end so
       that both endpoints are exact. */
    double step = (end - start) / (double)(steps - 1);
    int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; i++)
      p[i] = i < half ? (float)(start + step * (double)i) : (float)(end - step * (double)(steps - i - 1));
  }
  *out = t;
  return ATTN_OK;
}

attn_status attn_eye(int64_t n, int64_t m, attn_tensor **out) {
  if (m < 0) m = n;
  int64_t shape[2] = {n, m};
  attn_tensor *t;
  attn_status st = attn__alloc("eye", 2, shape, &t);
  if (st) return st;
  float *p = attn_tensor_data(t);
  memset(p, 0, (size_t)(n * m) * sizeof(float));
  for (int64_t i = 0; i < n && i < m; i++) p[i * m + i] = 1.0f;
  *out = t;
  return ATTN_OK;
}

attn_status attn_one_hot(const attn_tensor *indices, int64_t num_classes, attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  int64_t n = attn_tensor_numel(indices);
  if (indices->ndim >= ATTN_MAX_DIMS)
    return attn_set_error(ATTN_ERR_ARG, "one_hot: indices %s have too many dims", ATTN_SHAPE(indices, sb));
  /* The values to check: expanded (stride-0) dims only repeat them, so
     each stored value is read once; an expanded [2^56] view costs one
     read here, and its output allocation then fails at once. */
  attn_tensor distinct = *indices;
  for (int i = 0; i < distinct.ndim; i++)
    if (distinct.stride[i] == 0 && distinct.shape[i] > 1) distinct.shape[i] = 1;
  const int64_t nd = attn_tensor_numel(&distinct);
  if (num_classes < 0) {
    if (n == 0) return attn_set_error(ATTN_ERR_ARG, "one_hot: cannot infer num_classes from empty indices");
    double mx = 0;
    for (int64_t i = 0; i < nd; i++) {
      double v = attn_tensor_get_flat_f64(&distinct, i);
      if (v > mx) mx = v;
    }
    /* the cast below must not overflow; such a count could not be allocated anyway */
    if (!(mx < (double)ATTN_MAX_NUMEL))
      return attn_set_error(ATTN_ERR_ARG, "one_hot: largest index %g is too large to infer num_classes", (double)mx);
    num_classes = (int64_t)mx + 1;
  }
  attn_status st = attn__check_index("one_hot", n ? &distinct : indices, num_classes);
  if (st) return st;
  int64_t shape[ATTN_MAX_DIMS];
  for (int i = 0; i < indices->ndim; i++) shape[i] = indices->shape[i];
  shape[indices->ndim] = num_classes;
  attn_tensor *t;
  /* int64, like torch.nn.functional.one_hot (x:float() for a float matrix) */
  st = attn__alloc_dtype("one_hot", ATTN_INT64, indices->ndim + 1, shape, &t);
  if (st) return st;
  int64_t *p = attn_tensor_i64(t);
  memset(p, 0, (size_t)attn_tensor_numel(t) * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i * num_classes + attn_tensor_get_flat_i64(indices, i)] = 1;
  *out = t;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Fills                                                                     */

/* The walk of a fill: bumps t's version; false when t is empty.  An
   expanded view holds each element many times (torch fills it all the
   same): each is visited once, or fill_ of expand(2, 2^40, 3) never ends. */
static bool fill_walk_init(attn_tensor *t, attn__iter *it) {
  attn__bump_version(t);
  if (attn_tensor_numel(t) == 0) return false;
  attn__iter_init(it, t);
  for (int d = 0; d < it->ndim; d++)
    if (it->stride[d] == 0) it->shape[d] = 1;
  return true;
}

/* fill_ without autograd (views.c's attn_fill_ records, then calls this). */
attn_status attn__fill_raw(attn_tensor *t, float value) {
  if (t->dtype != ATTN_FLOAT32) return attn__fill_raw_f64(t, value);
  attn__iter it;
  if (!fill_walk_init(t, &it)) return ATTN_OK;
  float *base = t->storage->data;
  do base[it.pos] = value;
  while (attn__iter_next(&it));
  return ATTN_OK;
}

/* The fills of any dtype: iv stored exactly when as_int, dv otherwise. */
static attn_status fill_raw_any(attn_tensor *t, bool as_int, int64_t iv, double dv) {
  attn__iter it;
  if (!fill_walk_init(t, &it)) return ATTN_OK;
  do {
    if (as_int)
      store_i64(t->storage, it.pos, iv);
    else
      store_f64(t->storage, it.pos, dv);
  } while (attn__iter_next(&it));
  return ATTN_OK;
}

attn_status attn__fill_raw_i64(attn_tensor *t, int64_t value) { return fill_raw_any(t, true, value, 0.0); }

attn_status attn__fill_raw_f64(attn_tensor *t, double value) { return fill_raw_any(t, false, 0, value); }

/* ------------------------------------------------------------------------ */
/* Raw copies (no autograd): the graph and views.c build on these            */

bool attn__may_overlap(const attn_tensor *a, const attn_tensor *b) {
  if (a->storage != b->storage) return false;
  const int64_t alo = a->offset, blo = b->offset;
  int64_t ahi = alo, bhi = blo;
  for (int i = 0; i < a->ndim; i++) ahi += (a->shape[i] - 1) * a->stride[i];
  for (int i = 0; i < b->ndim; i++) bhi += (b->shape[i] - 1) * b->stride[i];
  return !(ahi < blo || bhi < alo);
}

/* clone without autograd: a contiguous copy of t. */
attn_status attn__clone_raw(const attn_tensor *t, attn_tensor **out) {
  attn_tensor *c;
  attn_status st = attn__alloc_dtype("clone", t->dtype, t->ndim, t->shape, &c);
  if (st) return st;
  if (!attn__gather_contiguous(t, attn_tensor_ptr(c))) {
    attn_tensor_release(c);
    return attn__limit_error("clone");
  }
  *out = c;
  return ATTN_OK;
}

/* copy_ without autograd or checks: src (of dst's dtype or any other)
   broadcast into dst, which has no internal overlap.  views.c's attn_copy_
   checks and records, then calls this; the graph's in-place commit calls
   it directly. */
attn_status attn__copy_raw(attn_tensor *dst, const attn_tensor *src) {
  attn_status st;
  if (src->dtype != dst->dtype) {
    attn_tensor *c;
    if ((st = attn_to_dtype(src, dst->dtype, &c))) return st;
    st = attn__copy_raw(dst, c);
    attn_tensor_release(c);
    return st;
  }
  int ndim = dst->ndim;
  int64_t shape[ATTN_MAX_DIMS];
  for (int i = 0; i < ndim; i++) shape[i] = dst->shape[i];
  attn__bump_version(dst);
  attn_tensor *tmp = NULL;
  if (attn__may_overlap(dst, src)) {
    st = attn__clone_raw(src, &tmp);
    if (st) return st;
    src = tmp;
  }
  int64_t strides[2][ATTN_MAX_DIMS];
  for (int i = 0; i < ndim; i++) strides[0][i] = dst->stride[i];
  attn__broadcast_strides(src, ndim, shape, strides[1]);
  int nd = attn__coalesce(ndim, shape, 2, strides);
  float *d = attn_tensor_data(dst);
  const float *s = attn_tensor_data(src);
  if (dst->dtype != ATTN_FLOAT32 && attn_tensor_numel(dst) > 0) {
    /* same dtype, any element size */
    const size_t es = attn_dtype_size(dst->dtype);
    char *db = attn_tensor_ptr(dst);
    const char *sbase = attn_tensor_ptr(src);
    int64_t idx[ATTN_MAX_DIMS] = {0}, pos[2] = {0, 0}, work = 0;
    int64_t inner = ndim ? shape[nd - 1] : 1, ds = ndim ? strides[0][nd - 1] : 0, ss = ndim ? strides[1][nd - 1] : 0;
    for (;;) {
      if (attn__poll_work(&work, inner)) {
        attn_tensor_release(tmp);
        return attn__limit_error("copy_");
      }
      for (int64_t i = 0; i < inner; i++)
        memcpy(db + (size_t)(pos[0] + i * ds) * es, sbase + (size_t)(pos[1] + i * ss) * es, es);
      if (!ndim || !attn__next_row(nd, shape, 2, strides, idx, pos)) break;
    }
  } else if (attn_tensor_numel(dst) > 0) {
    if (ndim == 0) {
      d[0] = s[0];
    } else {
      int64_t idx[ATTN_MAX_DIMS] = {0}, pos[2] = {0, 0}, work = 0;
      int64_t inner = shape[nd - 1], ds = strides[0][nd - 1], ss = strides[1][nd - 1];
      for (;;) {
        if (attn__poll_work(&work, inner)) {
          attn_tensor_release(tmp);
          return attn__limit_error("copy_");
        }
        for (int64_t i = 0; i < inner; i++) d[pos[0] + i * ds] = s[pos[1] + i * ss];
        if (!attn__next_row(nd, shape, 2, strides, idx, pos)) break;
      }
    }
  }
  attn_tensor_release(tmp);
  return ATTN_OK;
}

bool attn__has_internal_overlap(const attn_tensor *t) {
  for (int i = 0; i < t->ndim; i++)
    if (t->stride[i] == 0 && t->shape[i] > 1) return true;
  return false;
}

/* Big elementwise jobs go to the thread pool: at least this many elements
   (128 KB of floats, a pass of several microseconds, against about one for
   a job on the pool's spinning workers), in units of at most FOREACH_PIECE
   elements of one row.  Every element is still computed once by the same row function,
   so the results do not depend on the thread count. */
#define FOREACH_PAR_MIN ((int64_t)1 << 15)
#define FOREACH_PIECE ((int64_t)1 << 12)

typedef struct {
  int nd, nt;
  const int64_t *shape;
  int64_t (*strides)[ATTN_MAX_DIMS];
  float **p;
  attn__inner_fn fn;
  void *ctx;
  int64_t len, piece, npieces;
} foreach_job;

/* units [begin, end): unit u is piece u % npieces of row u / npieces */
static void foreach_range(int64_t begin, int64_t end, void *arg) {
  const foreach_job *J = arg;
  int64_t inner[4];
  for (int k = 0; k < J->nt; k++) inner[k] = J->strides[k][J->nd - 1];
  for (int64_t u = begin; u < end && !attn__cancelled(); u++) {
    int64_t row = u / J->npieces, j = (u % J->npieces) * J->piece;
    float *q[4];
    for (int k = 0; k < J->nt; k++) q[k] = J->p[k] + j * inner[k];
    for (int d = J->nd - 2; d >= 0; d--) {
      const int64_t i = row % J->shape[d];
      row /= J->shape[d];
      for (int k = 0; k < J->nt; k++) q[k] += i * J->strides[k][d];
    }
    J->fn(J->len - j < J->piece ? J->len - j : J->piece, q, inner, J->ctx);
  }
}

bool attn__foreach(int ndim, const int64_t *shape_in, int nt, float *const *base,
                   const int64_t (*strides_in)[ATTN_MAX_DIMS], attn__inner_fn fn, void *ctx) {
  int64_t shape[ATTN_MAX_DIMS], strides[4][ATTN_MAX_DIMS];
  float *p[4];
  if (attn__shape_numel(ndim, shape_in) == 0) return true;
  for (int d = 0; d < ndim; d++) shape[d] = shape_in[d];
  for (int k = 0; k < nt; k++) {
    for (int d = 0; d < ndim; d++) strides[k][d] = strides_in[k][d];
    p[k] = base[k];
  }
  if (ndim == 0) {
    int64_t zero[4] = {0, 0, 0, 0};
    fn(1, p, zero, ctx);
    return true;
  }
  int nd = attn__coalesce(ndim, shape, nt, strides);
  const int64_t len = shape[nd - 1], piece = len > ATTN__POLL_WORK ? ATTN__POLL_WORK : len;
  const int64_t numel = attn__shape_numel(nd, shape);
  if (numel >= FOREACH_PAR_MIN && attn__parallel_threads() > 1) {
    const int64_t ppiece = len > FOREACH_PIECE ? FOREACH_PIECE : len, npieces = (len + ppiece - 1) / ppiece;
    foreach_job J = {.nd = nd,
                     .nt = nt,
                     .shape = shape,
                     .strides = strides,
                     .p = p,
                     .fn = fn,
                     .ctx = ctx,
                     .len = len,
                     .piece = ppiece,
                     .npieces = npieces};
    attn__parallel_for(numel / len * npieces, foreach_range, &J);
    return !attn__cancelled(); /* past the deadline: pieces were skipped */
  }
  int64_t inner[4];
  for (int k = 0; k < nt; k++) inner[k] = strides[k][nd - 1];
  int64_t idx[ATTN_MAX_DIMS] = {0}, work = 0;
  /* rows longer than a poll's worth go in pieces */
  for (;;) {
    if (len == piece) {
      if (attn__poll_work(&work, len)) return false;
      fn(len, p, inner, ctx);
    } else {
      float *q[4];
      for (int64_t j = 0; j < len; j += piece) {
        if (attn__cancelled()) return false;
        for (int k = 0; k < nt; k++) q[k] = p[k] + j * inner[k];
        fn(len - j < piece ? len - j : piece, q, inner, ctx);
      }
    }
    int d = nd - 2;
    for (; d >= 0; d--) {
      if (++idx[d] < shape[d]) {
        for (int k = 0; k < nt; k++) p[k] += strides[k][d];
        break;
      }
      for (int k = 0; k < nt; k++) p[k] -= strides[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
    if (d < 0) break;
  }
  return true;
}

attn_status attn_broadcast_shape(const char *op, const attn_tensor *a, const attn_tensor *b, int *ndim,
                                 int64_t *shape) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < n; d++) {
    int da = d - (n - a->ndim), db = d - (n - b->ndim);
    int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
    if (x == y || y == 1)
      shape[d] = x;
    else if (x == 1)
      shape[d] = y;
    else
      return attn_set_error(ATTN_ERR_SHAPE, "%s: shapes %s and %s cannot be broadcast together", op, ATTN_SHAPE(a, sa),
                            ATTN_SHAPE(b, sb));
  }
  *ndim = n;
  return ATTN_OK;
}

/* copy_'s checks: src broadcasts to dst's shape, and dst has no elements
   that share memory.  views.c's attn_copy_ and in-place ops that write an
   out-of-place result back (elementwise.c) run these before attn__copy_raw. */
attn_status attn__copy_check(const attn_tensor *dst, const attn_tensor *src) {
  char sa[ATTN_SHAPE_BUF], sb[ATTN_SHAPE_BUF];
  int ndim;
  int64_t shape[ATTN_MAX_DIMS];
  attn_status st = attn_broadcast_shape("copy_", dst, src, &ndim, shape);
  if (st == ATTN_OK) {
    bool ok = ndim == dst->ndim;
    for (int i = 0; ok && i < ndim; i++) ok = shape[i] == dst->shape[i];
    if (!ok) st = ATTN_ERR_SHAPE;
  }
  if (st)
    return attn_set_error(ATTN_ERR_SHAPE, "copy_: source %s cannot be broadcast to destination %s", ATTN_SHAPE(src, sb),
                          ATTN_SHAPE(dst, sa));
  /* like torch: several destination elements sharing memory would get
     whichever source value comes last */
  if (attn__has_internal_overlap(dst))
    return attn_set_error(ATTN_ERR_ARG,
                          "copy_: the destination %s is an expanded view whose elements share memory; "
                          "clone it before writing in place",
                          ATTN_SHAPE(dst, sa));
  return ATTN_OK;
}
