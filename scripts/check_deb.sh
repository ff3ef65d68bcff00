#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian binary packages from debian/ with dpkg-buildpackage, in
# a copy of the tree (tracked and new files, no build folders, not the
# obj-<triplet>/ of a dpkg-buildpackage run in the tree), and checks
# them: the four .debs exist and hold what docs/packaging.md says, and
# libattn0's libraries have the SONAMEs it is named after; unpacked into a
# scratch root, stock lua5.4 requires attn from lua-attn, the attn
# interpreter of the attn package runs, lua5.1 (if installed) gets
# lua-attn's hint, and a C host built with libattn-dev's attn-lua.pc runs
# on libattn0.  lintian, when installed, is run and reported, not fatal.
#   scripts/check_deb.sh
# Exits 77 (skipped) when dpkg-buildpackage or debhelper is missing
# (Debian: dpkg-dev debhelper; scripts/setup.sh --test installs them).
# Ends with "check_deb: passed".
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in dpkg-buildpackage dh lua5.4; do
  command -v "$tool" >/dev/null || { echo "check_deb: skipped: $tool is not installed (Debian: dpkg-dev debhelper lua5.4)"; exit 77; }
done
version=$(<VERSION)

work=$(mktemp -d "${TMPDIR:-/tmp}/attn-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/attn-$version"
scripts/copy_tree.sh "$work/attn-$version"

echo "check_deb: dpkg-buildpackage -us -uc -b in $work"
start=$SECONDS
DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}"
export DEB_BUILD_OPTIONS
# debian/control says Rules-Requires-Root: no; fakeroot only if it is there.
root=()
[[ $(id -u) -eq 0 ]] || ! command -v fakeroot >/dev/null || root=(-rfakeroot)
if ! (cd "$work/attn-$version" && dpkg-buildpackage -us -uc -b "${root[@]}") >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log"
  echo "check_deb: dpkg-buildpackage failed" >&2
  exit 1
fi
echo "check_deb: built in $((SECONDS - start)) s"

