#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sets attn's version: writes VERSION (which CMake, attn.h, attn.version and
# the .pc files read) and renames the rockspec to match, updating its
# version field and source tag (LuaRocks cannot read VERSION itself).
#   scripts/set_version.sh 0.2.0
# Then add a section for it to CHANGELOG.md.  spec/version_spec.lua checks
# that VERSION, attn.version, attn.pc and the rockspec agree.
set -euo pipefail
cd "$(dirname "$0")/.."
new=${1:?usage: scripts/set_version.sh MAJOR.MINOR.PATCH}
[[ $new =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "set_version: '$new' is not MAJOR.MINOR.PATCH" >&2; exit 1; }
old=$(<VERSION)
spec=attn-$old-1.rockspec
[[ -f $spec ]] || { echo "set_version: $spec not found (VERSION and the rockspec disagree)" >&2; exit 1; }
echo "$new" >VERSION
sed -i -e "s/^version = \"$old-1\"/version = \"$new-1\"/" -e "s/tag = \"v$old\"/tag = \"v$new\"/" "$spec"
git mv "$spec" "attn-$new-1.rockspec" 2>/dev/null || mv "$spec" "attn-$new-1.rockspec"
echo "set_version: $old -> $new (VERSION, attn-$new-1.rockspec); reconfigure the build to pick it up"
