/* SPDX-License-Identifier: MIT */
/* Choice of the kernel family (kernels.h): CPU detection, ATTN_ISA,
 * attn_set_isa and what attn.info() reports. */
#include "kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

typedef struct {
  const attn__kernels *k;
  const char *needs; /* what the CPU must have, for messages */
} family;

static const family families[] = {
#if defined(__x86_64__)
    {&attn__kernels_avx512, "x86-64-v4 (AVX-512 F, DQ, CD, BW, VL and the AVX2 family's features) with OS zmm support"},
    {&attn__kernels_avx2, "x86-64-v3 (AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE) with OS ymm support"},
#endif
    {&attn__kernels_portable, "nothing"},
};
#define NFAM ((int)(sizeof families / sizeof families[0]))

static struct {
  pthread_once_t once;
  const attn__kernels *active; /* atomic: attn_set_isa may change it */
  bool supported[NFAM];
  int best;
  char available[64];
  char requested[32];
  bool has_requested;
  char note[256];
  char cpu[64];
} isa = {.once = PTHREAD_ONCE_INIT};

#if defined(__x86_64__)
/* bit 0: avx2 family (x86-64-v3: the unit is built with -march=x86-64-v3),
   bit 1: avx512 family (x86-64-v4).  Every feature those levels let the
   compiler use is checked, and the OS must save the ymm / zmm state. */
static unsigned x86_features(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d) || a < 7) return 0;
  __cpuid(1, a, b, c, d);
  const unsigned v2_c =
      (1u << 0) | (1u << 9) | (1u << 13) | (1u << 19) | (1u << 20) | (1u << 23); /* SSE3 SSSE3 CX16 SSE4.1/2 POPCNT */
  const unsigned v3_c = (1u << 12) | (1u << 22) | (1u << 26) | (1u << 27) | (1u << 28) |
                        (1u << 29); /* FMA MOVBE XSAVE OSXSAVE AVX F16C */
  if ((c & (v2_c | v3_c)) != (v2_c | v3_c)) return 0;
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  bool ymm = (xlo & 0x6) == 0x6, zmm = (xlo & 0xe6) == 0xe6; /* SSE, AVX (+ opmask, ZMM_Hi256, Hi16_ZMM) */
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned v3_b = (1u << 3) | (1u << 5) | (1u << 8);                              /* BMI1 AVX2 BMI2 */
  const unsigned v4_b = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31); /* AVX-512 F DQ CD BW VL */
  const unsigned leaf7_b = b;
  unsigned ext_c = 0;
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000001) {
    __cpuid(0x80000001, a, b, c, d);
    ext_c = c;
  }
  const unsigned v3_ext = (1u << 0) | (1u << 5); /* LAHF/SAHF, LZCNT */
  unsigned r = 0;
  if (ymm && (leaf7_b & v3_b) == v3_b && (ext_c & v3_ext) == v3_ext) r |= 1;
  if ((r & 1) && zmm && (leaf7_b & v4_b) == v4_b) r |= 2;
  return r;
}

static void x86_brand(char *out, size_t n) {
  unsigned regs[12], a, b, c, d;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000004) return;
  for (unsigned i = 0; i < 3; i++)
    __cpuid(0x80000002 + i, regs[4 * i], regs[4 * i + 1], regs[4 * i + 2], regs[4 * i + 3]);
  char s[49];
  memcpy(s, regs, 48);
  s[48] = 0;
  const char *p = s;
  while (*p == ' ') p++;
  snprintf(out, n, "%s", p);
  for (size_t len = strlen(out); len && out[len - 1] == ' ';) out[--len] = 0;
}
#endif

static bool x86_name(const char *n) { return strcmp(n, "avx512") == 0 || strcmp(n, "avx2") == 0; }

static void choose(void) {
  unsigned feat = 0;
#if defined(__x86_64__)
  feat = x86_features();
  x86_brand(isa.cpu, sizeof isa.cpu);
#endif
  isa.best = -1;
  for (int i = 0; i < NFAM; i++) {
    const char *n = families[i].k->name;
    isa.supported[i] = strcmp(n, "portable") == 0 || (strcmp(n, "avx2") == 0 && (feat & 1)) ||
                       (strcmp(n, "avx512") == 0 && (feat & 2));
    if (!isa.supported[i]) continue;
    if (isa.best < 0) isa.best = i;
    size_t len = strlen(isa.available);
    snprintf(isa.available + len, sizeof isa.available - len, "%s%s", len ? "," : "", n);
  }
  int pick = isa.best;
  const char *env = getenv("ATTN_ISA");
  if (env && *env) {
    isa.has_requested = true;
    snprintf(isa.requested, sizeof isa.requested, "%s", env);
    int want = -1;
    for (int i = 0; i < NFAM; i++)
      if (strcmp(env, families[i].k->name) == 0) want = i;
    if (strcmp(env, "auto") == 0) {
    } else if (want >= 0 && isa.supported[want]) {
      pick = want;
    } else {
      if (want >= 0)
        snprintf(isa.note, sizeof isa.note, "ATTN_ISA=%s: this CPU lacks %s; using %s", env, families[want].needs,
                 families[pick].k->name);
      else if (x86_name(env))
        snprintf(isa.note, sizeof isa.note, "ATTN_ISA=%s: an x86-64 family, not in this build; using %s", env,
                 families[pick].k->name);
      else
        snprintf(isa.note, sizeof isa.note, "ATTN_ISA=%.20s: unknown family (avx512, avx2, portable, auto); using %s",
                 env, families[pick].k->name);
      fprintf(stderr, "attn: %s\n", isa.note); /* a forced family that silently did not apply would mislead */
    }
  }
  __atomic_store_n(&isa.active, families[pick].k, __ATOMIC_RELEASE);
}

const attn__kernels *attn__kern(void) {
  pthread_once(&isa.once, choose);
  return __atomic_load_n(&isa.active, __ATOMIC_ACQUIRE);
}

attn_status attn_isa_get_info(attn_isa_info *info) {
  if (!info) return attn_set_error(ATTN_ERR_ARG, "isa_get_info: info is NULL");
  const attn__kernels *k = attn__kern();
  info->active = k->name;
  info->best = families[isa.best].k->name;
  info->available = isa.available;
  info->requested = isa.has_requested ? isa.requested : NULL;
  info->note = isa.note;
  info->cpu = isa.cpu;
  return ATTN_OK;
}

attn_status attn_set_isa(const char *name) {
  attn__kern();
  if (!name || strcmp(name, "auto") == 0) {
    __atomic_store_n(&isa.active, families[isa.best].k, __ATOMIC_RELEASE);
    return ATTN_OK;
  }
  for (int i = 0; i < NFAM; i++) {
    if (strcmp(name, families[i].k->name) != 0) continue;
    if (!isa.supported[i])
      return attn_set_error(ATTN_ERR_ARG, "set_isa: family '%s' needs %s, which this CPU lacks (supported: %s)", name,
                            families[i].needs, isa.available);
    __atomic_store_n(&isa.active, families[i].k, __ATOMIC_RELEASE);
    return ATTN_OK;
  }
  if (x86_name(name))
    return attn_set_error(ATTN_ERR_ARG, "set_isa: family '%s' is x86-64 only (supported: %s)", name, isa.available);
  return attn_set_error(ATTN_ERR_ARG, "set_isa: unknown family '%.40s' (avx512, avx2, portable or auto)", name);
}
