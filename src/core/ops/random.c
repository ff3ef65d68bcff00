/* SPDX-License-Identifier: MIT */
/* Random numbers, bit-exact with torch 1.13's CPU generator for float32
 * tensors.
 *
 * torch's CPUGeneratorImpl wraps an mt19937 (at::mt19937: the reference
 * algorithm, with its `left`/`next` bookkeeping) plus a cached second
 * Box-Muller sample.  Each sampler below consumes that stream exactly as the
 * torch kernel of the same name does (Debian's torch: no MKL, kernels
 * dispatched to the AVX2 build, compiled by GCC with FMA contraction):
 *
 *   random()    one 32-bit draw;  random64() = draw1 << 32 | draw2
 *   float u     (random() & (2^24-1)) * 2^-24
 *   double u    (random64() & (2^53-1)) * 2^-53
 *
 * normal_ of >= 16 contiguous floats reproduces normal_fill_AVX2 (Cephes
 * log/sincos of avx_mathfun.h) lane by lane; smaller or strided tensors use
 * double Box-Muller with libm's log/sin/cos, the glibc functions torch
 * calls too.
 *
 * The elements of a tensor are visited in the order torch's TensorIterator
 * visits them: memory order (dims sorted by decreasing stride), which is
 * row-major order for contiguous tensors.
 *
 * Our C is compiled with -std=c11 (no contraction), so every place where
 * torch's compiled kernel uses a fused multiply-add calls fmaf/fma
 * explicitly; those places were read off the disassembly of
 * libtorch_cpu.so 1.13.1 and confirmed against torch's output.
 */
#include "ops/ops.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

#define MT_N 624
#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UMASK 0x80000000u
#define MT_LMASK 0x7fffffffu

/* torch's default_rng_seed_val */
#define DEFAULT_SEED UINT64_C(67280421310721)

struct attn_generator {
  attn_budget *budget; /* charged for this struct, or NULL */
  pthread_mutex_t mutex;
  uint64_t seed;
  uint32_t state[MT_N];
  int32_t left; /* draws until the next twist, 1..MT_N */
  uint32_t next;
  /* Box-Muller caches (torch keeps both; only the double one is used by
     the float32 samplers, the float one is kept for state round trips). */
  bool has_next_double, has_next_float;
  double next_double;
  float next_float;
};

/* ------------------------------------------------------------------------ */
/* mt19937, as at::mt19937_engine                                            */

static void mt_seed(attn_generator *g, uint64_t seed) {
  g->seed = seed;
  g->state[0] = (uint32_t)(seed & 0xffffffffu);
  for (uint32_t j = 1; j < MT_N; j++) g->state[j] = 1812433253u * (g->state[j - 1] ^ (g->state[j - 1] >> 30)) + j;
  g->left = 1;
  g->next = 0;
  g->has_next_double = g->has_next_float = false;
  g->next_double = 0;
  g->next_float = 0;
}

static inline uint32_t mt_twist(uint32_t u, uint32_t v) {
  return (((u & MT_UMASK) | (v & MT_LMASK)) >> 1) ^ ((v & 1u) ? MT_MATRIX_A : 0u);
}

static void mt_next_state(attn_generator *g) {
  uint32_t *p = g->state;
  g->left = MT_N;
  g->next = 0;
  for (int j = MT_N - MT_M + 1; --j; p++) *p = p[MT_M] ^ mt_twist(p[0], p[1]);
  for (int j = MT_M; --j; p++) *p = p[MT_M - MT_N] ^ mt_twist(p[0], p[1]);
  *p = p[MT_M - MT_N] ^ mt_twist(p[0], g->state[0]);
}

