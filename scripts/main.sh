#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: set up, build, and run the tour of attn (every seed script,
# pictures under out/tour/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/bin/attn scripts/tour.lua "$@"
