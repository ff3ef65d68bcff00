#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what attn needs on Debian 12 (as root; uses sudo when not root)
# and configures + builds it in ./build.
#   scripts/setup.sh          build dependencies only
#   scripts/setup.sh --test   also the test tools (busted, luacheck, luarocks, valgrind, clang) and PyTorch, the oracle
#   scripts/setup.sh --docs   also LDoc (lua-ldoc), for `cmake --build build --target docs`
# Set ATTN_NO_TORCH=1 to skip installing python3-torch (the live-oracle specs
# then report themselves as skipped; fixture specs still run).
set -euo pipefail
cd "$(dirname "$0")/.."

want=(cmake pkg-config gcc make lua5.4 liblua5.4-dev libopenblas-dev libreadline-dev libcjson-dev zlib1g-dev wamerican)
# attn.plot draws with cairo; its labels use DejaVu Sans (fontconfig finds it).
want+=(libcairo2-dev fonts-dejavu-core)
# attn.dist runs over MPI: Open MPI from Debian (MPICH works too; without
# either attn.dist is a 1-rank world and the mpirun specs are skipped).
want+=(libopenmpi-dev openmpi-bin)
if [[ "${1:-}" == "--test" ]]; then
  want+=(lua-busted)
  # The lint suite's luacheck (scripts/lint.sh) and the rock check
  # (scripts/check_rock.sh, ctest pkg/luarocks_make).
  want+=(lua-check luarocks)
  # The lint suite's formatter and static analyser (the versions Debian 12
  # ships, 14 and 2.10, are the ones .clang-format and the cppcheck classes
  # were set against).
  want+=(clang-format cppcheck)
  # scripts/test.sh's further suites: valgrind (scripts/valgrind.sh), clang
  # with libFuzzer and its sanitizer runtimes (scripts/fuzz.sh); GCC's ASan,
  # UBSan and TSan runtimes (scripts/sanitize.sh, tsan.sh) come with gcc.
  want+=(valgrind clang libclang-rt-14-dev)
  # scripts/check_deb.sh (the deb suite): dpkg-buildpackage over debian/
  want+=(dpkg-dev debhelper build-essential) # dpkg-checkbuilddeps wants build-essential
  # spec/viz_html_spec.lua opens the HTML attention views in headless
  # Chromium (DOM self-test, screenshots against spec/fixtures/viz).
  want+=(chromium)
  [[ "${ATTN_NO_TORCH:-0}" == 1 ]] || want+=(python3-torch python3-numpy)
fi
if [[ "${1:-}" == "--docs" || "${1:-}" == "--test" ]]; then
  want+=(lua-ldoc) # --test too: spec/docs_spec.lua runs LDoc over config.ld
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
