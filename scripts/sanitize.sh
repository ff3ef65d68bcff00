#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ctest suite (C tests, busted specs under stock lua5.4, the example
# host, the fuzz corpora replayed) on a build with AddressSanitizer and
# UBSan (-DATTN_SANITIZE=ON, -O1 -g) in ./build-asan.
#
#   scripts/sanitize.sh [ctest arguments, e.g. -R lua/io_spec]
#
# Without arguments it runs every ctest test but cli/busted-under-attn (see
# below; ATTN_SANITIZE_ALL=1 includes it).
#
# Exits non-zero if a test fails or if any sanitizer report was written, even
# by a process whose exit status a spec ignores: every ASan/LSan/UBSan
# report goes to build-asan/sanitize/logs/ and is printed at the end.
#   - UBSan is built with -fno-sanitize-recover: a report aborts the process.
#   - allocator_may_return_null=1: specs check that absurd allocations fail
#     cleanly; ASan would otherwise abort on them.
#   - LeakSanitizer runs in every process; spec/sanitize/lsan.supp lists the
#     one-time caches of third-party libraries (fontconfig) only.
#   - Stock lua5.4 is not instrumented, so it runs through a wrapper that
#     preloads the ASan runtime (see spec/sanitize/lua_preload.c).
#   - ATTN_SANITIZER=address is set for the specs: the few bounds on process
#     RSS are widened under it (ASan's quarantine holds freed memory).
# Environment: ATTN_ASAN_BUILD (build dir), CTEST_PARALLEL (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${ATTN_ASAN_BUILD:-$root/build-asan}
jobs=$(nproc)

# Debug (no NDEBUG) at -O1 with GCC (CC picks the compiler of a new build
# dir): the lua5.4 wrapper below preloads GCC's libasan.
export CC=${CC:-gcc}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="-O1" \
  -DATTN_SANITIZE=ON -DLUA_EXECUTABLE="$build/sanitize/bin/lua5.4" >/dev/null
cmake --build "$build" -j"$jobs"

# The ASan runtime of the compiler that built it (GCC's libasan).
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
libasan=$(realpath "$("$cc" -print-file-name=libasan.so)")
[[ -f $libasan ]] || { echo "sanitize: no libasan.so for $cc (GCC is needed)" >&2; exit 2; }

mkdir -p "$build/sanitize/bin"
helper=$build/sanitize/lua_preload.so
"$cc" -shared -fPIC -O1 -o "$helper" spec/sanitize/lua_preload.c -ldl
cat >"$build/sanitize/bin/lua5.4" <<EOF
#!/bin/sh
# lua5.4 with the ASan runtime preloaded (scripts/sanitize.sh).
LD_PRELOAD="$libasan:$helper\${LD_PRELOAD:+:\$LD_PRELOAD}" exec $(command -v lua5.4) "\$@"
EOF
chmod +x "$build/sanitize/bin/lua5.4"

logs=$build/sanitize/logs
rm -rf "$logs"
mkdir -p "$logs"
export PATH="$build/sanitize/bin:$PATH"
export ATTN_SANITIZER=address
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:log_path=$logs/asan"
export LSAN_OPTIONS="suppressions=$root/spec/sanitize/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan"

# cli/busted-under-attn runs every spec a second time inside the attn
# binary: the same core and binding code, 20 minutes under ASan on 2 cores.
# The attn binary itself stays covered (cli_spec, the seed specs, the example
# host).  pkg/luarocks_make builds its own unsanitized copy of the tree
# with luarocks, which finds the lua5.4 wrapper below first on PATH and
# looks for Lua's headers beside it ("Failed finding Lua header files"):
# nothing of this build is in that rock, and the normal suite runs it.  ATTN_SANITIZE_ALL=1, or any ctest arguments,
# lift the exclusions.
args=("$@")
if ((${#args[@]} == 0)) && [[ ${ATTN_SANITIZE_ALL:-0} != 1 ]]; then
  args=(-E '^(cli/busted-under-attn|pkg/luarocks_make)$')
fi
status=0
(cd "$build" && ctest --output-on-failure --timeout 3000 -j"${CTEST_PARALLEL:-$jobs}" "${args[@]}") || status=$?

# A log that holds only allocator warnings (allocator_may_return_null) is
# not a report.
reports=()
for f in "$logs"/*; do
  [[ -e $f ]] || continue
  if grep -qE "ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:|SUMMARY: " "$f"; then
    reports+=("$f")
  fi
done
if ((${#reports[@]})); then
  for f in "${reports[@]}"; do
    echo "==== $f"
    cat "$f"
  done
  echo "sanitize: ${#reports[@]} sanitizer report(s) (above)"
  status=1
else
  echo "sanitize: no sanitizer reports"
fi
exit $status
