/* SPDX-License-Identifier: MIT */
/* Helper of scripts/sanitize.sh and scripts/valgrind.sh, preloaded into
 * stock lua5.4 (after the ASan runtime, or under valgrind); not part of
 * attn.
 *  - dlclose is a no-op.  Lua unloads C modules when the state closes,
 *    before the exit-time leak check: the globals of attn/core.so and of
 *    the libraries only it pulled in (cairo, pixman) would vanish with
 *    their mappings, turning their one-time allocations (pixman's table of
 *    implementations, built in its constructor) into "definite leaks" that
 *    cannot even be symbolised.  Kept mapped, they stay reachable, and a
 *    real leak in attn's code gets a readable stack.
 *  - Under ASan (stock lua5.4 is not instrumented, so the runner preloads
 *    libasan to load the ASan-built attn/core.so), LD_PRELOAD is removed
 *    from the environment once the process has started: the programs a
 *    spec spawns (sh, cc, cmake, python3) then run as usual instead of
 *    under ASan's leak checker; a spawned lua5.4 goes through the runner's
 *    wrapper and gets both again.  Under valgrind it stays, so that the
 *    valgrind launcher script passes it on to lua5.4. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

__attribute__((constructor)) static void attn_sanitize_preload(void) {
  if (dlsym(RTLD_DEFAULT, "__asan_init")) unsetenv("LD_PRELOAD");
}

int dlclose(void *handle) {
  (void)handle;
  return 0;
}