static inline uint32_t mt_temper(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

static inline uint32_t rnd32(attn_generator *g) {
  if (--g->left == 0) mt_next_state(g);
  return mt_temper(g->state[g->next++]);
}

static inline uint64_t rnd64(attn_generator *g) {
  uint64_t hi = rnd32(g);
  uint64_t lo = rnd32(g);
  return hi << 32 | lo;
}

/* at::uniform_real_distribution<float>(0, 1) */
static inline float unif_float(attn_generator *g) { return (float)(rnd32(g) & 0xffffffu) * 0x1p-24f; }

/* at::uniform_real_distribution<double>(0, 1) */
static inline double unif_double(attn_generator *g) { return (double)(rnd64(g) & ((UINT64_C(1) << 53) - 1)) * 0x1p-53; }

/* ------------------------------------------------------------------------ */
/* Generators                                                                */

attn_status attn_generator_new(uint64_t seed, attn_generator **out) {
  bool over;
  attn_budget *b = attn__reserve((int64_t)sizeof(attn_generator), &over);
  if (over) return attn__nomem("Generator", (int64_t)sizeof(attn_generator));
  attn_generator *g = attn__malloc(sizeof *g);
  if (!g) {
    attn__unreserve(b, (int64_t)sizeof(attn_generator));
    return attn_set_error(ATTN_ERR_NOMEM, "generator_new: out of memory");
  }
  g->budget = b;
  if (pthread_mutex_init(&g->mutex, NULL) != 0) {
    attn__unreserve(b, (int64_t)sizeof(attn_generator));
    free(g);
    return attn_set_error(ATTN_ERR_NOMEM, "generator_new: cannot create a mutex");
  }
  mt_seed(g, seed);
  *out = g;
  return ATTN_OK;
}

size_t attn_generator_bytes(void) { return sizeof(attn_generator); }

void attn_generator_free(attn_generator *g) {
  if (!g || g == attn_default_generator()) return; /* the default one lives forever */
  pthread_mutex_destroy(&g->mutex);
  attn__unreserve(g->budget, (int64_t)sizeof(attn_generator));
  free(g);
}

void attn_generator_seed(attn_generator *g, uint64_t seed) {
  if (!g) g = attn_default_generator();
  pthread_mutex_lock(&g->mutex);
  mt_seed(g, seed);
  pthread_mutex_unlock(&g->mutex);
}

uint64_t attn_generator_initial_seed(const attn_generator *g) {
  attn_generator *m = g ? (attn_generator *)g : attn_default_generator();
  pthread_mutex_lock(&m->mutex);
  uint64_t s = m->seed;
  pthread_mutex_unlock(&m->mutex);
  return s;
}

static attn_generator default_gen = {.mutex = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void) { mt_seed(&default_gen, DEFAULT_SEED); }

attn_generator *attn_default_generator(void) {
  pthread_once(&default_once, default_init);
  return &default_gen;
}

/* Locks g (NULL: the default generator) and returns it. */
static attn_generator *gen_lock(attn_generator *g) {
  if (!g) g = attn_default_generator();
  pthread_mutex_lock(&g->mutex);
  return g;
}

static void gen_unlock(attn_generator *g) { pthread_mutex_unlock(&g->mutex); }

/* ------------------------------------------------------------------------ */
/* State: a little-endian byte layout of our own                             */

#define STATE_MAGIC "attnMT1"
#define STATE_SIZE (8 + 8 + 4 + 4 + 4 * MT_N + 1 + 1 + 8 + 4)

size_t attn_generator_state_size(void) { return STATE_SIZE; }

static unsigned char *put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) *p++ = (unsigned char)(v >> (8 * i));
  return p;
}
static unsigned char *put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) *p++ = (unsigned char)(v >> (8 * i));
  return p;
}
static const unsigned char *get_u32(const unsigned char *p, uint32_t *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) *v |= (uint32_t)p[i] << (8 * i);
  return p + 4;
}
static const unsigned char *get_u64(const unsigned char *p, uint64_t *v) {
  *v = 0;
  for (int i = 0; i < 8; i++) *v |= (uint64_t)p[i] << (8 * i);
  return p + 8;
}

void attn_generator_get_state(const attn_generator *cg, void *buf) {
  attn_generator *g = gen_lock((attn_generator *)cg);
  unsigned char *p = buf;
  memcpy(p, STATE_MAGIC, 8); /* includes the NUL */
  p += 8;
  p = put_u64(p, g->seed);
  p = put_u32(p, (uint32_t)g->left);
  p = put_u32(p, g->next);
  for (int i = 0; i < MT_N; i++) p = put_u32(p, g->state[i]);
  *p++ = g->has_next_double;
  *p++ = g->has_next_float;
  uint64_t d;
  memcpy(&d, &g->next_double, 8);
  p = put_u64(p, d);
  uint32_t f;
  memcpy(&f, &g->next_float, 4);
  put_u32(p, f);
  gen_unlock(g);
}

attn_status attn_generator_set_state(attn_generator *g, const void *buf, size_t size) {
  if (!buf || size != STATE_SIZE)
    return attn_set_error(ATTN_ERR_ARG, "set_state: expected a state of %d bytes, got %zu", STATE_SIZE,
                          buf ? size : (size_t)0);
  const unsigned char *p = buf;
  if (memcmp(p, STATE_MAGIC, 8) != 0)
    return attn_set_error(ATTN_ERR_ARG, "set_state: not a generator state (bad magic)");
  p += 8;
  attn_generator tmp;
  uint32_t left, u;
  p = get_u64(p, &tmp.seed);
  p = get_u32(p, &left);
  p = get_u32(p, &tmp.next);
  for (int i = 0; i < MT_N; i++) p = get_u32(p, &tmp.state[i]);
  unsigned hd = *p++, hf = *p++;
  uint64_t d;
  p = get_u64(p, &d);
  get_u32(p, &u);
  if (left < 1 || left > MT_N || tmp.next > MT_N || hd > 1 || hf > 1)
    return attn_set_error(ATTN_ERR_ARG, "set_state: corrupt generator state (left=%u next=%u)", left, tmp.next);
  memcpy(&tmp.next_double, &d, 8);
  memcpy(&tmp.next_float, &u, 4);
  g = gen_lock(g);
  g->seed = tmp.seed;
  g->left = (int32_t)left;
  g->next = tmp.next;
  memcpy(g->state, tmp.state, sizeof g->state);
  g->has_next_double = hd;
  g->has_next_float = hf;
  g->next_double = tmp.next_double;
  g->next_float = tmp.next_float;
  gen_unlock(g);
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* Element order and argument checks                                         */

/* An iterator over t's elements in memory order (TensorIterator's order
   for a single output): dims of size > 1 sorted by decreasing stride. */
static void mem_order_iter(attn__iter *it, const attn_tensor *t) {
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 1) continue;
    /* insertion sort: equal strides keep their order (cannot happen for a
       writable tensor, see check_writable) */
    int k = n++;
    while (k > 0 && it->stride[k - 1] < t->stride[d]) {
      it->shape[k] = it->shape[k - 1];
      it->stride[k] = it->stride[k - 1];
      k--;
    }
    it->shape[k] = t->shape[d];
    it->stride[k] = t->stride[d];
  }
  it->ndim = n;
  for (int d = 0; d < n; d++) it->idx[d] = 0;
  it->pos = t->offset;
}