fail=0
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
# package -> files it must hold
declare -A expect=(
  [libattn0]="./usr/lib/$multiarch/libattn.so.0 ./usr/lib/$multiarch/libattn_lua.so.0 ./usr/lib/$multiarch/libattn.so.$version ./usr/lib/$multiarch/libattn_lua.so.$version"
  [libattn-dev]="./usr/include/attn.h ./usr/include/attn_ops.h ./usr/include/attn_lua.h ./usr/include/attn_version.h ./usr/lib/$multiarch/libattn.so ./usr/lib/$multiarch/libattn_lua.so ./usr/lib/$multiarch/libattn.a ./usr/lib/$multiarch/libattn_lua.a ./usr/lib/$multiarch/pkgconfig/attn.pc ./usr/lib/$multiarch/pkgconfig/attn-lua.pc ./usr/lib/$multiarch/cmake/attn/attnConfig.cmake ./usr/lib/$multiarch/cmake/attn/attnTargets.cmake"
  [lua-attn]="./usr/lib/$multiarch/lua/5.4/attn/core.so ./usr/share/lua/5.4/attn/init.lua ./usr/share/lua/5.4/attn/nn.lua ./usr/share/lua/5.1/attn.lua"
  [attn]="./usr/bin/attn ./usr/share/man/man1/attn.1.gz ./usr/share/doc/attn/reference/index.html ./usr/share/doc/attn/guide-from-pytorch.md"
)
for pkg in libattn0 libattn-dev lua-attn attn; do
  deb=$work/${pkg}_${version}_$arch.deb
  if [[ ! -f $deb ]]; then
    echo "FAIL no $(basename "$deb")"
    fail=1
    continue
  fi
  listing=$(dpkg-deb -c "$deb" | awk '{print $6}')
  missing=()
  for f in ${expect[$pkg]}; do grep -qxF "$f" <<<"$listing" || missing+=("$f"); done
  if ((${#missing[@]})); then
    echo "FAIL $pkg lacks ${missing[*]}"
    fail=1
  else
    printf 'ok   %-28s %6d KiB, %d files; Depends: %s\n' "$(basename "$deb")" $(($(stat -c %s "$deb") / 1024)) \
      "$(wc -l <<<"$listing")" "$(dpkg-deb -f "$deb" Depends)"
  fi
  dpkg-deb -x "$deb" "$work/root"
done
((fail == 0)) || exit 1

# libattn0 is named after the SONAMEs of what it holds.
r=$work/root
for lib in libattn libattn_lua; do
  soname=$(objdump -p "$r/usr/lib/$multiarch/$lib.so.$version" | awk '$1 == "SONAME" {print $2}')
  if [[ $soname == "$lib.so.0" ]]; then echo "ok   $lib.so.$version has SONAME $soname (libattn0)"; else
    echo "FAIL $lib.so.$version has SONAME '$soname', libattn0 expects $lib.so.0"
    fail=1
  fi
done

# The unpacked packages used as installed ones: lua5.4 with only their paths.
out=$(cd "$work" && env -u LUA_INIT -u LUA_INIT_5_4 LD_LIBRARY_PATH="$r/usr/lib/$multiarch" \
  LUA_PATH_5_4="$r/usr/share/lua/5.4/?.lua;$r/usr/share/lua/5.4/?/init.lua" \
  LUA_CPATH_5_4="$r/usr/lib/$multiarch/lua/5.4/?.so" \
  lua5.4 -e 'local attn = require "attn"; print(attn.info().version, attn.tensor({{1.0, 2}, {3, 4}}):softmax(-1)[1][2])')
if [[ $out == "$version	0.731058"* ]]; then
  echo "ok   lua5.4 + lua-attn: $out"
else
  echo "FAIL lua5.4 with lua-attn printed '$out'"
  fail=1
fi
out=$(cd "$work" && env -u LUA_INIT -u LUA_INIT_5_4 LUA_PATH_5_4= LUA_CPATH_5_4= \
  "$r/usr/bin/attn" -e 'print(require("attn").eye(3):sum():item())')
if [[ $out == 3.0 ]]; then echo "ok   the attn package's interpreter runs"; else
  echo "FAIL the attn package's interpreter printed '$out'"
  fail=1
fi
if command -v lua5.1 >/dev/null; then
  # require fails by design there: its message is what is checked.
  out=$(cd "$work" && { env -u LUA_INIT LUA_PATH="$r/usr/share/lua/5.1/?.lua" lua5.1 -e 'require "attn"' 2>&1 || :; })
  if [[ $out == *"attn is a Lua 5.4 module"*"busted --lua=lua5.4"* ]]; then
    echo "ok   lua5.1 + lua-attn: require \"attn\" names the Lua 5.4 commands"
  else
    echo "FAIL lua5.1 with lua-attn printed '$out'"
    fail=1
  fi
fi
# libattn-dev + libattn0: a C host built with the unpacked pkg-config files
# (they find their prefix from their own place) and run on the unpacked
# shared libraries.
if command -v cc >/dev/null && command -v pkg-config >/dev/null; then
  cat >"$work/host.c" <<'EOF'
#include <stdio.h>
#include <lauxlib.h>
#include "attn_lua.h"
int main(void) {
  lua_State *L;
  if (attn_lua_newstate(NULL, &L) != ATTN_OK) { fprintf(stderr, "%s\n", attn_last_error()); return 1; }
  int rc = luaL_dostring(L, "local attn = require 'attn'; print(attn.version, attn.ones(2, 3):sum():item())");
  if (rc != LUA_OK) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  attn_lua_close(L);
  return rc != LUA_OK;
}
EOF
  pc=$r/usr/lib/$multiarch/pkgconfig
  lib=$r/usr/lib/$multiarch
  # shellcheck disable=SC2046 # pkg-config's flags are words
  if out=$(cd "$work" && cc -o host host.c $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs attn-lua) 2>&1) &&
    out=$(cd "$work" && LD_LIBRARY_PATH=$lib ./host 2>&1) && [[ $out == "$version	6.0" ]] &&
    [[ $(cd "$work" && LD_LIBRARY_PATH=$lib ldd ./host) == *"libattn_lua.so.0 => $lib/"* ]]; then
    echo "ok   C host with libattn-dev's attn-lua.pc on libattn0: $out"
  else
    echo "FAIL C host with libattn-dev's attn-lua.pc: $out"
    fail=1
  fi
fi
if command -v lintian >/dev/null; then
  echo "check_deb: lintian (warnings reported, not fatal):"
  lintian "$work"/*.deb 2>&1 | sed 's/^/  /' | head -n 40 || true
fi
((fail == 0)) || exit 1
echo "check_deb: passed"
