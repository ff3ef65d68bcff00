#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds attn's libFuzzer targets (spec/fuzz/, clang with ASan + UBSan) in
# build-fuzz/ and runs each one for a bounded time:
#
#   scripts/fuzz.sh [seconds_per_target [target...]]     (default: 60 s, all)
#
# Each target starts from its committed corpus spec/fuzz/corpus/<target>/
# (read only) and writes what it discovers to build-fuzz/corpus/<target>/.
# A finding (sanitizer report, failed check, leak, timeout, out-of-memory)
# stops that target and leaves the input in build-fuzz/findings/<target>/;
# the script prints executions per target, then "N passed, N failed"
# (targets) and exits non-zero if any target failed.
#
# Environment:
#   ATTN_FUZZ_BUILD=dir    build directory (default build-fuzz)
#   ATTN_FUZZ_MERGE=1      after each run, add the inputs that reach new
#                          edges to spec/fuzz/corpus/<target>/ (to commit)
#   ATTN_FUZZ_RSS_MB=N     memory limit per target (default 2048)
#   ATTN_FUZZ_ISA=family   kernel family the targets run (ATTN_ISA; default
#                          portable: the corpus replays in ctest already run
#                          the CPU's widest family; "auto" for that one)
#   CC                     the compiler (default clang; must be clang)
# Needs Debian's clang and libclang-rt-dev (libFuzzer, sanitizer runtimes);
# scripts/setup.sh --test installs them.
#
# Reproduce a finding:  build-fuzz/<target> build-fuzz/findings/<target>/crash-...
# (ATTN_FUZZ_TRACE=1 prints what the views, broadcast and Lua API targets
# do); then add the input to spec/fuzz/corpus/<target>/ and a Lua
# reproducer to spec/fuzz_regress_spec.lua.
set -uo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
shift || true
build=${ATTN_FUZZ_BUILD:-build-fuzz}
rss=${ATTN_FUZZ_RSS_MB:-2048}

if ! [[ "$secs" =~ ^[0-9]+$ ]] || ((secs < 1)); then
  echo "usage: scripts/fuzz.sh [seconds_per_target [target...]]" >&2
  exit 2
fi

# The target list lives in spec/fuzz/targets.cmake.
all=$(sed -n 's/^set(FUZZ_[A-Z]*_TARGETS\(.*\))/\1/p' spec/fuzz/targets.cmake | tr ' ' '\n' | grep -v '^$')
targets=${*:-$all}

echo "fuzz: building the targets in $build"
mkdir -p "$build"
if ! cmake -S spec/fuzz -B "$build" -DCMAKE_C_COMPILER="${CC:-clang}" >"$build/configure.log" 2>&1; then
  cat "$build/configure.log" >&2
  echo "fuzz: cannot configure spec/fuzz (clang and libclang-rt-dev installed?)" >&2
  exit 2
fi
if ! cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1; then
  tail -40 "$build/build.log" >&2
  echo "fuzz: build failed" >&2
  exit 2
fi

# The plain C kernels get fuzzed; ctest's corpus replays cover the widest family.
export ATTN_ISA="${ATTN_FUZZ_ISA:-portable}"
echo "fuzz: kernel family ATTN_ISA=$ATTN_ISA"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$build/logs"
passed=0
failed=0
for t in $targets; do
  if [[ ! -x "$build/$t" ]]; then
    echo "fuzz: no such target: $t" >&2
    failed=$((failed + 1))
    continue
  fi
  work="$build/corpus/$t"
  found="$build/findings/$t"
  mkdir -p "$work" "$found" "spec/fuzz/corpus/$t"
  # A unit over 30 s is a hang (a finding); one of a few seconds is not: the
  # Lua-API programs may build default-size models (nn.Transformer's 512-wide
  # weights) until the sandbox's 16 MB cap refuses them, which takes ~3 s
  # under ASan and 10 s on a loaded machine, so slow units are reported only
  # at the timeout.
  opts=(-max_total_time="$secs" -rss_limit_mb="$rss" -timeout=30 -report_slow_units=30 -print_final_stats=1
        -artifact_prefix="$found/")
  dict="spec/fuzz/dict/${t#fuzz_}.dict"
  [[ -f "$dict" ]] && opts+=(-dict="$dict")
  len=()
  [[ "$t" == fuzz_lua_api ]] && len=(-max_len=512) # programs, not files
  opts+=("${len[@]}")
  log="$build/logs/$t.log"
  touch "$log.start"
  "$build/$t" "${opts[@]}" "$work" "spec/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  new_findings=$(find "$found" -type f -newer "$log.start")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs_used=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if ((rc == 0)) && [[ -z "$new_findings" ]]; then
    passed=$((passed + 1))
    printf 'fuzz: %-18s ok      %10s executions in %s s (%s, corpus %s)\n' "$t" "${runs:-?}" "${secs_used:-$secs}" \
      "${cov:-cov: ?}" "$(find "$work" -type f | wc -l)"
  else
    failed=$((failed + 1))
    printf 'fuzz: %-18s FAILED  %10s executions (exit %d); log %s\n' "$t" "${runs:-?}" "$rc" "$log"
    grep -E 'ERROR: |SUMMARY: |fuzz check failed|runtime error|leak:' "$log" | head -8 | sed 's/^/    /'
    [[ -n "$new_findings" ]] && echo "$new_findings" | sed 's/^/    input: /'
  fi
  rm -f "$log.start"
  if [[ "${ATTN_FUZZ_MERGE:-0}" == 1 ]]; then
    # only inputs that reach new edges (counters off keeps the set small)
    "$build/$t" -set_cover_merge=1 -use_counters=0 -rss_limit_mb="$rss" -timeout=30 "${len[@]}" \
      "spec/fuzz/corpus/$t" "$work" >>"$log" 2>&1 &&
      echo "fuzz: $t: corpus now $(find "spec/fuzz/corpus/$t" -type f | wc -l) files"
  fi
done
echo "$passed passed, $failed failed"
((failed == 0))
