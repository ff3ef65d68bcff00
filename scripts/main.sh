#!/usr/bin/env bash
# The main job: set up, build, and run the tour of attn.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/bin/attn scripts/demo.lua "$@"
