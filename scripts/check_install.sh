#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks attn as a user finds it after the main command: installs the build
# (scripts/install.sh, twice: the second run must be harmless), then, from
# outside the source tree and with no LUA_PATH of ours,
#   * stock lua5.4 requires attn and prints its version; lua5.1 says why not;
#   * the attn interpreter on PATH runs a script;
#   * plain busted runs the docs' example project (docs/testing.md);
#   * the 20-line host of docs/embedding.md compiles against the installed
#     headers with pkg-config, linked dynamically and statically (no
#     libattn*.so needed), and with CMake's find_package(attn), and prints
#     what the page says;
#   * the API reference is installed, every page linked from its index.
#   scripts/check_install.sh      (as root, or with sudo; after scripts/setup.sh)
# Ends with "check_install: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
src=$PWD
passed=0 failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; [[ -n ${2:-} ]] && printf '%s\n' "$2" | sed 's/^/     /'; failed=$((failed + 1)); }

scripts/install.sh -q && scripts/install.sh -q && ok "scripts/install.sh runs twice" || bad "scripts/install.sh"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' build/CMakeCache.txt)
version=$(<VERSION)
work=$(mktemp -d "${TMPDIR:-/tmp}/attn-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
clean=(env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 -u LUA_INIT -u LUA_INIT_5_4 -u ATTN_SOURCE_DIR)

out=$("${clean[@]}" lua5.4 -e 'print(require("attn").info().version)' 2>&1)
[[ $out == "$version" ]] && ok "lua5.4: require \"attn\" -> $out" || bad "lua5.4 -e 'require \"attn\"'" "$out"
where=$("${clean[@]}" lua5.4 -e 'print(package.searchpath("attn.core", package.cpath))' 2>&1)
[[ $where == "$prefix"/* ]] && ok "lua5.4 finds attn/core.so in $where" || bad "attn.core found at '$where'"

if command -v lua5.1 >/dev/null; then
  out=$("${clean[@]}" lua5.1 -e 'require "attn"' 2>&1)
  [[ $out == *"attn is a Lua 5.4 module"*"busted --lua=lua5.4"* ]] && ok "lua5.1: require \"attn\" names the Lua 5.4 commands" ||
    bad "lua5.1's message" "$out"
fi

printf 'local attn = require "attn"\nprint(attn.eye(3):sum():item())\n' >script.lua
out=$("${clean[@]}" attn script.lua 2>&1)
[[ $out == 3.0 && $(command -v attn) == "$prefix/bin/attn" ]] && ok "attn script.lua ($(command -v attn))" ||
  bad "attn script.lua" "$(command -v attn): $out"

if command -v busted >/dev/null; then
  cp -r "$src/docs/examples/tiny-model" .
  out=$(cd tiny-model && "${clean[@]}" busted 2>&1)
  [[ $out == *"4 successes / 0 failures / 0 errors"* ]] && ok "busted (docs/examples/tiny-model, .busted: lua5.4)" ||
    bad "busted in docs/examples/tiny-model" "$out"
  out=$(cd tiny-model && rm .busted && "${clean[@]}" busted --lua=lua5.4 spec 2>&1)
  [[ $out == *"4 successes / 0 failures / 0 errors"* ]] && ok "busted --lua=lua5.4 spec" || bad "busted --lua=lua5.4 spec" "$out"
else
  bad "busted is not installed (scripts/setup.sh --test)"
fi

# The host of docs/embedding.md: its ```c block, and the output its page shows.
awk '/^```c$/ { f = 1; next } /^```$/ { if (f) exit } f' "$src/docs/embedding.md" >host.c
expect=$(sed -n 's/^    # \(scores\[1\] = .*\)$/\1/p' "$src/docs/embedding.md")
lines=$(wc -l <host.c)
((lines > 0 && lines <= 20)) && ok "docs/embedding.md's host is $lines lines" || bad "docs/embedding.md's host has $lines lines"
if out=$(cc -o host host.c $(pkg-config --cflags --libs attn-lua) 2>&1) && out=$(./host 2>&1) && [[ $out == "$expect" ]]; then
  ok "host (pkg-config attn-lua, shared): $out"
else
  bad "host linked with pkg-config --libs attn-lua" "$out"
fi
if out=$(cc -o host_static host.c $(pkg-config --cflags attn-lua) -Wl,--as-needed -Wl,-Bstatic -lattn_lua -lattn \
  -Wl,-Bdynamic $(pkg-config --static --libs attn-lua) 2>&1) && out=$(./host_static 2>&1) && [[ $out == "$expect" ]]; then
  if readelf -d host_static | grep -q 'NEEDED.*libattn'; then
    bad "the static host still needs a libattn*.so" "$(readelf -d host_static | grep NEEDED)"
  else
    ok "host (pkg-config --static attn-lua, libattn*.a): $out"
  fi
else
  bad "host linked statically with pkg-config --static --libs attn-lua" "$out"
fi
mkdir cm && cp host.c cm/ && cat >cm/CMakeLists.txt <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(host C)
find_package(attn REQUIRED)
add_executable(host host.c)
target_link_libraries(host PRIVATE attn::attn_lua)
EOF
if out=$(cmake -S cm -B cm/build >/dev/null 2>&1 && cmake --build cm/build 2>&1) && out=$(cm/build/host 2>&1) &&
  [[ $out == "$expect" ]]; then
  ok "host (CMake find_package(attn), attn::attn_lua): $out"
else
  bad "host built with CMake's find_package(attn)" "$out"
fi

ref=$prefix/share/doc/attn/reference
if [[ -f $ref/index.html ]]; then
  missing=()
  for page in $(grep -o 'href="[a-zA-Z_]*\.html"' "$ref/index.html" | sed 's/href="\(.*\)"/\1/'); do
    [[ -f $ref/$page ]] || missing+=("$page")
  done
  n=$(grep -o 'href="[a-zA-Z_]*\.html"' "$ref/index.html" | wc -l)
  ((${#missing[@]} == 0 && n >= 10)) && ok "reference installed: $ref/index.html, $n pages" ||
    bad "reference pages missing: ${missing[*]} ($n linked)"
else
  bad "no API reference at $ref/index.html"
fi

echo "check_install: $passed passed, $failed failed"
((failed == 0))
