#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the build in ./build where stock tools find it (scripts/main.sh
# runs it after setup.sh; running it again just reinstalls):
#   /usr/local/share/lua/5.4/attn, /usr/local/lib/lua/5.4/attn/core.so
#                                   lua5.4 and busted --lua=lua5.4: require "attn"
#   /usr/local/bin/attn             the interpreter
#   /usr/local/lib/libattn*.{so,a}, /usr/local/include/attn*.h
#   /usr/local/lib/pkgconfig/attn.pc, attn-lua.pc, /usr/local/lib/cmake/attn
#   /usr/local/share/doc/attn       the API reference
# (the prefix is the build's CMAKE_INSTALL_PREFIX, /usr/local by default).
# As root, or with sudo.  For another prefix: cmake --install build --prefix DIR;
# for a rocks tree: luarocks --lua-version 5.4 make.
#   scripts/install.sh [-q]       -q: no summary
#   scripts/install.sh --summary  only the summary
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/CMakeCache.txt ]] || { echo "install: no build/ here; run scripts/setup.sh first" >&2; exit 1; }
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' build/CMakeCache.txt)
if [[ ${1:-} != --summary ]]; then
$sudo cmake --install build >build/install.log
# the new libattn.so.0 and libattn_lua.so.0 for the dynamic linker
if [[ $prefix == /usr/local || $prefix == /usr ]] && command -v ldconfig >/dev/null; then $sudo ldconfig; fi
fi
[[ ${1:-} == -q ]] && exit 0
version=$(<VERSION)
cat <<MSG
attn $version is installed under $prefix ($(wc -l <build/install_manifest.txt) files, list in build/install_manifest.txt):
  lua5.4 -e 'print(require("attn").info().version)'     stock Lua 5.4 finds attn
  attn script.lua                                       the interpreter ($(command -v attn || echo "$prefix/bin/attn"))
  busted --lua=lua5.4 spec/                             specs (docs/testing.md)
  cc host.c \$(pkg-config --cflags --libs attn-lua)      C hosts (docs/embedding.md); CMake: find_package(attn)
  $prefix/share/doc/attn/reference/index.html        the API reference
MSG
