#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Memcheck over the example host, the C tests and the busted specs, on the
# normal build (./build, made by scripts/setup.sh).
#
#   scripts/valgrind.sh            the CI subset (see SUBSET below)
#   scripts/valgrind.sh --full     every C test and every spec
#   scripts/valgrind.sh NAME...    just these (test_host, shape_spec, attn_viz, ...)
#
# Each program runs under
#   valgrind --leak-check=full --errors-for-leak-kinds=definite
#            --error-exitcode=99
# so a definite leak or any memory error (invalid read/write, use of
# uninitialised values, bad free) fails it.  99 rather than 1 because the
# example host and the specs exit 1 on their own failures; both count.
# Only the process named is checked: programs a spec spawns (attn, lua5.4,
# cc, python3) run natively (--trace-children=no).  Stock lua5.4 gets
# spec/sanitize/lua_preload.c preloaded: its no-op dlclose keeps attn/core.so
# and the libraries it pulled in (cairo, pixman) mapped until exit, so their
# globals still reach what they allocated and a leak in attn's code gets a
# symbolised stack.  spec/sanitize/valgrind.supp lists third-party caches
# (fontconfig) only.  Logs: build/valgrind/logs/NAME.log (output) and
# NAME.vg (memcheck).
# Environment: ATTN_VALGRIND_BUILD (build dir), ATTN_VALGRIND_JOBS (default:
# nproc), ATTN_VALGRIND_TIMEOUT (seconds per program, default 3600).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${ATTN_VALGRIND_BUILD:-$root/build}
jobs=${ATTN_VALGRIND_JOBS:-$(nproc)}

# The CI subset: the example host, the C tests but the two slowest, and the
# specs that cover the binding, autograd, attention, the modules, training,
# I/O and plotting without the long training and oracle runs (timings in
# the README; --full runs everything).
SUBSET=(attn_viz attn_viz-escape test_tensor test_shape test_reduce test_random test_print test_io test_grad_ops
  shape_spec math_spec reduce_spec grads_spec autograd_spec sdpa_spec mha_spec attention_modules_spec
  nn_layers_spec nn_module_spec losses_spec optim_spec random_spec print_spec io_spec plot_spec data_spec)

command -v valgrind >/dev/null || { echo "valgrind: not installed (scripts/setup.sh --test)" >&2; exit 2; }
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j"$(nproc)" >/dev/null

out=$build/valgrind
mkdir -p "$out/logs"
cc -shared -fPIC -O1 -o "$out/lua_preload.so" spec/sanitize/lua_preload.c -ldl

all=(attn_viz attn_viz-escape)
for t in spec/c/test_*.c; do
  t=${t##*/}
  all+=("${t%.c}")
done
# dist_spec launches Open MPI jobs (mpirun, its daemons and shared-memory
# transport) whose own allocations memcheck reports as noise; attn.dist's
# C code runs in the 1-rank world of every spec above and under mpirun in
# spec/mpi (ctest's mpi/* tests), so --full leaves this one out.
for s in spec/*_spec.lua; do
  s=${s##*/}
  [[ $s == dist_spec.lua ]] && continue
  all+=("${s%.lua}")
done

if [[ ${1:-} == --full ]]; then
  names=("${all[@]}")
elif (($#)); then
  names=("$@")
else
  names=("${SUBSET[@]}")
fi

# run_one NAME: runs it under memcheck; prints one line "NAME STATUS SECONDS".
run_one() {
  local name=$1 log=$out/logs/$1.log expect=0 start rc
  local vg=(valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 --num-callers=40
    --suppressions="$root/spec/sanitize/valgrind.supp" --log-file="$out/logs/$name.vg")
  local cmd
  case $name in
    attn_viz) cmd=("$build/bin/attn_viz" src/examples/viz_dot.lua) ;;
    attn_viz-escape) cmd=("$build/bin/attn_viz" spec/support/host_escape.lua) expect=1 ;;
    test_*) cmd=("$build/$name") ;;
    *_spec) cmd=(lua5.4 /usr/bin/busted --output=TAP "spec/$name.lua") ;;
    *) echo "$name unknown 0"; return ;;
  esac
  cmd=("${vg[@]}" "${cmd[@]}")
  # env first: valgrind checks the program it starts, not env
  [[ $name == *_spec ]] && cmd=(env LD_PRELOAD="$out/lua_preload.so" "${cmd[@]}")
  start=$(date +%s)
  rc=0
  LUA_PATH_5_4="$root/lua/?.lua;$root/lua/?/init.lua;$root/spec/?.lua;;" LUA_CPATH_5_4="$build/?.so;;" \
    ATTN_BIN="$build/bin/attn" ATTN_SOURCE_DIR="$root" ATTN_BUILD_DIR="$build" ATTN_SANITIZER=valgrind \
    timeout "$limit" "${cmd[@]}" >"$log" 2>&1 || rc=$?
  local secs=$(($(date +%s) - start)) status
  if ((rc == 99)); then
    status=memcheck
  elif ((rc == 124)); then
    status="timeout(${limit}s)"
  elif ((rc != expect)); then
    status="failed($rc)"
  else
    status=ok
  fi
  echo "$name $status $secs"
}
export -f run_one
limit=${ATTN_VALGRIND_TIMEOUT:-3600}
export out build root limit

printf '%s\n' "${names[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' | tee "$out/summary.txt"

passed=$(awk '$2 == "ok"' "$out/summary.txt" | wc -l)
failed=$(awk '$2 != "ok"' "$out/summary.txt" | wc -l)
for name in $(awk '$2 != "ok" {print $1}' "$out/summary.txt"); do
  echo "==== $name: $out/logs/$name.log, $out/logs/$name.vg"
  tail -n 30 "$out/logs/$name.log"
  grep -A25 -E "definitely lost in|Invalid (read|write|free)|uninitialised|Mismatched" "$out/logs/$name.vg" | head -80 || true
done
echo "valgrind: $passed passed, $failed failed"
((failed == 0))
