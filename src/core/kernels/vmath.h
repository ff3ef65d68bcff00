/* SPDX-License-Identifier: MIT */
/* Array math for the kernel families: y [n] = f(x [n]), unit stride, for
 * the transcendental functions the activations and their derivatives need
 * (tanh, erf: libmvec; exp: vm_expf below, the same in every family), and
 * inline scalar forms that loops vectorise (exp2_neg, vm_phi_e for GELU).
 * Included by each family unit (kernels_*.c) after it defines
 * ATTN_VM_AVX512, ATTN_VM_AVX2 or nothing (portable).
 *
 * The x86 families call glibc's vector math library (libmvec, part of
 * libc6: the _ZGV* entries of the x86-64 vector ABI, at most 4 ulp from
 * the correctly rounded result for tanhf and erff, measured; torch's Sleef
 * u10 functions are within 1 ulp):
 * one call per 8 or 16 floats instead of one libm call per float, which is
 * what made gelu's forward and backward 20x slower than torch's.  The
 * portable family loops over libm: it is also the reference the family
 * specs compare with.  ATTN_NO_LIBMVEC (set by CMake where the C library
 * lacks the entries, e.g. musl) falls back to libm everywhere.
 *
 * In place (y == x) is allowed. */
#ifndef ATTN_VMATH_H
#define ATTN_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* rows are processed in blocks of this many floats (a few KB on the stack) */
#define VM_BLOCK 512

#if (defined(ATTN_VM_AVX512) || defined(ATTN_VM_AVX2)) && !defined(ATTN_NO_LIBMVEC)
#include <immintrin.h>
#if defined(ATTN_VM_AVX512)
typedef __m512 vm_v;
#define VM_W 16
#define VM_LOAD _mm512_loadu_ps
#define VM_STORE _mm512_storeu_ps
#define VM_NAME(f) _ZGVeN16v_##f
#else
typedef __m256 vm_v;
#define VM_W 8
#define VM_LOAD _mm256_loadu_ps
#define VM_STORE _mm256_storeu_ps
#define VM_NAME(f) _ZGVdN8v_##f
#endif
vm_v VM_NAME(tanhf)(vm_v);
vm_v VM_NAME(erff)(vm_v);

/* whole vectors, then the tail through a padded vector (the padding lanes
   compute f(0), which every function here takes without a trap) */
#define VM_ARRAY(NAME, F)                                                                                              \
  static inline void NAME(int64_t n, const float *x, float *y) {                                                       \
    int64_t i = 0;                                                                                                     \
    for (; i + VM_W <= n; i += VM_W) VM_STORE(y + i, VM_NAME(F)(VM_LOAD(x + i)));                                      \
    if (i < n) {                                                                                                       \
      float pad[VM_W] = {0};                                                                                           \
      memcpy(pad, x + i, (size_t)(n - i) * sizeof(float));                                                             \
      VM_STORE(pad, VM_NAME(F)(VM_LOAD(pad)));                                                                         \
      memcpy(y + i, pad, (size_t)(n - i) * sizeof(float));                                                             \
    }                                                                                                                  \
  }
#else
#define VM_ARRAY(NAME, F)                                                                                              \
  static inline void NAME(int64_t n, const float *x, float *y) {                                                       \
    for (int64_t i = 0; i < n; i++) y[i] = F(x[i]);                                                                    \
  }
#endif

VM_ARRAY(vm_tanh, tanhf)
VM_ARRAY(vm_erf, erff)

/* a * b + c, fused where the family has the instruction (the x86 AVX
   families, aarch64), else two roundings; VM_MULADD always two */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define VM_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define VM_FMA(a, b, c) ((a) * (b) + (c))
#endif
#define VM_MULADD(a, b, c) ((a) * (b) + (c))

#if defined(__GNUC__)
#define VM_INLINE static inline __attribute__((always_inline))
#else
#define VM_INLINE static inline
#endif

/* e^r for |r| <= ln2 / 2: the Cephes expf polynomial, its steps by FMA */
#define EXPF_POLY(r, FMA)                                                                                              \
  (FMA(FMA(FMA(FMA(FMA(FMA(1.9875691500e-4f, (r), 1.3981999507e-3f), (r), 8.3334519073e-3f), (r), 4.1665795894e-2f),   \
               (r), 1.6666665459e-1f),                                                                                 \
           (r), 5.0000001201e-1f),                                                                                     \
       (r) * (r), (r)) +                                                                                               \
   1.0f)

/* e^x in every family alike, free of calls and branches so that the
   loops using it vectorise (libmvec's expf is up to 2 ulp off the correctly
   rounded result, and half its results differ from libm's, which moved
   sin(999 * e^x) in a positional encoding by 6e-6): x = k ln2 + r,
   |r| <= ln2/2, e^r by the Cephes expf polynomial, 2^k as two factors so
   that subnormal results and e^88.7 come out right.  At most 1 ulp off
   the correctly rounded result (91% of results equal libm's); inf above
   88.72, 0 below -103.97, NaN stays NaN. */
static inline float vm_expf(float x) {
  const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 88.8f ? 88.8f : xc;
  const float k = (xc * log2e + round_magic) - round_magic;
  const float r = (xc - k * ln2_hi) - k * ln2_lo;
  const float p = EXPF_POLY(r, VM_MULADD);
  const int32_t ki = (int32_t)(k == k ? k : 0.0f); /* NaN goes through r, never through the cast */
  const int32_t k1 = ki / 2, k2 = ki - k1;
  const uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, sizeof s1);
  memcpy(&s2, &b2, sizeof s2);
  float e = (p * s1) * s2;
  e = x > 88.72283935546875f ? INFINITY : e;
  e = x < -103.972084f ? 0.0f : e;
  return x != x ? x : e;
}