/* In-place samplers refuse tensors whose elements share memory (expanded
   views), like torch's assert_no_internal_overlap. */
static attn_status check_writable(const char *fn, const attn_tensor *t) {
  char sb[ATTN_SHAPE_BUF];
  if (!t) return attn_set_error(ATTN_ERR_ARG, "%s: tensor is NULL", fn);
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > 1 && t->stride[d] == 0)
      return attn_set_error(ATTN_ERR_ARG,
                            "%s: cannot write random values into an expanded tensor of shape %s "
                            "(dim %d has stride 0); clone it first",
                            fn, ATTN_SHAPE(t, sb), d);
  return ATTN_OK;
}

/* In-place fills record no autograd node: while grad mode is on they refuse
   a tensor that requires grad (torch refuses a leaf the same way).  Every
   fill bumps the storage version (fill_begin), so that a node which saved
   this storage refuses to run backward on the new values. */
static attn_status check_fill(const char *fn, const attn_tensor *t) {
  attn_status st = check_writable(fn, t);
  if (st) return st;
  if (t->dtype != ATTN_FLOAT32 && !(t->dtype == ATTN_INT64 && strcmp(fn, "random_") == 0))
    return attn_check_float(fn, NULL, t);
  if (attn_grad_enabled() && attn_requires_grad(t)) {
    if (attn_is_leaf(t))
      return attn_set_error(ATTN_ERR_STATE,
                            "%s: a leaf tensor that requires grad is used in an in-place operation; run it under "
                            "no_grad",
                            fn);
    return attn_set_error(ATTN_ERR_STATE,
                          "%s: a tensor that requires grad is used in an in-place random fill, which autograd "
                          "does not record; run it under no_grad",
                          fn);
  }
  return ATTN_OK;
}

/* Called once every check passed, right before the values change. */
static attn_generator *fill_begin(attn_tensor *t, attn_generator *g) {
  attn__bump_version(t);
  return gen_lock(g);
}

/* Walks t in memory order: `pos` is the storage offset of each element. */
#define FOR_EACH_MEM(t, it, body)                                                                                      \
  do {                                                                                                                 \
    if (attn_tensor_numel(t) > 0) {                                                                                    \
      mem_order_iter(&(it), (t));                                                                                      \
      do {                                                                                                             \
        body;                                                                                                          \
      } while (attn__iter_next(&(it)));                                                                                \
    }                                                                                                                  \
  } while (0)

/* ------------------------------------------------------------------------ */
/* uniform_                                                                  */

