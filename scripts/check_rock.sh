#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks the rockspec end to end: `luarocks make` of a copy of the tree
# (tracked and new files, no build folders) into a scratch rocks tree, then
# stock lua5.4 with only that tree's paths requires attn and computes, and
# the attn binary the rock installed runs.
#   scripts/check_rock.sh
# Exits 77 (ctest's skip code for pkg/luarocks_make) when luarocks or
# lua5.4 is not installed (Debian: luarocks lua5.4; scripts/setup.sh --test).
# The rock builds with CMake from Debian packages only (OpenBLAS, Lua 5.4
# headers, cJSON, zlib, cairo), as scripts/setup.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in luarocks lua5.4; do
  command -v "$tool" >/dev/null || { echo "check_rock: skipped: $tool is not installed (Debian: $tool)"; exit 77; }
done
version=$(<VERSION)
rockspec=attn-$version-1.rockspec
[[ -f $rockspec ]] || { echo "check_rock: $rockspec not found (VERSION says $version)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/attn-rock.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
scripts/copy_tree.sh "$work/src"

tree=$work/tree
echo "check_rock: luarocks make $rockspec --tree $tree"
# luarocks runs a plain `cmake --build`; let it use the cores.
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
if ! (cd "$work/src" && luarocks --lua-version 5.4 make --tree "$tree" "$rockspec") >"$work/make.log" 2>&1; then
  tail -n 40 "$work/make.log"
  echo "check_rock: luarocks make failed" >&2
  exit 1
fi

# Only the rocks tree's paths (no ';;' defaults, run outside the source), so
# the module can come from nowhere else.
lua_path="$tree/share/lua/5.4/?.lua;$tree/share/lua/5.4/?/init.lua"
lua_cpath="$tree/lib/lua/5.4/?.so"
probe='
local attn = require "attn"
local x = attn.tensor({{1.0, 2}, {3, 4}})
local p = x:softmax(-1)
print(attn.version, x:matmul(x):sum():item(), ("%.4f"):format(p[1][2]))
print(package.searchpath("attn.core", package.cpath))'
out=$(cd "$work" && env -u LUA_INIT -u LUA_INIT_5_4 -u LUA_PATH -u LUA_CPATH \
  LUA_PATH_5_4="$lua_path" LUA_CPATH_5_4="$lua_cpath" lua5.4 -e "$probe")
expect="$version	54.0	0.7311
$tree/lib/lua/5.4/attn/core.so"
if [[ $out != "$expect" ]]; then
  printf 'check_rock: lua5.4 with the rock printed:\n%s\nexpected:\n%s\n' "$out" "$expect" >&2
  exit 1
fi
echo "check_rock: lua5.4 + rock: $(head -n 1 <<<"$out")"

out=$(cd "$work" && env -u LUA_INIT -u LUA_INIT_5_4 LUA_PATH_5_4= LUA_CPATH_5_4= \
  "$tree/bin/attn" -e 'print(require("attn").eye(3):sum():item())')
[[ $out == 3.0 ]] || { echo "check_rock: the rock's attn binary printed '$out', expected 3.0" >&2; exit 1; }
echo "check_rock: the rock's attn binary runs"
echo "check_rock: passed"
