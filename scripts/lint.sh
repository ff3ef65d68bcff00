#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The lint suite (scripts/test.sh runs it after the normal suite): layering,
# formatting, static analysis and the generated docs.  Run after a build
# (it reads build/'s object files and runs the attn binary):
#
#   scripts/lint.sh [BUILD_DIR]          (default: build)
#
# Each check prints its own verdict; the script runs them all and exits
# non-zero if any failed, ending with "N passed, N failed".
#
#   layers     scripts/check_layers.lua: no include, call or require runs up
#              a floor or in a circle (docs/ARCHITECTURE.md)
#   format     clang-format --dry-run -Werror over the C sources (.clang-format)
#   luacheck   luacheck over lua/, scripts/ and spec/ (.luacheckrc)
#   cppcheck   cppcheck over src/ with the checks below
#   docs       scripts/check_docs.lua: every public Lua function is in the
#              LDoc reference, and LDoc itself runs clean
#   benchmarks docs/benchmarks.md is what scripts/bench/report.lua makes
#              of the CSVs it names
#   commits    scripts/check_commits.sh: the messages of the commits since
#              scripts/commits_base follow CONTRIBUTING.md (Commits); a
#              shallow clone without that commit skips, saying so
#
# cppcheck runs its "warning" and "portability" classes (real defects:
# uninitialised or null use, bad casts, format mismatches, sizes that
# differ between platforms) and not "style" or "performance", whose
# findings in C kernels are mostly taste; --inline-suppr lets a line say
# why a finding is wrong there.  luaconf.h's "#error Compiler does not
# support 'long long'" is suppressed: cppcheck reads it without the system
# <limits.h> (missingIncludeSystem), so LLONG_MAX looks undefined to it.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
attn_bin=$build/bin/attn
passed=0 failed=0
declare -a results

run() {
  local name=$1
  shift
  echo "== lint: $name"
  if "$@"; then
    passed=$((passed + 1))
    results+=("$name: passed")
  else
    failed=$((failed + 1))
    results+=("$name: FAILED")
  fi
}

c_sources() { git ls-files 'src/*.c' 'src/*.h' 'spec/c/*.c' 'spec/c/*.h' 'spec/fuzz/*.c' 'spec/fuzz/*.h'; }

check_format() {
  command -v clang-format >/dev/null || { echo "clang-format is not installed"; return 1; }
  c_sources | xargs clang-format --dry-run -Werror
}

check_luacheck() {
  command -v luacheck >/dev/null || { echo "luacheck is not installed (Debian: lua-check)"; return 1; }
  luacheck -q lua scripts spec
}

check_cppcheck() {
  command -v cppcheck >/dev/null || { echo "cppcheck is not installed"; return 1; }
  local inc
  inc=$(pkg-config --cflags-only-I lua5.4 cairo 2>/dev/null)
  # shellcheck disable=SC2086
  cppcheck --enable=warning,portability --std=c11 --inline-suppr --error-exitcode=1 -q -j"$(nproc)" \
    --suppress=missingIncludeSystem --suppress='preprocessorErrorDirective:*/luaconf.h' -D__GNUC__ -Isrc -Isrc/core -I"$build/generated" $inc src
}

run layers lua5.4 scripts/check_layers.lua "$build"
run format check_format
run luacheck check_luacheck
run cppcheck check_cppcheck
run docs "$attn_bin" scripts/check_docs.lua
run benchmarks lua5.4 scripts/bench/report.lua --check docs/benchmarks.md
run commits scripts/check_commits.sh --base-file scripts/commits_base

echo
printf '%s\n' "${results[@]}"
echo "$passed passed, $failed failed"
((failed == 0))
