#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: set up, build, install (scripts/install.sh: where stock
# lua5.4, busted, pkg-config and CMake find attn), then run the tour of attn
# (every seed script, pictures under out/tour/) and say what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/install.sh -q
build/bin/attn scripts/tour.lua "$@"
echo
scripts/install.sh --summary
