#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one test with a forced kernel family (ctest's isa/<family>/... tests):
#   scripts/isa_test.sh ATTN_BIN FAMILY COMMAND [ARGS...]
# Exits 77 (ctest: skipped) with a message when this CPU lacks the family,
# or when it is the family the plain tests already run with.
bin=$1 fam=$2
shift 2
avail=$("$bin" -e 'io.write(require("attn").info().isa_available)') || exit 1
plain=$("$bin" -e 'io.write(require("attn").info().isa)' 2>/dev/null) || exit 1
case ",$avail," in
  *",$fam,"*) ;;
  *) echo "skipped: this CPU lacks the $fam kernel family (it supports $avail)"; exit 77 ;;
esac
if [ "$fam" = "$plain" ]; then
  echo "skipped: $fam is the family the plain tests run with (attn.info().isa)"
  exit 77
fi
ATTN_ISA=$fam exec "$@"
