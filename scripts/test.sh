#!/usr/bin/env bash
# Every test: set up (with the test tools and the PyTorch oracle), build,
# then run the C tests and busted specs through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
cd build
exec ctest --output-on-failure -j"$(nproc)" "$@"
