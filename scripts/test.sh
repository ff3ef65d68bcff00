#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every test: set up (test tools, the PyTorch oracle, valgrind, clang),
# build, then run the suites one after the other:
#   normal     C tests, busted specs and the example host through ctest (build/)
#   lint       layering, format, luacheck, cppcheck, docs coverage (scripts/lint.sh)
#   install    installs the build where stock tools find it and uses it as a
#              user would: lua5.4, busted, pkg-config and CMake hosts, the
#              installed reference (scripts/check_install.sh)
#   deb        the Debian packages of debian/, built and checked (scripts/check_deb.sh)
#   asan       the same suite under AddressSanitizer + UBSan (scripts/sanitize.sh)
#   tsan       several states in several threads under ThreadSanitizer (scripts/tsan.sh)
#   valgrind   memcheck over the example host, C tests and a spec subset (scripts/valgrind.sh)
#   fuzz       each libFuzzer target for 60 s (scripts/fuzz.sh 60)
# Each suite's output goes to the terminal and to build/test-logs/SUITE.log.
# The run ends with a line per suite and "N passed, N failed" (suites), and
# exits non-zero if any failed.
#
#   scripts/test.sh                 all suites
#   scripts/test.sh CTEST_ARGS...   the normal suite only, with these ctest
#                                   arguments (e.g. -R lua/sdpa_spec)
#   ATTN_TEST_SUITES="normal tsan"  choose the suites
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --test || exit 1

if (($#)); then
  suites=${ATTN_TEST_SUITES:-normal}
else
  suites=${ATTN_TEST_SUITES:-normal lint install deb asan tsan valgrind fuzz}
fi
logs=build/test-logs
mkdir -p "$logs"

suite_normal() { (cd build && ctest --output-on-failure -j"$(nproc)" "$@"); }
# layering, clang-format, luacheck, cppcheck, LDoc coverage and the
# generated benchmarks page (scripts/lint.sh), over the normal build
suite_lint() { scripts/lint.sh build; }
suite_install() { scripts/check_install.sh; }
suite_deb() { scripts/check_deb.sh; }
suite_asan() { scripts/sanitize.sh; }
suite_tsan() { scripts/tsan.sh; }
suite_valgrind() { scripts/valgrind.sh; }
suite_fuzz() {
  if [[ ! -x scripts/fuzz.sh ]]; then
    echo "fuzz: scripts/fuzz.sh is missing"
    return 1
  fi
  scripts/fuzz.sh 60
}

passed=0 failed=0 summary=()
for s in $suites; do
  if ! declare -F "suite_$s" >/dev/null; then
    echo "test: unknown suite '$s' (normal lint install deb asan tsan valgrind fuzz)" >&2
    exit 2
  fi
  echo "==== $s"
  start=$SECONDS
  if [[ $s == normal ]]; then
    suite_normal "$@" 2>&1 | tee "$logs/$s.log"
  else
    "suite_$s" 2>&1 | tee "$logs/$s.log"
  fi
  rc=${PIPESTATUS[0]}
  secs=$((SECONDS - start))
  if ((rc == 0)); then
    passed=$((passed + 1))
    summary+=("$(printf '%-9s passed  %4d s' "$s" "$secs")")
  else
    failed=$((failed + 1))
    summary+=("$(printf '%-9s FAILED  %4d s  (status %d, log %s)' "$s" "$secs" "$rc" "$logs/$s.log")")
  fi
done

echo "==== summary"
printf '%s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
((failed == 0))
