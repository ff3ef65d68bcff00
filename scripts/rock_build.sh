#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The rockspec's build and install commands (`luarocks make`):
#   scripts/rock_build.sh build
#   scripts/rock_build.sh install PREFIX LUADIR LIBDIR BINDIR
# build: when ./build holds a CMake build of this tree (scripts/setup.sh or
# scripts/main.sh made it) it is brought up to date and used, so a rock
# after the main command takes seconds, not a fresh build; otherwise
# ./build.luarocks is configured (Release, no tests) and built, on every
# core (luarocks' own cmake back-end builds on one).
# install: `cmake --install` into a scratch folder, then the rock's layout:
# the Lua package to LUADIR, attn/core.so to LIBDIR, the attn interpreter
# to BINDIR, the C libraries, headers, pkg-config and CMake files and the
# reference under PREFIX/native (use `cmake --install` for a system-wide C
# install).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}

# The build folder to use: ./build when it is a configured build of this
# tree whose install folders are relative to the prefix (the defaults).
pick() {
  if [[ -f build/CMakeCache.txt ]] &&
    [[ $(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build/CMakeCache.txt) == "$PWD" ]] &&
    ! grep -Eq '^(ATTN_LUA_CMOD_DIR|ATTN_LUA_LMOD_DIR|CMAKE_INSTALL_(BIN|LIB|DATA|INCLUDE)DIR)[:A-Z]*=/' build/CMakeCache.txt; then
    echo build
  else
    echo build.luarocks
  fi
}
cache() { sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"; }

case ${1:-} in
build)
  b=$(pick)
  if [[ $b == build.luarocks && ! -f build.luarocks/CMakeCache.txt ]]; then
    cmake -S . -B build.luarocks -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF -DATTN_INSTALL_LUA_HINTS=OFF
  fi
  echo "rock_build: building in $b ($jobs jobs)"
  cmake --build "$b" -j"$jobs"
  ;;
install)
  (($# == 5)) || { echo "usage: scripts/rock_build.sh install PREFIX LUADIR LIBDIR BINDIR" >&2; exit 2; }
  prefix=$2 luadir=$3 libdir=$4 bindir=$5
  b=$(pick)
  stage=$(mktemp -d "${TMPDIR:-/tmp}/attn-rock-stage.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  cmake --install "$b" --prefix "$stage" >/dev/null
  lmod=$(cache "$b" ATTN_LUA_LMOD_DIR) cmod=$(cache "$b" ATTN_LUA_CMOD_DIR) bin=$(cache "$b" CMAKE_INSTALL_BINDIR)
  mkdir -p "$luadir" "$libdir" "$bindir" "$prefix/native"
  cp -r "$stage/$lmod/attn" "$luadir/"
  cp -r "$stage/$cmod/attn" "$libdir/"
  cp "$stage/$bin/attn" "$bindir/"
  rm -rf "${stage:?}/$lmod/attn" "${stage:?}/$cmod/attn" "${stage:?}/$bin/attn"
  # the attn.lua hints for Lua 5.1-5.3 belong to a system install only
  rm -f "$stage"/share/lua/5.[123]/attn.lua
  find "$stage" -depth -type d -empty -delete
  cp -r "$stage"/. "$prefix/native/"
  echo "rock_build: installed from $b"
  ;;
*)
  echo "usage: scripts/rock_build.sh build | install PREFIX LUADIR LIBDIR BINDIR" >&2
  exit 2
  ;;
esac
