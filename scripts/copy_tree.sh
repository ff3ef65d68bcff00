#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Copies the source tree into DEST as a fresh checkout would have it: the
# tracked files and new ones git does not ignore (no build folders, no
# obj-*/ a dpkg-buildpackage run left), or, outside git, everything but
# the build and output folders.  For the checks that build a copy
# (scripts/check_rock.sh, scripts/check_deb.sh).
#   scripts/copy_tree.sh DEST      (DEST must exist)
set -euo pipefail
dest=${1:?usage: scripts/copy_tree.sh DEST}
[[ -d $dest ]] || { echo "copy_tree: $dest is not a folder" >&2; exit 2; }
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f && $f != obj-*/* ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$dest"
else
  tar --exclude=./build --exclude='./build-*' --exclude=./build.luarocks --exclude=./out --exclude='./obj-*' -cf - . |
    tar -xf - -C "$dest"
fi
