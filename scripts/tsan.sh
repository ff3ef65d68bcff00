#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ThreadSanitizer: spec/c/test_threads.c (several Lua states in several
# threads running SDPA forward/backward, MultiheadAttention and Adam at
# once, on attn's thread pool, while another thread changes the thread
# count) and spec/c/test_host.c (4 sandboxed states in 4 threads, and the
# rest of the host API) on a -DATTN_SANITIZE=thread build in ./build-tsan.
#
#   scripts/tsan.sh [ROUNDS]     runs test_threads ROUNDS times (default 3)
#
# Any TSan report fails the run (halt_on_error, exit status 66).  No
# suppressions: OpenBLAS is not instrumented, so its worker threads' memory
# accesses are invisible to TSan and need none.
# Environment: ATTN_TSAN_BUILD (build dir), ATTN_TEST_THREADS (threads in
# test_threads, default 4), ATTN_TEST_STEPS (Adam steps, default 4).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ATTN_TSAN_BUILD:-$PWD/build-tsan}
rounds=${1:-3}

export CC=${CC:-gcc}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="-O1" -DATTN_SANITIZE=thread >/dev/null
cmake --build "$build" -j"$(nproc)" --target test_threads test_host

export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4"
passed=0 failed=0
run() {
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "tsan: $* passed in $((SECONDS - start)) s"
  else
    failed=$((failed + 1))
    echo "tsan: $* FAILED (status $?)"
  fi
}
for ((r = 1; r <= rounds; r++)); do
  run "$build/test_threads"
done
run "$build/test_host"
echo "tsan: $passed passed, $failed failed"
((failed == 0))