/* 2^r on [-1/2, 1/2]: a degree-6 polynomial fitted for relative error (at
   most 1.0e-7 there, measured in float: within the 1-ulp error of an e^x).
   EXP2_POLY takes a float or a GCC vector of them (fused where the
   includer lets the compiler contract), exp2_neg fuses explicitly. */
#define EXP2_C0 1.0f
#define EXP2_C1 6.931471825e-01f
#define EXP2_C2 2.402264625e-01f
#define EXP2_C3 5.550329015e-02f
#define EXP2_C4 9.618519805e-03f
#define EXP2_C5 1.339986571e-03f
#define EXP2_C6 1.533758332e-04f
#define EXP2_HORNER(r, FMA)                                                                                            \
  FMA(FMA(FMA(FMA(FMA(FMA(EXP2_C6, (r), EXP2_C5), (r), EXP2_C4), (r), EXP2_C3), (r), EXP2_C2), (r), EXP2_C1), (r),     \
      EXP2_C0)
#define EXP2_POLY(r) EXP2_HORNER(r, VM_MULADD)

/* 2^x for x <= 0 (also -inf and NaN), branch-free so loops over it
   vectorise: x = k + r with k = round(x), 2^k put into the exponent bits.
   Adding 1.5 * 2^23 + 127 rounds x and leaves k + 127 in the low mantissa
   bits, which shifted left are 2^k as a float; clamping at -127 makes that
   exponent field 0, so the result is exactly 0 there (-inf gives 0; below
   -126 the result flushes to 0 where 2^x would be subnormal).  A NaN passes
   the clamp and poisons the polynomial. */
VM_INLINE float exp2_neg(float x) {
  const float magic = 12583039.0f; /* 1.5 * 2^23 + 127 */
  const float xc = x < -127.0f ? -127.0f : x;
  const float t = xc + magic, r = xc - (t - magic), p = EXP2_HORNER(r, VM_FMA);
  uint32_t bits;
  memcpy(&bits, &t, sizeof bits);
  bits <<= 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/* e^x for x <= 0 (-inf and NaN too), 0 below -87 where it would be
   subnormal: vm_expf's reduction and polynomial with fused steps, about 1
   ulp like torch's Sleef expf_u10 (softmax's exponentials, sigmoid's). */
VM_INLINE float vm_exp_neg(float x) {
  const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  const float xc = x < -87.0f ? -87.0f : x;
  const float k = VM_FMA(xc, log2e, round_magic) - round_magic;
  const float r = VM_FMA(k, -ln2_lo, VM_FMA(k, -ln2_hi, xc));
  const float p = EXPF_POLY(r, VM_FMA);
  const int32_t ki = (int32_t)(k == k ? k : 0.0f); /* NaN propagates through r, never through the cast */
  const uint32_t bits = (uint32_t)(ki + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  const float e = p * scale;
  return x < -87.0f ? 0.0f : e;
}

/* 1 / (1 + e^-x) from e = e^-|x| <= 1: 1 / (1 + e) for x >= 0, e / (1 + e)
   below, so the negative tail keeps its relative accuracy (torch's
   1 / (1 + e^-x) has it too, by an e^-x that may overflow to inf) */
VM_INLINE float vm_sigmoid(float x) {
  const float e = vm_exp_neg(-fabsf(x)), s = 1.0f / (1.0f + e);
  return x < 0.0f ? e * s : s;
}

/* Phi(x), the standard normal CDF, and e^(-x^2 / 2) in *e (for GELU and
   its derivative; free of calls and branches, so the loops vectorise):
   with z = |x| / sqrt 2 and t = 1 / (1 + 0.33 z), erfc(z) = t P(t) e^(-z^2)
   and Phi = erfc(z) / 2 for x < 0, 1 - erfc(z) / 2 otherwise.  P (halved
   here) is a degree-7 polynomial fitted to erfc(z) e^(z^2) / t over z in
   [0, 10] by least squares reweighted toward the smallest maximum
   relative error: 9.4e-8 in exact arithmetic; its limit at t = 0 makes
   the tail's relative error small too.  e^(-z^2) is 2^(-(|x| c)^2), c^2 =
   log2(e) / 2.  Measured in float over x in [-14, 14] in steps of 1e-6,
   with and without FMA: Phi within 2.6e-7 absolute; x Phi(x) within
   3.9e-7 absolute (torch 1.13's GELU: 3.8e-7), 16 ulp above x = -3 and
   1.2e-5 relative below it (torch's: 546 ulp, and up to 100% relative in
   that tail); the derivative Phi + x phi within 2.9e-7 (torch: 2.8e-7).
   Phi(-inf) = 0, Phi(inf) = 1, NaN stays NaN (through t). */
VM_INLINE float vm_phi_e(float x, float *e) {
  const float ax = fabsf(x);
  const float t = 1.0f / VM_FMA(2.333452471e-01f, ax, 1.0f); /* 0.33 / sqrt 2 */
  float p = -6.767363101e-02f;
  p = VM_FMA(p, t, 2.301219404e-01f);
  p = VM_FMA(p, t, -1.755810082e-01f);
  p = VM_FMA(p, t, 2.042560130e-01f);
  p = VM_FMA(p, t, 2.360691875e-02f);
  p = VM_FMA(p, t, 1.006130576e-01f);
  p = VM_FMA(p, t, 9.147778153e-02f);
  p = VM_FMA(p, t, 9.317892045e-02f);
  const float v = ax * 8.493218003e-01f; /* sqrt(log2(e) / 2) */
  *e = exp2_neg(-(v * v));
  const float h = (t * p) * *e;
  return x < 0.0f ? h : 1.0f - h;
}

static inline void vm_exp(int64_t n, const float *x, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = vm_expf(x[i]);
}

#endif