attn_status attn_uniform_(attn_tensor *t, double from, double to, attn_generator *g) {
  attn_status st = check_fill("uniform_", t);
  if (st) return st;
  if (!(from >= -FLT_MAX && from <= FLT_MAX) || !(to >= -FLT_MAX && to <= FLT_MAX))
    return attn_set_error(ATTN_ERR_ARG, "uniform_: bounds must be finite floats, got from=%g to=%g", from, to);
  if (!(from <= to))
    return attn_set_error(ATTN_ERR_ARG, "uniform_: expects from <= to to sample [from, to), got from=%g to=%g", from,
                          to);
  if (to - from > FLT_MAX)
    return attn_set_error(ATTN_ERR_ARG, "uniform_: to - from overflows float (from=%g to=%g)", from, to);
  /* uniform_real_distribution<float>: x * (to - from) + from, all in float;
     the compiled kernel fuses it into one fma. */
  float lo = (float)from, span = (float)to - lo;
  float *base = t->storage->data;
  attn__iter it;
  g = fill_begin(t, g);
  FOR_EACH_MEM(t, it, base[it.pos] = fmaf(unif_float(g), span, lo));
  gen_unlock(g);
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* normal_                                                                   */

/* at::normal_distribution<double>: Box-Muller on two double uniforms; the
   sine half is cached in the generator for the next call. */
static double normal_double(attn_generator *g, double mean, double std) {
  double ret;
  if (g->has_next_double) {
    g->has_next_double = false;
    ret = g->next_double;
  } else {
    double u1 = unif_double(g);
    double u2 = unif_double(g);
    double r = sqrt(-2.0 * log(1.0 - u2));
    double theta = 2.0 * 3.14159265358979323846 * u1;
    g->next_double = r * sin(theta);
    g->has_next_double = true;
    ret = r * cos(theta);
  }
  return fma(ret, std, mean); /* transformation::normal, contracted */
}

/* Bit patterns and constants of avx_mathfun.h (Cephes), stored as floats
   converted from the double literals exactly as its tables are. */
static inline uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#define C_SQRTHF ((float)0.707106781186547524)
#define C_LOG_P0 ((float)7.0376836292E-2)
#define C_LOG_P1 ((float)-1.1514610310E-1)
#define C_LOG_P2 ((float)1.1676998740E-1)
#define C_LOG_P3 ((float)-1.2420140846E-1)
#define C_LOG_P4 ((float)+1.4249322787E-1)
#define C_LOG_P5 ((float)-1.6668057665E-1)
#define C_LOG_P6 ((float)+2.0000714765E-1)
#define C_LOG_P7 ((float)-2.4999993993E-1)
#define C_LOG_P8 ((float)+3.3333331174E-1)
#define C_LOG_Q1 ((float)-2.12194440e-4)
#define C_LOG_Q2 ((float)0.693359375)
#define C_MINUS_DP1 ((float)-0.78515625)
#define C_MINUS_DP2 ((float)-2.4187564849853515625e-4)
#define C_MINUS_DP3 ((float)-3.77489497744594108e-8)
#define C_SINCOF_P0 ((float)-1.9515295891E-4)
#define C_SINCOF_P1 ((float)8.3321608736E-3)
#define C_SINCOF_P2 ((float)-1.6666654611E-1)
#define C_COSCOF_P0 ((float)2.443315711809948E-005)
#define C_COSCOF_P1 ((float)-1.388731625493765E-003)
#define C_COSCOF_P2 ((float)4.166664568298827E-002)
#define C_FOPI ((float)1.27323954473516)

#if defined(__GNUC__)
#define RNG_INLINE static inline __attribute__((always_inline))
#else
#define RNG_INLINE static inline
#endif

/* log256_ps for one lane, with the fusions GCC made in torch's build. */
RNG_INLINE float cephes_logf(float u) {
  bool invalid = u <= 0.0f;
  float x = u > bitsf(0x00800000u) ? u : bitsf(0x00800000u); /* max_ps(u, min_norm) */
  int32_t imm0 = (int32_t)(fbits(x) >> 23) - 0x7f;
  x = bitsf((fbits(x) & ~0x7f800000u) | fbits(0.5f));
  float e = (float)imm0 + 1.0f;
  bool small = x < C_SQRTHF;
  float tmp = small ? x : 0.0f;
  x = x - 1.0f;
  e = e - (small ? 1.0f : 0.0f);
  x = x + tmp;
  float z = x * x;
  float y = C_LOG_P0;
  y = fmaf(y, x, C_LOG_P1);
  y = fmaf(y, x, C_LOG_P2);
  y = fmaf(y, x, C_LOG_P3);
  y = fmaf(y, x, C_LOG_P4);
  y = fmaf(y, x, C_LOG_P5);
  y = fmaf(y, x, C_LOG_P6);
  y = fmaf(y, x, C_LOG_P7);
  y = fmaf(y, x, C_LOG_P8);
  y = y * x;
  y = fmaf(y, z, e * C_LOG_Q1);
  y = fmaf(-z, 0.5f, y);
  x = x + y;
  x = fmaf(e, C_LOG_Q2, x);
  return invalid ? bitsf(0xffffffffu) : x;
}

/* sincos256_ps for one lane, with the same fusions. */
RNG_INLINE void cephes_sincosf(float xin, float *s, float *c) {
  uint32_t sign_sin = fbits(xin) & 0x80000000u;
  float x = bitsf(fbits(xin) & 0x7fffffffu);
  float y = x * C_FOPI;
  int32_t j = (int32_t)y + 1; /* cvttps: truncation; y < 8 here */
  int32_t jj = j & ~1;
  y = (float)jj;
  uint32_t swap_sin = (uint32_t)(jj & 4) << 29;
  bool poly_mask = (jj & 2) == 0;
  uint32_t sign_cos = (uint32_t)(~(jj - 2) & 4) << 29;
  x = fmaf(y, C_MINUS_DP1, x);
  x = fmaf(y, C_MINUS_DP2, x);
  x = fmaf(y, C_MINUS_DP3, x);
  sign_sin ^= swap_sin;
  float z = x * x;
  float yc = fmaf(C_COSCOF_P0, z, C_COSCOF_P1);
  yc = fmaf(yc, z, C_COSCOF_P2);
  yc = z * yc;
  yc = fmaf(yc, z, -(z * 0.5f));
  yc = yc + 1.0f;
  float ys = fmaf(z, C_SINCOF_P0, C_SINCOF_P1);
  ys = fmaf(ys, z, C_SINCOF_P2);
  ys = z * ys;
  ys = fmaf(ys, x, x);
  /* the masked selection of avx_mathfun, with its exact additions */
  float ysin2 = poly_mask ? ys : 0.0f;
  float ysin1 = poly_mask ? 0.0f : yc;
  float s2 = ys - ysin2, c2 = yc - ysin1;
  *s = bitsf(fbits(ysin1 + ysin2) ^ sign_sin);
  *c = bitsf(fbits(c2 + s2) ^ sign_cos);
}

/* normal_fill_16_AVX2: data[0..7] and data[8..15] become Box-Muller pairs
   of the uniforms in place. */
RNG_INLINE void normal_fill_16_body(float *data, float mean, float std) {
  const float two_pi = (float)(2.0 * 3.14159265358979323846);
  for (int j = 0; j < 8; j++) {
    float u1 = 1.0f - data[j];
    float theta = two_pi * data[j + 8];
    float radius = sqrtf(-2.0f * cephes_logf(u1));
    float s, c;
    cephes_sincosf(theta, &s, &c);
    data[j] = fmaf(radius * c, std, mean);
    data[j + 8] = fmaf(radius * s, std, mean);
  }
}

/* Blocks of 16 over data[0, n).  fmaf is a libm call in a portable build;
   on x86 CPUs with FMA a second copy compiled for them turns it into one
   instruction (the result is the same: both round once). */
static void normal_fill_blocks_generic(float *data, int64_t n, float mean, float std) {
  for (int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16_body(data + i, mean, std);
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("fma"))) static void normal_fill_blocks_fma(float *data, int64_t n, float mean, float std) {
  for (int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16_body(data + i, mean, std);
}

static void normal_fill_blocks(float *data, int64_t n, float mean, float std) {
  if (__builtin_cpu_supports("fma"))
    normal_fill_blocks_fma(data, n, mean, std);
  else
    normal_fill_blocks_generic(data, n, mean, std);
}
#else
#define normal_fill_blocks normal_fill_blocks_generic
#endif

attn_status attn_normal_(attn_tensor *t, double mean, double std, attn_generator *g) {
  attn_status st = check_fill("normal_", t);
  if (st) return st;
  if (!(std >= 0.0)) return attn_set_error(ATTN_ERR_ARG, "normal_: expects std >= 0, got std=%g", std);
  int64_t n = attn_tensor_numel(t);
  g = fill_begin(t, g);
  if (n >= 16 && attn_tensor_is_contiguous(t)) {
    /* normal_fill_AVX2: uniforms first, then blocks of 16; a ragged end
       redoes the last 16 with fresh uniforms. */
    float *data = attn_tensor_data(t), fm = (float)mean, fs = (float)std;
    for (int64_t i = 0; i < n; i++) data[i] = unif_float(g);
    normal_fill_blocks(data, n, fm, fs);
    if (n % 16 != 0) {
      float *tail = data + n - 16;
      for (int i = 0; i < 16; i++) tail[i] = unif_float(g);
      normal_fill_blocks(tail, 16, fm, fs);
    }
  } else {
    float *base = t->storage->data;
    attn__iter it;
    FOR_EACH_MEM(t, it, base[it.pos] = (float)normal_double(g, mean, std));
  }
  gen_unlock(g);
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* random_(from, to)                                                         */

/* float -> int64 as cvttss2si does: out of range gives INT64_MIN. */
static int64_t f2i64(float f) {
  if (!(f >= -9223372036854775808.0f && f < 9223372036854775808.0f)) return INT64_MIN; /* [-2^63, 2^63) */
  return (int64_t)f;
}

/* update_from/update_to<float> of torch's DistributionTemplates.h: move
   the bounds inwards so that no value rounds outside [from, to). */
static int64_t update_from(int64_t from) {
  int64_t from_plus_1 = f2i64((float)(from + 1));
  if (from_plus_1 < from) {
    int64_t a = llabs(from + 1);
    int n = 0;
    while (a >>= 1) ++n;
    from = from_plus_1 + ((int64_t)1 << (n - FLT_MANT_DIG + 1));
  }
  return from;
}

static int64_t update_to(int64_t to) {
  int64_t to_minus_1 = f2i64((float)(to - 1));
  if (to_minus_1 >= to) {
    int64_t a = llabs(to - 1);
    int n = 0;
    while (a >>= 1) ++n;
    to = to_minus_1 - ((int64_t)1 << (n - FLT_MANT_DIG + 1));
  }
  return to;
}

attn_status attn_random_int_(attn_tensor *t, int64_t low, int64_t high, attn_generator *g) {
  attn_status st = check_fill("random_", t);
  if (st) return st;
  if (!(low < high))
    return attn_set_error(ATTN_ERR_ARG, "random_: expects low < high, got low=%lld high=%lld", (long long)low,
                          (long long)high);
  bool ints = t->dtype == ATTN_INT64;
  int64_t from = ints ? low : update_from(low), to = ints ? high : update_to(high);
  if (!(from < to))
    return attn_set_error(ATTN_ERR_ARG, "random_: [%lld, %lld) holds no value representable as a float", (long long)low,
                          (long long)high);
  uint64_t range = (uint64_t)to - (uint64_t)from;
  float *base = t->storage->data;
  attn__iter it;
  g = fill_begin(t, g);
  if (ints) {
    int64_t *ib = t->storage->data;
    if (range >= (UINT64_C(1) << 32))
      FOR_EACH_MEM(t, it, ib[it.pos] = (int64_t)(rnd64(g) % range + (uint64_t)from));
    else
      FOR_EACH_MEM(t, it, ib[it.pos] = (int64_t)(rnd32(g) % range + (uint64_t)from));
    gen_unlock(g);
    return ATTN_OK;
  }
  /* uniform_int_from_to_distribution: a 64-bit draw only for ranges that
     do not fit 32 bits; (val % range) + base wraps like torch's uint64. */
  if (range >= (UINT64_C(1) << 32))
    FOR_EACH_MEM(t, it, base[it.pos] = (float)(int64_t)(rnd64(g) % range + (uint64_t)from));
  else
    FOR_EACH_MEM(t, it, base[it.pos] = (float)(int64_t)(rnd32(g) % range + (uint64_t)from));
  gen_unlock(g);
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* bernoulli, exponential                                                    */

/* dst[0..n) = unif_double(g) < p ? 1 : 0, the same draws taken in runs
   straight from the state between its regenerations (dropout's masks:
   millions of elements a training step, where the per-draw bookkeeping
   cost more than the generator).  u = u53 2^-53 < p exactly when the
   integer u53 < ceil(p 2^53). */
static void bernoulli_run(attn_generator *g, float *dst, int64_t n, double p) {
  const uint64_t thr = (uint64_t)ceil(p * 0x1p53);
  while (n > 0) {
    int64_t run = (g->left - 1) / 2; /* pairs of words before rnd32 would regenerate */
    if (run == 0) {                  /* the pair straddles a regeneration */
      *dst++ = unif_double(g) < p ? 1.0f : 0.0f;
      n--;
      continue;
    }
    if (run > n) run = n;
    const uint32_t *w = g->state + g->next;
    /* u < thr on 32-bit halves, so that the loop vectorises */
    const uint32_t thr_hi = (uint32_t)(thr >> 32), thr_lo = (uint32_t)thr;
    for (int64_t i = 0; i < run; i++) {
      const uint32_t hi = mt_temper(w[2 * i]) & 0x1fffffu, lo = mt_temper(w[2 * i + 1]);
      dst[i] = (hi < thr_hi) | ((hi == thr_hi) & (lo < thr_lo)) ? 1.0f : 0.0f;
    }
    g->next += (uint32_t)(2 * run);
    g->left -= (int32_t)(2 * run);
    dst += run;
    n -= run;
  }
}

attn_status attn_bernoulli_(attn_tensor *t, double p, attn_generator *g) {
  attn_status st = check_fill("bernoulli_", t);
  if (st) return st;
  if (!(p >= 0.0 && p <= 1.0)) return attn_set_error(ATTN_ERR_ARG, "bernoulli_: expects p in [0, 1], got p=%g", p);
  float *base = t->storage->data;
  attn__iter it;
  g = fill_begin(t, g);
  if (attn_tensor_is_contiguous(t))
    bernoulli_run(g, attn_tensor_data(t), attn_tensor_numel(t), p);
  else
    FOR_EACH_MEM(t, it, base[it.pos] = unif_double(g) < p ? 1.0f : 0.0f);
  gen_unlock(g);
  return ATTN_OK;
}

attn_status attn_bernoulli_tensor(const attn_tensor *probs, attn_generator *g, attn_tensor **out) {
  if (!probs) return attn_set_error(ATTN_ERR_ARG, "bernoulli: probs is NULL");
  if (probs->dtype != ATTN_FLOAT32) return attn_check_float("bernoulli", "probs", probs);
  int64_t n = attn_tensor_numel(probs);
  /* allocate, gather, then check: the checking pass reads the contiguous
     copy, so its work is the bytes the budget allowed (an expanded probs
     is refused by the cap or stopped by the gather's deadline polls) */
  attn_tensor *r;
  attn_status st = attn__alloc("bernoulli", probs->ndim, probs->shape, &r);
  if (st) return st;
  float *dst = attn_tensor_data(r);
  if (!attn__gather_contiguous(probs, dst)) {
    attn_tensor_release(r);
    return attn__limit_error("bernoulli");
  }
  for (int64_t i = 0; i < n; i++) {
    float p = dst[i];
    if (!(p >= 0.0f && p <= 1.0f)) {
      attn_tensor_release(r);
      return attn_set_error(ATTN_ERR_ARG, "bernoulli: probabilities must be in [0, 1], found %g", (double)p);
    }
  }
  /* bernoulli_distribution<float>: a float uniform compared in float */
  g = gen_lock(g);
  for (int64_t i = 0; i < n; i++) dst[i] = unif_float(g) < dst[i] ? 1.0f : 0.0f;
  gen_unlock(g);
  *out = r;
  return ATTN_OK;
}

/* exponential_distribution<double>: -1/lambda * log(1 - u) */
static inline double exponential_double(attn_generator *g, double lambda) {
  return -1.0 / lambda * log(1.0 - unif_double(g));
}

attn_status attn_exponential_(attn_tensor *t, double lambda, attn_generator *g) {
  attn_status st = check_fill("exponential_", t);
  if (st) return st;
  if (!(lambda >= 0.0)) return attn_set_error(ATTN_ERR_ARG, "exponential_: expects lambda >= 0, got lambda=%g", lambda);
  float *base = t->storage->data;
  attn__iter it;
  g = fill_begin(t, g);
  FOR_EACH_MEM(t, it, base[it.pos] = (float)exponential_double(g, lambda));
  gen_unlock(g);
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* randperm                                                                  */

attn_status attn_randperm(int64_t n, attn_generator *g, attn_tensor **out) {
  if (n < 0) return attn_set_error(ATTN_ERR_ARG, "randperm: n must be non-negative, got %lld", (long long)n);
  attn_tensor *r;
  attn_status st = attn__alloc_dtype("randperm", ATTN_INT64, 1, &n, &r);
  if (st) return st;
  int64_t *d = attn_tensor_i64(r);
  for (int64_t i = 0; i < n; i++) d[i] = i;
  /* torch's randperm_cpu: a forward Fisher-Yates with 32-bit draws */
  g = gen_lock(g);
  for (int64_t i = 0; i < n - 1; i++) {
    int64_t z = (int64_t)(rnd32(g) % (uint64_t)(n - i));
    int64_t sav = d[i];
    d[i] = d[z + i];
    d[z + i] = sav;
  }
  gen_unlock(g);
  *out = r;
  return ATTN_OK;
}

/* ------------------------------------------------------------------------ */
/* multinomial                                                               */

typedef struct {
  float v;
  int64_t i;
} scored;

/* topk order: larger first, NaN (0 / 0, only if an Exp(1) draw is 0)
   counting as largest like torch; equal values by index (torch leaves ties
   unspecified; they only arise between exactly equal ratios). */
static int scored_cmp(const void *pa, const void *pb) {
  const scored *a = pa, *b = pb;
  bool an = isnan(a->v), bn = isnan(b->v);
  if (an != bn) return an ? -1 : 1;
  if (!an && a->v != b->v) return a->v > b->v ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* True when t's elements exactly tile a block of memory (torch's
   is_non_overlapping_and_dense): then empty_like(t) copies t's strides,
   otherwise it is row-major. */
static bool dense_layout(const attn_tensor *t) {
  attn__iter it;
  mem_order_iter(&it, t);
  int64_t expect = 1;
  for (int d = it.ndim - 1; d >= 0; d--) {
    if (it.stride[d] != expect) return false;
    expect *= it.shape[d];
  }
  return true;
}

attn_status attn_multinomial(const attn_tensor *probs, int64_t num_samples, bool replacement, attn_generator *g,
                             attn_tensor **out) {
  char sb[ATTN_SHAPE_BUF];
  if (!probs) return attn_set_error(ATTN_ERR_ARG, "multinomial: probs is NULL");
  if (probs->ndim < 1 || probs->ndim > 2)
    return attn_set_error(ATTN_ERR_SHAPE, "multinomial: probs must be 1-d or 2-d, got shape %s", ATTN_SHAPE(probs, sb));
  if (probs->dtype != ATTN_FLOAT32) return attn_check_float("multinomial", "probs", probs);
  if (num_samples <= 0)
    return attn_set_error(ATTN_ERR_ARG, "multinomial: cannot sample %lld samples (need at least 1)",
                          (long long)num_samples);
  int64_t ncat = probs->shape[probs->ndim - 1];
  int64_t ndist = probs->ndim == 2 ? probs->shape[0] : 1;
  if (ncat < 1)
    return attn_set_error(ATTN_ERR_SHAPE, "multinomial: probs of shape %s has no categories", ATTN_SHAPE(probs, sb));
  if (ncat > (INT64_C(1) << 24))
    return attn_set_error(ATTN_ERR_ARG, "multinomial: %lld categories, at most 2^24 supported", (long long)ncat);
  if (!replacement && num_samples > ncat)
    return attn_set_error(ATTN_ERR_ARG, "multinomial: cannot sample %lld > %lld categories without replacement",
                          (long long)num_samples, (long long)ncat);
  /* Validate everything before drawing: entries finite and >= 0, every row
     with a positive sum, and enough non-zero entries without replacement
     (torch 1.13 would return zero-probability categories there, in an
     unspecified order; we refuse instead). */
  const float *pd = attn_tensor_data(probs);
  int64_t s0 = probs->ndim == 2 ? probs->stride[0] : 0, s1 = probs->stride[probs->ndim - 1];
  int64_t work = 0;
  for (int64_t r = 0; r < ndist; r++) {
    int64_t nonzero = 0;
    if (attn__poll_work(&work, ncat)) return attn__limit_error("multinomial");
    for (int64_t c = 0; c < ncat; c++) {
      float v = pd[r * s0 + c * s1];
      if (!(v >= 0.0f) || isinf(v))
        return attn_set_error(ATTN_ERR_ARG, "multinomial: probabilities must be finite and >= 0, found %g", (double)v);
      nonzero += v > 0.0f;
    }
    if (nonzero == 0)
      return attn_set_error(ATTN_ERR_ARG, "multinomial: a row of probs %s sums to 0", ATTN_SHAPE(probs, sb));
    if (!replacement && nonzero < num_samples)
      return attn_set_error(ATTN_ERR_ARG,
                            "multinomial: a row of probs %s has only %lld non-zero probabilities, cannot draw "
                            "%lld samples without replacement",
                            ATTN_SHAPE(probs, sb), (long long)nonzero, (long long)num_samples);
  }

  int64_t oshape[2] = {ndist, num_samples};
  attn_tensor *res;
  attn_status st = probs->ndim == 2 ? attn__alloc_dtype("multinomial", ATTN_INT64, 2, oshape, &res)
                                    : attn__alloc_dtype("multinomial", ATTN_INT64, 1, oshape + 1, &res);
  if (st) return st;
  int64_t *o = attn_tensor_i64(res);
  int64_t total = ndist * ncat;

  if (!replacement) {
    /* torch 1.13's path without replacement (later versions also take it
       for a single sample): q ~ Exp(1) laid out like probs (empty_like),
       then topk of p / q along each row. */
    scored *q = attn__scratch_alloc((size_t)total * sizeof *q);
    if (!q) {
      attn_tensor_release(res);
      return attn__nomem("multinomial", total * (int64_t)sizeof *q);
    }
    g = gen_lock(g);
    if (probs->ndim == 2 && ndist > 1 && ncat > 1 && s1 > s0 && dense_layout(probs)) {
      for (int64_t c = 0; c < ncat; c++) /* column-major memory: draw down the columns */
        for (int64_t r = 0; r < ndist; r++) q[r * ncat + c].v = (float)exponential_double(g, 1.0);
    } else {
      for (int64_t k = 0; k < total; k++) q[k].v = (float)exponential_double(g, 1.0);
    }
    gen_unlock(g);
    for (int64_t r = 0; r < ndist; r++) {
      scored *row = q + r * ncat;
      for (int64_t c = 0; c < ncat; c++) {
        row[c].v = pd[r * s0 + c * s1] / row[c].v;
        row[c].i = c;
      }
      if (num_samples == 1) { /* a linear scan is enough for the top 1 */
        int64_t best = 0;
        for (int64_t c = 1; c < ncat; c++)
          if (row[c].v > row[best].v) best = c;
        o[r] = best;
      } else {
        qsort(row, (size_t)ncat, sizeof *row, scored_cmp);
        for (int64_t k = 0; k < num_samples; k++) o[r * num_samples + k] = row[k].i;
      }
    }
    attn__scratch_free(q, (size_t)total * sizeof *q);
  } else {
    /* multinomial_with_replacement: float cumulative sums normalised by
       the float total, searched with double uniforms. */
    float *cum = attn__scratch_alloc((size_t)ncat * sizeof *cum);
    if (!cum) {
      attn_tensor_release(res);
      return attn__nomem("multinomial", ncat * (int64_t)sizeof *cum);
    }
    g = gen_lock(g);
    for (int64_t r = 0; r < ndist; r++) {
      float sum = 0.0f;
      for (int64_t c = 0; c < ncat; c++) {
        sum += pd[r * s0 + c * s1];
        cum[c] = sum;
      }
      for (int64_t c = 0; c < ncat; c++) cum[c] /= sum;
      cum[ncat - 1] = 1.0f;
      for (int64_t k = 0; k < num_samples; k++) {
        double u = unif_double(g);
        int64_t left = 0, right = ncat;
        while (right - left > 0) {
          int64_t mid = left + (right - left) / 2;
          if ((double)cum[mid] < u)
            left = mid + 1;
          else
            right = mid;
        }
        o[r * num_samples + k] = left;
      }
    }
    gen_unlock(g);
    attn__scratch_free(cum, (size_t)ncat * sizeof *cum);
  }
  *out = res;
  return ATTN_OK;
}
